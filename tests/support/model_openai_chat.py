"""OpenAI Chat Completions for the scripted model server (opencode's openai-compatible provider).

``POST /v1/chat/completions``: streamed as ``chat.completion.chunk`` SSE events (text deltas,
``tool_calls`` deltas with the arguments as JSON text, a ``finish_reason``, and ``usage`` on the
last chunk, which opencode reads to decide on its automatic compaction), or one
``chat.completion`` object when ``stream`` is false. ``GET /v1/models`` lists the model.
A request is a main turn when it offers tools; the last message is a tool result when its role
is ``tool`` (its name looked up by ``tool_call_id`` in the assistant's earlier ``tool_calls``).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any, Final

from tests.support.model_server import Reply, Request, Script, Writer

__all__ = ["MODEL", "OpenAIChat"]

MODEL: Final = "fake-model"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(p.get("text", ""))
            for p in content
            if isinstance(p, dict) and p.get("type") == "text"
        )
    return ""


class OpenAIChat:
    """``POST /v1/chat/completions`` and ``GET /v1/models``."""

    name = "openai-chat"

    def __init__(self) -> None:
        self._ids = itertools.count(1)

    def handles(self, method: str, path: str) -> bool:
        route = path.split("?", 1)[0]
        return route in ("/v1/chat/completions", "/v1/models")

    def view(self, path: str, body: dict[str, Any]) -> Request:
        messages = [m for m in body.get("messages", []) if isinstance(m, dict)]
        names = {
            c.get("id"): (c.get("function") or {}).get("name")
            for m in messages
            if m.get("role") == "assistant"
            for c in (m.get("tool_calls") or [])
            if isinstance(c, dict)
        }
        tail: list[dict[str, Any]] = []
        for m in reversed(messages):
            if m.get("role") != "tool":
                break
            tail.insert(0, m)
        user_text = next(
            (_text(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), ""
        )
        return Request(
            provider=self.name,
            path=path,
            body=body,
            main=bool(body.get("tools")),
            last_user_text=user_text,
            tool_result_of=names.get(tail[-1].get("tool_call_id")) if tail else None,
            tool_results=tuple(_text(m.get("content")) for m in tail),
        )

    def serve(
        self, method: str, path: str, body: Any, script: Script, out: Writer
    ) -> tuple[str | None, Request | None]:
        route = path.split("?", 1)[0]
        if method == "GET" and route == "/v1/models":
            out.json(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
            return "models", None
        if method != "POST" or not isinstance(body, dict):
            out.json(404, {"error": {"message": f"not served: {method} {path}"}})
            return None, None
        request = self.view(path, body)
        reply, rule = script.answer(request)
        model = str(body.get("model") or MODEL)
        if body.get("stream"):
            out.sse(self.chunks(reply, model))
        else:
            out.json(200, self.completion(reply, model))
        return rule, request

    def _calls(self, reply: Reply) -> list[dict[str, Any]]:
        return [
            {
                "id": f"call_{next(self._ids):08d}",
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(c.input)},
            }
            for c in reply.tool_calls
        ]

    def _usage(self, reply: Reply) -> dict[str, int]:
        u = reply.usage
        return {
            "prompt_tokens": u.input_tokens,
            "completion_tokens": u.output_tokens,
            "total_tokens": u.input_tokens + u.output_tokens,
        }

    def completion(self, reply: Reply, model: str) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        calls = self._calls(reply)
        if calls:
            message["tool_calls"] = calls
        return {
            "id": f"chatcmpl-{next(self._ids)}",
            "object": "chat.completion",
            "created": 1_795_000_000,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if calls else "stop",
                }
            ],
            "usage": self._usage(reply),
        }

    def chunks(self, reply: Reply, model: str) -> Iterator[tuple[str, dict[str, Any]]]:
        cid = f"chatcmpl-{next(self._ids)}"

        def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
            return {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": 1_795_000_000,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                **extra,
            }

        yield "message", chunk({"role": "assistant", "content": ""})
        if reply.text:
            yield "message", chunk({"content": reply.text})
        calls = self._calls(reply)
        for index, call in enumerate(calls):
            head = dict(call, index=index, function={"name": call["function"]["name"]})
            head["function"]["arguments"] = ""
            yield "message", chunk({"tool_calls": [head]})
            args = {"index": index, "function": {"arguments": call["function"]["arguments"]}}
            yield "message", chunk({"tool_calls": [args]})
        finish = "tool_calls" if calls else "stop"
        yield "message", chunk({}, finish, usage=self._usage(reply))
