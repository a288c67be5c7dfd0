"""The PostgreSQL store as Citus would need it (issue 30 item 6): the thread key computed on the
client, the rules its SQL keeps (checked on what the server logged), a forced key collision,
and migration 5 re-keying a store made at schema version 3.

The whole PostgreSQL suite runs under the same check with ``CONTINUITY_TEST_PG_DISTRIBUTED=1``
(:mod:`tests.support.pg`); here a representative workload runs it in the normal suite.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from continuity import frames as fr
from continuity.errors import ThreadDeleted, ThreadKeyTaken, ThreadNotFound
from continuity.retrieval.search import search
from continuity.store.postgres import PostgresStore
from continuity.store.postgres.keys import thread_key
from continuity.store.postgres.schema import (
    MIGRATIONS,
    PER_THREAD_TABLES,
    REKEY_VERSION,
    SCHEMA_VERSION,
)
from continuity.store.postgres.search import SEARCH_TABLES
from continuity.testing.support import msg
from tests.support.distributed import (
    check_log,
    problems_of,
    read_log,
    statements,
    unkeyed_unique_indexes,
)
from tests.support.pg import PgStores, schema_for, server_log

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
from tools.gen_thread import write_thread  # noqa: E402

QUERIES = ("error timeout", "config", "retry the request", "database migration")


# -- the key --


def test_the_thread_key_is_63_bits_of_blake3_of_the_id() -> None:
    import blake3

    keys = {thread_key(f"t{i}") for i in range(2000)}
    assert len(keys) == 2000 and all(0 <= k < 2**63 for k in keys)
    digest = blake3.blake3(b"continuity thread key\0" + "é/x".encode()).digest(8)
    assert thread_key("é/x") == int.from_bytes(digest, "big") >> 1  # stable across releases


# -- the checker itself: each rule fails on the SQL it is there to catch --

BROKEN = {
    # the version-3 statements this issue replaced
    "SELECT t.thread_key, t.head_seq FROM s.threads t LEFT JOIN s.derived_threads d "
    "ON d.thread_key = t.thread_key WHERE t.thread_id = $1 FOR UPDATE OF t": "row lock over a join",
    "WITH d AS (INSERT INTO s.derived_threads (thread_key, seq) VALUES ($1, $2)) "
    "UPDATE s.threads SET head_seq = $3 WHERE thread_key = $4": "data-modifying CTE",
    "SELECT head_seq FROM s.threads WHERE thread_id = $1": "1 per-thread table(s)",
    "SELECT pg_try_advisory_lock_shared($1)": "session-level advisory lock",
    "SELECT pg_advisory_lock($1)": "session-level advisory lock",
    "SELECT f.seq FROM s.frames f JOIN s.threads t USING (thread_key) WHERE t.thread_key = $1": (
        "2 per-thread table(s)"
    ),
    "INSERT INTO s.tombstones (thread_id, reason) VALUES ($1, $2)": "1 per-thread table(s)",
}
SOUND = (
    "SELECT head_seq FROM s.threads WHERE thread_key = $1 AND thread_id = $2",
    "INSERT INTO s.threads (thread_key, thread_id) VALUES ($1, $2) ON CONFLICT (thread_key) "
    "DO NOTHING",
    "COPY s.frames (thread_key, seq, line) FROM STDIN (FORMAT BINARY)",
    "SELECT pg_advisory_xact_lock($1)",
    "SELECT thread_id FROM s.threads WHERE head_seq >= 0",  # a listed store-wide read
    "CREATE INDEX x ON s.frames (seq)",
    "SELECT value FROM s.meta WHERE key = 'search_version'",
)


def test_the_checker_names_each_broken_rule() -> None:
    for sql, rule in BROKEN.items():
        found = problems_of(sql)
        assert found and any(rule in p for p in found), (sql, found)
    for sql in SOUND:
        assert problems_of(sql) == [], sql


def test_the_checker_reads_a_server_log() -> None:
    lines = [
        "2026-01-01 00:00:00.000 UTC [11] : LOG:  execute <unnamed>: SELECT head_seq",
        "\tFROM s.threads WHERE thread_id = $1",
        "2026-01-01 00:00:00.000 UTC [11] : DETAIL:  parameters: $1 = 't'",
        "2026-01-01 00:00:00.001 UTC [12] continuity-test: LOG:  statement: SELECT 1 FROM s.frames",
        "2026-01-01 00:00:00.002 UTC [13] LOG:  statement: SELECT pg_advisory_lock(1)",
    ]
    assert list(statements(lines)) == [
        ("", "SELECT head_seq FROM s.threads WHERE thread_id = $1"),
        ("continuity-test", "SELECT 1 FROM s.frames"),
        ("", "SELECT pg_advisory_lock(1)"),
    ]
    found = check_log(lines)  # the tests' own session is not checked
    assert len(found) == 2 and "threads" in found[0] and "advisory" in found[1]


# -- a representative workload, checked --


def _logged(url: str) -> str:
    """``url`` with every statement of its sessions logged (a superuser's setting)."""
    return f"{url}{'&' if '?' in url else '?'}options={quote('-c log_statement=all')}"


def _workload(store: PostgresStore) -> None:
    write_thread(store, "gen", 600, seed=5, checkpoint_every=100)
    t = store.thread("t")
    t.append([msg(i) for i in range(1, 6)])
    t.append([fr.RecordAppended(kind="test.fact", key="k", data={"v": 1}), msg(6, "assistant")])
    assert [s for s, _ in t.read_lines(from_seq=2, to_seq=4)] == [2, 3, 4]
    assert next(t.read_lines_backwards())[0] == t.head().seq  # type: ignore[union-attr]
    assert len(list(t.stored_lines())) == t.head().seq + 1  # type: ignore[union-attr]
    assert list(t.lines_holding(b"message 3"))
    assert t.log_bytes() > 0
    d = store.thread("gen").derived()
    state = d.state()
    assert d.messages(0, 5) and d.checkpoints(state.head_seq) is not None
    d.retractions(state.head_seq)
    d.record_seqs("test.fact", None, state.head_seq, 5)
    d.record_kinds(state.head_seq)
    d.count_upto(state.head_seq)
    assert d.rebuild() == state.head_seq + 1  # the catch-up under the head row's lock
    assert search(store, "error timeout", k=3) is not None
    store.delete_thread("t")
    with pytest.raises(ThreadDeleted):
        store.thread("t").append([msg(9)])
    assert [x.thread_id for x in store.tombstones()] == ["t"]
    assert store.threads() == ["gen"]
    assert store.orphaned_rows() == []
    store.referenced(["x" * 64])


@pytest.mark.slow
def test_a_representative_workload_keeps_the_distributed_rules(
    pg_url: str, pg_stores: PgStores, tmp_path: Path
) -> None:
    log = server_log(pg_url)
    if log is None:
        pytest.skip("the server's log cannot be read here (set CONTINUITY_TEST_PG_LOG)")
    start = log.stat().st_size
    logged = PgStores(_logged(pg_url))
    try:
        store = logged.open(tmp_path)
        pg_stores.schemas.add(store.schema)
        _workload(store)
    finally:
        logged.close()
    lines = read_log(log, start)
    sent = [sql for _app, sql in statements(lines) if store.schema in sql]
    # the log holds this test's statements: the check below looked at something
    assert any("FOR UPDATE" in sql and ".threads WHERE thread_key" in sql for sql in sent)
    assert any(sql.startswith(f"INSERT INTO {store.schema}.frames") for sql in sent)
    assert any(sql.startswith("WITH s AS (SELECT thread_key FROM") for sql in sent)  # the guard
    assert check_log(lines) == []
    with pg_stores.connect() as conn:
        assert [p for p in unkeyed_unique_indexes(conn) if store.schema in p] == []


# -- a collision, forced --


def test_a_thread_whose_key_is_taken_is_refused_and_reads_nothing(
    pg_stores: PgStores, tmp_path: Path
) -> None:
    """Two ids with one key, faked by hand: thread "a" moved to the key of "b" in every table,
    as if blake3 gave them the same. "b" is refused, whole, naming "a"; its reads see nothing
    of "a"; "a" itself is untouched."""
    store = pg_stores.open(tmp_path)
    s = store.schema
    store.thread("a").append([msg(1), msg(2)])
    a_lines = list(store.thread("a").read_lines())
    a, b = thread_key("a"), thread_key("b")
    for table in ("threads", "frames", "derived_threads", "messages"):
        pg_stores.sql(f"UPDATE {s}.{table} SET thread_key = %s WHERE thread_key = %s", [b, a])
    frames_before = pg_stores.sql(f"SELECT count(*) FROM {s}.frames")
    with pytest.raises(ThreadKeyTaken) as err:
        store.thread("b").append([msg(3)])
    assert (err.value.thread_id, err.value.key, err.value.holder) == ("b", b, "a")
    assert "'b'" in str(err.value) and "'a'" in str(err.value)
    assert pg_stores.sql(f"SELECT count(*) FROM {s}.frames") == frames_before
    tb = store.thread("b")
    assert tb.head() is None and list(tb.read_lines()) == [] and tb.log_bytes() == 0
    assert list(tb.stored_lines()) == [] and list(tb.read_lines_backwards()) == []
    assert tb.derived().state().head_seq == -1
    with pytest.raises(ThreadNotFound):
        store.delete_thread("b")
    # the holder is the thread stored first; moved back, it reads as it was
    for table in ("threads", "frames", "derived_threads", "messages"):
        pg_stores.sql(f"UPDATE {s}.{table} SET thread_key = %s WHERE thread_key = %s", [a, b])
    assert list(store.thread("a").read_lines()) == a_lines


# -- migration 5 --


def _make_v3(pg_stores: PgStores, schema: str) -> None:
    """An empty store at schema version 3, made by the version-3 migrations."""
    statements = [
        f"CREATE SCHEMA {schema}",
        f"CREATE TABLE {schema}.meta (key text PRIMARY KEY, value text NOT NULL)",
        *(sql.format(s=schema) for step in MIGRATIONS[:3] for sql in step.statements),  # type: ignore[union-attr]
        f"INSERT INTO {schema}.meta VALUES ('format', 'continuity-store'), "
        "('schema_version', '3'), ('min_code_version', '1'), ('updated_ms', '0')",
    ]
    assert [m.version for m in MIGRATIONS[:3]] == [1, 2, 3]
    assert all(isinstance(sql, str) for m in MIGRATIONS[:3] for sql in m.statements)
    pg_stores.sql(";".join(statements))


def _copy_as_v3(pg_stores: PgStores, ref: str, old: str) -> None:
    """The rows of store ``ref`` (current code) into the version-3 store ``old``, with the
    keys version 3 gave: the server's identity counter, in id order."""
    rows = pg_stores.sql
    rows(
        f"INSERT INTO {old}.threads (thread_id, head_seq, head_digest, bytes, created_ms, "
        f"updated_ms) SELECT thread_id, head_seq, head_digest, bytes, created_ms, updated_ms "
        f"FROM {ref}.threads ORDER BY thread_id"
    )
    keyed = (
        f"JOIN {ref}.threads r ON r.thread_key = x.thread_key "
        f"JOIN {old}.threads o ON o.thread_id = r.thread_id"
    )
    for table in ("frames", "derived_threads", "messages", "checkpoints", "marks"):
        cols = [
            str(c[0])
            for c in rows(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = %s "
                "AND table_name = %s AND column_name <> 'thread_key' ORDER BY ordinal_position",
                [ref, table],
            )
        ]
        rows(
            f"INSERT INTO {old}.{table} (thread_key, {', '.join(cols)}) SELECT o.thread_key, "
            f"{', '.join('x.' + c for c in cols)} FROM {ref}.{table} x {keyed}"
        )
    for table in SEARCH_TABLES:  # the search index, made by a search before
        rows(f"CREATE TABLE {old}.{table} (LIKE {ref}.{table} INCLUDING ALL)")
        rows(
            f"INSERT INTO {old}.{table} SELECT o.thread_key, "
            + ", ".join(
                "x." + str(c[0])
                for c in rows(
                    "SELECT column_name FROM information_schema.columns WHERE table_schema = %s "
                    "AND table_name = %s AND column_name <> 'thread_key' "
                    "ORDER BY ordinal_position",
                    [ref, table],
                )
            )
            + f" FROM {ref}.{table} x {keyed}"
        )
    rows(f"INSERT INTO {old}.meta SELECT key, value FROM {ref}.meta WHERE key = 'search_version'")
    rows(
        f"INSERT INTO {old}.tombstones (thread_id, head_seq, head_digest, frames, bytes, "
        "reason, time_ms) SELECT thread_id, head_seq, head_digest, frames, bytes, reason, "
        f"time_ms FROM {ref}.tombstones ORDER BY tombstone_id"
    )
    rows(f"INSERT INTO {old}.artifacts SELECT * FROM {ref}.artifacts")


def _answers(store: PostgresStore) -> dict[str, Any]:
    out: dict[str, Any] = {"threads": store.threads(), "tombstones": store.tombstones()}
    for tid in store.threads():
        t = store.thread(tid)
        out[f"lines {tid}"] = list(t.read_lines())
        out[f"derived {tid}"] = t.derived().dump()
    for q in QUERIES:
        out[f"search {q}"] = [(h.thread_id, h.seq, h.score) for h in search(store, q, k=7)]
    return out


@pytest.mark.slow
def test_migration_5_rekeys_a_version_3_store_with_the_same_answers(
    pg_stores: PgStores, tmp_path: Path
) -> None:
    ref = pg_stores.open(tmp_path / "ref")
    write_thread(ref, "gen", 1_500, seed=3, checkpoint_every=200)
    for i, tid in enumerate(("a", "b:c", "gone")):
        ref.thread(tid).append([msg(f"{tid}{j}", text=f"error timeout {i} {j}") for j in range(30)])
    ref.thread("a").append([fr.RecordAppended(kind="test.fact", key="k", data={"v": 1})])
    ref.delete_thread("gone")
    want = _answers(ref)  # the search index made here is copied with the rest
    old = schema_for(tmp_path / "old")
    pg_stores.schemas.add(old)
    _make_v3(pg_stores, old)
    _copy_as_v3(pg_stores, ref.schema, old)
    keys = dict(pg_stores.sql(f"SELECT thread_id, thread_key FROM {old}.threads"))
    assert sorted(keys.values()) == [1, 2, 3]  # identity keys, as version 3 gave them

    store = pg_stores.open(tmp_path / "old", schema=old, create=False)  # migrates
    meta = dict(pg_stores.sql(f"SELECT key, value FROM {old}.meta"))
    assert meta["schema_version"] == str(SCHEMA_VERSION)
    assert meta["min_code_version"] == str(REKEY_VERSION)
    assert dict(pg_stores.sql(f"SELECT thread_id, thread_key FROM {old}.threads")) == {
        tid: thread_key(tid) for tid in keys
    }
    before = store.search_backend().frames_read
    assert _answers(store) == want
    assert store.search_backend().frames_read == before  # the index was re-keyed, not rebuilt
    assert store.orphaned_rows() == []
    for tid in store.threads():
        assert store.thread(tid).derived().problems() == []
    for table in PER_THREAD_TABLES:
        if table != "threads":
            assert pg_stores.sql(
                f"SELECT count(*) FROM {old}.{table} x WHERE NOT EXISTS (SELECT 1 FROM "
                f"{old}.threads t WHERE t.thread_key = x.thread_key)"
            ) == [(1 if table == "tombstones" else 0,)], table
    with pg_stores.connect() as conn:
        assert [p for p in unkeyed_unique_indexes(conn) if f"{old}." in p] == []
    store.thread("a").append([msg("after")])  # a migrated store takes appends
    with pytest.raises(ThreadDeleted):
        store.thread("gone").append([msg("again")])
