"""The async face (continuity.aio): the same results as the sync API, without blocking the loop.

Every test runs its coroutine with ``asyncio.run(..., debug=True)``; the ones doing real work
watch asyncio's own slow-callback warnings ("Executing <...> took 0.123 seconds") with a low
``slow_callback_duration``, and a control runs the same work with an executor that runs
everything on the loop, to show the watch would catch it.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import pytest

from continuity import aio, frames as fr
from continuity.context.compaction import (
    ManualCut,
    StrideMessages,
    create_checkpoint,
    run_compaction,
)
from continuity.context.compiler import compile_context
from continuity.errors import InvalidCutRule, JobInFlight, StoreNotFound, ThreadNotFound
from continuity.maintenance.verify import verify_store
from continuity.retrieval.search import search, search_prefix
from continuity.store.base import BaseStore
from continuity.store.jsonl import Store
from continuity.store.memory import MemoryStore
from continuity.summary import SummaryContent, SummaryDoc
from continuity.testing import FixedClock
from tests.support.compile import RecordingSummarizer
from tests.support.narrow import narrow

T = TypeVar("T")
SLOW: float = 0.05
"""Seconds a loop callback may take before asyncio (debug mode) calls it slow."""
_TURNS = 2520
"""Turns of the workload's thread (4 messages each): sealing them in one batch, or compiling
them the first time, takes 0.1-0.2 s, so on the loop it is caught well above ``SLOW``."""


# --- harness ------------------------------------------------------------------------------------


class _SlowCallbacks(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith("Executing ") and " took " in message:
            self.seen.append(message)


@contextlib.contextmanager
def _watching() -> Iterator[_SlowCallbacks]:
    handler = _SlowCallbacks()
    logger = logging.getLogger("asyncio")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


def run(main: Callable[[], Awaitable[T]], *, slow: float = SLOW) -> tuple[T, list[str]]:
    """``main()`` on a fresh loop in debug mode: its result, and the slow callbacks it had.

    What the test process holds already (every module, every fixture of a whole test session)
    is frozen out of the collector first: a full collection walks it all, holding the GIL, and
    would stall the loop for as long, whichever thread set it off."""

    async def watched() -> T:
        asyncio.get_running_loop().slow_callback_duration = slow
        return await main()

    gc.collect()
    gc.freeze()
    try:
        with _watching() as handler:
            result = asyncio.run(watched(), debug=True)
    finally:
        gc.unfreeze()
    return result, handler.seen


def run_quiet(main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """``main()`` in debug mode, for tests about results rather than blocking."""
    return asyncio.run(main(), debug=True)


class InlineExecutor(Executor):
    """Runs every call at once, on the calling thread: what a face that blocks the loop does."""

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        fut: Future[T] = Future()
        try:
            fut.set_result(fn(*args, **kwargs))
        except BaseException as exc:
            fut.set_exception(exc)
        return fut


class SleepySummarizer:
    """An async summarizer that waits like an LLM call would, then summarizes like
    :class:`RecordingSummarizer` (the base's text plus one ``seq:id`` per message)."""

    def __init__(self, delay: float = 0.005, *, block_at_call: int | None = None) -> None:
        self.delay = delay
        self.calls: list[list[int]] = []
        self.block_at_call = block_at_call
        self.blocked = asyncio.Event()

    @property
    def id(self) -> str:
        return "test.recording/1"

    async def summarize(
        self, base: SummaryDoc | None, messages: Sequence[fr.MessageAppended]
    ) -> SummaryContent:
        self.calls.append([m.seq for m in messages])
        if self.block_at_call is not None and len(self.calls) - 1 == self.block_at_call:
            self.blocked.set()
            await asyncio.sleep(3600)  # until cancelled
        await asyncio.sleep(self.delay)
        tokens = [base.text] if base is not None and base.text else []
        tokens += [f"{m.seq}:{m.message_id}" for m in messages]
        return SummaryContent(
            text=" ".join(tokens) or "(nothing yet)",
            sections={"seqs": [str(m.seq) for m in messages]},
        )


def turn(i: int, *, big: str | None = None) -> list[fr.MessageAppended]:
    """A user request, a tool call, its result (in an artifact when ``big`` is its id), a reply."""
    use = fr.ToolUseBlock(id=f"call{i}", name="Bash", input={"command": f"pytest -k case{i}"})
    if big is None:
        output = fr.ToolResultBlock(tool_use_id=f"call{i}", content=f"FAILED case{i}: KeyError")
    else:
        output = fr.ToolResultBlock(
            tool_use_id=f"call{i}", artifact_id=big, preview="FAILED", size=50_000
        )
    return [
        fr.message("user", f"turn {i}: the invoice total is wrong again", message_id=f"u{i}"),
        fr.message("assistant", content=[use], message_id=f"a{i}"),
        fr.message("user", content=[output], message_id=f"r{i}"),
        fr.message("assistant", f"fixed the total in turn {i}", message_id=f"f{i}"),
    ]


def verified(store: BaseStore) -> None:
    report = verify_store(store)
    assert report.ok, [str(p) for p in report.problems]
    assert not report.notes, report.notes


def _texts(store: BaseStore, thread_id: str) -> list[str]:
    """The text of each message of a thread (one text block each), oldest first."""
    return [
        narrow(fr.TextBlock, narrow(fr.MessageAppended, f).content[0]).text
        for f in store.thread(thread_id).read(types=["message_appended"])
    ]


# --- never blocking the loop --------------------------------------------------------------------


async def _workload(store: aio.AsyncStore, batch: list[fr.MessageAppended]) -> dict[str, Any]:
    """Real work on a durable JSONL store, with a heartbeat task beside it. ``batch`` is made
    before the loop starts: building 10,000 frames is the test's own work, not the face's."""
    beats = 0
    stop = asyncio.Event()

    async def heartbeat() -> None:
        nonlocal beats
        while not stop.is_set():
            beats += 1
            await asyncio.sleep(0.005)

    beating = asyncio.create_task(heartbeat())
    thread = store.thread("work")
    big = await store.artifacts.put(b"tests/test_mod.py::test_case PASSED\n" * 1500)
    for i in range(20):  # one frame per call, fsync each
        for m in turn(i, big=big if i % 5 == 0 else None):
            await thread.append(m)
    await thread.append(batch)  # 10,000 frames at once
    first = await aio.compile_context(thread, recall=True)  # builds every cache
    again = await aio.compile_context(thread, recall=True, log=False)
    hits = await aio.search(store, "invoice total", k=5)
    prefix = await aio.search_prefix(thread, "fixed total", max_seq=400, k=3)
    job = await aio.run_compaction(thread, StrideMessages(500), summarizer=SleepySummarizer())
    head = await thread.head()
    assert head is not None
    extractive = await aio.create_checkpoint(thread, head.seq)
    frames = [f async for f in thread.read()]
    stop.set()
    await beating
    return {
        "first": first,
        "again": again,
        "hits": hits,
        "prefix": prefix,
        "job": job,
        "extractive": extractive,
        "frames": len(frames),
        "beats": beats,
    }


@pytest.mark.slow
def test_real_work_on_a_durable_jsonl_store_never_blocks_the_loop(tmp_path: Path) -> None:
    batch = [m for i in range(20, _TURNS) for m in turn(i)]
    folders = iter([tmp_path / "s", tmp_path / "again"])
    folder = tmp_path

    async def main() -> dict[str, Any]:
        nonlocal folder
        folder = next(folders)
        store = await aio.AsyncStore.open(folder, create=True)  # durable: fsync per append
        assert isinstance(store.store, Store) and store.store.durable
        return await _workload(store, batch)

    # A face that blocks is slow on every run of this fixed work (the control below shows by
    # how much); a machine too loaded to schedule the process for 50 ms can stall one run. So
    # a second run decides, and the first one's report is kept for the failure message.
    out, slow = run(main)
    if slow:
        out, again = run(main)
        assert again == [], f"slow callbacks on both runs: {slow} then {again}"
    assert out["first"].logged and out["first"].bundle.recalled
    assert out["again"].bundle_id == out["first"].bundle_id
    assert out["hits"] and out["prefix"]
    assert out["job"].status == "succeeded" and len(out["job"].checkpoints) == 4 * _TURNS // 500
    assert out["extractive"].produced_by.startswith("continuity.extractive")
    # thread_created, the turns, a decision, the job, the extractive checkpoint
    assert out["frames"] == 1 + 4 * _TURNS + 1 + (2 + 4 * _TURNS // 500) + 1
    assert out["beats"] > 10  # the heartbeat ran all along
    verified(Store(folder))


@pytest.mark.slow
def test_the_same_work_on_the_loop_is_caught(tmp_path: Path) -> None:
    """The control: with an executor that runs everything on the loop thread, the same work
    is reported slow, so the watch above would catch a face that blocks."""

    batch = [m for i in range(20, _TURNS) for m in turn(i)]

    async def main() -> dict[str, Any]:
        store = await aio.AsyncStore.open(tmp_path / "s", create=True, executor=InlineExecutor())
        return await _workload(store, batch)

    out, slow = run(main)
    assert slow, "10,000 frames sealed, and a compile with recall over them, on the loop"
    assert out["job"].status == "succeeded"  # the same work, done


@pytest.mark.slow
def test_a_blocking_summarizer_runs_in_a_worker(tmp_path: Path) -> None:
    """A sync summarizer (CPU work) is never called on the loop: one that sleeps 0.12 s a
    call leaves the loop free; run inline, it is caught."""
    loop_threads: list[int] = []

    class Sleeping(RecordingSummarizer):
        def summarize(
            self, base: SummaryDoc | None, messages: Sequence[fr.MessageAppended]
        ) -> SummaryContent:
            loop_threads.append(threading.get_ident())
            time.sleep(0.12)
            return super().summarize(base, messages)

    def main(executor: Executor | None) -> Callable[[], Awaitable[int]]:
        async def go() -> int:
            store = aio.AsyncStore(MemoryStore(), executor=executor)
            thread = store.thread("t")
            await thread.append([m for i in range(4) for m in turn(i)])
            job = await aio.run_compaction(thread, StrideMessages(8), summarizer=Sleeping())
            assert job.status == "succeeded", job.error
            return threading.get_ident()

        return go

    loop_thread, slow = run(main(None))
    assert slow == [] and loop_threads and loop_thread not in loop_threads
    _, slow = run(main(InlineExecutor()))
    assert slow


# --- the same results as the sync API -----------------------------------------------------------


def _script(store: BaseStore) -> None:
    store.thread("t").append([m for i in range(12) for m in turn(i)])


@pytest.mark.parametrize("backend", ["jsonl", "memory"])
def test_results_match_the_sync_api(backend: str, tmp_path: Path) -> None:
    def make(name: str) -> BaseStore:
        clock = FixedClock()
        if backend == "memory":
            return MemoryStore(clock=clock)
        return Store(tmp_path / name, create=True, durable=False, clock=clock)

    sync_store, async_store = make("sync"), make("async")
    _script(sync_store)
    _script(async_store)
    sync_job = run_compaction(sync_store, "t", StrideMessages(10), summarizer=RecordingSummarizer())
    sync_result = compile_context(sync_store, "t", recall="invoice", log=False)
    sync_hits = search(sync_store, "invoice total", k=5)
    sync_prefix = search_prefix(sync_store, "t", "fixed", max_seq=20, k=3)

    async def main() -> tuple[Any, ...]:
        store = aio.AsyncStore(async_store)
        job = await aio.run_compaction(
            store, "t", StrideMessages(10), summarizer=SleepySummarizer()
        )
        result = await aio.compile_context(store, "t", recall="invoice", log=False)
        hits = await aio.search(store, "invoice total", k=5)
        prefix = await aio.search_prefix(store, "t", "fixed", max_seq=20, k=3)
        return job, result, hits, prefix

    job, result, hits, prefix = run_quiet(main)
    assert job.status == sync_job.status == "succeeded"
    assert [c.checkpoint_id for c in job.checkpoints] == [
        c.checkpoint_id for c in sync_job.checkpoints
    ]
    assert [c.summary_artifact_id for c in job.checkpoints] == [
        c.summary_artifact_id for c in sync_job.checkpoints
    ]
    assert result.bundle_bytes() == sync_result.bundle_bytes()
    assert hits == sync_hits and prefix == sync_prefix

    # The same frames in the same order; they differ only in the job's random id (and so in
    # the digests that chain after it).
    def tags(store: BaseStore) -> list[str]:
        return [str(f.__struct_config__.tag) for f in store.thread("t").read()]

    assert tags(async_store) == tags(sync_store)
    assert tags(async_store)[49:] == [
        "job_spawned",
        *["compaction_checkpoint_created"] * 4,
        "job_ended",
    ]
    verified(async_store)


def test_thread_handle_reads(tmp_path: Path) -> None:
    async def main() -> None:
        store = await aio.AsyncStore.open(tmp_path / "s", create=True, durable=False)
        thread = store.thread("t")
        assert await thread.head() is None and not await thread.exists()
        assert await store.threads() == []
        seqs = await thread.append([m for i in range(150) for m in turn(i)])
        assert seqs == range(1, 601)
        head = await thread.head()
        assert await thread.exists() and head is not None and head.seq == 600
        assert await store.threads() == ["t"]
        everything = [f async for f in thread.read()]
        assert [f.seq for f in everything] == list(range(601))  # more than two chunks
        window = [
            f.seq async for f in thread.read(from_seq=10, to_seq=20, types=["message_appended"])
        ]
        assert window == list(range(10, 21))
        assert [f.seq async for f in thread.read(from_seq=5, limit=3)] == [5, 6, 7]
        tail = await thread.tail(2, types=["message_appended"])
        assert [f.seq for f in tail] == [599, 600]
        async with contextlib.aclosing(thread.read()) as frames:
            async for frame in frames:
                if frame.seq == 3:
                    break
        assert (await store.existing_thread("t")).id == "t"
        with pytest.raises(ThreadNotFound):
            await store.existing_thread("nobody")
        aid = await store.artifacts.put(b"a large output")
        assert (
            await store.artifacts.exists(aid)
            and await store.artifacts.get(aid) == b"a large output"
        )
        with pytest.raises(StoreNotFound):
            await aio.AsyncStore.open(tmp_path / "missing")
        assert await store.run_blocking(len, [1, 2, 3]) == 3

    run_quiet(main)


def test_entry_points_take_sync_handles_and_check_arguments(tmp_path: Path) -> None:
    sync = Store(tmp_path / "s", create=True, durable=False)
    _script(sync)

    async def main() -> None:
        result = await aio.compile_context(sync.thread("t"), log=False)
        assert result.bundle.messages
        assert (await aio.compile_context(sync, "t", log=False)).bundle_id == result.bundle_id
        with pytest.raises(TypeError):
            await aio.compile_context(sync)
        with pytest.raises(TypeError):
            await aio.compile_context(sync.thread("t"), "other")
        with pytest.raises(ThreadNotFound):
            await aio.compile_context(sync, "nobody")
        with pytest.raises(TypeError):
            await aio.search(sync.thread("t"), "x")  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            await aio.search_prefix(sync, "t", max_seq=3, k=1)
        with pytest.raises(TypeError):
            await aio.run_compaction(sync, StrideMessages(2))
        with pytest.raises(TypeError):
            await aio.create_checkpoint(sync, 3)
        with pytest.raises(TypeError):
            await aio.compile_context("t")  # type: ignore[arg-type]
        with pytest.raises(InvalidCutRule):
            await aio.run_compaction(sync, "t", ManualCut(10**6))
        cp = await aio.create_checkpoint(sync, "t", 8, text="the first two turns", produced_by="me")
        assert cp.to_seq == 8 and cp.produced_by == "me"
        assert [h.seq for h in await aio.search(sync, "invoice", k=2)] == [
            h.seq for h in search(sync, "invoice", k=2)
        ]

    run_quiet(main)
    verified(sync)


# --- ordering and concurrency -------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["jsonl", "memory"])
def test_concurrent_appends_get_contiguous_seqs_in_call_order(backend: str, tmp_path: Path) -> None:
    sync: BaseStore = (
        MemoryStore() if backend == "memory" else Store(tmp_path / "s", create=True)  # durable
    )

    async def main() -> list[range]:
        store = aio.AsyncStore(sync)
        thread = store.thread("t")
        await thread.append(fr.message("user", "start"))

        async def writer(w: int) -> list[range]:
            got = []
            for i in range(15):
                got.append(await thread.append(fr.message("user", f"w{w} m{i}")))
            return got

        # One call per frame, all started at once: the seqs follow the calls.
        at_once = await asyncio.gather(
            *(thread.append(fr.message("user", f"g{i}")) for i in range(40))
        )
        per_task = await asyncio.gather(*(writer(w) for w in range(6)))
        for got in per_task:  # each task's frames in the order it appended them
            assert [r[0] for r in got] == sorted(r[0] for r in got)
        return [*at_once, *(r for got in per_task for r in got)]

    seqs = run_quiet(main)
    assert seqs[:40] == [range(i, i + 1) for i in range(2, 42)]
    assert sorted(r[0] for r in seqs) == list(range(2, 2 + 40 + 90))
    texts = _texts(sync, "t")
    assert texts[1:41] == [f"g{i}" for i in range(40)]
    verified(sync)


def test_appends_to_many_threads_run_side_by_side(tmp_path: Path) -> None:
    sync = Store(tmp_path / "s", create=True, durable=False)

    async def main() -> None:
        store = aio.AsyncStore(sync)
        await asyncio.gather(
            *(
                store.thread(f"t{n}").append(fr.message("user", f"{n}/{i}"))
                for n in range(5)
                for i in range(10)
            )
        )
        assert store._lanes.get(asyncio.get_running_loop()) == {}  # idle lanes are dropped

    run_quiet(main)
    for n in range(5):
        texts = _texts(sync, f"t{n}")
        assert texts == [f"{n}/{i}" for i in range(10)]
    verified(sync)


@pytest.mark.slow
def test_a_second_compaction_of_a_thread_is_refused_while_one_runs(tmp_path: Path) -> None:
    sync = Store(tmp_path / "s", create=True, durable=False)
    _script(sync)

    async def main() -> None:
        slow = SleepySummarizer(delay=0.05)
        first = asyncio.create_task(
            aio.run_compaction(sync, "t", StrideMessages(8), summarizer=slow)
        )
        while not slow.calls:
            await asyncio.sleep(0.01)
        with pytest.raises(JobInFlight):
            await aio.run_compaction(sync, "t", StrideMessages(8), summarizer=SleepySummarizer())
        with pytest.raises(JobInFlight):
            run_compaction(sync, "t", StrideMessages(8))  # the sync path shares the lock
        assert (await first).status == "succeeded"
        again = await aio.run_compaction(sync, "t", StrideMessages(8))
        assert again.status == "nothing_to_do"

    run_quiet(main)
    verified(sync)


# --- cancellation -------------------------------------------------------------------------------


class _SlowRedactor:
    """A store redactor that takes its time: it runs inside ``append``, in the worker, so an
    append can be cancelled while it is being written."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.started = threading.Event()

    def __call__(self, frame: fr.Frame) -> fr.Frame:
        if isinstance(frame, fr.MessageAppended) and frame.message_id.startswith("slow"):
            self.started.set()
            time.sleep(self.delay)
        return frame


@pytest.mark.slow
def test_an_append_cancelled_while_it_is_written_commits_whole_before_cancelling(
    tmp_path: Path,
) -> None:
    redactor = _SlowRedactor(0.05)
    sync = Store(tmp_path / "s", create=True, redactor=redactor)

    async def main() -> None:
        thread = aio.AsyncStore(sync).thread("t")
        await thread.append(fr.message("user", "before"))
        batch = [fr.message("user", f"{i}", message_id=f"slow{i}") for i in range(3)]
        task = asyncio.create_task(thread.append(batch))
        while not redactor.started.is_set():
            await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # Nothing is left running: the batch is in the log, whole, when the error arrives.
        head = await thread.head()
        assert head is not None and head.seq == 4
        assert await thread.append(fr.message("user", "after")) == range(5, 6)

    run_quiet(main)
    verified(sync)


def test_an_append_cancelled_before_its_worker_starts_writes_nothing(tmp_path: Path) -> None:
    sync = Store(tmp_path / "s", create=True, durable=False)
    gate = threading.Event()

    async def main() -> None:
        with ThreadPoolExecutor(max_workers=1) as executor:
            store = aio.AsyncStore(sync, executor=executor)
            thread = store.thread("t")
            await thread.append(fr.message("user", "before"))
            busy = asyncio.get_running_loop().run_in_executor(
                executor, gate.wait
            )  # the only worker
            task = asyncio.create_task(thread.append(fr.message("user", "never")))
            await asyncio.sleep(0.05)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            gate.set()
            await busy
            head = await thread.head()
            assert head is not None and head.seq == 1
            assert await thread.append(fr.message("user", "after")) == range(2, 3)

    run_quiet(main)
    texts = _texts(sync, "t")
    assert texts == ["before", "after"]
    verified(sync)


@pytest.mark.slow
def test_an_append_cancelled_while_waiting_its_turn_writes_nothing(tmp_path: Path) -> None:
    redactor = _SlowRedactor(0.1)
    sync = Store(tmp_path / "s", create=True, durable=False, redactor=redactor)

    async def main() -> None:
        thread = aio.AsyncStore(sync).thread("t")
        first = asyncio.create_task(thread.append(fr.message("user", "one", message_id="slow1")))
        second = asyncio.create_task(thread.append(fr.message("user", "two")))
        third = asyncio.create_task(thread.append(fr.message("user", "three")))
        while not redactor.started.is_set():
            await asyncio.sleep(0.005)
        second.cancel()
        assert await first == range(1, 2)
        with pytest.raises(asyncio.CancelledError):
            await second
        assert await third == range(2, 3)

    run_quiet(main)
    texts = _texts(sync, "t")
    assert texts == ["one", "three"]
    verified(sync)


@pytest.mark.parametrize("backend", ["jsonl", "memory"])
def test_a_compaction_cancelled_while_it_awaits_its_summarizer_ends_its_job(
    backend: str, tmp_path: Path
) -> None:
    sync: BaseStore = MemoryStore() if backend == "memory" else Store(tmp_path / "s", create=True)
    _script(sync)

    async def main() -> None:
        summarizer = SleepySummarizer(block_at_call=2)
        task = asyncio.create_task(
            aio.run_compaction(sync, "t", StrideMessages(8), summarizer=summarizer)
        )
        await summarizer.blocked.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        frames = list(sync.thread("t").read())
        ended = frames[-1]
        assert isinstance(ended, fr.JobEnded)
        assert ended.status == "cancelled" and ended.error == "CancelledError"
        assert ended.result == {"checkpoints": 2}
        made = [f for f in frames if isinstance(f, fr.CompactionCheckpointCreated)]
        assert [c.to_seq for c in made] == [8, 16]
        # The lock is free again, and the next job plans only what is missing.
        job = await aio.run_compaction(sync, "t", StrideMessages(8), summarizer=SleepySummarizer())
        assert job.status == "succeeded" and job.planned == [24, 32, 40, 48]

    run_quiet(main)
    verified(sync)


def test_a_timeout_around_compaction_is_a_cancelled_job(tmp_path: Path) -> None:
    sync = Store(tmp_path / "s", create=True, durable=False)
    _script(sync)

    async def main() -> None:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.1):
                await aio.run_compaction(
                    sync, "t", StrideMessages(8), summarizer=SleepySummarizer(delay=0.04)
                )
        last = sync.thread("t").tail(1)[0]
        assert isinstance(last, fr.JobEnded) and last.status == "cancelled"

    run_quiet(main)
    verified(sync)


def test_a_compile_cancelled_while_it_runs_still_logs_its_decision(tmp_path: Path) -> None:
    sync = Store(tmp_path / "s", create=True)
    _script(sync)
    started = threading.Event()

    class SlowTokenizer:
        def count(self, text: str) -> int:
            started.set()
            time.sleep(0.005)
            return len(text) // 4

    async def main() -> None:
        task = asyncio.create_task(aio.compile_context(sync, "t", tokenizer=SlowTokenizer()))
        while not started.is_set():
            await asyncio.sleep(0.002)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        last = sync.thread("t").tail(1)[0]  # logged before the cancellation was raised
        assert isinstance(last, fr.ContextSelectionDecided)

    run_quiet(main)
    verified(sync)


def test_a_create_checkpoint_cancelled_in_its_summarizer_writes_nothing(tmp_path: Path) -> None:
    sync = Store(tmp_path / "s", create=True, durable=False)
    _script(sync)
    head = sync.thread("t").head()

    async def main() -> None:
        summarizer = SleepySummarizer(block_at_call=0)
        task = asyncio.create_task(aio.create_checkpoint(sync, "t", 8, summarizer=summarizer))
        await summarizer.blocked.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run_quiet(main)
    assert sync.thread("t").head() == head
    verified(sync)


# --- summarizers --------------------------------------------------------------------------------


def test_a_failing_async_summarizer_is_logged_like_a_sync_one(tmp_path: Path) -> None:
    sync = Store(tmp_path / "s", create=True, durable=False)
    _script(sync)

    class Failing(SleepySummarizer):
        async def summarize(
            self, base: SummaryDoc | None, messages: Sequence[fr.MessageAppended]
        ) -> SummaryContent:
            if len(self.calls) == 1:
                await asyncio.sleep(0)
                raise RuntimeError("the model is overloaded")
            return await super().summarize(base, messages)

    class Wrong:
        id = "test.wrong/1"

        async def summarize(self, base: object, messages: object) -> str:
            return "not a SummaryContent"

    async def main() -> None:
        job = await aio.run_compaction(sync, "t", StrideMessages(8), summarizer=Failing())
        assert job.status == "failed" and job.error == "RuntimeError: the model is overloaded"
        assert len(job.checkpoints) == 1
        wrong = await aio.run_compaction(sync, "t", StrideMessages(8), summarizer=Wrong())  # type: ignore[arg-type]
        assert wrong.status == "failed" and wrong.error is not None
        assert "returned str, not SummaryContent" in wrong.error
        progress: list[tuple[int, int]] = []
        done = await aio.run_compaction(
            sync,
            "t",
            StrideMessages(8),
            summarizer=SleepySummarizer(),
            progress=lambda *a: progress.append(a),
        )
        assert done.status == "succeeded" and progress == [(1, 5), (2, 5), (3, 5), (4, 5), (5, 5)]

    run_quiet(main)
    ended = [f for f in sync.thread("t").read() if isinstance(f, fr.JobEnded)]
    assert [e.status for e in ended] == ["failed", "failed", "succeeded"]
    verified(sync)


def test_create_checkpoint_awaits_an_async_summarizer_like_the_sync_one(tmp_path: Path) -> None:
    stores = [Store(tmp_path / n, create=True, durable=False, clock=FixedClock()) for n in "ab"]
    for s in stores:
        _script(s)
    sync_frame = create_checkpoint(stores[0], "t", 8, summarizer=RecordingSummarizer())

    async def main() -> fr.CompactionCheckpointCreated:
        return await aio.create_checkpoint(stores[1], "t", 8, summarizer=SleepySummarizer())

    frame = run_quiet(main)
    assert frame == sync_frame
    assert stores[0].thread("t").head() == stores[1].thread("t").head()
