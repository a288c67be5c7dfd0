"""A warm ``continuity search`` on a large folder store, in CPU against the interpreter's floor.

    python -m tools.bench.bench_search_warm --store DIR [--baseline-tree DIR ...] [--repeat 9]
                                            [--queries parser,migration,zzzznothing] [--json]

Issue 42: at 10,000 threads a warm search paid for opening every log to check the store-wide
index is current (ADR 0061's stat file). ``--store`` is copied to a temporary folder first (a
shared store is never written); make one with ``python -m tools.bench.gen_threads``. Each round
runs, interleaved and in an order that rotates every round, fresh processes of ``python -c pass``
(the floor) and each query with ``PYTHONPATH`` set to this tree and, with ``--baseline-tree``
(once or more: baseline, baseline2, ...), to each of those trees; every command is run twice
before timing (the index built and caught up, the stat file written). A process's CPU is user +
sys from ``getrusage(RUSAGE_CHILDREN)`` deltas. Reported: the median CPU, p90 and the median's
ratio to the floor's median in the same run. The trees' outputs must be byte-identical.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Final

from tools.bench._common import log, median
from tools.bench.bench_hooks import child_env
from tools.bench.bench_listings import _cpu, _p90

__all__ = ["main"]

ROOT: Final = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument(
        "--baseline-tree", type=Path, action="append", default=[], help="Repeatable."
    )
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--queries", default="parser,migration,zzzznothing")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    python = sys.executable
    trees = {"this": ROOT}
    for n, tree in enumerate(args.baseline_tree):
        trees[f"baseline{n + 1 if n else ''}"] = tree.resolve()
    with tempfile.TemporaryDirectory(prefix="bench-search-warm-") as tmp:
        store = Path(tmp) / "store"
        shutil.copytree(args.store, store, symlinks=True)
        runs: dict[str, tuple[list[str], dict[str, str]]] = {
            "floor": ([python, "-c", "pass"], dict(os.environ))
        }
        for query in args.queries.split(","):
            for name, tree in trees.items():
                runs[f"search {query} {name}"] = (
                    [python, "-m", "continuity", "--store", str(store), "search", query],
                    {**child_env(), "PYTHONPATH": str(tree)},
                )
        outputs: dict[str, bytes] = {}
        for key, (cmd, env) in runs.items():  # warm: index, stat file, bytecode
            log(f"warming {key}")
            for _ in range(2):
                _cpu(cmd, env)
            outputs[key] = _cpu(cmd, env)[1]
        for key, out in outputs.items():
            what, _, which = key.rpartition(" ")
            if which.startswith("baseline") and out != outputs[f"{what} this"]:
                raise SystemExit(f"{what}: the output differs from the baseline tree's")
        found: dict[str, list[float]] = {k: [] for k in runs}
        keys = list(runs)
        for i in range(args.repeat):
            log(f"round {i + 1}/{args.repeat}")
            for key in keys[i % len(keys) :] + keys[: i % len(keys)]:
                cmd, env = runs[key]
                found[key].append(_cpu(cmd, env)[0])
    floor = median(found["floor"])
    report = {
        key: {"median_ms": median(v), "p90_ms": _p90(v), "vs_floor": median(v) / floor}
        for key, v in found.items()
    }
    if args.json:
        print(json.dumps({"cpus": os.cpu_count(), "rows": report}))
        return
    print(f"{args.store.name}, {os.cpu_count()} cores; CPU (user+sys) of fresh processes")
    width = max(20, *(len(key) for key in report))
    print(f"{'what':<{width}} {'median ms':>10} {'p90 ms':>8} {'vs floor':>9}")
    for key, row in report.items():
        print(
            f"{key:<{width}} {row['median_ms']:>10.1f} {row['p90_ms']:>8.1f} "
            f"{row['vs_floor']:>8.2f}x"
        )


if __name__ == "__main__":
    main()
