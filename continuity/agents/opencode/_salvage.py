"""What a damaged opencode database still holds: every row SQLite can still reach, and a name
for what it cannot.

A damaged page stops a query that meets it, and a damaged index can even give fewer rows with
no error at all. So once ``PRAGMA quick_check`` finds damage (or a read fails on it), the
database is read here, once, table by table, never through an index: a scan from the first
rowid up to the damage, one from the last rowid down to it, and each rowid between looked up
alone (a lookup descends from the root straight to its own leaf, so it reaches the rows of an
intact page beside a damaged one). A lookup that fails is a row on a damaged page: counted,
and named when its id is known some other way (a session the primary key's index lists, a
message left without a part).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

__all__ = [
    "MAX_PROBES",
    "Salvaged",
    "cut_short_copy",
    "integrity_ok",
    "rows_until_damage",
    "salvage",
]

MAX_PROBES: Final = 1_000_000
"""The most rowids looked up one by one between the two scans of a table (a damaged page holds
a few hundred rows at most; past this many, the rest of the gap is counted as lost)."""

_LAST_PAGE_ROWS: Final = 4096
"""More rows than a page of 64 KiB (SQLite's largest) can hold: the rowids looked up past the
last row read when the table's last page is damaged."""

SESSION_COLUMNS: Final = "id, parent_id, title, directory, version, time_created, time_updated"


def rows_until_damage(
    con: sqlite3.Connection, sql: str, args: tuple[Any, ...] = ()
) -> tuple[list[Any], bool]:
    """The rows ``sql`` gives before it meets a damaged page, and whether it met one."""
    rows: list[Any] = []
    try:
        for row in con.execute(sql, args):
            rows.append(row)
    except sqlite3.DatabaseError:
        return rows, True
    return rows, False


def integrity_ok(con: sqlite3.Connection) -> bool:
    """Whether SQLite's ``quick_check`` finds the file whole (linear in its size)."""
    rows, damaged = rows_until_damage(con, "PRAGMA quick_check(1)")
    return not damaged and bool(rows) and rows[0][0] == "ok"


@dataclass
class Table:
    """What could be read of one table: its rows (less their rowid), how many rows are on
    damaged pages, and whether nothing of it could be reached at all."""

    rows: list[Any] = field(default_factory=list)
    lost: int = 0
    unreachable: bool = False


def salvage_table(con: sqlite3.Connection, table: str, columns: str) -> Table:
    """Every row of ``table`` that can still be read (see the module's docstring)."""
    sql = f"SELECT rowid, {columns} FROM {table} NOT INDEXED"
    forward, cut = rows_until_damage(con, sql + " ORDER BY rowid")
    if not cut:
        return Table([r[1:] for r in forward])
    backward, _ = rows_until_damage(con, sql + " ORDER BY rowid DESC")
    if not forward and not backward:
        return Table(unreachable=True)
    got = {r[0]: r for r in (*forward, *backward)}
    low = forward[-1][0] if forward else 0
    if not backward:
        # the last page is damaged: how far its rowids go is on it; look up a page's worth
        # of rows past the last one read (those before it on other pages come back)
        high, lost = low + 1 + _LAST_PAGE_ROWS, 1
    else:
        high = backward[-1][0]
        lost = max(0, high - low - 1 - MAX_PROBES)
    failed = 0
    for rowid in range(low + 1, min(high, low + 1 + MAX_PROBES)):
        try:
            row = con.execute(sql + " WHERE rowid = ?", (rowid,)).fetchone()
        except sqlite3.DatabaseError:
            failed += 1
            continue
        if row is not None:
            got[rowid] = row
    return Table([got[k][1:] for k in sorted(got)], failed if backward else lost)


@dataclass
class Salvaged:
    """A damaged database, read once: sessions (rows of :data:`SESSION_COLUMNS`), each
    session's message rows ``(id, data)`` and part rows ``(id, message_id, data)``, and what
    could not be read, as ``place (why)``."""

    sessions: list[Any] = field(default_factory=list)
    messages: dict[str, list[Any]] = field(default_factory=dict)
    parts: dict[str, list[Any]] = field(default_factory=dict)
    parts_lost: bool = False
    """Some part rows are on a damaged page: a message left without a part had its there."""
    damage: list[str] = field(default_factory=list)
    unreadable: bool = False
    """Not one table could be reached (a file SQLite refuses as a whole)."""


def _said(table: Table, noun: str) -> str | None:
    if table.unreachable:
        return f"{noun} table (no page of it can be reached: every {noun} in it is lost)"
    if table.lost:
        return f"{noun} table (rows on a damaged page: the {noun}s on it are lost)"
    return None


def salvage(con: sqlite3.Connection) -> Salvaged:
    """Read what the database still holds (see the module's docstring)."""
    out = Salvaged()
    sessions = salvage_table(con, "session", SESSION_COLUMNS)
    out.sessions = sessions.rows
    if sessions.lost or sessions.unreachable:
        found = {str(r[0]) for r in sessions.rows}
        listed, _ = rows_until_damage(con, "SELECT id FROM session ORDER BY id")
        named = [str(r[0]) for r in listed if str(r[0]) not in found]
        out.damage += [f"session {sid} (its row is on a damaged page)" for sid in named]
        if len(named) < sessions.lost or sessions.unreachable:
            out.damage.append(_said(sessions, "session") or "")
    messages = salvage_table(con, "message", "id, session_id, data")
    for mid, sid, data in messages.rows:
        out.messages.setdefault(str(sid), []).append((mid, data))
    parts = salvage_table(con, "part", "id, message_id, session_id, data")
    for pid, mid, sid, data in parts.rows:
        out.parts.setdefault(str(sid), []).append((pid, mid, data))
    out.parts_lost = parts.lost > 0 or parts.unreachable
    said = _said(messages, "message")
    if said:
        out.damage.append(said)
    out.unreadable = sessions.unreachable and messages.unreachable and parts.unreachable
    return out


_HEADER: Final = 100


@contextlib.contextmanager
def cut_short_copy(path: Path) -> Iterator[Path | None]:
    """A temporary copy of database ``path`` whose header gives its page count as the file's
    own length, when the file is shorter than its header says (a copy or a disk cut short),
    else None: SQLite refuses every read of such a file, and reads the copy's whole pages."""
    import os
    import tempfile

    with open(path, "rb") as f:
        head = f.read(_HEADER)
        size = os.fstat(f.fileno()).st_size
    if len(head) < _HEADER or not head.startswith(b"SQLite format 3\0"):
        yield None
        return
    page = int.from_bytes(head[16:18], "big")
    page = 65536 if page == 1 else page
    pages = int.from_bytes(head[28:32], "big")
    if not pages or size >= pages * page or size < page:
        yield None
        return
    whole = size // page
    fd, name = tempfile.mkstemp(suffix=".db")
    try:
        with os.fdopen(fd, "wb") as out, open(path, "rb") as src:
            for _ in range(whole):
                out.write(src.read(page))
            out.seek(28)
            out.write(whole.to_bytes(4, "big"))
        yield Path(name)
    finally:
        Path(name).unlink(missing_ok=True)
