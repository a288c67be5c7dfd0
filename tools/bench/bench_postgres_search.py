"""``continuity search`` as a fresh process on the PostgreSQL store (its server-side index, ADR
0026), with the JSONL store's figures (its file index) from the same run.

    python -m tools.bench.bench_postgres_search [--frames 100000] [--runs 5] [--cold-runs 2]
                                                [--scan-runs 1] [--json]

The cached generated thread (``tools/bench/_common.cached_thread``) is copied into a throwaway
``pgserver`` (or ``$CONTINUITY_BENCH_PG_URL``: a scratch database, since the command line names
the default schema ``continuity``, which the benchmark drops and makes) with
:func:`continuity.maintenance.migrate.migrate_store`. Rows, medians over the runs, wall time
and peak RSS of each process:

- *cold*: the first search after loading, which builds the index (PostgreSQL: the search tables
  dropped first; JSONL: a copy of the store without ``cache/search``);
- *warm*: later searches, the index current;
- *scan*: PostgreSQL without its index (what a store without ``cache_dir`` did before: the
  whole log read into the process), ``--scan-runs`` times.
"""

from __future__ import annotations

import sys
from typing import Final

from tools.bench._common import (
    Launcher,
    Report,
    Row,
    cached_thread,
    common_parser,
    continuity_command,
    copy_store,
    emit,
    log,
    median,
    percentile,
    work_dir,
)

__all__ = ["main", "run"]

QUERIES: Final = ("error timeout", "pytest ImportError", "src/app/api/handler.py")
_WITH_INDEX: Final = (
    "import sys; from continuity.__main__ import main; sys.argv[0] = 'continuity'; main()"
)
# The path the index replaces: the store offers no search backend, so search scans the log.
_WITHOUT_INDEX: Final = (
    "import sys; from continuity.store.postgres import PostgresStore; "
    "PostgresStore.search_backend = lambda self: None; "
    "from continuity.__main__ import main; sys.argv[0] = 'continuity'; main()"
)


def _rows(name: str, samples: list[tuple[float, float]], baseline: str = "") -> list[Row]:
    secs = [s for s, _ in samples]
    mbs = [m for _, m in samples]
    return [
        Row(
            f"{name}: seconds",
            median(secs),
            "s",
            p90=percentile(secs, 90),
            n=len(secs),
            baseline=baseline,
        ),
        Row(f"{name}: peak RSS", median(mbs), "MB", p90=percentile(mbs, 90), n=len(mbs)),
    ]


def run(frames: int, runs: int, cold_runs: int, scan_runs: int) -> Report:
    from continuity.maintenance.migrate import migrate_store
    from continuity.store.postgres import PostgresStore
    from tools.bench.bench_postgres import _server, _sql

    report = Report(
        "postgres_search",
        {"frames": frames, "runs": runs, "cold_runs": cold_runs, "queries": list(QUERIES)},
    )
    source = cached_thread(frames)
    launcher = Launcher()
    with _server() as url, work_dir("pgsearch") as work:
        schema = "continuity"  # the schema the command line opens
        _sql(url, f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        pg = PostgresStore(url, schema=schema, create=True, durable=False)
        log(f"loading {frames:,} frames into PostgreSQL")
        migrate_store(copy_store(source, work / "src", search_index=False), pg)
        pg.close()
        py = [sys.executable, "-c"]
        pg_cli = [*py, _WITH_INDEX, "--store", url]
        samples: dict[str, list[tuple[float, float]]] = {}

        def add(name: str, argv: list[str]) -> None:
            samples.setdefault(name, []).append(launcher.run(argv))

        for i in range(cold_runs):
            log(f"cold run {i + 1}/{cold_runs}")
            _sql(
                url,
                f"DROP TABLE IF EXISTS {schema}.search_threads, {schema}.search_docs, "
                f"{schema}.search_postings",
            )
            add("postgres cold (builds the index)", [*pg_cli, "search", QUERIES[0]])
            store = copy_store(source, work / f"cold-{i}", search_index=False)
            js_cli = [*continuity_command(), "--store", str(store.root)]
            add("jsonl cold (builds the index)", [*js_cli, "search", QUERIES[0]])
        js_store = copy_store(source, work / "warm", search_index=True)
        js_cli = [*continuity_command(), "--store", str(js_store.root)]
        launcher.run([*js_cli, "search", QUERIES[0]])  # the index current
        launcher.run([*pg_cli, "search", QUERIES[0]])
        for i in range(runs):
            log(f"warm run {i + 1}/{runs}")
            for q in QUERIES:
                add("postgres warm", [*pg_cli, "search", q])
                add("jsonl warm", [*js_cli, "search", q])
        for i in range(scan_runs):
            log(f"scan run {i + 1}/{scan_runs}")
            add(
                "postgres without its index (log scan)",
                [*py, _WITHOUT_INDEX, "--store", url, "search", QUERIES[0]],
            )
        _sql(url, f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    launcher.close()
    for name, found in samples.items():
        report.rows.extend(_rows(name, found))
    report.notes.append(
        "fresh processes on a 2-core VM shared with other work; PostgreSQL on a Unix socket "
        "(pgserver); warm rows are over every query"
    )
    return report


def main(argv: list[str] | None = None) -> None:
    parser = common_parser(__doc__ or "")
    parser.add_argument("--frames", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--cold-runs", type=int, default=2)
    parser.add_argument("--scan-runs", type=int, default=1)
    args = parser.parse_args(argv)
    emit([run(args.frames, args.runs, args.cold_runs, args.scan_runs)], args.json)


if __name__ == "__main__":
    main()
