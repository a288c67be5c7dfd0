"""The runtimes' storage interfaces on a PostgreSQL store: LangGraph's conformance suite passes on
it unchanged, an Agents SDK session keeps its items there, and the async face opens a URL."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES

from continuity import aio, frames as fr
from continuity.integrations.langgraph import ContinuitySaver
from continuity.integrations.openai_agents import ContinuitySession
from tests.support.agents_sdk import ScriptedModel, as_json, reply
from tests.support.pg import PgStores


@pytest.mark.slow
def test_langgraphs_conformance_suite_passes_on_postgresql(
    pg_stores: PgStores, tmp_path: Path
) -> None:
    folders = iter(range(100))

    async def factory() -> AsyncGenerator[BaseCheckpointSaver[Any], None]:
        yield ContinuitySaver(pg_stores.open(tmp_path / f"s{next(folders)}"))

    registered = checkpointer_test(name="ContinuitySaver[postgresql]")(factory)
    report = asyncio.run(validate(registered))
    results = report.to_dict()["results"]
    assert set(results) == {c.value for c in ALL_CAPABILITIES}
    for name, result in results.items():
        assert result["detected"] and result["passed"] is True, (name, result["failures"])
    assert report.conformance_level() == "FULL"


def test_an_agents_session_on_postgresql_gives_back_what_was_added(
    pg_stores: PgStores, tmp_path: Path
) -> None:
    from agents import Agent, Runner, set_tracing_disabled

    set_tracing_disabled(True)
    store = pg_stores.open(tmp_path / "agents")
    session = ContinuitySession("s1", store)
    agent = Agent(name="a", model=ScriptedModel([reply("hello there", 1)]))
    out = asyncio.run(Runner.run(agent, "hi", session=session))
    assert out.final_output == "hello there"
    items = asyncio.run(session.get_items())
    assert [i.get("role") for i in items] == ["user", "assistant"]
    popped = asyncio.run(session.pop_item())
    assert popped is not None and as_json(popped)["content"][0]["text"] == "hello there"
    assert len(asyncio.run(session.get_items())) == 1
    assert len(list(store.thread("s1").read())) == 4  # created, two items, the retraction


def test_the_async_face_opens_a_url(pg_url: str, pg_stores: PgStores) -> None:
    async def go() -> list[int]:
        store = await aio.AsyncStore.open(pg_url, create=True, schema="aio_open")
        pg_stores.opened.append(store.store)
        pg_stores.schemas.add("aio_open")
        t = store.thread("t")
        await t.append(fr.message("user", "from a coroutine"))
        return [f.seq async for f in t.read()]

    assert asyncio.run(go()) == [0, 1]


def test_a_saver_from_a_url_closes_its_pool(pg_url: str, pg_stores: PgStores) -> None:
    from langchain_core.messages import HumanMessage

    from tests.integrations.test_langgraph_graphs import config, texts, tool_graph

    pg_stores.schemas.add("lg_lifecycle")
    with ContinuitySaver.from_conn_string(pg_url, schema="lg_lifecycle") as saver:
        saver.setup()
        saver.setup()
        tool_graph(saver).invoke({"messages": [HumanMessage("What is 2 + 3?")]}, config())
        assert texts(saver, "t1")[-1][1] == "The sum is 5."
        store = saver.store
    with pytest.raises(Exception, match="closed"):  # the pool is closed: nothing answers
        store.threads()
