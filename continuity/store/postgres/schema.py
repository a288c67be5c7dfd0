"""The PostgreSQL store's schema: its tables, its versions and how a database is brought to the
latest one (ADR 0025).

A store lives in one schema of a database (``continuity`` unless told otherwise)::

    meta       key → value: ``schema_version``, ``min_code_version``, ``format``
    threads    one row per thread: its key, id and head (seq and digest), bytes, times;
               the row an append locks to serialise seq assignment and chaining
    frames     (thread_key, seq) → line: each frame's stored line, byte for byte the JSONL line
               without its newline
    artifacts  blake3 id → zstd blob (the file store's bytes), uncompressed size

and, from version 2, the derived tables (rebuildable from ``frames``; ADR 0025)::

    derived_threads  per thread: the last seq the derived rows cover (the watermark), the
                     message count and the default anchor there
    messages         (thread_key, ordinal) → seq, token estimate, role, message id
    checkpoints      (thread_key, seq) → the checkpoint entry
    marks            (thread_key, seq) → a record (kind, key) or a retraction (spans, JSON)

and ``tombstones`` (version 3: a deleted thread's last head, kept so it is not written again)
and, from version 4, ``catalog``: per thread, what the store-wide listings show of it and the
last seq it covers (:mod:`.catalog`).

From version 5 (:data:`REKEY_VERSION`) a thread's key is computed from its id on the client
(:func:`~.keys.thread_key`), every per-thread table (:data:`PER_THREAD_TABLES`) has it in its
primary key and unique indexes, and every statement on one names it: the tables can be
distributed by ``thread_key`` (Citus), ``meta`` made a reference table and ``artifacts``
distributed by its own id (ADR 0041).

``MIGRATIONS`` is the ordered list of steps; step ``n`` takes a database from version ``n - 1``
to ``n``. They run in one transaction under an advisory lock, so two processes initialising or
upgrading one database at once are safe: the second waits, then finds nothing left to do. Each
step also says the oldest code version that can still use the database after it
(``min_code_version``): a step that only adds (a derived table, an index) keeps older code
working; a step that changes what is there raises it, and older code then refuses the database
(:class:`SchemaTooNew`) instead of misreading it.

This module imports psycopg: it is imported only by the PostgreSQL backend.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Final, NamedTuple

import blake3
import psycopg

from continuity.errors import SchemaTooNew, StoreNotFound, StoreRefused, ThreadKeyTaken
from continuity.store.postgres.keys import thread_key

if TYPE_CHECKING:
    from collections.abc import Sequence

    from psycopg.rows import TupleRow

__all__ = [
    "DERIVED_TABLES",
    "MIGRATIONS",
    "PER_THREAD_TABLES",
    "REKEY_VERSION",
    "SCHEMA_VERSION",
    "SEARCH_TABLE_NAMES",
    "advisory_key",
    "check_schema_name",
    "ensure_schema",
    "read_version",
]

FORMAT: Final = "continuity-store"


class Migration(NamedTuple):
    version: int
    min_code_version: int
    """The oldest code (by the schema version it knows) that can use the database after this
    step: ``version`` for a step older code would misread, less for a step that only adds."""
    statements: Sequence[str | Callable[[psycopg.Connection[TupleRow], str], None]]
    """SQL with ``{s}`` for the schema's (validated, unquoted) name, or a function of the
    connection and that name (a step that needs the client: the thread keys)."""


REKEY_VERSION: Final = 5
"""The step that re-keys a store by :func:`~.keys.thread_key` (numbered after the catalog's
4; renumbering it is this constant and its place in :data:`MIGRATIONS`)."""
PER_THREAD_TABLES: Final = (
    "threads",
    "frames",
    "derived_threads",
    "messages",
    "checkpoints",
    "marks",
    "catalog",
    "tombstones",
    "search_threads",
    "search_docs",
    "search_postings",
)
"""Every table keyed by ``thread_key`` (Citus: distributed by it, co-located)."""


def _rekey(conn: psycopg.Connection[TupleRow], s: str) -> None:
    """Step 5's data: every row's ``thread_key`` from the server's identity counter to
    :func:`~.keys.thread_key` of its thread's id, in every per-thread table, in the step's
    transaction; tombstones get their key. Two ids with one key: :class:`ThreadKeyTaken`, and
    nothing changes (the store stays at its version)."""
    rows = conn.execute(f"SELECT thread_key, thread_id FROM {s}.threads").fetchall()
    tombs = conn.execute(f"SELECT DISTINCT thread_id FROM {s}.tombstones").fetchall()
    held: dict[int, str] = {}
    for tid in sorted({str(r[1]) for r in rows} | {str(r[0]) for r in tombs}):
        key = thread_key(tid)
        if held.setdefault(key, tid) != tid:
            raise ThreadKeyTaken(tid, key, held[key])
    old = {int(r[0]) for r in rows}
    pairs = [(int(r[0]), thread_key(str(r[1]))) for r in rows]
    tables = [
        t
        for t in PER_THREAD_TABLES
        if t != "tombstones"
        and conn.execute("SELECT to_regclass(%s)", [f"{s}.{t}"]).fetchone() not in (None, (None,))
    ]
    if any(new in old for _, new in pairs):  # a new key is some thread's old one: move aside
        for t in tables:
            conn.execute(f"UPDATE {s}.{t} SET thread_key = -1 - thread_key")
        pairs = [(-1 - o, new) for o, new in pairs]
    conn.execute("CREATE TEMP TABLE rekey_map (old bigint, new bigint) ON COMMIT DROP")
    conn.execute("CREATE TEMP TABLE rekey_ids (id text, new bigint) ON COMMIT DROP")
    with conn.cursor().copy("COPY rekey_map (old, new) FROM STDIN") as copy:
        for pair in pairs:
            copy.write_row(pair)
    with conn.cursor().copy("COPY rekey_ids (id, new) FROM STDIN") as copy:
        for key, tid in held.items():
            copy.write_row((tid, key))
    for t in tables:
        conn.execute(
            f"UPDATE {s}.{t} x SET thread_key = m.new FROM rekey_map m WHERE x.thread_key = m.old"
        )
    conn.execute(
        f"UPDATE {s}.tombstones x SET thread_key = m.new FROM rekey_ids m WHERE x.thread_id = m.id"
    )


MIGRATIONS: Final[tuple[Migration, ...]] = (
    Migration(
        1,
        1,
        (
            # thread_key: frames and later derived tables repeat an 8-byte key, not the id
            # (up to 128 characters) in every row and index entry. `C` collation: ids compare
            # as bytes, as the JSONL store's file names and `sorted()` do.
            """CREATE TABLE {s}.threads (
                thread_key  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                thread_id   text COLLATE "C" NOT NULL UNIQUE,
                head_seq    bigint NOT NULL,
                head_digest bytea NOT NULL,
                bytes       bigint NOT NULL,
                created_ms  bigint NOT NULL,
                updated_ms  bigint NOT NULL
            )""",
            # No foreign key to threads: the append path is the only writer and holds the
            # head row's lock; a per-row check would cost every insert.
            """CREATE TABLE {s}.frames (
                thread_key bigint NOT NULL,
                seq        bigint NOT NULL,
                line       bytea NOT NULL,
                PRIMARY KEY (thread_key, seq)
            )""",
            """CREATE TABLE {s}.artifacts (
                id         bytea PRIMARY KEY CHECK (octet_length(id) = 32),
                data       bytea NOT NULL,
                size       bigint NOT NULL,
                created_ms bigint NOT NULL
            )""",
            # The blobs are zstd already: TOAST must not try to compress them again.
            "ALTER TABLE {s}.artifacts ALTER COLUMN data SET STORAGE EXTERNAL",
        ),
    ),
    Migration(
        2,
        # Only adds: older code keeps appending frames (without derived rows), and this code
        # catches the rows up from the frames when it finds them behind.
        1,
        (
            """CREATE TABLE {s}.derived_threads (
                thread_key bigint PRIMARY KEY,
                seq        bigint NOT NULL,
                messages   bigint NOT NULL,
                anchor_seq bigint NOT NULL
            )""",
            """CREATE TABLE {s}.messages (
                thread_key bigint NOT NULL,
                ordinal    bigint NOT NULL,
                seq        bigint NOT NULL,
                tokens     bigint NOT NULL,
                role       smallint NOT NULL,
                message_id text COLLATE "C",
                PRIMARY KEY (thread_key, ordinal)
            )""",
            "CREATE UNIQUE INDEX messages_seq ON {s}.messages (thread_key, seq) INCLUDE (ordinal)",
            "CREATE INDEX messages_id ON {s}.messages (thread_key, message_id, seq)",
            """CREATE TABLE {s}.checkpoints (
                thread_key          bigint NOT NULL,
                seq                 bigint NOT NULL,
                to_seq              bigint NOT NULL,
                checkpoint_id       text COLLATE "C" NOT NULL,
                cut_rule_id         text COLLATE "C" NOT NULL,
                summary_kind        text COLLATE "C" NOT NULL,
                summary_artifact_id text COLLATE "C" NOT NULL,
                PRIMARY KEY (thread_key, seq)
            )""",
            "CREATE INDEX checkpoints_cumulative ON {s}.checkpoints (thread_key, to_seq, seq) "
            "WHERE summary_kind = 'cumulative_v1'",
            """CREATE TABLE {s}.marks (
                thread_key bigint NOT NULL,
                seq        bigint NOT NULL,
                type       text COLLATE "C" NOT NULL,
                kind       text COLLATE "C" NOT NULL,
                key        text COLLATE "C" NOT NULL,
                spans      text NOT NULL,
                PRIMARY KEY (thread_key, seq)
            )""",
            "CREATE INDEX marks_kind ON {s}.marks (thread_key, kind, seq) WHERE type = 'record'",
            "CREATE INDEX marks_key ON {s}.marks (thread_key, kind, key, seq) "
            "WHERE type = 'record'",
            "CREATE INDEX marks_retractions ON {s}.marks (thread_key, seq) "
            "WHERE type = 'retraction'",
        ),
    ),
    Migration(
        3,
        # Only adds: older code does not read tombstones (it would let a deleted thread's id
        # be written again, which `verify` then reports).
        1,
        (
            """CREATE TABLE {s}.tombstones (
                tombstone_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                thread_id    text COLLATE "C" NOT NULL,
                head_seq     bigint NOT NULL,
                head_digest  text NOT NULL,
                frames       bigint NOT NULL,
                bytes        bigint NOT NULL,
                reason       text NOT NULL,
                time_ms      bigint NOT NULL
            )""",
            "CREATE INDEX tombstones_thread ON {s}.tombstones (thread_id, tombstone_id)",
        ),
    ),
    Migration(
        4,
        # Only adds: older code appends without touching the catalog; this code finds those
        # rows behind (their seq is not the head's) and catches them up from the frames.
        1,
        (
            # One row per thread: what the store-wide listings show of it (the file catalog's
            # row, :mod:`continuity.store.catalog`), and seq, the last frame it covers. Strings
            # as UTF-8 bytea: a title may hold a NUL, which text refuses.
            """CREATE TABLE {s}.catalog (
                thread_key       bigint PRIMARY KEY,
                seq              bigint NOT NULL,
                log_bytes        bigint NOT NULL,
                head_digest      bytea NOT NULL,
                last_active_ms   bigint NOT NULL,
                first_ms         bigint NOT NULL,
                last_message_ms  bigint,
                created          boolean NOT NULL,
                source           bytea NOT NULL,
                title            bytea,
                parent_thread_id bytea,
                project          bytea NOT NULL,
                git_branch       bytea NOT NULL,
                messages         bigint NOT NULL,
                checkpoints      bigint NOT NULL,
                compactions      bigint NOT NULL,
                redactions       bigint NOT NULL
            )""",
        ),
    ),
    Migration(
        REKEY_VERSION,
        # Older code cannot create a thread any more (the key has no default) nor write a
        # tombstone (its key is NOT NULL): refused by version rather than failing mid-append.
        REKEY_VERSION,
        (
            # thread_key from the client (keys.py), in every per-thread table's unique keys, so
            # the tables can be distributed by it; the id is checked on read instead of being
            # unique on its own (a unique index without the key cannot be distributed).
            "ALTER TABLE {s}.threads ALTER COLUMN thread_key DROP IDENTITY IF EXISTS",
            "ALTER TABLE {s}.threads DROP CONSTRAINT IF EXISTS threads_thread_id_key",
            "ALTER TABLE {s}.tombstones ADD COLUMN thread_key bigint",
            _rekey,
            "ALTER TABLE {s}.tombstones ALTER COLUMN thread_key SET NOT NULL",
            "ALTER TABLE {s}.tombstones DROP CONSTRAINT tombstones_pkey, "
            "ADD PRIMARY KEY (thread_key, tombstone_id)",
            "DROP INDEX {s}.tombstones_thread",
            "CREATE INDEX tombstones_thread ON {s}.tombstones (thread_key, thread_id)",
        ),
    ),
)
DERIVED_TABLES: Final = ("derived_threads", "messages", "checkpoints", "marks", "catalog")
"""The tables derived from ``frames``: a thread's rows there can be dropped and derived again."""
SEARCH_TABLE_NAMES: Final = ("search_threads", "search_docs", "search_postings", "search_runs")
"""The search index's tables (made by :mod:`.search` when a search first needs them; the same
names as its ``SEARCH_TABLES``, here so the store need not import numpy to delete a thread)."""
SCHEMA_VERSION: Final = MIGRATIONS[-1].version
"""The newest schema version this code knows."""


def check_schema_name(schema: str) -> str:
    """``schema`` if it is a plain lower-case SQL identifier (it is put into SQL unquoted)."""
    from continuity.paths import valid_schema_name

    if not isinstance(schema, str) or not valid_schema_name(schema):
        raise ValueError(
            f"invalid schema name {schema!r}: use lower-case letters, digits and _, "
            "starting with a letter or _, at most 63 characters"
        )
    return schema


def advisory_key(*parts: str) -> int:
    """A signed 64-bit advisory lock key for ``parts`` (blake3: collisions do not happen)."""
    digest = blake3.blake3("\0".join(("continuity", *parts)).encode()).digest(8)
    return int.from_bytes(digest, "big", signed=True)


def read_version(conn: psycopg.Connection[TupleRow], schema: str) -> tuple[int, int] | None:
    """(schema_version, min_code_version) of the store in ``schema``; None if there is none."""
    try:
        rows = conn.execute(
            f"SELECT key, value FROM {schema}.meta "
            "WHERE key IN ('schema_version', 'min_code_version')"
        ).fetchall()
    except (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName):
        if not conn.autocommit:
            raise
        return None
    found = {str(k): int(str(v)) for k, v in rows}
    if "schema_version" not in found:
        return None
    version = found["schema_version"]
    return version, found.get("min_code_version", version)


def _refuse_newer(found: tuple[int, int], schema: str, location: str) -> None:
    version, needed = found
    if needed > SCHEMA_VERSION:
        raise SchemaTooNew(
            f"the store in schema {schema!r} of {location} has schema version {version}, "
            f"which needs a continuity that knows version {needed}; this one knows up to "
            f"{SCHEMA_VERSION}: upgrade continuity",
            found=version,
            needed=needed,
            known=SCHEMA_VERSION,
        )


def ensure_schema(
    conn: psycopg.Connection[TupleRow],
    schema: str,
    *,
    create: bool,
    location: str,
    now_ms: int,
) -> int:
    """Bring the store in ``schema`` to :data:`SCHEMA_VERSION` (creating it when ``create``)
    and return its version; :class:`StoreNotFound` when there is none and ``create`` is false,
    :class:`SchemaTooNew` when it was written by newer code this one cannot stand in for.
    ``conn`` is in autocommit mode. The common case, a current store, is one query."""
    found = read_version(conn, schema)
    if found is not None:
        _refuse_newer(found, schema, location)
        if found[0] >= SCHEMA_VERSION:
            return found[0]
    elif not create:
        raise StoreNotFound(
            f"no continuity store in schema {schema!r} of {location} "
            "(create one with `continuity init`)"
        )
    with conn.transaction():
        # Every initialiser of this schema waits here for the one before it to commit.
        conn.execute("SELECT pg_advisory_xact_lock(%s)", [advisory_key("schema", schema)])
        _make_schema(conn, schema, location)
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {schema}.meta (key text PRIMARY KEY, value text NOT NULL)"
        )
        found = read_version(conn, schema)
        if found is None:
            _refuse_foreign_tables(conn, schema, location)
            found = (0, 0)
        _refuse_newer(found, schema, location)
        version, needed = found
        for step in MIGRATIONS:
            if step.version <= version:
                continue
            for statement in step.statements:
                if callable(statement):
                    statement(conn, schema)
                else:
                    conn.execute(statement.format(s=schema))
            version, needed = step.version, max(needed, step.min_code_version)
        conn.execute(
            f"INSERT INTO {schema}.meta (key, value) VALUES "
            "('format', %s), ('schema_version', %s), ('min_code_version', %s), "
            "('updated_ms', %s) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [FORMAT, str(version), str(needed), str(now_ms)],
        )
    return version


def _make_schema(conn: psycopg.Connection[TupleRow], schema: str, location: str) -> None:
    """Make ``schema`` unless it is there; either way make sure the role may create the
    store's tables in it. A schema the DBA made for the role needs no privilege on the database
    (``CREATE SCHEMA IF NOT EXISTS`` would: PostgreSQL checks that before it looks)."""
    row = conn.execute(
        "SELECT current_user, current_database(), "
        "(SELECT has_schema_privilege(oid, 'CREATE') FROM pg_namespace WHERE nspname = %s), "
        "has_database_privilege(current_database(), 'CREATE')",
        [schema],
    ).fetchone()
    assert row is not None
    user, database, on_schema, on_database = row
    if on_schema is None:  # no such schema
        if not on_database:
            raise StoreRefused(
                f"schema {schema!r} does not exist on {location} and role {user!r} may not "
                f"make it (it lacks CREATE on database {database!r}): have the DBA run "
                f"`CREATE SCHEMA {schema} AUTHORIZATION {user}`, or name one with --schema"
            )
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
    elif not on_schema:
        raise StoreRefused(
            f"role {user!r} lacks CREATE on schema {schema!r} of {location}, so it cannot "
            f"make the store's tables there: `GRANT CREATE ON SCHEMA {schema} TO {user}`, "
            "or have the schema's owner run `continuity init`"
        )


def _refuse_foreign_tables(conn: psycopg.Connection[TupleRow], schema: str, location: str) -> None:
    """A schema holding tables of another program (one named like ours) is not ours to fill."""
    rows = conn.execute(
        "SELECT table_name FROM information_schema.tables "
        "WHERE table_schema = %s AND table_name <> 'meta' ORDER BY table_name",
        [schema],
    ).fetchall()
    if rows:
        names = ", ".join(str(r[0]) for r in rows[:5])
        raise StoreNotFound(
            f"schema {schema!r} of {location} holds tables that are not a continuity store "
            f"({names}); choose another schema"
        )
