"""Reading Gemini CLI session files into a neutral model, both forms.

Gemini CLI records a session in ``~/.gemini/tmp/<project>/chats/``:

* up to v0.38, ``session-<time>-<id8>.json``: one ``ConversationRecord`` (``sessionId``,
  ``projectHash``, ``startTime``, ``lastUpdated``, ``messages``, ``summary``?, ``directories``?)
  rewritten whole on every update;
* from v0.39, ``session-<time>-<id8>.jsonl``: a metadata line, then ``MessageRecord`` lines
  (the same ``id`` re-appended as the message grows: the last form wins, the order is that of
  the first appearance), ``{"$set": {...}}`` patches (``$set.messages`` replaces the whole
  history: a resume, a compression or tool-output masking) and ``{"$rewindTo": "<id>"}`` (that
  message and all after it are dropped). A resumed session writes a metadata line again.

Both become a list of :data:`Item`: :class:`Header`, :class:`Message`, :class:`Rewrite`,
:class:`Rewind` and :class:`Patch`, in file order, each with the byte offset of its line.
Only complete lines are read (a line still being written is left for the next read); a line
that is not a JSON object is skipped and counted, as Gemini CLI skips it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final, TypeAlias, cast

import msgspec

__all__ = [
    "SNAPSHOT_OPEN",
    "Header",
    "Item",
    "Message",
    "Patch",
    "ReadResult",
    "Rewind",
    "Rewrite",
    "is_snapshot",
    "message_text",
    "read_json_record",
    "read_jsonl",
]

SNAPSHOT_OPEN: Final = "<state_snapshot>"


class Header(msgspec.Struct):
    """The metadata line (JSONL) or the record's own fields (JSON)."""

    meta: dict[str, Any]
    offset: int = 0


class Message(msgspec.Struct):
    """One ``MessageRecord`` in the last form this read saw; ``offset`` is its first line's."""

    record: dict[str, Any]
    offset: int = 0

    @property
    def id(self) -> str:
        mid = self.record.get("id")
        return mid if isinstance(mid, str) else ""

    @property
    def type(self) -> str:
        kind = self.record.get("type")
        return kind if isinstance(kind, str) else ""


class Rewrite(msgspec.Struct):
    """``$set.messages``: the history replaced whole."""

    records: list[dict[str, Any]]
    offset: int = 0


class Rewind(msgspec.Struct):
    """``$rewindTo``: ``message_id`` and every message after it dropped."""

    message_id: str
    offset: int = 0


class Patch(msgspec.Struct):
    """Any other ``$set`` (``lastUpdated``, ``summary``, ``sessionId``, ...)."""

    fields: dict[str, Any]
    offset: int = 0


Item: TypeAlias = Header | Message | Rewrite | Rewind | Patch


class ReadResult(msgspec.Struct):
    items: list[Item] = msgspec.field(default_factory=list)
    end: int = 0
    """The offset after the last complete line read."""
    open_at: int | None = None
    """The offset to read again from when the last message may still grow (None: nothing
    open): its first line of this read, when nothing but patches follows it."""
    skipped: dict[str, int] = msgspec.field(default_factory=dict)
    pending: int = 0
    """The bytes of an unfinished last line after ``end``."""
    lost: int = 0
    """What this read could not archive: complete lines (or, in a ``.json``, messages, or the
    whole file) that are not Gemini CLI records."""
    lost_at: list[str] = msgspec.field(default_factory=list)
    """The first of them, as ``file line N (why)``."""


def _classify(obj: dict[str, Any], offset: int) -> Item | None:
    if "$rewindTo" in obj:
        target = obj["$rewindTo"]
        return Rewind(target, offset) if isinstance(target, str) else None
    if "$set" in obj:
        patch = obj["$set"]
        if not isinstance(patch, dict):
            return None
        messages = patch.get("messages")
        if isinstance(messages, list):
            return Rewrite([m for m in messages if isinstance(m, dict)], offset)
        return Patch(patch, offset)
    if isinstance(obj.get("id"), str) and isinstance(obj.get("type"), str):
        return Message(obj, offset)
    if "sessionId" in obj:
        return Header(obj, offset)
    return None


def _parse(obj: dict[str, Any], offset: int) -> Item | str:
    item = _classify(obj, offset)
    if item is None:  # the reader counts and places it as not a record of this format
        raise ValueError("not a Gemini CLI record")
    return item


def read_jsonl(
    path: Path, start: int = 0, *, final: bool = False, no_newline_before: int = 0
) -> ReadResult:
    """The items of the complete lines of a ``.jsonl`` session from byte ``start`` on, a
    message re-appended in the same stretch folded into its first appearance."""
    from continuity.agents.base.ingest import read_lines
    from continuity.agents.base.losses import read_places

    lines = read_lines(path, start, _parse, no_newline_before=no_newline_before)
    out = ReadResult(end=lines.end, pending=lines.pending, skipped=dict(lines.skipped))
    out.lost = lines.lost()
    if out.lost:
        out.lost_at = read_places(path, lines)
    live: dict[str, Message] = {}  # ids appended since the last rewrite or rewind
    for item in cast("list[Item]", lines.records):  # strings are counted, not returned
        if isinstance(item, Message):
            seen = live.get(item.id)
            if seen is not None:
                seen.record = item.record  # the last form wins, in the first one's place
                continue
            live[item.id] = item
        elif isinstance(item, Rewrite | Rewind | Header):
            live.clear()
        out.items.append(item)
    if not final:
        out.open_at = _open_message(out.items)
    return out


def _open_message(items: list[Item]) -> int | None:
    """The first offset of the last message when only patches follow it (it may grow)."""
    for item in reversed(items):
        if isinstance(item, Patch):
            continue
        return item.offset if isinstance(item, Message) else None
    return None


def read_json_record(path: Path, *, final: bool = False) -> ReadResult:
    """The items of a legacy ``.json`` session (read whole: Gemini rewrites it whole)."""
    from continuity.agents.base.lines import decode_json
    from continuity.agents.base.report import shown

    data = path.read_bytes()
    out = ReadResult(end=len(data))
    try:
        obj = decode_json(data)
    except ValueError as exc:
        obj, why = None, "not JSON" if str(exc) != "nested too deeply" else str(exc)
    else:
        why = "not a JSON object"
    if not isinstance(obj, dict):
        # A .json session is rewritten whole: one that does not parse (cut, damaged) holds
        # nothing this reader can place; said, and read whole again when it changes.
        out.skipped["unreadable"] = 1
        out.lost, out.lost_at = 1, [f"{shown(path)} ({why}: a whole-file session)"]
        return out
    meta = {k: v for k, v in obj.items() if k != "messages"}
    out.items.append(Header(meta, 0))
    messages = obj.get("messages")
    for n, m in enumerate(messages if isinstance(messages, list) else [], 1):
        if isinstance(m, dict) and isinstance(m.get("id"), str) and isinstance(m.get("type"), str):
            out.items.append(Message(m, 0))
        else:
            out.skipped["unreadable"] = out.skipped.get("unreadable", 0) + 1
            out.lost += 1
            if len(out.lost_at) < 5:
                out.lost_at.append(f"{shown(path)} message {n} (not a Gemini CLI message)")
    if not final and len(out.items) > 1:
        out.open_at = 0
    return out


def message_text(record: dict[str, Any]) -> str:
    """The text of a message's ``content`` (a string, or parts with ``text``)."""
    content = record.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    if isinstance(content, dict) and isinstance(content.get("text"), str):
        return str(content["text"])
    return ""


def is_snapshot(record: dict[str, Any]) -> bool:
    """Whether a message is the synthetic user message a compression starts the history with."""
    return record.get("type") == "user" and message_text(record).lstrip().startswith(SNAPSHOT_OPEN)
