"""Secret redaction of the shapes a provider or a runtime brings (continuity.redaction): tool
results given as parts, provider blocks kept whole, the layout hints a converter keeps in a
message's ``meta``, records and retractions. Secrets never reach the log through them; the
payloads a provider needs back byte for byte (signatures, encrypted content, base64) stay as
they were; the count counts each secret once; and gating a JSON value's strings all at once
finds exactly what searching them one by one finds.

The frames are made by the real converters from provider shapes, appended through a store with
a redactor, compiled and rendered back: what a provider would be sent holds no secret either.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from continuity import frames as fr
from continuity.context.compiler import compile_context
from continuity.context.convert import from_anthropic, from_openai, from_openai_responses
from continuity.context.records import latest_record, record
from continuity.context.render import to_anthropic, to_openai, to_openai_responses
from continuity.redaction import (
    MARKER_PREFIX,
    OPAQUE_KEYS,
    RedactionRule,
    Redactor,
    opaque,
    redaction_count,
)
from continuity.store.base import BaseStore, Thread
from continuity.store.jsonl import Store
from continuity.store.memory import MemoryStore
from tests.redaction.test_redaction import (
    ANTHROPIC,
    AWS_KEY_ID,
    BASE64,
    GITHUB_PAT,
    OPENAI_PROJECT,
    PRIVATE_KEY,
    fake,
    marker,
)

EVERYTHING = fr.Limits(budget_tokens=None, recent_messages=10**6)

# Cryptographic payloads, each made to hold a secret-shaped run (an AWS key id between two base64
# characters, which the rules would find in a text): redaction must leave them alone anyway.
SIGNATURE = "EqQBCkgIARABGAIiQL" + fake("sig", 60, BASE64) + "/" + AWS_KEY_ID + "/" + "Ag=="
ENCRYPTED = "gAAAAABo" + fake("enc", 80, BASE64) + "+" + AWS_KEY_ID + "+" + fake("enc2", 40, BASE64)
REDACTED_THINKING = "EmwKAhgB" + fake("red", 50, BASE64) + "/" + AWS_KEY_ID + "/" + "xyz="
INDEX = "Eo8BCioIAhgB" + fake("idx", 30, BASE64) + "/" + AWS_KEY_ID + "/" + "w=="
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4).decode()
BINARY = fake("bin", 2000, BASE64) + "/" + AWS_KEY_ID + "/" + fake("bin2", 100, BASE64)


def test_the_payloads_hold_what_a_rule_would_find_in_a_text() -> None:
    """The premise of the tests below: scanned as text, every payload would be changed."""
    redactor = Redactor()
    for payload in (SIGNATURE, ENCRYPTED, REDACTED_THINKING, INDEX, BINARY):
        assert redactor.redact_text(payload)[1] >= 1


def _stores(tmp_path: Path) -> list[BaseStore]:
    return [
        Store(tmp_path / "s", create=True, durable=False, redactor=Redactor()),
        MemoryStore(redactor=Redactor()),
    ]


def _log(thread: Thread) -> bytes:
    return b"\n".join(line for _, line in thread.read_lines())


def _rendered(thread: Thread, render: Any, **options: Any) -> str:
    bundle = compile_context(thread, limits=EVERYTHING, log=False).bundle
    return json.dumps(render(bundle, **options), ensure_ascii=False)


# --- Anthropic ------------------------------------------------------------------------------


def _anthropic_turns() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "Fetch the config and check the key."},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "thinking",
                    "thinking": f"They pasted {GITHUB_PAT}.",
                    "signature": SIGNATURE,
                },
                {"type": "redacted_thinking", "data": REDACTED_THINKING},
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_01",
                    "name": "web_fetch",
                    "input": {"url": f"https://deploy:{fake('pw', 14)}@example.com/cfg"},
                },
                {
                    "type": "web_fetch_tool_result",
                    "tool_use_id": "srvtoolu_01",
                    "content": {
                        "type": "web_fetch_result",
                        "url": "https://example.com/cfg",
                        "content": {
                            "type": "document",
                            "source": {
                                "type": "text",
                                "media_type": "text/plain",
                                "data": f"AWS_ACCESS_KEY_ID={AWS_KEY_ID}\nregion=eu-west-1",
                            },
                            "title": "cfg",
                        },
                    },
                },
                {
                    "type": "web_search_tool_result",
                    "tool_use_id": "srvtoolu_02",
                    "content": [
                        {
                            "type": "web_search_result",
                            "url": "https://example.com/leak",
                            "title": f"Leaked {OPENAI_PROJECT}",
                            "encrypted_content": ENCRYPTED,
                            "page_age": "2 days ago",
                        }
                    ],
                },
                {
                    "type": "text",
                    "text": "The page quotes a key.",
                    "citations": [
                        {
                            "type": "web_search_result_location",
                            "url": "https://example.com/leak",
                            "title": "Leak",
                            "encrypted_index": INDEX,
                            "cited_text": f"the key is {OPENAI_PROJECT}",
                        }
                    ],
                },
                {"type": "tool_use", "id": "toolu_01", "name": "Bash", "input": {"command": "env"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01",
                    "content": [
                        {"type": "text", "text": f"ANTHROPIC_API_KEY={ANTHROPIC}\nHOME=/root"},
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                        },
                        {
                            "type": "search_result",
                            "source": "https://example.com/doc",
                            "title": "doc",
                            "content": [{"type": "text", "text": f"token {GITHUB_PAT}"}],
                        },
                    ],
                }
            ],
        },
    ]


def test_anthropic_shapes_reach_neither_the_log_nor_the_request(tmp_path: Path) -> None:
    for store in _stores(tmp_path):
        thread = store.thread("anthropic")
        thread.append(from_anthropic(_anthropic_turns(), artifacts=thread))
        log = _log(thread)
        request = _rendered(thread, to_anthropic, thinking="all")
        for secret in (GITHUB_PAT, AWS_KEY_ID, OPENAI_PROJECT, ANTHROPIC, fake("pw", 14)):
            if secret == AWS_KEY_ID:  # it is inside the payloads, on purpose: count it elsewhere
                assert log.count(secret.encode()) == 4
                assert request.count(secret) == 4
                continue
            assert secret.encode() not in log and secret not in request
        # every payload came through byte for byte, and goes back to the provider so
        for payload in (SIGNATURE, REDACTED_THINKING, ENCRYPTED, INDEX):
            assert payload.encode() in log and payload in request

        _, assistant, results = (f for f in thread.read(from_seq=1))
        assert isinstance(assistant, fr.MessageAppended) and isinstance(results, fr.MessageAppended)
        thinking, hidden, use, fetched, searched, text, _call = assistant.content
        assert isinstance(thinking, fr.ThinkingBlock) and thinking.signature == SIGNATURE
        assert thinking.text == f"They pasted {marker('github-token')}."
        assert isinstance(hidden, fr.ThinkingBlock) and hidden.data == REDACTED_THINKING
        assert isinstance(use, fr.ProviderBlock) and use.data["id"] == "srvtoolu_01"
        assert use.data["input"]["url"] == (
            f"https://deploy:{marker('url-password')}@example.com/cfg"
        )
        assert isinstance(fetched, fr.ProviderBlock)
        source = fetched.data["content"]["content"]["source"]
        assert (
            source["data"] == f"AWS_ACCESS_KEY_ID={marker('aws-access-key-id')}\nregion=eu-west-1"
        )
        assert marker("aws-access-key-id") in fetched.text
        assert isinstance(searched, fr.ProviderBlock)
        assert searched.data["content"][0]["encrypted_content"] == ENCRYPTED
        assert searched.data["content"][0]["title"] == f"Leaked {marker('openai-api-key')}"
        assert isinstance(text, fr.TextBlock)
        layout = json.loads(assistant.meta["anthropic.layout"])
        citation = layout[0][1]["_b"][5]["citations"][0]
        assert citation["encrypted_index"] == INDEX
        assert citation["cited_text"] == f"the key is {marker('openai-api-key')}"
        # thinking 1, web fetch input 1, fetched document 1, search result 1; the citation
        # repeats what the blocks hold, and a block's text repeats its data: 4 in all
        assert redaction_count(assistant) == 4

        (result,) = results.content
        assert isinstance(result, fr.ToolResultBlock) and result.artifact_id is None
        first, image, told = result.parts
        assert isinstance(first, fr.TextBlock)
        assert first.text == f"ANTHROPIC_API_KEY={marker('anthropic-api-key')}\nHOME=/root"
        assert isinstance(image, fr.ImageBlock) and image.artifact_id is not None
        assert isinstance(told, fr.TextBlock) and told.text.endswith(marker("github-token"))
        raw = json.loads(results.meta["anthropic.layout"])[0][1]["_b"][0]["_p"][2]["_raw"]
        assert raw["content"][0]["text"] == f"token {marker('github-token')}"
        assert redaction_count(results) == 2  # the part kept whole repeats the text that tells it


# --- OpenAI Chat Completions and Responses --------------------------------------------------


def test_openai_chat_raw_arguments_lose_the_secret_the_input_lost(tmp_path: Path) -> None:
    token = fake("chat-token", 24)
    arguments = '{\n  "url": "https://api.example.com",\n  "api_token": "' + token + '"\n}'
    messages = [
        {"role": "developer", "content": f"Deploy with {GITHUB_PAT}."},
        {"role": "user", "content": "deploy", "name": "ops"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "deploy", "arguments": arguments},
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": [{"type": "text", "text": f"deployed; key {AWS_KEY_ID}"}],
        },
    ]
    for store in _stores(tmp_path):
        thread = store.thread("chat")
        thread.append(from_openai(messages))
        log = _log(thread)
        request = _rendered(thread, to_openai)
        for secret in (GITHUB_PAT, token, AWS_KEY_ID):
            assert secret.encode() not in log and secret not in request
        calls = [f for f in thread.read(from_seq=1) if isinstance(f, fr.MessageAppended)][2]
        (use,) = calls.content
        assert isinstance(use, fr.ToolUseBlock) and use.input["api_token"] == marker(
            "secret-assignment"
        )
        assert marker("secret-assignment") in calls.meta["openai.chat.layout"]
        assert redaction_count(calls) == 1  # the raw arguments repeat the input
        rendered = json.loads(request)
        assert rendered[0]["role"] == "developer"
        assert json.loads(rendered[2]["tool_calls"][0]["function"]["arguments"])["api_token"] == (
            marker("secret-assignment")
        )


def test_openai_responses_reasoning_keeps_its_encrypted_content(tmp_path: Path) -> None:
    items = [
        {"role": "user", "content": [{"type": "input_text", "text": "rotate the key"}]},
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": f"The old key is {GITHUB_PAT}."}],
            "encrypted_content": ENCRYPTED,
        },
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "rotate",
            "arguments": '{"old": "' + GITHUB_PAT + '"}',
            "status": "completed",
        },
        {
            "type": "function_call_output",
            "call_id": "call_1",
            "output": [{"type": "input_text", "text": f"new key {ANTHROPIC}"}],
        },
        {
            "type": "image_generation_call",
            "id": "ig_1",
            "status": "completed",
            "result": BINARY,
        },
    ]
    for store in _stores(tmp_path):
        thread = store.thread("responses")
        thread.append(from_openai_responses(items))
        log = _log(thread)
        request = _rendered(thread, to_openai_responses, thinking="all")
        for secret in (GITHUB_PAT, ANTHROPIC):
            assert secret.encode() not in log and secret not in request
        for payload in (ENCRYPTED, BINARY):  # an image's base64 is bytes, not text
            assert payload.encode() in log and payload in request
        frames = [f for f in thread.read(from_seq=1) if isinstance(f, fr.MessageAppended)]
        reasoning = next(b for f in frames for b in f.content if isinstance(b, fr.ProviderBlock))
        assert reasoning.data["encrypted_content"] == ENCRYPTED
        assert reasoning.data["summary"][0]["text"] == f"The old key is {marker('github-token')}."
        assert reasoning.data["id"] == "rs_1"


# --- records and retractions ----------------------------------------------------------------


def test_a_record_is_stored_redacted_and_its_payloads_kept(tmp_path: Path) -> None:
    state: dict[str, Any] = {
        "messages": [
            {
                "type": "ai",
                "content": [
                    {"type": "thinking", "thinking": f"use {GITHUB_PAT}", "signature": SIGNATURE},
                    {"type": "redacted_thinking", "data": REDACTED_THINKING},
                ],
            },
            {"type": "tool", "content": PRIVATE_KEY},
        ],
        "config": {"OPENAI_API_KEY": OPENAI_PROJECT, "retries": 3, "api_token": fake("rt", 20)},
        "env": ["HOME=/root", f"DB_PASSWORD={fake('db', 16)}"],
        "blob": BINARY,
    }
    for store in _stores(tmp_path):
        thread = store.thread("runtime")
        seq = record(thread, "myruntime.state", state, key="step-1")
        log = _log(thread)
        for secret in (GITHUB_PAT, OPENAI_PROJECT, fake("rt", 20), fake("db", 16), "BEGIN OPENSSH"):
            assert secret.encode() not in log
        found = latest_record(thread, "myruntime.state", "step-1")
        assert found is not None and found.seq == seq
        data = found.data
        thought, hidden = data["messages"][0]["content"]
        assert thought == {
            "type": "thinking",
            "thinking": f"use {marker('github-token')}",
            "signature": SIGNATURE,
        }
        assert hidden == {"type": "redacted_thinking", "data": REDACTED_THINKING}
        assert data["messages"][1]["content"] == marker("private-key")
        assert data["config"] == {
            "OPENAI_API_KEY": marker("secret-assignment"),  # named by its key: whole
            "retries": 3,
            "api_token": marker("secret-assignment"),
        }
        assert data["env"] == ["HOME=/root", f"DB_PASSWORD={marker('secret-assignment')}"]
        assert data["blob"] == BINARY
        assert (
            state["config"]["OPENAI_API_KEY"] == OPENAI_PROJECT
        )  # the caller's value is not touched


def test_a_record_given_as_a_struct_or_a_tuple_is_redacted_too() -> None:
    class State(msgspec.Struct):
        token: str
        notes: tuple[str, ...]

    frame = fr.RecordAppended(
        kind="x.state", data={"s": State(token=fake("st", 20), notes=("ok", f"k {GITHUB_PAT}"))}
    )
    out = Redactor()(frame)
    assert isinstance(out, fr.RecordAppended)
    assert out.data == {
        "s": {"token": marker("secret-assignment"), "notes": ["ok", f"k {marker('github-token')}"]}
    }
    clean = fr.RecordAppended(kind="x.state", data={"s": State(token="none", notes=("ok",))})
    assert Redactor()(clean) is clean


def test_a_retraction_reason_is_redacted(tmp_path: Path) -> None:
    frame = fr.MessagesRetracted(
        spans=[fr.SeqSpan(from_seq=1, to_seq=1)], reason=f"pasted {GITHUB_PAT} by mistake"
    )
    out = Redactor()(frame)
    assert isinstance(out, fr.MessagesRetracted)
    assert out.reason == f"pasted {marker('github-token')} by mistake"
    assert out.spans == frame.spans


# --- what is left alone, and counted once ----------------------------------------------------


def test_frames_of_the_new_shapes_without_secrets_are_returned_as_is() -> None:
    redactor = Redactor()
    frames: list[fr.Frame] = [
        *from_anthropic(_clean_anthropic()),
        *from_openai_responses(
            [
                {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": ENCRYPTED},
                {"type": "function_call", "call_id": "c", "name": "f", "arguments": '{ "a": 1 }'},
            ]
        ),
        fr.message(
            "user",
            content=[
                fr.ToolResultBlock(
                    tool_use_id="t",
                    parts=[fr.TextBlock(text="3 passed"), fr.ImageBlock(media_type="image/png")],
                )
            ],
        ),
        fr.RecordAppended(kind="x.state", data={"step": 3, "signature": SIGNATURE, "blob": BINARY}),
        fr.RecordAppended(kind="x.state", artifact_id="a" * 64, size=10),
        fr.MessagesRetracted(spans=[fr.SeqSpan(from_seq=1, to_seq=2)], reason="pop_item"),
    ]
    assert any(f.meta for f in frames if isinstance(f, fr.MessageAppended))  # layouts are there
    for frame in frames:
        assert redactor(frame) is frame


def _clean_anthropic() -> list[dict[str, Any]]:
    return [
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "plan", "signature": SIGNATURE},
                {"type": "redacted_thinking", "data": REDACTED_THINKING},
                {
                    "type": "text",
                    "text": "See the docs.",
                    "citations": [
                        {
                            "type": "web_search_result_location",
                            "url": "https://example.com",
                            "title": "Docs",
                            "encrypted_index": INDEX,
                            "cited_text": "retries back off",
                        }
                    ],
                },
            ],
        }
    ]


def test_redacting_again_changes_nothing(tmp_path: Path) -> None:
    redactor = Redactor()
    for frame in from_anthropic(_anthropic_turns(), artifacts=MemoryStore()):
        once = redactor(frame)
        assert redactor(once) is once


def test_counts_add_up_over_blocks_layouts_and_a_previous_count() -> None:
    block = fr.ProviderBlock(
        provider="anthropic",
        kind="web_fetch_tool_result",
        data={"content": {"text": f"{GITHUB_PAT} and {AWS_KEY_ID}"}},
        text=f"{GITHUB_PAT} and {AWS_KEY_ID}",
    )
    layout = json.dumps([[1, {"_k": "msg", "name": f"{ANTHROPIC}"}]])
    frame = fr.MessageAppended(
        role="user",
        content=[block],
        meta={"redacted": "1", "anthropic.layout": layout, "openai.role": "developer"},
    )
    out = Redactor()(frame)
    assert isinstance(out, fr.MessageAppended)
    # the block holds two (its text repeats them) and the layout one, which counts only as far
    # as it holds more than the blocks: two more than the one it had
    assert out.meta["redacted"] == "3" and out.meta["openai.role"] == "developer"
    assert json.loads(out.meta["anthropic.layout"]) == [
        [1, {"_k": "msg", "name": marker("anthropic-api-key")}]
    ]
    only_layout = fr.MessageAppended(
        role="user", content=[fr.TextBlock(text="hi")], meta={"openai.chat.layout": layout}
    )
    out = Redactor()(only_layout)
    assert isinstance(out, fr.MessageAppended)
    assert out.content == only_layout.content and out.meta["redacted"] == "1"
    assert out.tokens == only_layout.tokens  # the content did not change


def test_a_layout_that_is_not_json_is_redacted_as_text() -> None:
    frame = fr.MessageAppended(
        role="user", content=[fr.TextBlock(text="hi")], meta={"anthropic.layout": f"[{GITHUB_PAT}"}
    )
    out = Redactor()(frame)
    assert isinstance(out, fr.MessageAppended)
    assert out.meta["anthropic.layout"] == f"[{marker('github-token')}"


def test_a_tool_result_size_follows_its_parts_when_it_was_theirs() -> None:
    text = f"key {GITHUB_PAT}"
    sized = fr.ToolResultBlock(
        tool_use_id="t", parts=[fr.TextBlock(text=text)], size=len(text.encode())
    )
    unsized = fr.ToolResultBlock(tool_use_id="t", parts=[fr.TextBlock(text=text)], size=0)
    blocks, n = Redactor().redact_blocks([sized, unsized])
    assert n == 2
    first, second = blocks
    assert isinstance(first, fr.ToolResultBlock) and isinstance(second, fr.ToolResultBlock)
    assert first.size == len(f"key {marker('github-token')}") and second.size == 0


def test_opaque_names_the_payloads_and_nothing_else() -> None:
    for key in OPAQUE_KEYS:
        assert opaque(key, f"x {GITHUB_PAT}", {})
    assert opaque("data", REDACTED_THINKING, {"type": "redacted_thinking"})
    assert not opaque("data", f"x {GITHUB_PAT}", {"type": "text"})
    assert not opaque("data", f"x {GITHUB_PAT}", {})
    assert opaque("image_url", f"data:image/png;base64,{PNG}", {})
    assert opaque("file_data", f"data:application/pdf;base64,{PNG}", {})
    assert not opaque("url", f"data:text/plain,{GITHUB_PAT}", {})  # text, not base64
    assert opaque("result", BINARY, {})
    assert not opaque("result", BINARY[:1023], {})  # short: searched, it may be a key
    assert not opaque("text", "a" * 2000 + " " + GITHUB_PAT, {})
    assert not opaque("text", "-" + BINARY, {})  # not base64


# --- gating all strings at once finds what searching them one by one finds -------------------


def _one_by_one(redactor: Redactor, value: Any) -> tuple[Any, int]:
    """:meth:`Redactor.redact_json` as its docstring says it behaves, without the gate."""
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        total = 0
        for k, v in value.items():
            if isinstance(v, str):
                if k in OPAQUE_KEYS:
                    new, n = v, 0
                elif isinstance(k, str) and redactor._secret_field(k, v):
                    new, n = f"{MARKER_PREFIX}secret-assignment]", 1
                elif opaque(k, v, value):
                    new, n = v, 0
                else:
                    new, n = redactor.redact_text(v)
            else:
                new, n = _one_by_one(redactor, v)
            out[k] = new
            total += n
        return out, total
    if isinstance(value, list):
        pairs = [_one_by_one(redactor, v) for v in value]
        return [v for v, _ in pairs], sum(n for _, n in pairs)
    if isinstance(value, str):
        return (value, 0) if opaque(None, value, {}) else redactor.redact_text(value)
    return value, 0


_PIECES = [
    "plain words",
    "export ",
    "API_KEY=",
    "token: ",
    "password",
    "Bearer ",
    "https://user:",
    "@host/x",
    "curl -u me:",
    GITHUB_PAT,
    AWS_KEY_ID,
    ANTHROPIC[:30],
    ANTHROPIC,
    fake("v", 12),
    "acme_123456",
    "-----BEGIN RSA PRIVATE KEY-----\n",
    fake("k", 64, BASE64),
    "\n",
    " ",
    "sk-",
    "ghp_",
]
_STRINGS = st.lists(st.sampled_from(_PIECES), max_size=5).map("".join)
_KEYS = st.sampled_from(
    ["text", "data", "type", "signature", "encrypted_content", "password", "api_key", "id", "x"]
)
_JSON = st.recursive(
    st.none() | st.integers() | _STRINGS | st.sampled_from(["redacted_thinking", BINARY]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS, inner, max_size=4),
    max_leaves=12,
)
_REDACTORS = [
    Redactor(),
    # a rule without keywords whose pattern is anchored: it can match a string alone and not
    # the strings joined, so it must not be gated by the joined text
    Redactor(extra=[RedactionRule("acme-token", r"^acme_[0-9]{6}$")]),
    Redactor(extra=[RedactionRule("acme-any", r"acme_[0-9]{6}")]),
]


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=_JSON, which=st.integers(0, len(_REDACTORS) - 1))
def test_gated_redaction_equals_searching_string_by_string(value: Any, which: int) -> None:
    redactor = _REDACTORS[which]
    got, n = redactor.redact_json(value)
    want, m = _one_by_one(redactor, value)
    assert (got, n) == (want, m)
    if not n:
        assert got is value


def test_an_anchored_rule_without_keywords_still_finds_a_whole_string() -> None:
    redactor = _REDACTORS[1]
    value = {"a": "first", "b": ["acme_123456", "acme_123456 not whole"]}
    assert redactor.redact_json(value) == (
        {"a": "first", "b": [marker("acme-token"), "acme_123456 not whole"]},
        1,
    )


def test_a_long_base64_value_under_a_secret_name_goes_whole() -> None:
    # base64 of a whole credentials file, a registry's login password: over 1,024 characters
    # of base64 is data elsewhere, not after a name that says it is a secret (issue 40)
    long = fake("long-secret", 3000, BASE64)
    got, n = Redactor().redact_json({"password": long, "data": long, "registry": "r.io"})
    want = {"password": marker("secret-assignment"), "data": long, "registry": "r.io"}
    assert (got, n) == (want, 1)


@pytest.mark.parametrize("value", [None, 3, 2.5, True, "", [], {}])
def test_scalars_and_empties_come_back_as_they_are(value: Any) -> None:
    got, n = Redactor().redact_json(value)
    assert got is value and n == 0
