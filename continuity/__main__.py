"""``python -m continuity`` and the ``continuity`` console script."""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # not typing's: every command line, the hooks' too, skips typing (2 ms)
if TYPE_CHECKING:
    from collections.abc import Callable


def _without_typing_extensions() -> bool:
    """Keep typing_extensions out of a process that runs no typer: msgspec imports it when it is
    installed (typer brings it) only to prefer its get_type_hints, and falls back to typing's;
    on Python >= 3.11 ours work with either. 2-15 ms of a fresh process. True if blocked here."""
    if "typing_extensions" in sys.modules:
        return False
    sys.modules["typing_extensions"] = None  # type: ignore[assignment]
    return True


def _hook_command_line(args: list[str]) -> tuple[list[str], str | None] | None:
    """The hook's own arguments and the ``--store`` given before or after ``hook`` (the last
    one wins, as in the typer commands), or None when this is not a hook run or asks for help.

    A hook never fails Claude Code (exit 2 would block a prompt or a compaction), so nothing
    here is a usage error: a ``--store`` without its value is ignored, as are extra words.
    """
    store: str | None = None
    i = 0
    if args[:1] == ["--store"] and len(args) > 1:
        store, i = args[1], 2
    elif args[:1] and args[0].startswith("--store="):
        store, i = args[0].removeprefix("--store="), 1
    if args[i : i + 1] != ["hook"]:
        return None
    rest: list[str] = []
    words = iter(args[i + 1 :])
    for arg in words:
        if arg in ("-h", "--help"):
            return None
        if arg == "--store":
            store = next(words, store)
        elif arg.startswith("--store="):
            store = arg.removeprefix("--store=")
        else:
            rest.append(arg)
    return rest, store


def _agent_of(args: list[str]) -> str:
    """The ``--agent`` of a hook's arguments (removed from them), default ``claude-code``."""
    for i, arg in enumerate(args):
        if arg == "--agent" and i + 1 < len(args):
            agent = args[i + 1]
            del args[i : i + 2]
            return agent
        if arg.startswith("--agent="):
            del args[i]
            return arg.removeprefix("--agent=")
    return "claude-code"


def _hook_entry(name: str) -> Callable[..., int] | None:
    """The hook function of the agent ``name`` names; None for no agent. A built-in's comes
    from the agents table alone: neither the adapter nor the registry is imported on a hook's
    path. An unknown name is looked up in the registry (an
    installed package's agent), which reads the packages' metadata once."""
    import importlib

    from continuity.agents.table import agent_named

    agent = agent_named(name)
    if agent is None:
        from continuity.agents.registry import find

        adapter = find(name)
        if adapter is None:
            return None
        agent = adapter.agent
        if not agent.hook:
            return adapter.hook
    module, _, function = agent.hook.partition(":")
    hook: Callable[..., int] = getattr(importlib.import_module(module), function)
    return hook


def _run_hook(args: list[str], store: str | None) -> int:
    """Run a hook with the garbage collector kept off the start-up and the exit: about 6 ms
    of a 20 ms hook process on a 2-core machine.

    Start-up makes tens of thousands of objects that live as long as the process (modules,
    classes, functions): collections during the imports only traverse them again, so the
    collector is off until the modules every hook needs are in, then those are frozen
    (``gc.freeze``: later collections skip them) and it runs as usual during the hook's work.
    Freezing again at the end leaves the interpreter's last collection at exit nothing to
    traverse. Nothing else changes: the exit is the usual ``SystemExit``, buffers flushed and
    ``atexit`` handlers run.

    An agent's quick module answers an ingest-only hook with nothing new to archive before the
    store, the ingest and msgspec are imported (ADR 0038): the input is read once and handed
    on.
    """
    import gc

    name = _agent_of(args)
    raw: bytes | None = None
    gc.disable()
    try:
        from continuity.agents.table import agent_named

        known = agent_named(name)
        if known is not None and known.quick and args[:1]:
            import importlib

            quick = importlib.import_module(known.quick)
            if args[0] in quick.QUICK_EVENTS and not os.environ.get(quick.FULL_ENV):
                from continuity.paths import default_store_location, resolve_store_location

                raw = sys.stdin.buffer.read(quick.MAX_STDIN)
                location = resolve_store_location(store) if store else default_store_location()
                if quick.nothing_new(args[0], raw, location):
                    return 0
        _without_typing_extensions()
        entry = _hook_entry(name)
        from continuity.paths import resolve_store_location
    finally:
        gc.freeze()
        gc.enable()
    if entry is None:  # a hook never fails its agent: one line, exit 0
        from continuity.agents.table import known_agent_names

        sys.stderr.write(
            f"continuity: unknown agent {name!r} (the agents: {known_agent_names()})\n"
        )
        return 0
    code: int = entry(args, store=resolve_store_location(store) if store else None, stdin=raw)
    gc.freeze()
    return code


def main() -> None:
    """Run the command line; a Ctrl-C anywhere (the imports included) is one line on stderr and
    exit 130, never a traceback. Commands that can say more (ingest: where it stopped) do."""
    try:
        _main()
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)


def _fast_path(module: str, name: str) -> None:
    """Run ``module.name`` on the command line and exit with its code; return when it leaves
    the command to typer (``typing_extensions`` unblocked again: typer needs it; opening a
    PostgreSQL store may have lifted the block already, psycopg needs it too)."""
    import importlib

    blocked = _without_typing_extensions()
    code = getattr(importlib.import_module(module), name)(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    if blocked and sys.modules.get("typing_extensions") is None:
        sys.modules.pop("typing_extensions", None)


def _main() -> None:
    # numpy's OpenBLAS starts a thread per core when it loads (60 ms of a 2-core machine's
    # start-up); the CLI's few small products never use them. A user's setting wins.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    # The hook path is latency-critical: dispatch it before typer, rich or numpy are imported.
    hook = _hook_command_line(sys.argv[1:])
    if hook is not None:
        args, store = hook
        sys.exit(_run_hook(args, store))
    if sys.argv[1:] == ["--version"]:
        # Answered before typer and the app are imported (the app's --version prints the same
        # line): the interpreter's start-up and the package metadata, nothing else.
        from continuity.cli.version import version_line

        sys.stdout.write(version_line() + "\n")
        sys.exit(0)
    # Latency-critical commands answered before typer is imported (60-70 ms) when their
    # command line is plain: a listing of every thread from the catalog alone, when one stat a
    # log shows the store is as the last full listing left it; an MCP server, whose client
    # waits for its first answer; a search. Each returns None to leave it to the typer command.
    for word, within, module, name in (
        ("threads", 5, "continuity.cli.fast_list", "fast_threads"),
        ("sessions", 5, "continuity.cli.fast_list", "fast_sessions"),
        ("stats", 5, "continuity.cli.fast_list", "fast_stats"),
        ("mcp", 4, "continuity.cli.fast_mcp", "fast_mcp"),
        ("search", 4, "continuity.cli.fast_search", "fast_search"),
    ):
        if word in sys.argv[1:within]:
            _fast_path(module, name)
    # The collector stays off while typer, rich and the app are imported and built (objects that
    # live as long as the process: 4-5 ms of a command's start-up); the root's callback turns it
    # back on before the command runs (continuity.cli.app). Help and usage errors exit without.
    import gc

    gc.disable()
    from continuity.cli.app import main as cli_main

    try:
        cli_main()
    finally:
        if not gc.isenabled():  # no command ran (help, a usage error): the interpreter's last
            gc.freeze()  # collection at exit has nothing to traverse (about 15 ms of typer's)


if __name__ == "__main__":
    main()
