"""``continuity --version``'s line, without typer: the console script answers a bare
``continuity --version`` before the app is imported (``continuity.__main__``), and the app's
``--version`` option prints the same line."""

from __future__ import annotations

__all__ = ["version_line"]


def version_line() -> str:
    """``continuity <version>``, the version from the installed package's metadata."""
    from importlib.metadata import PackageNotFoundError, version

    from continuity.errors import DISTRIBUTION

    try:
        number = version(DISTRIBUTION)
    except PackageNotFoundError:  # run from a source tree that was never installed
        number = "(not installed: no package metadata)"
    return f"continuity {number}"
