"""Crashes: a writer killed at any moment loses nothing that was acknowledged, and the next
append moves whatever it left half-written aside, so batches stay all-or-nothing."""

from __future__ import annotations

import base64
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from continuity import frames as fr
from continuity.store.base import Recovery, seal_batch
from continuity.store.jsonl import JsonlThread, Store
from tests.support.processes import reap

pytestmark = pytest.mark.slow

THREAD = "crash"

# The child appends durable batches forever; after each append returns it records the returned
# range in a side file and fsyncs it, so the side file lists only acknowledged appends. A frame's
# message id is "r<round>-b<batch>-<i>of<n>". Some batches are big (up to 600 kB), so a kill can
# land in the middle of the write and leave a torn tail. It prints "ready" after its first append.
_CHILD = textwrap.dedent(
    """
    import json, os, random, sys
    from continuity import frames as fr
    from continuity.store.jsonl import Store

    path, side_path, rnd, seed = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    rng = random.Random(seed)
    thread = Store(path, durable=True).thread("crash")
    side = os.open(side_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    batch_no = 0
    while True:
        n = rng.choice((1, 2, 3, 5, 8, 30))
        size = rng.randrange(20_000) if rng.random() < 0.25 else rng.randrange(300)
        batch = [
            fr.message("user", "y" * size, message_id=f"r{rnd}-b{batch_no}-{i}of{n}")
            for i in range(n)
        ]
        seqs = thread.append(batch)
        os.write(side, (json.dumps([seqs.start, seqs.stop, batch_no]) + "\\n").encode())
        os.fsync(side)
        if batch_no == 0:
            print("ready", flush=True)
        batch_no += 1
    """
)


def verify_chain(lines: list[bytes]) -> None:
    prev = fr.GENESIS_DIGEST
    for seq, line in enumerate(lines):
        sealed = fr.unseal(line)
        assert sealed is not None, f"seq {seq} is not sealed"
        assert fr.chain(prev, sealed[0]) == sealed[1], f"chain breaks at seq {seq}"
        prev = sealed[1]


def check_whole_batches(frames: list[fr.Frame]) -> None:
    """Every batch in the log is complete and contiguous: no frame of a cut batch remains."""
    batches: dict[str, list[fr.MessageAppended]] = {}
    for f in frames:
        if isinstance(f, fr.MessageAppended) and f.message_id.startswith("r"):
            batches.setdefault(f.message_id.rsplit("-", 1)[0], []).append(f)
    for key, members in batches.items():
        n = int(members[0].message_id.rsplit("of", 1)[1])
        assert [m.message_id for m in members] == [f"{key}-{i}of{n}" for i in range(n)]
        assert [m.seq for m in members] == list(range(members[0].seq, members[0].seq + n))
        assert [m.more for m in members] == [True] * (n - 1) + [False]


def acknowledged(side_file: Path) -> list[tuple[int, int, int]]:
    """The ranges the child recorded; a last line cut by the kill was never acknowledged."""
    if not side_file.exists():
        return []
    found = []
    for line in side_file.read_bytes().split(b"\n"):
        try:
            start, stop, batch_no = json.loads(line)
        except ValueError:
            continue
        found.append((start, stop, batch_no))
    return found


def test_sigkill_at_random_moments_loses_nothing_acknowledged(tmp_path: Path) -> None:
    seed = random.randrange(2**32)
    print(f"random seed: {seed}")
    rng = random.Random(seed)
    path = tmp_path / "store"
    Store(path, create=True)
    torn = 0
    rounds = 0
    started = time.monotonic()
    acked: dict[int, list[tuple[int, int, int]]] = {}  # round -> its acknowledged appends
    while rounds < 3 or (rounds < 6 and time.monotonic() - started < 8):
        side = tmp_path / f"acked-{rounds}.jsonl"
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(path), str(side), str(rounds), str(seed + rounds)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            assert child.stdout is not None
            ready = child.stdout.readline()
            assert ready == b"ready\n", child.communicate(timeout=10)[1].decode()
            time.sleep(rng.uniform(0.0, 0.25))  # the random moment of the crash
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=10)
        finally:
            reap(child)
        assert child.returncode == -signal.SIGKILL

        reports: list[Recovery] = []
        store = Store(path, durable=False, on_recovery=reports.append)
        thread = store.thread(THREAD)
        raw = thread.path.read_bytes()
        committed = thread.committed_size()
        left_over = raw[committed:]

        # Before any recovery, readers see every acknowledged frame and no partial batch.
        acked[rounds] = acknowledged(side)
        assert acked[rounds], "the child acknowledged its first append before it was killed"
        check_log(thread, acked)

        # The next append moves the left-over bytes aside, exactly, and continues the chain.
        head = thread.head()
        assert head is not None
        got = thread.append(fr.message("system", f"after crash {rounds}", message_id=f"x{rounds}"))
        assert got == range(head.next_seq, head.next_seq + 1)
        if left_over:
            torn += 1
            assert len(reports) == 1
            rec = reports[0]
            assert (rec.thread_id, rec.offset, rec.length) == (THREAD, committed, len(left_over))
            record = json.loads(Path(rec.quarantine_file).read_bytes())
            assert base64.b64decode(record["data_b64"]) == left_over
        else:
            assert reports == []
        assert thread.path.read_bytes()[:committed] == raw[:committed]
        check_log(thread, acked)
        rounds += 1
    print(f"{rounds} crashes, {torn} of them left a torn or unfinished tail")
    assert len(Store(path).quarantined()) == torn


def check_log(thread: JsonlThread, acked: dict[int, list[tuple[int, int, int]]]) -> None:
    """One valid chain of whole batches holding every acknowledged append of every round."""
    lines = [line for _seq, line in thread.read_lines()]
    verify_chain(lines)
    frames = list(thread.read())
    assert [f.seq for f in frames] == list(range(len(frames)))
    check_whole_batches(frames)
    for rnd, ranges in acked.items():
        for start, stop, batch_no in ranges:
            for i, seq in enumerate(range(start, stop)):
                frame = frames[seq]
                assert isinstance(frame, fr.MessageAppended)
                assert frame.message_id == f"r{rnd}-b{batch_no}-{i}of{stop - start}"


# --- the same, deterministically: a torn write cut at many bytes --------------------------------


def test_a_batch_cut_at_any_byte_is_hidden_and_then_removed(tmp_path: Path) -> None:
    """Write a prefix of a sealed batch's bytes straight to the log, as a crash mid-``write``
    would, for prefixes of many lengths."""
    store_path = tmp_path / "store"
    store = Store(store_path, create=True, durable=False, clock=lambda: 1_000)
    thread = store.thread(THREAD)
    thread.append([fr.message("user", f"m{i}", message_id=f"base{i}") for i in range(3)])
    base = thread.path.read_bytes()
    base_head = thread.head()
    base_frames = list(thread.read())
    batch = [
        fr.message("user", "one", message_id="r0-b0-0of3"),
        fr.message("assistant", "two", message_id="r0-b0-1of3"),
        fr.message("user", "three", message_id="r0-b0-2of3"),
    ]
    lines, batch_head = seal_batch(THREAD, batch, base_head, now_ms=1_000)
    data = b"".join(lines)
    line_ends = {sum(len(line) for line in lines[: k + 1]) for k in range(len(lines))}
    # Every cut near a line boundary (where the cases differ) and a stride through the rest:
    # each recovery fsyncs its quarantine record, which is slow on a busy disk.
    cuts = {c for e in (0, *line_ends) for c in range(e - 3, e + 4) if 0 <= c <= len(data)}
    cuts |= set(range(0, len(data), 19))
    for cut in sorted(cuts):
        thread.path.write_bytes(base + data[:cut])
        reports: list[Recovery] = []
        reopened = Store(store_path, durable=False, on_recovery=reports.append)
        t = reopened.thread(THREAD)
        whole = cut == len(data)
        expect_head = batch_head if whole else base_head
        assert t.head() == expect_head, f"cut at {cut}"
        visible = list(t.read())
        assert visible == (
            base_frames + [fr.decode_frame(x[:-1]) for x in lines] if whole else base_frames
        )
        assert t.tail(2) == visible[-2:]
        got = t.append(fr.message("user", "next", message_id="next"))
        assert expect_head is not None and got == range(
            expect_head.next_seq, expect_head.next_seq + 1
        )
        if whole or cut == 0:
            assert reports == []
        else:
            assert len(reports) == 1, f"cut at {cut}"
            rec = reports[0]
            assert (rec.offset, rec.length) == (len(base), cut)
            assert ("unfinished batch" if cut in line_ends else "torn") in rec.reason
        frames = list(t.read())
        verify_chain([line for _seq, line in t.read_lines()])
        check_whole_batches(frames)
        ids = [f.message_id for f in frames if isinstance(f, fr.MessageAppended)]
        batch_ids = [f.message_id for f in batch] if whole else []
        assert ids == ["base0", "base1", "base2", *batch_ids, "next"], f"cut at {cut}"
        for q in (store_path / "quarantine").iterdir():
            q.unlink()


def test_a_torn_first_batch_restarts_the_thread_at_seq_0(tmp_path: Path) -> None:
    """A new thread whose very first batch was cut: the log restarts cleanly at seq 0."""
    store_path = tmp_path / "store"
    Store(store_path, create=True, durable=False)
    lines, _ = seal_batch(THREAD, [fr.message("user", "hi", message_id="a")], None, now_ms=5)
    log = store_path / "threads" / f"{THREAD}.jsonl"
    log.write_bytes(b"".join(lines)[: len(lines[0]) + 10])  # thread_created whole, message torn
    reports: list[Recovery] = []
    store = Store(store_path, durable=False, on_recovery=reports.append)
    assert store.threads() == []
    assert store.thread(THREAD).append(fr.message("user", "again", message_id="b")) == range(1, 2)
    assert len(reports) == 1 and reports[0].offset == 0
    frames = list(store.thread(THREAD).read())
    assert [type(f) for f in frames] == [fr.ThreadCreated, fr.MessageAppended]
    assert isinstance(frames[1], fr.MessageAppended) and frames[1].message_id == "b"
    assert os.path.getsize(log) == sum(
        len(line) + 1 for _s, line in store.thread(THREAD).read_lines()
    )
