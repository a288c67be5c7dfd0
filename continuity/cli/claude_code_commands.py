"""The commands of the Claude Code adapter: install, uninstall, ingest, sessions, hook, demo."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Final, Literal

import typer

from continuity.cli._common import (
    agent_option,
    count,
    errors,
    fail,
    open_store,
    report_recovery,
)

if TYPE_CHECKING:
    from continuity.agents.base.install import InstallPlan
    from continuity.agents.base.mcp import McpTarget
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


Target = Literal["claude-code", "codex", "gemini", "opencode", "mcp"]
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
_APPROVAL: Final = (
    "Claude Code asks each user to approve the servers of a project's .mcp.json the first "
    "time it starts there (`/mcp` shows them; the setting enableAllProjectMcpServers: true "
    "approves them all)"
)


def _settings(scope: ScopeOpt, project: Path | None) -> tuple[Path, Path | None]:
    """The settings file of ``scope`` and the project folder its writes must stay in."""
    from continuity.agents.claude_code.install import project_folder, settings_path

    with errors():
        within = project_folder(scope, project)
    return settings_path(scope, project), within


def _named_store(ctx: typer.Context) -> StoreLocation | None:
    """The store to name in what is installed: None when it is where a hook or server would
    look by itself (no CONTINUITY_HOME: Claude Code and other clients run them without the
    installing shell's environment)."""
    from continuity.paths import default_store_location

    plain_env = {k: v for k, v in os.environ.items() if k != "CONTINUITY_HOME"}
    location: StoreLocation = ctx.obj.location
    return location if location != default_store_location(plain_env) else None


def _mcp_plan(
    client: ClientOpt, scope: ScopeOpt, project: Path | None, store: StoreLocation | None
) -> tuple[McpTarget, dict[str, object], InstallPlan]:
    from continuity.agents.base.mcp import (
        mcp_target,
        plan_mcp_install,
        server_argv,
        server_entry,
    )

    target = mcp_target(client, scope, project)
    entry = server_entry(client, server_argv(store))
    return target, entry, plan_mcp_install(target, entry)


def _report_mcp_install(target: McpTarget, plan: InstallPlan, backup: Path | None) -> None:
    if not plan.changed:
        typer.echo(f"{target.path}: MCP server {target.client} entry already there, unchanged")
        return
    typer.echo(f"registered the MCP server `continuity` in {target.path} ({target.client})")
    if backup is not None:
        typer.echo(f"previous {target.path.name} saved to {backup}")
    if target.client == "claude-code" and target.scope == "project":
        typer.echo(_APPROVAL)


def install(
    ctx: typer.Context,
    target: Annotated[
        Target,
        typer.Argument(help="What to install: claude-code, codex, gemini, opencode or mcp."),
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
    """Add continuity's hooks to Claude Code's settings and register its MCP server
    (idempotent; other hooks, servers and settings are kept). `install mcp --client X`
    registers the MCP server with another client (or prints its configuration)."""
    store = _named_store(ctx)
    if target != "mcp" and (client is not None or print_only):
        fail("--client and --print go with `install mcp`")
    if target == "codex":
        from continuity.cli.codex_commands import install_codex

        install_codex(scope, project, store, dry_run=dry_run, no_mcp=no_mcp)
        return
    if target == "gemini":
        from continuity.cli.gemini_commands import install_gemini

        install_gemini(scope, project, store, dry_run=dry_run, mcp=not no_mcp)
        return
    if target == "opencode":
        from continuity.cli.opencode_commands import install_opencode

        install_opencode(scope, project, store, dry_run=dry_run, mcp=not no_mcp)
        return
    if target == "mcp":
        _install_mcp(client, scope, project, store, dry_run=dry_run, print_only=print_only)
        return
    if client is not None or print_only:
        fail("--client and --print go with `install mcp` (install claude-code takes neither)")
    from continuity.agents.base.install import apply_plan
    from continuity.agents.claude_code.install import plan_install

    path, within = _settings(scope, project)
    with errors():
        plan = plan_install(path, store, within=within)
        # Both plans before anything is written: a file either refuses leaves both untouched.
        mcp = None if no_mcp else _mcp_plan("claude-code", scope, project, store)
        if dry_run:
            typer.echo(plan.diff() or f"{path}: already installed, nothing to change")
            if mcp is not None:
                typer.echo(mcp[2].diff() or f"{mcp[0].path}: MCP server already registered")
            return
        backup = apply_plan(plan)
        mcp_backup = apply_plan(mcp[2]) if mcp is not None else None
    if not plan.changed:
        typer.echo(f"{path}: already installed, nothing changed")
    else:
        typer.echo(f"installed continuity hooks in {path}")
        if backup is not None:
            typer.echo(f"previous settings saved to {backup}")
        elif plan.backup.is_file() and not plan.backup.is_symlink():
            typer.echo(f"the settings from before the first install stay in {plan.backup}")
    if mcp is not None:
        _report_mcp_install(mcp[0], mcp[2], mcp_backup)
    # Every install, changed or not: the package may have been upgraded since the last one.
    from continuity.agents.base.install import compile_bytecode

    for report in compile_bytecode():
        typer.echo(report.line())


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
        server_argv,
        server_entry,
    )

    if client is None:
        fail("install mcp needs --client: claude-code, codex, gemini or cursor")
    with errors():
        if print_only:
            target = mcp_target(client, scope, project)
            typer.echo(config_snippet(target, server_entry(client, server_argv(store))), nl=False)
            return
        target, _entry, plan = _mcp_plan(client, scope, project, store)
        if dry_run:
            typer.echo(plan.diff() or f"{target.path}: MCP server already registered")
            return
        backup = apply_plan(plan)
    _report_mcp_install(target, plan, backup)


def uninstall(
    target: Annotated[
        Target, typer.Argument(help="What to remove: claude-code, codex, gemini, opencode or mcp.")
    ],
    scope: Annotated[ScopeOpt, typer.Option("--scope", help="user, project or local.")] = "user",
    project: ProjectOpt = None,
    dry_run: DryRunOpt = False,
    client: ClientArg = None,
    no_mcp: NoMcpOpt = False,
) -> None:
    """Remove continuity's hooks from Claude Code's settings and its MCP server's entry,
    giving back the files from before the install when nothing else changed (everything
    else is kept). `uninstall mcp --client X` removes the MCP server's entry only."""
    from continuity.agents.base.install import apply_plan
    from continuity.agents.claude_code.install import plan_uninstall

    if target != "mcp" and client is not None:
        fail("--client goes with `uninstall mcp`")
    if _uninstall_other_agent(target, scope, project, dry_run=dry_run, no_mcp=no_mcp):
        return
    if target == "mcp":
        if client is None:
            fail("uninstall mcp needs --client: claude-code, codex, gemini, cursor or opencode")
        _uninstall_mcp(client, scope, project, dry_run)
        return
    path, within = _settings(scope, project)
    with errors():
        plan = plan_uninstall(path, within=within)
        mcp = None if no_mcp else _mcp_uninstall_plan("claude-code", scope, project)
        if dry_run:
            typer.echo(plan.diff() or f"{path}: no continuity hooks, nothing to change")
            if mcp is not None:
                typer.echo(mcp[1].diff() or f"{mcp[0].path}: no continuity MCP server")
            return
        apply_plan(plan)
        if mcp is not None:
            apply_plan(mcp[1])
    if not plan.changed:
        typer.echo(f"{path}: no continuity hooks, nothing changed")
    elif plan.after is None:
        typer.echo(f"removed continuity hooks: {path} held nothing else and was removed")
    elif plan.restores_backup:
        typer.echo(f"removed continuity hooks: {path} is as it was before the install")
    else:
        typer.echo(f"removed continuity hooks from {path}")
        if plan.backup_differs:
            typer.echo(
                f"the settings changed since the install: those from before it stay in "
                f"{plan.backup}"
            )
    if mcp is not None:
        _report_mcp_uninstall(*mcp)


def _uninstall_other_agent(
    target: Target, scope: ScopeOpt, project: Path | None, *, dry_run: bool, no_mcp: bool
) -> bool:
    """``uninstall codex|gemini|opencode`` (True), or nothing when ``target`` is another."""
    if target == "codex":
        from continuity.cli.codex_commands import uninstall_codex

        uninstall_codex(scope, project, dry_run=dry_run, no_mcp=no_mcp)
    elif target == "gemini":
        from continuity.cli.gemini_commands import uninstall_gemini

        uninstall_gemini(scope, project, dry_run=dry_run)
    elif target == "opencode":
        from continuity.cli.opencode_commands import uninstall_opencode

        uninstall_opencode(scope, project, dry_run=dry_run, mcp=not no_mcp)
    else:
        return False
    return True


def _mcp_uninstall_plan(
    client: ClientOpt, scope: ScopeOpt, project: Path | None
) -> tuple[McpTarget, InstallPlan]:
    from continuity.agents.base.mcp import mcp_target, plan_mcp_uninstall

    target = mcp_target(client, scope, project)
    return target, plan_mcp_uninstall(target)


def _uninstall_mcp(client: ClientOpt, scope: ScopeOpt, project: Path | None, dry: bool) -> None:
    from continuity.agents.base.install import apply_plan

    with errors():
        target, plan = _mcp_uninstall_plan(client, scope, project)
        if dry:
            typer.echo(plan.diff() or f"{target.path}: no continuity MCP server")
            return
        apply_plan(plan)
    _report_mcp_uninstall(target, plan)


def _report_mcp_uninstall(target: McpTarget, plan: InstallPlan) -> None:
    if not plan.changed:
        typer.echo(f"{target.path}: no continuity MCP server, nothing changed")
    elif plan.after is None:
        typer.echo(f"removed the MCP server: {target.path} held nothing else and was removed")
    elif plan.restores_backup:
        typer.echo(f"removed the MCP server: {target.path} is as it was before the install")
    else:
        typer.echo(f"removed the MCP server `continuity` from {target.path}")
        if plan.backup_differs:
            typer.echo(
                f"{target.path} changed since the install: the file from before it stays in "
                f"{plan.backup}"
            )


def _shown(path: Path) -> str:
    """A path as it can be printed: bytes of its name that are not UTF-8 escaped (``\\xff``)."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def _transcripts(paths: list[Path]) -> list[Path]:
    found: list[Path] = []
    for p in paths:
        if p.is_file():
            found.append(p.absolute())
        elif p.is_dir():
            files = sorted(p.rglob("*.jsonl"))
            # sessions before their subagents, so parents exist when children link to them
            found.extend(sorted(files, key=lambda f: ("subagents" in f.parts, str(f))))
        else:
            fail(f"no such file or folder: {_shown(p)}")
    return found


_SNIFF_BYTES: Final = 1 << 16
_SNIFF_LINES: Final = 5


def _is_record(raw: bytes) -> bool:
    """Whether a line is a JSON object with a string ``type``, as every transcript line is."""
    import msgspec

    try:
        obj = msgspec.json.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError):
        import json  # a lone surrogate escape or a broken byte: the tolerant reader's path

        try:
            obj = json.loads(raw.decode("utf-8", "replace"))
        except (ValueError, RecursionError):
            return False
    return isinstance(obj, dict) and isinstance(obj.get("type"), str)


def _is_transcript(path: Path) -> bool:
    """Whether ``path`` reads as a Claude Code transcript: one of its first lines is a
    transcript record, or it holds no line yet (a session that has not begun). Only its first
    64 KiB are read."""
    with open(path, "rb") as f:
        head = f.read(_SNIFF_BYTES)
        whole = len(head) < _SNIFF_BYTES or not f.read(1)
    lines = head.split(b"\n")
    cut = None if whole else lines.pop()  # a line the read cut short
    seen = 0
    for raw in lines:
        if not raw.strip():
            continue
        if _is_record(raw):
            return True
        seen += 1
        if seen >= _SNIFF_LINES:
            return False
    if cut is not None and cut.strip():
        # A first line longer than the read (a pasted file, a large tool output): its start.
        return seen == 0 and cut.lstrip().startswith(b"{") and b'"type"' in cut
    return seen == 0


def _sort_out(files: list[Path]) -> tuple[list[Path], list[tuple[Path, str]]]:
    """The transcripts among ``files``, and the others with the reason each is skipped."""
    todo: list[Path] = []
    skipped: list[tuple[Path, str]] = []
    for f in files:
        try:
            if not stat.S_ISREG(f.stat().st_mode):  # a FIFO would hang the read
                skipped.append((f, "not a regular file"))
            elif _is_transcript(f):
                todo.append(f)
            else:
                skipped.append((f, "not a Claude Code transcript"))
        except OSError as exc:
            skipped.append((f, f"cannot be read ({exc.strerror or exc})"))
    return todo, skipped


def _same_file(name: object, path: Path) -> bool:
    if not isinstance(name, (str, bytes)):
        return False
    return Path(os.fsdecode(name)).resolve() == path.resolve()


def ingest(
    ctx: typer.Context,
    paths: Annotated[
        list[Path] | None,
        typer.Argument(help="Transcript files or folders (default: ~/.claude/projects)."),
    ] = None,
    agent: Annotated[
        str,
        typer.Option(
            "--agent",
            help="Whose sessions: claude-code (default), codex (rollouts; default $CODEX_HOME), "
            "gemini (default ~/.gemini/tmp) or opencode (its database; default its data folder).",
        ),
    ] = "claude-code",
    session: Annotated[
        str | None,
        typer.Option("--session", help="opencode: only this session (what its plugin runs)."),
    ] = None,
) -> None:
    """Import Claude Code transcripts (past sessions), incrementally and without duplicates.

    Files that are not transcripts, or cannot be read, are skipped and named. Interrupted, it
    says where it stopped; running it again resumes, losing nothing.
    """
    if agent == "opencode":
        from continuity.cli.opencode_commands import ingest_opencode

        ingest_opencode(ctx, paths or [], session)
        return
    if session is not None:
        fail("--session goes with --agent opencode")
    if agent == "codex":
        _ingest_codex(ctx, paths)
        return
    if agent == "gemini":
        from continuity.cli.gemini_commands import ingest_gemini

        ingest_gemini(open_store(ctx, create=True), paths or [Path.home() / ".gemini" / "tmp"])
        return
    if agent != "claude-code":
        fail(f"unknown agent {agent!r} (claude-code, codex, gemini, opencode)")
    todo, skipped = _transcripts_to_ingest(paths or [Path.home() / ".claude" / "projects"])
    # Like the hooks, an import creates the store: `install` then `ingest` needs no `init`.
    run = _IngestRun(open_store(ctx, create=True), len(todo))
    try:
        _with_progress(todo, run.one)
    except KeyboardInterrupt:
        typer.echo(
            f"interrupted while ingesting {_shown(run.current or todo[0])} ({run.done} of "
            f"{count(len(todo), 'transcript')} done); what was archived is kept: "
            "run the same command again to resume",
            err=True,
        )
        raise typer.Exit(130) from None
    for f, why in [*skipped, *run.failed]:
        typer.echo(f"skipped {_shown(f)}: {why}", err=True)
    typer.echo(run.summary())
    if run.failed:
        fail(f"{count(len(run.failed), 'transcript')} could not be ingested (named above)")


def _ingest_codex(ctx: typer.Context, paths: list[Path] | None) -> None:
    """``ingest --agent codex``: Codex rollouts (files, or folders searched for them)."""
    from continuity.agents.codex import codex_home, ingest_paths, rollouts

    roots = paths or [codex_home() / "sessions", codex_home() / "archived_sessions"]
    todo = list(rollouts(p for p in roots if p.exists()))
    if not todo:
        where = ", ".join(_shown(p) for p in roots)
        fail(f"no Codex rollouts (rollout-*.jsonl, rollout-*.jsonl.zst) found in {where}")
    store = open_store(ctx, create=True)
    failed: list[tuple[Path, str]] = []
    messages = checkpoints = unknown = 0
    for path in todo:
        try:
            (report,) = ingest_paths(store, [path])
        except (OSError, ValueError) as exc:  # a damaged .zst, an unreadable file
            failed.append((path, f"{type(exc).__name__}: {exc}"))
            continue
        messages += report.messages
        checkpoints += report.checkpoints
        unknown += sum(report.unknown.values())
    for f, why in failed:
        typer.echo(f"skipped {_shown(f)}: {why}", err=True)
    typer.echo(
        f"{count(len(todo) - len(failed), 'rollout')}: {count(messages, 'new message')}, "
        f"{count(checkpoints, 'compaction')}, {count(unknown, 'line')} of kinds kept as records"
    )
    if failed:
        fail(f"{count(len(failed), 'rollout')} could not be ingested (named above)")


def _transcripts_to_ingest(paths: list[Path]) -> tuple[list[Path], list[tuple[Path, str]]]:
    """The transcripts under ``paths``, and the other files with why each is skipped; exits
    when there is no transcript to ingest."""
    files = _transcripts(paths)
    if not files:
        fail(f"no transcripts (*.jsonl) found in {', '.join(_shown(p) for p in paths)}")
    try:
        todo, skipped = _sort_out(files)
    except KeyboardInterrupt:
        typer.echo("interrupted before anything was ingested", err=True)
        raise typer.Exit(130) from None
    if not todo:
        if len(skipped) == 1:
            f, why = skipped[0]
            fail(f"{_shown(f)}: {why}; nothing was ingested")
        for f, why in skipped:
            typer.echo(f"skipped {_shown(f)}: {why}", err=True)
        fail(f"no Claude Code transcript among the {len(files)} files; nothing was ingested")
    return todo, skipped


def _with_progress(todo: list[Path], one: Callable[[Path], None]) -> None:
    """``one`` on each transcript, with a progress bar on a terminal."""
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


class _IngestRun:
    """What ``continuity ingest`` did so far: the totals of its reports, and the files it could
    not read."""

    def __init__(self, store: BaseStore, of: int) -> None:
        self.store = store
        self.of = of
        self.done = 0
        self.current: Path | None = None
        self.totals = dict.fromkeys(
            ("messages", "checkpoints", "duplicates", "repeated", "bad", "oversize"), 0
        )
        self.threads: set[str] = set()
        self.failed: list[tuple[Path, str]] = []

    def one(self, f: Path) -> None:
        """Ingest one transcript. A file that cannot be read is skipped and named; trouble with
        the store stops the run."""
        from continuity.agents.base.lines import SKIPPED_OVERSIZE
        from continuity.agents.claude_code.ingest import ingest_transcript

        self.current = f
        with errors(f" (in {_shown(f)}; {self.done} of {self.of} transcripts done before it)"):
            try:
                r = ingest_transcript(self.store, f, final=True)
            except UnicodeError:
                self.failed.append((f, "its name is not UTF-8; rename it to ingest it"))
                r = None
            except OSError as exc:
                if not _same_file(exc.filename, f):
                    raise
                self.failed.append((f, f"cannot be read ({exc.strerror or exc})"))
                r = None
        if r is not None:
            totals = self.totals
            totals["messages"] += r.messages
            totals["checkpoints"] += r.checkpoints
            totals["duplicates"] += r.duplicates
            totals["repeated"] += r.repeated
            totals["bad"] += sum(r.skipped.get(k, 0) for k in ("<not json>", "<not object>"))
            totals["oversize"] += r.skipped.get(SKIPPED_OVERSIZE, 0)
            self.threads.update(r.threads)
        self.done += 1

    def summary(self) -> str:
        from continuity.agents.base.lines import MAX_LINE_BYTES

        totals = self.totals
        return (
            f"ingested {count(self.of - len(self.failed), 'transcript')} into "
            f"{count(len(self.threads), 'thread')}: "
            f"{count(totals['messages'], 'new message')}, "
            f"{count(totals['checkpoints'], 'compaction')}, "
            f"{totals['duplicates']} already archived, {totals['bad']} unreadable lines skipped"
            + (
                f", {count(totals['oversize'], 'line')} over the {MAX_LINE_BYTES >> 20} MiB "
                "line cap skipped (not archived)"
                if totals["oversize"]
                else ""
            )
            # Not "already archived": this run archived the first of them (a line a transcript
            # holds twice, by its id).
            + (
                f", {count(totals['repeated'], 'line')} repeating an earlier line of "
                "their transcript skipped"
                if totals["repeated"]
                else ""
            )
        )


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
) -> None:
    """The archived sessions of every agent: agent, thread, project, branch, start, messages,
    compactions, title."""
    import msgspec

    from continuity.agents.base.ingest import ingest_redactor
    from continuity.agents.base.sessions import list_sessions

    name = agent_option(agent)
    folder = os.path.abspath(project) if project is not None else None
    store = open_store(ctx)
    with errors():
        found = list_sessions(store, include_agents=agents, agent=name, project=folder)
        redactor = ingest_redactor(store)
    titles = [
        redactor.redact_text(s.title)[0] if redactor is not None and s.title else s.title
        for s in found
    ]
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
    # the agent's name (one word, what --agent takes): the column splits on whitespace
    shown = [s.agent or "-" for s in found]
    width = max(len(a) for a in shown)
    id_width = max(len(s.thread_id) for s in found)
    lines = []  # one write for them all: thousands of echoes cost more than the listing
    for s, who, title in zip(found, shown, titles, strict=True):
        branch = f" ({s.git_branch})" if s.git_branch else ""
        named = f"  “{' '.join(title.split())[:80]}”" if title and title.strip() else ""
        lines.append(
            f"{who:<{width}}  {s.thread_id:<{id_width}}  {s.project or '-'}{branch}  "
            f"started {s.started}  "
            f"{count(s.messages, 'message')}, {count(s.compactions, 'compaction')}{named}"
        )
    typer.echo("\n".join(lines))


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
) -> None:
    """Run a Claude Code hook (reads the hook's JSON on stdin; never fails Claude Code)."""
    from continuity.agents.claude_code.hooks import main

    raise typer.Exit(main([event], store=ctx.obj.location))


def demo(
    ctx: typer.Context,
    temp_store: Annotated[
        bool,
        typer.Option("--temp-store", help="Use a throwaway store (deleted afterwards)."),
    ] = False,
    keep: Annotated[
        bool,
        typer.Option("--keep", help="Keep the temporary folder (the transcript, the temp store)."),
    ] = False,
) -> None:
    """Replay a scripted Claude Code session through the hooks; show what is archived and restored.

    Uses the configured store (--store, $CONTINUITY_HOME or the default; created if missing)
    with a thread of its own (cc-demo-<uuid>), or a throwaway one with --temp-store.
    """
    from continuity.demo import print_report, run_in_temp

    with errors():
        result = run_in_temp(
            None if temp_store else ctx.obj.location, keep=keep, on_recovery=report_recovery
        )
    print_report(result, sys.stdout, styled=sys.stdout.isatty())
