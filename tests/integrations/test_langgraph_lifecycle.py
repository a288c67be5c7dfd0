"""What LangGraph's own savers offer around a saver's life, on ``ContinuitySaver`` (issue 27):
``with`` and ``async with``, ``close()``, ``from_conn_string`` and ``setup()``."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage

from continuity import MemoryStore, Store
from continuity.integrations.langgraph import ContinuitySaver
from tests.integrations.test_langgraph_graphs import config, texts, tool_graph

QUESTION = {"messages": [HumanMessage("What is 2 + 3?", id="h1")]}


def test_a_saver_is_a_context_manager_and_refuses_calls_once_closed(tmp_path: Path) -> None:
    with ContinuitySaver(tmp_path / "store") as saver:
        saver.setup()
        saver.setup()  # idempotent
        tool_graph(saver).invoke(QUESTION, config())
        assert texts(saver, "t1")
    with pytest.raises(RuntimeError, match="closed"):
        saver.get_tuple(config())
    with pytest.raises(RuntimeError, match="closed"):
        list(saver.list(None))
    saver.close()  # twice is fine
    # what it wrote is there for the next one
    again = ContinuitySaver(tmp_path / "store")
    found = again.get_tuple(config())
    assert found is not None and found.checkpoint["channel_values"]["messages"]


def test_async_with_and_aclose(tmp_path: Path) -> None:
    async def run() -> str:
        async with ContinuitySaver.from_conn_string(tmp_path / "store") as saver:
            await saver.asetup()
            out = await tool_graph(saver).ainvoke(QUESTION, config())
            return str(out["messages"][-1].content)

    assert asyncio.run(run()) == "The sum is 5."


def test_from_conn_string_opens_a_folder_or_memory(tmp_path: Path) -> None:
    with ContinuitySaver.from_conn_string(str(tmp_path / "new"), durable=False) as saver:
        assert isinstance(saver.store, Store) and (tmp_path / "new").is_dir()
        tool_graph(saver).invoke(QUESTION, config())
    with ContinuitySaver.from_conn_string(":memory:") as memory:
        assert isinstance(memory.store, MemoryStore)
        tool_graph(memory).invoke(QUESTION, config())
        assert texts(memory, "t1")[-1][1] == "The sum is 5."


def test_a_store_handed_in_stays_open_for_its_owner(tmp_path: Path) -> None:
    store = Store(tmp_path / "store", create=True)
    with ContinuitySaver(store) as saver:
        tool_graph(saver).invoke(QUESTION, config())
    assert store.threads() == ["t1"]  # still usable
    with pytest.raises(TypeError, match="need a location"):
        ContinuitySaver(store, durable=False)
