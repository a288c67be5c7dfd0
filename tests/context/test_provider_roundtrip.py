"""Provider shapes round-trip (ADR 0019): for every supported shape, rendering what was converted
gives the input back, for the provider it came from.

x (generated, and checked against the official SDK's own request type) → ``from_*`` → append to
a ``MemoryStore`` thread → ``compile_context`` (no budget, every message) → ``to_*`` → x.

What does not come back is stated and tested at the end of this file.
"""

from __future__ import annotations

import base64
import json
from functools import cache
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from continuity import frames as fr
from continuity.context.bundle import ContextBundle
from continuity.context.compiler import compile_context
from continuity.context.convert import from_anthropic, from_openai, from_openai_responses
from continuity.context.render import to_anthropic, to_openai, to_openai_responses
from continuity.store.memory import MemoryStore

pydantic = pytest.importorskip("pydantic")
pytest.importorskip("anthropic")
pytest.importorskip("openai")

EVERYTHING = fr.Limits(budget_tokens=None, recent_messages=10**6)
SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --- the SDKs' own request types ------------------------------------------------------------


@cache
def _adapter(name: str) -> Any:
    if name == "anthropic.message":
        from anthropic.types import MessageParam

        return pydantic.TypeAdapter(MessageParam)
    if name == "anthropic.system":
        from anthropic.types import TextBlockParam

        return pydantic.TypeAdapter(str | list[TextBlockParam])
    if name == "openai.chat":
        from openai.types.chat import ChatCompletionMessageParam

        return pydantic.TypeAdapter(ChatCompletionMessageParam)
    if name == "openai.responses":
        from openai.types.responses import ResponseInputItemParam

        return pydantic.TypeAdapter(ResponseInputItemParam)
    raise KeyError(name)


def _materialized(value: Any) -> Any:
    """A validated value with the SDKs' lazily validated iterables run (and so checked), and
    the SDK's response objects it chose for some blocks as the members they were given."""
    if hasattr(value, "model_dump"):
        return _materialized(value.model_dump(exclude_unset=True, by_alias=True))
    if isinstance(value, dict):
        return {k: _materialized(v) for k, v in value.items()}
    if isinstance(value, list | tuple) or type(value).__name__ == "ValidatorIterator":
        return [_materialized(v) for v in value]
    return value


def sdk_valid(kind: str, value: Any) -> None:
    """Fail unless ``value`` is an instance of the SDK's request type ``kind``, with no member
    the type does not know (the validated value must be the value itself)."""
    validated = _materialized(_adapter(kind).validate_python(value))
    assert validated == value, f"members the {kind} type does not know:\n{value}\n{validated}"


def check_anthropic(request: dict[str, Any]) -> None:
    if "system" in request:
        sdk_valid("anthropic.system", request["system"])
    for message in request["messages"]:
        sdk_valid("anthropic.message", message)


def check_openai(messages: list[dict[str, Any]]) -> None:
    for message in messages:
        sdk_valid("openai.chat", message)


def check_responses(items: list[dict[str, Any]]) -> None:
    for item in items:
        sdk_valid("openai.responses", item)


# --- convert → append → compile → the bundle a renderer sees --------------------------------


def compiled(frames: list[fr.MessageAppended], store: MemoryStore) -> ContextBundle:
    thread = store.thread("rt")
    thread.append(frames)
    result = compile_context(thread, limits=EVERYTHING, log=False)
    return result.bundle


# --- generated shapes -----------------------------------------------------------------------

_WORDS = st.text(alphabet="abcdefgh xyzé€\n", min_size=1, max_size=24).map(str.strip)
TEXT = _WORDS.filter(bool)
SMALL = st.text(alphabet="abc", min_size=1, max_size=8)
MEDIA = st.sampled_from(["image/png", "image/jpeg", "image/gif", "image/webp"])
B64 = st.binary(min_size=1, max_size=40).map(lambda b: base64.b64encode(b).decode())
URL = SMALL.map(lambda s: f"https://example.com/{s}.png")
JSON_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(SMALL, inner, max_size=3),
    max_leaves=6,
)
INPUT = st.dictionaries(st.sampled_from(["command", "path", "n", "q", "é"]), JSON_VALUE, max_size=3)


class Ids:
    """Fresh ids for one generated conversation."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"


def _arguments(draw: st.DrawFn, value: dict[str, Any]) -> str:
    """Arguments as a model writes them: compact, or pretty (kept as they were written)."""
    compact = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return draw(st.sampled_from([compact, json.dumps(value, indent=2)]))


# -- Anthropic --


@st.composite
def anthropic_image(draw: st.DrawFn) -> dict[str, Any]:
    if draw(st.booleans()):
        source = {"type": "base64", "media_type": draw(MEDIA), "data": draw(B64)}
    else:
        source = {"type": "url", "url": draw(URL)}
    return {"type": "image", "source": source}


@st.composite
def anthropic_user_extra(draw: st.DrawFn) -> dict[str, Any]:
    """A block a user message may hold besides tool results."""
    kind = draw(st.sampled_from(["text", "text", "image", "document", "search_result"]))
    if kind == "text":
        return {"type": "text", "text": draw(TEXT)}
    if kind == "image":
        return draw(anthropic_image())
    if kind == "document":
        source = {"type": "text", "media_type": "text/plain", "data": draw(TEXT)}
        return {"type": "document", "source": source, "title": draw(TEXT)}
    return {
        "type": "search_result",
        "source": draw(URL),
        "title": draw(TEXT),
        "content": [{"type": "text", "text": draw(TEXT)}],
    }


@st.composite
def anthropic_result(draw: st.DrawFn, tool_use_id: str) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_use_id}
    form = draw(st.sampled_from(["str", "str", "list", "none", "empty"]))
    if form == "str":
        block["content"] = draw(TEXT)
    elif form == "empty":
        block["content"] = ""
    elif form == "list":
        part = st.one_of(TEXT.map(lambda t: {"type": "text", "text": t}), anthropic_image())
        block["content"] = draw(st.lists(part, min_size=1, max_size=3))
    if draw(st.booleans()):
        block["is_error"] = draw(st.booleans())
    return block


@st.composite
def anthropic_assistant(draw: st.DrawFn, ids: Ids, last: bool) -> dict[str, Any]:
    if draw(st.integers(0, 4)) == 0:
        return {"role": "assistant", "content": draw(TEXT)}
    blocks: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(0, 2))):
        if draw(st.booleans()):
            blocks.append({"type": "thinking", "thinking": draw(TEXT), "signature": draw(SMALL)})
        else:
            blocks.append({"type": "redacted_thinking", "data": draw(SMALL)})
    if draw(st.booleans()):
        blocks.append({"type": "text", "text": draw(TEXT)})
    if draw(st.integers(0, 3)) == 0:
        server = ids("srvtoolu_")
        query = draw(TEXT)
        blocks.append(
            {
                "type": "server_tool_use",
                "id": server,
                "name": "web_search",
                "input": {"query": query},
            }
        )
        result = {
            "type": "web_search_result",
            "url": draw(URL),
            "title": draw(TEXT),
            "encrypted_content": draw(SMALL),
        }
        blocks.append(
            {"type": "web_search_tool_result", "tool_use_id": server, "content": [result]}
        )
    if not last:
        for _ in range(draw(st.integers(0, 3))):
            blocks.append(
                {"type": "tool_use", "id": ids("toolu_"), "name": draw(SMALL), "input": draw(INPUT)}
            )
    if not blocks or blocks[-1]["type"] in ("thinking", "redacted_thinking"):
        blocks.append({"type": "text", "text": draw(TEXT)})
    return {"role": "assistant", "content": blocks}


@st.composite
def anthropic_conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Alternating messages, the user's first; every tool call answered in the next message,
    results first and in call order; ids never reused."""
    ids = Ids()
    messages: list[dict[str, Any]] = []
    calls: list[str] = []
    for k in range(draw(st.integers(1, 6))):
        if k % 2 == 0:
            blocks = [draw(anthropic_result(c)) for c in calls]
            extra = draw(st.lists(anthropic_user_extra(), min_size=0 if calls else 1, max_size=2))
            if not calls and len(extra) == 1 and extra[0]["type"] == "text" and draw(st.booleans()):
                messages.append({"role": "user", "content": extra[0]["text"]})
            else:
                messages.append({"role": "user", "content": blocks + extra})
            calls = []
        else:
            last = draw(st.booleans())
            message = draw(anthropic_assistant(ids, last))
            messages.append(message)
            if isinstance(message["content"], list):
                calls = [b["id"] for b in message["content"] if b["type"] == "tool_use"]
            if last and not calls:
                break
    if calls:  # an assistant message ended the loop with calls: answer them
        messages.append({"role": "user", "content": [draw(anthropic_result(c)) for c in calls]})
    return messages


# -- OpenAI Chat --


@st.composite
def chat_user(draw: st.DrawFn) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "user"}
    if draw(st.booleans()):
        message["content"] = draw(TEXT)
    else:

        def image(url: str, detail: str | None) -> dict[str, Any]:
            image_url = {"url": url} if detail is None else {"url": url, "detail": detail}
            return {"type": "image_url", "image_url": image_url}

        data_url = st.builds(lambda m, d: f"data:{m};base64,{d}", MEDIA, B64)
        detail = st.none() | st.sampled_from(["auto", "low", "high"])
        part = st.one_of(
            TEXT.map(lambda t: {"type": "text", "text": t}),
            st.builds(image, data_url | URL, detail),
        )
        message["content"] = draw(st.lists(part, min_size=1, max_size=3))
    if draw(st.integers(0, 4)) == 0:
        message["name"] = draw(SMALL)
    return message


@st.composite
def chat_conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    ids = Ids()
    messages: list[dict[str, Any]] = []
    if draw(st.booleans()):
        role = draw(st.sampled_from(["system", "developer"]))
        if draw(st.booleans()):
            content: Any = draw(TEXT)
        else:
            content = [
                {"type": "text", "text": t} for t in draw(st.lists(TEXT, min_size=1, max_size=2))
            ]
        messages.append({"role": role, "content": content})
    for _ in range(draw(st.integers(1, 4))):
        messages += draw(st.lists(chat_user(), min_size=1, max_size=2))
        while True:
            assistant: dict[str, Any] = {"role": "assistant"}
            calls = []
            if draw(st.booleans()):
                for _ in range(draw(st.integers(1, 3))):
                    function = {"name": draw(SMALL), "arguments": _arguments(draw, draw(INPUT))}
                    calls.append({"id": ids("call_"), "type": "function", "function": function})
                assistant["tool_calls"] = calls
            form = draw(st.sampled_from(["text", "text", "none", "absent", "refusal", "parts"]))
            if form == "text" or (form == "absent" and not calls):
                assistant["content"] = draw(TEXT)
            elif form == "none":
                assistant["content"] = None if calls else draw(TEXT)
            elif form == "refusal":
                assistant["content"] = None
                assistant["refusal"] = draw(TEXT)
            elif form == "parts":
                assistant["content"] = [
                    {"type": "text", "text": t}
                    for t in draw(st.lists(TEXT, min_size=2, max_size=2))
                ]
            messages.append(assistant)
            for call in calls:
                if draw(st.booleans()):
                    content = draw(TEXT)
                else:
                    content = [{"type": "text", "text": draw(TEXT)}]
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": content})
            if not calls or draw(st.booleans()):
                break
        if draw(st.integers(0, 3)) == 0:
            break
    return messages


# -- OpenAI Responses --


@st.composite
def responses_user(draw: st.DrawFn) -> dict[str, Any]:
    form = draw(st.sampled_from(["easy", "typed", "parts"]))
    if form == "easy":
        return {"role": "user", "content": draw(TEXT)}
    if form == "typed":
        return {"type": "message", "role": "user", "content": draw(TEXT)}
    data_url = st.builds(lambda m, d: f"data:{m};base64,{d}", MEDIA, B64)
    image = st.builds(
        lambda url, detail: {"type": "input_image", "image_url": url, "detail": detail},
        data_url | URL,
        st.sampled_from(["auto", "low", "high"]),
    )
    part = TEXT.map(lambda t: {"type": "input_text", "text": t}) | image
    return {
        "type": "message",
        "role": "user",
        "content": draw(st.lists(part, min_size=1, max_size=3)),
    }


@st.composite
def responses_assistant_message(draw: st.DrawFn, ids: Ids) -> dict[str, Any]:
    if draw(st.booleans()):
        return {"role": "assistant", "content": draw(TEXT)}
    parts = []
    for _ in range(draw(st.integers(1, 2))):
        annotations: list[dict[str, Any]] = []
        if draw(st.booleans()):
            annotations.append(
                {
                    "type": "url_citation",
                    "url": draw(URL),
                    "title": draw(TEXT),
                    "start_index": 0,
                    "end_index": 1,
                }
            )
        parts.append({"type": "output_text", "text": draw(TEXT), "annotations": annotations})
    return {
        "type": "message",
        "id": ids("msg_"),
        "status": "completed",
        "role": "assistant",
        "content": parts,
    }


@st.composite
def responses_conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    ids = Ids()
    items: list[dict[str, Any]] = []
    if draw(st.booleans()):
        role = draw(st.sampled_from(["system", "developer"]))
        items.append({"role": role, "content": draw(TEXT)})
    for _ in range(draw(st.integers(1, 4))):
        items += draw(st.lists(responses_user(), min_size=1, max_size=2))
        while True:
            calls: list[dict[str, Any]] = []
            start = len(items)
            if draw(st.booleans()):
                summary = [{"type": "summary_text", "text": draw(TEXT)}]
                items.append(
                    {
                        "type": "reasoning",
                        "id": ids("rs_"),
                        "summary": summary,
                        "encrypted_content": draw(SMALL),
                    }
                )
            if draw(st.integers(0, 3)) == 0:
                action = {"type": "search", "query": draw(TEXT)}
                items.append(
                    {
                        "type": "web_search_call",
                        "id": ids("ws_"),
                        "status": "completed",
                        "action": action,
                    }
                )
            if draw(st.booleans()):
                items.append(draw(responses_assistant_message(ids)))
            if draw(st.booleans()):
                for _ in range(draw(st.integers(1, 3))):
                    call = {
                        "type": "function_call",
                        "call_id": ids("call_"),
                        "name": draw(SMALL),
                        "arguments": _arguments(draw, draw(INPUT)),
                    }
                    if draw(st.booleans()):
                        call.update(id=ids("fc_"), status="completed")
                    calls.append(call)
                items += calls
            if all(it.get("type") == "reasoning" for it in items[start:]):
                items.append(draw(responses_assistant_message(ids)))
            for call in calls:
                output: Any = draw(TEXT)
                if draw(st.integers(0, 2)) == 0:
                    output = [{"type": "input_text", "text": draw(TEXT)}]
                items.append(
                    {"type": "function_call_output", "call_id": call["call_id"], "output": output}
                )
            if not calls or draw(st.booleans()):
                break
        if draw(st.integers(0, 3)) == 0:
            break
    return items


# --- the round trips ------------------------------------------------------------------------


@pytest.mark.slow
@SETTINGS
@given(anthropic_conversations(), st.none() | TEXT)
def test_anthropic_messages_round_trip(messages: list[dict[str, Any]], system: str | None) -> None:
    for message in messages:
        sdk_valid("anthropic.message", message)
    body: dict[str, Any] = {"messages": messages}
    if system is not None:
        body = {"system": system, **body}
    store = MemoryStore()
    bundle = compiled(from_anthropic(body, artifacts=store), store)
    request = to_anthropic(bundle, cache=None, thinking="all", artifacts=store)
    assert request == body
    check_anthropic(request)


@pytest.mark.slow
@SETTINGS
@given(chat_conversations())
def test_openai_chat_round_trip(messages: list[dict[str, Any]]) -> None:
    check_openai(messages)
    store = MemoryStore()
    bundle = compiled(from_openai(messages, artifacts=store), store)
    rendered = to_openai(bundle, artifacts=store)
    assert rendered == messages
    check_openai(rendered)


@pytest.mark.slow
@SETTINGS
@given(responses_conversations())
def test_openai_responses_round_trip(items: list[dict[str, Any]]) -> None:
    check_responses(items)
    store = MemoryStore()
    bundle = compiled(from_openai_responses(items, artifacts=store), store)
    rendered = to_openai_responses(bundle, thinking="all", artifacts=store)
    assert rendered == items
    check_responses(rendered)


# --- the turn in flight (the default) -------------------------------------------------------


def _human_anthropic(message: dict[str, Any]) -> bool:
    content = message["content"]
    if message["role"] != "user":
        return False
    return isinstance(content, str) or any(b["type"] != "tool_result" for b in content)


@pytest.mark.slow
@SETTINGS
@given(anthropic_conversations())
def test_anthropic_sends_back_only_the_thinking_of_the_turn_in_flight(
    messages: list[dict[str, Any]],
) -> None:
    """By default the signed thinking of the assistant turns after the last user message that
    holds more than tool results goes back unchanged; older thinking is dropped."""
    store = MemoryStore()
    bundle = compiled(from_anthropic(messages, artifacts=store), store)
    request = to_anthropic(bundle, cache=None, artifacts=store)
    last_human = max(i for i, m in enumerate(messages) if _human_anthropic(m))
    thinking = ("thinking", "redacted_thinking")
    expected = []
    for i, message in enumerate(messages):
        if i < last_human and isinstance(message["content"], list):
            kept = [b for b in message["content"] if b["type"] not in thinking]
            message = {**message, "content": kept}
        expected.append(message)
    assert request["messages"] == expected
    check_anthropic(request)


def _side(item: dict[str, Any]) -> str:
    if item.get("role") in ("system", "developer"):
        return "system"
    if item.get("role") == "user" or item.get("type") == "function_call_output":
        return "caller"
    return "model"


@pytest.mark.slow
@SETTINGS
@given(responses_conversations())
def test_responses_sends_back_only_the_reasoning_of_the_turn_in_flight(
    items: list[dict[str, Any]],
) -> None:
    """By default the reasoning items after the last user message go back unchanged, with the
    ids of the items they belong to; an older reasoning item is dropped, and so are the ids of
    the messages and function calls the model wrote with it (the API would look for it): such
    a message comes back as its text. Items of the API's own stay whole."""
    store = MemoryStore()
    bundle = compiled(from_openai_responses(items, artifacts=store), store)
    rendered = to_openai_responses(bundle, artifacts=store)
    last_human = max(i for i, item in enumerate(items) if item.get("role") == "user")
    expected: list[dict[str, Any]] = []
    group: list[dict[str, Any]] = []

    def flush() -> None:
        if any(it.get("type") == "reasoning" for it in group):
            for it in group:
                if it.get("type") == "reasoning":
                    continue
                if it.get("type") != "function_call" and it.get("role") != "assistant":
                    expected.append(it)  # an item of the API's own: whole
                    continue
                rest = {k: v for k, v in it.items() if k not in ("id", "status")}
                if it.get("role") == "assistant" and "id" in it:
                    texts = [p["text"] for p in it["content"]]
                    rest = {**rest, "content": "\n\n".join(texts)}
                expected.append(rest)
        else:
            expected.extend(group)
        group.clear()

    for i, item in enumerate(items):
        if i < last_human and _side(item) == "model":
            group.append(item)
            continue
        flush()
        expected.append(item)
    flush()
    assert rendered == expected
    check_responses(rendered)


# --- what does not come back ----------------------------------------------------------------

BIG = "line of output\n" * 2000  # 30,000 bytes, over the 16 KiB default


def _render_all(frames: list[fr.MessageAppended], store: MemoryStore) -> ContextBundle:
    return compiled(frames, store)


def test_an_output_over_the_threshold_comes_back_as_its_preview_and_a_note() -> None:
    call = {"type": "tool_use", "id": "t1", "name": "cat", "input": {"path": "big.log"}}
    messages = [
        {"role": "user", "content": "read it"},
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": BIG}]},
    ]
    store = MemoryStore()
    frames = from_anthropic(messages, artifacts=store)
    result = frames[2].content[0]
    assert isinstance(result, fr.ToolResultBlock) and result.artifact_id is not None
    assert store.artifacts.get(result.artifact_id) == BIG.encode()
    assert (result.size, result.preview) == (len(BIG), BIG[:2000])
    request = to_anthropic(_render_all(frames, store), cache=None)
    content = request["messages"][2]["content"][0]["content"]
    assert content.startswith(BIG[:2000]) and content != BIG
    assert f"{len(BIG)} bytes in all" in content and result.artifact_id in content

    chat = [
        {"role": "user", "content": "read it"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "cat", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": BIG}]},
    ]
    store = MemoryStore()
    rendered = to_openai(_render_all(from_openai(chat, artifacts=store), store))
    assert (
        rendered[2]["content"].startswith(BIG[:2000]) and "bytes in all" in rendered[2]["content"]
    )

    items = [
        {"role": "user", "content": "read it"},
        {"type": "function_call", "call_id": "c1", "name": "cat", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": BIG},
    ]
    store = MemoryStore()
    frames = from_openai_responses(items, artifacts=store, max_inline_bytes=100, preview_chars=10)
    rendered = to_openai_responses(_render_all(frames, store))
    assert rendered[2]["output"].startswith(BIG[:10] + "\n[output shortened")
    # without an artifact store everything stays inline, and comes back whole
    store = MemoryStore()
    assert to_openai_responses(_render_all(from_openai_responses(items), store)) == items


def test_cache_control_is_not_kept_the_renderer_places_its_own() -> None:
    marked = {"type": "ephemeral"}
    body = {
        "system": [{"type": "text", "text": "Be brief.", "cache_control": marked}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": marked}]},
        ],
    }
    store = MemoryStore()
    frames = from_anthropic(body)
    assert "cache_control" not in json.dumps([msgspec.to_builtins(f) for f in frames])
    request = to_anthropic(_render_all(frames, store))
    assert request["system"] == [{"type": "text", "text": "Be brief.", "cache_control": marked}]
    assert request["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert to_anthropic(_render_all(frames, MemoryStore()), cache=None)["system"] == "Be brief."


def test_anthropic_shapes_that_come_back_in_another_form() -> None:
    body = {
        "system": [{"type": "text", "text": "One."}, {"type": "text", "text": "Two."}],
        "messages": [
            {"role": "system", "content": "Three."},  # a system message: joins the system text
            {
                "role": "user",
                "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "  "}],
            },
            {"role": "user", "content": "b"},  # consecutive messages of one role: one message
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "x", "name": "f", "input": {}},
                    {"type": "tool_use", "id": "y", "name": "f", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "while you work"},
                    {"type": "tool_result", "tool_use_id": "y", "content": "Y"},
                    {"type": "tool_result", "tool_use_id": "x", "content": "X"},
                ],
            },
            {"role": "assistant", "content": "Done.  "},  # a final text's trailing whitespace
        ],
    }
    request = to_anthropic(_render_all(from_anthropic(body), MemoryStore()), cache=None)
    assert request == {
        "system": "One.\n\nTwo.\n\nThree.",
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "x", "name": "f", "input": {}},
                    {"type": "tool_use", "id": "y", "name": "f", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [  # results first, in call order
                    {"type": "tool_result", "tool_use_id": "x", "content": "X"},
                    {"type": "tool_result", "tool_use_id": "y", "content": "Y"},
                    {"type": "text", "text": "while you work"},
                ],
            },
            {"role": "assistant", "content": "Done."},
        ],
    }


def test_reused_ids_come_back_renamed_for_every_provider() -> None:
    messages: list[dict[str, Any]] = []
    chat: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    items: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    messages.append({"role": "user", "content": "go"})
    for n in (1, 2):
        messages += [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "call_0", "name": "f", "input": {"n": n}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "call_0", "content": f"r{n}"}],
            },
        ]
        function = {"name": "f", "arguments": json.dumps({"n": n})}
        chat += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "call_0", "type": "function", "function": function}],
            },
            {"role": "tool", "tool_call_id": "call_0", "content": f"r{n}"},
        ]
        items += [
            {
                "type": "function_call",
                "call_id": "call_0",
                "name": "f",
                "arguments": json.dumps({"n": n}),
            },
            {"type": "function_call_output", "call_id": "call_0", "output": f"r{n}"},
        ]
    request = to_anthropic(_render_all(from_anthropic(messages), MemoryStore()), cache=None)
    ids = [
        b.get("id") or b.get("tool_use_id")
        for m in request["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
    ]
    assert ids == ["call_0", "call_0", "call_0_2", "call_0_2"]
    rendered = to_openai(_render_all(from_openai(chat), MemoryStore()))
    assert [m.get("tool_call_id") for m in rendered if m["role"] == "tool"] == [
        "call_0",
        "call_0_2",
    ]
    assert rendered[3]["tool_calls"][0]["id"] == "call_0_2"
    out = to_openai_responses(_render_all(from_openai_responses(items), MemoryStore()))
    assert [i.get("call_id") for i in out[1:]] == ["call_0", "call_0", "call_0_2", "call_0_2"]


def test_openai_shapes_that_come_back_in_another_form() -> None:
    chat = [
        {"role": "developer", "content": "One."},
        {"role": "system", "content": "Two."},  # several: one message, the first one's role
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": "Hello",
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "assistant", "content": "and more"},  # calls must come last: one message
        {"role": "tool", "tool_call_id": "c", "content": "r"},
    ]
    rendered = to_openai(_render_all(from_openai(chat), MemoryStore()))
    assert rendered == [
        {"role": "developer", "content": "One.\n\nTwo."},
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "Hello"}, {"type": "text", "text": "and more"}],
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c", "content": "r"},
    ]
    check_openai(rendered)

    body = {"instructions": "Be brief.", "input": "hi"}
    assert to_openai_responses(_render_all(from_openai_responses(body), MemoryStore())) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
    ]


def test_a_chat_response_comes_back_as_a_request_can_send_it() -> None:
    completion = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {
                    "role": "assistant",
                    "content": "See example.com",
                    "annotations": [
                        {
                            "type": "url_citation",
                            "url_citation": {
                                "url": "https://example.com",
                                "title": "E",
                                "start_index": 4,
                                "end_index": 15,
                            },
                        }
                    ],
                    "audio": {"id": "audio_1", "data": "AAAA", "expires_at": 1, "transcript": "t"},
                },
            }
        ],
    }
    frames = from_openai([{"role": "user", "content": "where?"}]) + from_openai(completion)
    assert frames[1].source == fr.SourceRef(system="openai.chat", key="chatcmpl-1")
    rendered = to_openai(_render_all(frames, MemoryStore()))
    assert rendered[1] == {
        "role": "assistant",
        "content": "See example.com",
        "audio": {"id": "audio_1"},
    }
    check_openai(rendered)
