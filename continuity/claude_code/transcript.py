"""Reading Claude Code transcripts: JSONL lines into a few typed records, tolerating everything.

The transcript contract (``../shared/design/claude-code.md``) allows unknown line types and
fields, lines that are not JSON or not objects, a half-written last line, progress and snapshot
noise, one API response split over several lines, sidechains, and older ``summary`` lines. This
module turns the complete lines of a byte range into :data:`Record` values and counts what it
skipped; it never raises on content. It imports nothing heavy: it runs on the hook path.

Reads cost time linear in the bytes read and memory bounded by one line (ADR 0016): the
last newline is found by scanning back from the end, nothing past it is parsed, and a line
is loaded whole only once its end is known and only if it is at most :data:`MAX_LINE_BYTES`
long; a longer one is skipped and counted (:data:`SKIPPED_OVERSIZE`), never held in memory.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Callable
from typing import Any, Final, Generic, TypeAlias, TypeVar

import msgspec

from continuity import frames as fr

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
    "read_json_lines",
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


MAX_LINE_BYTES: Final = 64 << 20
"""The longest transcript line a read loads (64 MiB). A complete line that is longer is skipped
and counted under :data:`SKIPPED_OVERSIZE`; an unfinished last line that is longer is left for a
later read, like any unfinished line, without being loaded."""
SKIPPED_OVERSIZE: Final = "<line too long>"


R = TypeVar("R")


class ReadResult(msgspec.Struct, Generic[R]):
    records: list[R] = msgspec.field(default_factory=list)
    end: int = 0
    """The offset just past the last complete line read (where the next read starts)."""
    skipped: Counter[str] = msgspec.field(default_factory=Counter)
    """Lines that carry no conversation, by type; ``<not json>``/``<not object>`` for bad ones,
    :data:`SKIPPED_OVERSIZE` for lines over the size cap (never loaded, so not archived)."""
    pending: int = 0
    """The bytes after ``end`` (an unfinished last line): they hold no newline, so a caller that
    passes ``end + pending`` as the next read's ``no_newline_before`` spares it that scan."""


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


Parse: TypeAlias = Callable[[dict[str, Any], int], R | str]
"""What turns one parsed line (a JSON object) at an offset into a record, or into the name of
the kind of line it is when it carries nothing to keep (counted in ``skipped``)."""


def _take(raw: bytes, offset: int, result: ReadResult[R], parse: Parse[R]) -> None:
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
    rec = parse(obj, offset)
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


def _ends_with_brace(fd: int, lo: int, hi: int) -> bool:
    """Whether bytes ``[lo, hi)`` may be a whole JSON object, judged by their last bytes alone
    (a whole object ends with ``}``), so a line still being written is not read to learn that."""
    n = min(hi - lo, 4096)
    last = os.pread(fd, n, hi - n).rstrip()
    return last.endswith(b"}") if last else hi - lo > n


def _last_newline(fd: int, lo: int, hi: int) -> int | None:
    """The offset of the last newline in bytes ``[lo, hi)`` of ``fd`` (None when there is none).

    Reads backwards from ``hi`` one chunk at a time: a long unfinished last line costs one pass
    over its bytes and one chunk of memory, and nothing before its start is read."""
    while hi > lo:
        start = max(lo, hi - _CHUNK)
        block = os.pread(fd, hi - start, start)
        found = block.rfind(b"\n")
        if found >= 0:
            return start + found
        if len(block) < hi - start:  # the file shrank under us: read only what is certain
            return None
        hi = start
    return None


def _read_lines(
    fd: int, start: int, stop: int, max_line: int, result: ReadResult[R], parse: Parse[R]
) -> None:
    """Add the records of the lines in bytes ``[start, stop)`` (``stop`` just past a newline).

    Chunks are read forwards and split where they hold whole lines. A line that runs past its
    chunk is not accumulated: once its end is found it is read again in one piece, if it is at
    most ``max_line`` bytes long, and skipped otherwise."""
    pos = start  # where the current line starts
    at = start  # where the next chunk starts
    while at < stop:
        chunk = os.pread(fd, min(_CHUNK, stop - at), at)
        if not chunk:
            break  # the file shrank under us
        base, at = at, at + len(chunk)
        last = chunk.rfind(b"\n")
        if last < 0:
            continue  # the current line goes on past this chunk
        i = pos - base
        if i < 0:  # the line began in an earlier chunk: it ends at this chunk's first newline
            first = chunk.find(b"\n")
            _take_span(fd, pos, base + first - pos, max_line, result, parse)
            pos = base + first + 1
            i = first + 1
        if i <= last:
            for raw in chunk[i:last].split(b"\n"):
                if len(raw) > max_line:
                    result.skipped[SKIPPED_OVERSIZE] += 1
                else:
                    _take(raw, pos, result, parse)
                pos += len(raw) + 1
        result.end = pos


def _take_span(
    fd: int, offset: int, length: int, max_line: int, result: ReadResult[R], parse: Parse[R]
) -> None:
    """Take the line of ``length`` bytes at ``offset``, read in one piece, unless it is over
    ``max_line`` bytes (then it is only counted: it is never loaded)."""
    if length > max_line:
        result.skipped[SKIPPED_OVERSIZE] += 1
    else:
        _take(os.pread(fd, length, offset), offset, result, parse)


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


def read_json_lines(
    path: str | os.PathLike[str],
    start: int,
    parse: Parse[R],
    *,
    no_newline_before: int = 0,
    max_line: int | None = None,
) -> ReadResult[R]:
    """Parse the complete JSON lines of ``path`` from byte ``start`` on, each object through
    ``parse`` (any JSONL format: other agents' adapters read their session files with it).

    A partial last line is left for the next read (its length reported as ``pending``); a last
    line without a newline that is a whole JSON object is read. A line over ``max_line`` bytes
    (default :data:`MAX_LINE_BYTES`) is skipped, never loaded. ``no_newline_before`` is an
    offset up to which the caller knows (from an earlier read's ``end + pending``) that the
    bytes from ``start`` hold no newline: the search for the last newline stops there.
    """
    if max_line is None:
        max_line = MAX_LINE_BYTES
    result: ReadResult[R] = ReadResult(end=start)
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        newline = _last_newline(fd, max(start, min(no_newline_before, size)), size)
        if newline is not None:
            _read_lines(fd, start, newline + 1, max_line, result, parse)
        tail = size - result.end
        if 0 < tail <= max_line and _ends_with_brace(fd, result.end, size):
            raw = os.pread(fd, tail, result.end)
            if _complete_object(raw):
                _take(raw, result.end, result, parse)
                result.end = size
        result.pending = max(0, size - result.end)
    finally:
        os.close(fd)
    return result
