"""``continuity install codex`` / ``uninstall codex``: Codex's hooks.json, the hooks' trust and
the MCP server in config.toml, every scope, dry-run, backup, byte-exact uninstall, other content
kept, malformed files refused (issue 29 item 3)."""

from __future__ import annotations

import json
import shlex
import tomllib
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from continuity.agents.codex.install import HOOKS, hook_hash, trust_key
from continuity.cli.app import app

pytestmark = pytest.mark.slow

HOOKS_JSON = """{
  "hooks": {
    "PreToolUse": [
      {"matcher": "Bash",
       "hooks": [{"type": "command", "command": "/usr/local/bin/guard", "timeout": 5}]}
    ],
    "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]
  }
}
"""
CONFIG_TOML = """\
# my codex settings
model = "o3"  # the default model
approval_policy = "on-request"

[mcp_servers.docs]
command = "npx"
args = ["-y", "docs-mcp"]

[hooks.state."/elsewhere/hooks.json:stop:0:0"]
trusted_hash = "sha256:0000"

[projects."/somewhere"]
trust_level = "trusted"
"""


@pytest.fixture(autouse=True)
def codex_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("CONTINUITY_HOME", "XDG_DATA_HOME", "CLAUDE_PROJECT_DIR"):
        monkeypatch.delenv(name, raising=False)
    folder = tmp_path / "codex-home"
    folder.mkdir()
    monkeypatch.setenv("CODEX_HOME", str(folder))
    return folder


def cli(*args: str) -> Result:
    return CliRunner().invoke(app, list(args))


def ok(*args: str) -> Result:
    result = cli(*args)
    assert result.exit_code == 0, result.output
    return result


def _trust(config: Path) -> dict[str, Any]:
    state = tomllib.loads(config.read_text()).get("hooks", {}).get("state", {})
    return {k: v["trusted_hash"] for k, v in state.items()}


def _ours(hooks_file: Path) -> dict[str, tuple[str, dict[str, Any], dict[str, Any]]]:
    """Our handlers in a hooks.json: trust key -> (event, group, handler)."""
    found = {}
    for event, groups in json.loads(hooks_file.read_text())["hooks"].items():
        for g, group in enumerate(groups):
            for h, handler in enumerate(group["hooks"]):
                if "--agent codex" in handler["command"]:
                    found[trust_key(hooks_file, event, g, h)] = (event, group, handler)
    return found


def test_the_hash_is_the_one_codex_reports() -> None:
    # currentHash of these two hooks as Codex 0.169.0's app-server (hooks/list) reported them
    assert hook_hash(
        "PostToolUse",
        {"matcher": "*"},
        {
            "type": "command",
            "command": "/usr/bin/true hook post-tool-use --agent codex",
            "timeout": 30,
        },
    ) == ("sha256:99323181ca95dce9da2749a50b2439e62399af9efaefdc54f9505cfaa7cacae9")
    assert hook_hash(
        "SessionStart",
        {},
        {
            "type": "command",
            "command": "/usr/bin/true hook session-start --agent codex",
            "timeout": 30,
        },
    ) == ("sha256:8d182e640ff2e31105a1acb7d3c4cb67339e8dfee8110a103f60973219499d3c")


def test_user_install_into_a_fresh_codex_home(codex_home: Path) -> None:
    out = ok("install", "codex").output
    hooks_file = codex_home / "hooks.json"
    config = codex_home / "config.toml"
    assert f"installed continuity hooks in {hooks_file}" in out
    ours = _ours(hooks_file)
    assert sorted(e for e, _g, _h in ours.values()) == sorted(e for e, _s, _t in HOOKS)
    for event, slug, timeout in HOOKS:
        (handler,) = [h for e, _g, h in ours.values() if e == event]
        argv = shlex.split(handler["command"])
        assert argv[-4:] == ["hook", slug, "--agent", "codex"]
        assert argv[0] == "exec" and Path(argv[1]).is_absolute()
        assert handler["timeout"] == timeout
    # every one of our hooks is trusted, by its key and its hash, and nothing else is
    assert _trust(config) == {k: hook_hash(e, g, h) for k, (e, g, h) in ours.items()}
    data = tomllib.loads(config.read_text())
    assert data["mcp_servers"]["continuity"]["args"][-1] == "mcp"
    assert not (codex_home / "config.toml.continuity-backup").exists()  # nothing to back up
    # again: nothing changes
    before = hooks_file.read_bytes(), config.read_bytes()
    assert "nothing changed" in ok("install", "codex").output
    assert (hooks_file.read_bytes(), config.read_bytes()) == before
    # uninstall: both files were install's alone, both go
    ok("uninstall", "codex")
    assert sorted(p.name for p in codex_home.iterdir()) == []


def test_dry_run_writes_nothing(codex_home: Path) -> None:
    (codex_home / "config.toml").write_text(CONFIG_TOML)
    out = ok("install", "codex", "--dry-run").output
    assert "+[hooks.state." in out and "session-start --agent codex" in out
    assert sorted(p.name for p in codex_home.iterdir()) == ["config.toml"]
    assert (codex_home / "config.toml").read_text() == CONFIG_TOML
    ok("install", "codex")
    snapshot = {p.name: p.read_bytes() for p in codex_home.iterdir()}
    assert "session-start --agent codex" in ok("uninstall", "codex", "--dry-run").output
    assert {p.name: p.read_bytes() for p in codex_home.iterdir()} == snapshot


def test_other_content_kept_backup_and_byte_exact_uninstall(codex_home: Path) -> None:
    hooks_file = codex_home / "hooks.json"
    config = codex_home / "config.toml"
    hooks_file.write_text(HOOKS_JSON)
    config.write_text(CONFIG_TOML)
    out = ok("install", "codex").output
    assert "saved to" in out
    assert (codex_home / "hooks.json.continuity-backup").read_text() == HOOKS_JSON
    assert (codex_home / "config.toml.continuity-backup").read_text() == CONFIG_TOML
    hooks = json.loads(hooks_file.read_text())["hooks"]
    assert hooks["PreToolUse"] == json.loads(HOOKS_JSON)["hooks"]["PreToolUse"]
    assert hooks["Stop"][0] == json.loads(HOOKS_JSON)["hooks"]["Stop"][0]  # the user's first
    text = config.read_text()
    assert text.startswith(CONFIG_TOML)  # every byte of the user's file where it was
    trust = _trust(config)
    assert trust.pop("/elsewhere/hooks.json:stop:0:0") == "sha256:0000"
    ours = _ours(hooks_file)
    assert trust == {k: hook_hash(e, g, h) for k, (e, g, h) in ours.items()}
    assert trust_key(hooks_file, "Stop", 1, 0) in trust  # after the user's Stop group
    ok("uninstall", "codex")
    assert hooks_file.read_text() == HOOKS_JSON
    assert config.read_text() == CONFIG_TOML
    assert sorted(p.name for p in codex_home.iterdir()) == ["config.toml", "hooks.json"]


def test_uninstall_after_the_user_changed_the_files_keeps_their_change(codex_home: Path) -> None:
    config = codex_home / "config.toml"
    config.write_text(CONFIG_TOML)
    ok("install", "codex")
    config.write_text(config.read_text().replace('model = "o3"', 'model = "o4"'))
    out = ok("uninstall", "codex").output
    assert "changed since the install" in out
    assert config.read_text() == CONFIG_TOML.replace('model = "o3"', 'model = "o4"')


def test_no_mcp_and_hooks_turned_off(codex_home: Path) -> None:
    config = codex_home / "config.toml"
    config.write_text("[features]\nhooks = false\n")
    out = ok("install", "codex", "--no-mcp").output
    assert "hooks are turned off" in out and "hooks = false" in out
    assert "mcp_servers" not in tomllib.loads(config.read_text())
    assert len(_trust(config)) == len(HOOKS)
    ok("uninstall", "codex")
    assert config.read_text() == "[features]\nhooks = false\n"


def test_project_scope(codex_home: Path, tmp_path: Path) -> None:
    project = tmp_path / "repo"
    project.mkdir()
    config = codex_home / "config.toml"
    config.write_text(CONFIG_TOML)
    out = ok("install", "codex", "--scope", "project", "--project", str(project)).output
    hooks_file = project / ".codex" / "hooks.json"
    assert "only in a project it trusts" in out  # Codex's own trust of the folder: the user's
    assert not (codex_home / "hooks.json").exists()
    trust = _trust(config)
    ours = _ours(hooks_file)
    assert all(k.startswith(f"{project.resolve()}/.codex/hooks.json:") for k in ours)
    assert {k: trust[k] for k in ours} == {k: hook_hash(e, g, h) for k, (e, g, h) in ours.items()}
    # the user scope beside it: each has its own keys; uninstalling both gives the file back
    ok("install", "codex")
    assert len(_trust(config)) == 2 * len(HOOKS) + 1
    ok("uninstall", "codex", "--scope", "project", "--project", str(project))
    assert not (project / ".codex").exists()
    assert len(_trust(config)) == len(HOOKS) + 1
    ok("uninstall", "codex")
    assert config.read_text() == CONFIG_TOML
    config.write_text(CONFIG_TOML + f'\n[projects."{project}"]\ntrust_level = "trusted"\n')
    out = ok("install", "codex", "--scope", "project", "--project", str(project)).output
    assert "only in a project it trusts" not in out


@pytest.mark.parametrize(
    ("name", "text", "said"),
    [
        ("hooks.json", "{not json", "is not valid JSON"),
        ("hooks.json", "[1, 2]", "does not hold a JSON object"),
        ("hooks.json", '{"hooks": {"Stop": {}}}', "hooks.Stop is not a list"),
        ("config.toml", "model = [", "is not valid TOML"),
        ("config.toml", "hooks = { state = { a = 1 } }\n", "could not add the trust"),
    ],
)
def test_malformed_files_are_refused_and_nothing_is_written(
    codex_home: Path, name: str, text: str, said: str
) -> None:
    (codex_home / name).write_text(text)
    result = cli("install", "codex")
    assert result.exit_code != 0
    assert said in result.output
    assert [p.name for p in codex_home.iterdir()] == [name]
    assert (codex_home / name).read_text() == text


def test_scopes_codex_does_not_have_are_refused(codex_home: Path) -> None:
    result = cli("install", "codex", "--scope", "local")
    assert result.exit_code != 0 and "user and a project scope" in result.output
    result = cli("install", "codex", "--scope", "project", "--project", "/no/such/folder")
    assert result.exit_code != 0 and "no project folder" in result.output
    assert list(codex_home.iterdir()) == []
