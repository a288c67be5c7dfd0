"""Store-wide listings at 10,000 threads in CPU against the interpreter's floor (issue 42).

    python -m tools.bench.bench_listings [--threads 10000] [--repeat 9] [--baseline-tree DIR]
                                         [--commands threads,sessions,stats] [--flags] [--json]

Each round runs, interleaved and in an order that rotates every round, fresh processes of
``python -c pass`` (the floor), and each command with ``PYTHONPATH`` set to this tree and, with
``--baseline-tree`` (e.g. a checkout of main), to that tree, on the same generated store
(``bench_catalog.cached_threads``: small Claude-Code-like threads, generated once), warm (each
command run once before timing). A process's CPU is user + sys from
``getrusage(RUSAGE_CHILDREN)`` deltas. Reported: the median CPU and p90, and the median's ratio to
the floor's median in the same run; the target is <= 3x the floor. Each command's output is
checked byte-identical between the trees (``stats``' cache bytes aside: this tree's caches
count there). A command may carry options (``--commands "sessions --json,stats --json"``);
``--flags`` adds the options users give ``sessions`` and ``stats`` (an agent, a project, JSON).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
from pathlib import Path
from typing import Final

from tools.bench._common import log, median
from tools.bench.bench_catalog import cached_threads
from tools.bench.bench_hooks import child_env

__all__ = ["main"]

ROOT: Final = Path(__file__).resolve().parents[2]
TARGET: Final = 3.0
_CWD: Final = Path(os.sep)


def _cpu(argv: list[str], env: dict[str, str]) -> tuple[float, bytes]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    # not the checkout: `python -m` imports from the working folder first
    done = subprocess.run(argv, capture_output=True, env=env, check=False, cwd=_CWD)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr!r}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu * 1000, done.stdout


FLAGS: Final = (
    "sessions --context",
    "sessions --agent claude-code",
    "sessions --project /home/dev/mobile",
    "sessions --json",
    "sessions --agents --json",
    "stats --json",
)
"""What ``--flags`` adds: the filters and forms of ``sessions`` and ``stats`` users give
(``/home/dev/mobile`` is one of the generated store's projects)."""


def _shown(out: bytes) -> list[bytes]:
    """A command's output but ``stats``' cache bytes (this tree's caches count there)."""
    return [
        re.sub(rb'"cache_bytes":\d+', b"", line)
        for line in out.splitlines()
        if not line.startswith(b"cache bytes")
    ]


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--threads", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--baseline-tree", type=Path, default=None)
    parser.add_argument("--commands", default="threads,sessions,stats")
    parser.add_argument("--flags", action="store_true", help="Also time FLAGS.")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    store = cached_threads(args.threads)
    python = sys.executable
    trees = {"this": ROOT}
    if args.baseline_tree is not None:
        trees["baseline"] = args.baseline_tree.resolve()
    runs: dict[str, tuple[list[str], dict[str, str]]] = {"floor": ([python, "-c", "pass"], {})}
    for name, tree in trees.items():
        commands = args.commands.split(",") + (list(FLAGS) if args.flags else [])
        for command in commands:
            env = {**child_env(), "PYTHONPATH": str(tree)}
            runs[f"{command} {name}"] = (
                [python, "-m", "continuity", "--store", str(store), *command.split()],
                env,
            )
    outputs: dict[str, bytes] = {}
    for key, (cmd, env) in runs.items():  # warm: caches, catalog, stat file, bytecode
        for _ in range(2):
            _cpu(cmd, env or dict(os.environ))
        outputs[key] = _cpu(cmd, env or dict(os.environ))[1]
    for key, out in outputs.items():
        command, _, which = key.rpartition(" ")
        if which == "baseline" and _shown(out) != _shown(outputs[f"{command} this"]):
            raise SystemExit(f"{command}: the output differs from the baseline tree's")
    found: dict[str, list[float]] = {k: [] for k in runs}
    keys = list(runs)
    for i in range(args.repeat):
        log(f"round {i + 1}/{args.repeat}")
        for key in keys[i % len(keys) :] + keys[: i % len(keys)]:
            cmd, env = runs[key]
            found[key].append(_cpu(cmd, env or dict(os.environ))[0])
    floor = median(found["floor"])
    report = {
        key: {"median_ms": median(v), "p90_ms": _p90(v), "vs_floor": median(v) / floor}
        for key, v in found.items()
    }
    if args.json:
        print(json.dumps({"cpus": os.cpu_count(), "threads": args.threads, "rows": report}))
        return
    print(f"{args.threads:,} threads, {os.cpu_count()} cores; CPU (user+sys) of fresh processes")
    width = max(20, *(len(key) for key in report))
    print(f"{'what':<{width}} {'median ms':>10} {'p90 ms':>8} {'vs floor':>9}  ok (<= {TARGET:g}x)")
    for key, row in report.items():
        ok = "" if key == "floor" else ("yes" if row["vs_floor"] <= TARGET else "NO")
        print(
            f"{key:<{width}} {row['median_ms']:>10.1f} {row['p90_ms']:>8.1f} "
            f"{row['vs_floor']:>8.2f}x  {ok}"
        )


if __name__ == "__main__":
    main()
