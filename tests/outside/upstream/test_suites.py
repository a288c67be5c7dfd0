"""LangGraph's graph tests and the Agents SDK's session tests, run against continuity.

Each test here is one child pytest in a framework's own pinned sdist (``suites.py``): it fails
when any test there fails on continuity, when fewer than the recorded floor pass on continuity,
or when an entry of our deselect list matches no test of its file. Without the network (and
nothing in the cache) it skips, saying why. ``$CONTINUITY_UPSTREAM``: ``ci`` (default),
``full``, ``off``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.outside.upstream.suites import Run, execute, runs
from tools import upstream

SHOWN: int = 40


def _tree(run: Run) -> Path:
    mismatch = upstream.installed_mismatch(run.dist)
    if mismatch:
        pytest.fail(mismatch)
    try:
        return upstream.fetch(run.dist)
    except upstream.Unavailable as exc:
        pytest.skip(f"the pinned {run.dist} sdist cannot be had here: {exc}")


@pytest.mark.slow
@pytest.mark.integrations
@pytest.mark.upstream
@pytest.mark.parametrize("run", runs(), ids=lambda r: r.id)
def test_upstream_suite_on_continuity(run: Run, request: pytest.FixtureRequest) -> None:
    tree = _tree(run)
    pg_url = request.getfixturevalue("pg_url") if run.backend == "postgres" else None
    outcome = execute(run, tree, pg_url=pg_url)
    report = outcome.report
    bad = outcome.ids("failed", "error")
    listing = "\n".join(f"  {i}: {report['message'].get(i, '')[:300]}" for i in bad[:SHOWN])
    assert not bad, (
        f"{len(bad)} upstream tests failed on continuity ({run.id}; counts "
        f"{outcome.counts()}):\n{listing}\n(a real bug: fix it, or list it in "
        f"tests/outside/upstream/deselect.toml with the reason)\n{outcome.output[-3000:]}"
    )
    assert not report["stale"], (
        f"deselect entries that match no test of their file ({run.id}): {report['stale']}"
    )
    assert outcome.passed_on_continuity >= run.floor, (
        f"{run.id}: only {outcome.passed_on_continuity} upstream tests passed on continuity, "
        f"the floor is {run.floor} (counts {outcome.counts()}):\n{outcome.output[-3000:]}"
    )
    print(f"{run.id}: {outcome.counts()}")
