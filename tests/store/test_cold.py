"""The cold tier (ADR 0057): a log's old prefix moves into compressed segments and its disk
blocks are given back, and nothing that reads the log can tell — not a reader that was open
while it moved, not a writer, not verify, not the caches rebuilt from it — while a kill at any
moment of a move loses nothing."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from continuity import frames as fr
from continuity.errors import CommandRefused, CorruptFrame, SchemaTooNew
from continuity.maintenance.tier import plan_tier, tier_threads
from continuity.maintenance.verify import verify_store
from continuity.store.cold import BLOCK, cold_dir, segments_of
from continuity.store.jsonl import JsonlThread, Store
from continuity.store.memory import MemoryStore
from tests.support.pg import PgStores
from tests.support.processes import reap

DAY = 86_400_000
_WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "lazy",
    "dog",
    "file",
    "error",
    "commit",
    "test",
    "run",
    "build",
]


def _fill(thread: JsonlThread, batches: int, *, seed: int = 1, ts_ms: int = 0) -> None:
    rng = random.Random(seed)
    for b in range(batches):
        size = rng.choice((1, 3, 20))
        thread.append(
            [
                fr.message(
                    "user" if i % 2 else "assistant",
                    " ".join(rng.choice(_WORDS) for _ in range(rng.randrange(5, 400))),
                    ts_ms=ts_ms,
                    message_id=f"b{b}-{i}",
                )
                for i in range(size)
            ]
        )


def _everything(thread: JsonlThread) -> tuple[list[tuple[int, bytes]], bytes]:
    """Every way a reader gets at the log: lines forwards, backwards, and its bytes."""
    lines = list(thread.read_lines())
    backwards = list(thread.read_lines_backwards())
    assert backwards == lines[::-1]
    log = thread.open_log()
    assert log is not None
    with log:
        data = log.pread(log.end, 0)
    return lines, data


def _line_start_near(thread: JsonlThread, fraction: float) -> int:
    log = thread.open_log()
    assert log is not None
    with log:
        return log.line_end(int(log.end * fraction))


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "s", create=True, durable=False)


def test_a_tiered_log_reads_the_same_everywhere_and_takes_less_disk(store: Store) -> None:
    thread = store.thread("t")
    _fill(thread, 120)
    before = _everything(thread)
    offsets = {seq: thread.offset_of(seq) for seq in (0, 7, 300, before[0][-1][0])}
    blocks = os.stat(thread.path).st_blocks
    upto = _line_start_near(thread, 0.8)

    moved = thread.move_to_cold(upto)

    assert (moved.start, moved.end) == (0, upto)
    assert moved.stored * 3 < upto  # the text compresses
    assert _everything(thread) == before
    assert {seq: thread.offset_of(seq) for seq in offsets} == offsets
    assert list(thread.read_lines(from_seq=200, to_seq=202)) == before[0][200:203]
    assert thread.cold_end() == upto
    if moved.not_freed is None:
        assert os.stat(thread.path).st_blocks < blocks * 0.4
    assert os.stat(thread.path).st_size == len(before[1])  # offsets keep their meaning
    with open(thread.path, "rb") as f:
        assert f.read(4096) == bytes(4096)  # the old bytes really are gone from the log file
    # Appends carry on, and the chain runs through the boundary.
    thread.append(fr.message("user", "after the move"))
    assert thread.head() is not None and thread.head().seq == before[0][-1][0] + 1  # type: ignore[union-attr]
    report = verify_store(store)
    assert report.ok, report.problems


def test_moves_follow_one_another_and_the_whole_log_may_go(store: Store) -> None:
    thread = store.thread("t")
    _fill(thread, 60)
    before = _everything(thread)
    first = _line_start_near(thread, 0.3)
    thread.move_to_cold(first)
    second = _line_start_near(thread, 0.6)
    thread.move_to_cold(second)
    log = thread.open_log()
    assert log is not None
    with log:
        end = log.end
    thread.move_to_cold(end)  # the head's own line too: appends read it from the segment
    assert [(s.start, s.end) for s in segments_of(cold_dir(thread.path)) or []] == [
        (0, first),
        (first, second),
        (second, end),
    ]
    assert _everything(thread) == before
    thread.append(fr.message("user", "still appending"))
    assert list(thread.read_lines())[:-1] == before[0]


def test_a_reader_open_while_the_log_moves_reads_the_same_bytes(store: Store) -> None:
    thread = store.thread("t")
    _fill(thread, 80)
    lines, data = _everything(thread)
    log = thread.open_log()
    assert log is not None
    with log:
        head = log.pread(1000, 0)  # open, reading, before the move
        store.thread("t").move_to_cold(_line_start_near(thread, 0.9))
        assert head + log.pread(log.end - 1000, 1000) == data  # the hole is seen and served
    reader = thread.read_lines()
    first = [next(reader) for _ in range(5)]
    thread_again = store.thread("t")
    assert first == lines[:5]
    assert thread_again.cold_end() > 0
    assert first + list(reader) == lines


def test_bad_boundaries_are_refused_and_nothing_moves(store: Store) -> None:
    thread = store.thread("t")
    _fill(thread, 10)
    upto = _line_start_near(thread, 0.5)
    with pytest.raises(ValueError, match="not the start of a line"):
        thread.move_to_cold(upto - 3)
    with pytest.raises(ValueError, match="committed bytes"):
        thread.move_to_cold(10**9)
    thread.move_to_cold(upto)
    with pytest.raises(ValueError, match="cold tier's end"):
        thread.move_to_cold(upto)
    assert [(s.start, s.end) for s in segments_of(cold_dir(thread.path)) or []] == [(0, upto)]


def test_the_marker_says_so_and_an_older_continuity_refuses(store: Store) -> None:
    marker = store.root / "store.json"
    assert b'"version":1' in marker.read_bytes()
    thread = store.thread("t")
    _fill(thread, 10)
    thread.move_to_cold(_line_start_near(thread, 0.5))
    assert b'"version":2' in marker.read_bytes()
    Store(store.root)  # this continuity reads it
    marker.write_bytes(b'{"format":"continuity-store","version":3}\n')
    with pytest.raises(SchemaTooNew):
        Store(store.root)


def test_a_damaged_or_missing_segment_is_named_never_read_as_the_log(store: Store) -> None:
    thread = store.thread("t")
    _fill(thread, 60)
    thread.move_to_cold(_line_start_near(thread, 0.7))
    (seg,) = segments_of(cold_dir(thread.path)) or []
    data = bytearray(Path(seg.path).read_bytes())
    data[100:110] = b"XXXXXXXXXX"
    Path(seg.path).write_bytes(bytes(data))
    with pytest.raises(CorruptFrame, match="cold"):
        list(thread.read_lines())
    report = verify_store(store)
    assert not report.ok
    Path(seg.path).unlink()
    with pytest.raises(CorruptFrame):
        list(thread.read_lines())


def test_delete_takes_the_segments_and_artifacts_in_a_cold_prefix_are_still_referenced(
    store: Store,
) -> None:
    thread = store.thread("t")
    aid = store.artifacts.put(b"x" * 100_000)
    thread.append(fr.RecordAppended(kind="tool.output", artifact_id=aid, size=100_000))
    _fill(thread, 40)
    thread.move_to_cold(_line_start_near(thread, 0.9))
    assert store.referenced([aid]) == {aid}  # so an artifact GC keeps it
    store.delete_thread("t")
    assert not cold_dir(thread.path).exists()
    assert store.referenced([aid]) == set()


def test_the_policy_moves_old_frames_and_keeps_the_newest(store: Store) -> None:
    now = 1_800_000_000_000
    thread = store.thread("t")
    _fill(thread, 40, ts_ms=now - 60 * DAY)
    old_head = thread.head()
    assert old_head is not None
    _fill(thread, 10, seed=2, ts_ms=now - DAY)
    plan = plan_tier(store, "t", older_than_ms=30 * DAY, now_ms=now, keep_frames=0)
    assert plan is not None
    assert (plan.first_seq, plan.last_seq) == (0, old_head.seq)
    kept = plan_tier(store, "t", older_than_ms=30 * DAY, now_ms=now, keep_frames=10**6)
    assert kept is None
    small = tier_threads(
        store, ["t"], older_than_ms=30 * DAY, now_ms=now, keep_frames=0, min_bytes=10**9
    )
    assert small[0].moved is None and thread.cold_end() == 0
    (done,) = tier_threads(
        store, ["t"], older_than_ms=30 * DAY, now_ms=now, keep_frames=0, min_bytes=0
    )
    assert done.moved is not None and thread.cold_end() == plan.end
    assert plan_tier(store, "t", older_than_ms=30 * DAY, now_ms=now, keep_frames=0) is None


def test_only_the_folder_store_has_a_cold_tier() -> None:
    mem = MemoryStore()
    mem.thread("t").append(fr.message("user", "hi"))
    with pytest.raises(CommandRefused, match="cold tier"):
        plan_tier(mem, "t", older_than_ms=0, now_ms=10**13)


def test_caches_rebuilt_from_a_tiered_log_are_byte_identical(store: Store, tmp_path: Path) -> None:
    from continuity.maintenance.bulk import rebuild_store

    thread = store.thread("t")
    _fill(thread, 80)
    rebuild_store(store)
    cache = store.root / "cache"
    before = {p.relative_to(cache): p.read_bytes() for p in cache.rglob("*") if p.is_file()}
    thread.move_to_cold(_line_start_near(thread, 0.9))
    shutil.rmtree(cache)
    cache.mkdir()
    rebuild_store(store)
    after = {p.relative_to(cache): p.read_bytes() for p in cache.rglob("*") if p.is_file()}
    skip = {k for k in before if k.parts[0] == "jobs"}
    assert {k: v for k, v in after.items() if k not in skip} == {
        k: v for k, v in before.items() if k not in skip
    }


_KILLED = textwrap.dedent(
    """
    import sys
    from continuity.store.jsonl import Store
    thread = Store(sys.argv[1], durable=True).thread("t")
    print("ready", flush=True)
    thread.move_to_cold(int(sys.argv[2]))
    print("done", flush=True)
    """
)


@pytest.mark.slow
def test_a_move_killed_at_any_moment_loses_nothing_and_the_next_one_finishes(
    store: Store,
) -> None:
    thread = store.thread("t")
    _fill(thread, 400, seed=3)
    before = _everything(thread)
    assert len(before[1]) > 8 * BLOCK  # several blocks: a kill can land mid-segment
    upto = _line_start_near(thread, 0.95)
    rng = random.Random(7)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    finished = 0
    for _ in range(6):
        child = subprocess.Popen(
            [sys.executable, "-c", _KILLED, str(store.root), str(upto)],
            stdout=subprocess.PIPE,
            env=env,
        )
        assert child.stdout is not None
        assert child.stdout.readline() == b"ready\n"
        try:
            child.wait(timeout=rng.uniform(0.0, 0.25))
        except subprocess.TimeoutExpired:
            child.send_signal(signal.SIGKILL)
        reap(child)
        if child.returncode == 0:
            finished += 1
        assert _everything(store.thread("t")) == before
        if store.thread("t").cold_end() == upto:
            break
    if store.thread("t").cold_end() < upto:
        store.thread("t").move_to_cold(upto)  # no leftover of a killed move is in the way
    folder = cold_dir(thread.path)
    assert not list(folder.glob(".*.tmp")) or store.thread("t").cold_end() == upto
    assert _everything(store.thread("t")) == before
    assert verify_store(store).ok


def test_a_tiered_store_migrates_byte_for_byte(store: Store, pg_stores: PgStores) -> None:
    from continuity.maintenance.migrate import migrate_store

    thread = store.thread("t")
    _fill(thread, 60)
    thread.move_to_cold(_line_start_near(thread, 0.8))
    lines = list(thread.read_lines())
    for dst in (MemoryStore(), pg_stores.open(store.root / "pg")):
        migrate_store(store, dst)
        assert list(dst.thread("t").read_lines()) == lines
