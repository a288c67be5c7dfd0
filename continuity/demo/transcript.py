"""Writing Claude Code transcript lines with the shapes Claude Code itself writes (2.1.x).

Used by the demo (and the hook benchmark) to produce a realistic transcript: every line carries
the envelope of a real one (``parentUuid`` chain, ``sessionId``, ``cwd``, ``version``,
``gitBranch``, ISO timestamps); one API response is split over several ``assistant`` lines, one
content block each, sharing ``message.id`` and ``requestId``; tool results are ``user`` lines
with a ``tool_result`` block and a structured ``toolUseResult``; hooks and long Bash commands
leave ``progress`` lines; a turn ends with ``stop_hook_summary`` and ``turn_duration``; an auto
compaction is a ``compact_boundary`` then an ``isCompactSummary`` user line.
"""

from __future__ import annotations

import random
import string
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import msgspec

__all__ = ["TranscriptWriter", "project_folder_name"]

_BASE62: Final = string.ascii_letters + string.digits
_encoder: Final = msgspec.json.Encoder()


def project_folder_name(cwd: str) -> str:
    """The folder Claude Code keeps a project's transcripts in: the cwd with every character
    that is not a letter or a digit replaced by ``-``."""
    return "".join(c if c.isascii() and c.isalnum() else "-" for c in cwd)


class TranscriptWriter:
    """Builds transcript lines in memory; :meth:`flush` appends them to the file.

    Lines are held until flushed so a caller decides when Claude Code "has written" them (the
    demo flushes right before each hook fires).
    """

    def __init__(
        self,
        path: Path,
        *,
        session_id: str,
        cwd: str,
        git_branch: str,
        version: str = "2.1.42",
        model: str = "claude-opus-4-6",
        start: datetime | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.path = path
        self.session_id = session_id
        self.cwd = cwd
        self.git_branch = git_branch
        self.version = version
        self.model = model
        self.now = start or datetime.now(UTC)
        self.rng = rng or random.Random()
        self.slug: str | None = None
        self.context_tokens = 18_000
        self._parent: str | None = None
        self._last_conversation: str | None = None
        self._pending: list[bytes] = []
        self._turn_started = self.now

    # -- ids and time ----------------------------------------------------------------------

    def _rand(self, n: int) -> str:
        return "".join(self.rng.choice(_BASE62) for _ in range(n))

    def _uuid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def tool_id(self) -> str:
        return f"toolu_01{self._rand(22)}"

    def tick(self, seconds: float) -> str:
        """Move the clock on and return the new time as Claude Code writes it."""
        self.now += timedelta(seconds=seconds)
        return self.now.isoformat(timespec="milliseconds").replace("+00:00", "Z")

    # -- lines -----------------------------------------------------------------------------

    def _emit(self, line: dict[str, Any]) -> None:
        self._pending.append(_encoder.encode(line) + b"\n")

    def _envelope(self, kind: str, *, seconds: float, parent: str | None = None) -> dict[str, Any]:
        line: dict[str, Any] = {
            "parentUuid": parent,
            "isSidechain": False,
            "userType": "external",
            "cwd": self.cwd,
            "sessionId": self.session_id,
            "version": self.version,
            "gitBranch": self.git_branch,
        }
        if self.slug:
            line["slug"] = self.slug
        line["type"] = kind
        line["uuid"] = self._uuid()
        line["timestamp"] = self.tick(seconds)
        return line

    def _conversation(self, kind: str, *, seconds: float) -> dict[str, Any]:
        line = self._envelope(kind, seconds=seconds, parent=self._last_conversation)
        self._last_conversation = line["uuid"]
        self._parent = line["uuid"]
        return line

    def snapshot(self) -> None:
        """The ``file-history-snapshot`` line Claude Code writes before each prompt."""
        mid = self._uuid()
        stamp = self.tick(0.01)
        self._emit(
            {
                "type": "file-history-snapshot",
                "messageId": mid,
                "snapshot": {"messageId": mid, "trackedFileBackups": {}, "timestamp": stamp},
                "isSnapshotUpdate": False,
            }
        )

    def hook_progress(self, event: str, matcher: str, command: str, tool_use_id: str) -> None:
        line = self._envelope("progress", seconds=0.01, parent=self._parent)
        line["data"] = {
            "type": "hook_progress",
            "hookEvent": event,
            "hookName": f"{event}:{matcher}",
            "command": command,
        }
        line["parentToolUseID"] = tool_use_id
        line["toolUseID"] = tool_use_id
        self._parent = line["uuid"]
        self._emit(_reorder(line, ("uuid", "timestamp")))

    def bash_progress(self, output: str, tool_use_id: str, elapsed: int, total_lines: int) -> None:
        line = self._envelope("progress", seconds=1.0, parent=self._parent)
        line["data"] = {
            "type": "bash_progress",
            "output": output,
            "fullOutput": output,
            "elapsedTimeSeconds": elapsed,
            "totalLines": total_lines,
            "timeoutMs": 120_000,
        }
        line["toolUseID"] = f"bash-progress-{elapsed}"
        line["parentToolUseID"] = tool_use_id
        self._parent = line["uuid"]
        self._emit(_reorder(line, ("uuid", "timestamp")))

    def prompt(self, text: str) -> None:
        """A prompt the user typed."""
        self.snapshot()
        self._turn_started = self.now
        line = self._conversation("user", seconds=2.0)
        line["message"] = {"role": "user", "content": text}
        line["thinkingMetadata"] = {"maxThinkingTokens": 31999}
        line["todos"] = []
        line["permissionMode"] = "acceptEdits"
        self._emit(_reorder(line, ("uuid", "timestamp", "thinkingMetadata", "todos")))

    def response(self, blocks: list[dict[str, Any]], *, output_tokens: int = 400) -> None:
        """One API response: one ``assistant`` line per block, sharing message id and request."""
        message_id = f"msg_01{self._rand(22)}"
        request_id = f"req_011C{self._rand(16)}"
        created = 2_000 + self.rng.randrange(6_000)
        usage = {
            "input_tokens": 3,
            "cache_creation_input_tokens": created,
            "cache_read_input_tokens": self.context_tokens,
            "cache_creation": {
                "ephemeral_5m_input_tokens": created,
                "ephemeral_1h_input_tokens": 0,
            },
            "output_tokens": output_tokens,
            "service_tier": "standard",
            "inference_geo": "global",
        }
        self.context_tokens += created
        for i, block in enumerate(blocks):
            if block.get("type") == "tool_use":
                block = {**block, "caller": {"type": "direct"}}
            line = self._conversation("assistant", seconds=4.0 if i == 0 else 1.5)
            line["message"] = {
                "model": self.model,
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "content": [block],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": usage,
            }
            line["requestId"] = request_id
            self._emit(_reorder(line, ("message", "requestId", "type", "uuid", "timestamp")))

    def thinking(self, text: str) -> dict[str, Any]:
        return {"type": "thinking", "thinking": text, "signature": f"Eq{self._rand(86)}=="}

    def tool_result(
        self,
        tool_use_id: str,
        content: str,
        tool_use_result: Any,
        *,
        is_error: bool = False,
        seconds: float = 1.0,
    ) -> None:
        source = self._last_conversation
        line = self._conversation("user", seconds=seconds)
        block: dict[str, Any] = {"tool_use_id": tool_use_id, "type": "tool_result"}
        block["content"] = content
        block["is_error"] = is_error
        line["message"] = {"role": "user", "content": [block]}
        line["toolUseResult"] = tool_use_result
        line["sourceToolAssistantUUID"] = source
        self._emit(
            _reorder(line, ("uuid", "timestamp", "toolUseResult", "sourceToolAssistantUUID"))
        )

    def end_turn(self, hooks: list[str]) -> None:
        """What Claude Code writes when a turn ends: the Stop hooks' summary, the duration."""
        line = self._envelope("system", seconds=0.5, parent=self._parent)
        line.update(
            subtype="stop_hook_summary",
            hookCount=len(hooks),
            hookInfos=[{"command": c} for c in hooks],
            hookErrors=[],
            preventedContinuation=False,
            stopReason="",
            hasOutput=False,
            level="suggestion",
        )
        line["toolUseID"] = self._uuid()
        self._parent = line["uuid"]
        self._emit(_reorder(line, ("timestamp", "uuid", "toolUseID")))
        duration = int((self.now - self._turn_started).total_seconds() * 1000)
        line = self._envelope("system", seconds=0.05, parent=self._parent)
        line.update(subtype="turn_duration", durationMs=duration, isMeta=False)
        self._parent = line["uuid"]
        self._emit(_reorder(line, ("timestamp", "uuid", "isMeta")))

    def compaction(self, summary: str, *, trigger: str = "auto") -> None:
        """Claude's compaction: a boundary (a new root) then the summary as a user line."""
        logical_parent = self._last_conversation
        line = self._envelope("system", seconds=40.0, parent=None)
        line = {"parentUuid": None, "logicalParentUuid": logical_parent, **line}
        line.update(subtype="compact_boundary", content="Conversation compacted", isMeta=False)
        line["level"] = "info"
        line["compactMetadata"] = {"trigger": trigger, "preTokens": self.context_tokens}
        self._emit(_reorder(line, ("timestamp", "uuid", "level", "compactMetadata")))
        self._last_conversation = line["uuid"]
        self._parent = line["uuid"]
        line = self._conversation("user", seconds=0.001)
        line["message"] = {"role": "user", "content": summary}
        line["isVisibleInTranscriptOnly"] = True
        line["isCompactSummary"] = True
        self._emit(
            _reorder(line, ("isVisibleInTranscriptOnly", "isCompactSummary", "uuid", "timestamp"))
        )
        self.context_tokens = 21_000

    # -- the file --------------------------------------------------------------------------

    def flush(self) -> int:
        """Append the pending lines to the transcript; return its size in bytes."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "ab") as f:
            f.write(b"".join(self._pending))
        self._pending.clear()
        return self.path.stat().st_size


def _reorder(line: dict[str, Any], last: tuple[str, ...]) -> dict[str, Any]:
    """The line with ``last`` keys moved to the end, in that order (Claude Code's key order)."""
    out = {k: v for k, v in line.items() if k not in last}
    out.update((k, line[k]) for k in last if k in line)
    return out
