"""Plain renderings shared by the CLI and the caches that keep rendered output (the listing
file of ``continuity threads``, ADR 0058): counts, times, the lines of ``threads``. Standard
library only, so any layer may use them."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

TYPE_CHECKING = False  # not typing's: the listings' fast paths import this module (3 ms)
if TYPE_CHECKING:
    from typing import Protocol
else:
    Protocol = object  # a structural type for the checker; nothing checks it at run time

__all__ = [
    "ListedThread",
    "context_used",
    "count",
    "format_ts",
    "render_sessions",
    "render_stats",
    "render_threads",
    "session_head",
    "session_named",
]


def count(n: int, noun: str, plural: str | None = None) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {plural or noun + 's'}"


class ListedThread(Protocol):
    """What a line of ``continuity threads`` shows of a thread."""

    @property
    def thread_id(self) -> str: ...
    @property
    def frames(self) -> int: ...
    @property
    def last_active_ms(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def problem(self) -> str | None: ...


def render_threads(rows: Sequence[ListedThread]) -> str:
    """The lines of ``continuity threads`` (without the last newline), ``rows`` in their order
    (not empty)."""
    width = max(len(r.thread_id) for r in rows)
    frames_width = max(len(count(r.frames, "frame")) for r in rows)
    table = []
    for r in rows:
        kind = f"unreadable: {r.problem}" if r.problem else r.kind
        last = format_ts(r.last_active_ms) if r.last_active_ms else "-"
        table.append(
            f"{r.thread_id:<{width}}  {count(r.frames, 'frame'):>{frames_width}}  "
            f"{last:<19}  {kind}"
        )
    return "\n".join(table)


def format_ts(ts_ms: int) -> str:
    """UTC, to the second: stable whatever the machine's timezone."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts_ms / 1000))


def session_head(
    project: str, git_branch: str, started: str, messages: int, compactions: int
) -> str:
    """What a line of ``continuity sessions`` shows of a session after its thread id, up to its
    counts: ``/p (main)  started 2024-11-22 02:01  4 messages, 0 compactions``."""
    branch = f" ({git_branch})" if git_branch else ""
    return (
        f"{project or '-'}{branch}  started {started}  "
        f"{count(messages, 'message')}, {count(compactions, 'compaction')}"
    )


def context_used(tokens: int | None, window: int | None) -> str:
    """What a line of ``continuity sessions --context`` shows after a session's counts: how
    full its context was at its latest answer."""
    if tokens is None or not window:
        return "  context -"
    return f"  context {tokens:,}/{window:,} ({100 * tokens / window:.0f}%)"


def session_named(title: str | None) -> str:
    """The end of a line of ``continuity sessions``: the (redacted) title, its whitespace folded,
    cut to 80 characters; "" when there is none."""
    return f"  “{' '.join(title.split())[:80]}”" if title and title.strip() else ""


def render_sessions(lines: Sequence[tuple[str, str, str]]) -> str:
    """The lines of ``continuity sessions`` (without the last newline), each given as (agent,
    thread id, the rest), in their order (not empty): the first two columns padded to the
    widest of ``lines``."""
    width = max(len(who) for who, _tid, _rest in lines)
    id_width = max(len(tid) for _who, tid, _rest in lines)
    return "\n".join(f"{who:<{width}}  {tid:<{id_width}}  {rest}" for who, tid, rest in lines)


def render_stats(
    described: str,
    counts: Mapping[str, int],
    sessions: Sequence[tuple[str, int]],
    display: Callable[[str], str],
) -> str:
    """The lines of ``continuity stats`` (without the last newline) of the store ``described``:
    ``counts`` holds :class:`~continuity.maintenance.stats.StoreStats`' counts by field name
    and ``redacted_threads`` (how many threads had a redaction), ``sessions`` each agent's
    sessions (its name, how many), ``display`` names an agent as the line of sessions shows
    it."""
    lines = [
        f"store        {described}",
        f"threads      {counts['threads']}",
        f"frames       {counts['frames']}",
        f"messages     {counts['messages']}",
        f"checkpoints  {counts['checkpoints']}",
        f"log bytes    {counts['log_bytes']}",
        f"artifacts    {counts['artifacts']} ({counts['artifact_bytes']} bytes compressed)",
        f"cache bytes  {counts['cache_bytes']}",
        f"quarantined  {counts['quarantined']}",
        f"redactions   {counts['redactions']} in {count(counts['redacted_threads'], 'thread')}",
    ]
    if sessions:  # every agent's sessions, side by side
        by_agent = ", ".join(f"{display(name)} {n}" for name, n in sessions)
        lines.append(f"sessions     {sum(n for _name, n in sessions)} ({by_agent})")
    return "\n".join(lines)
