"""``continuity search`` on a store of the fixture sessions: a fresh process per query, and the
same searches in-process.

    python -m tools.bench.bench_search_fixtures [--repeat 5] [--queries 20] [--json]

Ingests every Claude Code transcript under ``../shared/fixtures/claude-code`` into a scratch
store (48 threads, 1,391 messages) and runs one search first (it builds the store-wide index:
not timed). Then, ``--repeat`` rounds, interleaved:

* ``continuity --store S search QUERY`` as a fresh process for each of the first ``--queries``
  labelled queries of ``tests/data/search_queries_v2.json`` (what a person types days later:
  whole sentences, the slow case for BM25) — target p50 ≤ 150 ms (issue 17);
* baselines in the same rounds: ``python -c pass`` (the interpreter) and
  ``python -c "import continuity"`` (the library's import), so the row ``search / import`` is a
  ratio that does not depend on the machine's speed;
* in-process: ``continuity.retrieval.search(store, QUERY)`` for the same queries (warm).

Without the fixtures it says so and exits 0.
"""

from __future__ import annotations

import sys
import tempfile
from functools import partial
from pathlib import Path
from typing import Final

import msgspec

from tools.bench._common import (
    Launcher,
    Report,
    Row,
    common_parser,
    continuity_command,
    emit,
    log,
    median,
    time_once,
    time_row,
)

ROOT: Final = Path(__file__).resolve().parents[2]
FIXTURES: Final = (ROOT / ".." / "shared" / "fixtures" / "claude-code").resolve()
QUERIES: Final = ROOT / "tests" / "data" / "search_queries_v2.json"
TARGET_MS: Final = 150.0


def _queries(n: int) -> list[str]:
    data = msgspec.json.decode(QUERIES.read_bytes())
    return [q["query"] for q in data["queries"]][:n]


def run(repeat: int, n_queries: int) -> Report:
    from continuity.claude_code.ingest import ingest_transcript
    from continuity.retrieval.search import search
    from continuity.store.jsonl import Store

    report = Report("search on the fixture store", {"repeat": repeat, "queries": n_queries})
    queries = _queries(n_queries)
    with tempfile.TemporaryDirectory(prefix="continuity-bench-") as tmp:
        folder = Path(tmp) / "store"
        store = Store(folder, create=True, durable=False)
        for path in sorted(FIXTURES.rglob("*.jsonl")):
            ingest_transcript(store, path, final=True)
        search(store, queries[0])  # builds the store-wide index
        cli = [*continuity_command(), "--store", str(folder), "search"]
        launcher = Launcher()
        fresh: list[float] = []
        bare: list[float] = []
        imported: list[float] = []
        inproc: list[float] = []
        try:
            launcher.run([*cli, queries[0]])  # warm the OS's caches
            for r in range(repeat):
                log(f"round {r + 1}/{repeat}")
                for q in queries:
                    fresh.append(launcher.run([*cli, q])[0])
                    inproc.append(time_once(partial(search, store, q)))
                bare.append(launcher.run([sys.executable, "-c", "pass"])[0])
                imported.append(launcher.run([sys.executable, "-c", "import continuity"])[0])
        finally:
            launcher.close()
    search_ms = median(fresh) * 1e3
    import_ms = median(imported) * 1e3
    report.rows += [
        time_row("`continuity search` (fresh process)", fresh, target=TARGET_MS),
        time_row("baseline: python -c pass", bare),
        time_row("baseline: python -c 'import continuity'", imported),
        Row(
            "search / import continuity",
            search_ms / import_ms,
            "x",
            n=len(fresh),
            baseline="python -c 'import continuity'",
            ratio=search_ms / import_ms,
        ),
        time_row("search() in-process (warm)", inproc),
    ]
    report.notes.append(
        f"{len(queries)} labelled queries (whole sentences), {repeat} rounds, interleaved"
    )
    return report


def main(argv: list[str] | None = None) -> int:
    parser = common_parser((__doc__ or "").split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="rounds (default 5)")
    parser.add_argument("--queries", type=int, default=20, help="queries per round (default 20)")
    args = parser.parse_args(argv)
    if not FIXTURES.is_dir():
        print(f"bench_search_fixtures: skipped, no fixtures at {FIXTURES}", file=sys.stderr)
        return 0
    emit([run(args.repeat, args.queries)], args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
