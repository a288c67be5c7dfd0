"""The frame caches (continuity.caches.thread_index): watermarks, catch-up, rebuild, lookups,
problems."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from continuity import frames as fr
from continuity._fs import remove_temps
from continuity.caches.thread_index import MESSAGE_RECORD, CheckpointEntry, ThreadIndex, rebuild_all
from continuity.errors import CorruptFrame
from continuity.store.base import seal_batch
from continuity.store.jsonl import Store
from tests.support.narrow import narrow

ROLE_CODES = {"user": 1, "assistant": 2, "system": 3}  # the documented record format
DATA_FILES = (
    "offsets.v1.u64",
    "messages.v1.bin",
    "checkpoints.v1.jsonl",
    "checkpoints.v1.sel",
    "checkpoints.v1.other",
)
SUMS = tuple(f"{name}.b3" for name in (*DATA_FILES, "marks.v1.jsonl"))
CACHE_FILES = (*DATA_FILES, *SUMS, "manifest.v1.json")
AID = "ab" * 32


def _batch(n: int, start: int) -> list[fr.Frame]:
    """``n`` frames of mixed types; ``start`` is the seq the first of them will get."""
    out: list[fr.Frame] = []
    for i in range(n):
        seq = start + i
        kind = seq % 5
        if kind == 0:
            out.append(
                fr.message(
                    "assistant",
                    content=[fr.ToolUseBlock(id=f"tu{seq}", name="bash", input={"cmd": "ls"})],
                    message_id=f"m{seq}",
                )
            )
        elif kind == 1:
            out.append(
                fr.message(
                    "user",
                    content=[fr.ToolResultBlock(tool_use_id=f"tu{seq - 1}", content="out " * seq)],
                    message_id=f"m{seq}",
                )
            )
        elif kind == 2:
            out.append(
                fr.ObservationRecorded(tool_use_id=f"tu{seq - 2}", text="saw", source_seq=seq - 1)
            )
        elif kind == 3 and seq > 2:
            # to_seq is not monotonic (a later checkpoint may cover less), and a few are of
            # another kind: both shape the sorted selection file
            out.append(
                fr.CompactionCheckpointCreated(
                    checkpoint_id=f"cp{seq}",
                    cut_rule_id="every_n",
                    summary_kind="other_v1" if seq % 15 == 13 else "cumulative_v1",
                    summary_artifact_id=AID,
                    from_seq=1,
                    to_seq=seq // 3 if seq % 4 == 0 else seq - 1,
                )
            )
        else:
            role: fr.Role = ("user", "assistant", "system")[seq % 3]
            out.append(fr.message(role, f"text {seq} héllo ✓", message_id=f"m{seq}"))
    return out


def _append(store: Store, tid: str, n: int) -> range:
    thread = store.thread(tid)
    head = thread.head()
    return thread.append(_batch(n, 1 if head is None else head.next_seq))


def _files(store: Store, tid: str) -> dict[str, bytes]:
    folder = store.cache_dir / "threads" / tid
    return {name: (folder / name).read_bytes() for name in CACHE_FILES}


def _rebuilt_files(store: Store, tid: str) -> dict[str, bytes]:
    """The cache files a rebuild from nothing writes (the caches are put back afterwards)."""
    folder = store.cache_dir / "threads" / tid
    saved = store.root / "saved-cache"
    shutil.rmtree(saved, ignore_errors=True)
    if folder.exists():
        shutil.copytree(folder, saved)
        shutil.rmtree(folder)
    assert ThreadIndex(store.thread(tid)).rebuild().mode == "rebuilt"
    fresh = _files(store, tid)
    shutil.rmtree(folder)
    if saved.exists():
        shutil.copytree(saved, folder)
        shutil.rmtree(saved)
    return fresh


def _log_lines(store: Store, tid: str) -> list[bytes]:
    return [line for _, line in store.thread(tid).read_lines()]


def _expected_offsets(lines: list[bytes]) -> list[int]:
    offsets, pos = [], 0
    for line in lines:
        offsets.append(pos)
        pos += len(line) + 1
    return offsets


def _assert_lookups(store: Store, tid: str) -> None:
    """Every lookup of the (refreshed) index agrees with a direct reading of the log."""
    index = ThreadIndex(store.thread(tid))
    lines = _log_lines(store, tid)
    frames = [fr.decode_frame(line) for line in lines]
    messages = [f for f in frames if isinstance(f, fr.MessageAppended)]
    assert index.frame_count() == len(frames)
    assert index.message_count() == len(messages)
    assert index.checkpoint_count() == len(index.checkpoints())
    for seq, want in enumerate(_expected_offsets(lines)):
        assert index.offset(seq) == want
        assert store.thread(tid).offset_of(seq) == want
    assert index.offset(len(lines)) is None
    assert index.offset(-1) is None
    recs = index.messages(0, len(messages) + 5)
    assert [r.seq for r in recs] == [m.seq for m in messages]
    assert [r.tokens for r in recs] == [m.tokens for m in messages]
    assert [r.role for r in recs] == [ROLE_CODES[m.role] for m in messages]
    assert index.checkpoints() == [
        CheckpointEntry(
            f.seq, f.to_seq, f.checkpoint_id, f.cut_rule_id, f.summary_kind, f.summary_artifact_id
        )
        for f in frames
        if isinstance(f, fr.CompactionCheckpointCreated)
    ]
    entries = index.checkpoints()
    assert index.other_checkpoints() == [e for e in entries if e.summary_kind != "cumulative_v1"]
    selection = index.selection()
    cumulative = [e for e in entries if e.summary_kind == "cumulative_v1"]
    assert len(selection) == len(cumulative)
    for anchor in {0, len(frames) // 2, len(frames)}:
        for max_to_seq in range(-1, len(frames) + 1):
            eligible = [e for e in cumulative if e.to_seq <= max_to_seq and e.seq <= anchor]
            best = max(eligible, key=lambda e: (e.to_seq, e.seq), default=None)
            assert selection.latest(max_to_seq, anchor) == best
    for k in (0, 1, 3, len(messages), len(messages) + 2):
        assert index.last_messages(k) == (messages[-k:] if k else [])
    if frames:
        mid = len(frames) // 2
        assert list(index.read(mid, mid + 2)) == frames[mid : mid + 3]
    assert index.problems() == []


# --- catch-up and rebuild -------------------------------------------------------------------


def test_catch_up_gives_the_same_files_as_a_rebuild(tmp_store: Store) -> None:
    index = ThreadIndex(tmp_store.thread("t"))
    _append(tmp_store, "t", 7)
    first = index.refresh()
    assert (first.mode, first.frames_applied) == ("rebuilt", 8)
    for n in (1, 5, 12, 3):
        _append(tmp_store, "t", n)
        result = index.refresh()
        assert (result.mode, result.frames_applied) == ("caught_up", n)
        assert index.refresh().mode == "current"
        _assert_lookups(tmp_store, "t")
        assert _files(tmp_store, "t") == _rebuilt_files(tmp_store, "t")


def test_rm_rf_cache_then_rebuild_is_byte_identical(tmp_store: Store) -> None:
    for tid, n in (("a", 9), ("b", 31), ("c", 1)):
        for _ in range(3):
            _append(tmp_store, tid, n)
            ThreadIndex(tmp_store.thread(tid)).refresh()
    before = {tid: _files(tmp_store, tid) for tid in ("a", "b", "c")}
    shutil.rmtree(tmp_store.cache_dir)
    results = rebuild_all(tmp_store)
    assert {tid: r.mode for tid, r in results.items()} == dict.fromkeys("abc", "rebuilt")
    assert {tid: _files(tmp_store, tid) for tid in ("a", "b", "c")} == before
    # refresh on a deleted cache folder rebuilds to the same bytes too
    shutil.rmtree(tmp_store.cache_dir)
    for tid in ("a", "b", "c"):
        assert ThreadIndex(tmp_store.thread(tid)).refresh().mode == "rebuilt"
        assert _files(tmp_store, tid) == before[tid]
        _assert_lookups(tmp_store, tid)


def test_rebuild_reports_progress_up_to_the_committed_end(tmp_store: Store) -> None:
    _append(tmp_store, "t", 20)
    seen: list[tuple[int, int]] = []
    ThreadIndex(tmp_store.thread("t")).rebuild(lambda done, total: seen.append((done, total)))
    size = tmp_store.thread("t").committed_size()
    assert seen and seen[-1] == (size, size)
    calls: list[tuple[str, int, int]] = []
    rebuild_all(tmp_store, progress=lambda tid, done, total: calls.append((tid, done, total)))
    assert calls[-1] == ("t", size, size)


# --- watermark mismatches -------------------------------------------------------------------


def _twin_logs(tmp_path: Path, clock: Callable[[], int], n: int) -> tuple[Path, Path]:
    """Two logs of thread ``t`` with the same length and shape but different bytes."""
    paths = []
    for letter in "xy":
        store = Store(tmp_path / f"twin-{letter}", create=True, durable=False, clock=clock)
        for i in range(n):  # one batch each, so that any prefix of whole lines is committed
            store.thread("t").append(fr.message("user", f"{letter}{i}", message_id=f"m{i}"))
        paths.append(store.thread("t").path)
    assert paths[0].stat().st_size == paths[1].stat().st_size
    assert paths[0].read_bytes() != paths[1].read_bytes()
    return paths[0], paths[1]


@pytest.mark.parametrize("replacement", ["same_length", "longer"])
def test_a_replaced_log_triggers_a_rebuild(
    tmp_store: Store, tmp_path: Path, clock: Callable[[], int], replacement: str
) -> None:
    x, y = _twin_logs(tmp_path, clock, 10)
    log = tmp_store.thread("t").path
    shutil.copyfile(x, log)
    index = ThreadIndex(tmp_store.thread("t"))
    index.refresh()
    other = Store(y.parent.parent, durable=False, clock=clock)
    if replacement == "longer":
        other.thread("t").append(_batch(4, 11))
    data = y.read_bytes()
    if replacement == "shorter":
        data = b"".join(line + b"\n" for line in data.split(b"\n")[:-1][:6])
    log.write_bytes(data)
    result = index.refresh()
    assert result.mode == "rebuilt"
    assert result.frames_applied == len(data.split(b"\n")) - 1
    assert _files(tmp_store, "t") == _rebuilt_files(tmp_store, "t")
    _assert_lookups(tmp_store, "t")


@pytest.mark.parametrize("cut", ["whole_lines", "mid_line"])
def test_a_log_shorter_than_its_caches_is_an_error_until_rebuilt(
    tmp_store: Store, clock: Callable[[], int], cut: str
) -> None:
    """Frames cut from a log's end are not a crash's torn tail (a tail that was never committed
    was never indexed): readers refuse the thread, verify names it, rebuild-index accepts it."""
    for _ in range(10):  # single-frame batches: every whole line is a committed frame
        _append(tmp_store, "t", 1)
    thread = tmp_store.thread("t")
    index = ThreadIndex(thread)
    index.refresh()
    lines = thread.path.read_bytes().split(b"\n")[:-1]
    keep = b"".join(line + b"\n" for line in lines[:6])
    thread.path.write_bytes(keep + (lines[6][:20] if cut == "mid_line" else b""))
    with pytest.raises(
        CorruptFrame, match=rf"seq 6, byte offset {len(keep)}: .*indexed it up to seq 10"
    ):
        index.refresh()
    with pytest.raises(CorruptFrame, match="indexed it up to seq 10"):
        index.check_length()
    (problem,) = index.problems()
    assert problem.startswith(f"seq 6, byte offset {len(keep)}: the log ends here")
    assert index.rebuild().frames_applied == 6
    index.refresh()
    index.check_length()
    assert index.problems() == []
    assert _files(tmp_store, "t") == _rebuilt_files(tmp_store, "t")


def _refreshed(store: Store, tid: str = "t", n: int = 23) -> ThreadIndex:
    _append(store, tid, n)
    index = ThreadIndex(store.thread(tid))
    index.refresh()
    return index


@pytest.mark.parametrize("name", DATA_FILES)
@pytest.mark.parametrize("damage", ["truncated", "garbage", "missing", "emptied"])
def test_damaged_cache_files_trigger_a_rebuild(tmp_store: Store, name: str, damage: str) -> None:
    index = _refreshed(tmp_store)
    good = _files(tmp_store, "t")
    path = index.dir / name
    size = path.stat().st_size
    if damage == "truncated":
        path.write_bytes(path.read_bytes()[: size // 2])
    elif damage == "garbage":
        path.write_bytes(bytes((i * 37 + 11) % 251 for i in range(size)))
    elif damage == "missing":
        path.unlink()
    else:
        path.write_bytes(b"")
    assert index.problems() != []
    assert index.refresh().mode == "rebuilt"
    assert _files(tmp_store, "t") == good
    assert index.problems() == []


@pytest.mark.parametrize(
    "manifest",
    [b"", b"not json", b'{"version":1}', b"\x00" * 40, b'{"version":1,"thread_id":"t"'],
)
def test_a_manifest_that_does_not_decode_triggers_a_rebuild(
    tmp_store: Store, manifest: bytes
) -> None:
    index = _refreshed(tmp_store)
    good = _files(tmp_store, "t")
    (index.dir / "manifest.v1.json").write_bytes(manifest)
    assert index.manifest() is None
    assert index.problems() == ["manifest.v1.json does not decode or does not match its checksum"]
    assert index.frame_count() == 0  # no trusted manifest: nothing is served from the caches
    assert index.refresh().mode == "rebuilt"
    assert _files(tmp_store, "t") == good


def test_a_manifest_of_another_thread_triggers_a_rebuild(tmp_store: Store) -> None:
    a = _refreshed(tmp_store, "a", 10)
    b = _refreshed(tmp_store, "b", 10)
    good = _files(tmp_store, "b")
    for name in CACHE_FILES:
        shutil.copyfile(a.dir / name, b.dir / name)
    assert b.problems() != []
    assert b.refresh().mode == "rebuilt"
    assert _files(tmp_store, "b") == good


def test_a_missing_manifest_with_data_files_left_behind_rebuilds(tmp_store: Store) -> None:
    """A crash in the middle of a rebuild leaves data files and no manifest."""
    index = _refreshed(tmp_store)
    good = _files(tmp_store, "t")
    (index.dir / "manifest.v1.json").unlink()
    (index.dir / "offsets.v1.u64").write_bytes(b"junk")
    assert index.problems() == []  # nothing is trusted, so nothing is wrong
    assert index.refresh().mode == "rebuilt"
    assert _files(tmp_store, "t") == good


def test_wrong_counts_in_the_manifest_are_a_problem(tmp_store: Store) -> None:
    index = _refreshed(tmp_store)
    path = index.dir / "manifest.v1.json"
    raw = path.read_bytes()
    count = index.message_count()
    needle = f'"entries":{count},'.encode()
    assert needle in raw
    path.write_bytes(raw.replace(needle, f'"entries":{count + 1},'.encode(), 1))
    assert index.problems() != []


# --- a crashed cache writer -----------------------------------------------------------------


def test_bytes_past_the_watermark_are_cut_off_on_catch_up(tmp_store: Store) -> None:
    index = _refreshed(tmp_store)
    for name in DATA_FILES:
        with open(index.dir / name, "ab") as f:
            f.write(b"\x07junk from a writer that crashed before its manifest\n" * 3)
    # The junk is invisible: lookups and problems() read only up to the watermark.
    assert index.refresh().mode == "current"
    _assert_lookups(tmp_store, "t")
    _append(tmp_store, "t", 6)
    assert index.refresh().mode == "caught_up"
    assert _files(tmp_store, "t") == _rebuilt_files(tmp_store, "t")
    _assert_lookups(tmp_store, "t")


def test_problems_reports_cache_bytes_that_differ_from_the_log(tmp_store: Store) -> None:
    index = _refreshed(tmp_store, n=40)
    assert index.problems() == []
    good = _files(tmp_store, "t")
    cases = {
        "offsets.v1.u64": 8 * 5 + 1,  # the 6th frame's offset, not the watermark's
        "messages.v1.bin": 16 * 2,  # the 3rd message's seq
        "checkpoints.v1.jsonl": 3,  # inside the first entry
    }
    for name, at in cases.items():
        path = index.dir / name
        data = bytearray(good[name])
        data[at] = data[at] + 1 if data[at] < 0x7E else data[at] - 1
        path.write_bytes(bytes(data))
        assert index.problems() == [f"{name} does not match its checksum (its last block or sums)"]
        path.write_bytes(good[name])
        assert index.problems() == []


def test_a_wrong_offset_in_the_index_does_not_change_what_read_returns(tmp_store: Store) -> None:
    index = _refreshed(tmp_store, n=30)
    frames = list(tmp_store.thread("t").read())
    path = index.dir / "offsets.v1.u64"
    data = bytearray(path.read_bytes())
    data[8 * 10 : 8 * 11] = (12345).to_bytes(8, "little")
    path.write_bytes(bytes(data))
    assert list(index.read(10, 12)) == frames[10:13]


def test_problems_of_caches_without_a_log(tmp_store: Store) -> None:
    index = _refreshed(tmp_store)
    tmp_store.thread("t").path.unlink()
    assert index.problems() == ["caches exist for a thread with no log"]
    assert index.refresh().mode == "current"
    assert index.problems() == []
    assert index.frame_count() == 0


# --- torn tails -----------------------------------------------------------------------------


def _torn_tail(store: Store, tid: str, kind: str) -> bytes:
    """Write what a crashed append leaves behind and return those bytes."""
    thread = store.thread(tid)
    head = thread.head()
    if kind == "half_batch":
        lines, _ = seal_batch(tid, _batch(4, 1 if head is None else head.next_seq), head, now_ms=1)
        data = b"".join(lines[:2]) + lines[2][: len(lines[2]) // 2]
    elif kind == "whole_lines_of_a_batch":
        lines, _ = seal_batch(tid, _batch(4, 1 if head is None else head.next_seq), head, now_ms=1)
        data = b"".join(lines[:3])  # each marked `more`: the batch's last frame is missing
    else:
        data = b'{"type":"message_appe\x00\xff garbage'
    with open(thread.path, "ab") as f:
        f.write(data)
    return data


@pytest.mark.parametrize("kind", ["half_batch", "whole_lines_of_a_batch", "garbage"])
def test_a_torn_tail_is_not_indexed(tmp_store: Store, kind: str) -> None:
    index = _refreshed(tmp_store, n=10)
    good = _files(tmp_store, "t")
    committed = tmp_store.thread("t").committed_size()
    torn = _torn_tail(tmp_store, "t", kind)
    assert index.refresh().mode == "current"
    assert _files(tmp_store, "t") == good
    assert index.problems() == []
    shutil.rmtree(tmp_store.cache_dir)
    assert index.refresh().mode == "rebuilt"
    assert _files(tmp_store, "t") == good
    manifest = index.manifest()
    assert manifest is not None
    assert manifest.log_end == committed
    # The next append quarantines the tail; the caches catch up past it.
    _append(tmp_store, "t", 3)
    assert [(r.offset, r.length) for r in tmp_store.recoveries] == [(committed, len(torn))]
    assert index.refresh().mode == "caught_up"
    assert _files(tmp_store, "t") == _rebuilt_files(tmp_store, "t")
    _assert_lookups(tmp_store, "t")


def test_a_torn_first_batch_leaves_an_empty_index(tmp_store: Store) -> None:
    _torn_tail(tmp_store, "new", "half_batch")
    index = ThreadIndex(tmp_store.thread("new"))
    index.refresh()
    assert (index.frame_count(), index.message_count(), index.checkpoints()) == (0, 0, [])
    assert index.offset(0) is None
    assert index.problems() == []
    _append(tmp_store, "new", 5)
    assert index.refresh().mode == "caught_up"
    assert _files(tmp_store, "new") == _rebuilt_files(tmp_store, "new")
    _assert_lookups(tmp_store, "new")


# --- threads that are empty, new or gone ----------------------------------------------------


def test_an_index_of_a_thread_that_does_not_exist(tmp_store: Store) -> None:
    index = ThreadIndex(tmp_store.thread("nobody"))
    assert index.refresh().mode == "current"
    assert (index.frame_count(), index.message_count()) == (0, 0)
    assert index.offset(0) is None
    assert index.last_messages(5) == []
    assert index.checkpoints() == []
    assert list(index.read(0)) == []
    assert len(index.messages(0, 10)) == 0
    assert index.problems() == []


def test_an_empty_log_file_then_appends(tmp_store: Store) -> None:
    """A failed first append (here a seq conflict) can leave an empty log file behind."""
    tmp_store.thread("t").path.touch()
    index = ThreadIndex(tmp_store.thread("t"))
    assert index.refresh().frames_applied == 0
    assert index.refresh().mode == "current"
    assert index.frame_count() == 0
    assert index.problems() == []
    _append(tmp_store, "t", 4)
    assert index.refresh().mode == "caught_up"
    assert _files(tmp_store, "t") == _rebuilt_files(tmp_store, "t")
    _assert_lookups(tmp_store, "t")


def test_a_thread_with_only_thread_created(tmp_store: Store) -> None:
    tmp_store.thread("t").append(fr.ThreadCreated(title="hello"))
    index = ThreadIndex(tmp_store.thread("t"))
    assert index.refresh().frames_applied == 1
    assert (index.frame_count(), index.message_count(), index.offset(0)) == (1, 0, 0)
    assert index.last_messages(3) == []
    _assert_lookups(tmp_store, "t")


def test_rebuild_all_removes_caches_of_vanished_threads(tmp_store: Store) -> None:
    for tid in ("a", "b", "c"):
        _refreshed(tmp_store, tid, 5)
    tmp_store.thread("b").path.unlink()
    rebuild_all(tmp_store, [tmp_store.thread("a")])  # an explicit list removes nothing
    assert (tmp_store.cache_dir / "threads" / "b").is_dir()
    results = rebuild_all(tmp_store)
    assert sorted(results) == ["a", "c"]
    assert sorted(p.name for p in (tmp_store.cache_dir / "threads").iterdir()) == ["a", "c"]
    for tid in ("a", "c"):
        _assert_lookups(tmp_store, tid)


# --- sizes ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_offsets_around_lines_longer_than_the_read_chunk(tmp_store: Store) -> None:
    """Single lines over 8 MiB (the indexer's chunk) at the start, middle and end of a run."""
    thread = tmp_store.thread("big")
    huge = "x" * ((8 << 20) + 1)
    thread.append(fr.message("user", huge, message_id="h1"))
    index = ThreadIndex(tmp_store.thread("big"))
    index.refresh()
    thread.append(_batch(30, 2))
    thread.append(
        [
            fr.message("assistant", "y" * ((16 << 20) + 3), message_id="h2"),
            *_batch(3, 33),
            fr.message("user", huge + "z", message_id="h3"),
        ]
    )
    assert index.refresh().mode == "caught_up"
    _assert_lookups(tmp_store, "big")
    last = index.last_messages(1)[0]
    assert last.message_id == "h3"
    assert len(narrow(fr.TextBlock, last.content[0]).text) == len(huge) + 1
    assert _files(tmp_store, "big") == _rebuilt_files(tmp_store, "big")


def test_token_counts_beyond_the_record_field_saturate(tmp_store: Store) -> None:
    tmp_store.thread("t").append(
        fr.MessageAppended(
            message_id="m", role="user", content=[fr.TextBlock(text="hi")], tokens=5 << 30
        )
    )
    index = ThreadIndex(tmp_store.thread("t"))
    index.refresh()
    assert index.messages(0, 1)[0].tokens == 2**32 - 1
    assert index.problems() == []


# --- several processes ----------------------------------------------------------------------

_WORKER = textwrap.dedent(
    """
    import os, sys, time
    from continuity import frames as fr
    from continuity.caches.thread_index import ThreadIndex
    from continuity.store.jsonl import Store

    root, me = sys.argv[1], int(sys.argv[2])
    store = Store(root, durable=False)
    index = ThreadIndex(store.thread("t"))
    go, done = os.path.join(root, "go"), os.path.join(root, "done")
    while not os.path.exists(go):  # start together, so that the work overlaps
        time.sleep(0.001)
    checks = 0
    i = 0
    while (i < 150) if me == 0 else not os.path.exists(done):
        if me == 0:
            checkpoint = fr.CompactionCheckpointCreated(  # a to_seq below the indexed ones
                checkpoint_id=f"c{i}", cut_rule_id="r", summary_kind="cumulative_v1",
                summary_artifact_id="ab" * 32, from_seq=1, to_seq=i,
            )
            store.thread("t").append(
                [fr.message("user", f"{i} {j}", message_id=f"{i}-{j}") for j in range(2)]
                + [checkpoint]
            )
        index.refresh()
        if i % 7 == me:
            index.rebuild()
        if i % 3 == me % 3:
            found = index.problems()  # while the others rebuild and catch up
            assert found == [], found
            checks += 1
        i += 1
    if me == 0:
        open(done, "w").close()
    print(checks)
    """
)


@pytest.mark.slow
def test_concurrent_refreshes_leave_sound_caches(tmp_store: Store) -> None:
    """One process appends while three refresh, rebuild and check the same thread's caches."""
    for _ in range(20):
        _append(tmp_store, "t", 100)
    before = tmp_store.thread("t").head()
    assert before is not None
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(tmp_store.root), str(me)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
        )
        for me in range(4)
    ]
    (tmp_store.root / "go").touch()
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()
        assert int(out) > 0  # every process checked problems() at least once
    index = ThreadIndex(tmp_store.thread("t"))
    assert index.problems() == []
    assert index.refresh().mode in ("current", "caught_up")
    assert index.frame_count() == before.next_seq + 150 * 3
    assert _files(tmp_store, "t") == _rebuilt_files(tmp_store, "t")
    _assert_lookups(tmp_store, "t")
    leftovers = [p.name for p in index.dir.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


def test_message_records_are_packed_as_documented(tmp_store: Store) -> None:
    tmp_store.thread("t").append(
        [fr.message("system", "s", message_id="a"), fr.message("assistant", "b", message_id="b")]
    )
    index = ThreadIndex(tmp_store.thread("t"))
    index.refresh()
    raw = (index.dir / "messages.v1.bin").read_bytes()
    assert len(raw) == 32
    seq, _tokens, role = MESSAGE_RECORD.unpack(raw[:16])
    assert (seq, role) == (1, 3)
    assert raw[13:16] == b"\x00\x00\x00"
    assert raw[16:24] == (2).to_bytes(8, "little")


class _Crash(Exception):
    pass


@contextmanager
def _no_raise() -> Iterator[None]:
    yield


@pytest.mark.parametrize("survivors", range(14))
@pytest.mark.parametrize("operation", ["rebuild", "catch_up"])
def test_a_cache_writer_that_dies_between_files_leaves_caches_that_recover(
    tmp_store: Store, monkeypatch: pytest.MonkeyPatch, operation: str, survivors: int
) -> None:
    """Let only the first ``survivors`` file replacements of a refresh happen, then die: the
    next refresh must still end with the same bytes as a rebuild from nothing."""
    from continuity.caches import thread_index as caches

    index = _refreshed(tmp_store, n=40)
    _append(tmp_store, "t", 30)  # to_seq goes back below the indexed maximum: a merge
    real = caches._write_cache
    calls = 0

    def dying(path: Path, data: bytes) -> None:
        nonlocal calls
        calls += 1
        if calls > survivors:
            raise _Crash(path.name)
        real(path, data)

    monkeypatch.setattr(caches, "_write_cache", dying)
    # a rebuild replaces 6 files, their 6 sums and the manifest; the catch-up here rewrites the
    # sorted checkpoint file whole (a merge), its sums, and the manifest
    with (
        pytest.raises(_Crash) if survivors < (13 if operation == "rebuild" else 3) else _no_raise()
    ):
        index.rebuild() if operation == "rebuild" else index.refresh()
    monkeypatch.setattr(caches, "_write_cache", real)
    index.refresh()
    assert index.problems() == []
    assert _files(tmp_store, "t") == _rebuilt_files(tmp_store, "t")
    _assert_lookups(tmp_store, "t")


def _brute_latest(
    entries: list[CheckpointEntry], max_to_seq: int, anchor: int
) -> CheckpointEntry | None:
    eligible = [
        e
        for e in entries
        if e.summary_kind == "cumulative_v1" and e.to_seq <= max_to_seq and e.seq <= anchor
    ]
    return max(eligible, key=lambda e: (e.to_seq, e.seq), default=None)


def test_a_selection_read_across_a_concurrent_merge_is_one_whole_version(
    tmp_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process merges the sorted checkpoint file between this reader's manifest read
    and its read of the file: the reader must not pair the old count with the new file."""
    from continuity.caches import thread_index as caches

    index = _refreshed(tmp_store, n=40)
    real_map = caches._map
    merged = False

    def racing_map(path: Path, size: int) -> object:
        nonlocal merged
        if not merged and path.name == "checkpoints.v1.sel":
            merged = True
            head = tmp_store.thread("t").head()
            assert head is not None
            low = fr.CompactionCheckpointCreated(
                checkpoint_id="low",
                cut_rule_id="r",
                summary_kind="cumulative_v1",
                summary_artifact_id=AID,
                from_seq=1,
                to_seq=1,  # sorts first: the file is rewritten, not appended to
            )
            tmp_store.thread("t").append(low)
            assert ThreadIndex(tmp_store.thread("t")).refresh().mode == "caught_up"
        return real_map(path, size)

    monkeypatch.setattr(caches, "_map", racing_map)
    selection = index.selection()
    monkeypatch.undo()
    assert merged
    entries = index.checkpoints()
    assert len(selection) == sum(e.summary_kind == "cumulative_v1" for e in entries)
    for max_to_seq in range(0, 45):
        assert selection.latest(max_to_seq, 10**6) == _brute_latest(entries, max_to_seq, 10**6)


@pytest.mark.slow
def test_readers_wait_for_a_rewrite_under_way(tmp_store: Store) -> None:
    """Between a writer removing the manifest and committing the new one, a reader waits for
    the lock rather than reading 'no checkpoints'."""
    index = _refreshed(tmp_store, n=40)
    want = (index.checkpoints(), index.other_checkpoints(), index.messages(0, 100))
    writer = ThreadIndex(tmp_store.thread("t"))
    manifest = writer.dir / "manifest.v1.json"
    removed = threading.Event()

    def rewrite() -> None:
        with writer._lock():
            manifest.rename(manifest.with_name("aside"))
            removed.set()
            time.sleep(0.3)
            manifest.with_name("aside").rename(manifest)

    t = threading.Thread(target=rewrite)
    t.start()
    removed.wait()
    try:
        got = (index.checkpoints(), index.other_checkpoints(), index.messages(0, 100))
        selection = index.selection()
        records = index.message_records()
    finally:
        t.join()
    assert got == want
    assert len(selection) == sum(e.summary_kind == "cumulative_v1" for e in want[0]) > 0
    assert len(records) == len(want[2]) > 0


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_rebuild_removes_what_a_killed_writer_left(tmp_store: Store) -> None:
    """A writer killed between its temporary file and the rename leaves ``.<name>.<pid>-….tmp``
    behind. The next fresh write of the caches, under the lock every writer of the folder
    holds, removes it whatever its pid says (a worker killed with its parent may not be reaped
    yet): a rebuild leaves only what it writes."""
    thread = tmp_store.thread("t")
    thread.append([fr.message("user", f"m{i}") for i in range(5)])
    index = ThreadIndex(thread)
    index.refresh()
    dead = index.dir / f".manifest.v1.json.{_dead_pid()}-0badc0de.tmp"
    unreaped = index.dir / f".offsets.v1.bin.{os.getpid()}-0badc0de.tmp"
    dead.write_bytes(b"")
    unreaped.write_bytes(b"")
    before = {p.name: p.read_bytes() for p in index.dir.iterdir() if not p.name.endswith(".tmp")}
    rebuild_all(tmp_store)
    assert not dead.exists() and not unreaped.exists()
    after = {p.name: p.read_bytes() for p in index.dir.iterdir()}
    assert after == before


def test_without_the_lock_only_a_dead_writers_temporary_file_goes(tmp_path: Path) -> None:
    dead = tmp_path / f".catalog.v1.json.{_dead_pid()}-0badc0de.tmp"
    live = tmp_path / f".catalog.v1.json.{os.getpid()}-0badc0de.tmp"
    other = tmp_path / ".catalog.v1.json.tmp"  # not a name atomic_write gives
    for p in (dead, live, other):
        p.write_bytes(b"")
    assert remove_temps(tmp_path, holding_lock=False) == 1
    assert not dead.exists() and live.exists() and other.exists()
    assert remove_temps(tmp_path, holding_lock=True) == 1
    assert not live.exists() and other.exists()
