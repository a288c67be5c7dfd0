"""``Store.log_stamps`` in a long-lived process: what it remembers between calls never hides a
change. Each answer is compared with a fresh store's (which remembers nothing), after appends,
a truncation followed by writes back to the same size, a replaced file and a removed one."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest

from continuity import frames as fr
from continuity.store import jsonl
from continuity.store.jsonl import Store


def _fresh(root: Path) -> list[tuple[str, int, bytes]]:
    return sorted((s.thread_id, s.size, s.tail) for s in Store(root).log_stamps(67))


def _kept(store: Store) -> list[tuple[str, int, bytes]]:
    return sorted((s.thread_id, s.size, s.tail) for s in store.log_stamps(67))


def _same_size_rewrite(path: Path, rng: random.Random) -> None:
    """Cut the log and write other bytes back to exactly its size: size and mtime may then be
    as they were (file times are coarse); only the tail differs."""
    size = path.stat().st_size
    keep = max(0, size - 20)
    with open(path, "r+b") as f:
        f.truncate(keep)
        f.seek(keep)
        f.write(bytes(rng.choice(b"abcdef") for _ in range(size - keep)))


def _step(store: Store, root: Path, rng: random.Random, n: int) -> None:
    threads = sorted(p for p in (root / "threads").glob("*.jsonl"))
    op = rng.choice(["append", "append", "rewrite", "replace", "remove", "new"])
    if op == "new" or not threads:
        store.thread(f"t{n}").append([fr.message("user", f"hello {n}")])
        return
    path = rng.choice(threads)
    tid = path.name[: -len(".jsonl")]
    if op == "append":
        thread = store.thread(tid)
        if thread.head() is not None:
            thread.append([fr.message("assistant", f"more {n}")])
    elif op == "rewrite":
        _same_size_rewrite(path, rng)
    elif op == "replace":  # another inode, the same bytes but the last
        data = bytearray(path.read_bytes())
        data[-2:] = b"zz"
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(bytes(data))
        os.replace(tmp, path)
    else:
        path.unlink()


@pytest.mark.parametrize("settled", [False, True], ids=["racy", "settled"])
def test_remembered_stamps_always_match_a_fresh_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settled: bool
) -> None:
    if settled:
        # Every change counts as settled once the clock has moved on: the remembered stamps
        # are then served for every log whose stat did not change.
        monkeypatch.setattr(jsonl, "_RACY_NS", 0)
    root = tmp_path / "store"
    store = Store(root, create=True, durable=False)
    for i in range(6):
        store.thread(f"seed{i}").append([fr.message("user", f"seed {i}")])
    rng = random.Random(28)
    for n in range(60):
        _step(store, root, rng, n)
        if settled:
            time.sleep(0.012)  # past the file clock's tick
        assert _kept(store) == _fresh(root), n


def test_a_rewrite_to_the_same_size_within_the_clock_tick_is_seen(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = Store(root, create=True, durable=False)
    store.thread("a").append([fr.message("user", "x" * 100)])
    before = _kept(store)
    _same_size_rewrite(root / "threads" / "a.jsonl", random.Random(1))
    after = _kept(store)
    assert after == _fresh(root) and after != before
    assert before[0][1] == after[0][1]  # the same size: only the tail tells
