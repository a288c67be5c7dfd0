"""The archived sessions of a store, of every agent (Claude Code, Codex, Gemini CLI, opencode:
:mod:`continuity.agents.table`): what ``continuity sessions`` lists."""

from __future__ import annotations

import time

import msgspec

from continuity import frames as fr
from continuity.agents.table import agent_of_session, is_subagent, known_agents
from continuity.caches.catalog import CatalogRow, catalog_view, current_rows
from continuity.store.base import BaseStore, Thread

__all__ = ["SessionInfo", "list_sessions", "previous_session", "session_rows"]


class SessionInfo(msgspec.Struct, frozen=True, kw_only=True):
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


def _stamp(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(ms / 1000)) if ms else "-"


def _info(thread: Thread) -> SessionInfo | None:
    first = next(iter(thread.read(to_seq=0)), None)
    if not isinstance(first, fr.ThreadCreated) or first.meta.get("source") != "claude-code":
        return None
    last = thread.tail(1, types=["message_appended"])
    last_ms = last[0].ts_ms if last else first.ts_ms
    return SessionInfo(
        thread_id=thread.id,
        project=first.meta.get("project", ""),
        git_branch=first.meta.get("git_branch", ""),
        started=_stamp(first.ts_ms),
        last_active=_stamp(last_ms),
        last_active_ms=last_ms,
        parent_thread_id=first.parent_thread_id,
        title=first.title,
        first_ms=first.ts_ms,
    )


def _session(row: CatalogRow) -> SessionInfo:
    last_ms = row.last_message_ms if row.last_message_ms is not None else row.first_ms
    agent = agent_of_session(row.thread_id, row.source)
    return SessionInfo(
        thread_id=row.thread_id,
        agent=agent.name if agent is not None else row.source,
        project=row.project,
        git_branch=row.git_branch,
        started=_stamp(row.first_ms),
        last_active=_stamp(last_ms),
        last_active_ms=last_ms,
        parent_thread_id=row.parent_thread_id,
        messages=row.messages,
        compactions=row.compactions,
        title=row.title,
        first_ms=row.first_ms,
    )


def session_rows(store: BaseStore, *, include_agents: bool = False) -> list[CatalogRow]:
    """The catalog rows of every agent's sessions (and sub-agents' with ``include_agents``),
    in thread id order; the first problem of a thread that may be one of them is raised."""
    prefixes = tuple(a.thread_prefix for a in known_agents())
    view = catalog_view(store)

    def wanted(tid: str) -> bool:
        return tid.startswith(prefixes) and (include_agents or ".agent-" not in tid)

    view.raise_first(tid for tid in view.problems if wanted(tid))
    return [
        r
        for r in view.rows
        if r.created
        and agent_of_session(r.thread_id, r.source) is not None
        and (include_agents or not is_subagent(r.thread_id, r.parent_thread_id))
    ]


def list_sessions(
    store: BaseStore,
    *,
    include_agents: bool = False,
    agent: str | None = None,
    project: str | None = None,
    usage: bool = False,
) -> list[SessionInfo]:
    """Every archived session of every agent (or of the agent named ``agent``, by its name in
    :mod:`continuity.agents.table`; of the project folder ``project``), most recently active
    last, with message and compaction counts (from the store catalog,
    :mod:`continuity.caches.catalog`); with ``usage``, how full each one's context was."""
    found = [
        s
        for s in map(_session, session_rows(store, include_agents=include_agents))
        if (agent is None or s.agent == agent) and (project is None or s.project == project)
    ]
    found.sort(key=lambda s: (s.last_active_ms, s.thread_id))
    return _with_usage(store, found) if usage else found


def _with_usage(store: BaseStore, found: list[SessionInfo]) -> list[SessionInfo]:
    """``found`` with each session's context usage (a read of its log's tail each)."""
    from continuity.rolling.settings import read_settings
    from continuity.rolling.usage import session_usage

    settings = read_settings(store.local_dir)
    out = []
    for s in found:
        used = session_usage(
            store.thread(s.thread_id), windows=settings.windows, default=settings.window
        )
        out.append(
            s
            if used is None
            else msgspec.structs.replace(s, context_tokens=used.tokens, context_window=used.window)
        )
    return out


def previous_session(store: BaseStore, project: str, *, exclude: str) -> SessionInfo | None:
    """The most recently active other session of ``project`` (no caches touched: the rows of
    the store catalog that still describe their logs are read, never brought up to date; the
    other threads' first and last frames are read from their logs)."""

    def wanted(tid: str) -> bool:
        return tid != exclude and tid.startswith("cc-") and ".agent-" not in tid

    found = current_rows(store, project=project)
    rows, others = found if found is not None else ([], store.threads())
    candidates = [
        msgspec.structs.replace(_session(r), messages=0, compactions=0)
        for r in rows
        if wanted(r.thread_id) and r.created and r.source == "claude-code"
    ]
    for tid in others:
        if wanted(tid):
            info = _info(store.thread(tid))
            if info is not None:
                candidates.append(info)
    best: SessionInfo | None = None
    for info in candidates:
        if info.project != project:
            continue
        if best is None or (info.last_active_ms, info.thread_id) > (
            best.last_active_ms,
            best.thread_id,
        ):
            best = info
    return best
