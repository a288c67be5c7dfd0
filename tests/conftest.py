"""The suite's shared fixtures, its markers, and ``--fast``.

The tests mirror the package: ``<path>/`` holds the tests of the package ``continuity/<path>/``
(``store/``, ``store/postgres/``, ``agents/base/``, ``agents/claude_code/``, ``cli/``, …) or of
the module ``continuity/<path>.py`` (``redaction/``, ``frames/``, …). Beside them: ``project/``
(the project's own rules and the tools' tests), ``docs/`` (the documentation's examples),
``outside/`` (the tests that need something from outside the venv), helpers in ``support/`` and
data in ``data/``. ``project/test_mirror.py`` keeps it so, and says what to move where.

**Markers**, by cost and by what a test needs (``pyproject.toml`` registers them):

* ``slow`` — a test that takes 0.15 s or more on a quiet machine (child processes, crashes,
  whole fixture sessions, many Hypothesis examples; still run in CI, with bounded examples);
* ``postgres`` — needs a PostgreSQL server: given to every test that uses ``pg_url``;
* ``integrations`` — imports LangGraph or the Agents SDK: every test in ``integrations/``;

and the markers of what a test needs from outside the venv, given only in ``outside/``:

* ``agents`` — runs a real agent client from npm (Claude Code, Codex, Gemini CLI, opencode, the
  MCP Inspector) against the scripted model server: ``outside/clients/`` (``tools/agents.py``
  installs the clients);
* ``browser`` — drives headless Chromium: ``outside/browser/``;
* ``upstream`` — runs a framework's own test suite from its sdist: ``outside/upstream/``;
* ``pgbouncer`` — needs PgBouncer: ``outside/pgbouncer/``.

``pytest --fast`` runs what needs none of those and is not slow, and does not even import the
``integrations/`` and ``outside/`` modules (the SDKs take seconds to import): the quick check
while working.
The terminal summary names any test not marked ``slow`` that took over 5 s.

**Fixtures** (kept generic so every test module can lean on them):

* ``clock`` — a :class:`~continuity.testing.FixedClock` (a store's ``clock``): the same
  millisecond every call until a test moves it, so two stores given the same frames write
  byte-identical logs.
* ``tmp_store`` — a JSONL :class:`~continuity.store.jsonl.Store` in ``tmp_path`` (``create=True``,
  ``durable=False``: tests do not need fsync) using ``clock``; ``open_store`` opens it again.
* ``memory_store`` — a :class:`~continuity.store.memory.MemoryStore` using ``clock``.
* ``shared_fixtures`` — the ``../shared/fixtures`` folder, or a skip with a clear reason when
  it is absent (``tests/support/fixtures.py`` has ``shared_fixture`` for one file of it).
* ``pg_url`` (session) and ``pg_stores`` — a PostgreSQL server and stores on it, each in a
  schema of its own (``tests/support/pg.py``); skipped, saying why, when there is no server.
"""

from __future__ import annotations

import atexit
import importlib
import os
import shutil
import tempfile

# The suite's tiny threads test the cache machinery: there, every thread keeps its caches (in
# child processes too). tests/caches/test_footprint.py tests the default, where small threads
# keep none (ADR 0031), and that both give the same answers.
os.environ.setdefault("CONTINUITY_SMALL_LOG_BYTES", "0")
# A sentence encoder runs in numpy unless a test asks for onnxruntime: no converted graph is
# written into the user's models home, and the suite's vectors do not depend on whether the onnx
# extra is installed. tests/retrieval/test_bert_onnx.py tests the onnx engine and the choice.
os.environ.setdefault("CONTINUITY_ENGINE", "numpy")

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import pytest

from continuity.store.jsonl import Store
from continuity.store.memory import MemoryStore
from continuity.testing import FixedClock
from tests.support.fixtures import NO_FIXTURES_REASON, SHARED_FIXTURES

if TYPE_CHECKING:
    from _pytest.terminal import TerminalReporter

    from tests.support.pg import PgStores

HERE = Path(__file__).resolve().parent
INTEGRATIONS = HERE / "integrations"
OUTSIDE = HERE / "outside"
NOT_IMPORTED_WHEN_FAST = (INTEGRATIONS, OUTSIDE)
NEEDS = ("slow", "postgres", "integrations", "agents", "browser", "upstream", "pgbouncer")
"""What ``--fast`` leaves out."""
SLOW_NOTE_SECONDS = 5.0


# --- a HOME of the suite's own ------------------------------------------------------------------


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """The suite writes nothing into the user's HOME but its one cache folder
    (``$CONTINUITY_TEST_CACHE``, default ``~/.cache/continuity-tests``: the agent clients, the
    frameworks' sdists, PgBouncer, fetched once and reused): each test process gets a HOME of its
    own, so what npm, the clients, a browser or a default store would write there goes to a
    folder deleted at exit. The cache's default is taken from the real HOME first."""
    os.environ.setdefault(
        "CONTINUITY_TEST_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "continuity-tests")
    )
    home = tempfile.mkdtemp(prefix="continuity-tests-home-")
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    os.environ["HOME"] = home
    for name in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"):
        os.environ.pop(name, None)
    os.environ.pop("CONTINUITY_HOME", None)


# --- markers and --fast ------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fast",
        action="store_true",
        help="only the tests that are not slow and need no PostgreSQL, agent SDK or anything "
        "outside the venv; the integrations/ and outside/ modules are not even imported",
    )


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if config.getoption("--fast") and any(
        collection_path.is_relative_to(folder) for folder in NOT_IMPORTED_WHEN_FAST
    ):
        return True
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "pg_url" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.postgres)
        if item.path.is_relative_to(INTEGRATIONS):
            item.add_marker(pytest.mark.integrations)
    if config.getoption("--fast"):
        kept = [i for i in items if not any(i.get_closest_marker(m) for m in NEEDS)]
        config.hook.pytest_deselected(items=[i for i in items if i not in set(kept)])
        items[:] = kept


def pytest_terminal_summary(terminalreporter: TerminalReporter) -> None:
    """Name the tests that took over 5 s without the ``slow`` marker (to mark them)."""
    unmarked = [
        (report.duration, report.nodeid)
        for report in terminalreporter.getreports("passed")
        if report.when == "call"
        and report.duration > SLOW_NOTE_SECONDS
        and "slow" not in report.keywords
    ]
    if unmarked:
        terminalreporter.write_sep("-", f"over {SLOW_NOTE_SECONDS:.0f} s and not marked slow")
        for duration, nodeid in sorted(unmarked, reverse=True):
            terminalreporter.write_line(f"{duration:7.1f} s  {nodeid}")


# --- fixtures ----------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def quality() -> ModuleType:
    """``tools/search_quality.py`` as a module (``tools`` is a folder of the checkout, not an
    installed package)."""
    root = str(HERE.parent)
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
        pytest.skip(NO_FIXTURES_REASON)
    return SHARED_FIXTURES


# --- PostgreSQL (tests/support/pg.py) -------------------------------------------------------


@pytest.fixture(scope="session")
def pg_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A PostgreSQL server's URL for the session: ``$CONTINUITY_TEST_PG_URL``, or a throwaway
    server started by ``pgserver``; the tests that use it skip, saying why, without either."""
    from tests.support.pg import serve

    with serve(tmp_path_factory.mktemp("pg")) as url:
        yield url


@pytest.fixture(autouse=True)
def _no_relay_left(request: pytest.FixtureRequest) -> Iterator[None]:
    """A PostgreSQL test's hooks may start a store's relay (ADR 0062): ended with the test."""
    on_server = "pg_url" in request.fixturenames or any(
        request.node.get_closest_marker(m) for m in ("postgres", "pgbouncer")
    )
    folder = request.getfixturevalue("tmp_path") if on_server else None
    yield
    if folder is not None:  # torn down before tmp_path, which was set up first
        from tests.support.relays import stop_relays

        stop_relays(folder)


@pytest.fixture
def pg_stores(pg_url: str) -> Iterator[PgStores]:
    """Opens PostgreSQL stores for one test (each in a schema of its own) and closes them."""
    from tests.support.pg import PgStores

    stores = PgStores(pg_url)
    try:
        yield stores
    finally:
        stores.close()
