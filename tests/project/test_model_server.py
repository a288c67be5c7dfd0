"""The scripted model server speaks Anthropic's Messages API as the official SDK reads it.

The ``anthropic`` Python SDK (in the dev extra) is the client here: a streamed reply it
assembles from our SSE events, and a plain JSON one, must come out as the scripted text, tool
call (its input parsed from the ``input_json_delta``), stop reason and usage. The rules match as
documented, and every request is logged as sent.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import pytest
from anthropic.types import Message, TextBlock, ToolUseBlock

from tests.support.model_server import ModelServer, Reply, Rule, Script, ToolCall, Usage

pytestmark = pytest.mark.slow

TOOL: dict[str, Any] = {
    "name": "Bash",
    "description": "Run a command.",
    "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
}
CALL = ToolCall("Bash", {"command": "echo 'a \"quoted\" é' > f.txt", "timeout": 5})


@pytest.fixture
def served() -> Iterator[tuple[ModelServer, anthropic.Anthropic]]:
    script = Script(
        [
            Rule(
                Reply(text="Running it.", tool_calls=(CALL,), usage=Usage(1234, 56)),
                name="call",
                phrase="run it",
                after_tool=False,  # the user's text stays the last one after a tool result
                times=None,
            ),
            Rule(Reply(text="It ran."), name="after", after_tool="Bash"),
            Rule(Reply(text="A title"), name="side", main=False, phrase="title"),
        ]
    )
    # The client is closed with the server: an unclosed client's pooled socket is found by the
    # garbage collector later, as a ResourceWarning in whatever test runs then.
    with (
        ModelServer(script) as server,
        anthropic.Anthropic(base_url=server.url, api_key="test", max_retries=0) as client,
    ):
        yield server, client


def _text(message: Message) -> str:
    return "".join(b.text for b in message.content if isinstance(b, TextBlock))


def _call(message: Message) -> ToolUseBlock:
    (call,) = [b for b in message.content if isinstance(b, ToolUseBlock)]
    return call


def _ask(client: anthropic.Anthropic, text: str, **more: Any) -> Message:
    reply: Message = client.messages.create(
        model="claude-test",
        max_tokens=100,
        messages=[{"role": "user", "content": text}],
        **more,
    )
    return reply


def test_a_streamed_reply_is_what_the_sdk_assembles(
    served: tuple[ModelServer, anthropic.Anthropic],
) -> None:
    server, client = served
    with client.messages.stream(
        model="claude-test",
        max_tokens=100,
        tools=[TOOL],  # type: ignore[list-item]
        messages=[{"role": "user", "content": "Please run it."}],
    ) as stream:
        message = stream.get_final_message()
    assert [b.type for b in message.content] == ["text", "tool_use"]
    assert _text(message) == "Running it."
    assert (_call(message).name, _call(message).input) == ("Bash", CALL.input)
    assert message.stop_reason == "tool_use"
    assert (message.usage.input_tokens, message.usage.output_tokens) == (1234, 56)
    assert server.log[-1].rule == "call"
    assert server.log[-1].body["stream"] is True


def test_a_plain_reply_and_the_models_list(
    served: tuple[ModelServer, anthropic.Anthropic],
) -> None:
    _, client = served
    message = _ask(client, "Please run it.", tools=[TOOL])
    assert _call(message).input == CALL.input
    assert message.stop_reason == "tool_use"
    assert [m.id for m in client.models.list()] == ["claude-sonnet-4-5"]


def test_rules_match_narrowly_and_everything_is_logged(
    served: tuple[ModelServer, anthropic.Anthropic],
) -> None:
    server, client = served
    # a side request (no tools) that names a title, then one no rule wants
    assert _text(_ask(client, "Write a title")) == "A title"
    assert _text(_ask(client, "Write a title")) == "OK."  # the rule answered once
    assert _text(_ask(client, "Please run it.")) == "OK."  # a main-turn rule: no tools
    call = _ask(client, "Please run it.", tools=[TOOL])
    conversation: list[Any] = [
        {"role": "user", "content": "Please run it."},
        {"role": "assistant", "content": [b.model_dump() for b in call.content]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": _call(call).id, "content": "done"}],
        },
    ]
    result = client.messages.create(
        model="claude-test",
        max_tokens=100,
        tools=[TOOL],  # type: ignore[list-item]
        messages=conversation,
    )
    assert _text(result) == "It ran."
    assert [e.rule for e in server.log] == ["side", None, None, "call", "after"]
    last = server.requests()[-1]
    assert (last.main, last.tool_result_of, last.tool_results) == (True, "Bash", ("done",))
    assert last.last_user_text == "Please run it."
    assert server.script.unused() == []
