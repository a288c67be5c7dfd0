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
from continuity.errors import JobInFlight, SeqConflict
from continuity.maintenance.verify import verify_store
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


# --- group commit: a writer that finds the head row locked hands its batch over (ADR 0063) ---

ACKING = r"""
import json, sys
args = json.loads(sys.argv[1])
from continuity.store.postgres import PostgresStore
from continuity import frames as fr
store = PostgresStore(args["url"], schema=args["schema"], durable=True, pool_size=1)
w = args["worker"]
for b in range(args["batches"]):
    batch = [fr.message("user", f"w{w} b{b} i{i}", message_id=f"w{w}-{b}-{i}") for i in range(5)]
    given = store.thread("shared").append(batch)
    print(f"ack {b} {given.start} {given.stop}", flush=True)  # acknowledged: it must be there
"""


@pytest.mark.slow
def test_writers_killed_while_others_group_their_batches_lose_nothing_acknowledged(
    pg_stores: PgStores, tmp_path: Path
) -> None:
    store = pg_stores.open(tmp_path, durable=True)
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                ACKING,
                json.dumps(
                    {"url": pg_stores.url, "schema": store.schema, "worker": w, "batches": 40}
                ),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(6)
    ]
    acked: dict[int, list[tuple[int, int, int]]] = {w: [] for w in range(6)}

    def read(w: int, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            _, b, start, stop = line.split()
            acked[w].append((int(b), int(start), int(stop)))

    readers = [threading.Thread(target=read, args=(w, p)) for w, p in enumerate(procs)]
    for r in readers:
        r.start()
    while sum(len(a) for a in acked.values()) < 30 and all(p.poll() is None for p in procs):
        time.sleep(0.01)
    for victim in procs[:2]:  # mid-run: mid-batch, waiting for a lock, or handing one over
        os.kill(victim.pid, signal.SIGKILL)
    for p in procs[2:]:
        assert p.wait(timeout=300) == 0, p.stderr.read() if p.stderr else ""
    for p in procs[:2]:
        reap(p)
    for r in readers:
        r.join()
    for p in procs:
        for pipe in (p.stdout, p.stderr):
            if pipe is not None:
                pipe.close()
    t = store.thread("shared")
    batches = _check_thread(t)  # chained, seqs 0, 1, 2, …, each batch contiguous
    for w, acks in acked.items():
        for b, start, stop in acks:
            assert batches[f"w{w}", b] == list(range(start, stop)), (w, b)  # where it was told
    assert all(len(seqs) == 5 for seqs in batches.values())  # whole, and never twice
    for w in range(2, 6):
        assert {b for (who, b) in batches if who == f"w{w}"} == set(range(40))
    assert verify_store(store).ok
    handed = pg_stores.sql(
        "SELECT n_tup_ins FROM pg_stat_user_tables WHERE schemaname = %s AND relname = 'pending'",
        [store.schema],
    )
    assert handed and handed[0][0] > 0  # the writers did hand batches over


def test_a_batch_handed_over_gets_its_seqs_or_its_seq_conflict(
    pg_stores: PgStores, tmp_path: Path
) -> None:
    one, two = pg_stores.open(tmp_path), pg_stores.open(tmp_path)
    one.thread("t").append(msg("first"))
    head = head_seq(one.thread("t"))
    holder = pg_stores.connect()
    holder.execute("BEGIN")
    holder.execute(f"SELECT 1 FROM {one.schema}.threads FOR UPDATE")  # as a writer would
    outcome: dict[str, Any] = {}

    def write(name: str, store: Any, **kw: Any) -> None:
        try:
            outcome[name] = store.thread("t").append(msg(name), **kw)
        except Exception as exc:  # what the writer was told
            outcome[name] = exc

    writers = [
        threading.Thread(target=write, args=("plain", one)),
        threading.Thread(target=write, args=("stale", two), kwargs={"expected_seq": head}),
    ]
    for w in writers:
        w.start()
    deadline = time.monotonic() + 60
    while pg_stores.sql(f"SELECT count(*) FROM {one.schema}.pending")[0][0] < 2:
        assert time.monotonic() < deadline, "the writers did not hand their batches over"
        time.sleep(0.01)
    holder.execute("COMMIT")
    for w in writers:
        w.join(timeout=60)
    assert outcome["plain"] == range(head + 1, head + 2)
    stale = outcome["stale"]
    assert isinstance(stale, SeqConflict) and stale.expected == head
    assert stale.actual in (head + 1, head + 2)  # sealed before the other batch, or after it
    assert [f.seq for f in one.thread("t").read()] == list(range(head + 2))
    assert pg_stores.sql(f"SELECT count(*) FROM {one.schema}.pending") == [(0,)]


def test_a_writer_that_gives_up_waiting_takes_its_batch_back(
    pg_stores: PgStores, tmp_path: Path
) -> None:
    store = pg_stores.open(tmp_path)
    store.thread("t").append(msg("first"))
    before = stored_lines(store.thread("t"))
    holder = pg_stores.connect()
    holder.execute("BEGIN")
    holder.execute(f"SELECT 1 FROM {store.schema}.threads FOR UPDATE")
    other = pg_stores.open(tmp_path)
    told: list[BaseException] = []

    def write() -> None:
        try:
            other.thread("t").append(msg("given up"))
        except Exception as exc:  # what the writer was told
            told.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    deadline = time.monotonic() + 60
    while pg_stores.sql(f"SELECT count(*) FROM {store.schema}.pending")[0][0] < 1:
        assert time.monotonic() < deadline, "the writer did not hand its batch over"
        time.sleep(0.01)
    while not pg_stores.sql(  # its wait for the holder's commit, cut (a lost connection)
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE wait_event_type = 'Lock' AND datname = current_database()"
    ):
        assert time.monotonic() < deadline, "the writer is not waiting"
        time.sleep(0.01)
    writer.join(timeout=60)
    assert told and "given up" not in str(told[0])
    assert pg_stores.sql(f"SELECT count(*) FROM {store.schema}.pending") == [(0,)]
    holder.execute("COMMIT")
    store.thread("t").append(msg("later"))  # the lock's next holder has nothing to write for it
    lines = stored_lines(store.thread("t"))
    assert not any(b"given up" in line for line in lines) and len(lines) == len(before) + 1
