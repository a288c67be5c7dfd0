"""``continuity ingest PATH`` knows whose file it is, by its content (issue 43): each agent's
recorded session (``../shared/fixtures/agents/recorded``, the real CLIs' files) is ingested by its
own agent's reader with no ``--agent``; ``--agent`` naming the wrong agent is one line naming the
right one; a file no agent reads is one line naming the formats tried, and exit 1."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from continuity.cli.app import app
from continuity.store.jsonl import Store
from tests.support.fixtures import shared_fixture

TRIED = "(tried Claude Code, Codex, Gemini CLI, opencode)"


def run(store: Path, *args: str) -> Result:
    return CliRunner().invoke(app, ["--store", str(store), *args])


def recorded(tmp_path: Path, name: str, as_name: str) -> Path:
    """A recorded session copied under the name a user's copy might have."""
    path = tmp_path / as_name
    shutil.copy(shared_fixture("agents", "recorded", name), path)
    return path


@pytest.mark.parametrize(
    ("name", "as_name", "said", "prefix"),
    [
        (
            "codex_rollout_autocompact.jsonl",
            "rollout-2026-11-26T12-41-30-01a217e0-136e-7893-bf7e-58b4451a75fe.jsonl",
            "1 rollout: 7 new messages, 1 compaction",
            "codex-",
        ),
        ("codex_rollout_autocompact.jsonl", "session.jsonl", "1 rollout: 7 new messages", "codex-"),
        (
            "gemini_transcript_basic.jsonl",
            "session.jsonl",
            "ingested 1 Gemini CLI session: 5 new messages",
            "gemini-",
        ),
        ("claude_transcript_basic.jsonl", "session.jsonl", "into 1 thread", "cc-"),
        ("opencode_export.json", "export.json", "", "oc-"),
    ],
)
def test_a_session_file_is_ingested_by_its_own_agents_reader(
    tmp_path: Path, name: str, as_name: str, said: str, prefix: str
) -> None:
    store = tmp_path / "store"
    path = recorded(tmp_path, name, as_name)
    result = run(store, "ingest", str(path))
    assert result.exit_code == 0, result.output
    assert said in result.stdout
    threads = Store(store).threads()
    assert threads and all(t.startswith(prefix) for t in threads), threads


def test_the_wrong_agent_is_one_line_naming_the_right_one(tmp_path: Path) -> None:
    store = tmp_path / "store"
    path = recorded(tmp_path, "gemini_transcript_basic.jsonl", "session.jsonl")
    result = run(store, "ingest", "--agent", "claude-code", str(path))
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: {path}: a Gemini CLI session file, not Claude Code's: "
        f"`continuity ingest --agent gemini {path}`\n"
    )
    rollout = recorded(tmp_path, "codex_rollout_autocompact.jsonl", "rollout-x.jsonl")
    result = run(store, "ingest", "--agent", "gemini", str(rollout))
    assert result.exit_code == 1
    assert "a Codex session file, not Gemini CLI's" in result.stderr


def test_a_file_no_agent_reads_is_one_line_naming_the_formats_tried(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"cpu": 0.5}\n')
    result = run(tmp_path / "store", "ingest", str(path))
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == (
        f"error: {path}: not a session file of any agent continuity reads {TRIED}; "
        "nothing was ingested\n"
    )


def test_files_of_several_agents_are_ingested_together_and_the_unknown_named(
    tmp_path: Path,
) -> None:
    store = tmp_path / "store"
    rollout = recorded(tmp_path, "codex_rollout_autocompact.jsonl", "a.jsonl")
    gemini = recorded(tmp_path, "gemini_transcript_basic.jsonl", "b.jsonl")
    other = tmp_path / "c.txt"
    other.write_text("plain text\n")
    result = run(store, "ingest", str(rollout), str(gemini), str(other))
    assert result.exit_code == 0, result.output
    assert result.stderr == (
        f"{other}: not a session file of any agent continuity reads {TRIED}; skipped\n"
    )
    assert {t.split("-", 1)[0] for t in Store(store).threads()} == {"codex", "gemini"}
