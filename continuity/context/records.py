"""A runtime's own records in the log: namespaced, keyed, found by kind and key in O(log n).

A checkpoint saver's state, a memory block, a session's bookkeeping: a runtime writes them as
``record_appended`` frames with :func:`record` (small JSON values inline, large ones in an
artifact, transparently) and reads them back with :func:`latest_record` ("the latest record of
kind K, and key X, at or before seq N") and :func:`records`, which answer from the record index
(``marks.v1.jsonl`` in a store with caches, a projection kept in the process otherwise) and read
only the frames they return. Compile does not put records into a model's context; they are in
the chained log, so ``verify`` covers them, and ``log`` shows them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

import msgspec

from continuity import frames as fr
from continuity.caches.live import marks_of
from continuity.caches.marks import Marks
from continuity.caches.thread_index import ThreadIndex
from continuity.errors import BadFrame, CorruptCache
from continuity.store.base import MAX_RECORD_DATA, Thread

__all__ = ["Record", "latest_record", "record", "records"]

_encoder: Final = msgspec.json.Encoder()
_decoder: Final = msgspec.json.Decoder()


class Record(msgspec.Struct, frozen=True, kw_only=True):
    """A record as a runtime reads it back: its data whole, wherever it was stored."""

    seq: int
    ts_ms: int
    kind: str
    key: str
    data: Any


def record(
    thread: Thread,
    kind: str,
    data: Any = None,
    *,
    key: str = "",
    expected_seq: int | None = None,
    durable: bool | None = None,
) -> int:
    """Append a record of ``kind`` (namespaced: ``"myruntime.state"``) and ``key`` holding
    ``data`` (any JSON value); return its seq. Data larger than a record frame holds inline
    (64 KiB encoded) is stored as an artifact and the frame points at it; :func:`latest_record`
    and :func:`records` give it back either way."""
    try:
        body = _encoder.encode(data)
    except (TypeError, msgspec.EncodeError, OverflowError) as exc:
        raise BadFrame(f"record data must be a JSON value: {exc}") from None
    if len(body) > MAX_RECORD_DATA:
        # The frame is redacted when appended; the artifact holding the state must be too.
        redact = getattr(thread.store.redactor, "redact_json", None)
        if callable(redact):
            clean, found = redact(data)
            if found:
                body = _encoder.encode(clean)
        aid = thread.store.artifacts.put(body)
        frame = fr.RecordAppended(kind=kind, key=key, artifact_id=aid, size=len(body))
    else:
        frame = fr.RecordAppended(kind=kind, key=key, data=_decoder.decode(body))
    return thread.append(frame, expected_seq=expected_seq, durable=durable)[0]


def latest_record(
    thread: Thread, kind: str, key: str | None = None, *, at_or_before: int | None = None
) -> Record | None:
    """The latest record of ``kind`` (with ``key``, when given) at or before seq
    ``at_or_before`` (default: the whole thread), or None. O(log n) in the thread's records
    and one frame read, whatever the thread's length."""
    seq = _marks(thread).latest_record(kind, key, at_or_before)
    return None if seq is None else _read(thread, seq)


def records(
    thread: Thread,
    kind: str,
    key: str | None = None,
    *,
    at_or_before: int | None = None,
    limit: int | None = None,
) -> Iterator[Record]:
    """The records of ``kind`` (and ``key``) at or before ``at_or_before``, newest first, at
    most ``limit`` of them; each frame is read when the iteration reaches it."""
    if limit is not None and limit <= 0:
        return
    seqs = _marks(thread).record_seqs(kind, key, at_or_before)
    for n, seq in enumerate(seqs):
        if limit is not None and n >= limit:
            return
        yield _read(thread, seq)


def _marks(thread: Thread) -> Marks:
    if ThreadIndex.available(thread):
        ThreadIndex(thread).refresh()
    return marks_of(thread)


def _read(thread: Thread, seq: int) -> Record:
    start = None
    if thread.store.cache_dir is not None and ThreadIndex.available(thread):
        start = ThreadIndex(thread).offset(seq)
    found = next(thread.read_lines(from_seq=seq, to_seq=seq, start_offset=start), None)
    frame = thread.decode(seq, found[1]) if found is not None else None
    if not isinstance(frame, fr.RecordAppended):
        raise CorruptCache(thread.id, f"the record index names seq {seq}, not a record there")
    data = frame.data
    if frame.artifact_id is not None:
        data = _decoder.decode(thread.store.artifacts.get(frame.artifact_id))
    return Record(seq=frame.seq, ts_ms=frame.ts_ms, kind=frame.kind, key=frame.key, data=data)
