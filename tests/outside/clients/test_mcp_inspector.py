"""``continuity mcp`` through the official MCP Inspector's CLI mode (pinned, from npm).

The Inspector starts ``continuity mcp`` over stdio on a real store (the one ``continuity demo``
fills: a Claude Code session replayed through the hooks), lists its tools and calls them, as a
developer checking an MCP server does. Skipped, saying why, while ``continuity mcp`` is not in
this tree.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pytest

from tests.support.agents import QUIET, client, continuity_mcp_missing

pytestmark = [pytest.mark.slow, pytest.mark.agents]

TOOLS: Final = {"search", "read", "sessions", "restore", "remember"}
TIMEOUT_S: Final = 120


@dataclass(frozen=True)
class Inspected:
    inspector: Path
    continuity: Path
    store: Path
    home: Path
    thread: str

    def run(self, *args: str) -> tuple[int, Any, str]:
        """``mcp-inspector --cli ARGS -- continuity mcp``: exit code, parsed stdout, stderr."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CONTINUITY_", "MCP_"))}
        env.update(QUIET, HOME=str(self.home))
        command: Sequence[str] = [
            str(self.inspector),
            "--cli",
            *args,
            "-e",
            f"CONTINUITY_HOME={self.store}",
            "--",
            str(self.continuity),
            "mcp",
        ]
        done = subprocess.run(
            command,
            cwd=self.home,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=TIMEOUT_S,
        )
        try:
            parsed = json.loads(done.stdout)
        except ValueError:
            parsed = None
        return done.returncode, parsed, done.stderr

    def call(self, tool: str, *pairs: str) -> dict[str, Any]:
        args = ["--method", "tools/call", "--tool-name", tool]
        if pairs:
            args += ["--tool-arg", *pairs]
        code, result, stderr = self.run(*args)
        assert isinstance(result, dict), f"exit {code}: {stderr[-2000:]}"
        return result


def _text(result: dict[str, Any]) -> str:
    return "\n".join(
        c.get("text", "") for c in result.get("content", []) if c.get("type") == "text"
    )


@pytest.fixture(scope="module")
def inspected(tmp_path_factory: pytest.TempPathFactory) -> Inspected:
    missing = continuity_mcp_missing()
    if missing:
        pytest.skip(f"the MCP server is not in this tree yet: {missing}")
    inspector = client("inspector")
    entry = Path(sys.executable).with_name("continuity")
    if not entry.exists():
        pytest.skip(f"no `continuity` entry point beside {sys.executable} (pip install -e .)")
    root = tmp_path_factory.mktemp("inspector")
    store, home = root / "store", root / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTINUITY_")}
    env.update(CONTINUITY_HOME=str(store), HOME=str(home))
    demo = subprocess.run(
        [str(entry), "demo"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=TIMEOUT_S,
    )
    assert demo.returncode == 0, demo.stdout + demo.stderr
    threads = subprocess.run(
        [str(entry), "threads"], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    thread = next(t for t in threads if t.startswith("cc-demo-"))
    return Inspected(inspector, entry, store, home, thread)


def test_the_inspector_lists_the_five_tools_with_their_schemas(inspected: Inspected) -> None:
    code, listed, stderr = inspected.run("--method", "tools/list")
    assert code == 0, stderr
    tools = {t["name"]: t for t in listed["tools"]}
    assert set(tools) == TOOLS
    for name, tool in tools.items():
        assert tool.get("description"), name
        assert tool["inputSchema"]["type"] == "object", name
    assert tools["search"]["inputSchema"]["required"] == ["query"]
    assert tools["remember"]["inputSchema"]["required"] == ["text"]


def test_a_search_through_the_inspector_finds_the_archived_session(inspected: Inspected) -> None:
    result = inspected.call("search", "query=cProfile", "scope=all")
    assert result.get("isError") is False, result
    text = _text(result)
    assert inspected.thread in text
    assert "cProfile" in text or "cprofile" in text.lower()


def test_read_and_sessions_through_the_inspector(inspected: Inspected) -> None:
    read = inspected.call("read", f"thread={inspected.thread}", "from_seq=0")
    assert read.get("isError") is False, read
    assert "export" in _text(read)
    sessions = inspected.call("sessions", "scope=all")
    assert sessions.get("isError") is False, sessions
    assert inspected.thread in _text(sessions)


def test_a_bad_call_is_a_tool_error_of_one_line(inspected: Inspected) -> None:
    result = inspected.call("read", "thread=cc-no-such-thread")
    assert result.get("isError") is True, result
    text = _text(result).strip()
    assert text and "\n" not in text, text
    assert "cc-no-such-thread" in text
