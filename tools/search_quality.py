"""Search quality on the labelled fixture queries: recall@1, recall@5 and MRR.

    python tools/search_quality.py [--json] [--fixtures DIR] [--queries FILE]

Ingests every Claude Code transcript under ``../shared/fixtures/claude-code`` into a temporary
store (``ingest_transcript(..., final=True)``, sorted path order), runs each query of
``tests/data/recall_queries.json`` through :func:`continuity.retrieval.search` (k = 10) — once with
BM25 alone, once re-ranked by the :class:`~continuity.retrieval.HashedEmbedder` — and reports, per
mode, overall and per category:

* recall@1 and recall@5: the share of queries with an answer among the first 1 or 5 hits;
* MRR: the mean of 1 / rank of the first answer (0 when none is in the top 10).

Before measuring it checks every label: each answer message must exist and contain its
``evidence`` text, so a change in how ingest numbers frames is reported as a broken label instead
of a silent drop in quality. It reports; it does not judge: the exit status is 0 whatever the
figures (tests/test_search_quality.py sets the floor). Without the fixtures it says so and exits 0.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import msgspec

ROOT: Final = Path(__file__).resolve().parent.parent
FIXTURES: Final = (ROOT / ".." / "shared" / "fixtures" / "claude-code").resolve()
QUERIES: Final = ROOT / "tests" / "data" / "recall_queries.json"
K: Final = 10
MODES: Final = ("bm25", "bm25+hashed")

if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from continuity.caches.search_index import frame_text  # noqa: E402
from continuity.claude_code.ingest import ingest_transcript  # noqa: E402
from continuity.retrieval import HashedEmbedder, search  # noqa: E402
from continuity.store.jsonl import Store  # noqa: E402


class Answer(msgspec.Struct, frozen=True):
    thread: str
    seqs: list[int]
    evidence: str


class Query(msgspec.Struct, frozen=True):
    id: str
    category: str
    query: str
    answers: list[Answer]
    comment: str


class QuerySet(msgspec.Struct, frozen=True):
    about: str
    version: int
    queries: list[Query]


class Scores(msgspec.Struct):
    queries: int = 0
    recall_at_1: float = 0.0
    recall_at_5: float = 0.0
    mrr: float = 0.0


class QueryResult(msgspec.Struct):
    id: str
    category: str
    query: str
    rank: dict[str, int | None]
    """Per mode, the 1-based rank of the first answer in the top K (None: not found)."""
    top: dict[str, list[str]]
    """Per mode, the top 5 hits as ``thread@seq``."""


class Report(msgspec.Struct):
    k: int
    threads: int
    messages: int
    label_problems: list[str]
    overall: dict[str, Scores]
    by_category: dict[str, dict[str, Scores]]
    results: list[QueryResult]


def load_queries(path: Path = QUERIES) -> QuerySet:
    return msgspec.json.decode(path.read_bytes(), type=QuerySet)


def ingest_fixtures(store: Store, fixtures: Path = FIXTURES) -> int:
    """Ingest every transcript under ``fixtures``; return how many messages were written."""
    return sum(
        ingest_transcript(store, p, final=True).messages for p in sorted(fixtures.rglob("*.jsonl"))
    )


def check_labels(store: Store, queries: QuerySet) -> list[str]:
    """What is wrong with the labels: answers that do not exist or lack their evidence, and
    queries copied from their answer's text (a person asks, they do not paste the answer)."""
    problems = []
    ids = set()
    for q in queries.queries:
        if q.id in ids:
            problems.append(f"{q.id}: duplicate id")
        ids.add(q.id)
        for a in q.answers:
            for seq in a.seqs:
                frame = next(iter(store.thread(a.thread).read(from_seq=seq, to_seq=seq)), None)
                if frame is None:
                    problems.append(f"{q.id}: no frame {a.thread}@{seq}")
                    continue
                text = " ".join(frame_text(frame, store).lower().split())
                if a.evidence.lower() not in text:
                    problems.append(f"{q.id}: {a.thread}@{seq} does not contain {a.evidence!r}")
                if " ".join(q.query.lower().split()) in text:
                    problems.append(f"{q.id}: the query is copied from {a.thread}@{seq}")
    return problems


def _scores(ranks: Sequence[int | None]) -> Scores:
    n = len(ranks)
    if not n:
        return Scores()
    return Scores(
        queries=n,
        recall_at_1=round(sum(1 for r in ranks if r == 1) / n, 4),
        recall_at_5=round(sum(1 for r in ranks if r is not None and r <= 5) / n, 4),
        mrr=round(sum(1 / r for r in ranks if r is not None) / n, 4),
    )


def measure(store: Store, queries: QuerySet, messages: int = 0) -> Report:
    """Run every query in both modes and score the ranks."""
    embedder = HashedEmbedder()
    results = []
    for q in queries.queries:
        wanted = {(a.thread, s) for a in q.answers for s in a.seqs}
        rank: dict[str, int | None] = {}
        top: dict[str, list[str]] = {}
        for mode in MODES:
            hits = search(store, q.query, k=K, embedder=embedder if mode != "bm25" else None)
            found = [i for i, h in enumerate(hits, 1) if (h.thread_id, h.seq) in wanted]
            rank[mode] = found[0] if found else None
            top[mode] = [f"{h.thread_id}@{h.seq}" for h in hits[:5]]
        results.append(QueryResult(q.id, q.category, q.query, rank, top))
    categories = sorted({r.category for r in results})
    return Report(
        k=K,
        threads=len(store.threads()),
        messages=messages,
        label_problems=check_labels(store, queries),
        overall={m: _scores([r.rank[m] for r in results]) for m in MODES},
        by_category={
            c: {m: _scores([r.rank[m] for r in results if r.category == c]) for m in MODES}
            for c in categories
        },
        results=results,
    )


def evaluate(fixtures: Path = FIXTURES, queries: Path = QUERIES) -> Report | None:
    """Ingest the fixtures into a temporary store and measure; None without the fixtures."""
    if not fixtures.is_dir():
        return None
    with tempfile.TemporaryDirectory(prefix="continuity-quality-") as tmp:
        store = Store(Path(tmp) / "store", create=True, durable=False)
        messages = ingest_fixtures(store, fixtures)
        return measure(store, load_queries(queries), messages)


def _table(report: Report) -> str:
    lines = [
        f"{len(report.results)} labelled queries over {report.threads} threads "
        f"({report.messages} messages), k={report.k}",
        "",
        f"{'':<14}{'mode':<13}{'n':>3}  {'R@1':>6}  {'R@5':>6}  {'MRR':>6}",
    ]

    def row(name: str, by_mode: dict[str, Scores]) -> None:
        for m in MODES:
            s = by_mode[m]
            lines.append(
                f"{name:<14}{m:<13}{s.queries:>3}  {s.recall_at_1:>6.3f}  "
                f"{s.recall_at_5:>6.3f}  {s.mrr:>6.3f}"
            )
            name = ""

    row("overall", report.overall)
    for category, by_mode in report.by_category.items():
        row(category, by_mode)
    missed = [r for r in report.results if any(r.rank[m] != 1 for m in MODES)]
    if missed:
        lines += ["", "not first in some mode (rank bm25 / bm25+hashed; '-' = not in top 10):"]
        for r in missed:
            ranks = " / ".join("-" if r.rank[m] is None else str(r.rank[m]) for m in MODES)
            lines.append(f"  {ranks:>7}  {r.id}: {r.query!r}")
    if report.label_problems:
        lines += ["", "LABEL PROBLEMS (fix tests/data/recall_queries.json):"]
        lines += [f"  {p}" for p in report.label_problems]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--fixtures", type=Path, default=FIXTURES, help="transcripts folder")
    parser.add_argument("--queries", type=Path, default=QUERIES, help="labelled queries file")
    args = parser.parse_args(argv)
    report = evaluate(args.fixtures, args.queries)
    if report is None:
        print(
            f"search quality: skipped, no fixtures at {args.fixtures} "
            "(they live in ../shared/fixtures next to the project)",
            file=sys.stderr,
        )
        return 0
    if args.json:
        print(msgspec.json.encode(report).decode())
    else:
        print(_table(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
