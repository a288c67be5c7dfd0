"""The sessions file: ``continuity sessions`` and ``stats`` answered without the catalog's rows.

Written next to the listing file (:mod:`continuity.caches.listing`) whenever the catalog is found
current for every log (:func:`continuity.caches.catalog.catalog_view`): what ``stats`` sums of
the rows, what ``sessions`` and ``sessions --json`` print, and, for each session (sub-agents'
too), the pieces its line and its JSON are made of, for the filters (``--agent``,
``--project``, ``--agents``). Each title is redacted as ``sessions`` redacts it (the store's
``redaction.json``, else the built-in rules) once, when its entry is made; an entry whose row
did not change is taken from the file it replaces (the same row, the same code and config: the
same entry), so a catch-up after an append redacts the new titles only.

The file is a function of the catalog's bytes and of :func:`~continuity.caches.listing.
sessions_key` (the code that renders and redacts, the redaction config): deleting it and
listing again, or ``rebuild-index``, writes the same bytes. The fast path serves it only while
the listing file vouches for that catalog and the key is the one it names.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import TYPE_CHECKING, Final, NamedTuple

import msgspec

from continuity._fs import atomic_write
from continuity._text import render_sessions, session_head, session_named
from continuity.agents.table import AGENTS, agent_named, agent_of_session, is_subagent, known_agents
from continuity.caches.listing import (
    PARTS,
    SESSIONS_FILE,
    encode_sessions_file,
    escape,
    sessions_key,
    sessions_parts,
    sessions_prefix,
    unescape,
)

if TYPE_CHECKING:
    from continuity.redaction import Redactor
    from continuity.store.catalog import CatalogRow

__all__ = [
    "Entry",
    "SessionInfo",
    "entries_of",
    "session_info",
    "stamp",
    "write_sessions_file",
]


_encoder: Final = msgspec.json.Encoder()


class Entry(NamedTuple):
    """One session's lines in the sessions file's parts (:data:`~continuity.caches.listing.
    PARTS`), each field as the file holds it (escaped)."""

    keys: str
    table: str
    json: str
    check: str


def entries_of(parts: list[bytes]) -> list[Entry]:
    """The entries of a sessions file's parts; [] when they do not pair up."""
    found = [p.decode().split("\n") for p in parts[PARTS.index("keys") :]]
    if len({len(f) for f in found}) != 1:
        return []
    return [Entry(*fields) for fields in zip(*found, strict=True)][:-1]  # after the last newline


class SessionInfo(msgspec.Struct, frozen=True, kw_only=True):
    """A session as ``continuity sessions`` lists it (one JSON object a line with ``--json``)."""

    thread_id: str
    agent: str = "claude-code"
    """The agent's name (:mod:`continuity.agents.table`): ``claude-code``, ``codex``, …"""
    project: str
    git_branch: str
    started: str
    last_active: str
    last_active_ms: int
    parent_thread_id: str | None
    messages: int = 0
    compactions: int = 0
    title: str | None = None
    first_ms: int = 0
    context_tokens: int | None = None
    """How full the session's context was at its latest answer, by the agent's own count
    (:mod:`continuity.rolling.usage`; asked for with ``usage=True``)."""
    context_window: int | None = None
    """The model's window, with ``context_tokens``."""


def stamp(ms: int) -> str:
    """A session's start or last activity as ``sessions`` shows it (UTC, to the minute)."""
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(ms / 1000)) if ms else "-"


def session_info(row: CatalogRow) -> SessionInfo:
    """What ``continuity sessions`` shows of the session whose catalog row is ``row``."""
    last_ms = row.last_message_ms if row.last_message_ms is not None else row.first_ms
    agent = agent_of_session(row.thread_id, row.source)
    return SessionInfo(
        thread_id=row.thread_id,
        agent=agent.name if agent is not None else row.source,
        project=row.project,
        git_branch=row.git_branch,
        started=stamp(row.first_ms),
        last_active=stamp(last_ms),
        last_active_ms=last_ms,
        parent_thread_id=row.parent_thread_id,
        messages=row.messages,
        compactions=row.compactions,
        title=row.title,
        first_ms=row.first_ms,
    )


class _Titles:
    """The redactor ``sessions`` applies to titles, loaded on first use (most entries are
    taken from the file they replace)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.loaded = False
        self.redactor: Redactor | None = None

    def redact(self, title: str | None) -> str | None:
        if not title:
            return title
        if not self.loaded:
            from continuity.redaction import CONFIG_FILE, load_redactor

            self.redactor = load_redactor(self.root / CONFIG_FILE)
            self.loaded = True
        return title if self.redactor is None else self.redactor.redact_text(title)[0]


def _entry(check: str, row: CatalogRow, titles: _Titles) -> tuple[Entry, tuple[str, str, str]]:
    """The entry of ``row``, with its agent column, thread id and the rest of its line."""
    s = session_info(row)
    title = titles.redact(s.title)
    who = s.agent or "-"
    head = session_head(s.project, s.git_branch, s.started, s.messages, s.compactions)
    named = session_named(title)
    line = _encoder.encode(msgspec.structs.replace(s, title=title)).decode()
    sub = "1" if is_subagent(row.thread_id, row.parent_thread_id) else "0"
    keys = f"{escape(who)}\t{sub}\t{escape(s.project)}"
    table = f"{escape(s.thread_id)}\t{escape(head)}\t{escape(named)}"
    return Entry(keys, table, line, check), (who, s.thread_id, head + named)


def _shown(entry: Entry) -> tuple[str, str, str]:
    """An entry's agent column, thread id and the rest of its line."""
    tid, head, named = entry.table.split("\t")
    return unescape(entry.keys.partition("\t")[0]), unescape(tid), unescape(head + named)


def _stats(rows: list[CatalogRow]) -> bytes:
    """What ``stats`` sums of the rows (:func:`continuity.maintenance.stats.store_stats`): a
    line of counts (threads, frames, messages, checkpoints, log bytes, redactions, threads with
    a redaction), a line of each agent's name, sessions and display name (tab-separated), and
    the JSON of the redactions by thread and of the sessions by agent."""
    redactions: dict[str, int] = {}
    found: dict[str, int] = {}
    frames = messages = checkpoints = log_bytes = 0
    for r in rows:
        frames += r.frames
        messages += r.messages
        checkpoints += r.checkpoints
        log_bytes += r.log_bytes
        if r.redactions:
            redactions[r.thread_id] = r.redactions
        agent = agent_of_session(r.thread_id, r.source) if r.created else None
        if agent is not None and not is_subagent(r.thread_id, r.parent_thread_id):
            found[agent.name] = found.get(agent.name, 0) + 1
    sessions = dict(sorted(found.items()))
    counts = (
        len(rows),
        frames,
        messages,
        checkpoints,
        log_bytes,
        sum(redactions.values()),
        len(redactions),
    )
    return b"\n".join(
        [
            " ".join(map(str, counts)).encode(),
            "\t".join(f"{name}\t{n}\t{_display(name)}" for name, n in sessions.items()).encode(),
            _encoder.encode(redactions),
            _encoder.encode(sessions),
        ]
    )


def _by_agent(entries: list[Entry], default: list[tuple[str, str, str]]) -> list[bytes]:
    """The parts ``agents`` and ``agents_json``: what ``sessions --agent X`` prints, and with
    ``--json``, for each agent X with sessions (``default``: the lines of the entries that are
    not sub-agents', in their order), each after a line of the agents' names and lengths."""
    texts: dict[str, list[tuple[str, str, str]]] = {}
    jsons: dict[str, list[str]] = {}
    shown = iter(default)
    for e in entries:
        if e.keys.split("\t")[1] == "0":
            line = next(shown)
            texts.setdefault(line[0], []).append(line)
            jsons.setdefault(line[0], []).append(e.json + "\n")
    made: list[tuple[str, bytes, bytes]] = []
    for name in sorted(texts):
        if not name or any(c in name for c in " :\t\n\\"):
            continue  # not a name the table gives: the filter reads the entries
        text = (render_sessions(texts[name]) + "\n").encode()
        made.append((name, text, "".join(jsons[name]).encode()))
    return [
        _blocks([(name, text) for name, text, _json in made]),
        _blocks([(name, json) for name, _text, json in made]),
    ]


def _blocks(named: list[tuple[str, bytes]]) -> bytes:
    """Blocks after a line of their names and lengths (:func:`~continuity.caches.listing.
    agent_part` reads one)."""
    index = " ".join(f"{name}:{len(block)}" for name, block in named)
    return index.encode() + b"\n" + b"".join(block for _name, block in named)


def _display(name: str) -> str:
    """An agent's display name, as ``stats`` shows it."""
    agent = agent_named(name)
    return agent.display if agent is not None else name


def write_sessions_file(root: Path, catalog: bytes, rows: list[CatalogRow]) -> None:
    """Write ``<root>/cache/sessions.v1`` for the catalog ``catalog`` (its bytes), whose rows
    are ``rows`` (each current: the listing file vouches for them), unless the file there is
    that already. Nothing when the redaction config does not load (``sessions`` fails on it),
    a line would hold an escape sequence (click strips them from a pipe) or this process knows
    an outside package's agent (a process that does not would list other sessions)."""
    from continuity.errors import InvalidSettings

    key = sessions_key(root)
    if key is None or known_agents() != AGENTS:
        return  # an outside agent's sessions count in this process only: not a pure function
    side = root / "cache" / SESSIONS_FILE
    try:
        old = side.read_bytes()
    except OSError:
        old = b""
    if sessions_parts(old, sessions_prefix(catalog, key)) is not None:
        return
    reuse: dict[str, Entry] = {}
    # the same code and config, another catalog: its entries of unchanged rows stand
    head = old.split(b"\n", 1)[0].split(b" ")
    if len(head) == 4 + len(PARTS) and head[3].decode(errors="replace") == key:
        before = sessions_parts(old, b" ".join(head[:4]) + b" ")
        if before is not None:
            with contextlib.suppress(UnicodeDecodeError):
                reuse = {e.check: e for e in entries_of(before)}
    titles = _Titles(root)
    found: list[tuple[int, str, Entry, tuple[str, str, str] | None]] = []
    try:
        for row in rows:
            if not row.created or agent_of_session(row.thread_id, row.source) is None:
                continue
            # a row is a function of its log, and a log of its length and last digest
            check = f"{escape(row.thread_id)} {row.log_bytes} {row.head_digest}"
            entry = reuse.get(check)
            shown = None
            if entry is None:
                entry, shown = _entry(check, row, titles)
            last_ms = row.last_message_ms if row.last_message_ms is not None else row.first_ms
            found.append((last_ms, row.thread_id, entry, shown))
    except InvalidSettings:
        return
    found.sort(key=lambda f: (f[0], f[1]))
    entries = [f[2] for f in found]
    default = [
        _shown(entry) if shown is None else shown
        for _ms, _tid, entry, shown in found
        if entry.keys.split("\t")[1] == "0"
    ]
    text = render_sessions(default) + "\n" if default else "no sessions archived yet\n"
    lines = "".join(e.json + "\n" for e in entries if e.keys.split("\t")[1] == "0")
    parts = [_stats(rows), text.encode(), lines.encode(), *_by_agent(entries, default)]
    for i in range(len(PARTS) - len(parts)):  # keys, table, json, checks: Entry's fields
        parts.append("".join(e[i] + "\n" for e in entries).encode())
    if any(b"\x1b" in part for part in parts[3:5]):
        return  # click strips escape sequences from a pipe: the typer command prints them
    data = encode_sessions_file(catalog, key, parts)
    with contextlib.suppress(OSError):  # a cache: the next listing takes the full path again
        atomic_write(side, data, durable=False)
