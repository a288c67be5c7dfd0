"""What the MCP server's tests share: a Claude Code transcript writer, and the real SDK client
talking to ``python -m continuity mcp`` over stdio.

The client is the official ``mcp`` SDK's own (``mcp.client.stdio`` + ``ClientSession``); a
test without the SDK installed skips, saying why.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from mcp.client.session import ClientSession

__all__ = ["Transcript", "mcp_client", "require_sdk", "server_env", "text_of"]


def require_sdk() -> None:
    """Skip the test when the ``mcp`` extra is not installed."""
    pytest.importorskip("mcp", reason="the MCP SDK is not installed (pip install '.[mcp]')")


def server_env(**extra: str) -> dict[str, str]:
    """The environment a client gives the server: ours without continuity's and Claude's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONTINUITY_", "CLAUDE_"))}
    env.update(extra)
    return env


@asynccontextmanager
async def mcp_client(
    store: Path | str, *, cwd: Path, env: dict[str, str] | None = None, args: tuple[str, ...] = ()
) -> AsyncIterator[ClientSession]:
    """An initialized SDK client session with a fresh ``continuity mcp --store STORE``
    process, whose working directory (its project) is ``cwd``."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "continuity", "mcp", "--store", str(store), *args],
        cwd=str(cwd),
        env=server_env() if env is None else env,
    )
    with open(os.devnull, "w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


def text_of(result: Any) -> str:
    """The text of a tool result (its one text block)."""
    texts = [c.text for c in result.content if getattr(c, "type", "") == "text"]
    assert len(texts) == 1, result
    return str(texts[0])


class Transcript:
    """Writes a Claude Code transcript the way Claude Code does (one line per content block of
    an assistant response, tool results as user lines), appended on :meth:`flush`."""

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

    def _line(self, kind: str, **fields: Any) -> None:
        self.n += 1
        stamp = datetime(2026, 1, 5, 9, 0, tzinfo=UTC) + timedelta(seconds=self.n)
        self.pending.append(
            {
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
        )

    def prompt(self, text: str) -> None:
        self._line("user", message={"role": "user", "content": text})

    def say(self, text: str) -> None:
        self._line(
            "assistant",
            requestId=f"req_{self.n}",
            message={
                "id": f"msg_{self.n}",
                "role": "assistant",
                "model": "claude-test",
                "content": [{"type": "text", "text": text}],
            },
        )

    def tool(self, name: str, tool_input: dict[str, Any], output: str) -> None:
        msg_id, use_id = f"msg_{self.n + 1}", f"toolu_{self.n + 1:06d}"
        self._line(
            "assistant",
            requestId=f"req_{msg_id}",
            message={
                "id": msg_id,
                "role": "assistant",
                "model": "claude-test",
                "content": [{"type": "tool_use", "id": use_id, "name": name, "input": tool_input}],
            },
        )
        self._line(
            "user",
            message={
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": use_id, "content": output}],
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
