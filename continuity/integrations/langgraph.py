"""A LangGraph checkpoint saver whose truth is a continuity log (``continuity[langgraph]``).

:class:`ContinuitySaver` implements :class:`langgraph.checkpoint.base.BaseCheckpointSaver`,
sync and async. One LangGraph ``thread_id`` is one continuity thread; its checkpoints, pending
writes and tombstones are ``record_appended`` frames in it (:mod:`._langgraph_log`), channel
values are artifacts (one per channel version, content-addressed), and the graph's messages are
mirrored as message frames (:mod:`._langgraph_mirror`), so ``continuity compile``, ``search``
and ``log`` work on a LangGraph thread as on any other. A branch taken from an older checkpoint
mirrors into a continuity fork. Nothing is ever rewritten: ``delete_thread``,
``delete_for_runs`` and ``prune`` append tombstones that reads honour. ADR 0023.

    from continuity import Store
    from continuity.integrations.langgraph import ContinuitySaver

    saver = ContinuitySaver(Store("agent-store", create=True))
    graph = builder.compile(checkpointer=saver)
    graph.invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "t1"}})
    # `continuity --store agent-store compile t1` now shows the conversation

Every read is a handful of O(log n) record lookups; ``put`` reads its parent's record and
appends one batch: both stay flat as a thread grows to 100,000 checkpoints and more.
"""

from __future__ import annotations

import builtins
import os
import random
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any, Final, TypeVar, cast

import blake3
import msgspec
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
    get_checkpoint_id,
    get_checkpoint_metadata,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from continuity import frames as fr
from continuity.aio import AsyncStore
from continuity.context.fork import fork
from continuity.context.records import Record, RecordView, latest_record, record_view, records
from continuity.errors import BadFrame, InvalidThreadId, SeqConflict
from continuity.integrations import _langgraph_log as lg
from continuity.integrations import _langgraph_mirror as mirror
from continuity.store.base import (
    MAX_RECORD_DATA,
    BaseStore,
    Thread,
    validate_thread_id,
)
from continuity.store.jsonl import Store

__all__ = ["ContinuitySaver"]

_META_THREAD: Final = "langgraph.thread_id"
_META_BRANCH: Final = "langgraph.branch_checkpoint_id"
_RETRIES: Final = 8
_encoder: Final = msgspec.json.Encoder()
_CHUNK: Final = 64
T = TypeVar("T")


class ContinuitySaver(BaseCheckpointSaver[str]):
    """LangGraph checkpoints in a continuity store.

    ``store`` is any continuity store (:class:`~continuity.Store`, :class:`~continuity.MemoryStore`,
    …) or the path of a JSONL store (created when missing). ``messages_channel`` names the channel
    of LangChain messages mirrored as the thread's conversation (None: no mirror). ``serde`` is
    LangGraph's serializer (its default: ``JsonPlusSerializer``).
    """

    def __init__(
        self,
        store: BaseStore | str | os.PathLike[str],
        *,
        messages_channel: str | None = "messages",
        serde: SerializerProtocol | None = None,
    ) -> None:
        super().__init__(serde=serde)
        self.store: BaseStore = store if isinstance(store, BaseStore) else Store(store, create=True)
        self.messages_channel = messages_channel
        self._aio = AsyncStore(self.store)
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._ours: set[str] = set()

    # --- configs and threads ---------------------------------------------------------------

    @staticmethod
    def _thread_of(config: RunnableConfig | None) -> str:
        configurable = (config or {}).get("configurable") or {}
        tid = configurable.get("thread_id")
        if tid is None or tid == "":
            raise ValueError(
                "a LangGraph config needs config['configurable']['thread_id'] "
                f"(got configurable keys {sorted(configurable)})"
            )
        return str(tid)

    @staticmethod
    def continuity_thread_id(thread_id: str) -> str:
        """The continuity thread a LangGraph ``thread_id`` maps to: the id itself when it is a
        valid continuity id, else ``lg-`` and a hash of it (the original is in frame 0)."""
        try:
            return validate_thread_id(thread_id)
        except InvalidThreadId:  # too long, or characters a file name cannot hold
            return "lg-" + blake3.blake3(thread_id.encode()).hexdigest()[:40]

    def _thread(self, thread_id: str) -> Thread:
        return self.store.thread(self.continuity_thread_id(thread_id))

    def _lock(self, cid: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(cid, threading.Lock())

    def _ensure(self, thread: Thread, thread_id: str) -> None:
        """Create the thread (frame 0 names the LangGraph thread) or check that it is one."""
        if thread.id in self._ours:
            return
        if thread.head() is None:
            created = fr.ThreadCreated(thread_id=thread.id, meta={_META_THREAD: thread_id})
            try:
                thread.append(created)
            except BadFrame:  # another process created it first: check it below
                if thread.head() is None:
                    raise
        first = next(iter(thread.read(to_seq=0)), None)
        if not (
            isinstance(first, fr.ThreadCreated)
            and first.meta.get(_META_THREAD) == thread_id
            and first.fork_of is None
        ):
            raise ValueError(
                f"continuity thread {thread.id!r} exists and is not LangGraph thread "
                f"{thread_id!r}'s: use another thread_id or another store"
            )
        self._ours.add(thread.id)

    def _langgraph_threads(self) -> Iterator[tuple[str, Thread]]:
        for cid in self.store.threads():
            thread = self.store.thread(cid)
            first = next(iter(thread.read(to_seq=0)), None)
            if isinstance(first, fr.ThreadCreated) and first.fork_of is None:
                tid = first.meta.get(_META_THREAD)
                if tid is not None:
                    yield tid, thread

    # --- reads -----------------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names (``checkpoint_id``), or its namespace's latest."""
        tid = self._thread_of(config)
        configurable = config["configurable"]
        ns = str(configurable.get("checkpoint_ns") or "")
        thread = self._thread(tid)
        if not thread.exists():
            return None
        with record_view(thread) as view:  # one index refresh for every lookup below
            cuts = lg.Cuts(view)
            wanted = get_checkpoint_id(config)
            if wanted:
                rec = lg.find_checkpoint(cuts, ns, str(wanted))
            else:
                rec = next(lg.newest_checkpoints(cuts, ns), None)
            return None if rec is None else self._tuple(cuts, tid, rec)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first: of one thread (``config``) or of all (None), of one
        namespace when the config names one, matching every ``filter`` key of their metadata,
        put before the checkpoint ``before`` names, at most ``limit`` of them."""
        if limit is not None and limit <= 0:
            return
        if config is not None:
            tid = self._thread_of(config)
            thread = self._thread(tid)
            pairs: Iterator[tuple[str, Thread]] = iter([(tid, thread)] if thread.exists() else [])
            ns: str | None = config["configurable"].get("checkpoint_ns")
            only_id = get_checkpoint_id(config)
        else:
            pairs, ns, only_id = self._langgraph_threads(), None, None
        before_id = get_checkpoint_id(before) if before else None
        left = limit
        for tid, thread in pairs:
            with record_view(thread) as view:
                cuts = lg.Cuts(view)
                for rec in self._candidates(cuts, ns, only_id, before_id, before):
                    metadata = self.serde.loads_typed(lg.from_typed(rec.data["metadata"]))
                    if filter and not all(metadata.get(k) == v for k, v in filter.items()):
                        continue
                    yield self._tuple(cuts, tid, rec, metadata)
                    if left is not None:
                        left -= 1
                        if left <= 0:
                            return

    def _candidates(
        self,
        cuts: lg.Cuts,
        ns: str | None,
        only_id: str | None,
        before_id: str | None,
        before: RunnableConfig | None,
    ) -> Iterator[Record]:
        if only_id is not None:
            for space in [ns] if ns is not None else lg.namespaces(cuts.view):
                rec = lg.find_checkpoint(cuts, space, only_id)
                if rec is not None and (before_id is None or only_id < before_id):
                    yield rec
            return
        before_seq = None
        if before_id is not None:
            before_ns = (before or {}).get("configurable", {}).get("checkpoint_ns")
            spaces = [before_ns] if before_ns is not None else lg.namespaces(cuts.view)
            for space in spaces:
                found = cuts.view.latest(lg.CHECKPOINT, lg.checkpoint_key(space, before_id))
                if found is not None:
                    before_seq = found.seq
                    break
        for rec in lg.newest_checkpoints(cuts, ns, before_seq=before_seq):
            if before_id is not None and before_seq is None and rec.data["id"] >= before_id:
                continue  # `before` names no checkpoint of this thread: compare ids
            yield rec

    def _tuple(
        self,
        cuts: lg.Cuts,
        tid: str,
        rec: Record,
        metadata: Any = None,
    ) -> CheckpointTuple:
        data = rec.data
        ns, cid = data["ns"], data["id"]
        checkpoint = self.serde.loads_typed(lg.from_typed(data["checkpoint"]))
        values: dict[str, Any] = {}
        for channel, blob in data["blobs"].items():
            if len(blob) == 3:
                raw = self.store.artifacts.get(blob[2])
                values[channel] = self.serde.loads_typed((blob[1], raw))
        if metadata is None:
            metadata = self.serde.loads_typed(lg.from_typed(data["metadata"]))
        parent = data.get("parent")
        return CheckpointTuple(
            config=_config(tid, ns, cid),
            checkpoint=cast(Checkpoint, {**checkpoint, "channel_values": values}),
            metadata=metadata,
            parent_config=_config(tid, ns, parent) if parent else None,
            pending_writes=self._writes(cuts, ns, cid),
        )

    def _writes(self, cuts: lg.Cuts, ns: str, cid: str) -> builtins.list[PendingWrite]:
        key = lg.checkpoint_key(ns, cid)
        floor = cuts.writes_after(key)
        calls = []
        for rec in cuts.view.records(lg.WRITES, key):
            if rec.seq <= floor:
                break
            calls.append(rec.data)
        stored: dict[tuple[str, int], tuple[str, str, builtins.list[str], str]] = {}
        for call in reversed(calls):  # oldest first, as InMemorySaver keeps them
            task_id, task_path = call["task_id"], call["task_path"]
            for idx, channel, typed in call["writes"]:
                inner = (task_id, idx)
                if idx >= 0 and inner in stored:
                    continue
                stored[inner] = (task_id, channel, typed, task_path)
        ordered = sorted(stored, key=lambda k: writes_sort_key(stored[k][3], *k))
        out: builtins.list[PendingWrite] = []
        for k in ordered:
            task_id, channel, typed, _ = stored[k]
            out.append((task_id, channel, self.serde.loads_typed(self._typed(typed))))
        return out

    def _typed(self, value: builtins.list[str]) -> tuple[str, bytes]:
        """A stored value: inline ``[type, base64]`` or ``[type, "", artifact id]``."""
        if len(value) == 3:
            return value[0], self.store.artifacts.get(value[2])
        return lg.from_typed(value)

    # --- writes ----------------------------------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint: its changed channels as artifacts, one batch of records (and
        the mirrored messages, when they changed) in the thread. Returns its config."""
        tid = self._thread_of(config)
        configurable = config["configurable"]
        ns = str(configurable.get("checkpoint_ns") or "")
        parent_id = configurable.get("checkpoint_id")
        thread = self._thread(tid)
        with self._lock(thread.id):
            self._ensure(thread, tid)
            for attempt in range(_RETRIES):
                try:
                    self._put(
                        thread, tid, ns, parent_id, config, checkpoint, metadata, new_versions
                    )
                    break
                except SeqConflict:  # another process appended meanwhile: read again
                    if attempt == _RETRIES - 1:
                        raise
        return _config(configurable["thread_id"], ns, checkpoint["id"])

    def _put(
        self,
        thread: Thread,
        tid: str,
        ns: str,
        parent_id: str | None,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> None:
        head = thread.head()
        assert head is not None  # _ensure made the thread
        with record_view(thread) as view:
            self._put_in(
                view, head.seq, tid, ns, parent_id, config, checkpoint, metadata, new_versions
            )

    def _put_in(
        self,
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
        thread = view.thread
        cuts = lg.Cuts(view)
        parent = lg.find_checkpoint(cuts, ns, parent_id) if parent_id else None
        values = checkpoint["channel_values"]
        blobs = self._blobs(cuts, ns, parent, checkpoint, new_versions)
        rest = {k: v for k, v in checkpoint.items() if k != "channel_values"}
        full_metadata = get_checkpoint_metadata(config, metadata)
        state = parent.data.get("mirror") if parent is not None else None
        batch: builtins.list[fr.Frame] = []
        fork_record: fr.Frame | None = None
        name = self.messages_channel
        if (
            ns == ""
            and name is not None
            and name in new_versions
            and mirror.is_messages(values.get(name, []))
        ):
            state, batch, fork_record = self._mirror(
                view, tid, state, values.get(name, []), checkpoint["id"], head_seq + 1
            )
        record_data = {
            "ns": ns,
            "id": checkpoint["id"],
            "parent": parent_id,
            "checkpoint": lg.to_typed(self.serde.dumps_typed(rest)),
            "metadata": lg.to_typed(self.serde.dumps_typed(full_metadata)),
            "run_id": full_metadata.get("run_id"),
            "blobs": blobs,
            "mirror": state,
        }
        batch.append(
            self._record(lg.CHECKPOINT, record_data, lg.checkpoint_key(ns, checkpoint["id"]))
        )
        batch.append(fr.RecordAppended(kind=lg.LATEST, key=ns, data={"id": checkpoint["id"]}))
        if view.latest(lg.NAMESPACE, ns) is None:
            batch.append(fr.RecordAppended(kind=lg.NAMESPACE, key=ns))
        if fork_record is not None:
            batch.append(fork_record)
        thread.append(batch, expected_seq=head_seq + 1)

    def _blobs(
        self,
        cuts: lg.Cuts,
        ns: str,
        parent: Record | None,
        checkpoint: Checkpoint,
        new_versions: ChannelVersions,
    ) -> dict[str, builtins.list[Any]]:
        """Per channel: ``[version, type, artifact id]``, or ``[version]`` for an empty one.
        Changed channels are stored; unchanged ones are the parent's (or, failing that, any
        earlier checkpoint's of the namespace holding that version), as a blobs table would."""
        values = checkpoint["channel_values"]
        out: dict[str, builtins.list[Any]] = {}
        missing: dict[str, Any] = {}
        known = parent.data["blobs"] if parent is not None else {}
        for channel, version in checkpoint["channel_versions"].items():
            if channel in new_versions:
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
        self,
        view: RecordView,
        tid: str,
        state: dict[str, Any] | None,
        messages: builtins.list[Any],
        checkpoint_id: str,
        next_seq: int,
    ) -> tuple[dict[str, Any] | None, builtins.list[fr.Frame], fr.Frame | None]:
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
        old = mirror.load_map(self.store, base["map"])
        change = mirror.plan(self.store, old, messages)
        if change.empty:
            return state, [], None
        target = self.store.thread(base["thread"])
        latest = (
            view.latest(lg.MIRROR) if target.id == thread.id else latest_record(target, lg.MIRROR)
        )
        if latest is not None and _mirrors(latest, checkpoint_id):  # put before: a retry
            return _state(target.id, latest.seq, latest.data["map"]), [], None
        position = latest.seq if latest is not None else 0
        if target.id == thread.id and position == base["seq"]:
            frames, aid = change.frames(self.store, next_seq, checkpoint_id)
            return _state(thread.id, next_seq + len(frames) - 1, aid), frames, None
        fork_record = None
        if position != base["seq"]:
            branch = self.store.thread(self._branch_id(thread.id, checkpoint_id))
            fork_record = fr.RecordAppended(
                kind=lg.FORK,
                key=branch.id,
                data={"from": target.id, "at_seq": base["seq"], "checkpoint_id": checkpoint_id},
            )
            done = latest_record(branch, lg.MIRROR) if branch.exists() else None
            if done is not None and _mirrors(done, checkpoint_id):  # mirrored, not yet stored
                return _state(branch.id, done.seq, done.data["map"]), [], fork_record
            meta = {_META_THREAD: tid, _META_BRANCH: checkpoint_id}
            target = fork(target, branch.id, at_seq=base["seq"], meta=meta)
        head = target.head()
        assert head is not None
        frames, aid = change.frames(self.store, head.seq + 1, checkpoint_id)
        seqs = target.append(frames, expected_seq=head.seq + 1)
        return _state(target.id, seqs[-1], aid), [], fork_record

    @staticmethod
    def _branch_id(base: str, checkpoint_id: str) -> str:
        """The continuity fork a branch starting at ``checkpoint_id`` mirrors into."""
        try:
            return validate_thread_id(f"{base}@{checkpoint_id}")
        except InvalidThreadId:
            return "lg-" + blake3.blake3(f"{base}\n{checkpoint_id}".encode()).hexdigest()[:40]

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's writes for a checkpoint: one record (values over 4 KiB as artifacts).
        A write already stored for ``(task_id, idx)`` is kept, as LangGraph's savers do."""
        tid = self._thread_of(config)
        configurable = config["configurable"]
        ns = str(configurable.get("checkpoint_ns") or "")
        cid = configurable.get("checkpoint_id")
        if not cid:
            raise ValueError("put_writes needs config['configurable']['checkpoint_id']")
        stored = []
        for idx, (channel, value) in enumerate(writes):
            kind, raw = self.serde.dumps_typed(value)
            typed = (
                lg.to_typed((kind, raw))
                if len(raw) <= 4096
                else [kind, "", self.store.artifacts.put(raw)]
            )
            stored.append([WRITES_IDX_MAP.get(channel, idx), channel, typed])
        thread = self._thread(tid)
        with self._lock(thread.id):
            self._ensure(thread, tid)
            data = {"task_id": task_id, "task_path": task_path, "writes": stored}
            thread.append(self._record(lg.WRITES, data, lg.checkpoint_key(ns, str(cid))))

    def _record(self, kind: str, data: dict[str, Any], key: str) -> fr.Frame:
        """A record frame for a batch; data larger than a frame holds goes to an artifact,
        as :func:`continuity.record` does it (reads give it back either way)."""
        body = _encoder.encode(data)
        if len(body) > MAX_RECORD_DATA:
            aid = self.store.artifacts.put(body)
            return fr.RecordAppended(kind=kind, key=key, artifact_id=aid, size=len(body))
        return fr.RecordAppended(kind=kind, key=key, data=data)

    # --- deletes: tombstones ---------------------------------------------------------------

    def delete_thread(self, thread_id: str) -> None:
        """Hide every checkpoint and write of the thread (a ``langgraph.deleted`` tombstone)
        and retract its mirrored messages, in its continuity thread and its forks."""
        tid = str(thread_id)
        thread = self._thread(tid)
        if not thread.exists():
            return
        with self._lock(thread.id):
            self._ensure(thread, tid)
            forks = [rec.key for rec in records(thread, lg.FORK)]
            for fork_id in forks:
                branch = self.store.thread(fork_id)
                cleared = self._clear_mirror(branch)
                if cleared:
                    branch.append(cleared)
            batch = self._clear_mirror(thread)
            batch.append(fr.RecordAppended(kind=lg.DELETED, data={"thread_id": tid}))
            thread.append(batch)

    def _clear_mirror(self, thread: Thread) -> builtins.list[fr.Frame]:
        current = latest_record(thread, lg.MIRROR)
        if current is None or current.data["messages"] == 0:
            return []
        entries = mirror.load_map(self.store, current.data["map"])
        seqs = [s for e in entries for s in e.seqs]
        spans = [fr.SeqSpan(from_seq=s, to_seq=s) for s in sorted(seqs)]
        out: builtins.list[fr.Frame] = []
        if spans:
            ids = [e.id for e in entries]
            out.append(
                fr.MessagesRetracted(
                    spans=spans, reason="langgraph: delete_thread", message_ids=ids
                )
            )
        out.append(_empty_mirror())
        return out

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Hide the checkpoints (and their writes) of these runs, in every thread of the store:
        a ``langgraph.removed`` tombstone each. The mirror keeps what it showed (ADR 0023)."""
        wanted = set(run_ids)
        if not wanted:
            return
        for _tid, thread in builtins.list(self._langgraph_threads()):
            with self._lock(thread.id):
                with record_view(thread) as view:
                    found = builtins.list(lg.newest_checkpoints(lg.Cuts(view), None))
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

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``"keep_latest"``: hide all but each namespace's latest checkpoint (a
        ``langgraph.pruned`` record per namespace); ``"delete"``: :meth:`delete_thread`."""
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"prune strategy must be 'keep_latest' or 'delete', not {strategy!r}")
        for thread_id in thread_ids:
            if strategy == "delete":
                self.delete_thread(thread_id)
                continue
            thread = self._thread(str(thread_id))
            if not thread.exists():
                continue
            with self._lock(thread.id):
                batch: builtins.list[fr.Frame] = []
                with record_view(thread) as view:
                    cuts = lg.Cuts(view)
                    for ns in lg.namespaces(view):
                        latest = next(lg.newest_checkpoints(cuts, ns), None)
                        if latest is not None:
                            data = {"keep": latest.seq, "id": latest.data["id"]}
                            batch.append(fr.RecordAppended(kind=lg.PRUNED, key=ns, data=data))
                if batch:
                    thread.append(batch)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every visible checkpoint and write of a thread into another, oldest first
        (values are shared artifacts), and mirror the copy's latest conversation there."""
        src = self._thread(str(source_thread_id))
        if not src.exists():
            return
        tid = str(target_thread_id)
        dst = self._thread(tid)
        with record_view(src) as view:
            cuts = lg.Cuts(view)
            found = builtins.list(lg.newest_checkpoints(cuts, None))
        with self._lock(dst.id):
            self._ensure(dst, tid)
            for rec in reversed(found):
                data = {**rec.data, "mirror": None}
                key = lg.checkpoint_key(data["ns"], data["id"])
                batch = [self._record(lg.CHECKPOINT, data, key)]
                batch.append(
                    fr.RecordAppended(kind=lg.LATEST, key=data["ns"], data={"id": data["id"]})
                )
                if latest_record(dst, lg.NAMESPACE, data["ns"]) is None:
                    batch.append(fr.RecordAppended(kind=lg.NAMESPACE, key=data["ns"]))
                floor = cuts.writes_after(key)  # the tombstones as the view saw them
                calls = [
                    w
                    for w in records(src, lg.WRITES, key, at_or_before=view.last_seq)
                    if w.seq > floor
                ]
                batch.extend(self._record(lg.WRITES, w.data, key) for w in reversed(calls))
                dst.append(batch)
        latest = self.get_tuple(_config(tid, "", None))
        if latest is not None and self.messages_channel is not None:
            # mirror the copy's conversation: put its latest root checkpoint once more, with
            # its own parent (every value is the same artifact again: nothing new is stored)
            parent = latest.parent_config or _config(tid, "", None)
            versions = latest.checkpoint["channel_versions"]
            self.put(parent, latest.checkpoint, latest.metadata, dict(versions))

    # --- helpers for runtimes --------------------------------------------------------------

    def mirror_thread_id(self, config: RunnableConfig) -> str | None:
        """The continuity thread holding the conversation of the checkpoint ``config`` names
        (its thread's own, or a fork for a branch), or None when nothing was mirrored for it."""
        tup_thread = self._thread(self._thread_of(config))
        if not tup_thread.exists():
            return None
        ns = str(config["configurable"].get("checkpoint_ns") or "")
        wanted = get_checkpoint_id(config)
        with record_view(tup_thread) as view:
            cuts = lg.Cuts(view)
            rec = (
                lg.find_checkpoint(cuts, ns, wanted)
                if wanted
                else next(lg.newest_checkpoints(cuts, ns), None)
            )
        state = rec.data.get("mirror") if rec is not None else None
        return None if state is None else str(state["thread"])

    def get_next_version(self, current: str | None, channel: None) -> str:
        """Versions as InMemorySaver makes them: a zero-padded counter and a random suffix."""
        current_v = 0 if current is None else int(str(current).split(".")[0])
        return f"{current_v + 1:032}.{random.random():016}"

    # --- async: the same work, in the store's worker ---------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self._aio.run_blocking(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        found = self.list(config, filter=filter, before=before, limit=limit)
        while True:
            chunk = await self._aio.run_blocking(_take, found, _CHUNK)
            for item in chunk:
                yield item
            if len(chunk) < _CHUNK:
                return

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await self._aio.run_blocking(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await self._aio.run_blocking(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await self._aio.run_blocking(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self._aio.run_blocking(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._aio.run_blocking(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await self._aio.run_blocking(self.prune, thread_ids, strategy=strategy)


def _config(thread_id: Any, ns: str, checkpoint_id: str | None) -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ns}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def _state(thread_id: str, seq: int, map_id: str) -> dict[str, Any]:
    """A checkpoint's mirror position: the thread, the seq of its ``langgraph.mirror``
    record, and the artifact holding the map of what is mirrored."""
    return {"thread": thread_id, "seq": seq, "map": map_id}


def _mirrors(rec: Record, checkpoint_id: str) -> bool:
    """Whether a ``langgraph.mirror`` record closed the change of ``checkpoint_id``."""
    return bool(rec.data.get("checkpoint_id") == checkpoint_id)


def _empty_mirror() -> fr.Frame:
    return fr.RecordAppended(
        kind=lg.MIRROR, data={"checkpoint_id": None, "map": None, "messages": 0}
    )


def _take(items: Iterator[T], n: int) -> list[T]:
    out: list[T] = []
    for item in items:
        out.append(item)
        if len(out) >= n:
            break
    return out
