"""``continuity mcp`` before typer: an MCP client waits for the server's first answer, and
typer, click and the command tree are 50–70 ms of a fresh process that serve no request
(ADR 0053).

``__main__`` hands a command line whose command is ``mcp`` to :func:`fast_mcp` first. It runs
only the exact forms it knows — ``--store`` before or after the command, ``--project``,
``--model``, ``--structured`` — and returns None for anything else (help, an unknown or repeated
option, a PostgreSQL store, whose driver the typer command checks first), so the typer command
(:mod:`.mcp_commands`) runs instead and owns every message and exit code. Both serve through
:func:`serve`.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from continuity.mcp_server.archive import Archive
    from continuity.paths import StoreLocation
    from continuity.store.base import BaseStore

__all__ = ["fast_mcp", "parse", "serve"]

_VALUED = {"--store": "store", "--project": "project", "--model": "model"}


def parse(argv: list[str]) -> dict[str, str | bool] | None:
    """The options of a plain ``mcp`` command line (without the program name), or None when it
    is not one."""
    seen: dict[str, str | bool] = {}
    i = 0
    if argv[:1] == ["--store"] and len(argv) > 1:
        seen["store"] = argv[1]
        i = 2
    elif argv and argv[0].startswith("--store="):
        seen["store"] = argv[0].removeprefix("--store=")
        i = 1
    if argv[i : i + 1] != ["mcp"]:
        return None
    rest = iter(argv[i + 1 :])
    for arg in rest:
        name, eq, value = arg.partition("=")
        if arg == "--structured" and "structured" not in seen:
            seen["structured"] = True
            continue
        key = _VALUED.get(name)
        if key is None or (key in seen and key != "store"):
            return None
        if not eq:
            given = next(rest, None)
            if given is None:
                return None
            value = given
        seen[key] = value
    return seen


def serve(
    location: StoreLocation, project: str | None, model: str | None, structured: bool
) -> None:
    """Serve the store at ``location`` over stdio, from ``project`` (default
    ``$CLAUDE_PROJECT_DIR``, else the working directory), until the client closes stdin."""
    from continuity.mcp_server.server import run_stdio

    blocked: object = sys.modules.get("typing_extensions", sys)
    if blocked is None:
        # msgspec is in without it (__main__ kept it out); what loads in the background (a
        # model's runtime) may need it
        del sys.modules["typing_extensions"]
    where = project or os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()

    def open_archive() -> Archive:
        # Called in the server's background thread once `initialize` is answered: the store
        # itself opens on the first use (a missing store is then each call's error).
        from continuity.cli._display import recovery_line
        from continuity.mcp_server.archive import Archive
        from continuity.store.locate import open_store

        def opener() -> BaseStore:
            return open_store(
                location, on_recovery=lambda rec: print(recovery_line(rec), file=sys.stderr)
            )

        return Archive(opener, where, model=model)

    with contextlib.suppress(KeyboardInterrupt):
        run_stdio(open_archive, structured=structured)


def fast_mcp(argv: list[str]) -> int | None:
    """Serve a plain ``mcp`` command line and return its exit code; None to leave it to the
    typer command."""
    found = parse(argv)
    if found is None:
        return None
    from continuity.paths import is_postgres_url, resolve_store_location

    store = found.get("store")
    location = resolve_store_location(store if isinstance(store, str) else None)
    if is_postgres_url(location):
        return None
    project, model = found.get("project"), found.get("model") or os.environ.get("CONTINUITY_MODEL")
    serve(
        location,
        project if isinstance(project, str) else None,
        model if isinstance(model, str) else None,
        bool(found.get("structured")),
    )
    return 0
