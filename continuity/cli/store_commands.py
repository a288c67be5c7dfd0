"""The store commands: init, append, log, verify, rebuild-index, stats, threads."""

from __future__ import annotations

import io
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Final

import typer

from continuity.cli._common import Options, count, errors, fail, open_store, report_recovery
from continuity.cli._display import describe, format_ts, render_threads
from continuity.errors import ContinuityError, StoreNotFound

if TYPE_CHECKING:
    from continuity.store.base import BaseStore

__all__ = ["register"]


_JOBS: Final = typer.Option(
    "--jobs",
    "-j",
    min=1,
    help="Worker processes (default: one per core; 1: all in this process).",
)


def bulk_progress(what: str, *, tty: bool | None = None) -> Callable[[int, int, int], None]:
    """Progress of bulk work on stderr (stdout stays the report): on a terminal a line
    rewritten in place, at most 4 times a second, once the work is 100+ threads or a second
    long; elsewhere a line every 5 seconds once it has taken 2 seconds; nothing for a quick
    run."""
    import time

    started = time.monotonic()
    on_tty = sys.stderr.isatty() if tty is None else tty
    state = {"last": 0.0, "shown": False}

    def report(done: int, total: int, frames: int) -> None:
        now = time.monotonic()
        elapsed = now - started
        if on_tty:
            due = (total >= 100 or elapsed >= 1.0) and now - state["last"] >= 0.25
        else:
            due = elapsed >= 2.0 and now - state["last"] >= 5.0
        finished = done >= total
        if not (due or (finished and state["shown"])):
            return
        state["last"], state["shown"] = now, True
        rate = f", {frames / elapsed:,.0f} frames/s" if elapsed > 0 else ""
        line = f"{what}: {done:,}/{total:,} threads, {frames:,} frames{rate}"
        if on_tty:
            print(f"\r{line}\x1b[K", end="\n" if finished else "", file=sys.stderr, flush=True)
        else:
            print(line, file=sys.stderr, flush=True)

    return report


def register(app: typer.Typer) -> None:
    app.command("init")(init)
    app.command("append")(append)
    app.command("log")(log)
    app.command("verify")(verify)
    app.command("repair")(repair)
    app.command("rebuild-index")(rebuild_index)
    app.command("stats")(stats)
    app.command("threads")(threads)
    app.command("migrate")(migrate)


def init(ctx: typer.Context) -> None:
    """Create the store: a folder, or continuity's schema in a PostgreSQL database.

    A schema is created or migrated to this version. Nothing happens to a store that exists and
    is current."""
    from continuity.store.locate import open_store as open_location

    opts: Options = ctx.obj
    with errors():
        try:
            open_location(opts.location).close()
            existed = True
        except StoreNotFound:
            existed = False
    store = open_store(ctx, create=True)
    store.close()
    typer.echo(f"{'store exists' if existed else 'created store'} at {opts.described}")


def append(
    ctx: typer.Context,
    thread: Annotated[str, typer.Argument(help="The thread to append to (created if new).")],
    expect_seq: Annotated[
        int | None,
        typer.Option("--expect-seq", help="Fail unless the first frame gets this seq."),
    ] = None,
    no_fsync: Annotated[
        bool, typer.Option("--no-fsync", help="Skip the fsync after the batch.")
    ] = False,
) -> None:
    """Append JSON lines from stdin as one all-or-nothing batch; print their seqs.

    Each line is a frame payload {"type": ...} or the message shorthand
    {"role": "user", "text": "..."}. Blank lines are skipped.
    """
    from continuity import frames as fr

    store = open_store(ctx, durable=not no_fsync)
    with errors(" (nothing was written)"):
        handle = store.thread(thread)  # a bad thread id fails before stdin is read
    batch: list[fr.Frame] = []
    for number, raw in enumerate(sys.stdin.buffer, start=1):
        if not raw.strip():
            continue
        try:
            batch.append(fr.parse_payload(raw))
        except ContinuityError as exc:
            fail(f"line {number}: {exc} (nothing was written)")
    if not batch:
        fail("no frames on stdin (nothing was written)")
    with errors(" (nothing was written)"):
        seqs = handle.append(batch, expected_seq=expect_seq)
    typer.echo("\n".join(str(s) for s in seqs))


def log(
    ctx: typer.Context,
    thread: Annotated[str, typer.Argument(help="The thread to show.")],
    from_seq: Annotated[int, typer.Option("--from-seq", min=0, help="First seq.")] = 0,
    to_seq: Annotated[
        int | None, typer.Option("--to-seq", min=0, help="Last seq (inclusive).")
    ] = None,
    types: Annotated[
        list[str] | None,
        typer.Option("--type", help="Only frames of this type (repeatable)."),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the frames exactly as stored.")
    ] = False,
) -> None:
    """Show a thread's frames, oldest first."""
    import msgspec

    from continuity import frames as fr

    store = open_store(ctx)
    known = fr.frame_types()
    for t in types or ():
        if t not in known:
            fail(f"unknown frame type {t!r} (known: {', '.join(known)})")
    wanted = frozenset(types) if types else None
    if as_json:
        sys.stdout.flush()
        out = sys.stdout.buffer  # the stored bytes themselves, whatever the terminal's encoding
    elif isinstance(sys.stdout, io.TextIOWrapper):
        # A frame's text may not fit the terminal's encoding: escape it rather than crash.
        sys.stdout.reconfigure(errors="backslashreplace")
    from continuity.caches.catalog import check_length
    from continuity.caches.marks import is_in
    from continuity.caches.thread_index import ThreadIndex
    from continuity.context.retract import retracted_spans

    with errors():
        handle = store.existing_thread(thread)
        start: int | None = None
        # The caches and the catalog remember how far the log went: a log cut short since is
        # an error here, not a shorter answer.
        check_length(handle)
        if ThreadIndex.available(handle):
            start = ThreadIndex(handle).offset(from_seq)  # straight to the first frame
        gone = [] if as_json else retracted_spans(handle)
        for seq, line in handle.read_lines(from_seq=from_seq, to_seq=to_seq, start_offset=start):
            if as_json and wanted is None:
                out.write(line + b"\n")
                continue
            try:
                frame = fr.decode_frame(line)
            except (msgspec.DecodeError, UnicodeDecodeError) as exc:
                fail(f"thread {thread!r}, seq {seq}: does not decode: {exc}")
            tag = str(frame.__struct_config__.tag)
            if wanted is not None and tag not in wanted:
                continue
            if as_json:
                out.write(line + b"\n")
            else:
                label = tag.replace("_", " ")
                what = describe(frame)
                if isinstance(frame, fr.MessageAppended) and is_in(gone, seq):
                    what = "[retracted] " + what
                typer.echo(f"{seq:>6}  {format_ts(frame.ts_ms)}  {label:<27}  {what}")
        sys.stdout.flush()


def verify(
    ctx: typer.Context,
    thread: Annotated[
        str | None, typer.Argument(help="Only this thread (default: the whole store).")
    ] = None,
    max_problems: Annotated[
        int | None,
        typer.Option(
            "--max-problems", min=1, help="Stop after this many problems (for huge stores)."
        ),
    ] = None,
    jobs: Annotated[int | None, _JOBS] = None,
) -> None:
    """Check every frame of every log, every artifact and cache; exit 1 on any problem.

    Every problem is reported: its thread, seq, byte offset and what is wrong."""
    from continuity.maintenance.verify import verify_store

    store = open_store(ctx)
    with errors():
        chosen = None if thread is None else [store.existing_thread(thread)]
        report = verify_store(
            store, chosen, limit=max_problems, jobs=jobs, on_progress=bulk_progress("verify")
        )
    for note in report.notes:
        typer.echo(f"note: {note}")
    for rec in report.quarantined:
        typer.echo(
            f"quarantined: thread {rec.thread_id}, {rec.length} bytes from offset {rec.offset} "
            f"at {format_ts(rec.time_ms)} ({rec.reason}) -> {rec.quarantine_file}"
        )
    for problem in report.problems:
        typer.echo(f"problem: {problem}")
    summary = (
        f"{count(report.threads, 'thread')}, {count(report.frames, 'frame')}, "
        f"{count(report.artifacts, 'artifact')} checked"
    )
    if not report.ok:
        more = f" (stopped at --max-problems {max_problems})" if report.truncated else ""
        typer.echo(f"FAILED: {count(len(report.problems), 'problem')}{more}; {summary}")
        raise typer.Exit(1)
    typer.echo(f"ok: {summary}")


def repair(
    ctx: typer.Context,
    thread: Annotated[str, typer.Argument(help="The damaged thread.")],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would be moved; move nothing.")
    ] = False,
) -> None:
    """Move a damaged log's tail, from its first bad frame on, into quarantine.

    The tail is kept there, never deleted. The sound frames before it stay as they are, and the
    thread goes on after them."""
    from continuity.maintenance.verify import repair_thread

    store = open_store(ctx)
    with errors():
        handle = store.thread(thread)
        if not handle.exists() and thread not in store.stored_thread_ids():
            store.existing_thread(thread)  # the error, with suggestions
        try:
            done = repair_thread(handle, dry_run=dry_run)
        except NotImplementedError as exc:  # a backend whose damaged rows it cannot move
            fail(f"{exc}: `continuity verify` names the bad frames")
    if done is None:
        typer.echo(f"thread {thread}: every frame is sound; nothing to repair")
        return
    p = done.problem
    moved = f"{count(done.bytes_moved, 'byte')} from byte {done.offset} (the start of its batch)"
    typer.echo(f"thread {thread}: first bad frame: {p.message}")
    if done.recovery is None:
        typer.echo(
            f"would move {moved} to quarantine; {count(done.frames_kept, 'sound frame')} "
            "would stay (dry run: nothing was moved)"
        )
        return
    typer.echo(
        f"moved {moved} to {done.recovery.quarantine_file}; the thread keeps its "
        f"{count(done.frames_kept, 'sound frame')} and its caches were rebuilt"
    )


def rebuild_index(
    ctx: typer.Context,
    thread: Annotated[
        str | None, typer.Argument(help="Only this thread (default: every thread).")
    ] = None,
    jobs: Annotated[int | None, _JOBS] = None,
) -> None:
    """Delete and rebuild the caches from the logs (the result is byte-identical)."""
    from continuity.maintenance.bulk import rebuild_store

    store = open_store(ctx)
    with errors():
        chosen = None if thread is None else [store.existing_thread(thread).id]
        done = rebuild_store(store, chosen, jobs=jobs, on_progress=bulk_progress("rebuild-index"))
    frames = sum(r.frames_applied for r in done.threads.values())
    searched = done.search_indexes
    typer.echo(
        f"rebuilt the caches of {count(len(done.threads), 'thread')} ({count(frames, 'frame')})"
        + (f" and {count(searched, 'search index', 'search indexes')}" if searched else "")
    )
    with errors():
        for line in _vectors_kept(store, everything=thread is None):
            typer.echo(line)


def _vectors_kept(store: BaseStore, *, everything: bool) -> list[str]:
    """The models' vector caches are not rebuilt (minutes to hours of embedding; each record
    is checked against its log and digest on every read): the vectors of threads that are gone
    are dropped, and each kept cache is named."""
    if store.cache_dir is None or not (store.cache_dir / "vectors").is_dir():
        return []
    from continuity.retrieval.vectors import forget_vectors, orphaned_vectors, vector_caches

    if everything:
        gone = sorted({tid for tid, _m in orphaned_vectors(store, set(store.stored_thread_ids()))})
        if gone:
            forget_vectors(store, gone)
    return [
        f"kept the vectors of model {v.model} ({count(v.threads, 'thread')}; checked on every "
        "read; `continuity index --rebuild` embeds them again)"
        for v in vector_caches(store)
        if v.model is not None
    ]


def stats(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Counts and sizes: threads, frames, messages, checkpoints, artifacts, caches.

    And the sessions of each agent."""
    import msgspec

    from continuity.maintenance.stats import store_stats

    store = open_store(ctx)
    with errors():
        s = store_stats(store)
    if as_json:
        typer.echo(msgspec.json.encode(s).decode())
        return
    from continuity._text import render_stats
    from continuity.agents.table import agent_named

    def display(name: str) -> str:
        agent = agent_named(name)
        return agent.display if agent is not None else name

    counts = {
        name: value for name, value in msgspec.structs.asdict(s).items() if isinstance(value, int)
    }
    counts["redacted_threads"] = len(s.redactions_by_thread)
    sessions = list(s.sessions_by_agent.items())
    typer.echo(render_stats(ctx.obj.described, counts, sessions, display))


def threads(
    ctx: typer.Context,
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON object a line, for programs.")
    ] = False,
) -> None:
    """Every thread: its frames, last activity and kind, the most recently active last.

    The kind is what wrote the thread: codex session, claude-code subagent, …"""
    import msgspec

    from continuity.maintenance.stats import list_threads

    store = open_store(ctx)
    with errors():
        rows = list_threads(store)
    broken = [r.thread_id for r in rows if r.problem]
    if broken:  # listed with their problem below; said on stderr too, for a script to see
        names = ", ".join(broken[:5]) + (", …" if len(broken) > 5 else "")
        typer.echo(
            f"warning: {count(len(broken), 'thread')} cannot be read: a log damaged or cut "
            f"short ({names}); `continuity verify` names the problem",
            err=True,
        )
    # One write for all the lines: thousands of threads, each echoed alone, cost more than
    # reading them from the catalog.
    if as_json:
        lines = []
        for r in rows:
            shown = msgspec.structs.asdict(r)
            shown["last_active"] = format_ts(r.last_active_ms) if r.last_active_ms else "-"
            lines.append(msgspec.json.encode(dict(sorted(shown.items(), key=_json_order))))
        if lines:
            typer.echo(b"\n".join(lines).decode())
        return
    if not rows:
        typer.echo("no threads in this store yet")
        return
    typer.echo(render_threads(rows))


_FIELDS: Final = ("thread_id", "frames", "last_active", "last_active_ms", "kind")


def _json_order(item: tuple[str, object]) -> tuple[int, str]:
    """The JSON of a thread lists its key fields first, in the order the table shows them."""
    key = item[0]
    return (_FIELDS.index(key) if key in _FIELDS else len(_FIELDS), key)


def migrate(
    source: Annotated[str, typer.Argument(help="The store to copy: a folder or a URL.")],
    target: Annotated[str, typer.Argument(help="The store to copy into (created when missing).")],
    thread: Annotated[
        list[str] | None,
        typer.Option("--thread", help="Only this thread (repeatable). Default: every thread."),
    ] = None,
) -> None:
    """Copy every thread and artifact of one store into another, byte for byte.

    A folder and a PostgreSQL URL, either way. Each line is checked against the chain on its way in.
    Run it again to copy what was added since: what is there is checked and kept."""
    from continuity.maintenance.migrate import migrate_store as copy_store
    from continuity.paths import describe_store, resolve_store_location
    from continuity.store.locate import open_store as open_location

    src_at, dst_at = resolve_store_location(source), resolve_store_location(target)
    if src_at == dst_at:
        fail("the source and the destination are the same store")
    with (
        errors(),
        open_location(src_at, on_recovery=report_recovery) as src,
        open_location(dst_at, create=True, on_recovery=report_recovery) as dst,
    ):
        report = copy_store(
            src, dst, threads=thread, on_progress=lambda text: typer.echo(text, err=True)
        )
    typer.echo(
        f"migrated {count(len(report.threads), 'thread')} "
        f"({count(report.frames_copied, 'frame')} copied) and "
        f"{count(report.artifacts_copied, 'artifact')} "
        f"({report.artifacts_present} already there) "
        f"from {describe_store(src_at)} to {describe_store(dst_at)}; every thread's head "
        "matches the source's"
    )
