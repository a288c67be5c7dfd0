"""A LangGraph saver's deletes and copies: tombstones appended, never a byte rewritten (ADR
0023), and the replay of a thread's visible checkpoint records into another. Each works on the
store's :class:`~continuity.integrations._langgraph_threads.LangGraphThreads` (the saver's),
under the lock of the thread it writes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import continuity.integrations._langgraph_log as lg
import continuity.integrations._langgraph_mirror as mirror
from continuity import frames as fr
from continuity.context.records import Record, latest_record, record_view, records
from continuity.integrations._langgraph_threads import LangGraphThreads
from continuity.store.base import BaseStore, Thread

__all__ = ["copy_records", "delete_for_runs", "delete_thread", "keep_latest"]


def delete_thread(threads: LangGraphThreads, thread_id: str) -> None:
    """Hide every checkpoint and write of the thread (a ``langgraph.deleted`` tombstone)
    and retract its mirrored messages, in its continuity thread and its forks."""
    tid = str(thread_id)
    thread = threads.thread(tid)
    if not thread.exists():
        return
    store = threads.store
    with threads.lock(thread.id):
        threads.ensure(thread, tid)
        forks = [rec.key for rec in records(thread, lg.FORK)]
        forks += [rec.key for rec in records(thread, lg.SUBGRAPH)]
        for fork_id in forks:
            branch = store.thread(fork_id)
            cleared = _clear_mirror(store, branch)
            if cleared:
                branch.append(cleared)
        batch = _clear_mirror(store, thread)
        batch.append(fr.RecordAppended(kind=lg.DELETED, data={"thread_id": tid}))
        thread.append(batch)


def _clear_mirror(store: BaseStore, thread: Thread) -> list[fr.Frame]:
    if not thread.exists():
        return []
    with record_view(thread) as view:
        current = view.latest(lg.MIRROR)
        if current is None or current.data["messages"] == 0:
            return []
        entries = list(mirror.map_at(store, view, current).entries.values())
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


def delete_for_runs(threads: LangGraphThreads, run_ids: Sequence[str]) -> None:
    """Hide the checkpoints (and their writes) of these runs, in every thread of the store:
    a ``langgraph.removed`` tombstone each. The mirror keeps what it showed (ADR 0023)."""
    wanted = set(run_ids)
    if not wanted:
        return
    for _tid, thread in list(threads.each()):
        with threads.lock(thread.id):
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


def keep_latest(
    threads: LangGraphThreads, thread_id: str, metadata: Callable[[Record], Any]
) -> None:
    """Hide all but each namespace's latest checkpoint of the thread (a ``langgraph.pruned``
    record per namespace), and the ancestors its delta channels are read back from: those of
    its ``counters_since_delta_snapshot`` (``metadata`` reads a record's), up to the nearest
    ancestor holding a stored value (a snapshot) of each. So the state after a prune is the
    state before it."""
    thread = threads.thread(str(thread_id))
    if not thread.exists():
        return
    with threads.lock(thread.id):
        batch: list[fr.Frame] = []
        with record_view(thread) as view:
            cuts = lg.Cuts(view)
            for ns in lg.namespaces(view):
                latest = next(lg.newest_checkpoints(cuts, ns), None)
                if latest is not None:
                    chain = _delta_chain(cuts, latest, metadata(latest))
                    data = {"keep": latest.seq, "id": latest.data["id"], "chain": chain}
                    batch.append(fr.RecordAppended(kind=lg.PRUNED, key=ns, data=data))
        if batch:
            thread.append(batch)


def _delta_chain(cuts: lg.Cuts, latest: Record, metadata: Any) -> list[str]:
    """The ids of the ancestors of ``latest``, parent first, that its delta channels still
    read: up to the nearest one holding a stored value of each."""
    counters = (metadata or {}).get("counters_since_delta_snapshot") or {}
    wanted = {ch for ch in counters if not _holds(latest, ch)}
    chain: list[str] = []
    if not wanted:
        return chain
    for rec in lg.ancestors(cuts, latest):
        chain.append(rec.data["id"])
        wanted = {ch for ch in wanted if not _holds(rec, ch)}
        if not wanted:
            break
    return chain


def _holds(rec: Record, channel: str) -> bool:
    """Whether a checkpoint record stores a value of ``channel`` (a delta channel's seed)."""
    blob = rec.data["blobs"].get(channel)
    return blob is not None and len(blob) >= 3


def copy_records(threads: LangGraphThreads, source_thread_id: str, target_thread_id: str) -> bool:
    """Copy every visible checkpoint record and write of a thread into another, oldest first
    (values are shared artifacts; the copy mirrors nothing yet). False when the source thread
    does not exist (nothing is done then)."""
    src = threads.thread(str(source_thread_id))
    if not src.exists():
        return False
    tid = str(target_thread_id)
    dst = threads.thread(tid)
    store = threads.store
    with record_view(src) as view:
        cuts = lg.Cuts(view)
        found = list(lg.newest_checkpoints(cuts, None))
    with threads.lock(dst.id):
        threads.ensure(dst, tid)
        for rec in reversed(found):
            data = {**rec.data, "mirror": None}
            key = lg.checkpoint_key(data["ns"], data["id"])
            batch = [lg.record_frame(store, lg.CHECKPOINT, data, key)]
            batch.append(fr.RecordAppended(kind=lg.LATEST, key=data["ns"], data={"id": data["id"]}))
            if latest_record(dst, lg.NAMESPACE, data["ns"]) is None:
                batch.append(fr.RecordAppended(kind=lg.NAMESPACE, key=data["ns"]))
            floor = cuts.writes_after(key)  # the tombstones as the view saw them
            calls = [
                w for w in records(src, lg.WRITES, key, at_or_before=view.last_seq) if w.seq > floor
            ]
            batch.extend(lg.record_frame(store, lg.WRITES, w.data, key) for w in reversed(calls))
            dst.append(batch)
    return True
