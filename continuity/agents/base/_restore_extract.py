"""What the restore extracts from the messages before a compaction (its own extraction: the
compaction summarizer's output is a contract of its own, ``contracts/summary.md``).

One pass over the messages gathers, in the order they are worth to Claude after a compaction:
files changed; commands, deduplicated by their first line, with how often they ran and how the
last run went; errors by the line that carries them, and what fixed them; files read; the user's
own words; open tasks; decisions. :mod:`continuity.agents.base._restore_pack` turns this into
text within a budget. What counts as the user's words, a failure, its error line or a passing
run's tally is read as the summarizer reads it (:mod:`continuity.context.transcript_rules`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from continuity import frames as fr
from continuity.agents.base._restore_tools import classify, command_outcome
from continuity.context.transcript_rules import (
    command_line,
    decision_sentences,
    error_line,
    is_meta,
    looks_failed,
    ok_detail,
    open_todos,
    prompt_text,
    tool_output,
    trim,
)

__all__ = ["Command", "Extract", "extract"]

_LINE_CHARS: Final = 200
_COMMAND_CHARS: Final = 200
_PROMPT_CHARS: Final = 600
_DECISION_CHARS: Final = 220
_MIN_DECISION_CHARS: Final = 25

# a choice made or rejected (the summarizer's vocabulary is its own: ``I'll``, ``going to``)
_DECISION: Final = re.compile(
    r"(?i)\b(?:instead of|rather than|decided|decide to|decision is|chose|chosen|choose to"
    r"|opted|won['’]t|will not|let['’]s (?:use|go with|keep|not|stick)|go(?:ing)? with"
    r"|we['’]ll use|switch(?:ed|ing)? to|stick with|don['’]t use|do not use|never use"
    r"|no longer use|the fix is|root cause)\b"
)


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
    __slots__ = ("command", "edited", "name", "path", "position", "read")

    def __init__(
        self,
        name: str,
        command: Command | None,
        path: str | None,
        position: int,
        read: list[str],
        edited: list[str],
    ) -> None:
        self.name = name
        self.command = command
        self.path = path
        self.position = position
        self.read = read
        self.edited = edited


class Extract:
    """What :func:`extract` found (lists oldest first)."""

    __slots__ = (
        "answered",
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
        self.answered: set[int] = set()  # prompts whose turn ended with the agent's answer

    def open_prompts(self) -> list[str]:
        """The user's latest requests after which no change or command succeeded and whose
        turn did not end with the agent's answer (a question answered is no open task)."""
        return [
            text for at, text in self.prompts if at > self.last_success and at not in self.answered
        ]


def extract(messages: Sequence[fr.MessageAppended]) -> Extract:
    out = Extract()
    calls: dict[str, _Call] = {}
    changes: list[str] = []  # files changed, in order (for "fixed after editing …")
    failed_at: dict[str, int] = {}  # command key → len(changes) at its latest failure
    seen_prompts: dict[str, int] = {}
    asked: int | None = None  # the position of the prompt whose turn this is
    answer = False  # the turn's latest agent message is an answer (text, no tool call)
    for position, message in enumerate(messages):
        is_user = message.role == "user"
        skip_text = is_meta(message.meta)
        if message.role == "assistant" and not skip_text:
            answer = any(
                isinstance(b, fr.TextBlock) and b.text.strip() for b in message.content
            ) and not any(isinstance(b, fr.ToolUseBlock) for b in message.content)
        for block in message.content:
            if isinstance(block, fr.TextBlock):
                if skip_text:
                    continue
                if is_user:
                    if text := prompt_text(block.text, _PROMPT_CHARS):
                        if asked is not None and answer:
                            out.answered.add(asked)
                        asked, answer = position, False
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
    if asked is not None and answer:
        out.answered.add(asked)
    return out


def _tool_use(out: Extract, block: fr.ToolUseBlock, position: int) -> _Call:
    name = block.name
    tool_input = block.input
    what = classify(name, tool_input)  # any agent's tools (:mod:`._restore_tools`)
    command: Command | None = None
    if what.command is not None:
        key = command_line(what.command, _COMMAND_CHARS)
        if key:
            command = out.commands.pop(key, None) or Command(key)
            out.commands[key] = command  # moved to the newest place
            command.runs += 1
    elif name == "TodoWrite":
        out.todos = open_todos(tool_input.get("todos"), _LINE_CHARS)
    return _Call(name, command, what.path, position, what.read, what.edited)


def _tool_result(
    out: Extract,
    call: _Call,
    block: fr.ToolResultBlock,
    position: int,
    changes: list[str],
    failed_at: dict[str, int],
) -> None:
    output = tool_output(block)
    command = call.command
    if command is not None:
        # the exit code, where the agent reports one (Codex, Gemini CLI), else the output
        code, output = command_outcome(output)
        failed = block.is_error or (code != 0 if code is not None else looks_failed(output))
    else:
        failed = block.is_error
    if command is not None:
        command.seen += 1
        if failed:
            command.failures += 1
            command.last_ok = False
            command.error = error_line(output, _LINE_CHARS) or "failed"
            command.fixed_after = []
            failed_at[command.key] = len(changes)
        else:
            if command.last_ok is False and command.key in failed_at:
                since = failed_at.pop(command.key)
                command.fixed_after = list(dict.fromkeys(changes[since:]))
            command.last_ok = True
            command.ok_detail = ok_detail(output, _LINE_CHARS)
            out.last_success = position
            _note(out.read, call.read)  # the files a reading command named (Codex reads so)
        return
    if failed:
        subject = f"{call.name} {call.path}" if call.path else call.name
        out.errors.append(f"{subject}: {error_line(output, _LINE_CHARS) or 'failed'}")
        return
    if call.edited:
        _note(out.edited, call.edited)
        changes.extend(path.rsplit("/", 1)[-1] for path in call.edited)
        out.last_success = position
    _note(out.read, call.read)


def _note(into: dict[str, None], paths: list[str]) -> None:
    """Each of ``paths`` moved to the newest place of ``into``."""
    for path in paths:
        into.pop(path, None)
        into[path] = None


def decisions(text: str) -> list[str]:
    """Sentences that state a choice (chosen or rejected), code left out."""
    return [
        trim(sentence, _DECISION_CHARS)
        for sentence in decision_sentences(text, _DECISION)
        if len(sentence) >= _MIN_DECISION_CHARS
    ]
