"""What the commands that embed documents share: progress on stderr, what Ctrl-C kept, and the
model a command uses (``--model``, else the store's ``continuity model use``)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import typer

from continuity.cli._common import errors

if TYPE_CHECKING:
    from continuity.store.base import BaseStore

__all__ = ["embedding_progress", "kept_on_interrupt", "model_for", "rate_line"]


def rate_line(done: int, total: int, elapsed: float) -> str:
    """``embedding documents: 1,234/10,000 (41/s, about 3 min 34 s left)``."""
    line = f"embedding documents for search: {done:,}/{total:,}"
    if elapsed > 0 and done > 0:
        rate = done / elapsed
        left = (total - done) / rate
        shown = f"{rate:,.0f}/s" if rate >= 10 else f"{rate:.1f}/s"
        if done < total:
            m, s = divmod(round(left), 60)
            shown += f", about {m} min {s} s left" if m else f", about {s} s left"
        line += f" ({shown})"
    return line


def embedding_progress(*, slow: float = 1.0, tty: bool | None = None) -> Callable[[int, int], None]:
    """Progress of embedding (documents done, documents to do) on stderr, with the rate and
    the time left: on a terminal a line rewritten in place, elsewhere a line every few seconds;
    nothing for a catch-up done within ``slow`` seconds."""
    created = time.monotonic()
    on_tty = sys.stderr.isatty() if tty is None else tty
    state = {"last": 0.0, "shown": False, "started": 0.0}

    def report(done: int, total: int) -> None:
        now = time.monotonic()
        if not state["started"]:
            state["started"] = now  # the rate counts from here, not from reading the logs
        due = now - created >= slow and now - state["last"] >= (0.25 if on_tty else 5.0)
        finished = done >= total
        if not (due or (finished and state["shown"])):
            return
        state["last"], state["shown"] = now, True
        line = rate_line(done, total, now - state["started"])
        if on_tty:
            print(f"\r{line}\x1b[K", end="\n" if finished else "", file=sys.stderr, flush=True)
        else:
            print(line, file=sys.stderr, flush=True)

    return report


@contextmanager
def kept_on_interrupt() -> Iterator[None]:
    """Ctrl-C while embedding: say what was kept and how to go on, and exit 130."""
    from continuity.retrieval.vectors import EmbeddingInterrupted

    try:
        yield
    except EmbeddingInterrupted as exc:
        typer.echo(f"\n{exc}", err=True)
        raise typer.Exit(130) from None


def model_for(store: BaseStore, chosen: str | None) -> Any:
    """The embedder a command uses: ``chosen`` (``--model``/``$CONTINUITY_MODEL``), else the
    store's model (``continuity model use``), loaded; None for BM25 alone."""
    from continuity.retrieval.settings import configured_embedder

    with errors():
        return configured_embedder(store, chosen)
