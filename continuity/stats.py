"""Counts and sizes of a store (what ``continuity stats`` prints)."""

from __future__ import annotations

from pathlib import Path

import msgspec

from continuity.caches import ThreadIndex
from continuity.store import Store

__all__ = ["StoreStats", "store_stats"]


class StoreStats(msgspec.Struct, frozen=True):
    threads: int
    frames: int
    messages: int
    checkpoints: int
    log_bytes: int
    artifacts: int
    artifact_bytes: int
    cache_bytes: int
    quarantined: int


def _tree_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) if root.is_dir() else 0


def store_stats(store: Store) -> StoreStats:
    """Bring each thread's caches up to date and read the counts from them (O(new frames))."""
    frames = messages = checkpoints = log_bytes = 0
    ids = store.threads()
    for tid in ids:
        index = ThreadIndex(store, tid)
        index.refresh()
        frames += index.frame_count()
        messages += index.message_count()
        checkpoints += index.checkpoint_count()
        log_bytes += index.thread.path.stat().st_size
    artifact_ids = list(store.artifacts.ids())
    return StoreStats(
        threads=len(ids),
        frames=frames,
        messages=messages,
        checkpoints=checkpoints,
        log_bytes=log_bytes,
        artifacts=len(artifact_ids),
        artifact_bytes=_tree_bytes(store.root / "artifacts"),
        cache_bytes=_tree_bytes(store.cache_dir),
        quarantined=len(store.quarantined()),
    )
