"""The turns cache: derived from the log, caught up in pieces or built whole to the same bytes,
rebuilt by rebuild-index, and never needed for a result."""

from __future__ import annotations

from pathlib import Path

import msgspec

from continuity.agents.claude_code.ingest import ingest_transcript
from continuity.maintenance.bulk import rebuild_store
from continuity.rolling.cache import cache_path, thread_segments, thread_turns
from continuity.store.jsonl import Store
from continuity.store.memory import MemoryStore
from tests.rolling.sessions import SESSION, long_session


def _in_pieces(store: Store, source: Path, folder: Path, pieces: int) -> Path:
    """Ingest ``source`` a piece at a time, reading the turns after each."""
    lines = source.read_bytes().splitlines(keepends=True)
    target = folder / source.name
    target.write_bytes(b"")
    step = len(lines) // pieces + 1
    for i in range(0, len(lines), step):
        with open(target, "ab") as f:
            f.write(b"".join(lines[i : i + step]))
        report = ingest_transcript(store, target)
        if report.threads:
            thread_turns(store.thread(report.threads[0]))
    ingest_transcript(store, target, final=True)
    return target


def test_caught_up_in_pieces_or_built_whole_the_same_bytes(tmp_path: Path) -> None:
    t = long_session(tmp_path, final_tokens=130_000)
    store = Store(tmp_path / "store", create=True, durable=False)
    (tmp_path / "feed").mkdir()
    _in_pieces(store, t.path, tmp_path / "feed", 7)
    thread = store.thread(f"cc-{SESSION}")
    segments = thread_segments(thread)
    path = cache_path(thread)
    assert path is not None
    pieces = path.read_bytes()
    path.unlink()
    assert thread_segments(thread) == segments  # deleting it changes no result
    assert path.read_bytes() == pieces
    rebuild_store(store)  # what `continuity rebuild-index` runs
    assert path.read_bytes() == pieces


def test_a_damaged_cache_is_rebuilt(tmp_store: Store, tmp_path: Path) -> None:
    t = long_session(tmp_path, final_tokens=130_000)
    ingest_transcript(tmp_store, t.path, final=True)
    thread = tmp_store.thread(t.thread_id)
    segments = thread_segments(thread)
    path = cache_path(thread)
    assert path is not None
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) // 2])
    assert thread_segments(thread) == segments and path.read_bytes() == whole
    path.write_bytes(whole.replace(b'"seq":', b'"seq":1', 1))  # a watermark the log denies
    assert thread_segments(thread) == segments and path.read_bytes() == whole


def test_a_store_without_caches_derives_the_same(tmp_store: Store, tmp_path: Path) -> None:
    t = long_session(tmp_path, final_tokens=130_000)
    ingest_transcript(tmp_store, t.path, final=True)
    memory = MemoryStore()
    frames = list(tmp_store.thread(t.thread_id).read())
    memory.thread(t.thread_id).append(
        [msgspec.structs.replace(f, digest="", seq=-1, more=False) for f in frames]
    )
    assert thread_segments(memory.thread(t.thread_id)) == thread_segments(
        tmp_store.thread(t.thread_id)
    )


def test_deleting_a_thread_deletes_its_turns(tmp_store: Store, tmp_path: Path) -> None:
    """The cache holds the prompts' first lines: forgetting a thread must not leave them."""
    from continuity.maintenance.forget import forget_threads

    t = long_session(tmp_path, final_tokens=130_000)
    ingest_transcript(tmp_store, t.path, final=True)
    thread = tmp_store.thread(t.thread_id)
    thread_segments(thread)
    path = cache_path(thread)
    assert path is not None and path.exists()
    forget_threads(tmp_store, [t.thread_id])
    assert not path.exists()
