"""continuity: an append-only, hash-chained event log for agent conversations.

The log is the truth; everything else is a cache. Start with :class:`Store`::

    from continuity import Store, message
    store = Store("/path/to/store", create=True)
    store.thread("demo").append([message("user", "hello"), message("assistant", "hi")])

This module imports only what the hook path can afford (no numpy, no CLI stack).
"""

from __future__ import annotations

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
