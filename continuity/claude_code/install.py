"""Wiring continuity's hooks into Claude Code's settings, and taking them out again.

The merge is idempotent and keeps every other hook and setting; the file is written atomically
(temp file + rename) after a backup of the previous version; a file that is not a JSON object is
refused untouched. The hook command is absolute (the installed entry point or the interpreter
running this), so it works whatever directory and PATH Claude Code runs hooks with.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from continuity._fs import atomic_write
from continuity.errors import InvalidSettings

__all__ = [
    "HOOKS",
    "InstallPlan",
    "apply_plan",
    "hook_command",
    "plan_install",
    "plan_uninstall",
    "settings_path",
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
_OURS: Final = re.compile(
    r"(?:^|[\s/])continuity(?:\.exe)?['\"]?\s+hook\s+[a-z-]+\s*$|-m continuity hook "
)


def settings_path(scope: Scope, project_dir: Path | None = None, home: Path | None = None) -> Path:
    if scope == "user":
        return (home or Path.home()) / ".claude" / "settings.json"
    base = project_dir or Path(os.environ.get("CLAUDE_PROJECT_DIR") or Path.cwd())
    name = "settings.json" if scope == "project" else "settings.local.json"
    return base.absolute() / ".claude" / name


def _entry_point() -> list[str]:
    """The absolute command that runs continuity."""
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if argv0 is not None and argv0.name in ("continuity", "continuity.exe"):
        found = argv0 if argv0.is_absolute() else shutil.which(str(argv0))
        if found:
            return [str(Path(found).absolute())]
    beside = Path(sys.executable).parent / "continuity"
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside)]
    return [str(Path(sys.executable).absolute()), "-m", "continuity"]


def hook_command(slug: str, store: Path | None = None) -> str:
    """The shell command Claude Code runs for one of our hooks."""
    prefix = f"CONTINUITY_HOME={shlex.quote(str(store))} " if store is not None else ""
    return prefix + " ".join(shlex.quote(p) for p in [*_entry_point(), "hook", slug])


def _is_ours(handler: Any) -> bool:
    return (
        isinstance(handler, dict)
        and isinstance(handler.get("command"), str)
        and bool(_OURS.search(handler["command"]))
    )


def _read(path: Path) -> str | None:
    """The settings file's text, or None when there is none."""
    if not path.exists():
        return None
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidSettings(f"{path} is not valid JSON ({exc}); it was not changed") from None


def _load(path: Path) -> dict[str, Any]:
    text = _read(path)
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


def _strip_ours(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` without our handlers (and without groups or events they leave empty)."""
    out: dict[str, Any] = json.loads(json.dumps(data))
    hooks = out.get("hooks")
    if not isinstance(hooks, dict):
        return out
    for event in list(hooks):
        groups = []
        for group in hooks[event]:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                kept = [h for h in group["hooks"] if not _is_ours(h)]
                if not kept and len(kept) != len(group["hooks"]):
                    continue
                group = {**group, "hooks": kept}
            groups.append(group)
        if groups:
            hooks[event] = groups
        else:
            del hooks[event]
    if not hooks:
        del out["hooks"]
    return out


@dataclass(frozen=True, slots=True)
class InstallPlan:
    path: Path
    before: str | None
    after: str | None
    """None: the file is to be removed (nothing of the user's would be left in it)."""

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self) -> str:
        a = (self.before or "").splitlines(keepends=True)
        b = (self.after or "").splitlines(keepends=True)
        return "".join(difflib.unified_diff(a, b, f"{self.path} (now)", f"{self.path} (new)"))


def _dump(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def plan_install(path: Path, store: Path | None = None) -> InstallPlan:
    """The settings file with our handlers merged in (ours replaced if already there)."""
    before = _read(path)
    data = _strip_ours(_load(path))
    hooks = data.setdefault("hooks", {})
    for event, slug, matcher, timeout in HOOKS:
        group: dict[str, Any] = {} if matcher is None else {"matcher": matcher}
        group["hooks"] = [
            {"type": "command", "command": hook_command(slug, store), "timeout": timeout}
        ]
        hooks.setdefault(event, []).append(group)
    after = _dump(data)
    if before is not None and _load(path) == json.loads(after):
        after = before  # already installed exactly like this: leave the bytes alone
    return InstallPlan(path, before, after)


def plan_uninstall(path: Path) -> InstallPlan:
    before = _read(path)
    if before is None:
        return InstallPlan(path, None, None)
    original = _load(path)
    data = _strip_ours(original)
    after = before if data == original else _dump(data)
    return InstallPlan(path, before, after)


def apply_plan(plan: InstallPlan) -> Path | None:
    """Write the plan (backup first); return the backup's path, if one was made."""
    if not plan.changed or plan.after is None:
        return None
    # A settings file kept in a dotfiles repository is often a symlink: write its target, so
    # the rename does not replace the link with a plain file.
    target = plan.path.resolve() if plan.path.is_symlink() else plan.path
    target.parent.mkdir(parents=True, exist_ok=True)
    backup = None
    if plan.before is not None:
        backup = plan.path.with_name(plan.path.name + ".continuity-backup")
        atomic_write(backup, plan.before.encode("utf-8"), durable=True)
    atomic_write(target, plan.after.encode("utf-8"), durable=True, keep_mode=True)
    return backup
