"""The root of the ``continuity`` command line: the app, the global ``--store`` option, and
the command modules registered on it (each receives the app; none imports this module)."""

from __future__ import annotations

from typing import Annotated

import typer

from continuity.cli import (
    claude_code_commands,
    context_commands,
    search_commands,
    store_commands,
)
from continuity.cli._common import Options
from continuity.paths import resolve_store_path

__all__ = ["app"]

app = typer.Typer(
    name="continuity",
    help="An append-only, hash-chained event log for agent conversations.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _main(
    ctx: typer.Context,
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            help="The store folder. Default: $CONTINUITY_HOME, else "
            "$XDG_DATA_HOME/continuity, else ~/.local/share/continuity.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """An append-only, hash-chained event log for agent conversations."""
    ctx.obj = Options(resolve_store_path(store))


# The order commands are listed in by --help.
for _module in (store_commands, claude_code_commands, context_commands, search_commands):
    _module.register(app)
