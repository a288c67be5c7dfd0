"""The rolling context manager with the real Claude Code CLI (pinned, from npm) (ADR 0056).

``continuity install claude-code --scope project``, then a session of ``claude -p`` runs against
the scripted model server, whose usage figures put the context past the hot threshold of a small
configured window (``rolling.json``, with short cold and pacing settings: the real CLI runs a few
seconds a turn). Four finished topics, then a prompt: its ``UserPromptSubmit`` hook adds the
reminder; the scripted model loads ``remember`` through Claude Code's tool search and compresses
the segment the reminder named; the checkpoint and its record appear in the store; ``/compact``;
the restore Claude Code gets after its own compaction carries the agent's summary.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

import pytest

from tests.support.agents import ClaudeRun, ClaudeWorld, client, continuity_mcp_missing, eventually
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

WINDOW: Final = 30_000
FULL: Final = Usage(input_tokens=20_000, output_tokens=40)  # 67% of the window
SUMMARY: Final = "The numbat announcement for version nine was drafted and approved."
TOPICS: Final = (
    "Please draft the release announcement for version nine.",
    "Now plan the database migration for the invoices table.",
    "Next, review the kubernetes ingress configuration.",
    "Then tidy the quarterly metrics dashboard layout.",
)
REMINDER: Final = "compress each with the MCP tool `remember`"
CARRY_ON: Final = "Please carry on with the dashboard."
SEGMENT: Final = re.compile(r"(seg-\d+): “([^”]*)”")


def _remember(request: Request) -> Reply:
    """``remember`` the first segment the reminder named."""
    found = SEGMENT.findall(request.text.replace("\\u201c", "“").replace("\\u201d", "”"))
    segment = found[0][0] if found else "seg-missing"
    args: dict[str, Any] = {
        "kind": "summary",
        "segment": segment,
        "text": SUMMARY,
        "key_decisions": ["announce on the blog first"],
        "key_files": ["docs/announcement.md"],
    }
    return Reply(tool_calls=(ToolCall("mcp__continuity__remember", args),), usage=FULL)


def script() -> Script:
    rules = [
        Rule(
            Reply(text="<summary>We worked on several topics.</summary>"),
            name="compaction summary",
            phrase="create a detailed summary of the conversation",
        ),
        Rule(
            Reply(
                tool_calls=(
                    ToolCall(
                        "ToolSearch",
                        {"query": "select:mcp__continuity__remember", "max_results": 1},
                    ),
                ),
                usage=FULL,
            ),
            name="load remember",
            anywhere=REMINDER,
            phrase=CARRY_ON,  # the reminder may come a turn earlier: the topics are answered
            after_tool=False,
        ),
        # matched by what the tool results say, not by being last: Claude Code may append a
        # system message (a late MCP server's tools) after a tool result
        Rule(_remember, name="remember", anywhere='"tool_name": "mcp__continuity__remember"'),
        Rule(
            Reply(text="Compressed the old topic.", usage=FULL),
            name="after remember",
            anywhere="Recorded your summary",
        ),
    ]
    for i, prompt in enumerate(TOPICS):
        rules.append(
            Rule(
                Reply(text=f"Finished topic {i + 1}; all done.", usage=FULL),
                name=f"topic {i + 1}",
                phrase=prompt,
            )
        )
    rules.append(Rule(Reply(text="Here is what we did.", usage=FULL), name="after", phrase="What"))
    return Script(rules)


@dataclass
class Rolled:
    world: ClaudeWorld
    runs: list[ClaudeRun]
    thread: str
    frames: list[dict[str, Any]]


def _frames(world: ClaudeWorld, thread: str) -> list[dict[str, Any]]:
    shown = world.continuity("log", thread, "--json").stdout
    return [json.loads(line) for line in shown.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def rolled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rolled]:
    missing = continuity_mcp_missing()
    if missing:
        pytest.skip(f"the MCP server is not in this tree: {missing}")
    exe = client("claude-code")
    with ModelServer(script()) as server:
        world = ClaudeWorld(exe, tmp_path_factory.mktemp("claude-rolling"), server)
        world.user_settings(
            {"enableAllProjectMcpServers": True, "permissions": {"allow": ["mcp__continuity"]}}
        )
        world.continuity("install", "claude-code", "--scope", "project")
        settings = {
            "windows": {"claude-": WINDOW},
            "cold_turns": 2,
            "min_messages": 2,
            "every_turns": 1,
        }
        (world.store / "rolling.json").write_text(json.dumps(settings))
        runs = [world.claude(TOPICS[0]).check()]
        runs += [world.claude(p, "--continue").check() for p in TOPICS[1:]]
        runs.append(world.claude(CARRY_ON, "--continue").check())
        runs.append(world.claude("/compact", "--continue").check())
        runs.append(world.claude("What did we do?", "--continue").check())
        try:
            thread = f"cc-{runs[0].session_id}"
            frames = eventually(
                lambda: _frames(world, thread),
                lambda got: any(f["type"] == "compaction_checkpoint_created" for f in got),
            )
            yield Rolled(world, runs, thread, frames)
        finally:
            server.dump(world.root / "requests.jsonl")


def test_the_reminder_reaches_the_model_and_it_calls_remember(rolled: Rolled) -> None:
    asked = [e.request for e in rolled.world.server.log if e.rule == "load remember"]
    assert len(asked) == 1 and asked[0] is not None
    assert REMINDER in asked[0].text and "seg-" in asked[0].text
    assert "announcement" in asked[0].text  # the first topic, named by its prompt
    unused = set(rolled.world.server.script.unused())
    assert not unused & {"load remember", "remember", "after remember"}, unused


def test_the_agents_summary_is_a_checkpoint_with_its_record(rolled: Rolled) -> None:
    records = [
        f
        for f in rolled.frames
        if f["type"] == "record_appended" and f["kind"] == "continuity.rolling.compressed"
    ]
    assert len(records) == 1, [f["type"] for f in rolled.frames]
    data = records[0]["data"]
    assert data["text"] == SUMMARY and data["key_files"] == ["docs/announcement.md"]
    assert data["original_tokens"] > 0
    queued = [f for f in rolled.frames if f.get("kind") == "continuity.rolling.queued"]
    assert queued, "the reminder was not logged"
    checkpoints = [
        f
        for f in rolled.frames
        if f["type"] == "compaction_checkpoint_created"
        and f["checkpoint_id"] == data["checkpoint_id"]
    ]
    assert len(checkpoints) == 1


def test_the_restore_after_claudes_compaction_carries_the_summary(rolled: Rolled) -> None:
    compact_run = next(r for r in rolled.runs if "/compact" in r.args)
    outputs = compact_run.hook_outputs("SessionStart:compact")
    assert len(outputs) == 1, compact_run.events
    context = json.loads(outputs[0])["hookSpecificOutput"]["additionalContext"]
    assert "as you summarized them" in context and SUMMARY in context
