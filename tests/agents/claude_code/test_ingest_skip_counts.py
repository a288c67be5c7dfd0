"""What ``ingest`` says it skipped: "already archived" counts only lines the store held before
the run; a line that repeats the id of a line earlier in the same transcript (archived by this
very run) is counted apart. A fresh store once reported "9 already archived" for the fixtures:
``agent-sessions/small.jsonl`` gives ten different lines the same hand-trimmed uuid.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from continuity.agents.claude_code.ingest import ingest_transcript
from continuity.cli.app import app
from continuity.store.jsonl import Store
from tests.support.fixtures import shared_fixture

SUMMARY = re.compile(r"(\d+) already archived, \d+ unreadable lines? skipped(?:, (.*))?$")


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for name in ("CONTINUITY_HOME", "XDG_DATA_HOME", "CLAUDE_PROJECT_DIR"):
        monkeypatch.delenv(name, raising=False)


def _line(uuid: str, text: str, second: int) -> str:
    return json.dumps(
        {
            "type": "user",
            "uuid": uuid,
            "sessionId": "s",
            "timestamp": f"2026-01-05T09:00:0{second}Z",
            "cwd": "/work",
            "message": {"role": "user", "content": text},
        }
    )


@pytest.fixture
def transcript(tmp_path: Path) -> Path:
    """Three prompts, the third with the id of the first (a line the file holds twice)."""
    path = tmp_path / "s.jsonl"
    lines = [
        _line("00000000-0000-4000-8000-000000000001", "first prompt", 1),
        _line("00000000-0000-4000-8000-000000000002", "second prompt", 2),
        _line("00000000-0000-4000-8000-000000000001", "first prompt", 1),
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def _summary(store: Path, *paths: Path) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["--store", str(store), "ingest", *map(str, paths)])
    assert result.exit_code == 0, result.output
    match = SUMMARY.search(result.stdout.strip())
    assert match, result.stdout
    return int(match[1]), match[2] or ""


def test_a_repeat_within_one_read_is_not_already_archived(tmp_path: Path, transcript: Path) -> None:
    store = Store(tmp_path / "store", create=True)
    report = ingest_transcript(store, transcript, final=True)
    assert (report.messages, report.duplicates, report.repeated) == (2, 0, 1)
    # Read again without the cursor: now every line was archived before this read.
    assert store.cache_dir is not None
    for cursor in (store.cache_dir / "claude-code" / "cursors").glob("*.json"):
        cursor.unlink()
    again = ingest_transcript(store, transcript, final=True)
    assert (again.messages, again.duplicates, again.repeated) == (0, 3, 0)


def test_the_cli_says_0_already_archived_on_a_fresh_store(tmp_path: Path, transcript: Path) -> None:
    store = tmp_path / "store"
    archived, rest = _summary(store, transcript)
    assert archived == 0
    assert rest == "1 line repeating an earlier line of their transcript skipped"


def test_the_fixtures_into_a_fresh_store_have_nothing_already_archived(tmp_path: Path) -> None:
    small = shared_fixture("claude-code", "agent-sessions", "small.jsonl")
    archived, rest = _summary(tmp_path / "store", small)
    assert archived == 0
    assert rest == "9 lines repeating an earlier line of their transcript skipped"
