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

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Final, NamedTuple

import msgspec

from continuity import frames as fr
from continuity.errors import (
    ContinuityError,
    CorruptFrame,
    JobInFlight,
    MissingExtra,
    SeqConflict,
    StoreBusy,
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
    Watermark,
    catch_up,
    watermark_of,
    write_derived,
)
from continuity.store.postgres.keys import thread_key

if TYPE_CHECKING:
    from psycopg import Cursor as _Cursor

    from continuity.store.postgres.db import Connection, Database
    from continuity.store.postgres.search import PostgresSearch

    Cursor = _Cursor[tuple[object, ...]]

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
_PENDING_MS: Final = 60_000
"""A batch left for the lock's holder (group commit) is dropped, unwritten, after this long:
its writer gave up waiting (it says so) or died."""
_batch_encoder: Final = msgspec.json.Encoder()
_batch_decoder: Final = msgspec.json.Decoder(list[fr.Frame])
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

        def handover() -> tuple[bytes, int | None] | None:
            """The batch as another writer of the thread seals it (redacted here, as the
            seal would); None: it does not encode (the own seal names what is wrong)."""
            redact = store.redactor
            try:
                return _batch_encoder.encode([redact(f) if redact else f for f in batch]), (
                    expected_seq
                )
            except (TypeError, ValueError, OverflowError, msgspec.EncodeError):
                return None

        # A pooled store only: a hook (one held connection), whose process a watchdog may end
        # while it waits, never hands a batch over (ADR 0063).
        done = self._commit(
            seal,
            durable,
            clock=store.clock,
            rows=len(batch),
            handover=handover if self._db.pooled else None,
        )
        return done if isinstance(done, range) else given

    def append_sealed(self, lines: Sequence[bytes], *, durable: bool | None = None) -> range:
        stored = [bytes(line) for line in lines]

        def check(head: Head | None, now: int) -> tuple[list[bytes], Head]:
            return stored, check_sealed(self.id, stored, head)

        new_head = self._commit(check, durable, clock=now_ms, rows=len(stored))
        assert isinstance(new_head, Head)  # sealed lines are never handed over
        return range(new_head.seq - len(stored) + 1, new_head.seq + 1)

    def _commit(
        self,
        seal: Callable[[Head | None, int], tuple[list[bytes], Head]],
        durable: bool | None,
        *,
        clock: Callable[[], int],
        rows: int,
        handover: Callable[[], tuple[bytes, int | None] | None] | None = None,
    ) -> Head | range:
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
        and is the faster there) after the lock, in a transaction of a few round trips.

        Group commit (ADR 0063): a writer that finds the head row locked by another writer
        (``handover`` given: ``append``'s batches under :data:`_COPY_ROWS`) does not queue for
        it: it leaves its batch in ``pending`` and waits for the lock's holder to commit; the
        holder of the lock seals and writes every pending batch of the thread after its own, in
        its transaction, and records where each went. So 8 writers into one thread pay one
        commit for several batches, not one each. Returns the given range of a batch another
        writer committed, else the new head."""
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
                except StoreBusy as exc:  # another writer holds the head row (NOWAIT)
                    if not _lock_taken(exc):
                        raise
                known = _Known(known.state, False)  # someone else writes this thread too
            try:
                after, state = self._locked(seal, sync, clock, nowait=handover is not None)
            except StoreBusy as exc:
                payload = None if handover is None else _lock_taken(exc) and handover()
                if not payload:
                    raise
                self._store.forget_append(self.key)
                given = self._hand_over(payload, seal, sync, clock)
                if given is not None:
                    return given
                after, state = self._locked(seal, sync, clock, nowait=False)
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

    def _locked(
        self,
        seal: Callable[[Head | None, int], tuple[list[bytes], Head]] | None,
        sync: bool,
        clock: Callable[[], int],
        *,
        nowait: bool,
    ) -> tuple[_State, _State]:
        """The lock path: lock the head row (``nowait``: or fail at once with
        ``LockNotAvailable`` when another writer holds it), seal ``seal``'s batch (None: none of
        its own) and every batch other writers left pending, write them, commit. (The state
        after, the state found.)"""
        sql, key = self._sql, self.key
        results: list[tuple[int, int | None, int | None, str | None]] = []
        with self._db.pipelined(durable=sync) as conn:
            pending: list[Cursor] = []
            state = self._lock(conn, clock, nowait=nowait, then=pending)
            waiting = pending[0].fetchall()
            if seal is None and not waiting:
                raise _NothingPending
            if not sync and any(row[3] for row in waiting):  # a durable writer's batch
                conn.execute("SET LOCAL synchronous_commit = on")
            now = clock()
            found = None if state.head_seq < 0 else state.head()
            stored, head = _grouped(self.id, seal, waiting, results)(found, now)
            after = state
            if head is not None and stored:
                sealed = (stored, head)
                after = self._write(conn, state, lambda _h, _n: sealed, lambda: now)
            if results:
                conn.execute(sql.pending_done, [*map(list, zip(*results, strict=True)), key])
            conn.execute(sql.pending_expired, [key, _PENDING_MS])
        return after, state

    def _hand_over(
        self,
        payload: tuple[bytes, int | None],
        seal: Callable[[Head | None, int], tuple[list[bytes], Head]],
        sync: bool,
        clock: Callable[[], int],
    ) -> range | None:
        """Leave the batch in ``pending`` and wait for the head row's holder to commit it (or,
        when the lock comes free with the batch still pending, commit it and the others): its
        given range. None: it cannot be handed over (the writer seals it itself, so its own
        seal says what is wrong)."""
        import secrets

        sql, key = self._sql, self.key
        pid = secrets.randbits(63)
        frames, expected = payload
        try:
            with self._db.transaction(durable=False) as conn:
                # Not durable: the batch is acknowledged only once a commit wrote it (a durable
                # one when ``sync``), and that commit flushes this one before it.
                conn.execute(sql.add_pending, [key, pid, self.id, expected, sync, frames])
        except StoreRefused:  # a role that may not write `pending`: wait for the lock instead
            return None
        try:
            while True:
                with self._db.pipelined(durable=False) as conn:
                    conn.execute(sql.wait_head, [key])  # the holder's commit
                    done = conn.execute(sql.take_pending, [key, pid])
                    there = conn.execute(sql.is_pending, [key, pid])
                row = done.fetchone()
                if row is not None:
                    return self._handed(row)
                if there.fetchone() is None:
                    raise StoreBusy(
                        f"the batch for thread {self.id!r} waited over {_PENDING_MS // 1000} s "
                        "for the thread's other writers and was not written"
                    )
                # the lock came free and the batch is still pending: commit the pending ones
                with contextlib.suppress(_NothingPending):
                    self._locked(None, sync, clock, nowait=False)
                self._store.forget_append(self.key)
        except BaseException:
            # Given up (a lost connection, a budget, an interrupt): take the batch back, so a
            # writer told it failed finds it unwritten; one written meanwhile is its answer.
            taken = self._withdraw(pid)
            if taken is None:
                raise
            return self._handed(taken)

    def _handed(self, row: Sequence[object]) -> range | None:
        """What a writer that handed its batch over is told: its given range, its seq
        conflict, or None (seal it yourself: the lock's holder could not)."""
        first, stop, error = row
        if error is None:
            assert isinstance(first, int) and isinstance(stop, int)
            return range(first, stop)
        assert isinstance(error, str)
        if error.startswith("seq "):
            expected_seq, actual = (int(x) for x in error[4:].split())
            raise SeqConflict(self.id, expected_seq, actual)
        return None  # sealed by another writer it failed: seal it here, to say why

    def _withdraw(self, pid: int) -> tuple[object, ...] | None:
        """Delete the pending batch ``pid`` on a connection of its own: None when it was not
        written (or the server cannot be asked: then a lock's holder may still write it,
        within :data:`_PENDING_MS`), else its result row."""
        try:
            conn = self._db.connect()
            with conn, conn.transaction():
                row = conn.execute(self._sql.withdraw, [self.key, pid]).fetchone()
        except Exception:  # the server is gone too: nothing more can be done from here
            return None
        if row is None or (row[0] is None and row[2] is None):
            return None
        return tuple(row)

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

    def _lock(
        self,
        conn: Connection,
        clock: Callable[[], int],
        *,
        nowait: bool = False,
        then: list[Cursor] | None = None,
    ) -> _State:
        """Lock the head row (made for a new thread) and read the thread's state under it:
        one round trip (two for a new thread). ``nowait``: fail at once (``LockNotAvailable``)
        when another transaction holds it. ``then``: the read of the batches other writers
        left pending is sent with the lock (in the same round trip) and its cursor added."""
        sql, key = self._sql, self.key
        locked = conn.execute(sql.lock_head_nowait if nowait else sql.lock_head, {"key": key})
        if then is not None:
            then.append(conn.execute(sql.pending, [key, _PENDING_MS], binary=True))
        row = locked.fetchone()
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
        self.lock_head_nowait = self.lock_head + " NOWAIT"
        # Group commit (ADR 0063): batches left by writers that found the head row locked.
        # The time is the server's (writers on several hosts): a batch older than
        # _PENDING_MS, whose writer has surely given up, is dropped, not written.
        now = "(extract(epoch FROM clock_timestamp()) * 1000)::int8"
        self.pending = (
            f"SELECT pending_id, expected_seq, frames, durable FROM {s}.pending "
            "WHERE thread_key = %s "
            f"AND first_seq IS NULL AND error IS NULL AND created_ms > {now} - %s "
            "ORDER BY created_ms, pending_id"
        )
        self.add_pending = (
            f"INSERT INTO {s}.pending (thread_key, pending_id, thread_id, created_ms, "
            f"expected_seq, durable, frames) VALUES (%s, %s, %s, {now}, %s, %s, %b)"
        )
        self.pending_done = (
            f"UPDATE {s}.pending p SET first_seq = x.first, stop_seq = x.stop, error = x.error "
            "FROM unnest(%s::int8[], %s::int8[], %s::int8[], %s::text[]) "
            "AS x(id, first, stop, error) WHERE p.thread_key = %s AND p.pending_id = x.id"
        )
        self.pending_expired = (
            f"DELETE FROM {s}.pending WHERE thread_key = %s AND created_ms <= {now} - %s"
        )
        # FOR SHARE: every waiter wakes at the holder's commit, none waits for another
        self.wait_head = f"SELECT 1 FROM {s}.threads WHERE thread_key = %s FOR SHARE"
        self.take_pending = (
            f"DELETE FROM {s}.pending WHERE thread_key = %s AND pending_id = %s "
            "AND (first_seq IS NOT NULL OR error IS NOT NULL) RETURNING first_seq, stop_seq, error"
        )
        self.withdraw = (
            f"DELETE FROM {s}.pending WHERE thread_key = %s AND pending_id = %s "
            "RETURNING first_seq, stop_seq, error"
        )
        self.is_pending = f"SELECT 1 FROM {s}.pending WHERE thread_key = %s AND pending_id = %s"
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
        # NOWAIT: a head row another writer holds means the thread is not this store's alone
        # (the append takes the lock path, and hands its batch over: ADR 0063).
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
            + " FOR UPDATE NOWAIT) SELECT CASE WHEN count(*) = 1 THEN 0 "
            f"ELSE ('{_MOVED} ' || count(*))::int END FROM s"
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
            for t in (
                "frames",
                "derived_threads",
                "messages",
                "checkpoints",
                "marks",
                "catalog",
                "pending",
            )
        )
        self.delete_thread = f"DELETE FROM {s}.threads WHERE thread_key = %s"
        self.referenced = (
            "SELECT i FROM unnest(%s::text[]) i WHERE EXISTS "
            f"(SELECT 1 FROM {s}.frames f WHERE position(convert_to(i, 'UTF8') IN f.line) > 0)"
        )


class _NothingPending(Exception):
    """A writer that took the lock to commit pending batches found none left."""


def _lock_taken(exc: StoreBusy) -> bool:
    """Whether ``exc`` is a ``NOWAIT`` lock that another transaction held."""
    return "LockNotAvailable" in type(exc.__cause__).__name__


def _grouped(
    thread_id: str,
    seal: Callable[[Head | None, int], tuple[list[bytes], Head]] | None,
    waiting: Sequence[tuple[object, ...]],
    results: list[tuple[int, int | None, int | None, str | None]],
) -> Callable[[Head | None, int], tuple[list[bytes], Head | None]]:
    """A seal of the lock holder's own batch (``seal``; None: none) followed by the batches
    other writers left pending (``waiting``: id, expected seq, frames), each after the one
    before; where each went (or why not: a seq conflict, or ``retry`` for a batch its writer
    must seal itself to learn what is wrong with it) is added to ``results``."""

    def sealed(head: Head | None, now: int) -> tuple[list[bytes], Head | None]:
        stored: list[bytes] = []
        if seal is not None:
            stored, head = seal(head, now)
        for pid, expected, payload, _durable in waiting:
            assert isinstance(pid, int) and isinstance(payload, bytes | memoryview)
            try:
                frames = _batch_decoder.decode(payload)
                lines, new_head, given = seal_frames(
                    thread_id,
                    frames,
                    head,
                    now_ms=now,
                    expected_seq=expected if isinstance(expected, int) else None,
                )
            except SeqConflict as exc:
                results.append((pid, None, None, f"seq {exc.expected} {exc.actual}"))
                continue
            except (ContinuityError, msgspec.MsgspecError, ValueError, TypeError):
                results.append((pid, None, None, "retry"))
                continue
            stored += [line[:-1] for line in lines]
            head = new_head
            results.append((pid, given.start, given.stop, None))
        return stored, head  # nothing stored: every pending batch failed

    return sealed


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
        """The threads read in one snapshot by a few cursors in key order (:mod:`.bulk`, ADR
        0063): what ``verify`` reads of each, in a handful of round trips in all."""
        from continuity.store.postgres.bulk import read_many

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
