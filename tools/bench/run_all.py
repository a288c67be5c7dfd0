"""Run every benchmark with its default sizes and print one combined report.

    python -m tools.bench [--quick] [--json] [--seed S]
    python -m tools.bench.run_all ...

``--quick`` shrinks every size tenfold (a smoke run of a minute or so); the default sizes are the
ones the targets in ../shared/design/ARCHITECTURE.md are stated for.
"""

from __future__ import annotations

import argparse
import time

from tools.bench import (
    bench_agent_loop,
    bench_append,
    bench_bulk,
    bench_catalog,
    bench_compile,
    bench_footprint,
    bench_hooks,
    bench_langgraph,
    bench_openai_agents,
    bench_pg_scale,
    bench_postgres,
    bench_postgres_compile,
    bench_read,
    bench_rebuild,
    bench_recall,
    bench_search,
    bench_search_fixtures,
    bench_serve,
    bench_startup,
    bench_store_search,
    bench_verify_search,
)
from tools.bench._common import Report, emit, log

__all__ = ["main", "run_all"]


def run_all(*, seed: int = 0, quick: bool = False) -> list[Report]:
    scale = 10 if quick else 1
    started = time.perf_counter()
    # bench_read before bench_rebuild: the rebuild's 1 GB scratch copy can push the cached
    # threads out of a small page cache, and the reads are meant to be measured warm.
    reports = [
        bench_append.run(frames=100_000 // scale, seed=seed),
        bench_read.run(sizes=tuple(n // scale for n in bench_read.DEFAULT_SIZES), seed=seed),
        bench_rebuild.run(frames=1_000_000 // scale, seed=seed),
        bench_compile.run(
            sizes=tuple(n // scale for n in bench_compile.DEFAULT_SIZES),
            compaction_frames=100_000 // scale,
            seed=seed,
        ),
        bench_hooks.run(sizes=(3, 100 // scale), seed=seed),
        bench_startup.run(repeat=3 if quick else 11),
        bench_search.run(sizes=tuple(n // scale for n in bench_search.DEFAULT_SIZES), seed=seed),
        bench_catalog.run(
            sizes=(1_000,) if quick else bench_catalog.DEFAULT_SIZES,
            repeat=3,
            cold_repeat=1,
            seed=seed,
        ),
        bench_store_search.run(
            sizes=(1_000,) if quick else bench_store_search.DEFAULT_SIZES,
            repeat=3,
            cold_repeat=1,
            seed=seed,
        ),
        # bounded: this tree only, the 1M-frame thread only in a full run
        bench_footprint.run(
            sizes=(1_000,) if quick else bench_footprint.DEFAULT_SIZES,
            big=not quick,
            baseline=None,
            seed=seed,
        ),
        # bounded: one timed run a variant, the 1M-frame thread only in a full run
        bench_bulk.run(
            sizes=(1_000,) if quick else bench_bulk.DEFAULT_SIZES,
            frames=0 if quick else bench_bulk.DEFAULT_FRAMES,
            repeat=1,
            baseline=None,
            seed=seed,
        ),
        # verify with and without a thread's search index (issue 26: within 2x)
        bench_verify_search.run(frames=1_000_000 // scale, repeat=1 if quick else 3, seed=seed),
        bench_recall.run(sizes=tuple(n // scale for n in bench_recall.DEFAULT_SIZES), seed=seed),
        bench_agent_loop.run(turns=bench_agent_loop.DEFAULT_TURNS // scale, seed=seed),
        bench_langgraph.run(
            sizes=tuple(n // scale for n in bench_langgraph.DEFAULT_SIZES), seed=seed
        ),
        bench_openai_agents.run(sizes=tuple(n // scale for n in bench_openai_agents.DEFAULT_SIZES)),
        bench_postgres.run(batches=40 // scale or 1, seed=seed),
        bench_postgres_compile.run(
            sizes=(10_000, 1_000_000 // scale), repeat=40 // scale or 4, seed=seed
        ),
        bench_serve.run(sizes=[10_000, 1_000_000 // scale], repeat=30 // scale or 3),
        # bounded: 10k threads (1k quick) copied into a throwaway server once, 3 rounds
        bench_pg_scale.run(threads=10_000 // scale, repeat=3),
    ]
    if bench_search_fixtures.FIXTURES.is_dir():  # the fixture sessions live beside the project
        reports.append(bench_search_fixtures.run(repeat=5 // scale or 1, n_queries=20))
    log(f"all benchmarks: {time.perf_counter() - started:.0f} s")
    return reports


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="every size divided by 10")
    args = parser.parse_args(argv)
    emit(run_all(seed=args.seed, quick=args.quick), args.json)


if __name__ == "__main__":
    main()
