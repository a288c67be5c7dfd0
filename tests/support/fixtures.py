"""The ``../shared/fixtures`` folder: real transcripts and sessions, beside the project in the
development setup and absent outside it. A test that needs one skips, saying why, without it."""

from __future__ import annotations

from pathlib import Path

import pytest

__all__ = ["NO_FIXTURES_REASON", "SHARED_FIXTURES", "requires_shared_fixtures", "shared_fixture"]

SHARED_FIXTURES = (Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures").resolve()
"""``../shared/fixtures`` relative to the project root (see ``../shared/README.md``)."""

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
