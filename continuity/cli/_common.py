"""What every command module shares: the store option's value, opening the store, one way to
fail, and the options several commands take.

Each command opens the store, calls one or two library functions and turns library errors into
one clear line on stderr and a non-zero exit (1). Usage errors exit 2 (typer's convention), and
so does a feature whose optional extra is not installed (:func:`need_extra`). A
thread id that is not in the store gets the ids it may have meant (:func:`thread_hint`).
"""

from __future__ import annotations

import ast
import difflib
import errno
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final, NoReturn

import typer

from continuity.cli._display import count, recovery_line
from continuity.errors import (
    ContinuityError,
    MissingExtra,
    StoreNotFound,
    ThreadDeleted,
    ThreadNotFound,
)
from continuity.paths import StoreLocation, describe_store, is_postgres_url, is_store_url

if TYPE_CHECKING:  # annotations only: the CLI's start-up does not import the store (issue 32)
    from continuity.store.base import BaseStore, Recovery

__all__ = [
    "Options",
    "agent_option",
    "count",
    "errors",
    "fail",
    "need_extra",
    "open_store",
    "report_recovery",
    "start_run",
    "thread_hint",
]


@dataclass(slots=True)
class Options:
    """What the root callback puts in ``ctx.obj`` for every command."""

    given: StoreLocation
    """The store ``--store`` (or ``$CONTINUITY_HOME``, or the default) names: a folder or a URL."""
    schema: str | None = None
    """``--schema``: the schema of a PostgreSQL store (the URL's ``?schema=``)."""

    @property
    def location(self) -> StoreLocation:
        """The store: ``given``, naming ``schema`` when one was given."""
        from continuity.paths import split_schema, valid_schema_name, with_schema

        if self.schema is None:
            if is_postgres_url(self.given):
                named = split_schema(str(self.given))[1]
                if named is not None and not valid_schema_name(named):
                    fail(_bad_schema(named, "the URL's ?schema="))
            return self.given
        if not valid_schema_name(self.schema):
            fail(_bad_schema(self.schema, "--schema"))
        if not is_postgres_url(self.given):
            what = "another backend's URL" if is_store_url(self.given) else "a folder"
            fail(
                f"--schema names a schema of a PostgreSQL store; {describe_store(self.given)} "
                f"is {what} (give --store a postgresql:// URL)"
            )
        return with_schema(str(self.given), self.schema)

    @property
    def described(self) -> str:
        """The location as messages show it (a URL without its password)."""
        return describe_store(self.location)


def _bad_schema(name: str, where: str) -> str:
    return (
        f"invalid schema name {name!r} in {where}: use lower-case letters, digits and _, "
        "starting with a letter or _, at most 63 characters"
    )


_opened: list[BaseStore] = []
"""The store the running command opened: a thread id it does not hold gets suggestions from it."""


def start_run(location: StoreLocation, schema: str | None = None) -> Options:
    """The options of a new run (the root callback's): nothing opened yet."""
    _opened.clear()
    return Options(location, schema)


def fail(message: str, code: int = 1) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def need_extra(feature: str, extra: str, exc: ImportError) -> NoReturn:
    """Exit 2 saying which extra ``feature`` needs and how to install it; ``exc`` is the
    import that failed (its module is named)."""
    missing = exc.name.partition(".")[0] if exc.name else None
    fail(str(MissingExtra(feature, extra, missing)), code=2)


_MISSING: Final = re.compile(r"no thread ('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")")


def _missing_id(exc: ThreadNotFound) -> str | None:
    found = getattr(exc, "thread_id", None)
    if isinstance(found, str):
        return found
    m = _MISSING.search(str(exc))
    if m is None:
        return None
    value = ast.literal_eval(m.group(1))
    return value if isinstance(value, str) else None


def thread_hint(missing: str, known: Sequence[str], *, limit: int = 3) -> str:
    """What to say after "no thread X": the ids that hold ``missing`` (a session id typed
    without its ``cc-`` prefix, a shortened id), then the close spellings; or where to look."""
    folded = missing.casefold()

    def rank(t: str) -> int:  # 0: the id with a prefix (cc-), 1: shortened, 2: inside
        low = t.casefold()
        return 0 if low.endswith(folded) else 1 if low.startswith(folded) else 2

    holding = sorted(
        (t for t in known if len(missing) >= 3 and folded in t.casefold()),
        key=lambda t: (rank(t), len(t), t),
    )
    if holding and rank(holding[0]) < 2:  # the id with or without a part: nothing else
        picks = [t for t in holding if rank(t) < 2]
    else:
        close = difflib.get_close_matches(missing, known, n=limit, cutoff=0.6)
        picks = list(dict.fromkeys([*holding, *close]))
    if not picks:
        return " (`continuity threads` lists every thread)"
    shown = [repr(t) for t in picks[:limit]]
    more = f" (and {len(picks) - limit} more)" if len(picks) > limit else ""
    said = shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"
    return f"; did you mean {said}?{more}"


def _not_found(exc: ThreadNotFound) -> str:
    missing = _missing_id(exc)
    if missing is None or not _opened:
        return str(exc)
    try:
        known = _opened[0].threads()
    except (ContinuityError, OSError):
        return str(exc)
    return f"{exc}{thread_hint(missing, known)}"


@contextmanager
def errors(suffix: str = "") -> Iterator[None]:
    """Turn a library error, or the OS refusing a file operation, into one line and exit 1
    (a missing optional extra: exit 2, as a usage error)."""
    try:
        yield
    except MissingExtra as exc:
        fail(str(exc), code=2)
    except ThreadDeleted as exc:
        fail(f"{exc}{suffix}")
    except ThreadNotFound as exc:
        fail(f"{_not_found(exc)}{suffix}")
    except ContinuityError as exc:
        fail(f"{exc}{suffix}")
    except BrokenPipeError:
        raise  # the reader went away (`| head`): click exits quietly
    except OSError as exc:
        notes = getattr(exc, "__notes__", None)
        if notes:  # the library says what was left behind: "nothing was written" would be false
            fail(f"{exc}: {'; '.join(notes)}")
        if exc.errno == errno.EROFS:
            fail(f"the store is on a read-only file system ({exc.filename}){suffix}")
        fail(f"{exc}{suffix}")
    except Exception as exc:
        # The PostgreSQL backend maps the server's errors to ours (db.server_error); one it
        # leaves as it is (a table dropped by hand) is still one line here. By the module's
        # name: the CLI does not import the driver.
        if type(exc).__module__.partition(".")[0] != "psycopg":
            raise
        fail(f"PostgreSQL: {' '.join(str(exc).split())}{suffix}")


def agent_option(name: str | None) -> str | None:
    """The agent ``--agent`` names (any of its names: ``codex``, ``Gemini CLI``, ``gemini-cli``),
    as its name in :mod:`continuity.agents.table`; an agent an installed package adds is looked
    up in the registry; a clear error naming the known ones when it names none."""
    from continuity.agents.table import agent_named, known_agent_names

    if name is None:
        return None
    agent = agent_named(name)
    if agent is None:
        from continuity.agents.registry import find

        adapter = find(name)
        agent = adapter.agent if adapter is not None else None
    if agent is None:
        fail(f"unknown agent {name!r}: the agents are {known_agent_names()}")
    return agent.name


def report_recovery(rec: Recovery) -> None:
    typer.echo(recovery_line(rec), err=True)


def _not_a_store(path: Path) -> str | None:
    """What is wrong when ``path`` is there but is no store (None: nothing is there)."""
    if path.exists() and not path.is_dir():
        return f"{path} is a file, not a store: --store names the store's folder"
    if path.is_dir() and any(path.iterdir()):
        return f"{path} is a folder that is not a continuity store (it has no store.json)"
    return None


def open_store(ctx: typer.Context, *, durable: bool = True, create: bool = False) -> BaseStore:
    """The store ``--store`` names (or the default one), torn tails reported on stderr."""
    from continuity.store.locate import open_store as open_location

    opts: Options = ctx.obj
    with errors():
        try:
            store = open_location(
                opts.location, durable=durable, create=create, on_recovery=report_recovery
            )
        except StoreNotFound as exc:
            # Say what is there: "create one with `continuity init`" would fail on a file.
            there = None if is_store_url(opts.location) else _not_a_store(Path(opts.location))
            raise StoreNotFound(there or str(exc)) from None
    _opened[:] = [store]
    ctx.call_on_close(store.close)  # a server store's connections go back when the command ends
    return store
