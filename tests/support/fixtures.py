"""The ``../shared/fixtures`` folder: real transcripts and sessions, beside the project in the
development setup and absent outside it. A test that needs one skips, saying why, without it."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

__all__ = [
    "NO_FIXTURES_REASON",
    "SHARED_FIXTURES",
    "fixture_params",
    "requires_shared_fixtures",
    "shared_fixture",
]

SHARED_FIXTURES = Path(
    os.environ.get("CONTINUITY_TEST_SHARED_FIXTURES")
    or Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures"
).resolve()
"""``../shared/fixtures`` relative to the project root (see ``../shared/README.md``);
``$CONTINUITY_TEST_SHARED_FIXTURES`` names another place (a test points it nowhere to run the
suite as a clone without them would)."""

NO_FIXTURES_REASON = (
    f"shared test fixtures not found at {SHARED_FIXTURES} "
    "(they live in ../shared/fixtures next to the project; absent outside the dev setup)"
)

requires_shared_fixtures = pytest.mark.skipif(
    not SHARED_FIXTURES.is_dir(), reason=NO_FIXTURES_REASON
)
"""A marker for whole tests or classes that need the fixtures."""


def shared_fixture(*parts: str) -> Path:
    """The path of one file or folder under ``../shared/fixtures``; skips the test if absent."""
    path = SHARED_FIXTURES.joinpath(*parts)
    if not path.exists():
        pytest.skip(
            NO_FIXTURES_REASON if not SHARED_FIXTURES.is_dir() else f"fixture {path} not found"
        )
    return path


def fixture_params(found: Callable[[], Sequence[object]]) -> list[object]:
    """What ``found()`` lists from the fixtures, for ``parametrize``; without the fixtures, one
    parameter that skips saying why. Collection runs before any test: a ``pytest.skip`` there
    would end the whole run, so ``found`` is called only when the fixtures are there."""
    if not SHARED_FIXTURES.is_dir():
        return [pytest.param(None, marks=pytest.mark.skip(reason=NO_FIXTURES_REASON))]
    return list(found())
