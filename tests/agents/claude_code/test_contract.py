"""Claude Code's adapter passes the agent contract (continuity.testing.agents)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from continuity.agents.claude_code.adapter import ADAPTER
from continuity.testing.agents import AgentContract
from tests.support.transcripts import Transcript

SESSION = "5b1c2d3e-0000-4000-8000-00000000c0de"


class TestClaudeCodeContract(AgentContract):
    adapter = ADAPTER

    def write_session(self, folder: Path) -> Path:
        transcript = Transcript(folder / "project" / f"{SESSION}.jsonl", SESSION, "/work/demo")
        transcript.prompt("Why does the invoice total drift by a cent?")
        transcript.say("Rounding happens per line; it should happen once on the total.")
        transcript.compaction("We found the rounding bug in invoice totals.")
        transcript.prompt("Fix it and run the tests.")
        transcript.say("Done: rounding moved to the total; the tests pass.")
        transcript.flush()
        return transcript.path

    def run_hook(self, session: Path, store: Path, env: pytest.MonkeyPatch) -> int:
        payload = {
            "session_id": SESSION,
            "transcript_path": str(session),
            "cwd": "/work/demo",
            "hook_event_name": "Stop",
        }
        return ADAPTER.hook(["stop"], store=store, stdin=json.dumps(payload).encode())
