"""A LangGraph saver's ``put``: the batch one checkpoint becomes (its record, its namespace's
``latest`` pointer, the mirrored messages) and the artifacts of the channels it changed."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Final, cast

import blake3
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata
from langgraph.checkpoint.serde.base import SerializerProtocol

import continuity.integrations._langgraph_log as lg
import continuity.integrations._langgraph_mirror as mirror
from continuity import frames as fr
from continuity.context.fork import fork
from continuity.context.records import Record, RecordView, record_view
from continuity.errors import BadFrame, InvalidThreadId
from continuity.integrations._langgraph_known import Known, Memo, Unknown
from continuity.integrations._langgraph_values import INLINE, Bases
from continuity.store.base import BaseStore, Thread, validate_thread_id

__all__ = ["INLINE", "CheckpointPut", "CheckpointWriter", "Prepared", "branch_id", "node_path"]


@dataclass(frozen=True, slots=True)
class Prepared:
    """A put's serialized parts: the changed channels' blobs, the checkpoint (without its
    values) and the metadata as typed serializer bytes."""

    changed: dict[str, list[Any]]
    checkpoint: list[str]
    metadata: list[str]


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
    fresh: bool = False
    """Put by a graph run, which made the checkpoint's id for it (no record of it is older)."""


class CheckpointWriter:
    """Checkpoints written as one batch each, with the saver's serializer (taken per call:
    :meth:`~langgraph.checkpoint.base.BaseCheckpointSaver.with_allowlist` gives a saver's clone
    another one), the store holding the values, and the channel of messages to mirror (None:
    no mirror)."""

    def __init__(
        self,
        store: BaseStore,
        serde: SerializerProtocol,
        messages_channel: str | None,
        mirrors: dict[str, mirror.LiveMirror] | None = None,
        bases: Bases | None = None,
        known: dict[str, Known] | None = None,
    ) -> None:
        self.store = store
        self.serde = serde
        self.messages_channel = messages_channel
        self.mirrors: dict[str, mirror.LiveMirror] = {} if mirrors is None else mirrors
        """What each mirror thread shows, kept between puts (the saver's threads own it)."""
        self.known: dict[str, Known] = {} if known is None else known
        """What this process's own writes tell it about each thread (:mod:`._langgraph_known`);
        read and replaced under the thread's lock."""
        self.bases = Bases() if bases is None else bases
        """The base each channel's values are stored as deltas against (the saver's threads
        own them too)."""

    def prepare(self, put: CheckpointPut) -> Prepared:
        """What a put stores whatever the thread holds: the serialized checkpoint and
        metadata, and the changed channels' values (an artifact each; inline in the record
        up to :data:`INLINE` bytes; a delta against an earlier value, inline, while that pays:
        :mod:`._langgraph_values`). Done before the thread's lock is taken, once per put."""
        values = put.checkpoint["channel_values"]
        changed: dict[str, list[Any]] = {}
        for channel, version in put.checkpoint["channel_versions"].items():
            if channel not in put.new_versions:
                continue
            if channel not in values:
                changed[channel] = [version]
                continue
            kind, raw = self.serde.dumps_typed(values[channel])
            if len(raw) <= INLINE:
                changed[channel] = [version, kind, "", lg.to_typed((kind, raw))[1]]
            else:
                key = (put.thread_id, put.ns, channel)
                changed[channel] = [version, kind, *self.bases.store_value(self.store, key, raw)]
        rest = {k: v for k, v in put.checkpoint.items() if k != "channel_values"}
        return Prepared(
            changed,
            lg.to_typed(self.serde.dumps_typed(rest)),
            lg.to_typed(self.serde.dumps_typed(put.metadata)),
        )

    def append(self, thread: Thread, put: CheckpointPut, prepared: Prepared) -> None:
        """Append the checkpoint's batch after the thread's head as it is now (its parent and
        the mirror's position read as of then); :class:`SeqConflict` if another writer came
        first (the caller tries again)."""
        head = thread.head()
        assert head is not None  # the saver made the thread
        known = self.known.pop(thread.id, None)
        answers = None
        if known is not None and known.head_seq == head.seq and self.store.redactor is None:
            try:  # nobody wrote since this process did: what it knows answers the questions
                # Known and Memo answer what a RecordView does (latest, records, read)
                batch, after = self._batch(cast(RecordView, known), head.seq + 1, put, prepared)
                answers = known
            except Unknown:
                answers = None
        if answers is None:
            with record_view(thread) as view:
                memo = Memo(view)
                batch, after = self._batch(cast(RecordView, memo), head.seq + 1, put, prepared)
                answers = Known(thread, head.seq, memo.answers)
        given = thread.append(batch, expected_seq=head.seq + 1)
        if self.store.redactor is None and answers.appended(given, batch):
            if put.fresh:
                answers.fresh.add(lg.checkpoint_key(put.ns, put.checkpoint["id"]))
            self.known[thread.id] = answers
        if after is not None:
            self.mirrors[thread.id] = after

    def _batch(
        self, view: RecordView, next_seq: int, put: CheckpointPut, prepared: Prepared
    ) -> tuple[list[fr.Frame], mirror.LiveMirror | None]:
        """The frames of one checkpoint, for ``view.thread`` at ``next_seq``: the mirrored
        messages, the checkpoint record, its namespace's pointers, a fork record; and what the
        thread's mirror shows after them (None: unchanged)."""
        cuts = lg.Cuts(view)
        ns, checkpoint = put.ns, put.checkpoint
        new_ns = view.latest(lg.NAMESPACE, ns) is None  # asked first: nothing done yet
        parent = lg.find_checkpoint(cuts, ns, put.parent_id) if put.parent_id else None
        blobs = self._blobs(cuts, parent, put, prepared.changed)
        state = parent.data.get("mirror") if parent is not None else None
        batch: list[fr.Frame] = []
        extra: list[fr.Frame] = []
        after = None
        if self.messages_channel is None:
            state = None
        elif ns == "":
            state, batch, after = self._mirror(view, put, state, next_seq)
        else:
            state, extra = self._mirror_subgraph(view.thread, view, put, state)
        record_data = {
            "ns": ns,
            "id": checkpoint["id"],
            "parent": put.parent_id,
            "checkpoint": prepared.checkpoint,
            "metadata": prepared.metadata,
            "run_id": put.metadata.get("run_id"),
            "blobs": blobs,
            "mirror": state,
        }
        key = lg.checkpoint_key(ns, checkpoint["id"])
        batch.append(lg.record_frame(self.store, lg.CHECKPOINT, record_data, key))
        batch.append(fr.RecordAppended(kind=lg.LATEST, key=ns, data={"id": checkpoint["id"]}))
        if new_ns:
            batch.append(fr.RecordAppended(kind=lg.NAMESPACE, key=ns))
        return batch + extra, after

    def _messages(self, put: CheckpointPut, *, changed_only: bool) -> list[Any] | None:
        """The messages a checkpoint mirrors (None: none), only when its messages channel
        changed if ``changed_only``."""
        name = self.messages_channel
        if name is None or (changed_only and name not in put.new_versions):
            return None
        messages = put.checkpoint["channel_values"].get(name, [])
        return messages if mirror.is_messages(messages) else None

    def _blobs(
        self,
        cuts: lg.Cuts,
        parent: Record | None,
        put: CheckpointPut,
        changed: dict[str, list[Any]],
    ) -> dict[str, list[Any]]:
        """Per channel: ``[version, type, artifact id]``, ``[version, type, "", base64]`` (a
        small value inline), or ``[version]`` for an empty one. Changed channels are ``changed``;
        unchanged ones are the parent's (or, failing that, any earlier checkpoint's of the
        namespace holding that version), as a blobs table would."""
        out: dict[str, list[Any]] = {}
        missing: dict[str, Any] = {}
        known = parent.data["blobs"] if parent is not None else {}
        for channel, version in put.checkpoint["channel_versions"].items():
            if channel in changed:
                out[channel] = changed[channel]
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
        next_seq: int,
    ) -> tuple[dict[str, Any] | None, list[fr.Frame], mirror.LiveMirror | None]:
        """Mirror a root checkpoint's messages into its thread. Returns its mirror state, the
        frames for the thread's batch (the change, an archive's fork record) and what the
        thread shows after them (kept in this process once the batch is in)."""
        store, thread, checkpoint_id = self.store, view.thread, put.checkpoint["id"]
        current = view.latest(lg.MIRROR)
        position = None if current is None else current.seq
        if state is not None and state["thread"] == thread.id and state["seq"] == position:
            messages = self._messages(put, changed_only=True)  # the same branch
        else:  # another branch (or a state from before): what this checkpoint holds
            messages = self._messages(put, changed_only=False)
        if messages is None:
            return state, [], None
        if current is not None and _mirrors(current, checkpoint_id):  # put before: a retry
            return _state(thread.id, current.seq), [], None
        live = self._live(view, current)
        change = mirror.plan(store, live, messages)
        if change.empty:
            return (None if position is None else _state(thread.id, position)), [], None
        batch: list[fr.Frame] = []
        reason = _REMOVED
        if state is None or state["thread"] != thread.id or state["seq"] != position:
            reason = _BRANCH
            if change.retract and current is not None:
                if isinstance(cast(object, view), Known):
                    raise Unknown("a branch is archived from a full view")
                batch.append(self._archive(thread, put, current))
        frames, after = change.frames(store, next_seq, checkpoint_id, reason)
        # the fork record goes after the change (the archive is taken at the position before)
        assert after.position is not None
        return _state(thread.id, after.position), frames + batch, after

    def _archive(self, thread: Thread, put: CheckpointPut, current: Record) -> fr.Frame:
        """Keep the branch the thread is leaving as a fork taken at its position (its
        conversation stays readable there: ``compile``, ``search``), and say so in a
        ``langgraph.fork`` record."""
        head = str(current.data.get("checkpoint_id") or current.seq)
        store_fork = branch_id(thread.id, head)
        meta = {lg.META_THREAD: put.thread_id, lg.META_BRANCH: head}
        fork(thread, store_fork, at_seq=current.seq, meta=meta)
        data = {"from": thread.id, "at_seq": current.seq, "checkpoint_id": head, "archive": True}
        return fr.RecordAppended(kind=lg.FORK, key=store_fork, data=data)

    def _live(self, view: RecordView, current: Record | None) -> mirror.LiveMirror:
        """What the mirror thread of ``view`` shows now: from this process's memory when it
        is current, else read back from its records."""
        known = self.mirrors.get(view.thread.id)
        position = None if current is None else current.seq
        if known is not None and known.position == position:
            return known
        return mirror.map_at(self.store, view, current)

    def _mirror_subgraph(
        self, thread: Thread, view: RecordView, put: CheckpointPut, state: dict[str, Any] | None
    ) -> tuple[dict[str, Any] | None, list[fr.Frame]]:
        """Mirror a subgraph checkpoint's messages into the subgraph's own thread (one per
        node path of the namespace, task ids left out), appended there at once; returns its
        state and, the first time, a ``langgraph.subgraph`` record for this thread's batch."""
        messages = self._messages(put, changed_only=True)
        if messages is None:
            return state, []
        path = node_path(put.ns)
        target = self.store.thread(branch_id(thread.id, path.replace("|", "+"), sep="+"))
        extra: list[fr.Frame] = []
        if view.latest(lg.SUBGRAPH, target.id) is None:
            extra.append(fr.RecordAppended(kind=lg.SUBGRAPH, key=target.id, data={"ns": path}))
        if target.head() is None:
            meta = {lg.META_SUBGRAPH: put.thread_id, lg.META_NS: path}
            with contextlib.suppress(BadFrame):  # another writer made it first
                target.append(fr.ThreadCreated(thread_id=target.id, meta=meta))
        with record_view(target) as tview:
            current = tview.latest(lg.MIRROR)
            if current is not None and _mirrors(current, put.checkpoint["id"]):
                return _state(target.id, current.seq), extra
            change = mirror.plan(self.store, self._live(tview, current), messages, put.ns)
            if change.empty:
                return (None if current is None else _state(target.id, current.seq)), extra
            head = target.head()
            assert head is not None
            frames, after = change.frames(self.store, head.seq + 1, put.checkpoint["id"], _REMOVED)
            target.append(frames, expected_seq=head.seq + 1)
        self.mirrors[target.id] = after
        assert after.position is not None
        return _state(target.id, after.position), extra


_REMOVED: Final = "langgraph: RemoveMessage or replaced by id"
_BRANCH: Final = "langgraph: another branch (time travel, or a change of an older checkpoint)"


def node_path(ns: str) -> str:
    """A subgraph namespace without its task ids: ``parent|child`` for
    ``parent:<task id>|child:<task id>``, the same for every run of that subgraph."""
    return "|".join(part.split(":", 1)[0] for part in ns.split("|"))


def branch_id(base: str, name: str, *, sep: str = "@") -> str:
    """A thread beside ``base``: ``<base>@<checkpoint id>`` (a branch kept as a fork) or
    ``<base>+<node path>`` (a subgraph's mirror, ``+`` between nested nodes); ``lg-`` and a
    hash when that is no valid id."""
    try:
        return validate_thread_id(f"{base}{sep}{name}")
    except InvalidThreadId:
        salt = "" if sep == "@" else sep  # "@": as the forks made before subgraphs were
        return "lg-" + blake3.blake3(f"{base}\n{salt}{name}".encode()).hexdigest()[:40]


def _state(thread_id: str, seq: int) -> dict[str, Any]:
    """A checkpoint's mirror position: the thread and the seq of its ``langgraph.mirror``
    record."""
    return {"thread": thread_id, "seq": seq}


def _mirrors(rec: Record, checkpoint_id: str) -> bool:
    """Whether a ``langgraph.mirror`` record closed the change of ``checkpoint_id``."""
    return bool(rec.data.get("checkpoint_id") == checkpoint_id)
