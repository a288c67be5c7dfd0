"""Relays the tests started (ADR 0062): a hook on a PostgreSQL store starts one, detached, that
would outlive the test by its idle minutes; each is ended with the test that started it."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from continuity.agents.base import relay

__all__ = ["stop_relays"]


def stop_relays(folder: Path) -> None:
    """End every relay whose pid file is under ``folder`` (a test's own temporary folder)."""
    for pid_file in folder.rglob(relay.PID_NAME):
        try:
            pid = int(pid_file.read_text())
        except (OSError, ValueError):
            continue
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
        relay.wait_gone(pid, 10)
