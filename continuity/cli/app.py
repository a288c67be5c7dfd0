"""The root of the ``continuity`` command line: the app, the global ``--store`` and
``--version`` options, and the command modules registered on it (each receives the app; none
imports this module).

A run imports and registers only the module of the command it names: building every command's
options costs typer more than the work of most commands (about 6 ms of each process). Help, no
command or an unknown one get the whole app. ``app`` (the whole app) is made on first use.

``--store`` goes before the command or after it: every command that takes the context (which
is where the store comes from) is given the option too (:class:`_StoreCommand`).
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Iterable, Sequence
from typing import Annotated, Any, Final

import typer
from typer.core import TyperCommand, TyperOption

from continuity.cli._common import start_run
from continuity.paths import resolve_store_location

__all__ = [
    "COMMANDS",
    "GROUPS",
    "MODULES",
    "build_app",
    "command_of",
    "main",
]  # and `app`, made on use

COMMANDS: Final = {
    "init": "store_commands",
    "append": "store_commands",
    "log": "store_commands",
    "verify": "store_commands",
    "repair": "store_commands",
    "rebuild-index": "store_commands",
    "stats": "store_commands",
    "threads": "store_commands",
    "migrate": "store_commands",
    "delete": "forget_commands",
    "prune": "forget_commands",
    "install": "claude_code_commands",
    "uninstall": "claude_code_commands",
    "ingest": "claude_code_commands",
    "sessions": "claude_code_commands",
    "hook": "claude_code_commands",
    "demo": "claude_code_commands",
    "compile": "context_commands",
    "checkpoint": "context_commands",
    "compact": "context_commands",
    "decisions": "context_commands",
    "search": "search_commands",
    "fork": "history_commands",
    "retract": "history_commands",
    "serve": "serve_commands",
    "mcp": "mcp_commands",
    "index": "model_commands",
}
"""Each command and the module that registers it, in the order ``--help`` lists them."""
GROUPS: Final = {"model": "model_commands"}
"""Each command group (a command with subcommands of its own) and the module that registers it."""
MODULES: Final = tuple(dict.fromkeys([*COMMANDS.values(), *GROUPS.values()]))

_STORE_HELP: Final = (
    "The store: a folder, or a PostgreSQL URL (postgresql://user@host/db). Default: "
    "$CONTINUITY_HOME, else $XDG_DATA_HOME/continuity, else ~/.local/share/continuity."
)


def _show_version(value: bool) -> None:
    if not value:
        return
    from continuity.cli.version import version_line

    typer.echo(version_line())
    raise typer.Exit()


_SCHEMA_HELP: Final = (
    "The schema of a PostgreSQL store (default: the URL's ?schema=, else continuity): one "
    "the role may create, or one the DBA made for it."
)


def _store_after_command(ctx: typer.Context, _param: object, value: str | None) -> None:
    # The root callback has run (click runs a group's callback before it parses the command's
    # options), so this one, given later on the command line, wins.
    if value is not None:
        ctx.obj.given = resolve_store_location(value)


def _schema_after_command(ctx: typer.Context, _param: object, value: str | None) -> None:
    if value is not None:
        ctx.obj.schema = value


class _StoreCommand(TyperCommand):
    """A command that takes ``--store`` after its name too (click gives an option to the
    command it follows, so the root's would be "No such option" there)."""

    def __init__(self, name: str | None, **kwargs: Any) -> None:
        store = TyperOption(
            param_decls=["--store"],
            type=str,
            default=None,
            expose_value=False,
            callback=_store_after_command,
            metavar="PATH|URL",
            help=_STORE_HELP + " Also accepted before the command.",
        )
        schema = TyperOption(
            param_decls=["--schema"],
            type=str,
            default=None,
            expose_value=False,
            callback=_schema_after_command,
            metavar="NAME",
            help=_SCHEMA_HELP + " Also accepted before the command.",
        )
        params = [*(kwargs.get("params") or []), store, schema]
        super().__init__(name, **{**kwargs, "params": params})


def _root() -> typer.Typer:
    root = typer.Typer(
        name="continuity",
        help="An append-only, hash-chained event log for agent conversations.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )

    @root.callback()
    def _main(
        ctx: typer.Context,
        store: Annotated[
            str | None,
            typer.Option("--store", help=_STORE_HELP, show_default=False),
        ] = None,
        schema: Annotated[
            str | None,
            typer.Option("--schema", help=_SCHEMA_HELP, show_default=False),
        ] = None,
        version: Annotated[
            bool,
            typer.Option(
                "--version",
                is_eager=True,
                callback=_show_version,
                help="Print continuity's version and exit.",
            ),
        ] = False,
    ) -> None:
        """An append-only, hash-chained event log for agent conversations."""
        ctx.obj = start_run(resolve_store_location(store), schema)

    return root


def _register(root: typer.Typer, module: str) -> None:
    # One import a branch, so that a run imports the module of its command alone.
    if module == "store_commands":
        from continuity.cli import store_commands

        store_commands.register(root)
    elif module == "forget_commands":
        from continuity.cli import forget_commands

        forget_commands.register(root)
    elif module == "claude_code_commands":
        from continuity.cli import claude_code_commands

        claude_code_commands.register(root)
    elif module == "context_commands":
        from continuity.cli import context_commands

        context_commands.register(root)
    elif module == "search_commands":
        from continuity.cli import search_commands

        search_commands.register(root)
    elif module == "history_commands":
        from continuity.cli import history_commands

        history_commands.register(root)
    elif module == "serve_commands":
        from continuity.cli import serve_commands

        serve_commands.register(root)
    elif module == "mcp_commands":
        from continuity.cli import mcp_commands

        mcp_commands.register(root)
    elif module == "model_commands":
        from continuity.cli import model_commands

        model_commands.register(root)
    else:
        raise ValueError(f"no command module {module!r}")


def build_app(modules: Iterable[str] = MODULES) -> typer.Typer:
    """The app with the commands of ``modules`` (default: all of them)."""
    root = _root()
    for module in modules:
        _register(root, module)
    for info in root.registered_commands:
        # A command that takes the context reads the store from it: it takes --store too.
        if info.callback is not None and "ctx" in inspect.signature(info.callback).parameters:
            info.cls = _StoreCommand
    return root


def command_of(args: Sequence[str]) -> str | None:
    """The command a command line (without the program name) names after the global options,
    or None (no command, or an option typer must see whole, such as ``--help``)."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("--store", "--schema"):
            i += 2
        elif arg.startswith(("--store=", "--schema=")):
            i += 1
        elif arg.startswith("-"):
            return None
        else:
            return arg
    return None


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command line (``argv`` defaults to ``sys.argv[1:]``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    named = command_of(args) or ""
    module = COMMANDS.get(named) or GROUPS.get(named)
    if not args or "--help" in args or named in GROUPS:  # help is printed (most likely)
        from continuity.cli.rich_help import import_help_renderer

        import_help_renderer()
    build_app(MODULES if module is None else [module])(args=args)


_app: typer.Typer | None = None


def __getattr__(name: str) -> typer.Typer:
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    global _app
    if _app is None:
        _app = build_app()
    return _app
