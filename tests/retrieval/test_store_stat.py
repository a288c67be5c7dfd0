"""The store-wide index's stat file (ADR 0061): a warm search of a folder store vouched for by one
stat a log, no log opened, with the hits of the full check; and never an answer from a stale
index once a log changed (appended by another process, rewritten in place to the same size,
replaced, deleted, added, moved to the cold tier) or the store was copied elsewhere."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from continuity import frames as fr
from continuity.errors import CorruptFrame
from continuity.retrieval import store_index as ss
from continuity.retrieval.ranking import query_terms
from continuity.retrieval.search import _per_thread, search
from continuity.store.jsonl import Store

WORDS = ["deploy", "cache", "error", "retry", "cursor", "alembic", "watermark", "src/app.py"]
SETTLE_NS = 50_000_000
"""The racy-time window in these tests (the store's is 2 s): a log counts as settled 50 ms
after its last change, so a test waits 0.1 s instead of two seconds."""


@pytest.fixture(autouse=True)
def _short_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("continuity.store.jsonl._RACY_NS", SETTLE_NS)


def _settle() -> None:
    time.sleep(2 * SETTLE_NS / 1e9)


def _fill(root: Path, seed: int, threads: int = 12, messages: int = 20) -> Store:
    rng = random.Random(seed)
    store = Store(root, create=True, durable=False)
    for n in range(threads):
        frames: list[fr.Frame] = [fr.ThreadCreated(meta={"project": f"/p/{n % 3}"})]
        for i in range(rng.randint(1, messages)):
            words = rng.choices(WORDS, k=rng.randint(1, 6))
            frames.append(fr.message(("user", "assistant")[i % 2], " ".join(words)))
        store.thread(f"t{n:03d}").append(frames)
    return store


class _Counted:
    """Counts the fresh stores' calls of ``log_stamps`` (the full check opens every log)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        real = Store.log_stamps

        def counted(store: Store, tail: int) -> object:
            self.calls += 1
            return real(store, tail)

        monkeypatch.setattr(Store, "log_stamps", counted)


def _hits(root: Path, query: str, k: int = 20) -> list[object]:
    with Store(root) as store:  # a fresh process's store: no stamps read yet
        return list(search(store, query, k=k))


def _reference(root: Path, query: str, k: int = 20) -> list[object]:
    """Every thread's own index ranked together (no store-wide index, no stat file)."""
    with Store(root) as store:
        return list(_per_thread(store, query_terms(query), k, None, None, [], None)[:k])


def _vouched(root: Path) -> Store:
    """The store at ``root`` once its stat file vouches for every log (settled, then searched
    the full way: the first search catches the index up, the second finds it current)."""
    _hits(root, "cache")
    _settle()
    _hits(root, "cache")
    assert (root / "cache" / ss.FOLDER / ss.STAT_FILE).is_file()
    return Store(root)


@pytest.mark.parametrize("seed", range(4))
def test_a_vouched_search_opens_no_log_and_gives_the_full_checks_hits(
    tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "s"
    _fill(root, seed)
    _vouched(root)
    counted = _Counted(monkeypatch)
    for query in ["cache error", "deploy", "src/app.py retry", "nothing"]:
        got = _hits(root, query)
        assert counted.calls == 0, "the stat file vouched: no log's stamp read"
        assert got == _reference(root, query)
        (root / "cache" / ss.FOLDER / ss.STAT_FILE).rename(tmp_path / "aside")
        assert _hits(root, query) == got  # the full check: the same hits
        assert counted.calls == 1
        (tmp_path / "aside").rename(root / "cache" / ss.FOLDER / ss.STAT_FILE)
        counted.calls = 0


_APPEND = (
    "import sys; from continuity import frames as fr; from continuity.store.jsonl import Store;"
    "Store(sys.argv[1], durable=False).thread(sys.argv[2]).append("
    "[fr.message('user', sys.argv[3])])"
)


def test_an_append_by_another_process_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "s"
    _fill(root, 1)
    _vouched(root)
    counted = _Counted(monkeypatch)
    subprocess.run([sys.executable, "-c", _APPEND, str(root), "t003", "zebrafish"], check=True)
    got = _hits(root, "zebrafish")
    assert counted.calls == 1  # not vouched: the full check, which catches the thread up
    assert [(h.thread_id, h.seq) for h in got] == [  # type: ignore[attr-defined]
        (h.thread_id, h.seq)  # type: ignore[attr-defined]
        for h in _reference(root, "zebrafish")
    ]
    assert len(got) == 1


def test_a_log_rewritten_in_place_to_the_same_size_is_never_answered_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "s"
    store = _fill(root, 2)
    thread = store.thread("t004")
    thread.append([fr.message("user", "alpacas")])
    _vouched(root)
    log = root / "threads" / "t004.jsonl"
    raw = log.read_bytes()
    assert raw.count(b"alpacas") == 1
    fd = os.open(log, os.O_WRONLY)  # the same inode, the same size, other bytes
    try:
        os.pwrite(fd, raw.replace(b"alpacas", b"bisonsx"), 0)
    finally:
        os.close(fd)
    assert log.stat().st_size == len(raw)
    counted = _Counted(monkeypatch)
    with pytest.raises(CorruptFrame):  # the hit's frame no longer chains: said, not shown
        _hits(root, "alpacas")
    assert counted.calls >= 1  # its ctime moved: the full check, not the stat file


@pytest.mark.parametrize("change", ["replaced", "deleted", "added"])
def test_a_replaced_deleted_or_added_log_takes_the_full_check(
    tmp_path: Path, change: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "s"
    store = _fill(root, 3)
    store.thread("t005").append([fr.message("user", "gannets")])
    _vouched(root)
    if change == "replaced":
        other = Store(tmp_path / "other", create=True, durable=False)
        other.thread("t005").append([fr.message("user", "herons")])  # another chain, longer:
        other.thread("t005").append([fr.message("user", "egret " * 40) for _ in range(40)])
        assert other.thread("t005").head().seq > store.thread("t005").head().seq  # type: ignore[union-attr]
        os.replace(other.root / "threads" / "t005.jsonl", root / "threads" / "t005.jsonl")
    elif change == "deleted":
        (root / "threads" / "t005.jsonl").unlink()
    else:
        Store(root, durable=False).thread("t999").append([fr.message("user", "herons")])
    counted = _Counted(monkeypatch)
    for query in ["gannets", "herons", "cache"]:
        got = _hits(root, query)
        assert got == _reference(root, query)
    assert counted.calls >= 1
    assert _hits(root, "gannets") == ([] if change != "added" else _hits(root, "gannets"))
    found = {h.thread_id for h in _hits(root, "herons")}  # type: ignore[attr-defined]
    assert found == (set() if change == "deleted" else {"t005" if change == "replaced" else "t999"})


def test_a_thread_moved_to_the_cold_tier_searches_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "s"
    store = _fill(root, 4)
    thread = store.thread("t006")
    for i in range(200):
        thread.append([fr.message("user", f"ospreys line {i} " * 10)])
    _vouched(root)
    before = {q: _hits(root, q) for q in ["ospreys", "cache"]}
    log = thread.open_log()
    assert log is not None
    with log:
        upto = log.line_end(log.end // 2)
    thread.move_to_cold(upto)
    counted = _Counted(monkeypatch)
    for query, hits in before.items():
        assert _hits(root, query) == hits
    assert counted.calls >= 1  # the log changed: the full check
    _vouched(root)
    counted.calls = 0
    assert _hits(root, "ospreys") == before["ospreys"]
    assert counted.calls == 0  # vouched again


def test_a_copied_store_takes_the_full_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "s"
    _fill(root, 5)
    _vouched(root)
    expected = _hits(root, "cache error")
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    counted = _Counted(monkeypatch)
    assert _hits(copy, "cache error") == expected
    assert counted.calls == 1  # other inodes: never vouched by the original's file


def test_a_damaged_or_foreign_stat_file_is_never_believed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "s"
    _fill(root, 6)
    _vouched(root)
    path = root / "cache" / ss.FOLDER / ss.STAT_FILE
    good = path.read_bytes()
    counted = _Counted(monkeypatch)
    expected = _reference(root, "deploy")
    for bad in [good[:-5], good.replace(b"continuity", b"kontinuity"), b"", good + b"x"]:
        path.write_bytes(bad)
        counted.calls = 0
        assert _hits(root, "deploy") == expected
        assert counted.calls == 1
    manifest = root / "cache" / ss.FOLDER / "manifest.json"
    path.write_bytes(good)
    manifest.write_bytes(manifest.read_bytes() + b" ")  # another manifest: not the one vouched
    counted.calls = 0
    assert _hits(root, "deploy") == expected
    assert counted.calls >= 1


def test_a_racy_log_is_not_vouched_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "s"
    _fill(root, 7)
    monkeypatch.setattr("continuity.store.jsonl._RACY_NS", 10**15)  # nothing settles
    _hits(root, "cache")
    _hits(root, "cache")
    assert not (root / "cache" / ss.FOLDER / ss.STAT_FILE).exists()


def test_a_damaged_index_file_under_a_vouching_stat_file_is_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "s"
    _fill(root, 8)
    _vouched(root)
    expected = _reference(root, "retry cursor")
    docs = root / "cache" / ss.FOLDER / "docs.bin"
    raw = bytearray(docs.read_bytes())
    raw[len(raw) // 2] ^= 0x40  # the stat file still vouches: docs.bin's checksum does not
    docs.write_bytes(bytes(raw))
    counted = _Counted(monkeypatch)
    assert _hits(root, "retry cursor") == expected
    assert counted.calls >= 1  # not opened from the stat file: the full path rebuilt it
    assert docs.read_bytes() != bytes(raw)
