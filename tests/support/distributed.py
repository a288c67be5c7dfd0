"""The rules a store's SQL keeps so its tables can be distributed by thread (Citus; ADR 0041),
checked on the statements a PostgreSQL server logged.

Citus itself need not run: what it needs of the SQL is checked on what the store sent.

- every statement on a per-thread table names the thread: ``thread_key = $n`` once for each
  such table it reads (an ``INSERT``/``COPY`` whose columns hold ``thread_key`` carries it in
  its rows), except the store-wide reads in :data:`FAN_OUT`, each with its reason;
- every unique index (primary keys too) of a per-thread table holds ``thread_key``;
- no session-level advisory lock (``pg_advisory_lock``, ``pg_try_advisory_lock``: they hold on
  the node of one session); transaction-level ones are fine;
- no data-modifying CTE touching two tables; no ``FOR UPDATE``/``FOR SHARE`` over a join.

The statements are taken from the server's log (``log_statement = all``). Sessions whose
``application_name`` starts with :data:`TEST_APP` are the tests' own (hand edits, lock holders)
and are not checked. The whole PostgreSQL suite runs this way with
``CONTINUITY_TEST_PG_DISTRIBUTED=1`` (see :func:`tests.support.pg.serve`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Final

from continuity.store.postgres.schema import PER_THREAD_TABLES
from tests.support.pg import TEST_APP

DISTRIBUTED_ENV: Final = "CONTINUITY_TEST_PG_DISTRIBUTED"
LOG_ENV: Final = "CONTINUITY_TEST_PG_LOG"
"""The server log's path, for an external server (``$CONTINUITY_TEST_PG_URL``)."""
LOG_LINE_PREFIX: Final = "%m [%p] %a: "

FAN_OUT: Final[tuple[tuple[str, str], ...]] = (
    (
        r"^SELECT thread_id FROM \w+\.threads WHERE head_seq >= 0$",
        "store.threads(): the list of every thread is a read of every node",
    ),
    (
        r"^SELECT thread_id, head_seq, head_digest, frames, bytes, reason, time_ms "
        r"FROM \w+\.tombstones ORDER BY tombstone_id$",
        "store.tombstones(): every deletion, store-wide (verify, prune)",
    ),
    (
        r"^SELECT i FROM unnest\(\$1::text\[\]\) i WHERE EXISTS \(SELECT 1 FROM \w+\.frames f ",
        "store.referenced(): which artifacts any thread still names (prune's sweep)",
    ),
    (
        r"^SELECT x\.thread_key, count\(\*\) FROM \w+\.\w+ x WHERE NOT EXISTS "
        r"\(SELECT 1 FROM \w+\.threads t WHERE t\.thread_key = x\.thread_key\)",
        "store.orphaned_rows(): verify's sweep of every table (a co-located join on the key)",
    ),
    (
        r"^SELECT thread_key FROM \w+\.search_threads$",
        "search rebuild of the whole store: which threads have an index",
    ),
    (
        r"^SELECT thread_key, thread_id FROM \w+\.threads ORDER BY thread_id$",
        "search rebuild of the whole store: every thread's id",
    ),
    (
        r"^SELECT t\.thread_id, (?:t\.head_seq, c\.seq|c\.seq, t\.head_seq|t\.head_seq, c\.)"
        r".* FROM \w+\.threads t (?:LEFT )?JOIN \w+\.catalog c ON c\.thread_key = t\.thread_key",
        "the catalog's listing (threads, sessions, stats, the viewer, the pointer): one row of "
        "every thread, a co-located join on the key",
    ),
    (
        r"^SELECT thread_id FROM \w+\.threads WHERE head_seq >= 0 ORDER BY thread_id$",
        "the catalog's rebuild of the whole store: every thread's id",
    ),
    (
        r"^SELECT c\.thread_key FROM \w+\.catalog c WHERE NOT EXISTS ",
        "the catalog's rebuild and verify: rows whose thread is gone (a co-located join)",
    ),
    (
        r"^SELECT coalesce\(t\.thread_key, w\.thread_key\), t\.thread_id, .* FROM \w+\.threads t "
        r"FULL JOIN \w+\.search_threads w ON w\.thread_key = t\.thread_key ",
        "search: which threads' index lags their head (one co-located join of every thread)",
    ),
    (
        r"^SELECT count\(\*\), coalesce\(sum\(docs\), 0\), coalesce\(sum\(total_length\), 0\) "
        r"FROM \w+\.search_threads ",
        "search: the scope's BM25 statistics, a sum over every thread's index row",
    ),
    (
        r"^WITH hit AS \(SELECT p\.thread_key, p\.first_doc, ARRAY\[.*FROM \w+\.search_postings p "
        r"WHERE p\.terms && ",
        "search: the store-wide query, one GIN scan of every shard's postings, co-located joins",
    ),
    (
        r"thread_key = ANY\(\$1\)|JOIN unnest\(\$1::bigint\[\], \$2::(?:bigint|int)\[\]"
        r"(?:, \$3::bigint\[\])?\) AS x\(k, (?:seq|lo|lo, hi)\) ON \w\.thread_key = x\.k"
        r"|USING unnest\(\$1::bigint\[\], \$2::int\[\]\) AS x\(k, lo\) WHERE r\.thread_key = x\.k",
        "search catch-up: a batch of up to 512 threads in one transaction, each row named by its "
        "key (multi-shard on Citus, pruned to the keys' shards where the planner can)",
    ),
    (
        r"^SELECT t\.thread_key, t\.thread_id, t\.head_seq, d\.seq, .* FROM \w+\.threads t "
        r"LEFT JOIN \w+\.derived_threads d ON d\.thread_key = t\.thread_key "
        r"WHERE t\.thread_key = ANY\(\$1\)"
        r"|^DECLARE \"?continuity_(?:frames|messages|checkpoints|marks)\"? .*"
        r"WHERE thread_key = ANY\(\$1\) ORDER BY thread_key",
        "verify's one pass (PostgresStore.read_many): the threads' head rows, then each table's "
        "rows of those keys in key order, a co-located join and one cursor a table",
    ),
    (
        r"^SELECT count\(\*\), coalesce\(sum\(head_seq \+ 1\), 0\) FROM \w+\.threads "
        r"WHERE head_seq >= 0$",
        "search on a read-only connection with no index yet: how much lags, a sum over every "
        "thread",
    ),
    (
        r"\brekey_(?:map|ids)\b|^SELECT (?:thread_key, thread_id FROM \w+\.threads|"
        r"DISTINCT thread_id FROM \w+\.tombstones)$|^UPDATE \w+\.\w+ SET thread_key = -1 - ",
        "migration 5 (schema.py _rekey): once per store, before its tables are distributed",
    ),
    (
        r"^SELECT \* FROM \w+\.search_(?:threads|docs|postings) ORDER BY thread_key",
        "tests/store/postgres/test_search.py _rows: the test's own dump of the index, through the "
        "store's pool",
    ),
)
_PREFIX: Final = re.compile(
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \S+ \[(?P<pid>\d+)\] (?:(?P<app>[^:\n]*): )?"
    r"(?P<level>[A-Z]+):  (?P<text>.*)$"
)
_STATEMENT: Final = re.compile(r"^(?:statement|execute [^:]*): (?P<sql>.*)$", re.S)
_TABLE: Final = re.compile(
    r"\b(?:FROM|JOIN|INTO|UPDATE|COPY)\s+\w+\.(" + "|".join(PER_THREAD_TABLES) + r")\b", re.I
)
_ANY_TABLE: Final = re.compile(r"\b(?:FROM|JOIN|INTO|UPDATE)\s+(\w+\.\w+)", re.I)
_KEYED: Final = re.compile(r"\bthread_key\s*=\s*\$\d+")
_CARRIES: Final = re.compile(r"^\s*(?:INSERT\s+INTO|COPY)\s+\w+\.(\w+)\s*\(([^)]*)\)", re.I)
_DDL: Final = re.compile(
    r"^\s*(?:CREATE|ALTER|DROP|COMMENT|TRUNCATE|LOCK|SET|RESET|SHOW|BEGIN|COMMIT|ROLLBACK|"
    r"SAVEPOINT|RELEASE|DISCARD|DEALLOCATE)\b",
    re.I,
)
_SESSION_LOCK: Final = re.compile(r"\bpg_(?:try_)?advisory_lock(?:_shared)?\s*\(", re.I)
_MODIFYING_CTE: Final = re.compile(
    r"^\s*WITH\b.*?\bAS\s*\(\s*(?:INSERT|UPDATE|DELETE)\b", re.I | re.S
)
_ROW_LOCK: Final = re.compile(r"\bFOR\s+(?:NO\s+KEY\s+)?(?:UPDATE|SHARE|KEY\s+SHARE)\b", re.I)
_JOIN: Final = re.compile(r"\bJOIN\b|\bFROM\s+\w+\.\w+(?:\s+\w+)?\s*,", re.I)


def statements(lines: Iterable[str]) -> Iterator[tuple[str, str]]:
    """(application name, SQL) of each statement in server log ``lines`` (continuation lines,
    which the server starts with a tab, joined back)."""
    record: list[str] = []
    app = ""
    for line in lines:
        m = _PREFIX.match(line.rstrip("\n"))
        if m is None:
            if record:
                record.append(line.rstrip("\n").removeprefix("\t"))
            continue
        if record:
            yield from _statement(app, record)
        app, record = m["app"] or "", []
        if m["level"] == "LOG":
            record = [m["text"]]
    if record:
        yield from _statement(app, record)


def _statement(app: str, record: list[str]) -> Iterator[tuple[str, str]]:
    m = _STATEMENT.match("\n".join(record))
    if m is not None:
        yield app, " ".join(m["sql"].split())


def _allowed(sql: str, rules: tuple[tuple[str, str], ...]) -> bool:
    return any(re.search(pattern, sql) for pattern, _reason in rules)


def problems_of(sql: str) -> list[str]:
    """What breaks the rules in one statement (empty: it would route to one node, or is a
    listed store-wide read)."""
    found: list[str] = []
    if _SESSION_LOCK.search(sql):
        found.append("a session-level advisory lock")
    if _DDL.match(sql):
        return found
    tables = _TABLE.findall(sql)
    if _MODIFYING_CTE.match(sql) and len(set(_ANY_TABLE.findall(sql))) > 1:
        found.append("a data-modifying CTE across two tables")
    if _ROW_LOCK.search(sql) and _JOIN.search(sql):
        found.append("a row lock over a join")
    if tables and not _allowed(sql, FAN_OUT):
        needed = len(tables)
        carried = _CARRIES.match(sql)
        if carried is not None and "thread_key" in carried[2]:
            needed -= 1
        if len(_KEYED.findall(sql)) < needed:
            found.append(
                f"{needed} per-thread table(s) ({', '.join(tables)}) but "
                f"{len(_KEYED.findall(sql))} `thread_key = $n`"
            )
    return found


def check_log(lines: Iterable[str]) -> list[str]:
    """Every statement of the log that breaks a rule, once each, with what it breaks."""
    seen: dict[str, list[str]] = {}
    for app, sql in statements(lines):
        if app.startswith(TEST_APP) or sql in seen:
            continue
        seen[sql] = problems_of(sql)
    return [f"{'; '.join(p)}: {sql}" for sql, p in seen.items() if p]


def read_log(path: Path, start: int = 0) -> list[str]:
    """The log's lines from byte ``start``."""
    with path.open("rb") as f:
        f.seek(start)
        return f.read().decode("utf-8", "replace").splitlines()


UNIQUE_INDEXES: Final = """
SELECT n.nspname, c.relname, i.relname
FROM pg_index x
JOIN pg_class c ON c.oid = x.indrelid
JOIN pg_class i ON i.oid = x.indexrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE x.indisunique AND c.relname = ANY(%s)
AND EXISTS (SELECT 1 FROM pg_class m WHERE m.relnamespace = n.oid AND m.relname = 'meta')
AND NOT EXISTS (
    SELECT 1 FROM pg_attribute a
    WHERE a.attrelid = c.oid AND a.attname = 'thread_key' AND a.attnum = ANY(x.indkey)
)
ORDER BY 1, 2, 3
"""


def unkeyed_unique_indexes(conn: Any) -> list[str]:
    """Unique indexes (primary keys too) of per-thread tables, in every schema holding a
    store, that do not hold ``thread_key``."""
    rows = conn.execute(UNIQUE_INDEXES, [list(PER_THREAD_TABLES)]).fetchall()
    return [f"unique index {r[2]} of {r[0]}.{r[1]} lacks thread_key" for r in rows]
