"""The fused ranking's guarantees (ADR 0052), over random lists: BM25's hit at rank ``r`` is at
rank ``r + SLACK`` or better, so the fused top ``k`` holds BM25's top ``k - SLACK``; BM25's
confident top hit stays first; every BM25 key is kept once; a longer BM25 list (a bigger
``k``) never changes a shorter page. The seed is printed."""

from __future__ import annotations

import random

from continuity.retrieval.fusion import SLACK, Key, confident_head, fused_order
from continuity.retrieval.ranking import Hit


def _lists(rng: random.Random) -> tuple[list[Key], list[Key]]:
    keys = [("t", i) for i in range(rng.randint(0, 120))]
    lexical = rng.sample(keys, rng.randint(0, len(keys)))
    semantic = rng.sample(keys, rng.randint(0, len(keys)))
    return lexical, semantic


def test_no_bm25_hit_sinks_more_than_the_slack() -> None:
    seed = random.randrange(1 << 32)
    print(f"seed {seed}")
    rng = random.Random(seed)
    for _ in range(300):
        lexical, semantic = _lists(rng)
        depth = rng.choice([5, 20, 50])
        order, _scores = fused_order(lexical, semantic, confident=rng.random() < 0.5, depth=depth)
        assert len(order) == len(set(order))
        assert set(lexical) <= set(order)
        assert set(order) <= set(lexical) | set(semantic[:depth])
        place = {key: i for i, key in enumerate(order)}
        for r, key in enumerate(lexical):
            assert place[key] <= r + SLACK, (lexical, semantic, depth)
        for k in (1, 5, 10, 25):
            assert set(lexical[: max(0, k - SLACK)]) <= set(order[:k])


def test_a_confident_top_hit_stays_first() -> None:
    a, b, x = ("t", 1), ("t", 2), ("t", 9)
    assert fused_order([a, b], [x, b], confident=True)[0][0] == a
    assert fused_order([a, b], [x, b], confident=False)[0][:2] == [b, a]  # RRF: b in both


def test_a_longer_bm25_list_never_changes_a_shorter_page() -> None:
    seed = random.randrange(1 << 32)
    print(f"seed {seed}")
    rng = random.Random(seed)
    for _ in range(200):
        lexical, semantic = _lists(rng)
        depth = rng.choice([5, 20, 50])
        whole, _s = fused_order(lexical, semantic, depth=depth)
        cut = rng.randint(depth, max(depth, len(lexical)))
        part, _s = fused_order(lexical[:cut], semantic, depth=depth)
        assert part[:cut] == whole[:cut]


def test_the_head_is_confident_when_it_stands_clear() -> None:
    def hits(*scores: float) -> list[Hit]:
        return [Hit(thread_id="t", seq=i, kind="message", score=s) for i, s in enumerate(scores)]

    assert not confident_head([])
    assert confident_head(hits(3.0))
    assert confident_head(hits(13.0, 10.0))
    assert not confident_head(hits(12.9, 10.0))
