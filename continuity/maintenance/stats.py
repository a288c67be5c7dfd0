"""Counts and sizes of a store (what ``continuity stats`` prints) and its threads (what
``continuity threads`` lists).

Both read the store catalog (:mod:`continuity.caches.catalog`): one row per thread, checked
against each log's size and last digest, read again from the log only where it changed; a store
that keeps no catalog is read thread by thread. Redactions are counted from the frames'
``meta["redacted"]`` (:mod:`continuity.redaction`), never by scanning for secrets again.
"""

from __future__ import annotations

import msgspec

from continuity.agents.table import agent_for_source, agent_of_session, is_subagent, thread_kind
from continuity.caches.catalog import CatalogRow, catalog_view, read_row, thread_counts
from continuity.caches.listing import tree_bytes
from continuity.errors import ContinuityError
from continuity.store.base import BaseStore, Thread

__all__ = ["StoreStats", "ThreadInfo", "list_threads", "store_stats", "thread_counts"]


class StoreStats(msgspec.Struct, frozen=True):
    threads: int
    frames: int
    messages: int
    checkpoints: int
    log_bytes: int
    artifacts: int
    artifact_bytes: int
    cache_bytes: int
    quarantined: int
    redactions: int = 0
    """Secrets redacted from the frames of every thread (counted where they were redacted)."""
    redactions_by_thread: dict[str, int] = {}
    """The same per thread, for the threads that had any."""
    sessions_by_agent: dict[str, int] = {}
    """The agents' sessions (sub-agents' not counted) by agent name
    (:mod:`continuity.agents.table`), for the agents that have any."""


def store_stats(store: BaseStore) -> StoreStats:
    """Counts and sizes of every thread, artifact and cache of ``store``."""
    # a thread cut to nothing is an error, not a missing line
    view = catalog_view(store, sessions_file=True)
    view.raise_first()
    rows = view.rows
    redactions = {r.thread_id: r.redactions for r in rows if r.redactions}
    sessions: dict[str, int] = {}
    for r in rows:
        agent = agent_of_session(r.thread_id, r.source) if r.created else None
        if agent is not None and not is_subagent(r.thread_id, r.parent_thread_id):
            sessions[agent.name] = sessions.get(agent.name, 0) + 1
    return StoreStats(
        threads=len(rows),
        frames=sum(r.frames for r in rows),
        messages=sum(r.messages for r in rows),
        checkpoints=sum(r.checkpoints for r in rows),
        log_bytes=sum(r.log_bytes for r in rows),
        artifacts=sum(1 for _ in store.artifacts.ids()),
        artifact_bytes=store.artifacts.stored_bytes(),
        cache_bytes=tree_bytes(store.cache_dir) + store.derived_bytes(),
        quarantined=len(store.quarantined()),
        redactions=sum(redactions.values()),
        redactions_by_thread=redactions,
        sessions_by_agent=dict(sorted(sessions.items())),
    )


class ThreadInfo(msgspec.Struct, frozen=True, kw_only=True):
    """A thread as ``continuity threads`` lists it: from its first and last frames only."""

    thread_id: str
    frames: int
    last_active_ms: int
    """The last frame's time (0 when it has none)."""
    kind: str
    """``<source> session`` or ``<source> subagent`` for an agent's threads (``claude-code
    session``, ``codex session``, ``gemini-cli subagent``, …), else the ``source`` its creator
    recorded, or ``other``."""
    title: str | None = None
    parent_thread_id: str | None = None
    problem: str | None = None
    """Why the thread could not be read (``continuity verify`` says more)."""
    project: str = ""
    """The project folder its creator recorded (``meta["project"]``; Claude Code sessions)."""
    git_branch: str = ""
    messages: int = 0
    checkpoints: int = 0
    compactions: int = 0
    """Checkpoints that record a compaction by the agent itself (Claude Code's ``/compact``)."""
    log_bytes: int = 0
    head_digest: str = ""
    agent: str = ""
    """The agent that wrote it (its name in :mod:`continuity.agents.table`: ``claude-code``,
    ``codex``, …), "" for a thread no agent's adapter made."""


def _kind(row: CatalogRow) -> str:
    # As `sessions` decides: the adapter marks its threads' first frame with its source.
    return thread_kind(row.thread_id, row.created, row.source, row.parent_thread_id)


def _agent(row: CatalogRow) -> str:
    agent = agent_for_source(row.source) if row.created else None
    return agent.name if agent is not None else ""


def _info(row: CatalogRow) -> ThreadInfo:
    return ThreadInfo(
        thread_id=row.thread_id,
        frames=row.frames,
        last_active_ms=row.last_active_ms,
        kind=_kind(row),
        title=row.title,
        parent_thread_id=row.parent_thread_id,
        project=row.project,
        git_branch=row.git_branch,
        messages=row.messages,
        checkpoints=row.checkpoints,
        compactions=row.compactions,
        log_bytes=row.log_bytes,
        head_digest=row.head_digest,
        agent=_agent(row),
    )


def _unreadable(thread_id: str, exc: ContinuityError) -> ThreadInfo:
    return ThreadInfo(thread_id=thread_id, frames=0, last_active_ms=0, kind="?", problem=str(exc))


def thread_info(thread: Thread) -> ThreadInfo:
    """The first frame and the last one (two short, checked reads, whatever the log's length)
    and the counts of its caches. A thread that cannot be read is listed with the problem, not
    raised."""
    try:
        row, _kept = read_row(thread)
    except ContinuityError as exc:
        return _unreadable(thread.id, exc)
    return _info(row)


def list_threads(store: BaseStore) -> list[ThreadInfo]:
    """Every thread of ``store``, the most recently active last."""
    view = catalog_view(store)
    found = [_info(r) for r in view.rows]
    found.extend(_unreadable(tid, exc) for tid, exc in view.problems.items())
    found.sort(key=lambda t: (t.last_active_ms, t.thread_id))
    return found
