"""The LangGraph saver keeps a graph's state whole (issue 27): ``prune`` keeps what a
``DeltaChannel`` is read back from, a delta history whose parent chain loops is a clear error,
dotted metadata filters in ``list`` as SqliteSaver reads them."""

from __future__ import annotations

import operator
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.conformance.test_utils import (
    generate_checkpoint,
    generate_config,
    generate_metadata,
)
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph

from continuity import MemoryStore, Store
from continuity.integrations.langgraph import ContinuitySaver, CyclicHistory


@pytest.fixture(params=["jsonl", "memory"])
def saver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ContinuitySaver]:
    if request.param == "jsonl":
        yield ContinuitySaver(Store(tmp_path / "store", create=True, durable=False))
    else:
        yield ContinuitySaver(MemoryStore())


def extend(state: list[str], batches: Sequence[list[str]]) -> list[str]:
    out = list(state)
    for batch in batches:
        out.extend(batch)
    return out


class Journal(TypedDict):
    log: Annotated[list[str], DeltaChannel(extend)]
    count: Annotated[int, operator.add]


def journal_graph(saver: BaseCheckpointSaver[Any]) -> Any:
    def note(state: Journal) -> dict[str, Any]:
        return {"log": [f"noted {len(state['log'])}"], "count": 1}

    builder = StateGraph(Journal)
    builder.add_node("note", note)
    builder.add_edge(START, "note")
    return builder.compile(checkpointer=saver)


def config(thread_id: str = "t") -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


# --- prune and DeltaChannel --------------------------------------------------------------------


def test_prune_keeps_the_state_of_a_delta_channel(saver: ContinuitySaver) -> None:
    graph = journal_graph(saver)
    for i in range(3):
        graph.invoke({"log": [f"in {i}"], "count": 0}, config())
    before = graph.get_state(config()).values
    assert len(before["log"]) == 6 and before["count"] == 3
    saver.prune(["t"])
    assert graph.get_state(config()).values == before
    # the next turn goes on from the whole state
    graph.invoke({"log": ["in 3"], "count": 0}, config())
    after = graph.get_state(config()).values
    assert after["log"] == [*before["log"], "in 3", "noted 7"]


def test_prune_after_a_snapshot_keeps_only_the_chain_back_to_it(saver: ContinuitySaver) -> None:
    class Snapped(TypedDict):
        log: Annotated[list[str], DeltaChannel(extend, snapshot_frequency=2)]

    def note(state: Snapped) -> dict[str, Any]:
        return {"log": ["n"]}

    builder = StateGraph(Snapped)
    builder.add_node("note", note)
    builder.add_edge(START, "note")
    graph = builder.compile(checkpointer=saver)
    for i in range(6):
        graph.invoke({"log": [str(i)]}, config())
    before = graph.get_state(config()).values
    everything = len(list(saver.list(config())))
    saver.prune(["t"])
    kept = len(list(saver.list(config())))
    assert graph.get_state(config()).values == before
    assert 1 <= kept < everything  # the chain ends at the nearest snapshot, not at the root


def test_prune_without_delta_channels_keeps_one_checkpoint(saver: ContinuitySaver) -> None:
    for _ in range(3):
        saver.put(config(), generate_checkpoint(), generate_metadata(), {})
    saver.prune(["t"])
    assert len(list(saver.list(config()))) == 1


def test_the_state_matches_inmemorysaver_after_prune(saver: ContinuitySaver) -> None:
    ours, theirs = journal_graph(saver), journal_graph(InMemorySaver())
    for graph in (ours, theirs):
        for i in range(3):
            graph.invoke({"log": [f"in {i}"], "count": 0}, config())
    saver.prune(["t"])
    assert ours.get_state(config()).values == theirs.get_state(config()).values


# --- a cycle in the parent chain ---------------------------------------------------------------


def _cycle(saver: ContinuitySaver) -> RunnableConfig:
    """Checkpoint a, then b with parent a, then a again with parent b: a -> b -> a."""
    a = generate_checkpoint(checkpoint_id="1")
    b = generate_checkpoint(checkpoint_id="2")
    meta: Any = {**generate_metadata(), "counters_since_delta_snapshot": {"log": [1, 1]}}
    saver.put(config(), a, meta, {})
    saver.put(generate_config("t", checkpoint_id="1"), b, meta, {})
    return saver.put(generate_config("t", checkpoint_id="2"), a, meta, {})


def test_a_cyclic_parent_chain_is_a_clear_error_not_an_endless_walk(
    saver: ContinuitySaver,
) -> None:
    at_a = _cycle(saver)
    with pytest.raises(CyclicHistory, match="loops back"):
        saver.get_delta_channel_history(config=at_a, channels=["log"])
    with pytest.raises(ValueError, match="loops back"):  # CyclicHistory is a ValueError
        saver.prune(["t"])
    # the other calls still answer
    found = saver.get_tuple(at_a)
    assert found is not None and found.parent_config is not None


def test_delta_history_is_what_the_base_class_walk_gives(saver: ContinuitySaver) -> None:
    graph = journal_graph(saver)
    for i in range(3):
        graph.invoke({"log": [f"in {i}"], "count": 0}, config())
    latest = graph.get_state(config()).config
    ours = saver.get_delta_channel_history(config=latest, channels=["log", "count", "nothing"])
    theirs = BaseCheckpointSaver.get_delta_channel_history(
        saver, config=latest, channels=["log", "count", "nothing"]
    )
    assert ours == theirs
    assert [w[2] for w in ours["log"]["writes"]][:2] == [["in 0"], ["noted 1"]]


# --- dotted metadata filters -------------------------------------------------------------------


def _put_with_metadata(saver: BaseCheckpointSaver[Any]) -> None:
    for i, user in enumerate([{"name": "ana", "plan": {"tier": 2}}, {"name": "bo"}, None]):
        meta: Any = {"source": "loop", "step": i, "user": user, "a.b": "literal"}
        saver.put(generate_config("t"), generate_checkpoint(), meta, {})


@pytest.mark.parametrize(
    "query",
    [
        {"user.name": "ana"},
        {"user.plan.tier": 2},
        {"user.name": "bo", "step": 1},
        {"user.name": "nobody"},
        {"user.plan": {"tier": 2}},
        {"user.plan.tier": None},
        {"a.b": "literal"},
        {"source": "loop"},
    ],
)
def test_dotted_filters_find_what_sqlitesaver_finds(
    saver: ContinuitySaver, tmp_path: Path, query: dict[str, Any]
) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver

    reference = SqliteSaver(sqlite3.connect(":memory:", check_same_thread=False))
    _put_with_metadata(saver)
    _put_with_metadata(reference)
    if query == {"a.b": "literal"}:  # SqliteSaver reads the path; the literal key wins here
        expected = [0, 1, 2]
    else:
        expected = sorted(t.metadata["step"] for t in reference.list(config(), filter=query))
    assert sorted(t.metadata["step"] for t in saver.list(config(), filter=query)) == expected
