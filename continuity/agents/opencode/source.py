"""Reading opencode's sessions where opencode keeps them, without ever writing there.

Three shapes hold the same records (``../shared/fixtures/agents/FORMATS.md`` section 3):

- the SQLite store of the 1.2+ line, ``$XDG_DATA_HOME/opencode/opencode.db`` (tables
  ``session``, ``message`` and ``part``; ``data`` is the record's JSON less its ids);
- the JSON tree of the 1.1 line and before, ``storage/`` under the same folder
  (``session/<project>/<ses>.json``, ``message/<ses>/<msg>.json``, ``part/<msg>/<prt>.json``);
- the output of ``opencode export <session>``: ``{info, messages: [{info, parts}]}``.

Each is read as :class:`Session` and :class:`Message` records (a message with its parts, in
id order: opencode's message and part ids ascend with time). A reader is asked for one
session's messages from a message id on, so an incremental ingest reads only what is new.

The database is opened read-only and never changed. SQLite's read-only mode still creates the
``-wal`` and ``-shm`` files of a WAL database when they are missing (and leaves them), so when
there is no ``-wal`` (opencode is not running and checkpointed on exit) the file is opened
``immutable`` instead, which creates nothing, and the read is checked afterwards: if the
database changed meanwhile (opencode started and checkpointed), it is read again the
ordinary read-only way. All of one read happens in one transaction: one snapshot.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol

from continuity.agents.opencode._salvage import Salvaged
from continuity.errors import UnreadableSession

__all__ = [
    "DB_NAME",
    "DbSource",
    "ExportSource",
    "Message",
    "Session",
    "Source",
    "StorageSource",
    "UnreadableSession",
    "data_dir",
    "default_sources",
    "open_source",
]

DB_NAME: Final = "opencode.db"


@dataclass(frozen=True, slots=True)
class Session:
    id: str
    parent_id: str | None
    title: str
    directory: str
    version: str
    time_created: int
    time_updated: int


@dataclass(slots=True)
class Message:
    """One message: its JSON (``info``, the ids included) and its parts' JSON, in order."""

    id: str
    session_id: str
    info: dict[str, Any]
    parts: list[dict[str, Any]] = field(default_factory=list)

    @property
    def role(self) -> str:
        return str(self.info.get("role") or "")

    @property
    def created(self) -> int:
        t = self.info.get("time")
        value = t.get("created") if isinstance(t, dict) else None
        return value if isinstance(value, int) else 0


class Source(Protocol):
    """One place opencode's sessions are read from."""

    @property
    def path(self) -> Path: ...

    def sessions(self) -> list[Session]:
        """Every session, parents before their sub-agent sessions."""
        ...

    def session(self, session_id: str) -> Session | None: ...

    def messages(self, session_id: str, from_id: str = "") -> list[Message]:
        """The session's messages whose id is ``from_id`` or later, with their parts."""
        ...


def data_dir(env: Mapping[str, str] | None = None) -> Path:
    """opencode's data folder: ``$XDG_DATA_HOME/opencode``, else ``~/.local/share/opencode``
    (on every system: opencode uses the XDG layout on macOS too)."""
    env = os.environ if env is None else env
    base = env.get("XDG_DATA_HOME") or ""
    root = (
        Path(base).expanduser() if base else Path(env.get("HOME") or Path.home()) / ".local/share"
    )
    return root / "opencode"


def default_sources(env: Mapping[str, str] | None = None) -> list[Path]:
    """What ``continuity ingest --agent opencode`` reads with no path: the databases of every
    channel (``opencode.db``, ``opencode-<channel>.db``) and the legacy ``storage/`` tree."""
    root = data_dir(env)
    found = sorted(p for p in root.glob("opencode*.db") if p.is_file())
    if (root / "storage" / "session").is_dir():
        found.append(root / "storage")
    return found


def _parents_first(sessions: list[Session]) -> list[Session]:
    by_id = {s.id: s for s in sessions}

    def level(s: Session) -> int:
        seen: set[str] = set()
        d, parent = 0, s.parent_id
        while parent and parent in by_id and parent not in seen:
            seen.add(parent)
            d += 1
            parent = by_id[parent].parent_id
        return d

    return sorted(sessions, key=lambda s: (level(s), s.time_created, s.id))


def _obj(text: str | bytes, damage: list[str] | None = None, where: str = "") -> dict[str, Any]:
    """The JSON object ``text`` holds, or ``{}``; what is not one is added to ``damage`` (as
    ``where (why)``) when given. Nesting is bounded and never raises (``RecursionError``)."""
    from continuity.agents.base.lines import decode_json

    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    try:
        value = decode_json(raw)
    except ValueError as exc:
        why = "nested too deeply" if str(exc) == "nested too deeply" else "not JSON"
        if damage is not None:
            damage.append(f"{where} ({why})")
        return {}
    if not isinstance(value, dict):
        if damage is not None:
            damage.append(f"{where} (not a JSON object)")
        return {}
    return value


def _text(raw: bytes) -> str:
    """A text column as Python reads it: a damaged page can hold bytes that are not UTF-8,
    which cost their characters (U+FFFD), never the read."""
    return raw.decode("utf-8", "replace")


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _session_of(info: dict[str, Any]) -> Session:
    t = info.get("time") if isinstance(info.get("time"), dict) else {}
    assert isinstance(t, dict)
    return Session(
        id=_str(info.get("id")),
        parent_id=_str(info.get("parentID")) or None,
        title=_str(info.get("title")),
        directory=_str(info.get("directory")),
        version=_str(info.get("version")),
        time_created=_int(t.get("created")),
        time_updated=_int(t.get("updated")),
    )


# --- the SQLite store -------------------------------------------------------------------------


class DbSource:
    """``opencode.db``, read-only (see the module's docstring for how)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.damage: list[str] = []
        """What the reads so far could not read, as ``place (why)``: messages or parts whose
        JSON is damaged, sessions whose rows are on a damaged page."""
        self._salvaged: Salvaged | None = None
        """The database read by :mod:`._salvage` (once damage is found), else None."""

    def _uri(self, immutable: bool) -> str:
        quoted = urllib.parse.quote(str(self.path.absolute()))
        return f"file:{quoted}?mode=ro" + ("&immutable=1" if immutable else "")

    def _stamp(self) -> tuple[int, int, bool]:
        st = self.path.stat()
        return st.st_mtime_ns, st.st_size, Path(f"{self.path}-wal").exists()

    def _read(self, query: Any) -> Any:
        """``query(connection)`` on one snapshot of the database."""
        if not self.path.is_file():
            raise FileNotFoundError(2, "no such file", str(self.path))
        for _attempt in range(3):
            before = self._stamp()
            immutable = not before[2]
            try:
                result = self._once(query, immutable)
            except sqlite3.DatabaseError as exc:
                if immutable and self._stamp() != before:
                    continue  # changed under an immutable read: read it again
                raise UnreadableSession(
                    f"{self.path}: cannot read opencode's database ({exc})"
                ) from None
            if not immutable or self._stamp() == before:
                return result
        return self._once(query, False)

    def _once(self, query: Any, immutable: bool) -> Any:
        con = sqlite3.connect(self._uri(immutable), uri=True, isolation_level=None, timeout=5)
        con.text_factory = _text
        try:
            con.execute("BEGIN")
            try:
                return query(con)
            finally:
                # a read-only transaction: ending it changes nothing, and on a damaged page
                # it can fail after the reads are done (or be ended already)
                with contextlib.suppress(sqlite3.DatabaseError):
                    con.execute("COMMIT")
        finally:
            con.close()

    def check(self) -> None:
        """Check the whole file once (SQLite's ``quick_check``: linear in its size, what a
        sweep of every session can afford, not a hook): a damaged index can give a query
        fewer rows without an error, so a damaged database is then read by
        :mod:`._salvage`, never through its indexes."""
        from continuity.agents.opencode._salvage import integrity_ok

        if not self._read(integrity_ok):
            self._salvage()

    def _salvage(self) -> Salvaged:
        if self._salvaged is None:
            from continuity.agents.opencode._salvage import cut_short_copy, salvage

            try:
                found: Salvaged = self._read(salvage)
            except UnreadableSession:
                found = Salvaged(unreadable=True)
            if found.unreadable:
                # SQLite refuses every read of a file shorter than its header says: read a
                # copy whose header says how long it is (opencode's file is never written)
                with cut_short_copy(self.path) as copy:
                    if copy is not None:
                        found = DbSource(copy)._read(salvage)
                        found.damage.insert(0, "the file (cut short: the pages past its end)")
            self._salvaged = found
            self.damage.extend(found.damage)
        return self._salvaged

    def sessions(self) -> list[Session]:
        if self._salvaged is None:
            try:
                return _parents_first(self._read(_db_sessions))
            except UnreadableSession:
                pass  # a damaged page: read what can be
        return _parents_first([_session_row(r) for r in self._salvage().sessions])

    def session(self, session_id: str) -> Session | None:
        if self._salvaged is not None:
            rows = self._salvaged.sessions
            return next((_session_row(r) for r in rows if str(r[0]) == session_id), None)
        found: list[Session] = self._read(lambda con: _db_sessions(con, session_id))
        return found[0] if found else None

    def messages(self, session_id: str, from_id: str = "") -> list[Message]:
        if self._salvaged is None:
            try:
                result: list[Message] = self._read(
                    lambda con: _db_messages(con, session_id, from_id, self.damage)
                )
                return result
            except UnreadableSession:
                pass  # a damaged page: read what can be
        return _salvaged_messages(self._salvage(), session_id, from_id, self.damage)


_SESSION_COLUMNS: Final = "id, parent_id, title, directory, version, time_created, time_updated"


def _db_sessions(con: sqlite3.Connection, session_id: str | None = None) -> list[Session]:
    sql = f"SELECT {_SESSION_COLUMNS} FROM session"
    rows = (
        con.execute(sql + " WHERE id = ?", (session_id,)) if session_id else con.execute(sql)
    ).fetchall()
    return [_session_row(r) for r in rows]


def _session_row(r: Any) -> Session:
    return Session(
        id=str(r[0]),
        parent_id=str(r[1]) if r[1] else None,
        title=str(r[2] or ""),
        directory=str(r[3] or ""),
        version=str(r[4] or ""),
        time_created=_int(r[5]),
        time_updated=_int(r[6]),
    )


def _db_messages(
    con: sqlite3.Connection, session_id: str, from_id: str, damage: list[str] | None = None
) -> list[Message]:
    messages: dict[str, Message] = {}
    # From a cursor: a range of the id index (what is new, whatever the session's length); from
    # the start: the session's index. ``+session_id`` keeps SQLite from choosing the latter,
    # which would read every message of a long session to find the few new ones.
    same = "+session_id" if from_id else "session_id"
    for mid, data in con.execute(
        f"SELECT id, data FROM message WHERE {same} = ? AND id >= ? ORDER BY id",
        (session_id, from_id),
    ):
        info = _obj(data, damage, f"session {session_id} message {mid}")
        info["id"], info["sessionID"] = str(mid), session_id
        messages[str(mid)] = Message(str(mid), session_id, info)
    if not messages:
        return []
    low = min(messages)
    # part_message_id_id_idx: a range of the index, the parts of the new messages (and of other
    # sessions' messages made since, filtered out); +session_id: not the session's index
    for pid, mid, data in con.execute(
        "SELECT id, message_id, data FROM part WHERE message_id >= ? AND +session_id = ? "
        "ORDER BY message_id, id",
        (low, session_id),
    ):
        message = messages.get(str(mid))
        if message is not None:
            part = _obj(data, damage, f"session {session_id} part {pid}")
            if part:
                part["id"], part["messageID"], part["sessionID"] = str(pid), str(mid), session_id
                message.parts.append(part)
    return list(messages.values())


def _salvaged_messages(
    found: Salvaged, session_id: str, from_id: str, damage: list[str]
) -> list[Message]:
    """The session's messages from ``from_id`` on, from what :mod:`._salvage` read."""
    messages: dict[str, Message] = {}
    for mid, data in sorted(found.messages.get(session_id, [])):
        if str(mid) < from_id:
            continue
        info = _obj(data, damage, f"session {session_id} message {mid}")
        info["id"], info["sessionID"] = str(mid), session_id
        messages[str(mid)] = Message(str(mid), session_id, info)
    for pid, mid, data in sorted(found.parts.get(session_id, []), key=lambda r: (r[1], r[0])):
        message = messages.get(str(mid))
        if message is not None:
            part = _obj(data, damage, f"session {session_id} part {pid}")
            if part:
                part["id"], part["messageID"], part["sessionID"] = str(pid), str(mid), session_id
                message.parts.append(part)
    if found.parts_lost:  # a message left without a part had its own on a damaged page
        damage.extend(
            f"session {session_id} message {m.id} (its parts are on a damaged page)"
            for m in messages.values()
            if not m.parts
        )
    return list(messages.values())


# --- the legacy JSON tree ---------------------------------------------------------------------


class StorageSource:
    """The ``storage/`` tree of opencode 1.1 and before (only read)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _session_files(self) -> Iterator[Path]:
        yield from sorted((self.path / "session").glob("*/ses_*.json"))

    def sessions(self) -> list[Session]:
        found = [_session_of(_obj(f.read_bytes())) for f in self._session_files()]
        return _parents_first([s for s in found if s.id])

    def session(self, session_id: str) -> Session | None:
        for f in (self.path / "session").glob(f"*/{session_id}.json"):
            s = _session_of(_obj(f.read_bytes()))
            if s.id:
                return s
        return None

    def messages(self, session_id: str, from_id: str = "") -> list[Message]:
        out: list[Message] = []
        folder = self.path / "message" / session_id
        names = sorted(f.name for f in folder.glob("msg_*.json")) if folder.is_dir() else []
        for name in names:
            mid = name[: -len(".json")]
            if mid < from_id:
                continue
            info = _obj((folder / name).read_bytes())
            info.setdefault("id", mid)
            info.setdefault("sessionID", session_id)
            parts_dir = self.path / "part" / mid
            parts = (
                [_obj(f.read_bytes()) for f in sorted(parts_dir.glob("prt_*.json"))]
                if parts_dir.is_dir()
                else []
            )
            out.append(Message(mid, session_id, info, [p for p in parts if p]))
        return out


# --- an export --------------------------------------------------------------------------------


class ExportSource:
    """What ``opencode export <session>`` printed, saved to a file: one session."""

    def __init__(self, path: Path) -> None:
        self.path = path
        data = _obj(path.read_bytes())
        info = data.get("info")
        messages = data.get("messages")
        if not isinstance(info, dict) or not isinstance(messages, list):
            raise UnreadableSession(f"{path}: not an opencode export ({{info, messages}})")
        self._session = _session_of(info)
        self._messages: list[Message] = []
        for m in messages:
            if not isinstance(m, dict) or not isinstance(m.get("info"), dict):
                continue
            minfo = m["info"]
            parts = [p for p in m.get("parts") or [] if isinstance(p, dict)]
            mid = _str(minfo.get("id"))
            if mid:
                self._messages.append(Message(mid, self._session.id, minfo, parts))
        self._messages.sort(key=lambda m: m.id)

    def sessions(self) -> list[Session]:
        return [self._session]

    def session(self, session_id: str) -> Session | None:
        return self._session if session_id == self._session.id else None

    def messages(self, session_id: str, from_id: str = "") -> list[Message]:
        if session_id != self._session.id:
            return []
        return [m for m in self._messages if m.id >= from_id]


def open_source(path: Path) -> Source:
    """The reader for ``path``: a database file, a ``storage/`` folder (or the data folder
    holding one), or an export; :class:`UnreadableSession` when it is none of them."""
    if path.is_dir():
        for candidate in (path, path / "storage"):
            if (candidate / "session").is_dir() and (candidate / "message").is_dir():
                return StorageSource(candidate)
        if (path / DB_NAME).is_file():
            return DbSource(path / DB_NAME)
        raise UnreadableSession(
            f"{path}: not an opencode storage folder (no session/ and message/)"
        )
    with open(path, "rb") as f:
        head = f.read(16)
    if head.startswith(b"SQLite format 3\0"):
        return DbSource(path)
    if head.lstrip()[:1] == b"{":
        return ExportSource(path)
    raise UnreadableSession(f"{path}: not an opencode database, storage folder or export")
