"""continuity: an append-only, hash-chained event log for agent conversations.

The log is the truth; everything else is a cache. Start with :class:`Store`::

    from continuity import Store, message
    store = Store("/path/to/store", create=True)
    store.thread("demo").append([message("user", "hello"), message("assistant", "hi")])

The names below are imported on first use (PEP 562), so importing the package costs nothing:
``continuity hook …`` starts through it and must start fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from continuity.errors import (
        ArtifactCorrupt,
        ArtifactNotFound,
        BadFrame,
        ContinuityError,
        CorruptFrame,
        InvalidThreadId,
        SeqConflict,
        StoreNotFound,
        ThreadNotFound,
    )
    from continuity.frames import Frame, message
    from continuity.memory import MemoryStore
    from continuity.store import BaseStore, Head, Recovery, Store, Thread

__version__ = "0.1.0"

_HOMES: Final = {
    "ArtifactCorrupt": "continuity.errors",
    "ArtifactNotFound": "continuity.errors",
    "BadFrame": "continuity.errors",
    "ContinuityError": "continuity.errors",
    "CorruptFrame": "continuity.errors",
    "InvalidThreadId": "continuity.errors",
    "SeqConflict": "continuity.errors",
    "StoreNotFound": "continuity.errors",
    "ThreadNotFound": "continuity.errors",
    "Frame": "continuity.frames",
    "message": "continuity.frames",
    "MemoryStore": "continuity.memory",
    "BaseStore": "continuity.store",
    "Head": "continuity.store",
    "Recovery": "continuity.store",
    "Store": "continuity.store",
    "Thread": "continuity.store",
}

__all__ = [
    "ArtifactCorrupt",
    "ArtifactNotFound",
    "BadFrame",
    "BaseStore",
    "ContinuityError",
    "CorruptFrame",
    "Frame",
    "Head",
    "InvalidThreadId",
    "MemoryStore",
    "Recovery",
    "SeqConflict",
    "Store",
    "StoreNotFound",
    "Thread",
    "ThreadNotFound",
    "__version__",
    "message",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'continuity' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
