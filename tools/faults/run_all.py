"""Run every fault family and print their tables, then one summary line per family.

    python -m tools.faults [--scale F] [--only writers,kills,corruption,hooks,fulldisk,ingest]
                           [--jobs 2] [--seed S] [--json] [--keep]
    python -m tools.faults.run_all ...

Every family runs at its full default size times ``--scale`` (``--scale 0.1`` for a run of a
few minutes); the seed is printed by each family and ``--seed`` repeats a run. The exit code is
1 if any invariant of any family failed.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from tools.faults import corruption, fulldisk, hooks, ingest, kills, writers
from tools.faults._common import FamilyResult, family_parser, finish, log, scaled

__all__ = ["FAMILIES", "main", "run_all"]

Runner = Callable[[float, int | None, int, bool], FamilyResult]


def _writers(scale: float, seed: int | None, jobs: int, keep: bool) -> FamilyResult:
    return writers.run(
        singles=scaled(5_000, scale), batches=scaled(500, scale), seed=seed, keep=keep
    )


def _kills(scale: float, seed: int | None, jobs: int, keep: bool) -> FamilyResult:
    return kills.run(
        writer_kills=scaled(300, scale), command_kills=scaled(25, scale), seed=seed, keep=keep
    )


def _corruption(scale: float, seed: int | None, jobs: int, keep: bool) -> FamilyResult:
    return corruption.run(
        flips=scaled(500, scale),
        others=scaled(100, scale),
        cache_trials=scaled(10, scale),
        jobs=jobs,
        seed=seed,
        keep=keep,
    )


def _hooks(scale: float, seed: int | None, jobs: int, keep: bool) -> FamilyResult:
    return hooks.run_family(payloads=scaled(2_000, scale), jobs=jobs, seed=seed, keep=keep)


def _fulldisk(scale: float, seed: int | None, jobs: int, keep: bool) -> FamilyResult:
    return fulldisk.run(trials=scaled(30, scale), seed=seed, keep=keep)


def _ingest(scale: float, seed: int | None, jobs: int, keep: bool) -> FamilyResult:
    return ingest.run(trials=scaled(60, scale), seed=seed, keep=keep)


FAMILIES: dict[str, Runner] = {
    "writers": _writers,
    "kills": _kills,
    "corruption": _corruption,
    "hooks": _hooks,
    "fulldisk": _fulldisk,
    "ingest": _ingest,
}


def run_all(
    *,
    scale: float = 1.0,
    only: list[str] | None = None,
    seed: int | None = None,
    jobs: int = 2,
    keep: bool = False,
) -> list[FamilyResult]:
    started = time.perf_counter()
    results = []
    for name in only or list(FAMILIES):
        log(f"== {name}")
        results.append(FAMILIES[name](scale, seed, jobs, keep))
        log(results[-1].summary_line())
    log(f"all fault families: {time.perf_counter() - started:.0f} s")
    return results


def _names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in FAMILIES]
    if unknown:
        raise SystemExit(f"unknown families {unknown}; known: {', '.join(FAMILIES)}")
    return names


def main(argv: list[str] | None = None) -> int:
    parser = family_parser(__doc__.split("\n\n")[0])
    parser.add_argument(
        "--only", type=_names, default=None, help=f"comma-separated, of {', '.join(FAMILIES)}"
    )
    args = parser.parse_args(argv)
    results = run_all(
        scale=args.scale, only=args.only, seed=args.seed, jobs=args.jobs, keep=args.keep
    )
    return finish(results, args.json)


if __name__ == "__main__":
    sys.exit(main())
