"""``continuity search`` as a fresh process on the PostgreSQL store (its server-side index, ADR
0026), with the JSONL store's figures (its file index) from the same run.

    python -m tools.bench.bench_postgres_search [--frames 100000] [--runs 5] [--cold-runs 2]
                                                [--scan-runs 1] [--json]
    python -m tools.bench.bench_postgres_search --threads 10000 [--runs 5] [--json]

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

With ``--threads N`` (issue 30: 10,000), the store-wide side by side instead (ADR 0041): N
generated Claude Code threads (``tools/bench/gen_threads``) in a JSONL store and in PostgreSQL;
the first search of each (it builds the index: PostgreSQL's store-wide rows, JSONL's
``search-store``), the search tables' size (``pg_total_relation_size``) against the logs' bytes,
then ``--runs`` rounds of fresh processes, JSONL and PostgreSQL interleaved: ``search`` (three
queries), ``search --project`` and a ``user-prompt-submit`` hook with ``recall_on_prompt`` in a
project's new session (it ingests one turn, then recalls from the project's other sessions).
Targets: search <= 400 ms and within 2x of JSONL; search tables <= 1.5x the logs.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
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
    from tools.bench._common import pg_server
    from tools.bench.bench_postgres import _sql

    report = Report(
        "postgres_search",
        {"frames": frames, "runs": runs, "cold_runs": cold_runs, "queries": list(QUERIES)},
    )
    source = cached_thread(frames)
    launcher = Launcher()
    with pg_server() as url, work_dir("pgsearch") as work:
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


_PROJECT: Final = "/home/dev/webapp"
_PROMPT: Final = "the api handler test fails with ImportError again, what did we change"
_TABLES: Final = ("search_threads", "search_docs", "search_postings")


def _session(folder: Path, n: int) -> tuple[Path, str]:
    """A new session's transcript in ``_PROJECT`` (one turn) and the hook's payload."""
    import random

    from continuity.demo.transcript import TranscriptWriter

    sid = f"bench-recall-{n:04d}"
    path = folder / f"{sid}.jsonl"
    writer = TranscriptWriter(
        path, session_id=sid, cwd=_PROJECT, git_branch="main", rng=random.Random(n)
    )
    writer.prompt("look at the failing import in the api handler")
    writer.response([{"type": "text", "text": "Looking at it."}])
    writer.end_turn([])
    writer.flush()
    payload = {
        "session_id": sid,
        "transcript_path": str(path),
        "cwd": _PROJECT,
        "hook_event_name": "UserPromptSubmit",
        "prompt": _PROMPT,
    }
    return path, json.dumps(payload)


def _sizes(url: str, schema: str) -> tuple[int, int]:
    """(the search tables' total size, the logs' bytes) on the server."""
    import psycopg

    with psycopg.connect(url) as conn:
        tables = 0
        for t in _TABLES:
            row = conn.execute("SELECT pg_total_relation_size(%s)", [f"{schema}.{t}"]).fetchone()
            tables += int(row[0]) if row is not None else 0
        logs = conn.execute(f"SELECT sum(octet_length(line)) FROM {schema}.frames").fetchone()
    return tables, int(logs[0]) if logs is not None else 0


def run_threads(n_threads: int, runs: int) -> Report:
    """The store-wide side by side on ``n_threads`` generated threads (see the module doc)."""
    import subprocess
    import time

    from continuity.maintenance.migrate import migrate_store
    from continuity.paths import local_dir_of
    from continuity.store.jsonl import Store
    from continuity.store.postgres import PostgresStore
    from tools.bench._common import pg_server
    from tools.bench.bench_postgres import _sql
    from tools.bench.gen_threads import write_threads

    report = Report(
        "postgres_search_threads", {"threads": n_threads, "runs": runs, "queries": list(QUERIES)}
    )
    launcher = Launcher()
    with pg_server() as url, work_dir("pgsearch-threads") as work:
        schema = "continuity"
        env = {k: v for k, v in os.environ.items() if not k.startswith("CONTINUITY_")}
        env["XDG_DATA_HOME"] = str(work / "xdg")
        log(f"writing {n_threads:,} threads")
        js = Store(work / "jsonl", create=True, durable=False)
        write_threads(js, n_threads, seed=0)
        _sql(url, f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        pg = PostgresStore(url, schema=schema, create=True, durable=False)
        log("loading them into PostgreSQL")
        migrate_store(js, pg)
        pg.close()
        config = json.dumps({"recall_on_prompt": True})
        for where in (js.local_dir, local_dir_of(url, {"XDG_DATA_HOME": env["XDG_DATA_HOME"]})):
            where.mkdir(parents=True, exist_ok=True)
            (where / "claude-code.json").write_text(config)
        stores = {"jsonl": str(js.root), "postgres": url}
        samples: dict[str, list[tuple[float, float]]] = {}

        def add(name: str, argv: list[str]) -> None:
            samples.setdefault(name, []).append(launcher.run(argv))

        for name, store in stores.items():
            log(f"{name}: first search (builds the index)")
            add(
                f"{name} first search (builds the index)",
                [*continuity_command(), "--store", store, "search", QUERIES[0]],
            )
        tables, logs = _sizes(url, schema)
        hooks = work / "sessions"
        hooks.mkdir()
        n = 0
        for i in range(runs):
            log(f"round {i + 1}/{runs}")
            for name, store in stores.items():
                cli = [*continuity_command(), "--store", store]
                for q in QUERIES:
                    add(f"{name} search", [*cli, "search", q])
                add(f"{name} search --project", [*cli, "search", QUERIES[0], "--project", _PROJECT])
                n += 1
                _path, payload = _session(hooks, n)
                started = time.perf_counter()
                done = subprocess.run(
                    [*cli, "hook", "user-prompt-submit"],
                    input=payload,
                    capture_output=True,
                    text=True,
                    env=env,
                    check=False,
                )
                seconds = time.perf_counter() - started
                if done.returncode != 0 or "recalled" not in done.stdout:
                    raise RuntimeError(
                        f"the {name} hook: {done.returncode} {done.stderr} {done.stdout[:200]}"
                    )
                samples.setdefault(f"{name} recall hook", []).append((seconds, 0.0))
        _sql(url, f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    launcher.close()
    for name, found in samples.items():
        secs = [s for s, _ in found]
        report.rows.append(
            Row(f"{name}: seconds", median(secs), "s", p90=percentile(secs, 90), n=len(secs))
        )
    by = {r.metric: r for r in report.rows}
    for what in ("search", "search --project", "recall hook"):
        pg_row, js_row = by.get(f"postgres {what}: seconds"), by.get(f"jsonl {what}: seconds")
        if pg_row is not None and js_row is not None and js_row.median:
            pg_row.ratio = pg_row.median / js_row.median
            pg_row.baseline = "jsonl"
            if what == "search":
                pg_row.target = min(0.4, 2 * js_row.median)
    report.rows.append(Row("search tables", tables / 1e6, "MB"))
    report.rows.append(Row("logs (frames' bytes)", logs / 1e6, "MB"))
    report.rows.append(Row("search tables / logs", tables / logs if logs else 0.0, "x", target=1.5))
    report.notes.append(
        "fresh processes, JSONL and PostgreSQL interleaved; a 2-core VM shared with other work; "
        "PostgreSQL (pgserver) on a Unix socket on the same machine"
    )
    return report


def main(argv: list[str] | None = None) -> None:
    parser = common_parser(__doc__ or "")
    parser.add_argument("--frames", type=int, default=100_000)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--cold-runs", type=int, default=2)
    parser.add_argument("--scan-runs", type=int, default=1)
    args = parser.parse_args(argv)
    if args.threads:
        emit([run_threads(args.threads, args.runs)], args.json)
        return
    emit([run(args.frames, args.runs, args.cold_runs, args.scan_runs)], args.json)


if __name__ == "__main__":
    main()
