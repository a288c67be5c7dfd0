"""Counts and sizes of a store (what ``continuity stats`` prints)."""

from __future__ import annotations

from pathlib import Path

import msgspec

from continuity import frames as fr
from continuity.caches.thread_index import ThreadIndex
from continuity.store.base import BaseStore, Thread

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


def _tree_bytes(root: Path | None) -> int:
    if root is None or not root.is_dir():
        return 0
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def _counts(thread: Thread) -> tuple[int, int, int]:
    """(frames, messages, checkpoints): from the caches, brought up to date (O(new frames)),
    or by reading the log when the store keeps none."""
    if ThreadIndex.available(thread):
        index = ThreadIndex(thread)
        index.refresh()
        return index.frame_count(), index.message_count(), index.checkpoint_count()
    frames = messages = checkpoints = 0
    for frame in thread.read():
        frames += 1
        messages += isinstance(frame, fr.MessageAppended)
        checkpoints += isinstance(frame, fr.CompactionCheckpointCreated)
    return frames, messages, checkpoints


def _log_bytes(thread: Thread) -> int:
    log = thread.open_log()
    if log is None:
        return 0
    with log:
        return log.size()


def store_stats(store: BaseStore) -> StoreStats:
    """Counts and sizes of every thread, artifact and cache of ``store``."""
    frames = messages = checkpoints = log_bytes = 0
    ids = store.threads()
    for tid in ids:
        thread = store.thread(tid)
        f, m, c = _counts(thread)
        frames, messages, checkpoints = frames + f, messages + m, checkpoints + c
        log_bytes += _log_bytes(thread)
    return StoreStats(
        threads=len(ids),
        frames=frames,
        messages=messages,
        checkpoints=checkpoints,
        log_bytes=log_bytes,
        artifacts=sum(1 for _ in store.artifacts.ids()),
        artifact_bytes=store.artifacts.stored_bytes(),
        cache_bytes=_tree_bytes(store.cache_dir),
        quarantined=len(store.quarantined()),
    )
