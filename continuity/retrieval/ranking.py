"""Ranking over the search index: BM25, exact and pruned, one thread's prefix or many threads.

Documents are scored by BM25 over their weighted term counts (:mod:`.documents`), summed term
by term rarest first whichever documents a ranking had to look at (it prunes with MaxScore),
ties broken by (thread, seq).
:func:`rank_prefix` ranks one thread's documents up to a seq with statistics over that prefix
alone — what compile's recall needs to stay a pure function of the log prefix — through the
index, or by reading the log when the store keeps no caches; the two give the same hits.
Store-wide search, snippets and fusion are :mod:`.search`, above the context layer.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from math import log
from typing import Final, Protocol

import msgspec
import numpy as np
import numpy.typing as npt

from continuity.caches.thread_index import ThreadIndex
from continuity.errors import InvalidQuery
from continuity.retrieval.documents import KIND_NAMES, ROLE_NAMES, Doc, docs_of
from continuity.retrieval.index import IndexView
from continuity.retrieval.segments import Segment, build_segment
from continuity.retrieval.state import SearchState, search_state
from continuity.retrieval.terms import SURFACE, tokenize
from continuity.store.base import Thread

__all__ = [
    "MAX_QUERY_CHARS",
    "MAX_QUERY_TERMS",
    "MAX_RANKED_TERMS",
    "SURFACE_WEIGHT",
    "Corpus",
    "Hit",
    "Part",
    "corpus_of_docs",
    "corpus_of_state",
    "corpus_of_view",
    "query_terms",
    "rank",
    "rank_prefix",
    "ranked_terms",
]

K1: Final = 1.2
B: Final = 0.75
"""BM25's parameters: term frequency saturation and length normalisation."""
MAX_QUERY_CHARS: Final = 10_000
MAX_QUERY_TERMS: Final = 64
MAX_RANKED_TERMS: Final = 24
"""A ranking scores with at most the 24 rarest query terms (:func:`ranked_terms`, ADR 0022)."""
SURFACE_WEIGHT: Final = 0.2
"""A word's surface form (``=migrations``) counts a fifth of its stem (``migrat``): the stem
finds every form of the word, the exact form breaks ties towards what was typed (ADR 0032)."""


class Hit(msgspec.Struct, frozen=True, kw_only=True):
    """One ranked document: a message, observation or summary of a thread, with its BM25 score
    (rounded to 6 decimals). :func:`~.search.search` fills in when it was written, a
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
    covers: list[int] = []
    """A summary hit: ``[from_seq, to_seq]`` of the messages it stands for (ADR 0034)."""
    parent_thread_id: str = ""
    """The parent its thread's ``thread_created`` names (a subagent's session), else ``""``."""
    also: list[int] = []
    """The other seqs of the same merged assistant response that matched, ascending."""
    message_id: str = ""
    """A message hit: its frame's ``message_id`` (what a caller keys its own records by)."""
    exact: bool = False
    """A word of the query is in the document as the query wrote it (case aside), not only a
    word of the same stem; False for a hit the semantic ranking alone found."""


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


class Part(Protocol):
    """Documents ``first_doc ..`` of a corpus that a ranking reads as one inverted index: a
    sealed segment, an index's tail, or every sealed segment of a thread at once."""

    @property
    def first_doc(self) -> int: ...

    @property
    def n_docs(self) -> int: ...

    def postings(self, term: str) -> _Postings:
        """(doc ids from ``first_doc``, ascending; weighted counts) of ``term``."""
        ...

    def count(self, term: str, end: int) -> int:
        """How many documents before ``end`` (an id from ``first_doc``) hold ``term``."""
        ...


class Corpus:
    """The documents one ranking runs over: parts (segments) plus each doc's seq and length.
    ``cum`` (the running sum of lengths, ``cum[i]`` that of the first ``i``) and ``ordered``
    (the seqs were checked to be in order) are given when the caller knows them already."""

    def __init__(
        self,
        thread_id: str,
        segments: Sequence[Part],
        seqs: npt.NDArray[np.uint64],
        lengths: npt.NDArray[np.uint32],
        kinds: npt.NDArray[np.uint8],
        roles: npt.NDArray[np.uint8],
        cutoff: int,
        cum: npt.NDArray[np.uint64] | None = None,
        ordered: bool | None = None,
        threads: tuple[Sequence[str], npt.NDArray[np.uint32], npt.NDArray[np.int64]] | None = None,
        n_docs: int | None = None,
        total_length: int | None = None,
    ) -> None:
        self.thread_id = thread_id
        # Documents of many threads (the store-wide index, ADR 0029): (thread ids, each
        # document's thread ordinal, each ordinal's place in thread id order), and how many
        # documents of the ``cutoff`` first take part (and their length sum) when a filter
        # hides some of them from the parts.
        self.threads = threads
        self.n_docs = cutoff if n_docs is None else n_docs
        self._total = total_length
        self.segments = [s for s in segments if s.first_doc < cutoff]
        self.seqs = seqs
        self.lengths = lengths
        self.kinds = kinds
        self.roles = roles
        self.cutoff = cutoff  # documents with ordinal < cutoff take part
        self.cum = cum
        self._postings: dict[str, list[_Postings]] = {}
        self._ordered = ordered

    def prefetch(self, terms: Sequence[str]) -> None:
        """Let parts that fetch their postings (from a server) fetch those of ``terms`` in one
        go, before the ranking asks for them one by one."""
        for seg in self.segments:
            fetch = getattr(seg, "prefetch", None)
            if fetch is not None:
                fetch(terms)

    def postings(self, term: str) -> list[_Postings]:
        """``term``'s postings in each segment, cut at the cutoff (looked up once per term)."""
        found = self._postings.get(term)
        if found is None:
            found = []
            for seg in self.segments:
                docs, tfs = seg.postings(term)
                end = self.cutoff - seg.first_doc
                if len(docs) and int(docs[-1]) >= end:
                    keep = int(docs.searchsorted(end))
                    docs, tfs = docs[:keep], tfs[:keep]
                found.append((docs, tfs))
            self._postings[term] = found
        return found

    def indexed(self, o: int, terms: list[str]) -> tuple[int, int, int, dict[str, int]]:
        """What the index holds for its document ``o`` (an ordinal :func:`rank` reports):
        (kind, role, length, count of each of ``terms``). Search compares this with the
        document made again from the hit's frame, which the chain vouches for. The seq column
        must be in order (checked once per corpus, ~1 ms at a million documents, unless the
        caller checked it already): a seq changed by damage would otherwise give a document
        another frame's place."""
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
        found = self._postings.get(term)
        if found is not None:
            return sum(len(docs) for docs, _ in found)
        return sum(seg.count(term, self.cutoff - seg.first_doc) for seg in self.segments)

    def total_length(self) -> int:
        if self._total is not None:
            return self._total
        if self.cum is not None:
            return int(self.cum[self.cutoff])
        return int(self.lengths[: self.cutoff].sum(dtype=np.uint64))

    def _norm(
        self, first: int, docs: npt.NDArray[np.uint32], avgdl: float
    ) -> npt.NDArray[np.float64]:
        """The length norm ``K1 × (1 − B + B × length / avgdl)`` of the given documents (ids
        from ``first``), element by element as every path computes it."""
        lengths = self.lengths[docs + np.uint32(first) if first else docs].astype(np.float64)
        norm: npt.NDArray[np.float64] = K1 * (1.0 - B + B * lengths / avgdl)
        return norm

    def score(
        self, order: list[str], idf: dict[str, float], avgdl: float, top: _TopK
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """(doc ordinals, scores) of every document that can be among ``top``'s best.

        A document's score is its terms' BM25 contributions summed in ``order`` (rarest first),
        whichever path computes it, so scores are the same bytes however a ranking was pruned.
        Pruning (MaxScore): a term adds less than ``idf × (K1 + 1)``; once the terms still to
        come cannot lift a document above the floor of the best scores so far, documents none
        of the terms before matched are dropped, and the rest are only looked up in the later
        terms' postings instead of walking them whole. The floor starts from the final scores
        of the rarest terms' documents (:meth:`_seeds`). The work is in the postings walked and
        the documents looked up, never in the documents of a segment: length norms are made
        for the documents a term reaches, and only those are read back.
        """
        bounds = [idf[t] * (K1 + 1.0) for t in order]
        # rest[i]: the most terms i.. can add, with room for rounding in the sums.
        rest = [sum(bounds[i:]) * (1.0 + 1e-9) + 1e-12 for i in range(len(order))] + [0.0]
        found_docs: list[npt.NDArray[np.int64]] = []
        found_scores: list[npt.NDArray[np.float64]] = []
        for s, seg in enumerate(self.segments):
            first = seg.first_doc
            n = min(seg.n_docs, self.cutoff - first)
            floor = top.floor
            i = 0
            seeded = self._seeds(s, n, order, idf, avgdl, rest, top)
            seen: npt.NDArray[np.bool_] | None = None
            if seeded is not None:
                # Every document of the first ``i`` terms is scored; the walk goes on from
                # there with the others, which those terms add nothing to.
                seeds, full, i = seeded
                floor = max(floor, float(np.partition(full, len(full) - top.k)[-top.k]))
                seen = np.zeros(n, dtype=np.bool_)
                seen[seeds] = True
            scores = np.zeros(n, dtype=np.float64)  # zeroed lazily by the system: only the
            touched: list[npt.NDArray[np.uint32]] = []  # pages a posting reaches are touched
            reached = 0
            best_partial = 0.0
            while i < len(order) and not rest[i] < floor:
                docs, tfs = self.postings(order[i])[s]
                if seen is not None and len(docs):
                    new = ~seen[docs]
                    docs, tfs = docs[new], tfs[new]
                if len(docs):
                    scores[docs] += _bm25(idf[order[i]], tfs, self._norm(first, docs, avgdl))
                    touched.append(docs)
                    reached += len(docs)
                    best_partial = max(best_partial, float(scores[docs].max()))
                i += 1
                if i < len(order) and rest[i] < best_partial:
                    # Partial scores only grow: the k-th best of them is a floor too.
                    partial = scores[_reached(touched, reached, scores)]
                    positive = partial[partial > 0.0]
                    if len(positive) >= top.k:
                        kth = np.partition(positive, len(positive) - top.k)[len(positive) - top.k]
                        floor = max(floor, float(kth))
            hits = _reached(touched, reached, scores)
            cand = scores[hits]
            nonzero = cand != 0.0
            hits, cand = hits[nonzero], cand[nonzero]
            if i < len(order):
                keep = cand + rest[i] >= floor
                hits, cand = hits[keep], cand[keep]
                self._look_up(s, hits, cand, order[i:], idf, avgdl)
            if seeded is not None:
                hits, cand = np.concatenate((seeded[0], hits)), np.concatenate((seeded[1], cand))
            top.add(cand)
            found_docs.append(hits.astype(np.int64) + first)
            found_scores.append(cand)
        if not found_docs:
            return np.zeros(0, np.int64), np.zeros(0, np.float64)
        return np.concatenate(found_docs), np.concatenate(found_scores)

    def _look_up(
        self,
        s: int,
        hits: npt.NDArray[np.uint32],
        cand: npt.NDArray[np.float64],
        terms: list[str],
        idf: dict[str, float],
        avgdl: float,
    ) -> None:
        """Add to ``cand`` (the scores of documents ``hits`` of segment ``s``) what ``terms``
        add, in their order, each found by a binary search in the term's postings."""
        if not len(hits):
            return
        norm = self._norm(self.segments[s].first_doc, hits, avgdl)
        for term in terms:
            docs, tfs = self.postings(term)[s]
            if not len(docs):
                continue
            at = np.minimum(docs.searchsorted(hits), len(docs) - 1)
            match = docs[at] == hits
            if match.any():
                cand[match] += _bm25(idf[term], tfs[at[match]], norm[match])

    def _seeds(
        self,
        s: int,
        n: int,
        order: list[str],
        idf: dict[str, float],
        avgdl: float,
        rest: list[float],
        top: _TopK,
    ) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.float64], int] | None:
        """(documents, their final scores, j): every document of segment ``s`` that holds one
        of the ``j`` rarest terms, scored in full by looking each term up — taken while they
        are at most ``_SEED_DOCS`` and until they are ``4 × k``. Their k-th best score is a
        floor known before any common term is walked: MaxScore alone starts from the k-th best
        *partial* score, which the common terms (most of a long query) keep low until they are
        walked. None when the segment is small, there are fewer than k such documents, or the
        rarest terms settle the ranking anyway."""
        if n < _SEED_MIN_SEGMENT:
            return None
        pieces: list[npt.NDArray[np.uint32]] = []
        count = j = 0
        while j < len(order) and count < 4 * top.k:
            docs = self.postings(order[j])[s][0]
            if count + len(docs) > _SEED_DOCS:
                break
            pieces.append(docs)
            count += len(docs)
            j += 1
        if count < top.k or j >= len(order) or rest[j] < top.floor:
            return None
        seeds = pieces[0] if len(pieces) == 1 else np.unique(np.concatenate(pieces))
        if len(seeds) < top.k:
            return None
        full = np.zeros(len(seeds), dtype=np.float64)
        self._look_up(s, seeds, full, order, idf, avgdl)
        return seeds, full, j


_SEED_DOCS: Final = 2048
_SEED_MIN_SEGMENT: Final = 1024


def _reached(
    touched: list[npt.NDArray[np.uint32]], reached: int, scores: npt.NDArray[np.float64]
) -> npt.NDArray[np.uint32]:
    """The documents the postings in ``touched`` reach, ascending: sorted from the postings
    when they are few, found by one pass over the scores when they cover much of them."""
    if not touched:
        return np.zeros(0, np.uint32)
    if len(touched) == 1:
        return touched[0]
    if reached * 8 > len(scores):
        return np.flatnonzero(scores).astype(np.uint32)
    return np.unique(np.concatenate(touched))


def corpus_of_view(view: IndexView, max_seq: int | None) -> Corpus:
    seqs = view.seqs()
    cutoff = len(seqs) if max_seq is None else int(np.searchsorted(seqs, max_seq, side="right"))
    docs = view.docs
    kinds = docs["kind"] if docs is not None else np.zeros(0, np.uint8)
    roles = docs["role"] if docs is not None else np.zeros(0, np.uint8)
    return Corpus(view.thread_id, view.segments, seqs, view.lengths(), kinds, roles, cutoff)


def corpus_of_state(state: SearchState, max_seq: int | None) -> Corpus:
    """The documents of ``state`` with seq ≤ ``max_seq`` (all of them: None) as a corpus; its
    seqs were checked to be in order when the state was read."""
    seqs = state.seqs
    cutoff = len(seqs) if max_seq is None else int(np.searchsorted(seqs, max_seq, side="right"))
    return Corpus(
        state.thread_id,
        state.parts(cutoff),
        seqs,
        state.lengths,
        state.kinds,
        state.roles,
        cutoff,
        cum=state.cum,
        ordered=True,
    )


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


def ranked_terms(dfs: dict[str, int], n_docs: int, max_terms: int = MAX_RANKED_TERMS) -> list[str]:
    """The terms a ranking over ``n_docs`` documents scores with, in the order it sums them
    (rarest first: ascending document frequency, then the term), given each query term's
    document frequency (ADR 0022):

    - a term no document holds is left out (it adds to no score);
    - so is a term more than half of the documents hold, unless every term is one: its idf is
      below ln 2, and walking or looking up its postings is most of what a long query costs;
    - of the rest, the ``max_terms`` rarest are kept — and as many of the words' surface forms
      (``=word``, ADR 0032), which are rarer than their stems and would crowd them out.
    """
    present = [t for t, df in dfs.items() if df]
    rare = [t for t in present if 2 * dfs[t] <= n_docs] or present
    by_rarity = sorted(rare, key=lambda t: (dfs[t], t))
    surface = [t for t in by_rarity if t.startswith(SURFACE)][:max_terms]
    plain = [t for t in by_rarity if not t.startswith(SURFACE)][:max_terms]
    return sorted(plain + surface, key=lambda t: (dfs[t], t))


def rank(
    corpora: list[Corpus],
    terms: list[str],
    k: int,
    exclude: frozenset[tuple[str, int]],
    found: dict[tuple[str, int], int] | None = None,
    max_terms: int = MAX_RANKED_TERMS,
) -> list[Hit]:
    """The best ``k`` documents of ``corpora`` for ``terms`` (one set of statistics over all of
    them), skipping the ``(thread, seq)`` pairs in ``exclude``; ties go to the lower thread id,
    then seq. ``found``, when given, receives each hit's document ordinal in its corpus.

    Scored with the terms :func:`ranked_terms` keeps: at most ``max_terms``, the rarest, and
    none that most documents hold (unless all are) — such a term adds little to any score, and
    each costs a walk or a lookup of its postings, which grow with the thread."""
    n_docs = sum(c.n_docs for c in corpora)
    if n_docs == 0:
        return []
    avgdl = sum(c.total_length() for c in corpora) / n_docs
    for c in corpora:
        c.prefetch(terms)
    dfs = {term: sum(c.df(term) for c in corpora) for term in terms}
    order = ranked_terms(dfs, n_docs, max_terms)  # the summation order: rarest first
    if not order:
        return []
    idf = {t: log(1.0 + (n_docs - dfs[t] + 0.5) / (dfs[t] + 0.5)) for t in order}
    for t in order:
        if t.startswith(SURFACE):  # a word's exact form lifts what its stem found (ADR 0032)
            idf[t] *= SURFACE_WEIGHT
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
        # Keep the best of this corpus (ties to the lower thread id, then seq), then merge
        # across corpora.
        if c.threads is None:
            best_first = np.lexsort((c.seqs[ordinals], -scores))[:want]
        else:
            _names, thread_of, key = c.threads
            best_first = np.lexsort((c.seqs[ordinals], key[thread_of[ordinals]], -scores))[:want]
        for i in best_first:
            o = int(ordinals[i])
            seq = int(c.seqs[o])
            tid = c.thread_id if c.threads is None else c.threads[0][int(c.threads[1][o])]
            if (tid, seq) in exclude:
                continue
            ranked.append((-float(scores[i]), tid, seq, int(c.kinds[o]), int(c.roles[o])))
            if found is not None:
                found[(tid, seq)] = o
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
    the log prefix alone, through what the process holds of the thread's documents
    (:func:`~continuity.retrieval.state.search_state`: the search index, caught up only
    when it does not reach ``max_seq``, or the log read incrementally in a store without
    caches), or by reading the prefix from the log (``use_caches=False``). ``frames`` is the
    thread's frame index when the caller holds one already. The hits carry no snippet."""
    if max_seq < 0 or k <= 0:
        return []
    if use_caches:
        state = search_state(thread, max_seq, frames)
        corpora = [corpus_of_state(state, max_seq)] if state is not None and state.n else []
    else:
        docs = list(docs_of(thread.read(to_seq=max_seq), thread.store))
        corpora = [corpus_of_docs(thread.id, docs)] if docs else []
    # Only seqs in the prefix can be hits: excluding the others (a compile's window, mostly
    # after the cut) would only make the ranking keep more candidates.
    exclude = frozenset((thread.id, s) for s in exclude_seqs if s <= max_seq)
    return rank(corpora, terms, k, exclude)
