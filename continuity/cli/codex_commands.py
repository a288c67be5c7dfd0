"""``continuity install codex`` and ``uninstall codex`` (the hooks, their trust, the MCP server)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from continuity.cli._common import errors, fail

if TYPE_CHECKING:
    from continuity.agents.codex.install import CodexInstall
    from continuity.paths import StoreLocation

__all__ = ["install_codex", "uninstall_codex"]


def _scope(scope: str) -> str:
    if scope not in ("user", "project"):
        fail("Codex has a user and a project scope (--scope user or --scope project)")
    return scope


def _show(plan: CodexInstall) -> None:
    for p in plan.plans:
        typer.echo(p.diff() or f"{p.path}: nothing to change")


def install_codex(
    scope: str, project: Path | None, store: StoreLocation | None, *, dry_run: bool, no_mcp: bool
) -> None:
    """Codex's hooks (trusted) and, unless ``no_mcp``, its MCP server; nothing when ``dry_run``."""
    from continuity.agents.base.install import apply_plan
    from continuity.agents.codex.install import (
        hooks_disabled,
        plan_codex_install,
        project_trusted,
    )

    where = _scope(scope)
    with errors():
        plan = plan_codex_install(
            "project" if where == "project" else "user", project, store, mcp=not no_mcp
        )
        if dry_run:
            _show(plan)
            return
        backups = [apply_plan(p) for p in plan.plans]
    hooks = plan.hooks
    if not hooks.changed:
        typer.echo(f"{hooks.path}: continuity's Codex hooks already there, nothing changed")
    else:
        typer.echo(f"installed continuity hooks in {hooks.path}")
    config = plan.config
    if config is not None and config.changed:
        what = "the hooks' trust" + ("" if no_mcp else " and the MCP server `continuity`")
        typer.echo(f"wrote {what} in {config.path}")
    for backup in backups:
        if backup is not None:
            typer.echo(f"previous {backup.name.split('.continuity')[0]} saved to {backup}")
    from continuity.agents.base.install import compile_bytecode

    for report in compile_bytecode():  # a hook process then never compiles continuity
        typer.echo(report.line())
    off = hooks_disabled()
    if off is not None:
        typer.echo(f"Codex's hooks are turned off ({off}): set it to true for them to run")
    if where == "project":
        base = hooks.path.parent.parent
        if not project_trusted(base):
            typer.echo(
                f"Codex reads {hooks.path} only in a project it trusts: start `codex` in {base} "
                "once and trust it (or run `codex --trust` there)"
            )


def uninstall_codex(scope: str, project: Path | None, *, dry_run: bool, no_mcp: bool) -> None:
    from continuity.agents.base.install import apply_plan
    from continuity.agents.codex.install import plan_codex_uninstall

    where = _scope(scope)
    with errors():
        plan = plan_codex_uninstall(
            "project" if where == "project" else "user", project, mcp=not no_mcp
        )
        if dry_run:
            _show(plan)
            return
        for p in plan.plans:
            apply_plan(p)
    for p in plan.plans:
        if not p.changed:
            typer.echo(f"{p.path}: nothing of continuity's, nothing changed")
        elif p.after is None:
            typer.echo(f"removed continuity's entries: {p.path} held nothing else and was removed")
        elif p.restores_backup:
            typer.echo(f"removed continuity's entries: {p.path} is as it was before the install")
        else:
            typer.echo(f"removed continuity's entries from {p.path}")
            if p.backup_differs:
                typer.echo(
                    f"{p.path} changed since the install: the file before it is in {p.backup}"
                )
