"""Reading Claude Code transcripts: JSONL lines into a few typed records, tolerating everything.

The transcript contract (``../shared/design/claude-code.md``) allows unknown line types and
fields, lines that are not JSON or not objects, a half-written last line, progress and snapshot
noise, one API response split over several lines, sidechains, and older ``summary`` lines. This
module turns the complete lines of a byte range into :data:`Record` values and counts what it
skipped; it never raises on content. It imports nothing heavy: it runs on the hook path.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from typing import Any, Final, TypeAlias

import msgspec

from continuity import frames as fr

__all__ = [
    "AssistantPart",
    "CompactBoundary",
    "CompactSummary",
    "LegacySummary",
    "Record",
    "UserLine",
    "read_records",
    "text_of",
]

# Conversation carriers; everything else (progress, attachment, file-history-snapshot,
# queue-operation, titles, permission-mode, system subtypes other than compact_boundary, and
# whatever new releases add) is noise for the archive.
_CONVERSATION: Final = frozenset({"user", "assistant"})


class _Where(msgspec.Struct, frozen=True):
    offset: int
    uuid: str
    timestamp: str
    session_id: str
    agent_id: str | None
    sidechain: bool
    cwd: str
    git_branch: str
    version: str


class UserLine(msgspec.Struct, frozen=True):
    """A ``user`` line: a prompt, a tool result, or Claude Code's own meta text."""

    where: _Where
    blocks: list[fr.ContentBlock]
    is_meta: bool


class AssistantPart(msgspec.Struct, frozen=True):
    """One ``assistant`` line: one or more blocks of the API response ``message_id``."""

    where: _Where
    message_id: str
    request_id: str
    model: str
    blocks: list[fr.ContentBlock]
    synthetic: bool


class CompactBoundary(msgspec.Struct, frozen=True):
    where: _Where
    trigger: str
    pre_tokens: int


class CompactSummary(msgspec.Struct, frozen=True):
    """The ``isCompactSummary`` user line after a boundary: Claude's summary of what came before."""

    where: _Where
    text: str


class LegacySummary(msgspec.Struct, frozen=True):
    """An older ``summary`` line (a session title, ``leafUuid`` naming where it applies)."""

    offset: int
    summary: str
    leaf_uuid: str


Record: TypeAlias = UserLine | AssistantPart | CompactBoundary | CompactSummary | LegacySummary


class ReadResult(msgspec.Struct):
    records: list[Record] = msgspec.field(default_factory=list)
    end: int = 0
    """The offset just past the last complete line read (where the next read starts)."""
    skipped: Counter[str] = msgspec.field(default_factory=Counter)
    """Lines that carry no conversation, by type; ``<not json>``/``<not object>`` for bad ones."""


_decoder: Final = msgspec.json.Decoder()
_CHUNK: Final = 1 << 20
_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def text_of(content: Any) -> str:
    """The text of a ``tool_result`` content (a string or a list of blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for b in content:
            if isinstance(b, dict):
                if b.get("type") == "text" and isinstance(b.get("text"), str):
                    parts.append(b["text"])
                elif b.get("type") == "image":
                    parts.append("[image]")
            elif isinstance(b, str):
                parts.append(b)
        return "\n".join(parts)
    return "" if content is None else str(content)


def _str(v: Any) -> str:
    return v if isinstance(v, str) else ""


def _blocks(content: Any) -> list[fr.ContentBlock]:
    """Content blocks as frames hold them; unknown block types are kept as text notes."""
    if isinstance(content, str):
        return [fr.TextBlock(text=content)] if content else []
    out: list[fr.ContentBlock] = []
    if not isinstance(content, list):
        return out
    for b in content:
        if isinstance(b, str):
            out.append(fr.TextBlock(text=b))
            continue
        if not isinstance(b, dict):
            continue
        kind = b.get("type")
        if kind == "text":
            if _str(b.get("text")):
                out.append(fr.TextBlock(text=b["text"]))
        elif kind == "thinking":
            if _str(b.get("thinking")):
                out.append(fr.ThinkingBlock(text=b["thinking"]))
        elif kind == "redacted_thinking":
            continue
        elif kind == "tool_use":
            raw_input = b.get("input")
            out.append(
                fr.ToolUseBlock(
                    id=_str(b.get("id")),
                    name=_str(b.get("name")),
                    input=raw_input if isinstance(raw_input, dict) else {},
                )
            )
        elif kind == "tool_result":
            text = text_of(b.get("content"))
            out.append(
                fr.ToolResultBlock(
                    tool_use_id=_str(b.get("tool_use_id")),
                    content=text,
                    size=len(text.encode("utf-8", "surrogatepass")),
                    is_error=b.get("is_error") is True,
                )
            )
        elif kind in ("image", "document"):
            source = b.get("source") if isinstance(b.get("source"), dict) else {}
            media = _str(source.get("media_type")) if source else ""
            out.append(fr.TextBlock(text=f"[{kind}{' ' + media if media else ''}]"))
        elif isinstance(kind, str):
            out.append(fr.TextBlock(text=f"[{kind} block]"))
    return out


def _where(obj: dict[str, Any], offset: int) -> _Where:
    agent = obj.get("agentId")
    return _Where(
        offset=offset,
        uuid=_str(obj.get("uuid")),
        timestamp=_str(obj.get("timestamp")),
        session_id=_str(obj.get("sessionId")),
        agent_id=agent if isinstance(agent, str) and agent else None,
        sidechain=obj.get("isSidechain") is True,
        cwd=_str(obj.get("cwd")),
        git_branch=_str(obj.get("gitBranch")),
        version=_str(obj.get("version")),
    )


def _record(obj: dict[str, Any], offset: int) -> Record | str:
    """The record of one parsed line, or the reason it carries no conversation."""
    kind = obj.get("type")
    if kind == "summary":
        return LegacySummary(offset, _str(obj.get("summary")), _str(obj.get("leafUuid")))
    if kind == "system":
        if obj.get("subtype") == "compact_boundary":
            meta = obj.get("compactMetadata")
            meta = meta if isinstance(meta, dict) else {}
            pre = meta.get("preTokens")
            return CompactBoundary(
                _where(obj, offset), _str(meta.get("trigger")), pre if isinstance(pre, int) else 0
            )
        return f"system/{_str(obj.get('subtype')) or '?'}"
    if kind not in _CONVERSATION:
        return _str(kind) or "<no type>"
    message = obj.get("message")
    if not isinstance(message, dict):
        return f"{kind}/<no message>"
    where = _where(obj, offset)
    if kind == "user":
        if obj.get("isCompactSummary") is True:
            content = message.get("content")
            return CompactSummary(where, text_of(content))
        return UserLine(where, _blocks(message.get("content")), obj.get("isMeta") is True)
    return AssistantPart(
        where,
        message_id=_str(message.get("id")) or where.uuid,
        request_id=_str(obj.get("requestId")),
        model=_str(message.get("model")),
        blocks=_blocks(message.get("content")),
        synthetic=obj.get("isApiErrorMessage") is True or message.get("model") == "<synthetic>",
    )


def _scrub(value: Any) -> Any:
    """``value`` with lone UTF-16 surrogates replaced by U+FFFD (they cannot be encoded)."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    if isinstance(value, dict):
        return {_scrub(k): _scrub(v) for k, v in value.items()}
    return value


def _decode(raw: bytes) -> Any:
    """The JSON value of one line; raises ``ValueError`` when it is not JSON.

    Claude Code before 2.1.132 could cut an emoji in half when truncating a tool output and write
    the lone UTF-16 surrogate as a JSON escape, which strict decoders refuse; a damaged file can
    hold bytes that are not UTF-8. Such a line costs its broken characters, not the whole line
    (a lost tool result or reply), and never the read.
    """
    try:
        return _decoder.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError):
        pass
    import json  # the rare path only

    try:
        return _scrub(json.loads(raw.decode("utf-8", "replace")))
    except RecursionError as exc:
        raise ValueError("nested too deeply") from exc


def _take(raw: bytes, offset: int, result: ReadResult) -> None:
    """Add the record of one complete line to ``result`` (or count why it has none)."""
    if not raw.strip():
        return
    try:
        obj = _decode(raw)
    except ValueError:
        result.skipped["<not json>"] += 1
        return
    if not isinstance(obj, dict):
        result.skipped["<not object>"] += 1
        return
    rec = _record(obj, offset)
    if isinstance(rec, str):
        result.skipped[rec] += 1
    else:
        result.records.append(rec)


def _complete_object(raw: bytes) -> bool:
    """Whether an unterminated last line is already a whole JSON object: a cut object never
    decodes, so this is a file that ends without a newline, not a line still being written."""
    if not raw.strip():
        return False
    try:
        return isinstance(_decode(raw), dict)
    except ValueError:
        return False


def read_records(path: str | os.PathLike[str], start: int = 0) -> ReadResult:
    """Parse the complete lines of ``path`` from byte ``start`` on (a partial last line is left
    for the next read; a last line without a newline that is a whole JSON object is read)."""
    result = ReadResult(end=start)
    with open(path, "rb") as f:
        f.seek(start)
        pos = start
        carry = b""
        while True:
            chunk = f.read(_CHUNK)
            if not chunk:
                break
            data = carry + chunk
            cut = data.rfind(b"\n")
            if cut < 0:
                carry = data
                continue
            carry = data[cut + 1 :]
            for raw in data[:cut].split(b"\n"):
                _take(raw, pos, result)
                pos += len(raw) + 1
            result.end = pos
    if carry and _complete_object(carry):
        _take(carry, pos, result)
        result.end = pos + len(carry)
    return result
