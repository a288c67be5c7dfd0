"""``continuity demo``: a scripted Claude Code session replayed through the real hooks.

- :mod:`.runner` replays it into a store (one demo thread a store: its docstring says how);
- :mod:`.report` prints what was archived, dropped and restored (about 15 lines), or the
  whole replay;
- :mod:`.script` is the session itself (a bug fix, tests, a profile, a compaction, a commit);
- :mod:`.transcript` writes transcript lines shaped like Claude Code's (the hook benchmark uses
  it too).
"""

from __future__ import annotations

from continuity.demo.report import brief, print_report
from continuity.demo.runner import (
    DEMO_THREAD,
    Archive,
    DemoResult,
    HeldDemo,
    HookRun,
    run_demo,
    run_in_temp,
)

__all__ = [
    "DEMO_THREAD",
    "Archive",
    "DemoResult",
    "HeldDemo",
    "HookRun",
    "brief",
    "print_report",
    "run_demo",
    "run_in_temp",
]
