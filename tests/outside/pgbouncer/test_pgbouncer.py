"""The PostgreSQL store through a real PgBouncer in transaction pooling mode (issue 30 item 4):
appends from several processes, reads, search, compile, migrate and delete with zero errors
(no prepared statement outlives its transaction; no session state relied on), the hooks'
budgets set per transaction when the pooler refuses them at the login, job locks that exclude
each other across processes and die with their holder, and item 7: processes that create one
store at once all succeed, through the pooler and without it.

PgBouncer is Debian's package in the test cache (``python -m tools.pgbouncer install``); the
tests skip, saying so, without it. Its pool has fewer server connections than there are clients,
so transactions of different clients do share server sessions."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from continuity import frames as fr
from continuity.cli.app import app
from continuity.errors import JobInFlight, StoreBusy
from continuity.paths import with_schema
from continuity.store.locate import open_store
from continuity.store.postgres import PostgresStore
from continuity.testing import stored_lines, verify_chain
from tests.support.pg import PgStores, schema_for
from tests.support.pgbouncer import pooled
from tests.support.processes import reap

pytestmark = pytest.mark.pgbouncer

HELLO = '{"type": "message_appended", "role": "user", "content": [{"type": "text", "text": "%s"}]}'


@pytest.fixture(scope="module")
def pooler(pg_url: str) -> Iterator[str]:
    """The test server's database through PgBouncer (transaction mode, 3 server connections)."""
    with pooled(pg_url, pool_size=3) as url:
        yield url


def _url(base: str, schema: str) -> str:
    return with_schema(base, schema)


def _start(script: str, **args: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script, json.dumps(args)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(procs: list[subprocess.Popen[str]]) -> list[str]:
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
        outs.append(out)
    return outs


WRITER = r"""
import json, sys, time
args = json.loads(sys.argv[1])
from continuity.store.locate import open_store
from continuity import frames as fr
time.sleep(max(0.0, args["start"] - time.time()))
with open_store(args["url"], durable=False, pool_size=2) as store:
    for b in range(args["batches"]):
        t = store.thread(args["threads"][(b + args["worker"]) % len(args["threads"])])
        t.append([fr.message("user", f"w{args['worker']} b{b} i{i}") for i in range(3)])
        assert t.head() is not None
        assert len(list(t.read_lines(from_seq=max(0, t.head().seq - 5)))) >= 3
        list(t.read(types=["message_appended"]))
print("done", flush=True)
"""


@pytest.mark.slow
def test_processes_append_and_read_through_the_pooler(
    pooler: str, pg_stores: PgStores, tmp_path: Path
) -> None:
    schema = schema_for(tmp_path)
    pg_stores.open(tmp_path).close()
    threads, batches, workers = ["a", "b", "c"], 15, 6
    start = time.time() + 2.0
    procs = [
        _start(
            WRITER,
            url=_url(pooler, schema),
            worker=w,
            threads=threads,
            batches=batches,
            start=start,
        )
        for w in range(workers)
    ]
    assert [o.strip() for o in _finish(procs)] == ["done"] * workers
    store = pg_stores.open(tmp_path)
    total = 0
    for tid in threads:
        lines = stored_lines(store.thread(tid))
        verify_chain(lines)
        total += len(lines) - 1  # thread_created
    assert total == workers * batches * 3


def cli(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(app, list(args), input=input)


def ok(result: Result) -> str:
    assert result.exit_code == 0, (result.output, result.exception)
    return result.stdout


@pytest.mark.slow
def test_every_command_through_the_pooler(
    pooler: str, pg_stores: PgStores, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    schema, copy = schema_for(tmp_path / "a"), schema_for(tmp_path / "b")
    pg_stores.schemas |= {schema, copy}
    store = ["--store", pooler, "--schema", schema]
    assert ok(cli(*store, "init")).startswith("created store")
    for i in range(12):  # more than psycopg's prepare threshold (5) of each statement
        ok(cli(*store, "append", f"t{i % 3}", input=HELLO % f"word{i} alpha"))
    assert ok(cli(*store, "threads")).split()[0:1] and "t0" in ok(cli(*store, "threads"))
    assert "word3" in ok(cli(*store, "log", "t0"))
    assert "alpha" in ok(cli(*store, "search", "alpha"))
    assert "word6" in ok(cli(*store, "compile", "t0", "--format", "text"))
    assert "word6" in ok(cli(*store, "compile", "t0", "--format", "text", "--dry-run"))
    ok(cli(*store, "stats"))
    ok(cli(*store, "sessions"))
    ok(cli(*store, "verify"))
    ok(cli("migrate", _url(pooler, schema), str(tmp_path / "folder")))
    ok(cli("migrate", str(tmp_path / "folder"), _url(pooler, copy)))
    ok(cli("migrate", _url(pooler, schema), _url(pooler, copy)))  # again: all there, checked
    ok(cli(*store, "delete", "t1", "--yes"))
    assert "t1" not in ok(cli(*store, "threads"))
    ok(cli(*store, "verify"))
    with PostgresStore(pg_stores.url, schema=copy) as copied:
        assert copied.threads() == ["t0", "t1", "t2"]


LOCKER = r"""
import json, os, random, sys, time
args = json.loads(sys.argv[1])
from continuity.errors import JobInFlight
from continuity.store.locate import open_store
store = open_store(args["url"], pool_size=1)
got = refused = 0
time.sleep(max(0.0, args["start"] - time.time()))
deadline = time.monotonic() + 90
while got < args["rounds"] and time.monotonic() < deadline:
    try:
        with store.job_lock("t", "compaction"):
            with open(args["log"], "a") as f:
                f.write(f"in {os.getpid()}\n")
            time.sleep(0.05)
            with open(args["log"], "a") as f:
                f.write(f"out {os.getpid()}\n")
            got += 1
    except JobInFlight:
        refused += 1
    time.sleep(random.random() * 0.02)
store.close()
print(json.dumps({"got": got, "refused": refused}), flush=True)
"""


@pytest.mark.slow
def test_four_job_lock_holders_exclude_each_other_through_the_pooler(
    pooler: str, pg_stores: PgStores, tmp_path: Path
) -> None:
    schema = schema_for(tmp_path)
    pg_stores.open(tmp_path).close()
    log, rounds = tmp_path / "held.log", 3
    start = time.time() + 2.0
    procs = [
        _start(LOCKER, url=_url(pooler, schema), log=str(log), rounds=rounds, start=start)
        for _ in range(4)
    ]
    results = [json.loads(out) for out in _finish(procs)]
    assert [r["got"] for r in results] == [rounds] * 4
    assert sum(r["refused"] for r in results) > 0  # they did compete
    events = log.read_text().split("\n")[:-1]
    assert len(events) == 2 * 4 * rounds
    for i in range(0, len(events), 2):  # never two holders at once
        entered, left = events[i].split(), events[i + 1].split()
        assert entered[0] == "in" and left == ["out", entered[1]], events[i : i + 2]


HOLDER = r"""
import json, sys
args = json.loads(sys.argv[1])
from continuity.store.locate import open_store
store = open_store(args["url"])
with store.job_lock("t", "compaction"):
    print("held", flush=True)
    sys.stdin.read()
"""


@pytest.mark.slow
def test_a_killed_holders_job_lock_is_released_through_the_pooler(
    pooler: str, pg_stores: PgStores, tmp_path: Path
) -> None:
    schema = schema_for(tmp_path)
    pg_stores.open(tmp_path).close()
    store = open_store(_url(pooler, schema))
    try:
        proc = _start(HOLDER, url=_url(pooler, schema))
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        for _ in range(3):  # held, whichever server session this side's transaction gets
            with pytest.raises(JobInFlight), store.job_lock("t", "compaction"):
                pass  # pragma: no cover - never entered
        proc.send_signal(signal.SIGKILL)
        reap(proc)
        deadline = time.monotonic() + 20
        while True:
            try:
                with store.job_lock("t", "compaction"):
                    break
            except JobInFlight:
                assert time.monotonic() < deadline, "the killed holder's lock was never released"
                time.sleep(0.05)
    finally:
        store.close()


@pytest.mark.slow
def test_the_hooks_budgets_hold_through_the_pooler(
    pooler: str, pg_stores: PgStores, tmp_path: Path
) -> None:
    """PgBouncer refuses the budgets at the login (``options``): each transaction sets them."""
    owner = pg_stores.open(tmp_path)
    owner.thread("t").append(fr.message("user", "hello"))
    budget = PostgresStore(pooler, schema=owner.schema, statement_timeout=5, lock_timeout=0.2)
    held = pg_stores.connect()
    try:
        with held.transaction():
            held.execute(f"SELECT 1 FROM {owner.schema}.threads FOR UPDATE")
            with pytest.raises(StoreBusy, match="lock timeout"):
                budget.thread("t").append(fr.message("user", "waits on the row"))
        assert budget.thread("t").append(fr.message("user", "after")) == range(2, 3)
    finally:
        budget.close()


CREATOR = r"""
import json, sys, time
args = json.loads(sys.argv[1])
from continuity.store.locate import open_store
from continuity import frames as fr
time.sleep(max(0.0, args["start"] - time.time()))
with open_store(args["url"], create=True) as store:
    store.thread(f"p{args['worker']}").append(fr.message("user", "hello"))
print("ok", flush=True)
"""


@pytest.mark.slow
@pytest.mark.parametrize("through", ["server", "pooler"])
def test_processes_that_create_one_store_at_once_all_succeed(
    through: str, pooler: str, pg_stores: PgStores, tmp_path: Path
) -> None:
    schema = schema_for(tmp_path)
    pg_stores.schemas.add(schema)
    base = pooler if through == "pooler" else pg_stores.url
    start = time.time() + 2.0
    procs = [_start(CREATOR, url=_url(base, schema), worker=w, start=start) for w in range(8)]
    assert [o.strip() for o in _finish(procs)] == ["ok"] * 8
    with PostgresStore(pg_stores.url, schema=schema) as store:
        assert store.threads() == [f"p{w}" for w in range(8)]


def test_the_pooler_shares_server_sessions_between_transactions(pooler: str) -> None:
    """What the other tests stand on: through this pooler a statement prepared in one
    transaction is not there for the next (psycopg's default prepares after 5 runs)."""
    import psycopg

    conns = [psycopg.connect(pooler, autocommit=True, prepare_threshold=0) for _ in range(5)]
    failed = 0
    try:
        for i in range(20):
            for conn in conns:
                try:
                    conn.execute("SELECT %s::int", [i]).fetchone()
                except psycopg.errors.DuplicatePreparedStatement:
                    failed += 1
                except psycopg.errors.InvalidSqlStatementName:
                    failed += 1
    finally:
        for conn in conns:
            conn.close()
    assert failed > 0
