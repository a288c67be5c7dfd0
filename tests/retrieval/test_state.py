"""What a process holds of a thread's search documents (continuity.retrieval.state) and the
rule that picks the terms a ranking scores with (ranking.ranked_terms, ADR 0022).

The state is a cache inside a cache: whatever it held, caught up or read again, a ranking must
give the hits (seqs and scores) of a fresh read of the log prefix — on a store with caches and on
one without, after catch-ups, merges, rebuilds, damaged files and a replaced log."""

from __future__ import annotations

import os
import random
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from continuity import frames as fr
from continuity.retrieval import segments, state as ss
from continuity.retrieval.index import ThreadSearchIndex
from continuity.retrieval.ranking import MAX_RANKED_TERMS, query_terms, rank_prefix, ranked_terms
from continuity.retrieval.search import search, search_prefix
from continuity.retrieval.segments import Segment
from continuity.store.base import BaseStore, Thread
from continuity.store.jsonl import Store
from continuity.store.memory import MemoryStore, MemoryThread
from tests.retrieval.test_index import VOCAB, _frames

QUERIES = ["retry backoff", "deploy timeout w3", "src/cache.py", "w17 alembic", VOCAB[5]]


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Blocks of 4, merges of 4, segments of at most 64 documents; nothing held before."""
    monkeypatch.setattr(segments, "BLOCK", 4)
    monkeypatch.setattr(segments, "FANOUT", 4)
    monkeypatch.setattr(segments, "MAX_SEGMENT", 64)
    ss.forget()
    yield
    ss.forget()


def _hits(
    thread: Thread, query: str, max_seq: int, *, use_caches: bool = True
) -> list[tuple[int, float]]:
    hits = rank_prefix(thread, query_terms(query), max_seq=max_seq, k=7, use_caches=use_caches)
    return [(h.seq, h.score) for h in hits]


def _check(thread: Thread, rng: random.Random) -> None:
    head = thread.head()
    assert head is not None
    for query in QUERIES:
        for cut in {head.seq, rng.randrange(head.seq + 1), head.seq + 5}:
            truth = _hits(thread, query, cut, use_caches=False)
            assert _hits(thread, query, cut) == truth, (query, cut)


@pytest.mark.slow
@pytest.mark.usefixtures("small")
@pytest.mark.parametrize("kind", ["jsonl", "memory"])
def test_a_state_caught_up_step_by_step_ranks_as_a_fresh_read(
    tmp_store: Store, memory_store: MemoryStore, kind: str
) -> None:
    seed = random.randrange(2**32)
    print(f"seed {seed}")
    rng = random.Random(seed)
    store: BaseStore = tmp_store if kind == "jsonl" else memory_store
    thread = store.thread("t")
    total = 0
    while total < 400:  # past the cap of 64 several times: seals and merges on the way
        n = rng.choice([1, 2, 5, 17, 40])
        thread.append(list(_frames(rng, n)))
        total += n
        if kind == "jsonl" and rng.random() < 0.3:
            ThreadSearchIndex(thread).refresh()  # another process caught the index up
        _check(thread, rng)
        if rng.random() < 0.2:
            ss.forget(thread)  # a process that holds nothing yet
            _check(thread, rng)


@pytest.mark.usefixtures("small")
def test_a_held_state_reads_only_what_a_newer_index_adds(
    tmp_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    thread = tmp_store.thread("t")
    thread.append([fr.message("user", f"w{i} common words") for i in range(30)])
    assert _hits(thread, "w3", 10**9)
    opened: list[str] = []

    def open_segment(path: Path, ref: segments.SegmentRef, *, whole: bool = False) -> Segment:
        opened.append(path.name)
        return segments.open_segment(path, ref, whole=whole)

    monkeypatch.setattr(ss, "open_segment", open_segment)
    assert _hits(thread, "w5", 10**9)
    assert opened == []  # nothing new: nothing read
    thread.append([fr.message("user", f"w{i} common words") for i in range(30, 36)])
    assert _hits(thread, "w33", 10**9) == _hits(thread, "w33", 10**9, use_caches=False)
    m = ThreadSearchIndex(thread).manifest()
    assert m is not None
    new = [r.name for r in m.segments if r.first_doc + r.n_docs > 30]
    assert opened and set(opened) <= set(new)  # only segments it did not hold


def test_recall_leaves_an_index_that_reaches_its_prefix_alone(
    tmp_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ranking up to a seq the held state reaches needs no catch-up, however far the log
    went on; one past it catches the index up first."""
    ss.forget()
    thread = tmp_store.thread("t")
    thread.append([fr.message("user", f"w{i} alembic") for i in range(40)])
    truth = _hits(thread, "alembic w7", 20)
    thread.append([fr.message("user", f"w{i} alembic") for i in range(40, 400)])
    refreshed: list[int] = []
    real = ThreadSearchIndex.refresh

    def refresh(self: ThreadSearchIndex) -> int:
        refreshed.append(1)
        return real(self)

    monkeypatch.setattr(ThreadSearchIndex, "refresh", refresh)
    assert _hits(thread, "alembic w7", 20) == truth
    assert refreshed == []
    assert _hits(thread, "alembic w300", 350) == _hits(
        thread, "alembic w300", 350, use_caches=False
    )
    assert refreshed == [1]


def test_a_file_changed_behind_a_held_state_is_read_again(tmp_store: Store) -> None:
    """A length changed in docs.bin behind an unchanged manifest would move every score: the
    process that holds the state sees the file changed, reads it again, finds the damage (the
    manifest's length sum) and rebuilds the index."""
    ss.forget()
    thread = tmp_store.thread("t")
    words = ["harbour", "lantern", "quarry", "saffron", "walnut"]
    thread.append(
        [fr.message("user", f"mk{i} {words[i % 5]} {words[i * 3 % 5]}") for i in range(300)]
    )
    truth = _hits(thread, "mk7 saffron", 10**9)
    docs = tmp_store.cache_dir / "search" / "t" / "docs.bin"
    good = docs.read_bytes()
    damaged = bytearray(good)
    struct.pack_into("<I", damaged, 150 * 16 + 8, 999)
    before = docs.stat()
    docs.write_bytes(bytes(damaged))
    os.utime(docs, ns=(before.st_atime_ns, before.st_mtime_ns + 1))  # whatever the clock did
    assert _hits(thread, "mk7 saffron", 10**9) == truth
    assert docs.read_bytes() == good  # rebuilt
    assert ThreadSearchIndex(thread).problems() == []


def test_a_rebuild_in_this_process_drops_the_held_state(
    tmp_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    ss.forget()
    thread = tmp_store.thread("t")
    thread.append([fr.message("user", f"w{i} common") for i in range(300)])
    truth = _hits(thread, "w7", 10**9)
    ThreadSearchIndex(thread).rebuild()
    opened: list[str] = []

    def open_segment(path: Path, ref: segments.SegmentRef, *, whole: bool = False) -> Segment:
        opened.append(path.name)
        return segments.open_segment(path, ref, whole=whole)

    monkeypatch.setattr(ss, "open_segment", open_segment)
    assert _hits(thread, "w7", 10**9) == truth
    assert opened  # read again


def test_a_log_replaced_under_a_held_state_is_not_taken_for_the_one_it_read(
    tmp_store: Store,
) -> None:
    """Another log of the same length under the same id: the line where the held state
    stopped carries another digest, so the state is not used."""
    ss.forget()
    thread = tmp_store.thread("t")
    thread.append([fr.message("user", "first retry"), fr.message("user", "second retry")])
    assert [s for s, _ in _hits(thread, "retry", 2)] == [1, 2]
    (tmp_store.root / "threads" / "t.jsonl").unlink()
    thread.append([fr.message("user", "first alpha"), fr.message("user", "second retry")])
    assert [s for s, _ in _hits(thread, "retry", 2)] == [2]
    assert [s for s, _ in _hits(thread, "alpha", 2)] == [1]


def test_a_store_without_caches_reads_only_the_frames_appended_since(
    memory_store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    thread = memory_store.thread("t")
    thread.append([fr.message("user", f"w{i} common") for i in range(50)])
    assert _hits(thread, "w3", 10**9)
    reads: list[int] = []
    real = type(thread).read_lines

    def counting(
        self: MemoryThread,
        *,
        from_seq: int = 0,
        to_seq: int | None = None,
        start_offset: int | None = None,
    ) -> Iterator[tuple[int, bytes]]:
        lines = real(self, from_seq=from_seq, to_seq=to_seq, start_offset=start_offset)
        for seq, line in lines:
            reads.append(seq)
            yield seq, line

    monkeypatch.setattr(type(thread), "read_lines", counting)
    thread.append([fr.message("user", f"w{i} common") for i in range(50, 53)])
    assert [s for s, _ in _hits(thread, "w51", 10**9)] == [52]
    assert sorted(reads) == [50, 51, 52, 53]  # the last one read before (checked), the new ones
    monkeypatch.undo()
    assert _hits(thread, "w51", 10**9) == _hits(thread, "w51", 10**9, use_caches=False)


@pytest.mark.slow
def test_search_and_recall_agree_with_a_fresh_process_after_many_turns(
    tmp_store: Store,
) -> None:
    ss.forget()
    rng = random.Random(5)
    thread = tmp_store.thread("t")
    for _ in range(30):
        thread.append(list(_frames(rng, 25)))
        held = [search(tmp_store, q, k=5) for q in QUERIES]
        prefix = [search_prefix(tmp_store, "t", q, max_seq=200, k=5) for q in QUERIES]
    ss.forget()
    assert [search(tmp_store, q, k=5) for q in QUERIES] == held
    assert [search_prefix(tmp_store, "t", q, max_seq=200, k=5) for q in QUERIES] == prefix


# --- the terms a ranking scores with -------------------------------------------------------------


def test_absent_terms_are_left_out_and_the_rest_go_rarest_first() -> None:
    dfs = {"b": 3, "a": 3, "rare": 1, "gone": 0, "mid": 5}
    assert ranked_terms(dfs, 100) == ["rare", "a", "b", "mid"]


def test_terms_most_documents_hold_are_left_out_unless_all_are() -> None:
    assert ranked_terms({"x": 51, "y": 50, "z": 2}, 100) == ["z", "y"]
    assert ranked_terms({"x": 51, "y": 90}, 100) == ["x", "y"]  # nothing rarer: kept
    assert ranked_terms({"x": 1}, 1) == ["x"]


def test_at_most_max_ranked_terms_are_kept() -> None:
    dfs = {f"t{i:02d}": i + 1 for i in range(40)}
    kept = ranked_terms(dfs, 1000)
    assert kept == [f"t{i:02d}" for i in range(MAX_RANKED_TERMS)]
    assert ranked_terms(dfs, 1000, 3) == ["t00", "t01", "t02"]


def test_a_long_query_is_ranked_by_its_rare_terms(tmp_store: Store) -> None:
    """A common word in most documents does not decide between the documents of the rare
    ones: the best hit is the one holding the rare words, whatever the common word says."""
    thread = tmp_store.thread("t")
    thread.append([fr.message("user", f"common filler {i}") for i in range(60)])
    thread.append(fr.message("user", "alembic migration orders"))
    thread.append(fr.message("user", "common common common common alembic"))
    hits = search(tmp_store, "alembic migration orders common", k=2)
    assert [h.seq for h in hits] == [61, 62]
