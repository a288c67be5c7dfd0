"""Wiring continuity's hooks into Claude Code's settings, and taking them out again.

The merge is idempotent and keeps every other hook and setting; the file is written atomically
(temp file + rename) after a backup of the settings as they were before our hooks went in, and
uninstall gives those back exactly (or removes the file install created). A file that is not a
JSON object is refused untouched. Nothing is written through a link that was not made by the
user: a backup path that is a link is refused, and a project's settings that a link leads out
of the project are refused (ADR 0013). The hook command is absolute (the installed entry point
or the interpreter running this), so it works whatever directory and PATH Claude Code runs
hooks with.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, Literal

from continuity.agents.base.install import (
    InstallPlan,
    backup_path,
    confine,
    entry_point,
    hook_shell_command,
    read_backup,
    read_text,
    strip_handlers,
)
from continuity.errors import InvalidSettings

__all__ = [
    "ASYNC_EVENTS",
    "HOOKS",
    "hook_command",
    "hook_groups",
    "plan_install",
    "plan_uninstall",
    "project_folder",
    "settings_path",
    "strip_ours",
]

Scope = Literal["user", "project", "local"]


# (Claude Code event, our event slug, matcher or None, timeout in seconds)
HOOKS: Final = (
    ("SessionStart", "session-start", "startup|resume|clear|compact", 30),
    ("UserPromptSubmit", "user-prompt-submit", None, 30),
    ("PostToolUse", "post-tool-use", "*", 30),
    ("PreCompact", "pre-compact", "manual|auto", 120),
    ("Stop", "stop", None, 30),
    ("SubagentStop", "subagent-stop", None, 30),
    ("SessionEnd", "session-end", None, 60),
)
ASYNC_EVENTS: Final = frozenset({"PostToolUse", "Stop", "SubagentStop"})
"""Events whose hooks only archive: installed with ``"async": true``, so Claude Code runs them
in the background and no tool call or turn waits for them (ADR 0038). The others stay
synchronous: SessionStart and UserPromptSubmit put context in, PreCompact must archive before
the compaction drops anything, SessionEnd runs as the session closes."""
_OURS: Final = re.compile(
    r"(?:^|[\s/])continuity(?:\.exe)?['\"]?\s+hook\s+[a-z-]+\s*$|-m continuity hook "
)


def _project_base(project_dir: Path | None) -> Path:
    return (project_dir or Path(os.environ.get("CLAUDE_PROJECT_DIR") or Path.cwd())).absolute()


def settings_path(scope: Scope, project_dir: Path | None = None, home: Path | None = None) -> Path:
    if scope == "user":
        return (home or Path.home()) / ".claude" / "settings.json"
    name = "settings.json" if scope == "project" else "settings.local.json"
    return _project_base(project_dir) / ".claude" / name


def project_folder(scope: Scope, project_dir: Path | None = None) -> Path | None:
    """The folder a project or local install writes in (None for the user scope). It must
    exist: a mistyped ``--project`` must not create a tree of folders."""
    if scope == "user":
        return None
    base = _project_base(project_dir)
    if not base.exists():
        raise FileNotFoundError(f"no project folder {base} (--project names an existing folder)")
    if not base.is_dir():
        raise NotADirectoryError(f"{base} is not a folder (--project names the project's folder)")
    return base


def hook_command(slug: str, store: Path | str | None = None) -> str:
    """The shell command Claude Code runs for one of our hooks."""
    return hook_shell_command([*entry_point(), "hook", slug], store)


def hook_groups(command: Callable[[str], str]) -> dict[str, list[dict[str, Any]]]:
    """Our matcher groups by Claude Code event, ``command(slug)`` running each: what
    ``install claude-code`` merges into the settings and the plugin's ``hooks/hooks.json``
    holds (``tools/gen_plugin.py``), so both stay one thing."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for event, slug, matcher, timeout in HOOKS:
        handler: dict[str, Any] = {"type": "command", "command": command(slug), "timeout": timeout}
        if event in ASYNC_EVENTS:
            handler["async"] = True
        group: dict[str, Any] = {} if matcher is None else {"matcher": matcher}
        group["hooks"] = [handler]
        groups.setdefault(event, []).append(group)
    return groups


def _is_ours(handler: Any) -> bool:
    return (
        isinstance(handler, dict)
        and isinstance(handler.get("command"), str)
        and bool(_OURS.search(handler["command"]))
    )


def _load(path: Path) -> dict[str, Any]:
    text = read_text(path)
    if text is None:
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidSettings(f"{path} is not valid JSON ({exc}); it was not changed") from None
    if not isinstance(data, dict):
        raise InvalidSettings(f"{path} does not hold a JSON object; it was not changed")
    settings: dict[str, Any] = data
    hooks = settings.get("hooks", {})
    if not isinstance(hooks, dict):
        raise InvalidSettings(f"{path}: 'hooks' is not an object; it was not changed")
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            raise InvalidSettings(f"{path}: hooks.{event} is not a list; it was not changed")
    return settings


def strip_ours(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` without our Claude Code handlers (:func:`continuity.agents.base.install.strip_ours`
    with Claude Code's test of a handler)."""
    return strip_handlers(data, _is_ours)


def _dump(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def _holds(text: str, data: dict[str, Any]) -> bool:
    """Whether the settings ``text`` are ``data`` (whatever their layout)."""
    try:
        return bool(json.loads(text) == data)
    except json.JSONDecodeError:
        return False


def plan_install(
    path: Path, store: Path | str | None = None, *, within: Path | None = None
) -> InstallPlan:
    """The settings file with our handlers merged in (ours replaced if already there).

    The backup keeps the settings from before our hooks went in: the first install writes it;
    a re-install (the file then holds ours) keeps it; an install into settings that hold none
    of ours (after an uninstall) writes it afresh.
    """
    confine(path, within)
    before = read_text(path)
    backup = backup_path(path)
    read_backup(backup)  # a link planted there is refused before anything is written
    original = _load(path)
    data = strip_ours(original)
    hooks = data.setdefault("hooks", {})
    for event, groups in hook_groups(lambda slug: hook_command(slug, store)).items():
        hooks.setdefault(event, []).extend(groups)
    after = _dump(data)
    if before is not None and original == json.loads(after):
        after = before  # already installed exactly like this: leave the bytes alone
    save = before is not None and after != before and strip_ours(original) == original
    return InstallPlan(path, before, after, backup, save_backup=save, within=within)


def plan_uninstall(path: Path, *, within: Path | None = None) -> InstallPlan:
    """The settings file without our handlers: the backup's bytes when it holds exactly what is
    left (then it is removed), no file at all when install created it and nothing of the user's
    is left, else what is left."""
    confine(path, within)
    before = read_text(path)
    backup = backup_path(path)
    if before is None:
        return InstallPlan(path, None, None, backup, within=within)
    original = _load(path)
    data = strip_ours(original)
    if data == original:
        return InstallPlan(path, before, before, backup, within=within)
    saved = read_backup(backup)
    if saved is not None and _holds(saved, data):
        return InstallPlan(path, before, saved, backup, restores_backup=True, within=within)
    if saved is None and not data and not path.is_symlink():
        return InstallPlan(path, before, None, backup, within=within)
    differs = saved is not None
    return InstallPlan(path, before, _dump(data), backup, backup_differs=differs, within=within)
