"""Search hits that lead somewhere (ADR 0034, issue 17).

A ranked hit names a frame; :func:`lead` says where it leads, from the frames it names:

- a **summary** hit (a ``compaction_checkpoint_created``) carries ``covers``, the seq range
  ``[from_seq, to_seq]`` of the messages its summary stands for;
- a hit in a thread whose ``thread_created`` names a parent (a Claude Code subagent, a fork)
  carries ``parent_thread_id``;
- the assistant message frames of one **merged response** — same thread, same ``message_id``
  before any ``#`` (Claude Code's ingest gives a late line of an archived response the id
  ``<response id>#<uuid8>``) — are one hit: the best-ranked one, naming the others' seqs in
  ``also``. Tool results and observations are documents of their own and stay hits of their
  own.

Collapsing makes fewer hits than candidates, so the caller ranks :func:`candidates` of them for
``k`` and asks again with more when the cut leaves fewer than ``k`` while the ranking may hold
more. Each thread's first frame is read once, and each summary or assistant hit's frame once,
through the thread's offset index when it has one: O(hits), never O(history).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import msgspec

from continuity import frames as fr
from continuity.caches.thread_index import ThreadIndex
from continuity.retrieval.ranking import Hit
from continuity.store.base import Thread

__all__ = ["candidates", "lead", "response_of"]


def candidates(k: int) -> int:
    """How many ranked hits to ask for so that ``k`` usually remain once the parts of merged
    responses are collapsed (a Claude Code response rarely has more than one late part)."""
    return k + max(4, k // 2)


def response_of(message_id: str) -> str:
    """The id of the response a message frame belongs to: its ``message_id`` up to a ``#``."""
    return message_id.partition("#")[0]


class _Reader:
    """One frame at a seq of the hits' threads, each thread's reader made once."""

    def __init__(
        self,
        threads: Mapping[str, Thread],
        frames: dict[tuple[str, int], fr.Frame] | None = None,
    ) -> None:
        self.threads = threads
        self._read: dict[str, Callable[[int], fr.Frame | None]] = {}
        self._parents: dict[str, str] = {}
        self.frames = frames if frames is not None else {}

    def frame(self, thread_id: str, seq: int) -> fr.Frame | None:
        found = self.frames.get((thread_id, seq))
        if found is not None:
            return found
        read = self._read.get(thread_id)
        if read is None:
            read = self._read[thread_id] = _reader(self.threads[thread_id])
        found = read(seq)
        if found is not None:
            self.frames[(thread_id, seq)] = found
        return found

    def parent(self, thread_id: str) -> str:
        found = self._parents.get(thread_id)
        if found is None:
            first = self.frame(thread_id, 0)
            parent = first.parent_thread_id if isinstance(first, fr.ThreadCreated) else None
            found = self._parents[thread_id] = parent or ""
        return found


def _reader(thread: Thread) -> Callable[[int], fr.Frame | None]:
    if ThreadIndex.available(thread):
        index = ThreadIndex(thread)  # straight to the line (search has just refreshed it)
        return lambda seq: next(index.read(seq, seq), None)
    return lambda seq: next(iter(thread.read(from_seq=seq, to_seq=seq)), None)


def lead(
    threads: Mapping[str, Thread],
    hits: Sequence[Hit],
    k: int,
    frames: dict[tuple[str, int], fr.Frame] | None = None,
) -> list[Hit]:
    """The best ``k`` of ``hits`` (ranked, best first, of the given thread handles: the
    search's own, so no thread is looked up again) with where each leads: a summary's
    ``covers``, a thread's ``parent_thread_id``, and one hit per merged assistant response
    (the best-ranked part, the other parts' seqs in ``also``, ascending). Parts ranked after
    the ``k``-th kept hit are still named in ``also``; nothing else about a hit changes.
    ``frames``: the frames read, by (thread id, seq), kept for the caller (the snippets)."""
    reader = _Reader(threads, frames)
    kept: list[Hit] = []
    also: list[list[int]] = []
    response_at: dict[tuple[str, str], int] = {}  # (thread, response id) → index in kept
    answering: set[str] = set()  # threads with a kept response: past the cut, the only ones read
    for h in hits:
        full = len(kept) >= k  # past the cut, a hit only adds to a kept response's ``also``
        if full and h.thread_id not in answering:
            continue  # no kept response of its thread for it to be part of: not read
        if h.kind == "message" and h.role == "assistant":
            frame = reader.frame(h.thread_id, h.seq)
            if isinstance(frame, fr.MessageAppended) and frame.message_id:
                key = (h.thread_id, response_of(frame.message_id))
                at = response_at.get(key)
                if at is not None:
                    also[at].append(h.seq)
                    continue
                if not full:
                    response_at[key] = len(kept)
                    answering.add(h.thread_id)
        if full:
            continue
        covers: list[int] = []
        if h.kind == "summary":
            frame = reader.frame(h.thread_id, h.seq)
            if isinstance(frame, fr.CompactionCheckpointCreated):
                covers = [frame.from_seq, frame.to_seq]
        parent = reader.parent(h.thread_id)
        kept.append(msgspec.structs.replace(h, covers=covers, parent_thread_id=parent))
        also.append([])
    return [
        msgspec.structs.replace(h, also=sorted(seqs)) if seqs else h
        for h, seqs in zip(kept, also, strict=True)
    ]
