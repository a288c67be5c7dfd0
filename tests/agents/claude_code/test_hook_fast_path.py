"""The ingest-only hooks' fast path (ADR 0038): a ``post-tool-use``, ``stop`` or
``subagent-stop`` that finds its transcript as the last hook left it returns before the store
or the ingest is imported; anything new still reaches the archive.

Every test runs the hooks as real processes. Whether a process took the fast path is read
from ``python -X importtime``: the full path imports ``continuity.agents.claude_code.ingest``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from continuity.store.jsonl import Store
from tests.agents.claude_code.test_hooks import SESSION, Transcript, messages, work

pytestmark = pytest.mark.slow

INGEST = "continuity.agents.claude_code.ingest"


def run(
    store: Path, event: str, payload: dict[str, object], **env: str
) -> tuple[subprocess.CompletedProcess[bytes], bool]:
    """Run ``continuity hook <event>``; return the process and whether it took the full path."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("CONTINUITY_", "CLAUDE_"))}
    clean.update({"CONTINUITY_HOME": str(store), **env})
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "continuity", "hook", event],
        input=json.dumps(payload).encode(),
        capture_output=True,
        env=clean,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0
    assert proc.stdout == b""
    lines = proc.stderr.decode().splitlines()
    errors = [line for line in lines if not line.startswith("import time:")]
    assert errors == []
    full = any(line.rstrip().endswith(f" {INGEST}") for line in lines)
    return proc, full


def note_of(store: Path, session: str = SESSION) -> Path:
    return store / "cache" / "claude-code" / "seen" / f"{session}.txt"


@pytest.fixture
def started(tmp_path: Path) -> tuple[Path, Transcript]:
    """A session with a stretch of work, archived by a full hook run."""
    store = tmp_path / "store"
    t = Transcript(tmp_path / "projects" / "-work-demo" / f"{SESSION}.jsonl")
    work(t, ["app.py"], ["pytest -q"])
    t.flush()
    _proc, full = run(store, "user-prompt-submit", t.payload("UserPromptSubmit", prompt="go"))
    assert full
    assert note_of(store).is_file()
    return store, t


@pytest.mark.parametrize("event", ["post-tool-use", "stop"])
def test_nothing_new_returns_before_the_ingest_is_imported(
    started: tuple[Path, Transcript], event: str
) -> None:
    store, t = started
    before = len(messages(Store(store), t.thread_id))
    _proc, full = run(store, event, t.payload("PostToolUse", tool_name="Bash"))
    assert not full
    assert len(messages(Store(store), t.thread_id)) == before


def test_a_transcript_that_grew_is_ingested(started: tuple[Path, Transcript]) -> None:
    store, t = started
    before = len(messages(Store(store), t.thread_id))
    t.tool("Bash", {"command": "make check"}, "all good")
    t.say("Checked.")
    t.prompt("Thanks, now the docs")  # a response is archived once a line follows it
    t.flush()
    _proc, full = run(store, "post-tool-use", t.payload("PostToolUse", tool_name="Bash"))
    assert full
    after = messages(Store(store), t.thread_id)
    assert len(after) > before
    assert "Checked." in json.dumps([m.content for m in after], default=str)
    # and the next one, with nothing new again, is quick
    _proc, full = run(store, "stop", t.payload("Stop"))
    assert not full


def test_a_deleted_note_costs_one_full_check_and_loses_nothing(
    started: tuple[Path, Transcript],
) -> None:
    store, t = started
    t.say("Written while the note was gone.")
    t.prompt("Go on")
    t.flush()
    note_of(store).unlink()
    _proc, full = run(store, "post-tool-use", t.payload("PostToolUse"))
    assert full
    texts = json.dumps([m.content for m in messages(Store(store), t.thread_id)], default=str)
    assert "Written while the note was gone." in texts
    _proc, full = run(store, "post-tool-use", t.payload("PostToolUse"))
    assert not full


def test_a_damaged_note_takes_the_full_path(started: tuple[Path, Transcript]) -> None:
    store, t = started
    note_of(store).write_bytes(b"\xff garbage\n")
    _proc, full = run(store, "post-tool-use", t.payload("PostToolUse"))
    assert full


def test_a_replaced_transcript_of_the_same_size_takes_the_full_path(
    started: tuple[Path, Transcript],
) -> None:
    store, t = started
    data = t.path.read_bytes()
    t.path.unlink()
    t.path.write_bytes(data)  # a new file (inode, times), same bytes
    _proc, full = run(store, "post-tool-use", t.payload("PostToolUse"))
    assert full


def test_the_full_path_can_be_forced(started: tuple[Path, Transcript]) -> None:
    store, t = started
    _proc, full = run(store, "post-tool-use", t.payload("PostToolUse"), CONTINUITY_HOOK_FULL="1")
    assert full


def test_synchronous_events_never_take_the_fast_path(started: tuple[Path, Transcript]) -> None:
    store, t = started
    _proc, full = run(store, "user-prompt-submit", t.payload("UserPromptSubmit", prompt="x"))
    assert full


def test_another_store_has_its_own_note(started: tuple[Path, Transcript], tmp_path: Path) -> None:
    _store, t = started
    other = tmp_path / "other-store"
    _proc, full = run(other, "post-tool-use", t.payload("PostToolUse"))
    assert full
    assert len(messages(Store(other), t.thread_id)) > 0


def test_a_subagent_file_that_grew_is_ingested(started: tuple[Path, Transcript]) -> None:
    store, t = started
    agent = Transcript(t.path.with_suffix("") / "subagents" / "agent-a1.jsonl")
    agent.prompt("Find the retry logic")
    agent.say("It is in retry.py.")
    agent.flush()
    payload = t.payload("SubagentStop", agent_id="a1", agent_transcript_path=str(agent.path))
    _proc, full = run(store, "subagent-stop", payload)
    assert full
    _proc, full = run(store, "subagent-stop", payload)
    assert not full
    agent.say("And in backoff.py.")
    agent.prompt("Thanks")
    agent.flush()
    _proc, full = run(store, "subagent-stop", payload)
    assert full
    stored = Store(store)
    texts = json.dumps(
        [m.content for tid in stored.threads() for m in messages(stored, tid)], default=str
    )
    assert "And in backoff.py." in texts


def test_input_the_shortcut_cannot_read_goes_the_full_way(
    started: tuple[Path, Transcript],
) -> None:
    store, t = started
    payload = t.payload("PostToolUse", tool_input={"transcript_path": "/elsewhere.jsonl"})
    _proc, full = run(store, "post-tool-use", payload)  # the key twice: not read by a shortcut
    assert full
