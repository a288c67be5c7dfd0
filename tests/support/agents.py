"""The real agent clients in tests: where they are, and a private world to run them in.

``client(name)`` gives a pinned client's executable from the cache (``tools/agents.py``,
installing it with npm when it is missing) or skips the test, saying why. :class:`ClaudeWorld`
is one test's Claude Code: its own ``HOME`` (so its settings, session files and every config or
data folder are inside ``tmp_path``), a project folder, a continuity store
(``CONTINUITY_HOME``), and a :class:`~tests.support.model_server.ModelServer` it talks to
instead of Anthropic's API, with the quiet and offline settings of
``../shared/design/real-agents.md``. Nothing of the machine's own ``~/.claude`` is read.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TypeVar

import pytest

from tests.support.model_server import ModelServer
from tools import agents

__all__ = ["ClaudeRun", "ClaudeWorld", "client", "continuity_mcp_missing", "eventually"]

T = TypeVar("T")

RUN_TIMEOUT_S: Final = 120
EVENTUALLY_S: Final = 30.0
QUIET: Final = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
}
"""Claude Code's quiet and offline switches (``real-agents.md``)."""
CLEARED: Final = ("ANTHROPIC_", "CLAUDE", "CONTINUITY_", "XDG_", "MCP_")
"""Environment prefixes of the test runner's own that must not reach a client: its keys, its
Claude Code session, its store."""


_UNAVAILABLE: dict[str, str] = {}
"""Each client that could not be had in this process, and why: the next test that needs it
skips at once instead of trying npm again (each try can take 15-20 s without a registry)."""


def client(name: str) -> Path:
    """The executable of the pinned client ``name`` (``claude-code``, ``inspector``), installed
    into the cache if need be; skips the test, saying why, when it cannot be had (once per
    process: a failed install is remembered)."""
    pin = agents.pin_of(name)
    why = _UNAVAILABLE.get(name)
    if why is None:
        try:
            return agents.install(name)
        except agents.Unavailable as exc:
            why = _UNAVAILABLE[name] = str(exc)
    pytest.skip(f"{pin.package}@{pin.version} cannot be had here: {why}")


@functools.cache
def continuity_mcp_missing() -> str | None:
    """Why ``continuity mcp`` cannot be tested here (None when it can): the MCP server of issue
    28 (part A) may not be in this tree yet."""
    done = subprocess.run(
        [sys.executable, "-m", "continuity", "mcp", "--help"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    if done.returncode != 0:
        boxed = (done.stderr or done.stdout).splitlines()
        said = [t for t in (line.strip(" │╭╮╰╯─") for line in boxed) if t]
        return "`continuity mcp --help` fails: " + (said[-1] if said else f"exit {done.returncode}")
    return None


@dataclass
class ClaudeRun:
    """One ``claude -p`` run: its exit code, its stream-json events, stderr, wall time."""

    args: list[str]
    returncode: int
    events: list[dict[str, Any]]
    stderr: str
    seconds: float

    @property
    def session_id(self) -> str:
        """The session the run was (its result's: hooks that run before a resumed session is
        loaded report a session id of their own)."""
        session = self.result.get("session_id")
        assert isinstance(session, str), self.result
        return session

    def hook_outputs(self, hook_name: str) -> list[str]:
        """What the hooks named ``hook_name`` (``SessionStart:compact``) printed in this run."""
        return [
            str(e.get("output") or "")
            for e in self.events
            if e.get("subtype") == "hook_response" and e.get("hook_name") == hook_name
        ]

    @property
    def result(self) -> dict[str, Any]:
        results = [e for e in self.events if e.get("type") == "result"]
        assert results, f"no result event: {self.stderr[-2000:]}"
        return results[-1]

    def check(self) -> ClaudeRun:
        """Itself, if the run succeeded (else an assertion error saying what it said)."""
        assert self.returncode == 0, (
            f"claude {self.args} exited {self.returncode}: {self.stderr[-2000:]}"
            f" {self.events[-1:] if self.events else ''}"
        )
        assert not self.result.get("is_error"), self.result
        return self


@dataclass
class ClaudeWorld:
    """A test's own Claude Code: ``HOME``, project, store, and the model server."""

    exe: Path
    root: Path
    server: ModelServer
    env: dict[str, str] = field(init=False)
    runs: list[ClaudeRun] = field(default_factory=list)

    def __post_init__(self) -> None:
        for folder in (self.home, self.project):
            folder.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(CLEARED)}
        env.update(QUIET)
        env.update(
            HOME=str(self.home),
            XDG_CONFIG_HOME=str(self.home / ".config"),
            XDG_DATA_HOME=str(self.home / ".local" / "share"),
            XDG_CACHE_HOME=str(self.home / ".cache"),
            XDG_STATE_HOME=str(self.home / ".local" / "state"),
            ANTHROPIC_BASE_URL=self.server.url,
            ANTHROPIC_API_KEY="sk-ant-test-not-a-key",
            CONTINUITY_HOME=str(self.store),
        )
        self.env = env

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def project(self) -> Path:
        return self.root / "project"

    @property
    def store(self) -> Path:
        return self.root / "store"

    def user_settings(self, settings: dict[str, Any]) -> None:
        """Merge ``settings`` into the user's Claude Code settings (``~/.claude``, the tmp
        HOME's): what a user who approves things once would have there."""
        path = self.home / ".claude" / "settings.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        have = json.loads(path.read_text()) if path.exists() else {}
        have.update(settings)
        path.write_text(json.dumps(have, indent=2))

    def continuity(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """``continuity ARGS`` in the project, with this world's environment (its store)."""
        done = subprocess.run(
            [sys.executable, "-m", "continuity", *args],
            cwd=self.project,
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
            timeout=RUN_TIMEOUT_S,
        )
        if check:
            assert done.returncode == 0, f"continuity {args}: {done.stdout}{done.stderr}"
        return done

    def claude_cmd(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``claude ARGS`` (a subcommand such as ``mcp list``), plain output."""
        return subprocess.run(
            [str(self.exe), *args],
            cwd=self.project,
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
            timeout=RUN_TIMEOUT_S,
        )

    def claude(self, prompt: str, *more: str) -> ClaudeRun:
        """``claude -p PROMPT --output-format stream-json --verbose MORE`` in the project."""
        args = ["-p", prompt, "--output-format", "stream-json", "--verbose", *more]
        start = time.monotonic()
        done = self.claude_cmd(*args)
        seconds = time.monotonic() - start
        events = []
        for line in done.stdout.splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                events.append(event)
        run = ClaudeRun(args, done.returncode, events, done.stderr, seconds)
        self.runs.append(run)
        return run

    def transcript(self, session_id: str) -> Path:
        """Claude Code's own session file of ``session_id`` (under the tmp HOME)."""
        found = list((self.home / ".claude" / "projects").glob(f"*/{session_id}.jsonl"))
        assert len(found) == 1, f"one transcript of {session_id} expected, found {found}"
        return found[0]

    def errors_log(self) -> list[str]:
        """The store's ``errors.log`` lines (what the hooks could not do)."""
        path = self.store / "errors.log"
        return path.read_text().splitlines() if path.exists() else []


def eventually(
    get: Callable[[], T], done: Callable[[T], bool], *, within: float = EVENTUALLY_S
) -> T:
    """``get()`` once ``done`` holds of it (asynchronous hooks may still be writing when the
    client exits), or its last value after ``within`` seconds, for the test to fail on."""
    deadline = time.monotonic() + within
    while True:
        got = get()
        if done(got) or time.monotonic() > deadline:
            return got
        time.sleep(0.1)
