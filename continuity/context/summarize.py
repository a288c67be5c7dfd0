"""The default summarizer: deterministic and extractive (no network, no model, no clock).

:class:`ExtractiveSummarizer` turns (base summary + new messages) into a cumulative summary of
what coding work needs after a compaction, as short one-line items in sections:

``requests``    the user's own words (Claude Code noise removed), trimmed
``files``       each file read, searched or changed, once, with its latest action — except that a
                later read never hides an earlier change (``edited`` stays ``edited``)
``commands``    each command run with its outcome: ``ok`` or ``error: <the line that says what
                failed>``
``errors``      errors seen, marked ``resolved`` when a later run of the same command succeeds or
                a later change of the same file goes through
``decisions``   assistant sentences that state a decision (``I'll``, ``instead of``…)
``open_tasks``  the unfinished todos of the latest ``TodoWrite`` and a user request no reply follows

Sections are cumulative: new items are appended to the base's, identical items keep only their
newest occurrence, and a section over its token budget drops its oldest items first, so the
newest detail survives. ``open_tasks`` is the exception: it is the current state, so a newer
todo list replaces the older one. The item formats are what this module parses back out of a
base summary (to resolve an earlier error, or update a file's action), so they are part of the
summarizer's id, as is what it extracts: change either and the id must change.

What counts as the user's words, a failure, its error line and a passing run's tally is read
by :mod:`continuity.context.transcript_rules`, as the Claude Code restore reads it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from itertools import islice
from typing import Final

import msgspec

from continuity import frames as fr
from continuity.context.transcript_rules import (
    COMMAND_TOOLS,
    PATH_KEYS,
    command_line,
    decision_sentences,
    error_line,
    is_meta,
    looks_failed,
    ok_detail,
    one_line,
    open_todos,
    prompt_text,
    tool_output,
    trim,
)
from continuity.summary import SummaryContent, SummaryDoc
from continuity.tokens import estimate_text

__all__ = ["DEFAULT_BUDGETS", "SECTION_HEADINGS", "ExtractiveSummarizer"]

SECTION_HEADINGS: Final[Mapping[str, str]] = {
    "earlier": "Earlier",
    "requests": "Requests",
    "files": "Files",
    "commands": "Commands",
    "errors": "Errors",
    "decisions": "Decisions",
    "open_tasks": "Open tasks",
}
"""Sections in the order they are rendered. ``earlier`` only holds the text of a base summary
that came without sections (another summarizer's); sections this module does not know are
carried over from the base and rendered after these, by name."""

DEFAULT_BUDGETS: Final[Mapping[str, int]] = {
    "requests": 450,
    "files": 300,
    "commands": 350,
    "errors": 350,
    "decisions": 350,
    "open_tasks": 200,
}
"""Token budget of each section's items (2,000 in all); other sections get ``default_budget``."""

_REQUEST_CHARS: Final = 300
_DECISION_CHARS: Final = 200
_COMMAND_CHARS: Final = 160
_LINE_CHARS: Final = 160
_PATH_CHARS: Final = 200

_FILE_ACTIONS: Final[Mapping[str, str]] = {
    "Read": "read",
    "Edit": "edited",
    "MultiEdit": "edited",
    "NotebookEdit": "edited",
    "Write": "wrote",
    "Glob": "searched",
    "Grep": "searched",
}
_CHANGES: Final = frozenset({"edited", "wrote"})
_KNOWN_PATH_KEYS: Final = (*PATH_KEYS, "path")  # `path` only of the tools above

# explicit capitals rather than re.I: case-insensitive matching is several times slower
_DECISION: Final = re.compile(
    r"\b(?:I['’]ll|I will|[Ll]et['’]s|[Dd]ecided|[Gg]oing to|[Ii]nstead of|[Tt]he fix is"
    r"|[Rr]oot cause)\b"
)
_DECISION_NEEDLES: Final = (
    "I'll",
    "I’ll",
    "I will",
    "et's",
    "et’s",
    "ecided",
    "oing to",
    "nstead of",
    "he fix is",
    "oot cause",
)  # fmt: skip  (every match of _DECISION holds one)
# "I'll read the file" announces a step, not a decision
_NARRATION: Final = re.compile(
    r"^(?:(?:now|first|next|then|ok|okay|great|good),?\s+)?"
    r"(?:I['’]ll|I will|Let['’]s|I['’]m going to)\s+(?:now\s+|first\s+|then\s+|also\s+)?"
    r"(?:read|look|check|run|re-?run|start|examine|explore|take|search|open|view|inspect|see"
    r"|verify|test|try|find)\b",
    re.I,
)

_UNANSWERED: Final = "unanswered: "
_RESOLVED: Final = " — resolved"
_CMD_ERROR_ITEM: Final = re.compile(r"^`(.+?)` failed: ")
_FILE_ERROR_ITEM: Final = re.compile(r"^(\S+) (.+?) failed: ")


class ExtractiveSummarizer:
    """The default :class:`~continuity.summary.Summarizer`: same input, same bytes.

    ``budgets`` overrides :data:`DEFAULT_BUDGETS` per section (estimated tokens; an item costs
    its estimate plus one for its bullet); sections named nowhere get ``default_budget``.
    """

    def __init__(
        self, *, budgets: Mapping[str, int] | None = None, default_budget: int = 300
    ) -> None:
        self._budgets = {**DEFAULT_BUDGETS, **(budgets or {})}
        self._default_budget = default_budget

    @property
    def id(self) -> str:
        return "continuity.extractive/2"

    def summarize(
        self, base: SummaryDoc | None, messages: Sequence[fr.MessageAppended]
    ) -> SummaryContent:
        if not messages:
            if base is None:
                return SummaryContent(text="", sections={})
            return SummaryContent(
                text=base.text, sections={k: list(v) for k, v in base.sections.items()}
            )
        base_sections: Mapping[str, list[str]] = base.sections if base is not None else {}
        scan = _Scan()
        for message in messages:
            scan.add(message)
        sections = _merge(base_sections, scan)
        if base is not None and not base.sections and base.text:
            sections["earlier"] = [line for line in map(one_line, base.text.splitlines()) if line]
        kept = {
            name: _within_budget(items, self._budgets.get(name, self._default_budget))
            for name, items in sections.items()
        }
        ordered = {name: kept[name] for name in _section_order(kept) if kept[name]}
        return SummaryContent(text=_render(ordered), sections=ordered)


# --- one pass over the new messages ---------------------------------------------------------


class _Call(msgspec.Struct):
    """One tool call and, once its result is seen, how it went."""

    name: str
    command: str | None = None
    path: str | None = None
    action: str | None = None
    seen: bool = False
    failed: bool = False
    detail: str = ""


class _Scan(msgspec.Struct):
    requests: list[str] = msgspec.field(default_factory=list)
    decisions: list[str] = msgspec.field(default_factory=list)
    calls: list[_Call] = msgspec.field(default_factory=list)
    by_id: dict[str, _Call] = msgspec.field(default_factory=dict)
    todos: list[str] | None = None
    last_request: str | None = None
    last_request_at: int = -1
    last_assistant_at: int = -1
    position: int = 0

    def add(self, message: fr.MessageAppended) -> None:
        self.position += 1
        if message.role == "assistant":
            self.last_assistant_at = self.position
        # Claude Code's meta lines and its own compaction summary are not the user's words
        skip_text = message.role != "user" or is_meta(message.meta)
        for block in message.content:
            if isinstance(block, fr.TextBlock):
                if message.role == "assistant":
                    self.decisions.extend(_decisions(block.text))
                elif not skip_text and (request := prompt_text(block.text, _REQUEST_CHARS)):
                    self.requests.append(request)
                    self.last_request, self.last_request_at = request, self.position
            elif isinstance(block, fr.ToolUseBlock):
                self._tool_use(block)
            elif isinstance(block, fr.ToolResultBlock):
                self._tool_result(block)
            # thinking and images carry nothing a summary keeps

    def _tool_use(self, block: fr.ToolUseBlock) -> None:
        call = _Call(name=one_line(block.name).replace(" ", "_") or "tool")
        tool_input = block.input
        if block.name in COMMAND_TOOLS:
            call.command = command_line(tool_input.get("command"), _COMMAND_CHARS) or None
        elif block.name == "TodoWrite":
            self.todos = open_todos(tool_input.get("todos"), _LINE_CHARS)
        action = _FILE_ACTIONS.get(block.name)
        keys = _KNOWN_PATH_KEYS if action is not None else PATH_KEYS
        for key in keys:
            value = tool_input.get(key)
            if isinstance(value, str) and value.strip():
                call.path = trim(one_line(value), _PATH_CHARS)
                call.action = action or call.name
                break
        self.calls.append(call)
        self.by_id[block.id] = call

    def _tool_result(self, block: fr.ToolResultBlock) -> None:
        call = self.by_id.get(block.tool_use_id)
        if call is None:  # its call was summarized in an earlier batch
            call = _Call(name="tool_result")
            self.calls.append(call)
        output = tool_output(block)
        call.seen = True
        call.failed = block.is_error or (call.command is not None and looks_failed(output))
        if call.failed:
            call.detail = error_line(output, _LINE_CHARS) or "error"
        elif call.command is not None:
            call.detail = ok_detail(output, _LINE_CHARS)


def _decisions(text: str) -> list[str]:
    return [
        trim(sentence, _DECISION_CHARS)
        for sentence in decision_sentences(text, _DECISION, _DECISION_NEEDLES)
        if not _NARRATION.match(sentence)
    ]


# --- merging with the base ------------------------------------------------------------------


class _OpenError(msgspec.Struct):
    index: int  # in the errors list
    since: int = 0  # how many changes had been made when it happened


def _merge(base: Mapping[str, list[str]], scan: _Scan) -> dict[str, list[str]]:
    files: dict[str, str] = {}
    for item in base.get("files", []):
        action, _, path = item.partition(" ")
        _touch(files, path or action, action if path else "")

    errors = list(base.get("errors", []))
    changes: list[str] = []  # paths changed, in order, for "resolved after editing …"
    open_errors: dict[tuple[str, str], list[_OpenError]] = {}
    for index, item in enumerate(errors):
        if _RESOLVED not in item and (base_key := _error_key(item)) is not None:
            open_errors.setdefault(base_key, []).append(_OpenError(index))

    commands = list(base.get("commands", []))
    for call in scan.calls:
        if call.command is not None:
            outcome = "no result"
            if call.seen:
                outcome = f"error: {call.detail}" if call.failed else _ok(call.detail)
            commands.append(f"`{call.command}` → {outcome}")
        if call.failed:
            if call.command is not None:
                key: tuple[str, str] | None = ("cmd", call.command)
                subject = f"`{call.command}`"
            elif call.path is not None:
                key, subject = ("file", call.path), f"{call.name} {call.path}"
            else:
                key, subject = None, call.name
            errors.append(f"{subject} failed: {call.detail}")
            if key is not None:
                open_errors.setdefault(key, []).append(_OpenError(len(errors) - 1, len(changes)))
            continue
        if call.path is not None and call.action is not None:
            _touch(files, call.path, call.action)
            if call.action in _CHANGES:
                _resolve(errors, open_errors.pop(("file", call.path), []), " by a later edit")
                changes.append(call.path)
        if call.command is not None and call.seen:
            for error in open_errors.pop(("cmd", call.command), []):
                edited = _first_unique(changes, error.since, 3)
                after = f" after editing {', '.join(edited)}" if edited else ""
                _resolve(errors, [error], f"{after} (rerun ok)")

    merged: dict[str, list[str]] = {
        name: [one_line(item) for item in items]
        for name, items in base.items()
        if name not in SECTION_HEADINGS
    }
    merged["earlier"] = list(base.get("earlier", []))
    merged["requests"] = _newest_unique([*base.get("requests", []), *scan.requests])
    merged["files"] = [f"{action} {path}" if action else path for path, action in files.items()]
    merged["commands"] = _newest_unique(commands)
    merged["errors"] = _newest_unique(errors)
    merged["decisions"] = _newest_unique([*base.get("decisions", []), *scan.decisions])
    merged["open_tasks"] = _open_tasks(base.get("open_tasks", []), scan)
    return merged


def _touch(files: dict[str, str], path: str, action: str) -> None:
    """Move ``path`` to the newest place with its latest action; a read never hides a change."""
    previous = files.pop(path, None)
    if previous in _CHANGES and action not in _CHANGES:
        action = previous
    files[path] = action


def _error_key(item: str) -> tuple[str, str] | None:
    if match := _CMD_ERROR_ITEM.match(item):
        return ("cmd", match.group(1))
    if match := _FILE_ERROR_ITEM.match(item):
        return ("file", match.group(2))
    return None


def _resolve(errors: list[str], resolved: Iterable[_OpenError], how: str) -> None:
    for error in resolved:
        errors[error.index] += f"{_RESOLVED}{how}"


def _first_unique(items: list[str], start: int, n: int) -> list[str]:
    found: list[str] = []
    for item in islice(items, start, None):
        if item not in found:
            found.append(item)
            if len(found) == n:
                break
    return found


def _ok(detail: str) -> str:
    return f"ok ({detail})" if detail else "ok"


def _open_tasks(base: list[str], scan: _Scan) -> list[str]:
    todos = [item for item in base if not item.startswith(_UNANSWERED)]
    unanswered = [item for item in base if item.startswith(_UNANSWERED)]
    if scan.todos is not None:
        todos = scan.todos
    if scan.last_assistant_at > 0:
        unanswered = []
    if scan.last_request is not None and scan.last_request_at > scan.last_assistant_at:
        unanswered = [_UNANSWERED + scan.last_request]
    return _newest_unique([*todos, *unanswered])


# --- budgets and rendering ------------------------------------------------------------------


def _newest_unique(items: Sequence[str]) -> list[str]:
    """Identical items keep only their newest occurrence."""
    return list(reversed(dict.fromkeys(reversed(items))))


def _within_budget(items: list[str], budget: int) -> list[str]:
    """The longest run of newest items whose estimate fits ``budget``: the oldest go first."""
    total = 0
    for start in range(len(items) - 1, -1, -1):
        total += estimate_text(items[start]) + 1
        if total > budget:
            return items[start + 1 :]
    return items


def _section_order(sections: Mapping[str, list[str]]) -> list[str]:
    known = [name for name in SECTION_HEADINGS if name in sections]
    return known + sorted(name for name in sections if name not in SECTION_HEADINGS)


def _render(sections: Mapping[str, list[str]]) -> str:
    parts = []
    for name, items in sections.items():
        heading = SECTION_HEADINGS.get(name) or name.replace("_", " ").capitalize()
        parts.append(f"## {heading}\n" + "\n".join(f"- {item}" for item in items))
    return "\n\n".join(parts)
