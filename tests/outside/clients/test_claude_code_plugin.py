"""The repository's Claude Code plugin with the real CLI (pinned, from npm), as a user installs it.

``claude plugin validate`` accepts the marketplace and the plugin; ``claude plugin marketplace
add`` and ``claude plugin install continuity@continuity`` install it from a copy of the
repository's plugin files; then, with ``continuity`` on PATH (nothing else installed: no
``continuity install``), ``claude mcp list`` reports the plugin's server connected and a real
session is archived by the plugin's hooks.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Final

import pytest

from tests.support.agents import ClaudeWorld, client, continuity_mcp_missing, eventually
from tests.support.model_server import ModelServer, Reply, Rule, Script, ToolCall

pytestmark = [pytest.mark.slow, pytest.mark.agents]

ROOT: Final = Path(__file__).resolve().parents[3]
COMMAND: Final = "echo plugged > plugin-9c1e.txt"


def test_claude_validates_the_marketplace_and_the_plugin(tmp_path: Path) -> None:
    exe = client("claude-code")
    with ModelServer(Script([])) as server:
        world = ClaudeWorld(exe, tmp_path, server)
        for target in (
            ROOT / ".claude-plugin" / "marketplace.json",
            ROOT / "plugins" / "continuity",
        ):
            done = world.claude_cmd("plugin", "validate", str(target))
            assert done.returncode == 0, done.stdout + done.stderr
            assert "Validation passed" in done.stdout


def _marketplace_copy(into: Path) -> Path:
    """The repository's marketplace and plugin, as a clone holds them (nothing else)."""
    shutil.copytree(ROOT / ".claude-plugin", into / ".claude-plugin")
    shutil.copytree(ROOT / "plugins", into / "plugins")
    return into


def test_the_installed_plugin_brings_the_server_and_the_hooks(tmp_path: Path) -> None:
    missing = continuity_mcp_missing()
    if missing:
        pytest.skip(missing)
    exe = client("claude-code")
    script = Script(
        [
            Rule(
                Reply(text="On it.", tool_calls=(ToolCall("Bash", {"command": COMMAND}),)),
                name="run",
                phrase="plug it in",
                after_tool=False,
            ),
            Rule(Reply(text="Plugged in."), name="after", after_tool="Bash"),
        ]
    )
    with ModelServer(script) as server:
        world = ClaudeWorld(exe, tmp_path / "world", server)
        # `continuity` on PATH, as the plugin needs it (this interpreter's environment).
        world.env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), world.env["PATH"]])
        world.user_settings({"permissions": {"allow": ["Bash"]}})
        market = _marketplace_copy(tmp_path / "clone")
        for args in (
            ("plugin", "marketplace", "add", str(market)),
            ("plugin", "install", "continuity@continuity"),
        ):
            done = world.claude_cmd(*args)
            assert done.returncode == 0, done.stdout + done.stderr

        listed = world.claude_cmd("mcp", "list")
        assert listed.returncode == 0, listed.stdout + listed.stderr
        line = next((ln for ln in listed.stdout.splitlines() if "continuity mcp" in ln), "")
        assert "Connected" in line, listed.stdout

        run = world.claude("Please plug it in.").check()
        thread = f"cc-{run.session_id}"

        def logged() -> str:
            return world.continuity("log", thread, "--json", check=False).stdout

        shown = eventually(logged, lambda got: "Plugged in." in got)
        frames = [json.loads(line) for line in shown.splitlines() if line.strip()]
        assert any(COMMAND in json.dumps(f) for f in frames), "the tool call is archived"
        assert any("Plugged in." in json.dumps(f) for f in frames)
        assert world.errors_log() == []
        # Nothing but the plugin put continuity there: no hook or server in the settings.
        settings = world.home / ".claude" / "settings.json"
        assert "continuity hook" not in settings.read_text()
        assert not (world.project / ".mcp.json").exists()
