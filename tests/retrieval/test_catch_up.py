"""A model in use is really used (issue 44): a search with an embedding budget (a hook's, the
MCP server's) catches the vector cache up a budget at a time, a session bigger than the budget
included, so it cannot starve; and until every document in scope is embedded, a fused search
ranks by BM25 alone and says so, rather than ranking a half-embedded store as if it were whole
(a few tiny embedded threads took the top ranks)."""

from __future__ import annotations

import random
from pathlib import Path

from continuity import frames as fr
from continuity.retrieval.embedders import StaticEmbedder
from continuity.retrieval.search import Embedding, search
from continuity.store.jsonl import Store
from tests.support.model import FILLER, TOPICS, build_tiny_model

WORDS = [w for words in TOPICS.values() for w in words]


def _store(path: Path) -> Store:
    rng = random.Random(7)
    store = Store(path, create=True, durable=False)

    def said() -> fr.MessageAppended:
        return fr.message("user", " ".join(rng.choices(WORDS, k=4) + rng.choices(FILLER, k=3)))

    store.thread("big").append([fr.ThreadCreated(), *(said() for _ in range(100))])
    for n in range(5):
        store.thread(f"small{n}").append([fr.ThreadCreated(), *(said() for _ in range(3))])
    return store


def test_a_budget_catches_up_a_big_session_and_half_embedded_is_never_ranked_as_whole(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path / "s")
    model = StaticEmbedder(build_tiny_model(tmp_path / "tiny"))
    query = "storage database schema"
    lexical = [(h.thread_id, h.seq) for h in search(store, query, k=10)]
    budget = Embedding(budget=32)
    searches: list[tuple[list[tuple[str, int]], list[str]]] = []
    for _ in range(4):  # 115 documents, 32 a search: the fourth embeds the last of them
        told: list[str] = []
        found = search(store, query, k=10, embedder=model, embedding=budget, on_damage=told.append)
        searches.append(([(h.thread_id, h.seq) for h in found], told))
    for keys, notes in searches[:3]:  # part of the store embedded: BM25's ranking, said
        assert keys == lexical
        assert len(notes) == 1 and "not embedded yet" in notes[0], notes
    whole = Store(tmp_path / "s", durable=False)
    fused = [(h.thread_id, h.seq) for h in search(whole, query, k=10, embedder=model)]
    assert searches[3] == (fused, [])  # caught up: the whole store's fused ranking, no note
    assert fused != lexical
