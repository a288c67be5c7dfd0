"""A package's names served on first use (PEP 562), listed once.

The list is the package's ``if TYPE_CHECKING:`` block of imports, each re-exported as itself
(``from continuity.frames import Limits as Limits``): what type checkers and editors read.
:func:`type_checking_homes` reads the same lines from the package's source for its
``__getattr__``, so importing the package imports none of them. The package root and
:mod:`continuity.context.render` serve their names this way.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["type_checking_homes"]

_IMPORT: Final = re.compile(r"from (continuity[\w.]*) import ([^\n(]+|\([^)]*\))")
_REEXPORT: Final = re.compile(r"(\w+) as \1\b")


def type_checking_homes(path: str) -> dict[str, str]:
    """Each name the module at ``path`` imports under its top-level ``if TYPE_CHECKING:`` as
    itself, with the module it comes from."""
    with open(path, encoding="utf-8") as f:
        source = f.read()
    start = source.index("\nif TYPE_CHECKING:\n") + 1
    lines = source[start:].split("\n")[1:]
    block = "\n".join(
        lines[
            : next(
                (i for i, line in enumerate(lines) if line and line[0] not in " \t)"), len(lines)
            )
        ]
    )
    return {
        name: home for home, names in _IMPORT.findall(block) for name in _REEXPORT.findall(names)
    }
