"""Many threads read in one pass over the store (ADR 0063): what ``verify`` checks of each
thread — its stored lines and its derived rows — read from one snapshot by a few cursors in key
order, not by a few queries a thread.

:func:`read_many` opens one ``REPEATABLE READ, READ ONLY`` transaction, reads the threads' head
rows and watermarks (one query), then walks server-side cursors over ``frames``, ``messages``,
``checkpoints`` and ``marks`` of those keys, in key order, side by side, and hands out each
thread as a :class:`SnapshotThread`: a :class:`~continuity.store.postgres.PostgresThread` whose
``stored_lines``, ``read_lines`` (from the start), ``head`` and whose derived rows' check answer
from what was read. Everything else it is asked goes to the server as for any thread. A thread
longer than :data:`SNAPSHOT_FRAMES` is handed out as a plain thread (its frames are not held in
memory; it reads them itself, chunk by chunk).

The cursors fan out to every node of a distributed store (each reads one table, keyed by the
thread keys given: :data:`tests.support.distributed.FAN_OUT`).

Nothing here imports psycopg: the connection is the store's.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

from continuity import frames as fr
from continuity.errors import CorruptFrame
from continuity.store.base import Head, Thread
from continuity.store.postgres import PostgresThread, _checked_line
from continuity.store.postgres.derived import PostgresDerived, Snapshot
from continuity.store.postgres.keys import thread_key

if TYPE_CHECKING:
    from continuity.store.postgres import PostgresStore
    from continuity.store.postgres.db import Connection

__all__ = ["SNAPSHOT_FRAMES", "SnapshotThread", "read_many"]

SNAPSHOT_FRAMES: Final = 16_384
"""A thread with more frames than this is not held in memory by the pass: it reads itself."""
_FETCH: Final = 4_096
"""Rows a cursor fetches at a time."""

Rows = list[tuple[Any, ...]]


class SnapshotThread(PostgresThread):
    """A thread whose lines, head and derived rows were read by :func:`read_many`."""

    def __init__(
        self,
        store: PostgresStore,
        thread_id: str,
        *,
        state: tuple[Any, ...] | None,
        lines: Sequence[tuple[int, bytes]],
        dump: dict[str, Rows],
    ) -> None:
        base = store.thread(thread_id)
        super().__init__(
            store,
            thread_id,
            db=base._db,
            sql=base._sql,
            derived_sql=base._derived_sql,
            catalog_sql=base._catalog_sql,
        )
        self._state = state
        """``(thread_key, head_seq, watermark seq, messages, anchor_seq, head digest)``; None:
        no such thread."""
        self._lines = lines
        self._dump = dump

    def head(self) -> Head | None:
        if self._state is None or self._state[1] < 0:
            return None
        return Head(int(self._state[1]), str(self._state[5]))

    def stored_lines(self) -> Iterator[tuple[int, bytes]]:
        return iter(self._lines)

    def read_lines(
        self, *, from_seq: int = 0, to_seq: int | None = None, start_offset: int | None = None
    ) -> Iterator[tuple[int, bytes]]:
        if from_seq > 0 or start_offset is not None:
            return super().read_lines(from_seq=from_seq, to_seq=to_seq, start_offset=start_offset)
        return self._checked(to_seq)

    def _checked(self, to_seq: int | None) -> Iterator[tuple[int, bytes]]:
        """The lines from seq 0, each checked against its parent, as
        :meth:`PostgresThread.read_lines` gives them (the same errors where it would stop)."""
        if self._state is None or (to_seq is not None and to_seq < 0):
            return
        head_seq = int(self._state[1])
        last = head_seq if to_seq is None else min(to_seq, head_seq)
        seq, prev = 0, fr.GENESIS_DIGEST
        for row_seq, line in self._lines:
            if row_seq > last:
                break
            if row_seq != seq:
                raise CorruptFrame(self.id, seq, -1, f"frame {seq} is missing")
            prev = _checked_line(self.id, seq, line, prev)
            yield seq, line
            seq += 1
        if seq <= last:
            raise CorruptFrame(self.id, seq, -1, f"frame {seq} is missing")

    def derived(self) -> PostgresDerived:
        state = None if self._state is None else self._state[:5]
        return PostgresDerived(
            self, self._db, self._derived_sql, snapshot=Snapshot(state, self._dump)
        )


class _Cursor:
    """A server-side cursor's rows grouped by their first column (the thread key, ascending)."""

    def __init__(self, conn: Connection, name: str, statement: str, keys: list[int]) -> None:
        self._cur = conn.cursor(name=name, binary=True)
        self._cur.itersize = _FETCH
        self._rows = iter(self._cur.execute(statement, [keys]))
        self._next: tuple[Any, ...] | None = next(self._rows, None)

    def take(self, key: int) -> Rows:
        """The rows of ``key`` (the rows of smaller keys, if any, are skipped)."""
        out: Rows = []
        while self._next is not None and self._next[0] <= key:
            if self._next[0] == key:
                out.append(tuple(self._next[1:]))
            self._next = next(self._rows, None)
        return out

    def close(self) -> None:
        self._cur.close()


@contextmanager
def read_many(store: PostgresStore, threads: Sequence[Thread]) -> Iterator[Iterator[Thread]]:
    """The threads of ``threads``, each as a :class:`SnapshotThread` (or, a long one, as a
    plain thread), in the order of their keys, read in one snapshot while the block lasts."""
    ids = {thread_key(t.id): t.id for t in threads}
    opened: list[_Cursor] = []
    with store._db.connection() as conn:
        try:
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                yield _walk(store, conn, ids, opened)
        finally:
            for cur in opened:  # the transaction's end closed them: no round trip
                cur.close()


def _walk(
    store: PostgresStore, conn: Connection, ids: dict[int, str], opened: list[_Cursor]
) -> Iterator[Thread]:
    s = store.schema
    keys = sorted(ids)
    states: dict[int, tuple[Any, ...]] = {}
    for row in conn.execute(
        "SELECT t.thread_key, t.thread_id, t.head_seq, d.seq, d.messages, d.anchor_seq, "
        f"t.head_digest FROM {s}.threads t LEFT JOIN {s}.derived_threads d "
        "ON d.thread_key = t.thread_key WHERE t.thread_key = ANY(%s) ORDER BY t.thread_key",
        [keys],
    ).fetchall():
        key = int(row[0])
        if row[1] == ids.get(key):  # a key held by another id: that thread has no rows
            digest = bytes(row[6]).hex()
            states[key] = (key, int(row[2]), row[3], row[4], row[5], digest)
    held = [k for k in keys if k in states and states[k][1] < SNAPSHOT_FRAMES]
    cursors = {
        "frames": _Cursor(
            conn,
            "continuity_frames",
            f"SELECT thread_key, seq, line FROM {s}.frames WHERE thread_key = ANY(%s) "
            "ORDER BY thread_key, seq",
            held,
        ),
        "messages": _Cursor(
            conn,
            "continuity_messages",
            f"SELECT thread_key, ordinal, seq, tokens, role, message_id FROM {s}.messages "
            "WHERE thread_key = ANY(%s) ORDER BY thread_key, ordinal",
            held,
        ),
        "checkpoints": _Cursor(
            conn,
            "continuity_checkpoints",
            f"SELECT thread_key, seq, to_seq, checkpoint_id, cut_rule_id, summary_kind, "
            f"summary_artifact_id FROM {s}.checkpoints WHERE thread_key = ANY(%s) "
            "ORDER BY thread_key, seq",
            held,
        ),
        "marks": _Cursor(
            conn,
            "continuity_marks",
            f"SELECT thread_key, seq, type, kind, key, spans FROM {s}.marks "
            "WHERE thread_key = ANY(%s) ORDER BY thread_key, seq",
            held,
        ),
    }
    opened.extend(cursors.values())
    small = set(held)
    for key in keys:
        tid = ids[key]
        if key in states and key not in small:
            yield store.thread(tid)  # long: it reads itself, chunk by chunk
            continue
        state = states.get(key)
        lines = [(int(r[0]), bytes(r[1])) for r in cursors["frames"].take(key)]
        dump = {t: cursors[t].take(key) for t in ("messages", "checkpoints", "marks")}
        if state is not None and state[2] is not None:
            dump["derived_threads"] = [(state[2], state[3], state[4])]
        else:
            dump["derived_threads"] = []
        yield SnapshotThread(store, tid, state=state, lines=lines, dump=dump)
