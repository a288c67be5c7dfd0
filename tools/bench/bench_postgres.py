"""Appends from many processes on the PostgreSQL store, with the JSONL store's figures from the
same run.

    python -m tools.bench.bench_postgres [--processes 8] [--batches 40] [--size 100]
                                         [--repeat 3] [--quick] [--json]

Each of ``--processes`` processes appends ``--batches`` batches of ``--size`` realistic frames,
all starting at once, into one shared thread (every append contends for the same head) and into
one thread each (8 threads: no contention but the server's and the disk's). Both durable (the
default: fsync per batch for JSONL, a synchronous commit for PostgreSQL) and not. Rows: frames/s
over the whole run (all processes' frames over the wall time from the first start to the last
end) and the p50 latency of one batch's ``append`` across every process; medians over
``--repeat`` runs, the backends interleaved so drift hits both alike.

The server is a throwaway ``pgserver`` in a temporary folder, or ``$CONTINUITY_BENCH_PG_URL``
(the benchmark makes and drops schemas ``bench_*`` in its database).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Final

from tools.bench._common import (
    Report,
    Row,
    common_parser,
    emit,
    log,
    median,
    percentile,
    pg_server,
    work_dir,
)

__all__ = ["main", "run"]


# One process of the run: open the store, wait for the common start, append, report.
WORKER: Final = r"""
import json, sys, time
import msgspec
args = json.loads(sys.argv[1])
from continuity.store.artifacts import MemoryArtifactStore
from tools.gen_thread import generate_frames
n = args["batches"] * args["size"]
pool = [msgspec.structs.replace(f, seq=-1) for f in list(generate_frames(n + 1, seed=args["worker"],
        artifacts=MemoryArtifactStore()))[1:]]
if args["url"]:
    from continuity.store.postgres import PostgresStore
    store = PostgresStore(args["url"], schema=args["schema"], durable=args["durable"], pool_size=1)
else:
    from continuity.store.jsonl import Store
    store = Store(args["path"], durable=args["durable"])
tid = args["thread"]
time.sleep(max(0.0, args["start"] - time.time()))
lat = []
began = time.time()
for b in range(args["batches"]):
    batch = pool[b * args["size"] : (b + 1) * args["size"]]
    t0 = time.perf_counter()
    store.thread(tid).append(batch)
    lat.append(time.perf_counter() - t0)
ended = time.time()
if args["url"]:
    store.close()
print(json.dumps({"began": began, "ended": ended, "lat": lat, "frames": n}))
"""


def _sql(url: str, statement: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(statement)


def _one_run(
    *, url: str | None, path: Path, schema: str, processes: int, shared: bool, **kw: Any
) -> tuple[float, list[float]]:
    """(frames/s over the wall time, every batch's latency) of one run."""
    root = Path(__file__).resolve().parents[2]
    start = time.time() + 1.5 + 0.2 * processes  # every interpreter ready before it
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                WORKER,
                json.dumps(
                    {
                        "url": url,
                        "path": str(path),
                        "schema": schema,
                        "worker": w,
                        "thread": "shared" if shared else f"t{w}",
                        "start": start,
                        **kw,
                    }
                ),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=root,
            env={**os.environ, "PYTHONPATH": str(root)},
        )
        for w in range(processes)
    ]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        if p.returncode != 0:
            raise RuntimeError(f"a bench worker failed: {err.strip().splitlines()[-1:]}")
        results.append(json.loads(out))
    wall = max(r["ended"] for r in results) - min(r["began"] for r in results)
    frames = sum(r["frames"] for r in results)
    return frames / wall, [x for r in results for x in r["lat"]]


def run(
    processes: int = 8, batches: int = 40, size: int = 100, repeat: int = 3, seed: int = 0
) -> Report:
    started = time.perf_counter()
    report = Report(
        "bench_postgres",
        {"processes": processes, "batches": batches, "size": size, "repeat": repeat},
    )
    cases = [(durable, shared) for durable in (True, False) for shared in (True, False)]
    rates: dict[tuple[str, bool, bool], list[float]] = {}
    lats: dict[tuple[str, bool, bool], list[float]] = {}
    with pg_server() as url, work_dir("postgres") as work:
        from continuity.store.jsonl import Store

        for r in range(repeat):
            for durable, shared in cases:
                for backend in ("jsonl", "postgres"):
                    key = (backend, durable, shared)
                    log(f"bench_postgres: round {r + 1}/{repeat}: {key}")
                    name = f"bench_{os.getpid()}_{r}_{int(durable)}{int(shared)}"
                    path = work / name
                    if backend == "jsonl":
                        Store(path, create=True)
                    else:
                        from continuity.store.postgres import PostgresStore

                        PostgresStore(url, schema=name, create=True).close()
                    try:
                        rate, lat = _one_run(
                            url=url if backend == "postgres" else None,
                            path=path,
                            schema=name,
                            processes=processes,
                            shared=shared,
                            batches=batches,
                            size=size,
                            durable=durable,
                        )
                    finally:
                        if backend == "postgres":
                            _sql(url, f"DROP SCHEMA {name} CASCADE")
                    rates.setdefault(key, []).append(rate)
                    lats.setdefault(key, []).append(median(lat))
    for durable, shared in cases:
        where = "one thread" if shared else f"{processes} threads"
        mode = "durable" if durable else "no fsync"
        base = ("jsonl", durable, shared)
        for backend in ("postgres", "jsonl"):
            key = (backend, durable, shared)
            label = f"{backend}: {processes} procs x batches of {size} into {where}, {mode}"
            vs = {} if backend == "jsonl" else {"baseline": "jsonl"}
            rate_row = Row(
                f"{label}: frames/s",
                median(rates[key]),
                "frames/s",
                p90=percentile(rates[key], 10),
                n=repeat,
                better="higher",
                **vs,  # type: ignore[arg-type]
            )
            lat_row = Row(
                f"{label}: p50 batch",
                median(lats[key]) * 1e3,
                "ms",
                p90=percentile(lats[key], 90) * 1e3,
                n=repeat,
                **vs,  # type: ignore[arg-type]
            )
            if backend == "postgres":
                rate_row.ratio = rate_row.median / median(rates[base])
                lat_row.ratio = lat_row.median / (median(lats[base]) * 1e3)
            report.rows += [rate_row, lat_row]
    report.notes.append(
        "frames/s: all processes' frames over the wall time of the run; p50 batch: the median "
        "over runs of the median append latency across every process's batches"
    )
    report.notes.append(
        "postgres: a local server on a Unix socket (pgserver, or $CONTINUITY_BENCH_PG_URL), on "
        "the same machine and disk as the processes; durable = synchronous commit"
    )
    report.seconds = time.perf_counter() - started
    return report


def main(argv: list[str] | None = None) -> None:
    parser = common_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--batches", type=int, default=40, help="batches per process")
    parser.add_argument("--size", type=int, default=100, help="frames per batch")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="batches / 10, one run")
    args = parser.parse_args(argv)
    report = run(
        processes=args.processes,
        batches=max(2, args.batches // 10) if args.quick else args.batches,
        size=args.size,
        repeat=1 if args.quick else args.repeat,
        seed=args.seed,
    )
    emit([report], args.json)


if __name__ == "__main__":
    main()
