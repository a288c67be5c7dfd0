"""Compile, compaction and search on each backend against the reference model
(``continuity.testing.ContextContract``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from continuity.store.base import BaseStore
from continuity.store.jsonl import Store
from continuity.store.memory import MemoryStore
from continuity.testing import ContextContract


class TestMemoryStoreContext(ContextContract):
    def make_store(self, path: Path, clock: Callable[[], int]) -> BaseStore:
        return MemoryStore(clock=clock)


class TestJsonlStoreContext(ContextContract):
    def make_store(self, path: Path, clock: Callable[[], int]) -> BaseStore:
        return Store(path, create=True, durable=False, clock=clock)
