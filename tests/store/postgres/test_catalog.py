"""The PostgreSQL store's catalog table (issue 30): ``threads``, ``sessions``, ``stats``, the
viewer's threads page and the session-start pointer read every thread's row in one query, and
say, byte for byte, what they say of a JSONL store holding the same threads.

The stores are made by ``tools/bench/gen_threads.py`` (Claude-Code-like sessions and
sub-agents, checkpoints, redactions) plus a few odd threads, copied into PostgreSQL line for
line by ``migrate``. 1,000 threads by default; set ``CONTINUITY_TEST_CATALOG_10K=1`` for the
same comparison at 10,000 (loading them into PostgreSQL takes minutes on a 2-core machine)."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from continuity import frames as fr
from continuity.agents.base.sessions import previous_session
from continuity.caches.catalog import catalog_view, current_rows, rebuild_catalog
from continuity.cli.app import app
from continuity.maintenance.bulk import rebuild_store
from continuity.maintenance.migrate import migrate_store
from continuity.maintenance.verify import verify_store
from continuity.paths import describe_store
from continuity.store.base import BaseStore
from continuity.store.jsonl import Store
from continuity.store.postgres import PostgresStore
from continuity.viewer.app import create_app
from tests.support.pg import PgStores
from tools.bench.gen_threads import write_threads

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def msg(role: fr.Role, text: str, meta: dict[str, str] | None = None) -> fr.MessageAppended:
    return fr.MessageAppended(role=role, content=[fr.TextBlock(text=text)], meta=meta or {})


TEN_K_ENV = "CONTINUITY_TEST_CATALOG_10K"
PROJECT = "/home/dev/webapp"


def _odd_threads(store: BaseStore) -> None:
    """Threads the generator does not make: no ``thread_created``, a NUL and an emoji in a
    title, another agent's session, a redacted secret appended later, a continuity
    checkpoint, several appends to one thread."""
    store.thread("plain").append([msg("user", "no thread_created here")])
    store.thread("odd").append(
        fr.ThreadCreated(title="nul \x00 and \U0001f600", meta={"project": PROJECT})
    )
    store.thread("odd").append([msg("user", "one"), msg("assistant", "two")])
    store.thread("odd").append(msg("user", "x", meta={"redacted": "2"}))
    store.thread("codex-019a").append(
        fr.ThreadCreated(title="codex", meta={"source": "codex", "project": PROJECT})
    )
    store.thread("codex-019a").append(msg("user", "hello codex"))
    store.thread("codex-019a").append(msg("assistant", "hi"))


def _pg_copy(pg_stores: PgStores, src: BaseStore, where: Path) -> PostgresStore:
    dst = pg_stores.open(where)
    migrate_store(src, dst)
    return dst


@pytest.fixture(scope="module")
def jsonl_threads(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A JSONL store of 1,000 generated threads and the odd ones (made once, copied per test)."""
    root = tmp_path_factory.mktemp("catalog") / "store"
    with Store(root, create=True, durable=False) as store:
        write_threads(store, 1000, seed=30)
        _odd_threads(store)
    return root


def _runner_out(store: str, *args: str) -> str:
    result = CliRunner().invoke(app, ["--store", store, *args])
    assert result.exit_code == 0, result.output
    return result.stdout


_COMMANDS: tuple[tuple[str, ...], ...] = (
    ("threads",),
    ("threads", "--json"),
    ("sessions",),
    ("sessions", "--json"),
    ("sessions", "--agents"),
    ("sessions", "--agent", "codex", "--json"),
    ("sessions", "--project", PROJECT),
    ("stats",),
    ("stats", "--json"),
)


def _outputs(location: str) -> dict[tuple[str, ...], str]:
    """Every listing's output, the store's own description and cache size blanked (a folder
    store's caches have no counterpart on a server)."""
    shown = describe_store(location)
    found = {}
    for command in _COMMANDS:
        out = _runner_out(location, *command).replace(shown, "<store>")
        lines = [
            ln
            for ln in out.splitlines()
            if not ln.startswith("cache bytes") and '"cache_bytes"' not in ln
        ]
        if command == ("stats", "--json"):
            import json

            data = json.loads(out)
            data.pop("cache_bytes")
            lines = [json.dumps(data, sort_keys=True)]
        found[command] = "\n".join(lines)
    return found


def _viewer(store: BaseStore) -> dict[str, str]:
    client = TestClient(create_app(store, token=None))
    shown = describe_store(store.location) if store.location else ""
    pages = {}
    for path in ("/", "/api/threads", f"/?project={PROJECT}", "/?page=3", "/?agent=codex"):
        response = client.get(path)
        assert response.status_code == 200, response.text
        pages[path] = response.text.replace(shown, "<store>")
    return pages


def _pointers(store: BaseStore) -> dict[str, Any]:
    rows = catalog_view(store).rows
    projects = [*sorted({r.project for r in rows if r.project}), "/nowhere"]
    last = max((r for r in rows if r.thread_id.startswith("cc-")), key=lambda r: r.thread_id)
    return {p: previous_session(store, p, exclude=last.thread_id) for p in projects}


def _compare(jsonl: Store, pg: PostgresStore, pg_location: str) -> None:
    assert _outputs(str(jsonl.root)) == _outputs(pg_location)
    assert _viewer(jsonl) == _viewer(pg)
    assert _pointers(jsonl) == _pointers(pg)
    assert catalog_view(jsonl) == catalog_view(pg)


@pytest.fixture
def cli_db(pg_url: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh database for the CLI's store (its ``continuity`` schema), dropped after."""
    import psycopg

    from tests.store.postgres.test_cli import _with_database

    name = "cat_" + "".join(c if c.isalnum() else "_" for c in request.node.name)[-40:].lower()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield _with_database(pg_url, name)
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_listings_are_byte_for_byte_those_of_the_jsonl_store(
    jsonl_threads: Path, cli_db: str, tmp_path: Path
) -> None:
    shutil.copytree(jsonl_threads, tmp_path / "store")
    jsonl = Store(tmp_path / "store")
    with PostgresStore(cli_db, create=True, durable=False) as pg:
        migrate_store(jsonl, pg)
        _compare(jsonl, pg, cli_db)
        # More appends (a redaction, messages), copied over as batches of
        # sealed lines: the rows follow, still equal.
        jsonl.thread("odd").append(msg("assistant", "later", meta={"redacted": "1"}))
        jsonl.thread("codex-019a").append(msg("user", "a later title is no title"))
        jsonl.thread("plain").append([msg("user", "more"), msg("assistant", "and more")])
        migrate_store(jsonl, pg)
        _compare(jsonl, pg, cli_db)
        rows = {r.thread_id: r for r in catalog_view(pg).rows}
        assert rows["odd"].redactions == 3 and rows["odd"].frames == 5
        assert rows["codex-019a"].title == "codex"
        assert rows["odd"].title == "nul \x00 and \U0001f600"


@pytest.mark.skipif(not os.environ.get(TEN_K_ENV), reason=f"10,000 threads: set {TEN_K_ENV}=1")
def test_ten_thousand_threads_list_the_same(tmp_path: Path, cli_db: str) -> None:
    with Store(tmp_path / "store", create=True, durable=False) as jsonl:
        write_threads(jsonl, 10_000, seed=30)
        _odd_threads(jsonl)
        with PostgresStore(cli_db, create=True, durable=False) as pg:
            migrate_store(jsonl, pg)
            _compare(jsonl, pg, cli_db)


def _catalog_problems(store: BaseStore) -> list[str]:
    """What verify says of the catalog (the generated threads name artifacts nobody stored:
    that is not the catalog's business)."""
    return [
        f"{p.where}: {p.message}"
        for p in verify_store(store).problems
        if "catalog" in p.where or "catalog" in p.message
    ]


def _rows_sql(pg_stores: PgStores, store: PostgresStore) -> list[tuple[Any, ...]]:
    return pg_stores.sql(f"SELECT * FROM {store.schema}.catalog ORDER BY thread_key")


def test_rows_behind_are_caught_up_from_the_frames(
    jsonl_threads: Path, pg_stores: PgStores, tmp_path: Path
) -> None:
    jsonl = Store(jsonl_threads)
    pg = _pg_copy(pg_stores, jsonl, tmp_path / "pg")
    want = catalog_view(jsonl)
    built = _rows_sql(pg_stores, pg)
    s = pg.schema
    # A store written before the catalog: no rows at all.
    pg_stores.sql(f"DELETE FROM {s}.catalog")
    rows, behind = current_rows(pg) or ([], [])
    assert rows == [] and behind == pg.threads()  # a hook's read catches nothing up
    assert catalog_view(pg) == want
    assert _rows_sql(pg_stores, pg) == built
    # Older code appended to "odd" (its row stays where it was), then this code appends.
    old = pg_stores.sql(
        f"SELECT * FROM {s}.catalog c WHERE c.thread_key = "
        f"(SELECT thread_key FROM {s}.threads WHERE thread_id = 'odd')"
    )[0]
    pg.thread("odd").append(msg("user", "by older code"))
    pg_stores.sql(
        f"UPDATE {s}.catalog SET (seq, log_bytes, head_digest, messages) = (%s, %s, %s, %s) "
        "WHERE thread_key = %s",
        [old[1], old[2], old[3], old[13], old[0]],
    )
    rows, behind = current_rows(pg) or ([], [])
    assert behind == ["odd"] and "odd" not in {r.thread_id for r in rows}
    pg.thread("odd").append(msg("assistant", "by this code"))  # the append catches it up
    row = next(r for r in catalog_view(pg).rows if r.thread_id == "odd")
    assert row.frames == 6 and row.messages == 5 and row.redactions == 2
    assert _catalog_problems(pg) == []
    # The same thread in a fresh copy, rebuilt from its frames: the same row.
    assert rebuild_catalog(pg, {"odd"}) == 1
    assert next(r for r in catalog_view(pg).rows if r.thread_id == "odd") == row


def test_delete_verify_and_rebuild(
    jsonl_threads: Path, pg_stores: PgStores, tmp_path: Path
) -> None:
    jsonl = Store(jsonl_threads)
    pg = _pg_copy(pg_stores, jsonl, tmp_path / "pg")
    s = pg.schema
    victim = pg.threads()[0]
    pg.delete_thread(victim)
    assert victim not in {r.thread_id for r in catalog_view(pg).rows}
    assert len(_rows_sql(pg_stores, pg)) == len(pg.threads())
    assert _catalog_problems(pg) == []
    # A row changed behind the store's back, and one left of a thread removed by hand.
    pg_stores.sql(
        f"UPDATE {s}.catalog SET messages = messages + 7 WHERE thread_key = "
        f"(SELECT thread_key FROM {s}.threads WHERE thread_id = 'odd')"
    )
    pg_stores.sql(
        f"INSERT INTO {s}.catalog SELECT 999999, seq, log_bytes, head_digest, "
        "last_active_ms, first_ms, last_message_ms, created, source, title, "
        "parent_thread_id, project, git_branch, messages, checkpoints, compactions, "
        f"redactions FROM {s}.catalog LIMIT 1"
    )
    text = "\n".join(_catalog_problems(pg))
    assert "catalog row of thread odd" in text and "messages" in text, text
    assert "table catalog: 1 rows of thread key 999999" in text, text
    pg_stores.sql(
        f"UPDATE {s}.catalog SET seq = seq + 5 WHERE thread_key = "
        f"(SELECT thread_key FROM {s}.threads WHERE thread_id = 'plain')"
    )
    assert "thread plain: row covers frames up to seq" in "\n".join(_catalog_problems(pg))
    rebuild_store(pg)  # what `continuity rebuild-index` does
    assert _catalog_problems(pg) == []
    assert rebuild_catalog(pg) == len(pg.threads())
    want = catalog_view(jsonl).rows
    assert [r for r in catalog_view(pg).rows] == [r for r in want if r.thread_id != victim]


def test_a_listing_during_appends_sees_whole_batches(pg_stores: PgStores, tmp_path: Path) -> None:
    pg = pg_stores.open(tmp_path / "pg")
    writer = pg_stores.open(tmp_path / "pg")  # its own connections, as another process has
    for i in range(20):
        pg.thread(f"t{i:02}").append(fr.ThreadCreated(title=f"t{i}"))
    stop = threading.Event()
    failures: list[BaseException] = []

    def append() -> None:
        try:
            n = 0
            while not stop.is_set():
                writer.thread(f"t{n % 20:02}").append(
                    [msg("user", f"q{n}"), msg("assistant", f"a{n}", meta={"redacted": "1"})]
                )
                n += 1
        except BaseException as exc:
            failures.append(exc)

    worker = threading.Thread(target=append)
    worker.start()
    try:
        for _ in range(30):
            for row in catalog_view(pg).rows:
                # whole batches only: two messages each, one of them redacted
                assert row.frames == 1 + row.messages and row.messages == 2 * row.redactions
    finally:
        stop.set()
        worker.join()
    assert not failures
    assert pg.catalog().problems() == []
