"""``continuity hook restore --agent opencode --session <id>``: what the plugin awaits after a
compaction (in ``experimental.chat.messages.transform``). It archives the session from opencode's
database, then prints the restore of what the latest compaction dropped; nothing for a session
that never compacted, and never a failure."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from continuity.agents.opencode.hooks import main

DB = Path(__file__).resolve().parents[2] / "data" / "opencode" / "opencode-1.18.33.db"
ROOT = "ses_de5ae599dffewqH0pMyudaCGW5"  # it compacted
CHILD = "ses_de5ae31f4ffeJiXamn7EnfzK7o"  # a sub-agent's: no compaction


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "xdg" / "opencode"
    folder.mkdir(parents=True)
    shutil.copyfile(DB, folder / "opencode.db")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    return folder


def test_restore_prints_what_the_compaction_dropped(
    data: Path, tmp_path: Path, capfdbinary: pytest.CaptureFixture[bytes]
) -> None:
    assert main(["restore", "--session", ROOT], store=tmp_path / "store") == 0
    out = capfdbinary.readouterr().out.decode()
    assert out.startswith("# Restored by continuity from the archive of this session")
    assert f"oc-{ROOT}" in out
    assert "echo hi-from-bash" in out  # the command the compaction dropped


def test_restore_of_a_session_that_never_compacted_prints_nothing(
    data: Path, tmp_path: Path, capfdbinary: pytest.CaptureFixture[bytes]
) -> None:
    assert main(["restore", "--session", CHILD], store=tmp_path / "store") == 0
    assert capfdbinary.readouterr().out == b""
    assert main(["session.idle", "--session", ROOT], store=tmp_path / "store") == 0
    assert capfdbinary.readouterr().out == b""  # other events print nothing
