"""Store-wide listings at thousands of threads: ``threads``, ``sessions`` and ``stats`` as fresh
processes, this tree (the store catalog) against the tree before it, in one run.

    python -m tools.bench.bench_catalog [--sizes 1000,10000] [--repeat 7] [--cold-repeat 3]
                                        [--baseline REV | --no-baseline] [--json]

Each size is a store of that many small Claude-Code-like threads (``tools/bench/gen_threads.py``:
about 4 KB each, a quarter of them subagents), generated once and cached under the bench folder.
For each command, each tree, the two interleaved (the order flips every round):

* ``cold``: the store's ``cache/`` folder deleted before each run (the catalog and every thread's
  caches: what a store written by an older version, or just ingested in bulk, costs once),
  ``--cold-repeat`` (3) runs;
* ``warm``: after a run that brought the caches up to date, ``--repeat`` (7) runs;
* ``warm, 1 thread appended``: one message appended to one thread (untimed) before each run,
  the common case after a Claude Code hook wrote to the live session, ``--repeat`` runs.

``before`` is ``--baseline`` (a git revision; default: the parent of the commit that added
``continuity/caches/catalog.py``), extracted with ``git archive``; ``after`` is this working tree.
Both run through the same interpreter with ``PYTHONPATH`` picking the tree; bytecode is cached
as users have it; stdout goes to a pipe. Targets (issue 16), at 10,000 threads, warm:
``threads`` and ``sessions`` <= 200 ms, ``stats`` <= 500 ms. The ``after`` rows give
``after / before`` as their ratio.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Final

from continuity import frames as fr
from continuity.store.jsonl import Store
from tools.bench._common import (
    Report,
    bench_dir,
    common_parser,
    emit,
    log,
    median,
    short_size,
    time_row,
)
from tools.bench.bench_hooks import child_env, run_process
from tools.bench.bench_versions import added_by, baseline_trees, tree_env
from tools.bench.gen_threads import write_threads
from tools.gen_thread import FIXED_CLOCK_MS

__all__ = ["DEFAULT_SIZES", "cached_threads", "main", "run"]

DEFAULT_SIZES: Final = (1_000, 10_000)
TARGETS_MS: Final = {"threads": 200.0, "sessions": 200.0, "stats": 500.0}
TARGET_SIZE: Final = 10_000
COMMANDS: Final = ("threads", "sessions", "stats")
GENERATOR_VERSION: Final = 1
"""Bump when tools/bench/gen_threads.py changes what it writes: cached stores are keyed by it."""
ROOT: Final = Path(__file__).resolve().parents[2]
_MARKER: Final = "bench-threads.json"
CATALOG_PATH: Final = "continuity/caches/catalog.py"


def cached_threads(n: int, seed: int = 0) -> Path:
    """A store of ``n`` generated threads, generated once (the benchmark only reads its logs;
    its ``cache/`` folder is derived and deleted at will)."""
    root = bench_dir() / f"threads-g{GENERATOR_VERSION}-n{n}-s{seed}"
    if (root / _MARKER).is_file():
        return root
    shutil.rmtree(root, ignore_errors=True)
    tmp = root.with_name(f"{root.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    log(f"generating {n:,} threads (seed {seed}) into {root} (cached for later runs)")
    store = Store(tmp, create=True, durable=False, clock=lambda: FIXED_CLOCK_MS)
    stats = write_threads(store, n, seed=seed)
    (tmp / _MARKER).write_text(json.dumps({"threads": n, "seed": seed}) + "\n")
    log(f"  {stats.log_bytes / 1e6:,.1f} MB, {stats.frames:,} frames in {stats.seconds:.1f} s")
    os.replace(tmp, root)
    return root


class _Runner:
    def __init__(self, store: Path, trees: dict[str, Path], cwd: Path) -> None:
        self.store = store
        self.trees = trees
        self.cwd = cwd
        self.appended = 0

    def command(self, variant: str, name: str) -> float:
        argv = [sys.executable, "-m", "continuity", "--store", str(self.store), name]
        seconds, out = run_process(argv, tree_env(self.trees[variant]), cwd=self.cwd)
        if not out:
            raise RuntimeError(f"{name} printed nothing")
        return seconds

    def clear(self) -> None:
        shutil.rmtree(self.store / "cache", ignore_errors=True)
        (self.store / "cache").mkdir(mode=0o700)

    def append_one(self) -> None:
        """One message to one of the store's threads (in turn), as a hook would write it."""
        store = Store(self.store, durable=False)
        ids = store.threads()
        tid = ids[(self.appended * 7919) % len(ids)]
        self.appended += 1
        store.thread(tid).append(fr.message("user", f"one more turn {self.appended}"))


def run(
    sizes: tuple[int, ...] = DEFAULT_SIZES,
    repeat: int = 7,
    cold_repeat: int = 3,
    baseline: str | None = "",
    seed: int = 0,
) -> Report:
    """``baseline``: a git revision, "" for the tree before the catalog, None for none."""
    started = time.perf_counter()
    if baseline == "":
        commit = added_by(CATALOG_PATH)
        baseline = f"{commit}^" if commit else None
    variants = ("before", "after") if baseline else ("after",)
    report = Report(
        "bench_catalog",
        {
            "sizes": ",".join(short_size(n) for n in sizes),
            "repeat": repeat,
            "cold_repeat": cold_repeat,
            "baseline": (baseline or "none")[:12],
        },
    )
    with baseline_trees("catalog", baseline) as (work, trees):
        plain: list[float] = []
        for n in sizes:
            source = cached_threads(n, seed)
            store = work / f"store-{n}"
            shutil.copytree(source, store, ignore=shutil.ignore_patterns(_MARKER, "cache"))
            (store / "cache").mkdir(mode=0o700)
            runner = _Runner(store, trees, work)
            size = short_size(n)
            samples: dict[tuple[str, str, str], list[float]] = {}
            for name in COMMANDS:
                log(f"bench_catalog: {name} @{size}")
                for phase, rounds in (("cold", cold_repeat), ("warm", repeat), ("1 new", repeat)):
                    for i in range(rounds + (phase != "cold")):  # warm phases: one untimed first
                        order = variants if i % 2 else tuple(reversed(variants))
                        for variant in order:
                            if phase == "cold":
                                runner.clear()
                            elif phase == "1 new":
                                runner.append_one()
                            seconds = runner.command(variant, name)
                            if phase == "cold" or i:
                                samples.setdefault((name, phase, variant), []).append(seconds)
                seconds, _ = run_process([sys.executable, "-c", "pass"], child_env())
                plain.append(seconds)
            labels = {"cold": "cold", "warm": "warm", "1 new": "warm, 1 thread appended"}
            for name in COMMANDS:
                for phase, label in labels.items():
                    before = samples.get((name, phase, "before"))
                    for variant in variants:
                        got = samples[(name, phase, variant)]
                        row = time_row(f"{name} @{size}, {label} ({variant})", got)
                        if variant == "after" and before:
                            row.baseline, row.ratio = "before", median(got) / median(before)
                        if variant == "after" and phase != "cold" and n == TARGET_SIZE:
                            row.target = TARGETS_MS[name]
                        report.rows.append(row)
            shutil.rmtree(store, ignore_errors=True)
        report.rows.insert(0, time_row("python -c pass", plain))
    report.notes.append(
        f"before: {baseline} (git archive); after: the working tree {ROOT}; "
        "each a fresh `python -m continuity --store S CMD`, stdout to a pipe; interleaved, "
        "order flipped every round; bytecode cached; page cache warm"
        if baseline
        else "no baseline (--no-baseline, or no git history with the catalog)"
    )
    report.seconds = time.perf_counter() - started
    return report


def main(argv: list[str] | None = None) -> None:
    parser = common_parser(__doc__.split("\n\n")[0], DEFAULT_SIZES, "threads")
    parser.add_argument("--repeat", type=int, default=7, help="timed warm runs per command")
    parser.add_argument("--cold-repeat", type=int, default=3, help="timed cold runs per command")
    parser.add_argument(
        "--baseline", default="", help="git revision to compare with (default: before the catalog)"
    )
    parser.add_argument("--no-baseline", action="store_true", help="measure this tree only")
    args = parser.parse_args(argv)
    report = run(
        sizes=args.sizes,
        repeat=args.repeat,
        cold_repeat=args.cold_repeat,
        baseline=None if args.no_baseline else args.baseline,
        seed=args.seed,
    )
    emit([report], args.json)


if __name__ == "__main__":
    main()
