"""``continuity search`` on a store of the fixture sessions: a fresh process per query, and the
same searches in-process.

    python -m tools.bench.bench_search_fixtures [--repeat 5] [--queries 20] [--model DIR] [--json]

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

With ``--model DIR`` (a sentence encoder's folder: all-MiniLM-L6-v2, e5, bge), the store's vector
cache is made first (not timed) and the same rounds also run
``continuity --store S search --model DIR QUERY`` — the fused search, model loaded in a fresh
process — target p50 ≤ 400 ms (issue 31); in-process, the model's load and one query's embedding
are timed apart, so the row says where a fresh process's time goes.

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
MODEL_TARGET_MS: Final = 400.0


def _queries(n: int) -> list[str]:
    data = msgspec.json.decode(QUERIES.read_bytes())
    return [q["query"] for q in data["queries"]][:n]


def _model_rows(folder: Path, queries: list[str], repeat: int) -> list[Row]:
    """In-process: the model's load from its folder, and one query's embedding (warm)."""
    from continuity.retrieval.embedders import embed_queries
    from continuity.retrieval.models import load_folder

    loads = [time_once(partial(load_folder, folder)) for _ in range(repeat)]
    model = load_folder(folder)
    embeds = [time_once(partial(embed_queries, model, [q])) for q in queries]
    return [
        time_row("  in-process: load the model", loads),
        time_row("  in-process: embed one query (warm)", embeds),
    ]


def run(repeat: int, n_queries: int, model: Path | None = None) -> Report:
    from continuity.agents.claude_code.ingest import ingest_transcript
    from continuity.retrieval.search import search
    from continuity.store.jsonl import Store

    params: dict[str, object] = {"repeat": repeat, "queries": n_queries}
    if model is not None:
        params["model"] = model.name
    report = Report("search on the fixture store", params)
    queries = _queries(n_queries)
    with tempfile.TemporaryDirectory(prefix="continuity-bench-") as tmp:
        folder = Path(tmp) / "store"
        store = Store(folder, create=True, durable=False)
        for path in sorted(FIXTURES.rglob("*.jsonl")):
            ingest_transcript(store, path, final=True)
        search(store, queries[0])  # builds the store-wide index
        cli = [*continuity_command(), "--store", str(folder), "search"]
        fused_cli = [*cli, "--model", str(model)] if model is not None else None
        launcher = Launcher()
        if fused_cli is not None:
            log("embedding the store into its vector cache (not timed)")
            launcher.run(
                [*continuity_command(), "--store", str(folder), "index", "--model", str(model)]
            )
        fused: list[float] = []
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
                    if fused_cli is not None:
                        fused.append(launcher.run([*fused_cli, q])[0])
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
    if model is not None:
        fused_ms = median(fused) * 1e3
        report.rows += [
            time_row("`continuity search --model` (fresh process)", fused, target=MODEL_TARGET_MS),
            Row(
                "search --model / search",
                fused_ms / search_ms,
                "x",
                n=len(fused),
                baseline="`continuity search` (fresh process)",
                ratio=fused_ms / search_ms,
            ),
            *_model_rows(model, queries, repeat),
        ]
    report.notes.append(
        f"{len(queries)} labelled queries (whole sentences), {repeat} rounds, interleaved"
    )
    return report


def main(argv: list[str] | None = None) -> int:
    parser = common_parser((__doc__ or "").split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="rounds (default 5)")
    parser.add_argument("--queries", type=int, default=20, help="queries per round (default 20)")
    parser.add_argument(
        "--model",
        type=Path,
        default=None,
        help="a sentence encoder's folder: also time the fused search, model loaded (issue 31)",
    )
    args = parser.parse_args(argv)
    if args.model is not None and not args.model.is_dir():
        parser.error(f"--model: no model folder at {args.model}")
    if not FIXTURES.is_dir():
        print(f"bench_search_fixtures: skipped, no fixtures at {FIXTURES}", file=sys.stderr)
        return 0
    emit([run(args.repeat, args.queries, args.model)], args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
