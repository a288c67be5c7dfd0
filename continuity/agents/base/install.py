"""An agent's install, written once: a change to a settings file computed before anything is
written (``--dry-run`` prints it), a backup of the file as it was before continuity went in,
uninstall that gives those bytes back exactly (or removes the file install created), and the
bytecode a hook process loads compiled ahead of time.

Every write is atomic (temp file + rename) and none goes through a link the user did not make:
a backup path that is a link is refused, and a project's settings that a link leads out of the
project are refused (ADR 0013). A file that is not UTF-8 or not a regular file is refused
untouched. The hook command is absolute (the installed entry point or the interpreter running
this), so it works whatever directory and PATH the agent runs hooks with. Each agent's
``install`` module says which files it changes and how; :mod:`continuity.agents.base.mcp`
registers the MCP server the same way.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import shlex
import shutil
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from continuity._fs import atomic_write, fsync_dir
from continuity.errors import InvalidSettings

__all__ = [
    "BACKUP_SUFFIX",
    "HOOK_PACKAGES",
    "BytecodeReport",
    "InstallPlan",
    "apply_plan",
    "backup_path",
    "compile_bytecode",
    "confine",
    "entry_point",
    "hook_shell_command",
    "read_backup",
    "read_text",
    "strip_handlers",
]

BACKUP_SUFFIX: Final = ".continuity-backup"


def backup_path(path: Path) -> Path:
    """Where the settings from before our hooks went in are kept: beside ``path`` (beside the
    link, when the settings file is one)."""
    return path.with_name(path.name + BACKUP_SUFFIX)


def entry_point() -> list[str]:
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


def hook_shell_command(argv: list[str], store: Path | str | None = None) -> str:
    """The shell line an agent runs for a hook: ``argv`` quoted, ``CONTINUITY_HOME`` set first
    when a store is given, and on POSIX through ``exec``.

    The agents run a hook as ``/bin/sh -c LINE``, and dash (Debian's ``sh``) forks for the
    command instead of becoming it: a shell stays waiting above the hook. When Claude Code
    exits it ends its background (``async``) hooks by signalling the shell's process group and
    waits until no process of the group is left; the shell and the hook die together, and the
    orphaned hook stays a zombie in the group until something reaps it: Claude Code's exit
    waited 1.3-1.8 s for it after every ``claude -p`` with a tool call (issue 43). With
    ``exec`` the hook is the agent's own child, reaped at once; one fork less for every hook
    of every agent. Windows shells do not all know ``exec``: the line stays plain there."""
    prefix = f"CONTINUITY_HOME={shlex.quote(str(store))} " if store is not None else ""
    run = "" if os.name == "nt" else "exec "
    return prefix + run + " ".join(shlex.quote(p) for p in argv)


def read_text(path: Path, kind: str = "JSON") -> str | None:
    """The settings file's text, or None when there is none. Only a regular file is read: a
    FIFO or device planted at the path would hang or feed the install. ``kind`` names the
    format in the message about a file that is not UTF-8."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        raise InvalidSettings(f"{path} is not a regular file; it was not changed")
    try:
        return path.read_bytes().decode("utf-8")  # as it is: no newline translation
    except UnicodeDecodeError as exc:
        raise InvalidSettings(f"{path} is not valid {kind} ({exc}); it was not changed") from None


def strip_handlers(data: dict[str, Any], is_ours: Callable[[Any], bool]) -> dict[str, Any]:
    """``data`` without the handlers ``is_ours`` tells are ours, and without the groups or
    events they leave empty: Claude Code's hook shape, which Codex's ``hooks.json`` shares."""
    out: dict[str, Any] = json.loads(json.dumps(data))
    hooks = out.get("hooks")
    if not isinstance(hooks, dict):
        return out
    for event in list(hooks):
        groups = []
        for group in hooks[event]:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                kept = [h for h in group["hooks"] if not is_ours(h)]
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
    """One change to a settings file, computed before anything is written (``--dry-run``
    prints it; :func:`apply_plan` makes it)."""

    path: Path
    before: str | None
    after: str | None
    """None: the file is to be removed (nothing of the user's would be left in it)."""
    backup: Path
    """Where the settings from before our hooks went in are kept (:func:`backup_path`)."""
    save_backup: bool = False
    """Write ``before`` to the backup first: the hooks go into settings that hold none of ours."""
    restores_backup: bool = False
    """``after`` is the backup's text, so the backup is removed once it is written."""
    backup_differs: bool = False
    """Uninstall: a backup exists but is not restored (the settings changed since the install)."""
    drops_backup: bool = False
    """Uninstall: the backup is removed once ``after`` is written (only our entry was taken
    out, by an edit checked to change nothing else: an uninstall leaves nothing of ours)."""
    within: Path | None = None
    """The folder every write must stay in (project and local scopes), or None (user scope)."""
    keep_folder: bool = False
    """Never remove the file's folder with it (a project's root, the home folder)."""

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self) -> str:
        a = (self.before or "").splitlines(keepends=True)
        b = (self.after or "").splitlines(keepends=True)
        new = f"{self.path} (new)" if self.after is not None else f"{self.path} (removed)"
        return "".join(difflib.unified_diff(a, b, f"{self.path} (now)", new))


def confine(path: Path, within: Path | None) -> None:
    """Refuse a settings path that a link leads out of ``within``: in an untrusted repository,
    ``.claude`` or ``.claude/settings.json`` may point at the user's own settings (ADR 0013)."""
    if within is None:
        return
    real = path.resolve()
    root = within.resolve()
    if not real.is_relative_to(root):
        raise InvalidSettings(
            f"{path} is a symbolic link (or in a linked folder) that leads out of the project, "
            f"to {real}; continuity does not write through it, and nothing was changed"
        )


def read_backup(backup: Path) -> str | None:
    """The backup's text ("" when it is not UTF-8), or None when there is none. Anything but a
    regular file there (a link, a folder) is refused: install never follows a link it did not
    create (ADR 0013)."""
    try:
        st = backup.lstat()
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        kind = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a regular file"
        raise InvalidSettings(
            f"{backup} is {kind}, not a backup continuity wrote; it was not followed and "
            "nothing was changed (remove it and run the command again)"
        )
    fd = os.open(backup, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        raw = f.read()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return ""


def apply_plan(plan: InstallPlan) -> Path | None:
    """Make the plan (the backup first); return the backup's path if one was written."""
    if not plan.changed:
        return None
    confine(plan.path, plan.within)  # nothing moved since the plan was made
    if plan.after is None:
        plan.path.unlink(missing_ok=True)
        fsync_dir(plan.path.parent)
        # The folder too when the file was all that was in it (install made both).
        if not plan.keep_folder:
            with contextlib.suppress(OSError):
                plan.path.parent.rmdir()
        return None
    # A settings file kept in a dotfiles repository is often a symlink: write its target, so
    # the rename does not replace the link with a plain file.
    target = plan.path.resolve() if plan.path.is_symlink() else plan.path
    target.parent.mkdir(parents=True, exist_ok=True)
    written = None
    if plan.save_backup and plan.before is not None:
        read_backup(plan.backup)  # refuse a link planted since the plan
        # A temp file renamed over the backup: a link there is replaced, never followed.
        atomic_write(plan.backup, plan.before.encode("utf-8"), durable=True)
        written = plan.backup
    atomic_write(target, plan.after.encode("utf-8"), durable=True, keep_mode=True)
    if plan.restores_backup or plan.drops_backup:
        plan.backup.unlink(missing_ok=True)
        fsync_dir(plan.backup.parent)
    return written


HOOK_PACKAGES: Final = ("continuity", "msgspec", "blake3")
"""The packages a hook process imports from (the standard library ships compiled)."""


@dataclass(frozen=True, slots=True)
class BytecodeReport:
    """What :func:`compile_bytecode` did for one package folder."""

    package: str
    folder: Path
    sources: int
    """Its ``.py`` files."""
    compiled: int
    """How many of them it compiled now (the others were current or could not be written)."""
    missing: int
    """How many still have no current bytecode (the folder is not writable)."""

    def line(self) -> str:
        where = f"{self.package} ({self.folder})"
        if not self.missing:
            noun = "module" if self.sources == 1 else "modules"
            return (
                f"bytecode: {self.sources} {noun} of {where} compiled "
                f"({self.compiled} now, {self.sources - self.compiled} current already)"
            )
        return (
            f"bytecode: {self.missing} of {self.sources} modules of {where} could not be "
            "compiled (the folder is not writable): a hook compiles them again each time it "
            "starts. Make the folder writable and install again, or set PYTHONPYCACHEPREFIX "
            "to a writable folder both here and where Claude Code runs hooks, and install again"
        )


def _current(source: Path) -> bool:
    """Whether the bytecode Python would load for ``source`` is there and matches it (the
    timestamp-based check the import system makes)."""
    import importlib.util

    try:
        with open(importlib.util.cache_from_source(str(source)), "rb") as f:
            head = f.read(16)
        st = source.stat()
    except (OSError, ValueError):
        return False
    return (
        len(head) == 16
        and head[:4] == importlib.util.MAGIC_NUMBER
        and int.from_bytes(head[4:8], "little") == 0  # timestamp-based
        and int.from_bytes(head[8:12], "little") == int(st.st_mtime) & 0xFFFFFFFF
        and int.from_bytes(head[12:16], "little") == st.st_size & 0xFFFFFFFF
    )


def compile_bytecode(packages: tuple[str, ...] = HOOK_PACKAGES) -> list[BytecodeReport]:
    """Compile the bytecode of ``packages`` where this interpreter will look for it
    (``__pycache__`` beside the sources, or under ``PYTHONPYCACHEPREFIX``), so that a hook
    process does not compile them on every start when Python may not write ``.pyc`` files
    itself (``PYTHONDONTWRITEBYTECODE``, a read-only install). Only stale or missing files
    are written; a package that is not installed, or is not a folder of sources, is skipped."""
    import compileall
    import importlib.util

    reports: list[BytecodeReport] = []
    for name in packages:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is None or not spec.submodule_search_locations:
            continue
        for location in spec.submodule_search_locations:
            folder = Path(location)
            sources = sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)
            if not sources:
                continue
            stale = [p for p in sources if not _current(p)]
            for source in stale:
                with contextlib.suppress(OSError):
                    compileall.compile_file(source, quiet=2, force=True)  # it is stale
            missing = sum(1 for p in stale if not _current(p))
            reports.append(
                BytecodeReport(name, folder, len(sources), len(stale) - missing, missing)
            )
    return reports
