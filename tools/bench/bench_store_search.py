"""Store-wide search at thousands of threads: ``continuity search`` as a fresh process, this tree
(the store-wide index, ADR 0029) against the tree before it, in one run.

    python -m tools.bench.bench_store_search [--sizes 1000,10000] [--repeat 5] [--cold-repeat 2]
                                             [--baseline REV | --no-baseline] [--json]

Each size is a store of that many small Claude-Code-like threads (``tools/bench/gen_threads.py``,
cached under the bench folder as ``bench_catalog`` caches it). For each tree, the two
interleaved (the order flips every round):

* ``cold``: the store's ``cache/`` folder deleted before each run (a store just ingested in
  bulk, or written by an older version), ``--cold-repeat`` runs;
* ``warm``: after a run that brought the caches up to date, ``--repeat`` runs each of a store-wide
  query, the same with ``--project``, and the same with ``--thread`` (one thread);
* ``warm, 1 thread appended``: one message appended to one thread before each store-wide run.

``before`` is ``--baseline`` (a git revision; default: the parent of the commit that added
``continuity/retrieval/store_index.py``, or HEAD before it is committed), extracted with
``git archive``; ``after`` is this working tree. Target (issue 16): at 10,000 threads, a warm
store-wide ``search`` <= 300 ms.
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path
from typing import Final

from continuity import frames as fr
from continuity.store.jsonl import Store
from tools.bench._common import (
    Report,
    common_parser,
    emit,
    log,
    median,
    short_size,
    time_row,
)
from tools.bench.bench_catalog import _MARKER, cached_threads
from tools.bench.bench_hooks import child_env, run_process
from tools.bench.bench_versions import added_by, baseline_trees, tree_env

__all__ = ["DEFAULT_SIZES", "run"]

DEFAULT_SIZES: Final = (1_000, 10_000)
TARGET_MS: Final = 300.0
TARGET_SIZE: Final = 10_000
QUERY: Final = "pytest failed assertion"
PROJECT: Final = "/home/dev/webapp"
ROOT: Final = Path(__file__).resolve().parents[2]
STORE_SEARCH_PATH: Final = "continuity/retrieval/store_index.py"


def _default_baseline() -> str:
    commit = added_by(STORE_SEARCH_PATH)
    return f"{commit}^" if commit else "HEAD"


def _once(tree: Path, cwd: Path, argv: list[str]) -> float:
    seconds, out = run_process(argv, tree_env(tree), cwd=cwd, stderr_ok=True)  # progress
    if not out:
        raise RuntimeError(f"{argv[-1]} printed nothing")
    return seconds


def _append_one(store: Path, ids: list[str], appended: list[int]) -> None:
    """One message to one of the store's threads (in turn), as a hook would write it."""
    tid = ids[(appended[0] * 7919) % len(ids)]
    appended[0] += 1
    message = fr.message("user", f"pytest failed once more {appended[0]}")
    Store(store, durable=False).thread(tid).append(message)


def run(
    sizes: tuple[int, ...] = DEFAULT_SIZES,
    repeat: int = 5,
    cold_repeat: int = 2,
    baseline: str | None = "",
    seed: int = 0,
) -> Report:
    """``baseline``: a git revision, "" for the tree before the store-wide index, None for none."""
    started = time.perf_counter()
    if baseline == "":
        baseline = _default_baseline()
    variants = ("before", "after") if baseline else ("after",)
    report = Report(
        "bench_store_search",
        {
            "sizes": ",".join(short_size(n) for n in sizes),
            "repeat": repeat,
            "cold_repeat": cold_repeat,
            "baseline": (baseline or "none")[:12],
        },
    )
    with baseline_trees("store-search", baseline) as (work, trees):
        for n in sizes:
            source = cached_threads(n, seed)
            store = work / f"store-{n}"
            shutil.copytree(source, store, ignore=shutil.ignore_patterns(_MARKER, "cache"))
            ids = Store(store).threads()
            one = ids[len(ids) // 2]
            base = [sys.executable, "-m", "continuity", "--store", str(store), "search", QUERY]
            cases = {
                "store-wide": base,
                "--project": [*base, "--project", PROJECT],
                "--thread": [*base, "--thread", one],
            }
            size = short_size(n)
            samples: dict[tuple[str, str], list[float]] = {}
            appended = [0]
            phases = ("cold", *(f"warm, {label}" for label in cases), "warm, 1 thread appended")

            log(f"bench_store_search: cold @{size}")
            for i in range(cold_repeat):
                for variant in variants if i % 2 else tuple(reversed(variants)):
                    shutil.rmtree(store / "cache", ignore_errors=True)
                    samples.setdefault(("cold", variant), []).append(
                        _once(trees[variant], work, base)
                    )
            for label, argv in cases.items():
                log(f"bench_store_search: warm {label} @{size}")
                for i in range(repeat + 1):  # one untimed first (catch-up after the cold runs)
                    for variant in variants if i % 2 else tuple(reversed(variants)):
                        seconds = _once(trees[variant], work, argv)
                        if i:
                            samples.setdefault((f"warm, {label}", variant), []).append(seconds)
            log(f"bench_store_search: warm after one append @{size}")
            for i in range(repeat):
                for variant in variants if i % 2 else tuple(reversed(variants)):
                    _append_one(store, ids, appended)
                    samples.setdefault(("warm, 1 thread appended", variant), []).append(
                        _once(trees[variant], work, base)
                    )
            for phase in phases:
                before = samples.get((phase, "before"))
                for variant in variants:
                    got = samples[(phase, variant)]
                    row = time_row(f"search @{size}, {phase} ({variant})", got)
                    if variant == "after" and before:
                        row.baseline, row.ratio = "before", median(got) / median(before)
                    if variant == "after" and phase == "warm, store-wide" and n == TARGET_SIZE:
                        row.target = TARGET_MS
                    report.rows.append(row)
            shutil.rmtree(store, ignore_errors=True)
        plain = [run_process([sys.executable, "-c", "pass"], child_env())[0] for _ in range(5)]
        report.rows.insert(0, time_row("python -c pass", plain))
    report.notes.append(
        f"before: {baseline} (git archive); after: the working tree {ROOT}; each a fresh "
        f"`python -m continuity --store S search {QUERY!r}`, stdout to a pipe; interleaved, "
        "order flipped every round; page cache warm"
        if baseline
        else "no baseline"
    )
    report.seconds = time.perf_counter() - started
    return report


def main(argv: list[str] | None = None) -> None:
    parser = common_parser(__doc__.split("\n\n")[0], DEFAULT_SIZES, "threads")
    parser.add_argument("--repeat", type=int, default=5, help="timed warm runs per case")
    parser.add_argument("--cold-repeat", type=int, default=2, help="timed cold runs")
    parser.add_argument("--baseline", default="", help="git revision to compare with")
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
