"""opencode's messages and parts as continuity's content blocks.

An assistant message (one step of opencode's model loop) becomes one assistant frame — its
``text``, ``reasoning`` and ``tool`` parts as text, thinking and tool-use blocks — followed by one
user frame with the results of its tools (where a model expects them; compile never separates a
call from its result). A tool's result is its ``state.output`` (``state.error`` when it failed;
a note when it never finished). A completed tool whose output opencode later *pruned*
(``state.time.compacted``) keeps its output in opencode's store; when the output is gone, the
result says it was cleared, so the archive shows what happened instead of an empty result.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Final

from continuity import frames as fr

__all__ = ["CLEARED", "Converted", "assistant_blocks", "is_summary", "part_text", "user_blocks"]

CLEARED: Final = "[output cleared by opencode (pruned) before it was archived]"
_SKIPPED_PARTS: Final = frozenset({"step-start", "step-finish", "snapshot", "patch", "retry"})


@dataclass
class Converted:
    """A message's blocks, the tool results that follow it, and what to note in ``meta``."""

    blocks: list[fr.ContentBlock] = field(default_factory=list)
    results: list[fr.ContentBlock] = field(default_factory=list)
    pruned: list[str] = field(default_factory=list)
    synthetic: bool = False
    compaction: dict[str, Any] | None = None
    """The ``compaction`` part of a user message (opencode's compaction starts here)."""


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def part_text(parts: list[dict[str, Any]]) -> str:
    """The text of a message's ``text`` parts (the summary of a compaction answer)."""
    return "\n\n".join(
        _text(p.get("text")) for p in parts if p.get("type") == "text" and p.get("text")
    )


def is_summary(info: dict[str, Any]) -> bool:
    """Whether an assistant message is opencode's compaction summary."""
    return info.get("role") == "assistant" and (
        info.get("summary") is True or info.get("mode") == "compaction"
    )


def _other_part(part: dict[str, Any]) -> fr.ContentBlock | None:
    kind = _text(part.get("type"))
    if kind == "file":
        name = _text(part.get("filename")) or _text(part.get("url"))[:200]
        return fr.TextBlock(text=f"[file: {name} ({_text(part.get('mime'))})]")
    if kind == "agent":
        return fr.TextBlock(text=f"[agent: {_text(part.get('name'))}]")
    if kind == "subtask":
        what = _text(part.get("description")) or _text(part.get("prompt"))
        return fr.TextBlock(text=f"[subtask for {_text(part.get('agent'))}: {what}]")
    return None


def user_blocks(parts: list[dict[str, Any]]) -> Converted:
    out = Converted()
    for part in parts:
        kind = part.get("type")
        if kind == "compaction":
            out.compaction = part
        elif kind == "text":
            if part.get("ignored") is True or not part.get("text"):
                continue
            out.synthetic = out.synthetic or part.get("synthetic") is True
            out.blocks.append(fr.TextBlock(text=_text(part.get("text"))))
        elif kind not in _SKIPPED_PARTS:
            block = _other_part(part)
            if block is not None:
                out.blocks.append(block)
    return out


def _tool_result(
    part: dict[str, Any], call_id: str, final: bool
) -> tuple[fr.ToolResultBlock, bool]:
    """The result block of a tool part, and whether its output was pruned."""
    state = _dict(part.get("state"))
    status = state.get("status")
    pruned = "compacted" in _dict(state.get("time"))
    if status == "completed":
        output = _text(state.get("output"))
        if pruned and not output:
            output = CLEARED
        return fr.ToolResultBlock(tool_use_id=call_id, content=output, size=len(output)), pruned
    if status == "error":
        error = _text(state.get("error")) or "the tool failed"
        return fr.ToolResultBlock(
            tool_use_id=call_id, content=error, size=len(error), is_error=True
        ), False
    when = " when the session ended" if final else ""
    note = f"[the tool did not finish: {status or 'unknown'}{when}]"
    return fr.ToolResultBlock(
        tool_use_id=call_id, content=note, size=len(note), is_error=True
    ), False


def assistant_blocks(parts: list[dict[str, Any]], final: bool) -> Converted:
    out = Converted()
    for part in parts:
        kind = part.get("type")
        if kind == "text":
            if part.get("text"):
                out.blocks.append(fr.TextBlock(text=_text(part.get("text"))))
        elif kind == "reasoning":
            if part.get("text"):
                out.blocks.append(fr.ThinkingBlock(text=_text(part.get("text"))))
        elif kind == "tool":
            call_id = _text(part.get("callID")) or _text(part.get("id"))
            state = _dict(part.get("state"))
            tool_input = state.get("input")
            out.blocks.append(
                fr.ToolUseBlock(
                    id=call_id,
                    name=_text(part.get("tool")) or "tool",
                    input=tool_input if isinstance(tool_input, dict) else {},
                )
            )
            result, pruned = _tool_result(part, call_id, final)
            out.results.append(result)
            if pruned:
                out.pruned.append(call_id)
        elif kind not in _SKIPPED_PARTS:
            block = _other_part(part)
            if block is not None:
                out.blocks.append(block)
    return out
