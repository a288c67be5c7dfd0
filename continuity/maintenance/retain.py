"""Prune, keeping the summary (ADR 0057 §9): the opt-in retention of the rolling design's cold
tier ("archive older than 30 days → prune, keeping the summary"), on top of ``prune``.

Before a thread is deleted, its cumulative summary through its last message — the newest
checkpoint when one covers it, else one made now by the built-in extractive summarizer, or the
agent's own when it wrote one — is kept as a small thread of its own, ``<id>.summary``: its
first frame names the thread it summarises (``meta.summary_of``) with the original's project
and agent, its one message holds the summary with the span it covers. Search, ``threads`` and
compile see it like any thread; the original's frames, artifacts and caches go as ``delete``
takes them, and its tombstone stays.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, NamedTuple

from continuity import frames as fr
from continuity.errors import ContinuityError, InvalidThreadId
from continuity.store.base import BaseStore, Thread, validate_thread_id

__all__ = ["KeptSummary", "is_summary_thread", "keep_summaries", "summary_thread_id"]

SUFFIX: Final = ".summary"


class KeptSummary(NamedTuple):
    """The summary kept for a pruned thread: the new thread's id and the span it covers."""

    thread_id: str
    summary_thread_id: str
    to_seq: int
    made_now: bool
    """True when no checkpoint covered the thread's last message and one was made."""


def summary_thread_id(thread_id: str) -> str:
    """The id of the thread that keeps ``thread_id``'s summary."""
    wanted = f"{thread_id}{SUFFIX}"
    try:
        return validate_thread_id(wanted)
    except InvalidThreadId:  # too long: a shorter, stable name
        import blake3

        return f"{thread_id[:80]}-{blake3.blake3(thread_id.encode()).hexdigest()[:16]}{SUFFIX}"


def _first(thread: Thread) -> fr.ThreadCreated | None:
    for _seq, line in thread.read_lines(from_seq=0, to_seq=0):
        frame = fr.decode_frame(line)
        return frame if isinstance(frame, fr.ThreadCreated) else None
    return None


def is_summary_thread(store: BaseStore, thread_id: str) -> bool:
    """Whether ``thread_id`` is a summary kept by :func:`keep_summaries` (which pruning with
    summaries kept leaves alone: it is what was kept)."""
    if not thread_id.endswith(SUFFIX):
        return False
    first = _first(store.thread(thread_id))
    return first is not None and "summary_of" in first.meta


def _span(thread: Thread) -> tuple[int, int]:
    """(first, last) ``ts_ms`` of the thread's frames."""
    first = last = 0
    for _seq, line in thread.read_lines(from_seq=0, to_seq=0):
        first = fr.decode_frame(line).ts_ms
    for _seq, line in thread.read_lines_backwards():
        last = fr.decode_frame(line).ts_ms
        break
    return first, last


def _summary_through_last_message(
    store: BaseStore, thread: Thread
) -> tuple[fr.CompactionCheckpointCreated, bool] | None:
    """The newest checkpoint covering the thread's last message, made now if none does (None
    for a thread without a message)."""
    from continuity.context.compaction import create_checkpoint, pair_safe_cut
    from continuity.context.sources import open_source

    source = open_source(thread)
    head = source.head_seq()
    if head is None or source.message_count_upto(head) == 0:
        return None
    last = pair_safe_cut(source, head)
    found = thread.tail(1, types=["compaction_checkpoint_created"])
    if found and isinstance(found[-1], fr.CompactionCheckpointCreated):
        newest = found[-1]
        if newest.to_seq >= last and newest.from_seq == 0:
            return newest, False
    return create_checkpoint(thread, last, produced_by="continuity prune --keep-summaries"), True


def keep_summaries(
    store: BaseStore, thread_ids: Sequence[str], *, now_ms: int
) -> list[KeptSummary]:
    """Keep the summary of each of ``thread_ids`` as a thread of its own (see the module), before
    they are deleted. A thread with no message keeps nothing; running again after a crash finds
    the summary thread already made and makes no second one."""
    from continuity.retrieval.documents import summary_text

    kept: list[KeptSummary] = []
    for tid in thread_ids:
        thread = store.existing_thread(tid)
        target = summary_thread_id(tid)
        existing = store.thread(target)
        if existing.head() is not None:
            made = _first(existing)
            if made is None or made.meta.get("summary_of") != tid:
                raise ContinuityError(
                    f"thread {target} exists and is not the summary of {tid}: nothing was pruned"
                )
            kept.append(KeptSummary(tid, target, int(made.meta.get("to_seq", "-1")), False))
            continue
        found = _summary_through_last_message(store, thread)
        if found is None:
            continue
        checkpoint, made_now = found
        text = summary_text(store, checkpoint)
        if text is None:
            raise ContinuityError(
                f"thread {tid}: the summary of checkpoint {checkpoint.checkpoint_id} cannot be "
                "read (run `continuity verify`): nothing was pruned"
            )
        origin = _first(thread)
        first_ms, last_ms = _span(thread)
        title = (origin.title if origin is not None else None) or tid
        meta = {k: v for k, v in (origin.meta if origin is not None else {}).items()}
        meta.update(
            {
                "summary_of": tid,
                "to_seq": str(checkpoint.to_seq),
                "first_ms": str(first_ms),
                "last_ms": str(last_ms),
                "pruned_ms": str(now_ms),
                "summary_by": checkpoint.produced_by,
            }
        )
        header = (
            f"Summary of thread {tid} ({title}), frames 0-{checkpoint.to_seq}, kept when the "
            "thread was pruned (continuity prune --keep-summaries)."
        )
        store.thread(target).append(
            [
                fr.ThreadCreated(thread_id=target, title=f"Summary of {title}", meta=meta),
                fr.message("assistant", f"{header}\n\n{text}"),
            ]
        )
        kept.append(KeptSummary(tid, target, checkpoint.to_seq, made_now))
    return kept
