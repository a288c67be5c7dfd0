"""The opencode adapter's share of ``continuity ingest``, ``install`` and ``uninstall``.

Called from :mod:`continuity.cli.claude_code_commands` when the command names opencode
(``ingest --agent opencode``, ``install opencode``, ``uninstall opencode``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

import typer

from continuity.cli._common import count, errors, fail, open_store

if TYPE_CHECKING:
    from continuity.paths import StoreLocation

__all__ = ["ingest_opencode", "install_opencode", "uninstall_opencode"]


def ingest_opencode(ctx: typer.Context, paths: list[Path], session: str | None) -> None:
    """Ingest opencode's sessions from ``paths`` (default: its data folder). With ``session``
    (what the plugin runs at each event), only that session, and an unfinished last message
    is left for a later run; without, every session, each taken as it is now."""
    from continuity.agents.opencode.ingest import IngestReport, ingest_session, ingest_source
    from continuity.agents.opencode.source import default_sources, open_source

    sources = paths or default_sources()
    if not sources:
        fail("no opencode data found (opencode.db or storage/ under ~/.local/share/opencode)")
    store = open_store(ctx, create=True)
    total = IngestReport("")
    found = False
    for path in sources:
        with errors(f" (in {path})"):
            src = open_source(path)
            if session is None:
                total.add(ingest_source(store, src, final=True))
                found = True
            elif src.session(session) is not None:
                total.add(ingest_session(store, src, session, final=False))
                found = True
                break
    if not found:
        fail(f"no opencode session {session!r} in {', '.join(str(p) for p in sources)}")
    typer.echo(
        f"ingested {count(total.sessions, 'opencode session')} into "
        f"{count(len(total.threads), 'thread')}: {count(total.messages, 'new message')}, "
        f"{count(total.checkpoints, 'compaction')}, {total.duplicates} already archived"
        + (f", {total.unchanged} unchanged" if total.unchanged else "")
        + (
            f", {total.held_back} with an unfinished message left for later"
            if total.held_back
            else ""
        )
    )


def _report(plans: list[object], verb: str) -> None:
    from continuity.agents.base.install import InstallPlan

    for plan in plans:
        assert isinstance(plan, InstallPlan)
        if not plan.changed:
            typer.echo(f"{plan.path}: unchanged")
        elif plan.after is None:
            typer.echo(f"{plan.path}: removed")
        else:
            typer.echo(f"{plan.path}: {verb}")


def install_opencode(
    scope: Literal["user", "project", "local"],
    project: Path | None,
    store: StoreLocation | None,
    *,
    dry_run: bool,
    mcp: bool,
) -> None:
    from continuity.agents.base.install import apply_plan
    from continuity.agents.opencode.install import plan_opencode_install

    if scope == "local":
        fail("opencode has no local scope (use user or project)")
    with errors():
        plans = plan_opencode_install(scope, project, store, mcp=mcp)
        if dry_run:
            for plan in plans:
                typer.echo(plan.diff() or f"{plan.path}: already installed, nothing to change")
            return
        for plan in plans:
            apply_plan(plan)
    _report(list(plans), "continuity's plugin and MCP server entry written")
    typer.echo("opencode loads the plugin and the MCP server when it next starts")


def uninstall_opencode(
    scope: Literal["user", "project", "local"], project: Path | None, *, dry_run: bool, mcp: bool
) -> None:
    from continuity.agents.base.install import apply_plan
    from continuity.agents.opencode.install import plan_opencode_uninstall

    if scope == "local":
        fail("opencode has no local scope (use user or project)")
    with errors():
        plans = plan_opencode_uninstall(scope, project, mcp=mcp)
        if dry_run:
            for plan in plans:
                typer.echo(
                    plan.diff() or f"{plan.path}: nothing of continuity's, nothing to change"
                )
            return
        for plan in plans:
            apply_plan(plan)
    _report(list(plans), "continuity's entry removed")
