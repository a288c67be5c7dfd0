"""Provider shapes in (continuity.context.convert): every block kind, SDK objects, artifacts and
redaction, and an error naming the path of every bad field."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from continuity import frames as fr
from continuity.context.convert import (
    DEFAULT_MAX_INLINE_BYTES,
    DEFAULT_PREVIEW_CHARS,
    _provider_text,
    from_anthropic,
    from_openai,
    from_openai_responses,
)
from continuity.errors import BadFrame
from continuity.redaction import Redactor
from continuity.store.artifacts import MemoryArtifactStore
from continuity.store.memory import MemoryStore
from tests.support.narrow import narrow

PNG = b"\x89PNG\r\n\x1a\nfake"
PNG64 = base64.b64encode(PNG).decode()


def _layout(frame: fr.MessageAppended, provider: str) -> list[Any] | None:
    raw = frame.meta.get(f"{provider}.layout")
    return None if raw is None else json.loads(raw)


# --- Anthropic ------------------------------------------------------------------------------


def test_anthropic_request_body_every_block_kind() -> None:
    store = MemoryStore()
    body: dict[str, Any] = {
        "model": "claude-x",  # members other than system and messages are not messages
        "max_tokens": 10,
        "system": "Be brief.",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is in it?"},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": PNG64},
                    },
                    {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}},
                    {
                        "type": "document",
                        "source": {"type": "text", "media_type": "text/plain", "data": "doc"},
                    },
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "Let me look.", "signature": "sig"},
                    {"type": "redacted_thinking", "data": "opaque"},
                    {
                        "type": "server_tool_use",
                        "id": "srv1",
                        "name": "web_search",
                        "input": {"query": "q"},
                    },
                    {
                        "type": "web_search_tool_result",
                        "tool_use_id": "srv1",
                        "content": [
                            {
                                "type": "web_search_result",
                                "url": "https://r",
                                "title": "R",
                                "encrypted_content": "E",
                            }
                        ],
                    },
                    {"type": "tool_use", "id": "t1", "name": "zoom", "input": {"x": 1}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "is_error": True,
                        "content": [
                            {"type": "text", "text": "zoomed"},
                            {
                                "type": "image",
                                "source": {
                                    "type": "base64",
                                    "media_type": "image/png",
                                    "data": PNG64,
                                },
                            },
                        ],
                    },
                ],
            },
        ],
    }
    system, user, assistant, results = from_anthropic(body, artifacts=store)
    assert system.role == "system" and system.content == [fr.TextBlock(text="Be brief.")]
    text, image, by_url, document = user.content
    assert text == fr.TextBlock(text="What is in it?")
    assert isinstance(image, fr.ImageBlock) and image.media_type == "image/png"
    assert image.artifact_id is not None and store.artifacts.get(image.artifact_id) == PNG
    assert image.size == len(PNG)
    assert by_url == fr.ImageBlock(media_type="", url="https://x/y.png")
    assert isinstance(document, fr.ProviderBlock) and document.kind == "document"
    assert (document.provider, document.text) == ("anthropic", "doc")
    thinking, redacted, server, search, call = assistant.content
    assert thinking == fr.ThinkingBlock(text="Let me look.", signature="sig")
    assert redacted == fr.ThinkingBlock(text="", data="opaque")
    assert isinstance(server, fr.ProviderBlock) and server.data == body["messages"][1]["content"][2]
    assert server.text == 'web_search\n{"query":"q"}'
    assert isinstance(search, fr.ProviderBlock) and search.text == "https://r\nR"
    assert call == fr.ToolUseBlock(id="t1", name="zoom", input={"x": 1})
    (result,) = results.content
    assert isinstance(result, fr.ToolResultBlock) and result.is_error
    assert result.parts[0] == fr.TextBlock(text="zoomed")
    assert (
        isinstance(result.parts[1], fr.ImageBlock)
        and result.parts[1].artifact_id == image.artifact_id
    )
    assert all(f.tokens > 0 and f.message_id for f in (system, user, assistant, results))
    # nothing here that the canonical shape does not give back: no layouts
    assert [f.meta for f in (user, assistant, results)] == [{}, {}, {}]


def test_anthropic_members_no_block_holds_go_to_the_layout() -> None:
    citation = {
        "type": "char_location",
        "cited_text": "x",
        "document_index": 0,
        "start_char_index": 0,
        "end_char_index": 1,
    }
    (frame,) = from_anthropic(
        {
            "role": "assistant",
            "content": [
                {
                    "type": "text",
                    "text": "cited",
                    "citations": [citation],
                    "cache_control": {"type": "ephemeral"},
                },
                {
                    "type": "tool_use",
                    "id": "t",
                    "name": "n",
                    "input": {},
                    "caller": {"type": "direct"},
                },
            ],
        }
    )
    assert _layout(frame, "anthropic") == [
        [2, {"_k": "msg", "_b": [{"citations": [citation]}, {"caller": {"type": "direct"}}]}]
    ]
    (frame,) = from_anthropic({"role": "user", "content": "plain"})
    assert frame.content == [fr.TextBlock(text="plain")]
    assert _layout(frame, "anthropic") == [[1, {"_k": "msg", "_str": True}]]


def test_anthropic_tool_result_forms() -> None:
    def result(**given: Any) -> tuple[fr.ToolResultBlock, list[Any] | None]:
        block = {"type": "tool_result", "tool_use_id": "t", **given}
        (frame,) = from_anthropic({"role": "user", "content": [block]})
        assert isinstance(frame.content[0], fr.ToolResultBlock)
        return frame.content[0], _layout(frame, "anthropic")

    assert result(content="out") == (fr.ToolResultBlock(tool_use_id="t", content="out"), None)
    block, layout = result()
    assert block == fr.ToolResultBlock(tool_use_id="t")
    assert layout == [[1, {"_k": "msg", "_b": [{"_form": "none"}]}]]
    assert result(content="")[1] == [[1, {"_k": "msg", "_b": [{"_form": "str"}]}]]
    assert result(content=[])[1] == [[1, {"_k": "msg", "_b": [{"_form": "list"}]}]]
    assert result(content="x", is_error=False)[1] == [
        [1, {"_k": "msg", "_b": [{"is_error": False}]}]
    ]
    # a part of a kind the tool result has no block for: told as text, kept whole beside it
    found = {
        "type": "search_result",
        "source": "s",
        "title": "T",
        "content": [{"type": "text", "text": "c"}],
    }
    block, layout = result(content=[found])
    assert block.parts == [fr.TextBlock(text="[search_result] s\nT\nc")]
    assert layout == [[1, {"_k": "msg", "_b": [{"_p": [{"_raw": found}]}]}]]


def test_anthropic_response_and_sdk_objects() -> None:
    anthropic = pytest.importorskip("anthropic")
    message = anthropic.types.Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "content": [
                {"type": "thinking", "thinking": "t", "signature": "s"},
                {"type": "text", "text": "Hello", "citations": None},
                {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}},
            ],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    )
    (frame,) = from_anthropic(message)
    assert frame.role == "assistant"
    assert frame.source == fr.SourceRef(system="anthropic", key="msg_1")
    assert frame.content == [
        fr.ThinkingBlock(text="t", signature="s"),
        fr.TextBlock(text="Hello"),
        fr.ToolUseBlock(id="toolu_1", name="f", input={"a": 1}),
    ]
    # a list holding SDK objects and dicts alike
    frames = from_anthropic(
        [{"role": "user", "content": "hi"}, {"role": "assistant", "content": message.content}]
    )
    assert frames[1].content == frame.content


def test_anthropic_errors_name_the_path() -> None:
    def fails(value: Any, match: str, **kw: Any) -> None:
        with pytest.raises(BadFrame, match=match):
            from_anthropic(value, **kw)

    fails(
        {"messages": [{"role": "user", "content": "a"}, {"role": "tool", "content": "b"}]},
        r"from_anthropic: messages\[1\]\.role: expected 'user' or 'assistant', got 'tool'",
    )
    fails({"messages": [{"role": "user"}]}, r"messages\[0\]\.content: missing")
    fails(
        {"messages": [{"role": "user", "content": [{"text": "x"}]}]},
        r"messages\[0\]\.content\[0\]\.type: missing \(every content block needs a type\)",
    )
    fails(
        {"messages": [{"role": "user", "content": [{"type": 3}]}]},
        r"messages\[0\]\.content\[0\]\.type: expected a non-empty string, got int",
    )
    fails(
        {"messages": [{"role": "user", "content": ["hi"]}]},
        r"messages\[0\]\.content\[0\]: expected an object, got str",
    )
    fails(
        {"messages": [{"role": "user", "content": [{"type": "text"}]}]},
        r"messages\[0\]\.content\[0\]\.text: missing",
    )
    fails(
        {
            "messages": [
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "a", "name": "b", "input": "ls"}],
                }
            ]
        },
        r"messages\[0\]\.content\[0\]\.input: expected an object, got str",
    )
    fails(
        {
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "a", "content": 3}],
                }
            ]
        },
        r"messages\[0\]\.content\[0\]\.content: expected a string or a list, got int",
    )
    fails(
        {
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "a", "is_error": "yes"}],
                }
            ]
        },
        r"messages\[0\]\.content\[0\]\.is_error: expected true or false, got str",
    )
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": PNG64},
    }
    fails(
        [{"role": "user", "content": [image]}],
        r"\[0\]\.content\[0\]\.source\.data: an image given as base64 needs an artifact store",
    )
    bad = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "!!"}}
    fails(
        [{"role": "user", "content": [bad]}],
        r"\[0\]\.content\[0\]\.source\.data: not valid base64",
        artifacts=MemoryArtifactStore(),
    )
    fails({"messages": "hi"}, r"messages: expected a list, got str")
    fails(
        {"system": [{"type": "image"}], "messages": []},
        r"system\[0\]\.type: the system prompt holds text blocks",
    )
    fails(
        3,
        r"from_anthropic: expected a request body, a list of messages, a message or a "
        r"response, got int",
    )
    fails(
        {"type": "message", "role": "user", "content": []},
        r"role: a response's role is 'assistant'",
    )


# --- OpenAI Chat ----------------------------------------------------------------------------


def test_openai_chat_every_message_kind() -> None:
    store = MemoryStore()
    messages = [
        {"role": "developer", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Look"},
                {
                    "type": "image_url",
                    "image_url": {"url": f"data:image/png;base64,{PNG64}", "detail": "low"},
                },
                {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}},
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "g", "arguments": "not json"},
                },
                {"id": "c3", "type": "custom", "custom": {"name": "h", "input": "free text"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "one"},
        {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "two"}]},
        {"role": "tool", "tool_call_id": "c3", "content": "three"},
        {"role": "assistant", "content": None, "refusal": "I can't."},
    ]
    system, user, calls, results, refusal = from_openai(messages, artifacts=store)
    assert system.meta == {"openai.role": "developer"}
    assert system.content == [fr.TextBlock(text="Be brief.")]
    _, image, audio = user.content
    assert isinstance(image, fr.ImageBlock) and store.artifacts.get(str(image.artifact_id)) == PNG
    assert isinstance(audio, fr.ProviderBlock) and (audio.provider, audio.kind) == (
        "openai.chat",
        "input_audio",
    )
    assert _layout(user, "openai.chat") == [
        [3, {"_k": "msg", "_b": [None, {"_detail": "low"}, None]}]
    ]
    assert calls.content == [
        fr.ToolUseBlock(id="c1", name="f", input={"a": 1}),
        fr.ToolUseBlock(id="c2", name="g", input={}),  # not JSON: the string is in the layout
        fr.ToolUseBlock(id="c3", name="h", input={"input": "free text"}),
    ]
    assert _layout(calls, "openai.chat") == [
        [3, {"_k": "msg", "_b": [None, {"_args": "not json"}, {"_custom": True}]}]
    ]
    # consecutive tool messages: one user message, one result each
    assert [b.tool_use_id for b in results.content if isinstance(b, fr.ToolResultBlock)] == [
        "c1",
        "c2",
        "c3",
    ]
    assert refusal.content == [
        fr.ProviderBlock(
            provider="openai.chat", kind="refusal", data={"refusal": "I can't."}, text="I can't."
        )
    ]


def test_openai_chat_completion_object() -> None:
    openai = pytest.importorskip("openai")
    completion = openai.types.chat.ChatCompletion.model_validate(
        {
            "id": "chatcmpl-9",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "refusal": None,
                        "tool_calls": [
                            {
                                "id": "c",
                                "type": "function",
                                "function": {"name": "f", "arguments": "{}"},
                            }
                        ],
                    },
                },
                {
                    "index": 1,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": "other"},
                },
            ],
        }
    )
    (frame,) = from_openai(completion)
    assert frame.source == fr.SourceRef(system="openai.chat", key="chatcmpl-9")
    assert frame.content == [fr.ToolUseBlock(id="c", name="f", input={})]
    (other,) = from_openai(completion, choice=1)
    assert other.content == [fr.TextBlock(text="other")]
    with pytest.raises(BadFrame, match=r"choices: has no choice 2 \(it holds 2\)"):
        from_openai(completion, choice=2)


def test_openai_chat_errors_name_the_path() -> None:
    def fails(value: Any, match: str) -> None:
        with pytest.raises(BadFrame, match=match):
            from_openai(value)

    fails(
        [{"role": "function", "name": "f", "content": "x"}],
        r"\[0\]\.role: 'function' messages are deprecated",
    )
    fails(
        [{"role": "robot", "content": "x"}],
        r"\[0\]\.role: expected 'system', 'developer', 'user', 'assistant' or 'tool', got 'robot'",
    )
    fails([{"content": "x"}], r"\[0\]\.role: .*it is missing")
    fails({"messages": [{"role": "tool", "content": "x"}]}, r"messages\[0\]\.tool_call_id: missing")
    fails(
        {"messages": [{"role": "tool", "tool_call_id": "a"}]},
        r"messages\[0\]\.content: expected a string or a list of text parts, it is missing",
    )
    fails(
        [{"role": "user", "content": [{"type": "image_url", "image_url": "u"}]}],
        r"\[0\]\.content\[0\]\.image_url: expected an object, got str",
    )
    fails(
        [
            {
                "role": "assistant",
                "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f"}}],
            }
        ],
        r"\[0\]\.tool_calls\[0\]\.function\.arguments: missing",
    )
    fails(
        [{"role": "assistant", "tool_calls": [{"id": "a", "type": "magic"}]}],
        r"\[0\]\.tool_calls\[0\]\.type: expected 'function' or 'custom', got 'magic'",
    )
    fails([{"role": "assistant", "refusal": 3}], r"\[0\]\.refusal: expected a string, got int")
    fails(
        [
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG64}"}}
                ],
            }
        ],
        r"\[0\]\.content\[0\]\.image_url\.url: an image given as base64 needs an artifact store",
    )
    fails(
        [
            {
                "role": "user",
                "content": [{"type": "image_url", "image_url": {"url": "data:image/png,raw"}}],
            }
        ],
        r"\[0\]\.content\[0\]\.image_url\.url: a data URL must be data:<media type>;base64,<data>",
    )


# --- OpenAI Responses -----------------------------------------------------------------------


def test_openai_responses_items_group_into_messages() -> None:
    store = MemoryStore()
    items = [
        {"role": "developer", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "look"},
                {
                    "type": "input_image",
                    "image_url": f"data:image/png;base64,{PNG64}",
                    "detail": "high",
                },
                {"type": "input_file", "file_id": "file_1"},
            ],
        },
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "think"}],
            "encrypted_content": "ENC",
        },
        {
            "type": "message",
            "id": "msg_1",
            "status": "completed",
            "role": "assistant",
            "content": [
                {"type": "output_text", "text": "Checking", "annotations": []},
                {"type": "refusal", "refusal": "not that"},
            ],
        },
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "f",
            "arguments": "{}",
            "status": "completed",
        },
        {"type": "custom_tool_call", "call_id": "call_2", "name": "g", "input": "free"},
        {"type": "function_call_output", "call_id": "call_1", "output": "one"},
        {
            "type": "custom_tool_call_output",
            "call_id": "call_2",
            "output": [{"type": "input_text", "text": "two"}],
        },
        {
            "type": "computer_call_output",
            "call_id": "cc",
            "output": {"type": "computer_screenshot"},
        },
        {"role": "user", "content": "thanks"},
    ]
    system, user, assistant, answers = from_openai_responses({"input": items}, artifacts=store)
    assert system.meta == {"openai.role": "developer"}
    assert isinstance(user.content[1], fr.ImageBlock) and isinstance(
        user.content[2], fr.ProviderBlock
    )
    reasoning, text, refusal, call, custom = assistant.content
    assert (
        isinstance(reasoning, fr.ProviderBlock)
        and reasoning.data == items[2]
        and reasoning.text == "think"
    )
    assert text == fr.TextBlock(text="Checking")
    assert isinstance(refusal, fr.ProviderBlock) and refusal.text == "not that"
    assert call == fr.ToolUseBlock(id="call_1", name="f", input={})
    assert custom == fr.ToolUseBlock(id="call_2", name="g", input={"input": "free"})
    assert _layout(assistant, "openai.responses") == [
        [1, {"_k": "item"}],
        [2, {"_k": "msg", "type": "message", "id": "msg_1", "status": "completed"}],
        [1, {"_k": "call", "id": "fc_1", "status": "completed"}],
        [1, {"_k": "call", "type": "custom_tool_call"}],
    ]
    one, two, screenshot, thanks = answers.content
    assert one == fr.ToolResultBlock(tool_use_id="call_1", content="one")
    assert two == fr.ToolResultBlock(tool_use_id="call_2", parts=[fr.TextBlock(text="two")])
    assert isinstance(screenshot, fr.ProviderBlock) and screenshot.kind == "computer_call_output"
    assert thanks == fr.TextBlock(text="thanks")


def test_openai_responses_request_body_response_and_input_string() -> None:
    frames = from_openai_responses({"instructions": "Be brief.", "input": "hi", "model": "m"})
    assert [(f.role, f.content) for f in frames] == [
        ("system", [fr.TextBlock(text="Be brief.")]),
        ("user", [fr.TextBlock(text="hi")]),
    ]
    assert from_openai_responses("hi")[0].content == [fr.TextBlock(text="hi")]
    openai = pytest.importorskip("openai")
    response = openai.types.responses.Response.model_validate(
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 0,
            "model": "m",
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "output": [
                {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "E"},
                {
                    "type": "function_call",
                    "id": "fc_1",
                    "call_id": "c",
                    "name": "f",
                    "arguments": "{}",
                    "status": "completed",
                },
            ],
        }
    )
    (frame,) = from_openai_responses(response)
    assert frame.role == "assistant" and frame.source == fr.SourceRef(
        system="openai.responses", key="resp_1"
    )
    assert frame.content[1] == fr.ToolUseBlock(id="c", name="f", input={})
    assert (
        isinstance(frame.content[0], fr.ProviderBlock)
        and frame.content[0].data["encrypted_content"] == "E"
    )


def test_openai_responses_errors_name_the_path() -> None:
    def fails(value: Any, match: str) -> None:
        with pytest.raises(BadFrame, match=match):
            from_openai_responses(value)

    fails({"input": [{"role": "user"}]}, r"from_openai_responses: input\[0\]\.content: missing")
    fails(
        {"input": [{"role": "tool", "content": "x"}]},
        r"input\[0\]\.role: expected 'user', 'assistant', 'system' or 'developer', got 'tool'",
    )
    fails([{"id": "x"}], r"\[0\]\.type: expected an item type, it is missing")
    fails([{"type": "function_call", "call_id": "c", "arguments": "{}"}], r"\[0\]\.name: missing")
    fails(
        [{"type": "function_call_output", "call_id": "c", "output": 3}],
        r"\[0\]\.output: expected a string or a list, got int",
    )
    fails(
        [{"type": "message", "role": "user", "content": [{"type": "input_text"}]}],
        r"\[0\]\.content\[0\]\.text: missing",
    )
    fails({"instructions": 3, "input": []}, r"instructions: expected a string, got int")
    fails({"output": "x"}, r"output: expected a list, got str")


# --- artifacts, thresholds, redaction -------------------------------------------------------


def test_large_outputs_go_to_artifacts_with_a_preview() -> None:
    assert (DEFAULT_MAX_INLINE_BYTES, DEFAULT_PREVIEW_CHARS) == (16 * 1024, 2000)
    store = MemoryStore()
    big = "é" * 9000  # 18,000 bytes in UTF-8, 9,000 characters
    call = {"type": "tool_result", "tool_use_id": "t", "content": big}
    (frame,) = from_anthropic({"role": "user", "content": [call]}, artifacts=store.artifacts)
    (block,) = frame.content
    assert isinstance(block, fr.ToolResultBlock)
    assert (block.size, block.preview) == (18000, "é" * 2000)
    assert store.artifacts.get(str(block.artifact_id)) == big.encode()
    # the threshold and the preview are parameters; at or under the threshold it stays inline
    (frame,) = from_anthropic(
        {"role": "user", "content": [call]}, artifacts=store, max_inline_bytes=18000
    )
    assert frame.content == [fr.ToolResultBlock(tool_use_id="t", content=big)]
    # text parts are one output; a result with an image stays as it is
    parts = {
        "type": "tool_result",
        "tool_use_id": "t",
        "content": [
            {"type": "text", "text": "a" * 10},
            {"type": "text", "text": "b" * 10},
        ],
    }
    (frame,) = from_anthropic(
        {"role": "user", "content": [parts]}, artifacts=store, max_inline_bytes=15, preview_chars=4
    )
    (block,) = frame.content
    assert isinstance(block, fr.ToolResultBlock) and block.preview == "aaaa" and block.size == 21
    assert store.artifacts.get(str(block.artifact_id)) == b"a" * 10 + b"\n" + b"b" * 10
    # without an artifact store nothing moves
    (frame,) = from_anthropic({"role": "user", "content": [call]})
    assert frame.content == [fr.ToolResultBlock(tool_use_id="t", content=big)]
    # a thread works as well as a store: the one-line form of a runtime
    thread = store.thread("agent")
    thread.append(
        from_openai_responses(
            [{"type": "function_call_output", "call_id": "c", "output": big}], artifacts=thread
        )
    )
    (stored,) = thread.read(types=["message_appended"])
    assert isinstance(stored, fr.MessageAppended)
    assert narrow(fr.ToolResultBlock, stored.content[0]).artifact_id is not None
    with pytest.raises(ValueError):
        from_anthropic([], max_inline_bytes=-1)
    with pytest.raises(TypeError, match="artifacts must be an artifact store, a store or a thread"):
        from_anthropic([], artifacts="store")  # type: ignore[arg-type]


def test_an_artifact_is_redacted_when_the_store_redacts() -> None:
    store = MemoryStore(redactor=Redactor())
    secret = "DB_PASSWORD=correcthorsebattery\n" + "x" * 20000
    result = {"type": "function_call_output", "call_id": "c", "output": secret}
    thread = store.thread("agent")
    thread.append(from_openai_responses([result], artifacts=thread))
    (stored,) = thread.read(types=["message_appended"])
    assert isinstance(stored, fr.MessageAppended)
    (block,) = stored.content
    assert isinstance(block, fr.ToolResultBlock) and block.artifact_id is not None
    saved = store.artifacts.get(block.artifact_id)
    assert b"correcthorsebattery" not in saved and b"[REDACTED:" in saved
    assert "correcthorsebattery" not in block.preview


def test_provider_text_leaves_encrypted_and_base64_data_out() -> None:
    assert (
        _provider_text(
            {"type": "reasoning", "encrypted_content": "SECRET", "summary": [{"text": "why"}]}
        )
        == "why"
    )
    assert (
        _provider_text({"type": "document", "source": {"type": "base64", "data": "A" * 5000}}) == ""
    )
    assert _provider_text({"type": "x", "text": "y " * 3000}).endswith("…")
    assert len(_provider_text({"type": "x", "text": "y " * 3000})) == 4000


def test_a_response_where_a_message_belongs_keeps_what_a_request_can_send() -> None:
    """Runtimes append a response (or its message) to their message list: only what a request
    may hold comes in."""
    anthropic = pytest.importorskip("anthropic")
    openai = pytest.importorskip("openai")
    message = anthropic.types.Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "content": [{"type": "text", "text": "Hi"}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    )
    frames = from_anthropic([{"role": "user", "content": "hello"}, message])
    assert frames[1].content == [fr.TextBlock(text="Hi")] and frames[1].meta == {}
    with pytest.raises(BadFrame, match=r"from_anthropic: content\[0\]\.type: missing"):
        from_anthropic({"type": "message", "role": "assistant", "content": [{}]})
    chat_message = openai.types.chat.ChatCompletionMessage.model_validate(
        {
            "role": "assistant",
            "content": "Hi",
            "annotations": [],
            "audio": {"id": "a1", "data": "AAAA", "expires_at": 0, "transcript": "Hi"},
        }
    )
    (frame,) = from_openai([chat_message])
    assert _layout(frame, "openai.chat") == [[1, {"_k": "msg", "audio": {"id": "a1"}}]]
