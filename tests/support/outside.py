"""An outside package for the registries' tests (ADR 0047): what a third party's package adds
to continuity — a store backend under the URL scheme ``memtest`` and an embedder kind
``hashtest`` — and :func:`install`, which installs it the way pip leaves a package: a
``*.dist-info`` folder with an ``entry_points.txt``, in a folder put on ``sys.path``. The
registries find it through ``importlib.metadata``, as they would a real one: nothing is mocked.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

from continuity import frames as fr
from continuity.errors import ModelError, StoreNotFound
from continuity.retrieval.embedders import HashedEmbedder
from continuity.store.base import Recovery
from continuity.store.memory import MemoryStore

__all__ = [
    "DISTRIBUTION",
    "ENTRY_POINTS",
    "HashtestEmbedder",
    "MemtestStore",
    "hashtest_model",
    "install",
    "open_memtest",
]

DISTRIBUTION = "continuity-outside-test"
ENTRY_POINTS: Mapping[str, Mapping[str, str]] = {
    "continuity.stores": {"memtest": "tests.support.outside:open_memtest"},
    "continuity.embedders": {"hashtest": "tests.support.outside:HashtestEmbedder"},
}
"""What the package declares, as ``[project.entry-points."continuity.stores"]`` would."""


def install(site: Path, entry_points: Mapping[str, Mapping[str, str]] = ENTRY_POINTS) -> Path:
    """Write the package's metadata into ``site`` (a folder the caller puts on ``sys.path``);
    the code it names is this module, importable wherever the tests are."""
    info = site / f"{DISTRIBUTION.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {DISTRIBUTION}\nVersion: 0.1\n")
    lines: list[str] = []
    for group, entries in entry_points.items():
        lines += [f"[{group}]", *(f"{name} = {value}" for name, value in entries.items()), ""]
    (info / "entry_points.txt").write_text("\n".join(lines))
    return site


# --- the store backend --------------------------------------------------------------------------


class MemtestStore(MemoryStore):
    """An in-memory store named by a ``memtest://NAME`` URL: every open of one URL in this
    process is the same store, as every open of a server's URL reaches the same data."""

    opened: ClassVar[dict[str, MemtestStore]] = {}

    def __init__(
        self,
        url: str,
        *,
        clock: Callable[[], int] | None = None,
        redactor: Callable[[fr.Frame], fr.Frame] | None = None,
    ) -> None:
        super().__init__(clock=clock, redactor=redactor)
        self.url = url

    @property
    def location(self) -> str:
        return self.url


def open_memtest(
    location: str,
    /,
    *,
    create: bool,
    durable: bool,
    on_recovery: Callable[[Recovery], None] | None,
    redactor: Callable[[fr.Frame], fr.Frame] | None,
    **options: Any,
) -> MemtestStore:
    """The store opener the package registers (``continuity.store.locate.StoreOpener``)."""
    del durable, on_recovery  # memory: nothing to sync, no torn tails
    store = MemtestStore.opened.get(location)
    if store is None:
        if not create:
            raise StoreNotFound(f"no memtest store at {location}")
        store = MemtestStore(location, redactor=redactor, **options)
        MemtestStore.opened[location] = store
    return store


# --- the embedder kind --------------------------------------------------------------------------


class HashtestEmbedder(HashedEmbedder):
    """:class:`HashedEmbedder` made from a model folder: one holding ``hashtest.json``
    (``{"dim": N}``) is of this kind."""

    @property
    def id(self) -> str:
        return f"hashtest/{self.dim}"

    @property
    def spec(self) -> tuple[str, tuple[int]]:
        return "tests.support.outside:HashtestEmbedder", (self.dim,)

    @classmethod
    def recognises(cls, folder: Path) -> bool:
        return (folder / "hashtest.json").is_file()

    @classmethod
    def from_folder(cls, folder: Path, *, engine: str | None = None) -> HashtestEmbedder:
        try:
            dim = json.loads((folder / "hashtest.json").read_text())["dim"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ModelError(f"{folder} holds no hashtest model ({exc})") from None
        return cls(int(dim))


def hashtest_model(folder: Path, dim: int = 64) -> Path:
    """A model folder of the ``hashtest`` kind."""
    folder.mkdir(parents=True)
    (folder / "hashtest.json").write_text(json.dumps({"dim": dim}))
    return folder
