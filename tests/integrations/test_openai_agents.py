"""``ContinuitySession``: the OpenAI Agents SDK's ``Session`` protocol on a continuity thread,
driven by the real ``Runner`` with a scripted model and a real function tool (no network, no
mock of the SDK). ADR 0024."""

from __future__ import annotations

import asyncio
import functools
import json
import random
import shutil
import subprocess
import sys
import textwrap
import typing
from pathlib import Path
from typing import Any

import pydantic
import pytest

pytest.importorskip("agents")

from agents import Agent, ModelSettings, Runner, SQLiteSession, handoff
from agents.items import TResponseInputItem
from agents.memory import Session
from agents.memory.session_settings import SessionSettings
from agents.retry import ModelRetrySettings, retry_policies
from hypothesis import HealthCheck, given, settings, strategies as st
from openai import APIConnectionError
from typer.testing import CliRunner

from continuity import BadFrame, MemoryStore, Store, frames as fr
from continuity.aio import AsyncStore
from continuity.cli.app import app
from continuity.context.convert import from_openai_responses
from continuity.context.retract import live_messages
from continuity.integrations._openai_agents_items import items_of
from continuity.integrations.openai_agents import ContinuitySession
from tests.context.test_provider_roundtrip import responses_conversations
from tests.support.agents_sdk import (
    ScriptedModel,
    add,
    as_items,
    as_json,
    call,
    lookup_order,
    reply,
)
from tests.support.openai_models import values

ROOT = Path(__file__).resolve().parents[2]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def cli(root: Path, *args: str) -> str:
    res = CliRunner().invoke(app, ["--store", str(root), *args])
    assert res.exit_code == 0, res.stderr
    return res.stdout


def sdk_items() -> list[dict[str, Any]]:
    """Every item kind one tool-using turn of the SDK stores, in the SDK's own dict shapes."""

    async def go() -> list[dict[str, Any]]:
        model = ScriptedModel([call("add", '{"a": 1, "b": 2}', think="add them"), reply("3")])
        sqlite = SQLiteSession("ref")
        await Runner.run(Agent(name="a", model=model, tools=[add]), "1+2?", session=sqlite)
        return [as_json(i) for i in await sqlite.get_items()]

    items: list[dict[str, Any]] = run(go())
    return items


# --- the protocol -----------------------------------------------------------------------------


def test_it_is_an_sdk_session() -> None:
    session = ContinuitySession("s", MemoryStore())
    assert isinstance(session, Session)
    assert session.session_settings == SessionSettings()


def test_every_item_the_sdk_stores_comes_back_exactly_and_in_order(tmp_path: Path) -> None:
    items = sdk_items()
    assert [i.get("type", "message") for i in items] == [
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
        "message",
    ]
    session = ContinuitySession("s", tmp_path / "store")
    run(session.add_items(as_items(items)))
    assert run(session.get_items()) == items
    for n in range(1, 7):  # limit counts items, and reads the newest ones
        assert run(session.get_items(n)) == items[-n:]
    assert run(session.get_items(0)) == []
    assert run(session.get_items(-1)) == items  # SQLite's LIMIT -1: all
    thread = Store(tmp_path / "store").thread("s")
    assert [m.role for m in live_messages(thread)] == [
        "user",
        "assistant",
        "assistant",
        "user",
        "assistant",
    ]  # one frame per item, on the side of the conversation it belongs to
    call_frame = live_messages(thread)[2]
    assert isinstance(call_frame.content[0], fr.ToolUseBlock)  # typed: compile pairs it
    assert call_frame.content[0].input == {"a": 1, "b": 2}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(responses_conversations())
def test_any_responses_conversation_round_trips_item_for_item(items: list[dict[str, Any]]) -> None:
    session = ContinuitySession("s", MemoryStore())
    run(session.add_items(as_items(items[:1])))
    run(session.add_items(as_items(items[1:])))
    assert run(session.get_items()) == items
    assert run(session.get_items(3)) == items[-3:]


def _shuffled(value: Any, rng: random.Random) -> Any:
    """``value`` with the keys of every object in it in another order."""
    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        return {k: _shuffled(value[k], rng) for k in keys}
    if isinstance(value, list):
        return [_shuffled(v, rng) for v in value]
    return value


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(responses_conversations(), st.integers(0, 2**32 - 1))
def test_items_come_back_with_their_keys_in_the_order_they_were_added(
    items: list[dict[str, Any]], seed: int
) -> None:
    """Dict key order is observable (a JSON request, the SDK's digests): the same order back."""
    rng = random.Random(seed)
    items = [_shuffled(i, rng) for i in sdk_items() + items]
    session = ContinuitySession("s", MemoryStore())
    run(session.add_items(as_items(items)))
    assert json.dumps(run(session.get_items())) == json.dumps(items)
    assert json.dumps(run(session.get_items(2))) == json.dumps(items[-2:])
    fresh = ContinuitySession("s", session.store)  # nothing rendered yet
    assert json.dumps(run(fresh.get_items())) == json.dumps(items)
    assert json.dumps(run(fresh.pop_item())) == json.dumps(items[-1])


def test_shapes_the_converters_do_not_reproduce_are_kept_verbatim() -> None:
    odd: list[dict[str, Any]] = [
        {"role": "assistant", "content": [{"type": "output_text", "text": "x", "annotations": []}]},
        {"role": "user", "content": []},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": ""}]},
        {"type": "item_reference", "id": "msg_9"},
        {"type": "function_call_output", "call_id": "c", "output": "y" * 100_000},
    ]
    session = ContinuitySession("s", MemoryStore())
    run(session.add_items(as_items(odd)))
    assert run(session.get_items()) == odd
    assert run(session.pop_item()) == odd[-1]


def test_session_settings_limit_is_the_default_limit() -> None:
    session = ContinuitySession("s", MemoryStore(), session_settings={"limit": 2})
    items: list[TResponseInputItem] = [{"role": "user", "content": str(i)} for i in range(5)]
    run(session.add_items(items))
    assert run(session.get_items()) == items[-2:]
    assert run(session.get_items(4)) == items[-4:]


def test_a_fresh_session_is_empty() -> None:
    session = ContinuitySession("nothing-yet", MemoryStore())
    assert run(session.get_items()) == []
    assert run(session.get_items(3)) == []
    assert run(session.pop_item()) is None
    run(session.clear_session())
    assert not session.store.store.thread("nothing-yet").exists()


def test_bad_input_is_a_clear_error_and_writes_nothing(tmp_path: Path) -> None:
    session = ContinuitySession("s", tmp_path / "store")
    run(session.add_items([{"role": "user", "content": "hi"}]))
    log = tmp_path / "store" / "threads" / "s.jsonl"
    before = log.read_bytes()
    good = {"role": "user", "content": "fine"}
    with pytest.raises(BadFrame, match=r"add_items: items\[1\]: expected a Responses input item"):
        run(session.add_items(as_items([good, "not an item"])))  # type: ignore[list-item]
    with pytest.raises(BadFrame, match=r"items\[0\]\.role: expected 'user'"):
        run(session.add_items(as_items([{"type": "message", "role": "robot", "content": "x"}])))
    with pytest.raises(BadFrame, match=r"items\[1\]\.call_id: missing"):
        bad_call = {"type": "function_call", "name": "f", "arguments": "{}"}
        run(session.add_items(as_items([good, bad_call])))
    with pytest.raises(BadFrame, match=r"items\[0\]: not a JSON object"):
        run(session.add_items(as_items([{"role": "user", "content": object()}])))
    assert log.read_bytes() == before
    assert run(session.get_items()) == [{"role": "user", "content": "hi"}]


def test_added_items_are_copied_not_referenced() -> None:
    session = ContinuitySession("s", MemoryStore())
    item: dict[str, Any] = {"role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    run(session.add_items(as_items([item])))
    item["content"][0]["text"] = "changed"
    got = run(session.get_items())
    assert got[0]["content"][0]["text"] == "hi"
    got[0]["content"][0]["text"] = "mine"
    assert run(session.get_items())[0]["content"][0]["text"] == "hi"


# --- retractions ------------------------------------------------------------------------------


def test_pop_and_clear_are_retractions_the_log_keeps(tmp_path: Path) -> None:
    root = tmp_path / "store"
    session = ContinuitySession("s", root)
    items = sdk_items()
    run(session.add_items(as_items(items)))
    assert run(session.pop_item()) == items[-1]
    assert run(session.pop_item()) == items[-2]
    assert run(session.get_items()) == items[:-2]
    log = cli(root, "log", "s")
    assert "retracted seq 5: pop_item" in log and "retracted seq 4: pop_item" in log
    assert log.count("[retracted]") == 2
    run(session.clear_session())
    assert run(session.get_items()) == []
    assert run(session.pop_item()) is None
    log = cli(root, "log", "s")
    assert "clear_session" in log and log.count("[retracted]") == 5
    frames = list(Store(root).thread("s").read())
    assert sum(isinstance(f, fr.MessageAppended) for f in frames) == 5  # nothing deleted
    run(session.add_items([{"role": "user", "content": "again"}]))
    assert run(session.get_items()) == [{"role": "user", "content": "again"}]


def test_concurrent_pops_take_distinct_items() -> None:
    session = ContinuitySession("s", MemoryStore())
    items: list[TResponseInputItem] = [{"role": "user", "content": str(i)} for i in range(6)]
    run(session.add_items(items))

    async def pops() -> list[Any]:
        return list(await asyncio.gather(*(session.pop_item() for _ in range(4))))

    popped = run(pops())
    assert sorted(p["content"] for p in popped) == ["2", "3", "4", "5"]
    assert run(session.get_items()) == items[:2]


def test_pops_through_two_session_objects_take_distinct_items(tmp_path: Path) -> None:
    """Two session objects (two workers, two locks, as two processes would be) on one thread:
    the retraction commits only on the head each pop read, so no item is popped twice."""
    root = tmp_path / "store"
    one = ContinuitySession("s", AsyncStore(Store(root, create=True)))
    two = ContinuitySession("s", AsyncStore(Store(root)))
    items: list[TResponseInputItem] = [{"role": "user", "content": str(i)} for i in range(40)]
    run(one.add_items(items))

    async def pops() -> list[Any]:
        return list(await asyncio.gather(*(s.pop_item() for _ in range(30) for s in (one, two))))

    popped = [p["content"] for p in run(pops()) if p is not None]
    assert sorted(popped, key=int) == [str(i) for i in range(40)]
    assert run(one.get_items()) == run(two.get_items()) == []


def test_items_read_again_come_back_fresh_and_current(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """get_items keeps what it read and then reads only what was appended since: a second read
    gives equal, unshared items, and sees what other writers added, popped and cleared, also
    past the size bound of what it keeps, and a log replaced under the same id."""
    items = sdk_items() * 3
    root = tmp_path / "store"
    reader = ContinuitySession("s", root)
    writer = ContinuitySession("s", Store(root))
    run(writer.add_items(as_items(items)))
    first = run(reader.get_items())
    assert first == items
    first[0]["content"] = "mine"
    again = run(reader.get_items())
    assert again == items and again[0] is not first[0]
    more: list[TResponseInputItem] = [{"role": "user", "content": str(i)} for i in range(3)]
    run(writer.add_items(more))
    assert run(reader.get_items()) == items + more
    assert run(reader.get_items(2)) == more[1:]
    run(writer.pop_item())
    assert run(reader.get_items()) == items + more[:2]
    run(writer.clear_session())
    assert run(reader.get_items()) == []
    run(writer.add_items(more))
    assert run(reader.get_items()) == more
    shutil.rmtree(root)  # another log under the same id, as long as the one read
    other = ContinuitySession("s", root)
    odd: list[TResponseInputItem] = [{"role": "user", "content": "x"}] * 3
    run(other.add_items(odd))
    assert run(reader.get_items()) == odd
    import continuity.integrations._openai_agents_session as impl

    monkeypatch.setattr(impl, "RENDERED_CACHE_BYTES", 200)
    small = ContinuitySession("s", Store(root))
    run(small.add_items(as_items(items)))
    assert run(small.get_items()) == odd + items == run(small.get_items())
    assert run(small.get_items(3)) == items[-3:]


def test_the_sdk_rewind_pops_exactly_its_items() -> None:
    """The runner's own rewind helper (used when a retried request must not duplicate what it
    persisted) reads the tail with a limit, compares, and pops one item at a time."""
    from agents.run_internal.session_persistence import rewind_session_items

    session = ContinuitySession("s", MemoryStore())
    kept = sdk_items()
    retried: list[TResponseInputItem] = [
        {"role": "user", "content": "try this"},
        {"role": "user", "content": "and this"},
    ]
    run(session.add_items(as_items(kept) + retried))
    run(rewind_session_items(session, retried))
    assert run(session.get_items()) == kept


# --- the runner ---------------------------------------------------------------------------------


def _conversation(session: Session) -> ScriptedModel:
    model = ScriptedModel(
        [
            call("lookup_order", '{"order_id": "A7"}', think="look it up", n=1),
            reply("Order A7 ships Tuesday.", n=2),
            call("add", '{"a": 2, "b": 3}', n=3),
            reply("2 + 3 = 5.", n=4),
        ]
    )
    agent = Agent(name="support", instructions="Be brief.", model=model, tools=[lookup_order, add])
    first = run(Runner.run(agent, "Where is order A7?", session=session))
    assert first.final_output == "Order A7 ships Tuesday."
    second = run(Runner.run(agent, "And what is 2+3?", session=session))
    assert second.final_output == "2 + 3 = 5."
    return model


def test_a_conversation_is_kept_the_same_as_the_sdks_own_session(tmp_path: Path) -> None:
    ours = ContinuitySession("chat", tmp_path / "store")
    theirs = SQLiteSession("chat")
    model = _conversation(ours)
    _conversation(theirs)
    assert run(ours.get_items()) == run(theirs.get_items())
    # the second run's model saw the whole first run, from the session
    second_input = model.inputs[2]
    assert second_input[0] == {"content": "Where is order A7?", "role": "user"}
    assert second_input[-1] == {"content": "And what is 2+3?", "role": "user"}
    assert len(run(ours.get_items())) == 9  # 5 items for the tool turn, 4 for the next


@pytest.mark.slow
def test_a_conversation_reloads_in_a_new_process_without_caches(tmp_path: Path) -> None:
    root = tmp_path / "store"
    session = ContinuitySession("chat", root)
    _conversation(session)
    expected = run(session.get_items())
    shutil.rmtree(root / "cache", ignore_errors=True)
    script = textwrap.dedent(
        f"""
        import asyncio, json, sys
        sys.path.insert(0, {str(ROOT)!r})
        from agents import Agent, Runner
        from tests.support.agents_sdk import ScriptedModel, add, reply
        from continuity.integrations.openai_agents import ContinuitySession

        async def main():
            session = ContinuitySession("chat", {str(root)!r})
            before = await session.get_items()
            model = ScriptedModel([reply("You asked about A7 and 2+3.")])
            agent = Agent(name="support", model=model, tools=[add])
            result = await Runner.run(agent, "What did I ask?", session=session)
            print(json.dumps({{"before": before, "seen": model.inputs[0],
                              "after": await session.get_items(),
                              "answer": result.final_output}}))

        asyncio.run(main())
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["before"] == expected
    assert got["seen"] == [*expected, {"content": "What did I ask?", "role": "user"}]
    assert got["after"][: len(expected)] == expected and len(got["after"]) == len(expected) + 2
    assert got["answer"] == "You asked about A7 and 2+3."
    # and this process reads what the other one wrote
    assert run(ContinuitySession("chat", Store(root)).get_items()) == got["after"]
    cli(root, "verify")


def test_a_retried_model_call_leaves_no_duplicates() -> None:
    session = ContinuitySession("retry", MemoryStore())
    flaky = APIConnectionError(request=__import__("httpx").Request("POST", "https://x"))
    model = ScriptedModel([flaky, call("add", '{"a": 1, "b": 1}'), reply("2")])
    retry = ModelRetrySettings(
        max_retries=2,
        backoff={"initial_delay": 0, "max_delay": 0, "jitter": False},
        policy=retry_policies.network_error(),
    )
    agent = Agent(name="a", model=model, tools=[add], model_settings=ModelSettings(retry=retry))
    result = run(Runner.run(agent, "1+1?", session=session))
    assert result.final_output == "2"
    assert len(model.inputs) == 3  # the failed call, its retry, the turn after the tool
    assert model.inputs[0] == model.inputs[1]  # the retry sent the same request
    items = run(session.get_items())
    assert [i.get("type", "message") for i in items] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
    ]
    fingerprints = [json.dumps(i, sort_keys=True) for i in items]
    assert len(set(fingerprints)) == len(fingerprints)


def test_one_session_shared_by_two_agents_and_a_handoff() -> None:
    store = MemoryStore()
    session = ContinuitySession("shared", store)
    billing_model = ScriptedModel([reply("Refund issued for A7.")])
    billing = Agent(name="billing", model=billing_model)
    triage_model = ScriptedModel(
        [
            call("transfer_to_billing", "{}"),
            call("lookup_order", '{"order_id": "A7"}'),
            reply("A7 ships Tuesday."),
        ]
    )
    triage = Agent(
        name="triage", model=triage_model, tools=[lookup_order], handoffs=[handoff(billing)]
    )
    first = run(Runner.run(triage, "Refund order A7", session=session))
    assert first.final_output == "Refund issued for A7." and first.last_agent.name == "billing"
    # a second agent, a second run, the same session: it sees the whole conversation
    second = run(Runner.run(triage, "And when does it ship?", session=session))
    assert second.final_output == "A7 ships Tuesday."
    items = run(session.get_items())
    kinds = [i.get("type", "message") for i in items]
    assert kinds.count("function_call") == 2 and kinds.count("function_call_output") == 2
    assert triage_model.inputs[1][: len(items) - 4] == items[: len(items) - 4]
    # another session object on the same store sees the same items
    assert run(ContinuitySession("shared", AsyncStore(store)).get_items()) == items


# --- the openai package's own item objects --------------------------------------------------


def _no_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _no_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_no_nulls(v) for v in value]
    return value


def _output_item_models() -> list[Any]:
    from openai.types.responses import Response

    (union,) = typing.get_args(Response.model_fields["output"].annotation)
    return values(union)


@functools.cache
def _request_item_type() -> Any:
    from openai.types.responses import ResponseInputItemParam

    return pydantic.TypeAdapter(ResponseInputItemParam)


@functools.cache
def _required_members(kind: str) -> frozenset[str]:
    """The members the request type of item type ``kind`` requires (``Required[...]``)."""
    import typing_extensions
    from openai.types.responses import ResponseInputItemParam

    for member in typing.get_args(ResponseInputItemParam):
        hints = typing.get_type_hints(member, include_extras=True)
        tag = hints.get("type")
        if tag is not None and kind in typing.get_args(typing.get_args(tag)[0]):
            return frozenset(
                k
                for k, v in hints.items()
                if typing.get_origin(v) in (typing.Required, typing_extensions.Required)
            )
    return frozenset()


def _sendable(item: dict[str, Any]) -> Any:
    """``item`` as the SDK's request type ``ResponseInputItemParam`` takes it: members it does
    not know left out, nulls too (absent means the same to the API); a ValidationError when
    it is no valid request item (a required member missing)."""

    def plain(value: Any) -> Any:
        if hasattr(value, "model_dump"):
            return plain(value.model_dump(exclude_unset=True, by_alias=True))
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items() if v is not None}
        if isinstance(value, list | tuple) or type(value).__name__ == "ValidatorIterator":
            return [plain(v) for v in value]
        return value

    return plain(_request_item_type().validate_python(item))


@pytest.mark.slow
def test_every_output_item_type_keeps_its_required_nulls_through_a_response() -> None:
    """``from_openai_responses(Response)`` keeps what the SDK itself sends back (its
    ``model_dump(exclude_unset=True)``), nulls included: a required member that is null
    (``image_generation_call.result``, ``code_interpreter_call.code``/``outputs``,
    ``double_click.keys``) dropped would fail the next request's ``ResponseInputItemParam``.
    Every output item type of the ``openai`` package, each with null wherever it allows."""
    from openai.types.responses import Response

    checked: list[dict[str, Any]] = []
    for built in _output_item_models():
        # null where the request type requires the member (what was dropped), set otherwise
        required = _required_members(built.type)
        dump = built.model_dump(exclude_unset=True, mode="json", by_alias=True)
        model = type(built).model_validate(
            {k: v for k, v in dump.items() if v is not None or k in required}
        )
        expected = model.model_dump(exclude_unset=True, mode="json", by_alias=True)
        try:
            sendable = _sendable(expected)
        except pydantic.ValidationError:
            continue  # the SDK's own dump is no request item: not ours to send back
        except BaseException as exc:  # pydantic-core panics iterating some lazy iterables
            if type(exc).__name__ != "PanicException":
                raise
            continue
        response = Response.model_construct(id="resp_1", output=[model])
        (frame,) = from_openai_responses(response, max_inline_bytes=1 << 40)
        (got,) = items_of(frame, None)
        assert _sendable(got) == sendable, model.type
        checked.append(expected)
    assert len({i["type"] for i in checked}) >= 20
    text = json.dumps(checked)  # the nulls the issue names were among them
    assert '"result": null, "status": "in_progress", "type": "image_generation_call"' in text
    assert '"code": null, "container_id": "x", "outputs": null' in text
    assert '{"keys": null, "type": "double_click"' in text


def test_the_sdks_item_objects_are_stored_as_it_dumps_them() -> None:
    session = ContinuitySession("s", MemoryStore())
    models = _output_item_models()
    run(session.add_items(models))
    assert run(session.get_items()) == [
        m.model_dump(exclude_unset=True, mode="json") for m in models
    ]
