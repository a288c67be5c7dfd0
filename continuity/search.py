"""Search and recall: BM25 over the search index, with optional vector re-ranking.

``search(store, query)`` ranks every thread's messages, observations and summaries (or one
thread's, or one project's); ``search_prefix(...)`` ranks one thread's documents up to a seq with
statistics computed over that prefix alone — what compile's recall stage needs to stay a pure
function of the log prefix. Both are deterministic: BM25 over weighted term counts (see
:mod:`continuity.search_index`), summed term by term in sorted term order, ties broken by
(thread, seq). An :class:`Embedder` can re-rank the best candidates by cosine similarity; the
default :class:`HashedEmbedder` is deterministic hashed features, and a real model can be
plugged in by the caller (nothing is downloaded).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence
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
    """The distinct searchable terms of a query, sorted (the order scores are summed in)."""
    if not isinstance(query, str) or not query.strip():
        raise InvalidQuery("the query is empty")
    # The first MAX_QUERY_TERMS distinct terms in the order they are written: cutting the
    # sorted list instead would keep digits and a-words and drop the rest of a long prompt.
    terms = list(dict.fromkeys(tokenize(query[:MAX_QUERY_CHARS])))[:MAX_QUERY_TERMS]
    if not terms:
        raise InvalidQuery(f"the query {query[:80]!r} has no searchable terms")
    return sorted(terms)


# --- scoring --------------------------------------------------------------------------------


class _Corpus:
    """The documents one ranking runs over: segments plus each doc's seq and length."""

    def __init__(
        self,
        thread_id: str,
        segments: list[Segment],
        seqs: npt.NDArray[np.uint64],
        lengths: npt.NDArray[np.uint32],
        kinds: npt.NDArray[np.uint8],
        roles: npt.NDArray[np.uint8],
        cutoff: int,
    ) -> None:
        self.thread_id = thread_id
        self.segments = segments
        self.seqs = seqs
        self.lengths = lengths
        self.kinds = kinds
        self.roles = roles
        self.cutoff = cutoff  # documents with ordinal < cutoff take part

    def df(self, term: str) -> int:
        n = 0
        for seg in self.segments:
            if seg.first_doc >= self.cutoff:
                break
            docs, _ = seg.postings(term)
            n += int(np.searchsorted(docs, self.cutoff - seg.first_doc))
        return n

    def total_length(self) -> int:
        return int(self.lengths[: self.cutoff].sum(dtype=np.uint64))

    def score(
        self, terms: list[str], idf: dict[str, float], avgdl: float
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """(doc ordinals, scores) of the documents matching any term."""
        found_docs: list[npt.NDArray[np.int64]] = []
        found_scores: list[npt.NDArray[np.float64]] = []
        for seg in self.segments:
            if seg.first_doc >= self.cutoff:
                break
            limit = self.cutoff - seg.first_doc
            scores = np.zeros(min(seg.n_docs, limit), dtype=np.float64)
            for term in terms:  # sorted: the same summation order on every path
                docs, tfs = seg.postings(term)
                keep = int(np.searchsorted(docs, limit))
                if keep == 0:
                    continue
                local = docs[:keep].astype(np.int64)
                tf = tfs[:keep].astype(np.float64)
                dl = self.lengths[seg.first_doc + local].astype(np.float64)
                scores[local] += (
                    idf[term] * (tf * (K1 + 1.0)) / (tf + K1 * (1.0 - B + B * dl / avgdl))
                )
            hits = np.flatnonzero(scores > 0.0)
            found_docs.append(hits + seg.first_doc)
            found_scores.append(scores[hits])
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
    ranked: list[tuple[float, str, int, int, int]] = []
    for c in corpora:
        ordinals, scores = c.score(terms, idf, avgdl)
        if not len(ordinals):
            continue
        # Keep the best k of this corpus (ties to the lower seq), then merge across corpora.
        order = np.lexsort((c.seqs[ordinals], -scores))[: k + len(exclude)]
        for i in order:
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


def _with_snippets(store: BaseStore, hits: list[Hit], terms: list[str]) -> list[Hit]:
    out = []
    for h in hits:
        frame = next(iter(store.thread(h.thread_id).read(from_seq=h.seq, to_seq=h.seq)), None)
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
        index = ThreadSearchIndex(store, tid)
        index.refresh()
        view = index.view()
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
        index = ThreadSearchIndex(store, thread_id)
        index.refresh()
        view = index.view()
        corpora = [_corpus_of_view(view, max_seq)] if view is not None else []
    else:
        docs = list(docs_of(thread.read(to_seq=max_seq), store))
        corpora = [_corpus_of_docs(thread_id, docs)] if docs else []
    exclude = frozenset((thread_id, s) for s in exclude_seqs)
    return _with_snippets(store, _rank(corpora, terms, k, exclude), terms)
