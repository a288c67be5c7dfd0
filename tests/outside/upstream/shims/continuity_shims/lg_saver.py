"""LangGraph's graph tests on :class:`ContinuitySaver` (``-p continuity_shims.lg_saver``).

LangGraph parametrizes its graph tests by checkpointer through two fixtures of its
``tests/conftest.py``, ``sync_checkpointer`` and ``async_checkpointer`` (params ``memory``,
``sqlite``, ``postgres_pipe``, …, built by ``tests/conftest_checkpointer.py``). Before pytest
reads that conftest's fixtures (it defers them until its folder is collected), this plugin
swaps both for fixtures of ours with one param, ``continuity_jsonl`` or ``continuity_postgres``:
a :class:`ContinuitySaver` on a fresh store of the run's backend. Everything else in their
conftest (stores, caches, durability, snapshots) stays theirs.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver

from continuity.integrations.langgraph import ContinuitySaver

from .stores import FreshStore, backend

CHECKPOINTER_FIXTURES = ("sync_checkpointer", "async_checkpointer")


def _saver(request: pytest.FixtureRequest) -> Iterator[BaseCheckpointSaver[str]]:
    fresh = FreshStore(request.node.name)
    try:
        yield ContinuitySaver(fresh.store)
    finally:
        fresh.close()


@pytest.fixture(name="sync_checkpointer", params=[f"continuity_{backend()}"])
def sync_checkpointer(request: pytest.FixtureRequest) -> Iterator[BaseCheckpointSaver[str]]:
    yield from _saver(request)


@pytest.fixture(name="async_checkpointer", params=[f"continuity_{backend()}"])
def async_checkpointer(request: pytest.FixtureRequest) -> Iterator[BaseCheckpointSaver[str]]:
    # ContinuitySaver is one object for both faces (its a* methods run on the store's worker),
    # so the async fixture is the same saver; a plain fixture serves async tests too.
    yield from _saver(request)


def pytest_plugin_registered(plugin: object, plugin_name: str) -> None:
    """Swap the checkpointer fixtures of LangGraph's ``tests/conftest.py`` as it registers."""
    if not isinstance(plugin, ModuleType) or not plugin_name.endswith("conftest.py"):
        return
    if plugin.__name__ != "tests.conftest":
        return
    missing = [name for name in CHECKPOINTER_FIXTURES if not hasattr(plugin, name)]
    if missing:  # a LangGraph whose tests changed shape: say so, do not run the wrong saver
        raise pytest.UsageError(
            f"LangGraph's {plugin_name} has no fixture {', '.join(missing)}: "
            "the continuity shim (tests/outside/upstream/shims) needs updating for this version"
        )
    plugin.sync_checkpointer = sync_checkpointer  # type: ignore[attr-defined]
    plugin.async_checkpointer = async_checkpointer  # type: ignore[attr-defined]
