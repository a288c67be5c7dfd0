"""The store-wide search index built from nothing: CPU and peak RSS of the first ``search`` of a
large thread, this tree against the tree before ADR 0061 (streamed build), in one run.

    python -m tools.bench.bench_index_build [--sizes 50000,100000,300000] [--repeat 3]
                                            [--baseline REV | --no-baseline] [--json]

Each size is the bench thread of that many generated frames (``_common.cached_thread``, about
1.1 KB a frame; generated once and cached under the bench folder). For each tree, interleaved
(the order flips every round), ``--repeat`` times:

* ``first search``: the store's ``cache/`` folder deleted, then ``continuity search`` as a fresh
  process (it builds the store-wide index: every frame read, tokenized, sealed and merged);
* ``warm search``: the same search again, the index current.

Each process is started by a small launcher (a child's ``ru_maxrss`` starts at its parent's
peak, so not by this benchmark) and reaped with ``os.wait4``: CPU is the child's user + sys
time, RSS its own peak. After each first search the index's files are hashed: the two trees
must write the same bytes (a row says whether they did). ``before`` is ``--baseline`` (default:
the parent of the commit that added ADR 0061, or HEAD before it is committed), extracted with
``git archive``; ``after`` is this working tree. Target (issue 42): a peak RSS that does not
grow with the thread (≤ 200 MB at every size) and no more CPU than before.

A 1M-frame run (``--sizes 1000000 --repeat 1``) takes minutes of CPU per tree; it is a tool to
run by hand, not part of ``run_all``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Final

from tools.bench._common import (
    _MARKER,
    BENCH_THREAD,
    Launcher,
    Report,
    Row,
    cached_thread,
    common_parser,
    emit,
    log,
    median,
    percentile,
    short_size,
)
from tools.bench.bench_versions import added_by, baseline_trees, tree_env

__all__ = ["DEFAULT_SIZES", "TARGET_RSS_MB", "run"]

DEFAULT_SIZES: Final = (50_000, 100_000, 300_000)
TARGET_RSS_MB: Final = 200.0
QUERY: Final = "error test"
ADR_PATH: Final = "adr/0061-a-store-index-built-in-bounded-memory.md"
ROOT: Final = Path(__file__).resolve().parents[2]


def _default_baseline() -> str:
    commit = added_by(ADR_PATH)
    return f"{commit}^" if commit else "HEAD"


def index_digest(store: Path) -> str:
    """A digest of the store-wide index's files (names and bytes)."""
    h = hashlib.blake2b(digest_size=16)
    folder = store / "cache" / "search-store"
    for p in sorted(folder.iterdir()):
        if p.name != ".lock":
            h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def _row(metric: str, values: list[float], unit: str, **kw: object) -> Row:
    return Row(metric, median(values), unit, p90=percentile(values, 90), n=len(values), **kw)  # type: ignore[arg-type]


def run(
    sizes: tuple[int, ...] = DEFAULT_SIZES,
    repeat: int = 3,
    baseline: str | None = "",
    seed: int = 0,
) -> Report:
    """``baseline``: a git revision, "" for the tree before ADR 0061, None for none."""
    started = time.perf_counter()
    if baseline == "":
        baseline = _default_baseline()
    variants = ("before", "after") if baseline else ("after",)
    report = Report(
        "bench_index_build",
        {
            "sizes": ",".join(short_size(n) for n in sizes),
            "repeat": repeat,
            "baseline": (baseline or "none")[:12],
        },
    )
    launcher = Launcher()
    try:
        with baseline_trees("index-build", baseline) as (work, trees):
            for n in sizes:
                source = cached_thread(n, seed)
                store = work / f"store-{n}"
                shutil.copytree(source, store, ignore=shutil.ignore_patterns("cache", _MARKER))
                argv = [sys.executable, "-m", "continuity", "--store", str(store), "search", QUERY]
                size = short_size(n)
                cpu: dict[tuple[str, str], list[float]] = {}
                rss: dict[tuple[str, str], list[float]] = {}
                digests: dict[str, set[str]] = {}
                for i in range(repeat):
                    for variant in variants if i % 2 else tuple(reversed(variants)):
                        log(f"bench_index_build: {variant} @{size} ({i + 1}/{repeat})")
                        env = tree_env(trees[variant])
                        shutil.rmtree(store / "cache", ignore_errors=True)
                        for phase in ("first search", "warm search"):
                            _, c, r = launcher.measure(argv, env, work)
                            cpu.setdefault((phase, variant), []).append(c)
                            rss.setdefault((phase, variant), []).append(r)
                            if phase == "first search":
                                digests.setdefault(variant, set()).add(index_digest(store))
                for phase in ("first search", "warm search"):
                    for variant in variants:
                        got_cpu, got_rss = cpu[(phase, variant)], rss[(phase, variant)]
                        c_row = _row(f"{phase} @{size} CPU ({variant})", got_cpu, "s")
                        r_row = _row(f"{phase} @{size} peak RSS ({variant})", got_rss, "MB")
                        if variant == "after":
                            r_row.target = TARGET_RSS_MB if phase == "first search" else None
                            if "before" in variants:
                                c_row.baseline = r_row.baseline = "before"
                                c_row.ratio = median(got_cpu) / median(cpu[(phase, "before")])
                                r_row.ratio = median(got_rss) / median(rss[(phase, "before")])
                        report.rows += [c_row, r_row]
                same = all(len(d) == 1 for d in digests.values()) and (
                    len({next(iter(d)) for d in digests.values()}) == 1
                )
                report.rows.append(
                    Row(f"index bytes @{size}: one digest across trees and runs", float(same), "")
                )
                shutil.rmtree(store, ignore_errors=True)
    finally:
        launcher.close()
    report.notes.append(
        (
            f"before: {baseline} (git archive); after: the working tree {ROOT}; "
            if baseline
            else "no baseline; "
        )
        + f"each a fresh `python -m continuity --store S search {QUERY!r}` on a thread "
        f"{BENCH_THREAD!r} of N frames, cache/ deleted before the first; CPU user + sys and "
        f"peak RSS of the child (os.wait4); interleaved, order flipped every round; "
        f"{os.cpu_count()} cores (shared: note the load)"
    )
    report.seconds = time.perf_counter() - started
    return report


def main(argv: list[str] | None = None) -> None:
    parser = common_parser(__doc__.split("\n\n")[0], DEFAULT_SIZES)
    parser.add_argument("--repeat", type=int, default=3, help="rounds per size")
    parser.add_argument("--baseline", default="", help="git revision to compare with")
    parser.add_argument("--no-baseline", action="store_true", help="measure this tree only")
    args = parser.parse_args(argv)
    report = run(
        sizes=args.sizes,
        repeat=args.repeat,
        baseline=None if args.no_baseline else args.baseline,
        seed=args.seed,
    )
    emit([report], args.json)


if __name__ == "__main__":
    main()
