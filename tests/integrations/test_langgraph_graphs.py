"""Real LangGraph graphs on the continuity saver: the docs' interrupt/resume, time-travel and
fork examples with a scripted model and a real tool, and the message mirror (compile, search,
the CLI, RemoveMessage, replace-by-id, forks, delete). ADR 0023."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, RemoveMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command, interrupt
from typer.testing import CliRunner

from continuity import MemoryStore, Store, compile_context, frames as fr, search
from continuity.cli.app import app
from continuity.context.fork import fork_point
from continuity.context.retract import live_messages
from continuity.integrations.langgraph import ContinuitySaver
from tests.support.narrow import narrow


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def scripted_agent(state: MessagesState) -> dict[str, list[AnyMessage]]:
    """A model that calls ``add`` for a question and answers with the tool's result."""
    last = state["messages"][-1]
    if last.type == "human":
        numbers = [int(w) for w in str(last.content).replace("?", " ").split() if w.isdigit()]
        call = {"name": "add", "args": {"a": numbers[0], "b": numbers[1]}, "id": f"call-{last.id}"}
        return {"messages": [AIMessage("", tool_calls=[call], id=f"ai-call-{last.id}")]}
    return {"messages": [AIMessage(f"The sum is {last.content}.", id=f"ai-answer-{last.id}")]}


def tool_graph(saver: Any) -> Any:
    builder = StateGraph(MessagesState)
    builder.add_node("agent", scripted_agent)
    builder.add_node("tools", ToolNode([add]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=saver)


@pytest.fixture(params=["jsonl", "memory"])
def saver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ContinuitySaver]:
    if request.param == "jsonl":
        yield ContinuitySaver(Store(tmp_path / "store", create=True, durable=False))
    else:
        yield ContinuitySaver(MemoryStore())


def config(thread_id: str = "t1") -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


def texts(saver: ContinuitySaver, thread_id: str) -> list[tuple[str, str]]:
    """The mirrored conversation: (message id, text of its first block)."""
    out = []
    for m in live_messages(saver.store.thread(thread_id)):
        block = m.content[0] if m.content else None
        text = getattr(block, "text", None) or getattr(block, "content", "") or ""
        out.append((m.message_id, str(text)))
    return out


# --- a run, mirrored -------------------------------------------------------------------------


def test_a_graph_run_is_mirrored_and_compiles(saver: ContinuitySaver) -> None:
    graph = tool_graph(saver)
    out = graph.invoke({"messages": [HumanMessage("What is 2 + 3?", id="h1")]}, config())
    assert out["messages"][-1].content == "The sum is 5."
    ids = [m.id for m in out["messages"]]
    assert [i for i, _ in texts(saver, "t1")] == ids  # LangGraph ids are the message ids
    result = compile_context(saver.store, "t1", log=False)
    assert [m.role for m in result.bundle.messages] == ["user", "assistant", "user", "assistant"]
    hits = search(saver.store, "sum", thread="t1", k=3)
    assert hits[0].snippet == "The sum is 5."
    # a second turn continues the same thread
    graph.invoke({"messages": [HumanMessage("And 10 + 20?", id="h2")]}, config())
    assert texts(saver, "t1")[-1] == ("ai-answer-" + texts(saver, "t1")[-2][0], "The sum is 30.")
    assert saver.store.threads() == ["t1"]  # no fork for a straight run


def test_the_cli_shows_a_langgraph_thread(tmp_path: Path) -> None:
    root = tmp_path / "store"
    saver = ContinuitySaver(root)  # a path: the JSONL store is created there
    tool_graph(saver).invoke({"messages": [HumanMessage("What is 2 + 3?", id="h1")]}, config())
    runner = CliRunner()
    log = runner.invoke(app, ["--store", str(root), "log", "t1"])
    assert log.exit_code == 0, log.output
    assert "user: What is 2 + 3?" in log.output
    assert "assistant: The sum is 5." in log.output
    assert "record langgraph.checkpoint" in log.output
    compiled = runner.invoke(app, ["--store", str(root), "compile", "t1", "--format", "text"])
    assert compiled.exit_code == 0, compiled.output
    assert "The sum is 5." in compiled.output
    found = runner.invoke(app, ["--store", str(root), "search", "sum"])
    assert found.exit_code == 0 and "The sum is 5." in found.output


# --- interrupt and resume (LangGraph's human-in-the-loop example) -----------------------------


def approval_graph(saver: ContinuitySaver) -> Any:
    def ask(state: MessagesState) -> dict[str, list[AnyMessage]]:
        answer = interrupt({"question": "Approve the refund?"})
        return {"messages": [AIMessage(f"Refund {answer}.", id="ai-refund")]}

    builder = StateGraph(MessagesState)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    return builder.compile(checkpointer=saver)


def test_interrupt_and_resume(saver: ContinuitySaver) -> None:
    graph = approval_graph(saver)
    first = graph.invoke({"messages": [HumanMessage("Refund order 7", id="h1")]}, config())
    assert first["__interrupt__"][0].value == {"question": "Approve the refund?"}
    state = graph.get_state(config())
    assert state.next == ("ask",) and state.tasks[0].interrupts
    # a new saver on the same store (another process, after a restart) resumes it
    again = approval_graph(ContinuitySaver(saver.store))
    done = again.invoke(Command(resume="approved"), config())
    assert done["messages"][-1].content == "Refund approved."
    assert texts(saver, "t1") == [("h1", "Refund order 7"), ("ai-refund", "Refund approved.")]


def test_interrupt_and_resume_async(saver: ContinuitySaver) -> None:
    graph = approval_graph(saver)

    async def run() -> Any:
        await graph.ainvoke({"messages": [HumanMessage("Refund order 7", id="h1")]}, config())
        return await graph.ainvoke(Command(resume="denied"), config())

    done = asyncio.run(run())
    assert done["messages"][-1].content == "Refund denied."
    assert texts(saver, "t1")[-1] == ("ai-refund", "Refund denied.")


# --- time travel and forks ---------------------------------------------------------------------


def test_time_travel_shows_the_new_branch_and_keeps_the_old_one_in_a_fork(
    saver: ContinuitySaver,
) -> None:
    graph = tool_graph(saver)
    graph.invoke({"messages": [HumanMessage("What is 2 + 3?", id="h1")]}, config())
    history = list(graph.get_state_history(config()))
    assert [s.metadata["step"] for s in history] == [3, 2, 1, 0, -1]  # newest first
    before_tool = next(s for s in history if s.next == ("tools",))
    original = texts(saver, "t1")
    first_latest = history[0].config
    assert saver.mirror_thread_id(first_latest) == "t1"
    # replay: run again from the checkpoint before the tool ran
    replayed = graph.invoke(None, before_tool.config)
    assert replayed["messages"][-1].content == "The sum is 5."
    latest = graph.get_state(config())
    assert latest.parent_config is not None
    # t1 shows the branch put last (the tool ran again: a new tool message id); the branch
    # it left is kept, whole, in a continuity fork of t1 taken where it was left
    assert saver.mirror_thread_id(latest.config) == "t1"
    assert [i for i, _ in texts(saver, "t1")] == [m.id for m in latest.values["messages"]]
    kept = saver.mirror_thread_id(first_latest)
    assert kept is not None and kept.startswith("t1@")
    point = fork_point(saver.store, kept)
    assert point is not None and point.thread_id == "t1"
    assert texts(saver, kept) == original
    assert [t for _, t in texts(saver, "t1")] == [t for _, t in original]
    # both branches' checkpoints, as LangGraph's own InMemorySaver lists them
    reference = tool_graph(InMemorySaver())
    reference.invoke({"messages": [HumanMessage("What is 2 + 3?", id="h1")]}, config())
    ref_before = next(s for s in reference.get_state_history(config()) if s.next == ("tools",))
    reference.invoke(None, ref_before.config)
    expected = [
        (s.metadata["source"], s.metadata["step"], s.next)
        for s in reference.get_state_history(config())
    ]
    got = [
        (s.metadata["source"], s.metadata["step"], s.next)
        for s in graph.get_state_history(config())
    ]
    assert got == expected


def test_update_state_on_an_old_checkpoint_switches_the_thread_to_the_new_branch(
    saver: ContinuitySaver,
) -> None:
    graph = tool_graph(saver)
    graph.invoke({"messages": [HumanMessage("What is 2 + 3?", id="h1")]}, config())
    first_latest = graph.get_state(config()).config
    first_turn = next(
        s for s in graph.get_state_history(config()) if s.metadata["step"] == 0
    )  # the question, before the model answered
    forked = graph.update_state(
        first_turn.config, {"messages": [HumanMessage("What is 4 + 4?", id="h1")]}
    )  # replace-by-id on a branch: the question is asked differently
    out = graph.invoke(None, forked)
    assert out["messages"][-1].content == "The sum is 8."
    # the thread is the new branch (what `continuity compile t1` shows)
    assert saver.mirror_thread_id(graph.get_state(config()).config) == "t1"
    assert texts(saver, "t1")[0][1] == "What is 4 + 4?"
    assert [t for _, t in texts(saver, "t1")][-1] == "The sum is 8."
    result = compile_context(saver.store, "t1", log=False)
    assert "The sum is 8." in str(result.bundle.messages[-1].content)
    assert "The sum is 5." not in str([m.content for m in result.bundle.messages])
    # the first branch is kept whole in a fork
    kept = saver.mirror_thread_id(first_latest)
    assert kept is not None and kept.startswith("t1@")
    assert texts(saver, kept)[0][1] == "What is 2 + 3?"
    assert texts(saver, kept)[-1][1] == "The sum is 5."
    first = next(saver.store.thread(kept).read(to_seq=0))
    assert narrow(fr.ThreadCreated, first).meta["langgraph.thread_id"] == "t1"
    # the branch goes on in t1, without another fork
    graph.invoke({"messages": [HumanMessage("And 1 + 1?", id="h3")]}, config())
    assert texts(saver, "t1")[-1][1] == "The sum is 2."
    assert len(saver.store.threads()) == 2


def test_compile_of_the_thread_after_time_travel_shows_the_latest_branch(tmp_path: Path) -> None:
    root = tmp_path / "store"
    saver = ContinuitySaver(root)
    graph = tool_graph(saver)
    graph.invoke({"messages": [HumanMessage("What is 2 + 3?", id="h1")]}, config())
    first_turn = next(s for s in graph.get_state_history(config()) if s.metadata["step"] == 0)
    again = graph.update_state(first_turn.config, {"messages": [HumanMessage("7 + 7?", id="h1")]})
    graph.invoke(None, again)
    # and back to the first branch: the thread follows, the second is kept too
    first_answer = next(
        s
        for s in graph.get_state_history(config())
        if s.values["messages"][-1].content == "The sum is 5."
    )
    graph.update_state(first_answer.config, {"messages": [HumanMessage("Thanks", id="h2")]})
    runner = CliRunner()
    out = runner.invoke(app, ["--store", str(root), "compile", "t1", "--format", "text"])
    assert out.exit_code == 0, out.output
    assert "The sum is 5." in out.output and "Thanks" in out.output
    assert "The sum is 14." not in out.output
    kept = [t for t in saver.store.threads() if t != "t1"]
    assert len(kept) == 2
    assert any(texts(saver, t)[-1][1] == "The sum is 14." for t in kept)


# --- RemoveMessage, replace-by-id, delete ------------------------------------------------------


def echo_graph(saver: ContinuitySaver) -> Any:
    def answer(state: MessagesState) -> dict[str, list[AnyMessage]]:
        question = state["messages"][-1]
        return {"messages": [AIMessage(f"You said: {question.content}", id=f"a-{question.id}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("answer", answer)
    builder.add_edge(START, "answer")
    builder.add_edge("answer", END)
    return builder.compile(checkpointer=saver)


def test_remove_message_retracts_and_replace_by_id_replaces(saver: ContinuitySaver) -> None:
    graph = echo_graph(saver)
    graph.invoke({"messages": [HumanMessage("one", id="h1")]}, config())
    graph.invoke({"messages": [HumanMessage("two", id="h2")]}, config())
    graph.update_state(config(), {"messages": [RemoveMessage(id="a-h1")]})
    assert [i for i, _ in texts(saver, "t1")] == ["h1", "h2", "a-h2"]
    graph.update_state(config(), {"messages": [AIMessage("You said: 2", id="a-h2")]})
    assert texts(saver, "t1") == [("h1", "one"), ("h2", "two"), ("a-h2", "You said: 2")]
    state = graph.get_state(config())
    assert [m.id for m in state.values["messages"]] == ["h1", "h2", "a-h2"]
    log = [f for f in saver.store.thread("t1").read(types=["messages_retracted"])]
    assert [narrow(fr.MessagesRetracted, f).message_ids for f in log] == [["a-h1"], ["a-h2"]]
    result = compile_context(saver.store, "t1", log=False)
    assert [m.message_id for m in result.bundle.messages] == ["h1", "h2", "a-h2"]


def test_delete_thread_hides_checkpoints_and_retracts_the_mirror(saver: ContinuitySaver) -> None:
    graph = tool_graph(saver)
    graph.invoke({"messages": [HumanMessage("What is 2 + 3?", id="h1")]}, config())
    old = next(s for s in graph.get_state_history(config()) if s.metadata["step"] == 0)
    graph.invoke(None, graph.update_state(old.config, {"messages": [HumanMessage("1 + 1?")]}))
    assert len(saver.store.threads()) == 2
    saver.delete_thread("t1")
    assert saver.get_tuple(config()) is None
    assert list(saver.list(config())) == []
    assert all(texts(saver, t) == [] for t in saver.store.threads())
    # the thread starts over, in its own continuity thread
    graph.invoke({"messages": [HumanMessage("What is 5 + 5?", id="h9")]}, config())
    assert texts(saver, "t1")[-1][1] == "The sum is 10."
    assert saver.mirror_thread_id(config()) == "t1"
    assert len(list(graph.get_state_history(config()))) == 5


def test_copy_thread_copies_the_conversation(saver: ContinuitySaver) -> None:
    graph = tool_graph(saver)
    graph.invoke({"messages": [HumanMessage("What is 2 + 3?", id="h1")]}, config())
    saver.copy_thread("t1", "t2")
    assert graph.get_state(config("t2")).values == graph.get_state(config()).values
    assert texts(saver, "t2") == texts(saver, "t1")
    copied = [
        s.config["configurable"]["checkpoint_id"] for s in graph.get_state_history(config("t2"))
    ]
    source = [s.config["configurable"]["checkpoint_id"] for s in graph.get_state_history(config())]
    assert copied == source  # the whole chain, parents included
    parent = graph.get_state(config("t2")).parent_config
    assert parent is not None and parent["configurable"]["checkpoint_id"] == source[1]
    graph.invoke({"messages": [HumanMessage("And 1 + 2?", id="h2")]}, config("t2"))
    assert texts(saver, "t2")[-1][1] == "The sum is 3."
    assert texts(saver, "t1")[-1][1] == "The sum is 5."


def test_a_graph_state_survives_reopening_and_deleted_caches(tmp_path: Path) -> None:
    root = tmp_path / "store"
    graph = tool_graph(ContinuitySaver(Store(root, create=True)))
    graph.invoke({"messages": [HumanMessage("What is 2 + 3?", id="h1")]}, config())
    before = graph.get_state(config())
    history = [s.config for s in graph.get_state_history(config())]
    shutil.rmtree(root / "cache")
    reopened = tool_graph(ContinuitySaver(Store(root)))
    after = reopened.get_state(config())
    assert after.values == before.values and after.config == before.config
    assert [s.config for s in reopened.get_state_history(config())] == history


def test_no_mirror_when_disabled(tmp_path: Path) -> None:
    saver = ContinuitySaver(MemoryStore(), messages_channel=None)
    tool_graph(saver).invoke({"messages": [HumanMessage("What is 2 + 3?")]}, config())
    assert texts(saver, "t1") == []
    assert saver.mirror_thread_id(config()) is None


def test_putting_a_checkpoint_again_mirrors_it_once(saver: ContinuitySaver) -> None:
    graph = echo_graph(saver)
    graph.invoke({"messages": [HumanMessage("one", id="h1")]}, config())
    old = next(s for s in graph.get_state_history(config()) if s.metadata["step"] == 0)
    branch = graph.update_state(old.config, {"messages": [HumanMessage("uno", id="h1")]})
    assert saver.mirror_thread_id(branch) == "t1"
    assert texts(saver, "t1") == [("h1", "uno")]
    kept = [t for t in saver.store.threads() if t != "t1"]
    assert len(kept) == 1 and texts(saver, kept[0]) == [("h1", "one"), ("a-h1", "You said: one")]
    # LangGraph puts the same checkpoint again (a retry after a crash or a conflict)
    for _ in range(2):
        found = saver.get_tuple(branch)
        assert found is not None and found.parent_config is not None
        saver.put(
            found.parent_config,
            found.checkpoint,
            found.metadata,
            found.checkpoint["channel_versions"],
        )
    assert texts(saver, "t1") == [("h1", "uno")]
    assert sorted(saver.store.threads()) == sorted(["t1", kept[0]])


# --- subgraphs ---------------------------------------------------------------------------------


def nested_graph(saver: ContinuitySaver) -> Any:
    def research(state: MessagesState) -> dict[str, list[AnyMessage]]:
        question = state["messages"][-1]
        return {"messages": [AIMessage(f"notes on {question.content}", id=f"n-{question.id}")]}

    inner = StateGraph(MessagesState)
    inner.add_node("research", research)
    inner.add_edge(START, "research")
    inner_graph = inner.compile()

    def answer(state: MessagesState) -> dict[str, list[AnyMessage]]:
        return {"messages": [AIMessage("done", id=f"a-{len(state['messages'])}")]}

    outer = StateGraph(MessagesState)
    outer.add_node("inner", inner_graph)
    outer.add_node("answer", answer)
    outer.add_edge(START, "inner")
    outer.add_edge("inner", "answer")
    return outer.compile(checkpointer=saver)


def test_subgraph_messages_are_mirrored_in_a_thread_of_the_subgraph(
    saver: ContinuitySaver,
) -> None:
    graph = nested_graph(saver)
    graph.invoke({"messages": [HumanMessage("tides", id="h1")]}, config())
    sub = "t1+inner"
    assert sub in saver.store.threads()
    assert [i for i, _ in texts(saver, sub)] == ["h1", "n-h1"]
    frames = [f for f in saver.store.thread(sub).read() if isinstance(f, fr.MessageAppended)]
    assert {f.meta["langgraph.checkpoint_ns"].split(":")[0] for f in frames} == {"inner"}
    first = narrow(fr.ThreadCreated, next(saver.store.thread(sub).read(to_seq=0)))
    assert first.meta["langgraph.subgraph_of"] == "t1"
    # the root conversation is the root's; a second run uses the same subgraph thread
    assert [i for i, _ in texts(saver, "t1")] == ["h1", "n-h1", "a-2"]
    graph.invoke({"messages": [HumanMessage("moons", id="h2")]}, config())
    assert texts(saver, sub)[-1] == ("n-h2", "notes on moons")
    assert sorted(saver.store.threads()) == ["t1", sub]
    sub_ns = next(
        t.config["configurable"]["checkpoint_ns"]
        for t in saver.list(None)
        if t.config["configurable"]["checkpoint_ns"]
    )
    ns_config: RunnableConfig = {"configurable": {"thread_id": "t1", "checkpoint_ns": sub_ns}}
    assert saver.mirror_thread_id(ns_config) == sub
    saver.delete_thread("t1")
    assert texts(saver, sub) == [] and texts(saver, "t1") == []
