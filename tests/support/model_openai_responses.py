"""The OpenAI Responses API for the scripted model server (Codex CLI's wire API).

``POST /v1/responses`` (streamed: ``response.created``, ``response.output_item.added`` and
``.done`` for each message and function call, ``response.output_text.delta``,
``response.completed`` with the usage) and ``GET /v1/models`` (an empty list). A
:class:`~tests.support.model_server.ToolCall` becomes a ``function_call`` item whose arguments
are its input as a JSON string (Codex's shell tool: ``exec_command {"cmd": …}``).
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from typing import Any, Final

from tests.support.model_server import Reply, Request, Script, Writer

__all__ = ["OpenAIResponses"]

MODEL: Final = "scripted-model-x1"
"""A model name Codex does not know (it then shows MCP tools to the model directly)."""


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [
        str(part.get("text", ""))
        for part in content
        if isinstance(part, dict) and part.get("type") in ("input_text", "output_text", "text")
    ]


class OpenAIResponses:
    """``POST /v1/responses`` and ``GET /v1/models``."""

    name = "openai-responses"

    def __init__(self) -> None:
        self._ids = itertools.count(1)

    def handles(self, method: str, path: str) -> bool:
        route = path.split("?", 1)[0]
        return route.endswith("/responses") or route.endswith("/models")

    def view(self, path: str, body: dict[str, Any]) -> Request:
        items = [i for i in body.get("input", []) if isinstance(i, dict)]
        names = {
            i.get("call_id"): i.get("name")
            for i in items
            if i.get("type") in ("function_call", "custom_tool_call")
        }
        last = items[-1] if items else {}
        results = []
        for item in reversed(items):  # the outputs after the last assistant item
            if item.get("type") not in ("function_call_output", "custom_tool_call_output"):
                break
            results.append(item)
        results.reverse()
        user_text = next(
            (
                "\n".join(_texts(i.get("content")))
                for i in reversed(items)
                if i.get("type", "message") == "message"
                and i.get("role") == "user"
                and _texts(i.get("content"))
            ),
            "",
        )
        output = [r.get("output") for r in results]
        return Request(
            provider=self.name,
            path=path,
            body=body,
            main=bool(body.get("tools")),
            last_user_text=user_text,
            tool_result_of=names.get(last.get("call_id")) if results else None,
            tool_results=tuple(o if isinstance(o, str) else "\n".join(_texts(o)) for o in output),
        )

    def serve(
        self, method: str, path: str, body: Any, script: Script, out: Writer
    ) -> tuple[str | None, Request | None]:
        route = path.split("?", 1)[0]
        if method == "GET" and route.endswith("/models"):
            out.json(200, {"object": "list", "data": [], "models": []})
            return "models", None
        if method != "POST" or not route.endswith("/responses") or not isinstance(body, dict):
            out.json(404, {"error": {"type": "not_found", "message": path}})
            return None, None
        request = self.view(path, body)
        reply, rule = script.answer(request)
        out.sse(self.events(reply, str(body.get("model") or MODEL)))
        return rule, request

    def _items(self, reply: Reply) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        if reply.text:
            items.append(
                {
                    "type": "message",
                    "id": f"msg_{next(self._ids):08d}",
                    "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
                }
            )
        for call in reply.tool_calls:
            n = next(self._ids)
            item = {
                "type": "function_call",
                "id": f"fc_{n:08d}",
                "call_id": f"call_{n:08d}",
                "name": call.name,
                "arguments": json.dumps(call.input),
                "status": "completed",
            }
            if call.name.startswith("mcp__") and call.name.count("__") >= 2:
                # an MCP tool: Codex offers a server's tools as a namespace (mcp__<server>)
                namespace, _, name = call.name.rpartition("__")
                item.update(name=name, namespace=namespace)
            items.append(item)
        return items

    def events(self, reply: Reply, model: str) -> Iterator[tuple[str, dict[str, Any]]]:
        rid = f"resp_{next(self._ids):08d}"
        base = {"id": rid, "object": "response", "created_at": int(time.time()), "model": model}
        yield (
            "response.created",
            {
                "type": "response.created",
                "response": {**base, "status": "in_progress", "output": []},
            },
        )
        items = self._items(reply)
        for index, item in enumerate(items):
            opened = dict(item, status="in_progress")
            if item["type"] == "message":
                opened["content"] = []
            else:
                opened["arguments"] = ""
            yield (
                "response.output_item.added",
                {"type": "response.output_item.added", "output_index": index, "item": opened},
            )
            if item["type"] == "message":
                yield (
                    "response.output_text.delta",
                    {
                        "type": "response.output_text.delta",
                        "item_id": item["id"],
                        "output_index": index,
                        "content_index": 0,
                        "delta": reply.text,
                    },
                )
            yield (
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": index, "item": item},
            )
        usage = {
            "input_tokens": reply.usage.input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": reply.usage.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": reply.usage.input_tokens + reply.usage.output_tokens,
        }
        done = {**base, "status": "completed", "output": items, "usage": usage}
        yield "response.completed", {"type": "response.completed", "response": done}
