"""One sync a step, and reads answered from the saver's own writes (ADR 0065): a graph turn on
the folder store syncs its log once a put (a task's writes ride on the next put's sync), an
interrupt's write is synced at once, a ``get_tuple`` answered from memory is what a saver that
knows nothing reads, a write by another process is seen, and a writer killed mid-turn leaves a
history a new process resumes from."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.types import Command, interrupt

from continuity import Store
from continuity.integrations.langgraph import ContinuitySaver
from tests.integrations.test_langgraph_graphs import config, tool_graph

ROOT = Path(__file__).resolve().parents[2]


class _Counting(ContinuitySaver):
    """A saver that counts its puts and put_writes."""

    puts = 0
    writes = 0

    def put(self, *args: Any, **kwargs: Any) -> Any:
        type(self).puts += 1
        return super().put(*args, **kwargs)

    def put_writes(self, *args: Any, **kwargs: Any) -> None:
        type(self).writes += 1
        super().put_writes(*args, **kwargs)


@pytest.fixture
def syncs(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, int]]]:
    """Every ``fdatasync`` of a thread's log: (its file name, its size when synced)."""
    seen: list[tuple[str, int]] = []
    real: Callable[[int], None] = os.fdatasync

    def counting(fd: int) -> None:
        real(fd)
        name = os.readlink(f"/proc/self/fd/{fd}")
        if name.endswith(".jsonl"):
            seen.append((Path(name).name, os.fstat(fd).st_size))

    monkeypatch.setattr(os, "fdatasync", counting)
    yield seen


def _ask(graph: Any, i: int, thread: str = "t") -> None:
    graph.invoke({"messages": [HumanMessage(f"what is 2 + {i}?", id=f"h{i}")]}, config(thread))


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc (Linux)")
def test_a_turn_syncs_its_log_once_a_put(tmp_path: Path, syncs: list[tuple[str, int]]) -> None:
    saver = _Counting(Store(tmp_path / "s", create=True))
    graph = tool_graph(saver)
    _ask(graph, 0)  # the thread is made, bases are written: the steady state is what counts
    syncs.clear()
    _Counting.puts = _Counting.writes = 0
    for i in range(1, 4):
        _ask(graph, i)
    assert _Counting.writes >= 3 * 3  # every step stored its task's writes
    assert len([s for s in syncs if s[0] == "t.jsonl"]) == _Counting.puts
    # and the turn's last checkpoint is durable when invoke returns
    log = tmp_path / "s" / "threads" / "t.jsonl"
    last = max(size for name, size in syncs if name == "t.jsonl")
    assert b'"langgraph.checkpoint"' not in log.read_bytes()[last:]
    saver.close()


def _asks_first(state: MessagesState) -> dict[str, Any]:
    answer = interrupt("go on?")
    return {"messages": [HumanMessage(f"the human said {answer}", id=f"said-{answer}")]}


def _interrupting(saver: Any) -> Any:
    builder = StateGraph(MessagesState)
    builder.add_node("ask", _asks_first)
    builder.add_edge(START, "ask")
    return builder.compile(checkpointer=saver)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc (Linux)")
def test_an_interrupted_run_returns_with_its_whole_log_synced(
    tmp_path: Path, syncs: list[tuple[str, int]]
) -> None:
    saver = ContinuitySaver(Store(tmp_path / "s", create=True))
    graph = _interrupting(saver)
    graph.invoke({"messages": [HumanMessage("hi", id="h0")]}, config("t"))
    log = tmp_path / "s" / "threads" / "t.jsonl"
    assert b"__interrupt__" in log.read_bytes()
    assert max(size for name, size in syncs if name == "t.jsonl") == log.stat().st_size
    # a saver that knows nothing sees the interrupt, and the run resumes from it
    again = ContinuitySaver(Store(tmp_path / "s"))
    state = _interrupting(again).get_state(config("t"))
    assert [i.value for task in state.tasks for i in task.interrupts] == ["go on?"]
    out = _interrupting(again).invoke(Command(resume="yes"), config("t"))
    assert out["messages"][-1].content == "the human said yes"


def test_writes_outside_a_graph_run_are_synced_before_the_call_returns(
    tmp_path: Path, syncs: list[tuple[str, int]]
) -> None:
    saver = ContinuitySaver(Store(tmp_path / "s", create=True))
    _ask(tool_graph(saver), 0)
    latest = saver.get_tuple(config("t"))
    assert latest is not None
    syncs.clear()
    saver.put_writes(latest.config, [("messages", [])], "by-hand")
    log = tmp_path / "s" / "threads" / "t.jsonl"
    assert syncs == [("t.jsonl", log.stat().st_size)]


def _same(a: Any, b: Any) -> None:
    assert a is not None and b is not None
    assert a.config == b.config
    assert a.parent_config == b.parent_config
    assert a.metadata == b.metadata
    assert a.checkpoint == b.checkpoint
    assert a.pending_writes == b.pending_writes


def test_a_read_answered_from_memory_is_what_a_saver_that_knows_nothing_reads(
    tmp_path: Path,
) -> None:
    ours = ContinuitySaver(Store(tmp_path / "s", create=True))
    graph = _interrupting(ours)
    graph.invoke({"messages": [HumanMessage("hi", id="h0")]}, config("t"))  # pending writes
    tool = tool_graph(ours)
    _ask(tool, 1, "u")
    _ask(tool, 2, "u")
    fresh = ContinuitySaver(Store(tmp_path / "s"))
    for thread in ("t", "u"):
        _same(ours.get_tuple(config(thread)), fresh.get_tuple(config(thread)))
        for tup in fresh.list(config(thread)):  # by id too, each checkpoint of the thread
            _same(ours.get_tuple(tup.config), tup)


_OTHER_WRITES = textwrap.dedent(
    """
    import sys
    from continuity import Store
    from continuity.integrations.langgraph import ContinuitySaver

    saver = ContinuitySaver(Store(sys.argv[1]))
    latest = saver.get_tuple({"configurable": {"thread_id": "t"}})
    saver.put_writes(latest.config, [("messages", "from another process")], "other-task")
    """
)


@pytest.mark.slow
def test_a_write_by_another_process_is_seen_by_the_next_read(tmp_path: Path) -> None:
    ours = ContinuitySaver(Store(tmp_path / "s", create=True))
    _ask(tool_graph(ours), 0)
    before = ours.get_tuple(config("t"))
    assert before is not None
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    code = [sys.executable, "-c", _OTHER_WRITES, str(tmp_path / "s")]
    subprocess.run(code, check=True, env=env, cwd=ROOT)
    after = ours.get_tuple(config("t"))
    assert after is not None and after.config == before.config
    assert ("other-task", "messages", "from another process") in (after.pending_writes or [])


_TURNS = textwrap.dedent(
    """
    import sys
    from langchain_core.messages import HumanMessage
    from continuity import Store
    from continuity.integrations.langgraph import ContinuitySaver
    from tests.integrations.test_langgraph_graphs import config, tool_graph

    graph = tool_graph(ContinuitySaver(Store(sys.argv[1], create=True)))
    i = 0
    while True:
        graph.invoke({"messages": [HumanMessage(f"what is 2 + {i}?", id=f"h{i}")]}, config("t"))
        print(i, flush=True)
        i += 1
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("wait", [0.0, 0.003, 0.011])
def test_a_writer_killed_mid_turn_leaves_a_history_a_new_process_resumes(
    tmp_path: Path, wait: float
) -> None:
    folder = tmp_path / "s"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [sys.executable, "-c", _TURNS, str(folder)], stdout=subprocess.PIPE, env=env, cwd=ROOT
    )
    try:
        assert proc.stdout is not None
        for _ in range(3):
            assert proc.stdout.readline(), "the writer died"
        time.sleep(wait)  # somewhere in the next turn
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    saver = ContinuitySaver(Store(folder))
    history = list(saver.list(config("t")))
    ids = {tup.checkpoint["id"] for tup in history}
    assert len(history) >= 3 * 4
    for tup in history:  # a consistent chain: every parent is there, every value loads
        if tup.parent_config is not None:
            assert tup.parent_config["configurable"]["checkpoint_id"] in ids
        assert isinstance(tup.checkpoint["channel_values"].get("messages", []), list)
    last = history[0]
    graph = tool_graph(saver)
    state = graph.get_state(config("t"))
    if state.next:  # killed inside a run: it goes on from its last durable checkpoint
        graph.invoke(None, config("t"))
    _ask(graph, 99)
    after = graph.get_state(config("t"))
    said = [m.content for m in after.values["messages"]]
    assert said[-1] == "The sum is 101."
    before = [m.content for m in last.checkpoint["channel_values"]["messages"]]
    assert said[: len(before)] == before  # it continued from what was durable
    chain = [tup.checkpoint["id"] for tup in saver.list(config("t"))]
    assert last.checkpoint["id"] in chain
    saver.close()


@pytest.mark.parametrize(
    ("durability", "synced"),
    [(None, False), ("async", False), ("sync", True), ("exit", True)],
)
def test_which_run_leaves_a_tasks_writes_to_the_next_puts_sync(
    tmp_path: Path, syncs: list[tuple[str, int]], durability: str | None, synced: bool
) -> None:
    """Only an ``async`` run (LangGraph's default) puts a checkpoint after a step's writes; an
    ``exit`` run stores its pending writes after its last put, so they are synced at once."""
    saver = ContinuitySaver(Store(tmp_path / "s", create=True))
    _ask(tool_graph(saver), 0)
    latest = saver.get_tuple(config("t"))
    assert latest is not None
    configurable = {**latest.config["configurable"], "__pregel_runtime": object()}
    if durability is not None:
        configurable["__pregel_durability"] = durability
    syncs.clear()
    saver.put_writes({"configurable": configurable}, [("messages", [])], "a-task")
    assert bool(syncs) is synced
    saver.close()  # what still waits is synced on close
    log = tmp_path / "s" / "threads" / "t.jsonl"
    assert syncs[-1] == ("t.jsonl", log.stat().st_size)


def test_a_thread_whose_writes_were_dropped_from_memory_reads_them_from_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import continuity.integrations._langgraph_threads as threads

    monkeypatch.setattr(threads, "WRITES_KEPT", 1)  # one thread's writes kept at a time
    saver = ContinuitySaver(Store(tmp_path / "s", create=True))
    _interrupting(saver).invoke({"messages": [HumanMessage("hi", id="h0")]}, config("t"))
    want = ContinuitySaver(Store(tmp_path / "s")).get_tuple(config("t"))
    assert want is not None and want.pending_writes
    _ask(tool_graph(saver), 1, "u")  # the writes of u push t's out
    _same(saver.get_tuple(config("t")), want)
