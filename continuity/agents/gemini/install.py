"""Wiring continuity into Gemini CLI's ``settings.json``, and taking it out again.

One file holds all of it (``~/.gemini/settings.json``, or a project's
``.gemini/settings.json``): our handler in ``hooks`` for SessionStart, BeforeAgent, AfterTool,
AfterAgent, PreCompress and SessionEnd (timeouts in milliseconds), ``hooksConfig.enabled:
true``, and the MCP server ``mcpServers.continuity``. The file is edited as text
(:mod:`continuity.agents.base._json_text`): every other byte stays where it was. The plan is an
:class:`~continuity.agents.claude_code.install.InstallPlan` (dry-run diff, a backup of the settings
from before the install, atomic write), and uninstall gives back the backup's bytes when
nothing else changed, or removes the file install created.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Final, Literal

from continuity.agents.base._json_text import remove_member, set_member
from continuity.agents.base.install import (
    InstallPlan,
    backup_path,
    confine,
    entry_point,
    hook_shell_command,
    read_backup,
    read_text,
)
from continuity.agents.base.mcp import SERVER_NAME, server_argv, server_entry
from continuity.errors import InvalidSettings

__all__ = ["HOOKS", "hook_command", "plan_install", "plan_uninstall", "settings_path"]

Scope = Literal["user", "project"]

HOOKS: Final = (
    ("SessionStart", 30_000),
    ("BeforeAgent", 30_000),
    ("AfterTool", 30_000),
    ("AfterAgent", 30_000),
    ("PreCompress", 120_000),
    ("SessionEnd", 60_000),
)
"""Gemini CLI's events we handle, with their timeouts (ms): PreCompress archives before the
compression drops anything, so it gets the longest."""
_OURS: Final = re.compile(r"(?:^|[\s/])(?:continuity(?:\.exe)?['\"]?|-m continuity) hook ")
_AGENT: Final = re.compile(r"--agent[ =]gemini\s*$")


def settings_path(scope: Scope, project_dir: Path | None = None, home: Path | None = None) -> Path:
    if scope == "user":
        return (home or Path.home()) / ".gemini" / "settings.json"
    return (project_dir or Path.cwd()).absolute() / ".gemini" / "settings.json"


def hook_command(event: str, store: Path | str | None = None) -> str:
    """The shell command Gemini CLI runs for one of our hooks."""
    return hook_shell_command([*entry_point(), "hook", event, "--agent", "gemini"], store)


def _is_ours(handler: Any) -> bool:
    command = handler.get("command") if isinstance(handler, dict) else None
    return isinstance(command, str) and bool(_OURS.search(command) and _AGENT.search(command))


def _load(path: Path, text: str | None) -> dict[str, Any]:
    if text is None:
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidSettings(f"{path} is not valid JSON ({exc}); it was not changed") from None
    if not isinstance(data, dict):
        raise InvalidSettings(f"{path} does not hold a JSON object; it was not changed")
    for key in ("hooks", "hooksConfig", "mcpServers"):
        if key in data and not isinstance(data[key], dict):
            raise InvalidSettings(f"{path}: '{key}' is not an object; it was not changed")
    for event, groups in data.get("hooks", {}).items():
        if not isinstance(groups, list):
            raise InvalidSettings(f"{path}: hooks.{event} is not a list; it was not changed")
    return data


def _user_groups(data: dict[str, Any], event: str) -> list[Any]:
    """The event's groups without our handlers (a group left empty by that goes)."""
    out: list[Any] = []
    for group in data.get("hooks", {}).get(event, []):
        if isinstance(group, dict) and isinstance(group.get("hooks"), list):
            kept = [h for h in group["hooks"] if not _is_ours(h)]
            if not kept and group["hooks"]:
                continue
            group = {**group, "hooks": kept}
        out.append(group)
    return out


def _holds_ours(data: dict[str, Any]) -> bool:
    hooks = data.get("hooks", {})
    mine = any(_user_groups(data, e) != hooks.get(e, []) for e in hooks)
    return mine or SERVER_NAME in data.get("mcpServers", {})


def _our_group(event: str, timeout: int, store: Path | str | None) -> dict[str, Any]:
    handler = {
        "type": "command",
        "name": "continuity",
        "command": hook_command(event, store),
        "timeout": timeout,
    }
    return {"hooks": [handler]}


def plan_install(
    path: Path,
    store: Path | str | None = None,
    *,
    mcp: bool = True,
    within: Path | None = None,
) -> InstallPlan:
    """``path`` with our hooks (ours replaced if there), ``hooksConfig.enabled`` and, with
    ``mcp``, the MCP server's entry."""
    confine(path, within)
    before = read_text(path)
    backup = backup_path(path)
    read_backup(backup)
    data = _load(path, before)
    text = before if before is not None and before.strip() else "{}\n"
    expected: dict[str, Any] = json.loads(json.dumps(data))
    for event, timeout in HOOKS:
        groups = [*_user_groups(data, event), _our_group(event, timeout, store)]
        text = set_member(text, ["hooks"], event, groups)
        expected.setdefault("hooks", {})[event] = groups
    text = set_member(text, ["hooksConfig"], "enabled", True)
    expected.setdefault("hooksConfig", {})["enabled"] = True
    if mcp:
        entry = server_entry("gemini", server_argv(store))
        text = set_member(text, ["mcpServers"], SERVER_NAME, entry)
        expected.setdefault("mcpServers", {})[SERVER_NAME] = entry
    if json.loads(text) != expected:
        raise InvalidSettings(f"{path}: continuity could not edit this layout; not changed")
    after = before if before is not None and json.loads(before) == expected else text
    save = before is not None and after != before and not _holds_ours(data)
    return InstallPlan(path, before, after, backup, save_backup=save, within=within)


def plan_uninstall(path: Path, *, within: Path | None = None) -> InstallPlan:
    """``path`` without what install added: the backup's bytes when they hold exactly what is
    left, no file when install created it, else the file with only our members taken out."""
    confine(path, within)
    before = read_text(path)
    backup = backup_path(path)
    data = _load(path, before)
    if before is None or not _holds_ours(data):
        return InstallPlan(path, before, before, backup, within=within)
    saved = read_backup(backup)
    try:
        saved_data = json.loads(saved) if saved else None
    except json.JSONDecodeError:
        saved_data = None
    text = before
    for event, _timeout in HOOKS:
        groups = _user_groups(data, event)
        if event not in data.get("hooks", {}):
            continue
        text = (
            set_member(text, ["hooks"], event, groups)
            if groups
            else remove_member(text, ["hooks"], event)
        )
    text = remove_member(text, ["mcpServers"], SERVER_NAME)
    left = json.loads(text)
    for key in ("hooks", "mcpServers"):
        if left.get(key) == {} and not (isinstance(saved_data, dict) and key in saved_data):
            text = remove_member(text, [], key)
    text = _restore_hooks_config(text, saved_data)
    left = json.loads(text)
    if saved is not None and saved_data == left:
        return InstallPlan(path, before, saved, backup, restores_backup=True, within=within)
    if saved is None and left in ({}, {"hooksConfig": {"enabled": True}}):
        return InstallPlan(path, before, None, backup, within=within)
    return InstallPlan(path, before, text, backup, backup_differs=saved is not None, within=within)


def _restore_hooks_config(text: str, saved: Any) -> str:
    """``hooksConfig.enabled`` as the backup had it (left as it is without a backup)."""
    if not isinstance(saved, dict):
        return text
    config = saved.get("hooksConfig")
    if isinstance(config, dict) and "enabled" in config:
        return set_member(text, ["hooksConfig"], "enabled", config["enabled"])
    text = remove_member(text, ["hooksConfig"], "enabled")
    if json.loads(text).get("hooksConfig") == {} and "hooksConfig" not in saved:
        text = remove_member(text, [], "hooksConfig")
    return text
