"""Where the store lives when nobody says (ADR 0004)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["default_store_path", "resolve_store_path"]


def default_store_path(env: Mapping[str, str] | None = None) -> Path:
    """``$CONTINUITY_HOME``, else ``$XDG_DATA_HOME/continuity``, else
    ``~/.local/share/continuity`` — always absolute, never relative to the current directory."""
    env = os.environ if env is None else env
    home = env.get("CONTINUITY_HOME")
    if home:
        return Path(home).expanduser().absolute()
    xdg = env.get("XDG_DATA_HOME")
    # The XDG spec says a relative XDG_DATA_HOME is invalid and must be ignored.
    if xdg and Path(xdg).expanduser().is_absolute():
        return Path(xdg).expanduser() / "continuity"
    return Path.home() / ".local" / "share" / "continuity"


def resolve_store_path(explicit: str | os.PathLike[str] | None) -> Path:
    """The ``--store`` option when given (made absolute), else :func:`default_store_path`."""
    if explicit is not None and str(explicit) != "":
        return Path(explicit).expanduser().absolute()
    return default_store_path()
