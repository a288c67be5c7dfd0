"""A LangGraph channel value stored as a delta against its parent checkpoint's value.

A graph's ``messages`` channel changes at nearly every step and grows with the conversation;
stored whole, each version is an artifact (a file made durable by two fsyncs, besides the
log's own sync) holding mostly what the version before it held. Here a changed value much like
the parent checkpoint's value of the same channel is kept **in the checkpoint record** as a
zstd frame that uses the parent's bytes as its dictionary (what ``zstd --patch-from`` does):
O(what changed) bytes in the log, made durable by the batch's one sync, and exact whatever the
serializer (the bytes are compared, not the messages).

A patch entry is ``[version, type, "", "", {"base": seq, "of": hash, "hash": hash, "depth": n,
"delta": base64}]``: ``base`` is the seq, in the same continuity thread, of the checkpoint
record whose entry for the channel holds the base value, ``of`` that value's blake3 (an
artifact entry's id is its hash), ``hash`` the blake3 of the value this entry gives. A read
walks at most :data:`MAX_CHAIN` records back to a whole value and checks every hash on the way
up. A value whose delta is not small (an ``EncryptedSerializer``'s bytes, a new list) or whose
chain would be longer is stored whole, as before. :class:`ValueCache` keeps the bytes of recent
values in the process, so a put finds its parent's value without a read and a ``get_tuple``
of the checkpoint just put reads no chain.
"""

from __future__ import annotations

import base64
import threading
from collections import OrderedDict
from typing import Any, Final

import blake3

from continuity.context.records import RecordView
from continuity.errors import ArtifactCorrupt
from continuity.store.artifacts import MAX_ARTIFACT_BYTES, CompressedArtifactStore
from continuity.store.base import BaseStore

__all__ = [
    "MAX_CHAIN",
    "MAX_DELTA",
    "ValueCache",
    "deltas_pay",
    "entry_depth",
    "entry_hash",
    "make_delta",
    "resolve",
    "value_hash",
]

MAX_CHAIN: Final = 16
"""The longest chain of patches a read follows; the next version is stored whole."""
MAX_DELTA: Final = 16 * 1024
"""A delta larger than this (or than a quarter of the value) is not worth a chain: the value
is stored whole."""
_LEVEL: Final = 3
_CACHE_BYTES: Final = 64 << 20
_CACHE_CHECKPOINTS: Final = 4096


def deltas_pay(store: BaseStore) -> bool:
    """Whether values are worth storing as deltas in this store: where an artifact is a
    durable write of its own (files, PostgreSQL rows), not a dict entry in memory."""
    return isinstance(store.artifacts, CompressedArtifactStore)


def value_hash(raw: bytes) -> str:
    return blake3.blake3(raw).hexdigest()


def make_delta(base: bytes, raw: bytes) -> bytes | None:
    """``raw`` as a zstd frame with ``base`` as its dictionary (a checksum of ``raw`` inside),
    or None when that is not small enough to be worth it."""
    import zstandard

    ref = zstandard.ZstdCompressionDict(base, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
    frame = zstandard.ZstdCompressor(level=_LEVEL, dict_data=ref, write_checksum=True).compress(raw)
    if len(frame) > MAX_DELTA or len(frame) * 4 > len(raw):
        return None
    return frame


def _apply(base: bytes, frame: bytes, what: str) -> bytes:
    import zstandard

    try:
        if zstandard.frame_content_size(frame) > MAX_ARTIFACT_BYTES:
            raise ArtifactCorrupt(f"{what}: the delta declares more bytes than a value holds")
        ref = zstandard.ZstdCompressionDict(base, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
        out: bytes = zstandard.ZstdDecompressor(dict_data=ref).decompress(frame)
    except zstandard.ZstdError as exc:
        raise ArtifactCorrupt(f"{what}: the delta does not apply to its base: {exc}") from None
    return out


def entry_hash(blob: list[Any]) -> str | None:
    """The blake3 of the value a channel entry holds, when the entry says it without a read:
    an artifact's id, a patch's ``hash``; None for an inline value or an empty channel."""
    if len(blob) == 3:
        return str(blob[2])
    if len(blob) == 5:
        return str(blob[4]["hash"])
    return None


def entry_depth(blob: list[Any]) -> int:
    """How many patches a read of the entry applies (0: a whole value)."""
    return int(blob[4]["depth"]) if len(blob) == 5 else 0


class ValueCache:
    """Recent channel values of one saver, by hash (at most 64 MiB, least recently used
    first out), and the hashes of recent checkpoints' values, by ``(thread, ns, id)``.
    Shared by the saver's reads and puts, from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: OrderedDict[str, bytes] = OrderedDict()
        self._size = 0
        self._checkpoints: OrderedDict[tuple[str, str, str], dict[str, tuple[str, int]]] = (
            OrderedDict()
        )

    def value(self, h: str) -> bytes | None:
        with self._lock:
            raw = self._values.get(h)
            if raw is not None:
                self._values.move_to_end(h)
            return raw

    def keep_value(self, h: str, raw: bytes) -> None:
        if len(raw) > _CACHE_BYTES // 4:
            return
        with self._lock:
            if h in self._values:
                self._values.move_to_end(h)
                return
            self._values[h] = raw
            self._size += len(raw)
            while self._size > _CACHE_BYTES:
                _, old = self._values.popitem(last=False)
                self._size -= len(old)

    def checkpoint(self, key: tuple[str, str, str]) -> dict[str, tuple[str, int]] | None:
        """Per channel, the hash and chain depth of a checkpoint's entry (what the cache
        was told; a put checks it against the parent's record before relying on it)."""
        with self._lock:
            return self._checkpoints.get(key)

    def keep_checkpoint(self, key: tuple[str, str, str], blobs: dict[str, list[Any]]) -> None:
        known = {}
        for channel, blob in blobs.items():
            h = entry_hash(blob)
            if h is not None:
                known[channel] = (h, entry_depth(blob))
        with self._lock:
            self._checkpoints[key] = known
            self._checkpoints.move_to_end(key)
            while len(self._checkpoints) > _CACHE_CHECKPOINTS:
                self._checkpoints.popitem(last=False)


def resolve(
    store: BaseStore, view: RecordView, channel: str, blob: list[Any], cache: ValueCache
) -> bytes:
    """The bytes of a value entry that is not empty: inline, an artifact, or a patch (its
    chain read back through ``view``, every hash checked; :class:`ArtifactCorrupt` when one
    does not match)."""
    if len(blob) == 4:
        return base64.b64decode(blob[3])
    h = entry_hash(blob)
    assert h is not None
    raw = cache.value(h)
    if raw is not None:
        return raw
    if len(blob) == 3:
        raw = store.artifacts.get(h)
        cache.keep_value(h, raw)
        return raw
    chain = [blob]  # patches, newest first, down to one whose base is known
    base: bytes | None = None
    while base is None:
        patch = chain[-1][4]
        if len(chain) > MAX_CHAIN:
            raise ArtifactCorrupt(f"value {h}: its chain of deltas is longer than {MAX_CHAIN}")
        base = cache.value(patch["of"])
        if base is not None:
            break
        below = view.read(int(patch["base"])).data["blobs"].get(channel)
        if below is None or len(below) < 3:
            raise ArtifactCorrupt(
                f"value {h}: its base (seq {patch['base']}, channel {channel!r}) is missing"
            )
        if len(below) == 5:
            chain.append(below)
            continue
        base = resolve(store, view, channel, below, cache)
    for entry in reversed(chain):
        patch = entry[4]
        if value_hash(base) != patch["of"]:
            raise ArtifactCorrupt(f"value {patch['hash']}: its base does not match {patch['of']}")
        base = _apply(base, base64.b64decode(patch["delta"]), f"value {patch['hash']}")
        if value_hash(base) != patch["hash"]:
            raise ArtifactCorrupt(f"value {patch['hash']}: the delta gives other bytes")
        cache.keep_value(patch["hash"], base)
    return base
