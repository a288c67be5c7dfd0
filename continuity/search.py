"""Search and recall: BM25 over the search index, with optional vector re-ranking.

``search(store, query)`` ranks every thread's messages, observations and summaries (or one
thread's, or one project's); ``search_prefix(...)`` ranks one thread's documents up to a seq with
statistics computed over that prefix alone — what compile's recall stage needs to stay a pure
function of the log prefix. Both are deterministic: BM25 over weighted term counts (see
:mod:`continuity.search_index`), summed term by term rarest first whichever documents a
ranking had to look at (it prunes with MaxScore), ties broken by (thread, seq). An
:class:`Embedder` can re-rank the best candidates by cosine similarity; the default
:class:`HashedEmbedder` is deterministic hashed features, and a real model can be plugged in by
the caller (nothing is downloaded).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Sequence
from math import log
from typing import Final, Protocol

import msgspec
import numpy as np
import numpy.typing as npt

from continuity import frames as fr
from continuity.errors import ContinuityError
from continuity.search_index import (
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
    summary_text,
    tokenize,
)
from continuity.store import BaseStore, Store

__all__ = [
    "Embedder",
    "HashedEmbedder",
    "Hit",
    "InvalidQuery",
    "frame_text",
    "query_terms",
    "search",
    "search_prefix",
]

MAX_QUERY_CHARS: Final = 10_000
MAX_QUERY_TERMS: Final = 64
_SNIPPET: Final = 160


class InvalidQuery(ContinuityError, ValueError):
    """A query with nothing to search for, or limits that make no sense."""


class Hit(msgspec.Struct, frozen=True, kw_only=True):
    thread_id: str
    seq: int
    kind: str
    role: str = ""
    score: float
    ts_ms: int = 0
    snippet: str = ""
    terms: list[str] = []


class Embedder(Protocol):
    """Texts to unit vectors; must be deterministic. A real model is the caller's to plug in."""

    @property
    def id(self) -> str: ...

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...


class HashedEmbedder:
    """Hashed token features (signed, CRC32 buckets), L2-normalised: no model, no randomness."""

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim

    @property
    def id(self) -> str:
        return f"hashed/{self.dim}"

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for token in tokenize(text):
                h = zlib.crc32(token.encode())
                out[row, h % self.dim] += 1.0 if (h >> 31) & 1 else -1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        unit: npt.NDArray[np.float32] = np.divide(
            out, norms, out=np.zeros_like(out), where=norms > 0
        )
        return unit


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


class _Corpus:
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


def _corpus_of_view(view: IndexView, max_seq: int | None) -> _Corpus:
    seqs = view.seqs()
    cutoff = len(seqs) if max_seq is None else int(np.searchsorted(seqs, max_seq, side="right"))
    docs = view.docs
    kinds = docs["kind"] if docs is not None else np.zeros(0, np.uint8)
    roles = docs["role"] if docs is not None else np.zeros(0, np.uint8)
    return _Corpus(view.thread_id, view.segments, seqs, view.lengths(), kinds, roles, cutoff)


def _corpus_of_docs(thread_id: str, docs: list[Doc]) -> _Corpus:
    segment = Segment(build_segment(docs), 0)
    return _Corpus(
        thread_id,
        [segment],
        np.array([d.seq for d in docs], dtype=np.uint64),
        np.array([min(d.length, 2**32 - 1) for d in docs], dtype=np.uint32),
        np.array([d.kind for d in docs], dtype=np.uint8),
        np.array([d.role for d in docs], dtype=np.uint8),
        len(docs),
    )


def _rank(
    corpora: list[_Corpus], terms: list[str], k: int, exclude: frozenset[tuple[str, int]]
) -> list[Hit]:
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


# --- snippets -------------------------------------------------------------------------------


def frame_text(frame: fr.Frame, store: BaseStore) -> str:
    """What a frame says, as one line of text (the fields the index tokenizes)."""
    from continuity.search_index import _fields

    summary = summary_text(store, frame)
    return " ".join(" ".join(text.split()) for text, _w in _fields(frame, summary))


def _snippet(text: str, terms: list[str]) -> tuple[str, list[str]]:
    low = text.lower()
    matched = [t for t in terms if t in low]
    if not matched:
        return text[:_SNIPPET], []
    first = min(low.find(t) for t in matched)
    start = max(0, first - _SNIPPET // 3)
    piece = text[start : start + _SNIPPET]
    return ("…" if start else "") + piece + ("…" if start + _SNIPPET < len(text) else ""), matched


def _with_snippets(
    store: BaseStore, hits: list[Hit], terms: list[str], *, use_caches: bool = True
) -> list[Hit]:
    readers: dict[str, Callable[[int], fr.Frame | None]] = {}

    def reader(thread_id: str) -> Callable[[int], fr.Frame | None]:
        if use_caches and isinstance(store, Store):
            from continuity.caches import ThreadIndex

            index = ThreadIndex(store, thread_id)  # straight to the line, no bisection
            return lambda seq: next(index.read(seq, seq), None)
        thread = store.thread(thread_id)
        return lambda seq: next(iter(thread.read(from_seq=seq, to_seq=seq)), None)

    out = []
    for h in hits:
        read = readers.get(h.thread_id)
        if read is None:
            read = readers[h.thread_id] = reader(h.thread_id)
        frame = read(h.seq)
        if frame is None:
            out.append(h)
            continue
        snippet, matched = _snippet(frame_text(frame, store), terms)
        out.append(msgspec.structs.replace(h, ts_ms=frame.ts_ms, snippet=snippet, terms=matched))
    return out


# --- the two entry points -------------------------------------------------------------------


def _threads(store: Store, thread: str | None, project: str | None) -> list[str]:
    if thread is not None:
        return [store.existing_thread(thread).id]
    ids = store.threads()
    if project is None:
        return ids
    chosen = []
    for tid in ids:
        first = next(iter(store.thread(tid).read(to_seq=0)), None)
        if isinstance(first, fr.ThreadCreated) and first.meta.get("project") == project:
            chosen.append(tid)
    return chosen


def search(
    store: Store,
    query: str,
    *,
    thread: str | None = None,
    project: str | None = None,
    k: int = 10,
    embedder: Embedder | None = None,
    rerank: int = 50,
) -> list[Hit]:
    """The best ``k`` documents for ``query`` across the store (or one thread or project).

    Brings each searched thread's index up to date first (incremental). With an ``embedder``
    the best ``rerank`` BM25 candidates are re-ordered by BM25 (normalised) plus cosine
    similarity, deterministically.
    """
    if k <= 0:
        raise InvalidQuery("k must be positive")
    terms = query_terms(query)
    corpora = []
    for tid in _threads(store, thread, project):
        view = ThreadSearchIndex(store, tid).current_view()
        if view is not None and view.manifest.docs:
            corpora.append(_corpus_of_view(view, None))
    hits = _rank(corpora, terms, max(k, rerank if embedder else k), frozenset())
    hits = _with_snippets(store, hits, terms)
    if embedder is not None and hits:
        hits = _rerank(hits, query, embedder)
    return hits[:k]


def _rerank(hits: list[Hit], query: str, embedder: Embedder) -> list[Hit]:
    vectors = embedder.embed([query, *(h.snippet for h in hits)])
    cosine = vectors[1:] @ vectors[0]
    top = max(h.score for h in hits) or 1.0
    scored = [
        (-(round(h.score / top + float(c), 6)), h.thread_id, h.seq, h)
        for h, c in zip(hits, cosine, strict=True)
    ]
    scored.sort(key=lambda x: x[:3])
    return [msgspec.structs.replace(h, score=-neg) for neg, _t, _s, h in scored]


def search_prefix(
    store: BaseStore,
    thread_id: str,
    query: str,
    *,
    max_seq: int,
    k: int,
    exclude_seqs: Iterable[int] = (),
    use_caches: bool = True,
) -> list[Hit]:
    """The best ``k`` documents of ``thread_id`` with seq ≤ ``max_seq``, ranked with statistics
    over exactly those documents: the result is a function of the log prefix alone, through the
    index or by reading the log (``use_caches=False``, any backend)."""
    terms = query_terms(query)
    # Both paths refuse an unknown thread alike (the index alone would just find nothing).
    thread = store.existing_thread(thread_id)
    if max_seq < 0 or k <= 0:
        return []
    if use_caches and isinstance(store, Store):
        view = ThreadSearchIndex(store, thread_id).current_view()
        corpora = [_corpus_of_view(view, max_seq)] if view is not None else []
    else:
        docs = list(docs_of(thread.read(to_seq=max_seq), store))
        corpora = [_corpus_of_docs(thread_id, docs)] if docs else []
    exclude = frozenset((thread_id, s) for s in exclude_seqs)
    hits = _rank(corpora, terms, k, exclude)
    return _with_snippets(store, hits, terms, use_caches=use_caches)
