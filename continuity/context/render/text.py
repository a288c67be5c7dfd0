"""The bundle as plain text for another agent's context (a restore, a hand-over): a header,
the latest summary, the window one entry per message, older summaries when there is room, all
within ``max_chars`` when given."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, TypeAlias

import msgspec

from continuity import frames as fr
from continuity.context.bundle import ContextBundle, ElidedBlock, ToolStubBlock
from continuity.context.render.parts import (
    EMPTY_MESSAGE,
    NO_OUTPUT,
    compact_json,
    image_text,
    told,
)
from continuity.context.render.system import recall_section, summary_heading

__all__ = ["to_text"]

_RECENT: Final = "## Recent messages"
_TOOL_OUTPUT_LINES: Final = 6
_TOOL_OUTPUT_CHARS: Final = 600
_TOOL_INPUT_CHARS: Final = 300
_INPUT_KEYS: Final = ("command", "file_path", "path", "pattern", "url", "query", "description")
_ENTRY_FLOOR: Final = 160  # an entry is "overly long" past max(this, max_chars // 4)
_SUMMARY_FLOOR: Final = 40  # the summary is dropped rather than cut shorter than this

# the order in which the lines of an entry give up their text: tool output, tool input (and
# image placeholders), prose
_OUTPUT, _INPUT, _PROSE = 0, 1, 2


class _Line(msgspec.Struct, frozen=True):
    tag: str
    body: str
    rank: int

    def text(self) -> str:
        if not self.body:
            return self.tag
        # continuation lines are indented, so every line at column 0 starts with a tag
        return f"{self.tag} " + self.body.replace("\n", "\n  ")


_Entry: TypeAlias = tuple[_Line, ...]


def _clip(text: str, n: int) -> str:
    """``text`` in at most ``n`` characters, its beginning kept and the cut marked with "…"."""
    if len(text) <= n:
        return text
    if n <= 0:
        return ""
    return text[: n - 1].rstrip() + "…"


def _first_lines(text: str, lines: int, chars: int) -> str:
    all_lines = text.strip().splitlines()
    head = "\n".join(all_lines[:lines])
    if len(all_lines) > lines and len(head) < chars:
        return head.rstrip() + "…"
    return _clip(head, chars)


def _input_digest(tool_input: dict[str, Any]) -> str:
    for key in _INPUT_KEYS:
        value = tool_input.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return compact_json(tool_input)


def _entry(role: str, content: list[Any]) -> _Entry:
    lines: list[_Line] = []
    for block in content:
        if isinstance(block, fr.TextBlock) and block.text.strip():
            lines.append(_Line(f"[{role}]", block.text.strip(), _PROSE))
        elif isinstance(block, fr.ToolUseBlock):
            digest = _first_lines(_input_digest(block.input), _TOOL_OUTPUT_LINES, _TOOL_INPUT_CHARS)
            lines.append(_Line(f"[tool_use {block.name}]", digest, _INPUT))
        elif isinstance(block, fr.ToolResultBlock | ToolStubBlock):
            status = "error" if block.is_error else "ok"
            output = block.text() if isinstance(block, ToolStubBlock) else block.text or NO_OUTPUT
            body = _first_lines(output, _TOOL_OUTPUT_LINES, _TOOL_OUTPUT_CHARS)
            if isinstance(block, fr.ToolResultBlock) and block.artifact_id is not None:
                body += f"\n({block.size} bytes in all: artifact {block.artifact_id})"
            lines.append(_Line(f"[tool_result {status}]", body, _OUTPUT))
        elif isinstance(block, fr.ImageBlock):
            lines.append(_Line(f"[{role}]", image_text(block), _INPUT))
        elif isinstance(block, fr.ProviderBlock) and told(block):
            lines.append(_Line(f"[{role}]", str(told(block)), _PROSE))
        elif isinstance(block, ElidedBlock) and block.block_type == "tool_use":
            lines.append(_Line(f"[tool_use {block.tool_name}]", block.text(), _INPUT))
        elif isinstance(block, ElidedBlock) and block.block_type == "text":
            lines.append(_Line(f"[{role}]", block.text(), _PROSE))
    return tuple(lines) or (_Line(f"[{role}]", EMPTY_MESSAGE, _PROSE),)


def _entry_text(lines: Sequence[_Line]) -> str:
    return "\n".join(line.text() for line in lines)


def _shrink(entry: _Entry, limit: int) -> str:
    """The entry in at most ``limit`` characters: tool outputs give up their text first, then
    tool inputs and images, then prose; the later lines of a rank first, so the entry keeps its
    beginning, and each body keeps its own beginning."""
    text = _entry_text(entry)
    excess = len(text) - limit
    if excess <= 0:
        return text
    lines = list(entry)
    for rank in (_OUTPUT, _INPUT, _PROSE):
        for i in reversed(range(len(lines))):
            line = lines[i]
            if excess <= 0:
                break
            if line.rank != rank or len(line.body) <= 1:
                continue
            body = _clip(line.body, max(1, len(line.body) - excess))
            excess -= len(line.body) - len(body)
            lines[i] = msgspec.structs.replace(line, body=body)
    return _clip(_entry_text(lines), limit)


def _min_entry_len(entry: _Entry) -> int:
    """The shortest an entry may become and still count as kept: its first tag and "…"."""
    return len(entry[0].tag) + 2


def _compose(header: str, summaries: list[str], entries: list[str]) -> str:
    sections = [header, *summaries]
    if entries:
        sections.append("\n".join([_RECENT, *entries]))
    return "\n\n".join(sections)


def to_text(bundle: ContextBundle, *, max_chars: int | None = None) -> str:
    """The bundle as plain text for another agent's context.

    A header line (thread, anchor seq, strategy), the latest summary, the window under
    "## Recent messages" (one entry per message; tool outputs as their first lines), and older
    summaries when there is room. Within ``max_chars`` (counted in ``str`` characters) the
    newest messages are kept and the oldest dropped first, then the summary is cut (its beginning
    kept, "…" marking the cut), then the newest entry itself; very long entries are shortened
    (tool outputs first) before anything else.
    """
    if max_chars is not None and max_chars < 0:
        raise ValueError(f"max_chars must be >= 0, not {max_chars}")
    header = (
        f"# Context of thread {bundle.thread_id} at seq {bundle.anchor_seq} "
        f"(strategy {bundle.strategy})"
    )
    summaries = bundle.summaries
    latest = summaries[-1] if summaries else None
    older = [
        f"## Earlier summary, through seq {s.to_seq}\n{s.text.strip()}"
        for s in reversed(summaries[:-1])
    ]
    entries = [_entry(m.role, list(m.content)) for m in bundle.messages]
    texts = [_entry_text(e) for e in entries]
    latest_heading = summary_heading(latest) if latest else ""
    latest_text = latest.text.strip() if latest else ""
    latest_section = [f"{latest_heading}\n{latest_text}"] if latest else []
    recall = recall_section(bundle)
    optional = [recall, *older] if recall else older  # shown only when everything else fits

    full = _compose(header, [*latest_section, *optional], texts)
    if max_chars is None or len(full) <= max_chars:
        return full
    if len(header) >= max_chars:
        return _clip(header, max_chars)

    # the newest messages that fit beside the whole latest summary, long entries shortened
    cap = max(_ENTRY_FLOOR, max_chars // 4)
    capped = [_shrink(e, cap) for e in entries]
    used = len(header) + sum(2 + len(s) for s in latest_section) + 2 + len(_RECENT)
    kept: list[str] = []
    for text in reversed(capped):
        if used + 1 + len(text) > max_chars:
            break
        kept.append(text)
        used += 1 + len(text)
    kept.reverse()
    if kept:
        extra: list[str] = []
        if len(kept) == len(capped):
            for section in optional:
                if used + 2 + len(section) > max_chars:
                    break
                extra.append(section)
                used += 2 + len(section)
        return _compose(header, [*latest_section, *extra], kept)

    # not even the newest message fits beside the whole summary: cut the summary
    newest = capped[-1:]
    window_cost = 2 + len(_RECENT) + 1 + len(newest[0]) if newest else 0
    room = max_chars - len(header) - 2 - len(latest_heading) - 1 - window_cost
    if latest and room >= min(len(latest_text), _SUMMARY_FLOOR):
        return _compose(header, [f"{latest_heading}\n{_clip(latest_text, room)}"], newest)
    if not entries:
        return header

    # then the newest message itself: beside the shortest summary, then alone
    entry = entries[-1]
    if latest:
        section = f"{latest_heading}\n{_clip(latest_text, _SUMMARY_FLOOR)}"
        limit = max_chars - len(header) - 2 - len(section) - 2 - len(_RECENT) - 1
        if limit >= _min_entry_len(entry):
            return _compose(header, [section], [_shrink(entry, limit)])
    limit = max_chars - len(header) - 2 - len(_RECENT) - 1
    if limit >= _min_entry_len(entry):
        return _compose(header, [], [_shrink(entry, limit)])
    return header
