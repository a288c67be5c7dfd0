"""The README's test command works on a clone with nothing beside it: without ``../shared`` the
whole suite still collects (a ``pytest.skip`` at collection would end the run before any test),
and what needs the fixtures skips, saying why."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # a collection of the whole suite in a fresh process
def test_the_whole_suite_collects_without_the_shared_fixtures(tmp_path: Path) -> None:
    env = {**os.environ, "CONTINUITY_TEST_SHARED_FIXTURES": str(tmp_path / "no-shared")}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    tail = "\n".join(done.stdout.splitlines()[-15:])
    assert done.returncode == 0, f"collection failed without ../shared:\n{tail}\n{done.stderr}"
    assert "error" not in done.stdout.splitlines()[-1].lower(), tail


def test_the_suite_runs_with_a_home_of_its_own() -> None:
    """Nothing a test writes under HOME (npm's cache, a client's settings, a default store)
    reaches the user's: each test process has a throwaway HOME; the one folder kept is the
    cache the README names."""
    home = Path.home()
    assert home.name.startswith("continuity-tests-home-"), home
    import tempfile

    assert home.parent == Path(tempfile.gettempdir())
    assert not any(k.startswith("XDG_") and k.endswith("_HOME") for k in os.environ)
    assert "CONTINUITY_HOME" not in os.environ
    cache = Path(os.environ["CONTINUITY_TEST_CACHE"])
    assert not cache.is_relative_to(home)
