"""Rendering a context bundle for a model: Anthropic Messages, OpenAI Chat Completions, plain text.

Pure and deterministic: a renderer reads only the bundle (which holds the summary texts), never
the store, and the same bundle always renders to the same value.

The two API shapes share one normalisation of the recent window, so both always validate:

* roles alternate user/assistant and the first message is the user's; a ``system`` message of
  the window joins the system prompt (Anthropic's ``system`` parameter, OpenAI's leading system
  message), after ``system_prefix`` and before the summaries;
* a tool call is answered by exactly one tool result in the very next user turn, matched by
  position: the k-th call with an id pairs with the k-th result with that id, so a runtime that
  reuses ids (numbering calls per turn) keeps every pair, a reused id being renamed in the
  request (``<id>_2``, …); anything that would break the pairing (a result whose call fell out
  of the window, a call whose result is not in it) is turned into a text block that says what
  it was;
* thinking is dropped (its signature cannot be replayed), images become a text placeholder, an
  empty message gets a placeholder text;
* an elided block reads as its stub's text; an elided tool call keeps its id and name, and its
  input is ``{"elided": <the stub's text>}``, so it still pairs with its result.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final, Literal, TypeAlias

import msgspec

from continuity import frames as fr
from continuity.context.bundle import (
    ContextBundle,
    ElidedBlock,
    SummaryItem,
    ToolStubBlock,
    bundle_bytes,
)

__all__ = ["CONTINUING", "FORMATS", "Format", "render", "to_anthropic", "to_openai", "to_text"]

Format: TypeAlias = Literal["json", "anthropic", "openai", "text"]
FORMATS: Final[tuple[Format, ...]] = ("json", "anthropic", "openai", "text")

CONTINUING: Final = "(continuing the conversation)"
_EMPTY_MESSAGE: Final = "(no visible content)"
_NO_OUTPUT: Final = "(no output)"

# --- the normalised window (shared by the API shapes) ---------------------------------------


class _Text(msgspec.Struct, frozen=True):
    text: str


class _Use(msgspec.Struct, frozen=True):
    id: str
    name: str
    input: dict[str, Any]


class _Result(msgspec.Struct, frozen=True):
    tool_use_id: str
    content: str
    is_error: bool


_Part: TypeAlias = _Text | _Use | _Result


class _Turn(msgspec.Struct):
    role: Literal["user", "assistant"]
    parts: list[_Part]


def _compact_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _result_content(block: fr.ToolResultBlock) -> str:
    if block.artifact_id is None:
        return block.content or _NO_OUTPUT
    note = (
        f"[output shortened: {block.size} bytes in all; "
        f"the whole output is in artifact {block.artifact_id}]"
    )
    return f"{block.preview}\n{note}" if block.preview else note


def _image_text(block: fr.ImageBlock) -> str:
    where = f", artifact {block.artifact_id}" if block.artifact_id else ""
    return f"[image ({block.media_type}{where}) not shown]"


def _describe(part: _Use | _Result) -> _Text:
    """A tool call or result that cannot stand as one in the request, told as text."""
    if isinstance(part, _Use):
        return _Text(
            f"[tool call {part.name} (id {part.id}) with input {_compact_json(part.input)}; "
            "its result is not in this context]"
        )
    err = " (error)" if part.is_error else ""
    return _Text(
        f"[tool result{err} for call {part.tool_use_id}, whose call is not in this context]\n"
        f"{part.content}"
    )


def _part(block: object) -> _Part | None:
    if isinstance(block, fr.TextBlock):
        return _Text(block.text) if block.text.strip() else None
    if isinstance(block, fr.ToolUseBlock):
        return _Use(block.id, block.name, block.input)
    if isinstance(block, fr.ToolResultBlock):
        return _Result(block.tool_use_id, _result_content(block), block.is_error)
    if isinstance(block, ToolStubBlock):
        return _Result(block.tool_use_id, block.text(), block.is_error)
    if isinstance(block, fr.ImageBlock):
        return _Text(_image_text(block))
    if isinstance(block, ElidedBlock):
        if block.block_type == "tool_use":
            return _Use(block.tool_use_id, block.tool_name, {"elided": block.text()})
        if block.block_type == "text":
            return _Text(block.text())
    return None  # thinking: a signed block cannot be replayed, an unsigned one is not wanted


def _placed(part: _Part, role: str) -> _Part:
    """The part as it may stand in a ``role`` turn: a call only in an assistant turn, a result
    only in a user turn."""
    if isinstance(part, _Text):
        return part
    wanted = "assistant" if isinstance(part, _Use) else "user"
    return part if role == wanted else _describe(part)


def _system_messages(bundle: ContextBundle) -> list[str]:
    """The text of the window's system messages, in order (anything else in them told as
    text): they belong in the system prompt, not in a user turn."""
    found = []
    for item in bundle.messages:
        if item.role != "system":
            continue
        texts = []
        for block in item.content:
            part = _part(block)
            if part is not None:
                texts.append(part.text if isinstance(part, _Text) else _describe(part).text)
        if texts:
            found.append("\n\n".join(texts))
    return found


def _turns(bundle: ContextBundle) -> list[_Turn]:
    """The window as alternating turns with valid tool pairing (see the module docstring)."""
    turns: list[_Turn] = []
    for item in bundle.messages:
        if item.role == "system":
            continue  # in the system prompt (_system_text)
        role: Literal["user", "assistant"] = "assistant" if item.role == "assistant" else "user"
        parts: list[_Part] = []
        for block in item.content:
            part = _part(block)
            if part is None:
                continue
            parts.append(_placed(part, role))
        if turns and turns[-1].role == role:
            turns[-1].parts.extend(parts)
        else:
            turns.append(_Turn(role, parts))
    if not turns or turns[0].role != "user":
        turns.insert(0, _Turn("user", [_Text(CONTINUING)]))
    _pair(turns)
    for turn in turns:
        if not turn.parts:
            turn.parts.append(_Text(_EMPTY_MESSAGE))
    last = turns[-1]
    if last.role == "assistant":
        # the Messages API rejects a final assistant turn that ends in whitespace
        last.parts = [_Text(p.text.rstrip()) if isinstance(p, _Text) else p for p in last.parts]
    return turns


def _pair(turns: list[_Turn]) -> None:
    """Keep a call only if the next turn answers it, and a result only if it answers a call of
    the turn just before, matched by position (the k-th call with an id pairs with the k-th
    result with it); tell the rest as text. An id already used earlier in the request is
    renamed in the call and its result, so ids stay unique. Results go first in their turn, in
    call order (the Messages API wants a user turn's tool results before its other content)."""
    taken = {p.id for t in turns for p in t.parts if isinstance(p, _Use)}
    taken |= {p.tool_use_id for t in turns for p in t.parts if isinstance(p, _Result)}
    seen: set[str] = set()
    order: dict[str, int] = {}  # the kept calls of the previous assistant turn -> their order
    waiting: dict[str, list[str]] = {}  # a call's id -> the ids its results get, in call order
    for i, turn in enumerate(turns):
        if turn.role == "assistant":
            nxt = turns[i + 1].parts if i + 1 < len(turns) else []
            answers: dict[str, int] = {}
            for p in nxt:
                if isinstance(p, _Result):
                    answers[p.tool_use_id] = answers.get(p.tool_use_id, 0) + 1
            order, waiting = {}, {}
            parts: list[_Part] = []
            for p in turn.parts:
                if isinstance(p, _Use):
                    k = sum(len(v) for key, v in waiting.items() if key == p.id)
                    if k >= answers.get(p.id, 0):
                        p = _describe(p)  # no result of its own in the next turn
                    else:
                        new = p.id if p.id not in seen else _fresh_id(p.id, taken)
                        seen.add(new)
                        order[new] = len(order)
                        waiting.setdefault(p.id, []).append(new)
                        p = _Use(new, p.name, p.input)
                parts.append(p)
            turn.parts = parts
            continue
        results: list[_Result] = []
        rest: list[_Part] = []
        for p in turn.parts:
            if isinstance(p, _Result):
                ids = waiting.get(p.tool_use_id)
                if ids:
                    results.append(_Result(ids.pop(0), p.content, p.is_error))
                    continue
                p = _describe(p)  # no call just before, or more results than calls
            rest.append(p)
        results.sort(key=lambda r: order[r.tool_use_id])
        turn.parts = [*results, *rest]
        order, waiting = {}, {}


def _fresh_id(base: str, taken: set[str]) -> str:
    """``base`` with the first ``_<n>`` suffix no other call or result of the request uses."""
    n = 2
    while f"{base}_{n}" in taken:
        n += 1
    taken.add(f"{base}_{n}")
    return f"{base}_{n}"


def _summary_heading(summary: SummaryItem) -> str:
    return f"## Summary of the conversation through seq {summary.to_seq}"


def _recall_section(bundle: ContextBundle) -> str:
    """The recalled messages, oldest first, under one heading ("" when there are none)."""
    recalled = sorted(bundle.recalled, key=lambda r: r.seq)
    if not recalled:
        return ""
    lines = [_RECALLED]
    for r in recalled:
        who = f" {r.role}" if r.role else ""
        lines.append(f"- [seq {r.seq}{who}] {' '.join(r.text.split())}")
    return "\n".join(lines)


def _system_text(bundle: ContextBundle, system_prefix: str | None) -> str:
    sections = [system_prefix.rstrip()] if system_prefix and system_prefix.strip() else []
    sections += [text.strip() for text in _system_messages(bundle) if text.strip()]
    sections += [f"{_summary_heading(s)}\n\n{s.text.strip()}" for s in bundle.summaries]
    recall = _recall_section(bundle)
    if recall:
        sections.append(recall)
    return "\n\n".join(sections)


# --- Anthropic Messages ---------------------------------------------------------------------


def _anthropic_block(part: _Part) -> dict[str, Any]:
    if isinstance(part, _Text):
        return {"type": "text", "text": part.text}
    if isinstance(part, _Use):
        import copy  # on use: a restore (text) never needs it

        return {
            "type": "tool_use",
            "id": part.id,
            "name": part.name,
            "input": copy.deepcopy(part.input),
        }
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": part.tool_use_id,
        "content": part.content,
    }
    if part.is_error:
        block["is_error"] = True
    return block


def to_anthropic(bundle: ContextBundle, *, system_prefix: str | None = None) -> dict[str, Any]:
    """The bundle as an Anthropic Messages API request body: ``{"system", "messages"}``.

    ``system`` is ``system_prefix``, then the window's system messages, then the summaries
    (ascending, each under a heading naming the seq it runs through) and what recall found; it
    is left out when there is none of them.
    """
    turns = _turns(bundle)
    request: dict[str, Any] = {}
    system = _system_text(bundle, system_prefix)
    if system:
        request["system"] = system
    request["messages"] = [
        {"role": t.role, "content": [_anthropic_block(p) for p in t.parts]} for t in turns
    ]
    return request


# --- OpenAI Chat Completions ----------------------------------------------------------------


def _joined_text(parts: list[_Part]) -> str | None:
    texts = [p.text for p in parts if isinstance(p, _Text)]
    return "\n\n".join(texts) if texts else None


def to_openai(bundle: ContextBundle, *, system_prefix: str | None = None) -> list[dict[str, Any]]:
    """The bundle as Chat Completions ``messages``: a system message (``system_prefix``, the
    window's system messages, the summaries, recall) when there is any system text, then the
    window; tool results follow the call that made them."""
    turns = _turns(bundle)
    out: list[dict[str, Any]] = []
    system = _system_text(bundle, system_prefix)
    if system:
        out.append({"role": "system", "content": system})
    for turn in turns:
        if turn.role == "assistant":
            msg: dict[str, Any] = {"role": "assistant", "content": _joined_text(turn.parts)}
            calls = [
                {
                    "id": p.id,
                    "type": "function",
                    "function": {"name": p.name, "arguments": _compact_json(p.input)},
                }
                for p in turn.parts
                if isinstance(p, _Use)
            ]
            if calls:
                msg["tool_calls"] = calls
            out.append(msg)
            continue
        for p in turn.parts:
            if isinstance(p, _Result):
                content = f"[error] {p.content}" if p.is_error else p.content
                out.append({"role": "tool", "tool_call_id": p.tool_use_id, "content": content})
        text = _joined_text(turn.parts)
        if text is not None:
            out.append({"role": "user", "content": text})
    return out


# --- plain text -----------------------------------------------------------------------------

_RECENT: Final = "## Recent messages"
_RECALLED: Final = "## Recalled from earlier in this thread"
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
    return _compact_json(tool_input)


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
            if isinstance(block, ToolStubBlock):
                output = block.text()
            elif block.artifact_id is None:
                output = block.content or _NO_OUTPUT
            else:
                output = block.preview or _NO_OUTPUT
            body = _first_lines(output, _TOOL_OUTPUT_LINES, _TOOL_OUTPUT_CHARS)
            if isinstance(block, fr.ToolResultBlock) and block.artifact_id is not None:
                body += f"\n({block.size} bytes in all: artifact {block.artifact_id})"
            lines.append(_Line(f"[tool_result {status}]", body, _OUTPUT))
        elif isinstance(block, fr.ImageBlock):
            lines.append(_Line(f"[{role}]", _image_text(block), _INPUT))
        elif isinstance(block, ElidedBlock) and block.block_type == "tool_use":
            lines.append(_Line(f"[tool_use {block.tool_name}]", block.text(), _INPUT))
        elif isinstance(block, ElidedBlock) and block.block_type == "text":
            lines.append(_Line(f"[{role}]", block.text(), _PROSE))
    return tuple(lines) or (_Line(f"[{role}]", _EMPTY_MESSAGE, _PROSE),)


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
    latest_heading = _summary_heading(latest) if latest else ""
    latest_text = latest.text.strip() if latest else ""
    latest_section = [f"{latest_heading}\n{latest_text}"] if latest else []
    recall = _recall_section(bundle)
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


# --- one front door -------------------------------------------------------------------------

_json_encoder: Final = msgspec.json.Encoder()


def render(bundle: ContextBundle, fmt: Format, **kw: Any) -> str:
    """The bundle rendered as a string: JSON for "json" (the bundle's canonical bytes),
    "anthropic" and "openai"; plain text for "text". ``kw`` goes to the format's function."""
    if fmt == "json":
        if kw:
            raise TypeError(f"format 'json' takes no options (got {', '.join(sorted(kw))})")
        return bundle_bytes(bundle).decode()
    if fmt == "anthropic":
        return _json_encoder.encode(to_anthropic(bundle, **kw)).decode()
    if fmt == "openai":
        return _json_encoder.encode(to_openai(bundle, **kw)).decode()
    if fmt == "text":
        return to_text(bundle, **kw)
    raise ValueError(f"unknown format {fmt!r} (known: {', '.join(FORMATS)})")
