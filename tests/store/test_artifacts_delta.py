"""Bundles stored as deltas of the previous one: smaller, verified on read, chains bounded."""

from __future__ import annotations

from pathlib import Path

import pytest

from continuity import frames as fr
from continuity.context.compiler import compile_context
from continuity.errors import ArtifactCorrupt
from continuity.maintenance.verify import verify_store
from continuity.store.artifacts import (
    DELTA_MAGIC,
    MAX_DELTA_DEPTH,
    FileArtifactStore,
    MemoryArtifactStore,
    artifact_id,
)
from continuity.store.jsonl import Store
from continuity.testing import FixedClock
from tests.support.compile import text
from tests.support.narrow import narrow


def _doc(i: int) -> bytes:
    return b"".join(b"line %d of a long shared window\n" % j for j in range(2000)) + b"tail %d" % i


def test_a_delta_is_small_and_reads_back_verified(tmp_path: Path) -> None:
    arts = FileArtifactStore(tmp_path / "a")
    base = _doc(0)
    base_id = arts.put(base)
    aid = arts.put_like(_doc(1), (base_id, base))
    assert aid == artifact_id(_doc(1))
    blob = arts.path(aid).read_bytes()
    assert blob.startswith(DELTA_MAGIC) and blob[len(DELTA_MAGIC)] == 1
    assert len(blob) < arts.path(base_id).stat().st_size / 5
    assert arts.get(aid) == _doc(1)
    assert arts.put_like(_doc(1), (base_id, base)) == aid  # idempotent


def test_chains_are_bounded(tmp_path: Path) -> None:
    arts = FileArtifactStore(tmp_path / "a")
    prev = (arts.put(_doc(0)), _doc(0))
    depths = []
    for i in range(1, 2 * MAX_DELTA_DEPTH + 3):
        aid = arts.put_like(_doc(i), prev)
        blob = arts.path(aid).read_bytes()
        depths.append(blob[len(DELTA_MAGIC)] if blob.startswith(DELTA_MAGIC) else 0)
        assert arts.get(aid) == _doc(i)
        prev = (aid, _doc(i))
    assert max(depths) == MAX_DELTA_DEPTH and 0 in depths


def test_a_damaged_or_missing_base_makes_the_delta_corrupt(tmp_path: Path) -> None:
    arts = FileArtifactStore(tmp_path / "a")
    base_id = arts.put(_doc(0))
    aid = arts.put_like(_doc(1), (base_id, _doc(0)))
    arts.path(base_id).unlink()
    with pytest.raises(ArtifactCorrupt, match="which is missing"):
        arts.get(aid)
    arts.put(_doc(0))
    path = arts.path(aid)
    blob = bytearray(path.read_bytes())
    blob[-3] ^= 0xFF
    path.write_bytes(bytes(blob))
    with pytest.raises(ArtifactCorrupt):
        arts.get(aid)


def test_a_base_that_is_not_stored_means_a_whole_blob(tmp_path: Path) -> None:
    arts = FileArtifactStore(tmp_path / "a")
    aid = arts.put_like(_doc(1), ("0" * 64, _doc(0)))
    assert not arts.path(aid).read_bytes().startswith(DELTA_MAGIC)
    assert arts.get(aid) == _doc(1)
    memory = MemoryArtifactStore()
    assert memory.get(memory.put_like(_doc(1), (aid, _doc(0)))) == _doc(1)


def test_successive_compiles_store_deltas_and_verify_stays_clean(tmp_path: Path) -> None:
    store = Store(tmp_path / "s", create=True, clock=FixedClock())
    t = store.thread("t")
    roles: tuple[fr.Role, fr.Role] = ("user", "assistant")
    for i in range(30):
        t.append(text(roles[i % 2], f"message {i} " + "word " * 300, f"m{i}"))
        compile_context(t)
    decisions = [f for f in t.read() if isinstance(f, fr.ContextSelectionDecided)]
    files = narrow(FileArtifactStore, store.artifacts)
    blobs = [files.path(d.bundle_artifact_id).read_bytes() for d in decisions]
    assert sum(b.startswith(DELTA_MAGIC) for b in blobs) >= 20
    for d in decisions:
        store.artifacts.get(d.bundle_artifact_id)  # every one reads back, verified
    assert verify_store(store).ok
