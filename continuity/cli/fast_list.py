"""``continuity threads`` before typer: a folder store's listing answered by one stat a log.

The typer command opens every log of the store to check the catalog's rows against it
(:mod:`continuity.caches.catalog`) and imports the machinery to catch a row up: at 10,000
threads, most of its CPU. ``__main__`` hands a command line whose command is ``threads`` to
:func:`fast_threads` first. It runs only the plain form (``--store`` before or after the
command, nothing else) on a folder store whose listing file vouches for every log as it is now
(:func:`~continuity.caches.listing.current_listing`: one stat a log, no log opened), and prints
the lines the last full listing rendered (one function renders both). For anything else
(``--json``, help, a URL, a store whose logs changed since the last full listing, any error)
it returns None and the typer command runs, catches up and writes the listing file again.
"""

from __future__ import annotations

import os
import sys

__all__ = ["fast_threads", "parse_store"]


def parse_store(argv: list[str], command: str) -> tuple[str | None] | None:
    """``(--store's value or None,)`` when ``argv`` (without the program name) is ``command``
    with at most a ``--store`` before or after it (the last one wins, as in typer); None for
    any other command line."""
    store: str | None = None
    seen_command = False
    words = iter(argv)
    for arg in words:
        if arg == "--store":
            value = next(words, None)
            if value is None:
                return None
            store = value
        elif arg.startswith("--store="):
            store = arg.removeprefix("--store=")
        elif arg == command and not seen_command:
            seen_command = True
        else:
            return None
    return (store,) if seen_command else None


def fast_threads(argv: list[str]) -> int | None:
    """Print ``continuity threads`` and return 0; None to leave the command line (and any
    error) to the typer command."""
    parsed = parse_store(argv, "threads")
    if parsed is None:
        return None
    from continuity.paths import is_store_url, resolve_store_location

    (given,) = parsed
    location = resolve_store_location(given)
    if is_store_url(location):
        return None
    if (sys.stdout.encoding or "").lower().replace("-", "") != "utf8":
        return None  # the listing file holds UTF-8: the typer command encodes its own way
    from pathlib import Path

    from continuity.caches.listing import current_listing

    listing = current_listing(Path(location))
    if listing is None:
        return None
    try:
        sys.stdout.flush()
        sys.stdout.buffer.write(listing)
        sys.stdout.buffer.flush()
    except BrokenPipeError:
        # The reader went away (``| head``): quiet, exit 1, as click does.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return 0
