"""Connections to the PostgreSQL store's database: a pool (or, for a short-lived process
such as a hook, the one connection it opened first), transactions with the store's
durability, and psycopg's failures turned into continuity's typed errors with one-line
messages that name the server and database, never the password (:func:`server_error`: the one
place a server's error becomes ours).

Everything here works through a pooler in transaction mode (PgBouncer, ADR 0041): no statement
is prepared (a prepared statement belongs to a server session, which a pooler hands to another
client after each transaction), every unit of work that needs several statements together is
one transaction, and no session state is relied on. The hooks' statement and lock budgets are
set at the login (``options``) when the server takes them; a pooler refuses that startup
parameter, and then each transaction sets them with ``SET LOCAL``.

This module imports psycopg (about 100 ms): :mod:`continuity.store.postgres` imports it only
when a store is opened, so naming the backend (``is_postgres_url``) costs nothing.
"""

from __future__ import annotations

import re
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Final

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import TupleRow

from continuity.errors import (
    BadFrame,
    ContinuityError,
    StoreBusy,
    StoreNotFound,
    StoreRefused,
    StoreUnavailable,
)
from continuity.store.postgres.schema import check_schema_name, ensure_schema

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

__all__ = ["Database", "describe_url", "server_error"]

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


def _limits(statement_timeout: float | None, lock_timeout: float | None) -> dict[str, int]:
    """The settings that bound every statement and lock wait (given in seconds), in ms."""
    found = {}
    if statement_timeout is not None:
        found["statement_timeout"] = max(1, round(statement_timeout * 1000))
    if lock_timeout is not None:
        found["lock_timeout"] = max(1, round(lock_timeout * 1000))
    return found


_OPEN: Final = (psycopg.pq.TransactionStatus.INTRANS, psycopg.pq.TransactionStatus.INERROR)
"""A connection's states inside a transaction (a pipelined one left after an error)."""

_FRESH_SECONDS: Final = 2.0
"""A pooled connection that came back this recently is handed out without a check."""

_REFUSED_OPTIONS: Final = "unsupported startup parameter"
"""What PgBouncer says to a login that carries ``options`` (it cannot give a pooled server
session a client's settings)."""


def server_error(exc: BaseException, location: str, password: str | None) -> ContinuityError | None:
    """The error of ours a psycopg error becomes, one line naming the server (None: not one of
    the server's errors, or ``UndefinedTable``, which the search index catches to make its
    tables again). Every connection of the store goes through here."""
    if not isinstance(exc, psycopg.Error) or isinstance(exc, psycopg.errors.UndefinedTable):
        return None
    said = _one_line(exc, password)
    if isinstance(exc, psycopg.errors.LockNotAvailable | psycopg.errors.QueryCanceled):
        # lock_timeout / statement_timeout (or a cancel): the server is there, but busy.
        return StoreBusy(f"PostgreSQL at {location} gave up waiting: {said}")
    if isinstance(exc, psycopg.errors.ReadOnlySqlTransaction):
        return StoreRefused(
            f"PostgreSQL at {location} is read-only (a standby, or default_transaction_read_only "
            f"on): nothing can be written there ({said})",
            read_only=True,
        )
    if isinstance(exc, psycopg.errors.InsufficientPrivilege):
        return StoreRefused(
            f"PostgreSQL at {location} refused: {said} (the role may lack the privilege; "
            "a read-only role can only read)"
        )
    if isinstance(exc, psycopg.DataError) and ("NUL" in said or "0x00" in said):
        # PostgreSQL text (and jsonb) cannot hold U+0000: a frame whose record key, kind or
        # message id has one is refused whole (the line itself, bytea, could be stored).
        return BadFrame(
            "PostgreSQL cannot store a NUL character (U+0000) in a record's kind or key, a "
            "message id or a checkpoint's ids; the batch was not appended"
        )
    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        return StoreUnavailable(f"PostgreSQL at {location} failed: {said}")
    return StoreRefused(f"PostgreSQL at {location} refused a statement: {said}")


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
        # prepare_threshold None: no statement is ever prepared, so a pooler in transaction
        # mode may give each transaction another server session (measured: ADR 0041).
        self._kwargs: dict[str, object] = {"autocommit": True, "prepare_threshold": None}
        if "connect_timeout" not in params:
            self._kwargs["connect_timeout"] = max(1, round(connect_timeout))
        limits = _limits(statement_timeout, lock_timeout)
        self._set_local = ""
        """``SET LOCAL`` of the budgets, run first in every transaction when the server (a
        pooler) refused them at the login; empty when they came with the login or there are
        none."""
        if limits:  # set at the login, so no statement of the session runs without them
            given = str(params.get("options") or "")
            self._kwargs["options"] = " ".join(
                [given, *(f"-c {k}={v}" for k, v in limits.items())]
            ).strip()
        # One direct connection first: a server that is down or refuses the login fails here,
        # at once and in its own words, not after the pool's wait.
        try:
            first = self.connect()
        except StoreUnavailable as exc:
            if not limits or _REFUSED_OPTIONS not in str(exc):
                raise
            # A pooler: the budgets go with each transaction instead of the login.
            if params.get("options"):
                self._kwargs["options"] = params["options"]
            else:
                del self._kwargs["options"]
            self._set_local = "; ".join(f"SET LOCAL {k} = {v}" for k, v in limits.items())
            first = self.connect()
        # (Through a pooler that refused the budgets, this first query runs without them: it
        # opens its own transactions. The hooks probe the server before they get here.)
        try:
            with self._mapped():
                self.version = ensure_schema(
                    first, self.schema, create=create, location=self.location, now_ms=now_ms
                )
        except BaseException:
            first.close()
            raise
        self._pool: ConnectionPool[Connection] | None = None
        self._used: weakref.WeakKeyDictionary[Connection, float] = weakref.WeakKeyDictionary()
        """When each pooled connection last came back from a block that did not raise."""
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
            # timeout) is found out here and replaced, not handed to a caller; one used a
            # moment ago is not asked again (the check is a round trip: 40% of `verify`'s).
            check=self._check,
            timeout=2 * connect_timeout if limits else max(5.0, 2 * connect_timeout),
            name=f"continuity:{self.location}",
        )

    def _check(self, conn: Connection) -> None:
        """The pool's check of a connection it is about to hand out: an empty query, unless
        the connection came back to the pool less than :data:`_FRESH_SECONDS` ago."""
        last = self._used.get(conn)
        if last is not None and time.monotonic() - last < _FRESH_SECONDS:
            return
        from psycopg_pool import ConnectionPool

        ConnectionPool.check_connection(conn)

    def connect(self) -> Connection:
        """A new connection outside the pool (the caller closes it)."""
        try:
            return psycopg.connect(self._url, **self._kwargs)  # type: ignore[arg-type]
        except psycopg.OperationalError as exc:
            raise StoreUnavailable(
                f"cannot connect to PostgreSQL at {self.location}: {_one_line(exc, self._password)}"
            ) from exc

    def mapped(self) -> AbstractContextManager[None]:
        """psycopg's errors raised in the block as ours, for a connection of :meth:`connect`."""
        return self._mapped()

    @contextmanager
    def _mapped(self) -> Iterator[None]:
        """psycopg's errors raised in the block as ours (:func:`server_error`)."""
        try:
            yield
        except psycopg.Error as exc:
            mapped = server_error(exc, self.location, self._password)
            if mapped is None:
                raise
            raise mapped from exc

    @contextmanager
    def _pooled(self) -> Iterator[Connection]:
        """A connection of the pool, or (no pool) the held one or a new one."""
        if self._pool is None:
            with self._mapped(), self._direct() as conn:
                yield conn
            return
        from psycopg_pool import PoolClosed, PoolTimeout

        try:
            with self._mapped(), self._pool.connection() as conn:
                yield conn
                self._used[conn] = time.monotonic()  # it answered: fresh for the next caller
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
    def connection(self) -> Iterator[Connection]:
        """A pooled connection for the ``with`` block (autocommit: each statement commits;
        through a pooler that refused the budgets at the login, one transaction that sets
        them)."""
        with self._pooled() as conn:
            if not self._set_local:
                yield conn
                return
            with conn.transaction():
                conn.execute(self._set_local)
                yield conn

    @contextmanager
    def transaction(self, *, durable: bool) -> Iterator[Connection]:
        """A pooled connection inside one transaction, committed when the block ends (rolled
        back if it raises). Not ``durable``: the commit returns before the WAL is flushed — a
        crash of the server may lose the last transactions, never part of one."""
        settings = [self._set_local] if self._set_local else []
        if not durable:
            settings.append("SET LOCAL synchronous_commit = off")
        with self._pooled() as conn, conn.transaction():
            if settings:  # one round trip (no parameters: the simple query protocol)
                conn.execute("; ".join(settings))
            yield conn

    @contextmanager
    def pipelined(self, *, durable: bool) -> Iterator[Connection]:
        """:meth:`transaction` in pipeline mode: the statements of the block are sent without
        waiting for their answers, and the commit with them, so the block costs one round
        trip plus one for each answer it reads (a ``fetch``) before the end. What the server
        refused is raised at the next read or at the end, the transaction rolled back."""
        # BEGIN and COMMIT by hand: psycopg's transaction() waits for each of them.
        with self._pooled() as conn:
            try:
                with conn.pipeline():
                    conn.execute("BEGIN")
                    if self._set_local:  # one statement each: a pipeline has no multi-statement
                        for setting in self._set_local.split("; "):
                            conn.execute(setting)
                    if not durable:
                        conn.execute("SET LOCAL synchronous_commit = off")
                    yield conn
                    conn.execute("COMMIT")
            except BaseException:
                if not conn.closed and conn.info.transaction_status in _OPEN:
                    try:
                        conn.execute("ROLLBACK")
                    except psycopg.Error:
                        conn.close()  # dropped (unpooled) or replaced (pooled) by the caller
                raise

    @contextmanager
    def session_lock(self, key: int) -> Iterator[bool]:
        """Whether this process now holds the transaction-level advisory lock ``key``, held
        until the block ends: an open transaction on a connection of its own (outside the
        pool), so a pooler in transaction mode keeps that server session for it alone, and
        a holder that dies (its connection closed) releases it."""
        conn = self.connect()
        with conn, self._mapped(), conn.transaction():
            row = conn.execute("SELECT pg_try_advisory_xact_lock(%s)", [key]).fetchone()
            yield row is not None and bool(row[0])

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
