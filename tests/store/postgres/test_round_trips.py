"""An append on PostgreSQL waits for the server as few times as it can (issue 42): the head row
locked and read in one round trip, every write and the commit in the next, and, for a writer
that appended last itself, everything in one. Counted from libpq's own trace of the messages
the connection sends and receives (a round trip: the client sends, then reads the server's
answer), on a real server.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from continuity.frames import Frame
from continuity.store.postgres import PostgresStore
from continuity.testing import msg
from tests.support.pg import PgStores


@contextmanager
def _traced(store: PostgresStore) -> Iterator[Callable[[], int]]:
    """libpq's trace of the store's held connection (an unpooled store's); gives a function
    that counts the round trips traced so far."""
    import psycopg

    conn: Any = store._db._held  # the one connection an unpooled store keeps (a hook's)
    assert conn is not None
    with tempfile.TemporaryFile("w+") as out:
        conn.pgconn.trace(out.fileno())
        conn.pgconn.set_trace_flags(
            psycopg.pq.Trace.SUPPRESS_TIMESTAMPS | psycopg.pq.Trace.REGRESS_MODE
        )

        def count() -> int:
            out.flush()
            os.fsync(out.fileno())
            out.seek(0)
            trips, last = 0, ""
            for line in out.read().splitlines():
                side = line.split("\t", 1)[0]
                if side == "B" and last == "F":
                    trips += 1
                if side in ("F", "B"):
                    last = side
            return trips

        try:
            yield count
        finally:
            conn.pgconn.untrace()


def _frames(n: int, text: str = "hello") -> list[Frame]:
    return [msg(f"{text}-{i}", "user" if i % 2 == 0 else "assistant") for i in range(n)]


def _seqs(store: PostgresStore) -> list[int]:
    return [seq for seq, _ in store.thread("t").read_lines()]


@pytest.mark.parametrize("durable", [True, False])
def test_appends_to_a_thread_another_writes_too_are_two_round_trips(
    pg_stores: PgStores, tmp_path: Path, durable: bool
) -> None:
    writer = pg_stores.open(tmp_path, pooled=False, durable=durable)
    other = pg_stores.open(tmp_path, pooled=False)
    writer.thread("t").append(_frames(3))
    first = len(_seqs(writer))
    other.thread("t").append(_frames(2))  # the head moved under the first writer
    with _traced(writer) as trips:
        # It tried its one-trip append, found the head moved, rolled back, locked and wrote.
        writer.thread("t").append(_frames(100, "later"))
        assert trips() <= 4
    for n in range(3):
        other.thread("t").append(_frames(1, f"other {n}"))
        with _traced(writer) as trips:
            writer.thread("t").append(_frames(10, f"again {n}"))
            assert trips() <= 2  # it knows now: the lock first, then everything else
    assert _seqs(writer) == list(range(first + 2 + 100 + 3 * 11))


def test_a_writer_that_appended_last_appends_in_one_round_trip(
    pg_stores: PgStores, tmp_path: Path
) -> None:
    store = pg_stores.open(tmp_path, pooled=False, durable=True)
    store.thread("t").append(_frames(3))
    first = len(_seqs(store))
    with _traced(store) as trips:
        store.thread("t").append(_frames(100, "again"))
        store.thread("t").append(_frames(1, "once more"))
        assert trips() <= 2
    assert _seqs(store) == list(range(first + 101))
