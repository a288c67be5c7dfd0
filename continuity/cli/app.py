"""The root of the ``continuity`` command line: the app, the global ``--store`` and
``--version`` options, and the command modules registered on it (each receives the app; none
imports this module).

A run imports the module of the command it names and builds that command alone: building every
command's options costs typer more than the work of most commands. The root's help (``--help``
before any command, or no arguments) lists every command without building their options
(:func:`_listed`); an unknown command or an option typer refuses gets the whole app. Help is
rendered without the parts of rich this app does not use (:mod:`.rich_help`), and a bare
``--version`` never gets here (``continuity.__main__``). ``app`` (the whole app) is made on
first use. tools/bench/bench_startup.py times all of it; tests/cli/test_startup.py keeps the
imports out.

``--store`` goes before the command or after it: every command that takes the context (which
is where the store comes from) is given the option too (:class:`_StoreCommand`).
"""

from __future__ import annotations

import copy
import gc
import inspect
import sys
from collections.abc import Iterable, Sequence
from typing import Annotated, Any, Final

import typer
from typer.core import TyperCommand, TyperGroup, TyperOption
from typer.models import CommandInfo, TyperInfo

from continuity.cli._common import start_run
from continuity.cli.rich_help import help_text
from continuity.paths import resolve_store_location

__all__ = [
    "COMMANDS",
    "GROUPS",
    "MODULES",
    "PANELS",
    "build_app",
    "command_of",
    "main",
]  # and `app`, made on use

PANELS: Final = {
    "Getting started": ("demo", "install", "sessions", "search", "serve"),
    "Agents": ("ingest", "uninstall", "hook", "mcp"),
    "Context and recall": ("compile", "checkpoint", "compact", "decisions", "index", "model"),
    "The store": ("init", "append", "log", "threads", "stats", "fork", "retract"),
    "Maintenance": ("verify", "repair", "rebuild-index", "migrate", "delete", "prune", "tier"),
}
"""The panels ``--help`` groups the commands in, a newcomer's first, and each panel's commands
in the order it lists them: what to try first, how the agents reach the store, what builds an
agent's context and what it recalls, the store's own commands, and keeping the store sound."""
COMMANDS: Final = {
    "demo": "agent_commands",
    "install": "agent_commands",
    "sessions": "agent_commands",
    "search": "search_commands",
    "serve": "serve_commands",
    "ingest": "agent_commands",
    "uninstall": "agent_commands",
    "hook": "agent_commands",
    "mcp": "mcp_commands",
    "compile": "context_commands",
    "checkpoint": "context_commands",
    "compact": "context_commands",
    "decisions": "context_commands",
    "index": "model_commands",
    "init": "store_commands",
    "append": "store_commands",
    "log": "store_commands",
    "threads": "store_commands",
    "stats": "store_commands",
    "fork": "history_commands",
    "retract": "history_commands",
    "verify": "store_commands",
    "repair": "store_commands",
    "rebuild-index": "store_commands",
    "migrate": "store_commands",
    "delete": "forget_commands",
    "prune": "forget_commands",
    "tier": "tier_commands",
}
"""Each command and the module that registers it, in the order ``--help`` lists them."""
GROUPS: Final = {"model": "model_commands"}
"""Each command group (a command with subcommands of its own) and the module that registers it."""
MODULES: Final = tuple(dict.fromkeys([*COMMANDS.values(), *GROUPS.values()]))
_PANEL_OF: Final = {name: panel for panel, names in PANELS.items() for name in names}
_ORDER: Final = {name: i for i, name in enumerate([*COMMANDS, *GROUPS])}

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


class _Root(TyperGroup):
    """The root: a Ctrl-C during a command is one line and exit 130 (typer would exit 130
    silently, or print "Aborted!" and exit 1, depending on its version)."""

    def invoke(self, ctx: Any) -> Any:  # typer's own click: not a module of ours to name
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            typer.echo("interrupted", err=True)
            raise typer.Exit(130) from None

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        # A Ctrl-C while the command line is parsed, before any command runs, would otherwise
        # end the process with 130 and nothing said (typer turns it into a silent exit).
        try:
            return super().make_context(*args, **kwargs)
        except KeyboardInterrupt:
            typer.echo("interrupted", err=True)
            raise typer.Exit(130) from None


_ROOT_HELP: Final = (
    "Keep every conversation your coding agents have, and give them back what a compaction "
    "drops.\n\nNew here? Try `continuity demo`, then `continuity install claude-code` (or "
    "codex, gemini, opencode) to archive your own sessions from now on."
)


def _root() -> typer.Typer:
    root = typer.Typer(
        cls=_Root,
        name="continuity",
        help=_ROOT_HELP,
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
        if not gc.isenabled():  # the console script's start-up turned it off: the command runs
            gc.freeze()  # with it on, and never traverses what the start-up made
            gc.enable()
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
    elif module == "agent_commands":
        from continuity.cli import agent_commands

        agent_commands.register(root)
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
    elif module == "tier_commands":
        from continuity.cli import tier_commands

        tier_commands.register(root)
    else:
        raise ValueError(f"no command module {module!r}")


def _name_of(info: CommandInfo | TyperInfo) -> str | None:
    if isinstance(info, TyperInfo):  # a name not given is a typer placeholder, not None
        for name in (info.name, info.typer_instance.info.name if info.typer_instance else None):
            if isinstance(name, str):
                return name
        return None
    if info.name is None and info.callback is not None:
        return typer.main.get_command_name(info.callback.__name__)
    return info.name


def build_app(modules: Iterable[str] = MODULES, *, only: str | None = None) -> typer.Typer:
    """The app with the commands of ``modules`` (default: all of them); with ``only``, the one
    command (or command group) of that name alone: typer builds every registered command's
    options from its signature, siblings that will not run included."""
    root = _root()
    for module in modules:
        _register(root, module)
    if only is not None:
        root.registered_commands = [i for i in root.registered_commands if _name_of(i) == only]
        root.registered_groups = [i for i in root.registered_groups if _name_of(i) == only]
    root.registered_commands.sort(key=lambda i: _ORDER.get(_name_of(i) or "", len(_ORDER)))
    for info in root.registered_commands:
        # A command that takes the context reads the store from it: it takes --store too.
        if info.callback is not None and "ctx" in inspect.signature(info.callback).parameters:
            info.cls = _StoreCommand
    _for_help(root)
    return root


def _for_help(typer_app: typer.Typer) -> None:
    """Give every command (a group's too) its panel and its docstring as help text that wraps
    in the box (:func:`.rich_help.help_text`)."""
    for info in typer_app.registered_commands:
        name = _name_of(info)
        if name in _PANEL_OF:
            info.rich_help_panel = _PANEL_OF[name]
        doc = info.help if isinstance(info.help, str) else None
        if doc is None and info.callback is not None:
            doc = info.callback.__doc__
        if doc:
            info.help = help_text(doc)
    for group in typer_app.registered_groups:
        name = _name_of(group)
        if name in _PANEL_OF:
            group.rich_help_panel = _PANEL_OF[name]
        if group.typer_instance is not None:
            _for_help(group.typer_instance)


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


def _listed(info: CommandInfo) -> CommandInfo:
    """A copy of a command's registration that lists it as it is (name, help, panel) but has
    no options to build: for the root's help, which lists the commands and runs none."""
    assert info.callback is not None
    original = info.callback

    def listed() -> None:  # never run: the root's help exits before any command
        raise RuntimeError(f"{original.__name__} was registered for the root's help only")

    listed.__name__, listed.__qualname__ = original.__name__, original.__qualname__
    listed.__doc__ = original.__doc__
    copied = copy.copy(info)
    copied.callback = listed
    return copied


def _for_listing(root: typer.Typer) -> typer.Typer:
    """``root`` with every command (and every group's commands) replaced by :func:`_listed`."""
    root.registered_commands = [_listed(info) for info in root.registered_commands]
    groups = []
    for info in root.registered_groups:
        copied = copy.copy(info)
        if info.typer_instance is not None:
            copied.typer_instance = _for_listing(copy.copy(info.typer_instance))
        groups.append(copied)
    root.registered_groups = groups
    return root


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command line (``argv`` defaults to ``sys.argv[1:]``).

    A command's run builds only that command; the root's help (``--help`` before any command,
    or no arguments) builds every command as a listing (:func:`_listed`)."""
    args = list(sys.argv[1:] if argv is None else argv)
    named = command_of(args)
    module = COMMANDS.get(named or "") or GROUPS.get(named or "")
    helps = not args or "--help" in args
    if helps or named in GROUPS:  # help is printed (most likely)
        from continuity.cli.rich_help import import_help_renderer

        import_help_renderer()
    if module is not None:
        build_app([module], only=named)(args=args)
    elif named is None and helps and "--" not in args:
        _for_listing(build_app())(args=args)
    else:  # an unknown command (its error names the known ones), an option typer refuses
        build_app()(args=args)


_app: typer.Typer | None = None


def __getattr__(name: str) -> typer.Typer:
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    global _app
    if _app is None:
        _app = build_app()
    return _app
