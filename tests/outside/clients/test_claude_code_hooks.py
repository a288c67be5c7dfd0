"""The hook adapter end to end with the real Claude Code CLI (pinned, from npm), as a user has it.

``continuity install claude-code --scope project`` in a fresh project with a fresh store, then
three real ``claude -p`` runs against the scripted model server: a turn that runs a shell command,
``/compact``, and one more turn. What the store archived is checked with the CLI a user has, and
what reached the model with the server's request log: continuity's restore must be in the first
request after the compaction, which no longer holds the tool call itself.

One session (about 3 s of CLI runs here) serves every test of the module.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pytest

from tests.support.agents import ClaudeRun, ClaudeWorld, client, eventually
from tests.support.model_server import ModelServer, Reply, Request, Rule, Script, ToolCall

pytestmark = [pytest.mark.slow, pytest.mark.agents]

COMMAND: Final = "echo hello > greeting-7f3a.txt"
"""The shell command the scripted model runs: its file name is distinctive, so finding it in a
request means it came from the archive (or the conversation), nowhere else."""
SUMMARY: Final = (
    "<analysis>The user asked for a greeting file.</analysis>\n"
    "<summary>1. Primary Request: write a greeting file. It was written.</summary>"
)
"""The compaction summary the scripted model writes: it names no file and no command, as a
summary that lost the details would."""


GUIDANCE: Final = "continuity archives the full session"
"""In the guidance the PreCompact hook prints (before an automatic compaction)."""


def script() -> Script:
    """The model's side of the session (fresh rules: a rule counts the requests it answers)."""
    return Script(
        [
            Rule(
                Reply(text=SUMMARY),
                name="compaction summary",
                phrase="create a detailed summary of the conversation",
            ),
            Rule(
                Reply(
                    text="I will write it.",
                    tool_calls=(
                        ToolCall("Bash", {"command": COMMAND, "description": "Write the file"}),
                    ),
                ),
                name="run the command",
                phrase="write the greeting file",
                after_tool=False,
            ),
            Rule(
                Reply(text="Wrote the greeting file."), name="after the command", after_tool="Bash"
            ),
            Rule(
                Reply(text="I wrote the greeting file."),
                name="after compaction",
                phrase="What did you",
            ),
        ]
    )


@dataclass
class Compacted:
    world: ClaudeWorld
    runs: list[ClaudeRun]
    thread: str
    frames: list[dict[str, Any]]


def _frames(world: ClaudeWorld, thread: str) -> list[dict[str, Any]]:
    shown = world.continuity("log", thread, "--json").stdout
    return [json.loads(line) for line in shown.splitlines() if line.strip()]


def _said(frames: list[dict[str, Any]], text: str) -> bool:
    return any(
        f["type"] == "message_appended"
        and f["role"] == "assistant"
        and any(b.get("text") == text for b in f["content"])
        for f in frames
    )


def _asked(frames: list[dict[str, Any]], text: str) -> bool:
    return any(
        f["type"] == "message_appended"
        and f["role"] == "user"
        and any(b.get("text") == text for b in f["content"])
        for f in frames
    )


@pytest.fixture(scope="module")
def compacted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Compacted]:
    exe = client("claude-code")
    with ModelServer(script()) as server:
        world = ClaudeWorld(exe, tmp_path_factory.mktemp("claude-hooks"), server)
        # The user lets the shell tool run (Claude Code refuses bypassPermissions as root).
        world.user_settings({"permissions": {"allow": ["Bash"]}})
        # the hooks alone: a slow MCP server start adds notes after tool results that the
        # script does not expect (the server has its own tests: test_claude_code_mcp.py)
        world.continuity("install", "claude-code", "--scope", "project", "--no-mcp")
        runs = [
            world.claude("Please write the greeting file.").check(),
            world.claude("/compact", "--continue").check(),
            world.claude("What did you do before?", "--continue").check(),
        ]
        try:
            thread = f"cc-{runs[0].session_id}"
            # An asynchronous hook may still be running when the run ends (and in -p mode
            # Claude Code 2.1.328 cancels the asynchronous ones it started: SessionEnd, which is
            # synchronous, is what archives the last turn there)
            frames = eventually(
                lambda: _frames(world, thread),
                lambda got: _said(got, "I wrote the greeting file."),
            )
            yield Compacted(world, runs, thread, frames)
        finally:
            server.dump(world.root / "requests.jsonl")


def _request(world: ClaudeWorld, rule: str) -> Request:
    found = [e.request for e in world.server.log if e.rule == rule and e.request is not None]
    assert len(found) == 1, f"one request answered by {rule!r} expected: {world.server.log}"
    return found[0]


def test_the_runs_are_one_session_with_the_scripted_turns(compacted: Compacted) -> None:
    assert {run.session_id for run in compacted.runs} == {compacted.runs[0].session_id}
    assert compacted.world.server.script.unused() == []
    assert (compacted.world.project / "greeting-7f3a.txt").read_text() == "hello\n"


def test_the_session_is_archived_with_its_tool_call_and_verifies(compacted: Compacted) -> None:
    world, frames = compacted.world, compacted.frames
    assert compacted.thread in world.continuity("threads").stdout
    calls = [
        b
        for f in frames
        if f["type"] == "message_appended" and f["role"] == "assistant"
        for b in f["content"]
        if b.get("type") == "tool_use"
    ]
    assert [(c["name"], c["input"]["command"]) for c in calls] == [("Bash", COMMAND)]
    results = [
        b
        for f in frames
        if f["type"] == "message_appended"
        for b in f["content"]
        if b.get("type") == "tool_result"
    ]
    assert [r["tool_use_id"] for r in results] == [calls[0]["id"]]
    assert _asked(frames, "Please write the greeting file.")
    assert _asked(frames, "What did you do before?")
    # the last turn's answer too: what `claude -p` leaves archived when it exits
    assert _said(frames, "Wrote the greeting file.")
    assert _said(frames, "I wrote the greeting file.")
    meta = frames[0]["meta"]
    assert meta["claude_code_version"] == "2.1.328"
    assert Path(meta["project"]) == world.project
    verified = world.continuity("verify")
    assert verified.stdout.startswith("ok:"), verified.stdout


def test_the_compaction_is_a_checkpoint_over_the_tool_call(compacted: Compacted) -> None:
    frames = compacted.frames
    checkpoints = [f for f in frames if f["type"] == "compaction_checkpoint_created"]
    assert len(checkpoints) == 1, checkpoints
    (checkpoint,) = checkpoints
    assert checkpoint["cut_rule_id"] == "claude_code_compact/manual"
    call_seq = next(
        f["seq"]
        for f in frames
        if f.get("role") == "assistant" and any(b.get("type") == "tool_use" for b in f["content"])
    )
    assert checkpoint["from_seq"] <= call_seq <= checkpoint["to_seq"]
    sessions = compacted.world.continuity("sessions").stdout
    assert "1 compaction" in sessions, sessions


def test_a_manual_compact_shows_no_guidance_as_its_output(compacted: Compacted) -> None:
    """Claude Code 2.1.328 shows a PreCompact hook's output as /compact's output (and keeps
    it in the new context) besides adding it to the summary's instructions: on a manual
    compaction the hook prints nothing (the restore gives the details back)."""
    shown = [
        e["message"]["content"]
        for e in compacted.runs[1].events
        if e.get("type") == "user" and "local-command-stdout" in str(e.get("message"))
    ]
    assert shown and not any(GUIDANCE in str(s) for s in shown), shown
    asked = _request(compacted.world, "compaction summary")
    assert GUIDANCE not in asked.text


def test_the_session_start_hook_restores_after_the_compaction(compacted: Compacted) -> None:
    outputs = compacted.runs[1].hook_outputs("SessionStart:compact")
    assert len(outputs) == 1, compacted.runs[1].events
    context = json.loads(outputs[0])["hookSpecificOutput"]["additionalContext"]
    assert context.startswith("# Restored by continuity")
    assert COMMAND in context


def test_the_restore_reaches_the_first_request_after_the_compaction(compacted: Compacted) -> None:
    """In ``-p`` mode the process that compacts ends there: the restore that reaches the model
    is the one the next run's SessionStart (``resume``) gives."""
    world = compacted.world
    before = _request(world, "run the command")
    after = _request(world, "after compaction")
    assert "Restored by continuity" not in before.text
    # Claude Code's summary replaced the conversation: the tool call is no longer in it
    blocks = [b for m in after.body["messages"] for b in _content(m)]
    assert not [b for b in blocks if b.get("type") in ("tool_use", "tool_result")]
    assert SUMMARY.split("<summary>")[1].split("</summary>")[0] in after.text
    # ... and continuity's restore brings its exact details back, with the thread to read
    restored = [t for t in map(_block_text, blocks) if "Restored by continuity" in t]
    assert len(restored) == 1, [t[:200] for t in map(_block_text, blocks)]
    assert COMMAND in restored[0]
    assert compacted.thread in restored[0]
    assert "Please write the greeting file." in restored[0]


def _content(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def _block_text(block: dict[str, Any]) -> str:
    text = block.get("text")
    return text if isinstance(text, str) else ""


def test_the_hooks_log_no_errors(compacted: Compacted) -> None:
    assert compacted.world.errors_log() == []
