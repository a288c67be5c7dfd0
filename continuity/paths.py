"""Where the store lives when nobody says (ADR 0004)."""

from __future__ import annotations

import os
import pwd
from collections.abc import Mapping
from pathlib import Path

__all__ = ["default_store_path", "resolve_store_path"]


def _home(env: Mapping[str, str]) -> Path:
    """``$HOME`` when it is absolute, else the user's home from the password database (a
    relative ``$HOME`` would put the store wherever the command happens to run)."""
    home = env.get("HOME")
    if home and Path(home).is_absolute():
        return Path(home)
    return Path(pwd.getpwuid(os.getuid()).pw_dir)


def default_store_path(env: Mapping[str, str] | None = None) -> Path:
    """``$CONTINUITY_HOME``, else ``$XDG_DATA_HOME/continuity``, else
    ``~/.local/share/continuity`` — always absolute, never relative to the current directory.

    ``env`` defaults to :data:`os.environ`; the fallback reads ``HOME`` from it too.
    """
    env = os.environ if env is None else env
    explicit = env.get("CONTINUITY_HOME")
    if explicit:
        # The user named this folder, as with --store: a relative one means the current directory.
        return Path(explicit).expanduser().absolute()
    xdg = env.get("XDG_DATA_HOME")
    # The XDG spec says a relative XDG_DATA_HOME is invalid and must be ignored.
    if xdg and Path(xdg).expanduser().is_absolute():
        return Path(xdg).expanduser() / "continuity"
    return _home(env) / ".local" / "share" / "continuity"


def resolve_store_path(explicit: str | os.PathLike[str] | None) -> Path:
    """The ``--store`` option when given (made absolute), else :func:`default_store_path`."""
    if explicit is not None and str(explicit) != "":
        return Path(explicit).expanduser().absolute()
    return default_store_path()
