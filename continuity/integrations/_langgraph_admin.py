"""A LangGraph saver's deletes and copies: tombstones appended, never a byte rewritten (ADR
0023), and ``copy_thread``'s replay of a thread's visible checkpoints into another."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from continuity import frames as fr
from continuity.context.records import latest_record, record_view, records
from continuity.integrations import _langgraph_log as lg, _langgraph_mirror as mirror
from continuity.store.base import BaseStore, Thread

if TYPE_CHECKING:
    from continuity.integrations.langgraph import ContinuitySaver

__all__ = ["copy_thread", "delete_for_runs", "delete_thread", "prune"]


def delete_thread(saver: ContinuitySaver, thread_id: str) -> None:
    """Hide every checkpoint and write of the thread (a ``langgraph.deleted`` tombstone)
    and retract its mirrored messages, in its continuity thread and its forks."""
    tid = str(thread_id)
    thread = saver._thread(tid)
    if not thread.exists():
        return
    with saver._lock(thread.id):
        saver._ensure(thread, tid)
        forks = [rec.key for rec in records(thread, lg.FORK)]
        for fork_id in forks:
            branch = saver.store.thread(fork_id)
            cleared = _clear_mirror(saver.store, branch)
            if cleared:
                branch.append(cleared)
        batch = _clear_mirror(saver.store, thread)
        batch.append(fr.RecordAppended(kind=lg.DELETED, data={"thread_id": tid}))
        thread.append(batch)


def _clear_mirror(store: BaseStore, thread: Thread) -> list[fr.Frame]:
    current = latest_record(thread, lg.MIRROR)
    if current is None or current.data["messages"] == 0:
        return []
    entries = mirror.load_map(store, current.data["map"])
    seqs = [s for e in entries for s in e.seqs]
    spans = [fr.SeqSpan(from_seq=s, to_seq=s) for s in sorted(seqs)]
    out: list[fr.Frame] = []
    if spans:
        ids = [e.id for e in entries]
        out.append(
            fr.MessagesRetracted(spans=spans, reason="langgraph: delete_thread", message_ids=ids)
        )
    out.append(lg.empty_mirror())
    return out


def delete_for_runs(saver: ContinuitySaver, run_ids: Sequence[str]) -> None:
    """Hide the checkpoints (and their writes) of these runs, in every thread of the store:
    a ``langgraph.removed`` tombstone each. The mirror keeps what it showed (ADR 0023)."""
    wanted = set(run_ids)
    if not wanted:
        return
    for _tid, thread in list(saver._langgraph_threads()):
        with saver._lock(thread.id):
            with record_view(thread) as view:
                found = list(lg.newest_checkpoints(lg.Cuts(view), None))
            gone = [
                fr.RecordAppended(
                    kind=lg.REMOVED,
                    key=lg.checkpoint_key(rec.data["ns"], rec.data["id"]),
                    data={"run_id": rec.data["run_id"]},
                )
                for rec in found
                if rec.data.get("run_id") in wanted
            ]
            if gone:
                thread.append(gone)


def prune(
    saver: ContinuitySaver, thread_ids: Sequence[str], *, strategy: str = "keep_latest"
) -> None:
    """``"keep_latest"``: hide all but each namespace's latest checkpoint (a
    ``langgraph.pruned`` record per namespace); ``"delete"``: :meth:`delete_thread`."""
    if strategy not in ("keep_latest", "delete"):
        raise ValueError(f"prune strategy must be 'keep_latest' or 'delete', not {strategy!r}")
    for thread_id in thread_ids:
        if strategy == "delete":
            saver.delete_thread(thread_id)
            continue
        thread = saver._thread(str(thread_id))
        if not thread.exists():
            continue
        with saver._lock(thread.id):
            batch: list[fr.Frame] = []
            with record_view(thread) as view:
                cuts = lg.Cuts(view)
                for ns in lg.namespaces(view):
                    latest = next(lg.newest_checkpoints(cuts, ns), None)
                    if latest is not None:
                        data = {"keep": latest.seq, "id": latest.data["id"]}
                        batch.append(fr.RecordAppended(kind=lg.PRUNED, key=ns, data=data))
            if batch:
                thread.append(batch)


def copy_thread(saver: ContinuitySaver, source_thread_id: str, target_thread_id: str) -> None:
    """Copy every visible checkpoint and write of a thread into another, oldest first
    (values are shared artifacts), and mirror the copy's latest conversation there."""
    src = saver._thread(str(source_thread_id))
    if not src.exists():
        return
    tid = str(target_thread_id)
    dst = saver._thread(tid)
    with record_view(src) as view:
        cuts = lg.Cuts(view)
        found = list(lg.newest_checkpoints(cuts, None))
    with saver._lock(dst.id):
        saver._ensure(dst, tid)
        for rec in reversed(found):
            data = {**rec.data, "mirror": None}
            key = lg.checkpoint_key(data["ns"], data["id"])
            batch = [lg.record_frame(saver.store, lg.CHECKPOINT, data, key)]
            batch.append(fr.RecordAppended(kind=lg.LATEST, key=data["ns"], data={"id": data["id"]}))
            if latest_record(dst, lg.NAMESPACE, data["ns"]) is None:
                batch.append(fr.RecordAppended(kind=lg.NAMESPACE, key=data["ns"]))
            floor = cuts.writes_after(key)  # the tombstones as the view saw them
            calls = [
                w for w in records(src, lg.WRITES, key, at_or_before=view.last_seq) if w.seq > floor
            ]
            batch.extend(
                lg.record_frame(saver.store, lg.WRITES, w.data, key) for w in reversed(calls)
            )
            dst.append(batch)
    latest = saver.get_tuple(lg.config_of(tid, "", None))
    if latest is not None and saver.messages_channel is not None:
        # mirror the copy's conversation: put its latest root checkpoint once more, with
        # its own parent (every value is the same artifact again: nothing new is stored)
        parent = latest.parent_config or lg.config_of(tid, "", None)
        versions = latest.checkpoint["channel_versions"]
        saver.put(parent, latest.checkpoint, latest.metadata, dict(versions))
