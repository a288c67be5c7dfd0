"""The restore's note on other agents' sessions of the same project in the same hours.

A developer runs Claude Code in one terminal and Codex or Gemini CLI in another, on the same
repository: after Claude compacts, it should know that another agent worked there meanwhile.
One short line per such session (the agent, its thread, its time span, its title or first
prompt, how many messages and tool calls it had in the stretch), never its content: the thread
id is what to read it by. Only sessions of other agents (:mod:`continuity.agents.table`) whose
activity overlaps the stretch the compaction dropped, never the session itself or its
sub-agents; at most three, the most recently active.

On the hook path: the store catalog's current rows are read (no catch-up, nothing written),
the other logs' first and last frames, and the last messages of at most three sessions.
"""

from __future__ import annotations

import time
from typing import Final, NamedTuple

from continuity import frames as fr
from continuity.agents.table import agent_of_session, is_subagent
from continuity.caches.catalog import current_rows
from continuity.errors import ContinuityError
from continuity.store.base import BaseStore, Thread

__all__ = ["other_agents_note"]

_MAX_SESSIONS: Final = 3
_MAX_LINE: Final = 220
_TITLE: Final = 60
_COUNTED: Final = 1_000
"""At most this many of a session's last messages are read to count those of the stretch."""
_PROMPT_FRAMES: Final = 40
"""A session's first prompt is looked for in its first frames only."""


class _Session(NamedTuple):
    thread_id: str
    display: str
    title: str | None
    first_ms: int
    last_ms: int


def _candidates(store: BaseStore, project: str) -> list[_Session]:
    """Every agent's top-level session of ``project`` (their first and last times)."""
    found = current_rows(store, project=project)
    rows, others = found if found is not None else ([], store.threads())
    out: list[_Session] = []
    for r in rows:
        agent = agent_of_session(r.thread_id, r.source) if r.created else None
        if agent is None or is_subagent(r.thread_id, r.parent_thread_id) or r.project != project:
            continue
        out.append(_Session(r.thread_id, agent.display, r.title, r.first_ms, r.last_active_ms))
    for tid in others:
        thread = store.thread(tid)
        try:
            first = next(iter(thread.read(to_seq=0)), None)
            if not isinstance(first, fr.ThreadCreated):
                continue
            agent = agent_of_session(tid, first.meta.get("source", ""))
            if agent is None or is_subagent(tid, first.parent_thread_id):
                continue
            if first.meta.get("project", "") != project:
                continue
            last = thread.tail(1)
        except ContinuityError:
            continue  # a damaged log: the listings and verify name it
        last_ms = last[0].ts_ms if last else first.ts_ms
        out.append(_Session(tid, agent.display, first.title, first.ts_ms, last_ms))
    return out


def _first_prompt(thread: Thread) -> str:
    for frame in thread.read(to_seq=_PROMPT_FRAMES, types=["message_appended"]):
        if isinstance(frame, fr.MessageAppended) and frame.role == "user":
            text = " ".join(b.text for b in frame.content if isinstance(b, fr.TextBlock))
            if text.strip() and not text.lstrip().startswith("<"):
                return text
    return ""


def _counts(thread: Thread, lo: int | None, hi: int) -> str:
    """How many messages and tool calls the session had in ``(lo, hi]`` (of its last
    ``_COUNTED`` messages: "+" when the stretch goes further back than those)."""
    read = thread.tail(_COUNTED, types=["message_appended"])
    inside = [
        f
        for f in read
        if isinstance(f, fr.MessageAppended) and (lo is None or f.ts_ms > lo) and f.ts_ms <= hi
    ]
    more = "+" if len(read) == _COUNTED and (lo is None or read[0].ts_ms > lo) else ""
    calls = sum(isinstance(b, fr.ToolUseBlock) for f in inside for b in f.content)
    messages = "message" if len(inside) == 1 and not more else "messages"
    tools = "tool call" if calls == 1 and not more else "tool calls"
    return f"{len(inside):,}{more} {messages}, {calls:,}{more} {tools}"


def _span(first_ms: int, last_ms: int) -> str:
    start = time.gmtime(first_ms / 1000)
    end = time.gmtime(last_ms / 1000)
    same_day = start[:3] == end[:3]
    tail = time.strftime("%H:%M" if same_day else "%Y-%m-%d %H:%M", end)
    return f"{time.strftime('%Y-%m-%d %H:%M', start)}–{tail} UTC"


def _line(text: str) -> str:
    return " ".join(text.split())


def other_agents_note(thread: Thread, lo_ms: int | None, hi_ms: int, budget: int) -> str:
    """The note (a heading and a line per session, ≤ ``budget`` characters) naming the other
    agents' sessions of the thread's project active in ``(lo_ms, hi_ms]``; "" when there are
    none (or the thread records no project). Secrets in titles and prompts are redacted with
    the store's ingest rules."""
    from continuity.agents.base.ingest import ingest_redactor

    first = next(iter(thread.read(to_seq=0)), None)
    if not isinstance(first, fr.ThreadCreated):
        return ""
    project = first.meta.get("project", "")
    own = agent_of_session(thread.id, first.meta.get("source", ""))
    if not project or budget <= 0:
        return ""
    store = thread.store
    chosen = [
        s
        for s in _candidates(store, project)
        if s.thread_id != thread.id
        and not s.thread_id.startswith(thread.id + ".")
        and (own is None or s.display != own.display)
        and s.last_ms > (lo_ms if lo_ms is not None else -1)
        and s.first_ms <= hi_ms
    ]
    if not chosen:
        return ""
    chosen.sort(key=lambda s: (s.last_ms, s.thread_id), reverse=True)
    redactor = ingest_redactor(store)
    heading = "## Also on this project in the same hours (other agents' sessions)\n"
    lines: list[str] = []
    used = len(heading) + 1
    for s in chosen[:_MAX_SESSIONS]:
        other = store.thread(s.thread_id)
        title = _line(s.title or _first_prompt(other))
        if redactor is not None and title:
            title = _line(redactor.redact_text(title)[0])
        if len(title) > _TITLE:
            title = title[: _TITLE - 1] + "…"
        shown = f" “{title}”" if title else ""
        line = (
            f"- {s.display} session {s.thread_id} {_span(s.first_ms, s.last_ms)}{shown} "
            f"({_counts(other, lo_ms, hi_ms)})"
        )
        if len(line) > _MAX_LINE:
            line = line[: _MAX_LINE - 1] + "…"
        if used + len(line) + 1 > budget:
            break
        lines.append(line)
        used += len(line) + 1
    return heading + "\n".join(lines) + "\n\n" if lines else ""
