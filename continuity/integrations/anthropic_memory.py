"""The Anthropic SDK's memory tool on a continuity thread (the ``anthropic`` extra; ADR 0056).

Claude's memory tool (``memory_20250818``) gives the model a ``/memories`` directory it views,
creates, edits, renames and deletes files in. :class:`ContinuityMemoryTool` implements the SDK's
``BetaAbstractMemoryTool`` on a thread's log instead of a folder::

    from anthropic import Anthropic
    from continuity import Store
    from continuity.integrations.anthropic_memory import ContinuityMemoryTool

    memory = ContinuityMemoryTool(Store("agent-store").thread("support-42"))
    runner = Anthropic().beta.messages.tool_runner(
        model=MODEL, max_tokens=2048, tools=[memory], messages=[...]
    )

Each write is a new version of the file: a ``record_appended`` of kind ``continuity.note``
(``key`` ``memory:/memories/<path>``, ``data`` ``{"text", "memory_path"}``), so the memory files
are part of the warm tier — ``search`` finds them, a restore lists them, ``log`` shows every
version, ``verify`` covers them. A delete or the old name of a rename is a version with no
text; nothing is rewritten. Paths are checked as the SDK's own file backend checks them: under
``/memories``, no ``..`` out of it.
"""

from __future__ import annotations

from typing import Any, Final

from anthropic.lib.tools import BetaAbstractMemoryTool, ToolError
from anthropic.types.beta import (
    BetaMemoryTool20250818CreateCommand,
    BetaMemoryTool20250818DeleteCommand,
    BetaMemoryTool20250818InsertCommand,
    BetaMemoryTool20250818RenameCommand,
    BetaMemoryTool20250818StrReplaceCommand,
    BetaMemoryTool20250818ViewCommand,
)

from continuity.context.records import latest_record, record, records
from continuity.store.base import Thread

__all__ = ["KIND", "ContinuityMemoryTool"]

KIND: Final = "continuity.note"
"""The records' kind: a note, so search and restores find the memory files like other notes."""
_ROOT: Final = "/memories"
_KEY: Final = "memory:"
_NUMBER_WIDTH: Final = 6


def _normal(path: str) -> str:
    """``path`` under ``/memories``, with ``.`` and empty parts gone; ToolError when it is not
    under it (or leaves it with ``..``)."""
    if path != _ROOT and not path.startswith(_ROOT + "/"):
        raise ToolError(f"Path must start with /memories, got: {path}")
    parts: list[str] = []
    for part in path[len(_ROOT) :].split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise ToolError(f"Path {path} would escape /memories directory")
            parts.pop()
            continue
        parts.append(part)
    return "/".join([_ROOT, *parts])


class ContinuityMemoryTool(BetaAbstractMemoryTool):
    """Claude's memory directory as versioned records of ``thread``."""

    def __init__(self, thread: Thread, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.thread = thread

    # -- the files, as the log has them ----------------------------------------------------------

    def _read(self, path: str) -> str | None:
        found = latest_record(self.thread, KIND, _KEY + path)
        if found is None or not isinstance(found.data, dict):
            return None
        text = found.data.get("text")
        return text if isinstance(text, str) and not found.data.get("deleted") else None

    def _write(self, path: str, text: str | None) -> None:
        data: dict[str, Any] = {"memory_path": path, "text": text or ""}
        if text is None:
            data["deleted"] = True
        record(self.thread, KIND, data, key=_KEY + path)

    def files(self) -> dict[str, str]:
        """Every file's current text, by path."""
        out: dict[str, str] = {}
        gone: set[str] = set()
        for r in records(self.thread, KIND):  # newest first: the first of a key is current
            if not r.key.startswith(_KEY) or r.key in gone:
                continue
            gone.add(r.key)
            data = r.data if isinstance(r.data, dict) else {}
            text = data.get("text")
            if isinstance(text, str) and not data.get("deleted"):
                out[r.key[len(_KEY) :]] = text
        return dict(sorted(out.items()))

    def _existing(self, path: str, shown: str) -> str:
        text = self._read(path)
        if text is None:
            raise ToolError(f"The path {shown} does not exist. Please provide a valid path.")
        return text

    # -- the six commands ------------------------------------------------------------------------

    def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        path = _normal(command.path)
        text = self._read(path)
        if text is None:
            below = {p: t for p, t in self.files().items() if p.startswith(path + "/")}
            if not below and path != _ROOT:
                raise ToolError(
                    f"The path {command.path} does not exist. Please provide a valid path."
                )
            lines = [f"{len(t.encode())}\t{p}" for p, t in below.items()]
            return (
                f"Here're the files and directories up to 2 levels deep in {command.path}, "
                "excluding hidden items:\n" + "\n".join([command.path, *lines])
            )
        lines = text.split("\n")
        start = 1
        if command.view_range and len(command.view_range) == 2:
            lo = max(1, command.view_range[0])
            hi = len(lines) if command.view_range[1] == -1 else command.view_range[1]
            lines, start = lines[lo - 1 : hi], lo
        numbered = [f"{str(i + start).rjust(_NUMBER_WIDTH)}\t{ln}" for i, ln in enumerate(lines)]
        return f"Here's the content of {command.path} with line numbers:\n" + "\n".join(numbered)

    def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        path = _normal(command.path)
        if self._read(path) is not None:
            raise ToolError(f"File {command.path} already exists")
        self._write(path, command.file_text)
        return f"File created successfully at: {command.path}"

    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        path = _normal(command.path)
        text = self._existing(path, command.path)
        count = text.count(command.old_str)
        if count != 1:
            said = "did not appear verbatim" if count == 0 else f"appeared {count} times"
            raise ToolError(
                f"No replacement was performed, old_str `{command.old_str}` {said} in "
                f"{command.path}."
            )
        self._write(path, text.replace(command.old_str, command.new_str))
        return "The memory file has been edited."

    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        path = _normal(command.path)
        lines = self._existing(path, command.path).split("\n")
        if not 0 <= command.insert_line <= len(lines):
            raise ToolError(
                f"Invalid `insert_line` parameter: {command.insert_line}. "
                f"It should be within the range [0, {len(lines)}]."
            )
        lines.insert(command.insert_line, command.insert_text.rstrip("\n"))
        self._write(path, "\n".join(lines))
        return f"The file {command.path} has been edited."

    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        path = _normal(command.path)
        if path == _ROOT:
            raise ToolError("Cannot delete the /memories directory itself")
        doomed = [p for p in self.files() if p == path or p.startswith(path + "/")]
        if not doomed:
            raise ToolError(f"The path {command.path} does not exist")
        for p in doomed:
            self._write(p, None)
        return f"Successfully deleted {command.path}"

    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        old, new = _normal(command.old_path), _normal(command.new_path)
        if old == _ROOT:
            raise ToolError("Cannot rename the /memories directory itself")
        files = self.files()
        if new in files or any(p.startswith(new + "/") for p in files):
            raise ToolError(f"The destination {command.new_path} already exists")
        moving = {p: t for p, t in files.items() if p == old or p.startswith(old + "/")}
        if not moving:
            raise ToolError(f"The path {command.old_path} does not exist")
        for p, text in moving.items():
            self._write(new + p[len(old) :], text)
            self._write(p, None)
        return f"Successfully renamed {command.old_path} to {command.new_path}"

    def clear_all_memory(self) -> str:
        """Delete every file (each a new version with no text)."""
        for p in self.files():
            self._write(p, None)
        return "All memory cleared"
