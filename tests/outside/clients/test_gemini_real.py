"""The real Gemini CLI (0.61.0, ``tools/agents.py``) with continuity installed as a user would
(``continuity install gemini``), against the scripted model server (its Gemini provider).

One session in three headless runs: a shell tool call and an MCP call to ``continuity``'s own
``search``; a resumed run whose first turn reports a prompt near the model's window, so Gemini
CLI compresses its history (``<state_snapshot>``); a third run whose BeforeAgent hook gives the
model continuity's restore. The archive is checked against what Gemini CLI wrote: the messages,
the tool pairs, the checkpoint with the snapshot; and what the hooks returned against what the
model received.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Final

import pytest

from continuity import frames as fr
from continuity.store.locate import open_store
from continuity.summary import decode_summary
from tests.support.agents import client, continuity_mcp_missing
from tests.support.model_gemini import Gemini
from tests.support.model_server import ModelServer, Reply, Request, Rule, Script, ToolCall, Usage

pytestmark = [pytest.mark.slow, pytest.mark.agents]

MODEL: Final = "gemini-2.5-pro"
SNAPSHOT: Final = (
    "<state_snapshot>SCRIPTED_SNAPSHOT: the user ran echo hi and echo big.</state_snapshot>"
)
CLEARED: Final = ("GEMINI", "GOOGLE", "CONTINUITY_", "XDG_", "CLAUDE", "ANTHROPIC_")


def _script() -> Script:
    def after_search(request: Request) -> Reply:
        found = "found it" if "RUN_ECHO" in "".join(request.tool_results) else "not found"
        return Reply(text=f"The archive search {found}. Done.")

    return Script(
        [
            Rule(
                Reply(
                    tool_calls=(
                        ToolCall("run_shell_command", {"command": "echo hi", "description": "hi"}),
                    )
                ),
                name="shell",
                phrase="RUN_ECHO",
                after_tool=False,
            ),
            Rule(
                Reply(
                    tool_calls=(
                        ToolCall("mcp_continuity_search", {"query": "RUN_ECHO", "scope": "all"}),
                    )
                ),
                name="mcp",
                after_tool="run_shell_command",
            ),
            Rule(after_search, name="after-mcp", after_tool="mcp_continuity_search"),
            Rule(
                Reply(
                    tool_calls=(
                        ToolCall(
                            "run_shell_command", {"command": "echo big", "description": "big"}
                        ),
                    ),
                    usage=Usage(input_tokens=900_000, output_tokens=50),
                ),
                name="big",
                phrase="AUTOCOMPACT",
                after_tool=False,
            ),
            Rule(
                Reply(text="Compressed and done."), name="after-big", after_tool="run_shell_command"
            ),
            Rule(
                Reply(text=SNAPSHOT),
                name="snapshot",
                main=False,
                anywhere="state_snapshot",
                times=None,
            ),
            Rule(Reply(text="Restored, thanks."), name="restored", phrase="WHAT_NOW"),
        ]
    )


class _World:
    def __init__(self, root: Path, server: ModelServer, exe: Path) -> None:
        self.home, self.project, self.store = root / "home", root / "project", root / "store"
        self.project.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(self.project)], check=True)
        self.exe = exe
        env = {k: v for k, v in os.environ.items() if not k.startswith(CLEARED)}
        env.update(
            HOME=str(self.home),
            GOOGLE_GEMINI_BASE_URL=server.url,
            GEMINI_API_KEY="not-a-key",
            GEMINI_CLI_NO_RELAUNCH="true",
            CONTINUITY_HOME=str(self.store),
        )
        self.env = env
        settings = self.home / ".gemini" / "settings.json"
        settings.parent.mkdir(parents=True)
        settings.write_text(
            json.dumps(
                {
                    "security": {
                        "auth": {"selectedType": "gemini-api-key"},
                        "folderTrust": {"enabled": False},
                    },
                    "model": {"compressionThreshold": 0.2},
                },
                indent=2,
            )
        )

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            args,
            cwd=self.project,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )

    def gemini(self, prompt: str, *more: str) -> list[dict[str, Any]]:
        done = self.run(
            str(self.exe), *more, "-m", MODEL, "-p", prompt, "--yolo", "-o", "stream-json"
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert "continuity:" not in done.stderr, done.stderr[-3000:]  # no hook complained
        return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def test_gemini_cli_session_is_archived_with_its_tool_pairs_and_compression(tmp_path: Path) -> None:
    exe = client("gemini")
    missing = continuity_mcp_missing()
    if missing:
        pytest.skip(missing)
    with ModelServer(_script(), providers=[Gemini()]) as server:
        world = _World(tmp_path, server, exe)
        installed = world.run(sys.executable, "-m", "continuity", "install", "gemini")
        assert installed.returncode == 0, installed.stderr
        try:
            first = world.gemini("Please RUN_ECHO now")
            world.gemini("AUTOCOMPACT_TEST please", "--resume", "latest")
            world.gemini("WHAT_NOW after the compression?", "--resume", "latest")
        finally:
            server.dump(tmp_path / "model-requests.jsonl")
        requests = server.requests(main=True)
    session_id = first[0]["session_id"]
    # One file per session, named by the minute it was (re)started: a resume in another minute
    # than the first run writes a second file of the same session (seen in CI).
    sessions = sorted(
        (world.home / ".gemini" / "tmp").glob(f"*/chats/session-*-{session_id[:8]}.jsonl")
    )
    assert sessions, "the session file"
    store = open_store(world.store)
    thread = store.thread(f"gemini-{session_id}")
    frames = list(thread.read())
    messages = [f for f in frames if isinstance(f, fr.MessageAppended)]

    created = frames[0]
    assert isinstance(created, fr.ThreadCreated)
    assert created.meta["source"] == "gemini-cli"
    assert created.meta["project"] == str(world.project)
    assert created.meta["transcript"] in {str(path.resolve()) for path in sessions}

    # every prompt once, with no copy of the ones the resume and the compression rewrote
    prompts = [
        b.text
        for m in messages
        if m.role == "user" and m.meta.get("is_meta") != "true"
        for b in m.content
        if isinstance(b, fr.TextBlock)
    ]
    assert prompts == [
        "Please RUN_ECHO now",
        "AUTOCOMPACT_TEST please",
        "WHAT_NOW after the compression?",
    ]
    # the tool calls, each followed by its result
    pairs = []
    for i, m in enumerate(messages):
        for use in (b for b in m.content if isinstance(b, fr.ToolUseBlock)):
            result = next(b for b in messages[i + 1].content if isinstance(b, fr.ToolResultBlock))
            assert result.tool_use_id == use.id
            pairs.append((use.name, result.content))
    assert [name for name, _ in pairs] == [
        "run_shell_command",
        "mcp_continuity_search",
        "run_shell_command",
    ]
    assert "hi" in pairs[0][1] and "RUN_ECHO" in pairs[1][1] and "big" in pairs[2][1]
    answers = [
        b.text
        for m in messages
        if m.role == "assistant"
        for b in m.content
        if isinstance(b, fr.TextBlock)
    ]
    assert answers == [
        "The archive search found it. Done.",
        "Compressed and done.",
        "Restored, thanks.",
    ]
    assert all(m.meta.get("tokens_total") for m in messages if m.role == "assistant")

    # the compression: a checkpoint whose summary is Gemini's snapshot, over the first run
    (checkpoint,) = [f for f in frames if isinstance(f, fr.CompactionCheckpointCreated)]
    assert checkpoint.cut_rule_id == "gemini_cli_compress/v1"
    assert decode_summary(store.artifacts.get(checkpoint.summary_artifact_id)).text == SNAPSHOT
    covered = next(m for m in messages if m.seq == checkpoint.to_seq)
    assert covered.content[-1] == fr.TextBlock(text="The archive search found it. Done.")
    assert any('"$set"' in p.read_text() and SNAPSHOT in p.read_text() for p in sessions)

    # the hook gave the restore at the BeforeAgent after it; the model received it, once
    restored = [r for r in requests if "Restored by continuity" in r.text]
    assert restored and all("WHAT_NOW" in r.last_user_text for r in restored)
    assert "<hook_context>" in restored[0].text
    # ...and the archive does not hold it again as part of the prompt
    assert not any("Restored by continuity" in p for p in prompts)
