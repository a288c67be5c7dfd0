"""Shared fixtures: stores on a temporary folder, a fixed clock, and the ``../shared`` fixtures.

Kept generic on purpose so every test module can lean on it:

* ``clock`` — a :class:`~continuity.testing.FixedClock` (a store's ``clock``): the same
  millisecond every call until a test moves it, so two stores given the same frames write
  byte-identical logs. It comes from :mod:`continuity.testing`, where the backend contract
  suites live.
* ``tmp_store`` — a JSONL :class:`~continuity.store.jsonl.Store` in ``tmp_path`` (``create=True``,
  ``durable=False``: tests do not need fsync) using ``clock``.
* ``memory_store`` — a :class:`~continuity.store.memory.MemoryStore` using ``clock``.
* ``shared_fixtures`` — the ``../shared/fixtures`` folder, or a skip with a clear reason when
  it is absent (the project must still test outside this setup); ``requires_shared_fixtures``
  is the same as a marker for whole tests or classes.
* ``pg_url`` (session) and ``pg_stores`` — a PostgreSQL server and stores on it, each in a
  schema of its own (``tests/pg_support.py``); skipped, saying why, when there is no server.
"""

from __future__ import annotations

import importlib
import os

# The suite's tiny threads test the cache machinery: there, every thread keeps its caches (in
# child processes too). tests/test_footprint.py tests the default, where small threads keep none
# (ADR 0031), and that both give the same answers.
os.environ.setdefault("CONTINUITY_SMALL_LOG_BYTES", "0")

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import pytest

from continuity.store.jsonl import Store
from continuity.store.memory import MemoryStore
from continuity.testing import FixedClock

if TYPE_CHECKING:
    from pg_support import PgStores

SHARED_FIXTURES = (Path(__file__).parent.parent / ".." / "shared" / "fixtures").resolve()
"""``../shared/fixtures`` relative to the project root (see ``../shared/README.md``)."""

_NO_FIXTURES_REASON = (
    f"shared test fixtures not found at {SHARED_FIXTURES} "
    "(they live in ../shared/fixtures next to the project; absent outside the dev setup)"
)

requires_shared_fixtures = pytest.mark.skipif(
    not SHARED_FIXTURES.is_dir(), reason=_NO_FIXTURES_REASON
)


def shared_fixture(*parts: str) -> Path:
    """The path of one file or folder under ``../shared/fixtures``; skips the test if absent."""
    path = SHARED_FIXTURES.joinpath(*parts)
    if not path.exists():
        pytest.skip(
            _NO_FIXTURES_REASON if not SHARED_FIXTURES.is_dir() else f"fixture {path} not found"
        )
    return path


@pytest.fixture(scope="session")
def quality() -> ModuleType:
    """``tools/search_quality.py`` as a module (``tools`` is a folder of the checkout, not an
    installed package)."""
    root = str(Path(__file__).resolve().parent.parent)
    if root not in sys.path:
        sys.path.insert(0, root)
    return importlib.import_module("tools.search_quality")


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock()


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    """Where ``tmp_store`` lives (the folder is created by the store)."""
    return tmp_path / "store"


@pytest.fixture
def tmp_store(store_path: Path, clock: FixedClock) -> Store:
    return Store(store_path, create=True, durable=False, clock=clock)


@pytest.fixture
def memory_store(clock: FixedClock) -> MemoryStore:
    return MemoryStore(clock=clock)


@pytest.fixture
def open_store(store_path: Path, clock: FixedClock) -> Callable[..., Store]:
    """Open (again) the store at ``store_path``, as a new process would; keyword arguments
    override the defaults (``durable=False``, the fixed ``clock``)."""

    def _open(**kwargs: object) -> Store:
        options: dict[str, object] = {"durable": False, "clock": clock}
        options.update(kwargs)
        return Store(store_path, **options)  # type: ignore[arg-type]

    return _open


@pytest.fixture
def shared_fixtures() -> Path:
    """``../shared/fixtures``, or skip the test with a clear reason when it is absent."""
    if not SHARED_FIXTURES.is_dir():
        pytest.skip(_NO_FIXTURES_REASON)
    return SHARED_FIXTURES


# --- PostgreSQL (tests/pg_support.py) -------------------------------------------------------


@pytest.fixture(scope="session")
def pg_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A PostgreSQL server's URL for the session: ``$CONTINUITY_TEST_PG_URL``, or a throwaway
    server started by ``pgserver``; the tests that use it skip, saying why, without either."""
    from pg_support import serve

    with serve(tmp_path_factory.mktemp("pg")) as url:
        yield url


@pytest.fixture
def pg_stores(pg_url: str) -> Iterator[PgStores]:
    """Opens PostgreSQL stores for one test (each in a schema of its own) and closes them."""
    from pg_support import PgStores

    stores = PgStores(pg_url)
    try:
        yield stores
    finally:
        stores.close()
