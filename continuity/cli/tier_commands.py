"""The cold tier (ADR 0057): ``continuity tier`` moves the old part of logs into compressed
segments, losslessly."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from continuity.cli._common import count, errors, fail, open_store

if TYPE_CHECKING:
    from continuity.maintenance.tier import Tiered

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    app.command("tier")(tier)


def _size(n: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def _line(t: Tiered, dry_run: bool, min_bytes: int) -> str:
    plan = t.plan
    assert plan is not None
    what = f"frames {plan.first_seq:,}-{plan.last_seq:,} ({_size(plan.bytes)})"
    if t.moved is not None:
        ratio = plan.bytes / max(t.moved.stored, 1)
        line = f"tiered thread {plan.thread_id}: {what} into {_size(t.moved.stored)} ({ratio:.1f}x)"
        if t.moved.not_freed:
            line += f"; the disk blocks stay: {t.moved.not_freed}"
        return line
    if dry_run and plan.bytes >= min_bytes:
        return f"would tier thread {plan.thread_id}: {what}"
    return f"left thread {plan.thread_id}: {what} is under --min-size"


def tier(
    ctx: typer.Context,
    threads: Annotated[
        list[str] | None, typer.Argument(help="The threads to tier (or --all).", show_default=False)
    ] = None,
    all_threads: Annotated[bool, typer.Option("--all", help="Every thread of the store.")] = False,
    older_than: Annotated[
        str,
        typer.Option("--older-than", help="Only frames older than this: 30d, 12w, 6m, 1y."),
    ] = "30d",
    keep_frames: Annotated[
        int,
        typer.Option("--keep-frames", help="The newest frames of each log always stay.", min=0),
    ] = 2_000,
    min_size: Annotated[
        str,
        typer.Option("--min-size", help="Leave a cold stretch smaller than this: 1MB, 512KB, 0."),
    ] = "1MB",
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would move; move nothing.")
    ] = False,
) -> None:
    """Move the old part of logs into compressed segment files (the cold tier).

    Nothing is lost or rewritten: every read (log, compile, search, verify, the viewer, migrate)
    sees the same bytes, appends go on as before, and the chain verifies as before; the old part
    takes a fraction of the disk. The folder store only."""
    from continuity.maintenance.forget import parse_duration
    from continuity.maintenance.tier import tier_threads
    from continuity.store.base import now_ms

    try:
        age = parse_duration(older_than)
    except ValueError as exc:
        fail(str(exc), 2)
    min_bytes = _parse_size(min_size)
    if all_threads == bool(threads):
        fail("name the threads to tier, or give --all", 2)
    store = open_store(ctx)
    results: list[Tiered] = []

    def told(t: Tiered) -> None:
        if t.plan is not None:
            typer.echo(_line(t, dry_run, min_bytes))

    with errors():
        ids = store.threads() if all_threads else list(threads or [])
        for tid in ids:
            store.existing_thread(tid)  # an unknown id fails before anything moves
        results = tier_threads(
            store,
            ids,
            older_than_ms=age,
            now_ms=now_ms(),
            keep_frames=keep_frames,
            min_bytes=min_bytes,
            dry_run=dry_run,
            on_thread=told,
        )
    moved = [t for t in results if t.moved is not None]
    raw = sum(t.plan.bytes for t in moved if t.plan is not None)
    stored = sum(t.moved.stored for t in moved if t.moved is not None)
    if dry_run:
        typer.echo("dry run: nothing was moved")
    elif moved:
        typer.echo(
            f"tiered {count(len(moved), 'thread')}: {_size(raw)} of logs into {_size(stored)}"
        )
    else:
        typer.echo(
            f"nothing to tier: no stretch of {_size(min_bytes)} or more older than {older_than}"
        )


def _parse_size(text: str) -> int:
    t = text.strip().upper().replace(" ", "")
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10), ("B", 1)):
        if t.endswith(unit) and t[: -len(unit)].isdigit():
            return int(t[: -len(unit)]) * scale
    if t.isdigit():
        return int(t)
    fail(f"bad size {text!r}: use a whole number and KB, MB or GB (512KB, 1MB), or 0", 2)
