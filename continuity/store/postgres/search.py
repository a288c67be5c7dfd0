"""The PostgreSQL store's search index: one store-wide inverted index in rows, caught up lazily
(ADR 0026, 0041).

Two tables in the store's schema, made by this module (``CREATE … IF NOT EXISTS`` under the
schema's advisory lock; its version is ``search_version`` in ``meta``), derived from ``frames``
by the tokenizer and document rules of the file index (:data:`~continuity.store.base.DocumentsOf`,
handed down from :mod:`continuity.retrieval.documents`)::

    search_threads  per thread: the watermark (last seq indexed, its digest), the number of
                    documents, the sum of their lengths, the project and source of its first
                    frame (what ``--project`` and ``--agent`` keep)
    search_runs     (thread, first doc) → a run of the thread's documents: their 16-byte records
                    (seq, length, kind, role), the run's distinct terms (``text[]``, under a GIN
                    index) and each term's postings (``bytea[]``, in the order of the terms)

A query is one GIN scan: the runs that hold any of its terms, across every thread, each giving
its records and the postings of the query's terms alone (``lists[array_position(terms, t)]``).
Nothing is read per thread that holds none of the terms. ``--project`` and ``--agent`` are
pseudo-terms of every run (``" p:<project>"``, ``" s:<source>"``: a term never holds a space),
so the same index scan keeps only the scope's runs. The BM25 statistics of a scope (documents,
their length sum) are sums over ``search_threads``.

Runs are laid out as a function of the document count alone: as many runs of 65,536 as fit,
then of 4,096, of 256, and the rest (at most 255) as one tail run. A catch-up moves the layout
from the old count to the new one: the old rows from the first run that changes on are read
back (the tail; at a merge the small runs it takes in), and rewritten with the new documents —
so a rebuild and any sequence of catch-ups leave the same rows.

A postings list is the run-relative ordinals (u8 in a run of at most 256 documents, else u16)
followed by the weighted counts (u16).

Catch-ups run in transactions under a transaction-level advisory lock per thread (taken in key
order), many small threads a transaction; readers never wait (they read the last commit). A
connection that may not write (a SELECT-only role, a hot standby) never catches up: a query
answers from the rows as they are and says how far they lag.

This module imports psycopg (and numpy): the store imports it when a search first asks for its
index (:meth:`~continuity.store.postgres.PostgresStore.search_backend`).
"""

from __future__ import annotations

import contextlib
import re
import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import numpy.typing as npt
import psycopg

from continuity import frames as fr
from continuity.errors import ContinuityError, CorruptFrame
from continuity.store.base import (
    BaseStore,
    DocumentsOf,
    SearchDocument,
    SearchWatermark,
    Thread,
    WideRun,
    WideSearch,
)
from continuity.store.postgres.artifacts import PostgresArtifactStore
from continuity.store.postgres.keys import thread_key
from continuity.store.postgres.schema import advisory_key

if TYPE_CHECKING:
    from continuity.store.postgres.db import Connection, Database

__all__ = ["SEARCH_TABLES", "SEARCH_VERSION", "PostgresSearch", "decode_list", "layout"]

SEARCH_VERSION: Final = 3  # 2: stemmed terms (ADR 0032); 3: store-wide runs (ADR 0041)
SEARCH_TABLES: Final = ("search_threads", "search_docs", "search_postings")
_OLD_TABLES: Final = ("search_runs",)
"""Tables of other versions: dropped with the rest when the version changes."""
SIZES: Final = (65_536, 4_096, 256)
"""The sealed run sizes, largest first (the file index's segments, ADR 0011); the rest of a
thread's documents (fewer than 256) is one tail run."""
_CHUNK: Final = 16_384
"""Documents written at a time by a catch-up (a multiple of 4,096: no run is merged twice)."""
_READ: Final = 4_096
"""Frames read from ``frames`` at a time, for one thread or a batch of small ones."""
_BATCH_THREADS: Final = 512
_ROW_BYTES: Final = 1_500
"""A postings row's terms and lists are cut to stay below PostgreSQL's TOAST threshold (about
2 KB): a query reads small rows whole, with nothing to fetch aside or decompress."""
_RECORD: Final = struct.Struct("<QIBB2x")
_CHECKPOINT: Final = b'{"type":"compaction_checkpoint_created"'
_SUMMARY_ID: Final = re.compile(rb'"summary_artifact_id":"([0-9a-f]{64})"')
"""A checkpoint's line, and its summary's id in it (read ahead: one query for a batch)."""
_U32: Final = 2**32 - 1
PROJECT: Final = " p:"
SOURCE: Final = " s:"
"""Prefixes of the pseudo-terms naming a run's project and source (no term holds a space)."""

Progress = Callable[[int, int], None]


def layout(n: int) -> list[tuple[int, int]]:
    """The runs (first document, documents) that hold ``n`` documents."""
    out: list[tuple[int, int]] = []
    first = 0
    for size in SIZES:
        while n - first >= size:
            out.append((first, size))
            first += size
    if n > first:
        out.append((first, n - first))
    return out


def _changed_from(n0: int, n1: int) -> int:
    """The first document of the first run of ``n1``'s layout that ``n0``'s does not have."""
    old = set(layout(n0))
    return next((first for first, size in layout(n1) if (first, size) not in old), n1)


def decode_list(raw: bytes) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint16]]:
    """A postings list: (run-relative ordinals, counts), stored as (u16, u16) pairs."""
    if len(raw) % 4:
        raise ValueError("a postings list of the search index has a partial entry")
    pairs = np.frombuffer(raw, "<u2").reshape(-1, 2)
    return pairs[:, 0].astype(np.uint32), pairs[:, 1].astype(np.uint16)


@dataclass(frozen=True, slots=True)
class _State:
    """A thread's head and its watermark, as one statement reads them."""

    key: int
    thread_id: str
    head_seq: int
    head_digest: bytes
    last_seq: int | None
    digest: bytes
    docs: int
    total: int
    project: str | None
    source: str


class _Postings:
    """Documents ``lo ..`` of a thread as flat postings (term id, absolute ordinal, count),
    with their records: old runs read back, then new documents. ``ids`` numbers the terms:
    one dict for every thread of a write (:func:`_runs`)."""

    def __init__(self, lo: int, ids: dict[str, int]) -> None:
        self.lo = lo
        self.n = lo
        self.records: list[bytes] = []
        self.ids = ids
        self.term_ids: list[int] = []
        self.ordinals: list[int] = []
        self.counts: list[int] = []

    def add_rows(
        self,
        docs: Sequence[tuple[int, int, bytes]],
        postings: Sequence[tuple[int, list[str], list[bytes]]],
    ) -> None:
        """Old runs read back (in order): their (first doc, n docs, records) and their
        postings rows (first doc, terms, lists)."""
        for first, n, records in docs:
            if first != self.n or len(records) != n * _RECORD.size:
                raise ValueError("the search runs of a thread do not follow each other")
            self.records.append(records)
            self.n += n
        ids = self.ids
        for first, terms, lists in postings:
            if len(terms) != len(lists):
                raise ValueError("a postings row of the search index does not pair up")
            for term, raw in zip(terms, lists, strict=True):
                if term.startswith(" "):
                    continue
                ords, tfs = decode_list(raw)
                self.term_ids.extend([ids.setdefault(term, len(ids))] * len(ords))
                self.ordinals.extend((ords.astype(np.int64) + first).tolist())
                self.counts.extend(tfs.tolist())

    def add_docs(self, docs: Sequence[SearchDocument]) -> None:
        """New documents, ordinals from :attr:`n`."""
        self.records.append(
            b"".join(_RECORD.pack(d.seq, min(d.length, _U32), d.kind, d.role) for d in docs)
        )
        ids = self.ids
        for o, d in enumerate(docs, self.n):
            tf = d.tf
            self.term_ids.extend([ids.setdefault(t, len(ids)) for t in tf])
            self.ordinals.extend([o] * len(tf))
            self.counts.extend(tf.values())
        self.n += len(docs)


def _runs(
    threads: Sequence[tuple[int, list[str], _Postings]], ids: dict[str, int], encoding: str
) -> tuple[list[bytes], list[bytes]]:
    """The rows of each thread's runs of documents ``lo .. n - 1`` (``lo`` starts a run of the
    layout of ``n``), in binary COPY format: the docs rows and the postings rows (terms in
    order, cut where a row would pass :data:`_ROW_BYTES`, each row carrying the thread's
    ``scope`` pseudo-terms). ``threads`` is (key, scope, postings) and ``ids`` the terms of
    all of them: their postings are laid out together, one sort for the write (numpy's fixed
    cost once, not once per small thread, ADR 0063)."""
    names = sorted(ids)
    rank = np.zeros(len(names), np.int64)
    rank[[ids[t] for t in names]] = np.arange(len(names))
    encoded = [t.encode(encoding) for t in names]
    term_ids: list[int] = []
    ordinals: list[int] = []
    counts: list[int] = []
    sizes: list[int] = []
    runs: list[tuple[int, int, int]] = []  # (thread, first doc, documents)
    for i, (_key, _scope, p) in enumerate(threads):
        term_ids.extend(p.term_ids)
        ordinals.extend(p.ordinals)
        counts.extend(p.counts)
        sizes.append(len(p.ordinals))
        runs.extend((i, first, size) for first, size in layout(p.n) if first >= p.lo)
    ords = np.array(ordinals, np.int64)
    terms = rank[np.array(term_ids, np.int64)] if term_ids else ords
    owner = np.repeat(np.arange(len(threads), dtype=np.int64), sizes)
    firsts = np.array([first for _i, first, _size in runs], np.int64)
    starts = (np.array([i for i, _first, _size in runs], np.int64) << 32) + firsts
    run_of = np.searchsorted(starts, (owner << 32) + ords, side="right") - 1
    order = np.lexsort((ords, terms, run_of))  # by run, then term, then ordinal
    ords, terms, run_of = ords[order], terms[order], run_of[order]
    pairs = np.empty((len(ords), 2), "<u2")
    pairs[:, 0] = ords - firsts[run_of] if len(ords) else ords
    pairs[:, 1] = np.minimum(np.array(counts, np.int64)[order], 65535)
    # one group a (run, term): where either changes
    cut = np.flatnonzero((np.diff(terms) != 0) | (np.diff(run_of) != 0)) + 1
    bounds = np.concatenate(([0], cut, [len(ords)])).astype(np.int64)
    counts_of = np.diff(bounds)  # postings of each group
    group_term = terms[bounds[:-1]] if len(ords) else np.zeros(0, np.int64)
    group_run = run_of[bounds[:-1]] if len(ords) else np.zeros(0, np.int64)
    # each group's bytea element (length, then its (ordinal, count) pairs), all in one stream
    sizes_of = 4 + 4 * counts_of
    at_of = np.concatenate(([0], np.cumsum(sizes_of))).astype(np.int64)
    stream = np.empty(int(at_of[-1]), np.uint8)
    heads = (at_of[:-1, None] + np.arange(4)).ravel()
    stream[heads] = (4 * counts_of).astype(">i4").view(np.uint8)
    owner_of = np.repeat(np.arange(len(counts_of), dtype=np.int64), 4 * counts_of)
    stream[np.arange(4 * len(ords), dtype=np.int64) + 4 * (owner_of + 1)] = pairs.view(
        np.uint8
    ).ravel()
    lists = stream.tobytes()
    # and its text element (the term's name), likewise
    elements = [_LEN.pack(len(e)) + e for e in encoded]
    gterms = group_term.tolist()
    names_stream = b"".join([elements[t] for t in gterms])
    name_at = np.concatenate(
        ([0], np.cumsum(np.array([len(e) for e in elements], np.int64)[group_term]))
    ).tolist()
    list_at = at_of.tolist()
    # a row is cut where the next group would take it past _ROW_BYTES (the cost of a group:
    # its term's characters, its postings' bytes, 16); a run under the limit is one row
    name_chars = np.array([len(t) for t in names], np.int64)
    cost = (name_chars[group_term] + 4 * counts_of + 16).tolist()
    run_at = np.searchsorted(group_run, np.arange(len(runs) + 1)).tolist()
    whole = np.concatenate(([0], np.cumsum(cost, dtype=np.int64))).tolist()
    records = [b"".join(p.records) for _key, _scope, p in threads]
    scopes = [
        (
            len(scope),
            b"".join(_LEN.pack(len(e)) + e for e in (t.encode(encoding) for t in scope)),
            _LEN.pack(0) * len(scope),
        )
        for _key, scope, _p in threads
    ]
    docs_rows: list[bytes] = []
    postings_rows: list[bytes] = []
    for r, (i, first, size) in enumerate(runs):
        key, _scope, p = threads[i]
        lo, hi = run_at[r], run_at[r + 1]
        cuts = [lo]
        if whole[hi] - whole[lo] > _ROW_BYTES:
            used = 0
            for g in range(lo, hi):
                if g > cuts[-1] and used + cost[g] > _ROW_BYTES:
                    cuts.append(g)
                    used = 0
                used += cost[g]
        cuts.append(hi)
        n_scope, scope_names, scope_lists = scopes[i]
        for part in range(len(cuts) - 1):
            g0, g1 = cuts[part], cuts[part + 1]
            if g1 == g0:
                continue
            head = _ARRAY_HEAD.pack(1, 0, _TEXT_OID, n_scope + g1 - g0, 1)
            names_part = names_stream[name_at[g0] : name_at[g1]]
            lists_part = lists[list_at[g0] : list_at[g1]]
            postings_rows.append(
                b"".join(
                    (
                        _POSTINGS_HEAD.pack(5, 8, key, 4, first, 2, part),
                        _LEN.pack(len(head) + len(scope_names) + len(names_part)),
                        head,
                        scope_names,
                        names_part,
                        _LEN.pack(len(head) + len(scope_lists) + len(lists_part)),
                        _ARRAY_HEAD.pack(1, 0, _BYTEA_OID, n_scope + g1 - g0, 1),
                        scope_lists,
                        lists_part,
                    )
                )
            )
        offset = (first - p.lo) * _RECORD.size
        docs_rows.append(
            _docs_row(key, first, size, records[i][offset : offset + size * _RECORD.size])
        )
    return docs_rows, postings_rows


class _Sql:
    def __init__(self, s: str) -> None:
        self.create = (
            f"""CREATE TABLE IF NOT EXISTS {s}.search_threads (
                thread_key   bigint PRIMARY KEY,
                last_seq     bigint NOT NULL,
                docs         bigint NOT NULL,
                total_length bigint NOT NULL,
                digest       bytea NOT NULL,
                project      text COLLATE "C",
                source       text COLLATE "C" NOT NULL
            )""",
            f"""CREATE TABLE IF NOT EXISTS {s}.search_docs (
                thread_key bigint NOT NULL,
                first_doc  integer NOT NULL,
                n_docs     integer NOT NULL,
                records    bytea NOT NULL,
                PRIMARY KEY (thread_key, first_doc)
            )""",
            f"""CREATE TABLE IF NOT EXISTS {s}.search_postings (
                thread_key bigint NOT NULL,
                first_doc  integer NOT NULL,
                part       smallint NOT NULL,
                terms      text[] COLLATE "C" NOT NULL,
                lists      bytea[] NOT NULL,
                PRIMARY KEY (thread_key, first_doc, part)
            )""",
            # the store-wide lookup: the rows that hold any of a query's terms
            # new entries go to the index's pending list and are merged in bulk (inserting
            # them one by one made a first build of 10,000 threads three times slower)
            f"CREATE INDEX IF NOT EXISTS search_postings_terms ON {s}.search_postings "
            "USING gin (terms)",
            # records are read whole, postings rows are small: nothing to compress
            f"ALTER TABLE {s}.search_docs ALTER COLUMN records SET STORAGE EXTERNAL",
        )
        self.drop = (
            f"DROP TABLE IF EXISTS {', '.join(f'{s}.{t}' for t in SEARCH_TABLES + _OLD_TABLES)}"
        )
        self.version = f"SELECT value FROM {s}.meta WHERE key = 'search_version'"
        self.set_version = (
            f"INSERT INTO {s}.meta (key, value) VALUES ('search_version', %s) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
        )
        self.may_write = (
            "SELECT NOT pg_is_in_recovery() "
            "AND current_setting('transaction_read_only') = 'off' "
            "AND CASE WHEN to_regclass(%(runs)s) IS NULL "
            "THEN has_schema_privilege(%(schema)s, 'CREATE') "
            "ELSE has_table_privilege(%(runs)s, 'INSERT, DELETE') "
            "AND has_table_privilege(%(threads)s, 'INSERT, UPDATE, DELETE') END"
        )
        self.state = (
            "SELECT t.thread_key, t.thread_id, t.head_seq, t.head_digest, w.last_seq, w.digest, "
            "w.docs, w.total_length, w.project, w.source "
            f"FROM {s}.threads t LEFT JOIN {s}.search_threads w ON w.thread_key = t.thread_key "
        )
        # one thread: its key in every table it reads (ADR 0041), its id checked
        self.state_of_id = (
            "SELECT t.thread_key, t.thread_id, t.head_seq, t.head_digest, w.last_seq, w.digest, "
            "w.docs, w.total_length, w.project, w.source "
            f"FROM {s}.threads t LEFT JOIN {s}.search_threads w ON w.thread_key = %(key)s "
            "WHERE t.thread_key = %(key)s AND t.thread_id = %(tid)s"
        )
        self.state_of_keys = self.state + "WHERE t.thread_key = ANY(%s) ORDER BY t.thread_key"
        # one statement finds what lags: a head past its watermark (or none), a watermark
        # whose thread is gone
        self.lagging = (
            "SELECT coalesce(t.thread_key, w.thread_key), t.thread_id, "
            "coalesce(t.head_seq, -1) - coalesce(w.last_seq, -1) "
            f"FROM {s}.threads t FULL JOIN {s}.search_threads w ON w.thread_key = t.thread_key "
            "WHERE t.thread_key IS NULL OR (w.thread_key IS NULL AND t.head_seq >= 0) "
            "OR w.last_seq IS DISTINCT FROM t.head_seq OR w.digest IS DISTINCT FROM t.head_digest "
            "ORDER BY t.thread_id"
        )
        self.tails_of = (
            "SELECT x.k, substring(f.line FROM "
            f"greatest(octet_length(f.line) - {fr.SEAL_SUFFIX_LEN}, 1)) "
            f"FROM {s}.frames f JOIN unnest(%s::bigint[], %s::bigint[]) AS x(k, seq) "
            "ON f.thread_key = x.k AND f.seq = x.seq"
        )
        self.tail_of = (
            "SELECT substring(f.line FROM "
            f"greatest(octet_length(f.line) - {fr.SEAL_SUFFIX_LEN}, 1)) "
            f"FROM {s}.frames f WHERE f.thread_key = %s AND f.seq = %s"
        )
        self.lines = (
            f"SELECT f.thread_key, f.seq, f.line FROM {s}.frames f "
            "JOIN unnest(%s::bigint[], %s::bigint[], %s::bigint[]) AS x(k, lo, hi) "
            "ON f.thread_key = x.k AND f.seq BETWEEN x.lo AND x.hi ORDER BY f.thread_key, f.seq"
        )
        self.indexed = f"SELECT thread_key FROM {s}.search_threads"
        self.thread_ids = f"SELECT thread_key, thread_id FROM {s}.threads ORDER BY thread_id"
        self.reset = tuple(f"DELETE FROM {s}.{t} WHERE thread_key = ANY(%s)" for t in SEARCH_TABLES)
        runs_from = "JOIN unnest(%s::bigint[], %s::int[]) AS x(k, lo) ON r.thread_key = x.k "
        self.old_docs = (
            f"SELECT r.thread_key, r.first_doc, r.n_docs, r.records FROM {s}.search_docs r "
            + runs_from
            + "AND r.first_doc >= x.lo ORDER BY r.thread_key, r.first_doc"
        )
        self.old_postings = (
            f"SELECT r.thread_key, r.first_doc, r.terms, r.lists FROM {s}.search_postings r "
            + runs_from
            + "AND r.first_doc >= x.lo ORDER BY r.thread_key, r.first_doc, r.part"
        )
        self.drop_runs = tuple(
            f"DELETE FROM {s}.{t} r USING unnest(%s::bigint[], %s::int[]) AS x(k, lo) "
            "WHERE r.thread_key = x.k AND r.first_doc >= x.lo"
            for t in ("search_docs", "search_postings")
        )
        self.copy_docs = (
            f"COPY {s}.search_docs (thread_key, first_doc, n_docs, records) "
            "FROM STDIN (FORMAT BINARY)"
        )
        self.copy_postings = (
            f"COPY {s}.search_postings (thread_key, first_doc, part, terms, lists) "
            "FROM STDIN (FORMAT BINARY)"
        )
        self.set_watermarks = (
            f"INSERT INTO {s}.search_threads "
            "(thread_key, last_seq, docs, total_length, digest, project, source) "
            "SELECT * FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[], %s::bigint[], "
            "%s::bytea[], %s::text[], %s::text[]) "
            "ON CONFLICT (thread_key) DO UPDATE SET last_seq = excluded.last_seq, "
            "docs = excluded.docs, total_length = excluded.total_length, "
            "digest = excluded.digest, project = excluded.project, source = excluded.source"
        )
        self.records = (
            f"SELECT r.first_doc, r.n_docs, r.records FROM {s}.search_docs r "
            "WHERE r.thread_key = %s "
            "AND r.first_doc < %s AND r.first_doc + r.n_docs > %s ORDER BY r.first_doc"
        )
        self.stats = (
            "SELECT count(*), coalesce(sum(docs), 0), coalesce(sum(total_length), 0) "
            f"FROM {s}.search_threads WHERE docs > 0 "
            "AND (%(project)s::text IS NULL OR project = %(project)s) "
            "AND (%(source)s::text IS NULL OR source = %(source)s)"
        )
        self.s = s

    def lists_of(self, n: int) -> str:
        """The postings of query terms ``%(t0)s .. %(t<n-1>)s`` in a row, NULL where none."""
        return (
            "ARRAY["
            + ", ".join(f"p.lists[array_position(p.terms, %(t{i})s::text)]" for i in range(n))
            + "]::bytea[]"
        )

    def postings(self, n: int) -> str:
        """The postings rows of a thread's documents ``%(start)s .. %(end)s - 1``."""
        s = self.s
        return (
            f"SELECT p.first_doc, {self.lists_of(n)} FROM {s}.search_postings p "
            f"JOIN {s}.search_docs d ON d.thread_key = %(key)s AND d.first_doc = p.first_doc "
            "WHERE p.thread_key = %(key)s "
            "AND p.terms && %(terms)s::text[] "
            "AND d.first_doc < %(end)s AND d.first_doc + d.n_docs > %(start)s "
            "ORDER BY p.first_doc, p.part"
        )

    def wide(self, n: int) -> str:
        """The store-wide query: every postings row (of the scope) that holds one of the terms,
        with its run's records and the terms' postings (NULL where it has none), in no order
        (sorting them on the server spilled to disk: the client sorts)."""
        s = self.s
        return (
            f"WITH hit AS (SELECT p.thread_key, p.first_doc, {self.lists_of(n)} AS lists "
            f"FROM {s}.search_postings p "
            "WHERE p.terms && %(terms)s::text[] AND p.terms @> %(scope)s::text[]) "
            "SELECT t.thread_id, d.first_doc, d.n_docs, d.records, h.lists FROM hit h "
            f"JOIN {s}.search_docs d ON d.thread_key = h.thread_key AND d.first_doc = h.first_doc "
            f"JOIN {s}.threads t ON t.thread_key = h.thread_key"
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
        self._writable: bool | None = None
        self._readable = True
        self.frames_read = 0
        """Frames this object read from ``frames`` to index them (tests check a search reads
        none of a current index's)."""

    # -- the tables --

    def writable(self) -> bool:
        """Whether this connection may write the index (not a hot standby, a read-only
        transaction default or a role without the rights): asked once."""
        if self._writable is None:
            s = self.schema
            with self._db.connection() as conn:
                row = conn.execute(
                    self._sql.may_write,
                    {"runs": f"{s}.search_postings", "threads": f"{s}.search_threads", "schema": s},
                ).fetchone()
            self._writable = bool(row is not None and row[0])
        return self._writable

    def ensure(self, *, force: bool = False) -> None:
        """Make the tables when ``meta`` does not name this version (or ``force``: a table is
        missing); an index of another version is dropped and rebuilt lazily. A connection that
        may not write leaves them as they are (and reads nothing from another version's)."""
        if self._ready and not force:
            return
        sql = self._sql
        with self._db.connection() as conn:
            row = conn.execute(sql.version).fetchone()
            if not force and row is not None and row[0] == str(SEARCH_VERSION):
                self._ready = True
                return
            if not self.writable():
                self._ready = True
                self._readable = row is not None and row[0] == str(SEARCH_VERSION)
                return
            with conn.transaction():
                conn.execute(
                    "SELECT pg_advisory_xact_lock(%s)", [advisory_key("schema", self.schema)]
                )
                row = conn.execute(sql.version).fetchone()
                if force or (row is not None and row[0] != str(SEARCH_VERSION)):
                    # another version's tables, or some dropped: the watermarks of what is
                    # left would claim rows that are gone
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
            if not self.writable():
                raise
            self.ensure(force=True)
            return work(*args, **kwargs)

    # -- the store-wide query --

    def search_wide(
        self,
        terms: Sequence[str],
        documents: DocumentsOf,
        *,
        project: str | None = None,
        source: str | None = None,
        progress: Progress | None = None,
    ) -> WideSearch:
        found: WideSearch = self._retry(self._wide, terms, documents, project, source, progress)
        return found

    def _wide(
        self,
        terms: Sequence[str],
        documents: DocumentsOf,
        project: str | None,
        source: str | None,
        progress: Progress | None,
    ) -> WideSearch:
        if not self._readable:  # another version's tables, and no right to replace them
            return self._unindexed()
        lag_threads = lag_frames = 0
        with self._db.connection() as conn:
            lagging = conn.execute(self._sql.lagging).fetchall()
        if lagging:
            if self.writable():
                self._catch_up_many(
                    [(int(k), tid) for k, tid, _n in lagging], documents, progress=progress
                )
            else:
                live = [r for r in lagging if r[1] is not None]
                lag_threads, lag_frames = len(live), sum(max(int(r[2]), 0) for r in live)
        scope = ([PROJECT + project] if project is not None else []) + (
            [SOURCE + source] if source is not None else []
        )
        params: dict[str, Any] = {f"t{i}": t for i, t in enumerate(terms)}
        params.update(terms=list(terms), scope=scope)
        with self._db.connection() as conn, conn.transaction():
            # one snapshot for the statistics and the rows; the GIN index, however many rows
            # match (a sequential scan would unpack every row's terms to test them)
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            conn.execute("SET LOCAL enable_seqscan = off")
            row = conn.execute(self._sql.stats, {"project": project, "source": source}).fetchone()
            rows = conn.execute(self._sql.wide(len(terms)), params, binary=True).fetchall()
        assert row is not None
        runs: list[WideRun] = []
        rows.sort(key=lambda r: (r[0], r[1]))
        for tid, first, n, records, lists in rows:
            got = [None if x is None else bytes(x) for x in lists]
            last = runs[-1] if runs else None
            if last is not None and (last.thread_id, last.first_doc) == (tid, first):
                # the run's terms in another of its postings rows
                merged = [a if a is not None else b for a, b in zip(last.lists, got, strict=True)]
                runs[-1] = WideRun(
                    last.thread_id, last.first_doc, last.n_docs, last.records, merged
                )
            else:
                runs.append(WideRun(str(tid), int(first), int(n), bytes(records), got))
        return WideSearch(
            runs=runs,
            threads=int(row[0]),
            docs=int(row[1]),
            total_length=int(row[2]),
            lagging_threads=lag_threads,
            lagging_frames=lag_frames,
        )

    def _unindexed(self) -> WideSearch:
        with self._db.connection() as conn:
            row = conn.execute(
                f"SELECT count(*), coalesce(sum(head_seq + 1), 0) FROM {self.schema}.threads "
                "WHERE head_seq >= 0"
            ).fetchone()
        assert row is not None
        return WideSearch([], 0, 0, 0, int(row[0]), int(row[1]))

    # -- the per-thread SearchBackend protocol (one thread's prefix: recall) --

    def search_watermark(
        self, thread: Thread, documents: DocumentsOf, *, max_seq: int | None
    ) -> SearchWatermark | None:
        found: SearchWatermark | None = self._retry(self._watermark, thread, documents, max_seq)
        return found

    def search_holds(self, thread: Thread, seq: int, digest: str) -> bool:
        with self._db.connection() as conn:
            row = conn.execute(
                self._sql.tail_of, [thread_key(thread.id), seq], binary=True
            ).fetchone()
        sealed = fr.unseal(bytes(row[0])) if row is not None else None
        return sealed is not None and sealed[1].hex() == digest

    def search_records(self, thread: Thread, start: int, end: int) -> bytes:
        if end <= start:
            return b""
        rows = self._retry(self._rows, self._sql.records, [thread_key(thread.id), end, start])
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
        params: dict[str, Any] = {f"t{i}": t for i, t in enumerate(terms)}
        params.update(key=thread_key(thread.id), terms=list(terms), start=start, end=end)
        rows = self._retry(self._rows, self._sql.postings(len(terms)), params)
        by_term: dict[str, tuple[list[npt.NDArray[np.uint32]], list[npt.NDArray[np.uint16]]]] = {}
        for first, lists in rows:
            for term, raw in zip(terms, lists, strict=True):
                if raw is None:
                    continue
                ords, tfs = decode_list(bytes(raw))
                entry = by_term.setdefault(term, ([], []))
                entry[0].append(ords + np.uint32(first))
                entry[1].append(tfs)
        out: dict[str, tuple[bytes, bytes]] = {}
        for term, (doc_parts, tf_parts) in by_term.items():
            docs = np.concatenate(doc_parts)
            tfs = np.concatenate(tf_parts)
            lo, hi = np.searchsorted(docs, [start, end])
            if hi > lo:
                out[term] = (
                    docs[lo:hi].astype("<u4").tobytes(),
                    tfs[lo:hi].astype("<u2").tobytes(),
                )
        return out

    def rebuild_search(self, threads: Sequence[Thread] | None, documents: DocumentsOf) -> int:
        self.ensure()
        if threads is None:
            with self._db.connection() as conn:
                try:
                    keys = {int(r[0]) for r in conn.execute(self._sql.indexed).fetchall()}
                except psycopg.errors.UndefinedTable:
                    keys = set()
                chosen = [
                    (int(key), str(tid))
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
            self._retry(self._catch_up_many, chosen, documents)
            return len(chosen)
        with self._db.connection() as conn:
            rows = conn.execute(
                self._sql.state_of_keys, [[thread_key(t.id) for t in threads]]
            ).fetchall()
        pairs = [(int(r[0]), str(r[1])) for r in rows]
        self._retry(self._catch_up_many, pairs, documents, reset=True)
        return len(threads)

    # -- the work --

    def _rows(self, statement: str, params: Any) -> list[tuple[Any, ...]]:
        with self._db.connection() as conn:
            return conn.execute(statement, params, binary=True).fetchall()

    def _watermark(
        self, thread: Thread, documents: DocumentsOf, max_seq: int | None
    ) -> SearchWatermark | None:
        if not self._readable:  # another version's tables, and no right to replace them
            return None
        with self._db.connection() as conn:
            row = conn.execute(
                self._sql.state_of_id, {"key": thread_key(thread.id), "tid": thread.id}, binary=True
            ).fetchone()
        if row is None or row[2] < 0:
            return None
        st = _state(row)
        if st.last_seq is not None:
            mark = SearchWatermark(st.last_seq, st.digest.hex(), st.docs, st.total)
            if st.last_seq == st.head_seq and st.digest == st.head_digest:
                return mark
            if max_seq is not None and st.last_seq < st.head_seq and max_seq <= st.last_seq:
                return mark  # a prefix recall reads: what is indexed already holds it
            if not self.writable():
                return mark  # what is indexed, as it is: the caller cannot catch it up
        elif not self.writable():
            return None
        self._catch_up_many([(st.key, thread.id)], documents)
        with self._db.connection() as conn:
            row = conn.execute(
                self._sql.state_of_id, {"key": thread_key(thread.id), "tid": thread.id}, binary=True
            ).fetchone()
        if row is None or row[2] < 0 or row[4] is None:
            return None
        st = _state(row)
        return SearchWatermark(st.last_seq or 0, st.digest.hex(), st.docs, st.total)

    def _catch_up_many(
        self,
        threads: Sequence[tuple[int, str | None]],
        documents: DocumentsOf,
        *,
        reset: bool = False,
        progress: Progress | None = None,
    ) -> None:
        """Index the frames past each thread's watermark (all of them: ``reset``), small threads
        many a transaction, each under its advisory lock; drop the rows of threads that are
        gone (``None`` for an id)."""
        gone = [k for k, tid in threads if tid is None]
        if gone:
            with self._db.transaction(durable=False) as conn:
                for statement in self._sql.reset:
                    conn.execute(statement, [gone])
        todo = sorted((k, tid) for k, tid in threads if tid is not None)
        done = 0
        for i in range(0, len(todo), _BATCH_THREADS):
            batch = todo[i : i + _BATCH_THREADS]
            self._catch_up_batch(batch, documents, reset=reset)
            done += len(batch)
            if progress is not None:
                progress(done, len(todo))
        if len(todo) > _BATCH_THREADS:
            self._flush_pending()

    def _flush_pending(self) -> None:
        """Merge the GIN index's pending list after a large catch-up, so queries do not scan
        it (autovacuum would, later); a role that does not own the index leaves it."""
        with (
            self._db.connection() as conn,
            contextlib.suppress(psycopg.errors.InsufficientPrivilege),
        ):
            conn.execute(
                "SELECT gin_clean_pending_list(%s::regclass)",
                [f"{self.schema}.search_postings_terms"],
            )

    def _catch_up_batch(
        self, batch: Sequence[tuple[int, str]], documents: DocumentsOf, *, reset: bool
    ) -> None:
        sql = self._sql
        with self._db.transaction(durable=False) as conn:
            locks = sorted(advisory_key("search", self.schema, tid) for _k, tid in batch)
            conn.execute(
                "SELECT pg_advisory_xact_lock(k) FROM (SELECT unnest(%s::bigint[]) AS k "
                "ORDER BY 1) AS s",
                [locks],
            )
            rows = conn.execute(sql.state_of_keys, [[k for k, _t in batch]], binary=True)
            states = [_state(r) for r in rows.fetchall() if r[2] >= 0]
            work: list[_State] = []
            resets: list[int] = []
            held = self._holding(conn, states) if not reset else set()
            for st in states:
                if not reset and st.last_seq is not None:
                    if st.last_seq == st.head_seq and st.digest == st.head_digest:
                        continue
                    if st.last_seq <= st.head_seq and (st.last_seq < 0 or st.key in held):
                        work.append(st)
                        continue
                if st.last_seq is not None:
                    resets.append(st.key)  # indexed from another log: start over
                work.append(replace(st, last_seq=-1, docs=0, total=0))
            if resets:
                for statement in sql.reset:
                    conn.execute(statement, [resets])
            self._index(conn, work, documents)

    def _holding(self, conn: Connection, states: Sequence[_State]) -> set[int]:
        """The threads whose log still carries the digest of their watermark's frame."""
        asked = [st for st in states if st.last_seq is not None and st.last_seq >= 0]
        if not asked:
            return set()
        rows = conn.execute(
            self._sql.tails_of,
            [[st.key for st in asked], [st.last_seq for st in asked]],
            binary=True,
        ).fetchall()
        want = {st.key: st.digest for st in asked}
        out = set()
        for key, tail in rows:
            sealed = fr.unseal(bytes(tail))
            if sealed is not None and sealed[1] == want.get(int(key)):
                out.add(int(key))
        return out

    def _index(self, conn: Connection, work: Sequence[_State], documents: DocumentsOf) -> None:
        """Read the new frames of ``work`` (a few thousand at a time), make their documents
        and write them; then move the watermarks."""
        sql = self._sql
        pieces: list[tuple[_State, int, list[SearchDocument]]] = []
        marks: dict[int, _State] = {}
        group: list[_State] = []
        frames = 0

        def flush() -> None:
            nonlocal frames
            if group:
                self._read(conn, group, documents, pieces, marks)
            group.clear()
            frames = 0

        for st in work:
            lag = st.head_seq - (st.last_seq if st.last_seq is not None else -1)
            if lag > _READ:
                flush()
                self._read_long(conn, st, documents, marks)
                continue
            group.append(st)
            frames += lag
            if frames >= _READ:
                flush()
                self._write(conn, pieces)
                pieces.clear()
        flush()
        self._write(conn, pieces)
        if marks:
            ms = sorted(marks.values(), key=lambda m: m.key)
            conn.execute(
                sql.set_watermarks,
                [
                    [m.key for m in ms],
                    [m.head_seq for m in ms],
                    [m.docs for m in ms],
                    [m.total for m in ms],
                    [m.head_digest for m in ms],
                    [m.project for m in ms],
                    [m.source for m in ms],
                ],
            )

    def _thread(self, thread_id: str) -> Thread:
        return self._store.thread(thread_id)

    def _read(
        self,
        conn: Connection,
        group: Sequence[_State],
        documents: DocumentsOf,
        pieces: list[tuple[_State, int, list[SearchDocument]]],
        marks: dict[int, _State],
    ) -> None:
        """The new frames of the threads of ``group`` (a few thousand in all) as pieces."""
        params = [
            [st.key for st in group],
            [(st.last_seq if st.last_seq is not None else -1) + 1 for st in group],
            [st.head_seq for st in group],
        ]
        by_key: dict[int, list[tuple[int, bytes]]] = {st.key: [] for st in group}
        for key, seq, line in conn.execute(self._sql.lines, params, binary=True):
            by_key[int(key)].append((int(seq), bytes(line)))
        with self._summaries(line for lines in by_key.values() for _seq, line in lines):
            self._documents(group, by_key, documents, pieces, marks)

    @contextlib.contextmanager
    def _summaries(self, lines: Iterable[bytes]) -> Iterator[None]:
        """The summaries of the checkpoints among ``lines`` read ahead in one query, for the
        block (a document of a checkpoint holds its summary's text: a read each, ADR 0063)."""
        artifacts = self._store.artifacts
        ids = [
            m.decode()
            for line in lines
            if line.startswith(_CHECKPOINT)
            for m in _SUMMARY_ID.findall(line)
        ]
        if not ids or not isinstance(artifacts, PostgresArtifactStore):
            yield
            return
        artifacts.preload(ids)
        try:
            yield
        finally:
            artifacts.forget_preloaded()

    def _documents(
        self,
        group: Sequence[_State],
        by_key: dict[int, list[tuple[int, bytes]]],
        documents: DocumentsOf,
        pieces: list[tuple[_State, int, list[SearchDocument]]],
        marks: dict[int, _State],
    ) -> None:
        for st in group:
            batch = by_key[st.key]
            st = self._checked(st, batch)
            docs = list(documents(self._thread(st.thread_id), batch)) if batch else []
            if len(batch) != st.head_seq - (st.last_seq if st.last_seq is not None else -1):
                raise CorruptFrame(st.thread_id, st.head_seq, -1, "frame is missing")
            pieces.append((st, st.docs, docs))
            marks[st.key] = replace(st, docs=st.docs + len(docs), total=st.total + _length(docs))

    def _checked(self, st: _State, batch: Sequence[tuple[int, bytes]]) -> _State:
        """``st`` with the project and source of its first frame when ``batch`` starts the
        log; :class:`CorruptFrame` when a frame of ``batch`` is missing."""
        start = (st.last_seq if st.last_seq is not None else -1) + 1
        for i, (seq, _line) in enumerate(batch):
            if seq != start + i:
                raise CorruptFrame(st.thread_id, start + i, -1, "frame is missing")
        self.frames_read += len(batch)
        if start == 0 and batch:
            try:
                first = fr.decode_frame(batch[0][1])
            except (ValueError, ContinuityError):
                first = None
            meta = first.meta if isinstance(first, fr.ThreadCreated) else {}
            project = meta.get("project")
            source = meta.get("source", "")
            st = replace(
                st,
                project=project if isinstance(project, str) else None,
                source=source if isinstance(source, str) else "",
            )
        return st

    def _read_long(
        self, conn: Connection, st: _State, documents: DocumentsOf, marks: dict[int, _State]
    ) -> None:
        """A thread with many new frames: read and written a chunk at a time."""
        thread = self._thread(st.thread_id)
        seq = (st.last_seq if st.last_seq is not None else -1) + 1
        pending: list[SearchDocument] = []
        while seq <= st.head_seq:
            hi = min(st.head_seq, seq + _READ - 1)
            batch = [
                (int(s), bytes(line))
                for _k, s, line in conn.execute(
                    self._sql.lines, [[st.key], [seq], [hi]], binary=True
                )
            ]
            if len(batch) != hi - seq + 1:
                raise CorruptFrame(st.thread_id, seq + len(batch), -1, "frame is missing")
            st = self._checked(replace(st, last_seq=seq - 1), batch)
            with self._summaries(line for _seq, line in batch):
                pending.extend(documents(thread, batch))
            while len(pending) >= _CHUNK:
                st = self._write_one(conn, st, pending[:_CHUNK])
                del pending[:_CHUNK]
            seq = hi + 1
        if pending:
            st = self._write_one(conn, st, pending)
        marks[st.key] = st

    def _write_one(self, conn: Connection, st: _State, docs: list[SearchDocument]) -> _State:
        self._write(conn, [(st, st.docs, docs)])
        return replace(st, docs=st.docs + len(docs), total=st.total + _length(docs))

    def _write(
        self, conn: Connection, pieces: Sequence[tuple[_State, int, list[SearchDocument]]]
    ) -> None:
        """Add each piece's documents (``n0 ..`` of its thread) to the rows: the old runs
        from the first that changes on read back, deleted and written again with them."""
        sql = self._sql
        todo = [(st, n0, docs) for st, n0, docs in pieces if docs]
        if not todo:
            return
        keys = [st.key for st, _n0, _d in todo]
        los = [_changed_from(n0, n0 + len(docs)) for _st, n0, docs in todo]
        old_docs: dict[int, list[tuple[int, int, bytes]]] = {k: [] for k in keys}
        old_postings: dict[int, list[tuple[int, list[str], list[bytes]]]] = {k: [] for k in keys}
        if any(lo < n0 for lo, (_st, n0, _d) in zip(los, todo, strict=True)):
            for key, first, n, records in conn.execute(sql.old_docs, [keys, los], binary=True):
                old_docs[int(key)].append((int(first), int(n), bytes(records)))
            for key, first, terms, lists in conn.execute(
                sql.old_postings, [keys, los], binary=True
            ):
                old_postings[int(key)].append((int(first), list(terms), [bytes(x) for x in lists]))
            for statement in sql.drop_runs:
                conn.execute(statement, [keys, los])
        ids: dict[str, int] = {}
        threads: list[tuple[int, list[str], _Postings]] = []
        for (st, n0, docs), lo in zip(todo, los, strict=True):
            postings = _Postings(lo, ids)
            postings.add_rows(old_docs[st.key], old_postings[st.key])
            if postings.n != n0:
                raise ValueError(f"the search runs of thread {st.thread_id!r} end early")
            postings.add_docs(docs)
            scope = ([PROJECT + st.project] if st.project is not None else []) + [
                SOURCE + st.source
            ]
            threads.append((st.key, scope, postings))
        docs_rows, postings_rows = _runs(threads, ids, conn.info.encoding)
        with conn.cursor() as cur:
            with cur.copy(sql.copy_docs) as copy:
                copy.write(_copy_data(docs_rows))
            with cur.copy(sql.copy_postings) as copy:
                copy.write(_copy_data(postings_rows))


# PostgreSQL's binary COPY format, written here: psycopg's generic dumper of a row with two
# arrays cost more client CPU than the tokenizer on a first build (ADR 0063).
_COPY_HEADER: Final = b"PGCOPY\n\xff\r\n\x00" + bytes(8)
_COPY_TRAILER: Final = b"\xff\xff"
_LEN: Final = struct.Struct(">i")
_DOCS_HEAD: Final = struct.Struct(">hiqiiiii")
_POSTINGS_HEAD: Final = struct.Struct(">hiqiiih")
_ARRAY_HEAD: Final = struct.Struct(">iiiii")
_EMPTY_ARRAY: Final = struct.Struct(">iii")
_TEXT_OID: Final = 25
_BYTEA_OID: Final = 17


def _copy_data(rows: Iterable[bytes]) -> bytes:
    """Rows (each already in the binary format) as one binary COPY stream."""
    return b"".join((_COPY_HEADER, *rows, _COPY_TRAILER))


def _docs_row(key: int, first: int, n: int, records: bytes) -> bytes:
    """A ``search_docs`` row: (int8, int4, int4, bytea)."""
    return _DOCS_HEAD.pack(4, 8, key, 4, first, 4, n, len(records)) + records


def _array(oid: int, items: Sequence[bytes]) -> bytes:
    """A one-dimensional array of non-null elements of type ``oid``, in the binary format."""
    if not items:
        return _EMPTY_ARRAY.pack(0, 0, oid)
    pack = _LEN.pack
    return _ARRAY_HEAD.pack(1, 0, oid, len(items), 1) + b"".join(
        [pack(len(item)) + item for item in items]
    )


def _postings_row(
    key: int, first: int, part: int, terms: Sequence[bytes], lists: Sequence[bytes]
) -> bytes:
    """A ``search_postings`` row: (int8, int4, int2, text[], bytea[]), its terms encoded."""
    names = _array(_TEXT_OID, terms)
    data = _array(_BYTEA_OID, lists)
    return b"".join(
        (
            _POSTINGS_HEAD.pack(5, 8, key, 4, first, 2, part),
            _LEN.pack(len(names)),
            names,
            _LEN.pack(len(data)),
            data,
        )
    )


def _length(docs: Sequence[SearchDocument]) -> int:
    return sum(min(d.length, _U32) for d in docs)


def _state(row: Sequence[Any]) -> _State:
    return _State(
        int(row[0]),
        str(row[1]),
        int(row[2]),
        bytes(row[3]),
        None if row[4] is None else int(row[4]),
        b"" if row[5] is None else bytes(row[5]),
        0 if row[6] is None else int(row[6]),
        0 if row[7] is None else int(row[7]),
        None if row[8] is None else str(row[8]),
        "" if row[9] is None else str(row[9]),
    )
