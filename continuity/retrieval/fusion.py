"""Fusion: BM25's hits and the semantic ranking's, joined by reciprocal rank fusion (ADR 0033).

:func:`fuse` scores each document ``Σ w / (c + rank)`` over the lists it is in (rank from 1;
``w`` the list's weight, 1 unless given), ties to the better best rank, then the lower key;
:func:`fused_hits` fuses a search's BM25 hits with the nearest documents by cosine
(:func:`.vectors.nearest`), as hits: BM25's list weighs 1 and the semantic list
:data:`SEMANTIC_WEIGHT`, with ``c`` = :data:`RRF_C` (ADR 0042: chosen on the labelled set's dev
split; ADR 0033 had c = 60 and equal weights).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Final

import msgspec

from continuity.retrieval.documents import KIND_NAMES, ROLE_NAMES
from continuity.retrieval.ranking import Hit
from continuity.retrieval.vectors import nearest
from continuity.store.base import BaseStore, Thread

if TYPE_CHECKING:
    from continuity.retrieval.embedders import Embedder  # a protocol: annotations only

__all__ = [
    "RRF_C",
    "SEMANTIC_WEIGHT",
    "Key",
    "fuse",
    "fused_hits",
    "fused_prefix",
    "fused_search",
    "prefix_fuser",
]

RRF_C: Final = 10
"""RRF's ``c``: 10 (ADR 0042). With the semantic list weighted 1.5 it measured 0.651 recall@5 on
the dev split at every BM25 depth tried (10, 20, 50), where c = 60 with equal weights gave
0.605."""

SEMANTIC_WEIGHT: Final = 1.5
"""The semantic list's weight in the fused score (BM25's is 1): a contextual encoder's ranking
is the better of the two on paraphrases, BM25's on exact words (ADR 0042)."""

_WEIGHTS: Final = (1.0, SEMANTIC_WEIGHT)  # (BM25's list, the semantic list)

Key = tuple[str, int]
"""A document: (thread id, seq)."""


def _rrf(
    lists: Iterable[Sequence[Key]], c: int, weights: Sequence[float] | None = None
) -> tuple[dict[Key, float], dict[Key, int]]:
    scores: dict[Key, float] = {}
    best: dict[Key, int] = {}
    for i, ranked in enumerate(lists):
        weight = 1.0 if weights is None else weights[i]
        for rank, key in enumerate(dict.fromkeys(ranked), 1):  # a key counts once a list
            scores[key] = scores.get(key, 0.0) + weight / (c + rank)
            best[key] = min(best.get(key, rank), rank)
    return scores, best


def fuse(
    lists: Iterable[Sequence[Key]],
    k: int,
    c: int = RRF_C,
    weights: Sequence[float] | None = None,
) -> list[Key]:
    """Reciprocal rank fusion of ranked lists of keys: each key scores ``Σ w / (c + rank)``
    over the lists it is in (rank from 1; a key repeated in a list counts at its first place;
    ``w`` the list's entry in ``weights``, 1 when none are given); the best ``k`` keys, ties to
    the better best rank in any list, then the lower key. The lists are summed in the order
    given, so the same lists give the same floats."""
    lists = list(lists)
    if weights is not None and len(weights) != len(lists):
        raise ValueError(f"{len(weights)} weights for {len(lists)} lists")
    scores, best = _rrf(lists, c, weights)
    return sorted(scores, key=lambda key: (-scores[key], best[key], key))[:k]


def fused_search(
    store: BaseStore,
    query: str,
    embedder: Embedder,
    bm25_hits: Sequence[Hit],
    k: int,
    *,
    thread: str | None = None,
    project: str | None = None,
    depth: int | None = None,
    c: int = RRF_C,
) -> list[tuple[str, int, float]]:
    """BM25's hits (best first, as :func:`~.search.search` ranked them, for the
    same ``thread``/``project``) fused with the ``depth`` (default: as many as BM25's, at least
    ``k``) semantic hits by reciprocal rank fusion: the best ``k`` as (thread id, seq, fused
    score rounded to 6 decimals)."""
    return [
        (t, s, score)
        for (t, s, score, _kind, _role) in _fused(
            store, query, embedder, bm25_hits, k, thread, project, depth, c
        )
    ]


def _fused(
    store: BaseStore,
    query: str,
    embedder: Embedder,
    bm25_hits: Sequence[Hit],
    k: int,
    thread: str | None,
    project: str | None,
    depth: int | None,
    c: int,
    progress: Callable[[int, int], None] | None = None,
    jobs: int = 1,
    budget: int | None = None,
) -> list[tuple[str, int, float, int, int]]:
    n = depth if depth is not None else max(k, len(bm25_hits))
    near = nearest(store, query, embedder, thread, project, n, progress, jobs=jobs, budget=budget)
    lexical = [(h.thread_id, h.seq) for h in bm25_hits]
    semantic = [(t, s) for t, s, _c, _k, _r in near]
    scores, _best = _rrf([lexical, semantic], c, _WEIGHTS)
    kinds = {(t, s): (kind, role) for t, s, _c, kind, role in near}
    return [
        (t, s, round(scores[(t, s)], 6), *kinds.get((t, s), (0, 0)))
        for t, s in fuse([lexical, semantic], k, c, _WEIGHTS)
    ]


def fused_hits(
    store: BaseStore,
    query: str,
    embedder: Embedder,
    bm25_hits: Sequence[Hit],
    k: int,
    *,
    thread: str | None = None,
    project: str | None = None,
    depth: int | None = None,
    c: int = RRF_C,
    progress: Callable[[int, int], None] | None = None,
    jobs: int = 1,
    budget: int | None = None,
) -> tuple[list[Hit], list[Hit]]:
    """:func:`fused_search` as hits, in fused order with the fused score, and the hits among
    them that BM25 did not find (no snippet yet: the caller makes one, as for any hit). BM25's
    hits keep their snippet and matched terms. ``progress`` hears (documents embedded,
    documents to embed) while the vector cache is made or caught up, by ``jobs`` processes;
    ``budget`` caps the documents embedded now (:func:`~.vectors.nearest`)."""
    lexical = {(h.thread_id, h.seq): h for h in bm25_hits}
    out: list[Hit] = []
    new: list[Hit] = []
    for t, s, score, kind, role in _fused(
        store, query, embedder, bm25_hits, k, thread, project, depth, c, progress, jobs, budget
    ):
        found = lexical.get((t, s))
        if found is not None:
            out.append(msgspec.structs.replace(found, score=score))
            continue
        hit = Hit(
            thread_id=t,
            seq=s,
            kind=KIND_NAMES.get(kind, "?"),
            role=ROLE_NAMES.get(role, ""),
            score=score,
        )
        out.append(hit)
        new.append(hit)
    return out, new


def fused_prefix(
    thread: Thread,
    query: str,
    embedder: Embedder,
    bm25_hits: Sequence[Hit],
    *,
    max_seq: int,
    k: int,
    exclude_seqs: Iterable[int] = (),
    budget: int | None = None,
    c: int = RRF_C,
) -> list[Hit]:
    """A thread prefix's BM25 hits (:func:`~.ranking.rank_prefix`'s, best first) fused with the
    embedder's ranking of the same documents (seq ≤ ``max_seq``, none of ``exclude_seqs``),
    as deep as BM25's list and at least ``k``: the best ``k`` hits, in fused order with the
    fused score; BM25's keep their snippet, the others have none yet. A function of the log
    prefix and the model (the cache holds the whole thread; later documents are left out).
    ``budget``: :func:`~.vectors.nearest`'s."""
    left_out = set(exclude_seqs)
    depth = max(k, len(bm25_hits))
    near = [
        (t, s, kind, role)
        for t, s, _c, kind, role in nearest(
            thread.store, query, embedder, thread.id, None, 1 << 30, budget=budget
        )
        if s <= max_seq and s not in left_out
    ][:depth]
    lexical = {(h.thread_id, h.seq): h for h in bm25_hits}
    kinds = {(t, s): (kind, role) for t, s, kind, role in near}
    lists = [list(lexical), [(t, s) for t, s, _k, _r in near]]
    scores, _best = _rrf(lists, c, _WEIGHTS)
    out: list[Hit] = []
    for key in fuse(lists, k, c, _WEIGHTS):
        score = round(scores[key], 6)
        found = lexical.get(key)
        if found is not None:
            out.append(msgspec.structs.replace(found, score=score))
            continue
        kind, role = kinds[key]
        out.append(
            Hit(
                thread_id=key[0],
                seq=key[1],
                kind=KIND_NAMES.get(kind, "?"),
                role=ROLE_NAMES.get(role, ""),
                score=score,
            )
        )
    return out


def prefix_fuser(
    embedder: Embedder, budget: int | None = None
) -> Callable[[Thread, str, list[Hit], int, int, set[int]], list[Hit]]:
    """:func:`fused_prefix` with ``embedder``, as compile's recall takes it
    (:data:`continuity.context.compiler.RecallFuser`)."""

    def fuser(
        thread: Thread, query: str, hits: list[Hit], max_seq: int, k: int, exclude: set[int]
    ) -> list[Hit]:
        return fused_prefix(
            thread, query, embedder, hits, max_seq=max_seq, k=k, exclude_seqs=exclude, budget=budget
        )

    return fuser
