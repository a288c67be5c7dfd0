"""A LangGraph saver's reads: which checkpoint records a ``list`` or ``get_tuple`` wants, and
the :class:`CheckpointTuple` of each (its channel values from their artifacts, its pending
writes from the ``langgraph.writes`` records the tombstones leave visible)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence, Set
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    Checkpoint,
    CheckpointTuple,
    DeltaChannelHistory,
    PendingWrite,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

import continuity.integrations._langgraph_log as lg
from continuity.context.records import Record
from continuity.integrations._langgraph_values import Bases
from continuity.store.base import BaseStore

__all__ = ["CheckpointReader", "candidates"]


def candidates(
    cuts: lg.Cuts,
    ns: str | None,
    only_id: str | None,
    before_id: str | None,
    before: RunnableConfig | None,
) -> Iterator[Record]:
    """The visible checkpoint records a ``list`` call names, newest first (before filters).

    ``before`` keeps the checkpoints whose id is less than its ``checkpoint_id``, as LangGraph's
    savers do, whatever the order they were put in: LangGraph puts a parent's checkpoints and
    its subgraph's from different threads (``durability="async"``), so a subgraph checkpoint
    made after its parent's can be put before it, and a replay asks for the subgraph's state
    ``before`` the parent's checkpoint (ADR 0037). One namespace's puts are in id order (each
    waits for the one before), so the walk of a namespace starts at ``before``'s record when it
    is one of that namespace, else where a bisection by id finds (:func:`lg.seq_past_id`); a
    walk of every namespace passes over the newer ids."""
    if only_id is not None:
        for space in [ns] if ns is not None else lg.namespaces(cuts.view):
            rec = lg.find_checkpoint(cuts, space, only_id)
            if rec is not None and (before_id is None or only_id < before_id):
                yield rec
        return
    before_seq = None
    if before_id is not None and ns is not None:
        before_ns = (before or {}).get("configurable", {}).get("checkpoint_ns")
        found = None
        if before_ns is None or before_ns == ns:
            found = cuts.view.latest(lg.CHECKPOINT, lg.checkpoint_key(ns, before_id))
        before_seq = found.seq if found is not None else lg.seq_past_id(cuts.view, ns, before_id)
    for rec in lg.newest_checkpoints(cuts, ns, before_seq=before_seq):
        if before_id is not None and rec.data["id"] >= before_id:
            continue  # made after `before` (put before it, in another namespace)
        yield rec


class CheckpointReader:
    """Checkpoint records read back as LangGraph's tuples, with the saver's serializer (taken
    per call: :meth:`~langgraph.checkpoint.base.BaseCheckpointSaver.with_allowlist` gives a
    saver's clone another one) and the store holding the values."""

    def __init__(
        self, store: BaseStore, serde: SerializerProtocol, bases: Bases | None = None
    ) -> None:
        self.store = store
        self.serde = serde
        self.bases = bases
        """The bases of delta values this process knows (:mod:`._langgraph_values`)."""

    def metadata(self, rec: Record) -> Any:
        """A checkpoint record's metadata."""
        return self.serde.loads_typed(lg.from_typed(rec.data["metadata"]))

    def checkpoint_tuple(
        self,
        cuts: lg.Cuts | None,
        tid: str,
        rec: Record,
        metadata: Any = None,
        *,
        writes: list[dict[str, Any]] | None = None,
    ) -> CheckpointTuple:
        """The tuple of a visible checkpoint record of LangGraph thread ``tid`` (``metadata``:
        when the caller has read it already), its pending writes read through ``cuts``, or
        ``writes`` (the data of its visible ``langgraph.writes`` records, oldest first)."""
        data = rec.data
        ns, cid = data["ns"], data["id"]
        checkpoint = self.serde.loads_typed(lg.from_typed(data["checkpoint"]))
        values: dict[str, Any] = {}
        for channel, blob in data["blobs"].items():
            typed = lg.blob_value(self.store, blob, self.bases)
            if typed is not None:
                values[channel] = self.serde.loads_typed(typed)
        if metadata is None:
            metadata = self.metadata(rec)
        parent = data.get("parent")
        return CheckpointTuple(
            config=lg.config_of(tid, ns, cid),
            checkpoint=cast(Checkpoint, {**checkpoint, "channel_values": values}),
            metadata=metadata,
            parent_config=lg.config_of(tid, ns, parent) if parent else None,
            pending_writes=(
                self.pending_writes(cuts, ns, cid)
                if cuts is not None
                else self.pending_of(writes or [])
            ),
        )

    def delta_history(
        self, cuts: lg.Cuts, rec: Record, channels: Sequence[str]
    ) -> dict[str, DeltaChannelHistory]:
        """What ``get_delta_channel_history`` answers for the checkpoint record ``rec``: per
        channel the writes of its ancestors, oldest first, back to the nearest ancestor that
        stores a value of the channel (the ``seed``). Only those channels' values are read."""
        collected: dict[str, list[PendingWrite]] = {ch: [] for ch in channels}
        seeds: dict[str, Any] = {}
        remaining = set(channels)
        ns = rec.data["ns"]
        for anc in lg.ancestors(cuts, rec):
            if not remaining:
                break
            for write in reversed(self.pending_writes(cuts, ns, anc.data["id"], remaining)):
                collected[write[1]].append(write)
            for ch in list(remaining):
                blob = anc.data["blobs"].get(ch)
                typed = None if blob is None else lg.blob_value(self.store, blob, self.bases)
                if typed is not None:
                    seeds[ch] = self.serde.loads_typed(typed)
                    remaining.discard(ch)
        out: dict[str, DeltaChannelHistory] = {}
        for ch in channels:
            entry: DeltaChannelHistory = {"writes": collected[ch][::-1]}
            if ch in seeds:
                entry["seed"] = seeds[ch]
            out[ch] = entry
        return out

    def pending_writes(
        self, cuts: lg.Cuts, ns: str, cid: str, channels: Set[str] | None = None
    ) -> list[PendingWrite]:
        """The pending writes of a checkpoint in ``writes_sort_key`` order (only those to
        ``channels`` when given: the others' values are not read)."""
        key = lg.checkpoint_key(ns, cid)
        floor = cuts.writes_after(key)
        calls = []
        for rec in cuts.view.records(lg.WRITES, key):
            if rec.seq <= floor:
                break
            calls.append(rec.data)
        return self.pending_of(calls[::-1], channels)

    def pending_of(
        self, calls: Sequence[dict[str, Any]], channels: Set[str] | None = None
    ) -> list[PendingWrite]:
        """The pending writes of a checkpoint's writes records' data, oldest first."""
        stored: dict[tuple[str, int], tuple[str, str, list[str], str]] = {}
        for call in calls:  # oldest first, as InMemorySaver keeps them
            task_id, task_path = call["task_id"], call["task_path"]
            for idx, channel, typed in call["writes"]:
                inner = (task_id, idx)
                if idx >= 0 and inner in stored:
                    continue
                stored[inner] = (task_id, channel, typed, task_path)
        ordered = sorted(stored, key=lambda k: writes_sort_key(stored[k][3], *k))
        out: list[PendingWrite] = []
        for k in ordered:
            task_id, channel, typed, _ = stored[k]
            if channels is not None and channel not in channels:
                continue
            out.append((task_id, channel, self.serde.loads_typed(self._typed(typed))))
        return out

    def _typed(self, value: list[str]) -> tuple[str, bytes]:
        """A stored value: inline ``[type, base64]`` or ``[type, "", artifact id]``."""
        if len(value) == 3:
            return value[0], self.store.artifacts.get(value[2])
        return lg.from_typed(value)
