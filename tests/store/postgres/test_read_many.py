"""One pass over a PostgreSQL store reads many threads (ADR 0063): ``verify`` reads every
thread's lines and derived rows from one snapshot by a few cursors, and reports exactly what the
thread-by-thread check reports, damage included; the pass's round trips do not grow with the
number of threads. On a real server."""

from __future__ import annotations

from pathlib import Path

import pytest

from continuity.context.records import record
from continuity.maintenance.verify import verify_store
from continuity.store import postgres
from continuity.store.postgres import PostgresStore
from continuity.testing import msg
from tests.store.postgres.test_round_trips import _traced
from tests.support.pg import PgStores


def _fill(store: PostgresStore, n: int, frames: int = 6) -> list[str]:
    ids = [f"thread-{i:03d}" for i in range(n)]
    for tid in ids:
        t = store.thread(tid)
        t.append([msg(f"{tid} ask {j}", "user" if j % 2 == 0 else "assistant") for j in range(3)])
        record(t, "test.note", {"n": 1}, key="k")
        t.append(msg("more", "user"))
        t.append([msg(f"{tid} tail {j}", "assistant") for j in range(frames - 5)])
    return ids


def _edit(stores: PgStores, store: PostgresStore, tid: str, seq: int) -> None:
    s = store.schema
    stores.sql(
        f"UPDATE {s}.frames SET line = convert_to(replace(convert_from(line, 'UTF8'), "
        f"'{tid}', 'EDITED'), 'UTF8') WHERE seq = %s AND thread_key = "
        f"(SELECT thread_key FROM {s}.threads WHERE thread_id = %s)",
        (seq, tid),
    )


def _key(store: PostgresStore, tid: str) -> str:
    return f"(SELECT thread_key FROM {store.schema}.threads WHERE thread_id = '{tid}')"


def test_one_pass_reports_what_the_thread_by_thread_check_reports(
    pg_stores: PgStores, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pg = pg_stores.open(tmp_path)
    ids = _fill(pg, 12, frames=9)
    assert verify_store(pg).ok
    s = pg.schema
    _edit(pg_stores, pg, ids[1], 2)  # a line that no longer chains
    pg_stores.sql(f"DELETE FROM {s}.frames WHERE seq = 4 AND thread_key = {_key(pg, ids[4])}")
    pg_stores.sql(
        f"UPDATE {s}.messages SET tokens = tokens + 1 WHERE thread_key = {_key(pg, ids[7])}"
    )
    pg_stores.sql(f"DELETE FROM {s}.marks WHERE thread_key = {_key(pg, ids[8])}")
    _edit(pg_stores, pg, ids[10], 6)
    pg_stores.sql(  # a frame past the head: stored, never committed by an append
        f"INSERT INTO {s}.frames (thread_key, seq, line) SELECT thread_key, 99, line "
        f"FROM {s}.frames WHERE seq = 0 AND thread_key = {_key(pg, ids[11])}"
    )
    monkeypatch.setattr(postgres, "SNAPSHOT_FRAMES", 8)  # some threads read themselves
    for n, tid in enumerate(ids[:3]):
        pg.thread(tid).append([msg(f"longer {n}", "user")])
    one_pass = verify_store(pg)
    by_thread = verify_store(pg, limit=10**6)  # a limit: the thread-by-thread check
    assert [(p.where, p.message) for p in one_pass.problems] == [
        (p.where, p.message) for p in by_thread.problems
    ]
    assert (one_pass.threads, one_pass.frames, one_pass.notes) == (
        by_thread.threads,
        by_thread.frames,
        by_thread.notes,
    )
    named = {p.thread_id for p in one_pass.problems}
    assert {ids[1], ids[4], ids[7], ids[8], ids[10], ids[11]} <= named, one_pass.problems
    assert ids[0] not in named and ids[5] not in named


def test_the_pass_reads_one_snapshot(pg_stores: PgStores, tmp_path: Path) -> None:
    pg = pg_stores.open(tmp_path)
    ids = _fill(pg, 5)
    other = pg_stores.open(tmp_path)
    before = {tid: list(pg.thread(tid).stored_lines()) for tid in ids}
    with pg.read_many([pg.thread(tid) for tid in ids]) as threads:
        seen = iter(threads)
        first = next(seen)
        for tid in ids:  # written while the pass runs: not in what it hands out
            other.thread(tid).append([msg("written meanwhile", "user")])
        got = {first.id: list(first.stored_lines())}
        got.update({t.id: list(t.stored_lines()) for t in seen})
    assert got == before
    assert all(len(list(pg.thread(tid).stored_lines())) == len(before[tid]) + 1 for tid in ids)


def test_the_pass_waits_on_the_server_as_often_for_40_threads_as_for_3(
    pg_stores: PgStores, tmp_path: Path
) -> None:
    counted = []
    for n in (3, 40):
        pg = pg_stores.open(tmp_path / str(n), pooled=False)
        ids = _fill(pg, n)
        with _traced(pg) as trips:
            with pg.read_many([pg.thread(tid) for tid in ids]) as threads:
                checked = [(t.id, t.derived().problems()) for t in threads]  # type: ignore[union-attr]
            counted.append(trips())
        assert sorted(checked) == [(tid, []) for tid in ids]
    assert counted[0] == counted[1] <= 16, counted
