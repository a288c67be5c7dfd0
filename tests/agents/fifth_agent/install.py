"""Scribe's ``hooks.json``: our commands in, and out again, with the foundation's plans (a dry
run's diff, a backup of the file from before, byte-exact uninstall)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from continuity.agents.base.install import (
    InstallPlan,
    backup_path,
    confine,
    entry_point,
    read_backup,
    read_text,
)
from continuity.errors import InvalidSettings
from continuity.paths import StoreLocation
from tests.agents.fifth_agent.hooks import EVENTS


def hooks_path(scope: str, project: Path | None) -> tuple[Path, Path | None]:
    if scope == "user":
        return Path.home() / ".scribe" / "hooks.json", None
    base = (project or Path.cwd()).absolute()
    return base / ".scribe" / "hooks.json", base


def _command(event: str, store: StoreLocation | None) -> str:
    argv = [*entry_point(), "hook", event, "--agent", "scribe"]
    if store is not None:
        argv += ["--store", str(store)]
    return shlex.join(argv)


def _ours(command: object) -> bool:
    return (isinstance(command, str) and command.endswith(("--agent scribe",))) or (
        isinstance(command, str) and "--agent scribe --store" in command
    )


def _load(path: Path, text: str | None) -> dict[str, Any]:
    if text is None:
        return {}
    data = json.loads(text)
    if not isinstance(data, dict) or not isinstance(data.get("hooks", {}), dict):
        raise InvalidSettings(f"{path} is not Scribe's hooks file; it was not changed")
    return data


def _without_ours(data: dict[str, Any]) -> dict[str, Any]:
    hooks = {k: v for k, v in data.get("hooks", {}).items() if not _ours(v)}
    out = {k: v for k, v in data.items() if k != "hooks"}
    return {**out, "hooks": hooks} if hooks else out


def _dump(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2) + "\n"


def plan_install(scope: str, project: Path | None, store: StoreLocation | None) -> InstallPlan:
    path, within = hooks_path(scope, project)
    confine(path, within)
    before = read_text(path)
    backup = backup_path(path)
    read_backup(backup)
    data = _load(path, before)
    mine = {event: _command(event, store) for event in EVENTS}
    merged = {**data, "hooks": {**data.get("hooks", {}), **mine}}
    after = before if before is not None and merged == data else _dump(merged)
    save = before is not None and _without_ours(data) == data and after != before
    return InstallPlan(path, before, after, backup, save_backup=save, within=within)


def plan_uninstall(scope: str, project: Path | None) -> InstallPlan:
    path, within = hooks_path(scope, project)
    confine(path, within)
    before = read_text(path)
    backup = backup_path(path)
    if before is None:
        return InstallPlan(path, None, None, backup, within=within)
    data = _load(path, before)
    left = _without_ours(data)
    if left == data:
        return InstallPlan(path, before, before, backup, within=within)
    saved = read_backup(backup)
    if saved is not None and json.loads(saved) == left:
        return InstallPlan(path, before, saved, backup, restores_backup=True, within=within)
    if saved is None and not left:
        return InstallPlan(path, before, None, backup, within=within)
    return InstallPlan(path, before, _dump(left), backup, within=within)
