"""Run every benchmark with its default sizes and print one combined report.

    python -m tools.bench [--quick] [--json] [--seed S] [--only NAMES] [--save PATH]
    python -m tools.bench.run_all ...

``--quick`` shrinks every size tenfold (a smoke run of a minute or so); the default sizes are the
ones the targets in ../shared/design/ARCHITECTURE.md are stated for. ``--only append,compile``
runs those benchmarks alone (the names are the modules' without ``bench_``). ``--save PATH``
also writes the figures as JSON (the machine, the date, the options and every report): the
documentation's performance page is rendered from ``docs/figures/bench.json``
(``python -m tools.docs_gen``).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

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
from tools.bench._common import Report, emit, env_info, log

__all__ = ["NAMES", "main", "run_all"]

NAMES: Final = (
    "append",
    "read",
    "rebuild",
    "compile",
    "hooks",
    "startup",
    "search",
    "catalog",
    "store_search",
    "footprint",
    "bulk",
    "verify_search",
    "recall",
    "agent_loop",
    "langgraph",
    "openai_agents",
    "postgres",
    "postgres_compile",
    "serve",
    "pg_scale",
    "search_fixtures",
)
"""What ``--only`` takes, in the order a full run goes (``search_fixtures`` runs only where the
fixture sessions are)."""


def run_all(*, seed: int = 0, quick: bool = False, only: tuple[str, ...] = ()) -> list[Report]:
    scale = 10 if quick else 1
    started = time.perf_counter()
    # bench_read before bench_rebuild: the rebuild's 1 GB scratch copy can push the cached
    # threads out of a small page cache, and the reads are meant to be measured warm.
    every: dict[str, Callable[[], Report]] = {
        "append": lambda: bench_append.run(frames=100_000 // scale, seed=seed),
        "read": lambda: bench_read.run(
            sizes=tuple(n // scale for n in bench_read.DEFAULT_SIZES), seed=seed
        ),
        "rebuild": lambda: bench_rebuild.run(frames=1_000_000 // scale, seed=seed),
        "compile": lambda: bench_compile.run(
            sizes=tuple(n // scale for n in bench_compile.DEFAULT_SIZES),
            compaction_frames=100_000 // scale,
            seed=seed,
        ),
        "hooks": lambda: bench_hooks.run(sizes=(3, 100 // scale), seed=seed),
        "startup": lambda: bench_startup.run(repeat=3 if quick else 11),
        "search": lambda: bench_search.run(
            sizes=tuple(n // scale for n in bench_search.DEFAULT_SIZES), seed=seed
        ),
        "catalog": lambda: bench_catalog.run(
            sizes=(1_000,) if quick else bench_catalog.DEFAULT_SIZES,
            repeat=3,
            cold_repeat=1,
            seed=seed,
        ),
        "store_search": lambda: bench_store_search.run(
            sizes=(1_000,) if quick else bench_store_search.DEFAULT_SIZES,
            repeat=3,
            cold_repeat=1,
            seed=seed,
        ),
        # bounded: this tree only, the 1M-frame thread only in a full run
        "footprint": lambda: bench_footprint.run(
            sizes=(1_000,) if quick else bench_footprint.DEFAULT_SIZES,
            big=not quick,
            baseline=None,
            seed=seed,
        ),
        # bounded: one timed run a variant, the 1M-frame thread only in a full run
        "bulk": lambda: bench_bulk.run(
            sizes=(1_000,) if quick else bench_bulk.DEFAULT_SIZES,
            frames=0 if quick else bench_bulk.DEFAULT_FRAMES,
            repeat=1,
            baseline=None,
            seed=seed,
        ),
        # verify with and without a thread's search index (issue 26: within 2x)
        "verify_search": lambda: bench_verify_search.run(
            frames=1_000_000 // scale, repeat=1 if quick else 3, seed=seed
        ),
        "recall": lambda: bench_recall.run(
            sizes=tuple(n // scale for n in bench_recall.DEFAULT_SIZES), seed=seed
        ),
        "agent_loop": lambda: bench_agent_loop.run(
            turns=bench_agent_loop.DEFAULT_TURNS // scale, seed=seed
        ),
        "langgraph": lambda: bench_langgraph.run(
            sizes=tuple(n // scale for n in bench_langgraph.DEFAULT_SIZES), seed=seed
        ),
        "openai_agents": lambda: bench_openai_agents.run(
            sizes=tuple(n // scale for n in bench_openai_agents.DEFAULT_SIZES)
        ),
        "postgres": lambda: bench_postgres.run(batches=40 // scale or 1, seed=seed),
        "postgres_compile": lambda: bench_postgres_compile.run(
            sizes=(10_000, 1_000_000 // scale), repeat=40 // scale or 4, seed=seed
        ),
        "serve": lambda: bench_serve.run(
            sizes=[10_000, 1_000_000 // scale], repeat=30 // scale or 3
        ),
        # bounded: 10k threads (1k quick) copied into a throwaway server once, 3 rounds
        "pg_scale": lambda: bench_pg_scale.run(threads=10_000 // scale, repeat=3),
    }
    reports = [run() for name, run in every.items() if not only or name in only]
    # the fixture sessions live beside the project
    if bench_search_fixtures.FIXTURES.is_dir() and (not only or "search_fixtures" in only):
        reports.append(bench_search_fixtures.run(repeat=5 // scale or 1, n_queries=20))
    log(f"all benchmarks: {time.perf_counter() - started:.0f} s")
    return reports


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="every size divided by 10")
    parser.add_argument(
        "--only", type=_names, default=(), help="comma-separated benchmarks: " + ",".join(NAMES)
    )
    parser.add_argument("--save", type=Path, help="also write the figures as JSON to this file")
    parser.add_argument("--note", default="", help="with --save: what to know about this run")
    args = parser.parse_args(argv)
    load = os.getloadavg()[0]
    reports = run_all(seed=args.seed, quick=args.quick, only=args.only)
    emit(reports, args.json)
    if args.save is not None:
        options = {"quick": args.quick, "seed": args.seed, "only": list(args.only)}
        options |= {"load_before": load, "load_after": os.getloadavg()[0], "note": args.note}
        save(args.save, reports, options)


def _names(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in NAMES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown benchmark {', '.join(unknown) or text!r}: choose from {', '.join(NAMES)}"
        )
    return names


def save(path: Path, reports: list[Report], options: dict[str, Any]) -> None:
    """The figures as JSON, written atomically: the machine and date, the options, the reports."""
    data = {"env": env_info(), "options": options, "reports": [r.to_json() for r in reports]}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    tmp.replace(path)
    log(f"figures saved to {path}")


if __name__ == "__main__":
    main()
