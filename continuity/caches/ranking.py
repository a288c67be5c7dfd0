"""Ranking over the search index: BM25, exact and pruned, one thread's prefix or many threads.

Documents are scored by BM25 over their weighted term counts
(:mod:`continuity.caches.search_index`), summed term by term rarest first whichever documents a
ranking had to look at (it prunes with MaxScore), ties broken by (thread, seq).
:func:`rank_prefix` ranks one thread's documents up to a seq with statistics over that prefix
alone — what compile's recall needs to stay a pure function of the log prefix — through the
index, or by reading the log when the store keeps no caches; the two give the same hits.
Store-wide search, snippets and re-ranking are :mod:`continuity.retrieval`, above the context
layer.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from math import log
from typing import Final

import msgspec
import numpy as np
import numpy.typing as npt

from continuity.caches.search_index import (
    K1,
    KIND_NAMES,
    ROLE_NAMES,
    B,
    Doc,
    DocsSegment,
    IndexView,
    Segment,
    ThreadSearchIndex,
    build_segment,
    docs_of,
    tokenize,
)
from continuity.caches.thread_index import ThreadIndex
from continuity.errors import InvalidQuery
from continuity.store.base import Thread

__all__ = [
    "MAX_QUERY_CHARS",
    "MAX_QUERY_TERMS",
    "Corpus",
    "Hit",
    "corpus_of_docs",
    "corpus_of_view",
    "query_terms",
    "rank",
    "rank_prefix",
]

MAX_QUERY_CHARS: Final = 10_000
MAX_QUERY_TERMS: Final = 64


class Hit(msgspec.Struct, frozen=True, kw_only=True):
    """One ranked document: a message, observation or summary of a thread, with its BM25 score
    (rounded to 6 decimals). :func:`continuity.retrieval.search` fills in when it was written, a
    snippet of it and the query terms it matched."""

    thread_id: str
    seq: int
    kind: str
    role: str = ""
    score: float
    ts_ms: int = 0
    snippet: str = ""
    terms: list[str] = []
    retracted: bool = False
    """The message was taken back (``messages_retracted``): the log and search keep it."""


def query_terms(query: str) -> list[str]:
    """The distinct searchable terms of a query, sorted."""
    if not isinstance(query, str) or not query.strip():
        raise InvalidQuery("the query is empty")
    # The first MAX_QUERY_TERMS distinct terms in the order they are written: cutting the
    # sorted list instead would keep digits and a-words and drop the rest of a long prompt.
    terms = list(dict.fromkeys(tokenize(query[:MAX_QUERY_CHARS])))[:MAX_QUERY_TERMS]
    if not terms:
        raise InvalidQuery(f"the query {query[:80]!r} has no searchable terms")
    return sorted(terms)


# --- scoring --------------------------------------------------------------------------------

_Postings = tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint16]]


class _TopK:
    """The best ``k`` final scores seen so far in one ranking: its smallest is a floor every
    document still to be scored must reach (or tie) to take part in the result."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.best = np.zeros(0, np.float64)

    @property
    def floor(self) -> float:
        return float(self.best.min()) if len(self.best) >= self.k else 0.0

    def add(self, scores: npt.NDArray[np.float64]) -> None:
        both = np.concatenate((self.best, scores))
        if len(both) > self.k:
            both = np.partition(both, len(both) - self.k)[len(both) - self.k :]
        self.best = both


def _bm25(
    idf: float, tfs: npt.NDArray[np.uint16], norm: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """One term's BM25 contributions, given each document's length norm
    ``K1 × (1 − B + B × length / avgdl)``: the one place the arithmetic is written, so every
    path computes the same floats."""
    tf = tfs.astype(np.float64)
    result: npt.NDArray[np.float64] = idf * (tf * (K1 + 1.0)) / (tf + norm)
    return result


class Corpus:
    """The documents one ranking runs over: segments plus each doc's seq and length."""

    def __init__(
        self,
        thread_id: str,
        segments: Sequence[Segment | DocsSegment],
        seqs: npt.NDArray[np.uint64],
        lengths: npt.NDArray[np.uint32],
        kinds: npt.NDArray[np.uint8],
        roles: npt.NDArray[np.uint8],
        cutoff: int,
    ) -> None:
        self.thread_id = thread_id
        self.segments = [s for s in segments if s.first_doc < cutoff]
        self.seqs = seqs
        self.lengths = lengths
        self.kinds = kinds
        self.roles = roles
        self.cutoff = cutoff  # documents with ordinal < cutoff take part
        self._postings: dict[str, list[_Postings]] = {}
        self._ordered: bool | None = None

    def postings(self, term: str) -> list[_Postings]:
        """``term``'s postings in each segment, cut at the cutoff (looked up once per term)."""
        found = self._postings.get(term)
        if found is None:
            found = []
            for seg in self.segments:
                docs, tfs = seg.postings(term)
                keep = int(np.searchsorted(docs, self.cutoff - seg.first_doc))
                found.append((docs[:keep], tfs[:keep]))
            self._postings[term] = found
        return found

    def indexed(self, o: int, terms: list[str]) -> tuple[int, int, int, dict[str, int]]:
        """What the index holds for its document ``o`` (an ordinal :func:`rank` reports):
        (kind, role, length, count of each of ``terms``). Search compares this with the
        document made again from the hit's frame, which the chain vouches for. The seq column
        must be in order (checked once per corpus, ~1 ms at a million documents): a seq changed
        by damage would otherwise give a document another frame's place."""
        if self._ordered is None:
            seqs = self.seqs[: self.cutoff]
            self._ordered = bool(np.all(seqs[1:] > seqs[:-1]))
        if not self._ordered:
            raise ValueError(f"the search index of thread {self.thread_id!r} has seqs out of order")
        counts: dict[str, int] = {}
        for term in terms:
            for (docs, tfs), seg in zip(self.postings(term), self.segments, strict=True):
                local = o - seg.first_doc
                if 0 <= local < seg.n_docs and len(docs):
                    at = int(np.searchsorted(docs, docs.dtype.type(local)))
                    if at < len(docs) and int(docs[at]) == local:
                        counts[term] = int(tfs[at])
        return int(self.kinds[o]), int(self.roles[o]), int(self.lengths[o]), counts

    def df(self, term: str) -> int:
        return sum(len(docs) for docs, _ in self.postings(term))

    def total_length(self) -> int:
        return int(self.lengths[: self.cutoff].sum(dtype=np.uint64))

    def score(
        self, order: list[str], idf: dict[str, float], avgdl: float, top: _TopK
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """(doc ordinals, scores) of every document that can be among ``top``'s best.

        A document's score is its terms' BM25 contributions summed in ``order`` (rarest first),
        whichever path computes it, so scores are the same bytes however a ranking was pruned.
        Pruning (MaxScore): a term adds less than ``idf × (K1 + 1)``; once the terms still to
        come cannot lift a document above the floor of the best scores so far, documents none
        of the terms before matched are dropped, and the rest are only looked up in the later
        terms' postings instead of walking them whole.
        """
        bounds = [idf[t] * (K1 + 1.0) for t in order]
        # rest[i]: the most terms i.. can add, with room for rounding in the sums.
        rest = [sum(bounds[i:]) * (1.0 + 1e-9) + 1e-12 for i in range(len(order))] + [0.0]
        found_docs: list[npt.NDArray[np.int64]] = []
        found_scores: list[npt.NDArray[np.float64]] = []
        for s, seg in enumerate(self.segments):
            n = min(seg.n_docs, self.cutoff - seg.first_doc)
            lengths = self.lengths[seg.first_doc : seg.first_doc + n].astype(np.float64)
            norm = K1 * (1.0 - B + B * lengths / avgdl)
            scores = np.zeros(n, dtype=np.float64)
            floor = top.floor
            i = 0
            while i < len(order) and not rest[i] < floor:
                docs, tfs = self.postings(order[i])[s]
                if len(docs):
                    scores[docs] += _bm25(idf[order[i]], tfs, norm[docs])
                i += 1
                if i < len(order) and rest[i] < scores.max(initial=0.0):
                    # Partial scores only grow: the k-th best of them is a floor too.
                    positive = scores[scores > 0.0]
                    if len(positive) >= top.k:
                        kth = np.partition(positive, len(positive) - top.k)[len(positive) - top.k]
                        floor = max(floor, float(kth))
            hits = np.flatnonzero(scores).astype(np.int64)
            cand = scores[hits]
            if i < len(order):
                keep = cand + rest[i] >= floor
                hits, cand = hits[keep], cand[keep]
                for term in order[i:]:
                    docs, tfs = self.postings(term)[s]
                    if not len(docs) or not len(hits):
                        continue
                    at = np.minimum(np.searchsorted(docs, hits), len(docs) - 1)
                    match = docs[at] == hits
                    if match.any():
                        cand[match] += _bm25(idf[term], tfs[at[match]], norm[hits[match]])
            top.add(cand)
            found_docs.append(hits + seg.first_doc)
            found_scores.append(cand)
        if not found_docs:
            return np.zeros(0, np.int64), np.zeros(0, np.float64)
        return np.concatenate(found_docs), np.concatenate(found_scores)


def corpus_of_view(view: IndexView, max_seq: int | None) -> Corpus:
    seqs = view.seqs()
    cutoff = len(seqs) if max_seq is None else int(np.searchsorted(seqs, max_seq, side="right"))
    docs = view.docs
    kinds = docs["kind"] if docs is not None else np.zeros(0, np.uint8)
    roles = docs["role"] if docs is not None else np.zeros(0, np.uint8)
    return Corpus(view.thread_id, view.segments, seqs, view.lengths(), kinds, roles, cutoff)


def corpus_of_docs(thread_id: str, docs: list[Doc]) -> Corpus:
    segment = Segment(build_segment(docs), 0)
    return Corpus(
        thread_id,
        [segment],
        np.array([d.seq for d in docs], dtype=np.uint64),
        np.array([min(d.length, 2**32 - 1) for d in docs], dtype=np.uint32),
        np.array([d.kind for d in docs], dtype=np.uint8),
        np.array([d.role for d in docs], dtype=np.uint8),
        len(docs),
    )


def rank(
    corpora: list[Corpus],
    terms: list[str],
    k: int,
    exclude: frozenset[tuple[str, int]],
    found: dict[tuple[str, int], int] | None = None,
) -> list[Hit]:
    """The best ``k`` documents of ``corpora`` for ``terms`` (one set of statistics over all of
    them), skipping the ``(thread, seq)`` pairs in ``exclude``; ties go to the lower thread id,
    then seq. ``found``, when given, receives each hit's document ordinal in its corpus."""
    n_docs = sum(c.cutoff for c in corpora)
    if n_docs == 0:
        return []
    avgdl = sum(c.total_length() for c in corpora) / n_docs
    idf = {}
    for term in terms:
        df = sum(c.df(term) for c in corpora)
        idf[term] = log(1.0 + (n_docs - df + 0.5) / (df + 0.5))
    order = sorted(terms, key=lambda t: (-idf[t], t))  # the summation order: rarest first
    want = k + len(exclude)
    top = _TopK(want)
    ranked: list[tuple[float, str, int, int, int]] = []
    for c in corpora:
        ordinals, scores = c.score(order, idf, avgdl, top)
        if len(ordinals) > want:
            # Only the best ``want`` (and whatever ties the last of them) can be kept.
            cut = np.partition(scores, len(scores) - want)[len(scores) - want]
            best = scores >= cut
            ordinals, scores = ordinals[best], scores[best]
        if not len(ordinals):
            continue
        # Keep the best of this corpus (ties to the lower seq), then merge across corpora.
        for i in np.lexsort((c.seqs[ordinals], -scores))[:want]:
            o = int(ordinals[i])
            seq = int(c.seqs[o])
            if (c.thread_id, seq) in exclude:
                continue
            ranked.append((-float(scores[i]), c.thread_id, seq, int(c.kinds[o]), int(c.roles[o])))
            if found is not None:
                found[(c.thread_id, seq)] = o
    ranked.sort()
    return [
        Hit(
            thread_id=tid,
            seq=seq,
            kind=KIND_NAMES.get(kind, "?"),
            role=ROLE_NAMES.get(role, ""),
            score=round(-neg, 6),
        )
        for neg, tid, seq, kind, role in ranked[:k]
    ]


def rank_prefix(
    thread: Thread,
    terms: list[str],
    *,
    max_seq: int,
    k: int,
    exclude_seqs: Iterable[int] = (),
    use_caches: bool = True,
    frames: ThreadIndex | None = None,
) -> list[Hit]:
    """The best ``k`` documents of ``thread`` with seq ≤ ``max_seq`` for ``terms``
    (:func:`query_terms`), ranked with statistics over exactly those documents: a function of
    the log prefix alone, through the search index or by reading the log (``use_caches=False``,
    or a store without caches). ``frames`` is the thread's frame index when the caller holds one
    already. The hits carry no snippet."""
    if max_seq < 0 or k <= 0:
        return []
    if use_caches and ThreadSearchIndex.usable(thread):
        view = ThreadSearchIndex(thread, frames).current_view()
        corpora = [corpus_of_view(view, max_seq)] if view is not None else []
    else:
        docs = list(docs_of(thread.read(to_seq=max_seq), thread.store))
        corpora = [corpus_of_docs(thread.id, docs)] if docs else []
    exclude = frozenset((thread.id, s) for s in exclude_seqs)
    return rank(corpora, terms, k, exclude)
