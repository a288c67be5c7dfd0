"""Undo without deleting: take messages back out of the conversation, and keep every byte.

:func:`retract` appends one ``messages_retracted`` frame naming the messages (by seq or by
message id) and why. From that frame on, compile leaves them out of the window and passes over
the summaries that cover them, recall does not bring them back, ``log`` and search mark them as
retracted; a compile anchored before the frame is unchanged, and ``verify`` covers the log as
before. :func:`pop_message` takes back the newest message (the OpenAI Agents SDK's
``Session.pop_item``), :func:`clear_messages` all of them (``clear_session``), and
:func:`live_messages` lists what is still part of the conversation. ADR 0018.

Concurrent writers: :func:`retract` and :func:`pop_message` decide what to take back from the
log as it is at its head, and append the retraction only if nothing was appended after that head
(``expected_seq`` = head + 1); on :class:`~continuity.errors.SeqConflict` they read the log again
and decide again. So pops from any number of threads or processes at once each take a distinct
message, and a retraction by message id names the message that was latest when it committed.
:func:`clear_messages` retracts seqs ``1..head`` as it read them: a message appended after that
read stays live (it came after the clear), and it needs no retry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Final, TypeVar

from continuity import frames as fr
from continuity.caches.marks import Marks, is_in, merge_spans
from continuity.context.sources import ThreadSource, open_source
from continuity.errors import MessageNotFound, SeqConflict
from continuity.store.base import Thread

__all__ = ["clear_messages", "live_messages", "pop_message", "retract", "retracted_spans"]

_ID_LOOKBACK: Final = 1 << 20
"""How many frames back a message id is looked for (from the newest)."""
_MAX_TRIES: Final = 10_000
"""How often a retraction is decided again after another writer appended first. Every conflict
means some other append committed, so the writers as a whole always progress; the bound only
stops one caller from spinning forever behind a writer that never lets up."""

_T = TypeVar("_T")


def retracted_spans(thread: Thread, *, anchor_seq: int | None = None) -> list[tuple[int, int]]:
    """The retracted seqs as of ``anchor_seq`` (default: now), as sorted, merged spans."""
    return open_source(thread).marks().retracted(anchor_seq)


def retract(
    thread: Thread,
    *,
    seqs: Iterable[int] = (),
    message_ids: Iterable[str] = (),
    reason: str = "",
    durable: bool | None = None,
) -> int | None:
    """Take messages back: the ones at ``seqs`` and the latest live message with each of
    ``message_ids``. Returns the seq of the ``messages_retracted`` frame, or None when every
    message named is retracted already (nothing is appended then).

    :class:`MessageNotFound` for a seq that is not a message of the thread or an id no live
    message has; nothing is appended then either."""
    seqs = list(seqs)
    ids = list(message_ids)
    if not seqs and not ids:
        raise MessageNotFound("retract: name the messages to take back (seqs or message_ids)")

    def attempt() -> int | None:
        head = _head(thread)  # before anything else is read (see _append_after)
        source = open_source(thread)
        gone = source.marks().retracted()
        wanted: set[int] = set()
        for seq in seqs:
            if _message_at(source, seq) is None:
                raise MessageNotFound(
                    f"retract: seq {seq} is not a message of thread {thread.id!r}"
                )
            if not is_in(gone, seq):
                wanted.add(seq)
        if ids:
            wanted |= _seqs_of_ids(source, ids, gone, thread.id)
        if not wanted:
            return None
        spans = [
            fr.SeqSpan(from_seq=lo, to_seq=hi) for lo, hi in merge_spans((s, s) for s in wanted)
        ]
        retraction = fr.MessagesRetracted(spans=spans, reason=reason, message_ids=ids)
        return _append_after(thread, head, retraction, durable)

    return _retrying(attempt)


def pop_message(
    thread: Thread, *, reason: str = "pop", durable: bool | None = None
) -> fr.MessageAppended | None:
    """Take back the newest message that is still part of the conversation and return it
    (None when there is none). Pops at once from several threads or processes take distinct
    messages: the retraction commits only on the head the newest message was read at."""

    def attempt() -> fr.MessageAppended | None:
        head = _head(thread)  # before anything else is read (see _append_after)
        source = open_source(thread)
        found = _live(source, source.marks(), 1)
        if not found:
            return None
        newest = found[0]
        span = fr.SeqSpan(from_seq=newest.seq, to_seq=newest.seq)
        _append_after(thread, head, fr.MessagesRetracted(spans=[span], reason=reason), durable)
        return newest

    return _retrying(attempt)


def clear_messages(
    thread: Thread, *, reason: str = "clear", durable: bool | None = None
) -> int | None:
    """Take back every message of the thread; the seq of the retraction, or None when there
    was nothing to take back. The log keeps them all.

    The retraction names seqs ``1..head`` as read: a message another writer appends meanwhile
    stays live (it was added after the clear); a message popped meanwhile is named again,
    which changes nothing."""
    head = _head(thread)  # the log's own, as for a pop (see _append_after)
    if head < 1:
        return None
    source = open_source(thread)
    if not _live_seqs(source, source.marks(), 1, upto=head):
        return None
    frame = fr.MessagesRetracted(spans=[fr.SeqSpan(from_seq=1, to_seq=head)], reason=reason)
    return thread.append(frame, durable=durable)[0]


def live_messages(
    thread: Thread, *, limit: int | None = None, newest_first: bool = False
) -> list[fr.MessageAppended]:
    """The messages still part of the conversation (not retracted), oldest first (or newest
    first), at most ``limit`` of them — the newest ``limit`` either way."""
    source = open_source(thread)
    out = _live(source, source.marks(), limit)
    return out if newest_first else out[::-1]


def _head(thread: Thread) -> int:
    head = thread.head()
    return -1 if head is None else head.seq


def _append_after(thread: Thread, head: int, frame: fr.Frame, durable: bool | None) -> int:
    """Append ``frame`` only if the log has not grown past ``head`` (:class:`SeqConflict`
    else). ``head`` is the log's own, read before the source the frame was decided on is opened:
    the source then covers at least that much, so nothing up to ``head`` is unseen, whereas a
    head read from the caches later could be newer than the marks read before it."""
    return thread.append(frame, expected_seq=head + 1, durable=durable)[0]


def _retrying(attempt: Callable[[], _T]) -> _T:
    """``attempt()``, again after each :class:`SeqConflict` (each attempt reads the log anew)."""
    for _ in range(_MAX_TRIES - 1):
        try:
            return attempt()
        except SeqConflict:
            continue
    return attempt()


def _live(source: ThreadSource, marks: Marks, limit: int | None) -> list[fr.MessageAppended]:
    """The newest ``limit`` live messages (all: None), newest first, read in runs of
    consecutive seqs (one sequential read each) rather than one read per message."""
    seqs = _live_seqs(source, marks, limit)
    if not seqs:
        return []
    wanted = set(seqs)
    out: list[fr.MessageAppended] = []
    for lo, hi in _runs(seqs[::-1]):
        for frame in source.frames(lo, hi):
            if frame.seq in wanted and isinstance(frame, fr.MessageAppended):
                out.append(frame)
    out.reverse()
    return out


def _live_seqs(
    source: ThreadSource, marks: Marks, limit: int | None, *, upto: int | None = None
) -> list[int]:
    """The seqs of the newest ``limit`` live messages (at or before ``upto``), newest first,
    from the message index alone (retracted spans skipped without reading them)."""
    head = source.head_seq()
    if head is not None and upto is not None:
        head = min(head, upto)
    if head is None or limit == 0:
        return []
    gone = marks.retracted()
    out: list[int] = []
    o = source.message_count_upto(head) - 1
    while o >= 0:
        seq = source.message_seq(o)
        i = _span_index(gone, seq)
        if i is not None:
            o = source.message_count_upto(gone[i][0] - 1) - 1
            continue
        out.append(seq)
        if limit is not None and len(out) >= limit:
            break
        o -= 1
    return out


_RUN_GAP: Final = 32
"""Frames that are not wanted a run reads through before it stops and seeks instead."""


def _runs(seqs: Sequence[int]) -> Iterator[tuple[int, int]]:
    """``(from_seq, to_seq)`` runs covering ascending ``seqs``, split where a gap is wide."""
    lo = hi = seqs[0]
    for seq in seqs[1:]:
        if seq - hi > _RUN_GAP:
            yield lo, hi
            lo = seq
        hi = seq
    yield lo, hi


def _span_index(spans: Sequence[tuple[int, int]], seq: int) -> int | None:
    for i in range(len(spans) - 1, -1, -1):
        lo, hi = spans[i]
        if lo <= seq <= hi:
            return i
        if hi < seq:
            return None
    return None


def _message_at(source: ThreadSource, seq: int) -> fr.MessageAppended | None:
    head = source.head_seq()
    if head is None or not 0 <= seq <= head:
        return None
    frame = next(iter(source.frames(seq, seq)), None)
    return frame if isinstance(frame, fr.MessageAppended) else None


def _seqs_of_ids(
    source: ThreadSource, ids: list[str], gone: list[tuple[int, int]], thread_id: str
) -> set[int]:
    """The seq of the latest live message with each id (searching back from the newest)."""
    left = set(ids)
    found: set[int] = set()
    head = source.head_seq()
    if head is not None:
        for seq in range(head, max(-1, head - _ID_LOOKBACK), -1):
            if not left:
                break
            if is_in(gone, seq):
                continue
            frame = next(iter(source.frames(seq, seq)), None)
            if isinstance(frame, fr.MessageAppended) and frame.message_id in left:
                left.discard(frame.message_id)
                found.add(seq)
    if left:
        missing = ", ".join(repr(i) for i in ids if i in left)
        raise MessageNotFound(f"retract: no live message with id {missing} in {thread_id!r}")
    return found
