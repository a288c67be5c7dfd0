"""The rolling context manager's settings: ``<store>/rolling.json``, and one variable to stop it.

``CONTINUITY_ROLLING=0`` turns the reminder off whatever the file says; ``enabled: false`` in
the file (``continuity install`` writes the file with the defaults when it has none) turns it
off for the store. A missing or unreadable file is the defaults: a hook never fails on it.
This module imports only msgspec: the prompt hook reads it on every prompt.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

import msgspec

__all__ = ["ENV", "SETTINGS_FILE", "RollingSettings", "enabled", "read_settings", "write_default"]

ENV: Final = "CONTINUITY_ROLLING"
SETTINGS_FILE: Final = "rolling.json"


class RollingSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=False):
    """What the reminder and the runtime policy go by (all optional in the file)."""

    enabled: bool = True
    """Remind the agent to compress cold segments (the coding agents' prompt hook)."""
    hot: float = 0.6
    """The hot threshold: the fraction of the window past which cold segments are queued."""
    cold_turns: int = 20
    """A segment not mentioned for this many turns may be cold."""
    min_messages: int = 5
    """A segment with fewer messages is never queued (too little to gain)."""
    every_turns: int = 10
    """At most one reminder in this many turns."""
    max_segments: int = 3
    """At most this many segments named in one reminder (the oldest first)."""
    window: int | None = None
    """The window of a model not known (:data:`continuity.rolling.usage.WINDOWS`)."""
    windows: dict[str, int] = {}
    """Model name prefix → window, over the known ones."""


def enabled(env: dict[str, str] | os._Environ[str] | None = None) -> bool:
    """False when ``CONTINUITY_ROLLING`` says off (``0``, ``false``, ``no``, ``off``)."""
    value = (os.environ if env is None else env).get(ENV, "").strip().lower()
    return value not in ("0", "false", "no", "off")


def read_settings(folder: Path | None) -> RollingSettings:
    """The settings in ``folder/rolling.json`` (the store's own folder), else the defaults."""
    if folder is None:
        return RollingSettings()
    try:
        return msgspec.json.decode((folder / SETTINGS_FILE).read_bytes(), type=RollingSettings)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return RollingSettings()


def write_default(folder: Path) -> bool:
    """Write the defaults to ``folder/rolling.json`` when it has no such file; whether it
    wrote one (an install never overwrites what a user set)."""
    from continuity._fs import atomic_write

    path = folder / SETTINGS_FILE
    if path.exists():
        return False
    folder.mkdir(parents=True, exist_ok=True)
    data = msgspec.json.format(msgspec.json.encode(RollingSettings()), indent=2) + b"\n"
    atomic_write(path, data, durable=True, keep_mode=False)
    return True
