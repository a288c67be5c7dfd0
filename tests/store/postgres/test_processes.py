"""The PostgreSQL backend shared by processes (and threads): concurrent appends keep seqs
contiguous and batches whole, two initialisers of one schema do not collide, the job lock
excludes other processes and dies with its holder, a writer killed mid-batch leaves nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from continuity import frames as fr
from continuity.errors import JobInFlight
from continuity.store.postgres.schema import MIGRATIONS, SCHEMA_VERSION
from continuity.testing import msg, stored_lines, verify_chain
from tests.support.narrow import head_seq
from tests.support.pg import PgStores, schema_for
from tests.support.processes import reap

WORKER = r"""
import json, sys, time
args = json.loads(sys.argv[1])
from continuity.store.postgres import PostgresStore
from continuity import frames as fr
time.sleep(max(0.0, args["start"] - time.time()))  # all start together
store = PostgresStore(args["url"], schema=args["schema"], create=True, durable=False)
for b in range(args["batches"]):
    tid = args["threads"][(b + args["worker"]) % len(args["threads"])]
    batch = [
        fr.message("user", f"w{args['worker']} b{b} i{i}", message_id=f"w{args['worker']}-{b}-{i}")
        for i in range(args["size"])
    ]
    store.thread(tid).append(batch)
store.close()
print("done", flush=True)
"""


def _run_workers(stores: PgStores, schema: str, n: int, threads: list[str], **kw: Any) -> None:
    start = time.time() + 2.0  # after every interpreter has imported psycopg
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                WORKER,
                json.dumps(
                    {
                        "url": stores.url,
                        "schema": schema,
                        "worker": w,
                        "threads": threads,
                        "start": start,
                        **kw,
                    }
                ),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(n)
    ]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0 and out.strip() == "done", err


def _check_thread(thread: Any) -> dict[tuple[str, int], list[int]]:
    """Every frame chained and numbered 0, 1, 2, …; each batch's seqs by (worker, batch)."""
    lines = stored_lines(thread)
    verify_chain(lines)
    batches: dict[tuple[str, int], list[int]] = defaultdict(list)
    for f in thread.read(types=["message_appended"]):
        worker, batch, _ = f.message_id.split("-")
        batches[worker, int(batch)].append(f.seq)
    for key, seqs in batches.items():
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), key  # a batch is contiguous
    return batches


@pytest.mark.slow
@pytest.mark.parametrize("n_threads", [1, 8])
def test_eight_processes_append_concurrently(
    pg_stores: PgStores, tmp_path: Path, n_threads: int
) -> None:
    schema = schema_for(tmp_path)
    pg_stores.open(tmp_path).close()  # the schema exists before the race (its own test below)
    threads = [f"t{i}" for i in range(n_threads)]
    batches, size = 12, 25
    _run_workers(pg_stores, schema, 8, threads, batches=batches, size=size)
    store = pg_stores.open(tmp_path)
    assert store.threads() == sorted(threads)
    seen: set[tuple[str, int]] = set()
    total = 0
    for tid in threads:
        t = store.thread(tid)
        found = _check_thread(t)
        assert not seen & found.keys()
        seen |= found.keys()
        head = t.head()
        assert head is not None
        total += head.seq  # frames besides thread_created
        assert all(len(seqs) == size for seqs in found.values())
    assert total == 8 * batches * size and len(seen) == 8 * batches  # nothing lost


def test_threads_of_one_process_share_a_store(pg_stores: PgStores, tmp_path: Path) -> None:
    store = pg_stores.open(tmp_path, pool_size=3)
    errors: list[BaseException] = []

    def work(w: int) -> None:
        try:
            for b in range(15):
                tid = "shared" if b % 2 else f"own{w}"
                batch = [msg(f"w{w}-{b}-{i}") for i in range(4)]
                store.thread(tid).append(batch)
                list(store.thread(tid).read_lines_backwards())[:3]
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=work, args=(w,)) for w in range(8)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    assert not errors, errors
    shared = store.thread("shared")
    verify_chain(stored_lines(shared))
    assert head_seq(shared) == 8 * 7 * 4


INIT = r"""
import json, sys, time
args = json.loads(sys.argv[1])
from continuity.store.postgres import PostgresStore
from continuity import frames as fr
time.sleep(max(0.0, args["start"] - time.time()))
with PostgresStore(args["url"], schema=args["schema"], create=True) as store:
    store.thread(f"p{args['worker']}").append(fr.message("user", "hello"))
print("ok", flush=True)
"""


@pytest.mark.slow
def test_processes_initialising_one_schema_at_once(pg_stores: PgStores, tmp_path: Path) -> None:
    schema = schema_for(tmp_path)
    start = time.time() + 2.0
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                INIT,
                json.dumps({"url": pg_stores.url, "schema": schema, "worker": w, "start": start}),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(6)
    ]
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0 and out.strip() == "ok", err
    pg_stores.schemas.add(schema)
    assert pg_stores.sql(f"SELECT key, value FROM {schema}.meta ORDER BY key")[:3] == [
        ("format", "continuity-store"),
        ("min_code_version", str(max(m.min_code_version for m in MIGRATIONS))),
        ("schema_version", str(SCHEMA_VERSION)),
    ]
    store = pg_stores.open(tmp_path, create=False)
    assert store.threads() == [f"p{w}" for w in range(6)]


HOLDER = r"""
import json, sys
args = json.loads(sys.argv[1])
from continuity.store.postgres import PostgresStore
store = PostgresStore(args["url"], schema=args["schema"])
with store.job_lock("t", "compaction"):
    print("held", flush=True)
    sys.stdin.read()  # until the test closes it, or kills this process
print("released", flush=True)
"""


@pytest.mark.slow
def test_the_job_lock_excludes_other_processes_and_dies_with_its_holder(
    pg_stores: PgStores, tmp_path: Path
) -> None:
    store = pg_stores.open(tmp_path)
    args = json.dumps({"url": pg_stores.url, "schema": store.schema})

    def holder() -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        return proc

    proc = holder()
    with pytest.raises(JobInFlight), store.job_lock("t", "compaction"):
        pass  # pragma: no cover - never entered
    with store.job_lock("t", "other"), store.job_lock("u", "compaction"):
        pass  # another job, another thread: not excluded
    assert proc.stdin is not None
    proc.stdin.close()  # released at the end of the with block
    assert proc.stdout is not None and proc.stdout.readline().strip() == "released"
    reap(proc)
    with store.job_lock("t", "compaction"):
        pass
    proc = holder()
    proc.send_signal(signal.SIGKILL)  # a holder that dies releases it with its connection
    reap(proc)
    deadline = time.monotonic() + 10
    while True:
        try:
            with store.job_lock("t", "compaction"):
                break
        except JobInFlight:
            assert time.monotonic() < deadline, "the dead holder's lock was never released"
            time.sleep(0.05)


KILLED = r"""
import json, sys
args = json.loads(sys.argv[1])
from continuity.store.postgres import PostgresStore
from continuity import frames as fr
store = PostgresStore(args["url"], schema=args["schema"])
t = store.thread("t")
b = 0
while True:
    t.append([fr.message("user", "z" * 500, message_id=f"k{b}-{i}") for i in range(2000)])
    b += 1
    print(b, flush=True)
"""


@pytest.mark.slow
def test_a_writer_killed_mid_batch_leaves_whole_batches(
    pg_stores: PgStores, tmp_path: Path
) -> None:
    store = pg_stores.open(tmp_path)
    t = store.thread("t")
    t.append(msg(1))
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED, json.dumps({"url": pg_stores.url, "schema": store.schema})],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    for _ in range(2):
        proc.stdout.readline()  # two batches committed
    time.sleep(0.02)  # and the third on its way
    os.kill(proc.pid, signal.SIGKILL)
    reap(proc)
    lines = stored_lines(t)
    verify_chain(lines)
    assert (len(lines) - 2) % 2000 == 0 and len(lines) >= 2 + 2 * 2000
    last = fr.envelope(lines[-1])
    assert last is not None and not last.more
    assert t.append(msg(2)) == range(len(lines), len(lines) + 1)
