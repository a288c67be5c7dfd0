"""What Gemini CLI's model gets back after Gemini CLI compresses its history, with the real CLI:
a restore as rich as Claude Code's.

``continuity install gemini``, then a ``gemini -p`` turn that reads two files (``read_file``),
runs a command that fails (exit code 1) and edits a file (``replace``); a resumed run whose
prompt reports a usage near the model's window, so Gemini CLI compresses the first run away; a
third run whose BeforeAgent hook gives the model continuity's restore. That restore (from the
scripted model server's request log) must name the commands with their real outcome, the
files read and changed, the error, and never Gemini CLI's own injected context (its
``<session_context>``, GEMINI.md) as the user's words.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Final

import pytest

from tests.outside.clients.test_gemini_real import SNAPSHOT, _World
from tests.support.agents import client, continuity_mcp_missing
from tests.support.model_gemini import Gemini
from tests.support.model_server import ModelServer, Reply, Rule, Script, ToolCall, Usage

pytestmark = [pytest.mark.slow, pytest.mark.agents]

FAILING: Final = "sh -c 'echo \"error: build broke at line 3\" >&2; exit 1'"
RULE: Final = "GEMINI-RULE-77: keep the notes short."
"""In the project's GEMINI.md: Gemini CLI injects it into its session context."""


def script() -> Script:
    return Script(
        [
            Rule(
                Reply(tool_calls=(ToolCall("read_file", {"file_path": "README.txt"}),)),
                name="read the readme",
                phrase="FIX_NOTES",
                after_tool=False,
            ),
            Rule(
                Reply(tool_calls=(ToolCall("read_file", {"file_path": "notes.txt"}),)),
                name="read the notes",
                after_tool="read_file",
            ),
            Rule(
                Reply(
                    tool_calls=(
                        ToolCall("run_shell_command", {"command": FAILING, "description": "b"}),
                    )
                ),
                name="build",
                after_tool="read_file",
            ),
            Rule(
                Reply(
                    tool_calls=(
                        ToolCall(
                            "replace",
                            {
                                "file_path": "notes.txt",
                                "old_string": "draft",
                                "new_string": "final",
                                "instruction": "finalize the notes",
                            },
                        ),
                    )
                ),
                name="edit",
                after_tool="run_shell_command",
            ),
            Rule(Reply(text="Notes fixed."), name="done", after_tool="replace"),
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
            Rule(Reply(text="Compressed."), name="after big", after_tool="run_shell_command"),
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


@pytest.fixture(scope="module")
def restored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    exe = client("gemini")
    missing = continuity_mcp_missing()
    if missing:
        pytest.skip(missing)
    root = tmp_path_factory.mktemp("gemini-restore")
    with ModelServer(script(), providers=[Gemini()]) as server:
        world = _World(root, server, exe)
        (world.project / "notes.txt").write_text("draft\n")
        (world.project / "README.txt").write_text("The notes project.\n")
        (world.project / "GEMINI.md").write_text(f"# Rules\n\n{RULE}\n")
        installed = world.run(sys.executable, "-m", "continuity", "install", "gemini")
        assert installed.returncode == 0, installed.stderr
        try:
            world.gemini("Please FIX_NOTES now")
            world.gemini("AUTOCOMPACT_TEST please", "--resume", "latest")
            world.gemini("WHAT_NOW after the compression?", "--resume", "latest")
            assert (world.project / "notes.txt").read_text() == "final\n"
            assert any(RULE in r.text for r in server.requests(main=True)), "GEMINI.md is read"
            asked = [r for r in server.requests(main=True) if "WHAT_NOW" in r.last_user_text]
            assert asked, [e.rule for e in server.log]
            texts = [
                part["text"]
                for content in asked[0].body["contents"]
                for part in content.get("parts") or []
                if "Restored by continuity" in part.get("text", "")
            ]
            assert len(texts) == 1, texts
            start = texts[0].index("# Restored by continuity")
            yield texts[0][start : texts[0].index("</hook_context>", start)]
        finally:
            server.dump(root / "requests.jsonl")


def _section(text: str, title: str) -> str:
    head = f"## {title}\n"
    assert head in text, text
    return text.split(head, 1)[1].split("\n\n", 1)[0]


def test_the_command_is_there_with_its_real_outcome(restored: str) -> None:
    commands = _section(restored, "Commands run (×runs → last outcome)")
    assert "→ failed: error: build broke at line 3" in commands  # exit code 1 is no "ok"


def test_the_files_read_and_changed_are_there(restored: str) -> None:
    assert "notes.txt" in _section(restored, "Files changed")
    assert "README.txt" in _section(restored, "Files read")


def test_gemini_clis_injected_context_is_not_the_users_words(restored: str) -> None:
    assert "session_context" not in restored
    assert "GEMINI-RULE-77" not in restored
    assert "Please FIX_NOTES now" in _section(restored, "The user's own words")
