"""The commands of the Claude Code adapter: install, uninstall, ingest, sessions, hook, demo."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Literal

import typer

from continuity.cli._common import count, errors, fail, open_store, report_recovery

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    app.command("install")(install)
    app.command("uninstall")(uninstall)
    app.command("ingest")(ingest)
    app.command("sessions")(sessions)
    app.command("hook")(hook)
    app.command("demo")(demo)


Target = Literal["claude-code"]
ScopeOpt = Literal["user", "project", "local"]
ProjectOpt = Annotated[
    Path | None, typer.Option("--project", help="The project folder for --scope project/local.")
]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Print the change; write nothing.")]


def _settings(scope: ScopeOpt, project: Path | None) -> tuple[Path, Path | None]:
    """The settings file of ``scope`` and the project folder its writes must stay in."""
    from continuity.claude_code.install import project_folder, settings_path

    with errors():
        within = project_folder(scope, project)
    return settings_path(scope, project), within


def install(
    ctx: typer.Context,
    target: Annotated[Target, typer.Argument(help="What to install into: claude-code.")],
    scope: Annotated[
        ScopeOpt,
        typer.Option("--scope", help="user (~/.claude), project (.claude, committed) or local."),
    ] = "user",
    project: ProjectOpt = None,
    dry_run: DryRunOpt = False,
) -> None:
    """Add continuity's hooks to Claude Code's settings (idempotent; other hooks are kept)."""
    from continuity.claude_code.install import apply_plan, plan_install
    from continuity.paths import default_store_path

    opts = ctx.obj
    path, within = _settings(scope, project)
    # Claude Code runs hooks without the installing shell's environment: name the store in the
    # command unless it is where the hook would look by itself (no CONTINUITY_HOME).
    plain_env = {k: v for k, v in os.environ.items() if k != "CONTINUITY_HOME"}
    store = opts.store_path if opts.store_path != default_store_path(plain_env) else None
    with errors():
        plan = plan_install(path, store, within=within)
        if dry_run:
            typer.echo(plan.diff() or f"{path}: already installed, nothing to change")
            return
        backup = apply_plan(plan)
    if not plan.changed:
        typer.echo(f"{path}: already installed, nothing changed")
        return
    typer.echo(f"installed continuity hooks in {path}")
    if backup is not None:
        typer.echo(f"previous settings saved to {backup}")
    elif plan.backup.is_file() and not plan.backup.is_symlink():
        typer.echo(f"the settings from before the first install stay in {plan.backup}")


def uninstall(
    target: Annotated[Target, typer.Argument(help="What to remove from: claude-code.")],
    scope: Annotated[ScopeOpt, typer.Option("--scope", help="user, project or local.")] = "user",
    project: ProjectOpt = None,
    dry_run: DryRunOpt = False,
) -> None:
    """Remove continuity's hooks from Claude Code's settings, giving back the settings from
    before the install when nothing else changed (everything else is kept)."""
    from continuity.claude_code.install import apply_plan, plan_uninstall

    path, within = _settings(scope, project)
    with errors():
        plan = plan_uninstall(path, within=within)
        if dry_run:
            typer.echo(plan.diff() or f"{path}: no continuity hooks, nothing to change")
            return
        apply_plan(plan)
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
            fail(f"no such file or folder: {p}")
    return found


def ingest(
    ctx: typer.Context,
    paths: Annotated[
        list[Path] | None,
        typer.Argument(help="Transcript files or folders (default: ~/.claude/projects)."),
    ] = None,
) -> None:
    """Import Claude Code transcripts (past sessions), incrementally and without duplicates."""
    from continuity.claude_code.ingest import ingest_transcript

    files = _transcripts(paths or [Path.home() / ".claude" / "projects"])
    if not files:
        fail("no transcripts (*.jsonl) found")
    # Like the hooks, an import creates the store: `install` then `ingest` needs no `init`.
    store = open_store(ctx, create=True)
    totals = {"messages": 0, "checkpoints": 0, "duplicates": 0, "bad": 0}
    threads: set[str] = set()

    def one(f: Path) -> None:
        with errors(f" ({f})"):
            r = ingest_transcript(store, f, final=True)
        totals["messages"] += r.messages
        totals["checkpoints"] += r.checkpoints
        totals["duplicates"] += r.duplicates
        totals["bad"] += r.skipped.get("<not json>", 0) + r.skipped.get("<not object>", 0)
        threads.update(r.threads)

    if sys.stderr.isatty():
        from rich.console import Console
        from rich.progress import Progress

        with Progress(console=Console(stderr=True), transient=True) as bar:
            task = bar.add_task("ingesting", total=len(files))
            for f in files:
                one(f)
                bar.advance(task)
    else:
        for f in files:
            one(f)
    typer.echo(
        f"ingested {count(len(files), 'transcript')} into {count(len(threads), 'thread')}: "
        f"{count(totals['messages'], 'new message')}, "
        f"{count(totals['checkpoints'], 'compaction')}, "
        f"{totals['duplicates']} already archived, {totals['bad']} unreadable lines skipped"
    )


def sessions(
    ctx: typer.Context,
    agents: Annotated[bool, typer.Option("--agents", help="Include subagent threads.")] = False,
) -> None:
    """The archived Claude Code sessions: thread, project, branch, start, messages, compactions."""
    from continuity.claude_code.sessions import list_sessions

    store = open_store(ctx)
    with errors():
        found = list_sessions(store, include_agents=agents)
    if not found:
        typer.echo("no Claude Code sessions archived yet")
        return
    for s in found:
        branch = f" ({s.git_branch})" if s.git_branch else ""
        typer.echo(
            f"{s.thread_id}  {s.project or '-'}{branch}  started {s.started}  "
            f"{count(s.messages, 'message')}, {count(s.compactions, 'compaction')}"
        )


def hook(
    ctx: typer.Context,
    event: Annotated[
        str, typer.Argument(help="session-start, user-prompt-submit, pre-compact, stop, …")
    ],
) -> None:
    """Run a Claude Code hook (reads the hook's JSON on stdin; never fails Claude Code)."""
    from continuity.claude_code.hooks import main

    raise typer.Exit(main([event], store_path=ctx.obj.store_path))


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
    from continuity.claude_code.demo import print_report, run_in_temp

    with errors():
        result = run_in_temp(
            None if temp_store else ctx.obj.store_path, keep=keep, on_recovery=report_recovery
        )
    print_report(result, sys.stdout, styled=sys.stdout.isatty())
