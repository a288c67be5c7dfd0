"""The history commands: fork (a new thread that starts from another thread at a seq) and
retract (take messages back out of the conversation; the log keeps them)."""

from __future__ import annotations

from typing import Annotated

import typer

from continuity.cli._common import count, errors, open_store

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    app.command("fork")(fork_cmd)
    app.command("retract")(retract_cmd)


def retract_cmd(
    ctx: typer.Context,
    thread: Annotated[str, typer.Argument(help="The thread.")],
    seqs: Annotated[
        list[int] | None,
        typer.Option("--seq", min=1, help="A message's seq (repeatable)."),
    ] = None,
    message_ids: Annotated[
        list[str] | None,
        typer.Option("--message-id", help="A message id: its latest live message (repeatable)."),
    ] = None,
    last: Annotated[
        bool, typer.Option("--last", help="The newest message still in the conversation.")
    ] = False,
    reason: Annotated[str, typer.Option("--reason", help="Why, for the record.")] = "",
) -> None:
    """Take messages back: compile, recall and summaries leave them out from now on.

    The log keeps every byte, and `log` shows them marked \\[retracted]. Prints the seq of the
    retraction frame."""  # \[: rich markup would eat "[retracted]"
    from continuity.context.retract import pop_message, retract

    if not seqs and not message_ids and not last:
        raise typer.BadParameter("name the messages: --seq N, --message-id ID or --last")
    if last and (seqs or message_ids):
        raise typer.BadParameter("--last takes no --seq or --message-id")
    store = open_store(ctx)
    with errors(" (nothing was written)"):
        handle = store.existing_thread(thread)
        if last:
            popped = pop_message(handle, reason=reason or "retract --last")
            if popped is None:
                typer.echo("nothing to retract: no message is left in the conversation")
                return
            head = handle.head()
            assert head is not None
            typer.echo(f"{head.seq}  retracted seq {popped.seq} ({popped.role})")
            return
        seq = retract(handle, seqs=seqs or (), message_ids=message_ids or (), reason=reason)
    if seq is None:
        typer.echo("nothing to retract: those messages are retracted already")
        return
    typer.echo(str(seq))


def fork_cmd(
    ctx: typer.Context,
    thread: Annotated[str, typer.Argument(help="The thread to fork.")],
    new_thread: Annotated[
        str, typer.Argument(help="The new thread's id (a thread that does not exist yet).")
    ],
    at: Annotated[
        int | None,
        typer.Option("--at", min=0, help="Fork at this seq (default: the thread's last frame)."),
    ] = None,
    title: Annotated[
        str | None,
        typer.Option("--title", help="The new thread's title (default: the source's; \"\" none)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Start NEW_THREAD from THREAD at a seq (--at; default: THREAD's last frame).

    THREAD's frames 1 to that seq are copied at the same seqs, and NEW_THREAD's first frame
    says where it comes from. THREAD is not changed.

    A fork cut short (a crash, Ctrl-C) is finished by running the same command again.
    """
    import msgspec

    from continuity.context.fork import fork, fork_point

    store = open_store(ctx)
    with errors():
        source = store.existing_thread(thread)
        before = store.thread(new_thread).head()  # for the report: new, resumed or done
        made = fork(source, new_thread, at_seq=at, title=title)
        point = fork_point(made)
        head = made.head()
    assert point is not None and head is not None
    had = -1 if before is None else before.seq
    copied = max(0, point.seq - max(had, 0))
    status = "created" if before is None else "resumed" if had < point.seq else "exists"
    if as_json:
        shown = {
            "thread_id": made.id,
            "status": status,
            "fork_of": msgspec.to_builtins(point),
            "copied": copied,
            "frames": head.seq + 1,
        }
        typer.echo(msgspec.json.encode(shown).decode())
        return
    where = f"{point.thread_id} at seq {point.seq} (digest {point.digest[:12]})"
    if status == "created":
        typer.echo(f"forked {where} into {made.id}: {count(copied, 'frame')} copied")
    elif status == "resumed":
        typer.echo(
            f"finished the fork of {where} into {made.id}: it stopped at seq {had}; "
            f"{count(copied, 'more frame')} copied"
        )
    else:
        typer.echo(f"{made.id} is already the fork of {where}; nothing to do")
