"""The root of the ``continuity`` command line: the app, the global ``--store`` option, and the
command modules registered on it (each receives the app; none imports this module).

A run imports and registers only the module of the command it names: building every command's
options costs typer more than the work of most commands (about 6 ms of each process). Help, no
command or an unknown one get the whole app. ``app`` (the whole app) is made on first use.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from typing import Annotated, Final

import typer

from continuity.cli._common import Options
from continuity.paths import resolve_store_path

__all__ = ["COMMANDS", "MODULES", "build_app", "command_of", "main"]  # and `app`, made on use

COMMANDS: Final = {
    "init": "store_commands",
    "append": "store_commands",
    "log": "store_commands",
    "verify": "store_commands",
    "rebuild-index": "store_commands",
    "stats": "store_commands",
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
}
"""Each command and the module that registers it, in the order ``--help`` lists them."""
MODULES: Final = tuple(dict.fromkeys(COMMANDS.values()))


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

    return root


def _register(root: typer.Typer, module: str) -> None:
    # One import a branch, so that a run imports the module of its command alone.
    if module == "store_commands":
        from continuity.cli import store_commands

        store_commands.register(root)
    elif module == "claude_code_commands":
        from continuity.cli import claude_code_commands

        claude_code_commands.register(root)
    elif module == "context_commands":
        from continuity.cli import context_commands

        context_commands.register(root)
    elif module == "search_commands":
        from continuity.cli import search_commands

        search_commands.register(root)
    else:
        raise ValueError(f"no command module {module!r}")


def build_app(modules: Iterable[str] = MODULES) -> typer.Typer:
    """The app with the commands of ``modules`` (default: all of them)."""
    root = _root()
    for module in modules:
        _register(root, module)
    return root


def command_of(args: Sequence[str]) -> str | None:
    """The command a command line (without the program name) names after the global options,
    or None (no command, or an option typer must see whole, such as ``--help``)."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--store":
            i += 2
        elif arg.startswith("--store="):
            i += 1
        elif arg.startswith("-"):
            return None
        else:
            return arg
    return None


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command line (``argv`` defaults to ``sys.argv[1:]``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    module = COMMANDS.get(command_of(args) or "")
    build_app(MODULES if module is None else [module])(args=args)


_app: typer.Typer | None = None


def __getattr__(name: str) -> typer.Typer:
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    global _app
    if _app is None:
        _app = build_app()
    return _app
