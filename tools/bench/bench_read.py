"""Reads that must stay flat as a thread grows: the last messages and a seq lookup.

    python -m tools.bench.bench_read [--sizes 10000,100000,1000000] [--repeat 200]
                                     [--process-repeat 10] [--json]

At each size (generated, cached threads whose caches are brought up to date first, untimed):

* ``ThreadIndex.last_messages(16)`` and ``thread.tail(16, types=["message_appended"])``;
* a seq -> byte offset lookup at a random seq: ``ThreadIndex.offset(seq)`` (the offset index) and
  ``thread.offset_of(seq)`` (bisection over the log, no cache);
* one frame read through the index: ``next(ThreadIndex.read(seq, seq))``;
* a fresh process: ``continuity --store S log bench --from-seq X --to-seq X`` (X in the middle),
  against the baselines ``python -c pass`` and ``python -c "import continuity.cli.app"``.

Each op is timed call by call, the sizes interleaved round by round so a noisy machine disturbs
them alike. Rows ``<op> 1M/10k`` give the ratio largest/smallest size (target: flat, <= 1.5x).
"""

from __future__ import annotations

import random
import subprocess
import sys
import time
from collections.abc import Callable

from continuity.caches.thread_index import ThreadIndex
from continuity.store.jsonl import Store
from tools.bench._common import (
    BENCH_THREAD,
    Report,
    Row,
    cached_thread,
    common_parser,
    continuity_command,
    emit,
    log,
    median,
    short_size as _short,
    time_once,
    time_row,
)

__all__ = ["main", "run"]

FLAT_TARGET: float = 1.5
DEFAULT_SIZES: tuple[int, ...] = (10_000, 100_000, 1_000_000)


def _run_process(argv: list[str]) -> float:
    start = time.perf_counter_ns()
    done = subprocess.run(argv, capture_output=True, check=False)
    seconds = (time.perf_counter_ns() - start) / 1e9
    if done.returncode != 0:
        raise RuntimeError(f"{argv} failed: {done.stderr.decode(errors='replace')}")
    return seconds


def _ops(store: Store, frames: int, rng: random.Random) -> dict[str, Callable[[], object]]:
    index = ThreadIndex(store.thread(BENCH_THREAD))
    thread = store.thread(BENCH_THREAD)

    def last_messages() -> None:
        assert len(index.last_messages(16)) == 16

    def tail() -> None:
        assert len(thread.tail(16, types=["message_appended"])) == 16

    def index_offset() -> None:
        assert index.offset(rng.randrange(frames)) is not None

    def bisect_offset() -> None:
        assert thread.offset_of(rng.randrange(frames)) is not None

    def read_one() -> None:
        seq = rng.randrange(frames)
        assert next(index.read(seq, seq)).seq == seq

    return {
        "ThreadIndex.last_messages(16)": last_messages,
        'thread.tail(16, types=["message_appended"])': tail,
        "ThreadIndex.offset(seq)": index_offset,
        "thread.offset_of(seq) (bisection)": bisect_offset,
        "ThreadIndex.read(seq, seq), one frame": read_one,
    }


_Samples = dict[tuple[str, int], list[float]]


def run(
    sizes: tuple[int, ...] = DEFAULT_SIZES,
    repeat: int = 200,
    process_repeat: int = 10,
    seed: int = 0,
) -> Report:
    started = time.perf_counter()
    report = Report(
        "bench_read",
        {
            "sizes": ",".join(_short(s) for s in sizes),
            "repeat": repeat,
            "process_repeat": process_repeat,
            "seed": seed,
        },
    )
    rng = random.Random(seed)
    stores = {n: Store(cached_thread(n, seed), durable=False) for n in sizes}
    _warm_caches(stores)
    names, samples = _time_ops(stores, sizes, rng, repeat)
    proc_s = _time_processes(stores, process_repeat)
    report.rows.extend(_op_rows(names, samples, sizes))
    report.rows.extend(_process_rows(proc_s, sizes))
    report.notes.append("caches refreshed and their files read once before timing (warm)")
    report.seconds = time.perf_counter() - started
    return report


def _warm_caches(stores: dict[int, Store]) -> None:
    """Bring each store's caches up to date and read their files once."""
    for n, store in stores.items():
        index = ThreadIndex(store.thread(BENCH_THREAD))
        result = index.refresh()
        log(f"bench_read: caches of {_short(n)}: {result.mode}")
        for path in index.dir.iterdir():  # warm: random lookups should not measure the disk
            if path.is_file():
                path.read_bytes()


def _time_ops(
    stores: dict[int, Store], sizes: tuple[int, ...], rng: random.Random, repeat: int
) -> tuple[list[str], _Samples]:
    """The ops' names, and ``repeat`` timed calls of each op at each size, interleaved."""
    ops = {n: _ops(store, n, rng) for n, store in stores.items()}
    names = list(ops[sizes[0]])
    samples: _Samples = {(op, n): [] for op in names for n in sizes}
    log(f"bench_read: {repeat} rounds of {len(names)} ops at {len(sizes)} sizes")
    for op in names:  # warm up
        for n in sizes:
            ops[n][op]()
    for _ in range(repeat):
        for op in names:
            for n in sizes:
                samples[(op, n)].append(time_once(ops[n][op]))
    return names, samples


def _time_processes(stores: dict[int, Store], process_repeat: int) -> dict[str, list[float]]:
    """The wall times of the fresh processes by name, in the order: the two baselines, then
    ``continuity log`` of one frame at each size."""
    log(f"bench_read: {process_repeat} rounds of fresh processes")
    command = continuity_command()
    processes: dict[str, list[str]] = {
        "python -c pass": [sys.executable, "-c", "pass"],
        'python -c "import continuity.cli.app"': [
            sys.executable,
            "-c",
            "import continuity.cli.app",
        ],
    }
    for n, store in stores.items():
        mid = str(n // 2)
        processes[f"continuity log --from-seq X --to-seq X ({_short(n)})"] = [
            *command,
            "--store",
            str(store.root),
            "log",
            BENCH_THREAD,
            "--from-seq",
            mid,
            "--to-seq",
            mid,
        ]
    proc_s: dict[str, list[float]] = {name: [] for name in processes}
    for argv in processes.values():  # warm up (page cache, .pyc)
        _run_process(argv)
    for _ in range(process_repeat):
        for name, argv in processes.items():
            proc_s[name].append(_run_process(argv))
    return proc_s


def _op_rows(names: list[str], samples: _Samples, sizes: tuple[int, ...]) -> list[Row]:
    rows: list[Row] = []
    small, large = sizes[0], sizes[-1]
    for op in names:
        for n in sizes:
            rows.append(time_row(f"{op} @{_short(n)}", samples[(op, n)], unit="us"))
        if len(sizes) > 1:
            ratio = median(samples[(op, large)]) / median(samples[(op, small)])
            flat = f"{_short(large)}/{_short(small)}"
            rows.append(Row(f"  {op} {flat}", ratio, "x", target=FLAT_TARGET))
    return rows


def _process_rows(proc_s: dict[str, list[float]], sizes: tuple[int, ...]) -> list[Row]:
    rows: list[Row] = []
    base = median(proc_s["python -c pass"])
    for name, secs in proc_s.items():
        row = time_row(name, secs)
        if name != "python -c pass":
            row.baseline = "python -c pass"
            row.ratio = median(secs) / base
        rows.append(row)
    if len(sizes) > 1:
        names = list(proc_s)
        ratio = median(proc_s[names[-1]]) / median(proc_s[names[2]])
        flat = f"{_short(sizes[-1])}/{_short(sizes[0])}"
        rows.append(Row(f"  continuity log, one frame {flat}", ratio, "x", target=FLAT_TARGET))
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = common_parser(__doc__.split("\n\n")[0], DEFAULT_SIZES)
    parser.add_argument("--repeat", type=int, default=200, help="timed calls per op and size")
    parser.add_argument("--process-repeat", type=int, default=10, help="fresh processes each")
    args = parser.parse_args(argv)
    emit([run(args.sizes, args.repeat, args.process_repeat, args.seed)], args.json)


if __name__ == "__main__":
    main()
