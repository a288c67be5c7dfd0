"""Gemini CLI's adapter passes the agent contract (continuity.testing.agents), on a session its
real CLI recorded (a resume and a compression: tests/data/agents)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from continuity.agents.gemini.adapter import ADAPTER
from continuity.testing.agents import AgentContract

RECORDED = Path(__file__).parents[2] / "data" / "agents" / "gemini_transcript_resume_compress.jsonl"
SESSION = "fb5b2188-1801-48c1-82f3-df2140e79338"


class TestGeminiContract(AgentContract):
    adapter = ADAPTER

    def write_session(self, folder: Path) -> Path:
        chats = folder / "tmp" / "project-hash" / "chats"
        chats.mkdir(parents=True)
        return Path(
            shutil.copyfile(RECORDED, chats / f"session-2026-11-26T12-40-{SESSION[:8]}.jsonl")
        )

    def run_hook(self, session: Path, store: Path, env: pytest.MonkeyPatch) -> int:
        payload = {
            "session_id": SESSION,
            "transcript_path": str(session),
            "cwd": "/home/dev/work",
            "hook_event_name": "AfterAgent",
        }
        return ADAPTER.hook(["AfterAgent"], store=store, stdin=json.dumps(payload).encode())
