"""The segments cache: each thread's turns (:class:`~.segments.Turn`), derived from its log.

``<store>/cache/rolling/<thread>.turns.v1.json`` holds the turns read so far and a watermark
(the seq and digest of the last frame read). It catches up from the watermark when the log
grows (the last turn, which may have been unfinished, is read again), and is rebuilt from the
log when its watermark no longer names a frame of the log or the file is damaged. Deleting it
never changes a result; ``rebuild-index`` rebuilds it byte for byte. A store without a cache
folder (in memory, on a server) derives the turns each time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import msgspec

from continuity import frames as fr
from continuity.rolling.segments import Segment, Turn, segment_turns, turns_of
from continuity.store.base import BaseStore, Thread

__all__ = [
    "FOLDER",
    "cache_path",
    "drop_turns",
    "rebuild_segment_caches",
    "thread_segments",
    "thread_turns",
]

FOLDER: Final = "rolling"
_VERSION: Final = 1


class _Cache(msgspec.Struct, kw_only=True):
    version: int = _VERSION
    thread_id: str
    seq: int
    """The seq of the last frame read (-1: none)."""
    digest: str
    turns: list[Turn]


_encoder: Final = msgspec.json.Encoder()
_decoder: Final = msgspec.json.Decoder(_Cache)


def _path(store: BaseStore, thread_id: str) -> Path | None:
    folder = store.cache_dir
    return None if folder is None else folder / FOLDER / f"{thread_id}.turns.v1.json"


def cache_path(thread: Thread) -> Path | None:
    return _path(thread.store, thread.id)


def drop_turns(store: BaseStore, thread_id: str) -> None:
    """Delete the turns cache of ``thread_id`` (a deleted thread's: it holds its prompts)."""
    path = _path(store, thread_id)
    if path is not None:
        path.unlink(missing_ok=True)


def _load(path: Path, thread: Thread) -> _Cache | None:
    try:
        cache = _decoder.decode(path.read_bytes())
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None
    if cache.version != _VERSION or cache.thread_id != thread.id:
        return None
    if cache.seq < 0:
        return cache
    at = next(iter(thread.read(from_seq=cache.seq, to_seq=cache.seq)), None)
    return cache if at is not None and at.digest == cache.digest else None


def _messages(thread: Thread, from_seq: int) -> list[fr.MessageAppended]:
    return [
        f
        for f in thread.read(from_seq=from_seq, types=["message_appended"])
        if isinstance(f, fr.MessageAppended)
    ]


def _caught_up(thread: Thread, cache: _Cache | None) -> _Cache | None:
    """The cache brought to the log's head; None when it already was."""
    head = thread.head()
    if head is None:
        return _Cache(thread_id=thread.id, seq=-1, digest="", turns=[])
    if cache is not None and cache.seq == head.seq:
        return None
    kept = list(cache.turns) if cache is not None else []
    from_seq = 0
    if kept:  # the last turn may have grown since: read again from its start
        from_seq = kept.pop().from_seq
    new = turns_of(_messages(thread, from_seq), first_index=len(kept))
    return _Cache(thread_id=thread.id, seq=head.seq, digest=head.digest, turns=kept + new)


def thread_turns(thread: Thread, *, save: bool = True) -> list[Turn]:
    """The turns of ``thread`` (from the cache, caught up; derived whole without one)."""
    path = cache_path(thread)
    old = _load(path, thread) if path is not None else None
    new = _caught_up(thread, old)
    if new is None:
        assert old is not None
        return old.turns
    if path is not None and save:
        from continuity._fs import atomic_write

        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, _encoder.encode(new), durable=False)
    return new.turns


def thread_segments(thread: Thread) -> list[Segment]:
    """The segments of ``thread`` (:func:`~.segments.segment_turns` on its turns)."""
    return segment_turns(thread_turns(thread))


def rebuild_segment_caches(store: BaseStore, thread_ids: set[str] | None = None) -> int:
    """Delete and rebuild the segments caches that exist (of ``thread_ids``, default all; a
    cache of a thread that is gone is deleted); how many were rebuilt."""
    folder = None if store.cache_dir is None else store.cache_dir / FOLDER
    if folder is None or not folder.is_dir():
        return 0
    known = set(store.stored_thread_ids())
    done = 0
    for path in sorted(folder.glob("*.turns.v1.json")):
        tid = path.name.removesuffix(".turns.v1.json")
        if thread_ids is not None and tid not in thread_ids:
            continue
        path.unlink(missing_ok=True)
        if tid in known:
            thread_turns(store.thread(tid))
            done += 1
    return done
