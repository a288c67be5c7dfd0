"""The async face: the store, compile, search and compaction as coroutines that never block the
event loop.

Wrap any store (``AsyncStore(store)``, or ``await AsyncStore.open(location)``: a folder or a
``postgresql://`` URL) and use the entry points of this module with ``await``; they take the
same arguments as their sync twins in :mod:`continuity` and return the same objects::

    from continuity import aio, message, to_anthropic

    store = await aio.AsyncStore.open("/path/to/store", create=True)
    thread = store.thread("agent-1")
    await thread.append(message("user", "The invoice total is off by one."))
    result = await aio.compile_context(thread, recall=True)
    request = to_anthropic(result.bundle)   # rendering is pure and quick: no await
    await aio.run_compaction(thread, StrideMessages(50), summarizer=my_async_llm_summarizer)

How (ADR 0021):

- **Blocking work runs in a worker thread** (the loop's default executor, or the ``executor``
  given to :class:`AsyncStore`): file I/O, fsync, the log's ``flock``, compile, search. The
  event loop only hands work over and receives the result. The in-memory store's reads run on
  the loop (no disk, no lock anyone holds for long); its appends still go to a worker, since
  sealing a batch is CPU work that grows with the batch (3,000 frames: ~50 ms), and so do
  compile, search and compaction on every store, whose CPU time grows with what they read.
- **An async summarizer** (:class:`~continuity.summary.AsyncSummarizer`, an LLM behind an HTTP
  client) is awaited on the loop, between the plan step and the commit step of each checkpoint,
  while the job lock is held; a plain :class:`~continuity.summary.Summarizer` runs in a worker.
  The planning, the job frames, the lock and what is stored are the sync path's own
  (:class:`~continuity.context.compaction.CompactionJob`), so both paths write the same log.
- **Ordering**: a coroutine returns only when its work is done, so one task's calls happen in
  the order it awaits them. Appends to one thread through one :class:`AsyncStore` also commit in
  the order they were called when several tasks call at once (``gather``, ``create_task``): they
  queue in a per-thread lane, which also keeps a burst of appends from filling the executor with
  workers waiting on one log's lock. Across processes the store's ``flock`` still gives
  contiguous seqs, in whatever order the lock is taken.
- **Cancellation** never leaves half a batch, and never leaves work running behind the caller's
  back. A call cancelled before its worker starts does nothing. A worker that has started cannot
  be stopped (a thread cannot be interrupted, and the store's batches are all-or-nothing
  anyway): the coroutine waits for it to finish and then raises ``CancelledError``. So a
  cancelled ``append`` may or may not have committed its batch (whole); :meth:`AsyncThread.head`,
  or ``expected_seq`` on a retry, tells which. A compaction cancelled while it awaits its
  summarizer appends ``job_ended`` with status ``cancelled`` (the checkpoints made before stay),
  releases the job lock, and raises ``CancelledError``.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import threading
import weakref
from collections.abc import AsyncGenerator, Callable, Collection, Iterable, Iterator
from concurrent.futures import Executor
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from os import PathLike
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar

from continuity import frames as fr
from continuity.store.base import BaseStore, Head, Thread, batch_of
from continuity.store.memory import MemoryStore
from continuity.summary import AsyncSummarizer, Summarizer, SummaryContent

if TYPE_CHECKING:
    from continuity.context.compaction import (
        CheckpointPlan,
        CompactionJob,
        CompactionResult,
        CutRule,
    )
    from continuity.context.compiler import CompileResult
    from continuity.retrieval.embedders import Embedder
    from continuity.retrieval.search import Hit
    from continuity.tokens import Tokenizer

__all__ = [
    "AsyncArtifacts",
    "AsyncStore",
    "AsyncThread",
    "compile_context",
    "create_checkpoint",
    "run_compaction",
    "search",
    "search_prefix",
]

T = TypeVar("T")
_READ_CHUNK: Final = 256
"""Frames a worker reads at a time for :meth:`AsyncThread.read`."""


# --- running blocking work off the loop ------------------------------------------------------


class _Call:
    """One blocking call handed to a worker: it can be withdrawn until the worker starts it."""

    __slots__ = ("_fn", "_guard", "_state")

    def __init__(self, fn: Callable[[], Any]) -> None:
        self._fn = fn
        self._guard = threading.Lock()
        self._state = "queued"

    def run(self) -> Any:
        with self._guard:
            if self._state == "withdrawn":
                return None
            self._state = "started"
        return self._fn()

    def withdraw(self) -> bool:
        """True when the worker will never run it (it had not started)."""
        with self._guard:
            if self._state == "queued":
                self._state = "withdrawn"
                return True
            return False


async def _wait_out(fut: asyncio.Future[Any]) -> None:
    """Wait until ``fut`` is done, whatever cancellations arrive meanwhile (the work it stands for
    cannot be stopped, and nothing may outlive the call that started it)."""
    while not fut.done():
        try:
            await asyncio.wait([fut])
        except asyncio.CancelledError:
            continue
    if not fut.cancelled():
        fut.exception()  # retrieved: the caller gets its CancelledError instead


async def _in_worker(
    executor: Executor | None, fn: Callable[[], T], *, must_finish: bool = False
) -> T:
    """``fn()`` in a worker thread, without blocking the loop. Cancelled before the worker starts
    it, it never runs (unless ``must_finish``: clean-up that must happen); cancelled while it
    runs, it finishes first, and then the cancellation is raised."""
    loop = asyncio.get_running_loop()
    call = _Call(fn)
    context = contextvars.copy_context()
    fut: asyncio.Future[T] = loop.run_in_executor(executor, context.run, call.run)
    try:
        return await asyncio.shield(fut)
    except asyncio.CancelledError:
        if not must_finish and call.withdraw():
            raise
        await _wait_out(fut)
        raise


# --- the store ----------------------------------------------------------------------------------


class AsyncStore:
    """A store for code running in an event loop. Wraps any :class:`~continuity.BaseStore`
    (``AsyncStore(Store(path))``, ``AsyncStore(MemoryStore())``); the sync store stays usable
    beside it as :attr:`store`.

    ``executor`` runs the blocking work (default: the running loop's default executor, as
    ``asyncio.to_thread`` uses). ``inline_io`` runs the store's reads (``head``, ``tail``,
    ``read``, artifacts' ``get``) on the loop instead; the default is True for
    :class:`~continuity.store.memory.MemoryStore` only, whose reads touch no disk. Writes always
    run in a worker: sealing a batch, hashing a blob, is CPU work that grows with its size.

    How work is run is public, for the entry points here and for the integrations alike:
    :meth:`run_in_worker` (writes, compile, search), :meth:`run_io` (reads, inline or not),
    :meth:`run_blocking` (any sync call with its arguments) and :meth:`append_turn` (the order
    of one thread's appends).
    """

    def __init__(
        self,
        store: BaseStore,
        *,
        executor: Executor | None = None,
        inline_io: bool | None = None,
    ) -> None:
        self.store = store
        self.executor = executor
        self.inline_io = isinstance(store, MemoryStore) if inline_io is None else inline_io
        self.artifacts = AsyncArtifacts(self)
        self._lanes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, _Lane]] = (
            weakref.WeakKeyDictionary()
        )

    @classmethod
    async def open(
        cls,
        path: str | PathLike[str],
        *,
        create: bool = False,
        durable: bool = True,
        executor: Executor | None = None,
        **options: Any,
    ) -> AsyncStore:
        """The store at ``path`` — a folder (the JSONL store) or a ``postgresql://`` URL —
        opened in a worker (it reads the folder, or connects), wrapped. The arguments are
        :func:`continuity.store.locate.open_store`'s."""

        def open_location() -> BaseStore:
            from continuity.store.locate import open_store

            return open_store(path, create=create, durable=durable, **options)

        return cls(await _in_worker(executor, open_location), executor=executor)

    def __repr__(self) -> str:
        return f"AsyncStore({self.store!r})"

    def thread(self, thread_id: str) -> AsyncThread:
        """A handle on ``thread_id`` (checked here; no I/O): the first append creates it."""
        return AsyncThread(self, self.store.thread(thread_id))

    async def threads(self) -> list[str]:
        """The ids of every thread with at least one frame, sorted."""
        return await self.run_io(self.store.threads)

    async def existing_thread(self, thread_id: str) -> AsyncThread:
        """Like :meth:`thread`, but :class:`~continuity.ThreadNotFound` when it has no frames."""
        return AsyncThread(self, await self.run_io(lambda: self.store.existing_thread(thread_id)))

    # -- how work is run: the handles, the entry points and the integrations all go through
    # these, so every call has the same cancellation rules --

    async def run_blocking(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` in this store's worker, with the cancellation rules of every
        call here: for any other blocking continuity call (``verify_store``, an ingest, …)."""
        return await self.run_in_worker(functools.partial(fn, *args, **kwargs))

    async def run_in_worker(self, fn: Callable[[], T], *, must_finish: bool = False) -> T:
        """``fn()`` in a worker thread: writes, compile, search, a compaction's steps. Cancelled
        before the worker starts it, it never runs (unless ``must_finish``: clean-up that must
        happen); cancelled while it runs, it finishes first, and then the cancellation is
        raised."""
        return await _in_worker(self.executor, fn, must_finish=must_finish)

    async def run_io(self, fn: Callable[[], T]) -> T:
        """``fn()``, a read of the store: on the loop when :attr:`inline_io` (an in-memory
        store's reads), else in a worker, as :meth:`run_in_worker` runs it."""
        if self.inline_io:
            return fn()
        return await _in_worker(self.executor, fn)

    def append_turn(self, thread_id: str) -> AbstractAsyncContextManager[None]:
        """``async with store.append_turn(thread_id):`` waits for the turn of this call among the
        appends to the thread through this store, first come first served, and holds it for the
        block: so they commit in the order they were called."""
        loop = asyncio.get_running_loop()  # an asyncio.Lock belongs to one loop
        lanes = self._lanes.setdefault(loop, {})
        lane = lanes.get(thread_id)
        if lane is None:
            lane = lanes[thread_id] = _Lane(lanes, thread_id)
        return lane


class _Lane:
    """The appends to one thread waiting their turn, first come first served (asyncio.Lock
    wakes its waiters in order). Dropped when nobody uses it, so idle threads cost nothing.

    A context manager of its own rather than an async generator: a task that a runtime leaves
    pending when it closes its loop (the Agents SDK's ``run_sync`` does) would leave a generator
    to be finalized on a closed loop."""

    def __init__(self, lanes: dict[str, _Lane], thread_id: str) -> None:
        self._lanes = lanes
        self._thread_id = thread_id
        self._lock = asyncio.Lock()
        self._users = 0

    async def __aenter__(self) -> None:
        self._users += 1
        try:
            await self._lock.acquire()
        except BaseException:
            self._leave()
            raise

    async def __aexit__(self, *exc_info: object) -> None:
        self._lock.release()
        self._leave()

    def _leave(self) -> None:
        self._users -= 1
        if self._users == 0 and self._lanes.get(self._thread_id) is self:
            del self._lanes[self._thread_id]


class AsyncArtifacts:
    """The store's artifacts (:attr:`AsyncStore.artifacts`): immutable blobs by content hash."""

    def __init__(self, store: AsyncStore) -> None:
        self._store = store

    async def put(self, data: bytes) -> str:
        """Store ``data`` (compressed, written atomically; durable when the store is) and return
        its id. Cancelled while it is written, it is written whole or not at all."""
        return await self._store.run_in_worker(lambda: self._store.store.artifacts.put(data))

    async def get(self, aid: str) -> bytes:
        """The bytes of artifact ``aid``, checked against its id."""
        return await self._store.run_io(lambda: self._store.store.artifacts.get(aid))

    async def exists(self, aid: str) -> bool:
        return await self._store.run_io(lambda: self._store.store.artifacts.exists(aid))


class AsyncThread:
    """A handle on one thread (:meth:`AsyncStore.thread`); the sync handle is :attr:`thread`."""

    def __init__(self, store: AsyncStore, thread: Thread) -> None:
        self.store = store
        self.thread = thread
        self.id = thread.id

    def __repr__(self) -> str:
        return f"AsyncThread({self.id!r})"

    async def append(
        self,
        frames: fr.Frame | Iterable[fr.Frame],
        *,
        expected_seq: int | None = None,
        durable: bool | None = None,
    ) -> range:
        """Append one frame or a batch, all or nothing; return the seqs given to the frames
        (``expected_seq`` and ``durable`` as in :meth:`~continuity.Thread.append`).

        Appends to this thread through this store commit in the order they were called.
        Cancelled before its turn, nothing is written; cancelled while it is written, the batch
        is committed whole or not at all before ``CancelledError`` is raised.
        """
        batch = batch_of(frames)  # taken now: the caller may reuse an iterable afterwards
        thread = self.thread

        def write() -> range:
            return thread.append(batch, expected_seq=expected_seq, durable=durable)

        async with self.store.append_turn(self.id):
            return await self.store.run_in_worker(write)

    async def head(self) -> Head | None:
        """The last committed frame (its seq and digest), or None when the thread is empty."""
        return await self.store.run_io(self.thread.head)

    async def exists(self) -> bool:
        return await self.store.run_io(self.thread.exists)

    async def tail(self, n: int, *, types: Iterable[str] | None = None) -> list[fr.Frame]:
        """The last ``n`` frames (of the given types), oldest first."""
        wanted = None if types is None else list(types)
        return await self.store.run_io(lambda: self.thread.tail(n, types=wanted))

    async def read(
        self,
        *,
        from_seq: int = 0,
        to_seq: int | None = None,
        limit: int | None = None,
        types: Iterable[str] | None = None,
    ) -> AsyncGenerator[fr.Frame, None]:
        """Frames with ``from_seq <= seq <= to_seq`` (of the given types), oldest first, read a
        chunk at a time in a worker: ``async for frame in thread.read(...)``. Close it early with
        ``contextlib.aclosing`` to release the log at once."""
        wanted = None if types is None else list(types)
        frames = self.thread.read(from_seq=from_seq, to_seq=to_seq, limit=limit, types=wanted)
        try:
            while True:
                chunk = await self.store.run_io(functools.partial(_take, frames, _READ_CHUNK))
                for frame in chunk:
                    yield frame
                if len(chunk) < _READ_CHUNK:
                    return
        finally:
            close = getattr(frames, "close", None)
            if close is not None:
                close()  # the reader's file: one close(2), nothing to wait for


def _take(frames: Iterator[fr.Frame], n: int) -> list[fr.Frame]:
    out: list[fr.Frame] = []
    for frame in frames:
        out.append(frame)
        if len(out) >= n:
            break
    return out


# --- entry points -----------------------------------------------------------------------------

Target = AsyncThread | AsyncStore | Thread | BaseStore
"""What an entry point takes: an async handle or store, or a sync one (run with the loop's
default executor)."""


def _unwrap(target: Target) -> tuple[Thread | BaseStore, AsyncStore]:
    if isinstance(target, AsyncThread):
        return target.thread, target.store
    if isinstance(target, AsyncStore):
        return target.store, target
    if isinstance(target, Thread):
        return target, AsyncStore(target.store)
    if isinstance(target, BaseStore):
        return target, AsyncStore(target)
    raise TypeError(f"a store or a thread handle, not {type(target).__name__}")


async def compile_context(
    target: Target,
    thread_id: str | None = None,
    *,
    anchor: int | str | None = None,
    limits: fr.Limits | None = None,
    log: bool = True,
    use_caches: bool = True,
    tokenizer: Tokenizer | None = None,
    recall: str | bool | None = None,
) -> CompileResult:
    """:func:`continuity.compile_context` in a worker: ``await compile_context(thread)`` or
    ``await compile_context(store, thread_id)``, the same arguments and the same bundle.

    A logged compile appends its decision at the end; cancelled while it runs, the compile
    finishes (its decision logged) before ``CancelledError`` is raised."""
    sync, store = _unwrap(target)

    def run() -> CompileResult:
        from continuity.context.compiler import compile_context as compile_sync

        options: dict[str, Any] = {
            "anchor": anchor,
            "limits": limits,
            "log": log,
            "use_caches": use_caches,
            "tokenizer": tokenizer,
            "recall": recall,
        }
        if isinstance(sync, Thread):
            if thread_id is not None and thread_id != sync.id:
                raise TypeError(
                    f"a thread handle ({sync.id!r}) and another thread id {thread_id!r}"
                )
            return compile_sync(sync, **options)
        if thread_id is None:
            raise TypeError("a store needs a thread id")
        return compile_sync(sync, thread_id, **options)

    return await store.run_in_worker(run)


async def search(
    target: AsyncStore | BaseStore,
    query: str,
    *,
    thread: str | Collection[str] | None = None,
    project: str | None = None,
    k: int = 10,
    embedder: Embedder | Literal["store"] | None = "store",
    rerank: int = 50,
    on_damage: Callable[[str], None] | None = None,
) -> list[Hit]:
    """:func:`continuity.search` in a worker (the same arguments and hits; ``"store"``, the
    default embedder, is the store's model). ``on_damage`` is called on the event loop, after
    the search, once per damaged summary it was told of."""
    sync, store = _unwrap(target)
    if not isinstance(sync, BaseStore):
        raise TypeError("search takes a store; search_prefix takes a thread")
    told: list[str] = []

    def run() -> list[Hit]:
        from continuity.retrieval.search import STORE_MODEL, search as search_sync

        return search_sync(
            sync,
            query,
            thread=thread,
            project=project,
            k=k,
            embedder=STORE_MODEL if embedder == "store" else embedder,
            rerank=rerank,
            on_damage=told.append if on_damage is not None else None,
        )

    hits = await store.run_in_worker(run)
    if on_damage is not None:
        for message in told:
            on_damage(message)
    return hits


async def search_prefix(
    target: Target,
    /,
    *args: str,
    max_seq: int,
    k: int,
    exclude_seqs: Iterable[int] = (),
    use_caches: bool = True,
) -> list[Hit]:
    """:func:`continuity.search_prefix` in a worker: ``await search_prefix(thread, query, ...)``
    or ``await search_prefix(store, thread_id, query, ...)``."""
    sync, store = _unwrap(target)
    excluded = list(exclude_seqs)

    def run() -> list[Hit]:
        from continuity.retrieval.search import search_prefix as prefix_sync

        match sync, args:
            case Thread(), (str() as query,):
                return prefix_sync(
                    sync, query, max_seq=max_seq, k=k, exclude_seqs=excluded, use_caches=use_caches
                )
            case BaseStore(), (str() as thread_id, str() as query):
                return prefix_sync(
                    sync,
                    thread_id,
                    query,
                    max_seq=max_seq,
                    k=k,
                    exclude_seqs=excluded,
                    use_caches=use_caches,
                )
            case _:
                raise TypeError(
                    "search_prefix(thread, query, ...) or "
                    "search_prefix(store, thread_id, query, ...)"
                )

    return await store.run_in_worker(run)


# --- compaction -------------------------------------------------------------------------------


class _HeldLock:
    """A job lock taken in one worker and given back in another (it is not tied to a thread)."""

    def __init__(self, lock: AbstractContextManager[None]) -> None:
        self._lock = lock
        self.held = False

    def take(self) -> None:
        self._lock.__enter__()
        self.held = True

    def give_back(self) -> None:
        if self.held:
            self.held = False
            self._lock.__exit__(None, None, None)


async def _summarize(
    store: AsyncStore,
    summarizer: Summarizer | AsyncSummarizer | None,
    plan: CheckpointPlan,
) -> tuple[SummaryContent, str]:
    """The summarize step: an async summarizer awaited on the loop, a sync one in a worker."""
    if summarizer is None:

        def default() -> tuple[SummaryContent, str]:
            from continuity.context.compaction import default_summarizer

            chosen = default_summarizer(None)
            return chosen.summarize(plan.base, plan.messages), chosen.id

        return await store.run_in_worker(default)
    if inspect.iscoroutinefunction(summarizer.summarize):
        content: object = await summarizer.summarize(plan.base, plan.messages)
    else:
        content = await store.run_in_worker(lambda: summarizer.summarize(plan.base, plan.messages))
        if inspect.isawaitable(content):  # a sync-looking callable that returns a coroutine
            content = await content
    if not isinstance(content, SummaryContent):
        raise TypeError(
            f"summarizer {summarizer.id!r} returned {type(content).__name__}, not SummaryContent"
        )
    return content, summarizer.id


async def run_compaction(
    target: Target,
    /,
    *where: str | CutRule,
    summarizer: Summarizer | AsyncSummarizer | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> CompactionResult:
    """:func:`continuity.run_compaction` for an event loop: ``await run_compaction(thread,
    rule)`` or ``await run_compaction(store, thread_id, rule)``. The same job, frames, lock and
    summaries; ``summarizer`` may be an :class:`~continuity.summary.AsyncSummarizer`, awaited
    between the reads and the writes of each checkpoint. ``progress`` is called on the loop.

    A summarizer's failure is logged and reported as in the sync path. Cancelled, the job
    appends ``job_ended`` (``cancelled``) once the step under way is done, releases the lock,
    and raises ``CancelledError``; the checkpoints made before stay. Raises
    :class:`~continuity.JobInFlight` at once when a job for the thread is running.
    """
    sync, store = _unwrap(target)

    def prepare() -> tuple[CompactionJob, _HeldLock]:
        from continuity.context.compaction import CompactionJob, compaction_target

        thread, rule = compaction_target(sync, where)
        return CompactionJob(thread, rule), _HeldLock(
            thread.store.job_lock(thread.id, "compaction")
        )

    job, lock = await store.run_in_worker(prepare)
    try:
        await store.run_in_worker(lock.take)
        try:
            cuts = await store.run_in_worker(job.start)
            for i, to_seq in enumerate(cuts):
                plan = await store.run_in_worker(functools.partial(job.plan, to_seq))
                content, by = await _summarize(store, summarizer, plan)
                await store.run_in_worker(functools.partial(job.commit, plan, content, by))
                if progress is not None:
                    progress(i + 1, len(cuts))
        except BaseException as exc:  # a cancellation is logged too, then raised again
            if not job.started:
                raise
            await store.run_in_worker(functools.partial(job.end, exc), must_finish=True)
            if not isinstance(exc, Exception):
                raise
            return job.result
        if not job.started:
            return job.result
        return await store.run_in_worker(job.end, must_finish=True)
    finally:
        if lock.held:
            await store.run_in_worker(lock.give_back, must_finish=True)


async def create_checkpoint(
    target: Target,
    /,
    *where: str | int,
    text: str | None = None,
    summarizer: Summarizer | AsyncSummarizer | None = None,
    cut_rule_id: str = "manual_v1",
    produced_by: str | None = None,
) -> fr.CompactionCheckpointCreated:
    """:func:`continuity.create_checkpoint` for an event loop: ``await create_checkpoint(thread,
    to_seq)`` or ``await create_checkpoint(store, thread_id, to_seq)``; ``summarizer`` may be an
    :class:`~continuity.summary.AsyncSummarizer`. Cancelled while it awaits the summarizer,
    nothing is written."""
    sync, store = _unwrap(target)

    def plan_step() -> tuple[Thread, CheckpointPlan]:
        from continuity.context.compaction import checkpoint_target, plan_checkpoint
        from continuity.context.sources import open_source

        thread, to_seq = checkpoint_target(sync, where)
        return thread, plan_checkpoint(thread, to_seq, open_source(thread))

    thread, plan = await store.run_in_worker(plan_step)
    if text is not None:
        content, by = SummaryContent(text=text), produced_by or "manual"
    else:
        content, by = await _summarize(store, summarizer, plan)
        by = produced_by or by

    def commit() -> fr.CompactionCheckpointCreated:
        from continuity.context.compaction import commit_checkpoint

        return commit_checkpoint(thread, plan, content, produced_by=by, cut_rule_id=cut_rule_id)

    return await store.run_in_worker(commit)
