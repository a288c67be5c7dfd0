"""Codex end to end with the real Codex CLI (pinned, from npm), as a user has it.

``continuity install codex`` into a fresh ``CODEX_HOME`` (its hooks trusted by the install, no
``--dangerously-bypass-hook-trust``), then two real ``codex exec`` runs against the scripted
model server (OpenAI Responses): a turn that runs a shell command whose large usage makes
Codex compact in the middle of the turn, and a resumed turn that calls continuity's MCP
``search``. Nothing but the hooks archives: what the store holds and what reached the model
(the request log) are checked. One session (about 8 s of CLI runs here) serves every test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import pytest

from tests.support.agents import RUN_TIMEOUT_S, client, continuity_mcp_missing
from tests.support.model_openai_responses import MODEL, OpenAIResponses
from tests.support.model_server import (
    ModelServer,
    Reply,
    Request,
    Rule,
    Script,
    ToolCall,
    Usage,
)

pytestmark = [pytest.mark.slow, pytest.mark.agents]

COMMAND: Final = "echo hello > greeting-7f3a.txt"
"""The shell command the scripted model runs (a distinctive file name: finding it in a request
after the compaction means it came from continuity's restore)."""
SUMMARY: Final = "SUMMARY: the user asked for a greeting file and it was written."
"""Codex's compaction summary as the scripted model writes it: it names no file, no command."""
FIRST: Final = "please write the greeting file"
SECOND: Final = "What did you do before?"
CLEARED: Final = ("OPENAI_", "CODEX_", "CONTINUITY_", "ANTHROPIC_", "CLAUDE", "XDG_", "MCP_")


def script() -> Script:
    return Script(
        [
            Rule(
                Reply(text=SUMMARY),
                name="compaction summary",
                main=None,
                anywhere="CONTEXT CHECKPOINT COMPACTION",
            ),
            Rule(
                Reply(
                    text="I will write it.",
                    tool_calls=(ToolCall("exec_command", {"cmd": COMMAND}),),
                    usage=Usage(input_tokens=30_000, output_tokens=20),  # over the 20,000 limit
                ),
                name="run the command",
                phrase=FIRST,
                after_tool=False,
            ),
            Rule(
                Reply(text="Wrote the greeting file."),
                name="after compaction",
                anywhere="Another language model started",  # Codex's summary prefix
            ),
            Rule(
                Reply(
                    text="Let me look it up.",
                    tool_calls=(ToolCall("mcp__continuity__search", {"query": "greeting"}),),
                ),
                name="search the archive",
                phrase=SECOND,
                after_tool=False,
            ),
            Rule(
                lambda r: Reply(text="The archive says: " + " ".join(r.tool_results)[:200]),
                name="after the search",
                phrase=SECOND,
                after_tool=True,
            ),
        ]
    )


@dataclass
class CodexWorld:
    """A test's own Codex: ``HOME`` and ``CODEX_HOME`` in ``root``, a project, a store, and the
    scripted model as a provider of its config."""

    exe: Path
    root: Path
    server: ModelServer
    env: dict[str, str] = field(init=False)
    runs: list[subprocess.CompletedProcess[str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        for folder in (self.codex_home, self.project):
            folder.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(CLEARED)}
        env.update(
            HOME=str(self.root / "home"),
            CODEX_HOME=str(self.codex_home),
            OPENAI_API_KEY="sk-test-not-a-key",
            CONTINUITY_HOME=str(self.store),
        )
        self.env = env
        (self.codex_home / "config.toml").write_text(
            f'model = "{MODEL}"\n'
            'model_provider = "fake"\n'
            'approval_policy = "never"\n'
            'sandbox_mode = "danger-full-access"\n'
            "model_auto_compact_token_limit = 20000\n"
            "\n"
            "[model_providers.fake]\n"
            'name = "fake"\n'
            f'base_url = "{self.server.url}/v1"\n'
            'env_key = "OPENAI_API_KEY"\n'
            'wire_api = "responses"\n'
        )

    @property
    def codex_home(self) -> Path:
        return self.root / "home" / ".codex"

    @property
    def project(self) -> Path:
        return self.root / "project"

    @property
    def store(self) -> Path:
        return self.root / "store"

    def continuity(self, *args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "continuity", *args],
            cwd=self.project,
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
            timeout=RUN_TIMEOUT_S,
        )
        assert done.returncode == 0, f"continuity {args}: {done.stdout}{done.stderr}"
        return done

    def codex(self, *args: str, config: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
        """``codex [-c CONFIG]... exec --skip-git-repo-check ARGS </dev/null`` in the project."""
        overrides = [arg for c in config for arg in ("-c", c)]
        done = subprocess.run(
            [str(self.exe), *overrides, "exec", "--skip-git-repo-check", *args],
            cwd=self.project,
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            check=False,
            timeout=RUN_TIMEOUT_S,
        )
        self.runs.append(done)
        assert done.returncode == 0, f"codex {args} exited {done.returncode}: {done.stderr[-3000:]}"
        return done


@dataclass
class Session:
    world: CodexWorld
    installed: str
    thread: str
    frames: list[dict[str, Any]]
    requests: list[Request]


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    exe = client("codex")
    missing = continuity_mcp_missing()
    if missing:
        pytest.skip(missing)
    root = tmp_path_factory.mktemp("codex")
    with ModelServer(script(), providers=[OpenAIResponses()]) as server:
        world = CodexWorld(exe, root, server)
        installed = world.continuity("install", "codex").stdout
        world.codex(FIRST)
        # Codex starts MCP servers beside the session and does not wait for a slow one unless
        # it is required: the install marks ours required, so this run's first request (which
        # calls it) and the first after the compaction of the run before have its tools.
        world.codex("resume", "--last", SECOND)
        try:
            (rollout,) = (world.codex_home / "sessions").rglob("rollout-*.jsonl")
            thread = "codex-" + rollout.stem[-36:]
            shown = world.continuity("log", thread, "--json").stdout
            frames = [json.loads(line) for line in shown.splitlines() if line.strip()]
            yield Session(world, installed, thread, frames, server.requests())
        finally:
            server.dump(root / "requests.jsonl")


def _messages(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f for f in frames if f["type"] == "message_appended"]


def _blocks(frames: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [b for f in _messages(frames) for b in f["content"] if b.get("type") == kind]


def _texts(frames: list[dict[str, Any]], role: str) -> list[str]:
    return [
        b["text"]
        for f in _messages(frames)
        if f["role"] == role
        for b in f["content"]
        if b.get("type") == "text"
    ]


def test_install_trusts_the_hooks_so_codex_runs_them(session: Session) -> None:
    assert "installed continuity hooks in" in session.installed
    assert "hooks' trust and the MCP server" in session.installed
    # Nothing else archived: the thread exists because Codex ran the hooks (no bypass flag).
    assert session.frames and session.frames[0]["type"] == "thread_created"
    meta = session.frames[0]["meta"]
    assert meta["source"] == "codex"
    assert meta["project"] == str(session.world.project)
    stderr = session.world.runs[0].stderr
    for event in ("SessionStart", "UserPromptSubmit", "PostToolUse", "PreCompact", "Stop"):
        assert f"hook: {event} Completed" in stderr, stderr[-2000:]
    assert "hook: PostCompact Completed" in stderr


def test_every_message_of_both_runs_is_archived(session: Session) -> None:
    users = _texts(session.frames, "user")
    assistants = _texts(session.frames, "assistant")
    assert FIRST in users and SECOND in users
    for said in ("I will write it.", "Wrote the greeting file.", "Let me look it up."):
        assert said in assistants
    assert any(t.startswith("The archive says:") for t in assistants)
    assert SUMMARY in assistants  # the compaction's answer, as Codex recorded it


def test_the_tool_pairs_are_archived(session: Session) -> None:
    uses = {b["id"]: b for b in _blocks(session.frames, "tool_use")}
    results = {b["tool_use_id"]: b for b in _blocks(session.frames, "tool_result")}
    assert set(uses) == set(results)
    by_name = {b["name"]: b for b in uses.values()}
    assert by_name["exec_command"]["input"] == {"cmd": COMMAND}
    assert "exited with code 0" in str(results[by_name["exec_command"]["id"]]["content"])
    search = by_name["mcp__continuity__search"]
    assert search["input"] == {"query": "greeting"}
    assert "greeting" in str(results[search["id"]]["content"])
    assert (session.world.project / "greeting-7f3a.txt").read_text() == "hello\n"


def test_the_compaction_is_a_checkpoint_with_codexs_summary(session: Session) -> None:
    (checkpoint,) = [f for f in session.frames if f["type"] == "compaction_checkpoint_created"]
    assert checkpoint["cut_rule_id"] == "codex_compact/v1"
    compiled = json.loads(session.world.continuity("compile", session.thread, "--dry-run").stdout)
    # the next context builds on Codex's summary (the checkpoint), not on the messages before
    (ref,) = [i for i in compiled["items"] if i["kind"] == "summary_ref"]
    assert ref["checkpoint_id"] == checkpoint["checkpoint_id"]
    assert SUMMARY in ref["text"]
    assert not any(i.get("seq", 99) < ref["to_seq"] for i in compiled["items"][1:])


def test_the_restore_reaches_the_model_after_the_compaction(session: Session) -> None:
    requests = session.requests
    compaction = next(
        i for i, r in enumerate(requests) if "CONTEXT CHECKPOINT COMPACTION" in r.text
    )
    after = requests[compaction + 1]
    items = after.body["input"]
    # Codex's compaction dropped the tool call from the model's context ...
    assert not any(i.get("type") == "function_call" for i in items)
    restored = [
        c["text"]
        for i in items
        if i.get("type") == "message" and i.get("role") == "developer"
        for c in i["content"]
        if "Restored by continuity" in c.get("text", "")
    ]
    # ... and continuity's restore (SessionStart, source "compact") gave it back, exactly.
    assert len(restored) == 1, [i.get("role") for i in items]
    assert "greeting-7f3a.txt" in restored[0]
    assert session.thread in restored[0]


def test_continuitys_tools_are_there_from_the_first_request_on(session: Session) -> None:
    """Including the first request after the compaction: Codex waits for a required server."""
    main = [r for r in session.requests if "CONTEXT CHECKPOINT COMPACTION" not in r.text]
    compaction = next(
        i for i, r in enumerate(session.requests) if "CONTEXT CHECKPOINT COMPACTION" in r.text
    )
    assert session.requests[compaction + 1] in main
    for request in main:
        names = [t.get("name") for t in request.body.get("tools", [])]
        assert "mcp__continuity" in names, names
    config = (session.world.codex_home / "config.toml").read_text()
    assert "required = true" in config.split("[mcp_servers.continuity]", 1)[1]


def test_the_mcp_search_answered_from_the_archive(session: Session) -> None:
    first = session.requests[0]
    second_run = [r for r in session.requests if r.last_user_text == SECOND]
    assert second_run and any(
        t.get("name") == "mcp__continuity" for t in second_run[0].body.get("tools", [])
    ), "Codex offers continuity's tools as the namespace mcp__continuity"
    (answered,) = [r for r in second_run if r.tool_result_of == "search"]
    assert "greeting" in " ".join(answered.tool_results)
    assert first.body["model"] == MODEL


def test_ingest_after_the_hooks_adds_nothing(session: Session) -> None:
    out = session.world.continuity(
        "ingest", "--agent", "codex", str(session.world.codex_home)
    ).stdout
    assert "0 new messages" in out
    again = session.world.continuity("log", session.thread, "--json").stdout
    assert len(again.splitlines()) == len(session.frames)
