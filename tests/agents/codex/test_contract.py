"""Codex's adapter passes the agent contract (continuity.testing.agents), on a rollout its real
CLI recorded (a shell call, an automatic compaction: tests/data/agents)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from continuity.agents.codex.adapter import ADAPTER
from continuity.testing.agents import AgentContract

ROLLOUT = Path(__file__).parents[2] / "data" / "agents" / "codex_rollout_autocompact.jsonl"


class TestCodexContract(AgentContract):
    adapter = ADAPTER

    def write_session(self, folder: Path) -> Path:
        day = folder / "sessions" / "2026" / "11" / "26"
        day.mkdir(parents=True)
        name = "rollout-2026-11-26T12-41-30-01a217e0-136e-7893-bf7e-58b4451a75fe.jsonl"
        return Path(shutil.copyfile(ROLLOUT, day / name))

    def run_hook(self, session: Path, store: Path, env: pytest.MonkeyPatch) -> int:
        payload = {
            "session_id": "01a217e0-136e-7893-bf7e-58b4451a75fe",
            "transcript_path": str(session),
            "cwd": "/home/dev/work",
            "hook_event_name": "Stop",
        }
        return ADAPTER.hook(["stop"], store=store, stdin=json.dumps(payload).encode())
