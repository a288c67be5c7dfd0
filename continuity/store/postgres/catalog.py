"""The PostgreSQL store's catalog: one row per thread in the ``catalog`` table, so the
store-wide listings are one query (issue 30; the file catalog's rows, :mod:`continuity.caches.
catalog`, as a table).

Each row holds what ``continuity threads``, ``sessions`` and ``stats`` show of a thread (its
first frame's title, parent and meta, its counts, its last frame's time and digest, its last
message's time, its log's size, its redactions) and ``seq``, the last frame it covers: the
watermark. An append adds its batch to the row in its own transaction (:func:`write_catalog`:
the batch folded by :func:`~continuity.store.catalog.catalog_part`, added by one ``UPDATE ...
WHERE seq = <the frame before the batch>``), so the row never lags what this code wrote. A row
behind its thread's head (frames written by older code, which knows no catalog; a row deleted
by hand) makes the ``UPDATE`` miss: it is then caught up from the ``frames`` table under the
head-row lock (:func:`catch_up`), by the next append or by a listing that finds it behind. A
rebuild folds the whole log: the same row, since a part's sum does not depend on how the frames
were batched.

Strings are kept as UTF-8 ``bytea`` (a title may hold what ``text`` refuses, a NUL).

Nothing here imports psycopg: the connections are the store's, handed in.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from continuity import frames as fr
from continuity.errors import ContinuityError, CorruptFrame
from continuity.store.catalog import (
    CatalogPart,
    CatalogRow,
    CatalogRows,
    add_part,
    catalog_part,
    gated_last_message,
    row_of_part,
)
from continuity.store.postgres.keys import thread_key

if TYPE_CHECKING:
    from continuity.store.postgres.db import Connection, Database

__all__ = ["CatalogSql", "PostgresCatalog", "catch_up", "write_catalog"]

_CHUNK: Final = 5000
"""Frames read at a time to catch a row up or check it."""
_COLUMNS: Final = (
    "seq, log_bytes, head_digest, last_active_ms, first_ms, last_message_ms, created, source, "
    "title, parent_thread_id, project, git_branch, messages, checkpoints, compactions, "
    "redactions"
)


def _b(text: str | None) -> bytes | None:
    return None if text is None else text.encode("utf-8", "surrogatepass")


def _s(data: bytes | None) -> str | None:
    return None if data is None else bytes(data).decode("utf-8", "surrogatepass")


class CatalogSql:
    """The catalog table's statements for one store schema (its name validated)."""

    def __init__(self, s: str) -> None:
        self.insert = (
            f"INSERT INTO {s}.catalog (thread_key, {_COLUMNS}) VALUES "
            "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (thread_key) DO UPDATE SET "
            + ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS.split(", "))
        )
        # A part added to the row it continues: counts add, the last frame's facts replace,
        # the first frame's stay. No row at that seq (behind, or none): nothing is updated.
        self.advance = (
            f"UPDATE {s}.catalog SET seq = %(seq)s, log_bytes = log_bytes + %(log_bytes)s, "
            "head_digest = %(digest)s, last_active_ms = %(last_active_ms)s, "
            "last_message_ms = coalesce(%(last_message_ms)s, last_message_ms), "
            "messages = messages + %(messages)s, checkpoints = checkpoints + %(checkpoints)s, "
            "compactions = compactions + %(compactions)s, "
            "redactions = redactions + %(redactions)s "
            "WHERE thread_key = %(key)s AND seq = %(after)s"
        )
        self.mark = f"SELECT seq, head_digest FROM {s}.catalog WHERE thread_key = %s"
        # The head row locked alone (no join: ADR 0041), the row's mark by subqueries.
        self.lock = (
            "SELECT t.thread_key, t.head_seq, "
            f"(SELECT c.seq FROM {s}.catalog c WHERE c.thread_key = %(key)s), "
            f"(SELECT c.head_digest FROM {s}.catalog c WHERE c.thread_key = %(key)s) "
            f"FROM {s}.threads t WHERE t.thread_key = %(key)s AND t.thread_id = %(tid)s "
            "FOR UPDATE"
        )
        self.key = f"SELECT thread_key FROM {s}.threads WHERE thread_key = %s AND thread_id = %s"
        self.delete = f"DELETE FROM {s}.catalog WHERE thread_key = %s"
        self.frames = (
            f"SELECT seq, line FROM {s}.frames WHERE thread_key = %s AND seq BETWEEN %s AND %s "
            "ORDER BY seq"
        )
        listing = (
            f"SELECT t.thread_id, t.head_seq, c.{_COLUMNS.replace(', ', ', c.')} "
            f"FROM {s}.threads t LEFT JOIN {s}.catalog c ON c.thread_key = t.thread_key "
            "WHERE t.head_seq >= 0"
        )
        self.rows = listing + " ORDER BY t.thread_id"
        # Rows behind come whatever their project: it is read when they are caught up.
        self.rows_of_project = (
            listing + " AND (c.seq IS DISTINCT FROM t.head_seq OR c.project = %s) "
            "ORDER BY t.thread_id"
        )
        self.past = (
            f"SELECT t.thread_id, c.seq, t.head_seq FROM {s}.threads t "
            f"JOIN {s}.catalog c ON c.thread_key = t.thread_key WHERE c.seq > t.head_seq "
            "ORDER BY t.thread_id"
        )
        self.heads = f"SELECT thread_id FROM {s}.threads WHERE head_seq >= 0 ORDER BY thread_id"
        self.orphans = (
            f"SELECT c.thread_key FROM {s}.catalog c WHERE NOT EXISTS "
            f"(SELECT 1 FROM {s}.threads t WHERE t.thread_key = c.thread_key "
            "AND t.head_seq >= 0)"
        )


def _store(
    conn: Connection, sql: CatalogSql, key: int, part: CatalogPart, *, check: bool = True
) -> bool:
    """Add ``part`` to the thread's row (make it, for a part from seq 0); False when the row
    does not end right before the part (behind, or none). ``check=False``: the caller knows it
    does, so the answer is not waited for (True)."""
    if part.first_seq == 0:
        conn.execute(
            sql.insert,
            [
                key,
                part.last_seq,
                part.log_bytes,
                bytes.fromhex(part.head_digest),
                part.last_active_ms,
                part.first_ms,
                part.last_message_ms,
                part.created,
                _b(part.source),
                _b(part.title),
                _b(part.parent_thread_id),
                _b(part.project),
                _b(part.git_branch),
                part.messages,
                part.checkpoints,
                part.compactions,
                part.redactions,
            ],
        )
        return True
    if check:  # its answer now (in the append's pipeline: a sync, only on this rare path)
        with conn.pipeline():
            cur = _advance(conn, sql, key, part)
        return bool(cur.rowcount == 1)
    _advance(conn, sql, key, part)
    return True


def _advance(conn: Connection, sql: CatalogSql, key: int, part: CatalogPart) -> Any:
    return conn.execute(
        sql.advance,
        {
            "seq": part.last_seq,
            "log_bytes": part.log_bytes,
            "digest": bytes.fromhex(part.head_digest),
            "last_active_ms": part.last_active_ms,
            "last_message_ms": part.last_message_ms,
            "messages": part.messages,
            "checkpoints": part.checkpoints,
            "compactions": part.compactions,
            "redactions": part.redactions,
            "key": key,
            "after": part.first_seq - 1,
        },
    )


def write_catalog(
    conn: Connection,
    sql: CatalogSql,
    thread_id: str,
    key: int,
    lines: Sequence[bytes],
    first: int,
    row_seq: int | None = None,
) -> None:
    """Add the batch ``lines`` (frames ``first ..``, just stored in the caller's transaction,
    which holds the thread's head row) to its catalog row; a row behind is caught up from the
    frames table instead (the batch included). ``row_seq``: where the row ends, read under the
    same lock (-1: no row); given, nothing waits for the server's answer unless the row is
    behind (so the statement can go in a pipeline)."""
    if row_seq is not None:
        if row_seq == first - 1 or first == 0:
            _store(conn, sql, key, catalog_part(thread_id, lines, first), check=False)
            return
        mark_row = conn.execute(sql.mark, [key]).fetchone()
        mark = None if mark_row is None else (int(mark_row[0]), bytes(mark_row[1]))
        catch_up(conn, sql, thread_id, key, mark, first + len(lines) - 1)
        return
    if not _store(conn, sql, key, catalog_part(thread_id, lines, first)):
        found = conn.execute(sql.mark, [key]).fetchone()
        mark = None if found is None else (int(found[0]), bytes(found[1]))
        catch_up(conn, sql, thread_id, key, mark, first + len(lines) - 1)


def _frames(
    conn: Connection, sql: CatalogSql, thread_id: str, key: int, lo: int, hi: int
) -> list[bytes]:
    rows = conn.execute(sql.frames, [key, lo, hi], binary=True).fetchall()
    if [r[0] for r in rows] != list(range(lo, hi + 1)):
        raise CorruptFrame(thread_id, lo, -1, "frames are missing from the table")
    return [bytes(r[1]) for r in rows]


def catch_up(
    conn: Connection,
    sql: CatalogSql,
    thread_id: str,
    key: int,
    mark: tuple[int, bytes] | None,
    head_seq: int,
) -> int:
    """Bring the thread's row from ``mark`` (its seq and head digest; None: no row) to
    ``head_seq``, from the frames table (each line checked against the chain from the row's
    digest), inside the caller's transaction, which holds the head row; the frames read. A row
    past the head (a hand-edited database) is built again from seq 0."""
    if mark is None or mark[0] > head_seq:
        conn.execute(sql.delete, [key])
        lo, parent = 0, fr.GENESIS_DIGEST
    else:
        lo, parent = mark[0] + 1, mark[1]
    read = 0
    while lo <= head_seq:
        hi = min(head_seq, lo + _CHUNK - 1)
        lines = _frames(conn, sql, thread_id, key, lo, hi)
        part = catalog_part(thread_id, lines, lo, parent)
        if not _store(conn, sql, key, part):
            raise CorruptFrame(thread_id, lo, -1, "the catalog row moved while it was caught up")
        parent = bytes.fromhex(part.head_digest)
        read += len(lines)
        lo = hi + 1
    return read


def _row(r: Sequence[Any]) -> CatalogRow:
    """A listing row (thread id, head, the catalog columns) as a :class:`CatalogRow`."""
    tid = str(r[0])
    created, source = bool(r[8]), _s(r[9]) or ""
    return CatalogRow(
        thread_id=tid,
        log_bytes=int(r[3]),
        frames=int(r[2]) + 1,
        head_digest=bytes(r[4]).hex(),
        last_active_ms=int(r[5]),
        first_ms=int(r[6]),
        last_message_ms=gated_last_message(tid, created, source, r[7]),
        created=created,
        source=source,
        title=_s(r[10]),
        parent_thread_id=_s(r[11]),
        project=_s(r[12]) or "",
        git_branch=_s(r[13]) or "",
        messages=int(r[14]),
        checkpoints=int(r[15]),
        compactions=int(r[16]),
        redactions=int(r[17]),
    )


class PostgresCatalog:
    """The ``catalog`` table of one store (:class:`~continuity.store.catalog.StoreCatalog`)."""

    def __init__(self, db: Database, sql: CatalogSql) -> None:
        self._db = db
        self._sql = sql

    @property
    def sql(self) -> CatalogSql:
        """The statements (the store's threads write the rows with them)."""
        return self._sql

    def _listing(self, project: str | None) -> tuple[list[CatalogRow], list[str]]:
        with self._db.connection() as conn:
            if project is None:
                found = conn.execute(self._sql.rows, binary=True).fetchall()
            else:
                found = conn.execute(
                    self._sql.rows_of_project, [_b(project)], binary=True
                ).fetchall()
        rows: list[CatalogRow] = []
        behind: list[str] = []
        for r in found:
            if r[2] is not None and r[2] == r[1]:
                rows.append(_row(r))
            else:
                behind.append(str(r[0]))
        return rows, behind

    def catch_up_thread(self, thread_id: str, *, rebuild: bool = False) -> bool:
        """Bring one thread's row up to its head (``rebuild``: from seq 0) in a transaction of
        its own; False when the thread has no frames."""
        with self._db.transaction(durable=False) as conn:
            found = conn.execute(
                self._sql.lock, {"key": thread_key(thread_id), "tid": thread_id}
            ).fetchone()
            if found is None or found[1] < 0:
                return False
            key, head = int(found[0]), int(found[1])
            mark = None if found[2] is None or rebuild else (int(found[2]), bytes(found[3]))
            if mark is None or mark[0] != head:
                catch_up(conn, self._sql, thread_id, key, mark, head)
        return True

    def rows(self, *, catch_up: bool = True, project: str | None = None) -> CatalogRows:
        rows, behind = self._listing(project)
        if not catch_up or not behind:
            return CatalogRows(rows, behind, {})
        problems: dict[str, ContinuityError] = {}
        for tid in behind:
            try:
                self.catch_up_thread(tid)
            except ContinuityError as exc:
                problems[tid] = exc
        rows, still = self._listing(project)
        return CatalogRows(rows, [t for t in still if t not in problems], problems)

    def rebuild(self, thread_ids: Collection[str] | None = None) -> int:
        with self._db.connection() as conn:
            if thread_ids is None:
                orphans = [int(r[0]) for r in conn.execute(self._sql.orphans).fetchall()]
                ids = [str(r[0]) for r in conn.execute(self._sql.heads).fetchall()]
            else:
                orphans, ids = [], sorted(thread_ids)
        for key in orphans:
            with self._db.transaction(durable=False) as conn:
                conn.execute(self._sql.delete, [key])
        built = 0
        for tid in ids:
            try:
                built += self.catch_up_thread(tid, rebuild=True)
            except ContinuityError:
                continue  # the listings name it; verify says what is wrong
        return built

    def _from_frames(self, thread_id: str, head: int) -> CatalogRow:
        """The row the thread's frames ``0 .. head`` give, read in chunks and checked."""
        total: CatalogPart | None = None
        parent = fr.GENESIS_DIGEST
        with self._db.connection() as conn:
            found = conn.execute(self._sql.key, [thread_key(thread_id), thread_id]).fetchone()
            if found is None:
                raise CorruptFrame(thread_id, 0, -1, "the thread is gone")
            key = int(found[0])
            lo = 0
            while lo <= head:
                hi = min(head, lo + _CHUNK - 1)
                part = catalog_part(
                    thread_id, _frames(conn, self._sql, thread_id, key, lo, hi), lo, parent
                )
                total = part if total is None else add_part(total, part)
                parent = bytes.fromhex(part.head_digest)
                lo = hi + 1
        assert total is not None
        return row_of_part(thread_id, total)

    def problems(
        self,
        thread_ids: Collection[str] | None = None,
        fresh: Mapping[str, tuple[CatalogRow, bool]] | None = None,
    ) -> list[tuple[str | None, str]]:
        rows, _behind = self._listing(None)
        wanted = None if thread_ids is None else set(thread_ids)
        with self._db.connection() as conn:
            past = conn.execute(self._sql.past).fetchall()
        found: list[tuple[str | None, str]] = [
            (
                str(tid),
                f"row covers frames up to seq {seq}, but the thread's head is seq {head} "
                "(`continuity rebuild-index` builds it again)",
            )
            for tid, seq, head in past
            if wanted is None or tid in wanted
        ]
        for row in rows:
            tid = row.thread_id
            if wanted is not None and tid not in wanted:
                continue
            known = None if fresh is None else fresh.get(tid)
            if known is not None and known[0].frames != row.frames:
                known = None  # read at another head (an append came between): read again
            try:
                now = known[0] if known is not None else self._from_frames(tid, row.frames - 1)
            except ContinuityError:
                continue  # the log's own checks name it
            if now != row:
                fields = [
                    f"{name} {getattr(row, name)!r} (the log says {getattr(now, name)!r})"
                    for name in row.__struct_fields__
                    if getattr(row, name) != getattr(now, name)
                ]
                found.append((tid, f"row differs from the log: {', '.join(fields)}"))
        return found
