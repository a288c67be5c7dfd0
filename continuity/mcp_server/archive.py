"""What every tool works on: the store, the project, the current session, redaction, cursors.

The project is the server's working directory (``$CLAUDE_PROJECT_DIR`` when the agent sets
it): the path the agent's sessions record as theirs. The current session is the one the hooks
noted as live for that project (:mod:`continuity.caches.live_session`), read again on every
call (a ``/clear`` starts another while the server runs on); with no note, the project's most
recently active session.

Everything a tool returns passes through the store's redaction (the one ingest applies:
the store's own redactor, ``redaction.json``, or the built-in rules), whatever wrote the frames.
A tool fails with :class:`ToolError`: one line the model reads and can act on.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import blake3
import msgspec

from continuity import frames as fr
from continuity.agents.table import agent_named
from continuity.caches.catalog import CatalogRow, catalog_view
from continuity.caches.live_session import noted_session
from continuity.errors import ContinuityError, InvalidThreadId
from continuity.redaction import Redactor
from continuity.store.base import BaseStore, Thread

__all__ = [
    "Archive",
    "ToolError",
    "ToolResult",
    "arg_int",
    "arg_str",
    "make_cursor",
    "open_cursor",
    "parse_time",
    "stamp",
]


class ToolError(Exception):
    """A tool call that cannot be answered: its message is one line for the model."""


@dataclass(slots=True)
class ToolResult:
    """A tool's answer: short readable text, and the same as data (``structuredContent``)."""

    text: str
    data: dict[str, Any] = field(default_factory=dict)


def stamp(ms: int) -> str:
    """A time as the tools show it (UTC, to the minute)."""
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(ms / 1000)) if ms else "-"


# --- arguments --------------------------------------------------------------------------------


def arg_str(args: dict[str, Any], name: str, *, choices: tuple[str, ...] = ()) -> str | None:
    value = args.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ToolError(f"{name} must be a string")
    if choices and value not in choices:
        raise ToolError(f"{name} must be one of {', '.join(choices)} (got {value!r})")
    return value


def arg_int(args: dict[str, Any], name: str, *, lo: int, hi: int | None = None) -> int | None:
    value = args.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise ToolError(f"{name} must be an integer (got {value!r})")
    if value < lo or (hi is not None and value > hi):
        bound = f"at least {lo}" if hi is None else f"between {lo} and {hi}"
        raise ToolError(f"{name} must be {bound} (got {value})")
    return value


_AGE: Final = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(m|min|h|d|w)\s*$", re.IGNORECASE)
_UNIT_MS: Final = {"m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}


def parse_time(value: str, name: str, *, now_ms: int | None = None) -> int:
    """Milliseconds since the epoch for an ISO date or time (UTC unless it says otherwise) or
    an age before now (``30m``, ``6h``, ``2d``, ``1w``)."""
    age = _AGE.match(value)
    if age:
        now = int(time.time() * 1000) if now_ms is None else now_ms
        return now - int(float(age.group(1)) * _UNIT_MS[age.group(2).lower()])
    try:
        when = dt.datetime.fromisoformat(value.strip())
    except ValueError:
        raise ToolError(
            f"{name} must be an ISO date or time (2025-06-01, 2025-06-01T14:00Z) or an age "
            f"(30m, 6h, 2d, 1w); got {value!r}"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return int(when.timestamp() * 1000)


# --- cursors ----------------------------------------------------------------------------------


def _fingerprint(tool: str, args: dict[str, Any]) -> str:
    canon = msgspec.json.encode({"tool": tool, **{k: args[k] for k in sorted(args)}})
    return blake3.blake3(canon).hexdigest()[:16]


def make_cursor(tool: str, args: dict[str, Any], position: dict[str, Any]) -> str:
    """An opaque cursor for the page after this one of ``tool`` called with ``args`` (the
    arguments that define the listing, cursor excluded)."""
    body = msgspec.json.encode({"f": _fingerprint(tool, args), "p": position})
    return base64.urlsafe_b64encode(body).decode().rstrip("=")


def open_cursor(cursor: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """The position a cursor of :func:`make_cursor` holds; :class:`ToolError` for a cursor
    that is not one, or one made for other arguments."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        found = msgspec.json.decode(raw)
    except (binascii.Error, ValueError, msgspec.DecodeError):
        found = None
    if not isinstance(found, dict) or not isinstance(found.get("p"), dict):
        raise ToolError(f"the cursor is not one {tool} returned: call {tool} without it")
    if found.get("f") != _fingerprint(tool, args):
        raise ToolError(
            f"the cursor was made for other arguments of {tool}: repeat the same arguments "
            "with it, or call without it"
        )
    position: dict[str, Any] = found["p"]
    return position


# --- the archive ------------------------------------------------------------------------------


class Archive:
    """The store as the tools see it, from one project."""

    def __init__(
        self,
        store: BaseStore | Callable[[], BaseStore],
        project: str,
        *,
        model: str | None = None,
    ) -> None:
        self._store = store if isinstance(store, BaseStore) else None
        self._open = None if isinstance(store, BaseStore) else store
        self.project = project
        self.model = model
        """A static-embedding model to fuse with BM25 in search (a path or a fetched name)."""
        self._redactor: Redactor | bool | None = False  # False: not looked up yet
        self._firsts: dict[str, fr.ThreadCreated | None] = {}
        self._embedder: Any = None
        self._model_lock = threading.Lock()
        self.embed_budget: int | None = None
        """Documents one search may embed now (the store's setting); None: all it needs."""
        self.memo: dict[tuple[str, str], str] = {}
        """What a tool keeps between calls (the text of the artifact being paged)."""

    @property
    def store(self) -> BaseStore:
        """The store, opened on first use (a store that is missing now may be made later by
        the first hook: each call tries again, and fails with the store's own message)."""
        if self._store is None:
            assert self._open is not None
            self._store = self._open()
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()

    # -- redaction ---------------------------------------------------------------------------

    def redactor(self) -> Redactor | None:
        if self._redactor is False:
            from continuity.agents.base.ingest import ingest_redactor

            self._redactor = ingest_redactor(self.store)
        return self._redactor if isinstance(self._redactor, Redactor) else None

    def clean(self, text: str) -> str:
        """``text`` with every secret the store's redaction knows replaced."""
        redactor = self.redactor()
        return text if redactor is None or not text else redactor.redact_text(text)[0]

    def clean_data(self, value: Any) -> Any:
        redactor = self.redactor()
        return value if redactor is None else redactor.redact_json(value)[0]

    def model_choice(self) -> tuple[str, str | None] | None:
        """The model to fuse with BM25 and its kind: the server's (``--model``,
        ``$CONTINUITY_MODEL``), else the store's (``continuity model use``, read on each call;
        its embedding budget too); None: BM25 alone."""
        name, kind = self.model, None
        if name is None:
            from continuity.retrieval.settings import read_search_settings

            settings = read_search_settings(self.store)
            name, kind, self.embed_budget = settings.model, settings.embedder, settings.embed_budget
        return (name, kind) if name else None

    def load_model(self, name: str, kind: str | None) -> Any:
        """The model ``name`` of ``kind``, loaded once (a caller that comes while another
        thread loads it waits for that load: the server loads it in the background)."""
        with self._model_lock:
            if self._embedder is None or self._embedder[0] != (name, kind):
                from continuity.retrieval.models import load_model

                self._embedder = ((name, kind), load_model(name, kind=kind))
            return self._embedder[1]

    @property
    def loaded_model(self) -> Any:
        """The model loaded so far (None: none yet)."""
        found = self._embedder
        return None if found is None else found[1]

    def embedder(self) -> Any:
        """The model to fuse with BM25 (:meth:`model_choice`), loaded on first use; None:
        BM25 alone."""
        chosen = self.model_choice()
        return None if chosen is None else self.load_model(*chosen)

    # -- threads and sessions -----------------------------------------------------------------

    def first(self, thread_id: str) -> fr.ThreadCreated | None:
        """A thread's ``thread_created`` (read once: a log's first frame never changes)."""
        if thread_id not in self._firsts:
            frame = next(iter(self.store.thread(thread_id).read(to_seq=0)), None)
            self._firsts[thread_id] = frame if isinstance(frame, fr.ThreadCreated) else None
        return self._firsts[thread_id]

    def rows(self) -> list[CatalogRow]:
        """Every thread's catalog row (the store catalog, brought up to date)."""
        view = catalog_view(self.store)
        return list(view.rows)

    def session_rows(self, *, project: str | None, agent: str | None) -> list[CatalogRow]:
        """Sessions (threads with no parent), most recently active first; ``agent``: only
        those of the agent of that name (:mod:`continuity.agents.table`); ``project``: the
        project's and its subfolders', however its path is written."""
        from continuity.retrieval.projects import in_project

        wanted = agent_named(agent) if agent is not None else None
        source = wanted.source if wanted is not None else agent
        found = [
            r
            for r in self.rows()
            if r.created
            and r.parent_thread_id is None
            and in_project(r.project, project)
            and (source is None or r.source == source)
        ]
        found.sort(key=lambda r: (_active_ms(r), r.thread_id), reverse=True)
        return found

    def current(self) -> str | None:
        """The current session's thread id: the hooks' note for the project, else the
        project's most recently active session; None when the project has none."""
        note = noted_session(self.store, self.project)
        if note is not None and note.thread_id:
            return note.thread_id
        rows = self.session_rows(project=self.project, agent=None)
        return rows[0].thread_id if rows else None

    def thread(self, thread_id: str | None, *, what: str = "thread") -> Thread:
        """The thread ``thread_id`` names (a Claude Code session id alone too), or the current
        session's; :class:`ToolError` when there is none."""
        if thread_id is None:
            current = self.current()
            if current is None:
                raise ToolError(
                    f"no session of project {self.project} is archived yet: name a {what} "
                    "(sessions with scope all lists every one)"
                )
            thread_id = current
        if not thread_id.strip():
            raise ToolError(f"{what} is empty")
        for tid in (thread_id, f"cc-{thread_id}"):
            try:
                handle = self.store.thread(tid)
            except (InvalidThreadId, ContinuityError):
                continue
            if handle.exists():
                return handle
        raise ToolError(f"no thread {thread_id!r} in the archive (sessions lists them)")


def _active_ms(row: CatalogRow) -> int:
    return row.last_message_ms if row.last_message_ms is not None else row.last_active_ms
