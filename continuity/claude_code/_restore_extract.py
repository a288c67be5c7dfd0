"""What the restore extracts from the messages before a compaction (its own extraction: the
compaction summarizer's output is a contract of its own, ``contracts/summary.md``).

One pass over the messages gathers, in the order they are worth to Claude after a compaction:
files changed; commands, deduplicated by their first line, with how often they ran and how the
last run went; errors by the line that carries them, and what fixed them; files read; the user's
own words; open tasks; decisions. :mod:`continuity.claude_code._restore_pack` turns this into
text within a budget.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final

from continuity import frames as fr
from continuity.context.summarize import open_todos

__all__ = ["Command", "Extract", "error_line", "extract"]

_EDIT_TOOLS: Final = frozenset({"Edit", "Write", "MultiEdit", "NotebookEdit"})
_READ_TOOLS: Final = frozenset({"Read"})
_COMMAND_TOOLS: Final = frozenset({"Bash", "bash", "shell"})
_PATH_KEYS: Final = ("file_path", "notebook_path", "filePath")
_SCAN_CHARS: Final = 100_000
_ERROR_SCAN_LINES: Final = 400
_LINE_CHARS: Final = 200
_COMMAND_CHARS: Final = 200
_PROMPT_CHARS: Final = 600
_DECISION_CHARS: Final = 220

# --- the user's words -------------------------------------------------------------------------

_WRAPPER_BLOCK: Final = re.compile(
    r"<(system-reminder|command-name|command-message|command-args|local-command-stdout"
    r"|local-command-stderr)>.*?</\1>",
    re.S,
)
_NOISE_LINE: Final = (
    "Caveat:",
    "[Request interrupted",
    "<system-reminder>",
    "</system-reminder>",
    "This session is being continued from a previous conversation",
)
_NOT_A_PROMPT: Final = ("<task-notification>",)  # a background task's end, as a user line
_META_KEYS: Final = ("is_meta", "isMeta", "isCompactSummary")

# --- error lines ------------------------------------------------------------------------------

_VERDICT: Final = re.compile(r"^[ \t]*(?:FAILED|ERROR)\b|^[ \t]*\d+\) test\b")  # pytest, ExUnit
# literal starts (no ``\b\w*`` before them): this is searched in every command's output
_ERROR_MESSAGE: Final = re.compile(
    r"(?:Error|Exception)(?::|$)|(?:error|fatal|panic)(?:\[\w+\])?:|^\*\* \(|ERROR:"
)
_FAILURE_WORD: Final = re.compile(
    r"(?i)\bfail(?:ed|ure|ures|s)?\b|\berrors?\b|\bnot found\b|\bno such\b|\bdenied\b"
    r"|\bcannot\b|\bcan't\b|\binvalid\b|\bundefined\b|\bunexpected\b"
)
_MARKER: Final = re.compile(
    r"^\s*(?:Traceback \(most recent call last\):?|[Ee]xit code -?\d+|EXIT CODE -?\d+)\s*$"
)
_FAILED_ANYWHERE: Final = re.compile(
    "|".join(f"(?:{p.pattern})" for p in (_VERDICT, _ERROR_MESSAGE, _MARKER)), re.M
)
_FAILED_NEEDLES: Final = (
    "FAILED",
    "ERROR",
    ") test",
    "rror",
    "xception",
    "fatal",
    "panic",
    "** (",
    "Traceback",
    "xit code",
    "XIT CODE",
)  # fmt: skip  (every match of _FAILED_ANYWHERE holds one)
_WARNING: Final = re.compile(r"(?i)^\W*warning\b")
_BOX: Final = re.compile(r"^[\W_]*$")  # rules, box drawing, bare punctuation
_OK_DETAIL: Final = re.compile(
    r"\d+ passed(?:,? \d+ [a-z]+)*(?: in [\d.]+m?s)?|\d+ tests?, 0 failures[^\n]*"
    r"|All checks passed!|Success: no issues found[^\n]*"
)

# --- decisions --------------------------------------------------------------------------------

_DECISION: Final = re.compile(
    r"(?i)\b(?:instead of|rather than|decided|decide to|decision is|chose|chosen|choose to"
    r"|opted|won['’]t|will not|let['’]s (?:use|go with|keep|not|stick)|go(?:ing)? with"
    r"|we['’]ll use|switch(?:ed|ing)? to|stick with|don['’]t use|do not use|never use"
    r"|no longer use|the fix is|root cause)\b"
)
_CODE_FENCE: Final = re.compile(r"```.*?(?:```|\Z)", re.S)
_BULLET: Final = re.compile(r"^\s*(?:[-*+]|\d+[.)]|#+|>)\s+")
_SENTENCE_END: Final = re.compile(r"(?<=[.!?])\s+")
_MIN_DECISION_CHARS: Final = 25


class Command:
    """One distinct command (by its first line): how often it ran and how its runs went."""

    __slots__ = ("error", "failures", "fixed_after", "key", "last_ok", "ok_detail", "runs", "seen")

    def __init__(self, key: str) -> None:
        self.key = key
        self.runs = 0
        self.seen = 0  # runs whose result is known
        self.failures = 0
        self.last_ok: bool | None = None
        self.error = ""  # the line of the latest failure
        self.ok_detail = ""
        self.fixed_after: list[str] = []  # files changed between a failure and a later pass


class _Call:
    __slots__ = ("command", "name", "path", "position")

    def __init__(self, name: str, command: Command | None, path: str | None, position: int) -> None:
        self.name = name
        self.command = command
        self.path = path
        self.position = position


class Extract:
    """What :func:`extract` found (lists oldest first)."""

    __slots__ = (
        "commands",
        "decisions",
        "edited",
        "errors",
        "last_success",
        "prompts",
        "read",
        "todos",
    )

    def __init__(self) -> None:
        self.edited: dict[str, None] = {}  # by latest change
        self.read: dict[str, None] = {}  # by latest read
        self.commands: dict[str, Command] = {}  # by latest run
        self.errors: list[str] = []  # failures of tools other than commands
        self.prompts: list[tuple[int, str]] = []  # (position, text)
        self.decisions: list[str] = []
        self.todos: list[str] | None = None  # the latest TodoWrite's unfinished items
        self.last_success = -1  # position of the latest successful change or command

    def open_prompts(self) -> list[str]:
        """The user's latest requests after which no change or command succeeded."""
        return [text for at, text in self.prompts if at > self.last_success]


def extract(messages: Sequence[fr.MessageAppended]) -> Extract:
    out = Extract()
    calls: dict[str, _Call] = {}
    changes: list[str] = []  # files changed, in order (for "fixed after editing …")
    failed_at: dict[str, int] = {}  # command key → len(changes) at its latest failure
    seen_prompts: dict[str, int] = {}
    for position, message in enumerate(messages):
        is_user = message.role == "user"
        meta = message.meta
        skip_text = bool(meta) and any(meta.get(k, "").lower() in ("true", "1") for k in _META_KEYS)
        for block in message.content:
            if isinstance(block, fr.TextBlock):
                if skip_text:
                    continue
                if is_user:
                    if text := prompt_text(block.text):
                        if text in seen_prompts:  # said again: its newest place counts
                            out.prompts = [(a, t) for a, t in out.prompts if t != text]
                        seen_prompts[text] = position
                        out.prompts.append((position, text))
                        out.decisions.extend(f"(user) {d}" for d in decisions(text))
                elif message.role == "assistant":
                    out.decisions.extend(decisions(block.text))
            elif isinstance(block, fr.ToolUseBlock):
                call = _tool_use(out, block, position)
                calls[block.id] = call
            elif isinstance(block, fr.ToolResultBlock):
                call_or_none = calls.pop(block.tool_use_id, None)
                if call_or_none is not None:
                    _tool_result(out, call_or_none, block, position, changes, failed_at)
    return out


def _tool_use(out: Extract, block: fr.ToolUseBlock, position: int) -> _Call:
    name = block.name
    tool_input = block.input
    command: Command | None = None
    path: str | None = None
    if name in _COMMAND_TOOLS:
        key = command_key(tool_input.get("command"))
        if key:
            command = out.commands.pop(key, None) or Command(key)
            out.commands[key] = command  # moved to the newest place
            command.runs += 1
    elif name == "TodoWrite":
        out.todos = open_todos(tool_input.get("todos"), _LINE_CHARS)
    for k in _PATH_KEYS:
        value = tool_input.get(k)
        if isinstance(value, str) and value.strip():
            path = " ".join(value.split())
            break
    return _Call(name, command, path, position)


def _tool_result(
    out: Extract,
    call: _Call,
    block: fr.ToolResultBlock,
    position: int,
    changes: list[str],
    failed_at: dict[str, int],
) -> None:
    output = block.content if block.artifact_id is None else block.preview
    if not output and block.parts:
        output = "\n".join(p.text for p in block.parts if isinstance(p, fr.TextBlock))
    command = call.command
    failed = block.is_error or (command is not None and looks_failed(output))
    if command is not None:
        command.seen += 1
        if failed:
            command.failures += 1
            command.last_ok = False
            command.error = error_line(output) or "failed"
            command.fixed_after = []
            failed_at[command.key] = len(changes)
        else:
            if command.last_ok is False and command.key in failed_at:
                since = failed_at.pop(command.key)
                command.fixed_after = list(dict.fromkeys(changes[since:]))
            command.last_ok = True
            command.ok_detail = _ok_detail(output)
            out.last_success = position
        return
    path = call.path
    if failed:
        subject = f"{call.name} {path}" if path else call.name
        out.errors.append(f"{subject}: {error_line(output) or 'failed'}")
        return
    if path is None:
        return
    if call.name in _EDIT_TOOLS:
        out.edited.pop(path, None)
        out.edited[path] = None
        changes.append(path.rsplit("/", 1)[-1])
        out.last_success = position
    elif call.name in _READ_TOOLS:
        out.read.pop(path, None)
        out.read[path] = None


# --- pieces (also used by the tests) ----------------------------------------------------------


def command_key(value: Any) -> str:
    """A command's first line, whitespace collapsed (" …" marks more lines), or ""."""
    if isinstance(value, list):
        value = " ".join(str(part) for part in value)
    if not isinstance(value, str) or not value.strip():
        return ""
    lines = value.strip().splitlines()
    first = " ".join(lines[0].split())
    first = _trim(first, _COMMAND_CHARS)
    return first + (" …" if len(lines) > 1 else "")


def prompt_text(text: str) -> str:
    """The user's words in a text block, Claude Code's wrappers and noise removed ("" if none)."""
    text = text[:_SCAN_CHARS]
    if text.lstrip().startswith(_NOT_A_PROMPT):
        return ""
    if "<" in text:
        text = _WRAPPER_BLOCK.sub("\n", text)
    kept: list[str] = []
    size = 0
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(_NOISE_LINE):
            continue
        kept.append(line)
        size += len(line) + 1
        if size > _PROMPT_CHARS:
            break
    return _trim(" ".join(" ".join(kept).split()), _PROMPT_CHARS)


def looks_failed(output: str) -> bool:
    """Whether a command's output (not flagged as an error) still reports a failure."""
    head = output[:_SCAN_CHARS]
    if not any(needle in head for needle in _FAILED_NEEDLES):  # ``in`` is far faster than re
        return False
    for match in _FAILED_ANYWHERE.finditer(head):
        start = head.rfind("\n", 0, match.start()) + 1
        if not _WARNING.match(head, start):
            return True
    return False


def error_line(output: str) -> str:
    """The line that says what failed, not the output's first line: a test verdict, else the
    last line of a traceback or an error message, else a line with a failure word, else the
    first meaningful line (markers like ``Exit code 2`` and ``Traceback …`` only as a last
    resort)."""
    lines = output[:_SCAN_CHARS].splitlines()
    if len(lines) > _ERROR_SCAN_LINES:  # the head and the tail hold the verdicts
        lines = lines[: _ERROR_SCAN_LINES // 2] + lines[-_ERROR_SCAN_LINES // 2 :]
    best = ""
    best_score = 0
    marker = ""
    in_traceback = False
    for raw in lines:
        line = raw.strip()
        if not line or _BOX.match(line):
            continue
        if _MARKER.match(line):
            marker = marker or line
            in_traceback = line.startswith("Traceback")
            continue
        if _WARNING.match(line):
            score = 1
        elif _VERDICT.search(raw):
            score = 6
        elif _ERROR_MESSAGE.search(line):
            # a traceback's last line (not indented) is the exception: the latest one wins
            score = 5 if not (in_traceback and raw[:1].isspace()) else 2
        elif _FAILURE_WORD.search(line):
            score = 3
        else:
            score = 2 if not in_traceback else 1
        if score > best_score or (score == 5 and best_score == 5 and in_traceback):
            best, best_score = line, score
        if not raw[:1].isspace() and score == 5:
            in_traceback = False
    return _clean(best or marker)


def _ok_detail(output: str) -> str:
    match = _OK_DETAIL.search(output[-2_000:])
    return _clean(match.group(0)) if match else ""


def decisions(text: str) -> list[str]:
    """Sentences that state a choice (chosen or rejected), code left out."""
    text = text[:_SCAN_CHARS]
    if not _DECISION.search(text):
        return []
    if "```" in text:
        text = _CODE_FENCE.sub("\n", text)
    found: list[str] = []
    for line in text.splitlines():
        line = _BULLET.sub("", line)
        for sentence in _SENTENCE_END.split(line):
            sentence = " ".join(sentence.split())
            if len(sentence) >= _MIN_DECISION_CHARS and _DECISION.search(sentence):
                found.append(_trim(sentence, _DECISION_CHARS))
    return found


def _clean(line: str) -> str:
    line = " ".join(line.split())
    if line.startswith("E "):  # pytest's assertion lines
        line = line[2:]
    return _trim(line.strip("=┃│ "), _LINE_CHARS)


def _trim(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
