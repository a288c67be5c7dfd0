"""CLI commands for what the model sees: compile, checkpoint, compact, decisions.

Registered on :data:`continuity.cli.app`; like the rest of the CLI, each command calls the
library and turns its errors into one line and exit 1.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Literal

import typer

from continuity import frames as fr
from continuity._display import format_ts
from continuity._search_cli import K_MAX, print_hits
from continuity.cli import _count, _errors, _fail, _open, app

__all__: list[str] = []

_MAX_SUMMARY_BYTES = 4 << 20


def _summaries(n: int) -> str:
    return "1 summary" if n == 1 else f"{n} summaries"


def _anchor(value: str | None) -> int | str | None:
    if value is None:
        return None
    return int(value) if value.isdigit() else value


@app.command("compile")
def compile_cmd(
    ctx: typer.Context,
    thread: Annotated[str, typer.Argument(help="The thread to compile.")],
    anchor: Annotated[
        str | None,
        typer.Option(
            "--anchor", help="A seq or a message id (default: the latest frame that matters)."
        ),
    ] = None,
    fmt: Annotated[
        Literal["json", "anthropic", "openai", "text"],
        typer.Option("--format", help="json (the bundle), anthropic, openai or text."),
    ] = "json",
    budget_tokens: Annotated[
        int | None, typer.Option("--budget-tokens", min=1, help="Token budget of the bundle.")
    ] = None,
    recent: Annotated[
        int, typer.Option("--recent", min=0, help="At most this many recent messages.")
    ] = 16,
    max_summaries: Annotated[
        int, typer.Option("--max-summaries", min=0, help="At most this many summaries.")
    ] = 3,
    keep_tool_outputs: Annotated[
        int | None,
        typer.Option(
            "--keep-tool-outputs", min=0, help="Keep this many newest tool outputs whole."
        ),
    ] = None,
    max_chars: Annotated[
        int | None,
        typer.Option("--max-chars", min=1, help="Character budget of the text format."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show the selection without logging it.")
    ] = False,
    recall: Annotated[
        str | None,
        typer.Option(
            "--recall",
            help="Add what a search for this text finds from before the summaries "
            "(@anchor: search for the anchor message's text).",
        ),
    ] = None,
    recall_budget_tokens: Annotated[
        int | None,
        typer.Option("--recall-budget-tokens", min=1, help="Token budget of recalled items."),
    ] = None,
) -> None:
    """Compile the thread's next context; log the selection (unless --dry-run)."""
    from continuity.compiler import compile_context
    from continuity.render import render

    store = _open(ctx)
    limits = fr.Limits(
        recent_messages=recent,
        max_summary_refs=max_summaries,
        budget_tokens=budget_tokens,
        keep_tool_outputs=keep_tool_outputs,
        recall_budget_tokens=recall_budget_tokens,
    )
    if recall is not None and not recall.strip():
        _fail("--recall needs a query (or @anchor)", code=2)
    with _errors():
        result = compile_context(
            store,
            thread,
            anchor=_anchor(anchor),
            limits=limits,
            log=not dry_run,
            recall=True if recall == "@anchor" else recall,
        )
    kwargs = {"max_chars": max_chars} if fmt == "text" and max_chars is not None else {}
    typer.echo(render(result.bundle, fmt, **kwargs))
    where = f"logged at seq {result.decision.seq}" if result.logged else "not logged (dry run)"
    typer.echo(
        f"{result.bundle.strategy}: {_summaries(len(result.bundle.summaries))}, "
        f"{_count(len(result.bundle.messages), 'message')}, ~{result.bundle.tokens} tokens; "
        f"bundle {result.bundle_id}; {where}",
        err=True,
    )


def _read_summary(path: str) -> str:
    try:
        data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as exc:
        _fail(f"cannot read summary file: {exc}")
    if len(data) > _MAX_SUMMARY_BYTES:
        _fail(f"summary file is {len(data)} bytes; the limit is {_MAX_SUMMARY_BYTES}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        _fail(f"summary file is not UTF-8 text: {exc}")
    if not text.strip():
        _fail("summary file is empty")
    if "\x00" in text:
        _fail("summary file contains NUL bytes: not a text summary")
    return text


@app.command()
def checkpoint(
    ctx: typer.Context,
    thread: Annotated[str, typer.Argument(help="The thread to checkpoint.")],
    to_seq: Annotated[
        int, typer.Option("--to-seq", min=0, help="The summary covers the thread up to here.")
    ],
    summary_file: Annotated[
        str | None,
        typer.Option(
            "--summary-file",
            help="A summary written by a person or an LLM (- for stdin); "
            "default: the built-in extractive summarizer.",
        ),
    ] = None,
    produced_by: Annotated[
        str | None, typer.Option("--produced-by", help="Who wrote the summary.")
    ] = None,
) -> None:
    """Record a cumulative summary of the thread through --to-seq as a checkpoint."""
    from continuity.compaction import create_checkpoint, pair_safe_cut
    from continuity.sources import open_source

    store = _open(ctx)
    text = _read_summary(summary_file) if summary_file is not None else None
    with _errors():
        store.existing_thread(thread)
        cut = pair_safe_cut(open_source(store, thread), to_seq)
        if cut != to_seq:
            typer.echo(
                f"note: to_seq {to_seq} moved to {cut}, the last message there "
                "(a checkpoint never separates a tool call from its result)",
                err=True,
            )
        frame = create_checkpoint(store, thread, cut, text=text, produced_by=produced_by)
    typer.echo(
        f"checkpoint {frame.checkpoint_id} at seq {frame.seq}: to_seq {frame.to_seq}, "
        f"summary {frame.summary_artifact_id}"
    )


@app.command()
def compact(
    ctx: typer.Context,
    thread: Annotated[str, typer.Argument(help="The thread to compact.")],
    stride: Annotated[
        int | None, typer.Option("--stride", min=1, help="A checkpoint every N messages.")
    ] = None,
    token_threshold: Annotated[
        int | None,
        typer.Option(
            "--token-threshold",
            min=1,
            help="A checkpoint when the messages no summary covers exceed T tokens.",
        ),
    ] = None,
) -> None:
    """Plan the checkpoints a cut rule calls for and create them, as one logged job."""
    from continuity.compaction import StrideMessages, TokenThreshold, run_compaction

    if (stride is None) == (token_threshold is None):
        _fail("give exactly one of --stride N or --token-threshold T", code=2)
    rule = StrideMessages(stride) if stride is not None else TokenThreshold(token_threshold or 0)
    store = _open(ctx)
    with _errors():
        store.existing_thread(thread)
        result = run_compaction(store, thread, rule)
    if result.status == "nothing_to_do":
        typer.echo(f"nothing to do: every cut {rule.id} calls for is checkpointed")
        return
    for cp in result.checkpoints:
        typer.echo(f"checkpoint at seq {cp.seq}: to_seq {cp.to_seq} ({cp.cut_rule_id})")
    if result.status != "succeeded":
        _fail(
            f"compaction job {result.job_id} failed after "
            f"{_count(len(result.checkpoints), 'checkpoint')}: {result.error}"
        )
    typer.echo(f"job {result.job_id}: {_count(len(result.checkpoints), 'checkpoint')} created")


@app.command()
def decisions(
    ctx: typer.Context,
    thread: Annotated[str, typer.Argument(help="The thread whose decisions to show.")],
    limit: Annotated[int, typer.Option("--limit", min=1, help="How many, newest last.")] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="The frames as JSON lines.")] = False,
) -> None:
    """The recent context selection decisions of a thread, readable."""
    store = _open(ctx)
    with _errors():
        found = store.existing_thread(thread).tail(limit, types=["context_selection_decided"])
    if not found:
        typer.echo(f"no selection decisions in thread {thread}")
        return
    for d in found:
        assert isinstance(d, fr.ContextSelectionDecided)
        if as_json:  # the frame exactly as stored, like `log --json`
            handle = store.thread(thread)
            for _seq, line in handle.read_lines(from_seq=d.seq, to_seq=d.seq):
                typer.echo(line.decode())
            continue
        tos = ", ".join(str(c.to_seq) for c in d.checkpoints) or "none"
        window = (
            f"{d.window_from_seq}..{d.window_to_seq} ({d.window_messages})"
            if d.window_from_seq is not None
            else "empty"
        )
        typer.echo(f"seq {d.seq}  {format_ts(d.ts_ms)}  {d.strategy}")
        typer.echo(f"  anchor {d.anchor_seq}  summaries to_seq [{tos}]  window {window}")
        typer.echo(f"  ~{d.tokens} tokens  bundle {d.bundle_artifact_id}")
        for reason in d.reasons:
            typer.echo(f"  - {reason}")
        for reset in d.resets:
            typer.echo(f"  ! {reset}")


@app.command()
def search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="What to look for (words, paths, commands).")],
    thread: Annotated[str | None, typer.Option("--thread", help="Only this thread.")] = None,
    project: Annotated[
        str | None, typer.Option("--project", help="Only threads of this project (its cwd).")
    ] = None,
    k: Annotated[int, typer.Option("--k", min=1, max=K_MAX, help="How many hits.")] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="The hits as JSON lines.")] = False,
    rerank: Annotated[
        bool, typer.Option("--rerank", help="Re-rank by hashed-feature vector similarity.")
    ] = False,
) -> None:
    """The best hits for QUERY across every thread: thread, seq, time, role and a snippet."""
    from continuity.search import HashedEmbedder
    from continuity.search import search as run_search

    store = _open(ctx)
    with _errors():
        hits = run_search(
            store,
            query,
            thread=thread,
            project=project,
            k=k,
            embedder=HashedEmbedder() if rerank else None,
        )
    print_hits(hits, query, as_json=as_json, write=typer.echo)
