"""Deleting a thread under real processes (ADR 0040): a writer appending while the thread is
deleted lands before (and goes with it) or fails cleanly after, never half; a delete killed at
any moment leaves the thread whole or its tombstone, and running it again finishes."""

from __future__ import annotations

import itertools
import json
import random
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from continuity import frames as fr
from continuity.maintenance.forget import forget_threads
from continuity.maintenance.verify import verify_store
from continuity.store.base import BaseStore
from continuity.store.jsonl import Store
from tests.support.pg import PgStores
from tests.support.processes import reap

pytestmark = pytest.mark.slow

# Appends batches of 5 messages until the thread is deleted; prints each acknowledged range
# and then "deleted" (ThreadDeleted) and exits; anything else fails it.
_APPENDER = textwrap.dedent(
    """
    import json, sys
    from continuity import frames as fr
    from continuity.errors import ThreadDeleted
    if len(sys.argv) > 2:
        from continuity.store.postgres import PostgresStore
        store = PostgresStore(sys.argv[1], schema=sys.argv[2])
    else:
        from continuity.store.jsonl import Store
        store = Store(sys.argv[1])
    thread = store.thread("t")
    for i in range(100_000):
        try:
            got = thread.append([fr.message("user", f"m{i}-{j}") for j in range(5)])
        except ThreadDeleted:
            print("deleted", flush=True)
            break
        print(json.dumps([got.start, got.stop]), flush=True)
    """
)

# Deletes thread "t" (and its caches and artifacts); a kill can land anywhere in it.
_DELETER = textwrap.dedent(
    """
    import sys
    from continuity.maintenance.forget import forget_threads
    from continuity.store.jsonl import Store
    print("ready", flush=True)
    forget_threads(Store(sys.argv[1]), ["t"])
    print("done", flush=True)
    """
)


def _appender_races_a_delete(store: BaseStore, *where: str) -> None:
    store.thread("t").append(fr.message("user", "first"))
    child = subprocess.Popen(
        [sys.executable, "-c", _APPENDER, *where], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        acked = [json.loads(child.stdout.readline()) for _ in range(20)]  # it is writing
        report = store.delete_thread("t")
        rest = child.stdout.read().splitlines()
        assert child.wait(60) == 0
    finally:
        reap(child)
    assert rest[-1] == "deleted", rest[-3:]
    acked += [json.loads(line) for line in rest[:-1]]
    # Every acknowledged append landed before the delete: within the deleted head, contiguous.
    last = report.tombstone.head_seq
    assert acked[-1][1] - 1 == last
    assert all(a[1] == b[0] for a, b in itertools.pairwise(acked))
    assert report.tombstone.frames == last + 1
    assert not store.thread("t").exists() and store.threads() == []


def test_an_appender_racing_a_delete_on_jsonl(tmp_path: Path) -> None:
    store = Store(tmp_path / "s", create=True)
    _appender_races_a_delete(store, str(tmp_path / "s"))
    assert not (tmp_path / "s" / "threads" / "t.jsonl").exists()  # no file made again


@pytest.mark.postgres
def test_an_appender_racing_a_delete_on_postgres(pg_stores: PgStores, tmp_path: Path) -> None:
    store = pg_stores.open(tmp_path / "s", durable=True)
    _appender_races_a_delete(store, pg_stores.url, store.schema)
    rows = pg_stores.sql(f"SELECT count(*) FROM {store.schema}.frames")
    assert rows == [(0,)]


def _big_thread(path: Path) -> Store:
    store = Store(path, create=True, durable=False)
    t = store.thread("t")
    aid = store.artifacts.put(b"the thread's own artifact")
    t.append(fr.RecordAppended(kind="x.y", artifact_id=aid, size=1))
    for i in range(40):
        t.append([fr.message("user", f"words {i} {j} " * 20) for j in range(250)])
    store.thread("other").append(fr.message("user", "stays"))
    from continuity.caches.thread_index import ThreadIndex

    ThreadIndex(t).refresh()
    return store


def test_a_delete_killed_anywhere_leaves_the_thread_or_its_tombstone(tmp_path: Path) -> None:
    base = tmp_path / "base"
    original = _big_thread(base)
    log = (base / "threads" / "t.jsonl").read_bytes()
    head = original.thread("t").head()
    rng = random.Random(30)
    outcomes = set()
    for round_ in range(6):
        path = tmp_path / f"r{round_}"
        subprocess.run(["cp", "-a", str(base), str(path)], check=True)
        child = subprocess.Popen(
            [sys.executable, "-c", _DELETER, str(path)], stdout=subprocess.PIPE, text=True
        )
        try:
            assert child.stdout is not None
            assert child.stdout.readline() == "ready\n"
            time.sleep(rng.uniform(0.0, 0.25))
            child.kill()
        finally:
            reap(child)
        store = Store(path)
        log_path = path / "threads" / "t.jsonl"
        if log_path.exists():  # the thread is whole (a tombstone may be there already)
            assert log_path.read_bytes() == log
            assert store.thread("t").head() == head
            outcomes.add("thread" if store.tombstone_of("t") is None else "tombstone+log")
        else:
            tomb = store.tombstone_of("t")
            assert tomb is not None and head is not None and tomb.head_digest == head.digest
            outcomes.add("tombstone")
        forget_threads(store, ["t"])  # a second run finishes whatever the kill left
        report = verify_store(store)
        assert report.ok, report.problems
        assert len(store.tombstones()) == 1 and store.threads() == ["other"]
        assert not (path / "cache" / "threads" / "t").exists()
    assert outcomes  # which states the kills hit varies with the machine; all are checked
