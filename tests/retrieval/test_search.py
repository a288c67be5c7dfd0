"""Search (continuity.retrieval.search, continuity.retrieval.index and .ranking): tokens, documents,
ranking, the index as a cache (catch-up, rebuild, crashes), prefix search on every path, odd
queries, re-ranking."""

from __future__ import annotations

import functools
import random
import shutil
import time
from collections.abc import Iterator, Sequence
from itertools import count
from pathlib import Path

import msgspec
import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings, strategies as st

from continuity import frames as fr
from continuity.caches.thread_index import ThreadIndex
from continuity.errors import CorruptFrame, InvalidQuery, InvalidThreadId, ThreadNotFound
from continuity.retrieval import index as si, segments
from continuity.retrieval.documents import KIND_MESSAGE, KIND_OBSERVATION, KIND_SUMMARY, doc_of
from continuity.retrieval.embedders import HashedEmbedder
from continuity.retrieval.fusion import RRF_C, SEMANTIC_WEIGHT
from continuity.retrieval.index import ThreadSearchIndex
from continuity.retrieval.ranking import MAX_QUERY_TERMS, query_terms
from continuity.retrieval.search import Hit, search, search_prefix
from continuity.retrieval.segments import Segment, build_segment, merge_segments
from continuity.retrieval.terms import tokenize
from continuity.store.base import BaseStore
from continuity.store.jsonl import Store
from continuity.store.memory import MemoryStore
from continuity.summary import SummaryDoc, summary_bytes
from continuity.testing import FixedClock

_ids = count()


def text(role: fr.Role, body: str) -> fr.MessageAppended:
    return fr.message(role, body)


def call(name: str, **inputs: object) -> fr.MessageAppended:
    block = fr.ToolUseBlock(id=f"toolu_{next(_ids)}", name=name, input=dict(inputs))
    return fr.message("assistant", content=[block])


def result(output: str, *, error: bool = False) -> fr.MessageAppended:
    block = fr.ToolResultBlock(tool_use_id="toolu_x", content=output, is_error=error)
    return fr.message("user", content=[block])


def seqs(hits: list[Hit]) -> list[tuple[str, int]]:
    return [(h.thread_id, h.seq) for h in hits]


def index_files(store: Store, thread_id: str) -> dict[str, bytes]:
    """Every file of a thread's search index and its bytes (the empty lock file aside)."""
    folder = store.cache_dir / "search" / thread_id
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.name != ".lock"}


# --- tokens ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "tokens"),
    [
        # a path: whole, then each part
        (
            "src/app/retry_backoff.py",
            ["src/app/retry_backoff.py", "src", "app", "retri", "=retry", "backoff", "py"],
        ),
        ("snake_case", ["snake_case", "snake", "case"]),
        ("camelCaseName", ["camelcasename", "camel", "case", "name"]),
        ("HTTPServerError", ["httpservererror", "http", "server", "error"]),
        ("XMLHttpRequest", ["xmlhttprequest", "xml", "http", "request"]),
        (
            "dotted.module.name",
            ["dotted.module.name", "dot", "=dotted", "modul", "=module", "name"],
        ),
        ("--force-with-lease", ["force-with-lease", "forc", "=force", "leas", "=lease"]),
        ("C:\\Users\\dev", ["c:\\users\\dev", "user", "=users", "dev"]),
        # numbers are tokens; single characters are not
        ("error 404 after 3 tries", ["error", "404", "after", "tri", "=tries"]),
        ("python3.11", ["python3.11", "python", "11"]),
        # stopwords go, whole tokens keep them
        ("the cause of it", ["caus", "=cause"]),
        ("the_end", ["the_end", "end"]),
        ("a b c x", []),
        # punctuation and symbols separate words, whatever script they are in
        ("“quoted” foo—bar word… ¿qué?", ["quot", "=quoted", "foo", "bar", "word", "qué"]),
        ("deploy 🚀 now", ["deploy", "now"]),
        ("nul\x00byte", ["nul", "byte"]),
        # an ASCII word by its Snowball stem and, when that differs, its surface form (ADR 0032)
        ("Migrations migrated", ["migrat", "=migrations", "migrat", "=migrated"]),
        ("running runs", ["run", "=running", "run", "=runs"]),
        ("naïve cafés", ["naïve", "cafés"]),
    ],
)
def test_tokenize(source: str, tokens: list[str]) -> None:
    assert tokenize(source) == tokens


@pytest.mark.parametrize(
    ("source", "tokens"),
    [
        # A non-ASCII letter stays inside its word: no "sum" out of "résumé", no "caf".
        ("résumé", ["résumé"]),
        ("café Straße", ["café", "straße"]),
        ("naïveImpl", ["naïveimpl", "naïve", "impl"]),
        ("ÜberCool", ["übercool", "über", "cool"]),
        ("Москва", ["москва"]),
        ("שלום עולם", ["שלום", "עולם"]),  # right-to-left text
        ("日本語のテキスト", ["日本語のテキスト"]),  # no spaces: one token (no segmentation)
    ],
)
def test_tokenize_non_ascii(source: str, tokens: list[str]) -> None:
    assert tokenize(source) == tokens


def test_very_long_tokens_are_dropped_and_their_short_parts_kept() -> None:
    long_word = "x" * 65
    assert tokenize(long_word) == []
    assert tokenize("y" * 64) == ["y" * 63 + "i"]  # its stem; a surface form would be too long
    assert tokenize("y" * 60 + "ing") == ["y" * 59 + "i", "=" + "y" * 60 + "ing"]
    # a long identifier: its whole goes, its parts stay, but never a part over the limit
    assert tokenize("a" * 70 + "Bc") == ["bc"]
    ident = "_".join(["segment"] * 12)
    assert tokenize(ident) == ["segment"] * 12
    blob = "QUJD" * 5000  # a base64-ish run: bounded work and bounded tokens
    assert all(len(t) <= 64 for t in tokenize(blob + " " + blob.lower()))


@given(st.text(max_size=200))
@settings(max_examples=200, deadline=None)
def test_tokens_are_lowercase_bounded_and_stable(source: str) -> None:
    tokens = tokenize(source)
    assert tokens == tokenize(source)
    for t in tokens:
        assert 1 < len(t) <= 64
        assert t == t.lower()
        assert not t.isspace()


# --- documents ------------------------------------------------------------------------------


def test_a_path_in_a_tool_input_weighs_more_than_prose_and_prose_more_than_output() -> None:
    as_input = doc_of(call("Read", file_path="lib/frobnicate.py"))
    as_prose = doc_of(text("assistant", "lib/frobnicate.py"))
    as_output = doc_of(result("lib/frobnicate.py"))
    assert as_input is not None and as_prose is not None and as_output is not None
    for term in ("lib/frobnicate.py", "frobnic", "=frobnicate", "py"):
        assert as_input.tf[term] == 4
        assert as_prose.tf[term] == 2
        assert as_output.tf[term] == 1
    assert as_input.tf["read"] == 3  # the tool's name
    assert as_output.length == 5 and as_prose.length == 10
    assert (as_input.kind, as_input.role) == (KIND_MESSAGE, 2)
    assert (as_output.kind, as_output.role) == (KIND_MESSAGE, 1)


def test_commands_weigh_like_paths_and_other_inputs_like_prose() -> None:
    d = doc_of(call("Bash", command="make deploy", description="ship deploy"))
    assert d is not None
    assert d.tf["make"] == 4 and d.tf["ship"] == 2
    assert d.tf["deploy"] == 4 + 2  # counts add up across fields
    assert d.length == sum(d.tf.values())
    assert list(d.tf) == sorted(d.tf)


def test_thinking_and_previews_are_indexed_once_each() -> None:
    thinking = fr.message("assistant", content=[fr.ThinkingBlock(text="consider caching")])
    d = doc_of(thinking)
    assert d is not None and d.tf == {"=caching": 1, "=consider": 1, "cach": 1, "consid": 1}
    big = fr.ToolResultBlock(
        tool_use_id="t", artifact_id="ab" * 32, preview="Traceback KeyError", size=99_999
    )
    d = doc_of(fr.message("user", content=[big]))
    assert d is not None and d.tf == {"keyerror": 1, "key": 1, "error": 1, "traceback": 1}


def test_observations_and_summaries_are_documents() -> None:
    obs = fr.ObservationRecorded(seq=7, tool_use_id="t", text="pytest: 12 passed")
    d = doc_of(obs)
    assert d is not None and (d.seq, d.kind, d.role) == (7, KIND_OBSERVATION, 0)
    assert d.tf == {"12": 2, "=passed": 2, "pass": 2, "pytest": 2}
    cp = fr.CompactionCheckpointCreated(
        seq=9,
        checkpoint_id="c",
        cut_rule_id="r",
        summary_kind="cumulative_v1",
        summary_artifact_id="ab" * 32,
        from_seq=0,
        to_seq=8,
    )
    d = doc_of(cp, "Decided to use alembic")
    assert d is not None and (d.seq, d.kind) == (9, KIND_SUMMARY)
    assert d.tf == {"=alembic": 1, "=decided": 1, "alemb": 1, "decid": 1, "use": 1}
    assert doc_of(cp) is None  # a checkpoint whose summary cannot be read says nothing


def test_frames_without_text_give_no_document() -> None:
    assert doc_of(fr.ThreadCreated(thread_id="t", title="retry backoff")) is None
    assert doc_of(text("user", "it is what it is")) is None  # only stopwords
    assert doc_of(text("user", "?! ... —")) is None
    image = fr.ImageBlock(media_type="image/png", artifact_id="ab" * 32, size=10)
    assert doc_of(fr.message("user", content=[image])) is None
    assert doc_of(fr.JobSpawned(job_id="j", kind="compact", params={"q": "retry"})) is None


def test_a_summary_in_the_store_is_indexed_and_found(tmp_store: Store) -> None:
    t = tmp_store.thread("t")
    t.append([text("user", "hello"), text("assistant", "hi")])
    doc = SummaryDoc(thread_id="t", to_seq=2, produced_by="test", text="we chose alembic")
    aid = tmp_store.artifacts.put(summary_bytes(doc))
    cp = fr.CompactionCheckpointCreated(
        checkpoint_id="c",
        cut_rule_id="r",
        summary_kind="cumulative_v1",
        summary_artifact_id=aid,
        from_seq=0,
        to_seq=2,
    )
    t.append(cp)
    hits = search(tmp_store, "alembic")
    assert [(h.seq, h.kind, h.role) for h in hits] == [(3, "summary", "")]
    assert "alembic" in hits[0].snippet and hits[0].terms == ["alembic"]


# --- ranking on a small labelled set --------------------------------------------------------

LABELLED: list[fr.Frame] = [
    text("user", "Please make the HTTP client retry failed requests with exponential backoff"),
    call("Read", file_path="src/app/http_client.py"),
    result("class HttpClient:\n    def get(self, url):\n        return self.session.get(url)"),
    call(
        "Edit",
        file_path="src/app/retry_backoff.py",
        old_string="def backoff(attempt):\n    return 1",
        new_string="def backoff(attempt):\n    return min(2 ** attempt, 30)",
    ),
    result("The file src/app/retry_backoff.py has been updated successfully."),
    call("Bash", command="pytest tests/test_retry.py -q", description="Run the retry tests"),
    result(
        "FAILED tests/test_retry.py::test_gives_up - AssertionError: expected 5 attempts, got 4",
        error=True,
    ),
    text(
        "assistant",
        "Decision: cap retries at five attempts with jitter, configurable via MAX_RETRIES.",
    ),
    call("Bash", command="alembic upgrade head", description="Apply migrations"),
    result("sqlalchemy.exc.OperationalError: no such table: users", error=True),
    text("user", "Also, the deploy script should post to the releases channel on Slack"),
    call("Write", file_path="scripts/deploy.sh", content='curl -X POST "$SLACK_WEBHOOK"'),
    fr.ObservationRecorded(tool_use_id="toolu_t", text="pytest: 12 passed in 0.41s"),
    text("assistant", "Done: retries back off exponentially and the deploy posts to Slack."),
]

# query → the seq that answers it (seq = position in LABELLED + 1: thread_created is seq 0)
LABELLED_QUERIES = {
    "retry backoff": 4,  # the edit of retry_backoff.py, not the prose that asked for it
    "http_client.py": 2,
    "alembic upgrade": 9,
    "OperationalError no such table": 10,
    "AssertionError attempts": 7,
    "MAX_RETRIES jitter": 8,
    "slack releases channel": 11,
    "deploy.sh": 12,
    "pytest passed": 13,
    "exponential backoff request": 1,
    "which command ran the retry tests": 6,
}


@pytest.fixture
def labelled(tmp_store: Store) -> Store:
    tmp_store.thread("proj").append(LABELLED)
    return tmp_store


@pytest.mark.parametrize(("query", "answer"), sorted(LABELLED_QUERIES.items()))
def test_the_labelled_answer_ranks_first(labelled: Store, query: str, answer: int) -> None:
    hits = search(labelled, query, k=5)
    assert hits[0].seq == answer, [(h.seq, h.score, h.snippet[:40]) for h in hits]
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_hits_say_where_when_who_and_what_matched(labelled: Store, clock: FixedClock) -> None:
    (hit,) = search(labelled, "alembic", k=1)
    assert hit == Hit(
        thread_id="proj",
        seq=9,
        kind="message",
        role="assistant",
        score=hit.score,
        ts_ms=clock.ms,
        snippet="Bash alembic upgrade head Apply migrations",
        terms=["alembic"],
        message_id=hit.message_id,
        exact=True,
    )
    assert hit.score > 0
    frame = next(iter(labelled.thread("proj").read(from_seq=9, to_seq=9)))
    assert isinstance(frame, fr.MessageAppended) and hit.message_id == frame.message_id != ""


def test_field_weights_order_the_same_word_input_prose_output(tmp_store: Store) -> None:
    tmp_store.thread("w").append(
        [
            result("lib/frobnicate.py"),
            text("assistant", "lib/frobnicate.py"),
            call("Read", file_path="lib/frobnicate.py"),
        ]
    )
    assert [h.seq for h in search(tmp_store, "frobnicate")] == [3, 2, 1]


# --- determinism ----------------------------------------------------------------------------


def test_the_same_query_gives_equal_hits(labelled: Store) -> None:
    first = search(labelled, "retry tests attempts", k=10)
    assert len(first) >= 5
    assert search(labelled, "retry tests attempts", k=10) == first
    assert search(labelled, "attempts tests retry  RETRY", k=10) == first  # term order, case


def test_ties_are_broken_by_thread_then_seq(tmp_store: Store) -> None:
    same = [text("user", "flaky timeout in ci"), text("user", "unrelated words here")]
    for tid in ("b-thread", "a-thread"):
        tmp_store.thread(tid).append([*same, text("user", "flaky timeout in ci")])
    hits = search(tmp_store, "flaky timeout", k=10)
    assert seqs(hits) == [("a-thread", 1), ("a-thread", 3), ("b-thread", 1), ("b-thread", 3)]
    assert len({h.score for h in hits}) == 1
    # and k cuts the same order
    assert seqs(search(tmp_store, "flaky timeout", k=3)) == seqs(hits)[:3]


# --- the index as a cache -------------------------------------------------------------------

VOCAB = [
    "retry",
    "backoff",
    "alembic",
    "migration",
    "deploy",
    "pytest",
    "timeout",
    "cache",
    "index",
    "segment",
    "render",
    "transcript",
]


def _small_frames(rng: random.Random, n: int) -> Iterator[fr.Frame]:
    """Cheap frames: mostly short messages, some without any searchable term, some tool calls
    and observations."""
    for _ in range(n):
        roll = rng.random()
        words = " ".join(rng.choice(VOCAB) for _ in range(rng.randint(1, 4)))
        if roll < 0.1:
            yield text("user", "it is the one")  # no document
        elif roll < 0.2:
            yield call("Edit", file_path=f"src/{rng.choice(VOCAB)}_{rng.choice(VOCAB)}.py")
        elif roll < 0.25:
            yield fr.ObservationRecorded(tool_use_id="t", text=words)
        else:
            yield text(rng.choice(["user", "assistant"]), words)


QUERIES = ["retry backoff", "alembic migration", "src/cache_index.py", "render", "deploy timeout"]


def _results(store: Store) -> list[list[Hit]]:
    out = [search(store, q, k=20) for q in QUERIES]
    out += [search_prefix(store, "t", q, max_seq=3000, k=20) for q in QUERIES]
    return out


@pytest.mark.slow
def test_catch_up_in_small_steps_equals_one_rebuild(tmp_store: Store) -> None:
    seed = random.randrange(2**32)
    print(f"seed {seed}")
    rng = random.Random(seed)
    t = tmp_store.thread("t")
    index = ThreadSearchIndex(tmp_store.thread("t"))
    total = 0
    started = time.monotonic()
    while total < 4700:  # past the 256-doc seal many times and the 16 x 256 merge at 4096 docs
        n = rng.randint(1, 70)
        t.append(list(_small_frames(rng, n)))
        total += n
        index.refresh()
    elapsed = time.monotonic() - started
    m = index.manifest()
    assert m is not None and m.last_seq == total
    refs = [(s.first_doc, s.n_docs) for s in m.segments]
    assert refs[0] == (0, 4096)
    assert refs[1:] == [(4096 + 256 * i, 256) for i in range(len(refs) - 1)]
    assert 0 < m.docs - sum(n for _f, n in refs) < 256 or m.docs % 256 == 0
    caught_up = index_files(tmp_store, "t")
    results = _results(tmp_store)
    assert all(results)

    assert index.rebuild() == m.docs
    assert index_files(tmp_store, "t") == caught_up  # byte for byte
    assert _results(tmp_store) == results
    shutil.rmtree(tmp_store.cache_dir / "search")
    assert _results(tmp_store) == results
    assert index_files(tmp_store, "t") == caught_up
    shutil.rmtree(tmp_store.cache_dir)
    assert _results(tmp_store) == results
    # the scan path sees the same documents with the same statistics
    for q in QUERIES:
        by_index = search_prefix(tmp_store, "t", q, max_seq=3000, k=20)
        assert search_prefix(tmp_store, "t", q, max_seq=3000, k=20, use_caches=False) == by_index
    assert elapsed < 30


def test_refresh_is_incremental_and_idempotent(tmp_store: Store) -> None:
    rng = random.Random(5)
    t = tmp_store.thread("t")
    t.append(list(_small_frames(rng, 300)))
    index = ThreadSearchIndex(tmp_store.thread("t"))
    built = index.refresh()
    assert built > 256
    assert index.refresh() == 0
    before = index_files(tmp_store, "t")
    t.append(text("user", "one more retry"))
    assert index.refresh() == 1
    after = index_files(tmp_store, "t")
    assert after["manifest.json"] != before["manifest.json"]
    assert after["docs.bin"][: len(before["docs.bin"])] == before["docs.bin"]
    assert {n for n in after if n.startswith("seg-")} == {"seg-0000000000-256.bin"}


def test_merged_segments_equal_one_segment_of_all_documents() -> None:
    rng = random.Random(11)
    frames = [msgspec.structs.replace(f, seq=i) for i, f in enumerate(_small_frames(rng, 900))]
    docs = [d for f in frames if (d := doc_of(f)) is not None]
    parts = [docs[i : i + 100] for i in range(0, len(docs), 100)]
    first = 0
    segments = []
    for part in parts:
        segments.append(Segment(build_segment(part), first))
        first += len(part)
    assert merge_segments(segments) == build_segment(docs)


def test_an_index_that_disagrees_with_the_log_is_rebuilt(tmp_store: Store) -> None:
    t = tmp_store.thread("t")
    t.append([text("user", "first retry"), text("user", "second retry")])
    search(tmp_store, "retry", thread="t")
    folder = tmp_store.cache_dir / "search" / "t"
    # a different, shorter log under the same id: the caches say frames went missing, and
    # search refuses until the caches are rebuilt for the log as it is now
    (tmp_store.root / "threads" / "t.jsonl").unlink()
    tmp_store.thread("t").append([text("user", "alembic only")])
    with pytest.raises(CorruptFrame, match="committed frames are missing"):
        search(tmp_store, "retry", thread="t")
    ThreadIndex(tmp_store.thread("t")).rebuild()
    assert search(tmp_store, "retry", thread="t") == []
    assert [h.seq for h in search(tmp_store, "alembic", thread="t")] == [1]
    # files damaged or missing behind the manifest's back
    for name in ("docs.bin", "tail.jsonl"):
        (folder / name).write_bytes(b"")
        assert [h.seq for h in search(tmp_store, "alembic", thread="t")] == [1]
    (folder / "manifest.json").write_bytes(b"{not json")
    assert [h.seq for h in search(tmp_store, "alembic", thread="t")] == [1]


def test_a_log_of_the_same_length_with_other_frames_is_not_taken_for_the_indexed_one(
    tmp_store: Store,
) -> None:
    """The quick check of an index that looks current compares the log's length and its last
    chain digest: a log of exactly the same length with other words must still be re-indexed."""
    path = tmp_store.root / "threads" / "t.jsonl"
    tmp_store.thread("t").append([text("user", "first retry"), text("user", "second retry")])
    assert [h.seq for h in search(tmp_store, "retry")] == [1, 2]
    size = path.stat().st_size
    path.unlink()
    tmp_store.thread("t").append([text("user", "first alpha"), text("user", "second retry")])
    assert path.stat().st_size == size
    assert [h.seq for h in search(tmp_store, "retry")] == [2]
    assert [h.seq for h in search(tmp_store, "alpha")] == [1]


def test_index_files_damaged_behind_a_current_manifest_are_noticed(tmp_store: Store) -> None:
    """With the log unchanged, a search reads the index without the full trust check; a
    missing, cut or foreign file behind the manifest must still send it to a rebuild."""
    t = tmp_store.thread("t")
    t.append([text("user", f"word{i} common") for i in range(300)])
    expected = {
        q: search(tmp_store, q, k=5, thread="t")
        for q in ("word7", "word256", "word290 common", "common")
    }
    assert all(expected.values())
    folder = tmp_store.cache_dir / "search" / "t"
    segment = next(folder.glob("seg-*.bin"))

    def damage_all() -> Iterator[None]:
        segment.unlink()
        yield
        segment.write_bytes(b"CSEG")
        yield
        tail = (folder / "tail.jsonl").read_bytes()
        (folder / "tail.jsonl").write_bytes(tail[: len(tail) // 2])
        yield
        # a tail of the right length naming other documents than docs.bin ends with
        lines = (folder / "tail.jsonl").read_bytes().splitlines(keepends=True)
        (folder / "tail.jsonl").write_bytes(b"".join([lines[1], lines[0], *lines[2:]]))
        yield

    for _ in damage_all():
        for q, hits in expected.items():
            assert search(tmp_store, q, k=5, thread="t") == hits, q


def _die_after(monkeypatch: pytest.MonkeyPatch, survivors: int) -> None:
    """Make the thread index's file writes (whole files and merged segments, which stream to
    theirs: ADR 0061) die after the first ``survivors``."""
    real, real_merge = si._write, segments.write_merged
    done = [0]

    def dying(path: Path, data: bytes) -> None:
        if done[0] >= survivors:
            raise KeyboardInterrupt(f"died before writing {path.name}")
        done[0] += 1
        real(path, data)

    def dying_merge(path: Path, parts: list[Segment]) -> int:
        if done[0] >= survivors:
            raise KeyboardInterrupt(f"died before writing {path.name}")
        done[0] += 1
        return real_merge(path, parts)

    monkeypatch.setattr(si, "_write", dying)
    monkeypatch.setattr(si, "write_merged", dying_merge)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("before", "survivors"),
    # sealing writes a segment, the tail and the manifest; a merge writes one segment more
    [(250, n) for n in range(3)] + [(16 * 256 - 6, n) for n in range(4)],
)
def test_a_writer_that_dies_between_files_leaves_an_index_that_gives_right_answers(
    tmp_store: Store, monkeypatch: pytest.MonkeyPatch, before: int, survivors: int
) -> None:
    """Die after the first ``survivors`` file writes of a catch-up that seals a segment (and,
    from 16 * 256 - 6 documents, merges 16 of them): the next search is still right."""
    t = tmp_store.thread("t")
    t.append([text("user", f"word{i} common") for i in range(before)])
    index = ThreadSearchIndex(tmp_store.thread("t"))
    index.refresh()
    t.append([text("user", f"word{i} common") for i in range(before, before + 12)])
    _die_after(monkeypatch, survivors)
    with pytest.raises(KeyboardInterrupt):
        index.refresh()
    monkeypatch.undo()
    for q in ("word5", f"word{before + 10}", f"word{before - 1} common"):
        by_scan = search_prefix(tmp_store, "t", q, max_seq=10**9, k=5, use_caches=False)
        assert search(tmp_store, q, k=5) == by_scan
        assert search_prefix(tmp_store, "t", q, max_seq=10**9, k=5) == by_scan
    repaired = index_files(tmp_store, "t")
    index.rebuild()
    assert index_files(tmp_store, "t") == repaired


def test_an_index_view_is_none_before_the_first_refresh(tmp_store: Store) -> None:
    tmp_store.thread("t").append(text("user", "x y z words"))
    assert ThreadSearchIndex(tmp_store.thread("t")).view() is None
    with pytest.raises(InvalidThreadId):
        ThreadSearchIndex(tmp_store.thread("../elsewhere"))


# --- search_prefix on every path ------------------------------------------------------------

PREFIX_FRAMES = 90


@functools.cache
def _prefix_frames() -> list[fr.Frame]:
    """Made once: both stores get the same frames (message ids included)."""
    rng = random.Random(2024)
    out = list(_small_frames(rng, PREFIX_FRAMES))
    # exact duplicates, so that ties occur within the thread
    out[40] = out[10] = text("user", "retry backoff deploy")
    return out


def _fill(store: BaseStore) -> None:
    t = store.thread("p")
    frames = _prefix_frames()
    t.append(frames[:50])
    doc = SummaryDoc(thread_id="p", to_seq=50, produced_by="test", text="deploy retry summary")
    aid = store.artifacts.put(summary_bytes(doc))
    t.append(
        fr.CompactionCheckpointCreated(
            checkpoint_id="c",
            cut_rule_id="r",
            summary_kind="cumulative_v1",
            summary_artifact_id=aid,
            from_seq=0,
            to_seq=50,
        )
    )
    t.append(frames[50:])


@pytest.fixture(scope="module")
def prefix_stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, MemoryStore]:
    store = Store(tmp_path_factory.mktemp("prefix"), create=True, durable=False, clock=FixedClock())
    memory = MemoryStore(clock=FixedClock())
    _fill(store)
    _fill(memory)
    return store, memory


@pytest.mark.slow
@given(
    words=st.lists(
        st.sampled_from([*VOCAB, "absent", "src/retry_cache.py"]), min_size=1, max_size=3
    ),
    max_seq=st.integers(-2, PREFIX_FRAMES + 5),
    k=st.integers(1, 12),
    exclude=st.sets(st.integers(0, PREFIX_FRAMES + 1), max_size=6),
)
@settings(max_examples=60, deadline=None)
def test_prefix_search_agrees_on_every_path(
    prefix_stores: tuple[Store, MemoryStore],
    words: list[str],
    max_seq: int,
    k: int,
    exclude: set[int],
) -> None:
    store, memory = prefix_stores
    query = " ".join(words)

    def run(s: BaseStore, use_caches: bool, ex: set[int], n: int) -> list[Hit]:
        return search_prefix(
            s, "p", query, max_seq=max_seq, k=n, exclude_seqs=ex, use_caches=use_caches
        )

    by_index = run(store, True, exclude, k)
    assert run(store, False, exclude, k) == by_index
    assert run(memory, True, exclude, k) == by_index  # no caches in memory: a scan
    assert all(h.seq <= max_seq and h.seq not in exclude for h in by_index)
    # excluding seqs is the same as leaving them out of a longer list
    wider = run(store, True, set(), k + len(exclude))
    assert by_index == [h for h in wider if h.seq not in exclude][:k]
    ranked = [(-h.score, h.seq) for h in wider]
    assert ranked == sorted(ranked)


def test_frames_after_the_prefix_never_change_its_hits(tmp_store: Store) -> None:
    _fill(tmp_store)
    queries = ["retry backoff deploy", "alembic", "src/cache_index.py", "summary"]
    cuts = [5, 30, 50, 51, 70]
    before = {
        (q, c): search_prefix(tmp_store, "p", q, max_seq=c, k=8) for q in queries for c in cuts
    }
    assert any(before.values())
    rng = random.Random(7)
    tmp_store.thread("p").append(list(_small_frames(rng, 400)))  # more of the same words
    for (q, c), hits in before.items():
        assert search_prefix(tmp_store, "p", q, max_seq=c, k=8) == hits
        assert search_prefix(tmp_store, "p", q, max_seq=c, k=8, use_caches=False) == hits


def test_prefix_search_of_nothing(tmp_store: Store) -> None:
    _fill(tmp_store)
    assert search_prefix(tmp_store, "p", "retry", max_seq=-1, k=5) == []
    assert search_prefix(tmp_store, "p", "retry", max_seq=10, k=0) == []
    with pytest.raises(InvalidQuery):
        search_prefix(tmp_store, "p", "  ", max_seq=10, k=5)


@pytest.mark.parametrize("use_caches", [True, False])
def test_prefix_search_of_an_unknown_thread(tmp_store: Store, use_caches: bool) -> None:
    _fill(tmp_store)
    with pytest.raises(ThreadNotFound, match="nope"):
        search_prefix(tmp_store, "nope", "retry", max_seq=10, k=5, use_caches=use_caches)
    with pytest.raises(InvalidThreadId):
        search_prefix(tmp_store, "a/b", "retry", max_seq=10, k=5, use_caches=use_caches)


# --- odd queries and arguments --------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("", "the query is empty"),
        ("   \t\n", "the query is empty"),
        ("?!... --- ;;", "has no searchable terms"),
        ("the of and is", "has no searchable terms"),
        ("🙂🙃", "has no searchable terms"),
    ],
)
def test_queries_with_nothing_to_search_for(labelled: Store, query: str, message: str) -> None:
    with pytest.raises(InvalidQuery, match=message):
        search(labelled, query)
    with pytest.raises(InvalidQuery, match=message):
        query_terms(query)


def test_a_huge_query_is_bounded_and_still_finds(labelled: Store) -> None:
    rng = random.Random(3)
    words = [f"w{rng.randrange(10**6)}" for _ in range(20_000)]
    huge = "alembic " + " ".join(words)
    assert len(huge) > 100_000
    terms = query_terms(huge)
    assert len(terms) == MAX_QUERY_TERMS and "alemb" in terms and "=alembic" in terms
    started = time.monotonic()
    hits = search(labelled, huge, k=3)
    assert time.monotonic() - started < 5
    assert [h.seq for h in hits] == [9]
    assert search(labelled, "alembic " * 30_000, k=1)[0].seq == 9


def test_query_terms_are_distinct_and_sorted() -> None:
    assert query_terms("Retry retry BACKOFF src/a.py") == [
        "=retry",
        "backoff",
        "py",
        "retri",
        "src",
        "src/a.py",
    ]


def test_odd_characters_in_queries_and_documents(tmp_store: Store) -> None:
    tmp_store.thread("odd").append(
        [
            text("user", "שלום עולם: the build is red"),
            text("user", "deploy 🚀 finished\x00with a NUL"),
            text("user", "Fehler in der Straße-Übersetzung"),
        ]
    )
    assert [h.seq for h in search(tmp_store, "עולם")] == [1]
    assert [h.seq for h in search(tmp_store, "🚀🚀 deploy\x00")] == [2]
    assert [h.seq for h in search(tmp_store, "übersetzung")] == [3]
    assert [h.seq for h in search(tmp_store, "\u202eFEHLER\u202c")] == [3]  # RTL override marks
    with pytest.raises(InvalidQuery):
        search(tmp_store, "\x00\x00")
    with pytest.raises(InvalidQuery, match="empty"):
        search(tmp_store, None)  # type: ignore[arg-type]


@pytest.mark.parametrize("k", [0, -1])
def test_k_must_be_positive(labelled: Store, k: int) -> None:
    with pytest.raises(InvalidQuery, match="k must be positive"):
        search(labelled, "retry", k=k)


def test_an_unknown_thread_is_a_clear_error(labelled: Store) -> None:
    with pytest.raises(ThreadNotFound, match="'nope'"):
        search(labelled, "retry", thread="nope")
    with pytest.raises(InvalidThreadId):
        search(labelled, "retry", thread="../proj")


def test_an_empty_store_finds_nothing(tmp_store: Store) -> None:
    assert search(tmp_store, "retry") == []


def test_thread_and_project_filters(tmp_store: Store) -> None:
    for tid, project in (("a1", "/p/alpha"), ("a2", "/p/alpha"), ("b1", "/p/beta")):
        tmp_store.thread(tid).append(
            [fr.ThreadCreated(meta={"project": project}), text("user", f"retry in {tid}")]
        )
    tmp_store.thread("none").append(text("user", "retry with no project"))
    assert [h.thread_id for h in search(tmp_store, "retry")] == ["a1", "a2", "b1", "none"]
    assert [h.thread_id for h in search(tmp_store, "retry", project="/p/alpha")] == ["a1", "a2"]
    assert [h.thread_id for h in search(tmp_store, "retry", project="/p/beta")] == ["b1"]
    assert search(tmp_store, "retry", project="/p/gamma") == []
    assert [h.thread_id for h in search(tmp_store, "retry", thread="b1")] == ["b1"]


def test_scores_use_only_the_searched_threads(tmp_store: Store) -> None:
    """Statistics come from the threads searched: another thread full of a word lowers its
    weight store-wide but not inside one thread."""
    tmp_store.thread("a").append([text("user", "retry alembic"), text("user", "alembic only")])
    alone = search(tmp_store, "retry alembic", thread="a")
    tmp_store.thread("b").append([text("user", "retry") for _ in range(50)])
    assert search(tmp_store, "retry alembic", thread="a") == alone
    assert search(tmp_store, "retry alembic") != alone


# --- vectors --------------------------------------------------------------------------------


def test_hashed_embedder_is_deterministic_and_unit_norm() -> None:
    texts = ["retry backoff in src/app/retry_backoff.py", "alembic upgrade head", "", "?!"]
    a = HashedEmbedder().embed(texts)
    b = HashedEmbedder().embed(texts)
    assert a.dtype == np.float32 and a.shape == (4, 256)
    assert np.array_equal(a, b)
    norms = np.linalg.norm(a, axis=1)
    assert np.allclose(norms[:2], 1.0, atol=1e-6)
    assert np.array_equal(norms[2:], [0.0, 0.0])  # nothing to embed: a zero vector
    assert HashedEmbedder(64).embed(texts).shape == (4, 64)
    assert HashedEmbedder(64).id == "hashed/64"
    same = HashedEmbedder().embed(["Retry Backoff", "retry backoff"])
    assert float(same[0] @ same[1]) == pytest.approx(1.0)
    assert HashedEmbedder().embed([]).shape == (0, 256)


def test_an_embedder_is_fused_deterministically_and_in_order(labelled: Store) -> None:
    """With an embedder, BM25's ranking and the embedder's are fused by reciprocal rank fusion
    (ADR 0033): the same hits every time, in fused-score order, each score at most what a
    document first in both rankings gets."""
    first = search(labelled, "retry tests attempts", k=6, embedder=HashedEmbedder())
    assert (
        first and search(labelled, "retry tests attempts", k=6, embedder=HashedEmbedder()) == first
    )
    scores = [h.score for h in first]
    assert scores == sorted(scores, reverse=True)
    assert all(0 < s <= (1 + SEMANTIC_WEIGHT) / (RRF_C + 1) + 1e-6 for s in scores)


class _FavourSeq12:
    """An embedder that only likes the text of the deploy script."""

    id = "test/favour"

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = np.zeros((len(texts), 2), dtype=np.float32)
        out[0] = [1.0, 0.0]
        for i, t in enumerate(texts[1:], start=1):
            out[i] = [1.0, 0.0] if "deploy.sh" in t else [0.0, 1.0]
        return out


def test_an_embedder_can_reorder_the_bm25_candidates(labelled: Store) -> None:
    plain = search(labelled, "deploy slack", k=3)
    assert plain[0].seq != 12
    assert search(labelled, "deploy slack", k=3, embedder=_FavourSeq12())[0].seq == 12


def test_a_hit_says_whether_a_query_word_is_in_it_as_written(tmp_store: Store) -> None:
    """``exact``: the query's word as written, not only another word of its stem; the CLI
    notes when no hit has one (issue 44)."""
    from continuity.cli.fast_search import NO_EXACT_WORD, print_hits

    tmp_store.thread("x").append(
        [
            fr.ThreadCreated(),
            text("user", "the migrations ran twice"),
            text("user", "one migration failed"),
            text("user", "deploy src/retry_cache.py"),
        ]
    )
    assert {h.seq: h.exact for h in search(tmp_store, "migrations", k=5)}[1]
    assert {h.seq: h.exact for h in search(tmp_store, "migrating", k=5)} == {1: False, 2: False}
    assert [h.exact for h in search(tmp_store, "src/retry_cache.py", k=5)] == [True]
    lines: list[str] = []
    print_hits(search(tmp_store, "migrating", k=5), "migrating", as_json=False, write=lines.append)
    assert lines[-1] == NO_EXACT_WORD
    lines.clear()
    print_hits(
        search(tmp_store, "migrations", k=5), "migrations", as_json=False, write=lines.append
    )
    assert NO_EXACT_WORD not in lines
