"""Restores after each of several compactions, and after a resume, with the real Claude Code CLI.

One session of five ``claude -p`` runs (``--continue``) against the scripted model server, with
``continuity install claude-code --scope project``. Each of the first four runs does a step: a
distinct shell command, then an answer whose usage (195,000 input tokens, over the 50,000-token
automatic-compaction window set for the test) makes the next run compact automatically before
its first request, in the same process, as a long interactive session does. So the session
compacts three times; the fifth run resumes it without compacting.

What reached the model is read from the server's request log. After each compaction, the first
request must carry one restore, of what *that* compaction dropped: the step before it (Claude
Code fires SessionStart ``compact`` before the new compaction is in its transcript, so a restore
built from the transcript then is the previous compaction's). After the resume, exactly one
restore (Claude Code loads the compaction's restore with the session; another would repeat it).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

import pytest

from tests.support.agents import ClaudeRun, ClaudeWorld, client, eventually
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

STEPS: Final = ("alpha", "bravo", "charlie", "delta")
WINDOW: Final = "50000"
"""``CLAUDE_CODE_AUTO_COMPACT_WINDOW``: a step's 195,000 input tokens are far over it."""
MARK: Final = "Restored by continuity"


def command(step: str) -> str:
    """The step's shell command: a distinctive file name, so finding it in a request says which
    stretch of the session the request holds."""
    return f"echo {step} > step-{step}-9c4e.txt"


def script() -> Script:
    counter = itertools.count(1)

    def summary(_request: Request) -> Reply:
        # Claude's summary, numbered: it names no step and no command, as a summary that lost
        # the details would.
        return Reply(
            text=f"<summary>Summary {next(counter)}: the user works through steps.</summary>"
        )

    rules = [
        Rule(
            summary,
            name="compaction summary",
            phrase="create a detailed summary of the conversation",
            times=None,
        )
    ]
    for step in STEPS:
        rules += [
            Rule(
                Reply(
                    text=f"Doing {step}.",
                    tool_calls=(ToolCall("Bash", {"command": command(step), "description": step}),),
                ),
                name=f"step {step}",
                phrase=f"Do step {step}.",
                after_tool=False,
            ),
            Rule(
                # the last step's answer leaves the context small: the resume does not compact
                Reply(
                    text=f"Done {step}.",
                    usage=Usage(input_tokens=1_000 if step == STEPS[-1] else 195_000),
                ),
                name=f"done {step}",
                phrase=f"Do step {step}.",
                after_tool="Bash",
            ),
        ]
    rules.append(Rule(Reply(text="All steps are done."), name="resumed", phrase="What now?"))
    return Script(rules)


@dataclass
class Session:
    world: ClaudeWorld
    runs: list[ClaudeRun]
    thread: str

    def first_request(self, rule: str) -> Request:
        found = [e.request for e in self.world.server.log if e.rule == rule and e.request]
        assert len(found) == 1, f"one request answered by {rule!r}: {self.world.server.log}"
        return found[0]


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    exe = client("claude-code")
    with ModelServer(script()) as server:
        world = ClaudeWorld(exe, tmp_path_factory.mktemp("claude-restores"), server)
        world.env["CLAUDE_CODE_AUTO_COMPACT_WINDOW"] = WINDOW
        world.user_settings({"permissions": {"allow": ["Bash"]}})
        # The hooks alone: a slow MCP server start (seconds on a loaded machine) makes Claude
        # Code add "tools no longer available" notes after tool results, which this script's
        # rules do not expect; restores do not need the server.
        world.continuity("install", "claude-code", "--scope", "project", "--no-mcp")
        runs: list[ClaudeRun] = []
        try:
            for i, step in enumerate(STEPS):
                more = ["--continue"] if i else []
                runs.append(world.claude(f"Do step {step}.", *more).check())
            runs.append(world.claude("What now?", "--continue").check())
            thread = f"cc-{runs[0].session_id}"
            eventually(
                lambda: world.continuity("log", thread).stdout, lambda got: "All steps" in got
            )
            yield Session(world, runs, thread)
        finally:
            server.dump(world.root / "requests.jsonl")


def _restores(request: Request) -> list[str]:
    """The continuity restores in a request, each from its mark to the end of its block (the
    hook context Claude Code puts in a request may hold other things after it)."""
    found: list[str] = []
    for message in request.body.get("messages", []):
        content = message.get("content")
        blocks = [{"text": content}] if isinstance(content, str) else content or []
        for block in blocks:
            text = block.get("text") if isinstance(block, dict) else None
            if isinstance(text, str):
                found += [MARK + part for part in text.split(MARK)[1:]]
    return found


def _steps_in(text: str) -> list[str]:
    return [step for step in STEPS if command(step) in text]


def test_the_session_compacts_three_times_in_one_session(session: Session) -> None:
    assert {run.session_id for run in session.runs} == {session.runs[0].session_id}
    assert session.world.server.script.unused() == []
    shown = session.world.continuity("log", session.thread, "--json").stdout
    frames = [json.loads(line) for line in shown.splitlines() if line.strip()]
    checkpoints = [f for f in frames if f["type"] == "compaction_checkpoint_created"]
    assert [c["cut_rule_id"] for c in checkpoints] == ["claude_code_compact/auto"] * 3


@pytest.mark.parametrize(
    ("step", "dropped"), [("bravo", "alpha"), ("charlie", "bravo"), ("delta", "charlie")]
)
def test_each_compaction_restores_what_it_dropped(
    session: Session, step: str, dropped: str
) -> None:
    """The first request after the compaction (the step's own) holds one restore, of the
    step the compaction dropped, not an earlier one (the stale restore of issue 43)."""
    request = session.first_request(f"step {step}")
    restores = _restores(request)
    assert len(restores) == 1, [r[:300] for r in restores]
    assert _steps_in(restores[0]) == [dropped], restores[0][:2000]
    assert session.thread in restores[0]


def test_each_automatic_compaction_is_told_what_to_keep(session: Session) -> None:
    """PreCompact's output becomes the summary request's "Additional Instructions" (for an
    automatic compaction Claude Code does not show it to the user)."""
    asked = [e.request for e in session.world.server.log if e.rule == "compaction summary"]
    assert len(asked) == 3
    for request, step in zip(asked, STEPS, strict=False):
        assert request is not None
        instructions = request.last_user_text.split("Additional Instructions:", 1)
        assert len(instructions) == 2, request.last_user_text[-3000:]
        assert "When summarizing, keep these exactly" in instructions[1]
        assert command(step) in instructions[1]


def test_the_session_start_hook_gave_each_compaction_its_own_restore(session: Session) -> None:
    given: list[list[str]] = []
    for run in session.runs:
        for output in run.hook_outputs("SessionStart:compact"):
            context = json.loads(output)["hookSpecificOutput"]["additionalContext"]
            given.append(_steps_in(context))
    assert given == [["alpha"], ["bravo"], ["charlie"]]


def test_a_resumed_session_has_the_restore_once(session: Session) -> None:
    """The resume loads the last compaction's restore with the session: one restore, of the
    stretch that compaction dropped."""
    request = session.first_request("resumed")
    restores = _restores(request)
    assert len(restores) == 1, [r[:300] for r in restores]
    assert _steps_in(restores[0]) == ["charlie"]


def test_the_hooks_log_no_errors(session: Session) -> None:
    assert session.world.errors_log() == []


def test_claude_mcp_list_with_the_user_install_logs_no_error(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """``claude mcp list`` checks the server (it connects) and fires SessionEnd for a session
    that never wrote a transcript: nothing to archive, and no error in ``errors.log``."""
    exe = client("claude-code")
    with ModelServer(Script([])) as server:
        world = ClaudeWorld(exe, tmp_path_factory.mktemp("claude-mcp-list"), server)
        world.continuity("install", "claude-code")  # user scope: the hooks fire everywhere
        listed = world.claude_cmd("mcp", "list")
    assert listed.returncode == 0, listed.stderr
    assert "continuity" in listed.stdout and "Connected" in listed.stdout, listed.stdout
    assert world.errors_log() == []
