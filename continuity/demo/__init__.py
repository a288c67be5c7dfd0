"""``continuity demo``: a scripted Claude Code session replayed through the real hooks.

- :mod:`.runner` replays it and reports what was archived and restored (the names below);
- :mod:`.script` is the session itself (a bug fix, tests, a profile, a compaction, a commit);
- :mod:`.transcript` writes transcript lines shaped like Claude Code's (the hook benchmark uses
  it too).
"""

from __future__ import annotations

from continuity.demo.runner import (
    Archive,
    DemoResult,
    HookRun,
    print_report,
    run_demo,
    run_in_temp,
)

__all__ = ["Archive", "DemoResult", "HookRun", "print_report", "run_demo", "run_in_temp"]
