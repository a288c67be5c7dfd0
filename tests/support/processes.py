"""Child processes in tests: a killed child leaves the pipes it was given open on this side."""

from __future__ import annotations

import subprocess
from typing import Any

__all__ = ["reap"]


def reap(proc: subprocess.Popen[Any], timeout: float = 30) -> int:
    """Kill ``proc`` if it still runs, wait for it, close the pipes to it, and return its exit
    code (negative: the signal that ended it)."""
    if proc.poll() is None:
        proc.kill()
    code = proc.wait(timeout)
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
    return code
