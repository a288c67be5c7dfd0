"""Bulk work on every core: ``verify`` and ``rebuild-index`` of a whole store (ADR 0030).

Work is cut into tasks (a batch of small threads, a byte range of one long log, one thread's
caches) run by worker processes made with ``fork``: a worker inherits the open store from the
parent, so no backend is opened again and nothing here knows which backend it has. Results come
back in the order the tasks were given, whatever order the workers finish them in, so callers
merge them exactly as one process would have produced them. A worker that dies (killed, out of
memory) fails the whole run with a :class:`ContinuityError` naming it; nothing a task writes is
visible before its rename, so a failed run leaves old files or new ones, never half of one.

``multiprocessing`` is imported only when more than one job runs: the hook path never pays
for it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar, cast

from continuity.errors import ContinuityError
from continuity.store.base import BaseStore

if TYPE_CHECKING:
    from continuity.caches.catalog import CatalogRow
    from continuity.caches.thread_index import RefreshResult
    from continuity.retrieval.store_index import SpooledParts

__all__ = [
    "Rebuilt",
    "available_jobs",
    "batches",
    "log_sizes",
    "rebuild_store",
    "run_tasks",
    "worker_store",
]

T = TypeVar("T")
R = TypeVar("R")

_STORE: BaseStore | None = None
"""The store a forked worker inherited (set in the parent just before the pool forks)."""


def available_jobs(jobs: int | None) -> int:
    """How many processes to use: ``jobs``, or one per core; 1 where ``fork`` is missing
    (a worker must inherit the open store)."""
    n = (os.cpu_count() or 1) if jobs is None else jobs
    if n < 1:
        raise ContinuityError(f"--jobs must be at least 1 (got {n})")
    if n > 1 and (sys.platform == "win32" or sys.platform == "darwin"):
        return 1  # no safe fork there: the in-process path
    return n


def worker_store() -> BaseStore:
    """The store inside a worker."""
    if _STORE is None:  # pragma: no cover - only a misuse reaches it
        raise ContinuityError("not in a bulk worker")
    return _STORE


def _call(fn: Callable[[T], R], task: T) -> R:
    return fn(task)


def _worker_started(parent: int) -> None:
    """A worker dies with the process that made it, and holds none of its standard streams: a
    caller killed mid-run (SIGKILL) must not leave workers behind that keep its pipes open."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        pr_set_pdeathsig = 1
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() != parent:  # it died before the line above took effect
        os._exit(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)


def run_tasks(
    store: BaseStore, fn: Callable[[T], R], tasks: Sequence[T], jobs: int, what: str
) -> Iterator[tuple[int, R]]:
    """``(index, fn(task))`` for every task, run by worker processes, as they finish (``fn``
    reaches the store through :func:`worker_store`; callers put the results back in the
    order of ``tasks``). With ``jobs`` 1 (or one task) everything runs here, in order.
    Stopping the iteration early cancels what has not started."""
    global _STORE
    if jobs <= 1 or len(tasks) <= 1:
        _STORE = store
        for i, task in enumerate(tasks):
            yield i, fn(task)
        return
    import multiprocessing
    from concurrent.futures import Future, ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    _STORE = store
    context = multiprocessing.get_context("fork")
    try:
        pool = ProcessPoolExecutor(
            max_workers=min(jobs, len(tasks)),
            mp_context=context,
            initializer=_worker_started,
            initargs=(os.getpid(),),
        )
    except OSError:
        # No workers to be had: the pool's semaphores need a file (in /dev/shm) that a full
        # disk, a file size limit or a missing /dev/shm refuses. Workers only make it faster.
        yield from run_tasks(store, fn, tasks, 1, what)
        return
    futures: list[Future[Any]] = []
    try:
        futures = [pool.submit(_call, fn, task) for task in tasks]
        index = {future: i for i, future in enumerate(futures)}
        for future in as_completed(futures):
            try:
                yield index[future], future.result()
            except BrokenProcessPool:
                raise ContinuityError(
                    f"{what}: a worker process died (killed, or out of memory) before it "
                    "finished; nothing was half-written (run it again, or with --jobs 1)"
                ) from None
    finally:
        for future in futures:
            future.cancel()
        pool.shutdown(wait=True, cancel_futures=True)


_MIN_TASK_BYTES = 1 << 20
_DOCUMENTS_BYTES = 32 << 20
"""About the most store-wide search documents (msgpack bytes) a batch sends back (ADR 0061)."""


def log_sizes(store: BaseStore, ids: Sequence[str]) -> dict[str, int]:
    """The size of each thread's log: one listing of the store when the backend gives log
    stamps (a stat a log otherwise)."""
    stamps = store.log_stamps(0)
    if stamps is not None:
        known = {s.thread_id: s.size for s in stamps}
        return {tid: known.get(tid, 0) for tid in ids}
    return {tid: store.thread(tid).log_bytes() for tid in ids}


def batches(sizes: dict[str, int], ids: Sequence[str], jobs: int) -> list[tuple[str, ...]]:
    """Thread ids in order, cut into about 4 tasks a worker by bytes of log (each at least
    1 MB: a task costs a worker a few ms whatever its size)."""
    total = sum(sizes.get(tid, 0) for tid in ids)
    target = max(_MIN_TASK_BYTES, total // (jobs * 4) + 1)
    out: list[tuple[str, ...]] = []
    batch: list[str] = []
    size = 0
    for tid in ids:
        batch.append(tid)
        size += sizes.get(tid, 0)
        if size >= target:
            out.append(tuple(batch))
            batch, size = [], 0
    if batch:
        out.append(tuple(batch))
    return out


class Rebuilt(NamedTuple):
    """What :func:`rebuild_store` did."""

    threads: dict[str, RefreshResult]
    search_indexes: int


class _Batch(NamedTuple):
    """A task of :func:`rebuild_store`: consecutive threads, and what to read of each."""

    ids: tuple[str, ...]
    searched: frozenset[str]
    """The threads whose own search index exists (rebuilt too)."""
    rows: bool
    """Read each thread's catalog row (the store keeps a catalog)."""
    documents: bool
    """Read each thread's documents for the store-wide search index (a search made one)."""


def _rebuild_batch(task: _Batch) -> tuple[list[RefreshResult], bytes, bytes]:
    """Rebuild each thread's caches, then read what the store-wide caches need of it (its
    catalog row, its documents), so the calling process only merges: (results, the rows and
    the documents as msgpack, one entry a thread, None where there is nothing to take; the
    documents of a batch stop at about ``_DOCUMENTS_BYTES`` so that what a worker holds, and
    sends, does not grow with the store: ADR 0061)."""
    import msgspec

    from continuity.caches.catalog import fresh_row
    from continuity.caches.thread_index import ThreadIndex
    from continuity.retrieval.index import ThreadSearchIndex
    from continuity.retrieval.store_index import thread_documents

    store = worker_store()
    done = []
    rows = []
    documents: list[bytes | None] = []
    encode = msgspec.msgpack.encode
    room = _DOCUMENTS_BYTES  # past it, the rebuild reads the batch's other threads itself
    for tid in task.ids:
        thread = store.thread(tid)
        done.append(ThreadIndex(thread).rebuild())
        if tid in task.searched:
            ThreadSearchIndex(thread).rebuild()
        if task.rows:
            rows.append(fresh_row(thread))
        if task.documents:
            part = thread_documents(thread) if room > 0 else None
            documents.append(None if part is None else encode(part))
            room -= len(documents[-1] or b"")
    return done, encode(rows) if task.rows else b"", encode(documents) if task.documents else b""


def rebuild_store(
    store: BaseStore,
    thread_ids: Sequence[str] | None = None,
    *,
    jobs: int | None = 1,
    on_progress: Callable[[int, int, int], None] | None = None,
) -> Rebuilt:
    """Delete and rebuild the caches of the given threads (default: every thread, and the
    caches of threads that are gone): each thread's index and search index (those that exist),
    then the store-wide search index (when a search made one) and the catalog. With ``jobs``
    > 1 (None: one per core) the threads are rebuilt by worker processes; the files are the
    same bytes either way: the workers also read each thread's catalog row and store-wide
    search documents, and this process only merges them (taking none whose log has moved
    since). ``on_progress(threads done, threads, frames done)``."""
    from continuity.caches.catalog import rebuild_catalog
    from continuity.retrieval.store_index import rebuild_store_search

    n_jobs = available_jobs(jobs)
    if n_jobs <= 1 or store.cache_dir is None:
        done = _rebuild_here(store, thread_ids, on_progress)
    else:
        done = _rebuild_in_workers(store, thread_ids, n_jobs, on_progress)
    # the one index of every thread's documents (ADR 0029), when a search made it
    try:
        rebuild_store_search(store, if_present=True, parts=done.documents)
    finally:
        if done.documents is not None:
            done.documents.close()
    rebuild_catalog(store, None if thread_ids is None else set(thread_ids), done.rows)
    # the rolling context manager's turns (ADR 0056), those a hook or a policy made
    from continuity.rolling.cache import rebuild_segment_caches

    rebuild_segment_caches(store, None if thread_ids is None else set(thread_ids))
    return Rebuilt(done.threads, done.search_indexes)


class _ThreadsRebuilt(NamedTuple):
    """The threads' caches rebuilt, and what the store-wide caches take from the workers."""

    threads: dict[str, RefreshResult]
    search_indexes: int
    rows: dict[str, CatalogRow]
    """Catalog rows the workers read (none: the catalog reads them itself)."""
    documents: SpooledParts | None
    """Store-wide search documents the workers read, spooled to a temporary file (none: that
    index reads them itself)."""


def _rebuild_here(
    store: BaseStore,
    thread_ids: Sequence[str] | None,
    on_progress: Callable[[int, int, int], None] | None,
) -> _ThreadsRebuilt:
    """Rebuild the threads' caches in this process, one thread after another."""
    from continuity.caches.thread_index import rebuild_all
    from continuity.retrieval.index import rebuild_search

    chosen = None if thread_ids is None else [store.thread(t) for t in thread_ids]
    results: dict[str, RefreshResult] = {}
    every = [store.thread(t) for t in store.threads()] if chosen is None else chosen
    frames = 0
    for thread in every:
        one = rebuild_all(store, [thread])
        results.update(one)
        frames += sum(r.frames_applied for r in one.values())
        if on_progress is not None:
            on_progress(len(results), len(every), frames)
    if chosen is None:
        _drop_vanished(store, set(results))
    return _ThreadsRebuilt(results, rebuild_search(store, chosen), {}, None)


def _rebuild_in_workers(
    store: BaseStore,
    thread_ids: Sequence[str] | None,
    jobs: int,
    on_progress: Callable[[int, int, int], None] | None,
) -> _ThreadsRebuilt:
    """Rebuild the threads' caches in worker processes, batches of threads by log size, each
    worker also reading what the store-wide caches need of its threads (ADR 0030)."""
    from continuity.retrieval.store_index import has_store_search

    assert store.cache_dir is not None
    ids = list(store.threads()) if thread_ids is None else list(thread_ids)
    search_root = store.cache_dir / "search"
    have_search = (
        {p.name for p in search_root.iterdir() if p.is_dir()} if search_root.is_dir() else set()
    )
    wanted = frozenset(have_search & set(ids))
    # the store-wide caches' per-thread parts are read by the workers too (ADR 0030)
    with_rows = store.log_stamps(0) is not None
    with_docs = with_rows and has_store_search(store)
    tasks = [
        _Batch(batch, wanted & frozenset(batch), with_rows, with_docs)
        for batch in batches(log_sizes(store, ids), ids, jobs)
    ]
    spool = None
    if with_docs:
        from continuity.retrieval.store_index import FOLDER, SpooledParts

        spool = SpooledParts(store.cache_dir / FOLDER)
    try:
        found = _run_batches(store, tasks, jobs, len(ids), on_progress, spool)
    except BaseException:
        if spool is not None:
            spool.close()
        raise
    done = _merged(tasks, found, len(wanted), spool)
    if thread_ids is None:
        _drop_vanished(store, set(done.threads))
        for name in sorted(have_search - set(ids)):
            shutil.rmtree(search_root / name, ignore_errors=True)
    return done


_BatchResult = tuple[list["RefreshResult"], bytes, bytes]


def _run_batches(
    store: BaseStore,
    tasks: list[_Batch],
    jobs: int,
    threads: int,
    on_progress: Callable[[int, int, int], None] | None,
    spool: SpooledParts | None = None,
) -> list[_BatchResult]:
    """Each batch's result, in the order of ``tasks``; the documents of each go to ``spool``
    as it comes back (their bytes are not kept)."""
    import msgspec

    found: list[_BatchResult | None] = [None] * len(tasks)
    done_threads = frames = 0
    docs_decoder = msgspec.msgpack.Decoder(list[bytes | None])
    for i, part in run_tasks(store, _rebuild_batch, tasks, jobs, "rebuild-index"):
        if spool is not None and tasks[i].documents:
            got = zip(tasks[i].ids, docs_decoder.decode(part[2]), strict=True)
            for tid, encoded in got:
                if encoded is not None:
                    spool.add(tid, encoded)
            part = (part[0], part[1], b"")
        found[i] = part
        done_threads += len(part[0])
        frames += sum(r.frames_applied for r in part[0])
        if on_progress is not None:
            on_progress(done_threads, threads, frames)
    assert all(got is not None for got in found)  # every task came back, or run_tasks raised
    return cast(list[_BatchResult], found)


def _merged(
    tasks: list[_Batch], found: list[_BatchResult], searched: int, spool: SpooledParts | None
) -> _ThreadsRebuilt:
    """The batches' results as one: each thread's, with the catalog rows and (spooled
    already) the documents read."""
    import msgspec

    from continuity.caches.catalog import CatalogRow

    done = _ThreadsRebuilt({}, searched, {}, spool)
    row_decoder = msgspec.msgpack.Decoder(list[CatalogRow | None])
    for task, (results, row_bytes, _docs) in zip(tasks, found, strict=True):
        done.threads.update(zip(task.ids, results, strict=True))
        if task.rows:
            got_rows = zip(task.ids, row_decoder.decode(row_bytes), strict=True)
            done.rows.update((t, r) for t, r in got_rows if r is not None)
    return done


def _drop_vanished(store: BaseStore, kept: set[str]) -> None:
    """The thread caches of threads that are gone."""
    folder = None if store.cache_dir is None else store.cache_dir / "threads"
    if folder is not None and folder.is_dir():
        for sub in folder.iterdir():
            if sub.is_dir() and sub.name not in kept:
                shutil.rmtree(sub, ignore_errors=True)
