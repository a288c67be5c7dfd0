"""A PostgreSQL server for the tests, and fresh stores on it.

The server is ``$CONTINUITY_TEST_PG_URL`` when that is set (an external server: the tests
make and drop schemas in its database), else a throwaway one that ``pgserver`` starts from
its wheel for the session (about a second) and stops at the end. Without either, the tests
that need one are skipped, saying why.

With ``CONTINUITY_TEST_PG_DISTRIBUTED=1`` the server logs every statement and, when the
session ends, the statements the stores sent and their unique indexes are checked against the
rules a store distributed by thread keeps (:mod:`tests.support.distributed`); the session
fails if one breaks them. Run the whole PostgreSQL suite that way with
``CONTINUITY_TEST_PG_DISTRIBUTED=1 .venv/bin/python -m pytest -p no:cacheprovider
tests/store/postgres`` (an external server needs ``$CONTINUITY_TEST_PG_LOG``, its log's path,
and a superuser login).

Each store lives in a schema of its own, named after the folder a test gives it (so the same
folder is the same store, as with the JSONL backend); schemas are cheap to make, unlike
databases.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import blake3
import pytest

if TYPE_CHECKING:
    from continuity.store.base import BaseStore
    from continuity.store.postgres import PostgresStore

PG_URL_ENV: Final = "CONTINUITY_TEST_PG_URL"
TEST_APP: Final = "continuity-test"
"""The application name of the tests' own sessions (hand edits, lock holders): the
distributed check leaves their statements alone (:data:`tests.support.distributed.TEST_APP`)."""
SERVER_LOGS: dict[str, Path] = {}
"""The log file of each server :func:`serve` gives (pgserver's, or ``$CONTINUITY_TEST_PG_LOG``)."""


def server_log(url: str) -> Path | None:
    """The log file of the server at ``url``, if this process can read it."""
    from tests.support.distributed import LOG_ENV

    path = SERVER_LOGS.get(url) or (Path(os.environ[LOG_ENV]) if os.environ.get(LOG_ENV) else None)
    return path if path is not None and path.is_file() else None


@contextmanager
def _distributed(url: str) -> Iterator[None]:
    """With ``CONTINUITY_TEST_PG_DISTRIBUTED=1``: the server logs every statement, and the
    session fails at its end if one breaks the distributed rules."""
    from tests.support.distributed import DISTRIBUTED_ENV

    if os.environ.get(DISTRIBUTED_ENV) != "1":
        yield
        return
    import psycopg

    from tests.support import distributed

    log = server_log(url)
    if log is None:
        pytest.fail(f"{DISTRIBUTED_ENV}=1 needs the server's log: set {distributed.LOG_ENV}")
    with psycopg.connect(url, autocommit=True, application_name=TEST_APP) as conn:
        conn.execute("ALTER SYSTEM SET log_statement = 'all'")
        conn.execute(f"ALTER SYSTEM SET log_line_prefix = '{distributed.LOG_LINE_PREFIX}'")
        conn.execute("SELECT pg_reload_conf()")
    start = log.stat().st_size
    yield
    with psycopg.connect(url, autocommit=True, application_name=TEST_APP) as conn:
        conn.execute("ALTER SYSTEM RESET log_statement")
        conn.execute("ALTER SYSTEM RESET log_line_prefix")
        conn.execute("SELECT pg_reload_conf()")
        found = distributed.unkeyed_unique_indexes(conn)
    found += distributed.check_log(distributed.read_log(log, start))
    if found:
        pytest.fail(
            f"{len(found)} statement(s) or index(es) break the distributed rules:\n"
            + "\n".join(found),
            pytrace=False,
        )


@contextmanager
def serve(tmp: Path) -> Iterator[str]:
    """The URL of a server for the session: the external one, or a throwaway one in ``tmp``."""
    external = os.environ.get(PG_URL_ENV)
    if external:
        with _distributed(external):
            yield external
        return
    try:
        import psycopg  # noqa: F401 - the backend's driver: skip the same way without it
    except ImportError:
        pytest.skip(
            f"psycopg is not installed (agent-continuity[postgres]) and {PG_URL_ENV} is unset"
        )
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if not runtime or not Path(runtime).is_dir() or Path(runtime).stat().st_mode & 0o077:
        # pgserver puts its lock file in the runtime folder, and platformdirs warns unless
        # that is a private folder: give it one (set before pgserver is imported).
        runtime_dir = tmp / "xdg-runtime"  # pytest's temporary folder: cleaned up with it
        runtime_dir.mkdir(mode=0o700, exist_ok=True)
        os.environ["XDG_RUNTIME_DIR"] = str(runtime_dir)
    try:
        import pgserver
    except ImportError:
        pytest.skip(f"no PostgreSQL for the tests: no pgserver, and {PG_URL_ENV} is unset")
    # The data folder is not under pytest's `pytest-of-<user>` folder: run as root, pgserver
    # runs the server as another user and opens the folders above pgdata to it, and every
    # later pytest session (an upstream suite's child, a run beside this one) sets
    # `pytest-of-<user>` back to 0700; the server's checkpointer then cannot reach pg_control
    # and PANICs, minutes later, in the middle of the run.
    home = Path(tempfile.mkdtemp(prefix="continuity-pg-"))
    try:
        try:
            server = pgserver.get_server(home / "pgdata", cleanup_mode="stop")  # type: ignore[attr-defined]
        except Exception as exc:  # a server that will not start here: say so, do not fail
            pytest.skip(f"pgserver could not start a PostgreSQL server: {exc}")
        try:
            url = server.get_uri()
            SERVER_LOGS[url] = home / "pgdata" / "log"
            with _distributed(url):
                yield url
        finally:
            server.cleanup()
    finally:
        shutil.rmtree(home, ignore_errors=True)


def schema_for(path: Path | str) -> str:
    """The schema a store made for ``path`` lives in (the same path, the same schema)."""
    return "t_" + blake3.blake3(str(path).encode()).hexdigest()[:20]


class PgStores:
    """Opens stores on the session's server for one test, and closes them all after it."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.opened: list[BaseStore] = []
        self.schemas: set[str] = set()
        self.connections: list[Any] = []

    def open(self, path: Path | str, **options: Any) -> PostgresStore:
        """A :class:`PostgresStore` for ``path`` (created on first use; ``durable=False``
        unless told otherwise)."""
        from continuity.store.postgres import PostgresStore

        schema = options.pop("schema") if "schema" in options else schema_for(path)
        options.setdefault("durable", False)
        options.setdefault("create", True)
        store = PostgresStore(self.url, schema=schema, **options)
        self.schemas.add(schema)
        self.opened.append(store)
        return store

    def sql(self, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
        """Run one statement on a connection of its own (autocommit); its rows, if any."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True, application_name=TEST_APP) as conn:
            cur = conn.execute(statement, params)
            return cur.fetchall() if cur.description is not None else []

    def connect(self, **options: Any) -> Any:
        """A psycopg connection of the test's own (autocommit), closed after the test."""
        import psycopg

        options.setdefault("application_name", TEST_APP)
        conn = psycopg.connect(self.url, autocommit=True, **options)
        self.connections.append(conn)
        return conn

    def close(self) -> None:
        for conn in self.connections:
            conn.close()
        for store in self.opened:
            store.close()
        if os.environ.get(PG_URL_ENV) and self.schemas:  # an external server: leave it clean
            self.sql("".join(f"DROP SCHEMA IF EXISTS {s} CASCADE;" for s in sorted(self.schemas)))
