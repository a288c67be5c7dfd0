"""What the OpenAI Agents SDK session tests share: a scripted model (the SDK's own, no network),
a real function tool, and response builders. The SDK package ships no ``FakeModel``, so the model
here is a small :class:`agents.models.interface.Model` that returns prepared responses in order
and records every input it was given."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, cast

from agents import function_tool, set_tracing_disabled
from agents.items import ModelResponse, TResponseInputItem, TResponseOutputItem
from agents.models.interface import Model, ModelTracing
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)
from openai.types.responses.response_reasoning_item import Summary

set_tracing_disabled(True)  # no exporter, no network


def as_items(raw: list[dict[str, Any]]) -> list[TResponseInputItem]:
    """The same list, typed as a session's items. The tests write items as the JSON the SDK
    stores; the SDK types them as a union of some thirty TypedDicts, which a dict literal matches
    ambiguously (a message) or, for the odd shapes a session must keep verbatim, not at all."""
    return cast("list[TResponseInputItem]", raw)


def as_json(item: TResponseInputItem) -> dict[str, Any]:
    """The same item, typed as the JSON object it is, for a test to look into."""
    return cast("dict[str, Any]", item)


Turn = list[TResponseOutputItem] | BaseException | Callable[[Any], list[TResponseOutputItem]]


class ScriptedModel(Model):
    """Returns the prepared turns in order: a list of output items, an exception to raise, or a
    function of the input the model was given that returns the items."""

    def __init__(self, turns: Sequence[Turn], *, response_ids: bool = False) -> None:
        self.turns = list(turns)
        self.response_ids = response_ids
        """Give each response an id (the runner compacts after a response with one)."""
        self.inputs: list[list[TResponseInputItem]] = []

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: Any,
        tools: Any,
        output_schema: Any,
        handoffs: Any,
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> ModelResponse:
        given = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        self.inputs.append(given)  # type: ignore[arg-type]
        if not self.turns:
            raise AssertionError("the scripted model has no turn left")
        turn = self.turns.pop(0)
        if isinstance(turn, BaseException):
            raise turn
        output = turn(given) if callable(turn) else turn
        response_id = f"resp_{len(self.inputs)}" if self.response_ids else None
        return ModelResponse(output=output, usage=Usage(), response_id=response_id)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the tests do not stream")


_ids = iter(range(1, 1_000_000))


def reply(text: str, n: int | None = None) -> list[TResponseOutputItem]:
    n = next(_ids) if n is None else n
    return [
        ResponseOutputMessage(
            id=f"msg_{n}",
            type="message",
            role="assistant",
            status="completed",
            content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
        )
    ]


def call(
    name: str, arguments: str, *, think: str | None = None, n: int | None = None
) -> list[TResponseOutputItem]:
    n = next(_ids) if n is None else n
    out: list[TResponseOutputItem] = []
    if think is not None:
        out.append(
            ResponseReasoningItem(
                id=f"rs_{n}",
                type="reasoning",
                summary=[Summary(type="summary_text", text=think)],
                encrypted_content=f"enc-{n}",
            )
        )
    out.append(
        ResponseFunctionToolCall(
            id=f"fc_{n}",
            type="function_call",
            call_id=f"call_{n}",
            name=name,
            arguments=arguments,
            status="completed",
        )
    )
    return out


@function_tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@function_tool
def lookup_order(order_id: str) -> str:
    """Where an order is."""
    return f"order {order_id}: shipped, arriving Tuesday"
