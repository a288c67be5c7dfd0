"""The PostgreSQL store's search index: documents and postings as rows, caught up lazily (ADR 0026).

Three tables in the store's schema, made by this module (``CREATE … IF NOT EXISTS`` under the
schema's advisory lock; its version is ``search_version`` in ``meta``), derived from ``frames``
by the tokenizer and document rules of the file index (:data:`~continuity.store.base.DocumentsOf`,
handed down from :mod:`continuity.retrieval.documents`)::

    search_threads   per thread: the watermark (last seq indexed, its digest), the number of
                     documents and the sum of their lengths
    search_docs      (thread, first doc, n docs) → the documents' 16-byte records (seq, length,
                     kind, role), in ordinal order
    search_postings  (thread, term, first doc, n docs) → the term's document ordinals (u32) and
                     weighted counts (u16) in those documents

Rows cover runs of documents laid out as a function of the document count alone: as many runs
of 65,536 as fit, then of 4,096, of 256, and single documents (at most 255): the segment layout
of the file index (ADR 0010, 0011), with its tail as one-document rows. A catch-up moves the
layout from the old count to the new one: new runs are written from the new documents, and the
one run that takes in old rows is merged on the server (``string_agg`` of the byte strings, in
ordinal order) — so a rebuild and any sequence of catch-ups leave the same rows.

A catch-up runs in one transaction under an advisory lock per thread; readers never wait for
it (they read the rows of the last commit). A query reads the watermark (one row), the records
it does not hold yet and the postings of its terms: never the frames.

This module imports psycopg (and numpy): the store imports it when a search first asks for its
index (:meth:`~continuity.store.postgres.PostgresStore.search_backend`).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import psycopg

from continuity import frames as fr
from continuity.errors import CorruptFrame
from continuity.store.base import (
    BaseStore,
    DocumentsOf,
    SearchDocument,
    SearchWatermark,
    Thread,
)
from continuity.store.postgres.keys import thread_key
from continuity.store.postgres.schema import advisory_key

if TYPE_CHECKING:
    from continuity.store.postgres.db import Connection, Database

__all__ = ["SEARCH_TABLES", "SEARCH_VERSION", "PostgresSearch", "layout"]

SEARCH_VERSION: Final = 2  # 2: stemmed terms (ADR 0032)
SEARCH_TABLES: Final = ("search_threads", "search_docs", "search_postings")
SIZES: Final = (65_536, 4_096, 256, 1)
"""The run sizes, largest first: the file index's segments (ADR 0011), its tail as single
documents."""
_CHUNK: Final = 16_384
"""Documents written at a time by a catch-up (a multiple of 4,096: no run is merged twice)."""
_READ: Final = 4_096
"""Frames read from ``frames`` at a time."""
_RECORD: Final = struct.Struct("<QIBB2x")
_U32: Final = 2**32 - 1


def _ids(thread: Thread) -> dict[str, Any]:
    return {"key": thread_key(thread.id), "tid": thread.id}


def layout(n: int) -> list[tuple[int, int]]:
    """The runs (first document, documents) that hold ``n`` documents."""
    out: list[tuple[int, int]] = []
    first = 0
    for size in SIZES:
        while n - first >= size:
            out.append((first, size))
            first += size
    return out


class _Sql:
    def __init__(self, s: str) -> None:
        self.create = (
            f"""CREATE TABLE IF NOT EXISTS {s}.search_threads (
                thread_key   bigint PRIMARY KEY,
                last_seq     bigint NOT NULL,
                digest       bytea NOT NULL,
                docs         bigint NOT NULL,
                total_length bigint NOT NULL
            )""",
            f"""CREATE TABLE IF NOT EXISTS {s}.search_docs (
                thread_key bigint NOT NULL,
                first_doc  bigint NOT NULL,
                n_docs     integer NOT NULL,
                records    bytea NOT NULL,
                PRIMARY KEY (thread_key, first_doc, n_docs)
            )""",
            f"""CREATE TABLE IF NOT EXISTS {s}.search_postings (
                thread_key bigint NOT NULL,
                term       text COLLATE "C" NOT NULL,
                first_doc  bigint NOT NULL,
                n_docs     integer NOT NULL,
                docs       bytea NOT NULL,
                tfs        bytea NOT NULL,
                PRIMARY KEY (thread_key, term, first_doc, n_docs)
            )""",
            # a merge finds a run's rows by position, whatever their terms
            f"CREATE INDEX IF NOT EXISTS search_postings_runs "
            f"ON {s}.search_postings (thread_key, first_doc)",
            # postings are short arrays of numbers read whole: no compression to undo
            f"ALTER TABLE {s}.search_postings ALTER COLUMN docs SET STORAGE EXTERNAL",
            f"ALTER TABLE {s}.search_postings ALTER COLUMN tfs SET STORAGE EXTERNAL",
        )
        self.drop = f"DROP TABLE IF EXISTS {', '.join(f'{s}.{t}' for t in SEARCH_TABLES)}"
        self.version = f"SELECT value FROM {s}.meta WHERE key = 'search_version'"
        self.set_version = (
            f"INSERT INTO {s}.meta (key, value) VALUES ('search_version', %s) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
        )
        self.state = (
            "SELECT t.thread_key, t.head_seq, t.head_digest, "
            "w.last_seq, w.digest, w.docs, w.total_length "
            f"FROM {s}.threads t LEFT JOIN {s}.search_threads w ON w.thread_key = %(key)s "
            "WHERE t.thread_key = %(key)s AND t.thread_id = %(tid)s"
        )
        self.tail_of = (
            "SELECT substring(f.line FROM "
            f"greatest(octet_length(f.line) - {fr.SEAL_SUFFIX_LEN}, 1)) "
            f"FROM {s}.frames f JOIN {s}.threads t ON t.thread_key = %(key)s "
            "WHERE f.thread_key = %(key)s AND t.thread_id = %(tid)s AND f.seq = %(seq)s"
        )
        self.lines = (
            f"SELECT seq, line FROM {s}.frames WHERE thread_key = %s AND seq BETWEEN %s AND %s "
            "ORDER BY seq"
        )
        self.line_at = f"SELECT line FROM {s}.frames WHERE thread_key = %s AND seq = %s"
        self.indexed = f"SELECT thread_key FROM {s}.search_threads"
        self.thread_ids = f"SELECT thread_key, thread_id FROM {s}.threads ORDER BY thread_id"
        self.reset = tuple(f"DELETE FROM {s}.{t} WHERE thread_key = %s" for t in SEARCH_TABLES)
        self.set_watermark = (
            f"INSERT INTO {s}.search_threads (thread_key, last_seq, digest, docs, total_length) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (thread_key) DO UPDATE SET "
            "last_seq = excluded.last_seq, digest = excluded.digest, docs = excluded.docs, "
            "total_length = excluded.total_length"
        )
        self.copy_docs = (
            f"COPY {s}.search_docs (thread_key, first_doc, n_docs, records) "
            "FROM STDIN (FORMAT BINARY)"
        )
        self.copy_postings = (
            f"COPY {s}.search_postings (thread_key, term, first_doc, n_docs, docs, tfs) "
            "FROM STDIN (FORMAT BINARY)"
        )
        run = "thread_key = %(key)s AND first_doc >= %(first)s AND first_doc < %(end)s"
        self.merge = (
            f"INSERT INTO {s}.search_docs (thread_key, first_doc, n_docs, records) "
            "SELECT %(key)s, %(first)s, %(size)s, "
            "string_agg(records, ''::bytea ORDER BY first_doc) "
            f"FROM {s}.search_docs WHERE {run}",
            f"DELETE FROM {s}.search_docs WHERE {run} AND n_docs < %(size)s",
            f"INSERT INTO {s}.search_postings (thread_key, term, first_doc, n_docs, docs, tfs) "
            "SELECT %(key)s, term, %(first)s, %(size)s, "
            "string_agg(docs, ''::bytea ORDER BY first_doc), "
            "string_agg(tfs, ''::bytea ORDER BY first_doc) "
            f"FROM {s}.search_postings WHERE {run} GROUP BY term",
            f"DELETE FROM {s}.search_postings WHERE {run} AND n_docs < %(size)s",
        )
        self.records = (
            f"SELECT d.first_doc, d.n_docs, d.records FROM {s}.search_docs d "
            f"JOIN {s}.threads t ON t.thread_key = %(key)s WHERE d.thread_key = %(key)s "
            "AND t.thread_id = %(tid)s AND d.first_doc < %(end)s "
            "AND d.first_doc + d.n_docs > %(start)s ORDER BY d.first_doc"
        )
        self.postings = (
            f"SELECT p.term, p.first_doc, p.docs, p.tfs FROM {s}.search_postings p "
            "WHERE p.thread_key = %s "
            "AND p.term = ANY(%s) AND p.first_doc < %s AND p.first_doc + p.n_docs > %s "
            "ORDER BY p.term, p.first_doc"
        )


class PostgresSearch:
    """The search index of one :class:`~continuity.store.postgres.PostgresStore`: a
    :class:`~continuity.store.base.SearchBackend` (get it with the store's
    :meth:`~continuity.store.postgres.PostgresStore.search_backend`: one object per store in a
    process). ``db`` is the store's database, ``store`` gives handles on its threads."""

    def __init__(self, db: Database, store: BaseStore) -> None:
        self._store = store
        self._db = db
        self.schema = db.schema
        self._sql = _Sql(self.schema)
        self._ready = False
        self.frames_read = 0
        """Frames this object read from ``frames`` to index them (tests check a search reads
        none of a current index's)."""

    # -- the tables --

    def ensure(self, *, force: bool = False) -> None:
        """Make the tables when ``meta`` does not name this version (or ``force``: a table is
        missing); an index of another version is dropped and rebuilt lazily."""
        if self._ready and not force:
            return
        sql = self._sql
        with self._db.connection() as conn:
            row = conn.execute(sql.version).fetchone()
            if not force and row is not None and row[0] == str(SEARCH_VERSION):
                self._ready = True
                return
            with conn.transaction():
                conn.execute(
                    "SELECT pg_advisory_xact_lock(%s)", [advisory_key("schema", self.schema)]
                )
                row = conn.execute(sql.version).fetchone()
                if row is not None and row[0] != str(SEARCH_VERSION):
                    conn.execute(sql.drop)
                for statement in sql.create:
                    conn.execute(statement)
                conn.execute(sql.set_version, [str(SEARCH_VERSION)])
        self._ready = True

    def _retry(self, work: Any, *args: Any, **kwargs: Any) -> Any:
        """``work`` after :meth:`ensure`; once more after making missing tables again (someone
        dropped them: the index is derived data, rebuilt from the log as it is needed)."""
        self.ensure()
        try:
            return work(*args, **kwargs)
        except psycopg.errors.UndefinedTable:
            self.ensure(force=True)
            return work(*args, **kwargs)

    # -- the SearchBackend protocol --

    def search_watermark(
        self, thread: Thread, documents: DocumentsOf, *, max_seq: int | None
    ) -> SearchWatermark | None:
        found: SearchWatermark | None = self._retry(self._watermark, thread, documents, max_seq)
        return found

    def search_holds(self, thread: Thread, seq: int, digest: str) -> bool:
        with self._db.connection() as conn:
            row = conn.execute(
                self._sql.tail_of,
                {"key": thread_key(thread.id), "tid": thread.id, "seq": seq},
                binary=True,
            ).fetchone()
        sealed = fr.unseal(bytes(row[0])) if row is not None else None
        return sealed is not None and sealed[1].hex() == digest

    def search_records(self, thread: Thread, start: int, end: int) -> bytes:
        if end <= start:
            return b""
        ids = {"key": thread_key(thread.id), "tid": thread.id, "end": end, "start": start}
        rows = self._retry(self._rows, self._sql.records, ids)
        parts: list[bytes] = []
        at = start
        for first, n, records in rows:
            lo, hi = max(first, at), min(first + n, end)
            if first > at or len(records) != n * _RECORD.size:
                raise ValueError(f"the search rows of thread {thread.id!r} do not cover {at}")
            parts.append(bytes(records[(lo - first) * _RECORD.size : (hi - first) * _RECORD.size]))
            at = hi
        if at != end:
            raise ValueError(f"the search rows of thread {thread.id!r} end before document {end}")
        return b"".join(parts)

    def search_postings(
        self, thread: Thread, terms: Sequence[str], start: int, end: int
    ) -> dict[str, tuple[bytes, bytes]]:
        if end <= start or not terms:
            return {}
        params = [thread_key(thread.id), list(terms), end, start]
        rows = self._retry(self._rows, self._sql.postings, params)
        by_term: dict[str, tuple[list[bytes], list[bytes]]] = {}
        for term, _first, docs, tfs in rows:
            entry = by_term.setdefault(term, ([], []))
            entry[0].append(bytes(docs))
            entry[1].append(bytes(tfs))
        out: dict[str, tuple[bytes, bytes]] = {}
        for term, (doc_parts, tf_parts) in by_term.items():
            docs = np.frombuffer(b"".join(doc_parts), "<u4")
            tfs = np.frombuffer(b"".join(tf_parts), "<u2")
            if len(docs) != len(tfs):
                raise ValueError(f"the postings of {term!r} in thread {thread.id!r} do not pair up")
            lo, hi = np.searchsorted(docs, [start, end])
            if hi > lo:
                out[term] = (docs[lo:hi].tobytes(), tfs[lo:hi].tobytes())
        return out

    def rebuild_search(self, threads: Sequence[Thread] | None, documents: DocumentsOf) -> int:
        self.ensure()
        if threads is None:
            with self._db.connection() as conn:
                try:
                    keys = {int(r[0]) for r in conn.execute(self._sql.indexed).fetchall()}
                except psycopg.errors.UndefinedTable:
                    keys = set()
                ids = [
                    str(tid)
                    for key, tid in conn.execute(self._sql.thread_ids).fetchall()
                    if int(key) in keys
                ]
                with conn.transaction():
                    conn.execute(
                        "SELECT pg_advisory_xact_lock(%s)", [advisory_key("schema", self.schema)]
                    )
                    conn.execute(self._sql.drop)
                    for statement in self._sql.create:
                        conn.execute(statement)
            chosen: Sequence[Thread] = [self._store.thread(t) for t in ids]
        else:
            chosen = threads
        for t in chosen:
            self._retry(self._catch_up, t, documents, reset=True)
        return len(chosen)

    # -- the work --

    def _rows(self, statement: str, params: list[Any] | dict[str, Any]) -> list[tuple[Any, ...]]:
        with self._db.connection() as conn:
            return conn.execute(statement, params, binary=True).fetchall()

    def _watermark(
        self, thread: Thread, documents: DocumentsOf, max_seq: int | None
    ) -> SearchWatermark | None:
        with self._db.connection() as conn:
            row = conn.execute(self._sql.state, _ids(thread), binary=True).fetchone()
        if row is None or row[1] < 0:
            return None
        _key, head_seq, head_digest, last_seq, digest, docs, total = row
        if last_seq is not None:
            mark = SearchWatermark(last_seq, bytes(digest).hex(), docs, total)
            if last_seq == head_seq:
                if bytes(digest) == bytes(head_digest):
                    return mark
            elif max_seq is not None and last_seq < head_seq and max_seq <= last_seq:
                return mark  # a prefix recall reads: what is indexed already holds it
        return self._catch_up(thread, documents, reset=False)

    def _catch_up(self, thread: Thread, documents: DocumentsOf, *, reset: bool) -> SearchWatermark:
        """Index the frames past the watermark (all of them: ``reset``) in one transaction,
        under the thread's advisory lock."""
        sql = self._sql
        with self._db.transaction(durable=False) as conn:
            conn.execute(
                "SELECT pg_advisory_xact_lock(%s)",
                [advisory_key("search", self.schema, thread.id)],
            )
            row = conn.execute(sql.state, _ids(thread), binary=True).fetchone()
            if row is None or row[1] < 0:
                return SearchWatermark(-1, "", 0, 0)
            key, head_seq, head_digest, last_seq, digest, docs, total = row
            head_digest = bytes(head_digest)
            if not reset and last_seq is not None:
                if last_seq == head_seq and bytes(digest) == head_digest:
                    return SearchWatermark(last_seq, head_digest.hex(), docs, total)
                if last_seq > head_seq or (
                    last_seq >= 0 and not self._line_holds(conn, key, last_seq, bytes(digest))
                ):
                    reset = True  # indexed from another log: start over
            if reset or last_seq is None:
                for statement in sql.reset:
                    conn.execute(statement, [key])
                last_seq, docs, total = -1, 0, 0
            seq = last_seq + 1
            pending: list[SearchDocument] = []
            while seq <= head_seq:
                hi = min(head_seq, seq + _READ - 1)
                lines = conn.execute(sql.lines, [key, seq, hi], binary=True).fetchall()
                batch: list[tuple[int, bytes]] = []
                for at, line in lines:
                    if at != seq + len(batch):
                        raise CorruptFrame(thread.id, seq + len(batch), -1, "frame is missing")
                    batch.append((at, bytes(line)))
                if len(batch) != hi - seq + 1:
                    raise CorruptFrame(thread.id, seq + len(batch), -1, "frame is missing")
                self.frames_read += len(batch)
                pending.extend(documents(thread, batch))
                while len(pending) >= _CHUNK:
                    total += self._write(conn, key, docs, pending[:_CHUNK])
                    docs += _CHUNK
                    del pending[:_CHUNK]
                seq = hi + 1
            if pending:
                total += self._write(conn, key, docs, pending)
                docs += len(pending)
            conn.execute(sql.set_watermark, [key, head_seq, head_digest, docs, total])
            return SearchWatermark(head_seq, head_digest.hex(), docs, total)

    def _line_holds(self, conn: Connection, key: int, seq: int, digest: bytes) -> bool:
        row = conn.execute(self._sql.line_at, [key, seq], binary=True).fetchone()
        sealed = fr.unseal(bytes(row[0])) if row is not None else None
        return sealed is not None and sealed[1] == digest

    def _write(self, conn: Connection, key: int, n0: int, new: Sequence[SearchDocument]) -> int:
        """Add documents ``n0 ..`` to the rows, moving the layout of ``n0`` documents to that of
        ``n0 + len(new)``; return the sum of their lengths."""
        n1 = n0 + len(new)
        old = set(layout(n0))
        for first, size in layout(n1):
            if (first, size) in old:
                continue
            end = first + size
            lo = max(first, n0)
            self._copy(conn, key, lo, new[lo - n0 : end - n0])
            if first < n0:  # the run that takes in old rows: merged on the server
                params = {"key": key, "first": first, "end": end, "size": size}
                for statement in self._sql.merge:
                    conn.execute(statement, params)
        return sum(min(d.length, _U32) for d in new)

    def _copy(self, conn: Connection, key: int, first: int, docs: Sequence[SearchDocument]) -> None:
        """The rows of ``docs`` (ordinals from ``first``) as one run."""
        n = len(docs)
        records = b"".join(_RECORD.pack(d.seq, min(d.length, _U32), d.kind, d.role) for d in docs)
        ids: dict[str, int] = {}
        term_ids: list[int] = []
        ordinals: list[int] = []
        counts: list[int] = []
        for o, d in enumerate(docs, first):
            tf = d.tf
            term_ids.extend(ids.setdefault(t, len(ids)) for t in tf)
            ordinals.extend([o] * len(tf))
            counts.extend(tf.values())
        tids = np.array(term_ids, np.int64)
        order = np.argsort(tids, kind="stable")  # each term's postings stay in ordinal order
        starts = np.zeros(len(ids) + 1, np.int64)
        np.cumsum(np.bincount(tids, minlength=len(ids)), out=starts[1:])
        doc_bytes = np.array(ordinals, "<u4")[order].tobytes()
        tf_bytes = np.minimum(np.array(counts, np.int64), 65535).astype("<u2")[order].tobytes()
        with conn.cursor() as cur:
            with cur.copy(self._sql.copy_docs) as copy:
                copy.set_types(["int8", "int8", "int4", "bytea"])
                copy.write_row([key, first, n, records])
            with cur.copy(self._sql.copy_postings) as copy:
                copy.set_types(["int8", "text", "int8", "int4", "bytea", "bytea"])
                for term in sorted(ids):
                    i = ids[term]
                    a, b = int(starts[i]), int(starts[i + 1])
                    copy.write_row(
                        [key, term, first, n, doc_bytes[4 * a : 4 * b], tf_bytes[2 * a : 2 * b]]
                    )
