"""Putting continuity's capture plugin into opencode, registering its MCP server there, and
taking both out again.

opencode loads every ``.js`` file of ``~/.config/opencode/plugins/`` (``$XDG_CONFIG_HOME``
respected) and of a project's ``.opencode/plugins/``. The plugin is written there from the
package's ``plugin/continuity.js`` with the absolute command that runs continuity (and the store,
when one was named) filled in; a file of that name that is not ours is refused, never
overwritten, and uninstall removes the file only when it is ours. The MCP server goes into
``opencode.json`` (``~/.config/opencode/opencode.json``, or the project's ``opencode.json``) as
``mcp.continuity {type: "local", command: [...]}``, edited as text by
:mod:`continuity.agents.base.mcp`: an uninstall after an install gives back the file's
bytes. Every change is an :class:`~continuity.agents.claude_code.install.InstallPlan`, so
``--dry-run`` shows the diffs and nothing is written until both plans are made.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Final, Literal

from continuity.agents.base.install import InstallPlan, backup_path, confine, entry_point, read_text
from continuity.agents.base.mcp import (
    McpTarget,
    mcp_target,
    plan_mcp_install,
    plan_mcp_uninstall,
    server_argv,
    server_entry,
)
from continuity.errors import InvalidSettings

__all__ = [
    "MARKER",
    "PLUGIN_NAME",
    "config_dir",
    "plan_opencode_install",
    "plan_opencode_uninstall",
    "plan_plugin_install",
    "plan_plugin_uninstall",
    "plugin_path",
    "plugin_text",
]

Scope = Literal["user", "project"]
PLUGIN_NAME: Final = "continuity.js"
MARKER: Final = "CONTINUITY-OPENCODE-PLUGIN"


def config_dir(env: Mapping[str, str] | None = None, home: Path | None = None) -> Path:
    """opencode's global config folder: ``$XDG_CONFIG_HOME/opencode`` or ``~/.config/opencode``."""
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME") or ""
    return (Path(base).expanduser() if base else (home or Path.home()) / ".config") / "opencode"


def _project(project_dir: Path | None) -> Path:
    base = (project_dir or Path.cwd()).absolute()
    if not base.is_dir():
        raise InvalidSettings(f"no project folder {base} (--project names an existing folder)")
    return base


def plugin_path(scope: Scope, project_dir: Path | None = None) -> tuple[Path, Path | None]:
    """Where the plugin goes for ``scope``, and the folder writes must stay in (project)."""
    if scope == "project":
        base = _project(project_dir)
        return base / ".opencode" / "plugins" / PLUGIN_NAME, base
    return config_dir() / "plugins" / PLUGIN_NAME, None


def plugin_text(store: str | os.PathLike[str] | None = None) -> str:
    """The plugin with the command that runs continuity (and the store) filled in."""
    template = (
        resources.files("continuity.agents.opencode").joinpath("plugin", PLUGIN_NAME).read_text()
    )
    command = json.dumps(entry_point(), ensure_ascii=False)
    named = json.dumps(os.fspath(store), ensure_ascii=False) if store is not None else "null"
    text = _fill(template, "COMMAND", command)
    return _fill(text, "STORE", named)


def _fill(text: str, slot: str, value: str) -> str:
    start = text.index(f"/*{slot}*/")
    end = text.index("/*END*/", start) + len("/*END*/")
    return f"{text[:start]}/*{slot}*/ {value} /*END*/{text[end:]}"


def _ours(text: str | None) -> bool:
    return text is not None and MARKER in text


def plan_plugin_install(path: Path, text: str, *, within: Path | None = None) -> InstallPlan:
    confine(path, within)
    before = read_text(path, "JavaScript")
    if before is not None and not _ours(before):
        raise InvalidSettings(
            f"{path} exists and is not continuity's plugin; it was not changed (rename it, or "
            "remove it, and install again)"
        )
    return InstallPlan(path, before, text, backup_path(path), within=within)


def plan_plugin_uninstall(path: Path, *, within: Path | None = None) -> InstallPlan:
    confine(path, within)
    before = read_text(path, "JavaScript")
    after = None if _ours(before) else before
    return InstallPlan(path, before, after, backup_path(path), within=within)


def _mcp(scope: Scope, project_dir: Path | None) -> McpTarget:
    # mcp_target knows opencode's files: opencode.json in the config folder or the project
    return mcp_target("opencode", scope, project_dir)


def plan_opencode_install(
    scope: Scope,
    project_dir: Path | None = None,
    store: str | os.PathLike[str] | None = None,
    *,
    mcp: bool = True,
) -> list[InstallPlan]:
    """The plugin's plan and (with ``mcp``) the MCP server's, made before anything is written."""
    path, within = plugin_path(scope, project_dir)
    plans = [plan_plugin_install(path, plugin_text(store), within=within)]
    if mcp:
        plans.append(plan_mcp_install(_mcp(scope, project_dir), _entry(store)))
    return plans


def _entry(store: str | os.PathLike[str] | None) -> dict[str, object]:
    return server_entry("opencode", server_argv(store))


def plan_opencode_uninstall(
    scope: Scope, project_dir: Path | None = None, *, mcp: bool = True
) -> list[InstallPlan]:
    path, within = plugin_path(scope, project_dir)
    plans = [plan_plugin_uninstall(path, within=within)]
    if mcp:
        plans.append(plan_mcp_uninstall(_mcp(scope, project_dir)))
    return plans
