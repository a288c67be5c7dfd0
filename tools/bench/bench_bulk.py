"""Bulk work on every core: ``verify`` and ``rebuild-index`` of a whole store as fresh processes,
``--jobs 1`` against the default (one worker a core), and against the tree before (ADR 0030).

    python -m tools.bench.bench_bulk [--sizes 1000,10000] [--frames 1000000] [--repeat 3]
                                     [--baseline REV | --no-baseline] [--json]

Stores: the cached 1M-frame thread (``_common.cached_thread``; ``--frames 0`` skips it) and
stores of ``--sizes`` generated small threads (``gen_threads.py``, cached by
``bench_catalog.cached_threads``), copied into a scratch folder (the benchmark rebuilds their
caches). Each command runs ``--repeat`` times per variant, interleaved (the order flips every
round), after one untimed run; ``rebuild-index`` starts from the caches the previous run left.
``rebuild-index, searched`` rebuilds the small threads' stores again after one search made
the store-wide search index, which it rebuilds too. Rates are frames/s over the store's
frames. ``before`` is ``--baseline`` (a git revision; default: the parent of the commit that
added ``continuity/maintenance/bulk.py``, then ``continuity/bulk.py``) extracted with
``git archive``, which has no ``--jobs``. Target
(issue 16): the 1M-frame thread verifies at >= 200k frames/s with the default jobs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Final

from tools.bench._common import (
    Report,
    cached_thread,
    common_parser,
    emit,
    log,
    median,
    rate_row,
    short_size,
)
from tools.bench.bench_catalog import cached_threads
from tools.bench.bench_versions import added_by, baseline_trees, tree_env

__all__ = ["DEFAULT_FRAMES", "DEFAULT_SIZES", "main", "run"]

DEFAULT_SIZES: Final = (1_000, 10_000)
DEFAULT_FRAMES: Final = 1_000_000
TARGET_FRAMES_S: Final = 200_000.0
ROOT: Final = Path(__file__).resolve().parents[2]
BULK_PATH: Final = "continuity/maintenance/bulk.py"
COMMANDS: Final = ("verify", "rebuild-index", "rebuild-index, searched")
"""The last rebuilds a store where a search made the store-wide search index (ADR 0029), which
``rebuild-index`` then rebuilds too (stores of small threads only; made by one untimed
search)."""


def _frames(store: Path) -> int:
    done = subprocess.run(
        [sys.executable, "-m", "continuity", "--store", str(store), "stats", "--json"],
        capture_output=True,
        env=tree_env(ROOT),
        cwd=store.parent,
        check=True,
    )
    import json

    return int(json.loads(done.stdout)["frames"])


def _timed(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    """Seconds of a fresh process (verify may exit 1: a generated store names artifacts it does
    not hold; anything else is a failure). ``cwd`` is outside both trees: ``-m`` puts it first
    on the path."""
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, env=env, cwd=cwd, check=False)
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 1) or not done.stdout:
        raise RuntimeError(f"{argv[4:]}: exit {done.returncode}: {done.stderr.decode()[-400:]}")
    return seconds


def run(
    sizes: tuple[int, ...] = DEFAULT_SIZES,
    frames: int = DEFAULT_FRAMES,
    repeat: int = 3,
    baseline: str | None = "",
    seed: int = 0,
) -> Report:
    """``baseline``: a git revision, "" for the tree before ``continuity/maintenance/bulk.py``
    (``continuity/bulk.py`` then), None for none."""
    started = time.perf_counter()
    if baseline == "":
        commit = added_by(BULK_PATH)
        baseline = f"{commit}^" if commit else "HEAD"
    jobs = os.cpu_count() or 1
    report = Report(
        "bench_bulk",
        {
            "frames": short_size(frames) if frames else "-",
            "sizes": ",".join(short_size(n) for n in sizes),
            "repeat": repeat,
            "jobs": jobs,
            "baseline": (baseline or "none")[:12],
        },
    )
    with baseline_trees("bulk", baseline) as (work, trees):
        variants: dict[str, tuple[Path, list[str]]] = {"jobs 1": (ROOT, ["--jobs", "1"])}
        variants[f"jobs {jobs} (default)"] = (ROOT, [])
        if "before" in trees:
            variants["before"] = (trees["before"], [])
        sources: list[tuple[str, Path]] = []
        if frames:
            sources.append(
                (f"1 thread of {short_size(frames)} frames", cached_thread(frames, seed))
            )
        sources += [(f"{short_size(n)} threads", cached_threads(n, seed)) for n in sizes]
        for label, source in sources:
            store = work / "store"
            shutil.rmtree(store, ignore_errors=True)
            log(f"bench_bulk: copying {label}")
            shutil.copytree(
                source, store, ignore=shutil.ignore_patterns("bench-thread*.json", "*.tmp-*")
            )
            total = _frames(store)
            for command in COMMANDS:
                if command.endswith("searched"):
                    if label.startswith("1 thread"):
                        continue
                    argv = [sys.executable, "-m", "continuity", "--store", str(store)]
                    _timed([*argv, "search", "status"], tree_env(ROOT), work)
                log(f"bench_bulk: {command} @ {label}")
                samples: dict[str, list[float]] = {v: [] for v in variants}
                names = list(variants)
                for i in range(repeat + 1):
                    order = names if i % 2 else list(reversed(names))
                    for name in order:
                        tree, extra = variants[name]
                        argv = [sys.executable, "-m", "continuity", "--store", str(store)]
                        verb = command.split(",")[0]
                        seconds = _timed([*argv, verb, *extra], tree_env(tree), work)
                        if i:
                            samples[name].append(seconds)
                before = samples.get("before")
                for name in names:
                    row = rate_row(
                        f"{command} @ {label} ({name})", total, samples[name], "frames/s"
                    )
                    if before and name != "before":
                        row.baseline, row.ratio = "before", median(before) / median(samples[name])
                    if command == "verify" and label.startswith("1 thread") and "default" in name:
                        row.target = TARGET_FRAMES_S
                    report.rows.append(row)
            shutil.rmtree(store, ignore_errors=True)
    report.notes.append(
        f"fresh `python -m continuity --store S CMD` processes, stdout to a pipe, page cache warm; "
        f"before: {baseline} (git archive, no --jobs); ratio = speed-up over before; "
        f"{jobs} cores (shared machine: other load makes the parallel rows noisy)"
    )
    report.seconds = time.perf_counter() - started
    return report


def main(argv: list[str] | None = None) -> None:
    parser = common_parser(__doc__.split("\n\n")[0], DEFAULT_SIZES, "threads")
    parser.add_argument("--frames", type=int, default=DEFAULT_FRAMES, help="0: no long thread")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per variant")
    parser.add_argument("--baseline", default="", help="git revision to compare with")
    parser.add_argument("--no-baseline", action="store_true", help="measure this tree only")
    args = parser.parse_args(argv)
    report = run(
        sizes=args.sizes,
        frames=args.frames,
        repeat=args.repeat,
        baseline=None if args.no_baseline else args.baseline,
        seed=args.seed,
    )
    emit([report], args.json)


if __name__ == "__main__":
    main()
