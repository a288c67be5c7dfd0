"""Pages are a partition of one ranking (issue 44): for every mode (lexical, fused) and scope
(the store, a project, a thread), the first ``k`` hits of a search are the head of a longer
one, so paging by asking for more (as the MCP server's cursor does) shows each hit once and
skips none. A property over random queries on a random store; the seed is printed."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from continuity import frames as fr
from continuity.retrieval.embedders import StaticEmbedder
from continuity.retrieval.ranking import Hit
from continuity.retrieval.search import search
from continuity.store.jsonl import Store
from tests.support.model import FILLER, TOPICS, build_tiny_model

WORDS = [w for words in TOPICS.values() for w in words]
PROJECTS = ("/p/alpha", "/p/beta")


def _store(path: Path, rng: random.Random) -> Store:
    store = Store(path, create=True, durable=False)
    for n in range(6):
        body: list[fr.Frame] = [fr.ThreadCreated(meta={"project": PROJECTS[n % 2]})]
        for i in range(30):
            words = rng.choices(WORDS, k=rng.randint(2, 6)) + rng.choices(FILLER, k=3)
            rng.shuffle(words)
            body.append(fr.message("user" if i % 2 == 0 else "assistant", " ".join(words)))
        store.thread(f"t{n}").append(body)
    return store


def _keys(hits: list[Hit]) -> list[tuple[str, int]]:
    return [(h.thread_id, h.seq) for h in hits]


@pytest.mark.parametrize("mode", ["lexical", "fused"])
@pytest.mark.parametrize("scope", ["all", "project", "thread"])
def test_pages_are_a_partition_of_one_ranking(tmp_path: Path, mode: str, scope: str) -> None:
    seed = random.randrange(1 << 32)
    print(f"seed {seed}")
    rng = random.Random(seed)
    store = _store(tmp_path / "store", rng)
    embedder = StaticEmbedder(build_tiny_model(tmp_path / "tiny")) if mode == "fused" else None
    project = PROJECTS[0] if scope == "project" else None
    thread = "t1" if scope == "thread" else None
    for _ in range(6):
        query = " ".join(rng.sample(WORDS, rng.randint(1, 3)))

        def run(k: int, query: str = query) -> list[tuple[str, int]]:
            return _keys(
                search(store, query, k=k, embedder=embedder, thread=thread, project=project)
            )

        whole = run(50)
        assert run(8) == whole[:8], f"--k 8 is not the head of --k 50 for {query!r}"
        pages: list[tuple[str, int]] = []
        for offset in range(0, 40, 8):  # the MCP server's paging: ask for offset + limit + 1
            pages += run(offset + 8 + 1)[offset : offset + 8]
        assert len(pages) == len(set(pages)), f"a hit shown twice for {query!r}"
        assert pages == whole[: len(pages)], f"pages skip or reorder hits for {query!r}"
