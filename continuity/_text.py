"""Plain renderings shared by the CLI and the caches that keep rendered output (the listing
file of ``continuity threads``, ADR 0058): counts, times, the lines of ``threads``. Standard
library only, so any layer may use them."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Protocol

__all__ = ["ListedThread", "count", "format_ts", "render_threads"]


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
