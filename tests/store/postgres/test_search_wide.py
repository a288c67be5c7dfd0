"""The store-wide search index on PostgreSQL (ADR 0041): on many generated Claude Code threads
(``tools/bench/gen_threads``: 1,000 by default, ``CONTINUITY_TEST_SEARCH_THREADS=10000`` for the
issue's store) ``continuity search`` prints the same bytes as on the JSONL store — text and
``--json``, store-wide, ``--project``, ``--agent`` — and the MCP search tool's filters reach the
same hits; a role that may only SELECT answers from the index as it is, says how far it lags and
writes nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest

from continuity.maintenance.migrate import migrate_store
from continuity.retrieval.search import search
from continuity.store.jsonl import Store
from continuity.store.postgres import PostgresStore
from tests.support.pg import TEST_APP

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
from tools.bench.gen_threads import write_threads  # noqa: E402

THREADS = int(os.environ.get("CONTINUITY_TEST_SEARCH_THREADS", "1000"))
QUERIES = [
    "error timeout",
    "pytest ImportError",
    "src/app/api/handler.py",
    "cursor manifest retry",
    "zzzz-not-there",
]
pytestmark = [pytest.mark.postgres, pytest.mark.slow]


@pytest.fixture(scope="module")
def pair(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Store, Any]]:
    """The same generated threads in a JSONL store and a PostgreSQL one (a database of its
    own, in the ``continuity`` schema the command line opens)."""
    import psycopg

    root = tmp_path_factory.mktemp("wide")
    js = Store(root / "jsonl", create=True, durable=False)
    write_threads(js, THREADS, seed=7)
    name = "search_wide"
    with psycopg.connect(pg_url, autocommit=True, application_name=TEST_APP) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    parts = urlsplit(pg_url)
    pg = PostgresStore(
        urlunsplit(parts._replace(path=f"/{name}")), schema="continuity", create=True, durable=False
    )
    try:
        migrate_store(js, pg)
        yield js, pg
    finally:
        pg.close()
        with psycopg.connect(pg_url, autocommit=True, application_name=TEST_APP) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _cli(store: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTINUITY_")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "continuity", "--store", store, "search", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )


def _with_params(url: str, **params: str) -> str:
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    query.update(params)
    return urlunsplit(parts._replace(query=urlencode(query)))


def _projects(js: Store) -> list[str]:
    from continuity import frames as fr

    found: dict[str, int] = {}
    for tid in js.threads():
        first = next(iter(js.thread(tid).read(to_seq=0)), None)
        if isinstance(first, fr.ThreadCreated) and isinstance(first.meta.get("project"), str):
            project = first.meta["project"]
            found[project] = found.get(project, 0) + 1
    return sorted(found, key=lambda p: (-found[p], p))


def test_search_prints_the_same_bytes_as_jsonl(pair: tuple[Store, Any]) -> None:
    js, pg = pair
    project = _projects(js)[1]
    for store in (js, pg):  # both indexes built first: a long build reports progress on stderr
        search(store, QUERIES[0], k=1)
    for query in QUERIES:
        for extra in (
            [],
            ["--json"],
            ["--project", project, "--k", "7"],
            ["--agent", "claude-code"],
            ["--agent", "codex"],
        ):
            want = _cli(str(js.root), query, *extra)
            got = _cli(pg.location, query, *extra)
            assert want.returncode == 0, want.stderr
            assert got.returncode == 0, got.stderr
            assert got.stdout == want.stdout, (query, extra)
            assert got.stderr == want.stderr == ""


def test_the_api_and_the_mcp_filters_equal_jsonl(pair: tuple[Store, Any]) -> None:
    js, pg = pair
    projects = _projects(js)
    for query in QUERIES[:4]:
        for k in (1, 10, 40):
            assert search(pg, query, k=k) == search(js, query, k=k)
        for project in projects[:3]:
            assert search(pg, query, k=9, project=project) == search(
                js, query, k=9, project=project
            )
            # the MCP tool's project scope with an agent
            assert search(pg, query, k=5, project=project, agent="claude-code") == search(
                js, query, k=5, project=project, agent="claude-code"
            )
        assert search(pg, query, k=6, agent="codex") == search(js, query, k=6, agent="codex")


def test_a_select_only_role_answers_from_the_index_as_it_is(
    pair: tuple[Store, Any], pg_url: str
) -> None:
    """A real role with SELECT alone: it searches the current index (same hits), then, after
    an append it may not index, answers from the rows as they are, says on stderr (CLI) and to
    ``on_damage`` (API, the MCP tool's notes) how far they lag, and writes nothing."""
    import psycopg

    js, pg = pair
    search(pg, "error", k=1)  # the index current, made by the owner
    role = "search_reader"
    with psycopg.connect(pg.location, autocommit=True, application_name=TEST_APP) as conn:
        conn.execute(f"DROP ROLE IF EXISTS {role}")
        conn.execute(f"CREATE ROLE {role} LOGIN")
        conn.execute(f"GRANT USAGE ON SCHEMA {pg.schema} TO {role}")
        conn.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA {pg.schema} TO {role}")
    try:
        reader_url = _with_params(pg.location, user=role)
        reader = PostgresStore(reader_url, schema=pg.schema)
        try:
            assert not reader.search_backend().writable()
            for query in QUERIES[:3]:
                assert search(reader, query, k=8) == search(js, query, k=8)
            # a new thread the reader cannot index
            from continuity import frames as fr

            tid = "cc-not-indexed-yet"
            js.thread(tid).append(
                [
                    fr.ThreadCreated(thread_id=tid, meta={"project": "/p"}),
                    fr.message("user", "quasar nebula error timeout"),
                ]
            )
            pg.thread(tid).append_sealed([line for _seq, line in js.thread(tid).read_lines()])
            before = _search_rows(pg.location, pg.schema)
            told: list[str] = []
            hits = search(reader, "quasar nebula", k=5, on_damage=told.append)
            assert hits == []  # the index as it is: the new thread is not in it
            assert len(told) == 1 and "1 threads (2 frames) are not indexed" in told[0]
            done = _cli(reader_url, "quasar nebula")
            assert done.returncode == 0, done.stderr
            assert "not indexed yet" in done.stderr and "read-only" in done.stderr
            assert _search_rows(pg.location, pg.schema) == before  # it wrote nothing
            # the owner catches up: the same hits as JSONL again
            assert search(pg, "quasar nebula", k=5) == search(js, "quasar nebula", k=5)
            told.clear()
            assert search(reader, "quasar nebula", k=5, on_damage=told.append) == search(
                js, "quasar nebula", k=5
            )
            assert told == []
        finally:
            reader.close()
    finally:
        with psycopg.connect(pg.location, autocommit=True, application_name=TEST_APP) as conn:
            conn.execute(f"DROP OWNED BY {role}")
            conn.execute(f"DROP ROLE {role}")


def _search_rows(url: str, schema: str) -> list[Any]:
    import psycopg

    with psycopg.connect(url, application_name=TEST_APP) as conn:
        return [
            conn.execute(f"SELECT count(*), sum(last_seq) FROM {schema}.search_threads").fetchone(),
            conn.execute(f"SELECT count(*) FROM {schema}.search_postings").fetchone(),
            conn.execute(f"SELECT count(*) FROM {schema}.search_docs").fetchone(),
        ]
