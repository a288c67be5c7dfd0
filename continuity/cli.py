"""The ``continuity`` command line: a thin shell over the library.

Each command opens the store, calls one or two library functions and turns library errors into
one clear line on stderr and a non-zero exit (1). Usage errors exit 2 (typer's convention).
"""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, NoReturn

import msgspec
import typer

from continuity import frames as fr
from continuity._display import describe, format_ts, recovery_line
from continuity.errors import ContinuityError
from continuity.paths import resolve_store_path
from continuity.store import Recovery, Store

__all__ = ["app"]

app = typer.Typer(
    name="continuity",
    help="An append-only, hash-chained event log for agent conversations.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@dataclass(slots=True)
class _Options:
    store_path: Path


def _fail(message: str, code: int = 1) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


@contextmanager
def _errors(suffix: str = "") -> Iterator[None]:
    """Turn a library error, or the OS refusing a file operation, into one line and exit 1."""
    try:
        yield
    except ContinuityError as exc:
        _fail(f"{exc}{suffix}")
    except BrokenPipeError:
        raise  # the reader went away (`| head`): click exits quietly
    except OSError as exc:
        _fail(f"{exc}{suffix}")


def _count(n: int, noun: str, plural: str | None = None) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {plural or noun + 's'}"


def _report_recovery(rec: Recovery) -> None:
    typer.echo(recovery_line(rec), err=True)


def _open(ctx: typer.Context, *, durable: bool = True, create: bool = False) -> Store:
    opts: _Options = ctx.obj
    with _errors():
        return Store(opts.store_path, durable=durable, create=create, on_recovery=_report_recovery)


@app.callback()
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
    ctx.obj = _Options(resolve_store_path(store))


@app.command()
def init(ctx: typer.Context) -> None:
    """Create the store (nothing happens if it already exists)."""
    opts: _Options = ctx.obj
    existed = (opts.store_path / "store.json").is_file()
    with _errors():
        Store(opts.store_path, create=True)
    typer.echo(f"{'store exists' if existed else 'created store'} at {opts.store_path}")


@app.command()
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
    """Append JSON lines from stdin as one all-or-nothing batch; print the seqs assigned.

    Each line is a frame payload {"type": ...} or the message shorthand
    {"role": "user", "text": "..."}. Blank lines are skipped.
    """
    store = _open(ctx, durable=not no_fsync)
    with _errors(" (nothing was written)"):
        handle = store.thread(thread)  # a bad thread id fails before stdin is read
    batch: list[fr.Frame] = []
    for number, raw in enumerate(sys.stdin.buffer, start=1):
        if not raw.strip():
            continue
        try:
            batch.append(fr.parse_payload(raw))
        except ContinuityError as exc:
            _fail(f"line {number}: {exc} (nothing was written)")
    if not batch:
        _fail("no frames on stdin (nothing was written)")
    with _errors(" (nothing was written)"):
        seqs = handle.append(batch, expected_seq=expect_seq)
    typer.echo("\n".join(str(s) for s in seqs))


@app.command()
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
    store = _open(ctx)
    known = fr.frame_types()
    for t in types or ():
        if t not in known:
            _fail(f"unknown frame type {t!r} (known: {', '.join(known)})")
    wanted = frozenset(types) if types else None
    if as_json:
        sys.stdout.flush()
        out = sys.stdout.buffer  # the stored bytes themselves, whatever the terminal's encoding
    elif isinstance(sys.stdout, io.TextIOWrapper):
        # A frame's text may not fit the terminal's encoding: escape it rather than crash.
        sys.stdout.reconfigure(errors="backslashreplace")
    with _errors():
        handle = store.existing_thread(thread)
        for seq, line in handle.read_lines(from_seq=from_seq, to_seq=to_seq):
            if as_json and wanted is None:
                out.write(line + b"\n")
                continue
            try:
                frame = fr.decode_frame(line)
            except msgspec.DecodeError as exc:
                _fail(f"thread {thread!r}, seq {seq}: does not decode: {exc}")
            tag = str(frame.__struct_config__.tag)
            if wanted is not None and tag not in wanted:
                continue
            if as_json:
                out.write(line + b"\n")
            else:
                label = tag.replace("_", " ")
                typer.echo(f"{seq:>6}  {format_ts(frame.ts_ms)}  {label:<27}  {describe(frame)}")
        sys.stdout.flush()


@app.command()
def verify(
    ctx: typer.Context,
    thread: Annotated[
        str | None, typer.Argument(help="Only this thread (default: the whole store).")
    ] = None,
) -> None:
    """Check every chain, referenced artifact and cache; exit 1 with a report if any is unsound."""
    from continuity.verify import verify_store

    store = _open(ctx)
    with _errors():
        ids = None if thread is None else [store.existing_thread(thread).id]
        report = verify_store(store, ids)
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
        f"{_count(report.threads, 'thread')}, {_count(report.frames, 'frame')}, "
        f"{_count(report.artifacts, 'artifact')} checked"
    )
    if not report.ok:
        typer.echo(f"FAILED: {_count(len(report.problems), 'problem')}; {summary}")
        raise typer.Exit(1)
    typer.echo(f"ok: {summary}")


@app.command("rebuild-index")
def rebuild_index(
    ctx: typer.Context,
    thread: Annotated[
        str | None, typer.Argument(help="Only this thread (default: every thread).")
    ] = None,
) -> None:
    """Delete and rebuild the caches from the logs (the result is byte-identical)."""
    from continuity.caches import rebuild_all

    store = _open(ctx)
    with _errors():
        ids = None if thread is None else [store.existing_thread(thread).id]
        if sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import Progress

            # On stderr, where the terminal is: stdout may be a pipe or a file.
            with Progress(console=Console(stderr=True), transient=True) as bar:
                task = bar.add_task("indexing", total=None)

                def step(tid: str, done: int, total: int) -> None:
                    bar.update(task, description=f"indexing {tid}", completed=done, total=total)

                results = rebuild_all(store, ids, step)
        else:
            results = rebuild_all(store, ids)
        from continuity.search_index import rebuild_search

        searched = rebuild_search(store, ids)
    frames = sum(r.frames_applied for r in results.values())
    typer.echo(
        f"rebuilt the caches of {_count(len(results), 'thread')} ({_count(frames, 'frame')})"
        + (f" and {_count(searched, 'search index', 'search indexes')}" if searched else "")
    )


@app.command()
def stats(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Counts and sizes: threads, frames, messages, checkpoints, artifacts, caches."""
    from continuity.stats import store_stats

    store = _open(ctx)
    with _errors():
        s = store_stats(store)
    if as_json:
        typer.echo(msgspec.json.encode(s).decode())
        return
    typer.echo(f"store        {store.root}")
    typer.echo(f"threads      {s.threads}")
    typer.echo(f"frames       {s.frames}")
    typer.echo(f"messages     {s.messages}")
    typer.echo(f"checkpoints  {s.checkpoints}")
    typer.echo(f"log bytes    {s.log_bytes}")
    typer.echo(f"artifacts    {s.artifacts} ({s.artifact_bytes} bytes compressed)")
    typer.echo(f"cache bytes  {s.cache_bytes}")
    typer.echo(f"quarantined  {s.quarantined}")


# The context commands live in their own module to keep this one short; importing it registers
# them on ``app``.
from continuity import cli_claude as _cli_claude  # noqa: E402, F401
from continuity import cli_context as _cli_context  # noqa: E402, F401
