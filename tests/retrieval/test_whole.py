"""Search cache files say whether they are whole (issue 26): every file of a thread's search
index and of the store-wide one is covered by a checksum, so ``verify`` names every flipped,
cut or emptied file without tokenizing anything, and a search never serves one; a rebuild or a
catch-up SIGKILLed at any point leaves no empty or half-made file, and the next read answers as
a fresh index does."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from continuity import frames as fr
from continuity.caches import thread_index
from continuity.errors import forget_notes
from continuity.maintenance.verify import repair_thread, verify_store
from continuity.retrieval import store_index as ss
from continuity.retrieval.index import ThreadSearchIndex
from continuity.retrieval.search import search
from continuity.store.jsonl import Store
from continuity.testing import FixedClock
from tests.support.processes import reap

WORDS = ["deploy", "cache", "error", "retry", "cursor", "alembic", "watermark", "src/app.py"]
QUERIES = ("alembic watermark", "deploy", "src/app.py retry", "cursor error cache", "w1234")


def _store(root: Path, messages: int = 1_500) -> Store:
    """A thread long enough to keep its own search index (over 64 KiB: ADR 0031) with sealed
    and merged segments and a tail, and a few small threads beside it."""
    store = Store(root, create=True, durable=False, clock=FixedClock())
    rng = random.Random(26)
    big = [
        fr.message(("user", "assistant")[i % 2], f"w{i} " + " ".join(rng.choices(WORDS, k=6)))
        for i in range(messages)
    ]
    store.thread("big").append(big)
    for n in range(3):
        store.thread(f"small{n}").append(
            [fr.message("user", " ".join(rng.choices(WORDS, k=4))) for _ in range(5)]
        )
    return store


def _answers(store: Store) -> dict[tuple[str, str | None], object]:
    return {(q, t): search(store, q, k=5, thread=t) for q in QUERIES for t in (None, "big")}


def _cache_files(store: Store) -> list[Path]:
    folders = [store.cache_dir / "search" / "big", store.cache_dir / ss.FOLDER]
    return [p for f in folders if f.is_dir() for p in sorted(f.iterdir()) if p.name != ".lock"]


def _damaged(good: bytes, rng: random.Random) -> list[bytes]:
    flips = [rng.randrange(len(good)) for _ in range(4)]
    return [
        *(good[:at] + bytes([good[at] ^ 0x20]) + good[at + 1 :] for at in flips),
        good[: len(good) // 2],
        good[:-1],
        b"",
    ]


@pytest.mark.slow
def test_verify_names_every_damaged_search_file_and_search_serves_none(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = _store(tmp_path / "s")
    truth = _answers(store)
    assert verify_store(store).ok
    files = _cache_files(store)
    names = {p.name for p in files}
    assert {"manifest.json", "docs.bin", "tail.jsonl"} <= names
    assert any(n.startswith("seg-") for n in names)
    rng = random.Random(1)
    for path in files:
        good = path.read_bytes()
        for bad in _damaged(good, rng):
            path.write_bytes(bad)
            problems = verify_store(store).problems
            assert problems, (path.name, len(bad))
            assert all("search index" in p.where for p in problems), problems
            path.write_bytes(good)
        # a search reading the damaged file rebuilds from the log and says so
        path.write_bytes(_damaged(good, rng)[0])
        forget_notes()  # said once per process: this test asks every time
        caplog.clear()
        assert _answers(store) == truth, path.name
        assert "; rebuilt from the log" in caplog.text, path.name
        ss.rebuild_store_search(store)
        ThreadSearchIndex(store.thread("big")).rebuild()
        assert verify_store(store).ok


def test_a_flipped_digest_in_the_store_wide_manifest_is_named(tmp_path: Path) -> None:
    store = _store(tmp_path / "s", messages=20)
    truth = search(store, "deploy", k=5)
    path = store.cache_dir / ss.FOLDER / "manifest.json"
    m = ss._read_manifest(path.parent)
    assert m is not None
    digest = m.threads[0].digest
    flipped = digest[:10] + ("0" if digest[10] != "0" else "1") + digest[11:]
    path.write_bytes(path.read_bytes().replace(digest.encode(), flipped.encode()))
    problems = verify_store(store).problems
    assert [p.where for p in problems] == ["store-wide search index"]
    assert "does not match its checksum" in problems[0].message
    assert search(store, "deploy", k=5) == truth
    assert verify_store(store).ok


def test_a_log_cut_behind_the_store_wide_index_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A small thread keeps no caches of its own (ADR 0031): only the store-wide search index
    knew it had six frames. Verify names it; search sees it, rebuilds and says so."""
    monkeypatch.setattr(thread_index, "SMALL_LOG_BYTES", 64 * 1024)
    store = Store(tmp_path / "s", create=True, durable=False, clock=FixedClock())
    t = store.thread("t")
    t.append(fr.ThreadCreated(meta={}))
    for w in ("one", "two", "three", "four", "okapi"):
        t.append(fr.message("user", f"note {w}"))
    assert [h.seq for h in search(store, "okapi")] == [5]
    log = store.root / "threads" / "t.jsonl"
    log.write_bytes(b"".join(log.read_bytes().splitlines(keepends=True)[:5]))
    found = [
        p.message for p in verify_store(store).problems if p.where == "store-wide search index"
    ]
    assert len(found) == 1
    assert found[0].startswith("thread t: recorded 6 frames (")
    assert found[0].endswith(
        "of the log, which holds 5 frames: the log is shorter than what the search index recorded"
    )
    assert not (store.cache_dir / "threads" / "t").exists()
    forget_notes()
    assert search(store, "okapi") == []
    assert "shorter than what the search index recorded; rebuilt from the log" in caplog.text
    assert not [p for p in verify_store(store).problems if p.where == "store-wide search index"]


# --- killed writers ----------------------------------------------------------------------------


def _whole_or_absent(store: Store) -> None:
    """No empty file, and what a manifest names is whole (its checksums hold)."""
    for path in _cache_files(store):
        if path.name.startswith(".") and path.name.endswith(".tmp"):
            continue  # a killed writer's temporary file: never read, removed by the next one
        assert path.stat().st_size > 0, path
    assert ThreadSearchIndex(store.thread("big")).problems() == []
    assert ss.store_search_problems(store) == []


@pytest.mark.slow
def test_a_killed_rebuild_or_catch_up_leaves_no_half_made_file(tmp_path: Path) -> None:
    seed = random.randrange(10**6)
    print(f"seed {seed}")
    rng = random.Random(seed)
    store = _store(tmp_path / "s", messages=4_200)
    _answers(store)  # both indexes exist
    cli = [sys.executable, "-m", "continuity", "--store", str(store.root)]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    started = time.monotonic()
    subprocess.run([*cli, "rebuild-index"], check=True, capture_output=True, env=env)
    whole = time.monotonic() - started
    commands = (["rebuild-index"], ["search", "deploy"], ["search", "deploy", "--thread", "big"])
    for round_ in range(8):
        command = commands[round_ % len(commands)]
        if command[0] == "search":  # something to catch up: a seal, merges, a tail
            store.thread("big").append(
                [fr.message("user", f"x{round_} {i} deploy") for i in range(rng.randint(1, 600))]
            )
            store.thread(f"new{round_}").append(fr.message("user", "deploy later"))
        child = subprocess.Popen([*cli, *command], stdout=subprocess.DEVNULL, env=env)
        time.sleep(rng.uniform(0.2, whole))
        os.kill(child.pid, signal.SIGKILL)
        reap(child)
        _whole_or_absent(store)
        fresh = Store(tmp_path / f"fresh{round_}", create=True, durable=False)
        shutil.copytree(store.root / "threads", fresh.root / "threads", dirs_exist_ok=True)
        assert _answers(store) == _answers(fresh), (seed, round_, command)


def test_repair_leaves_no_store_wide_index_ahead_of_the_log(tmp_path: Path) -> None:
    store = Store(tmp_path / "s", create=True, durable=False, clock=FixedClock())
    for i in range(6):
        store.thread("t").append(fr.message("user", f"m{i} okapi"))
    assert len(search(store, "okapi")) == 6
    log = store.root / "threads" / "t.jsonl"
    data = log.read_bytes()
    at = data.rfind(b"okapi")
    log.write_bytes(data[:at] + b"X" + data[at + 1 :])
    assert repair_thread(store.thread("t")) is not None
    assert verify_store(store).ok
    assert len(search(store, "okapi")) == 5
