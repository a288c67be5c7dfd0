"""The Agents SDK's session and runner tests on continuity's sessions
(``-p continuity_shims.agents_session``).

The SDK's tests make their sessions with ``SQLiteSession(session_id, db_path)`` (``db_path``
``":memory:"`` by default), imported from ``agents`` or ``agents.memory``. Before any test module
is imported, this plugin puts in both places a :class:`ContinuitySession` (or, with
``$CONTINUITY_UPSTREAM_SESSION=compiled``, a :class:`CompiledSession`) that takes the same
arguments: ``:memory:`` is a fresh store, and a file path is one store per path (two sessions on
one file share it, as two ``SQLiteSession`` on one database do). The stores a test opened are
closed (PostgreSQL schemas dropped) after it. ``agents.memory.sqlite_session.SQLiteSession``
itself stays the SDK's, for the SDK's own subclasses (``AdvancedSQLiteSession``, …).

Each test that made at least one such session is marked (its report says ``continuity``), so
the runner can tell the tests that ran on continuity from the rest of a file.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import agents
import agents.memory
import pytest
from agents.memory import SessionSettings

from continuity.integrations.openai_agents import CompiledSession, ContinuitySession

from .stores import FreshStore

SESSION_ENV: Final = "CONTINUITY_UPSTREAM_SESSION"
SESSIONS: Final = ("continuity", "compiled")
USED_KEYWORD: Final = "continuity_session"


class _Opened:
    """The stores opened during the current test, by key (``None``: a ``:memory:`` one)."""

    def __init__(self) -> None:
        self.by_path: dict[str, FreshStore] = {}
        self.anonymous: list[FreshStore] = []

    def store_for(self, session_id: str, db_path: str | Path) -> FreshStore:
        if str(db_path) == ":memory:":
            fresh = FreshStore(session_id)
            self.anonymous.append(fresh)
            return fresh
        key = str(Path(db_path).resolve())
        if key not in self.by_path:
            self.by_path[key] = FreshStore(session_id, key=key)
        return self.by_path[key]

    @property
    def used(self) -> bool:
        return bool(self.by_path or self.anonymous)

    def close_all(self) -> None:
        for fresh in [*self.anonymous, *self.by_path.values()]:
            fresh.close()
        self.by_path.clear()
        self.anonymous.clear()


OPENED = _Opened()


def _close(session: ContinuitySession) -> None:
    """``SQLiteSession.close()`` is synchronous, continuity's (like the SDK's other sessions')
    a coroutine; the shim's stores are passed in, so closing one only marks it closed (what the
    coroutine does then), and the shim closes the test's stores after it."""
    session.closed = True


class ContinuitySQLiteSession(ContinuitySession):
    """``SQLiteSession``'s constructor over a :class:`ContinuitySession`."""

    def __init__(
        self,
        session_id: str,
        db_path: str | Path = ":memory:",
        sessions_table: str = "agent_sessions",
        messages_table: str = "agent_messages",
        session_settings: SessionSettings | dict[str, Any] | None = None,
    ) -> None:
        fresh = OPENED.store_for(session_id, db_path)
        super().__init__(session_id, fresh.store, session_settings=session_settings)
        self.db_path = db_path
        self.sessions_table = sessions_table
        self.messages_table = messages_table

    def close(self) -> None:  # type: ignore[override]
        _close(self)


class CompiledSQLiteSession(CompiledSession):
    """``SQLiteSession``'s constructor over a :class:`CompiledSession` (no compaction rule:
    ``get_items()`` is the compiled window of everything added)."""

    def __init__(
        self,
        session_id: str,
        db_path: str | Path = ":memory:",
        sessions_table: str = "agent_sessions",
        messages_table: str = "agent_messages",
        session_settings: SessionSettings | dict[str, Any] | None = None,
    ) -> None:
        fresh = OPENED.store_for(session_id, db_path)
        super().__init__(session_id, fresh.store, session_settings=session_settings)
        self.db_path = db_path
        self.sessions_table = sessions_table
        self.messages_table = messages_table

    def close(self) -> None:  # type: ignore[override]
        _close(self)


def session_class() -> type[ContinuitySession]:
    name = os.environ.get(SESSION_ENV, "continuity")
    if name not in SESSIONS:
        raise ValueError(f"${SESSION_ENV} is {name!r}: it must be one of {', '.join(SESSIONS)}")
    return CompiledSQLiteSession if name == "compiled" else ContinuitySQLiteSession


def pytest_configure(config: pytest.Config) -> None:
    swapped = session_class()
    agents.SQLiteSession = swapped  # type: ignore[misc,assignment]
    agents.memory.SQLiteSession = swapped  # type: ignore[misc,assignment]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    try:
        return (yield)
    finally:
        if OPENED.used:
            item.user_properties.append((USED_KEYWORD, True))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    try:
        return (yield)
    finally:
        if OPENED.used:
            item.user_properties.append((USED_KEYWORD, True))
        OPENED.close_all()
