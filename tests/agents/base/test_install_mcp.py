"""Registering the MCP server: ``continuity install claude-code`` (every scope) and
``continuity install mcp --client codex|gemini|cursor|claude-code``.

Every test starts from files a real user could have (``~/.claude.json`` holding much else,
other servers, a Codex ``config.toml`` with comments and tables), checks that only our entry
changes, that an uninstall after an install gives back the original bytes, and that a file
that cannot be read as what it should be is refused with nothing written.
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from continuity.cli.app import app

CLAUDE_JSON: dict[str, Any] = {
    "numStartups": 42,
    "installMethod": "npm",
    "tipsHistory": {"memory-command": 3},
    "mcpServers": {"github": {"type": "stdio", "command": "gh-mcp", "args": [], "env": {}}},
    "projects": {
        "/somewhere/else": {"allowedTools": [], "mcpServers": {}, "hasTrustDialogAccepted": True}
    },
    "oauthAccount": {"emailAddress": "user@example.com"},
}
CODEX_TOML = """\
# my codex settings
model = "o3"  # the default model
approval_policy = "on-request"

[mcp_servers.docs]
command = "npx"
args = ["-y", "docs-mcp"]

[mcp_servers.docs.env]
TOKEN_FILE = "~/.docs-token"

[profiles.fast]
model = "o4-mini"
"""


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("CONTINUITY_HOME", "XDG_DATA_HOME", "CLAUDE_PROJECT_DIR", "CODEX_HOME"):
        monkeypatch.delenv(name, raising=False)
    return home


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "repo"
    folder.mkdir()
    return folder


@pytest.fixture
def claude_json(home: Path) -> Path:
    path = home / ".claude.json"
    path.write_text(json.dumps(CLAUDE_JSON, indent=2) + "\n", encoding="utf-8")
    return path


def cli(*args: str) -> Result:
    return CliRunner().invoke(app, list(args))


def ok(*args: str) -> Result:
    result = cli(*args)
    assert result.exit_code == 0, result.output
    return result


def snapshot(*roots: Path) -> dict[str, bytes]:
    return {
        str(p): p.read_bytes() for root in roots for p in sorted(root.rglob("*")) if p.is_file()
    }


def ours(data: dict[str, Any], *keys: str) -> Any:
    node: Any = data
    for key in keys:
        node = node[key]
    return node["continuity"]


def inserted(before: bytes, after: bytes) -> bytes:
    """What ``after`` adds to ``before``, asserting it is one contiguous insertion."""
    head = 0
    while head < len(before) and before[head] == after[head]:
        head += 1
    tail = len(before) - head
    assert after[len(after) - tail :] == before[head:], "more than one insertion"
    return after[head : len(after) - tail]


def backup_of(path: Path) -> Path:
    return path.with_name(path.name + ".continuity-backup")


def check_entry(entry: dict[str, Any], *, typed: bool = True) -> None:
    assert Path(entry["command"]).is_absolute()
    assert entry["args"][-1] == "mcp" or entry["args"][-3] == "mcp"
    if typed:
        assert entry["type"] == "stdio"


# --- install claude-code --------------------------------------------------------------------


def test_user_scope_adds_our_server_to_claude_json_and_keeps_the_rest(claude_json: Path) -> None:
    original = claude_json.read_bytes()
    result = ok("install", "claude-code")
    assert str(claude_json) in result.stdout
    data = json.loads(claude_json.read_text(encoding="utf-8"))
    check_entry(ours(data, "mcpServers"))
    del data["mcpServers"]["continuity"]
    assert data == CLAUDE_JSON
    # every byte that was there is still there: only our member was inserted, in one piece
    added = inserted(original, claude_json.read_bytes())
    assert added.startswith(b',\n    "continuity": {\n      "type": "stdio",')
    assert backup_of(claude_json).read_bytes() == original

    ok("uninstall", "claude-code")
    assert claude_json.read_bytes() == original
    assert not backup_of(claude_json).exists()


def test_claude_json_changed_since_the_install_keeps_its_changes(claude_json: Path) -> None:
    ok("install", "claude-code")
    # Claude Code rewrites the file all the time: a counter moves
    text = claude_json.read_text(encoding="utf-8").replace('"numStartups": 42', '"numStartups": 43')
    claude_json.write_text(text, encoding="utf-8")
    result = ok("uninstall", "claude-code")
    expected = json.dumps(CLAUDE_JSON, indent=2).replace('"numStartups": 42', '"numStartups": 43')
    assert claude_json.read_text(encoding="utf-8") == expected + "\n"
    # only our entry was taken out, and nothing of ours is left: not even the backup
    assert "changed since the install: only continuity's entry was taken out" in result.stdout
    assert not backup_of(claude_json).exists()


def test_local_scope_writes_the_project_entry_of_claude_json(
    claude_json: Path, project: Path
) -> None:
    original = claude_json.read_bytes()
    ok("install", "claude-code", "--scope", "local", "--project", str(project))
    data = json.loads(claude_json.read_text(encoding="utf-8"))
    check_entry(ours(data, "projects", str(project.resolve()), "mcpServers"))
    assert "continuity" not in data["mcpServers"]
    assert data["projects"]["/somewhere/else"] == CLAUDE_JSON["projects"]["/somewhere/else"]
    assert (project / ".claude" / "settings.local.json").is_file()
    ok("uninstall", "claude-code", "--scope", "local", "--project", str(project))
    assert claude_json.read_bytes() == original
    assert not (project / ".claude").exists()


def test_local_scope_into_an_existing_project_entry(claude_json: Path, project: Path) -> None:
    data = dict(CLAUDE_JSON)
    key = str(project.resolve())
    data["projects"] = {key: {"allowedTools": ["Bash"], "mcpServers": {"db": {"command": "db"}}}}
    claude_json.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    original = claude_json.read_bytes()
    ok("install", "claude-code", "--scope", "local", "--project", str(project))
    after = json.loads(claude_json.read_text(encoding="utf-8"))
    assert set(after["projects"][key]["mcpServers"]) == {"db", "continuity"}
    assert after["projects"][key]["allowedTools"] == ["Bash"]
    backup_of(claude_json).unlink()  # even without the backup: only what install added goes
    ok("uninstall", "claude-code", "--scope", "local", "--project", str(project))
    assert claude_json.read_bytes() == original


def test_project_scope_writes_mcp_json_and_says_it_needs_approval(project: Path) -> None:
    result = ok("install", "claude-code", "--scope", "project", "--project", str(project))
    mcp_json = project / ".mcp.json"
    data = json.loads(mcp_json.read_text(encoding="utf-8"))
    assert list(data) == ["mcpServers"] and list(data["mcpServers"]) == ["continuity"]
    check_entry(data["mcpServers"]["continuity"])
    assert "approve" in result.stdout and "enableAllProjectMcpServers" in result.stdout
    ok("uninstall", "claude-code", "--scope", "project", "--project", str(project))
    assert not mcp_json.exists()
    assert list(project.iterdir()) == []


def test_project_scope_keeps_the_other_servers_of_mcp_json(project: Path) -> None:
    mcp_json = project / ".mcp.json"
    mcp_json.write_text(
        '{\n    "mcpServers": {\n        "pg": {"command": "pg-mcp", "args": ["--ro"]}\n    }\n}\n',
        encoding="utf-8",
    )
    original = mcp_json.read_bytes()
    ok("install", "claude-code", "--scope", "project", "--project", str(project))
    data = json.loads(mcp_json.read_text(encoding="utf-8"))
    assert data["mcpServers"]["pg"] == {"command": "pg-mcp", "args": ["--ro"]}
    added = inserted(original, mcp_json.read_bytes())
    assert added.startswith(b',\n        "continuity": {\n            "type": "stdio",')
    ok("uninstall", "claude-code", "--scope", "project", "--project", str(project))
    assert mcp_json.read_bytes() == original


def test_dry_run_shows_both_diffs_and_writes_nothing(
    claude_json: Path, home: Path, project: Path
) -> None:
    before = snapshot(home, project)
    result = ok("install", "claude-code", "--dry-run")
    assert f"+++ {claude_json} (new)" in result.stdout
    assert '+    "continuity": {' in result.stdout
    assert "settings.json (new)" in result.stdout
    result = ok(
        "install", "claude-code", "--scope", "project", "--project", str(project), "--dry-run"
    )
    assert ".mcp.json (new)" in result.stdout
    assert snapshot(home, project) == before


def test_no_mcp_leaves_claude_json_alone(claude_json: Path) -> None:
    original = claude_json.read_bytes()
    ok("install", "claude-code", "--no-mcp")
    assert claude_json.read_bytes() == original
    assert (claude_json.parent / ".claude" / "settings.json").is_file()
    ok("install", "claude-code")
    ok("uninstall", "claude-code", "--no-mcp")
    assert "continuity" in json.loads(claude_json.read_text())["mcpServers"]


def test_installing_twice_changes_nothing(claude_json: Path) -> None:
    ok("install", "claude-code")
    once = claude_json.read_bytes()
    result = ok("install", "claude-code")
    assert "already there" in result.stdout
    assert claude_json.read_bytes() == once


def test_a_named_store_is_passed_to_the_server(claude_json: Path, tmp_path: Path) -> None:
    store = tmp_path / "my store"
    ok("--store", str(store), "install", "claude-code")
    entry = ours(json.loads(claude_json.read_text()), "mcpServers")
    assert entry["args"][-3:] == ["mcp", "--store", str(store)]


@pytest.mark.parametrize(
    ("content", "scope"),
    [
        ("{not json", "local"),
        ("[1, 2]", "local"),
        ('{"mcpServers": []}', "user"),
        ('{"projects": 3}', "local"),
        ("\ufeff{}", "user"),
    ],
    ids=["not-json", "array", "servers-not-object", "projects-not-object", "bom"],
)
def test_a_malformed_claude_json_is_refused_and_nothing_is_written(
    home: Path, project: Path, content: str, scope: str
) -> None:
    claude_json = home / ".claude.json"
    claude_json.write_text(content, encoding="utf-8")
    before = snapshot(home, project)
    result = cli("install", "claude-code", "--scope", scope, "--project", str(project))
    assert result.exit_code == 1
    assert "error:" in result.output and str(claude_json) in result.output
    assert "not changed" in result.output
    assert snapshot(home, project) == before  # the hooks were not written either


def test_crlf_and_tabs_are_kept(home: Path) -> None:
    claude_json = home / ".claude.json"
    claude_json.write_bytes(b'{\r\n\t"a": 1,\r\n\t"mcpServers": {}\r\n}\r\n')
    original = claude_json.read_bytes()
    ok("install", "claude-code")
    text = claude_json.read_bytes()
    assert b'\r\n\t\t"continuity": {\r\n\t\t\t"type": "stdio",' in text
    assert b"\n" not in text.replace(b"\r\n", b"")
    ok("uninstall", "claude-code")
    assert claude_json.read_bytes() == original


def test_mcp_json_that_leads_out_of_the_project_is_refused(project: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.json"
    outside.write_text("{}\n")
    (project / ".mcp.json").symlink_to(outside)
    result = cli("install", "claude-code", "--scope", "project", "--project", str(project))
    assert result.exit_code == 1 and "leads out of the project" in result.output
    assert outside.read_text() == "{}\n"


# --- install mcp --client ---------------------------------------------------------------------


@pytest.fixture
def codex(home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = home / "codex-home"
    folder.mkdir()
    monkeypatch.setenv("CODEX_HOME", str(folder))
    path = folder / "config.toml"
    path.write_text(CODEX_TOML, encoding="utf-8")
    return path


def test_codex_gets_our_table_and_nothing_else_changes(codex: Path) -> None:
    result = ok("install", "mcp", "--client", "codex")
    assert str(codex) in result.stdout
    text = codex.read_text(encoding="utf-8")
    assert text.startswith(CODEX_TOML)  # the user's file, then our table
    data = tomllib.loads(text)
    entry = data["mcp_servers"].pop("continuity")
    check_entry(entry, typed=False)
    assert data == tomllib.loads(CODEX_TOML)
    ok("uninstall", "mcp", "--client", "codex")
    assert codex.read_text(encoding="utf-8") == CODEX_TOML
    assert not backup_of(codex).exists()


def test_codex_without_a_backup_still_uninstalls_to_the_same_bytes(codex: Path) -> None:
    ok("install", "mcp", "--client", "codex")
    backup_of(codex).unlink()
    ok("install", "mcp", "--client", "codex")  # again: replaced in place, idempotent
    ok("uninstall", "mcp", "--client", "codex")
    assert codex.read_text(encoding="utf-8") == CODEX_TOML


def test_codex_default_home_and_a_new_file(home: Path) -> None:
    ok("install", "mcp", "--client", "codex")
    path = home / ".codex" / "config.toml"
    check_entry(tomllib.loads(path.read_text())["mcp_servers"]["continuity"], typed=False)
    ok("uninstall", "mcp", "--client", "codex")
    assert not path.exists()


@pytest.mark.parametrize(
    "content",
    [
        "model = \n",
        'model = "o3"\nmodel = "o4"\n',
        "mcp_servers = 3\n",
        "[mcp_servers]\ncontinuity = { command = 'x' }\n",
    ],
    ids=["not-toml", "duplicate-key", "servers-not-table", "inline-entry"],
)
def test_a_codex_config_continuity_cannot_edit_is_refused(
    codex: Path, home: Path, content: str
) -> None:
    codex.write_text(content, encoding="utf-8")
    before = snapshot(home)
    result = cli("install", "mcp", "--client", "codex")
    assert result.exit_code == 1
    assert "error:" in result.output and "not changed" in result.output
    assert snapshot(home) == before


@pytest.mark.parametrize(
    ("client", "relative"),
    [("gemini", ".gemini/settings.json"), ("cursor", ".cursor/mcp.json")],
)
@pytest.mark.parametrize("scope", ["user", "project"])
def test_gemini_and_cursor_round_trip(
    home: Path, project: Path, client: str, relative: str, scope: str
) -> None:
    base = home if scope == "user" else project
    path = base / relative
    path.parent.mkdir(parents=True)
    theirs = {"theme": "Dracula", "mcpServers": {"fs": {"command": "fs-mcp", "args": ["."]}}}
    path.write_text(json.dumps(theirs, indent=2) + "\n", encoding="utf-8")
    original = path.read_bytes()
    where = ["--scope", scope, "--project", str(project)]
    dry = ok("install", "mcp", "--client", client, *where, "--dry-run")
    assert f"+++ {path} (new)" in dry.stdout and path.read_bytes() == original
    ok("install", "mcp", "--client", client, *where)
    data = json.loads(path.read_text(encoding="utf-8"))
    entry = data["mcpServers"].pop("continuity")
    check_entry(entry, typed=False)
    assert "type" not in entry
    assert data == theirs
    ok("uninstall", "mcp", "--client", client, *where)
    assert path.read_bytes() == original


@pytest.mark.parametrize("client", ["claude-code", "codex", "gemini", "cursor"])
def test_print_shows_the_configuration_and_writes_nothing(home: Path, client: str) -> None:
    before = snapshot(home)
    result = ok("install", "mcp", "--client", client, "--print")
    assert snapshot(home) == before
    lines = result.stdout.splitlines()
    assert lines[0].startswith("# ")
    body = "\n".join(line for line in lines if not line.startswith("#"))
    if client == "codex":
        entry = tomllib.loads(body)["mcp_servers"]["continuity"]
    else:
        entry = ours(json.loads(body), "mcpServers")
    check_entry(entry, typed=client == "claude-code")
    if client == "claude-code":
        assert any(
            line.startswith("# or: claude mcp add --scope user continuity -- ") for line in lines
        )


def test_the_claude_code_client_is_the_same_registration(claude_json: Path) -> None:
    original = claude_json.read_bytes()
    ok("install", "mcp", "--client", "claude-code")
    check_entry(ours(json.loads(claude_json.read_text()), "mcpServers"))
    assert not (claude_json.parent / ".claude").exists()  # no hooks: the server only
    ok("uninstall", "mcp", "--client", "claude-code")
    assert claude_json.read_bytes() == original


def test_bad_client_arguments_are_refused(home: Path) -> None:
    before = snapshot(home)
    result = cli("install", "mcp", "--client", "vscode")
    assert result.exit_code == 2 and "vscode" in result.output
    result = cli("install", "mcp")
    assert result.exit_code == 1 and "needs --client" in result.output
    result = cli("install", "mcp", "--client", "codex", "--scope", "project")
    assert result.exit_code == 1 and "config.toml" in result.output
    result = cli("install", "claude-code", "--client", "codex")
    assert result.exit_code == 1
    assert snapshot(home) == before


def test_the_backup_of_claude_json_is_private(claude_json: Path) -> None:
    claude_json.chmod(0o600)
    ok("install", "claude-code")
    assert backup_of(claude_json).stat().st_mode & 0o077 == 0
    assert claude_json.stat().st_mode & 0o777 == 0o600
    assert os.access(claude_json, os.R_OK)


# --- the text editing itself -----------------------------------------------------------------

LAYOUTS = [
    "{}",
    "{}\n",
    '{"a": 1}',
    '{"a": 1, "mcpServers": {}}\n',
    '{\n  "a": 1\n}\n',
    '{\n  "mcpServers": {\n    "x": {"command": "x"}\n  },\n  "z": [1, {"b": null}]\n}\n',
    '{\n    "a": "con\\"tinuity",\n    "mcpServers": {\n    }\n}',
    '{\n\t"mcpServers": {"continuity": {"command": "old"}}\n}\n',
    '  {  "a" :  { "mcpServers" : 3 } , "mcpServers" : { "y" : 1 }  }  ',
]


@pytest.mark.parametrize("text", LAYOUTS)
def test_set_then_remove_gives_the_text_back(text: str) -> None:
    from continuity.agents.base._json_text import remove_member, set_member

    entry = {"type": "stdio", "command": "/bin/cöntinuity", "args": ["mcp"]}
    after = set_member(text, ["mcpServers"], "continuity", entry)
    data = json.loads(after)
    assert data["mcpServers"]["continuity"] == entry
    expected = json.loads(text)
    expected.setdefault("mcpServers", {})["continuity"] = entry
    assert data == expected
    if '"continuity"' not in text:  # an insertion, undone exactly
        back = remove_member(after, ["mcpServers"], "continuity")
        if "{\n    }" in text:  # an empty object laid out over lines comes back as {}
            assert json.loads(back) == json.loads(text)
        elif "mcpServers" in json.loads(text):
            assert back == text
        else:
            assert remove_member(back, [], "mcpServers") == text
