"""``continuity mcp``: the MCP server over stdio (:mod:`continuity.mcp_server`, ADRs 0038 and
0053); a plain command line is served before typer (:mod:`.fast_mcp`)."""

from __future__ import annotations

from typing import Annotated

import typer

from continuity.cli._common import errors
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
    from continuity.cli.fast_mcp import serve

    location = ctx.obj.location
    if is_postgres_url(location):  # the store opens on the first call: say now what it lacks
        from continuity.store.postgres import need_driver

        with errors():
            need_driver()
    serve(location, project, model, structured)
