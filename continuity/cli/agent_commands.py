"""The agent commands: ``install``, ``uninstall``, ``ingest``, ``sessions``, ``hook`` and ``demo``,
one module for every coding agent.

Each command finds the agent's adapter by name (:mod:`continuity.agents.registry`: the built-ins
and any an installed package adds) and prints what it did; the work is the adapter's
(:class:`~continuity.agents.contract.AgentAdapter`). ``install mcp --client X`` registers the
MCP server with any MCP client (Cursor too, which is no agent continuity archives).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Final, Literal

import typer

from continuity._text import context_used, render_sessions, session_head, session_named
from continuity.cli._common import (
    agent_option,
    errors,
    fail,
    open_store,
    report_recovery,
)

if TYPE_CHECKING:
    from continuity.agents.contract import AgentAdapter, Done
    from continuity.paths import StoreLocation
    from continuity.store.base import BaseStore

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    app.command("install")(install)
    app.command("uninstall")(uninstall)
    app.command("ingest")(ingest)
    app.command("sessions")(sessions)
    app.command("hook")(hook)
    app.command("demo")(demo)


def _agents() -> str:
    """The agents the table knows (the built-ins; an installed package's agent is found by its
    name all the same), for the help: ``claude-code, codex, gemini, opencode``. From the table,
    not the registry: this runs when the module is imported, and ``sessions`` or ``demo`` need
    no adapter (the registry brings the contract's imports, ~10 ms)."""
    from continuity.agents.table import known_agent_names

    return known_agent_names()


ScopeOpt = Literal["user", "project", "local"]
ClientOpt = Literal["claude-code", "codex", "gemini", "cursor", "opencode"]
ProjectOpt = Annotated[
    Path | None, typer.Option("--project", help="The project folder for --scope project/local.")
]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Print the change; write nothing.")]
ClientArg = Annotated[
    ClientOpt | None,
    typer.Option("--client", help="With `mcp`: claude-code, codex, gemini or cursor."),
]
NoMcpOpt = Annotated[
    bool,
    typer.Option("--no-mcp", help="claude-code, codex: the hooks only, not the MCP server."),
]


def _adapter(name: str, *, param: str | None = None) -> AgentAdapter:
    """The adapter of agent ``name``; an unknown name is a usage error for ``param`` (exit 2),
    else an error (exit 1), naming the known agents."""
    from continuity.agents.registry import adapter
    from continuity.registry import UnknownName

    try:
        return adapter(name)
    except UnknownName as exc:
        if param is not None:
            raise typer.BadParameter(str(exc), param_hint=param) from None
        fail(str(exc))


def _said(done: Done) -> None:
    """Print what a command did; exit 1 when it says it failed."""
    for line in done.err:
        typer.echo(line, err=True)
    for line in done.out:
        typer.echo(line)
    if done.failed is not None:
        fail(done.failed)


@contextmanager
def _agent_errors() -> Iterator[None]:
    """:func:`errors`, and what an adapter refuses (its notes first) or was stopped in (one
    line, exit 130)."""
    from continuity.errors import CommandInterrupted, CommandRefused

    with errors():
        try:
            yield
        except CommandRefused as exc:
            for note in exc.notes:
                typer.echo(note, err=True)
            fail(str(exc))
        except CommandInterrupted as exc:
            typer.echo(str(exc), err=True)
            raise typer.Exit(130) from None


def _named_store(ctx: typer.Context) -> StoreLocation | None:
    """The store to name in what is installed: None when it is where a hook or server would
    look by itself (no CONTINUITY_HOME: the agents run them without the installing shell's
    environment)."""
    from continuity.paths import default_store_location

    plain_env = {k: v for k, v in os.environ.items() if k != "CONTINUITY_HOME"}
    location: StoreLocation = ctx.obj.location
    return location if location != default_store_location(plain_env) else None


def install(
    ctx: typer.Context,
    target: Annotated[
        str,
        typer.Argument(
            help=f"What to install: an agent ({_agents()}) or mcp.",
            show_default=False,
        ),
    ],
    scope: Annotated[
        ScopeOpt,
        typer.Option("--scope", help="user (~/.claude), project (.claude, committed) or local."),
    ] = "user",
    project: ProjectOpt = None,
    dry_run: DryRunOpt = False,
    client: ClientArg = None,
    print_only: Annotated[
        bool, typer.Option("--print", help="With `mcp`: print the configuration; write nothing.")
    ] = False,
    no_mcp: NoMcpOpt = False,
) -> None:
    """Archive an agent's sessions from now on (its hooks and the MCP server).

    Adds them to the agent's settings (opencode: a plugin). Idempotent: other hooks, servers and
    settings are kept. `install mcp --client X` registers the MCP server with another client (or
    prints its configuration)."""
    store = _named_store(ctx)
    if target != "mcp" and (client is not None or print_only):
        fail("--client and --print go with `install mcp`")
    if target == "mcp":
        _install_mcp(client, scope, project, store, dry_run=dry_run, print_only=print_only)
        return
    agent = _adapter(target, param="'target'")
    mcp = not no_mcp
    if mcp and not dry_run and agent.agent.name in _MCP_CLIENTS:
        why = _server_cannot_start(store)
        if why is not None:  # the hooks alone; one line on what the server needs
            typer.echo(f"{why} (the MCP server was not registered)", err=True)
            mcp = False
    with _agent_errors():
        done = agent.install(scope, project, store, mcp=mcp, dry_run=dry_run)
    _said(done)
    if not dry_run:
        _rolling_settings(ctx.obj.location)


def _rolling_settings(location: StoreLocation) -> None:
    """Write the rolling context manager's settings with their defaults beside the store, when
    it has none (ADR 0056): where to turn its reminders off. The store is created as a hook
    would create it; a server store's settings go to its folder on this machine. Nothing here
    fails an install: without the file the defaults apply."""
    from continuity.errors import ContinuityError
    from continuity.paths import is_store_url, local_dir_of
    from continuity.rolling.settings import SETTINGS_FILE, write_default

    try:
        if not is_store_url(location):
            from continuity.store.locate import open_store as open_location

            open_location(location, create=True)
        folder = local_dir_of(location)
        if write_default(folder):
            typer.echo(
                f"rolling context manager: settings in {folder / SETTINGS_FILE} "
                "(CONTINUITY_ROLLING=0 turns its reminders off)"
            )
    except (ContinuityError, OSError):
        return


_MCP_CLIENTS: Final = ("claude-code", "codex", "gemini", "opencode")
"""The agents whose install registers the MCP server (unless --no-mcp)."""


_STARTS: dict[tuple[str, ...], str | None] = {}


def _server_cannot_start(store: StoreLocation | None) -> str | None:
    """Why the MCP server an install would register cannot serve here, as one line saying
    what to add, or None when it can (it answered ``initialize``)."""
    from continuity.agents.base.mcp import cannot_start, server_argv

    # Once a process: whether the command starts does not hang on the store it is given (the
    # server opens it at the first call), and a probe costs a server's start-up.
    argv = server_argv(store)
    key = tuple(server_argv(None))
    if key not in _STARTS:
        _STARTS[key] = cannot_start(argv)
    why = _STARTS[key]
    if why is None:
        return None
    # what it says is what to add (the extra it needs, with the command that installs it)
    return f"`continuity mcp` cannot start here: {why}"


def _install_mcp(
    client: ClientOpt | None,
    scope: ScopeOpt,
    project: Path | None,
    store: StoreLocation | None,
    *,
    dry_run: bool,
    print_only: bool,
) -> None:
    from continuity.agents.base.install import apply_plan
    from continuity.agents.base.mcp import (
        config_snippet,
        mcp_target,
        plan_mcp_install,
        server_argv,
        server_entry,
    )
    from continuity.agents.base.report import mcp_installed

    if client is None:
        fail("install mcp needs --client: claude-code, codex, gemini or cursor")
    with errors():
        target = mcp_target(client, scope, project)
        entry = server_entry(client, server_argv(store))
        if print_only:
            typer.echo(config_snippet(target, entry), nl=False)
            return
        plan = plan_mcp_install(target, entry)
        if dry_run:
            typer.echo(plan.diff() or f"{target.path}: MCP server already registered")
            return
        why = _server_cannot_start(store)
        if why is not None:
            fail(f"{why} (nothing was registered)")
        backup = apply_plan(plan)
    for line in mcp_installed(target, plan, backup):
        typer.echo(line)


def uninstall(
    target: Annotated[
        str,
        typer.Argument(
            help=f"What to remove: an agent ({_agents()}) or mcp.",
            show_default=False,
        ),
    ],
    scope: Annotated[ScopeOpt, typer.Option("--scope", help="user, project or local.")] = "user",
    project: ProjectOpt = None,
    dry_run: DryRunOpt = False,
    client: ClientArg = None,
    no_mcp: NoMcpOpt = False,
) -> None:
    """Remove what `install` added to an agent's settings.

    Its hooks and the MCP server's entry go; the files from before the install come back when
    nothing else changed (everything else is kept). `uninstall mcp --client X` removes the MCP
    server's entry only."""
    if target != "mcp" and client is not None:
        fail("--client goes with `uninstall mcp`")
    if target == "mcp":
        if client is None:
            fail("uninstall mcp needs --client: claude-code, codex, gemini, cursor or opencode")
        _uninstall_mcp(client, scope, project, dry_run)
        return
    agent = _adapter(target, param="'target'")
    with _agent_errors():
        done = agent.uninstall(scope, project, mcp=not no_mcp, dry_run=dry_run)
    _said(done)


def _uninstall_mcp(client: ClientOpt, scope: ScopeOpt, project: Path | None, dry: bool) -> None:
    from continuity.agents.base.install import apply_plan
    from continuity.agents.base.mcp import mcp_target, plan_mcp_uninstall
    from continuity.agents.base.report import mcp_uninstalled

    with errors():
        target = mcp_target(client, scope, project)
        plan = plan_mcp_uninstall(target)
        if dry:
            typer.echo(plan.diff() or f"{target.path}: no continuity MCP server")
            return
        apply_plan(plan)
    for line in mcp_uninstalled(target, plan):
        typer.echo(line)


def _with_progress(todo: Sequence[Path], one: Callable[[Path], None]) -> None:
    """``one`` on each file, with a progress bar on a terminal."""
    if not sys.stderr.isatty():
        for f in todo:
            one(f)
        return
    from rich.console import Console
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("ingesting", total=len(todo))
        for f in todo:
            one(f)
            bar.advance(task)


def ingest(
    ctx: typer.Context,
    paths: Annotated[
        list[Path] | None,
        typer.Argument(help="Transcript files or folders (default: ~/.claude/projects)."),
    ] = None,
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent",
            help="Whose sessions: claude-code, codex (rollouts; default $CODEX_HOME), gemini "
            "(default ~/.gemini/tmp) or opencode (its database; default its data folder). "
            "Default: each path's, known by its content; with no path, claude-code's.",
        ),
    ] = None,
    session: Annotated[
        str | None,
        typer.Option("--session", help="opencode: only this session (what its plugin runs)."),
    ] = None,
) -> None:
    """Import an agent's past sessions, incrementally and without duplicates.

    Each path is read as the agent's whose file it is (by its content: a Claude Code
    transcript, a Codex rollout, a Gemini CLI session, opencode's database or an export);
    --agent names the agent instead. With no path, Claude Code's transcripts (or the
    --agent's own folders). Files that are not transcripts, or cannot be read, are skipped and
    named. Interrupted, it says where it stopped; running it again resumes, losing nothing.
    """

    def opened() -> BaseStore:
        # Like the hooks, an import creates the store: `install` then `ingest` needs no `init`.
        return open_store(ctx, create=True)

    groups = _by_agent(paths or [], agent, session)
    ingested = False
    for adapter, given in groups:
        with _agent_errors():
            done = adapter.ingest(opened, given, session=session, progress=_with_progress)
        _said(done)
        ingested = True
    if not ingested:
        fail("nothing was ingested: no path is a session file of an agent continuity reads")


def _owners(path: Path) -> list[AgentAdapter]:
    """The adapters that read ``path`` as their agent's (by its content). Claude Code's reader
    takes any file of JSON objects with a ``type``: when another agent's claims the file too,
    that one's is the file's."""
    from continuity.agents.registry import adapters

    found = [a for a in adapters() if a.detect(path)]
    specific = [a for a in found if a.agent.name != "claude-code"]
    return specific or found


def _by_agent(
    paths: list[Path], agent: str | None, session: str | None
) -> list[tuple[AgentAdapter, list[Path]]]:
    """The paths grouped by the adapter that ingests them. ``agent`` given: all of them by its
    adapter, unless a path is plainly another agent's (then one line naming its --agent, exit
    1). None: each path by its own agent's (no path: Claude Code's default folders); a path no
    adapter reads is named on stderr with the formats tried, and skipped."""
    from continuity.agents.registry import adapters

    if agent is not None:
        chosen = _adapter(agent)
        for path in paths:
            owners = _owners(path) if path.exists() else []
            if owners and all(o.agent.name != chosen.agent.name for o in owners):
                other = owners[0].agent
                fail(
                    f"{path}: a {other.display} session file, not {chosen.agent.display}'s: "
                    f"`continuity ingest --agent {other.name} {path}`"
                )
        return [(chosen, paths)]
    if not paths:
        return [(_adapter("claude-code"), [])]
    groups: dict[str, tuple[AgentAdapter, list[Path]]] = {}
    unknown: list[Path] = []
    for path in paths:
        owners = _owners(path) if path.exists() else []
        if not owners and (session is not None or not path.is_file()):
            # a missing path, a folder of nobody's sessions, or --session without --agent:
            # Claude Code's (the default agent's) to say what is wrong
            groups.setdefault("claude-code", (_adapter("claude-code"), []))[1].append(path)
        elif not owners:
            unknown.append(path)
        for owner in owners:
            groups.setdefault(owner.agent.name, (owner, []))[1].append(path)
    if unknown:
        tried = ", ".join(a.agent.display for a in adapters())
        said = f"not a session file of any agent continuity reads (tried {tried})"
        if not groups:  # one line, exit 1
            named = str(unknown[0]) if len(unknown) == 1 else f"{len(unknown)} paths"
            fail(f"{named}: {said}; nothing was ingested")
        for path in unknown:
            typer.echo(f"{path}: {said}; skipped", err=True)
    return list(groups.values())


def sessions(
    ctx: typer.Context,
    agents: Annotated[bool, typer.Option("--agents", help="Include subagent threads.")] = False,
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent", help="Only this agent's sessions (claude-code, codex, gemini, opencode)."
        ),
    ] = None,
    project: Annotated[
        str | None, typer.Option("--project", help="Only sessions of this project folder.")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON object a line, for programs.")
    ] = False,
    context: Annotated[
        bool,
        typer.Option(
            "--context", help="Show how full each session's context is (the agent's count)."
        ),
    ] = False,
) -> None:
    """The archived sessions of every agent, the most recently active last.

    Each line: agent, thread, project, branch, start, messages, compactions, title; with
    --context, the tokens the context held at the latest answer and the model's window."""
    import msgspec

    from continuity.agents.base.ingest import ingest_redactor
    from continuity.agents.base.sessions import list_sessions

    name = agent_option(agent)
    folder = os.path.abspath(project) if project is not None else None
    store = open_store(ctx)
    with errors():
        found = list_sessions(
            store, include_agents=agents, agent=name, project=folder, usage=context
        )
        redactor = ingest_redactor(store)
    root = getattr(store, "root", None)
    if not context and isinstance(root, Path):
        # the catalog just caught up wrote the sessions file: its titles are redacted already
        from continuity.cli.fast_list import sessions_from_file

        code = sessions_from_file(
            str(root), name, folder, every=agents, as_json=as_json, context=False
        )
        if code is not None:
            raise typer.Exit(code)
    titles = [
        redactor.redact_text(s.title)[0] if redactor is not None and s.title else s.title
        for s in found
    ]
    if context:  # the next `sessions --context` of this store reads the file, not the logs
        from continuity.agents.base.sessions import write_context_file
        from continuity.errors import ContinuityError

        with contextlib.suppress(ContinuityError):
            write_context_file(
                store, {s.thread_id: (s.context_tokens, s.context_window) for s in found}
            )
    if as_json:
        lines = [
            msgspec.json.encode(msgspec.structs.replace(s, title=t)).decode()
            for s, t in zip(found, titles, strict=True)
        ]
        if lines:
            typer.echo("\n".join(lines))
        return
    if not found:
        scope = f"{_display(name)} " if name else ""
        where = f" of {folder}" if folder else ""
        typer.echo(f"no {scope}sessions{where} archived yet")
        return
    # the agent's name (one word, what --agent takes): the column splits on whitespace;
    # one write for them all: thousands of echoes cost more than the listing
    table = []
    for s, title in zip(found, titles, strict=True):
        used = context_used(s.context_tokens, s.context_window) if context else ""
        head = session_head(s.project, s.git_branch, s.started, s.messages, s.compactions)
        table.append((s.agent or "-", s.thread_id, head + used + session_named(title)))
    typer.echo(render_sessions(table))


def _display(name: str) -> str:
    """The agent's display name (``Codex``) from its name (``codex``)."""
    from continuity.agents.table import agent_named

    agent = agent_named(name)
    return agent.display if agent is not None else name


def hook(
    ctx: typer.Context,
    event: Annotated[
        str, typer.Argument(help="session-start, user-prompt-submit, pre-compact, stop, …")
    ],
    agent: Annotated[
        str, typer.Option("--agent", help="Whose hook: claude-code (default), codex, gemini, …")
    ] = "claude-code",
    session: Annotated[
        str | None, typer.Option("--session", help="opencode: the session its plugin reports.")
    ] = None,
) -> None:
    """Run a coding agent's hook (its JSON on stdin); never fails the agent."""
    argv = [event] if session is None else [event, "--session", session]
    raise typer.Exit(_adapter(agent).hook(argv, store=ctx.obj.location))


def demo(
    ctx: typer.Context,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            "-v",
            help="The whole replay: every hook run, the archive, Claude's summary, the "
            "selection decision and the restored context whole.",
        ),
    ] = False,
    temp_store: Annotated[
        bool,
        typer.Option("--temp-store", help="Use a throwaway store (deleted afterwards)."),
    ] = False,
    keep: Annotated[
        bool,
        typer.Option("--keep", help="Keep the temporary folder (the transcript, the temp store)."),
    ] = False,
) -> None:
    """See it work: a scripted Claude Code session archived, compacted and restored.

    The session is replayed through the real hooks into the configured store (--store,
    $CONTINUITY_HOME or the default; created if missing) as thread cc-demo-invoice-service, or
    into a throwaway store with --temp-store. A store holds it once: run again, the replay goes
    to a throwaway store.
    """
    from continuity.cli._invocation import invoked_as
    from continuity.demo import print_report, run_in_temp
    from continuity.paths import default_store_location

    location = ctx.obj.location
    with errors():
        result = run_in_temp(
            None if temp_store else location, keep=keep, on_recovery=report_recovery
        )
    # the Next lines name the store when the same command without --store would not find it
    store = None if location == default_store_location() else ctx.obj.described
    print_report(
        result,
        sys.stdout,
        verbose=verbose,
        styled=sys.stdout.isatty(),
        program=invoked_as(),
        store=store,
    )
