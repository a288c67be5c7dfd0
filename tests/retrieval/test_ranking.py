"""Ranking against a brute-force reference: the pruned, segment-by-segment scoring of
:mod:`continuity.retrieval.ranking` must give exactly the hits (seqs and scores) of scoring every
document of the store in plain Python, over many segments, several threads, prefixes and small
``k``."""

from __future__ import annotations

import random
from math import log

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from continuity import frames as fr
from continuity.retrieval import ranking
from continuity.retrieval.documents import Doc, docs_of
from continuity.retrieval.index import ThreadSearchIndex
from continuity.retrieval.ranking import K1, MAX_RANKED_TERMS, SURFACE_WEIGHT, B, query_terms
from continuity.retrieval.search import search, search_prefix
from continuity.store.jsonl import Store
from continuity.testing import FixedClock

# Word frequencies from very common to rare, so that some query terms match most documents
# (what pruning skips) and some a handful (what sets the floor).
COMMON = ["deploy", "cache", "error", "test"]
MIDDLE = ["retry", "backoff", "cursor", "manifest", "segment", "offset"]
RARE = ["alembic", "watermark", "quarantine", "digest"]
THREADS = {"a": 1_400, "b": 300}  # "a" spans several sealed segments and a tail


def _body(rng: random.Random) -> str:
    words = [w for w in COMMON if rng.random() < 0.6]
    words += [w for w in MIDDLE if rng.random() < 0.15]
    words += [w for w in RARE if rng.random() < 0.01]
    words += [f"src/{rng.choice(MIDDLE)}_{rng.randrange(40)}.py"] if rng.random() < 0.3 else []
    rng.shuffle(words)
    return " ".join(words * rng.randint(1, 3)) or "filler"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    s = Store(tmp_path_factory.mktemp("ranking"), create=True, durable=False, clock=FixedClock())
    rng = random.Random(7)
    for tid, n in THREADS.items():
        bodies = [_body(rng) for _ in range(n)]
        bodies[n // 2] = bodies[n // 3] = bodies[1]  # equal documents: ties broken by seq
        roles: list[fr.Role] = ["user", "assistant"]
        s.thread(tid).append([fr.message(roles[i % 2], b) for i, b in enumerate(bodies)])
    return s


def _reference(docs: dict[str, list[Doc]], query: str, k: int) -> list[tuple[str, int, float]]:
    """Every document scored in plain Python: BM25 summed rarest term first, ties by
    (thread, seq) — the ranking the index must reproduce bit for bit. The terms scored with:
    those some document holds and at most half of them do (all that some document holds, if
    none is that rare), the ``MAX_RANKED_TERMS`` highest idf (ADR 0022)."""
    terms = query_terms(query)
    everything = [(tid, d) for tid, ds in docs.items() for d in ds]
    n = len(everything)
    if n == 0:
        return []
    avgdl = sum(min(d.length, 2**32 - 1) for _, d in everything) / n
    idf = {}
    common = set()
    for t in terms:
        df = sum(1 for _, d in everything if t in d.tf)
        if df:
            idf[t] = log(1.0 + (n - df + 0.5) / (df + 0.5))
            if df > n / 2:
                common.add(t)
    scored = [t for t in idf if t not in common] or list(idf)
    # the rarest stems and, apart, the rarest surface forms, each weighing a fifth (ADR 0032)
    by_idf = sorted(scored, key=lambda t: (-idf[t], t))
    order = sorted(
        [t for t in by_idf if not t.startswith("=")][:MAX_RANKED_TERMS]
        + [t for t in by_idf if t.startswith("=")][:MAX_RANKED_TERMS],
        key=lambda t: (-idf[t], t),
    )
    idf = {t: w * (SURFACE_WEIGHT if t.startswith("=") else 1.0) for t, w in idf.items()}
    ranked: list[tuple[float, str, int]] = []
    for tid, d in everything:
        score = 0.0
        for t in order:
            if t in d.tf:
                tf = float(min(d.tf[t], 65535))
                score += idf[t] * (tf * (K1 + 1.0)) / (tf + K1 * (1.0 - B + B * d.length / avgdl))
        if score > 0.0:
            ranked.append((-score, tid, d.seq))
    ranked.sort()
    return [(tid, seq, round(-neg, 6)) for neg, tid, seq in ranked[:k]]


_ALL_DOCS: dict[int, dict[str, list[Doc]]] = {}


def _docs(
    store: Store, max_seq: int | None = None, only: str | None = None
) -> dict[str, list[Doc]]:
    every = _ALL_DOCS.get(id(store))
    if every is None:
        every = _ALL_DOCS[id(store)] = {
            tid: list(docs_of(store.thread(tid).read(), store)) for tid in THREADS
        }
    return {
        tid: [d for d in docs if max_seq is None or d.seq <= max_seq]
        for tid, docs in every.items()
        if only is None or tid == only
    }


VOCAB = [*COMMON, *MIDDLE, *RARE, "src/retry_3.py", "cursor_12"]


@pytest.mark.slow
@given(words=st.lists(st.sampled_from(VOCAB), min_size=1, max_size=5), k=st.integers(1, 25))
@settings(max_examples=120, deadline=None)
def test_search_equals_scoring_every_document(store: Store, words: list[str], k: int) -> None:
    query = " ".join(words)
    hits = search(store, query, k=k)
    assert [(h.thread_id, h.seq, h.score) for h in hits] == _reference(_docs(store), query, k)


@pytest.mark.slow
@given(
    words=st.lists(st.sampled_from(VOCAB), min_size=1, max_size=4),
    k=st.integers(1, 15),
    max_seq=st.integers(0, THREADS["a"] + 2),
)
@settings(max_examples=60, deadline=None)
def test_prefix_search_equals_scoring_every_document_of_the_prefix(
    store: Store, words: list[str], k: int, max_seq: int
) -> None:
    query = " ".join(words)
    expected = _reference(_docs(store, max_seq, only="a"), query, k)
    for use_caches in (True, False):
        hits = search_prefix(store, "a", query, max_seq=max_seq, k=k, use_caches=use_caches)
        assert [(h.thread_id, h.seq, h.score) for h in hits] == expected


def test_pruning_skips_documents_that_cannot_reach_the_best(store: Store) -> None:
    """A rare term sets a floor the common ones cannot lift other documents over: the scorer
    hands back fewer candidates than the documents matching the query, and still the right
    best hit. (Would fail if every matching document were scored: the speed of common-word
    queries at a million messages depends on it.)"""
    index = ThreadSearchIndex(store.thread("a"))
    index.refresh()
    view = index.view()
    assert view is not None and len(view.segments) > 2
    corpus = ranking.corpus_of_view(view, None)
    terms = query_terms("alembic deploy cache")
    n = corpus.cutoff
    avgdl = corpus.total_length() / n
    idf = {t: log(1.0 + (n - corpus.df(t) + 0.5) / (corpus.df(t) + 0.5)) for t in terms}
    order = sorted(terms, key=lambda t: (-idf[t], t))
    matching = np.zeros(n, dtype=bool)
    for t in terms:
        for seg, (docs, _tfs) in zip(corpus.segments, corpus.postings(t), strict=True):
            matching[docs.astype(np.int64) + seg.first_doc] = True
    ordinals, _scores = corpus.score(order, idf, avgdl, ranking._TopK(1))
    assert 0 < len(ordinals) < int(matching.sum()) // 4
    best = search_prefix(store, "a", "alembic deploy cache", max_seq=10**9, k=1)
    assert [(h.seq, h.score) for h in best] == [
        (seq, score)
        for _t, seq, score in _reference(_docs(store, only="a"), "alembic deploy cache", 1)
    ]
