"""Child processes in tests: a killed child leaves the pipes it was given open on this side."""

from __future__ import annotations

import subprocess
from typing import Any

__all__ = ["reap", "sigint_as_a_terminal_sends_it"]


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


def sigint_as_a_terminal_sends_it() -> None:
    """A child's SIGINT handled as at a terminal (a ``preexec_fn``): a process started in the
    background by a non-interactive shell, and so each of its children, ignores SIGINT, and
    Python then never turns one into ``KeyboardInterrupt``; the tests that press Ctrl-C on a
    child must not depend on how the suite was started."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
