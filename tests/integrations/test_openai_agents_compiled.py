"""``CompiledSession``: the runner gets compiled history (summaries + a bounded window), the log
keeps every item, compaction follows the cut rule, and the SDK's rewind still pops the right
item when older history is summarized. Real SDK, scripted model, real function tool. ADR 0024."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, ModelSettings, Runner
from agents.items import TResponseInputItem
from agents.retry import ModelRetrySettings, retry_policies
from agents.run_internal.session_persistence import rewind_session_items
from openai import APIConnectionError
from typer.testing import CliRunner

from continuity import (
    Limits,
    MemoryStore,
    StrideMessages,
    SummaryContent,
    SummaryDoc,
    TokenThreshold,
    frames as fr,
)
from continuity.cli.app import app
from continuity.context.retract import live_messages
from continuity.integrations.openai_agents import CompiledSession, ContinuitySession
from continuity.store.jsonl import Store
from tests.support.agents_sdk import ScriptedModel, add, call, reply

SMALL = Limits(recent_messages=8, min_recent=4, budget_tokens=None)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def cli(root: Path, *args: str) -> str:
    res = CliRunner().invoke(app, ["--store", str(root), *args])
    assert res.exit_code == 0, res.stderr
    return res.stdout


class LineSummarizer:
    """Deterministic: one line per message (``<seq> <role>: <first text>``), the last 30."""

    id = "test.lines/1"

    def summarize(
        self, base: SummaryDoc | None, messages: Sequence[fr.MessageAppended]
    ) -> SummaryContent:
        lines = base.text.splitlines() if base else []
        for m in messages:
            text = next((b.text for b in m.content if isinstance(b, fr.TextBlock)), "")
            lines.append(f"{m.seq} {m.role}: {text[:40]}")
        return SummaryContent(text="\n".join(lines[-30:]))


class AsyncLineSummarizer(LineSummarizer):
    id = "test.async-lines/1"

    async def summarize(  # type: ignore[override]
        self, base: SummaryDoc | None, messages: Sequence[fr.MessageAppended]
    ) -> SummaryContent:
        await asyncio.sleep(0)
        return LineSummarizer.summarize(self, base, messages)


def checkpoints(store: MemoryStore, thread_id: str) -> list[fr.CompactionCheckpointCreated]:
    found = store.thread(thread_id).read()
    return [f for f in found if isinstance(f, fr.CompactionCheckpointCreated)]


def _long_run(session: Any, turns: int) -> ScriptedModel:
    script: list[Any] = []
    for i in range(turns):
        script += [call("add", json.dumps({"a": i, "b": 1}), think=f"add {i}"), reply(f"{i + 1}")]
    model = ScriptedModel(script)
    agent = Agent(name="calc", instructions="Add.", model=model, tools=[add])

    async def go() -> None:
        for i in range(turns):
            result = await Runner.run(agent, f"Compute {i} plus one", session=session)
            assert result.final_output == f"{i + 1}"

    run(go())
    return model


def test_a_long_conversation_stays_bounded_and_the_log_keeps_everything(tmp_path: Path) -> None:
    root = tmp_path / "store"
    session = CompiledSession(
        "long", root, limits=SMALL, compaction=StrideMessages(10), summarizer=LineSummarizer()
    )
    model = _long_run(session, 30)
    sizes = [len(given) for given in model.inputs]
    # the first call of each run: compiled history + the new question; never more than
    # the system message, the window, the pinned user turn and the new input
    first_calls = sizes[::2]
    assert max(first_calls) <= 1 + SMALL.recent_messages + 1 + 1
    assert first_calls[-10:] == first_calls[-20:-10]  # flat, not growing
    raw = run(ContinuitySession("long", root).get_items())
    assert len(raw) == 30 * 5  # every item, as added
    compiled = run(session.get_items())
    assert compiled[0]["role"] == "system"
    # the hierarchy: three cumulative summaries picked by the halving rule
    assert compiled[0]["content"].count("## Summary of the conversation through seq") == 3
    assert compiled[-4:] == raw[-4:]  # the newest exchange exactly as stored
    assert session.last_compile is not None
    assert session.last_compile.bundle.strategy == "hierarchical_summaries_recent_messages_v1"
    assert len(session.last_compile.bundle.summaries) <= 3
    # the thread is an ordinary thread: compile and search from the CLI
    text = cli(root, "compile", "long", "--format", "text")
    assert "Summary of the conversation" in text and "Compute 29 plus one" in text
    limits = ("--recent", "8", "--min-recent", "4", "--no-budget")
    items = json.loads(cli(root, "compile", "long", "--format", "openai-responses", *limits))
    assert items == compiled  # the same rule, the same limits: the same context
    hits = cli(root, "search", "compute", "--thread", "long", "--k", "40")
    assert "Compute 3 plus one" in hits and "[retracted]" not in hits


def test_the_model_is_given_reasoning_only_with_its_item() -> None:
    session = CompiledSession("r", MemoryStore(), limits=SMALL)
    model = _long_run(session, 2)
    second = model.inputs[2]  # the second run's first call: the first run, compiled
    kinds = [i.get("type", "message") for i in second]
    assert kinds == [
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
        "message",
        "message",
    ]
    raw = run(ContinuitySession("r", session.store).get_items())
    assert second[1:5] == raw[1:5]  # the turn in flight: reasoning with its call, ids kept


def test_compile_decisions_are_logged_and_repeats_are_small() -> None:
    store = MemoryStore()
    session = CompiledSession("d", store, limits=SMALL)
    run(session.add_items([{"role": "user", "content": "hi"}]))
    run(session.get_items())
    run(session.get_items())
    kinds = [f.__struct_config__.tag for f in store.thread("d").read()]
    assert kinds.count("context_selection_decided") == 1
    assert kinds.count("context_selection_repeated") == 1
    quiet = CompiledSession("q", store, limits=SMALL, log_decisions=False)
    run(quiet.add_items([{"role": "user", "content": "hi"}]))
    assert run(quiet.get_items()) == [{"role": "user", "content": "hi"}]
    assert [f.__struct_config__.tag for f in store.thread("q").read()] == [
        "thread_created",
        "message_appended",
    ]


def test_a_limit_reads_the_raw_tail_and_pop_takes_the_newest_item_under_summaries() -> None:
    store = MemoryStore()
    session = CompiledSession(
        "p", store, limits=SMALL, compaction=StrideMessages(4), summarizer=LineSummarizer()
    )
    items: list[TResponseInputItem] = [{"role": "user", "content": f"note {i}"} for i in range(12)]
    run(session.add_items(items))
    assert [c.to_seq for c in checkpoints(store, "p")] == [4, 8, 12]  # the newest too
    assert run(session.get_items(3)) == items[-3:]
    assert run(session.pop_item()) == items[-1]
    assert run(session.pop_item()) == items[-2]
    assert run(session.get_items(2)) == items[-4:-2]
    compiled = run(session.get_items())
    assert {"role": "user", "content": "note 11"} not in compiled
    assert compiled[-1] == {"role": "user", "content": "note 9"}
    # the summaries that covered the popped items are passed over: none mentions them
    assert "note 11" not in compiled[0]["content"] and "note 10" not in compiled[0]["content"]
    assert [m.seq for m in live_messages(store.thread("p"))][-1] == 10


def test_the_sdk_rewind_works_when_older_history_is_summarized() -> None:
    store = MemoryStore()
    session = CompiledSession(
        "w", store, limits=SMALL, compaction=StrideMessages(3), summarizer=LineSummarizer()
    )
    _long_run(session, 4)
    before = run(ContinuitySession("w", store).get_items())
    retried: list[TResponseInputItem] = [
        {"role": "user", "content": "a retried input"},
        {"content": "x", "role": "user"},
    ]
    run(session.add_items(retried))
    run(rewind_session_items(session, retried))
    assert run(ContinuitySession("w", store).get_items()) == before


def test_a_retried_turn_on_a_compiled_session_leaves_no_duplicates() -> None:
    store = MemoryStore()
    session = CompiledSession(
        "t", store, limits=SMALL, compaction=TokenThreshold(60), summarizer=LineSummarizer()
    )
    _long_run(session, 3)
    flaky = APIConnectionError(request=__import__("httpx").Request("POST", "https://x"))
    model = ScriptedModel([flaky, reply("done")])
    retry = ModelRetrySettings(
        max_retries=1,
        backoff={"initial_delay": 0, "max_delay": 0, "jitter": False},
        policy=retry_policies.network_error(),
    )
    agent = Agent(name="a", model=model, model_settings=ModelSettings(retry=retry))
    assert run(Runner.run(agent, "Once more", session=session)).final_output == "done"
    assert model.inputs[0] == model.inputs[1]
    raw = run(ContinuitySession("t", store).get_items())
    assert raw[-2]["content"] == "Once more"
    assert sum(1 for i in raw if i.get("content") == "Once more") == 1


def test_an_async_summarizer_and_compaction_on_demand() -> None:
    store = MemoryStore()
    session = CompiledSession(
        "a",
        store,
        limits=SMALL,
        compaction=TokenThreshold(10_000),
        summarizer=AsyncLineSummarizer(),
    )
    run(session.add_items([{"role": "user", "content": f"line {i}"} for i in range(5)]))
    assert not checkpoints(store, "a")
    result = run(session.compact(force=True))
    assert result is not None and result.status == "succeeded"
    assert [c.to_seq for c in result.checkpoints] == [5]
    compiled = run(session.get_items())
    assert "5 user: line 4" in compiled[0]["content"]
    assert run(session.compact()) is not None  # the rule: nothing to cut
    manual = CompiledSession("m", store, auto_compact=False, compaction=StrideMessages(1))
    run(manual.add_items([{"role": "user", "content": "x"}]))
    assert run(manual.get_items(1)) == [{"role": "user", "content": "x"}]
    assert not checkpoints(store, "m")


def test_a_compiled_session_survives_a_new_process_without_caches(tmp_path: Path) -> None:
    root = tmp_path / "store"
    session = CompiledSession(
        "z", root, limits=SMALL, compaction=StrideMessages(6), summarizer=LineSummarizer()
    )
    _long_run(session, 5)
    first = run(session.get_items())
    import shutil

    shutil.rmtree(root / "cache", ignore_errors=True)
    again = CompiledSession("z", Store(root), limits=SMALL, log_decisions=False)
    assert run(again.get_items()) == first


def test_an_empty_compiled_session_has_no_items_never_a_made_up_one() -> None:
    store = MemoryStore()
    session = CompiledSession("e", store, limits=SMALL)
    assert run(session.get_items()) == []
    run(session.add_items([{"role": "user", "content": "hi"}]))
    assert run(session.pop_item()) == {"role": "user", "content": "hi"}
    assert run(session.get_items()) == []  # after popping the last item
    run(session.add_items([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]))
    run(session.clear_session())
    assert run(session.get_items()) == []  # after a clear
    prefixed = CompiledSession("e", store, limits=SMALL, system_prefix="You are terse.")
    assert run(prefixed.get_items()) == []


class GetattrSummarizer:
    """A summarizer that reads every block's ``text`` the way a generic one does."""

    id = "test.getattr/1"

    def summarize(
        self, base: SummaryDoc | None, messages: Sequence[fr.MessageAppended]
    ) -> SummaryContent:
        texts = [getattr(b, "text", "") for m in messages for b in m.content]
        return SummaryContent(text="\n".join(t for t in texts if isinstance(t, str) and t))


def test_every_block_text_is_a_string_so_a_generic_summarizer_reads_tool_results() -> None:
    result = fr.ToolResultBlock(tool_use_id="c", content="42 apples")
    assert isinstance(result.text, str) and result.text == "42 apples"
    store = MemoryStore()
    session = CompiledSession(
        "g", store, limits=SMALL, compaction=StrideMessages(4), summarizer=GetattrSummarizer()
    )
    run(
        session.add_items(
            [
                {"role": "user", "content": "count"},
                {"type": "function_call", "call_id": "c1", "name": "count", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "42 apples"},
                {"role": "user", "content": "thanks"},
            ]
        )
    )
    assert len(checkpoints(store, "g")) == 1
    assert "42 apples" in run(session.get_items())[0]["content"]
