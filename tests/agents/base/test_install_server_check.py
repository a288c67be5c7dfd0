"""An install never registers an MCP server that cannot start (issue 43): the server command is
run at install (MCP's ``initialize``, a client's first request); when it does not answer, the
agent's hooks are installed, the server is not, and one line says what to add. Here the server
cannot import its own package (a ``sitecustomize`` on the child's path refuses
``continuity.mcp_server``, as a broken or partial install would), whatever the server needs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from continuity.agents.base.mcp import cannot_start

BLOCK = """\
import importlib.abc, sys


class _Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "continuity.mcp_server" or name.startswith("continuity.mcp_server."):
            raise ImportError(f"No module named {name!r} (refused by the test)")
        return None


sys.meta_path.insert(0, _Refuse())
"""


def _env(tmp_path: Path, *, broken: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONTINUITY_", "CODEX_"))}
    env.update(HOME=str(tmp_path / "home"), CODEX_HOME=str(tmp_path / "home" / ".codex"))
    env["CONTINUITY_HOME"] = str(tmp_path / "store")
    if broken:
        site = tmp_path / "site"
        site.mkdir(exist_ok=True)
        (site / "sitecustomize.py").write_text(BLOCK)
        env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
    return env


def _continuity(tmp_path: Path, *args: str, broken: bool) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "continuity", *args],
        env=_env(tmp_path, broken=broken),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_a_server_that_answers_initialize_can_start() -> None:
    assert cannot_start([sys.executable, "-m", "continuity", "mcp"]) is None


def test_a_server_that_fails_is_told_by_its_last_line(tmp_path: Path) -> None:
    script = "import sys; sys.stderr.write('ModuleNotFoundError: no mcp here\\n'); sys.exit(1)"
    assert cannot_start([sys.executable, "-c", script]) == "ModuleNotFoundError: no mcp here"
    assert cannot_start([str(tmp_path / "missing")]) == (
        f"{tmp_path / 'missing'}: No such file or directory"
    )


def test_install_registers_no_server_that_cannot_start(tmp_path: Path) -> None:
    done = _continuity(tmp_path, "install", "codex", broken=True)
    assert done.returncode == 0, done.stderr
    (line,) = [x for x in done.stderr.splitlines() if "MCP server" in x]
    assert line.startswith("`continuity mcp` cannot start here: ")
    assert len(line) > 80  # what the server said when it failed (its last line)
    assert line.endswith(" (the MCP server was not registered)")
    codex = tmp_path / "home" / ".codex"
    assert json.loads((codex / "hooks.json").read_text())["hooks"]  # the hooks are there
    assert "mcp_servers" not in (codex / "config.toml").read_text()

    refused = _continuity(tmp_path, "install", "mcp", "--client", "gemini", broken=True)
    assert refused.returncode == 1
    assert refused.stderr.count("\n") == 1, refused.stderr
    assert refused.stderr.endswith(" (nothing was registered)\n")
    assert not (tmp_path / "home" / ".gemini" / "settings.json").exists()


def test_install_registers_a_server_that_starts(tmp_path: Path) -> None:
    done = _continuity(tmp_path, "install", "codex", broken=False)
    assert done.returncode == 0, done.stderr
    assert "[mcp_servers.continuity]" in (tmp_path / "home" / ".codex" / "config.toml").read_text()
