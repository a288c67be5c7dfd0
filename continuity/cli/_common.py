"""What every command module shares: the store option's value, opening the store, one way to
fail, and the options several commands take.

Each command opens the store, calls one or two library functions and turns library errors into
one clear line on stderr and a non-zero exit (1). Usage errors exit 2 (typer's convention).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import typer

from continuity.cli._display import recovery_line
from continuity.errors import ContinuityError
from continuity.store.base import Recovery
from continuity.store.jsonl import Store

__all__ = [
    "Options",
    "count",
    "errors",
    "fail",
    "open_store",
    "report_recovery",
]


@dataclass(slots=True)
class Options:
    """What the root callback puts in ``ctx.obj`` for every command."""

    store_path: Path


def fail(message: str, code: int = 1) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


@contextmanager
def errors(suffix: str = "") -> Iterator[None]:
    """Turn a library error, or the OS refusing a file operation, into one line and exit 1."""
    try:
        yield
    except ContinuityError as exc:
        fail(f"{exc}{suffix}")
    except BrokenPipeError:
        raise  # the reader went away (`| head`): click exits quietly
    except OSError as exc:
        fail(f"{exc}{suffix}")


def count(n: int, noun: str, plural: str | None = None) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {plural or noun + 's'}"


def report_recovery(rec: Recovery) -> None:
    typer.echo(recovery_line(rec), err=True)


def open_store(ctx: typer.Context, *, durable: bool = True, create: bool = False) -> Store:
    """The store ``--store`` names (or the default one), torn tails reported on stderr."""
    opts: Options = ctx.obj
    with errors():
        return Store(opts.store_path, durable=durable, create=create, on_recovery=report_recovery)
