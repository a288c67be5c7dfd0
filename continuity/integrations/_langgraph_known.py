"""What a saver's own writes tell it about a thread, so a ``put`` need not bring the record index
up to the log's end first (ADR 0059).

A ``put`` asks a handful of questions of its thread's records (its parent's record, the
tombstones that could hide it, the mirror's latest record, whether its namespace is known). The
first put of a thread in a process answers them from a :class:`~continuity.context.records.
RecordView` (which catches the thread's caches up: reading, indexing and committing the frames
appended since, a manifest renamed each time) and :class:`Memo` keeps the answers. The saver then
adds the records it appends itself, and the next put answers from that memo — as long as the
log's head is still the last frame this process appended (nobody else wrote since: a head
checked under the thread's lock, before the batch, whose append names the seq it expects). A
question the memo cannot answer raises :class:`Unknown` and the put takes a full view again.
The caches are caught up by the next reader (``get_tuple``, ``compile``, the CLI), once for
every frame appended since.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from continuity import frames as fr
from continuity.context.records import Record, RecordView
from continuity.integrations._langgraph_log import checkpoint_key
from continuity.store.base import Thread

__all__ = ["Known", "Memo", "OwnWrites", "Unknown"]


class Unknown(LookupError):
    """The memo does not know the answer: take a full view."""


_Answers = dict[tuple[str, str | None], Record | None]


class Memo:
    """A full view whose answers (latest record of a kind and key, as of its snapshot) are
    kept, to answer the same questions later."""

    def __init__(self, view: RecordView) -> None:
        self.view = view
        self.thread = view.thread
        self.answers: _Answers = {}

    @property
    def last_seq(self) -> int:
        return self.view.last_seq

    def latest(
        self, kind: str, key: str | None = None, *, at_or_before: int | None = None
    ) -> Record | None:
        found = self.view.latest(kind, key, at_or_before=at_or_before)
        if at_or_before is None:
            self.answers[(kind, key)] = found
        return found

    def records(
        self,
        kind: str,
        key: str | None = None,
        *,
        at_or_before: int | None = None,
        limit: int | None = None,
    ) -> Iterator[Record]:
        return self.view.records(kind, key, at_or_before=at_or_before, limit=limit)

    def read(self, seq: int) -> Record:
        return self.view.read(seq)


class Known:
    """A thread's answers as of ``head_seq`` (the last frame this process appended), with the
    checkpoint keys it appended meanwhile (a ``removed`` tombstone older than a record does not
    hide it, so for those the memo knows enough without asking)."""

    def __init__(self, thread: Thread, head_seq: int, answers: _Answers) -> None:
        self.thread = thread
        self.head_seq = head_seq
        self.answers = answers
        self.own: set[str] = set()
        self.fresh: set[str] = set()
        """Checkpoint keys put in a graph run since the memo began: LangGraph made their ids
        for that put, so the log holds no record of them from before (ADR 0065)."""

    @property
    def last_seq(self) -> int:
        return self.head_seq

    def latest(
        self, kind: str, key: str | None = None, *, at_or_before: int | None = None
    ) -> Record | None:
        if at_or_before is not None:
            raise Unknown(kind)
        try:
            return self.answers[(kind, key)]
        except KeyError:
            if kind == "langgraph.removed" and key in self.own:
                return None
            raise Unknown(kind) from None

    def records(self, *_args: Any, **_kwargs: Any) -> Iterator[Record]:
        raise Unknown("records")

    def checkpoint(self, ns: str, checkpoint_id: str | None) -> Record | None:
        """The record of checkpoint ``checkpoint_id`` of ``ns`` (its namespace's latest when
        None) when this process put it in a graph run since the memo began (so no tombstone
        and no other writer came after it: it is visible, the latest pointer of its
        namespace is the newest one, and every write of it is this process's); None when the
        memo cannot vouch for it."""
        if checkpoint_id is None:
            pointer = self.answers.get(("langgraph.latest", ns))
            if pointer is None:
                return None
            checkpoint_id = str(pointer.data["id"])
        else:
            pointer = None
        key = checkpoint_key(ns, checkpoint_id)
        if key not in self.fresh:
            return None
        rec = self.answers.get(("langgraph.checkpoint", key))
        if rec is None or (pointer is not None and rec.seq != pointer.seq - 1):
            return None  # a pointer comes right after its record, in the put's batch
        return rec

    def read(self, seq: int) -> Record:
        raise Unknown("read")

    def appended(self, given: range, frames: Sequence[fr.Frame]) -> bool:
        """Add a batch this process appended at ``given``; False when the memo cannot follow
        (the batch did not come right after its head, or a record's data went to an
        artifact)."""
        if given.start != self.head_seq + 1 or len(given) != len(frames):
            return False
        for seq, frame in zip(given, frames, strict=True):
            if not isinstance(frame, fr.RecordAppended):
                continue
            if frame.artifact_id is not None:
                return False
            rec = Record(seq=seq, ts_ms=0, kind=frame.kind, key=frame.key, data=frame.data)
            self.answers[(frame.kind, frame.key)] = rec
            self.answers[(frame.kind, None)] = rec
            if frame.kind == "langgraph.checkpoint":
                self.own.add(frame.key)
        self.head_seq = given.stop - 1
        return True


class OwnWrites:
    """The ``langgraph.writes`` records this process appended to one thread, by checkpoint
    key, oldest first (the newest :data:`KEYS` keys), so a ``get_tuple`` answered from the memo
    has its checkpoint's pending writes without reading the log (ADR 0065).

    LangGraph can append a task's writes for a checkpoint before that checkpoint's ``put``
    (``durability="async"`` runs both in the background), so the writes of a key must be kept
    from before the key's checkpoint is known. A key dropped to bound memory is remembered as
    dropped (its reads go to the log again); past :data:`FORGOTTEN` of those, or for a thread
    whose writes were dropped whole (``given_up``), every read goes to the log."""

    KEYS = 16
    FORGOTTEN = 10_000

    def __init__(self, *, given_up: bool = False) -> None:
        self.by_key: dict[str, list[Record]] = {}
        self.forgotten: set[str] = set()
        self.given_up = given_up

    def add(self, key: str, rec: Record) -> None:
        if self.given_up:
            return
        kept = self.by_key.pop(key, [])
        kept.append(rec)
        self.by_key[key] = kept  # the most recently written key last
        if len(self.by_key) > self.KEYS:
            for old in list(self.by_key)[: self.KEYS // 2]:
                del self.by_key[old]
                self.forgotten.add(old)
            if len(self.forgotten) > self.FORGOTTEN:
                self.by_key.clear()
                self.forgotten.clear()
                self.given_up = True

    def of(self, key: str) -> list[Record] | None:
        """The writes of ``key`` this process appended, oldest first; None when it may have
        dropped some."""
        if self.given_up or key in self.forgotten:
            return None
        return list(self.by_key.get(key, ()))
