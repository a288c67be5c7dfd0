"""Fork: a new thread that starts from another thread at seq N, and says so (ADR 0018).

The fork's frame 0 is its ``thread_created`` with ``parent_thread_id`` and ``fork_of`` (a
:class:`~continuity.frames.ForkPoint`: the source thread, the seq N, and the source's stored
digest of frame N, so the fork names exactly which history it took). Frames 1 to N of the
source follow, copied **at the same seqs**: each is decoded, its ``digest`` and ``more``
cleared, and appended through the ordinary :meth:`Thread.append`, so it is re-chained in the
new thread, checked and redacted like any append. Artifacts are shared by content address (the
fork lives in the same store). Because the seqs are the same, everything that names a seq —
checkpoints' ``to_seq``, decisions, retractions, anchors — means the same in the fork: a
compile of the fork at any anchor up to N gives the source's bundle (but for ``thread_id``).

The copy goes in batches (at most :data:`_BATCH_FRAMES` frames or :data:`_BATCH_BYTES` bytes
of stored lines each), so memory stays bounded however long the source is. A batch is
all-or-nothing, so a fork cut short by a crash holds frames 0 to k, k < N: calling
:func:`fork` again with the same arguments finds it (the same ``fork_of``) and goes on from
k + 1. Called again on a finished fork, it returns it as it is: ``fork`` is idempotent.

The source may be appended to while it is forked: only frames up to N are read. N may be any
seq, in the middle of one of the source's batches too (a frame with ``more`` set): the fork
batches its copies its own way, and the frames after N of that batch are simply not part of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, overload

import msgspec

from continuity import frames as fr
from continuity.errors import AnchorNotFound, BadFrame, CorruptFrame
from continuity.store.base import BaseStore, Head, Thread, resolve_thread

__all__ = ["fork", "fork_point"]

_BATCH_FRAMES: Final = 10_000
"""At most this many frames are copied in one batch."""
_BATCH_BYTES: Final = 16 << 20
"""A batch is also closed once the source lines it copies reach this many bytes."""


@overload
def fork(
    source: Thread,
    new_thread_id: str,
    /,
    *,
    at_seq: int | None = None,
    title: str | None = None,
    meta: Mapping[str, str] | None = None,
) -> Thread: ...
@overload
def fork(
    source: BaseStore,
    thread_id: str,
    new_thread_id: str,
    /,
    *,
    at_seq: int | None = None,
    title: str | None = None,
    meta: Mapping[str, str] | None = None,
) -> Thread: ...
def fork(
    source: BaseStore | Thread,
    /,
    *ids: str,
    at_seq: int | None = None,
    title: str | None = None,
    meta: Mapping[str, str] | None = None,
) -> Thread:
    """Fork a thread into a new thread of the same store, from its frame ``at_seq`` (default:
    its last frame): ``fork(thread, "new-id")`` with a thread handle, or
    ``fork(store, "thread-id", "new-id")``. Returns the new thread's handle.

    The new thread's ``thread_created`` says where it comes from (``fork_of``, and
    ``parent_thread_id``); it takes ``title`` (default: the source's title; ``""`` for none)
    and ``meta``. Frames 1 to ``at_seq`` of the source follow at the same seqs; the caller's
    own frames go after them.

    A fork cut short (a crash, a kill) is finished by calling ``fork`` again with the same
    arguments; on a finished fork that call returns it unchanged. With ``at_seq`` left out,
    an existing fork of this source keeps the seq it was made at.

    Raises :class:`~continuity.errors.ThreadNotFound` if the source has no frames,
    :class:`~continuity.errors.AnchorNotFound` if ``at_seq`` is outside its seqs,
    :class:`~continuity.errors.InvalidThreadId` for a bad new id,
    :class:`~continuity.errors.BadFrame` if the new id is the source's own or is taken by a
    thread that is not this fork, and :class:`~continuity.errors.JobInFlight` if another fork
    into the same id is running.
    """
    match source, ids:
        case Thread(), (str() as new_id,):
            src = resolve_thread(source)
        case BaseStore(), (str() as thread_id, str() as new_id):
            src = resolve_thread(source, thread_id)
        case _:
            raise TypeError("fork(thread, new_thread_id) or fork(store, thread_id, new_thread_id)")
    if at_seq is not None and (isinstance(at_seq, bool) or not isinstance(at_seq, int)):
        raise TypeError(f"at_seq must be an int (a seq), not {type(at_seq).__name__}")
    store = src.store
    target = store.thread(new_id)  # a bad id fails here (InvalidThreadId)
    if target.id == src.id:
        raise BadFrame(f"cannot fork thread {src.id!r} into itself: name a new thread")
    head = src.head()
    if head is None:  # resolve_thread saw frames; nothing deletes them, but be exact
        raise AnchorNotFound(f"thread {src.id!r} has no frames to fork")
    if at_seq is not None and not 0 <= at_seq <= head.seq:
        raise AnchorNotFound(
            f"cannot fork thread {src.id!r} at seq {at_seq}: its seqs are 0..{head.seq}"
        )
    with store.job_lock(target.id, "fork"):
        _fork(src, target, head, at_seq, title, meta)
    return target


def fork_point(target: BaseStore | Thread, thread_id: str | None = None) -> fr.ForkPoint | None:
    """Where a thread was forked from (its frame 0's ``fork_of``), or None when it is not a
    fork: ``fork_point(thread)`` or ``fork_point(store, thread_id)``."""
    thread = resolve_thread(target, thread_id)
    return _fork_of(_first_frame(thread))


# --- the copy -------------------------------------------------------------------------------


def _fork(
    src: Thread,
    target: Thread,
    head: Head,
    at_seq: int | None,
    title: str | None,
    meta: Mapping[str, str] | None,
) -> None:
    existing = target.head()
    if existing is None:
        seq = head.seq if at_seq is None else at_seq
        point = fr.ForkPoint(thread_id=src.id, seq=seq, digest=_digest_at(src, seq, head))
        if title is None:
            first = _first_frame(src)
            title = first.title if isinstance(first, fr.ThreadCreated) else None
        created = fr.ThreadCreated(
            thread_id=target.id,
            title=title or None,
            parent_thread_id=src.id,
            meta=dict(meta or {}),
            fork_of=point,
        )
        _copy(src, target, point, 1, created)
        return
    point = _resumable(src, target, existing, head, at_seq)
    done = min(existing.seq, point.seq)
    if done > 0:
        _check_copy(src, target, point, done)
    if done < point.seq:
        _copy(src, target, point, done + 1, None)


def _resumable(
    src: Thread, target: Thread, existing: Head, head: Head, at_seq: int | None
) -> fr.ForkPoint:
    """The fork point of ``target`` when it is a fork of ``src`` that this call may finish or
    return; :class:`BadFrame` saying what it is otherwise."""
    taken = f"thread {target.id!r} already exists"
    use = "fork into a new thread id"
    point = _fork_of(_first_frame(target))
    if point is None:
        frames = existing.seq + 1
        raise BadFrame(
            f"{taken} and is not a fork ({frames} frame{'s' if frames != 1 else ''}): {use}"
        )
    if point.thread_id != src.id:
        raise BadFrame(f"{taken} as a fork of {point.thread_id!r} at seq {point.seq}: {use}")
    if at_seq is not None and at_seq != point.seq:
        raise BadFrame(
            f"{taken} as a fork of {src.id!r} at seq {point.seq}, not at seq {at_seq}: {use}"
        )
    if point.seq > head.seq or _digest_at(src, point.seq, head) != point.digest:
        raise BadFrame(
            f"{taken} as a fork of {src.id!r} at seq {point.seq}, but frame {point.seq} of "
            f"{src.id!r} is no longer the frame it was forked from (its digest differs): {use}"
        )
    return point


def _copy(
    src: Thread,
    target: Thread,
    point: fr.ForkPoint,
    start: int,
    created: fr.ThreadCreated | None,
) -> None:
    """Copy frames ``start`` to ``point.seq`` of ``src`` to the same seqs of ``target``
    (after ``created``, its frame 0, when the fork is new), batch by batch."""
    batch: list[fr.Frame] = [] if created is None else [created]
    first = 0 if created is not None else start  # the seq batch[0] gets
    size = 0
    expect = start
    replace = msgspec.structs.replace
    for seq, line in src.read_lines(from_seq=start, to_seq=point.seq):
        if seq != expect:  # a backend keeps seqs contiguous; never copy into the wrong seq
            raise CorruptFrame(src.id, expect, -1, f"seq {seq} where {expect} belongs")
        if seq == point.seq and _line_digest(src, seq, line) != point.digest:
            raise BadFrame(
                f"frame {seq} of {src.id!r} changed while it was forked (its digest differs "
                f"from the fork point's): the fork {target.id!r} stops at seq {first - 1}"
            )
        batch.append(replace(src.decode(seq, line), digest="", more=False))
        size += len(line)
        expect = seq + 1
        if len(batch) >= _BATCH_FRAMES or size >= _BATCH_BYTES:
            _append(src, target, batch, first)
            first += len(batch)
            batch, size = [], 0
    if batch:
        _append(src, target, batch, first)
    if expect <= point.seq:
        raise AnchorNotFound(
            f"thread {src.id!r} ends at seq {expect - 1}, before the fork point {point.seq}: "
            f"the fork {target.id!r} stops there"
        )


def _append(src: Thread, target: Thread, batch: list[fr.Frame], first: int) -> None:
    try:
        target.append(batch, expected_seq=first)
    except BadFrame as exc:
        last = first + len(batch) - 1
        raise BadFrame(
            f"copying seqs {first}..{last} of {src.id!r} into the fork {target.id!r}: {exc}"
        ) from None


def _check_copy(src: Thread, target: Thread, point: fr.ForkPoint, seq: int) -> None:
    """Frame ``seq`` of the fork must be the copy of the source's (what ``_copy`` appended,
    as the store's redactor left it): else something else was appended to the unfinished
    fork, and finishing it would put the source's frames after foreign ones."""
    theirs = _frame_at(src, seq)
    ours = _frame_at(target, seq)
    expected: fr.Frame | None = None
    if theirs is not None:
        expected = msgspec.structs.replace(theirs, digest="", more=False)
        redact = target.store.redactor
        expected = fr.normalize(redact(expected) if redact is not None else expected)
    if ours is None or msgspec.structs.replace(ours, digest="", more=False) != expected:
        raise BadFrame(
            f"thread {target.id!r} is a fork of {src.id!r} at seq {point.seq}, but its frame "
            f"{seq} is not the copy of {src.id!r}'s: something else was appended to it; "
            "fork into a new thread id"
        )


# --- reading one frame ----------------------------------------------------------------------


def _first_frame(thread: Thread) -> fr.Frame | None:
    return next(iter(thread.read(to_seq=0)), None)


def _fork_of(frame: fr.Frame | None) -> fr.ForkPoint | None:
    return frame.fork_of if isinstance(frame, fr.ThreadCreated) else None


def _frame_at(thread: Thread, seq: int) -> fr.Frame | None:
    for found, line in thread.read_lines(from_seq=seq, to_seq=seq):
        return thread.decode(found, line) if found == seq else None
    return None


def _line_digest(thread: Thread, seq: int, line: bytes) -> str:
    digest = fr.stored_digest(line)
    if digest is None:
        raise CorruptFrame(thread.id, seq, -1, "not a sealed frame")
    return digest.hex()


def _digest_at(thread: Thread, seq: int, head: Head) -> str:
    """The stored digest of frame ``seq`` (the head's without a read)."""
    if seq == head.seq:
        return head.digest
    for found, line in thread.read_lines(from_seq=seq, to_seq=seq):
        if found == seq:
            return _line_digest(thread, seq, line)
    raise AnchorNotFound(f"thread {thread.id!r} has no frame {seq}")
