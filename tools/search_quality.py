"""Search quality on labelled fixture queries: recall@1, recall@5 and MRR@10, by kind and split.

    python tools/search_quality.py [--json] [--fixtures DIR] [--queries FILE] [--model DIR]
        [--windows first|mean] [--engine auto|numpy|onnx|onnx-int8] [--derive]

Ingests every Claude Code transcript under ``../shared/fixtures/claude-code`` into a temporary
store (``ingest_transcript(..., final=True)``, sorted path order), runs each query through
:func:`continuity.retrieval.search` (k = 10) — with the lexical ranking alone (``bm25``: BM25
over stemmed, code-aware, field-weighted terms), and, given a model2vec folder (``--model``),
once more fused with the model's ranking (``bm25+model``) — and reports, per mode:

* recall@1 and recall@5: the share of queries with an answer among the first 1 or 5 hits;
* MRR@10: the mean of 1 / rank of the first answer (0 when none is in the top 10);

and what each mode costs: the median wall time of a search (the vector cache warm), the peak
RSS, and with a model the documents embedded into the vector cache per CPU-second and per
second, and the cache's size. ``--model`` takes a BERT-family sentence encoder's folder
(all-MiniLM-L6-v2, e5, bge: :class:`continuity.retrieval.bert.BertEmbedder`; ``--windows``
picks how a long document is embedded) or a model2vec model's.

Two query sets:

* ``tests/data/search_queries_v2.json`` (the default, version 2): queries of three kinds —
  ``paraphrase`` (a change in other words), ``error`` (an error and its fix, loosely) and
  ``decision`` (what was decided and why) — each in a split, ``dev`` (what tuning may look at)
  or ``heldout`` (never tuned on). Answers are labelled by transcript ``file`` and JSONL
  ``lines``; ``thread`` and ``seqs`` are derived from them (``--derive`` prints the set with
  them derived again, for when ingest numbers frames differently). Figures by kind and split.
* ``tests/data/recall_queries.json`` (version 1): queries by ``category`` (command, error,
  request, file, decision), answers labelled by thread and seqs. Figures by category.

Before measuring it checks every label: each answer message must exist and contain its
``evidence`` text; in version 2 each labelled line must still be the message of that thread and
seq, and a paraphrase query must not copy a distinctive word of its answer (a word of the
answer found in at most :data:`DISTINCTIVE_DF` messages of the whole store). A broken label is
reported, never silently dropped. It reports; it does not judge: the exit status is 0 whatever
the figures (tests/retrieval/test_quality.py sets the floor of version 1). Without the fixtures it
says so and exits 0.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final

import msgspec

ROOT: Final = Path(__file__).resolve().parent.parent
FIXTURES: Final = (ROOT / ".." / "shared" / "fixtures" / "claude-code").resolve()
QUERIES_V1: Final = ROOT / "tests" / "data" / "recall_queries.json"
QUERIES_V2: Final = ROOT / "tests" / "data" / "search_queries_v2.json"
QUERIES: Final = QUERIES_V2
K: Final = 10
MODES: Final = ("bm25",)
"""The modes every report has; ``bm25+model`` is added when a model is given (``--model``)."""
KINDS: Final = ("paraphrase", "error", "decision")
SPLITS: Final = ("dev", "heldout")
DISTINCTIVE_DF: Final = 10
"""A word of an answer found in at most this many messages of the store is distinctive: a
paraphrase query must not use it (about 0.7 % of the fixtures' 1,400 messages)."""

if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from continuity import frames as fr  # noqa: E402
from continuity.agents.claude_code.ingest import ingest_transcript  # noqa: E402
from continuity.retrieval.documents import frame_text  # noqa: E402
from continuity.retrieval.embedders import Embedder  # noqa: E402
from continuity.retrieval.search import search  # noqa: E402
from continuity.retrieval.terms import SURFACE, tokenize  # noqa: E402
from continuity.store.jsonl import Store  # noqa: E402


class Answer(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    file: str = ""
    """(version 2) The transcript, relative to the fixtures folder."""
    lines: list[int] = []
    """(version 2) The 1-based JSONL lines of the messages that answer."""
    thread: str
    seqs: list[int]
    evidence: str


class Query(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    id: str
    category: str = ""
    """(version 1) command, error, request, file or decision."""
    kind: str = ""
    """(version 2) paraphrase, error or decision."""
    split: str = ""
    """(version 2) dev or heldout."""
    query: str
    answers: list[Answer]
    comment: str

    @property
    def group(self) -> str:
        return self.kind or self.category


class QuerySet(msgspec.Struct, frozen=True):
    about: str
    version: int
    queries: list[Query]


class Scores(msgspec.Struct):
    queries: int = 0
    recall_at_1: float = 0.0
    recall_at_5: float = 0.0
    mrr: float = 0.0
    """MRR@10: 1 / rank of the first answer in the top K, 0 without one."""


class QueryResult(msgspec.Struct):
    id: str
    category: str
    """The query's category (version 1) or kind (version 2)."""
    query: str
    rank: dict[str, int | None]
    """Per mode, the 1-based rank of the first answer in the top K (None: not found)."""
    top: dict[str, list[str]]
    """Per mode, the top 5 hits as ``thread@seq``."""
    split: str = ""


class Cost(msgspec.Struct):
    """What a mode costs on the fixture store (this machine; CPU time is per process)."""

    query_ms_p50: float = 0.0
    """Median wall time of one search (the vector cache warm)."""
    embed_docs: int = 0
    """(model modes) Documents embedded into the vector cache."""
    embed_docs_per_cpu_s: float = 0.0
    embed_docs_per_s: float = 0.0
    cache_bytes: int = 0
    """(model modes) The vector cache's size on disk."""
    rss_mb: float = 0.0
    """The process's peak resident set size after the mode ran."""


class Report(msgspec.Struct):
    k: int
    threads: int
    messages: int
    label_problems: list[str]
    overall: dict[str, Scores]
    by_category: dict[str, dict[str, Scores]]
    """Per category (version 1) or kind (version 2), per mode."""
    results: list[QueryResult]
    version: int = 1
    queries_file: str = ""
    by_split: dict[str, dict[str, Scores]] = {}
    """(version 2) Per split (dev, heldout), per mode."""
    by_kind_split: dict[str, dict[str, dict[str, Scores]]] = {}
    """(version 2) Per kind, per split (dev, heldout, all), per mode."""
    cost: dict[str, Cost] = {}
    """Per mode, what it costs."""
    model: str = ""
    """The model's id, when a mode uses one."""


def load_queries(path: Path = QUERIES) -> QuerySet:
    return msgspec.json.decode(path.read_bytes(), type=QuerySet)


def ingest_fixtures(store: Store, fixtures: Path = FIXTURES) -> int:
    """Ingest every transcript under ``fixtures``; return how many messages were written."""
    return sum(
        ingest_transcript(store, p, final=True).messages for p in sorted(fixtures.rglob("*.jsonl"))
    )


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _strings(value: Any) -> Iterator[str]:
    """Every string a transcript message's content holds (its text, inputs and results)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            if key not in ("type", "id", "tool_use_id", "signature"):
                yield from _strings(item)


class LineIndex:
    """Where the messages of the fixture transcripts went: (thread, seq) by file and line."""

    def __init__(self, store: Store, fixtures: Path) -> None:
        self.store = store
        self.fixtures = fixtures
        self._by_file: dict[str, dict[str, tuple[str, int]]] = {}
        self._threads_of: dict[str, list[str]] = {}
        for tid in store.threads():
            created = next(iter(store.thread(tid).read(types=["thread_created"])), None)
            if isinstance(created, fr.ThreadCreated):
                path = created.meta.get("transcript", "")
                self._threads_of.setdefault(path, []).append(tid)

    def _keys(self, path: Path) -> dict[str, tuple[str, int]]:
        """Each source key of the messages ``path`` fed, to its thread and seq."""
        found = self._by_file.get(str(path))
        if found is None:
            found = self._by_file[str(path)] = {}
            for tid in self._threads_of.get(str(path), []):
                for f in self.store.thread(tid).read(types=["message_appended"]):
                    if isinstance(f, fr.MessageAppended) and f.source is not None:
                        extra = f.meta.get("cc_keys", "")
                        for key in [f.source.key, *(extra.split(",") if extra else [])]:
                            found.setdefault(key, (tid, f.seq))
        return found

    def locate(self, file: str, line: int) -> tuple[str, int, str] | str:
        """(thread, seq, the line's text) of a transcript line, or what is wrong with it."""
        path = (self.fixtures / file).resolve()
        try:
            raw = path.read_bytes().split(b"\n")
        except OSError as exc:
            return f"cannot read {file} ({exc.strerror or exc})"
        if not 1 <= line <= len(raw):
            return f"{file} has no line {line}"
        try:
            obj = msgspec.json.decode(raw[line - 1])
        except msgspec.DecodeError:
            return f"{file}:{line} is not JSON"
        message = obj.get("message") if isinstance(obj, dict) else None
        if not isinstance(message, dict) or not obj.get("uuid"):
            return f"{file}:{line} is not a message line with a uuid"
        where = self._keys(path).get(obj["uuid"])
        if where is None:
            return f"{file}:{line} (uuid {obj['uuid']}) became no message of the store"
        return where[0], where[1], " ".join(_strings(message.get("content")))


def _words(text: str) -> set[str]:
    """The search tokens of ``text`` as written, not stemmed: what "a word of the answer" meant
    when the queries were labelled (before the index stemmed words, ADR 0032). A word whose stem
    differs is its surface form (``=word``), its stem left out."""
    tokens = tokenize(text)
    # A surface form comes right after its stem: the stem is left out there, and only there.
    return {
        t.removeprefix(SURFACE)
        for t, nxt in zip(tokens, [*tokens[1:], ""], strict=False)
        if not nxt.startswith(SURFACE)
    }


def _message_df(store: Store) -> Counter[str]:
    """In how many messages of the store each token occurs."""
    df: Counter[str] = Counter()
    for tid in store.threads():
        for f in store.thread(tid).read(types=["message_appended"]):
            df.update(_words(frame_text(f, store)))
    return df


def _answer_text(store: Store, thread: str, seq: int) -> str | None:
    frame = next(iter(store.thread(thread).read(from_seq=seq, to_seq=seq)), None)
    return None if frame is None else frame_text(frame, store)


def check_labels(store: Store, queries: QuerySet, fixtures: Path = FIXTURES) -> list[str]:
    """What is wrong with the labels: answers that do not exist or lack their evidence, queries
    copied from their answer's text (a person asks, they do not paste the answer), and in
    version 2 lines that no longer are the labelled message, unknown kinds or splits, and
    paraphrase queries that use a distinctive word of their answer."""
    problems = []
    ids = set()
    v2 = queries.version >= 2
    lines = LineIndex(store, fixtures) if v2 else None
    df = _message_df(store) if v2 else None
    for q in queries.queries:
        if q.id in ids:
            problems.append(f"{q.id}: duplicate id")
        ids.add(q.id)
        if v2:
            problems += _kind_problems(q)
        for a in q.answers:
            if lines is not None:
                problems += _line_problems(q.id, a, lines)
            problems += _seq_problems(store, q, a, df)
    return problems


def _kind_problems(q: Query) -> list[str]:
    """(version 2) A kind or split that is none of the known ones."""
    problems = []
    if q.kind not in KINDS:
        problems.append(f"{q.id}: kind {q.kind!r} is none of {', '.join(KINDS)}")
    if q.split not in SPLITS:
        problems.append(f"{q.id}: split {q.split!r} is none of {', '.join(SPLITS)}")
    return problems


def _line_problems(qid: str, a: Answer, lines: LineIndex) -> list[str]:
    """(version 2) The answer's transcript lines: each one a message of the store holding the
    evidence, and together the messages the answer is labelled with."""
    problems = []
    if not a.file or not a.lines:
        problems.append(f"{qid}: an answer without file and lines")
    evidence = _norm(a.evidence)
    derived: set[tuple[str, int]] = set()
    for n in a.lines:
        where = lines.locate(a.file, n)
        if isinstance(where, str):
            problems.append(f"{qid}: {where}")
            continue
        derived.add(where[:2])
        if evidence not in _norm(where[2]):
            problems.append(f"{qid}: {a.file}:{n} does not contain {a.evidence!r}")
    labelled = {(a.thread, s) for s in a.seqs}
    if derived and derived != labelled:
        got = ", ".join(f"{t}@{s}" for t, s in sorted(derived))
        problems.append(
            f"{qid}: {a.file}:{a.lines} are {got}, labelled {a.thread}@{a.seqs} (run --derive)"
        )
    return problems


def _seq_problems(store: Store, q: Query, a: Answer, df: Counter[str] | None) -> list[str]:
    """The answer's frames: each one there, holding the evidence, not the query's source;
    and with ``df`` (version 2), a paraphrase's query using no word distinctive of them."""
    problems = []
    query = _norm(q.query)
    evidence = _norm(a.evidence)
    distinct = df if q.kind == "paraphrase" else None
    for seq in a.seqs:
        text = _answer_text(store, a.thread, seq)
        if text is None:
            problems.append(f"{q.id}: no frame {a.thread}@{seq}")
            continue
        if evidence not in _norm(text):
            problems.append(f"{q.id}: {a.thread}@{seq} does not contain {a.evidence!r}")
        if query in _norm(text):
            problems.append(f"{q.id}: the query is copied from {a.thread}@{seq}")
        if distinct is not None:
            shared = _words(q.query) & _words(text)
            copied = sorted(t for t in shared if distinct[t] <= DISTINCTIVE_DF)
            if copied:
                problems.append(
                    f"{q.id}: a paraphrase uses words distinctive of {a.thread}@{seq}: "
                    + ", ".join(copied)
                )
    return problems


def derive(store: Store, queries: QuerySet, fixtures: Path = FIXTURES) -> QuerySet:
    """The set with each answer's thread and seqs derived from its file and lines (answers
    whose lines do not resolve, or resolve to several threads, are left as they are)."""
    lines = LineIndex(store, fixtures)
    out = []
    for q in queries.queries:
        answers = []
        for a in q.answers:
            found = [lines.locate(a.file, n) for n in a.lines]
            places = {w[:2] for w in found if not isinstance(w, str)}
            if len(places) == len(found) and len({t for t, _ in places}) == 1:
                thread = next(iter(places))[0]
                a = msgspec.structs.replace(a, thread=thread, seqs=sorted({s for _, s in places}))
            answers.append(a)
        out.append(msgspec.structs.replace(q, answers=answers))
    return msgspec.structs.replace(queries, queries=out)


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


def _by_mode(results: Sequence[QueryResult]) -> dict[str, Scores]:
    modes = list(results[0].rank) if results else list(MODES)
    return {m: _scores([r.rank[m] for r in results]) for m in modes}


def measure(
    store: Store,
    queries: QuerySet,
    messages: int = 0,
    fixtures: Path = FIXTURES,
    embedder: Embedder | None = None,
) -> Report:
    """Run every query in each mode (BM25; BM25 fused with ``embedder``'s ranking when one is
    given) and score the ranks."""
    modes = [*MODES, "bm25+model"] if embedder is not None else list(MODES)
    cost = {m: Cost() for m in modes}
    if embedder is not None:
        cost["bm25+model"] = _embed_cost(store, embedder)
    results = []
    took: dict[str, list[float]] = {m: [] for m in modes}
    for q in queries.queries:
        wanted = {(a.thread, s) for a in q.answers for s in a.seqs}
        rank: dict[str, int | None] = {}
        top: dict[str, list[str]] = {}
        for mode in modes:
            started = time.perf_counter()
            hits = search(store, q.query, k=K, embedder=embedder if mode != "bm25" else None)
            took[mode].append(time.perf_counter() - started)
            found = [i for i, h in enumerate(hits, 1) if (h.thread_id, h.seq) in wanted]
            rank[mode] = found[0] if found else None
            top[mode] = [f"{h.thread_id}@{h.seq}" for h in hits[:5]]
        results.append(QueryResult(q.id, q.group, q.query, rank, top, q.split))
    for mode in modes:
        cost[mode].query_ms_p50 = (
            round(statistics.median(took[mode]) * 1000, 1) if took[mode] else 0
        )
        cost[mode].rss_mb = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    categories = sorted({r.category for r in results})
    report = Report(
        k=K,
        threads=len(store.threads()),
        messages=messages,
        label_problems=check_labels(store, queries, fixtures),
        overall=_by_mode(results),
        by_category={c: _by_mode([r for r in results if r.category == c]) for c in categories},
        results=results,
        version=queries.version,
        cost=cost,
        model=embedder.id if embedder is not None else "",
    )
    if queries.version >= 2:
        report.by_split = {s: _by_mode([r for r in results if r.split == s]) for s in SPLITS}
        kinds = [k for k in KINDS if k in categories] + [c for c in categories if c not in KINDS]
        report.by_kind_split = {
            kind: {
                **{
                    s: _by_mode([r for r in results if (r.category, r.split) == (kind, s)])
                    for s in SPLITS
                },
                "all": report.by_category[kind],
            }
            for kind in kinds
        }
    return report


def _embed_cost(store: Store, embedder: Embedder) -> Cost:
    """Embed the whole store into the vector cache, timed (CPU and wall), and its size."""
    from continuity.retrieval.vectors import FOLDER, rebuild_vectors

    cpu, wall = time.process_time(), time.perf_counter()
    docs = rebuild_vectors(store, embedder)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    root = store.cache_dir / FOLDER if store.cache_dir is not None else None
    size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) if root else 0
    return Cost(
        embed_docs=docs,
        embed_docs_per_cpu_s=round(docs / cpu, 1) if cpu else 0.0,
        embed_docs_per_s=round(docs / wall, 1) if wall else 0.0,
        cache_bytes=size,
    )


def evaluate(
    fixtures: Path = FIXTURES, queries: Path = QUERIES, embedder: Embedder | None = None
) -> Report | None:
    """Ingest the fixtures into a temporary store and measure; None without the fixtures."""
    if not fixtures.is_dir():
        return None
    with tempfile.TemporaryDirectory(prefix="continuity-quality-") as tmp:
        store = Store(Path(tmp) / "store", create=True, durable=False)
        messages = ingest_fixtures(store, fixtures)
        report = measure(store, load_queries(queries), messages, fixtures, embedder)
        report.queries_file = str(queries)
        return report


def _modes(report: Report) -> list[str]:
    return list(report.overall) or list(MODES)


def _missed(report: Report) -> list[str]:
    modes = _modes(report)
    missed = [r for r in report.results if any(r.rank[m] != 1 for m in modes)]
    if not missed:
        return []
    lines = ["", f"not first in some mode (rank {' / '.join(modes)}; '-' = not in top 10):"]
    for r in missed:
        ranks = " / ".join("-" if r.rank[m] is None else str(r.rank[m]) for m in modes)
        split = f" [{r.split}]" if r.split else ""
        lines.append(f"  {ranks:>7}  {r.id}{split}: {r.query!r}")
    return lines


def _problems(report: Report) -> list[str]:
    if not report.label_problems:
        return []
    name = Path(report.queries_file).name if report.queries_file else "the query set"
    return ["", f"LABEL PROBLEMS (fix {name}):", *(f"  {p}" for p in report.label_problems)]


def _table_v1(report: Report) -> str:
    lines = [
        f"{len(report.results)} labelled queries over {report.threads} threads "
        f"({report.messages} messages), k={report.k}",
        "",
        f"{'':<14}{'mode':<13}{'n':>3}  {'R@1':>6}  {'R@5':>6}  {'MRR':>6}",
    ]

    def row(name: str, by_mode: dict[str, Scores]) -> None:
        for m in _modes(report):
            s = by_mode[m]
            lines.append(
                f"{name:<14}{m:<13}{s.queries:>3}  {s.recall_at_1:>6.3f}  "
                f"{s.recall_at_5:>6.3f}  {s.mrr:>6.3f}"
            )
            name = ""

    row("overall", report.overall)
    for category, by_mode in report.by_category.items():
        row(category, by_mode)
    return "\n".join(lines + _missed(report) + _problems(report))


def _table_v2(report: Report) -> str:
    modes = _modes(report)
    head = "".join(f"  {m + ': R@1   R@5  MRR@10':<27}" for m in modes)
    lines = [
        f"{len(report.results)} labelled queries over {report.threads} threads "
        f"({report.messages} messages), k={report.k}",
        "",
        f"{'kind':<12}{'split':<9}{'n':>3}{head}",
    ]

    def row(kind: str, split: str, by_mode: dict[str, Scores]) -> None:
        n = by_mode[modes[0]].queries
        cells = "".join(
            f"  {' ' * len(m)}  {s.recall_at_1:.2f}  {s.recall_at_5:.2f}  {s.mrr:.2f}   "
            for m in modes
            for s in [by_mode[m]]
        )
        lines.append(f"{kind:<12}{split:<9}{n:>3}{cells}".rstrip())

    for kind, by_split in report.by_kind_split.items():
        for split in (*SPLITS, "all"):
            row(kind if split == SPLITS[0] else "", split, by_split[split])
    for split in SPLITS:
        row("all" if split == SPLITS[0] else "", split, report.by_split[split])
    row("", "all", report.overall)
    return "\n".join(lines + _costs(report) + _missed(report) + _problems(report))


def _costs(report: Report) -> list[str]:
    if not report.cost:
        return []
    lines = [
        "",
        f"{'cost':<12}{'query p50':>10}{'embed docs':>12}{'docs/CPU-s':>12}{'docs/s':>8}"
        f"{'cache':>10}{'RSS':>9}",
    ]
    for mode, c in report.cost.items():
        lines.append(
            f"{mode:<12}{c.query_ms_p50:>8.1f}ms{c.embed_docs:>12}{c.embed_docs_per_cpu_s:>12.1f}"
            f"{c.embed_docs_per_s:>8.1f}{c.cache_bytes / 1e6:>8.2f}MB{c.rss_mb:>7.0f}MB"
        )
    if report.model:
        lines.append(f"model: {report.model}")
    return lines


def _table(report: Report) -> str:
    return _table_v2(report) if report.version >= 2 else _table_v1(report)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--fixtures", type=Path, default=FIXTURES, help="transcripts folder")
    parser.add_argument(
        "--queries",
        type=Path,
        default=QUERIES,
        help=f"labelled queries file (default {QUERIES.relative_to(ROOT)}; the first set is "
        f"{QUERIES_V1.relative_to(ROOT)})",
    )
    parser.add_argument(
        "--derive",
        action="store_true",
        help="print the (version 2) set with each answer's thread and seqs derived from its "
        "file and lines, instead of measuring",
    )
    parser.add_argument(
        "--model",
        type=Path,
        default=None,
        help="a model folder (a BERT-family sentence encoder or a model2vec model): also "
        "measure BM25 fused with its ranking (bm25+model)",
    )
    parser.add_argument(
        "--windows",
        choices=("mean", "first"),
        default="first",
        help="(a sentence encoder) a long document's vector: its first window's (the default, "
        "what measured best on the dev split), or its windows' mean",
    )
    parser.add_argument(
        "--engine",
        choices=("auto", "numpy", "onnx", "onnx-int8"),
        default=None,
        help="(a sentence encoder) what runs it: numpy, onnxruntime (fp32, or int8 weights), "
        "or auto (onnxruntime when the onnx extra is installed; $CONTINUITY_ENGINE)",
    )
    args = parser.parse_args(argv)
    embedder: Embedder | None = None
    if args.model is not None:
        from continuity.errors import ModelError
        from continuity.retrieval.bert import BertEmbedder, is_bert_folder
        from continuity.retrieval.models import load_folder

        try:
            folder = Path(args.model)
            bert = folder.is_dir() and is_bert_folder(folder)
            embedder = (
                BertEmbedder(folder, windows=args.windows, engine=args.engine)
                if bert
                else load_folder(folder)
            )
        except ModelError as exc:
            print(f"search quality: {exc}", file=sys.stderr)
            return 2
    if not args.fixtures.is_dir():
        print(
            f"search quality: skipped, no fixtures at {args.fixtures} "
            "(they live in ../shared/fixtures next to the project)",
            file=sys.stderr,
        )
        return 0
    if args.derive:
        with tempfile.TemporaryDirectory(prefix="continuity-quality-") as tmp:
            store = Store(Path(tmp) / "store", create=True, durable=False)
            ingest_fixtures(store, args.fixtures)
            derived = derive(store, load_queries(args.queries), args.fixtures)
        print(msgspec.json.format(msgspec.json.encode(derived), indent=2).decode())
        return 0
    report = evaluate(args.fixtures, args.queries, embedder)
    if report is None:  # the folder went away meanwhile
        return 0
    if args.json:
        print(msgspec.json.encode(report).decode())
    else:
        print(_table(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
