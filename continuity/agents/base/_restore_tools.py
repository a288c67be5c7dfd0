"""Every agent's tools as the restore reads them: which call runs a command, reads or changes
files, and how a command's run went, whatever agent made it.

Claude Code: ``Bash {command}``, ``Read``/``Edit``/``Write``/``MultiEdit``/``NotebookEdit``
``{file_path}``. Codex: ``exec_command {cmd}`` (older ``shell {command: [argv]}``), whose output
starts with a header that holds ``Process exited with code N``; files change through
``apply_patch`` (a tool, or the command ``apply_patch <<'EOF' …``) and are read with commands
(``cat``, ``sed -n``, ``nl``, …). Gemini CLI: ``run_shell_command {command}``, whose output
(wrapped in ``<untrusted_context>``) says ``Exit Code: N`` when it is not 0;
``read_file``/``read_many_files``, ``write_file``/``replace`` ``{file_path}`` (older
``absolute_path``). opencode: ``bash``, ``read``/``edit``/``write``/``patch`` ``{filePath}``.
An exit code, where the agent gives one, is the outcome; else the output is read for a failure.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any, Final

from continuity import frames as fr
from continuity.context.transcript_rules import COMMAND_TOOLS, PATH_KEYS, tool_output

__all__ = ["EDIT_TOOLS", "READ_TOOLS", "ToolCall", "classify", "command_outcome", "failed_results"]

SHELL_TOOLS: Final = COMMAND_TOOLS | {
    "exec_command",
    "shell_command",
    "local_shell",
    "container.exec",
    "run_shell_command",
}
EDIT_TOOLS: Final = frozenset(
    {
        "Edit",
        "Write",
        "MultiEdit",
        "NotebookEdit",
        "apply_patch",
        "write_file",
        "replace",
        "edit",
        "write",
        "patch",
        "multiedit",
    }
)
READ_TOOLS: Final = frozenset({"Read", "read_file", "read_many_files", "read"})
_COMMAND_KEYS: Final = ("command", "cmd")
_PATH_KEYS: Final = (*PATH_KEYS, "absolute_path")
_PATCH_FILE: Final = re.compile(r"^\*\*\* (Update|Add|Delete) File: (.+?)\s*$", re.M)
_MOVE_TO: Final = re.compile(r"^\*\*\* Move to: (.+?)\s*$", re.M)
# the programs whose path arguments are files read (sed only with -n: else it edits)
_READERS: Final = frozenset({"cat", "head", "tail", "nl", "less", "more", "bat", "sed", "wc"})
_SEPARATORS: Final = frozenset({"&&", "||", ";", "|", "&"})
_NOT_A_PATH: Final = re.compile(r"[\d,$]+[pd]?|\d+")  # sed's 1,80p; head's counts
_EXIT: Final = re.compile(
    r"^[ \t]*(?:Process exited with code|Exit Code:|Exit code:?|exit code:?|Exit status:?)"
    r"[ \t]*(-?\d+)",
    re.M,
)
_CODEX_HEADER: Final = re.compile(
    r"\A(?:(?:Chunk ID|Wall time|Process exited with code|Process running with session ID"
    r"|Original token count|Total output lines)\b[^\n]*\n)+Output:\n"
)
_WRAPPER: Final = re.compile(r"\A\s*<untrusted_context>\n?(.*?)\n?</untrusted_context>\s*\Z", re.S)
_GEMINI_TRAILER: Final = re.compile(r"^(?:Exit Code: -?\d+|Process Group PGID: \d+)\s*$", re.M)


class ToolCall:
    """What one call does: runs ``command``, reads ``read``, changes ``edited`` (paths);
    ``path``: the file it names first (for an error's line)."""

    __slots__ = ("command", "edited", "path", "read")

    def __init__(self) -> None:
        self.command: Any = None
        self.path: str | None = None
        self.read: list[str] = []
        self.edited: list[str] = []


def _clean(path: str) -> str:
    return " ".join(path.split())


def _first_path(tool_input: Mapping[str, Any]) -> str | None:
    for key in _PATH_KEYS:
        value = tool_input.get(key)
        if isinstance(value, str) and value.strip():
            return _clean(value)
    return None


def _patched(text: str) -> list[str]:
    """The files an ``apply_patch`` envelope changes (a moved file under its new name too)."""
    if "*** Begin Patch" not in text:
        return []
    found = [m.group(2) for m in _PATCH_FILE.finditer(text)]
    found += [m.group(1) for m in _MOVE_TO.finditer(text)]
    return [_clean(p) for p in found if p.strip()]


def _files_read(command: str) -> list[str]:
    """The files a simple reading command names (``cat a b``, ``sed -n 1,80p f``,
    ``nl -ba f | sed -n …``): the arguments of a reader that are no options and no numbers.
    A command that cannot be split as shell words reads nothing here."""
    first = command.split("\n", 1)[0]
    try:
        words = shlex.split(first, posix=True)
    except ValueError:
        return []
    found: list[str] = []
    i = 0
    while i < len(words):
        program = words[i].rsplit("/", 1)[-1]
        j = i + 1
        args: list[str] = []
        while j < len(words) and words[j] not in _SEPARATORS:
            args.append(words[j])
            j += 1
        if program in _READERS and not (program == "sed" and "-n" not in args):
            skip_next = False
            for arg in args:
                if skip_next:
                    skip_next = False
                    continue
                if arg in ("-n", "-c", "-e") and program != "sed":
                    skip_next = True  # head -n 20, tail -c 100
                    continue
                if arg.startswith("-") or _NOT_A_PATH.fullmatch(arg):
                    continue
                if any(c in arg for c in "<>*?`$()"):
                    continue
                found.append(arg)
        i = j + 1
    return found


def classify(name: str, tool_input: Mapping[str, Any]) -> ToolCall:
    """What a call of tool ``name`` with ``tool_input`` does, for any agent."""
    call = ToolCall()
    if name in SHELL_TOOLS:
        for key in _COMMAND_KEYS:
            value = tool_input.get(key)
            if value:
                call.command = value
                break
        text = call.command if isinstance(call.command, str) else ""
        if isinstance(call.command, list):
            text = " ".join(str(part) for part in call.command)
        patched = _patched(text)
        if patched:  # Codex's apply_patch run as a command: a change of files, not a command
            call.command = None
            call.edited = patched
            call.path = patched[0]
        elif text:
            call.read = _files_read(text)
        return call
    path = call.path = _first_path(tool_input)
    if name in EDIT_TOOLS:
        patched = [p for v in tool_input.values() if isinstance(v, str) for p in _patched(v)]
        call.edited = patched or ([path] if path else [])
        call.path = call.path or (patched[0] if patched else None)
    elif name in READ_TOOLS:
        paths = tool_input.get("paths") or tool_input.get("file_paths")
        if isinstance(paths, list):
            call.read = [_clean(p) for p in paths if isinstance(p, str) and p.strip()]
        elif path:
            call.read = [path]
    return call


def command_outcome(output: str) -> tuple[int | None, str]:
    """(the exit code the agent reported, or None; the command's own output, without the
    agent's header, wrapper and trailer)."""
    code: int | None = None
    match = _EXIT.search(output[:4_000]) or _EXIT.search(output[-4_000:])
    if match:
        code = int(match.group(1))
    body = output
    header = _CODEX_HEADER.match(body)
    if header:
        body = body[header.end() :]
    wrapped = _WRAPPER.match(body)
    if wrapped:
        body = _GEMINI_TRAILER.sub("", wrapped.group(1)).strip()
        if body.startswith("Output:"):
            body = body[len("Output:") :].lstrip()
    return code, body


def failed_results(messages: Sequence[fr.MessageAppended]) -> set[str]:
    """The ids of the command results in ``messages`` whose reported exit code is not 0."""
    shells: set[str] = set()
    failed: set[str] = set()
    for message in messages:
        for block in message.content:
            if isinstance(block, fr.ToolUseBlock) and block.name in SHELL_TOOLS:
                shells.add(block.id)
            elif isinstance(block, fr.ToolResultBlock) and block.tool_use_id in shells:
                code, _ = command_outcome(tool_output(block))
                if code is not None and code != 0:
                    failed.add(block.tool_use_id)
    return failed
