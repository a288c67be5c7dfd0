"""``continuity model fetch`` and ``continuity model show``: the model (a BERT-family sentence
encoder or a static-embedding model) that ``search --model`` fuses with BM25
(:mod:`continuity.retrieval.vectors`, ADR 0033); ``fetch`` also imports a local folder or
archive."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from continuity.cli._common import errors

__all__ = ["register"]

_NAME_HELP = (
    "A model2vec model's name (org/name), default minishlab/potion-base-8M; or a local model "
    "folder or archive (.zip, .whl, .tar.gz) holding one, to import."
)


def register(app: typer.Typer) -> None:
    group = typer.Typer(
        name="model",
        help="The model semantic search uses (fetch or import it once, show it).",
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
    as_name: Annotated[
        str | None,
        typer.Option("--name", help="The name an imported model gets (default: its folder's)."),
    ] = None,
) -> None:
    """Download a model2vec model once, or import a local model folder or archive; check
    that it loads, and put it in place atomically."""
    from continuity.retrieval.models import (
        DEFAULT_BASE_URL,
        DEFAULT_MODEL,
        fetch_model,
        import_model,
        load_model,
    )

    chosen = name or DEFAULT_MODEL
    local = Path(chosen).expanduser()
    with errors():
        if local.exists() or chosen.endswith((".zip", ".whl", ".tar.gz", ".tgz")):
            folder = import_model(local, as_name, to=to, force=force)
            verb = "imported"
        else:
            folder = fetch_model(chosen, to=to, base_url=url or DEFAULT_BASE_URL, force=force)
            verb = "fetched"
        model = load_model(str(folder))
    typer.echo(f"{verb} {chosen} into {folder} (id {model.id}, {model.dim} dimensions)")


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
    from continuity.retrieval.bert import BertEmbedder
    from continuity.retrieval.models import load_model, resolve_model

    with errors():
        folder = resolve_model(model)
        loaded = load_model(str(folder))
    typer.echo(f"path: {folder}")
    typer.echo(f"id: {loaded.id}")
    typer.echo(f"dim: {loaded.dim}")
    typer.echo(f"vocabulary: {len(loaded.tokenizer.vocab)} tokens")
    if isinstance(loaded, BertEmbedder):
        typer.echo(f"kind: sentence encoder, {loaded.pooling} pooling, {loaded.max_tokens} tokens")
        typer.echo(f"query prefix: {loaded.query_prefix!r}")
        typer.echo(f"document prefix: {loaded.document_prefix!r}")
    else:
        typer.echo("kind: static embeddings")
