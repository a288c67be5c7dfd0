"""The search command (a plain one runs before typer: see :mod:`.fast_search`)."""

from __future__ import annotations

from typing import Annotated

import typer

from continuity.cli._common import agent_option, errors, fail, open_store
from continuity.cli.embedding import embedding_progress, kept_on_interrupt, model_for
from continuity.cli.fast_search import K_MAX, hit_agents, print_hits, progress_on_stderr

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    app.command("search")(search)


def search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="What to look for (words, paths, commands).")],
    thread: Annotated[str | None, typer.Option("--thread", help="Only this thread.")] = None,
    project: Annotated[
        str | None, typer.Option("--project", help="Only threads of this project (its cwd).")
    ] = None,
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent", help="Only threads this agent wrote (claude-code, codex, gemini, opencode)."
        ),
    ] = None,
    k: Annotated[int, typer.Option("--k", min=1, max=K_MAX, help="How many hits.")] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="The hits as JSON lines.")] = False,
    rerank: Annotated[
        bool,
        typer.Option("--rerank", hidden=True, help="Retired: use --model (ADR 0032)."),
    ] = False,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            envvar="CONTINUITY_MODEL",
            metavar="PATH|NAME",
            help="Fuse BM25 with this model's semantic hits (a model folder, or a name fetched "
            "by `continuity model fetch`; default: the store's, `continuity model use`).",
            show_default=False,
        ),
    ] = None,
    jobs: Annotated[
        int | None,
        typer.Option(
            "--jobs",
            "-j",
            min=1,
            help="Worker processes embedding what the model's vector cache lacks "
            "(default: one per core, at most 8).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """The best hits for QUERY across every thread: thread, seq, time, role, snippet."""
    from continuity.retrieval.embed_workers import default_jobs
    from continuity.retrieval.search import Embedding, search as run_search

    if rerank:
        fail(
            "--rerank was retired: re-ranking by hashed features made results worse (ADR 0032); "
            "for meaning rather than words, fuse a model: `continuity model fetch`, then "
            "`continuity search QUERY --model NAME`"
        )
    name = agent_option(agent)
    if model is not None:  # a model that is not there is said before the store is opened
        from continuity.retrieval.models import resolve_model

        with errors():
            resolve_model(model)
    store = open_store(ctx)
    embedder = model_for(store, model)
    damage: list[str] = []
    how = Embedding(progress=embedding_progress(), jobs=jobs or default_jobs())
    with errors(), kept_on_interrupt():
        hits = run_search(
            store,
            query,
            thread=thread,
            project=project,
            agent=name,
            k=k,
            embedder=embedder,
            on_damage=damage.append,
            progress=progress_on_stderr(),
            embedding=how,
        )
        agents = hit_agents(store, hits) if as_json else None
    print_hits(hits, query, as_json=as_json, write=typer.echo, agents=agents)
    for what in damage:  # an answer with a known gap is shown with the gap named, like compile's
        typer.echo(f"warning: {what}", err=True)
