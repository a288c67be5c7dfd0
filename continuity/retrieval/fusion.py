"""Fusion: BM25's hits and the semantic ranking's, joined so that BM25's are never lost (ADR 0052).

The fused ranking of a query is one list, whatever ``k`` asks for (pages are its slices):

1. **reciprocal rank fusion** of BM25's first :data:`FUSE_DEPTH` hits and the semantic
   ranking's first :data:`FUSE_DEPTH` documents: each scores ``Σ w / (c + rank)`` over the lists
   it is in (``c`` = :data:`RRF_C`, both lists weighing 1: :data:`SEMANTIC_WEIGHT`);
2. **BM25's confident head is kept**: its top hit stays first when it scores at least
   :data:`CONFIDENT_GAP` times the second (or is BM25's only hit);
3. **no BM25 hit sinks more than** :data:`SLACK` **place**: the fused list is merged with BM25's
   so that BM25's hit at rank ``r`` is at rank ``r + SLACK`` or better. The fused top ``k``
   therefore holds BM25's top ``k - SLACK`` whatever the model says: fusion can add what
   words miss, never take away much of what they found;
4. BM25's hits past the fused depth follow in BM25's order.

:func:`fuse` is step 1 alone (kept for callers that fuse other lists); :func:`fused_order` is
the whole rule over keys; :func:`fused_hits` applies it to a search's hits and the nearest
documents by cosine (:func:`.vectors.nearest`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Final

import msgspec

from continuity.retrieval.documents import KIND_NAMES, ROLE_NAMES
from continuity.retrieval.ranking import Hit
from continuity.retrieval.vectors import nearest_covered
from continuity.store.base import BaseStore, Thread

if TYPE_CHECKING:
    from continuity.retrieval.embedders import Embedder  # a protocol: annotations only

__all__ = [
    "CONFIDENT_GAP",
    "FUSE_DEPTH",
    "RRF_C",
    "SEMANTIC_WEIGHT",
    "SLACK",
    "Key",
    "fuse",
    "fused_hits",
    "fused_order",
    "fused_prefix",
    "fused_search",
    "partly_embedded",
    "prefix_fuser",
]

RRF_C: Final = 10
"""RRF's ``c`` (ADR 0042; kept by the cross-validation of ADR 0052)."""

SEMANTIC_WEIGHT: Final = 1.0
"""The semantic list's weight in RRF (BM25's is 1). ADR 0042's 1.5 was fitted on one split and
lost to BM25 on the command/file set; chosen by leaving each evaluation set out (ADR 0052)."""

FUSE_DEPTH: Final = 50
"""How deep each list is fused, whatever ``k``: a fixed depth is what makes the first page the
head of a longer one (a depth that grew with ``k`` re-ranked every page)."""

SLACK: Final = 1
"""A BM25 hit at rank ``r`` is at rank ``r + SLACK`` or better in the fused list."""

CONFIDENT_GAP: Final = 1.3
"""BM25's top hit is kept first when its score is at least this many times the second's."""

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


def fused_order(
    lexical: Sequence[Key],
    semantic: Sequence[Key],
    *,
    confident: bool = False,
    depth: int = FUSE_DEPTH,
) -> tuple[list[Key], dict[Key, float]]:
    """The fused ranking of BM25's keys (best first, as deep as the caller has them) and the
    semantic ranking's (best first): RRF of both lists' first ``depth``, BM25's top key first
    when ``confident``, merged so that BM25's key at rank ``r`` is at rank ``r + SLACK`` or
    better, then BM25's keys past the fused ones. Every key of ``lexical`` is in it, and of
    ``semantic`` those within ``depth``. With the RRF scores (a key past ``depth``: none).

    The first ``n`` keys depend on ``lexical[:n]``, ``lexical[:depth]`` and
    ``semantic[:depth]`` alone, so a longer BM25 list never changes a shorter page."""
    lists = [list(dict.fromkeys(lexical[:depth])), list(dict.fromkeys(semantic[:depth]))]
    scores, best = _rrf(lists, RRF_C, _WEIGHTS)
    ranked = sorted(scores, key=lambda key: (-scores[key], best[key], key))
    if confident and lexical:
        ranked.remove(lexical[0])
        ranked.insert(0, lexical[0])
    bm25 = list(dict.fromkeys(lexical))
    out: list[Key] = []
    placed: set[Key] = set()
    li = fi = 0
    while True:
        while li < len(bm25) and bm25[li] in placed:
            li += 1
        while fi < len(ranked) and ranked[fi] in placed:
            fi += 1
        if li < len(bm25) and (li + 1 + SLACK <= len(out) + 1 or fi >= len(ranked)):
            key = bm25[li]  # its deadline: BM25's rank + SLACK
        elif fi < len(ranked):
            key = ranked[fi]
        else:
            break
        out.append(key)
        placed.add(key)
    return out, scores


def confident_head(hits: Sequence[Hit]) -> bool:
    """Whether BM25's top hit stands clear of the rest: its only hit, or one scoring at least
    :data:`CONFIDENT_GAP` times the second."""
    if not hits:
        return False
    return len(hits) == 1 or hits[0].score >= CONFIDENT_GAP * hits[1].score


def fused_search(
    store: BaseStore,
    query: str,
    embedder: Embedder,
    bm25_hits: Sequence[Hit],
    k: int,
    *,
    thread: str | None = None,
    project: str | None = None,
    depth: int = FUSE_DEPTH,
) -> list[tuple[str, int, float]]:
    """BM25's hits (best first, as :func:`~.search.search` ranked them, for the
    same ``thread``/``project``) fused with the semantic ranking by :func:`fused_order`: the
    best ``k`` as (thread id, seq, RRF score rounded to 6 decimals; 0 past the fused depth)."""
    return [
        (t, s, score)
        for (t, s, score, _kind, _role) in _fused(
            store, query, embedder, bm25_hits, k, thread, project, depth
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
    depth: int,
    progress: Callable[[int, int], None] | None = None,
    jobs: int = 1,
    budget: int | None = None,
    first: str | None = None,
    told: Callable[[str], None] | None = None,
) -> list[tuple[str, int, float, int, int]]:
    near, missing = nearest_covered(
        store,
        query,
        embedder,
        thread,
        project,
        depth,
        progress,
        jobs=jobs,
        budget=budget,
        first=first,
    )
    if missing:  # a ranking of part of the scope is no ranking of the scope: BM25's alone
        if told is not None:
            told(partly_embedded(missing))
        return [(h.thread_id, h.seq, h.score, 0, 0) for h in bm25_hits[:k]]
    return _ordered(bm25_hits, [(t, s, kind, role) for t, s, _c, kind, role in near], k, depth)


def partly_embedded(missing: int) -> str:
    """What a search says when the model's vectors leave threads of its scope out."""
    return (
        f"ranked by words alone: {missing:,} thread(s) in scope are not embedded yet by the "
        "model in use (each search catches up a few; `continuity index` embeds them all now)"
    )


def _ordered(
    bm25_hits: Sequence[Hit], near: Sequence[tuple[str, int, int, int]], k: int, depth: int
) -> list[tuple[str, int, float, int, int]]:
    """The first ``k`` of :func:`fused_order` as (thread id, seq, score, kind, role)."""
    lexical = [(h.thread_id, h.seq) for h in bm25_hits]
    semantic = [(t, s) for t, s, _k, _r in near]
    order, scores = fused_order(lexical, semantic, confident=confident_head(bm25_hits), depth=depth)
    kinds = {(t, s): (kind, role) for t, s, kind, role in near}
    return [
        (t, s, round(scores.get((t, s), 0.0), 6), *kinds.get((t, s), (0, 0))) for t, s in order[:k]
    ]


def _as_hits(
    bm25_hits: Sequence[Hit], fused: Sequence[tuple[str, int, float, int, int]]
) -> tuple[list[Hit], list[Hit]]:
    lexical = {(h.thread_id, h.seq): h for h in bm25_hits}
    out: list[Hit] = []
    new: list[Hit] = []
    for t, s, score, kind, role in fused:
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


def fused_hits(
    store: BaseStore,
    query: str,
    embedder: Embedder,
    bm25_hits: Sequence[Hit],
    k: int,
    *,
    thread: str | None = None,
    project: str | None = None,
    depth: int = FUSE_DEPTH,
    progress: Callable[[int, int], None] | None = None,
    jobs: int = 1,
    budget: int | None = None,
    first: str | None = None,
    told: Callable[[str], None] | None = None,
) -> tuple[list[Hit], list[Hit]]:
    """:func:`fused_search` as hits, in fused order with the fused score, and the hits among
    them that BM25 did not find (no snippet yet: the caller makes one, as for any hit). BM25's
    hits keep their snippet and matched terms. ``progress`` hears (documents embedded,
    documents to embed) while the vector cache is made or caught up, by ``jobs`` processes;
    ``budget`` caps the documents embedded now, thread ``first`` (the live session) first
    (:func:`~.vectors.nearest_covered`). While threads in scope are not all embedded, the hits
    are BM25's alone, and ``told`` hears so (:func:`partly_embedded`)."""
    fused = _fused(
        store,
        query,
        embedder,
        bm25_hits,
        k,
        thread,
        project,
        depth,
        progress,
        jobs,
        budget,
        first,
        told,
    )
    return _as_hits(bm25_hits, fused)


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
) -> list[Hit]:
    """A thread prefix's BM25 hits (:func:`~.ranking.rank_prefix`'s, best first) fused with the
    embedder's ranking of the same documents (seq ≤ ``max_seq``, none of ``exclude_seqs``) by
    :func:`fused_order`, both lists as deep as BM25's and at least ``k``: the best ``k`` hits,
    in fused order with the fused score; BM25's keep their snippet, the others have none yet. A
    function of the log prefix and the model (the cache holds the whole thread; later documents
    are left out). ``budget``: :func:`~.vectors.nearest`'s."""
    left_out = set(exclude_seqs)
    depth = max(k, len(bm25_hits))
    found, missing = nearest_covered(
        thread.store, query, embedder, thread.id, None, 1 << 30, budget=budget, first=thread.id
    )
    if missing:  # the thread is not all embedded yet: BM25's ranking alone
        return list(bm25_hits[:k])
    near = [
        (t, s, kind, role) for t, s, _c, kind, role in found if s <= max_seq and s not in left_out
    ][:depth]
    return _as_hits(bm25_hits, _ordered(bm25_hits, near, k, depth))[0]


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
