"""``list(before=...)`` when the puts of two namespaces arrive out of order (issue 28, D).

LangGraph saves checkpoints in the background (``durability="async"``, its default): a
namespace's puts are chained, but a parent's put and its subgraph's puts race, so a subgraph
checkpoint made after its parent's can reach the saver before it. When a replay reaches a
persistent subgraph, LangGraph asks for ``list(subgraph config, before={"checkpoint_id": the
parent's checkpoint}, limit=1)``: "the subgraph's state as it was when that parent checkpoint
was made", which every LangGraph saver answers by comparing checkpoint ids. The saver answered
"put before the parent's record" and gave the subgraph's later state back (LangGraph's
``test_replay_from_first_invocation_checkpoint`` failed about one run in three on a JSONL
store)."""

from __future__ import annotations

import operator
import random
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
)
from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_metadata
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph

from continuity import MemoryStore, Store
from continuity.integrations.langgraph import ContinuitySaver


@pytest.fixture(params=["jsonl", "memory"])
def saver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ContinuitySaver]:
    if request.param == "jsonl":
        yield ContinuitySaver(Store(tmp_path / "store", create=True, durable=False))
    else:
        yield ContinuitySaver(MemoryStore())


def _config(ns: str, checkpoint_id: str | None = None) -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": "t", "checkpoint_ns": ns}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def _out_of_order(*savers: BaseCheckpointSaver[Any]) -> dict[str, str]:
    """What a run with a persistent subgraph can leave: root checkpoints p0 < p1 < p2 and the
    subgraph's s0 < s1 (made after p2, as the subgraph ran in the step after it), put in the
    order p0, s0, s1, p1, p2: the root's background puts came in after the subgraph's."""
    made = {name: generate_checkpoint() for name in ("p0", "p1", "p2", "s0", "s1")}
    ids = {name: cp["id"] for name, cp in made.items()}
    assert sorted(ids, key=ids.__getitem__) == ["p0", "p1", "p2", "s0", "s1"]
    parents = {"p0": None, "p1": "p0", "p2": "p1", "s0": None, "s1": "s0"}
    for name in ("p0", "s0", "s1", "p1", "p2"):
        ns = "sub_node" if name.startswith("s") else ""
        parent = parents[name]
        config = _config(ns, None if parent is None else ids[parent])
        for saver in savers:
            saver.put(config, made[name], generate_metadata(step=int(name[1])), {})
    return ids


def _listed(saver: BaseCheckpointSaver[Any], ns: str | None, before: RunnableConfig) -> list[str]:
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    if ns is not None:
        config = _config(ns)
    return [t.checkpoint["id"] for t in saver.list(config, before=before)]


def test_before_a_parent_checkpoint_lists_no_subgraph_checkpoint_made_after_it(
    saver: ContinuitySaver,
) -> None:
    ids = _out_of_order(saver)
    # what LangGraph's ReplayState asks when a replay from p2 reaches the subgraph: its `before`
    # names the parent's checkpoint by id alone (no namespace)
    replay = saver.list(_config("sub_node"), before={"configurable": {"checkpoint_id": ids["p2"]}})
    assert list(replay) == []  # s0 and s1 were put before p2, but made after it
    # and the other way: before s0, the root's checkpoints put after it are listed
    before_s0: RunnableConfig = {"configurable": {"checkpoint_id": ids["s0"]}}
    assert _listed(saver, "", before_s0) == [ids["p2"], ids["p1"], ids["p0"]]
    assert set(_listed(saver, None, before_s0)) == {ids["p2"], ids["p1"], ids["p0"]}


@pytest.mark.parametrize("ns", ["", "sub_node", None])
@pytest.mark.parametrize("before", ["p0", "p1", "p2", "s0", "s1"])
@pytest.mark.parametrize("named", [True, False])
def test_before_lists_what_in_memory_saver_lists_whatever_the_put_order(
    saver: ContinuitySaver, ns: str | None, before: str, named: bool
) -> None:
    reference = InMemorySaver()
    ids = _out_of_order(saver, reference)  # the same checkpoints, in the same order
    before_ns = ("sub_node" if before.startswith("s") else "") if named else None
    bound: dict[str, Any] = {"checkpoint_id": ids[before]}
    if before_ns is not None:
        bound["checkpoint_ns"] = before_ns
    ours, theirs = (
        _listed(saver, ns, {"configurable": bound}),
        _listed(reference, ns, {"configurable": bound}),
    )
    if ns is None:  # across namespaces the two savers order differently (ADR 0023)
        assert sorted(ours) == sorted(theirs)
    else:
        assert ours == theirs


@pytest.mark.slow
def test_before_in_another_namespace_finds_the_same_checkpoints_in_any_interleaving(
    saver: ContinuitySaver,
) -> None:
    """Two namespaces' checkpoints made in turn and put in a shuffled merge of the two chains
    (each namespace's in its own order, as LangGraph puts them): for every checkpoint as
    ``before``, without its namespace, each namespace lists what InMemorySaver lists."""
    reference = InMemorySaver()
    chains: dict[str, list[Checkpoint]] = {"": [], "sub_node": []}
    for i in range(40):
        chains["" if i % 3 else "sub_node"].append(generate_checkpoint())
    pending = {ns: list(chain) for ns, chain in chains.items()}
    parents: dict[str, str | None] = {"": None, "sub_node": None}
    shuffle = random.Random(28)
    while any(pending.values()):
        ns = shuffle.choice([space for space, left in pending.items() if left])
        cp = pending[ns].pop(0)
        for each in (saver, reference):
            each.put(_config(ns, parents[ns]), cp, generate_metadata(), {})
        parents[ns] = cp["id"]
    for chain in chains.values():
        for cp in chain:
            bound: RunnableConfig = {"configurable": {"checkpoint_id": cp["id"]}}
            for ns in chains:
                assert _listed(saver, ns, bound) == _listed(reference, ns, bound)


# --- the graph LangGraph's test runs, with the race made certain -----------------------------


class _SubState(TypedDict):
    value: Annotated[list[str], operator.add]


class _ParentState(TypedDict):
    results: Annotated[list[str], operator.add]


class _LateRootSaver(ContinuitySaver):
    """The saver, with the root's put of the step that starts the subgraph held back until the
    subgraph has put the checkpoint that ends its run (its step 1, after ``sub_step``): an
    order that a busy machine gives now and then."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.subgraph_put = threading.Event()

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        ns = config["configurable"].get("checkpoint_ns") or ""
        if not ns and metadata.get("step") == 1:
            # a guard, not a timing: were LangGraph to wait for this put, the test fails
            self.subgraph_put.wait(timeout=10)
        stored = super().put(config, checkpoint, metadata, new_versions)
        if ns and metadata.get("step") == 1:
            self.subgraph_put.set()  # stored: the root's put may go on
        return stored


@pytest.mark.slow
def test_a_replay_from_the_first_run_gives_the_subgraph_its_state_of_then(tmp_path: Path) -> None:
    observed: list[dict[str, Any]] = []

    def sub_step(state: _SubState) -> _SubState:
        observed.append(dict(state))
        return {"value": ["s"]}

    sub = (
        StateGraph(_SubState)
        .add_node("sub_step", sub_step)
        .add_edge(START, "sub_step")
        .compile(checkpointer=True)
    )
    saver = _LateRootSaver(Store(tmp_path / "store", create=True, durable=False))
    graph = (
        StateGraph(_ParentState)
        .add_node("parent_node", lambda state: {"results": ["p"]})
        .add_node("sub_node", sub)
        .add_edge(START, "parent_node")
        .add_edge("parent_node", "sub_node")
        .compile(checkpointer=saver)
    )
    config: RunnableConfig = {"configurable": {"thread_id": "1"}}
    graph.invoke({"results": []}, config)
    graph.invoke({"results": []}, config)
    # the race happened: the subgraph's first checkpoint is in the log before the root's
    # checkpoint of the step that ran it
    first_sub = list(saver.list({"configurable": {"thread_id": "1", "checkpoint_ns": "sub_node"}}))[
        -1
    ]
    put_order = [t.checkpoint["id"] for t in saver.list({"configurable": {"thread_id": "1"}})]
    history = list(graph.get_state_history(config))
    before_sub_1st = [s for s in history if s.next == ("sub_node",)][-1]
    root_id = before_sub_1st.config["configurable"]["checkpoint_id"]
    assert put_order.index(first_sub.checkpoint["id"]) > put_order.index(root_id)
    assert observed == [{"value": []}, {"value": ["s"]}]

    observed.clear()
    graph.invoke(None, before_sub_1st.config)
    assert observed == [{"value": []}]  # as in the first run, not ['s'] of the second
