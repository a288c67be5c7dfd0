"""Frames as readable turns, one entry per frame that says something, for ``read``.

Each entry starts with ``#<seq>``: ``user``, ``assistant``, a tool call (``→ Bash {...}``),
its result (``← result``), a summary, an observation, an agent's note. Long texts are cut at
``cap`` characters and say how to get them whole: the same seq read alone (no cut then, paged
by characters), or the artifact a long tool output lives in. A text is redacted (``clean``)
before it is cut, and cut between tokens (:mod:`.excerpts`); the caller redacts the entry it
gets too. Frames that are bookkeeping (compile decisions, jobs, a runtime's own records) make no
entry.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Final

from continuity import frames as fr
from continuity.mcp_server.excerpts import head, trim_partial_tail
from continuity.retrieval.documents import NOTE_KINDS, note_text, summary_text
from continuity.store.base import BaseStore

__all__ = ["CAP", "render_frame"]

CAP: Final = 600
"""Characters of one text shown in a range (a single seq read alone is shown whole)."""
_INPUT_CAP: Final = 300


Clean = Callable[[str], str]


def _same(text: str) -> str:
    return text


def _cut(text: str, cap: int | None, seq: int, clean: Clean) -> str:
    text = text.strip()
    if cap is None or len(text) <= cap:
        return text
    shown, rest = head(text, cap, clean)
    if not rest:
        return shown
    return f"{shown}… [{rest:,} more chars: read from_seq={seq} to_seq={seq}]"


def _time(ms: int) -> str:
    return time.strftime("%H:%M", time.gmtime(ms / 1000)) if ms else "--:--"


def _tool_input(block: fr.ToolUseBlock, clean: Clean) -> str:
    shown = json.dumps(block.input, ensure_ascii=False, separators=(", ", ": "))
    if len(shown) <= _INPUT_CAP:
        return shown
    return head(shown, _INPUT_CAP, clean)[0] + "…}"


def _result(block: fr.ToolResultBlock, cap: int | None, seq: int, clean: Clean) -> str:
    flag = " (error)" if block.is_error else ""
    if block.artifact_id is not None:
        # a preview was cut where it was written: its last token may be a secret's prefix
        preview = trim_partial_tail(clean(block.preview.strip()))
        if cap is not None and len(preview) > cap:
            preview = head(preview, cap, clean)[0]
        return (
            f"← result{flag}: {preview}… [{block.size:,} bytes in all: "
            f"read artifact={block.artifact_id}]"
        )
    text = block.content
    if not text and block.parts:
        text = "\n".join(
            p.text if isinstance(p, fr.TextBlock) else f"(image {p.media_type})"
            for p in block.parts
        )
    return f"← result{flag}: {_cut(text, cap, seq, clean)}"


def _blocks(frame: fr.MessageAppended, cap: int | None, clean: Clean) -> list[str]:
    out: list[str] = []
    for b in frame.content:
        if isinstance(b, fr.TextBlock):
            if b.text.strip():
                out.append(_cut(b.text, cap, frame.seq, clean))
        elif isinstance(b, fr.ToolUseBlock):
            out.append(f"→ {b.name} {_tool_input(b, clean)}")
        elif isinstance(b, fr.ToolResultBlock):
            out.append(_result(b, cap, frame.seq, clean))
        elif isinstance(b, fr.ImageBlock):
            out.append(f"(image {b.media_type})")
        elif isinstance(b, fr.ProviderBlock) and b.text.strip():
            out.append(f"({b.kind}) {_cut(b.text, cap, frame.seq, clean)}")
        # thinking is left out: the reasoning behind a turn costs tokens and rarely answers
    return out


def _message(frame: fr.MessageAppended, cap: int | None, clean: Clean) -> str | None:
    parts = _blocks(frame, cap, clean)
    if not parts:
        return None
    results_only = all(isinstance(b, fr.ToolResultBlock) for b in frame.content)
    who = "tool" if results_only else frame.role
    head = f"#{frame.seq} {_time(frame.ts_ms)} {who}:"
    if len(parts) == 1 and "\n" not in parts[0]:
        return f"{head} {parts[0]}"
    return head + "".join(f"\n  {p}" for p in parts)


def render_frame(
    frame: fr.Frame, store: BaseStore, *, cap: int | None = CAP, clean: Clean = _same
) -> str | None:
    """One frame as a readable entry (None: nothing to show). ``cap``: the characters of one
    text shown (None: whole); ``clean``: the redaction a text passes before it is cut."""
    seq = frame.seq
    if isinstance(frame, fr.MessageAppended):
        return _message(frame, cap, clean)
    if isinstance(frame, fr.CompactionCheckpointCreated):
        text = summary_text(store, frame)
        shown = "(its summary cannot be read)" if text is None else _cut(text, cap, seq, clean)
        return (
            f"#{seq} {_time(frame.ts_ms)} summary of #{frame.from_seq}–#{frame.to_seq} "
            f"({frame.cut_rule_id}, by {frame.produced_by}): {shown}"
        )
    if isinstance(frame, fr.ObservationRecorded):
        return f"#{seq} {_time(frame.ts_ms)} observation: {_cut(frame.text, cap, seq, clean)}"
    if isinstance(frame, fr.RecordAppended) and frame.kind in NOTE_KINDS:
        kind = frame.kind.rpartition(".")[2]
        return f"#{seq} {_time(frame.ts_ms)} {kind}: {_cut(note_text(frame), cap, seq, clean)}"
    if isinstance(frame, fr.MessagesRetracted):
        spans = ", ".join(f"#{s.from_seq}–#{s.to_seq}" for s in frame.spans)
        return f"#{seq} {_time(frame.ts_ms)} retracted {spans}" + (
            f" ({frame.reason})" if frame.reason else ""
        )
    if isinstance(frame, fr.ThreadCreated):
        title = f" “{frame.title}”" if frame.title else ""
        project = frame.meta.get("project", "")
        return f"#{seq} {_time(frame.ts_ms)} thread started{title}" + (
            f" in {project}" if project else ""
        )
    return None
