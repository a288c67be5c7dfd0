"""A LangGraph saver's ``put``: the batch one checkpoint becomes (its record, its namespace's
``latest`` pointer, the mirrored messages) and the artifacts of the channels it changed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import blake3
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    get_checkpoint_metadata,
)

from continuity import frames as fr
from continuity.context.fork import fork
from continuity.context.records import Record, RecordView, latest_record
from continuity.errors import InvalidThreadId
from continuity.integrations import _langgraph_log as lg, _langgraph_mirror as mirror
from continuity.store.base import validate_thread_id

if TYPE_CHECKING:
    from continuity.integrations.langgraph import ContinuitySaver

__all__ = ["branch_id", "put_checkpoint"]


def put_checkpoint(
    saver: ContinuitySaver,
    view: RecordView,
    head_seq: int,
    tid: str,
    ns: str,
    parent_id: str | None,
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: ChannelVersions,
) -> None:
    """Append one checkpoint's batch to ``view.thread`` at ``head_seq + 1`` (its parent and
    the mirror's position read in ``view``); :class:`SeqConflict` if another writer came
    first (the caller takes a new view and tries again)."""
    thread = view.thread
    cuts = lg.Cuts(view)
    parent = lg.find_checkpoint(cuts, ns, parent_id) if parent_id else None
    values = checkpoint["channel_values"]
    blobs = _blobs(saver, cuts, ns, parent, checkpoint, new_versions)
    rest = {k: v for k, v in checkpoint.items() if k != "channel_values"}
    full_metadata = get_checkpoint_metadata(config, metadata)
    state = parent.data.get("mirror") if parent is not None else None
    batch: list[fr.Frame] = []
    fork_record: fr.Frame | None = None
    name = saver.messages_channel
    if (
        ns == ""
        and name is not None
        and name in new_versions
        and mirror.is_messages(values.get(name, []))
    ):
        state, batch, fork_record = _mirror(
            saver, view, tid, state, values.get(name, []), checkpoint["id"], head_seq + 1
        )
    record_data = {
        "ns": ns,
        "id": checkpoint["id"],
        "parent": parent_id,
        "checkpoint": lg.to_typed(saver.serde.dumps_typed(rest)),
        "metadata": lg.to_typed(saver.serde.dumps_typed(full_metadata)),
        "run_id": full_metadata.get("run_id"),
        "blobs": blobs,
        "mirror": state,
    }
    batch.append(
        lg.record_frame(
            saver.store, lg.CHECKPOINT, record_data, lg.checkpoint_key(ns, checkpoint["id"])
        )
    )
    batch.append(fr.RecordAppended(kind=lg.LATEST, key=ns, data={"id": checkpoint["id"]}))
    if view.latest(lg.NAMESPACE, ns) is None:
        batch.append(fr.RecordAppended(kind=lg.NAMESPACE, key=ns))
    if fork_record is not None:
        batch.append(fork_record)
    thread.append(batch, expected_seq=head_seq + 1)


def _blobs(
    saver: ContinuitySaver,
    cuts: lg.Cuts,
    ns: str,
    parent: Record | None,
    checkpoint: Checkpoint,
    new_versions: ChannelVersions,
) -> dict[str, list[Any]]:
    """Per channel: ``[version, type, artifact id]``, or ``[version]`` for an empty one.
    Changed channels are stored; unchanged ones are the parent's (or, failing that, any
    earlier checkpoint's of the namespace holding that version), as a blobs table would."""
    values = checkpoint["channel_values"]
    out: dict[str, list[Any]] = {}
    missing: dict[str, Any] = {}
    known = parent.data["blobs"] if parent is not None else {}
    for channel, version in checkpoint["channel_versions"].items():
        if channel in new_versions:
            if channel in values:
                kind, raw = saver.serde.dumps_typed(values[channel])
                out[channel] = [version, kind, saver.store.artifacts.put(raw)]
            else:
                out[channel] = [version]
        elif channel in known and known[channel][0] == version:
            out[channel] = known[channel]
        else:
            missing[channel] = version
    if missing:  # not the parent's version: look further back (rare: never in a graph run)
        for rec in lg.newest_checkpoints(cuts, ns):
            for channel, version in list(missing.items()):
                blob = rec.data["blobs"].get(channel)
                if blob is not None and blob[0] == version:
                    out[channel] = blob
                    del missing[channel]
            if not missing:
                break
    return out


def _mirror(
    saver: ContinuitySaver,
    view: RecordView,
    tid: str,
    state: dict[str, Any] | None,
    messages: list[Any],
    checkpoint_id: str,
    next_seq: int,
) -> tuple[dict[str, Any] | None, list[fr.Frame], fr.Frame | None]:
    """Mirror a root checkpoint's messages. Returns its mirror state, the frames for the
    thread's batch (when the mirror is this thread) and a ``langgraph.fork`` record (when
    the change went to a new fork)."""
    thread = view.thread
    base: dict[str, Any]
    if state is None:
        # no parent, or one nothing was mirrored for: start from an empty conversation,
        # here when this thread's mirror is empty now, else in a fork of its start
        current = view.latest(lg.MIRROR)
        empty_now = current is None or current.data["messages"] == 0
        base = {"thread": thread.id, "seq": current.seq if current else 0, "map": None}
        if not empty_now:
            base["seq"] = 0
    else:
        base = state
    old = mirror.load_map(saver.store, base["map"])
    change = mirror.plan(saver.store, old, messages)
    if change.empty:
        return state, [], None
    target = saver.store.thread(base["thread"])
    latest = view.latest(lg.MIRROR) if target.id == thread.id else latest_record(target, lg.MIRROR)
    if latest is not None and _mirrors(latest, checkpoint_id):  # put before: a retry
        return _state(target.id, latest.seq, latest.data["map"]), [], None
    position = latest.seq if latest is not None else 0
    if target.id == thread.id and position == base["seq"]:
        frames, aid = change.frames(saver.store, next_seq, checkpoint_id)
        return _state(thread.id, next_seq + len(frames) - 1, aid), frames, None
    fork_record = None
    if position != base["seq"]:
        branch = saver.store.thread(branch_id(thread.id, checkpoint_id))
        fork_record = fr.RecordAppended(
            kind=lg.FORK,
            key=branch.id,
            data={"from": target.id, "at_seq": base["seq"], "checkpoint_id": checkpoint_id},
        )
        done = latest_record(branch, lg.MIRROR) if branch.exists() else None
        if done is not None and _mirrors(done, checkpoint_id):  # mirrored, not yet stored
            return _state(branch.id, done.seq, done.data["map"]), [], fork_record
        meta = {lg.META_THREAD: tid, lg.META_BRANCH: checkpoint_id}
        target = fork(target, branch.id, at_seq=base["seq"], meta=meta)
    head = target.head()
    assert head is not None
    frames, aid = change.frames(saver.store, head.seq + 1, checkpoint_id)
    seqs = target.append(frames, expected_seq=head.seq + 1)
    return _state(target.id, seqs[-1], aid), [], fork_record


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
