"""Connections to the PostgreSQL store's database: a pool (or, for a short-lived process
such as a hook, the one connection it opened first), transactions with the store's
durability, and psycopg's failures turned into continuity's typed errors with one-line
messages that name the server and database, never the password.

This module imports psycopg (about 100 ms): :mod:`continuity.store.postgres` imports it only
when a store is opened, so naming the backend (``is_postgres_url``) costs nothing.
psycopg_pool (its worker threads, and a second connection) only when a pool is asked for.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Final, NoReturn

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import TupleRow

from continuity.errors import BadFrame, StoreBusy, StoreNotFound, StoreUnavailable
from continuity.store.postgres.schema import check_schema_name, ensure_schema

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

__all__ = ["Database", "describe_url"]

Connection = psycopg.Connection[TupleRow]

_SERVER_PREFIX: Final = re.compile(
    r"^(?:connection (?:failed|is bad): )?(?:connection to server (?:at|on) .*? failed: )?"
)


def describe_url(url: str) -> str:
    """``user@host:port/dbname`` of a connection URL: what messages name (no password)."""
    params = conninfo_to_dict(url)
    host = str(params.get("host") or params.get("hostaddr") or "localhost")
    port = params.get("port")
    user = params.get("user")
    where = f"{host}:{port}" if port else host
    dbname = params.get("dbname") or user or ""
    return f"{f'{user}@' if user else ''}{where}/{dbname}"


def _one_line(exc: BaseException, password: str | None) -> str:
    """The first line of a psycopg message, without the server address it repeats (the caller
    names it) or libpq's ``FATAL:`` prefix, and never a password."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    text = _SERVER_PREFIX.sub("", text).strip()
    text = re.sub(r"^(?:FATAL|ERROR):\s+", "", text)
    if password:
        text = text.replace(password, "***")
    return text or type(exc).__name__


def _session_limits(statement_timeout: float | None, lock_timeout: float | None) -> str:
    """libpq ``options`` that bound every statement and lock wait of a session (seconds)."""
    parts = []
    if statement_timeout is not None:
        parts.append(f"-c statement_timeout={max(1, round(statement_timeout * 1000))}")
    if lock_timeout is not None:
        parts.append(f"-c lock_timeout={max(1, round(lock_timeout * 1000))}")
    return " ".join(parts)


class Database:
    """Autocommit connections to one database, for one store schema: a pool of them, or
    (``pooled=False``, a hook's choice) the connection that checked the schema, kept for every
    later call: no pool module, no worker threads, no second login. A call that finds it in
    use (another thread, or a block inside a block) gets a connection of its own."""

    def __init__(
        self,
        url: str,
        *,
        schema: str,
        pool_size: int,
        connect_timeout: float,
        create: bool,
        now_ms: int,
        statement_timeout: float | None = None,
        lock_timeout: float | None = None,
        pooled: bool = True,
    ) -> None:
        self.schema = check_schema_name(schema)
        try:
            params = conninfo_to_dict(url)
        except psycopg.ProgrammingError as exc:
            raise StoreNotFound(f"not a usable PostgreSQL URL: {_one_line(exc, None)}") from None
        self._password = str(params["password"]) if params.get("password") else None
        self.location = describe_url(url)
        self._url = url
        self._kwargs: dict[str, object] = {"autocommit": True}
        if "connect_timeout" not in params:
            self._kwargs["connect_timeout"] = max(1, round(connect_timeout))
        limits = _session_limits(statement_timeout, lock_timeout)
        if limits:  # set at the login, so no statement of the session runs without them
            self._kwargs["options"] = f"{params.get('options') or ''} {limits}".strip()
        # One direct connection first: a server that is down or refuses the login fails here,
        # at once and in its own words, not after the pool's wait.
        first = self.connect()
        try:
            self.version = ensure_schema(
                first, self.schema, create=create, location=self.location, now_ms=now_ms
            )
        except psycopg.OperationalError as exc:
            first.close()
            self._unavailable(exc)
        except BaseException:
            first.close()
            raise
        self._pool: ConnectionPool[Connection] | None = None
        self._held: Connection | None = None
        self._held_lock = threading.Lock()
        self._closed = False
        if not pooled:
            self._held = first
            return
        first.close()
        from psycopg_pool import ConnectionPool

        self._pool = ConnectionPool(
            url,
            kwargs=self._kwargs,
            min_size=1,
            max_size=max(1, pool_size),
            open=True,
            # A connection the server dropped while it sat in the pool (a restart, an idle
            # timeout) is found out here and replaced, not handed to a caller.
            check=ConnectionPool.check_connection,
            timeout=2 * connect_timeout if limits else max(5.0, 2 * connect_timeout),
            name=f"continuity:{self.location}",
        )

    def connect(self) -> Connection:
        """A new connection outside the pool (the caller closes it)."""
        try:
            return psycopg.connect(self._url, **self._kwargs)  # type: ignore[arg-type]
        except psycopg.OperationalError as exc:
            raise StoreUnavailable(
                f"cannot connect to PostgreSQL at {self.location}: {_one_line(exc, self._password)}"
            ) from exc

    def _unavailable(self, exc: BaseException) -> NoReturn:
        raise StoreUnavailable(
            f"PostgreSQL at {self.location} failed: {_one_line(exc, self._password)}"
        ) from exc

    @contextmanager
    def connection(self) -> Iterator[Connection]:
        """A connection for the ``with`` block (autocommit: each statement commits)."""
        try:
            with self._pooled() if self._pool is not None else self._direct() as conn:
                yield conn
        except (psycopg.errors.LockNotAvailable, psycopg.errors.QueryCanceled) as exc:
            # lock_timeout / statement_timeout (or a cancel): the server is there, but busy.
            raise StoreBusy(
                f"PostgreSQL at {self.location} gave up waiting: {_one_line(exc, self._password)}"
            ) from exc
        except psycopg.DataError as exc:
            if "NUL" not in str(exc) and "0x00" not in str(exc):
                raise
            # PostgreSQL text (and jsonb) cannot hold U+0000: a frame whose record key, kind or
            # message id has one is refused whole (the line itself, bytea, could be stored).
            raise BadFrame(
                "PostgreSQL cannot store a NUL character (U+0000) in a record's kind or key, a "
                "message id or a checkpoint's ids; the batch was not appended"
            ) from exc
        except psycopg.OperationalError as exc:
            self._unavailable(exc)

    @contextmanager
    def _pooled(self) -> Iterator[Connection]:
        from psycopg_pool import PoolClosed, PoolTimeout

        assert self._pool is not None
        try:
            with self._pool.connection() as conn:
                yield conn
        except PoolTimeout:
            # The pool only says it waited: ask the server directly why, if it will not talk.
            self.connect().close()
            raise StoreUnavailable(
                f"no connection to PostgreSQL at {self.location} came free in "
                f"{self._pool.timeout:g} s (raise pool_size, or hold connections shorter)"
            ) from None
        except PoolClosed:
            raise StoreUnavailable(f"the store at {self.location} is closed") from None

    @contextmanager
    def _direct(self) -> Iterator[Connection]:
        """The held connection, or a new one (closed after the block) when it is in use or
        was lost. Handed back as a pool would: a transaction left open is rolled back, a
        broken connection dropped."""
        if self._closed:
            raise StoreUnavailable(f"the store at {self.location} is closed")
        held = self._held
        if held is None or not self._held_lock.acquire(blocking=False):
            with self.connect() as conn:
                yield conn
            return
        try:
            yield held
        finally:
            try:
                if held.broken or held.closed:
                    self._held = None
                elif held.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                    held.rollback()
            except psycopg.Error:
                held.close()
                self._held = None
            finally:
                self._held_lock.release()

    @contextmanager
    def transaction(self, *, durable: bool) -> Iterator[Connection]:
        """A pooled connection inside one transaction, committed when the block ends (rolled
        back if it raises). Not ``durable``: the commit returns before the WAL is flushed — a
        crash of the server may lose the last transactions, never part of one."""
        with self.connection() as conn, conn.transaction():
            if not durable:
                conn.execute("SET LOCAL synchronous_commit = off")
            yield conn

    def close(self) -> None:
        self._closed = True
        if self._pool is not None:
            self._pool.close()
        held, self._held = self._held, None
        if held is not None:
            held.close()

    @property
    def closed(self) -> bool:
        return self._pool.closed if self._pool is not None else self._closed
