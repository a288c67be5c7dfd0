"""What Codex's model gets back after Codex compacts, with the real Codex CLI: a restore as rich
as Claude Code's.

``continuity install codex``, then a ``codex exec`` turn that reads two files with shell
commands, runs a command that fails (exit code 1), and changes a file with ``apply_patch``; its
last answer reports a usage over ``model_auto_compact_token_limit``, so the resumed run compacts
before its first request. The restore in the first request after the compaction (from the
request log of the scripted model server) must name the commands with their real outcome, the
files read and changed, the error, and never Codex's own injected context (AGENTS.md,
``<environment_context>``) as the user's words.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

import pytest

from tests.outside.clients.test_codex_real import CodexWorld
from tests.support.agents import client, continuity_mcp_missing
from tests.support.model_openai_responses import OpenAIResponses
from tests.support.model_server import ModelServer, Reply, Request, Rule, Script, ToolCall, Usage

pytestmark = [pytest.mark.slow, pytest.mark.agents]

PROMPT: Final = "please fix the notes file"
READ: Final = "nl -ba README.txt"
LOOK: Final = "cat notes.txt"
FAILING: Final = "sh -c 'echo \"error: build broke at line 3\" >&2; exit 1'"
PATCH: Final = "*** Begin Patch\n*** Update File: notes.txt\n@@\n-draft\n+final\n*** End Patch\n"
RULE: Final = "AGENTS-RULE-77: keep the notes short."
"""In the project's AGENTS.md: Codex injects it into the session as a user message."""


def script() -> Script:
    def shell(cmd: str) -> tuple[ToolCall, ...]:
        return (ToolCall("exec_command", {"cmd": cmd}),)

    steps = [
        ("read the readme", shell(READ)),
        ("look at the notes", shell(LOOK)),
        ("build", shell(FAILING)),
        ("patch", shell(f"apply_patch <<'EOF'\n{PATCH}EOF\n")),
    ]
    rules = [
        Rule(
            Reply(text="SUMMARY: the notes were worked on."),
            name="compaction summary",
            main=None,
            anywhere="CONTEXT CHECKPOINT COMPACTION",
        )
    ]
    for i, (name, calls) in enumerate(steps):
        rules.append(
            Rule(
                Reply(text=f"Step {i}.", tool_calls=calls),
                name=name,
                phrase=PROMPT,
                after_tool=False if i == 0 else "exec_command",
            )
        )
    rules += [
        Rule(
            Reply(text="Patched the notes.", usage=Usage(input_tokens=30_000)),
            name="done",
            phrase=PROMPT,
            after_tool="exec_command",
        ),
        Rule(Reply(text="All fine."), name="after compaction", phrase="What next?"),
    ]
    return Script(rules)


@pytest.fixture(scope="module")
def restored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    exe = client("codex")
    missing = continuity_mcp_missing()
    if missing:
        pytest.skip(missing)
    root = tmp_path_factory.mktemp("codex-restore")
    with ModelServer(script(), providers=[OpenAIResponses()]) as server:
        world = CodexWorld(exe, root, server)
        (world.project / "notes.txt").write_text("draft\n")
        (world.project / "README.txt").write_text("The notes project.\n")
        (world.project / "AGENTS.md").write_text(f"# Rules\n\n{RULE}\n")
        world.continuity("install", "codex")
        try:
            world.codex(PROMPT)
            world.codex("resume", "--last", "What next?")
            assert (world.project / "notes.txt").read_text() == "final\n"
            assert server.script.unused() == []
            (after,) = [e.request for e in server.log if e.rule == "after compaction"]
            assert isinstance(after, Request)
            texts = [
                c.get("text", "")
                for item in after.body["input"]
                if item.get("type") == "message"
                for c in item.get("content") or []
            ]
            found = [t for t in texts if "Restored by continuity" in t]
            assert len(found) == 1, texts
            yield found[0]
        finally:
            server.dump(root / "requests.jsonl")


def _section(text: str, title: str) -> str:
    head = f"## {title}\n"
    assert head in text, text
    return text.split(head, 1)[1].split("\n\n", 1)[0]


def test_the_commands_are_there_with_their_real_outcome(restored: str) -> None:
    commands = _section(restored, "Commands run (×runs → last outcome)")
    assert f"- `{READ}` → ok" in commands
    assert f"- `{LOOK}` → ok" in commands
    assert "→ failed: error: build broke at line 3" in commands  # exit code 1 is no "ok"
    assert "apply_patch" not in commands  # a change of files, not a command


def test_the_files_read_and_changed_are_there(restored: str) -> None:
    assert "notes.txt" in _section(restored, "Files changed")
    assert "README.txt" in _section(restored, "Files read")


def test_the_failed_run_shows_as_an_error_in_the_recent_turns(restored: str) -> None:
    recent = restored.split("## Recent messages\n", 1)[1]
    assert "[tool_result error]" in recent
    assert "Process exited with code 1" in recent.split("[tool_result error]", 1)[1][:300]


def test_codexs_injected_context_is_not_the_users_words(restored: str) -> None:
    assert "<environment_context>" not in restored
    assert "AGENTS-RULE-77" not in restored
    assert "<skills_instructions>" not in restored
    assert PROMPT in _section(restored, "The user's own words")
