"""A LangGraph checkpoint's channel values: inline, an artifact, or a delta against one.

A channel that grows step by step (the messages of a conversation) changes a little at every
``put``, and storing it whole each time costs an artifact per put: on the folder store a file,
its fsync and its folder's fsync before the log's own (three syncs where ``SqliteSaver`` makes
one). Here a changed value over :data:`INLINE` bytes is written as a zstd delta against the last
*base* of its channel (an artifact this process already made durable), inline in the
checkpoint record, so the put is one log append and one sync. A new base is written when the
deltas stop paying: once the delta bytes written against the base (each one larger than the one
before, as the value moves away from it) reach what the base itself cost to write (its
compressed bytes in whole blocks, and the blocks its syncs commit: :func:`_written`), or a delta
would not fit a record comfortably (:data:`DELTA_MAX`). That is the rent-or-buy rule: the log
never holds more delta bytes than about twice what storing every base whole would have cost,
and a conversation that grows by a constant a step writes a base every O(sqrt(size)) steps.

Entries (``blobs`` of a ``langgraph.checkpoint`` record; ADR 0023, ADR 0059):

- ``[version]`` — an empty channel;
- ``[version, type, "", base64]`` — the serializer's bytes inline;
- ``[version, type, artifact id]`` — the bytes in an artifact;
- ``[version, type, "delta:" + base artifact id, base64]`` — a zstd frame whose dictionary is
  the base artifact's bytes (code before ADR 0059 refuses it: no artifact has that id).

The base is always durable before a record naming it is appended (it is written with the
store's own durability, and remembered only once written), so a crash can leave a base no
record names, never a record whose base is missing.
"""

from __future__ import annotations

import base64
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Final

from continuity.store.base import BaseStore

__all__ = ["DELTA", "DELTA_MAX", "INLINE", "Bases", "decode_delta", "value_bytes"]

INLINE: Final = 512
"""A changed channel's value up to this many bytes is kept in the checkpoint record itself."""
DELTA: Final = "delta:"
DELTA_MAX: Final = 16 << 10
"""The largest delta kept inline (its base64 is a third more): a record stays far below the
64 KiB a record frame holds, so it is never moved to an artifact of its own."""
_LEVEL: Final = 3
_CACHED: Final = 8
"""Bases whose bytes a process keeps for reading deltas back (the newest few)."""
_BLOCK: Final = 4096
_SYNCED: Final = 3
"""Metadata blocks a new file's fsync and its folder's commit (:func:`_written`)."""
_KEPT: Final = 64 << 20
"""The bytes of current bases a process keeps for writing deltas against."""


@dataclass(slots=True)
class _Base:
    aid: str
    raw: bytes
    cost: int
    """What storing it took (the price of writing a new one): :func:`_written`."""
    rent: int = 0
    """Delta bytes written against it since."""
    compressor: Any = None


class Bases:
    """The current base of each ``(thread, namespace, channel)`` in this process (the newest
    ones, :data:`_KEPT` bytes of them at most: a base forgotten only means the next put writes
    a new one), and the bytes of the bases read back lately. Shared by a saver's writers and
    readers; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._current: OrderedDict[tuple[str, str, str], _Base] = OrderedDict()
        self._kept = 0
        self._bytes: OrderedDict[str, bytes] = OrderedDict()

    def store_value(self, store: BaseStore, key: tuple[str, str, str], raw: bytes) -> list[str]:
        """How a changed value of ``raw`` bytes (over :data:`INLINE`) is stored: ``[aid]`` (a
        new base, written and durable when this returns) or ``[DELTA + aid, base64]``."""
        import zstandard  # on use: the hook path never stores a checkpoint

        with self._lock:  # one compressor per base, used by one thread at a time
            base = self._current.get(key)
            if base is not None:
                if base.compressor is None:
                    zdict = zstandard.ZstdCompressionDict(
                        base.raw, dict_type=zstandard.DICT_TYPE_RAWCONTENT
                    )
                    base.compressor = zstandard.ZstdCompressor(level=_LEVEL, dict_data=zdict)
                delta = base.compressor.compress(raw)
                if len(delta) <= DELTA_MAX and base.rent + len(delta) <= base.cost:
                    base.rent += len(delta)
                    self._current.move_to_end(key)
                    return [DELTA + base.aid, base64.b64encode(delta).decode("ascii")]
        cost = _written(len(zstandard.ZstdCompressor(level=_LEVEL).compress(raw)))
        aid = store.artifacts.put(raw)  # durable (as the store is) before any record names it
        with self._lock:
            old = self._current.pop(key, None)
            if old is not None:
                self._kept -= len(old.raw)
            self._current[key] = _Base(aid, raw, cost)
            self._kept += len(raw)
            while self._kept > _KEPT and len(self._current) > 1:
                _key, gone = self._current.popitem(last=False)
                self._kept -= len(gone.raw)
            self._remember(aid, raw)
        return [aid]

    def _remember(self, aid: str, raw: bytes) -> None:
        self._bytes[aid] = raw
        self._bytes.move_to_end(aid)
        while len(self._bytes) > _CACHED:
            self._bytes.popitem(last=False)

    def base_bytes(self, store: BaseStore, aid: str) -> bytes:
        """A base's bytes: from this process's memory, else the store (checked by its hash)."""
        with self._lock:
            found = self._bytes.get(aid)
            if found is not None:
                self._bytes.move_to_end(aid)
                return found
        raw = store.artifacts.get(aid)
        with self._lock:
            self._remember(aid, raw)
        return raw


def _written(stored: int) -> int:
    """What writing a new durable artifact of ``stored`` bytes costs the device: its data in the
    whole blocks a file system writes, and the blocks its two syncs commit besides (its inode,
    its folder's entry, the journal's commit record). A delta appended to the log shares the
    log's one sync."""
    return -(-stored // _BLOCK) * _BLOCK + _SYNCED * _BLOCK


def decode_delta(base: bytes, delta: bytes) -> bytes:
    import zstandard

    zdict = zstandard.ZstdCompressionDict(base, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
    out: bytes = zstandard.ZstdDecompressor(dict_data=zdict).decompress(delta)
    return out


def value_bytes(store: BaseStore, blob: list[Any], bases: Bases | None) -> tuple[str, bytes] | None:
    """A checkpoint record's channel entry as typed serializer bytes (None: an empty
    channel)."""
    if len(blob) < 3:
        return None
    ref = blob[2]
    if len(blob) > 3:
        if not ref:
            return blob[1], base64.b64decode(blob[3])
        if isinstance(ref, str) and ref.startswith(DELTA):
            aid = ref[len(DELTA) :]
            base = (bases or Bases()).base_bytes(store, aid)
            return blob[1], decode_delta(base, base64.b64decode(blob[3]))
    return blob[1], store.artifacts.get(ref)
