"""``continuity mcp``: the MCP server over stdio (:mod:`continuity.mcp_server`, ADR 0038)."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from continuity.cli._common import errors, need_extra, report_recovery
from continuity.paths import is_postgres_url

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    app.command("mcp")(mcp)


def mcp(
    ctx: typer.Context,
    project: Annotated[
        str | None,
        typer.Option(
            "--project",
            help="The project whose sessions are the default scope (default: "
            "$CLAUDE_PROJECT_DIR, else the working directory).",
            show_default=False,
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            envvar="CONTINUITY_MODEL",
            metavar="PATH|NAME",
            help="Fuse search with this static-embedding model (as `continuity search --model`).",
            show_default=False,
        ),
    ] = None,
    structured: Annotated[
        bool,
        typer.Option(
            "--structured",
            help="Also give each result as data (structuredContent), for programs. Off by "
            "default: some clients (Claude Code) show the model the data in place of the text.",
        ),
    ] = False,
) -> None:
    """The MCP server (stdio) for agents: search, read, sessions, restore, remember.

    An MCP client (Claude Code, Codex, Cursor…) launches it; it reads the store and writes only
    what the agent asks it to remember."""
    try:
        from continuity.mcp_server.server import run_stdio
    except ImportError as exc:
        need_extra("continuity mcp", "mcp", exc)
    from continuity.mcp_server.archive import Archive
    from continuity.store.base import BaseStore
    from continuity.store.locate import open_store

    location = ctx.obj.location
    if is_postgres_url(location):  # the store opens on the first call: say now what it lacks
        from continuity.store.postgres import need_driver

        with errors():
            need_driver()

    def opener() -> BaseStore:
        return open_store(location, on_recovery=report_recovery)

    where = project or os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()
    archive = Archive(opener, where, model=model)
    try:
        run_stdio(archive, structured=structured)
    except KeyboardInterrupt:
        pass
    finally:
        archive.close()
