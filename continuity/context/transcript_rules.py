"""How a coding agent's messages are read: one rule for each question that both the restore
(:mod:`continuity.agents.base._restore_extract`) and the default summarizer
(:mod:`continuity.context.summarize`) ask of them, so the two never disagree.

- :func:`prompt_text` — the user's own words in a text block: Claude Code's wrapper blocks
  (``<system-reminder>``, ``<command-name>``…) and noise lines (``Caveat:``, ``[Request
  interrupted``, the "session is being continued" preamble) removed; a background task's
  ``<task-notification>`` is no prompt. :func:`is_meta` says when a whole message is Claude
  Code's and not the user's (``is_meta`` as the ingest marks it, ``isMeta``,
  ``isCompactSummary``).
- :func:`command_line` — a command's first line, whitespace collapsed (`` …`` marks more lines).
- :func:`tool_output` — the text of a tool result (its preview when it became an artifact).
- :func:`looks_failed` — whether a command's output reports a failure its result did not flag:
  a line starting ``FAILED``/``ERROR`` (pytest) or ``1) test`` (ExUnit), an error message
  (``ValueError: …``, ``error[E0308]:``, ``fatal:``, ``** (`` …), a ``Traceback`` line, or a
  non-zero exit code on a line of its own (``Exit code 2``, ``exit status 1``) — none of them
  on a line that starts with ``warning``.
- :func:`error_line` — the line that says what failed (not the output's first line).
- :func:`ok_detail` — a passing run's tally (``4 passed in 0.02s``, ``All checks passed!``).
- :func:`decision_sentences` — the sentences of prose (code and bullets left out) that hold a
  consumer's own decision vocabulary.
- :func:`open_todos` — the unfinished items of a ``TodoWrite``.
- :func:`one_line`, :func:`trim` — how an item is made one line and cut.

Each consumer keeps its own limits (how many characters an item may have): those are part of
what it writes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

from continuity import frames as fr

__all__ = [
    "COMMAND_TOOLS",
    "PATH_KEYS",
    "command_line",
    "decision_sentences",
    "error_line",
    "is_meta",
    "looks_failed",
    "ok_detail",
    "one_line",
    "open_todos",
    "prompt_text",
    "tool_output",
    "trim",
]

COMMAND_TOOLS: Final = frozenset({"Bash", "bash", "shell"})
PATH_KEYS: Final = ("file_path", "notebook_path", "filePath")
"""The inputs that name the file a tool works on (of any tool: ``path`` is not among them, as
another tool's ``path`` may be a URL or a JSON path)."""
_SCAN_CHARS: Final = 100_000  # how much of one text or tool output is searched
_TAIL_CHARS: Final = 2_000  # where a run's tally is searched for
_ERROR_SCAN_LINES: Final = 400

# --- the user's words -------------------------------------------------------------------------

_WRAPPER_BLOCK: Final = re.compile(
    r"<(system-reminder|command-name|command-message|command-args|local-command-stdout"
    r"|local-command-stderr)>.*?</\1>",
    re.S,
)
_NOISE_LINE: Final = (
    "<command-name>",  # the opening tags: a wrapper block that is not closed
    "<command-message>",
    "<command-args>",
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<system-reminder>",
    "</system-reminder>",
    "Caveat:",
    "[Request interrupted",
    "This session is being continued from a previous conversation",
)
_NOT_A_PROMPT: Final = ("<task-notification>",)  # a background task's end, as a user line
_META_KEYS: Final = ("is_meta", "isMeta", "isCompactSummary")  # the ingest writes is_meta

# --- failures ---------------------------------------------------------------------------------

# What reports a failure, each pattern with its needles: every match holds one of them, and
# ``in`` scans ten times faster than ``re`` (most outputs hold none)
_VERDICT: Final = re.compile(r"^[ \t]*(?:FAILED|ERROR)\b|^[ \t]*\d+\) test\b")  # pytest, ExUnit
_VERDICT_NEEDLES: Final = ("FAILED", "ERROR", ") test")
# literal starts (no ``\b\w*`` before them): this is searched in every command's output
_ERROR_MESSAGE: Final = re.compile(
    r"(?:Error|Exception)(?::|$)|(?:error|fatal|panic)(?:\[\w+\])?:|^\*\* \(|ERROR:"
)
_ERROR_NEEDLES: Final = ("Error", "Exception", "error", "fatal", "panic", "** (", "ERROR")
_MARKER: Final = re.compile(
    r"^\s*(?:Traceback \(most recent call last\):?"
    r"|(?:[Ee]xit|EXIT)(?:ed with)? (?:[Cc]ode|[Ss]tatus|CODE|STATUS) -?[1-9]\d*)\s*$"
)
_MARKER_NEEDLES: Final = ("Traceback", "xit", "XIT")
_FAILURE_SPOTS: Final = tuple(
    (re.compile(pattern.pattern, re.M), needles)
    for pattern, needles in (
        (_VERDICT, _VERDICT_NEEDLES),
        (_ERROR_MESSAGE, _ERROR_NEEDLES),
        (_MARKER, _MARKER_NEEDLES),
    )
)
_VERDICT_LINES: Final = _FAILURE_SPOTS[0][0]
# re.M: so that ``match(text, pos)`` works at a line's start (``^`` would only match at 0)
_WARNING: Final = re.compile(r"^[^\w\n]*warning\b", re.I | re.M)
_FAILURE_WORD: Final = re.compile(
    r"\bfail(?:ed|ure|ures|s)?\b|\berrors?\b|\bnot found\b|\bno such\b|\bdenied\b"
    r"|\bcannot\b|\bcan't\b|\binvalid\b|\bundefined\b|\bunexpected\b",
    re.I,
)
_BOX: Final = re.compile(r"^[\W_]*$")  # rules, box drawing, bare punctuation
_OK_DETAIL: Final = re.compile(
    r"\d+ passed(?:,? \d+ [a-z]+)*(?: in [\d.]+m?s)?|\d+ tests?, 0 failures[^\n]*"
    r"|All checks passed!|Success: no issues found[^\n]*"
)
_OK_NEEDLES: Final = ("passed", "0 failures", "All checks", "Success:")  # one in every tally

# --- prose ------------------------------------------------------------------------------------

_CODE_FENCE: Final = re.compile(r"```.*?(?:```|\Z)", re.S)
_BULLET: Final = re.compile(r"^\s*(?:[-*+]|\d+[.)]|#+|>)\s+")
_SENTENCE_END: Final = re.compile(r"(?<=[.!?])\s+")


def is_meta(meta: Mapping[str, str]) -> bool:
    """Whether a message's ``meta`` marks it as Claude Code's own (a meta line, its compaction
    summary): its text is not the user's words."""
    return bool(meta) and any(meta.get(key, "").lower() in ("true", "1") for key in _META_KEYS)


def prompt_text(text: str, limit: int) -> str:
    """The user's words in a text block, Claude Code's wrappers and noise removed, lines joined
    with spaces, at most ``limit`` characters ("" if none)."""
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
        if size > limit:
            break
    return trim(one_line(" ".join(kept)), limit)


def command_line(value: Any, limit: int) -> str:
    """A command's first line, whitespace collapsed and cut to ``limit`` (`` …`` appended when
    it had more lines), or "" for no command."""
    if isinstance(value, list):
        value = " ".join(str(part) for part in value)
    if not isinstance(value, str) or not value.strip():
        return ""
    lines = value.strip().splitlines()
    return trim(one_line(lines[0]), limit) + (" …" if len(lines) > 1 else "")


def tool_output(block: fr.ToolResultBlock) -> str:
    """The text of a tool result: its content, or its preview when the content became an
    artifact, else its text parts."""
    output = block.content if block.artifact_id is None else block.preview
    if not output and block.parts:
        output = "\n".join(p.text for p in block.parts if isinstance(p, fr.TextBlock))
    return output


def looks_failed(output: str) -> bool:
    """Whether a command's output (not flagged as an error) still reports a failure."""
    head = output[:_SCAN_CHARS]
    for pattern, needles in _FAILURE_SPOTS:
        if any(needle in head for needle in needles):
            for match in pattern.finditer(head):
                start = head.rfind("\n", 0, match.start()) + 1
                if not _WARNING.match(head, start):
                    return True
    return False


def error_line(output: str, limit: int) -> str:
    """The line that says what failed, not the output's first line: a test verdict, else the
    last line of a traceback or an error message, else a line with a failure word, else the
    first meaningful line (markers like ``Exit code 2`` and ``Traceback …`` only as a last
    resort), cleaned and cut to ``limit``."""
    lines = output[:_SCAN_CHARS].splitlines()
    if len(lines) > _ERROR_SCAN_LINES:  # the head and the tail hold the verdicts
        lines = lines[: _ERROR_SCAN_LINES // 2] + lines[-_ERROR_SCAN_LINES // 2 :]
    text = "\n".join(lines)
    if verdict := _first_verdict(text, lines):  # the best there is
        return _clean_line(verdict, limit)
    with_message = _lines_holding(text, _ERROR_NEEDLES)
    best = ""
    best_score = 0
    marker = ""
    in_traceback = False
    for index, raw in enumerate(lines):
        line = raw.strip()
        if not line or _BOX.match(line):
            continue
        if _MARKER.match(line):
            marker = marker or line
            in_traceback = line.startswith("Traceback")
            continue
        if _WARNING.match(line):
            score = 1
        elif index in with_message and _ERROR_MESSAGE.search(line):
            # a traceback's last line (not indented) is the exception: the latest one wins
            score = 5 if not (in_traceback and raw[:1].isspace()) else 2
        elif best_score < 3 and _FAILURE_WORD.search(line):  # (past 3 it changes nothing)
            score = 3
        else:
            score = 2 if not in_traceback else 1
        if score > best_score or (score == 5 and best_score == 5 and in_traceback):
            best, best_score = line, score
        if score == 5 and not raw[:1].isspace():
            in_traceback = False
    return _clean_line(best or marker, limit)


def _first_verdict(text: str, lines: list[str]) -> str:
    """The first test verdict among ``lines`` (``text`` is them joined), or "": one scan
    instead of a search per line (a verdict's line never starts with ``warning``)."""
    match = _VERDICT_LINES.search(text)
    return lines[text.count("\n", 0, match.start())].strip() if match else ""


def _lines_holding(text: str, needles: tuple[str, ...]) -> set[int]:
    """The indexes of the lines of ``text`` that hold one of ``needles``: ``find`` scans far
    faster than a pattern searched on each line."""
    found: list[int] = []
    for needle in needles:
        at = text.find(needle)
        while at >= 0:
            found.append(at)
            at = text.find(needle, at + 1)
    indexes: set[int] = set()
    line = 0
    counted = 0
    for at in sorted(found):
        line += text.count("\n", counted, at)
        counted = at
        indexes.add(line)
    return indexes


def ok_detail(output: str, limit: int) -> str:
    """A passing run's tally near the end of its output (``4 passed in 0.02s``), or ""."""
    tail = output[-_TAIL_CHARS:]
    first = min((at for needle in _OK_NEEDLES if (at := tail.find(needle)) >= 0), default=-1)
    if first < 0:
        return ""
    # a tally is on one line and holds a needle: none starts before the first needle's line
    match = _OK_DETAIL.search(tail, tail.rfind("\n", 0, first) + 1)
    return _clean_line(match.group(0), limit) if match else ""


def decision_sentences(
    text: str, vocabulary: re.Pattern[str], needles: tuple[str, ...] | None = None
) -> Iterator[str]:
    """The sentences of ``text`` that hold ``vocabulary``, code blocks and bullets left out,
    whitespace collapsed. ``needles`` (strings of which every match holds one) let a text
    without any skip the pattern."""
    text = text[:_SCAN_CHARS]
    if needles is not None and not any(needle in text for needle in needles):
        return
    if not vocabulary.search(text):
        return
    if "```" in text:
        text = _CODE_FENCE.sub("\n", text)
    for line in text.splitlines():
        line = _BULLET.sub("", line)
        for sentence in map(one_line, _SENTENCE_END.split(line)):
            if vocabulary.search(sentence):
                yield sentence


def open_todos(value: Any, limit: int) -> list[str]:
    """The todos of a TodoWrite call's ``todos`` that are not completed, as
    ``[status] content`` lines whose content has at most ``limit`` characters."""
    if not isinstance(value, list):
        return []
    todos: list[str] = []
    for todo in value:
        if not isinstance(todo, dict):
            continue
        status = todo.get("status")
        content = todo.get("content")
        if status == "completed" or not isinstance(content, str) or not content.strip():
            continue
        label = status.replace("_", " ") if isinstance(status, str) and status else "pending"
        todos.append(f"[{one_line(label)}] {trim(one_line(content), limit)}")
    return todos


def _clean_line(line: str, limit: int) -> str:
    """An output line as an item: one line, pytest's ``E`` and rules stripped, cut to ``limit``."""
    line = one_line(line)
    if line.startswith("E "):  # pytest's assertion lines
        line = line[2:]
    return trim(line.strip("=┃│ "), limit)


def one_line(text: str) -> str:
    return " ".join(text.split())


def trim(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, a cut one ending with ``…``."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
