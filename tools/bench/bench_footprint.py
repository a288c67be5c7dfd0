"""Cache footprint: bytes and files of ``cache/`` against the logs they index (issue 16).

    python -m tools.bench.bench_footprint [--sizes 1000,10000] [--big | --no-big]
                                          [--baseline REV | --no-baseline] [--json]

For each size, a copy of a store of that many generated small threads
(``tools/bench/gen_threads.py``, about 4 KB a thread) without its ``cache/`` folder, for each
tree (``before``: ``--baseline``, default the commit before ADR 0031; ``after``: this tree):

* ``rebuild-index`` as a fresh process, then the cache folder is measured;
* one process then searches every thread (``search(store, q, thread=…)``, what recall and
  ``search --thread`` read), searches the whole store once and compiles every thread
  (``compile_context``, which appends its decision to each log), and the folder is measured
  again (the logs too: they grew by the decisions).

Each measurement gives the cache's bytes on disk (allocated blocks) over the logs' bytes, and
its files per thread. With ``--big`` (default from the command line, not in ``run_all``), the
1M-frame bench thread (``_common.cached_thread``) is copied and measured the same way
(``rebuild-index``; then ``search --thread`` and ``compile`` of that thread) on this tree only:
a thread that large keeps its caches in both. Target (issue 16): cache bytes ≤ 1.5× log bytes
and a bounded number of files per thread.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Final

from tools.bench._common import (
    Report,
    Row,
    cached_thread,
    common_parser,
    continuity_command,
    emit,
    log,
    short_size,
)
from tools.bench.bench_catalog import _MARKER, cached_threads
from tools.bench.bench_versions import added_by, baseline_trees, tree_env

__all__ = ["DEFAULT_SIZES", "main", "measure", "run"]

DEFAULT_SIZES: Final = (1_000, 10_000)
ROOT: Final = Path(__file__).resolve().parents[2]
ADR_PATH: Final = "adr/0031-small-threads-keep-no-caches.md"
TARGET_RATIO: Final = 1.5

_EVERY_THREAD: Final = """
import sys
from continuity import compile_context, search
from continuity.store.jsonl import Store

store = Store(sys.argv[1], durable=False)
ids = sorted(store.threads())
for tid in ids:
    search(store, "error test", thread=tid, k=5)
search(store, "error test", k=10)
for tid in ids:
    compile_context(store.thread(tid))
"""


def measure(store: Path) -> tuple[int, int, int, int]:
    """(cache bytes on disk, cache files, log bytes, threads) of a store folder."""
    cache_bytes = files = 0
    stack = [store / "cache"]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except FileNotFoundError:
            continue
        for e in entries:
            if e.is_dir(follow_symlinks=False):
                stack.append(Path(e.path))
            else:
                files += 1
                cache_bytes += e.stat(follow_symlinks=False).st_blocks * 512
    logs = [e for e in os.scandir(store / "threads") if e.name.endswith(".jsonl")]
    return cache_bytes, files, sum(e.stat().st_size for e in logs), len(logs)


def _rows(report: Report, label: str, store: Path, baseline: str = "") -> None:
    cache_bytes, files, log_bytes, threads = measure(store)
    ratio = cache_bytes / log_bytes if log_bytes else 0.0
    report.rows.append(
        Row(f"{label}: cache/log bytes", ratio, "x", target=TARGET_RATIO, baseline=baseline)
    )
    report.rows.append(
        Row(f"{label}: cache files/thread", files / threads, "files", baseline=baseline)
    )
    report.notes.append(
        f"{label}: {cache_bytes / 1e6:,.1f} MB cache on disk in {files:,} files for "
        f"{log_bytes / 1e6:,.1f} MB of logs in {threads:,} threads"
    )


def _run(argv: list[str], tree: Path, cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=tree_env(tree), cwd=cwd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def _default_baseline() -> str | None:
    commit = added_by(ADR_PATH)
    return f"{commit}~1" if commit else None


def run(
    sizes: tuple[int, ...] = DEFAULT_SIZES,
    *,
    big: bool = False,
    baseline: str | None = "",
    seed: int = 0,
) -> Report:
    """``baseline``: a git revision, "" for the commit before ADR 0031, None for none."""
    started = time.perf_counter()
    if baseline == "":
        baseline = _default_baseline()
    report = Report(
        "bench_footprint",
        {
            "sizes": ",".join(short_size(n) for n in sizes),
            "big": big,
            "baseline": (baseline or "none")[:12],
        },
    )
    cli = continuity_command()
    with baseline_trees("footprint", baseline) as (work, found):
        trees = {name: found[name] for name in ("before", "after") if name in found}
        for n in sizes:
            source = cached_threads(n, seed)
            for name, tree in trees.items():
                store = work / f"store-{name}-{n}"
                shutil.copytree(source, store, ignore=shutil.ignore_patterns(_MARKER, "cache"))
                log(f"{short_size(n)} threads, {name}: rebuild-index")
                _run([*cli, "--store", str(store), "rebuild-index"], tree, work)
                _rows(report, f"{short_size(n)} threads {name}, rebuild-index", store)
                log(f"{short_size(n)} threads, {name}: search and compile every thread")
                script = [sys.executable, "-c", _EVERY_THREAD, str(store)]
                took = _run(script, tree, work)
                _rows(report, f"{short_size(n)} threads {name}, + search, compile", store)
                report.notes.append(
                    f"{short_size(n)} threads {name}: searching and compiling every thread "
                    f"took {took:.1f} s"
                )
                shutil.rmtree(store)
        if big:
            source = cached_thread(1_000_000, seed)
            store = work / "store-1M"
            log("1M frames: copying the thread")
            shutil.copytree(source, store, ignore=shutil.ignore_patterns("cache", "bench-*"))
            _run([*cli, "--store", str(store), "rebuild-index"], ROOT, work)
            _rows(report, "1M frames, rebuild-index", store)
            _run([*cli, "--store", str(store), "search", "--thread", "bench", "error"], ROOT, work)
            _run([*cli, "--store", str(store), "compile", "bench"], ROOT, work)
            _rows(report, "1M frames, + search --thread, compile", store)
            shutil.rmtree(store)
    report.seconds = time.perf_counter() - started
    return report


def main(argv: list[str] | None = None) -> None:
    parser = common_parser(__doc__.split("\n\n")[0], DEFAULT_SIZES, "threads")
    parser.add_argument(
        "--big", action=argparse.BooleanOptionalAction, default=True, help="the 1M-frame thread"
    )
    parser.add_argument("--baseline", default="", help="git revision to compare with")
    parser.add_argument("--no-baseline", action="store_true", help="measure this tree only")
    args = parser.parse_args(argv)
    report = run(
        sizes=args.sizes,
        big=args.big,
        baseline=None if args.no_baseline else args.baseline,
        seed=args.seed,
    )
    emit([report], args.json)


if __name__ == "__main__":
    main()
