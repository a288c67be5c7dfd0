"""opencode's adapter passes the agent contract (continuity.testing.agents), on the database of
its real CLI (tests/data/opencode: a session, a sub-agent, a compaction)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from continuity.agents.opencode.adapter import ADAPTER
from continuity.testing.agents import AgentContract

DATABASE = Path(__file__).parents[2] / "data" / "opencode" / "opencode-1.18.33.db"
SESSION = "ses_de5ae599dffewqH0pMyudaCGW5"


class TestOpencodeContract(AgentContract):
    adapter = ADAPTER

    def write_session(self, folder: Path) -> Path:
        data = folder / "opencode"
        data.mkdir()
        return Path(shutil.copyfile(DATABASE, data / "opencode.db"))

    def run_hook(self, session: Path, store: Path, env: pytest.MonkeyPatch) -> int:
        env.setenv("XDG_DATA_HOME", str(session.parent.parent))  # what opencode reads
        return ADAPTER.hook(["session.idle", "--session", SESSION], store=store)
