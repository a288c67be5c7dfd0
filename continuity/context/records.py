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
from continuity.caches.thread_index import ThreadIndex
from continuity.errors import BadFrame, CorruptCache
from continuity.store.base import MAX_RECORD_DATA, LogReader, Thread

__all__ = [
    "Record",
    "RecordView",
    "latest_record",
    "record",
    "record_frame",
    "record_view",
    "records",
]

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
    frame = record_frame(thread, kind, key, data)
    return thread.append(frame, expected_seq=expected_seq, durable=durable)[0]


def record_frame(thread: Thread, kind: str, key: str, data: Any) -> fr.RecordAppended:
    """The frame :func:`record` appends, for a batch of the caller's own: ``data`` inline when
    it fits a record frame (64 KiB encoded), else in an artifact, redacted first when the store
    redacts (as the frame itself would be). Raises :class:`BadFrame` when ``data`` is not a JSON
    value."""
    try:
        body = _encoder.encode(data)
    except (TypeError, msgspec.EncodeError, OverflowError) as exc:
        raise BadFrame(f"record data must be a JSON value: {exc}") from None
    if len(body) <= MAX_RECORD_DATA:
        return fr.RecordAppended(kind=kind, key=key, data=_decoder.decode(body))
    redact = getattr(thread.store.redactor, "redact_json", None)
    if callable(redact):
        clean, found = redact(data)
        if found:
            body = _encoder.encode(clean)
    aid = thread.store.artifacts.put(body)
    return fr.RecordAppended(kind=kind, key=key, artifact_id=aid, size=len(body))


def latest_record(
    thread: Thread, kind: str, key: str | None = None, *, at_or_before: int | None = None
) -> Record | None:
    """The latest record of ``kind`` (with ``key``, when given) at or before seq
    ``at_or_before`` (default: the whole thread), or None. O(log n) in the thread's records
    and one frame read, whatever the thread's length. (Several lookups: :func:`record_view`.)"""
    with RecordView(thread) as view:
        return view.latest(kind, key, at_or_before=at_or_before)


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
    with RecordView(thread) as view:
        yield from view.records(kind, key, at_or_before=at_or_before, limit=limit)


def record_view(thread: Thread) -> RecordView:
    """A :class:`RecordView` of the thread as it is now: for several lookups in a row."""
    return RecordView(thread)


class RecordView:
    """The thread's records as of one moment, for several lookups at the cost of one.

    Taking the view brings the record index up to the log's end once (:func:`latest_record`
    does that on every call); its lookups then answer from that snapshot — a record appended
    after the view was taken is not in it (take a new view to see it) — and read the frames
    they return through one open log and the offset index. Use it as a context manager or
    :meth:`close` it (it holds the log open once it has read a frame); one view is for one
    thread of execution at a time.
    """

    def __init__(self, thread: Thread) -> None:
        self.thread = thread
        self._log: LogReader | None = None
        self._closed = False
        self._index: ThreadIndex | None = ThreadIndex.current(thread)
        self._marks = marks_of(thread)
        self.last_seq = self._marks.last_seq
        """The seq of the last record or retraction the view sees (-1: none)."""

    def __enter__(self) -> RecordView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._closed = True
        if self._log is not None:
            self._log.close()
            self._log = None

    def __del__(self) -> None:
        if self._log is not None:
            self._log.close()

    def _bound(self, at_or_before: int | None) -> int:
        # The marks only grow while this process reads on: the snapshot is a bound on seqs.
        return self.last_seq if at_or_before is None else min(at_or_before, self.last_seq)

    def latest(
        self, kind: str, key: str | None = None, *, at_or_before: int | None = None
    ) -> Record | None:
        """As :func:`latest_record`, in this view."""
        seq = self._marks.latest_record(kind, key, self._bound(at_or_before))
        return None if seq is None else self.read(seq)

    def records(
        self,
        kind: str,
        key: str | None = None,
        *,
        at_or_before: int | None = None,
        limit: int | None = None,
    ) -> Iterator[Record]:
        """As :func:`records`, in this view."""
        if limit is not None and limit <= 0:
            return
        seqs = self._marks.record_seqs(kind, key, self._bound(at_or_before))
        for n, seq in enumerate(seqs):
            if limit is not None and n >= limit:
                return
            yield self.read(seq)

    def read(self, seq: int) -> Record:
        """The record at ``seq`` (:class:`CorruptCache` if the frame there is not one)."""
        line = self._fast_line(seq)
        if line is None:
            start = None
            if self._index is not None and self.thread.store.cache_dir is not None:
                start = self._index.offset(seq)
            found = next(self.thread.read_lines(from_seq=seq, to_seq=seq, start_offset=start), None)
            line = found[1] if found is not None else None
        frame = self.thread.decode(seq, line) if line is not None else None
        if not isinstance(frame, fr.RecordAppended) or frame.seq != seq:
            raise CorruptCache(
                self.thread.id, f"the record index names seq {seq}, not a record there"
            )
        data = frame.data
        if frame.artifact_id is not None:
            data = _decoder.decode(self.thread.store.artifacts.get(frame.artifact_id))
        return Record(seq=frame.seq, ts_ms=frame.ts_ms, kind=frame.kind, key=frame.key, data=data)

    def _fast_line(self, seq: int) -> bytes | None:
        """Frame ``seq``'s line read from the open log at the offset the index gives, checked
        as the store checks a read (sealed, its seq, chained to the digest the line before it
        stores); None when that is not possible or not so (the store's own read decides)."""
        if self._index is None or self._closed:
            return None
        at = self._index.offset(seq)
        if at is None:
            return None
        if self._log is None:
            self._log = self.thread.open_log()
            if self._log is None:
                return None
        log = self._log
        end = log.end
        if not 0 <= at < end:
            return None
        before = min(at, _SUFFIX + 1)
        chunk = log.pread(before + _FIRST_READ, at - before)
        line = chunk[before:]
        nl = line.find(b"\n")
        if nl >= 0:
            line = line[:nl]
        else:  # a line longer than the first read
            parts, pos = [line], at + len(line)
            while True:
                more = log.pread(min(1 << 20, end - pos), pos) if pos < end else b""
                if not more:
                    return None
                nl = more.find(b"\n")
                if nl >= 0:
                    parts.append(more[:nl])
                    break
                parts.append(more)
                pos += len(more)
            line = b"".join(parts)
        if at + len(line) >= end:
            return None
        if at == 0:
            prev = fr.GENESIS_DIGEST if seq == 0 else None
        elif seq == 0:
            prev = None
        else:
            tail = chunk[:before]
            prev = fr.stored_digest(tail[:-1]) if tail.endswith(b"\n") else None
        sealed = fr.unseal(line)
        if prev is None or sealed is None or fr.chain(prev, sealed[0]) != sealed[1]:
            return None
        env = fr.envelope(line)
        return line if env is not None and env.seq == seq else None


_SUFFIX: Final = fr.SEAL_SUFFIX_LEN
_FIRST_READ: Final = 8192
