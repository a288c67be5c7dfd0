"""The archived Claude Code sessions of a store: what ``continuity sessions`` lists."""

from __future__ import annotations

import time

import msgspec

from continuity import frames as fr
from continuity.stats import thread_counts
from continuity.store.base import BaseStore, Thread

__all__ = ["SessionInfo", "list_sessions", "previous_session"]


class SessionInfo(msgspec.Struct, frozen=True, kw_only=True):
    thread_id: str
    project: str
    git_branch: str
    started: str
    last_active: str
    last_active_ms: int
    parent_thread_id: str | None
    messages: int = 0
    compactions: int = 0


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
    )


def _counts(thread: Thread) -> tuple[int, int]:
    """(messages, Claude's compactions)."""
    _frames, messages, cut_rules = thread_counts(thread)
    return messages, sum(1 for r in cut_rules if r.startswith("claude_code"))


def list_sessions(store: BaseStore, *, include_agents: bool = False) -> list[SessionInfo]:
    """Every archived Claude Code session, most recently active last, with message and
    compaction counts."""
    found: list[SessionInfo] = []
    for tid in store.threads():
        if not tid.startswith("cc-") or (".agent-" in tid and not include_agents):
            continue
        thread = store.thread(tid)
        info = _info(thread)
        if info is None:
            continue
        messages, compactions = _counts(thread)
        found.append(msgspec.structs.replace(info, messages=messages, compactions=compactions))
    found.sort(key=lambda s: (s.last_active_ms, s.thread_id))
    return found


def previous_session(store: BaseStore, project: str, *, exclude: str) -> SessionInfo | None:
    """The most recently active other session of ``project`` (no caches touched)."""
    best: SessionInfo | None = None
    for tid in store.threads():
        if tid == exclude or not tid.startswith("cc-") or ".agent-" in tid:
            continue
        info = _info(store.thread(tid))
        if info is None or info.project != project:
            continue
        if best is None or (info.last_active_ms, tid) > (best.last_active_ms, best.thread_id):
            best = info
    return best
