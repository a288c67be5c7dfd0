"""A LangGraph checkpoint saver whose truth is a continuity log (the `langgraph` extra).

:class:`ContinuitySaver` implements :class:`langgraph.checkpoint.base.BaseCheckpointSaver`,
sync and async. One LangGraph ``thread_id`` is one continuity thread; its checkpoints, pending
writes and tombstones are ``record_appended`` frames in it (:mod:`._langgraph_log`), channel
values are artifacts (one per channel version, content-addressed), and the graph's messages are
mirrored as message frames (:mod:`._langgraph_mirror`), so ``continuity compile``, ``search``
and ``log`` work on a LangGraph thread as on any other. A branch taken from an older checkpoint
mirrors into a continuity fork. Nothing is ever rewritten: ``delete_thread``,
``delete_for_runs`` and ``prune`` append tombstones that reads honour. ADR 0023. (This module
is the front door; the saver hands its work to collaborators that never see it: the store's
LangGraph threads and their locks (:mod:`._langgraph_threads`), the reads
(:mod:`._langgraph_read`), ``put`` (:mod:`._langgraph_put`), and deletes and copies
(:mod:`._langgraph_admin`).)

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

import os
import random
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any, Final, Self, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    get_checkpoint_id,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

import continuity.integrations._langgraph_admin as admin
import continuity.integrations._langgraph_log as lg
from continuity.aio import AsyncStore
from continuity.context.records import Record, record_view
from continuity.errors import SeqConflict
from continuity.integrations._langgraph_put import CheckpointPut, CheckpointWriter
from continuity.integrations._langgraph_read import CheckpointReader, candidates
from continuity.integrations._langgraph_redact import redacting
from continuity.integrations._langgraph_threads import LangGraphThreads, continuity_thread_id
from continuity.integrations.langgraph_store import ContinuityStore
from continuity.store.base import BaseStore, Thread
from continuity.store.locate import open_store
from continuity.store.memory import MemoryStore

__all__ = ["ContinuitySaver", "ContinuityStore", "CyclicHistory"]

CyclicHistory = lg.CyclicHistory

_RETRIES: Final = 8
_CHUNK: Final = 64
T = TypeVar("T")


class ContinuitySaver(BaseCheckpointSaver[str]):
    """LangGraph checkpoints in a continuity store.

    ``store`` is any continuity store (:class:`~continuity.Store`, :class:`~continuity.MemoryStore`,
    :class:`~continuity.PostgresStore`, …) or a location: a JSONL store's folder or a
    ``postgresql://`` URL (created when missing). ``messages_channel`` names the channel
    of LangChain messages mirrored as the thread's conversation (None: no mirror). ``serde`` is
    LangGraph's serializer (its default: ``JsonPlusSerializer``).
    """

    def __init__(
        self,
        store: BaseStore | str | os.PathLike[str],
        *,
        messages_channel: str | None = "messages",
        serde: SerializerProtocol | None = None,
        **options: Any,
    ) -> None:
        super().__init__(serde=serde)
        self._owns_store = not isinstance(store, BaseStore)
        if isinstance(store, BaseStore):
            if options:
                raise TypeError(f"store options {sorted(options)} need a location, not a store")
            self.store: BaseStore = store
        elif str(store) == ":memory:":  # as SqliteSaver.from_conn_string(":memory:")
            self.store = MemoryStore()
        else:
            self.store = open_store(store, create=True, **options)
        self.messages_channel = messages_channel
        self._aio = AsyncStore(self.store)
        self._threads = LangGraphThreads(self.store)
        self._cipher: tuple[SerializerProtocol, bool] | None = None

    # --- lifecycle -------------------------------------------------------------------------

    @classmethod
    def from_conn_string(cls, conn_string: str | os.PathLike[str], **kwargs: Any) -> Self:
        """A saver on the store at a location (a JSONL store's folder, created when missing; a
        ``postgresql://`` URL; ``":memory:"`` for a store in memory), to use as LangGraph's
        savers are: ``with ContinuitySaver.from_conn_string(url) as saver:`` (or ``async
        with``) closes the store when the block ends. ``kwargs``: ``messages_channel``,
        ``serde``, and the store's options (``durable``; for PostgreSQL ``schema``,
        ``pool_size``, …)."""
        return cls(conn_string, **kwargs)

    def setup(self) -> None:
        """Make sure the store is there and answers (created when the saver opened it from a
        location; a PostgreSQL schema then too). Idempotent; what ``SqliteSaver`` and
        ``PostgresSaver`` users call before a graph runs."""
        self._threads.check_open()
        self.store.threads()

    async def asetup(self) -> None:
        await self._aio.run_blocking(self.setup)

    def close(self) -> None:
        """Close the store when the saver opened it (from a location: a PostgreSQL pool is
        closed here); a store handed in is its owner's to close. The saver (and its clones)
        refuses calls afterwards. Closing twice is fine."""
        if self._threads.closed:
            return
        self._threads.sync()  # the writes still waiting for a put's sync
        self._threads.closed = True
        if self._owns_store:
            self.store.close()

    async def aclose(self) -> None:
        await self._aio.run_blocking(self.close)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

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
        return continuity_thread_id(thread_id)

    # The reader and the writer are made per call, not kept: the serializer is read when it is
    # used, as `with_allowlist` gives a clone of the saver (sharing its threads) another one.

    def _reader(self) -> CheckpointReader:
        return CheckpointReader(self.store, self.serde, self._threads.bases)

    def _writer(self) -> CheckpointWriter:
        channel = None if self.encrypts() else self.messages_channel
        return CheckpointWriter(
            self.store,
            self._dumper(),
            channel,
            self._threads.mirrors,
            self._threads.bases,
            self._threads.known,
        )

    def _dumper(self) -> SerializerProtocol:
        """The serializer values are stored with: the saver's, redacting on a store that
        redacts (its checkpoint values hold no secret either: issue 40)."""
        return redacting(self.serde, self.store.redactor)

    def encrypts(self) -> bool:
        """Whether the serializer hides what it serializes (an ``EncryptedSerializer``, or any
        whose bytes do not hold a plain string given to it). Then nothing is mirrored: the
        conversation stays in the encrypted checkpoints only, and the log holds no plaintext
        of it (ADR, issue 27)."""
        serde = self.serde
        if self._cipher is None or self._cipher[0] is not serde:
            probe = "continuity: is this serializer a cipher?"
            _kind, raw = serde.dumps_typed(probe)
            self._cipher = (serde, probe.encode() not in raw)
        return self._cipher[1]

    # --- reads -----------------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names (``checkpoint_id``), or its namespace's latest."""
        tid = self._thread_of(config)
        configurable = config["configurable"]
        ns = str(configurable.get("checkpoint_ns") or "")
        thread = self._threads.thread(tid)
        wanted = get_checkpoint_id(config)
        own = self._own_checkpoint(thread, ns, str(wanted) if wanted else None)
        if own is not None:
            return self._reader().checkpoint_tuple(None, tid, own[0], writes=own[1])
        if not thread.exists():
            return None
        with record_view(thread) as view:  # one index refresh for every lookup below
            cuts = lg.Cuts(view)
            if wanted:
                rec = lg.find_checkpoint(cuts, ns, str(wanted))
            else:
                rec = next(lg.newest_checkpoints(cuts, ns), None)
            return None if rec is None else self._reader().checkpoint_tuple(cuts, tid, rec)

    def _own_checkpoint(
        self, thread: Thread, ns: str, wanted: str | None
    ) -> tuple[Record, list[dict[str, Any]]] | None:
        """A checkpoint this process put, with its writes, answered from what its own writes
        left (ADR 0065) when nobody else wrote to the thread since (the log's head is still
        the last frame this process appended): no view of the thread, whose caches the next
        reader catches up. None when that cannot be vouched for."""
        if self.store.redactor is not None:
            return None
        with self._threads.lock(thread.id):
            known = self._threads.known.get(thread.id)
            if known is None:
                return None
            rec = known.checkpoint(ns, wanted)
            if rec is None:
                return None
            writes = self._threads.writes_of(thread.id).of(rec.key or "")
            if writes is None:
                return None
            head = thread.head()
            if head is None or head.seq != known.head_seq:
                return None
            return rec, [w.data for w in writes]

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first: of one thread (``config``) or of all (None), of one
        namespace when the config names one, matching every ``filter`` key of their metadata
        (a dotted key ``"a.b"`` reads ``metadata["a"]["b"]`` as SqliteSaver's does, unless the
        metadata has the key ``"a.b"`` itself; a missing one is None), with an id less than
        that of the checkpoint ``before`` names (as LangGraph's savers compare them, whatever
        namespace it is in and whenever it was put), at most ``limit`` of them."""
        if limit is not None and limit <= 0:
            return
        if config is not None:
            tid = self._thread_of(config)
            thread = self._threads.thread(tid)
            pairs: Iterator[tuple[str, Thread]] = iter([(tid, thread)] if thread.exists() else [])
            ns: str | None = config["configurable"].get("checkpoint_ns")
            only_id = get_checkpoint_id(config)
        else:
            pairs, ns, only_id = self._threads.each(), None, None
        before_id = get_checkpoint_id(before) if before else None
        reader = self._reader()
        left = limit
        for tid, thread in pairs:
            with record_view(thread) as view:
                cuts = lg.Cuts(view)
                for rec in candidates(cuts, ns, only_id, before_id, before):
                    metadata = reader.metadata(rec)
                    if filter and not all(_meta(metadata, k) == v for k, v in filter.items()):
                        continue
                    yield reader.checkpoint_tuple(cuts, tid, rec, metadata)
                    if left is not None:
                        left -= 1
                        if left <= 0:
                            return

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
        put = CheckpointPut(
            thread_id=tid,
            ns=ns,
            parent_id=configurable.get("checkpoint_id"),
            checkpoint=checkpoint,
            metadata=get_checkpoint_metadata(config, metadata),
            new_versions=new_versions,
            fresh=_RUNTIME in configurable,
        )
        writer = self._writer()
        thread = self._threads.thread(tid)
        prepared = writer.prepare(put)  # serialized and stored before the lock is taken
        with self._threads.lock(thread.id):
            self._threads.ensure(thread, tid)
            for attempt in range(_RETRIES):
                try:
                    writer.append(thread, put, prepared)
                    break
                except SeqConflict:  # another process appended meanwhile: read again
                    if attempt == _RETRIES - 1:
                        raise
            # its sync (the store's own durability) covers the writes appended before it
            self._threads.unsynced.pop(thread.id, None)
        return lg.config_of(configurable["thread_id"], ns, checkpoint["id"])

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's writes for a checkpoint: one record (values over 4 KiB as artifacts).
        A write already stored for ``(task_id, idx)`` is kept, as LangGraph's savers do.

        In a graph run with ``durability="async"`` (LangGraph's default), a task's writes are
        appended without a sync of their own: the sync of the checkpoint put after the step
        makes them durable with it (one sync a step, ADR 0065); an error, an interrupt, a
        resume or a scheduled write is synced at once, as is every write of a ``"sync"`` or
        ``"exit"`` run (an ``"exit"`` run stores its pending writes after its last put) or of a
        call made outside a graph run. Either way the write is in the log (every reader sees
        it, a killed process loses nothing) when the call returns."""
        tid = self._thread_of(config)
        configurable = config["configurable"]
        ns = str(configurable.get("checkpoint_ns") or "")
        cid = configurable.get("checkpoint_id")
        if not cid:
            raise ValueError("put_writes needs config['configurable']['checkpoint_id']")
        stored = []
        dumper = self._dumper()
        for idx, (channel, value) in enumerate(writes):
            kind, raw = dumper.dumps_typed(value)
            typed = (
                lg.to_typed((kind, raw))
                if len(raw) <= 4096
                else [kind, "", self.store.artifacts.put(raw)]
            )
            stored.append([WRITES_IDX_MAP.get(channel, idx), channel, typed])
        thread = self._threads.thread(tid)
        deferred = _sync_deferred(configurable, writes)
        with self._threads.lock(thread.id):
            self._threads.ensure(thread, tid)
            data = {"task_id": task_id, "task_path": task_path, "writes": stored}
            key = lg.checkpoint_key(ns, str(cid))
            frame = lg.record_frame(self.store, lg.WRITES, data, key)
            known = self._threads.known.pop(thread.id, None)
            given = thread.append(frame, durable=False if deferred else None)
            if deferred:
                self._threads.unsynced[thread.id] = thread
            else:  # its sync covers the writes appended before it
                self._threads.unsynced.pop(thread.id, None)
            self._threads.writes_of(thread.id).add(
                key, Record(seq=given.start, ts_ms=0, kind=lg.WRITES, key=key, data=data)
            )
            if known is not None and known.appended(given, [frame]):
                self._threads.known[thread.id] = known  # still all that was written since

    # --- deletes: tombstones ---------------------------------------------------------------

    def delete_thread(self, thread_id: str) -> None:
        """Hide every checkpoint and write of the thread (a ``langgraph.deleted`` tombstone)
        and retract its mirrored messages, in its continuity thread and its forks."""
        admin.delete_thread(self._threads, thread_id)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Hide the checkpoints (and their writes) of these runs, in every thread of the store:
        a ``langgraph.removed`` tombstone each. The mirror keeps what it showed (ADR 0023)."""
        admin.delete_for_runs(self._threads, run_ids)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``"keep_latest"``: hide all but each namespace's latest checkpoint (a
        ``langgraph.pruned`` record per namespace) and the ancestors its ``DeltaChannel``
        values are read back from (up to their latest snapshot), so the graph's state is what
        it was; ``"delete"``: :meth:`delete_thread`."""
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"prune strategy must be 'keep_latest' or 'delete', not {strategy!r}")
        if isinstance(thread_ids, (str, bytes)):
            # one id given as a string would be pruned letter by letter: threads "a", "b", "c"
            raise TypeError(
                f"prune takes a sequence of thread ids, not one string: prune([{thread_ids!r}])"
            )
        for thread_id in thread_ids:
            if strategy == "delete":
                self.delete_thread(thread_id)
            else:
                admin.keep_latest(self._threads, thread_id, self._reader().metadata)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every visible checkpoint and write of a thread into another, oldest first
        (values are shared artifacts), and mirror the copy's latest conversation there."""
        tid = str(target_thread_id)
        if not admin.copy_records(self._threads, str(source_thread_id), tid):
            return
        latest = self.get_tuple(lg.config_of(tid, "", None))
        if latest is not None and self.messages_channel is not None:
            # mirror the copy's conversation: put its latest root checkpoint once more, with
            # its own parent (every value is the same artifact again: nothing new is stored)
            parent = latest.parent_config or lg.config_of(tid, "", None)
            versions = latest.checkpoint["channel_versions"]
            self.put(parent, latest.checkpoint, latest.metadata, dict(versions))

    # --- helpers for runtimes --------------------------------------------------------------

    def mirror_thread_id(self, config: RunnableConfig) -> str | None:
        """The continuity thread holding the conversation of the checkpoint ``config`` names:
        its thread's own when it is on the branch put last, the fork that keeps its branch
        when another one was taken since, a subgraph's thread for a subgraph's namespace; None
        when nothing was mirrored for it."""
        tup_thread = self._threads.thread(self._thread_of(config))
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
            if state is None:
                return None
            if state["thread"] != tup_thread.id:  # a subgraph's thread, or an older fork
                return str(state["thread"])
            # the thread shows the branch put last; a branch left behind was kept as a fork
            # taken where it was left: the first such fork after this checkpoint's position
            kept = [
                (r.data["at_seq"], r.key)
                for r in view.records(lg.FORK)
                if r.data.get("archive") and r.data["at_seq"] >= state["seq"]
            ]
            return min(kept)[1] if kept else tup_thread.id

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Per channel, the writes of the checkpoint's ancestors (oldest first) back to the
        nearest one holding a value of it (its ``seed``), as the base class walks them, in one
        view of the thread and reading only those channels' values. A parent chain that loops
        (a hand-made put) is :class:`CyclicHistory`, never an endless walk."""
        if not channels:
            return {}
        tid = self._thread_of(config)
        ns = str(config["configurable"].get("checkpoint_ns") or "")
        thread = self._threads.thread(tid)
        if not thread.exists():
            return {ch: {"writes": []} for ch in channels}
        with record_view(thread) as view:
            cuts = lg.Cuts(view)
            wanted = get_checkpoint_id(config)
            rec = (
                lg.find_checkpoint(cuts, ns, str(wanted))
                if wanted
                else next(lg.newest_checkpoints(cuts, ns), None)
            )
            if rec is None:
                return {ch: {"writes": []} for ch in channels}
            return self._reader().delta_history(cuts, rec, channels)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return await self._aio.run_blocking(
            lambda: self.get_delta_channel_history(config=config, channels=channels)
        )

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


_DURABILITY: Final = "__pregel_durability"
_RUNTIME: Final = "__pregel_runtime"
"""The configurable keys a graph run gives its saver calls (LangGraph's ``CONFIG_KEY_DURABILITY``
and ``CONFIG_KEY_RUNTIME``, internal names): the durability it was asked for (absent: its
default, ``"async"``) and its runtime (absent: a call made outside a graph run)."""


def _sync_deferred(configurable: Mapping[str, Any], writes: Sequence[tuple[str, Any]]) -> bool:
    """Whether a ``put_writes`` may leave its sync to the next put's (ADR 0065): a task's
    ordinary writes in a graph run with ``durability="async"``, where a checkpoint is put after
    every step and LangGraph accepts that a crash during the run loses what was not yet
    written. Not in a ``"sync"`` run, nor an ``"exit"`` one (its pending writes come after its
    last put), nor outside a run; never the special writes (an error, an interrupt, a resume,
    a scheduled task), which can end a run with no put after them."""
    if _RUNTIME not in configurable or configurable.get(_DURABILITY, "async") != "async":
        return False
    return not any(channel in WRITES_IDX_MAP for channel, _value in writes)


def _meta(metadata: Any, key: str) -> Any:
    """A filter key's value in checkpoint metadata: the key itself, else a dotted path into
    nested mappings (None when it leads nowhere)."""
    if not isinstance(metadata, Mapping):
        return None
    if key in metadata or "." not in key:
        return metadata.get(key)
    value: Any = metadata
    for part in key.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def _take(items: Iterator[T], n: int) -> list[T]:
    out: list[T] = []
    for item in items:
        out.append(item)
        if len(out) >= n:
            break
    return out
