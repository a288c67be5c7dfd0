"""A scripted model server: the real agent CLIs talk to it instead of a provider's API.

A test gives a :class:`Script`, a list of :class:`Rule` each matching a request (the main turn or
a side request, whether the last message is a tool result and of which tool, a phrase in the
last user message) to a :class:`Reply` (text, tool calls, a usage figure). The server answers
over HTTP on ``127.0.0.1`` in the provider's own format, streamed (SSE) or not, and logs every
request, parsed, so a test can assert what the client sent (:attr:`ModelServer.log`).

Rules match narrowly: a client sends side requests (Claude Code: titles, summaries, quota
checks) besides the main turn, and a request no rule matches gets a short harmless text. A rule
fires at most ``times`` times (default once), so a script reads as the turns it expects.

The script is provider-neutral: a provider (:class:`Anthropic` here; issue 29 adds OpenAI
Responses, Chat Completions and Gemini) turns a request body into a :class:`Request` view and a
:class:`Reply` into its wire format. Served: Anthropic ``POST /v1/messages`` (SSE when
``stream`` is true, else one JSON message), ``POST /v1/messages/count_tokens`` and
``GET /v1/models``.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Final, Protocol

__all__ = [
    "Anthropic",
    "Logged",
    "ModelServer",
    "Reply",
    "Request",
    "Rule",
    "Script",
    "ToolCall",
    "Usage",
]

MODEL: Final = "claude-sonnet-4-5"
UNMATCHED_TEXT: Final = "OK."


@dataclass(frozen=True)
class ToolCall:
    name: str
    input: dict[str, Any]


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 1_000
    output_tokens: int = 20


@dataclass(frozen=True)
class Reply:
    """One model response: text, then tool calls (stop reason ``tool_use`` when there are)."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)


@dataclass(frozen=True)
class Request:
    """What a rule can match, whatever the provider."""

    provider: str
    path: str
    body: dict[str, Any]
    main: bool
    """A turn of the agent (the request offers tools), not a side request."""
    last_user_text: str
    """The text blocks of the last user message that has any (tool results left out): after a
    tool result, still the prompt that started the turn (a rule for the first step of a turn
    says ``after_tool=False``)."""
    tool_result_of: str | None
    """The name of the tool whose result is the last message, or None."""
    tool_results: tuple[str, ...]
    """The text of the tool results in the last message."""

    @property
    def text(self) -> str:
        """The whole request body as JSON text (for "does it contain X anywhere")."""
        return json.dumps(self.body, ensure_ascii=False)


@dataclass
class Rule:
    """Requests it matches (every condition given must hold) and the reply they get.

    ``reply`` may be a function of the request (to use what a tool result said)."""

    reply: Reply | Callable[[Request], Reply]
    name: str = ""
    main: bool | None = True
    """True: only main turns; False: only side requests; None: either."""
    after_tool: bool | str | None = None
    """True: the last message is a tool result; a name: the result of that tool; False: the
    last message is not a tool result; None: either."""
    phrase: str | None = None
    """A phrase the last user message contains."""
    anywhere: str | None = None
    """A phrase anywhere in the request body (system prompt, earlier messages)."""
    times: int | None = 1
    """How many requests it answers (None: any number)."""
    used: int = 0

    def matches(self, request: Request) -> bool:
        if self.times is not None and self.used >= self.times:
            return False
        if self.main is not None and request.main != self.main:
            return False
        if self.after_tool is True and request.tool_result_of is None:
            return False
        if self.after_tool is False and request.tool_result_of is not None:
            return False
        if isinstance(self.after_tool, str) and request.tool_result_of != self.after_tool:
            return False
        if self.phrase is not None and self.phrase not in request.last_user_text:
            return False
        return self.anywhere is None or self.anywhere in request.text


class Script:
    """Rules tried in order; the first that matches answers (thread-safe)."""

    def __init__(self, rules: Sequence[Rule] = ()) -> None:
        self.rules = list(rules)
        self._lock = threading.Lock()

    def answer(self, request: Request) -> tuple[Reply, str | None]:
        with self._lock:
            for i, rule in enumerate(self.rules):
                if rule.matches(request):
                    rule.used += 1
                    reply = rule.reply(request) if callable(rule.reply) else rule.reply
                    return reply, rule.name or f"rule {i}"
        return Reply(text=UNMATCHED_TEXT, usage=Usage(input_tokens=10, output_tokens=2)), None

    def unused(self) -> list[str]:
        """The rules that have not answered yet (their names)."""
        return [r.name or f"rule {i}" for i, r in enumerate(self.rules) if r.used == 0]


@dataclass(frozen=True)
class Logged:
    """One request the server received: the parsed body (None if not JSON), the rule that
    answered (None: unmatched), and its :class:`Request` view when it was a model call."""

    method: str
    path: str
    body: Any
    rule: str | None
    request: Request | None


class Writer(Protocol):
    def json(self, status: int, payload: Any) -> None: ...
    def sse(self, events: Iterator[tuple[str, dict[str, Any]]]) -> None: ...


# --- Anthropic Messages ------------------------------------------------------------------------


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(
        _text_of(b.get("text", "")) if b.get("type") == "text" else _text_of(b.get("content", ""))
        for b in _blocks(content)
        if b.get("type") in ("text", "tool_result")
    )


class Anthropic:
    """``POST /v1/messages`` (``?beta=true`` too), its ``count_tokens``, ``GET /v1/models``."""

    name = "anthropic"

    def __init__(self) -> None:
        self._ids = itertools.count(1)

    def handles(self, method: str, path: str) -> bool:
        return path.startswith("/v1/messages") or path.startswith("/v1/models")

    def view(self, path: str, body: dict[str, Any]) -> Request:
        messages = [m for m in body.get("messages", []) if isinstance(m, dict)]
        tool_names = {
            b.get("id"): b.get("name")
            for m in messages
            if m.get("role") == "assistant"
            for b in _blocks(m.get("content"))
            if b.get("type") == "tool_use"
        }
        last = messages[-1] if messages else {}
        blocks = _blocks(last.get("content")) if last.get("role") == "user" else []
        results = [b for b in blocks if b.get("type") == "tool_result"]
        user_text = next(
            (
                "\n".join(
                    b.get("text", "") for b in _blocks(m.get("content")) if b.get("type") == "text"
                )
                for m in reversed(messages)
                if m.get("role") == "user"
                and any(b.get("type") == "text" for b in _blocks(m.get("content")))
            ),
            "",
        )
        return Request(
            provider=self.name,
            path=path,
            body=body,
            main=bool(body.get("tools")),
            last_user_text=user_text,
            tool_result_of=tool_names.get(results[-1].get("tool_use_id")) if results else None,
            tool_results=tuple(_text_of(r.get("content", "")) for r in results),
        )

    def serve(
        self, method: str, path: str, body: Any, script: Script, out: Writer
    ) -> tuple[str | None, Request | None]:
        route = path.split("?", 1)[0]
        if method == "GET" and route.startswith("/v1/models"):
            out.json(200, self.models())
            return "models", None
        if method == "POST" and route == "/v1/messages/count_tokens":
            out.json(200, {"input_tokens": max(1, len(json.dumps(body)) // 4)})
            return "count_tokens", None
        if method != "POST" or route != "/v1/messages" or not isinstance(body, dict):
            out.json(404, {"type": "error", "error": {"type": "not_found_error", "message": path}})
            return None, None
        request = self.view(path, body)
        reply, rule = script.answer(request)
        model = str(body.get("model") or MODEL)
        if body.get("stream"):
            out.sse(self.events(reply, model))
        else:
            out.json(200, self.message(reply, model))
        return rule, request

    def models(self) -> dict[str, Any]:
        entry = {
            "type": "model",
            "id": MODEL,
            "display_name": "Scripted Sonnet",
            "created_at": "2026-01-01T00:00:00Z",
        }
        return {"data": [entry], "has_more": False, "first_id": MODEL, "last_id": MODEL}

    def _content(self, reply: Reply) -> list[dict[str, Any]]:
        content: list[dict[str, Any]] = []
        if reply.text:
            content.append({"type": "text", "text": reply.text})
        for call in reply.tool_calls:
            content.append(
                {
                    "type": "tool_use",
                    "id": f"toolu_{next(self._ids):08d}",
                    "name": call.name,
                    "input": call.input,
                }
            )
        return content

    def _usage(self, usage: Usage, output: int) -> dict[str, Any]:
        return {
            "input_tokens": usage.input_tokens,
            "output_tokens": output,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        }

    def message(self, reply: Reply, model: str) -> dict[str, Any]:
        return {
            "id": f"msg_{next(self._ids):08d}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": self._content(reply),
            "stop_reason": "tool_use" if reply.tool_calls else "end_turn",
            "stop_sequence": None,
            "usage": self._usage(reply.usage, reply.usage.output_tokens),
        }

    def events(self, reply: Reply, model: str) -> Iterator[tuple[str, dict[str, Any]]]:
        whole = self.message(reply, model)
        start = dict(whole, content=[], stop_reason=None, usage=self._usage(reply.usage, 1))
        yield "message_start", {"type": "message_start", "message": start}
        for index, block in enumerate(whole["content"]):
            if block["type"] == "text":
                yield (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "text", "text": ""},
                    },
                )
                delta = {"type": "text_delta", "text": block["text"]}
            else:
                yield (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": dict(block, input={}),
                    },
                )
                delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            yield (
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
            yield "content_block_stop", {"type": "content_block_stop", "index": index}
        yield (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": whole["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": reply.usage.output_tokens},
            },
        )
        yield "message_stop", {"type": "message_stop"}


# --- the HTTP server ---------------------------------------------------------------------------


class Provider(Protocol):
    name: str

    def handles(self, method: str, path: str) -> bool: ...

    def serve(
        self, method: str, path: str, body: Any, script: Script, out: Writer
    ) -> tuple[str | None, Request | None]: ...


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    def json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def sse(self, events: Iterator[tuple[str, dict[str, Any]]]) -> None:
        chunks = b"".join(
            f"event: {event}\ndata: {json.dumps(data)}\n\n".encode() for event, data in events
        )
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Content-Length", str(len(chunks)))
        self.end_headers()
        self.wfile.write(chunks)

    def _handle(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        owner = self.server.owner
        provider = next((p for p in owner.providers if p.handles(method, self.path)), None)
        rule: str | None = None
        request: Request | None = None
        if provider is None:
            self.json(404, {"error": f"no scripted provider serves {method} {self.path}"})
        else:
            rule, request = provider.serve(method, self.path, body, owner.script, self)
        owner.record(Logged(method, self.path, body, rule, request))

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    owner: ModelServer


class ModelServer:
    """The server, on ``127.0.0.1`` at a free port, in a thread; a context manager."""

    def __init__(self, script: Script | None = None, providers: Sequence[Provider] = ()) -> None:
        self.script = script or Script()
        self.providers: list[Provider] = list(providers) or [Anthropic()]
        self.log: list[Logged] = []
        self._lock = threading.Lock()
        self._http = _HTTPServer(("127.0.0.1", 0), _Handler)
        self._http.owner = self
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> ModelServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(5)

    def record(self, entry: Logged) -> None:
        with self._lock:
            self.log.append(entry)

    def requests(self, *, main: bool | None = None) -> list[Request]:
        """The model calls received, in order (only main turns, or only side requests)."""
        with self._lock:
            got = [e.request for e in self.log if e.request is not None]
        return [r for r in got if main is None or r.main == main]

    def dump(self, path: Path) -> None:
        """Write the log as JSON lines (for a failing test's reader)."""
        with self._lock, path.open("w") as f:
            for e in self.log:
                f.write(
                    json.dumps({"method": e.method, "path": e.path, "rule": e.rule, "body": e.body})
                    + "\n"
                )
