"""``continuity install gemini`` / ``uninstall gemini`` on Gemini CLI's settings file, and
``continuity hook <Event> --agent gemini`` fed the hook payloads Gemini CLI 0.61 sent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from continuity import frames as fr
from continuity.agents.base.install import apply_plan
from continuity.agents.gemini.install import HOOKS, plan_install, plan_uninstall
from continuity.errors import InvalidSettings
from continuity.store.locate import open_store
from tests.support.fixtures import shared_fixture

pytestmark = pytest.mark.slow

USER_SETTINGS = (
    '{\n    "theme": "Default",\n    "hooks": {"BeforeAgent": [{"hooks": '
    '[{"type": "command", "command": "echo hi"}]}]},\n'
    '    "hooksConfig": {"enabled": false}\n}\n'
)


def test_install_then_uninstall_gives_back_the_bytes(tmp_path: Path) -> None:
    path = tmp_path / ".gemini" / "settings.json"
    path.parent.mkdir()
    path.write_text(USER_SETTINGS)
    plan = plan_install(path, tmp_path / "store")
    assert "hook BeforeAgent --agent gemini" in plan.diff()
    apply_plan(plan)
    data = json.loads(path.read_text())
    assert data["hooksConfig"]["enabled"] is True
    assert data["theme"] == "Default"
    assert data["mcpServers"]["continuity"]["args"][-3:] == [
        "mcp",
        "--store",
        str(tmp_path / "store"),
    ]
    for event, timeout in HOOKS:
        ours = data["hooks"][event][-1]["hooks"][0]
        assert ours["timeout"] == timeout and ours["command"].endswith(
            f"hook {event} --agent gemini"
        )
    assert data["hooks"]["BeforeAgent"][0]["hooks"][0]["command"] == "echo hi"
    again = plan_install(path, tmp_path / "store")
    assert not again.changed
    apply_plan(plan_uninstall(path))
    assert path.read_text() == USER_SETTINGS
    assert not (path.parent / "settings.json.continuity-backup").exists()


def test_install_into_no_file_and_uninstall_removes_it(tmp_path: Path) -> None:
    path = tmp_path / ".gemini" / "settings.json"
    apply_plan(plan_install(path, mcp=False))
    assert "mcpServers" not in json.loads(path.read_text())
    apply_plan(plan_uninstall(path))
    assert not path.exists() and not path.parent.exists()


def test_a_file_that_is_not_an_object_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text("[1, 2]\n")
    with pytest.raises(InvalidSettings, match="not changed"):
        plan_install(path)
    assert path.read_text() == "[1, 2]\n"


def _hook(store: Path, event: str, payload: dict[str, object]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "continuity",
            "--store",
            str(store),
            "hook",
            event,
            "--agent",
            "gemini",
        ],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "CONTINUITY_HOME": str(store)},
    )


def test_hooks_archive_and_give_the_restore_once_after_a_compression(tmp_path: Path) -> None:
    payloads = shared_fixture("agents", "recorded", "gemini_hooks_compress.jsonl")
    transcript = shared_fixture("agents", "recorded", "gemini_transcript_resume_compress.jsonl")
    lines = transcript.read_bytes().splitlines(keepends=True)
    session = tmp_path / "chats" / "session-2026-11-26T12-43-fb5b2188.jsonl"
    session.parent.mkdir()
    session.write_bytes(b"".join(lines[:21]))  # up to the prompt of the turn that compresses
    store = tmp_path / "store"
    outputs: dict[str, list[str]] = {}
    for raw in payloads.read_text().splitlines():
        entry = json.loads(raw)
        if entry["event"] not in dict(HOOKS):
            continue
        if entry["event"] == "AfterAgent":
            session.write_bytes(b"".join(lines))  # the compression is in the file now
        payload = {**entry["stdin"], "transcript_path": str(session)}
        done = _hook(store, entry["event"], payload)
        assert done.returncode == 0 and not done.stderr
        outputs.setdefault(entry["event"], []).append(done.stdout)
    assert outputs["BeforeAgent"] == [""]  # no compression archived yet
    # the next turn's BeforeAgent gives the restore, once
    prompt = {
        **payloads_first(payloads),
        "hook_event_name": "BeforeAgent",
        "prompt": "next",
        "transcript_path": str(session),
    }
    first = json.loads(_hook(store, "BeforeAgent", prompt).stdout)
    context = first["hookSpecificOutput"]["additionalContext"]
    assert first["hookSpecificOutput"]["hookEventName"] == "BeforeAgent"
    assert "Restored by continuity" in context and "echo hi" in context
    assert _hook(store, "BeforeAgent", prompt).stdout == ""
    thread = open_store(store).thread("gemini-fb5b2188-1801-48c1-82f3-df2140e79338")
    assert any(isinstance(f, fr.CompactionCheckpointCreated) for f in thread.read())


def payloads_first(path: Path) -> dict[str, object]:
    first: dict[str, object] = json.loads(path.read_text().splitlines()[0])["stdin"]
    return first


def test_a_broken_hook_input_never_fails(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "continuity",
            "--store",
            str(tmp_path / "s"),
            "hook",
            "AfterTool",
            "--agent",
            "gemini",
        ],
        input="not json",
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and done.stdout == ""
    assert "not JSON" in done.stderr


def test_the_commands_install_gemini_and_ingest_agent_gemini(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from continuity.cli.app import app

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    runner = CliRunner()
    store = ["--store", str(tmp_path / "store")]
    dry = runner.invoke(app, [*store, "install", "gemini", "--dry-run"])
    assert dry.exit_code == 0 and "hook SessionStart --agent gemini" in dry.output
    settings = tmp_path / "home" / ".gemini" / "settings.json"
    assert not settings.exists()
    done = runner.invoke(app, [*store, "install", "gemini", "--scope", "user"])
    assert done.exit_code == 0 and settings.is_file(), done.output
    assert "continuity" in json.loads(settings.read_text())["mcpServers"]
    gone = runner.invoke(app, [*store, "uninstall", "gemini"])
    assert gone.exit_code == 0 and not settings.exists(), gone.output
    folder = shared_fixture("agents", "gemini", "codemie-code")
    first = runner.invoke(app, [*store, "ingest", "--agent", "gemini", str(folder)])
    assert first.exit_code == 0 and "2 Gemini CLI sessions: 40 new messages" in first.output
    again = runner.invoke(app, [*store, "ingest", "--agent", "gemini", str(folder)])
    assert "0 new messages" in again.output
    bad = runner.invoke(app, [*store, "ingest", "--agent", "gemini", str(tmp_path / "none")])
    assert bad.exit_code != 0 and "no Gemini CLI session files" in bad.output
