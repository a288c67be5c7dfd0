"""The Agents SDK sessions' ids and lifecycle: any session id maps to a thread (hashed when it is
no valid thread id, the original kept in the thread's first frame), and ``close()`` / ``async
with`` close what the session opened, never a store it was given. ADR 0024."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, Runner
from typer.testing import CliRunner

from continuity import MemoryStore, Store, frames as fr
from continuity.aio import AsyncStore
from continuity.cli.app import app
from continuity.integrations.openai_agents import CompiledSession, ContinuitySession
from tests.support.agents_sdk import ScriptedModel, reply

ODD_IDS = ["user/42", "conv 1", "é", "x" * 200, "", ".hidden", "a\nb"]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


@pytest.mark.parametrize("session_id", ODD_IDS)
def test_any_session_id_works_without_a_thread_id(tmp_path: Path, session_id: str) -> None:
    root = tmp_path / "store"
    session = ContinuitySession(session_id, root)
    assert session.session_id == session_id
    assert session.thread.id.startswith("oa-") and session.thread.id != session_id
    run(session.add_items([{"role": "user", "content": "hi"}]))
    again = ContinuitySession(session_id, Store(root))  # the same id: the same thread
    assert again.thread.id == session.thread.id
    assert run(again.get_items()) == [{"role": "user", "content": "hi"}]
    first = next(iter(Store(root).thread(session.thread.id).read(to_seq=0)))
    assert isinstance(first, fr.ThreadCreated)
    assert first.meta["openai_agents.session_id"] == session_id
    assert first.title == session_id
    # `continuity threads` names the session (its title) and what made the thread
    res = CliRunner().invoke(app, ["--store", str(root), "threads", "--json"])
    assert res.exit_code == 0, res.stderr
    (row,) = [json.loads(line) for line in res.stdout.splitlines()]
    assert row["thread_id"] == session.thread.id
    assert row["title"] == session_id and row["kind"] == "openai-agents"


def test_distinct_ids_get_distinct_threads_and_a_valid_id_is_its_own_thread() -> None:
    store = MemoryStore()
    ids = {ContinuitySession(s, store).thread.id for s in [*ODD_IDS, "user/43", "conv  1"]}
    assert len(ids) == len(ODD_IDS) + 2
    assert ContinuitySession("support-42", store).thread.id == "support-42"
    assert ContinuitySession("user/42", store, thread_id="mine").thread.id == "mine"


def test_a_new_session_names_itself_in_the_first_frame_and_keeps_existing_threads() -> None:
    store = MemoryStore()
    session = CompiledSession("plain", store)
    run(session.add_items([{"role": "user", "content": "hi"}]))
    first = next(iter(store.thread("plain").read(to_seq=0)))
    assert isinstance(first, fr.ThreadCreated)
    assert first.meta == {"source": "openai-agents", "openai_agents.session_id": "plain"}
    # a thread made by anything else is used as it is (a session may continue any thread)
    store.thread("other").append(fr.message("user", content=[fr.TextBlock(text="old")]))
    other = ContinuitySession("other", store)
    run(other.add_items([{"role": "user", "content": "new"}]))
    assert [i["content"] for i in run(other.get_items())] == ["old", "new"]


def test_a_hashed_thread_of_another_session_is_a_clear_error() -> None:
    store = MemoryStore()
    session = ContinuitySession("user/42", store)
    meta = {"source": "openai-agents", "openai_agents.session_id": "someone else"}
    store.thread(session.thread.id).append(fr.ThreadCreated(meta=meta))
    with pytest.raises(ValueError, match="is not Agents SDK session 'user/42'"):
        run(session.add_items([{"role": "user", "content": "hi"}]))
    with pytest.raises(ValueError, match="is not Agents SDK session 'user/42'"):
        run(session.get_items())


def test_close_closes_a_store_the_session_opened(tmp_path: Path) -> None:
    session = ContinuitySession("s", tmp_path / "store")
    run(session.add_items([{"role": "user", "content": "hi"}]))
    run(session.close())
    run(session.close())  # again: nothing to do
    with pytest.raises(RuntimeError, match="closed"):
        run(session.get_items())
    with pytest.raises(RuntimeError, match="closed"):
        run(session.add_items([{"role": "user", "content": "more"}]))

    async def scoped() -> list[Any]:
        async with CompiledSession("s", tmp_path / "store") as compiled:
            items: list[Any] = await compiled.get_items(5)
        assert compiled.closed
        return items

    assert run(scoped()) == [{"role": "user", "content": "hi"}]


def test_close_leaves_a_store_it_was_given_open(tmp_path: Path) -> None:
    store = Store(tmp_path / "store", create=True)
    given = AsyncStore(store)

    async def go() -> None:
        async with ContinuitySession("a", store) as one:
            await one.add_items([{"role": "user", "content": "1"}])
        async with ContinuitySession("b", given) as two:
            await two.add_items([{"role": "user", "content": "2"}])

    run(go())
    store.thread("c").append(fr.message("user", content=[fr.TextBlock(text="still open")]))
    assert store.threads() == ["a", "b", "c"]


def test_a_runner_conversation_in_an_async_with_block(tmp_path: Path) -> None:
    model = ScriptedModel([reply("one"), reply("two")])
    agent = Agent(name="a", model=model)

    async def go() -> list[Any]:
        async with ContinuitySession("team/7 chat", tmp_path / "store") as session:
            await Runner.run(agent, "first", session=session)
            await Runner.run(agent, "second", session=session)
            items: list[Any] = await session.get_items()
        return items

    items = run(go())
    assert [i["content"] if i.get("role") == "user" else "a" for i in items] == [
        "first",
        "a",
        "second",
        "a",
    ]
    assert model.inputs[1][:2] == items[:2]
