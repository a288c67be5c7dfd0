"""The archived sessions of a store, of every agent (Claude Code, Codex, Gemini CLI, opencode:
:mod:`continuity.agents.table`): what ``continuity sessions`` lists."""

from __future__ import annotations

import msgspec

from continuity import frames as fr
from continuity.agents.table import agent_of_session, is_subagent, known_agents
from continuity.caches.catalog import CatalogRow, catalog_view, current_rows
from continuity.caches.session_file import SessionInfo, session_info, stamp
from continuity.store.base import BaseStore, Thread

__all__ = ["SessionInfo", "list_sessions", "previous_session", "session_info", "session_rows"]


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
        started=stamp(first.ts_ms),
        last_active=stamp(last_ms),
        last_active_ms=last_ms,
        parent_thread_id=first.parent_thread_id,
        title=first.title,
        first_ms=first.ts_ms,
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
        for s in map(session_info, session_rows(store, include_agents=include_agents))
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
        msgspec.structs.replace(session_info(r), messages=0, compactions=0)
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
