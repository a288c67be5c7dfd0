"""The search index's build (continuity.retrieval.index): the token cache, catch-up a chunk at a
time, the cap on merged segments, the append-only tail, the vocabulary read in one go, and an
index of an older version being rebuilt. Small ``BLOCK``/``FANOUT``/``MAX_SEGMENT``/``_CHUNK``
(monkeypatched) keep the layouts of many segments fast to reach."""

from __future__ import annotations

import os
import random
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from continuity import frames as fr
from continuity.retrieval import documents, index as si, segments, terms
from continuity.retrieval.documents import Doc
from continuity.retrieval.index import ThreadSearchIndex
from continuity.retrieval.search import search, search_prefix
from continuity.retrieval.segments import Segment, build_segment
from continuity.retrieval.stem import stem
from continuity.retrieval.terms import tokenize
from continuity.store.jsonl import Store
from tests.retrieval.test_search import _die_after

# --- tokens ---------------------------------------------------------------------------------


def _reference_words(word: str) -> list[str]:
    """An ASCII word's stem, then its surface form when that differs (ADR 0032)."""
    if not (word.isascii() and word.isalpha()) or stem(word) == word:
        return [word]
    return [stem(word)] + (["=" + word] if len(word) < terms._MAX_TOKEN else [])


def _reference_tokenize(text: str) -> list[str]:
    """``tokenize`` as it was before the cache (version 2), verbatim, with stems (version 4)."""
    out: list[str] = []
    for chunk in terms._CHUNK_RE.findall(text):
        low = chunk.lower()
        parts = [
            p for piece in terms._SPLIT_RE.split(chunk) for p in terms._CAMEL_RE.findall(piece)
        ]
        if len(parts) != 1 or parts[0].lower() != low:
            if 1 < len(low) <= terms._MAX_TOKEN:
                out.append(low)
            for p in parts:
                if (q := p.lower()) not in terms._STOP and 1 < len(q) <= terms._MAX_TOKEN:
                    out.extend(_reference_words(q))
        elif low not in terms._STOP and 1 < len(low) <= terms._MAX_TOKEN:
            out.extend(_reference_words(low))
    return out


_words = st.text(
    alphabet=st.sampled_from("abcXYZ09_.-/:\\ éÅ“”\n"), min_size=0, max_size=12
) | st.sampled_from(["the", "HTTPServerError", "src/app/retry_backoff.py", "a", "x" * 70])
_texts = st.lists(_words, max_size=30).map(" ".join)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(texts=st.lists(_texts, min_size=1, max_size=5), cap=st.sampled_from([1, 2, 5, 100_000]))
def test_the_token_cache_gives_the_tokens_of_no_cache(texts: list[str], cap: int) -> None:
    """Cold, warm, and with a cache so small that it is cleared in the middle of a text."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(terms, "_TOKEN_CACHE_MAX", cap)
        terms._token_cache.clear()
        for text in texts + texts:
            assert tokenize(text) == _reference_tokenize(text)
            assert len(terms._token_cache) <= cap
    terms._token_cache.clear()


def test_the_token_cache_is_bounded_and_keeps_long_chunks_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(terms, "_TOKEN_CACHE_MAX", 50)
    terms._token_cache.clear()
    long_chunk = "a" * terms._CACHED_CHUNK_MAX + "_tail"
    text = " ".join(f"word{i}" for i in range(500)) + " " + long_chunk
    assert tokenize(text) == _reference_tokenize(text)
    assert 0 < len(terms._token_cache) <= 50
    assert long_chunk not in terms._token_cache
    # what a caller does with the list never reaches the cache
    tokens = tokenize("retry_backoff")
    tokens.append("mutated")
    assert tokenize("retry_backoff") == ["retry_backoff", "retri", "=retry", "backoff"]
    terms._token_cache.clear()


# --- segments -------------------------------------------------------------------------------


def _doc(seq: int, *terms: str) -> Doc:
    tf = dict.fromkeys(sorted(terms), 1)
    return Doc(seq, documents.KIND_MESSAGE, 1, len(tf), tf)


@pytest.mark.parametrize(
    "terms",
    [
        [],
        ["only"],
        ["ab", "café", "naïve", "zz", "日本語", "ß" * 30, "x1"],
        ["a\nb", "plain"],  # never a token, but a segment of it still reads right
    ],
)
def test_the_vocabulary_read_in_one_go_equals_term_by_term(terms: list[str]) -> None:
    seg = Segment(build_segment([_doc(0, *terms)] if terms else []), 0)
    assert seg.terms() == [seg.term(i) for i in range(seg.n_terms)] == sorted(terms)


# --- the index ------------------------------------------------------------------------------

VOCAB = ["retry", "backoff", "alembic", "migration", "deploy", "pytest", "timeout", "cache"]


def _frames(rng: random.Random, n: int) -> Iterator[fr.Frame]:
    """Cheap frames, some without a document, some tool calls and observations."""
    for i in range(n):
        roll = rng.random()
        words = " ".join(rng.choice(VOCAB) for _ in range(rng.randint(1, 4)))
        if roll < 0.1:
            yield fr.message("user", "it is the one")  # no document
        elif roll < 0.2:
            block = fr.ToolUseBlock(
                id=f"toolu_{i}", name="Edit", input={"file_path": f"src/{rng.choice(VOCAB)}.py"}
            )
            yield fr.message("assistant", content=[block])
        elif roll < 0.25:
            yield fr.ObservationRecorded(tool_use_id="t", text=words)
        else:
            yield fr.message(rng.choice(["user", "assistant"]), f"{words} w{i}")


def _files(index: ThreadSearchIndex) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(index.dir.iterdir()) if p.name != ".lock"}


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of 4, merges of 4, segments of at most 64 documents (4 × 4²), as the real
    256 × 16² = 65,536."""
    monkeypatch.setattr(segments, "BLOCK", 4)
    monkeypatch.setattr(segments, "FANOUT", 4)
    monkeypatch.setattr(segments, "MAX_SEGMENT", 64)


def _layout(n_docs: int) -> list[tuple[int, int]]:
    """The segments of ``n_docs`` documents with the small constants: as many of the cap (64)
    as fit, then fewer than 4 of 16, then fewer than 4 of 4."""
    sizes = [64] * (n_docs // 64) + [16] * (n_docs % 64 // 16) + [4] * (n_docs % 16 // 4)
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    return list(zip(starts, sizes, strict=True))


def test_the_real_cap_is_256_times_16_squared() -> None:
    assert segments.MAX_SEGMENT == segments.BLOCK * segments.FANOUT**2 == 65_536


@pytest.mark.slow
@pytest.mark.usefixtures("small")
def test_catch_up_in_any_chunking_equals_a_rebuild(
    tmp_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed = random.randrange(2**32)
    print(f"seed {seed}")
    rng = random.Random(seed)
    t = tmp_store.thread("t")
    index = ThreadSearchIndex(tmp_store.thread("t"))
    total = 0
    while total < 900:  # past the cap of 64 many times
        n = rng.choice([1, 2, 3, 7, 30, 90])
        t.append(list(_frames(rng, n)))
        total += n
        monkeypatch.setattr(si, "_CHUNK", rng.choice([1, 3, 5, 16, 1000]))
        index.refresh()
        m = index.manifest()
        assert m is not None and m.last_seq == total
        assert [(s.first_doc, s.n_docs) for s in m.segments] == _layout(m.docs)  # capped
        assert {p.name for p in index.dir.glob("seg-*.bin")} == {s.name for s in m.segments}
    m = index.manifest()
    assert m is not None and m.docs > 10 * 64
    caught_up = _files(index)
    hits = [search(tmp_store, q, k=30) for q in ("retry backoff", "w17", "src/cache.py")]
    assert all(hits)
    for chunk in (1, 4, 63, 64, 65, 10_000):
        monkeypatch.setattr(si, "_CHUNK", chunk)
        assert index.rebuild() == m.docs
        assert _files(index) == caught_up  # byte for byte
    assert [search(tmp_store, q, k=30) for q in ("retry backoff", "w17", "src/cache.py")] == hits
    for q in ("retry backoff", "deploy timeout", "w100"):
        by_scan = search_prefix(tmp_store, "t", q, max_seq=10**9, k=30, use_caches=False)
        assert search_prefix(tmp_store, "t", q, max_seq=10**9, k=30) == by_scan


@pytest.mark.usefixtures("small")
def test_a_catch_up_reads_the_log_a_chunk_at_a_time(
    tmp_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the first segment is written, at most a chunk of documents has been made."""
    tmp_store.thread("t").append([fr.message("user", f"word{i} common") for i in range(200)])
    monkeypatch.setattr(si, "_CHUNK", 10)
    made = [0]
    real_doc_of, real_write = documents.doc_of, si._write

    def counting_doc_of(frame: fr.Frame, summary: str | None = None) -> Doc | None:
        doc = real_doc_of(frame, summary)
        made[0] += doc is not None
        return doc

    made_at_first_segment: list[int] = []

    def watching_write(path: Path, data: bytes) -> None:
        if path.name.startswith("seg-") and not made_at_first_segment:
            made_at_first_segment.append(made[0])
        real_write(path, data)

    monkeypatch.setattr(si, "doc_of", counting_doc_of)
    monkeypatch.setattr(si, "_write", watching_write)
    assert ThreadSearchIndex(tmp_store.thread("t")).refresh() == 200
    assert made == [200]
    assert made_at_first_segment == [10]


def _die_at(name: str) -> Callable[[Path, bytes], None]:
    real = si._write

    def dying(path: Path, data: bytes) -> None:
        if re.fullmatch(name, path.name):
            raise KeyboardInterrupt(f"died before writing {path.name}")
        real(path, data)

    return dying


def test_a_writer_that_dies_after_growing_the_tail_leaves_the_old_index_in_use(
    tmp_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a seal the tail only grows: the old manifest still reads it, so the next
    refresh catches up from there instead of rebuilding."""
    t = tmp_store.thread("t")
    t.append([fr.message("user", f"word{i} common") for i in range(300)])
    index = ThreadSearchIndex(tmp_store.thread("t"))
    index.refresh()
    old = index.manifest()
    assert old is not None and old.tail_bytes > 0 and old.docs == 300
    t.append([fr.message("user", f"word{i} common") for i in range(300, 310)])
    monkeypatch.setattr(si, "_write", _die_at("manifest.json"))
    with pytest.raises(KeyboardInterrupt):
        index.refresh()
    monkeypatch.undo()
    assert (index.dir / "tail.jsonl").stat().st_size > old.tail_bytes  # grown, not committed
    assert index.manifest() == old
    assert index._files_problem(old) is None
    view = index.view()
    assert view is not None and view.seqs().tolist() == list(range(1, 301))
    assert index.refresh() == 10  # caught up from the old watermark, not rebuilt
    after = _files(index)
    assert index.rebuild() == 310
    assert _files(index) == after


@pytest.mark.usefixtures("small")
@pytest.mark.parametrize("survivors", [0, 1, 5, 12, 30])
def test_a_writer_that_dies_in_the_middle_of_a_long_catch_up_leaves_the_old_index_in_use(
    tmp_store: Store, monkeypatch: pytest.MonkeyPatch, survivors: int
) -> None:
    """New segments (sealed and merged) are written as chunks fill, the tail and manifest only
    at the end: dying before them leaves the old manifest's files as they were."""
    t = tmp_store.thread("t")
    t.append([fr.message("user", f"word{i} common") for i in range(30)])
    index = ThreadSearchIndex(tmp_store.thread("t"))
    index.refresh()
    old = index.manifest()
    assert old is not None
    t.append([fr.message("user", f"word{i} common") for i in range(30, 230)])
    monkeypatch.setattr(si, "_CHUNK", 7)
    real, real_merge = si._write, segments.write_merged
    _die_after(monkeypatch, survivors)
    with pytest.raises(KeyboardInterrupt):
        index.refresh()
    monkeypatch.setattr(si, "_write", real)
    monkeypatch.setattr(si, "write_merged", real_merge)
    assert index.manifest() == old
    assert index._files_problem(old) is None
    view = index.view()
    assert view is not None and view.seqs().tolist() == list(range(1, 31))
    assert index.refresh() == 200  # from the old watermark
    for q in ("word5", "word29 common", "word229"):
        by_scan = search_prefix(tmp_store, "t", q, max_seq=10**9, k=5, use_caches=False)
        assert search_prefix(tmp_store, "t", q, max_seq=10**9, k=5) == by_scan
    after = _files(index)
    assert {p.name for p in index.dir.glob("seg-*.bin")} == {
        s.name for s in (index.manifest() or old).segments
    }
    assert index.rebuild() == 230
    assert _files(index) == after


@pytest.mark.usefixtures("small")
def test_an_index_of_the_previous_version_is_rebuilt(
    tmp_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Version 2 merged without a cap: its segments are not this version's, so it is dropped
    and built again."""
    t = tmp_store.thread("t")
    t.append(list(_frames(random.Random(3), 400)))
    index = ThreadSearchIndex(tmp_store.thread("t"))
    monkeypatch.setattr(segments, "MAX_SEGMENT", 10**9)
    monkeypatch.setattr(si, "VERSION", 2)
    index.refresh()
    v2 = index.manifest()
    assert v2 is not None and v2.version == 2 and v2.segments[0].n_docs == 256
    monkeypatch.setattr(segments, "MAX_SEGMENT", 64)
    monkeypatch.setattr(si, "VERSION", 3)
    assert index.refresh() == v2.docs  # every document again
    m = index.manifest()
    assert m is not None and m.version == 3
    assert [(s.first_doc, s.n_docs) for s in m.segments] == _layout(m.docs)
    assert not (index.dir / v2.segments[0].name).exists()
    rebuilt = _files(index)
    index.rebuild()
    assert _files(index) == rebuilt


def test_a_catch_up_removes_what_a_killed_writer_left(tmp_store: Store) -> None:
    """A writer killed between a segment's or manifest's temporary file and its rename leaves
    it behind, under a manifest that is still sound: the next catch-up, under the lock every
    writer of the folder holds, removes it."""
    thread = tmp_store.thread("t")
    thread.append([fr.message("user", f"alembic migration {i}") for i in range(5)])
    index = ThreadSearchIndex(thread)
    index.refresh()
    left = index.dir / f".manifest.json.{os.getpid()}-0badc0de.tmp"
    left.write_bytes(b"{")
    thread.append(fr.message("user", "one more"))
    assert index.refresh() == 1
    assert not left.exists()
    assert sorted(h.seq for h in search(tmp_store, "alembic", thread="t")) == [1, 2, 3, 4, 5]
