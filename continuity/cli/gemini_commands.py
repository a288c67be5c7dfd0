"""``install gemini``, ``uninstall gemini`` and ``ingest --agent gemini``: Gemini CLI's face
(called from the Claude Code adapter's commands, which own those command names)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

import typer

from continuity.cli._common import count, errors, fail

if TYPE_CHECKING:
    from continuity.store.base import BaseStore

__all__ = ["ingest_gemini", "install_gemini", "uninstall_gemini"]


def _target(scope: str, project: Path | None) -> tuple[Path, Path | None]:
    from continuity.agents.gemini.install import settings_path

    if scope not in ("user", "project"):
        fail("Gemini CLI has a user and a project scope (--scope user|project)")
    if scope == "user":
        return settings_path("user"), None
    base = (project or Path.cwd()).absolute()
    if not base.is_dir():
        fail(f"no project folder {base} (--project names an existing folder)")
    return settings_path("project", base), base


def install_gemini(
    scope: Literal["user", "project", "local"],
    project: Path | None,
    store: Path | str | None,
    *,
    dry_run: bool,
    mcp: bool,
) -> None:
    from continuity.agents.base.install import apply_plan
    from continuity.agents.gemini.install import plan_install

    path, within = _target(scope, project)
    with errors():
        plan = plan_install(path, store, mcp=mcp, within=within)
        if dry_run:
            typer.echo(plan.diff() or f"{path}: already installed, nothing to change")
            return
        backup = apply_plan(plan)
    if not plan.changed:
        typer.echo(f"{path}: already installed, nothing changed")
        return
    what = "hooks and MCP server" if mcp else "hooks"
    typer.echo(f"installed continuity's {what} for Gemini CLI in {path}")
    if backup is not None:
        typer.echo(f"the settings from before the install are kept in {backup}")


def uninstall_gemini(
    scope: Literal["user", "project", "local"], project: Path | None, *, dry_run: bool
) -> None:
    from continuity.agents.base.install import apply_plan
    from continuity.agents.gemini.install import plan_uninstall

    path, within = _target(scope, project)
    with errors():
        plan = plan_uninstall(path, within=within)
        if dry_run:
            typer.echo(plan.diff() or f"{path}: nothing of continuity's, nothing to change")
            return
        apply_plan(plan)
    if not plan.changed:
        typer.echo(f"{path}: nothing of continuity's, nothing changed")
    elif plan.restores_backup or plan.after is None:
        typer.echo(f"removed continuity from {path}: it is as it was before the install")
    else:
        typer.echo(f"removed continuity's hooks and MCP server from {path}")


def ingest_gemini(store: BaseStore, paths: list[Path]) -> None:
    from continuity.agents.gemini.ingest import ingest_paths, session_files

    files = session_files(paths)
    if not files:
        fail(f"no Gemini CLI session files under {', '.join(map(str, paths))}")
    failed = 0
    messages = 0
    with errors():
        for path in files:
            try:
                report = ingest_paths(store, [path], final=True)[0]
            except (OSError, ValueError) as exc:
                typer.echo(f"skipped {path}: {exc}", err=True)
                failed += 1
                continue
            messages += report.messages
    typer.echo(
        f"ingested {count(len(files) - failed, 'Gemini CLI session')}: "
        f"{count(messages, 'new message')}"
    )
    if failed:
        fail(f"{count(failed, 'session file')} could not be ingested (named above)")
