"""LangGraph's store tests on :class:`ContinuityStore` (``-p continuity_shims.lg_store``).

langgraph-checkpoint's ``tests/test_store.py`` builds every store it tests as
``InMemoryStore(...)``, imported from ``langgraph.store.memory``. This plugin is imported before
pytest collects that file, and puts a subclass of :class:`ContinuityStore` in that name: each
instance is a continuity store of the run's backend (a fresh JSONL folder or PostgreSQL schema),
taking the same ``index=`` and ``ttl=`` arguments. Tests of LangGraph's helpers that never build
a store run as they are.
"""

from __future__ import annotations

import atexit
from typing import Any

import langgraph.store.memory as memory
import pytest

from continuity.integrations.langgraph import ContinuityStore

from .stores import FreshStore

_opened: list[FreshStore] = []


class ContinuityInMemoryStore(ContinuityStore):
    """``InMemoryStore(index=…, ttl=…)`` as LangGraph's tests call it, on a fresh store."""

    def __init__(self, **kwargs: Any) -> None:
        fresh = FreshStore("lgstore")
        _opened.append(fresh)
        super().__init__(fresh.store, **kwargs)


def _close_all() -> None:
    while _opened:
        _opened.pop().close()


def pytest_runtest_teardown(item: pytest.Item) -> None:
    """Close the stores a test built (a PostgreSQL store holds a pool of connections)."""
    _close_all()


memory.InMemoryStore = ContinuityInMemoryStore  # type: ignore[misc, assignment]
atexit.register(_close_all)
