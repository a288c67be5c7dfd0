"""The Gemini API for the scripted model server (``tests/support/model_server.py``): what Gemini
CLI calls, ``POST /v1beta/models/<model>:streamGenerateContent?alt=sse`` (SSE: ``data:``
lines only, as the Google GenAI SDK reads them), ``:generateContent`` (one JSON response) and
``:countTokens``.

A :class:`~tests.support.model_server.Reply` becomes one candidate whose parts are its text and
its tool calls as ``functionCall`` parts; ``Usage.input_tokens`` is ``promptTokenCount`` (what
Gemini CLI compares with the model's window to decide on a compression). A request offering
tools (``tools[].functionDeclarations``) is a main turn; Gemini CLI's side requests (the
compression's summary and its check, next-speaker and loop checks) offer none.
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.model_server import Reply, Request, Script, Writer

__all__ = ["Gemini"]


def _parts(content: Any) -> list[dict[str, Any]]:
    parts = content.get("parts") if isinstance(content, dict) else None
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


def _text(parts: list[dict[str, Any]]) -> str:
    return "\n".join(p["text"] for p in parts if isinstance(p.get("text"), str))


class Gemini:
    """The Gemini API (``/v1beta/models/...``)."""

    name = "gemini"

    def handles(self, method: str, path: str) -> bool:
        return path.startswith("/v1beta/models") or path.startswith("/v1/models")

    def view(self, path: str, body: dict[str, Any]) -> Request:
        contents = [c for c in body.get("contents", []) if isinstance(c, dict)]
        last = contents[-1] if contents else {}
        responses = [
            p["functionResponse"]
            for p in _parts(last)
            if isinstance(p.get("functionResponse"), dict)
        ]
        user_text = next(
            (
                _text(_parts(c))
                for c in reversed(contents)
                if c.get("role") == "user" and _text(_parts(c))
            ),
            "",
        )
        tools = body.get("tools") or body.get("config", {}).get("tools")
        return Request(
            provider=self.name,
            path=path,
            body=body,
            main=bool(tools),
            last_user_text=user_text,
            tool_result_of=str(responses[-1].get("name")) if responses else None,
            tool_results=tuple(json.dumps(r.get("response"), sort_keys=True) for r in responses),
        )

    def response(self, reply: Reply, model: str) -> dict[str, Any]:
        parts: list[dict[str, Any]] = []
        if reply.text:
            parts.append({"text": reply.text})
        parts += [{"functionCall": {"name": c.name, "args": c.input}} for c in reply.tool_calls]
        usage = reply.usage
        return {
            "candidates": [
                {
                    "content": {"role": "model", "parts": parts},
                    "finishReason": "STOP",
                    "index": 0,
                }
            ],
            "usageMetadata": {
                "promptTokenCount": usage.input_tokens,
                "candidatesTokenCount": usage.output_tokens,
                "totalTokenCount": usage.input_tokens + usage.output_tokens,
            },
            "modelVersion": model,
        }

    def serve(
        self, method: str, path: str, body: Any, script: Script, out: Writer
    ) -> tuple[str | None, Request | None]:
        route = path.split("?", 1)[0]
        model = route.rsplit("/", 1)[-1].split(":", 1)[0]
        if method == "POST" and route.endswith(":countTokens"):
            out.json(200, {"totalTokens": max(1, len(json.dumps(body)) // 4)})
            return "countTokens", None
        if method != "POST" or not isinstance(body, dict) or ":" not in route:
            out.json(404, {"error": {"code": 404, "message": path, "status": "NOT_FOUND"}})
            return None, None
        request = self.view(path, body)
        reply, rule = script.answer(request)
        payload = self.response(reply, model)
        if route.endswith(":streamGenerateContent"):
            _sse(out, payload)
        else:
            out.json(200, payload)
        return rule, request


def _sse(out: Writer, payload: dict[str, Any]) -> None:
    """One ``data:`` event: the SDK reads ``data:`` lines only (an ``event:`` line before one
    would hide it), so it is written here rather than through ``Writer.sse``."""
    assert isinstance(out, BaseHTTPRequestHandler), "the model server's handler writes it"
    data = f"data: {json.dumps(payload)}\r\n\r\n".encode()
    out.send_response(200)
    out.send_header("Content-Type", "text/event-stream")
    out.send_header("Content-Length", str(len(data)))
    out.end_headers()
    out.wfile.write(data)
