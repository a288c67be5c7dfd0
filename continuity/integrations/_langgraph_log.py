"""How a LangGraph thread's checkpoints, writes and tombstones lie in its continuity thread.

Everything is a ``record_appended`` frame (ADR 0023), found by kind and key through the record
index, so each lookup is O(log n) in the thread's records and one frame read:

- ``langgraph.checkpoint``, key ``[ns, id]`` (JSON): one per ``put`` — the checkpoint without
  its channel values, its metadata (both as the serializer's typed bytes), its parent, and
  per channel the version and the artifact holding that version's value; the message mirror's
  position (:mod:`._langgraph_mirror`).
- ``langgraph.latest``, key ``ns``: right after each checkpoint record, in the same batch: the
  newest checkpoint of a namespace is one lookup, and a namespace's checkpoints are listed
  newest first without touching the other namespaces'.
- ``langgraph.namespace``, key ``ns``: once per namespace, so a listing of every namespace
  knows them without a scan.
- ``langgraph.writes``, key ``[ns, id]``: one per ``put_writes`` call.
- ``langgraph.deleted`` (key ``""``), ``langgraph.pruned`` (key ``ns``) and
  ``langgraph.removed`` (key ``[ns, id]``): tombstones. The log keeps every byte; reads pass over
  what a tombstone after it covers (:class:`Cuts`).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any, Final

import msgspec
from langchain_core.runnables import RunnableConfig

from continuity import frames as fr
from continuity.context.records import Record, RecordView
from continuity.integrations._langgraph_values import Bases, value_bytes
from continuity.store.base import MAX_RECORD_DATA, BaseStore

__all__ = [
    "CHECKPOINT",
    "DELETED",
    "FORK",
    "LATEST",
    "META_BRANCH",
    "META_NS",
    "META_SUBGRAPH",
    "META_THREAD",
    "MIRROR",
    "NAMESPACE",
    "PRUNED",
    "REMOVED",
    "SUBGRAPH",
    "WRITES",
    "Cuts",
    "CyclicHistory",
    "ancestors",
    "blob_value",
    "checkpoint_key",
    "config_of",
    "empty_mirror",
    "find_checkpoint",
    "from_typed",
    "namespaces",
    "newest_checkpoints",
    "record_frame",
    "seq_past_id",
    "to_typed",
]

CHECKPOINT: Final = "langgraph.checkpoint"
LATEST: Final = "langgraph.latest"
NAMESPACE: Final = "langgraph.namespace"
WRITES: Final = "langgraph.writes"
DELETED: Final = "langgraph.deleted"
PRUNED: Final = "langgraph.pruned"
REMOVED: Final = "langgraph.removed"
MIRROR: Final = "langgraph.mirror"
FORK: Final = "langgraph.fork"
SUBGRAPH: Final = "langgraph.subgraph"
META_THREAD: Final = "langgraph.thread_id"
"""The key, in frame 0's ``meta``, of the LangGraph thread a continuity thread holds."""
META_BRANCH: Final = "langgraph.branch_checkpoint_id"
"""The key, in a mirror fork's frame 0, of the checkpoint its branch starts at (a fork made
before issue 27) or ends at (a branch left behind)."""
META_SUBGRAPH: Final = "langgraph.subgraph_of"
"""The key, in a subgraph mirror's frame 0, of the LangGraph thread it belongs to."""
META_NS: Final = "langgraph.checkpoint_ns"
"""The key, in a subgraph mirror's frame 0, of the subgraph's node path."""
_encoder: Final = msgspec.json.Encoder()


def checkpoint_key(ns: str, checkpoint_id: str) -> str:
    """The key of a checkpoint's records: unambiguous whatever characters ``ns`` holds
    (LangGraph's nested namespaces use ``|`` and ``:``)."""
    return json.dumps([ns, checkpoint_id], separators=(",", ":"), ensure_ascii=False)


def config_of(thread_id: Any, ns: str, checkpoint_id: str | None) -> RunnableConfig:
    """The config naming a checkpoint (or a namespace's latest, with no ``checkpoint_id``)."""
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ns}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def record_frame(store: BaseStore, kind: str, data: dict[str, Any], key: str) -> fr.Frame:
    """A record frame for a batch; data larger than a frame holds goes to an artifact, as
    :func:`continuity.context.records.record` does it (reads give it back either way)."""
    body = _encoder.encode(data)
    if len(body) > MAX_RECORD_DATA:
        aid = store.artifacts.put(body)
        return fr.RecordAppended(kind=kind, key=key, artifact_id=aid, size=len(body))
    return fr.RecordAppended(kind=kind, key=key, data=data)


def empty_mirror() -> fr.Frame:
    """The ``langgraph.mirror`` record of a thread whose mirror shows nothing."""
    return fr.RecordAppended(kind=MIRROR, data={"checkpoint_id": None, "map": None, "messages": 0})


def to_typed(typed: tuple[str, bytes]) -> list[str]:
    """A serializer's ``(type, bytes)`` as JSON: ``[type, base64]``."""
    return [typed[0], base64.b64encode(typed[1]).decode("ascii")]


def from_typed(value: list[str]) -> tuple[str, bytes]:
    return value[0], base64.b64decode(value[1])


def blob_value(
    store: BaseStore, blob: list[Any], bases: Bases | None = None
) -> tuple[str, bytes] | None:
    """A checkpoint record's channel entry as typed serializer bytes: ``[version, type,
    artifact id]`` (the artifact's bytes), ``[version, type, "", base64]`` (inline) or
    ``[version, type, "delta:<base id>", base64]`` (a delta against an artifact,
    :mod:`._langgraph_values`, whose bytes ``bases`` may hold); None for ``[version]`` (an
    empty channel)."""
    return value_bytes(store, blob, bases)


class Cuts:
    """What the tombstones of one thread hide, read once per view (three lookups at most):
    a checkpoint record is visible when it comes after the thread's last ``deleted``, at or
    after its namespace's last ``pruned`` keep point, and after any ``removed`` of its key."""

    def __init__(self, view: RecordView) -> None:
        self.view = view
        deleted = view.latest(DELETED)
        self.deleted = -1 if deleted is None else deleted.seq
        self._pruned: dict[str, tuple[int, list[str]]] = {}
        self._removed: dict[str, int] = {}

    def _prune(self, ns: str) -> tuple[int, list[str]]:
        if ns not in self._pruned:
            rec = self.view.latest(PRUNED, ns)
            if rec is None or rec.seq <= self.deleted:
                self._pruned[ns] = (-1, [])
            else:
                self._pruned[ns] = (rec.data["keep"], list(rec.data.get("chain", ())))
        return self._pruned[ns]

    def pruned_before(self, ns: str) -> int:
        """Checkpoint records of ``ns`` below this seq are pruned (but :meth:`kept_chain`)."""
        return self._prune(ns)[0]

    def kept_chain(self, ns: str) -> list[str]:
        """The ids, newest first, of the ancestors a prune of ``ns`` kept below its keep point:
        what the kept checkpoint's delta channels are read back from."""
        return self._prune(ns)[1]

    def removed_at(self, key: str) -> int:
        """The seq of the last ``removed`` tombstone of ``key`` (-1: none)."""
        if key not in self._removed:
            rec = self.view.latest(REMOVED, key)
            self._removed[key] = -1 if rec is None else rec.seq
        return self._removed[key]

    def visible(self, rec: Record) -> bool:
        if rec.seq <= self.deleted:
            return False
        data = rec.data
        keep, chain = self._prune(data["ns"])
        if rec.seq < keep and data["id"] not in chain:
            return False
        return rec.seq > self.removed_at(checkpoint_key(data["ns"], data["id"]))

    def writes_after(self, key: str) -> int:
        """Writes of ``key`` at or below this seq are hidden (deleted or removed)."""
        return max(self.deleted, self.removed_at(key))


def find_checkpoint(cuts: Cuts, ns: str, checkpoint_id: str) -> Record | None:
    """The visible checkpoint record of ``(ns, checkpoint_id)`` (its latest put), or None."""
    rec = cuts.view.latest(CHECKPOINT, checkpoint_key(ns, checkpoint_id))
    return rec if rec is not None and cuts.visible(rec) else None


def newest_checkpoints(
    cuts: Cuts, ns: str | None, *, before_seq: int | None = None
) -> Iterator[Record]:
    """The visible checkpoint records of namespace ``ns`` (every namespace: None), newest
    first, each checkpoint once (at its latest put), below ``before_seq`` when given. Reads
    only as far as the caller iterates."""
    view = cuts.view
    at_or_before = None if before_seq is None else before_seq - 1
    seen: set[str] = set()
    if ns is None:
        for rec in view.records(CHECKPOINT, at_or_before=at_or_before):
            if rec.seq <= cuts.deleted:
                return
            key = checkpoint_key(rec.data["ns"], rec.data["id"])
            if key in seen:
                continue
            seen.add(key)
            if cuts.visible(rec):
                yield rec
        return
    floor = max(cuts.deleted, cuts.pruned_before(ns) - 1)
    for pointer in view.records(LATEST, ns, at_or_before=at_or_before):
        if pointer.seq <= floor:
            break
        cid = pointer.data["id"]
        if cid in seen:
            continue
        seen.add(cid)
        found = view.latest(CHECKPOINT, checkpoint_key(ns, cid))
        # the pointer follows its record in one batch: an older pointer to a checkpoint put
        # again later is passed over here (the later put is listed at its own place)
        if found is not None and found.seq == pointer.seq - 1 and cuts.visible(found):
            yield found
    for cid in cuts.kept_chain(ns):  # below the prune's keep point: the ancestors it kept
        found = find_checkpoint(cuts, ns, cid)
        if found is None or cid in seen or (before_seq is not None and found.seq >= before_seq):
            continue
        seen.add(cid)
        yield found


def seq_past_id(view: RecordView, ns: str, before_id: str) -> int:
    """A ``before_seq`` for :func:`newest_checkpoints` that passes over the checkpoints of
    ``ns`` with an id of ``before_id`` or more: just past the newest ``latest`` pointer of
    ``ns`` naming a smaller id (0: none does). A bisection over the log, O(log n) lookups: one
    namespace's puts come in id order (LangGraph puts a namespace's checkpoints one after
    another), so the pointers' ids grow with their seqs."""
    lo, hi, best = 0, view.last_seq, -1
    while lo <= hi:
        mid = (lo + hi) // 2
        pointer = view.latest(LATEST, ns, at_or_before=mid)
        if pointer is None:
            lo = mid + 1
        elif pointer.data["id"] < before_id:
            best, lo = pointer.seq, mid + 1
        else:
            hi = pointer.seq - 1
    return best + 1


def namespaces(view: RecordView) -> list[str]:
    """Every namespace the thread ever had a checkpoint in."""
    return sorted({rec.key for rec in view.records(NAMESPACE)})


class CyclicHistory(ValueError):
    """A checkpoint's parent chain comes back to a checkpoint it passed (a hand-made ``put``
    naming a descendant as its parent): read as it is, it would never end."""


def ancestors(cuts: Cuts, rec: Record) -> Iterator[Record]:
    """The visible ancestors of a checkpoint record, parent first, along ``parent`` (in its
    namespace), until one is missing; :class:`CyclicHistory` when the chain loops."""
    ns = rec.data["ns"]
    first = rec.data["id"]
    passed = {first}
    parent = rec.data.get("parent")
    while parent:
        if parent in passed:
            raise CyclicHistory(
                f"the parent chain of checkpoint {first!r} (namespace {ns!r}) loops back to "
                f"checkpoint {parent!r}, which it passed {len(passed)} checkpoints before: a "
                "put named a descendant as its parent"
            )
        passed.add(parent)
        found = find_checkpoint(cuts, ns, parent)
        if found is None:
            return
        yield found
        parent = found.data.get("parent")
