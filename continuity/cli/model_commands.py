"""``continuity model fetch`` and ``continuity model show``: the static-embedding model that
``search --model`` fuses with BM25 (:mod:`continuity.retrieval.vectors`, ADR 0033)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from continuity.cli._common import errors

__all__ = ["register"]

_NAME_HELP = "A model2vec model's name (org/name), default minishlab/potion-base-8M."


def register(app: typer.Typer) -> None:
    group = typer.Typer(
        name="model",
        help="The static-embedding model semantic search uses (fetch it once, show it).",
        no_args_is_help=True,
    )
    group.command("fetch")(fetch)
    group.command("show")(show)
    app.add_typer(group)


def fetch(
    name: Annotated[str | None, typer.Argument(help=_NAME_HELP, show_default=False)] = None,
    to: Annotated[
        Path | None,
        typer.Option("--to", help="The folder to put it in (default: $CONTINUITY_MODELS/...)."),
    ] = None,
    url: Annotated[
        str | None,
        typer.Option("--url", help="Where models are served (default https://huggingface.co)."),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace a model already there.")] = False,
) -> None:
    """Download a model2vec model once, check that it loads, and put it in place atomically."""
    from continuity.retrieval.models import DEFAULT_BASE_URL, DEFAULT_MODEL, fetch_model, load_model

    chosen = name or DEFAULT_MODEL
    with errors():
        folder = fetch_model(chosen, to=to, base_url=url or DEFAULT_BASE_URL, force=force)
        model = load_model(str(folder))
    typer.echo(f"fetched {chosen} into {folder} (id {model.id}, {model.dim} dimensions)")


def show(
    model: Annotated[
        str | None,
        typer.Argument(
            help="A model folder or a fetched model's name (default: $CONTINUITY_MODEL, else "
            "minishlab/potion-base-8M).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Where the model is, its id and its dimension."""
    from continuity.retrieval.models import load_model, resolve_model

    with errors():
        folder = resolve_model(model)
        loaded = load_model(str(folder))
    typer.echo(f"path: {folder}")
    typer.echo(f"id: {loaded.id}")
    typer.echo(f"dim: {loaded.dim}")
    typer.echo(f"vocabulary: {len(loaded.tokenizer.vocab)} tokens")
