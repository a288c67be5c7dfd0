"""The Agents SDK's ``OpenAIResponsesCompactionSession`` over continuity sessions: the SDK asks
the session for a snapshot of its newest items (``_get_compaction_snapshot``) and swaps a
suffix of them for the compacted items; continuity does it as one batch that retracts the
replaced messages and appends the new items, committed only if nothing newer came meanwhile.
Also ``EncryptedSession`` around a continuity session. Real SDK and Runner, a scripted model,
and a stand-in for the ``responses.compact`` endpoint (no network). ADR 0024."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, Runner
from agents.items import TResponseInputItem
from agents.memory import OpenAIResponsesCompactionSession

from continuity import Limits, MemoryStore, Store, frames as fr
from continuity.integrations.openai_agents import CompiledSession, ContinuitySession
from tests.support.agents_sdk import ScriptedModel, add, as_items, call, reply

SUMMARY: dict[str, Any] = {"type": "compaction", "id": "cmp_1", "encrypted_content": "opaque=="}


def run(coro: Any) -> Any:
    return asyncio.run(coro)


class Compact:
    """What ``client.responses.compact`` returns: the given items; the inputs it was sent."""

    def __init__(self, output: list[dict[str, Any]]) -> None:
        self.output = output
        self.inputs: list[list[Any]] = []

    async def compact(self, **kwargs: Any) -> Any:
        self.inputs.append(list(kwargs.get("input") or []))
        return type("Compacted", (), {"output": list(self.output), "usage": None})()


class Client:
    def __init__(self, output: list[dict[str, Any]]) -> None:
        self.responses = Compact(output)


def _compacting(session: Any, client: Client, **kw: Any) -> OpenAIResponsesCompactionSession:
    return OpenAIResponsesCompactionSession(
        "c",
        session,
        client=client,  # type: ignore[arg-type]
        compaction_mode="input",
        should_trigger_compaction=lambda _: True,
        **kw,
    )


def _retractions(store: Any, thread_id: str) -> list[tuple[int, fr.MessagesRetracted]]:
    frames = list(store.thread(thread_id).read())
    return [(f.seq, f) for f in frames if isinstance(f, fr.MessagesRetracted)]


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["raw", "compiled"])
@pytest.mark.parametrize("limit", [None, 1])
def test_automatic_compaction_swaps_the_suffix_in_one_batch(kind: str, limit: int | None) -> None:
    """With ``max_rollback_items`` (SQLiteSession succeeds) and with ``session_settings.limit``
    (compaction must still trigger): the newest exchange is swapped for the compacted items."""
    store = MemoryStore()
    settings = {"limit": limit} if limit else None
    if kind == "raw":
        backend: Any = ContinuitySession("c", store, session_settings=settings)
    else:
        backend = CompiledSession("c", store, session_settings=settings)
    client = Client([SUMMARY])
    session = _compacting(backend, client, max_rollback_items=2)
    agent = Agent(
        name="calc",
        model=ScriptedModel([call("add", '{"a": 1, "b": 2}'), reply("3")], response_ids=True),
    )
    agent.tools.append(add)
    run(Runner.run(agent, "1+2?", session=session))
    assert len(client.responses.inputs) == 1  # compacted once, after the run
    sent = client.responses.inputs[0]
    assert next(i.get("type", "message") for i in sent) == "message"  # from the user's turn on
    assert run(backend.get_items(100)) == [SUMMARY]  # the whole run swapped for its summary
    ((seq, retraction),) = _retractions(store, "c")
    assert retraction.reason == "responses.compact"
    after = list(store.thread("c").read(from_seq=seq))
    assert [type(f).__name__ for f in after[:2]] == ["MessagesRetracted", "MessageAppended"]
    assert after[0].more  # one batch: the retraction and the summary commit together
    # the log keeps every item of the run
    assert sum(isinstance(f, fr.MessageAppended) for f in store.thread("c").read()) == 5


def test_a_partial_suffix_keeps_the_older_history() -> None:
    """The runner sent only the newest stored item (``limit=1``): the suffix the model saw from
    the user's turn on is compacted, the older history stays as it was."""
    store = MemoryStore()
    backend = ContinuitySession("c", store, session_settings={"limit": 1})
    older: list[TResponseInputItem] = [
        {"role": "user", "content": "earlier"},
        {"role": "assistant", "content": "noted"},
    ]
    run(backend.add_items(older))
    client = Client([SUMMARY])
    session = _compacting(backend, client)
    agent = Agent(name="a", model=ScriptedModel([reply("hello")], response_ids=True))
    run(Runner.run(agent, "hi", session=session))
    assert next(i.get("content") for i in client.responses.inputs[0]) == "hi"
    assert run(backend.get_items(100)) == [*older, SUMMARY]


def test_replace_suffix_commits_only_on_the_items_it_read(tmp_path: Path) -> None:
    root = tmp_path / "store"
    session = ContinuitySession("s", root)
    other = ContinuitySession("s", Store(root))
    items: list[TResponseInputItem] = [{"role": "user", "content": str(i)} for i in range(4)]
    run(session.add_items(items))

    async def go() -> None:
        snap = await session._get_compaction_snapshot(3)
        assert snap is not None and not snap.complete
        assert snap.items == items[-3:]
        # a frame that is no message (a compile's decision) does not change the items
        Store(root).thread("s").append(
            fr.ContextSelectionRepeated(decision_seq=1, bundle_artifact_id="x")
        )
        assert await snap.replace_suffix(1, as_items([SUMMARY]))
        assert await session.get_items() == [*items[:2], SUMMARY]
        stale = await session._get_compaction_snapshot(10)
        assert stale is not None and stale.complete
        await other.add_items([{"role": "user", "content": "newer"}])
        assert not await stale.replace_suffix(
            0, as_items([SUMMARY])
        )  # a newer item: nothing written
        assert await session.get_items() == [
            *items[:2],
            SUMMARY,
            {"role": "user", "content": "newer"},
        ]
        assert not await stale.replace_suffix(99, as_items([SUMMARY]))

    run(go())


def test_manual_compaction_replaces_the_whole_history_atomically() -> None:
    store = MemoryStore()
    backend = ContinuitySession("c", store)
    run(backend.add_items([{"role": "user", "content": str(i)} for i in range(5)]))
    client = Client([SUMMARY])
    session = _compacting(backend, client)
    run(session.run_compaction({"force": True}))
    assert run(backend.get_items()) == [SUMMARY]
    frames = list(store.thread("c").read())
    # one batch: the retraction, the compaction item, and the checkpoint the item makes (ADR 0037)
    assert [type(f).__name__ for f in frames[-3:]] == [
        "MessagesRetracted",
        "MessageAppended",
        "CompactionCheckpointCreated",
    ]
    assert frames[-1].seq == frames[-3].seq + 2


def test_encrypted_session_wraps_a_continuity_session(tmp_path: Path) -> None:
    pytest.importorskip("cryptography")
    from agents.extensions.memory import EncryptedSession

    root = tmp_path / "store"
    backend = ContinuitySession("user/42", root)
    session = EncryptedSession("user/42", backend, encryption_key="k" * 32, ttl=600)  # type: ignore[arg-type]
    items: list[TResponseInputItem] = [
        {"role": "user", "content": "my secret plan"},
        {"role": "assistant", "content": "kept safe"},
    ]
    run(session.add_items(items))
    assert run(session.get_items()) == items
    envelopes = run(backend.get_items())
    assert [sorted(e) for e in envelopes] == [["__enc__", "kid", "payload", "v"]] * 2
    raw = b"".join(p.read_bytes() for p in (root / "threads").glob("*.jsonl"))
    assert b"secret" not in raw
    assert run(ContinuitySession("user/42", Store(root)).get_items()) == envelopes  # exactly
    assert run(session.pop_item()) == items[-1]
    assert run(session.get_items()) == items[:1]
    agent = Agent(name="a", model=ScriptedModel([reply("sure")], response_ids=True))
    run(Runner.run(agent, "again", session=session))
    assert [i.get("content") for i in run(session.get_items())][:2] == ["my secret plan", "again"]


def test_encrypted_compaction_over_a_continuity_session() -> None:
    pytest.importorskip("cryptography")
    from agents.extensions.memory import EncryptedSession

    store = MemoryStore()
    backend = ContinuitySession("e", store)
    client = Client([SUMMARY])
    session = EncryptedSession("e", _compacting(backend, client), encryption_key="k" * 32)
    agent = Agent(name="a", model=ScriptedModel([reply("hello")], response_ids=True))
    run(Runner.run(agent, "hi", session=session))
    assert len(client.responses.inputs) == 1
    assert run(session.get_items()) == [SUMMARY]
    assert json.dumps(run(backend.get_items())).count("__enc__") == 1


def test_compiled_history_after_compaction_starts_at_the_summary() -> None:
    """A Responses ``compaction`` item becomes a checkpoint, and the compiled history starts
    there: the item first, nothing it replaced, no made-up message (ADR 0037)."""
    store = MemoryStore()
    backend = CompiledSession("c", store, limits=Limits(recent_messages=40))
    run(backend.add_items([{"role": "user", "content": "old"}]))
    session = _compacting(backend, Client([SUMMARY]))
    run(
        Runner.run(
            Agent(name="a", model=ScriptedModel([reply("ok")], response_ids=True)),
            "hi",
            session=session,
        )
    )
    compiled = run(backend.get_items())
    assert compiled[0] == SUMMARY
    assert {"role": "user", "content": "old"} not in compiled


def test_a_compacted_window_keeps_what_the_endpoint_kept_in_order() -> None:
    """``responses.compact`` returns the messages it keeps, then the item that stands for the
    rest: the compiled history is that window, in order (issue 42)."""
    store = MemoryStore()
    backend = CompiledSession("c", store, limits=Limits(recent_messages=40))
    old: list[TResponseInputItem] = [
        {"role": "user", "content": "old question"},
        {"role": "assistant", "content": "old answer"},
    ]
    run(backend.add_items(old))
    kept: list[dict[str, Any]] = [
        {"role": "user", "content": "kept question"},
        {"role": "assistant", "content": "kept answer"},
    ]
    session = _compacting(backend, Client([*kept, SUMMARY]))
    run(session.run_compaction({"force": True}))
    run(backend.add_items([{"role": "user", "content": "after"}]))
    assert run(backend.get_items()) == [*kept, SUMMARY, {"role": "user", "content": "after"}]


def test_a_server_side_compaction_in_a_run_stands_for_everything_before_it() -> None:
    """A response that compacted on the server returns the item, then its reply: the compiled
    history starts at the item, whatever was stored before it (issue 42)."""
    from openai.types.responses import ResponseCompactionItem

    store = MemoryStore()
    backend = CompiledSession("c", store, limits=Limits(recent_messages=40))
    run(backend.add_items([{"role": "user", "content": "old"}]))
    item = ResponseCompactionItem(type="compaction", id="cmp_1", encrypted_content="opaque==")
    model = ScriptedModel([[item, *reply("ok", 7)]], response_ids=True)
    run(Runner.run(Agent(name="a", model=model), "hi", session=backend))
    compiled = run(backend.get_items())
    assert compiled[0] == SUMMARY
    assert [i.get("role") for i in compiled[1:]] == ["assistant"]
    said = json.dumps(compiled)
    assert '"old"' not in said and '"hi"' not in said
