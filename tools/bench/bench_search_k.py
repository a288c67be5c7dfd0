"""A search's cost against k, lazy snippets against eager, and warm fused against lexical.

    python -m tools.bench.bench_search_k [--rounds 3] [--store DIR] [--model DIR] [--fresh N]

On the store of every agent's fixture sessions (:mod:`tools.search_sets`; ``--store`` keeps it
and its vector cache between runs), warm, in-process: for k = 1, 5, 10, 25, each of a few
agent questions is searched lexical (lazy: the hits shown are checked and snippeted; eager:
every ranked candidate, as before issue 44) and fused with the model (MiniLM from the dev extra
by default), all interleaved in the same rounds. Prints medians (ms) and the ratios that do not
depend on the machine: cost at k over cost at 1, fused over lexical. ``--fresh N``: then N
rounds of one CLI search in a fresh process (``continuity search --k 5``), lexical and fused
interleaved, the wall time from spawn to exit (the vector cache made already: the first
search's cost of embedding the store is not a query's). Without the fixtures it says so and
exits 0.

numpy's OpenBLAS runs one thread here, as in the CLI and the MCP server
(:mod:`continuity.__main__` sets it; a setting in the environment wins): its thread pool
waking for each small product was most of a loaded machine's scoring time.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy loads: as the CLI runs

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

from continuity.retrieval import search as retrieval
from continuity.retrieval.embedders import Embedder
from continuity.retrieval.models import load_folder
from continuity.store.jsonl import Store
from tools.search_sets import FIXTURES, _minilm, ingest_all

KS: Final = (1, 5, 10, 25)
QUERIES: Final = (
    "why did we put the context setting in the generated config",
    "the phoenix server would not start",
    "opaque set warnings from the type checker",
    "where did we set the compaction threshold",
    "the terminal widget would not scroll back",
    "the hand written migration for the message index",
)


def _eager(store: Store, query: str, k: int) -> None:
    retrieval._search(store, query, None, None, None, k, None, 50, None, None, lazy=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--store", type=Path)
    parser.add_argument("--model", type=Path)
    parser.add_argument("--fresh", type=int, default=0, help="rounds of a fresh-process search")
    args = parser.parse_args(argv)
    if not (FIXTURES / "claude-code").is_dir():
        print(f"no fixtures at {FIXTURES}: nothing measured")
        return 0
    folder = args.model or _minilm()
    embedder: Embedder | None = load_folder(folder) if folder is not None else None
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(args.store or Path(tmp) / "store", create=True, durable=False)
        ingest_all(store, FIXTURES)
        runs: dict[str, Callable[[str, int], object]] = {
            "lexical": lambda q, k: retrieval.search(store, q, k=k, embedder=None),
            "lexical eager": lambda q, k: _eager(store, q, k),
        }
        if embedder is not None:
            runs["fused"] = lambda q, k: retrieval.search(store, q, k=k, embedder=embedder)
        for q in QUERIES:  # warm: indexes, vector cache, the model
            for run in runs.values():
                run(q, 25)
        times: dict[tuple[str, int], list[float]] = {(m, k): [] for m in runs for k in KS}
        for _ in range(args.rounds):
            for q in QUERIES:
                for k in KS:
                    for mode, run in runs.items():
                        start = time.perf_counter()
                        run(q, k)
                        times[(mode, k)].append(time.perf_counter() - start)
        fresh = _fresh(store.root, folder, args.fresh) if args.fresh else {}
    med = {key: statistics.median(v) * 1000 for key, v in times.items()}
    print(f"{'mode':14}" + "".join(f"{'k=' + str(k):>10}" for k in KS) + "   k=25 / k=1")
    for mode in runs:
        row = "".join(f"{med[(mode, k)]:>8.1f}ms" for k in KS)
        print(f"{mode:14}{row}   {med[(mode, 25)] / med[(mode, 1)]:.2f}")
    if embedder is not None:
        ratios = "  ".join(f"k={k}: {med[('fused', k)] / med[('lexical', k)]:.2f}" for k in KS)
        print(f"fused / lexical  {ratios}")
    for mode, spent in fresh.items():
        print(f"fresh process, {mode:8} median {statistics.median(spent) * 1000:7.1f}ms")
    return 0


def _fresh(root: Path, folder: Path | None, rounds: int) -> dict[str, list[float]]:
    """Wall times of ``continuity search`` in a fresh process, lexical and fused interleaved,
    with bytecode caches (an installed package has them; kept in a temporary folder, not the
    tree) made by a first, unmeasured, run of each."""
    with tempfile.TemporaryDirectory() as pyc:
        drop = ("CONTINUITY_MODEL", "PYTHONDONTWRITEBYTECODE")  # the store's model; bytecode
        env = {k: v for k, v in os.environ.items() if k not in drop}
        env["PYTHONPYCACHEPREFIX"] = pyc
        base = [sys.executable, "-m", "continuity", "--store", str(root), "search", "--k", "5"]
        modes = {"lexical": base}
        if folder is not None:
            modes["fused"] = [*base, "--model", str(folder)]
        spent: dict[str, list[float]] = {m: [] for m in modes}
        for rounds_left in range(rounds, -1, -1):
            for q in QUERIES:
                for mode, cmd in modes.items():
                    start = time.perf_counter()
                    subprocess.run([*cmd, q], env=env, check=True, capture_output=True)
                    if rounds_left < rounds:  # the first round wrote the bytecode
                        spent[mode].append(time.perf_counter() - start)
    return spent


if __name__ == "__main__":
    raise SystemExit(main())
