"""LangGraph channel values stored as deltas against their parent's value (issue 27): what a
graph reads back is what it put, from a fresh process too, after copies and deletes, and after
a SIGKILL at any moment; chains stay bounded; a delta that does not fit its base is refused."""

from __future__ import annotations

import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import START, MessagesState, StateGraph

import continuity.integrations._langgraph_log as lg
import continuity.integrations._langgraph_values as values
from continuity import MemoryStore, Store, frames as fr
from continuity.context.records import record_view
from continuity.errors import ArtifactCorrupt
from continuity.integrations.langgraph import ContinuitySaver
from tests.support.processes import reap

pytestmark = pytest.mark.slow


def echo(state: MessagesState) -> dict[str, list[AnyMessage]]:
    last = state["messages"][-1]
    return {"messages": [AIMessage(f"You said: {last.content} " * 8, id=f"a-{last.id}")]}


def echo_graph(saver: Any) -> Any:
    builder = StateGraph(MessagesState)
    builder.add_node("echo", echo)
    builder.add_edge(START, "echo")
    return builder.compile(checkpointer=saver)


def config(thread_id: str = "t") -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


def turn(graph: Any, i: int, thread_id: str = "t") -> None:
    question = HumanMessage(f"question {i}: " + "words " * 20, id=f"h{i}")
    graph.invoke({"messages": [question]}, config(thread_id))


def entries(store: Any, thread_id: str) -> list[list[Any]]:
    """Every ``messages`` entry of the thread's checkpoint records, oldest first."""
    with record_view(store.thread(thread_id)) as view:
        recs = list(view.records(lg.CHECKPOINT))
    return [r.data["blobs"]["messages"] for r in reversed(recs) if "messages" in r.data["blobs"]]


def history(graph: Any, thread_id: str = "t") -> list[tuple[Any, Any]]:
    return [(s.config, s.values) for s in graph.get_state_history(config(thread_id))]


def test_values_are_deltas_with_bounded_chains_and_read_back_anywhere(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = Store(root, create=True, durable=False)
    graph = echo_graph(ContinuitySaver(store))
    for i in range(30):
        turn(graph, i)
    stored = entries(store, "t")
    patches = [e for e in stored if len(e) == 5]
    assert len(patches) > len(stored) * 3 // 4
    assert max(values.entry_depth(e) for e in stored) == values.MAX_CHAIN
    assert len(list(store.artifacts.ids())) < len(stored) // 4
    before = history(graph)
    # a fresh process: no cache, the record index deleted too
    shutil.rmtree(root / "cache")
    reopened = echo_graph(ContinuitySaver(Store(root, durable=False)))
    assert history(reopened) == before
    turn(reopened, 30)
    state = reopened.get_state(config()).values["messages"]
    assert [m.id for m in state] == [x for i in range(31) for x in (f"h{i}", f"a-h{i}")]
    assert len(entries(store, "t")[-1]) == 5  # the reopened saver patches again


def test_a_copy_holds_whole_values_and_outlives_its_source(tmp_path: Path) -> None:
    store = Store(tmp_path / "store", create=True, durable=False)
    saver = ContinuitySaver(store)
    graph = echo_graph(saver)
    for i in range(5):
        turn(graph, i)
    before = graph.get_state(config()).values
    saver.copy_thread("t", "copy")
    assert not [e for e in entries(store, "copy") if len(e) == 5]
    saver.delete_thread("t")
    fresh = echo_graph(ContinuitySaver(Store(tmp_path / "store", durable=False)))
    assert fresh.get_state(config("copy")).values == before
    assert fresh.get_state(config()).values == {}


def test_prune_keeps_a_patched_value_readable(tmp_path: Path) -> None:
    store = Store(tmp_path / "store", create=True, durable=False)
    saver = ContinuitySaver(store)
    graph = echo_graph(saver)
    for i in range(6):
        turn(graph, i)
    before = graph.get_state(config()).values
    assert len(entries(store, "t")[-1]) == 5
    saver.prune(["t"])
    fresh = echo_graph(ContinuitySaver(Store(tmp_path / "store", durable=False)))
    assert fresh.get_state(config()).values == before
    turn(fresh, 6)
    assert len(fresh.get_state(config()).values["messages"]) == 14


def test_a_delta_on_another_base_is_refused() -> None:
    store = MemoryStore()
    thread = store.thread("t")
    thread.append(fr.ThreadCreated(thread_id="t"))
    old, new = b"x" * 4000 + b"old", b"x" * 4000 + b"new"
    aid = store.artifacts.put(b"y" * 4000)  # not the bytes the delta was made against
    base = [1, "bytes", aid]
    frame = values.make_delta(old, new)
    assert frame is not None
    patch = {
        "base": 1,
        "of": values.value_hash(old),
        "hash": values.value_hash(new),
        "depth": 1,
        "delta": __import__("base64").b64encode(frame).decode(),
    }
    thread.append(fr.RecordAppended(kind=lg.CHECKPOINT, key="a", data={"blobs": {"m": base}}))
    with record_view(thread) as view, pytest.raises(ArtifactCorrupt, match="does not match"):
        values.resolve(store, view, "m", [2, "bytes", "", "", patch], values.ValueCache())


_CHILD = """
import sys
from langchain_core.messages import HumanMessage
from continuity import Store
from continuity.integrations.langgraph import ContinuitySaver
from tests.integrations.test_langgraph_values import echo_graph, turn
graph = echo_graph(ContinuitySaver(Store(sys.argv[1], create=True)))
start = int(sys.argv[2])
for i in range(start, start + 1000):
    turn(graph, i)
    if i == start:
        print("ready", flush=True)
"""


def test_sigkill_at_any_moment_leaves_every_checkpoint_readable(tmp_path: Path) -> None:
    seed = random.randrange(2**32)
    print(f"random seed: {seed}")
    rng = random.Random(seed)
    path = tmp_path / "store"
    start = 0
    for _ in range(4):
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(path), str(start)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=Path(__file__).parents[2],
        )
        try:
            assert child.stdout is not None
            ready = child.stdout.readline()
            assert ready == b"ready\n", child.communicate(timeout=30)[1].decode()
            time.sleep(rng.uniform(0.0, 0.4))
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=10)
        finally:
            reap(child)
        assert child.returncode == -signal.SIGKILL
        graph = echo_graph(ContinuitySaver(Store(path)))
        seen = history(graph)  # every checkpoint's values read back (hash-checked)
        ids = [m.id for m in seen[0][1]["messages"]]
        asked = [int(i[1:]) for i in ids if i.startswith("h")]
        assert asked == sorted(set(asked)) and asked[0] == 0  # a killed turn may lack its answer
        assert all(i[2:] in ids for i in ids if i.startswith("a-h")) and len(seen) > 2 * len(asked)
        start = asked[-1] + 1
        turn(graph, start)  # and the thread goes on from there
        assert graph.get_state(config()).values["messages"][-1].id == f"a-h{start}"
        start += 1
