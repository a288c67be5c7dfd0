"""``continuity model fetch|show|use`` and ``continuity index``: the model (a BERT-family
sentence encoder or a static-embedding model) that search fuses with BM25
(:mod:`continuity.retrieval.vectors`, ADR 0033; ``fetch`` also imports a local folder or
archive), the store's choice of it (:mod:`continuity.retrieval.settings`) and its vectors built
ahead of a search."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from continuity.cli._common import errors, fail, open_store
from continuity.cli.embedding import embedding_progress, kept_on_interrupt, model_for

__all__ = ["register"]

_NAME_HELP = (
    "A model's name on the hub (org/name: a sentence encoder such as "
    "sentence-transformers/all-MiniLM-L6-v2, the default, or a model2vec model); or a local "
    "model folder or archive (.zip, .whl, .tar.gz) holding one, to import."
)


def register(app: typer.Typer) -> None:
    group = typer.Typer(
        name="model",
        help="The model semantic search uses (fetch or import it once, show it).",
        no_args_is_help=True,
    )
    group.command("fetch")(fetch)
    group.command("show")(show)
    group.command("use")(use)
    app.add_typer(group)
    app.command("index")(index)


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
    """Download a model once (a sentence encoder or a model2vec model), or import a local model
    folder or archive; check that it loads, and put it in place atomically."""
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
    typer.echo(f"{verb} {chosen} into {folder} (id {model.id}, {_dim(model)} dimensions)")


def _dim(model: object) -> object:
    """A model's dimension (every built-in embedder has ``dim``; an outside one may not)."""
    return getattr(model, "dim", "?")


_ENGINE_TEXT = {
    "numpy": "numpy ({onnx} for onnxruntime, about 1.5x faster)",
    "onnx": "onnxruntime (fp32; the same vectors as numpy)",
    "per-use": "numpy for a query or a few texts, onnxruntime once a run is long enough to win "
    "its session back (fp32; the same vectors either way)",
    "onnx-int8": "onnxruntime, int8 weights (for measurement: its vectors vary with the batch "
    "and recall less; an id of their own)",
}


def show(
    model: Annotated[
        str | None,
        typer.Argument(
            help="A model folder or a fetched model's name (default: $CONTINUITY_MODEL, else "
            "sentence-transformers/all-MiniLM-L6-v2).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Where the model is, its id and its dimension."""
    from continuity.retrieval.bert import BertEmbedder
    from continuity.retrieval.embedders import StaticEmbedder
    from continuity.retrieval.models import load_model, resolve_model

    with errors():
        folder = resolve_model(model)
        loaded = load_model(str(folder))
    typer.echo(f"path: {folder}")
    typer.echo(f"id: {loaded.id}")
    typer.echo(f"dim: {_dim(loaded)}")
    if isinstance(loaded, BertEmbedder | StaticEmbedder):
        typer.echo(f"vocabulary: {len(loaded.tokenizer.vocab)} tokens")
    if isinstance(loaded, BertEmbedder):
        typer.echo(f"kind: sentence encoder, {loaded.pooling} pooling, {loaded.max_tokens} tokens")
        engine = _ENGINE_TEXT.get("per-use" if loaded.per_use else loaded.engine, loaded.engine)
        if "{onnx}" in engine:
            from continuity._install import install_line

            engine = engine.format(onnx=install_line("onnx"))
        typer.echo(f"engine: {engine}")
        typer.echo(f"query prefix: {loaded.query_prefix!r}")
        typer.echo(f"document prefix: {loaded.document_prefix!r}")
    elif isinstance(loaded, StaticEmbedder):
        typer.echo("kind: static embeddings")
    else:
        typer.echo(f"kind: {type(loaded).__module__}.{type(loaded).__qualname__}")


def use(
    ctx: typer.Context,
    model: Annotated[
        str | None,
        typer.Argument(
            help="A model folder or a fetched model's name (none given: say which is used).",
            show_default=False,
        ),
    ] = None,
    none: Annotated[
        bool, typer.Option("--none", help="Use no model: every search is BM25 alone.")
    ] = False,
    embedder: Annotated[
        str | None,
        typer.Option(
            "--embedder",
            metavar="KIND",
            help="Load the model as this embedder kind (bert, static, or one an installed "
            "package adds) rather than the kind its folder is recognised as.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """The model every search of this store fuses with BM25.

    `search`, `compile --recall`, the Claude Code hook's recall_on_prompt, the viewer and the
    MCP server all use it (the store's search.json holds it)."""
    import msgspec

    from continuity.retrieval.models import load_model, resolve_model
    from continuity.retrieval.settings import read_search_settings, write_search_settings

    store = open_store(ctx)
    with errors():
        settings = read_search_settings(store)
        if model is None and not none and embedder is None:
            if not settings.model:
                typer.echo("model: none (BM25 alone)")
            else:
                kind = f" (embedder {settings.embedder})" if settings.embedder else ""
                typer.echo(f"model: {settings.model}{kind}")
            return
        if model is not None and none:
            fail("name a model or --none, not both")
        if embedder is not None and model is None:
            fail("--embedder says how to load the model named: name one")
        chosen = None
        if model is not None:
            folder = resolve_model(model)
            loaded = load_model(str(folder), kind=embedder)
            chosen = str(folder.absolute()) if Path(model).expanduser().is_dir() else model
        replaced = msgspec.structs.replace(settings, model=chosen, embedder=embedder)
        path = write_search_settings(store, replaced)
    if chosen is None:
        typer.echo(f"searches of this store use no model now (BM25 alone; {path})")
        return
    typer.echo(f"searches of this store fuse {chosen} now (id {loaded.id}; {path})")
    typer.echo("`continuity index` embeds the store ahead of the first search", err=True)


def index(
    ctx: typer.Context,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            envvar="CONTINUITY_MODEL",
            metavar="PATH|NAME",
            help="The model (default: the store's, `continuity model use`).",
            show_default=False,
        ),
    ] = None,
    jobs: Annotated[
        int | None,
        typer.Option(
            "--jobs",
            "-j",
            min=1,
            help="Worker processes (default: one per core, at most 8).",
            show_default=False,
        ),
    ] = None,
    rebuild: Annotated[
        bool, typer.Option("--rebuild", help="Drop the model's vectors and embed all again.")
    ] = False,
) -> None:
    """Embed every document the model's vector cache lacks, ahead of a search.

    Progress on stderr; Ctrl-C keeps every thread done, and the same command goes on from
    there."""
    from continuity.retrieval.embed_workers import default_jobs
    from continuity.retrieval.vectors import build_vectors

    store = open_store(ctx)
    embedder = model_for(store, model)
    if embedder is None:
        fail("no model: name one with --model, or choose the store's with `continuity model use`")
    with errors(), kept_on_interrupt():
        built = build_vectors(
            store,
            embedder,
            jobs=jobs or default_jobs(),
            progress=embedding_progress(),
            rebuild=rebuild,
        )
    if built is None:
        typer.echo("this store keeps no caches: a search embeds what it searches in memory")
        return
    typer.echo(
        f"vectors of {built.threads:,} threads ({built.documents:,} documents, "
        f"{built.embedded:,} embedded now) for model {built.model} in {built.folder}"
    )
