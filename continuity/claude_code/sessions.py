"""The archived Claude Code sessions of a store: what ``continuity sessions`` lists."""

from __future__ import annotations

import time
from dataclasses import dataclass

from continuity import frames as fr
from continuity.store import Store

__all__ = ["SessionInfo", "list_sessions", "previous_session"]


@dataclass(frozen=True, slots=True)
class SessionInfo:
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


def _info(store: Store, thread_id: str) -> SessionInfo | None:
    thread = store.thread(thread_id)
    first = next(iter(thread.read(to_seq=0)), None)
    if not isinstance(first, fr.ThreadCreated) or first.meta.get("source") != "claude-code":
        return None
    last = thread.tail(1, types=["message_appended"])
    last_ms = last[0].ts_ms if last else first.ts_ms
    return SessionInfo(
        thread_id=thread_id,
        project=first.meta.get("project", ""),
        git_branch=first.meta.get("git_branch", ""),
        started=_stamp(first.ts_ms),
        last_active=_stamp(last_ms),
        last_active_ms=last_ms,
        parent_thread_id=first.parent_thread_id,
    )


def list_sessions(store: Store, *, include_agents: bool = False) -> list[SessionInfo]:
    """Every archived Claude Code session, most recently active last, with message and
    compaction counts (read from the caches, brought up to date)."""
    from continuity.caches import ThreadIndex

    found: list[SessionInfo] = []
    for tid in store.threads():
        if not tid.startswith("cc-") or (".agent-" in tid and not include_agents):
            continue
        info = _info(store, tid)
        if info is None:
            continue
        index = ThreadIndex(store, tid)
        index.refresh()
        compactions = sum(1 for c in index.checkpoints() if c.cut_rule_id.startswith("claude_code"))
        found.append(
            SessionInfo(
                **{
                    **{f: getattr(info, f) for f in info.__slots__},
                    "messages": index.message_count(),
                    "compactions": compactions,
                }
            )
        )
    found.sort(key=lambda s: (s.last_active_ms, s.thread_id))
    return found


def previous_session(store: Store, project: str, *, exclude: str) -> SessionInfo | None:
    """The most recently active other session of ``project`` (no caches touched)."""
    best: SessionInfo | None = None
    for tid in store.threads():
        if tid == exclude or not tid.startswith("cc-") or ".agent-" in tid:
            continue
        info = _info(store, tid)
        if info is None or info.project != project:
            continue
        if best is None or (info.last_active_ms, tid) > (best.last_active_ms, best.thread_id):
            best = info
    return best
