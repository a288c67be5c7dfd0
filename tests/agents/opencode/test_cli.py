"""``continuity ingest --agent opencode`` and ``continuity install|uninstall opencode``.

Install writes the capture plugin into opencode's plugin folder (the command that runs
continuity filled in) and registers the MCP server in ``opencode.json``, keeping the rest of
that file byte for byte; uninstall gives back the original bytes and removes only a plugin
that is ours; a file of the plugin's name that is not ours is refused with nothing written.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from continuity.agents.opencode.install import MARKER
from continuity.cli.app import app
from continuity.store.jsonl import Store

DB = Path(__file__).resolve().parents[2] / "data" / "opencode" / "opencode-1.18.33.db"
ROOT = "ses_de5ae599dffewqH0pMyudaCGW5"
USER_CONFIG = """{
  "$schema": "https://opencode.ai/config.json",
  "theme": "tokyonight",
  "mcp": {
    "docs": {"type": "remote", "url": "https://example.com/mcp"}
  },
  "provider": {}
}
"""


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("CONTINUITY_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(name, raising=False)
    return home


def run(*args: str) -> Result:
    return CliRunner().invoke(app, list(args))


@pytest.mark.slow
def test_ingest_a_database_then_one_session(tmp_path: Path) -> None:
    store = tmp_path / "store"
    db = tmp_path / "opencode.db"
    shutil.copyfile(DB, db)
    done = run("--store", str(store), "ingest", "--agent", "opencode", str(db))
    assert done.exit_code == 0, done.output
    assert (
        "ingested 2 opencode sessions into 2 threads: 12 new messages, 1 compaction" in done.output
    )
    again = run("--store", str(store), "ingest", "--agent", "opencode", "--session", ROOT, str(db))
    assert again.exit_code == 0, again.output
    assert "0 new messages" in again.output
    assert Store(store).thread(f"oc-{ROOT}").exists()


def test_ingest_reads_opencode_s_data_folder_by_default(tmp_path: Path, home: Path) -> None:
    data = home / ".local" / "share" / "opencode"
    data.mkdir(parents=True)
    shutil.copyfile(DB, data / "opencode.db")
    done = run("--store", str(tmp_path / "store"), "ingest", "--agent", "opencode")
    assert done.exit_code == 0, done.output
    assert "12 new messages" in done.output


def test_ingest_errors_are_one_line_and_a_failure(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    nothing = run("--store", store, "ingest", "--agent", "opencode")
    assert nothing.exit_code == 1 and "no opencode data found" in nothing.output
    notes = tmp_path / "notes.txt"
    notes.write_text("hello")
    bad = run("--store", store, "ingest", "--agent", "opencode", str(notes))
    assert bad.exit_code == 1 and "not an opencode database" in bad.output
    missing = run("--store", store, "ingest", "--agent", "opencode", "--session", "ses_x", str(DB))
    assert missing.exit_code == 1 and "no opencode session 'ses_x'" in missing.output
    claude = run("--store", store, "ingest", "--session", "ses_x", str(notes))
    assert claude.exit_code != 0 and "--session goes with --agent opencode" in claude.output


@pytest.mark.slow
def test_install_writes_the_plugin_and_the_server_and_uninstall_gives_the_bytes_back(
    home: Path, tmp_path: Path
) -> None:
    config = home / ".config" / "opencode" / "opencode.json"
    config.parent.mkdir(parents=True)
    config.write_text(USER_CONFIG)
    store = tmp_path / "store"
    dry = run("--store", str(store), "install", "opencode", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "plugins/continuity.js (new)" in dry.output and '"continuity"' in dry.output
    assert config.read_text() == USER_CONFIG and not (config.parent / "plugins").exists()

    done = run("--store", str(store), "install", "opencode")
    assert done.exit_code == 0, done.output
    plugin = config.parent / "plugins" / "continuity.js"
    text = plugin.read_text()
    assert MARKER in text and f'const STORE = /*STORE*/ "{store}" /*END*/' in text
    data = json.loads(config.read_text())
    assert data["theme"] == "tokyonight" and "docs" in data["mcp"]
    entry = data["mcp"]["continuity"]
    assert entry["type"] == "local" and entry["command"][-3:] == ["mcp", "--store", str(store)]
    assert run("--store", str(store), "install", "opencode").exit_code == 0  # idempotent
    assert plugin.read_text() == text

    gone = run("uninstall", "opencode")
    assert gone.exit_code == 0, gone.output
    assert config.read_text() == USER_CONFIG
    assert not plugin.exists() and not plugin.parent.exists()


@pytest.mark.slow
def test_project_scope_and_a_plugin_that_is_not_ours(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / ".opencode" / "plugins").mkdir(parents=True)
    done = run("install", "opencode", "--scope", "project", "--project", str(project))
    assert done.exit_code == 0, done.output
    assert (project / ".opencode" / "plugins" / "continuity.js").is_file()
    assert "continuity" in json.loads((project / "opencode.json").read_text())["mcp"]
    undone = run("uninstall", "opencode", "--scope", "project", "--project", str(project))
    assert undone.exit_code == 0, undone.output
    assert not (project / "opencode.json").exists()
    assert not (project / ".opencode" / "plugins" / "continuity.js").exists()

    theirs = project / ".opencode" / "plugins" / "continuity.js"
    theirs.parent.mkdir(parents=True, exist_ok=True)
    theirs.write_text("export const Mine = async () => ({})\n")
    refused = run("install", "opencode", "--scope", "project", "--project", str(project))
    assert refused.exit_code == 1 and "is not continuity's plugin" in refused.output
    assert theirs.read_text() == "export const Mine = async () => ({})\n"
    assert not (project / "opencode.json").exists()  # nothing written: both plans first
    kept = run("uninstall", "opencode", "--scope", "project", "--project", str(project))
    assert kept.exit_code == 0 and theirs.exists()


def test_a_jsonc_opencode_json_is_refused_untouched(home: Path) -> None:
    config = home / ".config" / "opencode" / "opencode.json"
    config.parent.mkdir(parents=True)
    config.write_text('{\n  // my settings\n  "theme": "x"\n}\n')
    done = run("install", "opencode")
    assert done.exit_code == 1 and "not valid JSON" in done.output
    assert not (config.parent / "plugins").exists()


def test_local_scope_is_refused() -> None:
    done = run("install", "opencode", "--scope", "local")
    assert done.exit_code == 1 and "no local scope" in done.output


def _plugin_hook(home: Path, store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """What the plugin spawns: ``continuity hook <event> --agent opencode --session <id>``, a
    fresh process with opencode's data folder under ``home``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONTINUITY_", "XDG_"))}
    env.update(HOME=str(home), CONTINUITY_HOME=str(store))
    return subprocess.run(
        [sys.executable, "-m", "continuity", "hook", *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


@pytest.mark.slow
def test_the_plugin_hook_archives_its_session_and_never_fails(home: Path, tmp_path: Path) -> None:
    data = home / ".local" / "share" / "opencode"
    data.mkdir(parents=True)
    shutil.copyfile(DB, data / "opencode.db")
    store = tmp_path / "store"
    done = _plugin_hook(home, store, "session.idle", "--agent", "opencode", "--session", ROOT)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    archived = Store(store).thread(f"oc-{ROOT}")
    assert archived.head() is not None
    frames = list(archived.read())
    # Again: nothing new, nothing appended.
    again = _plugin_hook(home, store, "session.idle", "--agent", "opencode", "--session", ROOT)
    assert again.returncode == 0 and list(Store(store).thread(f"oc-{ROOT}").read()) == frames
    # An unknown session is one line on stderr and in errors.log, and still exit 0.
    bad = _plugin_hook(home, store, "session.idle", "--agent", "opencode", "--session", "ses_no")
    assert bad.returncode == 0 and bad.stdout == ""
    assert bad.stderr.count("\n") == 1 and "ses_no" in bad.stderr
    logged = (store / "errors.log").read_text().splitlines()
    assert len(logged) == 1 and "session.idle (opencode)" in logged[0]
