"""The PostgreSQL store's derived tables: what the file caches hold, as indexed rows (ADR 0025).

Per thread: ``messages`` (ordinal → seq, tokens, role, message id), ``checkpoints``, ``marks``
(records and retractions) and a watermark row in ``derived_threads`` (the last seq covered,
the message count and the default anchor there). They are written in the append's own
transaction, from the lines being stored, by :func:`continuity.store.derived.derive_lines`
(which sorts frames into entries with the file caches' own
:func:`~continuity.store.derived.sort_entries`), so they are never behind the frames that code
wrote.
Rows behind the log (frames written by older code; rows deleted) are derived again from the
``frames`` table under the thread's head-row lock, the next time anyone appends or reads.

Nothing here imports psycopg: the connections are the store's, handed in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import msgspec

from continuity.store.derived import (
    CheckpointEntry,
    Derived,
    DerivedState,
    MarkEntry,
    derive_lines,
)
from continuity.store.postgres.keys import thread_key
from continuity.summary import CUMULATIVE_V1

if TYPE_CHECKING:
    from continuity.store.base import Thread
    from continuity.store.postgres.db import Connection, Database

__all__ = [
    "DerivedSql",
    "PostgresDerived",
    "Snapshot",
    "Watermark",
    "catch_up",
    "write_derived",
]

_CATCH_UP_CHUNK: Final = 5000
_spans_encoder: Final = msgspec.json.Encoder()
_spans_decoder: Final = msgspec.json.Decoder(list[tuple[int, int]])


class Watermark(NamedTuple):
    """A thread's ``derived_threads`` row: the rows cover seqs ``0 .. seq``."""

    seq: int
    messages: int
    anchor_seq: int


EMPTY: Final = Watermark(-1, 0, -1)


class DerivedSql:
    """The derived tables' statements for one store schema."""

    def __init__(self, s: str) -> None:
        self.schema = s
        self.state = (
            "SELECT t.thread_key, t.head_seq, d.seq, d.messages, d.anchor_seq "
            f"FROM {s}.threads t LEFT JOIN {s}.derived_threads d ON d.thread_key = %(key)s "
            "WHERE t.thread_key = %(key)s AND t.thread_id = %(tid)s"
        )
        # The head row alone is locked (no join under FOR UPDATE: see keys.py).
        self.lock_state = (
            "SELECT thread_key, head_seq, "
            + ", ".join(
                f"(SELECT {c} FROM {s}.derived_threads WHERE thread_key = %(key)s)"
                for c in ("seq", "messages", "anchor_seq")
            )
            + f" FROM {s}.threads WHERE thread_key = %(key)s AND thread_id = %(tid)s FOR UPDATE"
        )
        # One statement of arrays, not COPY: it can go in the append's pipeline (one round
        # trip for the whole append; COPY cannot be pipelined).
        self.insert_messages = (
            f"INSERT INTO {s}.messages (thread_key, ordinal, seq, tokens, role, message_id) "
            "SELECT %b, * FROM unnest(%b::int8[], %b::int8[], %b::int8[], %b::int2[], %b::text[])"
        )
        self.insert_checkpoint = (
            f"INSERT INTO {s}.checkpoints (thread_key, seq, to_seq, checkpoint_id, cut_rule_id, "
            "summary_kind, summary_artifact_id) VALUES (%s, %s, %s, %s, %s, %s, %s)"
        )
        self.insert_mark = (
            f"INSERT INTO {s}.marks (thread_key, seq, type, kind, key, spans) "
            "VALUES (%s, %s, %s, %s, %s, %s)"
        )
        self.set_watermark = (
            f"INSERT INTO {s}.derived_threads (thread_key, seq, messages, anchor_seq) "
            "VALUES (%s, %s, %s, %s) ON CONFLICT (thread_key) DO UPDATE SET seq = excluded.seq, "
            "messages = excluded.messages, anchor_seq = excluded.anchor_seq"
        )
        self.drop_past = [
            f"DELETE FROM {s}.{t} WHERE thread_key = %s AND seq > %s"
            for t in ("messages", "checkpoints", "marks")
        ]
        self.drop_watermark = f"DELETE FROM {s}.derived_threads WHERE thread_key = %s"
        self.frames = (
            f"SELECT seq, line FROM {s}.frames WHERE thread_key = %s AND seq BETWEEN %s AND %s "
            "ORDER BY seq"
        )
        # -- reads --
        self.messages = (
            f"SELECT seq, tokens FROM {s}.messages WHERE thread_key = %s "
            "AND ordinal >= %s AND ordinal < %s ORDER BY ordinal"
        )
        self.count_upto = (
            f"SELECT ordinal FROM {s}.messages WHERE thread_key = %s AND seq <= %s "
            "ORDER BY seq DESC LIMIT 1"
        )
        self.message_id = (
            f"SELECT seq FROM {s}.messages WHERE thread_key = %s AND message_id = %s "
            "AND seq <= %s ORDER BY seq DESC LIMIT 1"
        )
        cols = "seq, to_seq, checkpoint_id, cut_rule_id, summary_kind, summary_artifact_id"
        self.checkpoints = (
            f"SELECT {cols} FROM {s}.checkpoints WHERE thread_key = %s AND seq <= %s ORDER BY seq"
        )
        self.latest_checkpoint = (
            f"SELECT {cols} FROM {s}.checkpoints WHERE thread_key = %s "
            f"AND summary_kind = '{CUMULATIVE_V1}' AND to_seq <= %s AND seq <= %s "
            "AND checkpoint_id <> ALL(%s) ORDER BY to_seq DESC, seq DESC LIMIT 1"
        )
        self.other_checkpoints = (
            f"SELECT {cols} FROM {s}.checkpoints WHERE thread_key = %s "
            f"AND summary_kind <> '{CUMULATIVE_V1}' AND seq <= %s AND to_seq <= %s ORDER BY seq"
        )
        self.retractions = (
            f"SELECT seq, spans FROM {s}.marks WHERE thread_key = %(key)s "
            "AND type = 'retraction' AND seq <= %(head)s "
            f"UNION ALL (SELECT seq, NULL FROM {s}.marks WHERE thread_key = %(key)s "
            "AND seq <= %(head)s ORDER BY seq DESC LIMIT 1) ORDER BY 1"
        )
        self.records_by_kind = (
            f"SELECT seq FROM {s}.marks WHERE thread_key = %s AND type = 'record' "
            "AND kind = %s AND seq <= %s ORDER BY seq DESC LIMIT %s"
        )
        self.records_by_key = (
            f"SELECT seq FROM {s}.marks WHERE thread_key = %s AND type = 'record' "
            "AND kind = %s AND key = %s AND seq <= %s ORDER BY seq DESC LIMIT %s"
        )
        self.record_kinds = (
            f"SELECT DISTINCT kind FROM {s}.marks WHERE thread_key = %s AND type = 'record' "
            "AND seq <= %s"
        )
        self.dump = {
            "messages": f"SELECT ordinal, seq, tokens, role, message_id FROM {s}.messages "
            "WHERE thread_key = %s ORDER BY ordinal",
            "checkpoints": f"SELECT {cols} FROM {s}.checkpoints WHERE thread_key = %s ORDER BY seq",
            "marks": f"SELECT seq, type, kind, key, spans FROM {s}.marks WHERE thread_key = %s "
            "ORDER BY seq",
            "derived_threads": f"SELECT seq, messages, anchor_seq FROM {s}.derived_threads "
            "WHERE thread_key = %s",
        }


def _spans(mark: MarkEntry) -> str:
    return _spans_encoder.encode(mark.spans).decode()


def write_derived(
    conn: Connection,
    sql: DerivedSql,
    thread_id: str,
    key: int,
    mark: Watermark,
    lines: Sequence[bytes],
    first: int,
) -> Watermark:
    """Derive and insert the rows of ``lines`` (frames ``first ..``, right after ``mark``);
    the new watermark (not yet written: the caller stores it with the head)."""
    derived = derive_lines(thread_id, lines, first, mark.messages)
    _insert(conn, sql, key, derived)
    anchor = mark.anchor_seq if derived.anchor_seq is None else derived.anchor_seq
    return Watermark(first + len(lines) - 1, mark.messages + len(derived.messages), anchor)


def _insert(conn: Connection, sql: DerivedSql, key: int, derived: Derived) -> None:
    if derived.messages:
        columns = list(zip(*derived.messages, strict=True))
        conn.execute(sql.insert_messages, [key, *map(list, columns)])
    if derived.checkpoints:
        conn.cursor().executemany(
            sql.insert_checkpoint,
            [
                (
                    key,
                    c.seq,
                    c.to_seq,
                    c.checkpoint_id,
                    c.cut_rule_id,
                    c.summary_kind,
                    c.summary_artifact_id,
                )
                for c in derived.checkpoints
            ],
        )
    if derived.marks:
        conn.cursor().executemany(
            sql.insert_mark, [(key, m.seq, m.type, m.kind, m.key, _spans(m)) for m in derived.marks]
        )


def watermark_of(row: Sequence[object] | None) -> Watermark | None:
    """The watermark in the last three columns of a state row (None: the thread has none)."""
    if row is None or row[-3] is None:
        return None
    seq, messages, anchor = row[-3], row[-2], row[-1]
    assert isinstance(seq, int) and isinstance(messages, int) and isinstance(anchor, int)
    return Watermark(seq, messages, anchor)


def catch_up(
    conn: Connection,
    sql: DerivedSql,
    thread_id: str,
    key: int,
    mark: Watermark | None,
    head_seq: int,
) -> tuple[Watermark, int]:
    """Derive the rows of frames ``mark.seq + 1 .. head_seq`` from the frames table (inside the
    caller's transaction, which holds the thread's head row) and store the watermark; (the new
    watermark, frames read). ``mark`` None: none is stored, so any rows are dropped first."""
    start = EMPTY if mark is None else mark
    if start.seq > head_seq:  # rows past the log: only a hand-edited database; derive again
        start = EMPTY
    for statement in sql.drop_past:  # what a rebuild or a crashed derivation may have left
        conn.execute(statement, [key, start.seq])
    current, read = start, 0
    lo = start.seq + 1
    while lo <= head_seq:
        hi = min(head_seq, lo + _CATCH_UP_CHUNK - 1)
        rows = conn.execute(sql.frames, [key, lo, hi], binary=True).fetchall()
        lines = [bytes(r[1]) for r in rows]
        if [r[0] for r in rows] != list(range(lo, hi + 1)):
            from continuity.errors import CorruptFrame

            raise CorruptFrame(thread_id, lo, -1, "frames are missing from the table")
        current = write_derived(conn, sql, thread_id, key, current, lines, lo)
        read += len(lines)
        lo = hi + 1
    conn.execute(sql.set_watermark, [key, *current])
    return current, read


class Snapshot(NamedTuple):
    """A thread's state row (as :attr:`DerivedSql.state` reads it; None: no such thread) and
    its rows in every derived table (as :meth:`PostgresDerived.dump` reads them), read by a
    store-wide pass (:mod:`.bulk`)."""

    state: tuple[Any, ...] | None
    dump: dict[str, list[tuple[Any, ...]]]


class PostgresDerived:
    """A thread's derived rows (:class:`continuity.store.derived.DerivedIndex`), read through
    ``db`` with the statements of its store's schema (``sql``); ``thread`` gives the frames a
    check compares them with. ``snapshot``: its state and rows as a store-wide pass read them,
    which :meth:`problems` checks instead of reading them again."""

    def __init__(
        self, thread: Thread, db: Database, sql: DerivedSql, *, snapshot: Snapshot | None = None
    ) -> None:
        self.thread = thread
        self._db = db
        self._sql = sql
        self._key = -1
        self._snapshot = snapshot

    def _rows(
        self, statement: str, params: Sequence[Any] | Mapping[str, Any]
    ) -> list[tuple[Any, ...]]:
        with self._db.connection() as conn:
            return conn.execute(statement, params).fetchall()

    def state(self) -> DerivedState:
        rows = self._rows(self._sql.state, self._ids())
        if not rows:
            return DerivedState(-1, 0, -1)
        key, head = rows[0][0], rows[0][1]
        assert isinstance(key, int) and isinstance(head, int)
        self._key = key
        mark = watermark_of(rows[0])
        if mark is None or mark.seq != head:
            mark = self._catch_up()
        return DerivedState(mark.seq, mark.messages, mark.anchor_seq)

    def _ids(self) -> dict[str, object]:
        return {"key": thread_key(self.thread.id), "tid": self.thread.id}

    def _catch_up(self, *, rebuild: bool = False) -> Watermark:
        with self._db.transaction(durable=False) as conn:
            row = conn.execute(self._sql.lock_state, self._ids()).fetchone()
            if row is None:
                return EMPTY
            key, head = row[0], row[1]
            mark = None if rebuild else watermark_of(row)
            if mark is not None and mark.seq == head:
                return mark  # another process caught up while this one waited
            if rebuild:
                conn.execute(self._sql.drop_watermark, [key])
            self._key = key
            return catch_up(conn, self._sql, self.thread.id, key, mark, head)[0]

    def _need_key(self) -> int:
        if self._key < 0:
            self.state()
        return self._key

    def messages(self, start: int, stop: int) -> list[tuple[int, int]]:
        if stop <= start:
            return []
        rows = self._rows(self._sql.messages, [self._need_key(), max(0, start), stop])
        return [(int(r[0]), int(r[1])) for r in rows]

    def count_upto(self, seq: int) -> int:
        if seq < 0:
            return 0
        rows = self._rows(self._sql.count_upto, [self._need_key(), seq])
        return int(rows[0][0]) + 1 if rows else 0

    def seq_of_message_id(self, message_id: str, head: int) -> int | None:
        rows = self._rows(self._sql.message_id, [self._need_key(), message_id, head])
        return int(rows[0][0]) if rows else None

    @staticmethod
    def _checkpoint(r: Sequence[Any]) -> CheckpointEntry:
        return CheckpointEntry(*r)

    def checkpoints(self, head: int) -> list[CheckpointEntry]:
        rows = self._rows(self._sql.checkpoints, [self._need_key(), head])
        return [self._checkpoint(r) for r in rows]

    def latest_checkpoint(
        self, max_to_seq: int, anchor_seq: int, exclude: frozenset[str]
    ) -> CheckpointEntry | None:
        params = [self._need_key(), min(max_to_seq, anchor_seq), anchor_seq, sorted(exclude)]
        rows = self._rows(self._sql.latest_checkpoint, params)
        return self._checkpoint(rows[0]) if rows else None

    def other_checkpoints(self, anchor_seq: int) -> list[CheckpointEntry]:
        rows = self._rows(self._sql.other_checkpoints, [self._need_key(), anchor_seq, anchor_seq])
        return [self._checkpoint(r) for r in rows]

    def retractions(self, head: int) -> tuple[list[MarkEntry], int]:
        rows = self._rows(self._sql.retractions, {"key": self._need_key(), "head": head})
        found: list[MarkEntry] = []
        last = -1
        for seq, spans in rows:
            assert isinstance(seq, int)
            last = max(last, seq)
            if spans is not None and (not found or found[-1].seq != seq):
                assert isinstance(spans, str)
                found.append(MarkEntry(seq, "retraction", spans=_spans_decoder.decode(spans)))
        return found, last

    def record_seqs(
        self, kind: str, key: str | None, at_or_before: int, limit: int | None
    ) -> list[int]:
        n = limit if limit is not None else None
        if key is None:
            rows = self._rows(self._sql.records_by_kind, [self._need_key(), kind, at_or_before, n])
        else:
            rows = self._rows(
                self._sql.records_by_key, [self._need_key(), kind, key, at_or_before, n]
            )
        return [int(r[0]) for r in rows]

    def record_kinds(self, head: int) -> list[str]:
        rows = self._rows(self._sql.record_kinds, [self._need_key(), head])
        return sorted(str(r[0]) for r in rows)

    # -- rebuilding and checking --

    def rebuild(self) -> int:
        """Drop the thread's derived rows and derive them again from its frames."""
        return self._catch_up(rebuild=True).seq + 1

    def dump(self) -> dict[str, list[tuple[Any, ...]]]:
        """The thread's rows in every derived table, in key order (for tests and checks)."""
        key = self._need_key()
        out: dict[str, list[tuple[Any, ...]]] = {}
        with self._db.connection() as conn, conn.pipeline():  # one round trip for all four
            cursors = {t: conn.execute(q, [key]) for t, q in self._sql.dump.items()}
            for table, cur in cursors.items():
                out[table] = [tuple(r) for r in cur.fetchall()]
        return out

    def problems(self) -> list[str]:
        given = self._snapshot
        if given is not None:
            rows: list[tuple[Any, ...]] = [] if given.state is None else [given.state]
        else:
            rows = self._rows(self._sql.state, self._ids())
        if not rows:
            return []
        self._key = int(rows[0][0])
        have = self.dump() if given is None else given.dump
        mark = watermark_of(rows[0])
        if mark is None:
            extra = [t for t in ("messages", "checkpoints", "marks") if have[t]]
            return [f"{t} rows without a watermark" for t in extra]
        lines = [line for _seq, line in self.thread.read_lines(to_seq=mark.seq)]
        if len(lines) != mark.seq + 1:
            return [f"the watermark says seq {mark.seq}, but the log ends at {len(lines) - 1}"]
        want = derive_lines(self.thread.id, lines, 0, 0)
        expected: dict[str, list[tuple[Any, ...]]] = {
            "messages": [tuple(m) for m in want.messages],
            "checkpoints": [_fields(c) for c in want.checkpoints],
            "marks": [(m.seq, m.type, m.kind, m.key, _spans(m)) for m in want.marks],
            "derived_threads": [
                (
                    mark.seq,
                    len(want.messages),
                    -1 if want.anchor_seq is None else want.anchor_seq,
                )
            ],
        }
        found = []
        for table, rows_wanted in expected.items():
            got = have[table]
            if table != "derived_threads":
                got = [r for r in got if int(r[1 if table == "messages" else 0]) <= mark.seq]
            if got != rows_wanted:
                found.append(f"derived table {table} differs from the log")
        past = [
            t
            for t in ("messages", "checkpoints", "marks")
            if any(int(r[1 if t == "messages" else 0]) > mark.seq for r in have[t])
        ]
        found.extend(
            f"derived table {t} has rows past its watermark (seq {mark.seq})" for t in past
        )
        return found


def _fields(c: CheckpointEntry) -> tuple[object, ...]:
    return (c.seq, c.to_seq, c.checkpoint_id, c.cut_rule_id, c.summary_kind, c.summary_artifact_id)
