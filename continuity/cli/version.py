"""``continuity --version``'s line, without typer: the console script answers a bare
``continuity --version`` before the app is imported (``continuity.__main__``), and the app's
``--version`` option prints the same line."""

from __future__ import annotations

__all__ = ["version_line"]


def version_line() -> str:
    """``continuity <version>``: the package's ``__version__``, which is also the distribution's
    version (pyproject reads it from there), so no package metadata is read (importlib.metadata
    alone is about 27 ms of a fresh process)."""
    from continuity._version import __version__

    return f"continuity {__version__}"
