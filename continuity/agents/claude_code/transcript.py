"""Reading Claude Code transcripts: JSONL lines into a few typed records, tolerating everything.

The transcript contract (``../shared/design/claude-code.md``) allows unknown line types and
fields, lines that are not JSON or not objects, a half-written last line, progress and snapshot
noise, one API response split over several lines, sidechains, and older ``summary`` lines. This
module turns the complete lines of a byte range into :data:`Record` values and counts what it
skipped; it never raises on content. It imports nothing heavy: it runs on the hook path.

The bytes are read by the adapters' shared reader (:mod:`continuity.agents.base.lines`: time
linear in the bytes read, memory bounded by one line, lines over :data:`MAX_LINE_BYTES`
counted, never loaded); this module gives it Claude Code's records.
"""

from __future__ import annotations

import os
from typing import Any, Final, TypeAlias

import msgspec

from continuity import frames as fr
from continuity.agents.base.lines import (
    MAX_LINE_BYTES,
    SKIPPED_OVERSIZE,
    ReadResult,
    read_json_lines,
)

__all__ = [
    "MAX_LINE_BYTES",
    "SKIPPED_OVERSIZE",
    "AssistantPart",
    "CompactBoundary",
    "CompactSummary",
    "LegacySummary",
    "ReadResult",
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
    usage: dict[str, int] | None = None
    """The API's ``usage`` of the response (input, cache creation, cache read, output tokens):
    how full Claude's context was (:mod:`continuity.rolling.usage`)."""


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
    """The record of one parsed line, or the reason it carries no conversation; raises
    ``ValueError`` for a damaged line (no type, a conversation line without a message)."""
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
    if not isinstance(kind, str) or not kind:
        # every transcript line has a type: this one is damaged (the reader names it)
        raise ValueError("a line without a type")
    if kind not in _CONVERSATION:
        # A kind not known here is skipped and counted, a message in it too: Claude Code writes
        # lines of its own that carry one and are not the conversation (2.1.328's
        # ``api-request-blob`` holds each request's payload, a copy of what the user and tool
        # lines already say), and new kinds come with new versions.
        return kind
    message = obj.get("message")
    if not isinstance(message, dict):
        raise ValueError(f"a {kind} line without a message")
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
        usage=_usage(message.get("usage")),
    )


_USAGE_KEYS: Final = (
    ("input_tokens", "usage_input"),
    ("cache_creation_input_tokens", "usage_cache_creation"),
    ("cache_read_input_tokens", "usage_cache_read"),
    ("output_tokens", "usage_output"),
)


def _usage(raw: Any) -> dict[str, int] | None:
    """A response's token counts by the meta keys they are kept under; None when it has none."""
    if not isinstance(raw, dict):
        return None
    found = {
        key: value
        for name, key in _USAGE_KEYS
        if isinstance(value := raw.get(name), int) and not isinstance(value, bool) and value >= 0
    }
    return found or None


def read_records(
    path: str | os.PathLike[str],
    start: int = 0,
    *,
    no_newline_before: int = 0,
    max_line: int | None = None,
) -> ReadResult[Record]:
    """Parse the complete lines of a Claude Code transcript ``path`` from byte ``start`` on
    (:func:`read_json_lines` with this module's records)."""
    return read_json_lines(
        path, start, _record, no_newline_before=no_newline_before, max_line=max_line
    )
