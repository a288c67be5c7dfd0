"""Registries by name: what continuity finds by a name a user gives it (an agent, a store's URL
scheme, an embedder), with the built-ins registered the way an outside package registers its own.

A registry maps names to objects named by import path (``"continuity.store.jsonl:Store"``),
imported on first use, so listing or registering costs no import. A name it does not know is
looked up in the registry's entry-point group (``[project.entry-points."continuity.agents"]``
in an outside package's ``pyproject.toml``), once per name and process and only then: a run
that uses built-ins alone (every hook) never scans the installed packages' metadata (tens of
milliseconds). A scan remembers every name the group has, so a name found once is not looked
up again; an entry point that does not import says which entry it was (a note on the error). A
program can also :meth:`Registry.register` an object at run time (a test's adapter, an
embedder made in a notebook).

Three registries use this: the coding agents (:mod:`continuity.agents.registry`), the store
schemes :func:`~continuity.store.locate.open_store` opens (:mod:`continuity.store.locate`) and
the embedders a store's ``search.json`` names (:mod:`continuity.retrieval.models`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Generic, TypeVar, cast

from continuity.errors import UnknownName

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

__all__ = ["Registry", "UnknownName"]

T = TypeVar("T")


def _load(path: str) -> object:
    module, _, attr = path.partition(":")
    obj: object = importlib.import_module(module)
    for part in attr.split(".") if attr else ():
        obj = getattr(obj, part)
    return obj


class Registry(Generic[T]):
    """Objects of one kind by name: built-ins by import path, outside ones by entry point."""

    def __init__(
        self,
        kind: str,
        group: str,
        builtins: dict[str, str],
        *,
        key: Callable[[str], str] = str,
        check: Callable[[object], T] | None = None,
    ) -> None:
        self.kind = kind
        """What the registry holds, for messages: ``agent``, ``store scheme``, ``embedder``."""
        self.group = group
        """The entry-point group outside packages register in: ``continuity.agents``, …"""
        self._key = key
        self._check = check
        self._paths: dict[str, str] = {key(n): p for n, p in builtins.items()}
        self._loaded: dict[str, T] = {}
        self._order: dict[str, None] = dict.fromkeys(self._paths)
        self._scanned: set[str] = set()

    def names(self) -> list[str]:
        """The names known so far (built-ins, registered, and entry points found), in the order
        they became known (a name registered again keeps its place); :meth:`installed` adds
        every installed entry point."""
        return list(self._order)

    def installed(self) -> list[str]:
        """Every name, the installed packages' entry points included (scans their metadata;
        a name known already keeps what it names)."""
        for ep in self._entry_points():
            key = self._key(ep.name)
            if not self.knows(key):
                self._paths[key] = ep.value
                self._order[key] = None
            self._scanned.add(key)
        return self.names()

    def register(self, name: str, obj: T | str) -> None:
        """Register ``obj`` (or its import path, ``"package.module:attr"``) under ``name``,
        replacing what had that name."""
        key = self._key(name)
        self._loaded.pop(key, None)
        self._paths.pop(key, None)
        self._order[key] = None
        if isinstance(obj, str):
            self._paths[key] = obj
        else:
            self._loaded[key] = obj

    def unregister(self, name: str) -> None:
        """Forget ``name`` (a built-in too; a later lookup may find it as an entry point)."""
        key = self._key(name)
        self._loaded.pop(key, None)
        self._paths.pop(key, None)
        self._order.pop(key, None)
        self._scanned.discard(key)

    def knows(self, name: str) -> bool:
        """Whether ``name`` is registered (no import, no metadata scan)."""
        key = self._key(name)
        return key in self._loaded or key in self._paths

    def get(self, name: str) -> T:
        """The object registered as ``name``, imported on first use; an unknown name is looked
        up in the entry-point group (once). :class:`UnknownName` names the known ones."""
        key = self._key(name)
        if key in self._loaded:
            return self._loaded[key]
        path = self._paths.get(key)
        if path is None:
            path = self._entry_point(key)
        try:
            obj = _load(path)
            checked = self._check(obj) if self._check is not None else cast(T, obj)
        except (ImportError, AttributeError, TypeError) as exc:
            # A broken entry point's traceback names the outside package's module, not which
            # registry entry pointed there.
            exc.add_note(f"continuity: the {self.kind} {key!r} is {path!r} ({self.group})")
            raise
        self._loaded[key] = checked
        return checked

    def find(self, name: str) -> T | None:
        """:meth:`get`, or None for an unknown name."""
        try:
            return self.get(name)
        except UnknownName:
            return None

    def _entry_points(self) -> list[EntryPoint]:
        from importlib.metadata import entry_points

        return list(entry_points(group=self.group))

    def _entry_point(self, key: str) -> str:
        if key not in self._scanned:
            self._scanned.add(key)
            self.installed()  # every name the group has, for this one and for the message
            path = self._paths.get(key)
            if path is not None:
                return path
        raise UnknownName(
            f"unknown {self.kind} {key!r}: known are {', '.join(self.names()) or 'none'} "
            f"(an installed package adds one under the entry-point group {self.group!r})"
        )

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
