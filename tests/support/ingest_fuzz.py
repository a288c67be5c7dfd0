"""The bounded form of ``tools/faults/ingest.py`` the suite runs per source format: a few
trials of each mutation, small sessions, a fixed seed (printed in every failure), and every
invariant asserted (0 lost good lines, 0 tracebacks, 0 silent empty results, 0 silent losses).
The full-size run is ``python -m tools.faults.ingest``."""

from __future__ import annotations

from pathlib import Path

from tools.faults.ingest import describe, run_format

__all__ = ["SEED", "assert_nothing_good_lost"]

SEED = 40_2026
"""The suite's seed: each trial's own seed follows from it (and is printed when one fails)."""


def assert_nothing_good_lost(
    fmt: str, mutation: str, folder: Path, *, trials: int = 3, size: int = 40
) -> None:
    totals = run_format(
        fmt, trials=trials, size=size, seed=SEED, folder=folder, mutations=(mutation,)
    )
    assert len(totals.trials) == trials
    bad = totals.bad()
    said = "\n".join(describe(t) for t in bad)
    assert (totals.lost(), totals.tracebacks(), totals.silent_empty(), totals.silent_losses()) == (
        0,
        0,
        0,
        0,
    ), f"{fmt} {mutation} (suite seed {SEED}):\n{said}"
