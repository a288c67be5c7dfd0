"""``compile`` on the PostgreSQL store at 10k and 1M frames, in-process and as a fresh process,
with the JSONL store's figures from the same run; and ``migrate``'s frames/s into PostgreSQL.

    python -m tools.bench.bench_postgres_compile [--sizes 10000,1000000] [--repeat 40]
        [--process-repeat 7] [--quick] [--json]

Each size is the cached generated thread (``cached_thread``: a cumulative checkpoint about every
200 messages, so compile selects three summaries by the halving rule), loaded into a database of
its own on the server with :func:`continuity.maintenance.migrate.migrate_store` (timed:
frames/s; it copies the lines as they are through ``append_sealed``, which writes the derived
rows in the same transactions). Then, interleaved round by round:

* in-process ``compile_context(log=False)`` with ``recent_messages=16, keep_tool_outputs=3``
  on each backend (the store opened once; PostgreSQL reads the derived tables, JSONL its
  caches); rows ``largest/smallest`` give the ratio (target <= 1.5x);
* fresh processes: ``continuity --store … compile bench --dry-run`` on each backend and size,
  and ``python -c pass`` as the baseline.

``--quick``: 10k and 100k frames, fewer rounds. The bundles of the two backends are checked to
be byte-identical before timing. The server is a throwaway ``pgserver`` in a temporary folder, or
``$CONTINUITY_BENCH_PG_URL`` (the benchmark makes and drops databases ``bench_compile_*``).
"""

from __future__ import annotations

import os
import sys
import time
from functools import partial
from typing import Any, Final

from continuity import frames as fr
from continuity.context.compiler import compile_context
from continuity.maintenance.migrate import migrate_store
from continuity.store.jsonl import Store
from tools.bench._common import (
    BENCH_THREAD,
    Launcher,
    Report,
    cached_thread,
    common_parser,
    continuity_command,
    emit,
    log,
    median,
    pg_server,
    rate_row,
    short_size,
    time_row,
    timed,
)
from tools.bench.bench_postgres import _sql

__all__ = ["main", "run"]

LIMITS: Final = fr.Limits(recent_messages=16, keep_tool_outputs=3)
FLAT_TARGET: Final = 1.5
COMPILE_TARGET_MS: Final = 5.0
PROCESS_TARGET_MS: Final = 250.0


def _db_url(url: str, dbname: str) -> str:
    """The server's URL with another database in its path."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{dbname}"))


def run(
    sizes: tuple[int, ...] = (10_000, 1_000_000),
    repeat: int = 40,
    process_repeat: int = 7,
    seed: int = 0,
) -> Report:
    from continuity.store.postgres import PostgresStore

    started = time.perf_counter()
    report = Report(
        "bench_postgres_compile",
        {"sizes": list(sizes), "repeat": repeat, "process_repeat": process_repeat},
    )
    jsonl: dict[int, Store] = {}
    pg: dict[int, Any] = {}
    urls: dict[int, str] = {}
    with pg_server() as url:
        try:
            for n in sizes:
                root = cached_thread(n, seed)
                jsonl[n] = Store(root, durable=False)
                db = f"bench_compile_{os.getpid()}_{n}"
                _sql(url, f"DROP DATABASE IF EXISTS {db}")
                _sql(url, f"CREATE DATABASE {db}")
                urls[n] = _db_url(url, db)
                target = PostgresStore(urls[n], create=True, durable=False)
                log(f"bench_postgres_compile: migrating {n:,} frames into PostgreSQL")
                seconds, _ = timed(partial(migrate_store, jsonl[n], target))
                frames = n
                row = rate_row(
                    f"migrate JSONL -> postgres @{short_size(n)}", frames, [seconds], "frames/s"
                )
                report.rows.append(row)
                log(f"  {seconds:.1f} s, {frames / seconds:,.0f} frames/s")
                pg[n] = target
                a = compile_context(jsonl[n], BENCH_THREAD, limits=LIMITS, log=False)
                b = compile_context(target, BENCH_THREAD, limits=LIMITS, log=False)
                if a.bundle_bytes() != b.bundle_bytes():
                    raise RuntimeError(f"the bundles differ at {n} frames")
            _in_process(jsonl, pg, repeat, report)
            _processes(jsonl, urls, process_repeat, report)
        finally:
            for store in pg.values():
                store.close()
            for n in urls:
                _sql(url, f"DROP DATABASE IF EXISTS bench_compile_{os.getpid()}_{n}")
    report.notes.append(
        "postgres: a local server on a Unix socket (pgserver, or $CONTINUITY_BENCH_PG_URL) on the "
        "same machine; compile reads the derived tables (a handful of indexed queries) and the "
        "frames of the window; the bundles are byte-identical to JSONL's (checked)"
    )
    report.seconds = time.perf_counter() - started
    return report


def _in_process(jsonl: dict[int, Store], pg: dict[int, Any], repeat: int, report: Report) -> None:
    stores = {"jsonl": jsonl, "postgres": pg}
    samples: dict[tuple[str, int], list[float]] = {}
    for by_size in stores.values():
        for store in by_size.values():
            compile_context(store, BENCH_THREAD, limits=LIMITS, log=False)  # warm up
    log(f"bench_postgres_compile: {repeat} rounds in-process")
    for _ in range(repeat):
        for name, by_size in stores.items():
            for n, store in by_size.items():
                seconds, _ = timed(
                    partial(compile_context, store, BENCH_THREAD, limits=LIMITS, log=False)
                )
                samples.setdefault((name, n), []).append(seconds)
    sizes = sorted(jsonl)
    for name in stores:
        for n in sizes:
            row = time_row(f"{name}: compile_context(log=False) @{short_size(n)}", samples[name, n])
            if name == "postgres":
                row.baseline = f"jsonl @{short_size(n)}"
                row.ratio = median(samples[name, n]) / median(samples["jsonl", n])
            if n == sizes[-1] and n >= 1_000_000:
                row.target = COMPILE_TARGET_MS
            report.rows.append(row)
        lo, hi = sizes[0], sizes[-1]
        ratio = median(samples[name, hi]) / median(samples[name, lo])
        report.rows.append(_ratio_row(f"{name}: compile {short_size(hi)}/{short_size(lo)}", ratio))


def _ratio_row(metric: str, ratio: float) -> Any:
    from tools.bench._common import Row

    return Row(metric, ratio, "x", n=1, target=FLAT_TARGET)


def _processes(jsonl: dict[int, Store], urls: dict[int, str], repeat: int, report: Report) -> None:
    cli = continuity_command()
    argv = ["compile", BENCH_THREAD, "--recent", "16", "--keep-tool-outputs", "3", "--dry-run"]
    processes: dict[str, list[str]] = {"python -c pass": [sys.executable, "-c", "pass"]}
    for n in sorted(jsonl):
        size = short_size(n)
        processes[f"jsonl: continuity compile --dry-run @{size}"] = [
            *cli,
            "--store",
            str(jsonl[n].root),
            *argv,
        ]
        processes[f"postgres: continuity compile --dry-run @{size}"] = [
            *cli,
            "--store",
            urls[n],
            *argv,
        ]
    log(f"bench_postgres_compile: {repeat} rounds of {len(processes)} fresh processes")
    wall: dict[str, list[float]] = {name: [] for name in processes}
    launcher = Launcher()
    try:
        for command in processes.values():
            launcher.run(command)  # warm up
        for _ in range(repeat):
            for name, command in processes.items():
                wall[name].append(launcher.run(command)[0])
    finally:
        launcher.close()
    base = median(wall["python -c pass"])
    for name in processes:
        row = time_row(name, wall[name])
        if name != "python -c pass":
            row.baseline = "python -c pass"
            row.ratio = median(wall[name]) / base
            if name.endswith("@1M"):
                row.target = PROCESS_TARGET_MS
        report.rows.append(row)
    sizes = sorted(jsonl)
    for backend in ("jsonl", "postgres"):
        lo, hi = (
            f"{backend}: continuity compile --dry-run @{short_size(n)}"
            for n in (sizes[0], sizes[-1])
        )
        report.rows.append(
            _ratio_row(
                f"{backend}: fresh process {short_size(sizes[-1])}/{short_size(sizes[0])}",
                median(wall[hi]) / median(wall[lo]),
            )
        )


def main(argv: list[str] | None = None) -> None:
    parser = common_parser(__doc__.split("\n\n")[0], sizes=(10_000, 1_000_000))
    parser.add_argument("--repeat", type=int, default=40)
    parser.add_argument("--process-repeat", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="10k and 100k, fewer rounds")
    args = parser.parse_args(argv)
    sizes = (10_000, 100_000) if args.quick else tuple(args.sizes)
    repeat = 15 if args.quick else args.repeat
    process_repeat = 3 if args.quick else args.process_repeat
    emit([run(sizes, repeat, process_repeat, args.seed)], args.json)


if __name__ == "__main__":
    main()
