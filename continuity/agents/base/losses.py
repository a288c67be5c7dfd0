"""What an ingest could not archive, said once: every adapter's ``ingest`` keeps what it can
read, and names what it could not — the file, the line or page, and why — in one line.

A reader gives the places (:func:`read_places` turns a :class:`ReadResult`'s offsets into line
numbers while the file is still there); :class:`Losses` gathers them over a whole run, and
:meth:`Losses.line` is the one line a command ends with when something was lost (it then exits
1). Nothing lost, nothing said: a line still being written is not lost, it is read later.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from continuity.agents.base.lines import (
    MAX_LINE_BYTES,
    UNREADABLE,
    UNREADABLE_KEPT,
    ReadResult,
    line_numbers,
)
from continuity.agents.base.report import count, shown

__all__ = ["PLACES_SHOWN", "Losses", "read_places"]

PLACES_SHOWN: Final = UNREADABLE_KEPT
"""How many places the one line names; then how many more there were."""


def read_places(path: Path, read: ReadResult[Any], *, named: str | None = None) -> list[str]:
    """The first places of ``read`` that were not archived, as ``file line N (why)``: its
    unreadable lines and those over the size cap. ``path`` is the file read (it must still
    exist for the line numbers; else byte offsets are given); ``named`` is how to name it (the
    file the user gave, when ``path`` is a decompressed copy of it)."""
    name = named if named is not None else shown(path)
    found = [(o, UNREADABLE[r]) for o, r in zip(read.unreadable, read.reasons, strict=True)]
    cap = f"longer than {MAX_LINE_BYTES >> 20} MiB, never loaded"
    found += [(o, cap) for o in read.oversize]
    found.sort()
    offsets = [o for o, _ in found]
    try:
        where = [f"line {n}" for n in line_numbers(path, offsets)]
    except OSError:  # gone since the read: its offsets are still a place to look
        where = [f"byte {o}" for o in offsets]
    return [f"{name} {w} ({why})" for w, (_, why) in zip(where, found, strict=True)]


class Losses:
    """What a run could not archive: a count, and the first places with why."""

    def __init__(self) -> None:
        self.lines = 0
        self.files = 0
        self.parts: dict[str, int] = {}
        """Other things lost whole, by noun (``session``, ``page``…)."""
        self.places: list[str] = []

    def add_read(self, lost: int, places: list[str]) -> None:
        """``lost`` lines of one file, the first of them at ``places``."""
        self.lines += lost
        self.places.extend(places[: max(0, lost)])

    def add_file(self, path: Path | str, why: str) -> None:
        """A whole file (or session, database…) that could not be read at all."""
        self.files += 1
        self.places.append(f"{path if isinstance(path, str) else shown(path)} ({why})")

    def add_part(self, noun: str, place: str) -> None:
        """Something lost that is neither a line nor a whole file: a ``session`` of a database,
        the ``end`` of a file cut short… (``place`` says which, and why)."""
        self.parts[noun] = self.parts.get(noun, 0) + 1
        self.places.append(place)

    def add_parts(self, noun: str, n: int, places: list[str]) -> None:
        """``n`` things called ``noun`` lost, the first of them at ``places``."""
        if n > 0:
            self.parts[noun] = self.parts.get(noun, 0) + n
            self.places.extend(places[:n])

    def total(self) -> int:
        return self.lines + self.files + sum(self.parts.values())

    def __bool__(self) -> bool:
        return self.total() > 0

    def line(self) -> str:
        """The one line that names what was lost ("" when nothing was)."""
        if not self:
            return ""
        what = [count(self.lines, "line")] if self.lines else []
        if self.files:
            what.append(count(self.files, "file"))
        what += [count(n, noun) for noun, n in self.parts.items()]
        said = self.places[:PLACES_SHOWN]
        more = self.total() - len(said)
        tail = f" and {more} more" if more > 0 else ""
        return f"not archived ({', '.join(what)}): {'; '.join(said)}{tail}"
