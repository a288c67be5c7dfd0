"""A LangGraph saver's ``put``: the batch one checkpoint becomes (its record, its namespace's
``latest`` pointer, the mirrored messages) and the artifacts of the channels it changed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import blake3
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata
from langgraph.checkpoint.serde.base import SerializerProtocol

import continuity.integrations._langgraph_log as lg
import continuity.integrations._langgraph_mirror as mirror
from continuity import frames as fr
from continuity.context.fork import fork
from continuity.context.records import Record, RecordView, latest_record, record_view
from continuity.errors import InvalidThreadId
from continuity.store.base import BaseStore, Thread, validate_thread_id

__all__ = ["CheckpointPut", "CheckpointWriter", "branch_id"]


@dataclass(frozen=True, slots=True)
class CheckpointPut:
    """One ``put`` as LangGraph hands it over, its config read: the LangGraph thread, the
    namespace, the parent checkpoint's id, the checkpoint, its metadata (with the config's
    merged in) and the versions of the channels it changed."""

    thread_id: str
    ns: str
    parent_id: str | None
    checkpoint: Checkpoint
    metadata: CheckpointMetadata
    new_versions: ChannelVersions


class CheckpointWriter:
    """Checkpoints written as one batch each, with the saver's serializer (taken per call:
    :meth:`~langgraph.checkpoint.base.BaseCheckpointSaver.with_allowlist` gives a saver's clone
    another one), the store holding the values, and the channel of messages to mirror (None:
    no mirror)."""

    def __init__(
        self, store: BaseStore, serde: SerializerProtocol, messages_channel: str | None
    ) -> None:
        self.store = store
        self.serde = serde
        self.messages_channel = messages_channel

    def append(self, thread: Thread, put: CheckpointPut) -> None:
        """Append the checkpoint's batch after the thread's head as it is now (its parent and
        the mirror's position read as of then); :class:`SeqConflict` if another writer came
        first (the caller tries again)."""
        head = thread.head()
        assert head is not None  # the saver made the thread
        with record_view(thread) as view:
            thread.append(self._batch(view, head.seq + 1, put), expected_seq=head.seq + 1)

    def _batch(self, view: RecordView, next_seq: int, put: CheckpointPut) -> list[fr.Frame]:
        """The frames of one checkpoint, for ``view.thread`` at ``next_seq``: the mirrored
        messages, the checkpoint record, its namespace's pointers, a fork record."""
        cuts = lg.Cuts(view)
        ns, checkpoint = put.ns, put.checkpoint
        parent = lg.find_checkpoint(cuts, ns, put.parent_id) if put.parent_id else None
        blobs = self._blobs(cuts, parent, put)
        rest = {k: v for k, v in checkpoint.items() if k != "channel_values"}
        state = parent.data.get("mirror") if parent is not None else None
        batch: list[fr.Frame] = []
        fork_record: fr.Frame | None = None
        messages = self._messages(put)
        if messages is not None:
            state, batch, fork_record = self._mirror(view, put, state, messages, next_seq)
        record_data = {
            "ns": ns,
            "id": checkpoint["id"],
            "parent": put.parent_id,
            "checkpoint": lg.to_typed(self.serde.dumps_typed(rest)),
            "metadata": lg.to_typed(self.serde.dumps_typed(put.metadata)),
            "run_id": put.metadata.get("run_id"),
            "blobs": blobs,
            "mirror": state,
        }
        key = lg.checkpoint_key(ns, checkpoint["id"])
        batch.append(lg.record_frame(self.store, lg.CHECKPOINT, record_data, key))
        batch.append(fr.RecordAppended(kind=lg.LATEST, key=ns, data={"id": checkpoint["id"]}))
        if view.latest(lg.NAMESPACE, ns) is None:
            batch.append(fr.RecordAppended(kind=lg.NAMESPACE, key=ns))
        if fork_record is not None:
            batch.append(fork_record)
        return batch

    def _messages(self, put: CheckpointPut) -> list[Any] | None:
        """The messages a root checkpoint mirrors, when its messages channel changed."""
        name = self.messages_channel
        if put.ns != "" or name is None or name not in put.new_versions:
            return None
        messages = put.checkpoint["channel_values"].get(name, [])
        return messages if mirror.is_messages(messages) else None

    def _blobs(
        self, cuts: lg.Cuts, parent: Record | None, put: CheckpointPut
    ) -> dict[str, list[Any]]:
        """Per channel: ``[version, type, artifact id]``, or ``[version]`` for an empty one.
        Changed channels are stored; unchanged ones are the parent's (or, failing that, any
        earlier checkpoint's of the namespace holding that version), as a blobs table would."""
        values = put.checkpoint["channel_values"]
        out: dict[str, list[Any]] = {}
        missing: dict[str, Any] = {}
        known = parent.data["blobs"] if parent is not None else {}
        for channel, version in put.checkpoint["channel_versions"].items():
            if channel in put.new_versions:
                if channel in values:
                    kind, raw = self.serde.dumps_typed(values[channel])
                    out[channel] = [version, kind, self.store.artifacts.put(raw)]
                else:
                    out[channel] = [version]
            elif channel in known and known[channel][0] == version:
                out[channel] = known[channel]
            else:
                missing[channel] = version
        if missing:  # not the parent's version: look further back (rare: never in a graph run)
            for rec in lg.newest_checkpoints(cuts, put.ns):
                for channel, version in list(missing.items()):
                    blob = rec.data["blobs"].get(channel)
                    if blob is not None and blob[0] == version:
                        out[channel] = blob
                        del missing[channel]
                if not missing:
                    break
        return out

    def _mirror(
        self,
        view: RecordView,
        put: CheckpointPut,
        state: dict[str, Any] | None,
        messages: list[Any],
        next_seq: int,
    ) -> tuple[dict[str, Any] | None, list[fr.Frame], fr.Frame | None]:
        """Mirror a root checkpoint's messages. Returns its mirror state, the frames for the
        thread's batch (when the mirror is this thread) and a ``langgraph.fork`` record (when
        the change went to a new fork)."""
        store, thread, checkpoint_id = self.store, view.thread, put.checkpoint["id"]
        base = state if state is not None else _empty_base(view)
        change = mirror.plan(store, mirror.load_map(store, base["map"]), messages)
        if change.empty:
            return state, [], None
        target = store.thread(base["thread"])
        latest = (
            view.latest(lg.MIRROR) if target.id == thread.id else latest_record(target, lg.MIRROR)
        )
        if latest is not None and _mirrors(latest, checkpoint_id):  # put before: a retry
            return _state(target.id, latest.seq, latest.data["map"]), [], None
        position = latest.seq if latest is not None else 0
        if target.id == thread.id and position == base["seq"]:
            frames, aid = change.frames(store, next_seq, checkpoint_id)
            return _state(thread.id, next_seq + len(frames) - 1, aid), frames, None
        fork_record = None
        if position != base["seq"]:
            branch = store.thread(branch_id(thread.id, checkpoint_id))
            fork_record = fr.RecordAppended(
                kind=lg.FORK,
                key=branch.id,
                data={"from": target.id, "at_seq": base["seq"], "checkpoint_id": checkpoint_id},
            )
            done = latest_record(branch, lg.MIRROR) if branch.exists() else None
            if done is not None and _mirrors(done, checkpoint_id):  # mirrored, not yet stored
                return _state(branch.id, done.seq, done.data["map"]), [], fork_record
            meta = {lg.META_THREAD: put.thread_id, lg.META_BRANCH: checkpoint_id}
            target = fork(target, branch.id, at_seq=base["seq"], meta=meta)
        head = target.head()
        assert head is not None
        frames, aid = change.frames(store, head.seq + 1, checkpoint_id)
        seqs = target.append(frames, expected_seq=head.seq + 1)
        return _state(target.id, seqs[-1], aid), [], fork_record


def _empty_base(view: RecordView) -> dict[str, Any]:
    """Where a checkpoint with no mirror state (no parent, or one nothing was mirrored for)
    starts: an empty conversation, here when this thread's mirror is empty now, else in a
    fork of its start."""
    current = view.latest(lg.MIRROR)
    emptied = current is not None and current.data["messages"] == 0
    seq = current.seq if current is not None and emptied else 0
    return {"thread": view.thread.id, "seq": seq, "map": None}


def branch_id(base: str, checkpoint_id: str) -> str:
    """The continuity fork a branch starting at ``checkpoint_id`` mirrors into."""
    try:
        return validate_thread_id(f"{base}@{checkpoint_id}")
    except InvalidThreadId:
        return "lg-" + blake3.blake3(f"{base}\n{checkpoint_id}".encode()).hexdigest()[:40]


def _state(thread_id: str, seq: int, map_id: str) -> dict[str, Any]:
    """A checkpoint's mirror position: the thread, the seq of its ``langgraph.mirror``
    record, and the artifact holding the map of what is mirrored."""
    return {"thread": thread_id, "seq": seq, "map": map_id}


def _mirrors(rec: Record, checkpoint_id: str) -> bool:
    """Whether a ``langgraph.mirror`` record closed the change of ``checkpoint_id``."""
    return bool(rec.data.get("checkpoint_id") == checkpoint_id)
