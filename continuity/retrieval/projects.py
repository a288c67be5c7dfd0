"""Project scope: which threads belong to a project, however its path is written (ADR 0052).

A thread's project is the folder its agent ran in (``meta["project"]`` of its
``thread_created``), written as the agent wrote it. A search's ``project`` matches a thread
when the thread's folder is the project's or under it, comparing paths made plain: ``.``, ``..``
and trailing slashes gone, a relative path made absolute (from the current folder), and where
the path exists here, its symlinks resolved (either side may name the link or its target).
``/p/alpha`` never matches ``/p/alphabet``.
"""

from __future__ import annotations

import functools
import os
import posixpath

__all__ = ["ProjectScope", "in_project", "project_scope"]


class ProjectScope(str):
    """A project as a search was given it (the string), with the plain forms it matches."""

    forms: tuple[str, ...]

    def __new__(cls, written: str) -> ProjectScope:
        scope = super().__new__(cls, written)
        scope.forms = _forms(_absolute(written))
        return scope


def project_scope(project: str | None) -> ProjectScope | None:
    """``project`` as a :class:`ProjectScope` (None stays None; a scope is kept as it is)."""
    if project is None or isinstance(project, ProjectScope):
        return project
    return ProjectScope(project)


def _absolute(path: str) -> str:
    path = os.path.expanduser(path)
    return path if posixpath.isabs(path) or os.path.isabs(path) else os.path.abspath(path)


@functools.lru_cache(maxsize=4096)
def _forms(path: str) -> tuple[str, ...]:
    """The plain path, and its target when it exists here and is reached through a link."""
    plain = posixpath.normpath(path) if path.startswith("/") else os.path.normpath(path)
    if plain.startswith("//"):  # POSIX keeps a leading "//": one root is enough here
        plain = "/" + plain.lstrip("/")
    try:
        real = os.path.realpath(plain) if os.path.lexists(plain) else plain
    except OSError:
        real = plain
    return (plain,) if real == plain else (plain, real)


def in_project(stored: str | None, scope: str | None) -> bool:
    """Whether a thread whose project is ``stored`` is in ``scope`` (None: every thread)."""
    if scope is None:
        return True
    if not stored:
        return False
    if stored == scope:  # as written, whatever it is (a project named, not a path)
        return True
    wanted = project_scope(scope)
    assert wanted is not None
    for have in _forms(stored) if stored.startswith("/") or os.path.isabs(stored) else (stored,):
        for want in wanted.forms:
            if have == want or have.startswith(want.rstrip("/") + "/"):
                return True
    return False
