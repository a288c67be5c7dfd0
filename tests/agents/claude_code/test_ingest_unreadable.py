"""``continuity ingest`` names the unreadable lines it skipped: the summary line keeps its
count, and stderr says where the first few are (file and line number), then how many more."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from continuity.agents.claude_code.ingest import ingest_transcript
from continuity.cli.app import app
from continuity.store.jsonl import Store


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for name in ("CONTINUITY_HOME", "XDG_DATA_HOME", "CLAUDE_PROJECT_DIR"):
        monkeypatch.delenv(name, raising=False)


def _prompt(n: int) -> str:
    return json.dumps(
        {
            "type": "user",
            "uuid": f"00000000-0000-4000-8000-{n:012d}",
            "sessionId": "s",
            "timestamp": "2026-01-05T09:00:00Z",
            "cwd": "/work",
            "message": {"role": "user", "content": f"prompt {n}"},
        }
    )


def _transcript(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_report_keeps_where_the_unreadable_lines_are(tmp_path: Path) -> None:
    lines = [_prompt(1), "garbage", _prompt(2), "[1, 2]"]
    path = _transcript(tmp_path / "a.jsonl", lines)
    report = ingest_transcript(Store(tmp_path / "store", create=True), path, final=True)
    starts = [sum(len(line) + 1 for line in lines[:i]) for i in range(len(lines))]
    assert report.unreadable == [starts[1], starts[3]]


def test_ingest_names_the_lines_it_could_not_read(tmp_path: Path) -> None:
    a = _transcript(tmp_path / "a.jsonl", [_prompt(1), "garbage", _prompt(2), "[1, 2]", "{"])
    b = _transcript(tmp_path / "b.jsonl", [_prompt(3), *["nope"] * 5])
    result = CliRunner().invoke(app, ["--store", str(tmp_path / "store"), "ingest", str(a), str(b)])
    assert result.exit_code == 1, result.output  # lines were lost: said, and the exit says so
    assert result.stdout.strip().endswith("0 already archived, 8 unreadable lines skipped")
    assert result.stderr.splitlines() == [
        f"error: not archived (8 lines): {a} line 2 (not JSON); {a} line 4 (not a JSON object); "
        f"{a} line 5 (not JSON); {b} line 2 (not JSON); {b} line 3 (not JSON) and 3 more"
    ]


def test_a_clean_ingest_says_nothing_on_stderr(tmp_path: Path) -> None:
    a = _transcript(tmp_path / "a.jsonl", [_prompt(1), _prompt(2)])
    result = CliRunner().invoke(app, ["--store", str(tmp_path / "store"), "ingest", str(a)])
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
