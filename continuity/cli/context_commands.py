"""The commands for what the model sees: compile, checkpoint, compact, decisions."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Literal

import typer

from continuity.cli._common import count, errors, fail, open_store
from continuity.cli._display import format_ts

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    app.command("compile")(compile_cmd)
    app.command("checkpoint")(checkpoint)
    app.command("compact")(compact)
    app.command("decisions")(decisions)


_MAX_SUMMARY_BYTES = 4 << 20


def _summaries(n: int) -> str:
    return "1 summary" if n == 1 else f"{n} summaries"


def _anchor(value: str | None) -> int | str | None:
    if value is None:
        return None
    return int(value) if value.isdigit() else value


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
        Literal["json", "anthropic", "openai", "openai-responses", "text"],
        typer.Option(
            "--format",
            help="json (the bundle), anthropic, openai (Chat Completions), "
            "openai-responses or text.",
        ),
    ] = "json",
    budget_tokens: Annotated[
        int | None,
        typer.Option(
            "--budget-tokens",
            min=1,
            help="Token budget of the bundle (default: 100000; --no-budget for none).",
        ),
    ] = None,
    no_budget: Annotated[
        bool, typer.Option("--no-budget", help="Compile without a token budget.")
    ] = False,
    recent: Annotated[
        int, typer.Option("--recent", min=0, help="At most this many recent messages.")
    ] = 16,
    min_recent: Annotated[
        int,
        typer.Option(
            "--min-recent",
            min=0,
            help="At least this many raw messages, even where a summary covers them.",
        ),
    ] = 0,
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
    """Compile the thread's next context; log the selection (unless --dry-run).

    The bundle's notes (a summary that cannot be read, a message elided) are printed on stderr
    as warnings; the exit code stays 0 when a bundle was compiled. Limits too small for the
    latest user turn and the tool exchange in flight are an error naming the limit."""
    from continuity import frames as fr
    from continuity.context.compiler import DEFAULT_BUDGET_TOKENS, compile_context
    from continuity.context.render import render

    if no_budget and budget_tokens is not None:
        fail("give --budget-tokens N or --no-budget, not both", code=2)
    store = open_store(ctx)
    limits = fr.Limits(
        recent_messages=recent,
        min_recent=min_recent,
        max_summary_refs=max_summaries,
        budget_tokens=None if no_budget else budget_tokens or DEFAULT_BUDGET_TOKENS,
        keep_tool_outputs=keep_tool_outputs,
        recall_budget_tokens=recall_budget_tokens,
    )
    if min_recent > recent:
        fail(f"--min-recent {min_recent} is more than --recent {recent}", code=2)
    if recall is not None and not recall.strip():
        fail("--recall needs a query (or @anchor)", code=2)
    fuser = None
    if recall is not None:  # the store's model, when it has one (`continuity model use`)
        from continuity.cli.embedding import model_for

        embedder = model_for(store, None)
        if embedder is not None:
            from continuity.retrieval.fusion import prefix_fuser

            fuser = prefix_fuser(embedder)
    with errors():
        result = compile_context(
            store,
            thread,
            anchor=_anchor(anchor),
            limits=limits,
            log=not dry_run,
            recall=True if recall == "@anchor" else recall,
            recall_model=fuser,
        )
    kwargs = {"max_chars": max_chars} if fmt == "text" and max_chars is not None else {}
    typer.echo(render(result.bundle, fmt, **kwargs))
    for note in result.bundle.notes:
        typer.echo(f"warning: {note}", err=True)
    where = f"logged at seq {result.decision.seq}" if result.logged else "not logged (dry run)"
    typer.echo(
        f"{result.bundle.strategy}: {_summaries(len(result.bundle.summaries))}, "
        f"{count(len(result.bundle.messages), 'message')}, ~{result.bundle.tokens} tokens; "
        f"bundle {result.bundle_id}; {where}",
        err=True,
    )


def _read_summary(path: str) -> str:
    try:
        data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as exc:
        fail(f"cannot read summary file: {exc}")
    if len(data) > _MAX_SUMMARY_BYTES:
        fail(f"summary file is {len(data)} bytes; the limit is {_MAX_SUMMARY_BYTES}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        fail(f"summary file is not UTF-8 text: {exc}")
    if not text.strip():
        fail("summary file is empty")
    if "\x00" in text:
        fail("summary file contains NUL bytes: not a text summary")
    return text


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
    from continuity.context.compaction import create_checkpoint, pair_safe_cut
    from continuity.context.sources import open_source

    store = open_store(ctx)
    text = _read_summary(summary_file) if summary_file is not None else None
    with errors():
        handle = store.existing_thread(thread)
        cut = pair_safe_cut(open_source(handle), to_seq)
        if cut != to_seq:
            typer.echo(
                f"note: to_seq {to_seq} moved to {cut}, the last message there "
                "(a checkpoint never separates a tool call from its result)",
                err=True,
            )
        frame = create_checkpoint(handle, cut, text=text, produced_by=produced_by)
    typer.echo(
        f"checkpoint {frame.checkpoint_id} at seq {frame.seq}: to_seq {frame.to_seq}, "
        f"summary {frame.summary_artifact_id}"
    )


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
    from continuity.context.compaction import StrideMessages, TokenThreshold, run_compaction

    if (stride is None) == (token_threshold is None):
        fail("give exactly one of --stride N or --token-threshold T", code=2)
    rule = StrideMessages(stride) if stride is not None else TokenThreshold(token_threshold or 0)
    store = open_store(ctx)
    with errors():
        result = run_compaction(store.existing_thread(thread), rule)
    if result.status == "nothing_to_do":
        typer.echo(f"nothing to do: every cut {rule.id} calls for is checkpointed")
        return
    for cp in result.checkpoints:
        typer.echo(f"checkpoint at seq {cp.seq}: to_seq {cp.to_seq} ({cp.cut_rule_id})")
    if result.status != "succeeded":
        fail(
            f"compaction job {result.job_id} failed after "
            f"{count(len(result.checkpoints), 'checkpoint')}: {result.error}"
        )
    typer.echo(f"job {result.job_id}: {count(len(result.checkpoints), 'checkpoint')} created")


def decisions(
    ctx: typer.Context,
    thread: Annotated[str, typer.Argument(help="The thread whose decisions to show.")],
    limit: Annotated[int, typer.Option("--limit", min=1, help="How many, newest last.")] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="The frames as JSON lines.")] = False,
) -> None:
    """The recent context selection decisions of a thread, readable."""
    from continuity import frames as fr

    store = open_store(ctx)
    with errors():
        handle = store.existing_thread(thread)
        found = handle.tail(
            limit, types=["context_selection_decided", "context_selection_repeated"]
        )
    if not found:
        typer.echo(f"no selection decisions in thread {thread}")
        return
    for d in found:
        if as_json:  # the frame exactly as stored, like `log --json`
            for _seq, line in handle.read_lines(from_seq=d.seq, to_seq=d.seq):
                typer.echo(line.decode())
            continue
        if isinstance(d, fr.ContextSelectionRepeated):
            typer.echo(
                f"seq {d.seq}  {format_ts(d.ts_ms)}  repeats the decision at seq {d.decision_seq}"
            )
            typer.echo(f"  bundle {d.bundle_artifact_id}")
            continue
        assert isinstance(d, fr.ContextSelectionDecided)
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
