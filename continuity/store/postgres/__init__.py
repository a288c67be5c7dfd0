"""The PostgreSQL backend: the same threads, frames and artifacts on a server that many
processes and hosts share (ADR 0025).

Each frame is stored as its line, byte for byte what the JSONL store writes (without the
newline), in ``frames (thread_key, seq, line)``; a thread's head (seq and digest) is a row of
``threads``. An append is one transaction: it locks the thread's head row (creating it for a
new thread), seals the batch after that head with :func:`~continuity.store.base.seal_batch`,
inserts the lines and moves the head. So seqs stay contiguous across connections, processes and
hosts, a batch is seen whole or not at all, and a connection lost mid-batch leaves nothing.
Reads check every line against the chain as they give it out, like the JSONL store's.

The package, one module a concern; :class:`PostgresStore` makes the collaborators and hands
them to what uses them (nothing here reaches back into the store):

- this module: :class:`PostgresStore` (opens the database, owns the statements of its schema)
  and :class:`PostgresThread` (appends and checked reads of the ``threads`` and ``frames``
  tables), and :func:`is_postgres_url`;
- :mod:`.schema`: the tables, their versions and the migrations that bring a database to them;
- :mod:`.db`: the connection pool, transactions, and psycopg's failures as typed errors;
- :mod:`.derived`: the derived tables (messages, checkpoints, marks) written with each append,
  and their reader (:class:`~.derived.PostgresDerived`);
- :mod:`.catalog`: the catalog table (each thread's listing row, written with each append) and
  its reader (:class:`~.catalog.PostgresCatalog`);
- :mod:`.search`: the search index in tables (:class:`~.search.PostgresSearch`, ADR 0026);
- :mod:`.artifacts`: the ``artifacts`` table (:class:`~.artifacts.PostgresArtifactStore`).

psycopg is imported when a store is opened (by :mod:`.db`, :mod:`.schema` and :mod:`.search`),
not with this module: :func:`is_postgres_url` costs nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from continuity import frames as fr
from continuity.errors import (
    CorruptFrame,
    JobInFlight,
    MissingExtra,
    StoreRefused,
    ThreadDeleted,
    ThreadKeyTaken,
    ThreadNotFound,
)
from continuity.paths import is_postgres_url as _is_postgres_url
from continuity.store.base import (
    BaseStore,
    DeletionReport,
    Head,
    Thread,
    Tombstone,
    batch_of,
    check_sealed,
    deletion_facts,
    now_ms,
    provider_summaries,
    seal_frames,
)
from continuity.store.postgres.artifacts import PostgresArtifactStore
from continuity.store.postgres.catalog import CatalogSql, PostgresCatalog, write_catalog
from continuity.store.postgres.derived import (
    DerivedSql,
    PostgresDerived,
    Snapshot,
    Watermark,
    catch_up,
    watermark_of,
    write_derived,
)
from continuity.store.postgres.keys import thread_key

if TYPE_CHECKING:
    from continuity.store.postgres.db import Connection, Database
    from continuity.store.postgres.search import PostgresSearch

__all__ = [
    "PostgresArtifactStore",
    "PostgresStore",
    "PostgresThread",
    "is_postgres_url",
]

_DEFAULT_SCHEMA: Final = "continuity"
"""The schema a store lives in unless told otherwise (``schema=``, or the URL's ``?schema=``)."""
_FIRST_CHUNK: Final = 128
_MAX_CHUNK: Final = 2048
"""Rows per read query: reads start small (most want a few frames) and grow to this, so a
thread of any length is read in bounded memory."""
_COPY_TYPES: Final = ("int8", "int8", "bytea")
_COPY_ROWS: Final = 512
"""Batches of this many frames or more are copied in (not pipelined)."""
_DERIVED_RELATIONS: Final = (
    "derived_threads",
    "messages",
    "checkpoints",
    "marks",
    "catalog",
    "search_threads",
    "search_docs",
    "search_postings",
    "search_runs",
)
"""The tables rebuilt from the frames (``stats``' cache bytes)."""
_MOVED: Final = "continuity: the thread moved since the last append of this store"
"""What the guard of a pipelined append says when the thread is not where the store left it."""
_KNOWN_THREADS: Final = 1024
"""Threads whose state after its own last append a store keeps (the oldest forgotten first)."""


class _State(NamedTuple):
    """A thread's state under its head-row lock: what an append seals and derives after."""

    head_seq: int
    head_digest: bytes
    catalog_seq: int | None
    """Where the catalog row ends (None: no row)."""
    watermark: Watermark | None

    def head(self) -> Head:
        return Head(self.head_seq, self.head_digest.hex())


class _Known(NamedTuple):
    state: _State
    solo: bool
    """Whether this store made the appends before the last one too (nobody else wrote between):
    its next append sends everything at once, guarded."""


_TAIL: Final = f"substring(f.line FROM octet_length(f.line) - {fr.SEAL_SUFFIX_LEN - 1})"
"""The last bytes of a line, where its digest is: a read starting at frame N checks it against
N - 1's digest without fetching N - 1's body."""


def is_postgres_url(text: str) -> bool:
    """Whether ``text`` names a PostgreSQL store (``postgresql://…`` or ``postgres://…``): the
    one rule every place that takes a store's location uses
    (:func:`continuity.paths.is_postgres_url`; :func:`continuity.paths.is_store_url` also
    takes the schemes other backends add)."""
    return _is_postgres_url(text)


def _checked_line(thread_id: str, seq: int, line: bytes, parent: bytes) -> bytes:
    """The digest of frame ``seq``'s stored ``line``, after checking that the line is a sealed
    frame carrying that seq and chained to ``parent``; :class:`CorruptFrame` if not."""
    sealed = fr.unseal(line)
    env = fr.envelope(line) if sealed is not None else None
    if sealed is None or env is None:
        raise CorruptFrame(thread_id, seq, -1, "not a sealed frame")
    if env.seq != seq:
        raise CorruptFrame(thread_id, seq, -1, f"seq {env.seq} where {seq} belongs")
    if fr.chain(parent, sealed[0]) != sealed[1]:
        raise CorruptFrame(thread_id, seq, -1, "digest does not chain")
    return sealed[1]


def _parent_digest(thread_id: str, seq: int, line_end: bytes | None) -> bytes:
    """The digest frame ``seq - 1`` stores (``line_end``: its line or the end of it)."""
    if seq == 0:
        return fr.GENESIS_DIGEST
    if line_end is None:
        raise CorruptFrame(thread_id, seq - 1, -1, f"frame {seq - 1} is missing")
    digest = fr.stored_digest(line_end)
    if digest is None:
        raise CorruptFrame(thread_id, seq - 1, -1, "not a sealed frame")
    return digest


class PostgresThread(Thread):
    """A thread stored as rows of the ``frames`` table. Made by :meth:`PostgresStore.thread`,
    which hands it the store's database and statements."""

    def __init__(
        self,
        store: PostgresStore,
        thread_id: str,
        *,
        db: Database,
        sql: _LogSql,
        derived_sql: DerivedSql,
        catalog_sql: CatalogSql,
    ) -> None:
        super().__init__(thread_id)
        self.key = thread_key(thread_id)
        """The thread's key in every table (:func:`~.keys.thread_key` of its id)."""
        self._store = store
        self._db = db
        self._sql = sql
        self._derived_sql = derived_sql
        self._catalog_sql = catalog_sql

    @property
    def store(self) -> PostgresStore:
        return self._store

    # -- appending --

    def append(
        self,
        frames: fr.Frame | Iterable[fr.Frame],
        *,
        expected_seq: int | None = None,
        durable: bool | None = None,
    ) -> range:
        batch = batch_of(frames)
        store = self._store

        given = range(0)
        for data in provider_summaries(batch, store.redactor):
            store.artifacts.put(data)  # before the transaction: the artifacts have their own

        def seal(head: Head | None, now: int) -> tuple[list[bytes], Head]:
            nonlocal given
            lines, new_head, given = seal_frames(
                self.id,
                batch,
                head,
                now_ms=now,
                expected_seq=expected_seq,
                redact=store.redactor,
            )
            return [line[:-1] for line in lines], new_head

        self._commit(seal, durable, clock=store.clock, rows=len(batch))
        return given

    def append_sealed(self, lines: Sequence[bytes], *, durable: bool | None = None) -> range:
        stored = [bytes(line) for line in lines]

        def check(head: Head | None, now: int) -> tuple[list[bytes], Head]:
            return stored, check_sealed(self.id, stored, head)

        new_head = self._commit(check, durable, clock=now_ms, rows=len(stored))
        return range(new_head.seq - len(stored) + 1, new_head.seq + 1)

    def _commit(
        self,
        seal: Callable[[Head | None, int], tuple[list[bytes], Head]],
        durable: bool | None,
        *,
        clock: Callable[[], int],
        rows: int,
    ) -> Head:
        """One transaction: lock the head row (made for a new thread), ``seal(head, now)``
        the lines to store after it, insert them, move the head, commit. Anything raised
        rolls it all back, the new thread's row too.

        Sent as a pipeline (ADR 0054): the lock and the state read under it in one round
        trip, every write and the commit in the next. A store that made the thread's last
        append itself (nobody wrote it since, as far as it knows) skips the first: it seals
        after the head it left and sends one pipeline whose first statement locks the head
        row and fails unless the head, the derived rows' watermark and the catalog row are
        still where it left them; then (someone else wrote) it falls back to the lock.
        A batch of :data:`_COPY_ROWS` rows or more is copied in (COPY cannot be pipelined,
        and is the faster there) after the lock, in a transaction of a few round trips."""
        sync = self._store.durable if durable is None else durable
        known = self._store.last_append(self.key)
        try:
            if rows >= _COPY_ROWS:
                with self._db.transaction(durable=sync) as conn:
                    state = self._lock(conn, clock)
                    after = self._write(conn, state, seal, clock, copy=True)
                self._store.appended(self.key, after, solo=known is None or state == known.state)
                return after.head()
            if known is not None and known.solo:
                try:
                    with self._db.pipelined(durable=sync) as conn:
                        self._guard(conn, known.state)
                        after = self._write(conn, known.state, seal, clock)
                    self._store.appended(self.key, after, solo=True)
                    return after.head()
                except StoreRefused as exc:  # the guard's failure, as the store maps it
                    if _MOVED not in str(exc):
                        raise
                known = _Known(known.state, False)  # someone else writes this thread too
            with self._db.pipelined(durable=sync) as conn:
                state = self._lock(conn, clock)
                after = self._write(conn, state, seal, clock)
            # Nobody wrote since this store's last append (or this is its first): the next
            # one may skip the lock.
            self._store.appended(self.key, after, solo=known is None or state == known.state)
            return after.head()
        except StoreRefused as exc:
            self._store.forget_append(self.key)
            if "UniqueViolation" in type(exc.__cause__).__name__:
                # Only a hand-edited database gets here: the head row is behind the frames.
                raise CorruptFrame(
                    self.id, -1, -1, "already stored: the thread's head row is behind its frames"
                ) from None
            raise
        except BaseException:
            self._store.forget_append(self.key)
            raise

    def _guard(self, conn: Connection, known: _State) -> None:
        """Queue the statement that locks the head row and fails (:data:`_MOVED`) unless the
        thread is as ``known``."""
        conn.execute(
            self._sql.guard,
            {
                "key": self.key,
                "tid": self.id,
                "seq": known.head_seq,
                "digest": known.head_digest,
                "catalog": known.catalog_seq,
                "wseq": known.watermark.seq if known.watermark else None,
                "wmessages": known.watermark.messages if known.watermark else None,
                "wanchor": known.watermark.anchor_seq if known.watermark else None,
            },
        )

    def _lock(self, conn: Connection, clock: Callable[[], int]) -> _State:
        """Lock the head row (made for a new thread) and read the thread's state under it:
        one round trip (two for a new thread)."""
        sql, key = self._sql, self.key
        row = conn.execute(sql.lock_head, {"key": key}).fetchone()
        if row is None:  # a new thread: its row, locked until this batch commits or not
            # A deleted one is not made again: a writer that waited on the head row while
            # it was deleted finds no row, and the tombstone committed with the delete.
            now = clock()
            tomb = conn.execute(sql.tombstoned, [key, self.id])
            conn.execute(sql.create_thread, [key, self.id, now, now])
            locked = conn.execute(sql.lock_head, {"key": key})
            if tomb.fetchone() is not None:
                said = f"thread {self.id!r} was deleted; it is not written again"
                raise ThreadDeleted(said, self.id)
            row = locked.fetchone()
            assert row is not None
        if row[0] != self.id:
            raise ThreadKeyTaken(self.id, key, str(row[0]))
        return _State(
            head_seq=int(row[1]),
            head_digest=bytes(row[2]),
            catalog_seq=None if row[3] is None else int(row[3]),
            watermark=watermark_of(row),
        )

    def _write(
        self,
        conn: Connection,
        state: _State,
        seal: Callable[[Head | None, int], tuple[list[bytes], Head]],
        clock: Callable[[], int],
        *,
        copy: bool = False,
    ) -> _State:
        """Seal the batch after ``state`` (the head row locked, or about to be by a queued
        guard) and queue its writes: frames, derived rows, watermark, catalog row, head. Reads
        from the server only when rows are behind (older code wrote frames). The state after."""
        key = self.key
        now = clock()  # once per append, as the other backends do
        head = None if state.head_seq < 0 else Head(state.head_seq, state.head_digest.hex())
        stored, new_head = seal(head, now)
        first = new_head.seq - len(stored) + 1
        self._insert(conn, key, first, stored, copy=copy)
        mark = state.watermark
        if mark is None or mark.seq != state.head_seq:  # rows behind (older code wrote frames)
            mark = catch_up(conn, self._derived_sql, self.id, key, mark, state.head_seq)[0]
        mark = write_derived(conn, self._derived_sql, self.id, key, mark, stored, first)
        conn.execute(self._derived_sql.set_watermark, [key, *mark])
        catalog_seq = -1 if state.catalog_seq is None else state.catalog_seq
        write_catalog(conn, self._catalog_sql, self.id, key, stored, first, row_seq=catalog_seq)
        digest = bytes.fromhex(new_head.digest)
        conn.execute(self._sql.move_head, [new_head.seq, digest, sum(map(len, stored)), now, key])
        return _State(new_head.seq, digest, new_head.seq, mark)

    def _insert(
        self, conn: Connection, key: int, first: int, lines: Sequence[bytes], *, copy: bool
    ) -> None:
        """The batch's rows: by one ``INSERT … unnest``, pipelined with the rest of the append,
        or (``copy``, a large batch outside a pipeline) by binary COPY, about 1.7x faster at
        1,000 rows (ADR 0025). A row already there (only a hand-edited database: the head row
        behind its frames) is a ``CorruptFrame`` (:meth:`_commit`)."""
        if not copy:
            conn.execute(self._sql.insert_frames, [key, first, list(lines)])
            return
        with conn.cursor().copy(self._sql.copy_frames) as out:
            out.set_types(_COPY_TYPES)
            for i, line in enumerate(lines):
                out.write_row((key, first + i, line))

    # -- reading --

    def derived(self) -> PostgresDerived:
        """The thread's derived rows (ADR 0025): what compile and records read in O(k)."""
        return PostgresDerived(self, self._db, self._derived_sql)

    def head(self) -> Head | None:
        with self._db.connection() as conn:
            row = conn.execute(self._sql.head, [self.key, self.id]).fetchone()
        if row is None or row[0] < 0:
            return None
        return Head(row[0], bytes(row[1]).hex())

    def read_lines(
        self, *, from_seq: int = 0, to_seq: int | None = None, start_offset: int | None = None
    ) -> Iterator[tuple[int, bytes]]:
        lo = max(0, from_seq)
        if to_seq is not None and to_seq < lo:
            return
        sql, db = self._sql, self._db
        hi = lo + _FIRST_CHUNK - 1 if to_seq is None else min(to_seq, lo + _FIRST_CHUNK - 1)
        with db.connection() as conn:
            rows = conn.execute(
                sql.first_forward,
                {"key": self.key, "tid": self.id, "lo": lo, "hi": hi},
                binary=True,
            ).fetchall()
        if not rows:
            return  # no such thread
        key, head_seq = self.key, rows[0][1]
        # The end is fixed when the read starts, as the JSONL store's committed end is.
        last = head_seq if to_seq is None else min(to_seq, head_seq)
        if lo > last:
            return
        hi = min(hi, last)
        found = [(r[2], r[3]) for r in rows if r[2] is not None]
        parent_end: bytes | None = None
        if lo > 0 and found and found[0][0] == lo - 1:
            parent_end = found.pop(0)[1]
        prev = _parent_digest(self.id, lo, parent_end)
        step = _FIRST_CHUNK
        while True:
            seq = lo
            for row_seq, line in found:
                if row_seq != seq:
                    raise CorruptFrame(self.id, seq, -1, f"frame {seq} is missing")
                prev = _checked_line(self.id, seq, line, prev)
                yield seq, line
                seq += 1
            if seq <= hi:
                raise CorruptFrame(self.id, seq, -1, f"frame {seq} is missing")
            if hi >= last:
                return
            step = min(step * 4, _MAX_CHUNK)
            lo, hi = hi + 1, min(last, hi + step)
            with db.connection() as conn:
                found = conn.execute(sql.range_forward, [key, lo, hi], binary=True).fetchall()

    def log_bytes(self) -> int:
        # Kept with the head (the lines' bytes), plus a newline each: no rows are read.
        with self._db.connection() as conn:
            row = conn.execute(self._sql.log_bytes, [self.key, self.id]).fetchone()
        return 0 if row is None else int(row[0])

    def lines_holding(self, needle: bytes) -> Iterator[tuple[int, bytes]]:
        # The server looks through the rows; only those that hold the bytes come back.
        with self._db.connection() as conn:
            rows = conn.execute(
                self._sql.lines_holding,
                {"key": self.key, "tid": self.id, "needle": needle},
                binary=True,
            ).fetchall()
        for seq, line in rows:
            yield seq, bytes(line)

    def stored_lines(self) -> Iterator[tuple[int, bytes]]:
        # Every row as it is, in seq order, unchecked: `verify` checks each line itself and names
        # every bad one (a read that checks would stop at the first). Keyset chunks by seq.
        sql, db = self._sql, self._db
        after, step = -1, _FIRST_CHUNK
        while True:
            with db.connection() as conn:
                rows = conn.execute(
                    sql.stored_after,
                    {"key": self.key, "tid": self.id, "after": after, "n": step},
                    binary=True,
                ).fetchall()
            for seq, line in rows:
                yield seq, bytes(line)
            if len(rows) < step:
                return
            after = rows[-1][0]
            step = min(step * 4, _MAX_CHUNK)

    def read_lines_backwards(self) -> Iterator[tuple[int, bytes]]:
        # Chunk by chunk from the head down, each chunk with the end of the line below it, so
        # every frame is checked against its parent before it is given out.
        sql, db = self._sql, self._db
        step = _FIRST_CHUNK // 2
        with db.connection() as conn:
            rows = conn.execute(
                sql.first_backward, {"key": self.key, "tid": self.id, "n": step}, binary=True
            ).fetchall()
        if not rows or rows[0][1] < 0:
            return
        key, hi = self.key, rows[0][1]
        found = [(r[2], r[3]) for r in rows if r[2] is not None]
        while True:
            lo = max(0, hi - step + 1)
            seq = hi
            for j, (row_seq, line) in enumerate(found):
                if seq < lo:
                    break  # the line below the chunk: a parent only
                if row_seq != seq:
                    raise CorruptFrame(self.id, seq, -1, f"frame {seq} is missing")
                below = found[j + 1] if j + 1 < len(found) else None
                parent_end = below[1] if below is not None and below[0] == seq - 1 else None
                _checked_line(self.id, seq, line, _parent_digest(self.id, seq, parent_end))
                yield seq, line
                seq -= 1
            if seq >= lo:
                raise CorruptFrame(self.id, seq, -1, f"frame {seq} is missing")
            if lo == 0:
                return
            hi = lo - 1
            step = min(step * 4, _MAX_CHUNK)
            with db.connection() as conn:
                found = conn.execute(
                    sql.range_backward,
                    {"key": key, "lo": max(0, hi - step + 1), "hi": hi},
                    binary=True,
                ).fetchall()


class _LogSql:
    """The statements of the ``threads`` and ``frames`` tables of one store schema (its name
    validated, so put in unquoted)."""

    def __init__(self, s: str) -> None:
        # The head row, locked, with the derived rows' watermark (ADR 0025: they are written
        # in the same transaction).
        # The row alone is locked (no join: a distributed table locks rows of one shard); its
        # id is checked by the caller (another id may hold the key: ThreadKeyTaken).
        self.lock_head = (
            "SELECT thread_id, head_seq, head_digest, "
            f"(SELECT seq FROM {s}.catalog WHERE thread_key = %(key)s), "
            + ", ".join(
                f"(SELECT {c} FROM {s}.derived_threads WHERE thread_key = %(key)s)"
                for c in ("seq", "messages", "anchor_seq")
            )
            + f" FROM {s}.threads WHERE thread_key = %(key)s FOR UPDATE"
        )
        self.create_thread = (
            f"INSERT INTO {s}.threads "
            "(thread_key, thread_id, head_seq, head_digest, bytes, created_ms, updated_ms) "
            "VALUES (%s, %s, -1, ''::bytea, 0, %s, %s) ON CONFLICT (thread_key) DO NOTHING"
        )
        self.copy_frames = f"COPY {s}.frames (thread_key, seq, line) FROM STDIN (FORMAT BINARY)"
        self.insert_frames = (
            f"INSERT INTO {s}.frames (thread_key, seq, line) "
            # binary parameters (%b): a text-format bytea array escapes every byte (measured:
            # 7.6 ms of the client's CPU for 100 frames, against 0.3 ms)
            "SELECT %b, %b + n - 1, line FROM unnest(%b::bytea[]) WITH ORDINALITY AS x(line, n)"
        )
        # A store's next append when it made the last one: the head row locked as
        # lock_head does, and the statement fails (a text that is no number, the only error
        # SQL can raise without a function) unless the thread is where this store left it.
        self.guard = (
            f"WITH s AS (SELECT thread_key FROM {s}.threads WHERE thread_key = %(key)s "
            "AND thread_id = %(tid)s AND head_seq = %(seq)s AND head_digest = %(digest)s "
            f"AND (SELECT seq FROM {s}.catalog WHERE thread_key = %(key)s) "
            "IS NOT DISTINCT FROM %(catalog)s::int8 "
            + " ".join(
                f"AND (SELECT {c} FROM {s}.derived_threads WHERE thread_key = %(key)s) "
                f"IS NOT DISTINCT FROM %({p})s::int8"
                for c, p in (("seq", "wseq"), ("messages", "wmessages"), ("anchor_seq", "wanchor"))
            )
            + f" FOR UPDATE) SELECT CASE WHEN count(*) = 1 THEN 0 ELSE ('{_MOVED} ' || count(*))"
            "::int END FROM s"
        )
        # The derived rows' watermark (DerivedSql.set_watermark) moves with the head, in the
        # same transaction: two statements, no data-modifying CTE across two tables.
        self.move_head = (
            f"UPDATE {s}.threads SET head_seq = %s, head_digest = %s, bytes = bytes + %s, "
            "updated_ms = %s WHERE thread_key = %s"
        )
        self.head = (
            f"SELECT head_seq, head_digest FROM {s}.threads "
            "WHERE thread_key = %s AND thread_id = %s"
        )
        self.threads = f"SELECT thread_id FROM {s}.threads WHERE head_seq >= 0"
        # The thread's row comes even when no frame is in range (LEFT JOIN): its head fixes
        # where the read ends, in the same round trip as the first rows.
        self.first_forward = (
            f"SELECT t.thread_key, t.head_seq, f.seq, "
            f"CASE WHEN f.seq < %(lo)s THEN {_TAIL} ELSE f.line END "
            f"FROM {s}.threads t LEFT JOIN {s}.frames f ON f.thread_key = %(key)s "
            "AND f.seq BETWEEN %(lo)s - 1 AND least(t.head_seq, %(hi)s) "
            "WHERE t.thread_key = %(key)s AND t.thread_id = %(tid)s ORDER BY f.seq"
        )
        self.range_forward = (
            f"SELECT seq, line FROM {s}.frames "
            "WHERE thread_key = %s AND seq BETWEEN %s AND %s ORDER BY seq"
        )
        self.stored_after = (
            f"SELECT f.seq, f.line FROM {s}.frames f JOIN {s}.threads t ON t.thread_key = %(key)s "
            "WHERE f.thread_key = %(key)s AND t.thread_id = %(tid)s AND f.seq > %(after)s "
            "ORDER BY f.seq LIMIT %(n)s"
        )
        self.log_bytes = (
            f"SELECT bytes + head_seq + 1 FROM {s}.threads WHERE thread_key = %s "
            "AND thread_id = %s AND head_seq >= 0"
        )
        self.lines_holding = (
            f"SELECT f.seq, f.line FROM {s}.frames f JOIN {s}.threads t ON t.thread_key = %(key)s "
            "WHERE f.thread_key = %(key)s AND t.thread_id = %(tid)s "
            "AND position(%(needle)s::bytea IN f.line) > 0 ORDER BY f.seq"
        )
        self.first_backward = (
            f"SELECT t.thread_key, t.head_seq, f.seq, "
            f"CASE WHEN f.seq <= t.head_seq - %(n)s THEN {_TAIL} ELSE f.line END "
            f"FROM {s}.threads t LEFT JOIN {s}.frames f ON f.thread_key = %(key)s "
            "AND f.seq BETWEEN t.head_seq - %(n)s AND t.head_seq "
            "WHERE t.thread_key = %(key)s AND t.thread_id = %(tid)s ORDER BY f.seq DESC"
        )
        self.range_backward = (
            f"SELECT f.seq, CASE WHEN f.seq < %(lo)s THEN {_TAIL} ELSE f.line END "
            f"FROM {s}.frames f WHERE f.thread_key = %(key)s "
            "AND f.seq BETWEEN %(lo)s - 1 AND %(hi)s ORDER BY f.seq DESC"
        )
        self.tombstoned = (
            f"SELECT 1 FROM {s}.tombstones WHERE thread_key = %s AND thread_id = %s LIMIT 1"
        )
        self.lock_for_delete = (
            f"SELECT thread_key, head_seq, head_digest FROM {s}.threads WHERE thread_key = %s "
            "AND thread_id = %s FOR UPDATE"
        )
        self.lines_of = f"SELECT line FROM {s}.frames WHERE thread_key = %s ORDER BY seq"
        self.add_tombstone = (
            f"INSERT INTO {s}.tombstones "
            "(thread_key, thread_id, head_seq, head_digest, frames, bytes, reason, time_ms) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
        )
        self.tombstones = (
            "SELECT thread_id, head_seq, head_digest, frames, bytes, reason, time_ms "
            f"FROM {s}.tombstones ORDER BY tombstone_id"
        )
        self.delete_rows = tuple(
            f"DELETE FROM {s}.{t} WHERE thread_key = %s"
            for t in ("frames", "derived_threads", "messages", "checkpoints", "marks", "catalog")
        )
        self.delete_thread = f"DELETE FROM {s}.threads WHERE thread_key = %s"
        self.referenced = (
            "SELECT i FROM unnest(%s::text[]) i WHERE EXISTS "
            f"(SELECT 1 FROM {s}.frames f WHERE position(convert_to(i, 'UTF8') IN f.line) > 0)"
        )


class PostgresStore(BaseStore):
    """Threads and artifacts in one schema of a PostgreSQL database.

    ``url`` is a libpq URL (``postgresql://user:password@host:port/dbname?sslmode=…``).
    ``schema``: the schema the store lives in (else the URL's ``?schema=``, else
    ``continuity``); a schema the DBA made for the role needs no privilege on the database.
    ``create``: make the store's tables when the schema holds none (else
    :class:`~continuity.errors.StoreNotFound`); a store made by older code is upgraded either
    way. ``durable=False`` commits without waiting for the server's WAL flush (bulk imports
    that can be rerun). ``pool_size`` bounds the connections this store holds; it is safe to
    use from several threads. Close it (or use it as a context manager) to close them.
    ``pooled=False`` (a hook, a short-lived process): no pool, the connection that checked the
    schema serves every call (one that finds it in use gets a connection of its own).
    ``statement_timeout`` / ``lock_timeout`` (seconds) bound every statement and lock wait of
    its sessions (a hook's budget); one that runs out is :class:`~continuity.errors.StoreBusy`.

    Raises :class:`~continuity.errors.StoreUnavailable` when the server cannot be reached or
    refuses the login, :class:`~continuity.errors.SchemaTooNew` when newer code made the store,
    :class:`~continuity.errors.StoreRefused` (here or on a later call) when the server is
    read-only or the role lacks a privilege the call needs. Works through a pooler in
    transaction mode (PgBouncer): ADR 0041.
    """

    def __init__(
        self,
        url: str,
        *,
        create: bool = False,
        schema: str | None = None,
        durable: bool = True,
        pool_size: int = 4,
        connect_timeout: float = 10.0,
        statement_timeout: float | None = None,
        lock_timeout: float | None = None,
        pooled: bool = True,
        clock: Callable[[], int] | None = None,
        redactor: Callable[[fr.Frame], fr.Frame] | None = None,
    ) -> None:
        need_driver(pooled)
        from continuity.paths import split_schema
        from continuity.store.postgres.db import Database  # psycopg: only when a store is opened

        libpq_url, named = split_schema(url)
        if schema is not None and named is not None and schema != named:
            raise ValueError(f"the URL names schema {named!r} and schema={schema!r} was given")
        self.clock = clock or now_ms
        self.redactor = redactor
        self.durable = durable
        self._url = url
        self._db = Database(
            libpq_url,
            schema=next(s for s in (schema, named, _DEFAULT_SCHEMA) if s is not None),
            pool_size=pool_size,
            connect_timeout=connect_timeout,
            create=create,
            now_ms=now_ms(),
            statement_timeout=statement_timeout,
            lock_timeout=lock_timeout,
            pooled=pooled,
        )
        self.schema = self._db.schema
        self._sql = _LogSql(self.schema)
        self._derived_sql = DerivedSql(self.schema)
        self._catalog = PostgresCatalog(self._db, CatalogSql(self.schema))
        self._search: PostgresSearch | None = None
        self.artifacts = PostgresArtifactStore(self._db, durable=durable)
        import threading

        self._known: dict[int, _Known] = {}
        self._known_lock = threading.Lock()
        """Each thread's state after this store's last append to it (ADR 0054)."""

    def last_append(self, key: int) -> _Known | None:
        """The state this store left thread ``key`` in by its last append (None: unknown)."""
        return self._known.get(key)

    def appended(self, key: int, state: _State, *, solo: bool) -> None:
        known = self._known
        with self._known_lock:  # the store may be shared by threads
            known.pop(key, None)
            known[key] = _Known(state, solo)
            while len(known) > _KNOWN_THREADS:
                known.pop(next(iter(known)), None)

    def forget_append(self, key: int) -> None:
        self._known.pop(key, None)

    @property
    def location(self) -> str:
        """The URL the store was opened with (it may hold a password: show it with
        :func:`continuity.paths.describe_store`)."""
        return self._url

    def catalog(self) -> PostgresCatalog:
        """The ``catalog`` table (:mod:`.catalog`): every thread's listing row, kept with each
        append, read by the store-wide listings in one query."""
        return self._catalog

    def search_backend(self) -> PostgresSearch:
        """The search index kept in this store's tables (ADR 0026): search and recall read it
        instead of scanning the log."""
        if self._search is None:  # numpy and the search tables: only once a search asks
            from continuity.store.postgres.search import PostgresSearch

            self._search = PostgresSearch(self._db, self)
        return self._search

    @property
    def local_dir(self) -> Path:
        """This machine's folder for what belongs with the store here (an adapter's settings,
        cursors, ``errors.log``): :func:`continuity.paths.local_dir_of` of its URL."""
        from continuity.paths import local_dir_of

        return local_dir_of(self._url)

    def __repr__(self) -> str:
        return f"PostgresStore({self._db.location!r}, schema={self.schema!r})"

    def thread(self, thread_id: str) -> PostgresThread:
        return PostgresThread(
            self,
            thread_id,
            db=self._db,
            sql=self._sql,
            derived_sql=self._derived_sql,
            catalog_sql=self._catalog.sql,
        )

    def threads(self) -> list[str]:
        with self._db.connection() as conn:
            rows = conn.execute(self._sql.threads).fetchall()
        return sorted(str(r[0]) for r in rows)

    def job_lock(self, thread_id: str, job: str) -> AbstractContextManager[None]:
        """Held in this process and by a transaction-level advisory lock, in a transaction
        left open for the job's length on a connection of its own, so other processes and
        hosts are excluded too, through a pooler in transaction mode as well (it keeps that
        server session for the open transaction); a holder that dies releases it with its
        connection. ADR 0041: no session-level lock, which a pooler gives to whoever gets the
        session next."""
        return self._job_advisory_lock(thread_id, job)

    @contextmanager
    def _job_advisory_lock(self, thread_id: str, job: str) -> Iterator[None]:
        from continuity.store.postgres.schema import advisory_key

        with ExitStack() as held:
            held.enter_context(super().job_lock(thread_id, job))
            key = advisory_key("job", self.schema, thread_id, job)
            if not held.enter_context(self._db.session_lock(key)):
                raise JobInFlight(f"a {job} job for this thread is already running")
            yield

    # -- forgetting (ADR 0040) --

    def delete_thread(self, thread_id: str, *, reason: str = "delete") -> DeletionReport:
        """One transaction: the head row locked (appends wait, then find the tombstone), the
        tombstone written, the frames, derived and search rows and the head row deleted."""
        from continuity.store.base import validate_thread_id

        validate_thread_id(thread_id)
        key = thread_key(thread_id)
        self.forget_append(key)
        sql = self._sql
        search_tables = self._search_tables()
        with self._db.transaction(durable=True) as conn:
            row = conn.execute(sql.lock_for_delete, [key, thread_id]).fetchone()
            if row is None:
                tomb = self.tombstone_of(thread_id)
                if tomb is None:
                    raise ThreadNotFound(f"no thread {thread_id!r} in this store", thread_id)
                return DeletionReport(tombstone=tomb, artifacts=(), finished_earlier=True)
            _key, head_seq, head_digest = row
            cur = conn.cursor(binary=True)
            lines = (bytes(r[0]) for r in cur.execute(sql.lines_of, [key]))
            n, nbytes, refs, maybe = deletion_facts(lines)
            tomb = Tombstone(
                thread_id=thread_id,
                head_seq=int(head_seq),
                head_digest=bytes(head_digest).hex(),
                frames=n,
                bytes=nbytes,
                reason=reason,
                time_ms=self.clock(),
            )
            conn.execute(
                sql.add_tombstone,
                [key, thread_id, tomb.head_seq, tomb.head_digest, n, nbytes, reason, tomb.time_ms],
            )
            for statement in sql.delete_rows:
                conn.execute(statement, [key])
            for table in search_tables:
                conn.execute(f"DELETE FROM {self.schema}.{table} WHERE thread_key = %s", [key])
            conn.execute(sql.delete_thread, [key])
        found = refs | {a for a in maybe if self.artifacts.exists(a)}
        return DeletionReport(tombstone=tomb, artifacts=tuple(sorted(found)))

    def _search_tables(self) -> list[str]:
        """The search tables this store has (they are made when a search first needs them)."""
        from continuity.store.postgres.schema import SEARCH_TABLE_NAMES

        with self._db.connection() as conn:
            rows = conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
                "AND table_name = ANY(%s)",
                [self.schema, list(SEARCH_TABLE_NAMES)],
            ).fetchall()
        return sorted(str(r[0]) for r in rows)

    def tombstones(self) -> list[Tombstone]:
        with self._db.connection() as conn:
            rows = conn.execute(self._sql.tombstones).fetchall()
        return [
            Tombstone(
                thread_id=str(r[0]),
                head_seq=int(r[1]),
                head_digest=str(r[2]),
                frames=int(r[3]),
                bytes=int(r[4]),
                reason=str(r[5]),
                time_ms=int(r[6]),
            )
            for r in rows
        ]

    def referenced(self, ids: Iterable[str]) -> set[str]:
        wanted = sorted(set(ids))
        if not wanted:
            return set()
        with self._db.connection() as conn:
            rows = conn.execute(self._sql.referenced, [wanted]).fetchall()
        return {str(r[0]) for r in rows}

    def orphaned_rows(self) -> list[str]:
        """Rows of the derived and search tables, and frames, whose thread key has no head
        row (a thread removed by hand, not by ``delete``), a line per table and key."""
        from continuity.store.postgres.schema import DERIVED_TABLES

        s = self.schema
        found: list[str] = []
        with self._db.connection() as conn:
            for table in ("frames", *DERIVED_TABLES, *self._search_tables()):
                rows = conn.execute(
                    f"SELECT x.thread_key, count(*) FROM {s}.{table} x WHERE NOT EXISTS "
                    f"(SELECT 1 FROM {s}.threads t WHERE t.thread_key = x.thread_key) "
                    "GROUP BY x.thread_key ORDER BY x.thread_key"
                ).fetchall()
                found += [
                    f"table {table}: {r[1]} rows of thread key {r[0]}, which has no thread row"
                    for r in rows
                ]
        return found

    def reclaim_space(self) -> list[str]:
        """``VACUUM (FULL)`` of every table of the store, then ``CHECKPOINT``: a deleted
        thread's rows stay in the table, index and TOAST files (and a plain VACUUM only marks
        their space free, leaving the bytes) until a rewrite; FULL writes each table and its
        indexes anew and drops the old files. Each table is locked (ACCESS EXCLUSIVE) while it
        is rewritten: appends wait. The write-ahead log still holds the text until the server
        recycles those segments after a checkpoint (and any WAL archive or backup keeps it);
        the checkpoint needs a superuser or ``pg_checkpoint``, and is skipped, saying so,
        without. A table the role does not own is not rewritten (the server skips it): said.
        ADR 0054."""
        import time

        s = self.schema
        said: list[str] = []
        sizes = (
            "SELECT c.relname, c.relfilenode, pg_total_relation_size(c.oid) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s "
            "AND c.relkind = 'r' ORDER BY c.relname"
        )
        conn = self._db.connect()  # autocommit: VACUUM runs outside a transaction
        with conn:
            before = {r[0]: (r[1], int(r[2])) for r in conn.execute(sizes, [s]).fetchall()}
            start = time.monotonic()
            for table in before:
                with self._db.mapped():
                    conn.execute(f"VACUUM (FULL, ANALYZE) {s}.{table}")
            seconds = time.monotonic() - start
            after = {r[0]: (r[1], int(r[2])) for r in conn.execute(sizes, [s]).fetchall()}
            kept = sorted(t for t in before if t in after and after[t][0] == before[t][0])
            total_before = sum(b for _f, b in before.values())
            total_after = sum(b for _f, b in after.values())
            said.append(
                f"rewrote {len(before) - len(kept)} of {len(before)} tables of schema {s} in "
                f"{seconds:.1f} s: {total_before:,} -> {total_after:,} bytes"
            )
            if kept:
                said.append(
                    f"not rewritten (the role does not own them): {', '.join(kept)}; ask the "
                    f"owner to run VACUUM (FULL) on them"
                )
            try:
                with self._db.mapped():
                    conn.execute("CHECKPOINT")
                said.append(
                    "checkpoint done: the write-ahead log segments holding the deleted text are "
                    "recycled as the server writes on (WAL archives and backups keep them)"
                )
            except StoreRefused:
                said.append(
                    "no checkpoint (needs a superuser or pg_checkpoint): the write-ahead log "
                    "holds the deleted text until the server's next checkpoint recycles it"
                )
        return said

    def read_many(self, threads: Sequence[Thread]) -> AbstractContextManager[Iterator[Thread]]:
        """The threads read in one snapshot by a few cursors in key order (:func:`read_many`,
        ADR 0063): what ``verify`` reads of each, in a handful of round trips in all."""
        return read_many(self, threads)

    def derived_bytes(self) -> int:
        """The bytes on the server (tables, indexes, TOAST) of everything derived from the
        frames: the derived tables, the catalog and the search index (what ``stats`` prints as
        cache bytes; the frames, heads, tombstones and artifacts are the store itself)."""
        with self._db.connection() as conn:
            row = conn.execute(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s "
                "AND c.relkind = 'r' AND c.relname = ANY(%s)",
                [self.schema, list(_DERIVED_RELATIONS)],
            ).fetchone()
        return 0 if row is None else int(row[0])

    def close(self) -> None:
        """Close the store's connections (closing twice is harmless); it cannot be used after."""
        self._db.close()


def need_driver(pooled: bool = True) -> None:
    """psycopg and, for a ``pooled`` store, its pool (the ``postgres`` extra), or a
    :class:`~continuity.MissingExtra` that says how to install them rather than an ImportError
    from deep in the backend. An unpooled store (a hook) never imports the pool (ADR 0041)."""
    try:
        import psycopg  # noqa: F401

        if pooled:
            import psycopg_pool  # noqa: F401
    except ImportError as exc:  # not installed, or psycopg without a libpq wrapper (no name)
        missing = exc.name.partition(".")[0] if exc.name else None
        raise MissingExtra("a PostgreSQL store", "postgres", missing) from None


# --- many threads read in one pass (ADR 0063) ----------------------------------------
#
# Many threads read in one pass over the store (ADR 0063): what ``verify`` checks of each
# thread — its stored lines and its derived rows — read from one snapshot by a few cursors in key
# order, not by a few queries a thread.
#
# :func:`read_many` opens one ``REPEATABLE READ, READ ONLY`` transaction, reads the threads' head
# rows and watermarks (one query), then walks server-side cursors over ``frames``, ``messages``,
# ``checkpoints`` and ``marks`` of those keys, in key order, side by side, and hands out each
# thread as a :class:`SnapshotThread`: a :class:`~continuity.store.postgres.PostgresThread` whose
# ``stored_lines``, ``read_lines`` (from the start), ``head`` and whose derived rows' check answer
# from what was read. Everything else it is asked goes to the server as for any thread. A thread
# longer than :data:`SNAPSHOT_FRAMES` is handed out as a plain thread (its frames are not held in
# memory; it reads them itself, chunk by chunk).
#
# The cursors fan out to every node of a distributed store (each reads one table, keyed by the
# thread keys given: :data:`tests.support.distributed.FAN_OUT`).
#
# Nothing here imports psycopg: the connection is the store's.

SNAPSHOT_FRAMES: Final = 16_384
"""A thread with more frames than this is not held in memory by the pass: it reads itself."""
_FETCH: Final = 4_096
"""Rows a cursor fetches at a time."""

Rows = list[tuple[Any, ...]]


class SnapshotThread(PostgresThread):
    """A thread whose lines, head and derived rows were read by :func:`read_many`."""

    def __init__(
        self,
        store: PostgresStore,
        thread_id: str,
        *,
        state: tuple[Any, ...] | None,
        lines: Sequence[tuple[int, bytes]],
        dump: dict[str, Rows],
    ) -> None:
        base = store.thread(thread_id)
        super().__init__(
            store,
            thread_id,
            db=base._db,
            sql=base._sql,
            derived_sql=base._derived_sql,
            catalog_sql=base._catalog_sql,
        )
        self._state = state
        """``(thread_key, head_seq, watermark seq, messages, anchor_seq, head digest)``; None:
        no such thread."""
        self._lines = lines
        self._dump = dump

    def head(self) -> Head | None:
        if self._state is None or self._state[1] < 0:
            return None
        return Head(int(self._state[1]), str(self._state[5]))

    def stored_lines(self) -> Iterator[tuple[int, bytes]]:
        return iter(self._lines)

    def read_lines(
        self, *, from_seq: int = 0, to_seq: int | None = None, start_offset: int | None = None
    ) -> Iterator[tuple[int, bytes]]:
        if from_seq > 0 or start_offset is not None:
            return super().read_lines(from_seq=from_seq, to_seq=to_seq, start_offset=start_offset)
        return self._checked(to_seq)

    def _checked(self, to_seq: int | None) -> Iterator[tuple[int, bytes]]:
        """The lines from seq 0, each checked against its parent, as
        :meth:`PostgresThread.read_lines` gives them (the same errors where it would stop)."""
        if self._state is None or (to_seq is not None and to_seq < 0):
            return
        head_seq = int(self._state[1])
        last = head_seq if to_seq is None else min(to_seq, head_seq)
        seq, prev = 0, fr.GENESIS_DIGEST
        for row_seq, line in self._lines:
            if row_seq > last:
                break
            if row_seq != seq:
                raise CorruptFrame(self.id, seq, -1, f"frame {seq} is missing")
            prev = _checked_line(self.id, seq, line, prev)
            yield seq, line
            seq += 1
        if seq <= last:
            raise CorruptFrame(self.id, seq, -1, f"frame {seq} is missing")

    def derived(self) -> PostgresDerived:
        state = None if self._state is None else self._state[:5]
        return PostgresDerived(
            self, self._db, self._derived_sql, snapshot=Snapshot(state, self._dump)
        )


class _Cursor:
    """A server-side cursor's rows grouped by their first column (the thread key, ascending)."""

    def __init__(self, conn: Connection, name: str, statement: str, keys: list[int]) -> None:
        self._cur = conn.cursor(name=name, binary=True)
        self._cur.itersize = _FETCH
        self._rows = iter(self._cur.execute(statement, [keys]))
        self._next: tuple[Any, ...] | None = next(self._rows, None)

    def take(self, key: int) -> Rows:
        """The rows of ``key`` (the rows of smaller keys, if any, are skipped)."""
        out: Rows = []
        while self._next is not None and self._next[0] <= key:
            if self._next[0] == key:
                out.append(tuple(self._next[1:]))
            self._next = next(self._rows, None)
        return out

    def close(self) -> None:
        self._cur.close()


@contextmanager
def read_many(store: PostgresStore, threads: Sequence[Thread]) -> Iterator[Iterator[Thread]]:
    """The threads of ``threads``, each as a :class:`SnapshotThread` (or, a long one, as a
    plain thread), in the order of their keys, read in one snapshot while the block lasts."""
    ids = {thread_key(t.id): t.id for t in threads}
    opened: list[_Cursor] = []
    with store._db.connection() as conn:
        try:
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                yield _walk(store, conn, ids, opened)
        finally:
            for cur in opened:  # the transaction's end closed them: no round trip
                cur.close()


def _walk(
    store: PostgresStore, conn: Connection, ids: dict[int, str], opened: list[_Cursor]
) -> Iterator[Thread]:
    s = store.schema
    keys = sorted(ids)
    states: dict[int, tuple[Any, ...]] = {}
    for row in conn.execute(
        "SELECT t.thread_key, t.thread_id, t.head_seq, d.seq, d.messages, d.anchor_seq, "
        f"t.head_digest FROM {s}.threads t LEFT JOIN {s}.derived_threads d "
        "ON d.thread_key = t.thread_key WHERE t.thread_key = ANY(%s) ORDER BY t.thread_key",
        [keys],
    ).fetchall():
        key = int(row[0])
        if row[1] == ids.get(key):  # a key held by another id: that thread has no rows
            digest = bytes(row[6]).hex()
            states[key] = (key, int(row[2]), row[3], row[4], row[5], digest)
    held = [k for k in keys if k in states and states[k][1] < SNAPSHOT_FRAMES]
    cursors = {
        "frames": _Cursor(
            conn,
            "continuity_frames",
            f"SELECT thread_key, seq, line FROM {s}.frames WHERE thread_key = ANY(%s) "
            "ORDER BY thread_key, seq",
            held,
        ),
        "messages": _Cursor(
            conn,
            "continuity_messages",
            f"SELECT thread_key, ordinal, seq, tokens, role, message_id FROM {s}.messages "
            "WHERE thread_key = ANY(%s) ORDER BY thread_key, ordinal",
            held,
        ),
        "checkpoints": _Cursor(
            conn,
            "continuity_checkpoints",
            f"SELECT thread_key, seq, to_seq, checkpoint_id, cut_rule_id, summary_kind, "
            f"summary_artifact_id FROM {s}.checkpoints WHERE thread_key = ANY(%s) "
            "ORDER BY thread_key, seq",
            held,
        ),
        "marks": _Cursor(
            conn,
            "continuity_marks",
            f"SELECT thread_key, seq, type, kind, key, spans FROM {s}.marks "
            "WHERE thread_key = ANY(%s) ORDER BY thread_key, seq",
            held,
        ),
    }
    opened.extend(cursors.values())
    small = set(held)
    for key in keys:
        tid = ids[key]
        if key in states and key not in small:
            yield store.thread(tid)  # long: it reads itself, chunk by chunk
            continue
        state = states.get(key)
        lines = [(int(r[0]), bytes(r[1])) for r in cursors["frames"].take(key)]
        dump = {t: cursors[t].take(key) for t in ("messages", "checkpoints", "marks")}
        if state is not None and state[2] is not None:
            dump["derived_threads"] = [(state[2], state[3], state[4])]
        else:
            dump["derived_threads"] = []
        yield SnapshotThread(store, tid, state=state, lines=lines, dump=dump)
