"""How to type ``continuity`` again in the shell it was run from, for the commands a message
suggests (``continuity demo``'s "Next" lines).

The one-line quick start runs ``.venv/bin/continuity demo`` in a shell whose PATH has no
``continuity``: a suggestion written ``continuity log …`` would fail there (exit 127). So a
suggestion starts the way this process was started, read from ``sys.argv[0]``:

- the console script found on PATH: ``continuity``;
- the console script by its path (``.venv/bin/continuity``): that path, as it was typed;
- ``python -m continuity``: the interpreter's name when PATH finds this very interpreter by it
  (``python``, ``python3``), else its path (relative to the working folder when inside it);
- anything else (a test runner, an embedding program): ``continuity``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

__all__ = ["invoked_as"]

_PROGRAM = "continuity"


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _shown(path: str) -> str:
    """``path`` relative to the working folder when it is inside it, else absolute."""
    absolute = os.path.abspath(path)
    relative = os.path.relpath(absolute)
    return relative if not relative.startswith("..") else absolute


def invoked_as(
    argv0: str | None = None,
    executable: str | None = None,
    which: Callable[[str], str | None] = shutil.which,
) -> str:
    """The command that starts this program again from the same shell and folder, quoted for a
    POSIX shell (see the module's docstring); ``argv0`` and ``executable`` default to
    ``sys.argv[0]`` and ``sys.executable``."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    executable = sys.executable if executable is None else executable
    name = Path(argv0).name
    if name == "__main__.py" and Path(argv0).parent.name == _PROGRAM:
        for python in ("python", "python3"):
            found = which(python)
            # not samefile: a venv's python is a link to the base interpreter, which lacks the
            # venv's packages
            if found and os.path.abspath(found) == os.path.abspath(executable):
                return f"{python} -m {_PROGRAM}"
        return f"{shlex.quote(_shown(executable))} -m {_PROGRAM}"
    if name in (_PROGRAM, f"{_PROGRAM}.exe"):
        found = which(_PROGRAM)
        if found and _same_file(found, argv0):
            return _PROGRAM
        return shlex.quote(argv0)
    return _PROGRAM
