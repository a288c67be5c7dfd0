"""JSON-RPC 2.0 as MCP's stdio transport carries it: one message a line, UTF-8 (ADR 0053).

:func:`parse` turns a line into an :class:`Incoming` (a request, a notification, or a reply to
us, which the server ignores) or a :class:`Rejected` carrying the error to answer: never an
exception, whatever the line holds. :func:`encode` makes the line of a reply. The codes are
JSON-RPC's own.

A line that is not JSON is a parse error with ``id`` null. Two cases the JSON grammar allows and
a message cannot be keep their request's ``id`` where it can be read, so the client that sent
them is answered rather than left waiting for its own timeout:

- a string holding a lone UTF-16 surrogate (``"\\ud800"``: not Unicode text): invalid params;
- nesting deeper than the decoder goes (100,000 ``[``): a parse error, its ``id`` read by a
  scan of the top level (:func:`salvage_id`) that never recurses.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Final

import msgspec

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "MAX_LINE",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "Incoming",
    "Rejected",
    "RequestId",
    "encode",
    "error",
    "parse",
    "result",
    "salvage_id",
]

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603

MAX_LINE: Final = 16 * 1024 * 1024
"""The longest line read as a message (bytes); a longer one is refused unread. The largest
request the tools take (``remember``'s 20,000 characters) is a few hundred KiB at most."""

RequestId = int | str

_decode: Final = msgspec.json.Decoder()
_encode: Final = msgspec.json.Encoder()


@dataclass(frozen=True, slots=True)
class Incoming:
    """A well-formed message: a request (``id`` set), a notification (``id`` None, ``method``
    set), or a reply to a request of ours (``method`` None; we send none, so it is dropped)."""

    method: str | None
    id: RequestId | None
    params: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Rejected:
    """A line that is not a message we can act on: the error to answer (``id`` None: answered
    with ``id`` null), unless ``notification`` (a notification is never answered)."""

    code: int
    message: str
    id: RequestId | None = None
    notification: bool = False


def result(request_id: RequestId, value: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": value}


def error(request_id: RequestId | None, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def encode(message: dict[str, Any]) -> bytes:
    """``message`` as one line of UTF-8 JSON, newline included. A string that is not Unicode
    text (a lone surrogate) cannot be UTF-8: it goes out as a ``\\u`` escape instead."""
    try:
        return _encode.encode(message) + b"\n"
    except UnicodeEncodeError:
        return json.dumps(message, ensure_ascii=True, separators=(",", ":")).encode() + b"\n"


def _is_id(value: object) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def parse(line: bytes) -> Incoming | Rejected:
    """The message one line holds, or what to answer instead."""
    try:
        value = _decode.decode(line)
    except RecursionError:
        return Rejected(PARSE_ERROR, "Parse error: the JSON is nested too deep", salvage_id(line))
    except (msgspec.DecodeError, UnicodeDecodeError, ValueError):
        return _not_msgspec_json(line)
    return _message(value)


def _not_msgspec_json(line: bytes) -> Incoming | Rejected:
    """What msgspec refused: JSON whose strings are not all Unicode text (its decoder refuses
    lone surrogates, Python's takes them), or no JSON at all."""
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return Rejected(PARSE_ERROR, "Parse error: the line is not JSON (UTF-8, one message)")
    found = _message(value)
    if isinstance(found, Rejected) or found.method is None:  # a reply to us: dropped anyway
        return found
    if _holds_surrogate(value):
        bad = "Invalid params: a string is not Unicode text (it holds a lone UTF-16 surrogate)"
        return Rejected(INVALID_PARAMS, bad, found.id, notification=found.id is None)
    # what else Python reads and JSON is not: NaN, Infinity
    bad = "Parse error: the line is not JSON (NaN and Infinity are not JSON numbers)"
    return Rejected(PARSE_ERROR, bad, found.id, notification=found.id is None)


def _message(value: Any) -> Incoming | Rejected:
    if isinstance(value, list):
        return Rejected(INVALID_REQUEST, "Invalid Request: batches are not supported")
    if not isinstance(value, dict):
        return Rejected(INVALID_REQUEST, "Invalid Request: a message is a JSON object")
    has_id = "id" in value
    request_id = value.get("id")
    if has_id and not _is_id(request_id):
        return Rejected(INVALID_REQUEST, "Invalid Request: id must be a string or an integer")
    method = value.get("method")
    notification = not has_id
    if value.get("jsonrpc") != "2.0":
        why = 'Invalid Request: jsonrpc must be "2.0"'
        return Rejected(INVALID_REQUEST, why, request_id, notification=notification)
    if method is None:
        if has_id and ("result" in value or "error" in value):
            return Incoming(None, request_id, {})
        why = "Invalid Request: no method"
        return Rejected(INVALID_REQUEST, why, request_id, notification=notification)
    if not isinstance(method, str):
        why = "Invalid Request: method must be a string"
        return Rejected(INVALID_REQUEST, why, request_id, notification=notification)
    params = value.get("params")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        why = "Invalid params: params must be an object"
        return Rejected(INVALID_PARAMS, why, request_id, notification=notification)
    return Incoming(method, request_id, params)


# A JSON token at any depth: a string (escapes kept), a bracket, a separator, or a bare value
_TOKEN: Final = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}:,]|[^\s"\[\]{}:,]+')


def salvage_id(line: bytes) -> RequestId | None:
    """The top-level ``"id"`` of a JSON object too deep to decode, found by a scan that keeps
    only a depth count (None: not found, or not a string or an integer)."""
    depth = 0
    recent: list[bytes] = []  # the last tokens seen at depth 1
    for m in _TOKEN.finditer(line):
        tok = m.group()
        if tok in (b"{", b"["):
            depth += 1
            if depth == 2:
                recent = [*recent[-2:], b"<nested>"]
        elif tok in (b"}", b"]"):
            depth -= 1
            if depth <= 0:
                break
        elif depth == 1:
            recent = [*recent[-2:], tok]
            if len(recent) == 3 and recent[0] == b'"id"' and recent[1] == b":":
                return _scalar_id(recent[2])
    return None


def _scalar_id(tok: bytes) -> RequestId | None:
    try:
        value = json.loads(tok)
    except ValueError:
        return None
    if _is_id(value) and not (isinstance(value, str) and _has_surrogate(value)):
        return value  # type: ignore[no-any-return]
    return None


def _has_surrogate(text: str) -> bool:
    return any("\ud800" <= c <= "\udfff" for c in text)


def _holds_surrogate(value: Any) -> bool:
    """Whether a decoded value (any depth; no recursion) has a key or string that is not
    Unicode text."""
    todo = [value]
    while todo:
        v = todo.pop()
        if isinstance(v, str):
            if _has_surrogate(v):
                return True
        elif isinstance(v, dict):
            todo += v.keys()
            todo += v.values()
        elif isinstance(v, list):
            todo += v
    return False
