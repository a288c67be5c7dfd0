"""A Claude Code transcript written the way Claude Code writes it, for tests of what reads one
(the hooks, the ingest, the MCP server)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

__all__ = ["Transcript"]


class Transcript:
    """Writes transcript lines the way Claude Code does: one line per content block of an
    assistant response (sharing ``message.id``), tool results as user lines, noise in between."""

    def __init__(self, path: Path, session: str, cwd: str) -> None:
        self.path = path
        self.session = session
        self.cwd = cwd
        self.n = 0
        self.pending: list[dict[str, Any]] = []
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()

    @property
    def thread_id(self) -> str:
        return f"cc-{self.session}"

    def _line(self, kind: str, **fields: Any) -> dict[str, Any]:
        self.n += 1
        stamp = datetime(2026, 1, 5, 9, 0, tzinfo=UTC) + timedelta(seconds=self.n)
        line = {
            "type": kind,
            "uuid": f"{self.session[:8]}-0000-4000-8000-{self.n:012d}",
            "parentUuid": None,
            "sessionId": self.session,
            "timestamp": stamp.isoformat().replace("+00:00", "Z"),
            "cwd": self.cwd,
            "gitBranch": "main",
            "version": "2.1.39",
            "isSidechain": False,
            **fields,
        }
        self.pending.append(line)
        return line

    def prompt(self, text: str) -> None:
        self._line("user", message={"role": "user", "content": text})
        self._line("progress", data={"type": "hook_progress"})

    def say(self, text: str, *, usage: dict[str, int] | None = None) -> None:
        """An answer; ``usage``: the API's token counts, as Claude Code keeps them."""
        message: dict[str, Any] = {
            "id": f"msg_{self.n}",
            "role": "assistant",
            "model": "claude-test",
            "content": [{"type": "text", "text": text}],
        }
        if usage is not None:
            message["usage"] = usage
        self._line("assistant", requestId=f"req_{self.n}", message=message)

    def tool(
        self, name: str, tool_input: dict[str, Any], output: str, *, error: bool = False
    ) -> None:
        msg_id = f"msg_{self.n + 1}"
        use_id = f"toolu_{self.n + 1:06d}"
        for block in (
            {"type": "text", "text": f"Running {name}."},
            {"type": "tool_use", "id": use_id, "name": name, "input": tool_input},
        ):
            self._line(
                "assistant",
                requestId=f"req_{msg_id}",
                message={
                    "id": msg_id,
                    "role": "assistant",
                    "model": "claude-test",
                    "content": [block],
                },
            )
        self._line(
            "user",
            message={
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": use_id,
                        "content": output,
                        "is_error": error,
                    }
                ],
            },
        )

    def compaction(self, summary: str) -> None:
        self._line(
            "system",
            subtype="compact_boundary",
            content="Conversation compacted",
            compactMetadata={"trigger": "auto", "preTokens": 150_000},
        )
        self._line(
            "user",
            isCompactSummary=True,
            message={
                "role": "user",
                "content": "This session is being continued from a previous conversation. "
                + summary,
            },
        )

    def flush(self) -> None:
        with open(self.path, "ab") as f:
            f.write(b"".join(json.dumps(line).encode() + b"\n" for line in self.pending))
        self.pending.clear()

    def payload(self, event: str, **extra: Any) -> dict[str, Any]:
        return {
            "session_id": self.session,
            "transcript_path": str(self.path),
            "cwd": self.cwd,
            "hook_event_name": event,
            **extra,
        }
