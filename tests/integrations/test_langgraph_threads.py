"""The LangGraph saver used as LangGraph uses it: one saver from several threads at once (nodes
run in a thread pool), and the async methods off the event loop (ADR 0023)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, CheckpointTuple, empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from continuity import MemoryStore, Store
from continuity.context.retract import live_messages
from continuity.integrations.langgraph import ContinuitySaver
from continuity.maintenance.verify import verify_store


@pytest.fixture(params=["jsonl", "memory"])
def saver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ContinuitySaver]:
    if request.param == "jsonl":
        yield ContinuitySaver(Store(tmp_path / "store", create=True, durable=False))
    else:
        yield ContinuitySaver(MemoryStore())


def _chain(
    saver: ContinuitySaver, thread_id: str, steps: int, seed: int, *, messages: bool = False
) -> list[str]:
    """``steps`` checkpoints on one chain, each with a task's writes, reading the latest back
    between steps as a graph run does; with ``messages``, a conversation the saver mirrors."""
    config: Any = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    version: str | None = None
    ids = []
    for i in range(steps):
        checkpoint = empty_checkpoint()
        checkpoint["id"] = str(uuid6(clock_seq=seed * 1000 + i))
        version = saver.get_next_version(version, None)
        values: dict[str, Any] = {"step": i}
        if messages:
            values["messages"] = [
                HumanMessage(f"q{seed}.{j}", id=f"m{seed}.{j}") for j in range(i + 1)
            ]
        checkpoint["channel_values"] = values
        versions: ChannelVersions = dict.fromkeys(values, version)
        checkpoint["channel_versions"] = dict(versions)
        config = saver.put(config, checkpoint, {"step": i}, versions)
        saver.put_writes(config, [("step", i)], f"task-{seed}-{i}")
        got = saver.get_tuple(config)
        assert got is not None and got.checkpoint["id"] == checkpoint["id"]
        ids.append(checkpoint["id"])
    return ids


@pytest.mark.parametrize("messages", [False, True])
def test_one_saver_from_several_threads(saver: ContinuitySaver, messages: bool) -> None:
    # two chains share each LangGraph thread (their mirrors fork), all reading while others write
    jobs = [(f"t{n % 3}", n) for n in range(6)]
    with ThreadPoolExecutor(6) as pool:
        results = list(
            pool.map(lambda job: _chain(saver, job[0], 12, job[1], messages=messages), jobs)
        )
    for tid in ("t0", "t1", "t2"):
        listed = {t.checkpoint["id"] for t in saver.list({"configurable": {"thread_id": tid}})}
        wanted = {cid for (t, _), ids in zip(jobs, results, strict=True) if t == tid for cid in ids}
        assert listed == wanted
    report = verify_store(saver.store)
    assert report.ok, report.problems
    if messages:  # each chain's latest checkpoint shows its own conversation
        for (tid, seed), ids in zip(jobs, results, strict=True):
            config: Any = {"configurable": {"thread_id": tid, "checkpoint_id": ids[-1]}}
            mirror = saver.mirror_thread_id(config)
            assert mirror is not None
            live = [m.message_id for m in live_messages(saver.store.thread(mirror))]
            assert live == [f"m{seed}.{j}" for j in range(12)], (tid, seed, live)


def test_concurrent_writes_to_one_checkpoint_are_all_kept(saver: ContinuitySaver) -> None:
    (cid,) = _chain(saver, "t", 1, 0)
    config: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": cid}}
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda n: saver.put_writes(config, [("c", n)], f"task-{n}"), range(40)))
    got = saver.get_tuple(config)
    assert got is not None and got.pending_writes is not None
    tasks = {task for task, channel, _ in got.pending_writes if channel == "c"}
    assert tasks == {f"task-{n}" for n in range(40)}


def test_the_async_methods_leave_the_loop_free(
    saver: ContinuitySaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    _chain(saver, "t", 3, 0)
    config: Any = {"configurable": {"thread_id": "t"}}
    real = saver.get_tuple
    loop_threads: set[int] = set()

    def slow(cfg: RunnableConfig) -> CheckpointTuple | None:
        loop_threads.add(threading.get_ident())
        time.sleep(0.3)  # a slow disk: the loop must go on meanwhile
        return real(cfg)

    monkeypatch.setattr(saver, "get_tuple", slow)

    async def main() -> tuple[int, Any]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        task = asyncio.create_task(ticker())
        got = await saver.aget_tuple(config)
        task.cancel()
        assert threading.get_ident() not in loop_threads
        return ticks, got

    ticks, got = asyncio.run(main())
    assert got is not None and ticks >= 10


def test_alist_reads_in_chunks_off_the_loop(saver: ContinuitySaver) -> None:
    ids = _chain(saver, "t", 70, 0)  # more than one chunk of 64

    async def main() -> list[str]:
        out = []
        async for tup in saver.alist({"configurable": {"thread_id": "t"}}):
            out.append(tup.checkpoint["id"])
        return out

    assert asyncio.run(main()) == ids[::-1]
