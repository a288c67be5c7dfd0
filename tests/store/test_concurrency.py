"""Several processes append to one thread at once: the lock gives contiguous seqs, one valid
chain, every frame kept, and a reader never sees half a batch."""

from __future__ import annotations

import itertools
import json
import random
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from continuity import frames as fr
from continuity.store.jsonl import JsonlThread, Store
from tests.support.narrow import narrow

pytestmark = pytest.mark.slow

WORKERS = 4
FRAMES_PER_WORKER = 1000

# Each worker says "ready" and waits for "go" on stdin, so they all start at once; it appends its
# frames in single appends and small batches, and prints every returned range as JSON. A frame's
# message id names its worker, its batch and its place in the batch: "w<k>-b<batch>-<i>of<n>".
_WORKER = textwrap.dedent(
    """
    import json, random, sys
    from continuity import frames as fr
    from continuity.store.jsonl import JsonlThread, Store

    path, worker, count, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    rng = random.Random(seed)
    thread = Store(path, durable=False).thread("shared")
    print("ready", flush=True)
    sys.stdin.readline()
    done, batch_no, ranges = 0, 0, []
    while done < count:
        n = min(count - done, rng.choice((1, 1, 1, 2, 3, 5, 8)))
        batch = [
            fr.message(
                "user" if i % 2 else "assistant",
                "x" * rng.randrange(200),
                message_id=f"w{worker}-b{batch_no}-{i}of{n}",
            )
            for i in range(n)
        ]
        seqs = thread.append(batch[0] if n == 1 and rng.random() < 0.5 else batch)
        assert len(seqs) == n, (seqs, n)
        ranges.append([seqs.start, seqs.stop, batch_no])
        done += n
        batch_no += 1
    print(json.dumps(ranges))
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
    """Every batch a reader sees is complete, contiguous, and flagged ``more`` but its last."""
    batches: dict[tuple[str, str], list[fr.MessageAppended]] = {}
    for f in frames[1:]:
        assert isinstance(f, fr.MessageAppended)
        worker, batch, _ = f.message_id.split("-")
        batches.setdefault((worker, batch), []).append(f)
    for members in batches.values():
        n = int(members[0].message_id.rsplit("of", 1)[1])
        assert [m.message_id.split("-")[2] for m in members] == [f"{i}of{n}" for i in range(n)]
        assert [m.seq for m in members] == list(range(members[0].seq, members[0].seq + n))
        assert [m.more for m in members] == [True] * (n - 1) + [False]


def _run(procs: list[subprocess.Popen[bytes]], thread: JsonlThread) -> list[tuple[bytes, bytes]]:
    """Start the workers together, read the thread while they append, collect their output."""
    for p in procs:
        assert p.stdout is not None
        assert p.stdout.readline() == b"ready\n", p.communicate(timeout=10)[1].decode()
    for p in procs:
        assert p.stdin is not None
        p.stdin.write(b"go\n")
        p.stdin.flush()
    # Read while they write: every snapshot must be a chain of whole batches.
    snapshots = 0
    deadline = time.monotonic() + 120
    while any(p.poll() is None for p in procs):
        assert time.monotonic() < deadline, "workers did not finish"
        frames = list(thread.read())
        if frames:
            check_whole_batches(frames)
            assert frames[-1].more is False
            snapshots += 1
    print(f"{snapshots} consistent snapshots read while appending")
    outputs = [p.communicate(timeout=10) for p in procs]
    for p, (_out, err) in zip(procs, outputs, strict=True):
        assert p.returncode == 0, err.decode()
    return outputs


def test_four_processes_append_to_one_thread(tmp_path: Path) -> None:
    seed = random.randrange(2**32)
    print(f"random seed: {seed}")
    path = tmp_path / "store"
    store = Store(path, create=True, durable=False)
    thread = store.thread("shared")
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                _WORKER,
                str(path),
                str(k),
                str(FRAMES_PER_WORKER),
                str(seed + k),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for k in range(WORKERS)
    ]
    try:
        outputs = _run(procs, thread)
    finally:
        for p in procs:  # only when the test failed: never leave a worker behind
            if p.poll() is None:
                p.kill()
                p.wait()

    lines = [line for _seq, line in thread.read_lines()]
    assert len(lines) == 1 + WORKERS * FRAMES_PER_WORKER
    verify_chain(lines)
    frames = list(thread.read())
    assert [f.seq for f in frames] == list(range(len(lines)))
    assert isinstance(frames[0], fr.ThreadCreated)
    check_whole_batches(frames)
    head = thread.head()
    assert head is not None and head.seq == WORKERS * FRAMES_PER_WORKER

    # Every process's frames are there, at the seqs its appends returned, in its own order.
    by_seq = {f.seq: f for f in frames}
    claimed: set[int] = set()
    for k, (out, _err) in enumerate(outputs):
        ranges = json.loads(out)
        own = [
            f
            for f in frames[1:]
            if isinstance(f, fr.MessageAppended) and f.message_id.startswith(f"w{k}-")
        ]
        assert len(own) == FRAMES_PER_WORKER
        assert [f.seq for f in own] == sorted(f.seq for f in own)
        for start, stop, batch_no in ranges:
            seqs = set(range(start, stop))
            assert not seqs & claimed, "two appends were given the same seq"
            claimed |= seqs
            for i, seq in enumerate(range(start, stop)):
                frame = by_seq[seq]
                assert isinstance(frame, fr.MessageAppended)
                assert frame.message_id == f"w{k}-b{batch_no}-{i}of{stop - start}"
    assert claimed == set(range(1, 1 + WORKERS * FRAMES_PER_WORKER))
    assert (
        len({f.message_id for f in frames[1:] if isinstance(f, fr.MessageAppended)})
        == len(frames) - 1
    )
    switches = sum(
        1
        for a, b in itertools.pairwise(frames[1:])
        if narrow(fr.MessageAppended, a).message_id[:3]
        != narrow(fr.MessageAppended, b).message_id[:3]
    )
    print(f"{switches} times the writer changed between consecutive frames")


_CREATE = """
import sys
from continuity.store.jsonl import Store
Store(sys.argv[1], create=True).thread(sys.argv[2]).append(
    [__import__("continuity").frames.MessageAppended(role="user", content=[])]
)
"""


@pytest.mark.slow
def test_processes_that_create_one_store_at_once_all_succeed(tmp_path: Path) -> None:
    """Two hooks of a first session start at once: each may find the folder the other is making
    (its subfolders, no store.json yet). Neither may call it 'not a continuity store'."""
    for attempt in range(6):
        root = tmp_path / f"s{attempt}"
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _CREATE, str(root), f"t{i}"], stderr=subprocess.PIPE
            )
            for i in range(4)
        ]
        errors = [p.communicate(timeout=120)[1].decode() for p in procs]
        assert [p.returncode for p in procs] == [0, 0, 0, 0], errors
        assert Store(root).threads() == ["t0", "t1", "t2", "t3"]


def test_a_folder_with_the_layout_and_something_else_is_still_refused(tmp_path: Path) -> None:
    from continuity.errors import StoreNotFound

    root = tmp_path / "s"
    (root / "threads").mkdir(parents=True)
    (root / "notes.txt").write_text("mine")
    with pytest.raises(StoreNotFound, match="not a continuity store"):
        Store(root, create=True)


def test_a_store_finished_between_the_two_looks_is_still_being_made(tmp_path: Path) -> None:
    """One process finds no store.json, another renames it in, then the first lists the folder:
    the listing holds the layout and store.json, which is a store, not a stranger's folder
    (the race CI hit once in 6 × 4 creations)."""
    from continuity.store.jsonl import _being_made

    root = tmp_path / "s"
    Store(root, create=True)
    assert _being_made(root)
    (root / "notes.txt").write_text("mine")
    assert not _being_made(root)
