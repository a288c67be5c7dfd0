"""Forgetting (ADR 0040): ``continuity delete THREAD`` and ``continuity prune --older-than``."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Annotated

import typer

from continuity.cli._common import agent_option, count, errors, fail, open_store
from continuity.cli._display import format_ts

if TYPE_CHECKING:
    from continuity.maintenance.forget import DeletionPlan, Forgotten

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    app.command("delete")(delete)
    app.command("prune")(prune)


_YES = typer.Option("--yes", "-y", help="Delete without asking.")
_DRY = typer.Option("--dry-run", help="Say what would go; remove nothing.")
_VACUUM = typer.Option(
    "--vacuum",
    help="Then rewrite the store's files so the deleted text is gone from them, not only "
    "unreachable (PostgreSQL: VACUUM FULL of every table, which blocks writes while it runs, "
    "and a checkpoint).",
)


def _show_plan(plans: list[DeletionPlan], what: str) -> None:
    frames = sum(p.frames for p in plans)
    size = sum(p.bytes for p in plans)
    artifacts = sorted({a for p in plans for a in p.artifacts})
    kept = sorted({a for p in plans for a in p.kept} - set(artifacts))
    for p in plans:
        typer.echo(f"{what} thread {p.thread_id}: {count(p.frames, 'frame')}, {p.bytes:,} bytes")
    line = (
        f"{what} {count(len(plans), 'thread')}, {count(frames, 'frame')}, {size:,} bytes of logs, "
        f"{count(len(artifacts), 'artifact')}"
    )
    if kept:
        line += f" ({count(len(kept), 'artifact')} other threads use stay)"
    typer.echo(line)


def _forget(ctx: typer.Context, ids: list[str], reason: str, *, vacuum: bool = False) -> None:
    from continuity.maintenance.forget import forget_threads

    store = open_store(ctx)
    with errors():
        done = forget_threads(store, ids, reason=reason)
    _say_forgotten(done)
    if vacuum:
        with errors():
            said = store.reclaim_space()
        for line in said or ["--vacuum: nothing to rewrite (deleting removed the files)"]:
            typer.echo(line)


def _say_forgotten(done: list[Forgotten]) -> None:
    for f in done:
        t = f.report.tombstone
        how = "finished deleting" if f.report.finished_earlier else "deleted"
        typer.echo(
            f"{how} thread {t.thread_id}: {count(t.frames, 'frame')}, {t.bytes:,} bytes, "
            f"{count(len(f.artifacts), 'artifact')} removed"
            + (f", {len(f.kept)} kept (other threads use them)" if f.kept else "")
            + f"; tombstone at {format_ts(t.time_ms)}"
        )


def delete(
    ctx: typer.Context,
    thread: Annotated[str, typer.Argument(help="The thread to delete, with all derived data.")],
    yes: Annotated[bool, _YES] = False,
    dry_run: Annotated[bool, _DRY] = False,
    vacuum: Annotated[bool, _VACUUM] = False,
) -> None:
    """Delete a thread, and the artifacts no other thread uses.

    Its log, caches, search entries and vectors go with it. A tombstone records what went and when;
    the id is never written again. On PostgreSQL the rows' bytes stay in the server's files until
    pages are rewritten: --vacuum rewrites them."""
    from continuity.maintenance.forget import plan_deletion

    store = open_store(ctx)
    with errors():
        handle = store.thread(thread)
        if not handle.exists():
            if store.tombstone_of(thread) is None:
                store.existing_thread(thread)  # the error, with suggestions
            if dry_run:
                typer.echo(f"thread {thread} is deleted already (a tombstone); nothing to remove")
                return
            _forget(ctx, [thread], "delete", vacuum=vacuum)  # finishes a deletion cut short
            return
        plans = plan_deletion(store, [thread])
    if dry_run:
        _show_plan(plans, "would delete")
        typer.echo("dry run: nothing was removed")
        return
    if not yes and not typer.confirm(f"delete thread {thread} for good?", default=False):
        fail("nothing was deleted")
    _forget(ctx, [thread], "delete", vacuum=vacuum)


def prune(
    ctx: typer.Context,
    older_than: Annotated[
        str,
        typer.Option(
            "--older-than", help="Threads last active longer ago than this: 90d, 12w, 6m, 1y."
        ),
    ],
    agent: Annotated[
        str | None, typer.Option("--agent", help="Only this agent's sessions.")
    ] = None,
    project: Annotated[
        str | None, typer.Option("--project", help="Only threads of this project folder.")
    ] = None,
    keep_summaries: Annotated[
        bool,
        typer.Option(
            "--keep-summaries",
            help="Keep each thread's summary as a thread of its own, <id>.summary.",
        ),
    ] = False,
    dry_run: Annotated[bool, _DRY] = False,
    yes: Annotated[bool, _YES] = False,
    vacuum: Annotated[bool, _VACUUM] = False,
) -> None:
    """Delete every thread whose last activity is older than --older-than.

    Each as `delete` does, leaving a tombstone. With --keep-summaries, each thread's cumulative
    summary (its newest checkpoint, or one made now) is kept first as a small thread of its own.
    Needs --yes unless --dry-run."""
    from continuity.maintenance.forget import parse_duration, plan_deletion, stale_threads
    from continuity.store.base import now_ms

    try:
        age = parse_duration(older_than)
    except ValueError as exc:
        fail(str(exc), 2)
    name = agent_option(agent)
    folder = os.path.abspath(project) if project is not None else None
    if not dry_run and not yes:
        fail("prune deletes threads for good: add --yes (or look first with --dry-run)", 2)
    store = open_store(ctx)
    with errors():
        found = stale_threads(store, age, now_ms=now_ms(), agent=name, project=folder)
        if keep_summaries:  # the summaries kept by an earlier prune are what is kept
            from continuity.maintenance.retain import is_summary_thread

            found = [(tid, ms) for tid, ms in found if not is_summary_thread(store, tid)]
        if not found:
            typer.echo(f"no thread was last active more than {older_than} ago")
            return
        if dry_run:
            _show_plan(plan_deletion(store, [tid for tid, _ms in found]), "would delete")
            if keep_summaries:
                typer.echo(f"would keep {count(len(found), 'summary', 'summaries')} first")
            typer.echo("dry run: nothing was removed")
            return
        if keep_summaries:
            from continuity.maintenance.retain import keep_summaries as keep

            for k in keep(store, [tid for tid, _ms in found], now_ms=now_ms()):
                how = "made now" if k.made_now else "its newest checkpoint"
                typer.echo(
                    f"kept the summary of {k.thread_id} through seq {k.to_seq} ({how}) "
                    f"as thread {k.summary_thread_id}"
                )
    _forget(ctx, [tid for tid, _ms in found], f"prune --older-than {older_than}", vacuum=vacuum)
