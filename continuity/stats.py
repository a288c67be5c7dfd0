"""Counts and sizes of a store (what ``continuity stats`` prints).

Redactions are counted from the frames' ``meta["redacted"]`` (:mod:`continuity.redaction`),
never by scanning for secrets again: the log's bytes are searched for that member, and only
the lines that hold it are decoded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import msgspec

from continuity import frames as fr
from continuity.caches.thread_index import ThreadIndex
from continuity.errors import CorruptFrame
from continuity.redaction import META_KEY, redaction_count
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
    redactions: int = 0
    """Secrets redacted from the frames of every thread (counted where they were redacted)."""
    redactions_by_thread: dict[str, int] = {}
    """The same per thread, for the threads that had any."""


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


_REDACTED: Final = b'"' + META_KEY.encode() + b'":"'
_CHUNK: Final = 1 << 20


def _redactions(thread: Thread) -> int:
    """The secrets redacted from ``thread``'s frames: the sum of their ``meta["redacted"]``.

    A frame that was redacted holds ``"redacted":"`` in its line (as an object member: inside
    a JSON string the quotes would be escaped), so a byte search finds the candidates and only
    those lines are decoded (a tool input could hold such a member too: decoding tells)."""
    log = thread.open_log()
    if log is None:
        return sum(
            redaction_count(thread.decode(seq, line))
            for seq, line in thread.read_lines()
            if _REDACTED in line
        )
    total = 0
    with log:
        end = log.end
        pos = 0
        carry = b""
        while pos < end:
            chunk = log.pread(min(_CHUNK, end - pos), pos)
            if not chunk:
                break
            base = pos - len(carry)  # where ``data`` starts in the log
            data = carry + chunk
            pos += len(chunk)
            cut = data.rfind(b"\n") + 1
            data, carry = data[:cut], data[cut:]
            hit = data.find(_REDACTED)
            while hit >= 0:
                start = data.rfind(b"\n", 0, hit) + 1
                stop = data.find(b"\n", hit)
                try:
                    frame = fr.decode_frame(data[start:stop])
                except msgspec.DecodeError as exc:
                    raise CorruptFrame(thread.id, None, base + start, str(exc)) from None
                total += redaction_count(frame)
                hit = data.find(_REDACTED, stop)
    return total


def store_stats(store: BaseStore) -> StoreStats:
    """Counts and sizes of every thread, artifact and cache of ``store``."""
    frames = messages = checkpoints = log_bytes = 0
    redactions: dict[str, int] = {}
    ids = store.threads()
    for tid in ids:
        thread = store.thread(tid)
        f, m, c = _counts(thread)
        frames, messages, checkpoints = frames + f, messages + m, checkpoints + c
        log_bytes += _log_bytes(thread)
        redacted = _redactions(thread)
        if redacted:
            redactions[tid] = redacted
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
        redactions=sum(redactions.values()),
        redactions_by_thread=redactions,
    )
