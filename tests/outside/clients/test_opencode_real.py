"""The real opencode CLI (``opencode-ai``, pinned in ``tools/agents.py``) archived by the plugin
``continuity install opencode`` puts in its config folder.

One session (a run takes 8–26 s here): a prompt, a ``bash`` tool call and its result, then an
answer whose scripted usage (250,000 input tokens) is over the model's context limit (100,000),
so opencode compacts the session by itself, asking the model for a summary. The plugin runs
``continuity hook <event> --agent opencode --session <id>`` in the background on the session's
events; the test waits for the archive to hold the messages, the tool call with its result and
the checkpoint with opencode's summary, and checks that the MCP server ``install`` registered
reached the model as tools.
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
from continuity.store.jsonl import Store
from continuity.summary import decode_summary
from tests.support.agents import CLEARED, client, continuity_mcp_missing, eventually
from tests.support.model_openai_chat import MODEL, OpenAIChat
from tests.support.model_server import ModelServer, Reply, Rule, Script, ToolCall, Usage

pytestmark = [pytest.mark.slow, pytest.mark.agents]

QUIET: Final = {
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_CLAUDE_CODE": "1",
}
SUMMARY: Final = "SUMMARY: the user asked to run echo; it printed hi-from-bash."
AFTER: Final = "What did you run before?"


def _script() -> Script:
    return Script(
        [
            Rule(
                Reply(
                    tool_calls=(
                        ToolCall("bash", {"command": "echo hi-from-bash", "description": "echo"}),
                    )
                ),
                name="tool call",
                phrase="RUN_ECHO",
                after_tool=False,
            ),
            Rule(
                Reply(
                    text="The command printed hi-from-bash.",
                    usage=Usage(input_tokens=250_000, output_tokens=20),
                ),
                name="answer over the context limit",
                after_tool="bash",
            ),
            Rule(
                Reply(text=SUMMARY),
                name="compaction summary",
                main=None,
                anywhere="context summarization agent",
            ),
            Rule(Reply(text="I ran echo."), name="after the compaction", phrase=AFTER),
        ]
    )


def _config(url: str) -> dict[str, Any]:
    return {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "fake": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Scripted",
                "options": {"baseURL": url + "/v1", "apiKey": "sk-test-not-a-key"},
                "models": {
                    MODEL: {"name": "Scripted", "limit": {"context": 100_000, "output": 4_096}}
                },
            }
        },
        "model": f"fake/{MODEL}",
        "autoupdate": False,
        "share": "disabled",
        "permission": {"bash": "allow", "edit": "allow"},
    }


def _frames(store: Path, thread_id: str) -> list[fr.Frame]:
    if not (store / "threads" / f"{thread_id}.jsonl").exists():
        return []
    return list(Store(store).thread(thread_id).read())


def test_a_real_session_is_archived_by_the_plugin(tmp_path: Path) -> None:
    exe = client("opencode")
    missing = continuity_mcp_missing()
    home, project, store = tmp_path / "home", tmp_path / "project", tmp_path / "store"
    project.mkdir(parents=True)
    config = home / ".config" / "opencode"
    config.mkdir(parents=True)
    env = {
        k: v for k, v in os.environ.items() if not k.startswith((*CLEARED, "OPENAI", "OPENCODE"))
    }
    env.update(QUIET)
    env.update(
        HOME=str(home),
        PWD=str(project),  # opencode takes its directory from PWD
        XDG_CONFIG_HOME=str(config.parent),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_STATE_HOME=str(home / ".local" / "state"),
        CONTINUITY_HOME=str(store),
    )
    with ModelServer(_script(), providers=[OpenAIChat()]) as server:
        (config / "opencode.json").write_text(json.dumps(_config(server.url), indent=2) + "\n")
        done = subprocess.run(
            [sys.executable, "-m", "continuity", "install", "opencode"],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        plugin = config / "plugins" / "continuity.js"
        assert plugin.is_file()
        registered = json.loads((config / "opencode.json").read_text())["mcp"]["continuity"]
        assert registered["type"] == "local" and registered["command"][-3:] == [
            "mcp",
            "--store",
            str(store),
        ]

        run = subprocess.run(
            [str(exe), "run", "Please RUN_ECHO now", "--format", "json"],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        assert run.returncode == 0, run.stderr[-3000:]
        events = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
        session = next(e["sessionID"] for e in events if e.get("sessionID"))
        # the session again, after its compaction: the plugin gives the model the restore
        again = subprocess.run(
            [str(exe), "run", AFTER, "--session", session, "--format", "json"],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        server.dump(tmp_path / "requests.jsonl")
        assert again.returncode == 0, again.stderr[-3000:]
        assert server.script.unused() == [], (server.script.unused(), run.stderr[-3000:])
        (after,) = [e.request for e in server.log if e.rule == "after the compaction"]
        assert after is not None
        # opencode's summary replaced the conversation, and continuity's restore follows it
        assert SUMMARY in after.text
        restored = [m for m in after.body["messages"] if "Restored by continuity" in json.dumps(m)]
        assert len(restored) == 1, after.body["messages"]
        assert restored[0]["role"] == "user"
        assert "echo hi-from-bash" in json.dumps(restored[0])
        assert f"oc-{session}" in json.dumps(restored[0])

        # the plugin's experimental.session.compacting hook: a pointer to the archive in what
        # the summary is made from
        asked = [r for r in server.requests(main=False) if "summarization agent" in r.text]
        assert len(asked) == 1
        assert f"archived in full by continuity as thread oc-{session}" in asked[0].text
        if missing is None:
            main = server.requests(main=True)
            tools = {t["function"]["name"] for r in main for t in r.body.get("tools", [])}
            assert any(name.startswith("continuity_") for name in tools), sorted(tools)

    thread = f"oc-{session}"

    def complete(frames: list[fr.Frame]) -> bool:
        has_checkpoint = any(isinstance(f, fr.CompactionCheckpointCreated) for f in frames)
        texts = [
            b.text
            for f in frames
            if isinstance(f, fr.MessageAppended)
            for b in f.content
            if isinstance(b, fr.TextBlock)
        ]
        return has_checkpoint and any("OK" in t or "printed" in t for t in texts[-1:])

    frames = eventually(lambda: _frames(store, thread), complete, within=60)
    assert frames, f"nothing archived for {thread}"
    head = frames[0]
    assert isinstance(head, fr.ThreadCreated)
    assert head.meta["source"] == "opencode" and head.meta["session_id"] == session
    assert head.meta["project"] == str(project)
    messages = [f for f in frames if isinstance(f, fr.MessageAppended)]
    assert messages[0].role == "user" and "RUN_ECHO" in str(messages[0].content)
    uses = [b for m in messages for b in m.content if isinstance(b, fr.ToolUseBlock)]
    results = [b for m in messages for b in m.content if isinstance(b, fr.ToolResultBlock)]
    assert [u.name for u in uses] == ["bash"]
    assert [r.tool_use_id for r in results] == [uses[0].id]
    assert "hi-from-bash" in results[0].content
    checkpoints = [f for f in frames if isinstance(f, fr.CompactionCheckpointCreated)]
    assert len(checkpoints) == 1
    cp = checkpoints[0]
    assert cp.cut_rule_id == "opencode_compact/v1" and cp.produced_by == "opencode"
    answer = next(m for m in messages if "printed hi-from-bash" in str(m.content))
    assert cp.to_seq == answer.seq
    summary = decode_summary(Store(store).artifacts.get(cp.summary_artifact_id))
    assert summary.text == SUMMARY
