"""The recall stage of compile (ADR 0010): what it may bring back, within which budgets, how the
decision records it, and — the key property — that a bundle with recall is still a pure function
of the log prefix: the same through the caches, without them, on the memory backend, after the
caches (search indexes included) are deleted, and whatever is appended after the anchor."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings, strategies as st

from continuity import frames as fr
from continuity.context.bundle import MessageItem, RecallItem, SummaryItem
from continuity.context.compaction import create_checkpoint
from continuity.context.compiler import CompileResult, compile_context
from continuity.context.render import to_anthropic, to_openai, to_text
from continuity.errors import InvalidLimits
from continuity.retrieval.documents import frame_text
from continuity.retrieval.index import ThreadSearchIndex
from continuity.retrieval.state import forget
from continuity.store.base import BaseStore
from continuity.store.jsonl import Store
from continuity.store.memory import MemoryStore
from continuity.testing import FixedClock
from tests.support.compile import (
    THREAD,
    Script,
    TooSmallEverywhere,
    all_or_too_small,
    call,
    compile_or_too_small,
    limits_strategy,
    result,
    scripts,
    text,
)

# --- a small session: the detail a later turn needs is before the summary -------------------

MIGRATION_CMD = "alembic upgrade head"
RETRY_FILE = "src/net/retry_backoff.py"


def build_session(store: BaseStore) -> int:
    """Seqs 1..8 summarised (checkpoint to_seq 8), then a window of four messages; returns the
    head seq (the anchor, a user question about what only the summarised part holds)."""
    t = store.thread(THREAD)
    t.append(
        [
            fr.ThreadCreated(thread_id=THREAD, title="recall"),
            text("user", "Migrate the database schema for the orders table.", "u1"),
            call("a1", "tu1", "Bash", command=MIGRATION_CMD),
            result("r1", "tu1", "ERROR: relation orders already exists", is_error=True),
            text("assistant", "The migration clashes with an existing relation.", "a2"),
            call("a3", "tu2", "Read", file_path=RETRY_FILE),
            result("r2", "tu2", "def retry(delay):\n    return delay * 2"),
            text("assistant", "The retry delay doubles in retry_backoff.py.", "a4"),
            text("user", "Good. Leave the backoff as it is.", "u2"),
        ]
    )
    create_checkpoint(store, THREAD, 8, text="Worked on the schema and looked at some code.")
    seqs = t.append(
        [
            text("user", "Now style the frontend header.", "u3"),
            text("assistant", "The header is styled with flexbox.", "a5"),
            text("assistant", "Anything else?", "a6"),
            text(
                "user", "Which command ran the alembic migration, and which file had retry?", "u4"
            ),
        ]
    )
    return seqs[-1]


@pytest.fixture
def session(tmp_store: Store) -> tuple[Store, int]:
    return tmp_store, build_session(tmp_store)


def window_seqs(res: CompileResult) -> set[int]:
    return {m.seq for m in res.bundle.messages}


def test_recall_brings_back_what_only_the_summarised_part_holds(
    session: tuple[Store, int],
) -> None:
    store, head = session
    res = compile_context(store, THREAD, recall="alembic migration command", log=False)
    summaries = res.bundle.summaries
    assert [s.to_seq for s in summaries] == [8]
    recalled = res.bundle.recalled
    assert recalled, res.decision.reasons
    assert recalled[0].seq == 2 and MIGRATION_CMD in recalled[0].text
    assert recalled[0].source_kind == "message" and recalled[0].role == "assistant"
    assert all(r.seq <= 8 for r in recalled)
    assert not window_seqs(res) & {r.seq for r in recalled}
    # Items: summaries, then recall (best first), then the window.
    kinds = [type(i) for i in res.bundle.items]
    assert kinds == sorted(kinds, key=[SummaryItem, RecallItem, MessageItem].index)
    scores = [r.score for r in recalled]
    assert scores == sorted(scores, reverse=True)
    assert res.bundle.tokens == sum(i.tokens for i in res.bundle.items)
    assert res.bundle.messages[-1].seq == head


def test_without_a_summary_recall_searches_only_before_the_window(tmp_store: Store) -> None:
    build_session(tmp_store)
    limits = fr.Limits(recent_messages=3, max_summary_refs=0)
    res = compile_context(tmp_store, THREAD, limits=limits, recall="alembic retry", log=False)
    assert res.bundle.summaries == []
    first = min(window_seqs(res))
    assert res.bundle.recalled
    assert all(r.seq < first for r in res.bundle.recalled)
    # The anchor message itself says "alembic" and "retry": it is in the window, not recalled.
    head = res.bundle.anchor_seq
    assert all(h.seq < first for h in res.decision.recall_hits)
    assert head not in {h.seq for h in res.decision.recall_hits}


def test_recall_never_returns_summaries(tmp_store: Store) -> None:
    """A summary that matches the query better than any message is considered (and recorded)
    but never becomes a recall item."""
    t = tmp_store.thread(THREAD)
    t.append([text("user", "zebra once", "u1"), text("assistant", "ok", "a1")])
    create_checkpoint(tmp_store, THREAD, 2, text="zebra zebra zebra zebra stripes")
    t.append([text("user", "more", "u2"), text("assistant", "fine", "a2")])
    create_checkpoint(tmp_store, THREAD, 5, text="nothing relevant here")
    t.append([text("user", "what about zebra?", "u3")])
    res = compile_context(tmp_store, THREAD, recall="zebra stripes", log=False)
    assert [s.to_seq for s in res.bundle.summaries][-1] == 5
    hits = res.decision.recall_hits
    summary_seq = 3  # the first checkpoint's frame, at or before to_seq 5
    assert summary_seq in {h.seq for h in hits}
    assert next(h for h in hits if h.seq == summary_seq).included is False
    assert [r.seq for r in res.bundle.recalled] == [1]


def test_the_decision_records_the_query_and_every_hit(session: tuple[Store, int]) -> None:
    store, _ = session
    limits = fr.Limits(recall_budget_tokens=20)  # room for one short hit, not all of them
    res = compile_context(store, THREAD, limits=limits, recall="retry delay alembic")
    assert res.logged
    logged = store.thread(THREAD).tail(1, types=["context_selection_decided"])[0]
    assert isinstance(logged, fr.ContextSelectionDecided)
    assert logged.seq == res.decision.seq
    assert msgspec.structs.replace(logged, ts_ms=0, digest="") == res.decision
    assert logged.recall_query == "retry delay alembic"
    hits = logged.recall_hits
    assert len(hits) >= 2
    included = [(h.seq, h.score) for h in hits if h.included]
    assert included == [(r.seq, r.score) for r in res.bundle.recalled]
    assert any(not h.included for h in hits), "the budget left some hits out"
    assert sum(r.tokens for r in res.bundle.recalled) <= 20
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert any(r.startswith("recall: ") for r in logged.reasons)


def test_recall_off_records_nothing(session: tuple[Store, int]) -> None:
    store, _ = session
    for recall in (None, False, ""):
        res = compile_context(store, THREAD, recall=recall, log=False)
        assert res.bundle.recalled == []
        assert res.decision.recall_query is None and res.decision.recall_hits == []
        assert not any(r.startswith("recall") for r in res.decision.reasons)


def test_recall_true_searches_for_the_anchor_message(session: tuple[Store, int]) -> None:
    store, head = session
    res = compile_context(store, THREAD, recall=True, log=False)
    question = "Which command ran the alembic migration, and which file had retry?"
    assert res.decision.recall_query == question
    assert res.bundle.recalled
    assert {2, 5} <= {r.seq for r in res.bundle.recalled}  # the alembic call, the retry file read
    same = compile_context(store, THREAD, recall=question, log=False)
    assert same.bundle_bytes() == res.bundle_bytes()
    # At an earlier anchor it is that message's text that is searched for.
    earlier = compile_context(store, THREAD, anchor="a5", recall=True, log=False)
    assert earlier.decision.recall_query == "The header is styled with flexbox."
    assert earlier.bundle.anchor_seq == head - 2


@pytest.mark.parametrize("query", ["!!!", "?? -- ...", "a the of", "   "])
def test_a_query_with_no_searchable_terms_gives_a_reason_not_an_error(
    session: tuple[Store, int], query: str
) -> None:
    store, _ = session
    res = compile_context(store, THREAD, recall=query, log=False)
    assert res.bundle.recalled == [] and res.decision.recall_hits == []
    recall_reasons = [r for r in res.decision.reasons if r.startswith("recall")]
    assert len(recall_reasons) == 1, res.decision.reasons
    assert "search" in recall_reasons[0] or "query" in recall_reasons[0]
    assert res.decision.recall_query == query  # the text given, recorded even when useless
    plain = compile_context(store, THREAD, log=False)
    assert plain.bundle_bytes() == res.bundle_bytes()


def test_an_anchor_message_without_text_gives_a_reason(tmp_store: Store) -> None:
    build_session(tmp_store)
    tmp_store.thread(THREAD).append(
        [call("a7", "tu3", "Bash", command="ls"), result("r3", "tu3", "alembic.ini")]
    )
    res = compile_context(tmp_store, THREAD, recall=True, log=False)
    assert res.bundle.recalled == []
    assert any(r.startswith("recall") for r in res.decision.reasons), res.decision.reasons
    assert res.decision.recall_query == "" and res.decision.recall_hits == []


def test_recall_fits_its_own_budget_and_the_overall_one(session: tuple[Store, int]) -> None:
    store, _ = session
    query = "alembic retry delay relation orders backoff migration schema"
    wide = compile_context(store, THREAD, recall=query, log=False)
    assert len(wide.bundle.recalled) >= 3
    for budget in (10, 25, 40, 80):
        limits = fr.Limits(recall_budget_tokens=budget)
        res = compile_context(store, THREAD, limits=limits, recall=query, log=False)
        assert sum(r.tokens for r in res.bundle.recalled) <= budget
    base = compile_context(store, THREAD, log=False)
    used = base.bundle.tokens
    for spare in (0, 5, 30, 60):
        limits = fr.Limits(budget_tokens=used + spare)
        res = compile_context(store, THREAD, limits=limits, recall=query, log=False)
        assert res.bundle.tokens <= used + spare
        assert sum(r.tokens for r in res.bundle.recalled) <= spare
        # Recall only adds: the summaries and the window are those without it.
        assert res.bundle.summaries == base.bundle.summaries
        assert res.bundle.messages == base.bundle.messages
    full = compile_context(
        store, THREAD, limits=fr.Limits(budget_tokens=used), recall=query, log=False
    )
    assert full.bundle.recalled == [] and full.decision.recall_hits == []
    assert "recall: no room left in the token budget" in full.decision.reasons


@pytest.mark.parametrize("bad", [0, -1, -1500])
def test_a_recall_budget_of_zero_or_less_is_invalid(session: tuple[Store, int], bad: int) -> None:
    store, _ = session
    before = store.thread(THREAD).head()
    with pytest.raises(InvalidLimits, match="recall_budget_tokens"):
        compile_context(store, THREAD, limits=fr.Limits(recall_budget_tokens=bad), recall="x1")
    with pytest.raises(InvalidLimits):
        compile_context(store, THREAD, limits=fr.Limits(recall_budget_tokens=bad))
    assert store.thread(THREAD).head() == before  # nothing logged


def test_a_long_frame_is_clipped_around_the_match(tmp_store: Store) -> None:
    filler = "lorem ipsum dolor " * 200
    t = tmp_store.thread(THREAD)
    t.append([text("assistant", filler + " the needle_word is here " + filler, "a1")])
    create_checkpoint(tmp_store, THREAD, 1, text="long text")
    t.append([text("user", "where was needle_word?", "u1")])
    res = compile_context(tmp_store, THREAD, recall="needle_word", log=False)
    [item] = res.bundle.recalled
    assert "needle_word" in item.text
    assert len(item.text) <= 802  # 800 characters and the two ellipses
    assert item.text.startswith("…") and item.text.endswith("…")


# --- determinism: the key property -----------------------------------------------------------

QUERY = "alembic migration retry_backoff.py orders"


def _same(a: CompileResult, b: CompileResult) -> None:
    assert a.bundle_bytes() == b.bundle_bytes()
    assert a.bundle_id == b.bundle_id
    assert msgspec.json.encode(a.decision) == msgspec.json.encode(b.decision)


def test_same_bundle_through_caches_without_them_and_after_deleting_them(
    session: tuple[Store, int],
) -> None:
    store, _ = session
    ref = compile_context(store, THREAD, recall=QUERY, log=False)
    assert ref.bundle.recalled
    _same(ref, compile_context(store, THREAD, recall=QUERY, log=False))
    _same(ref, compile_context(store, THREAD, recall=QUERY, log=False, use_caches=False))
    assert (store.cache_dir / "search").is_dir(), "the compile used (and built) a search index"
    shutil.rmtree(store.cache_dir / "search")
    _same(ref, compile_context(store, THREAD, recall=QUERY, log=False))
    shutil.rmtree(store.cache_dir)
    _same(ref, compile_context(store, THREAD, recall=QUERY, log=False))
    _same(ref, compile_context(Store(store.root, durable=False), THREAD, recall=QUERY, log=False))


def test_same_bundle_on_a_memory_store_copy(session: tuple[Store, int], clock: FixedClock) -> None:
    store, _ = session
    memory = MemoryStore(clock=clock)
    build_session(memory)
    assert list(memory.thread(THREAD).read_lines()) == list(store.thread(THREAD).read_lines())
    ref = compile_context(store, THREAD, recall=QUERY, log=False)
    for use_caches in (True, False):
        _same(ref, compile_context(memory, THREAD, recall=QUERY, log=False, use_caches=use_caches))


def test_frames_after_the_anchor_change_nothing(session: tuple[Store, int]) -> None:
    store, anchor = session
    ref = compile_context(store, THREAD, anchor=anchor, recall=QUERY, log=False)
    ref_true = compile_context(store, THREAD, anchor=anchor, recall=True, log=False)
    t = store.thread(THREAD)
    compile_context(store, THREAD, recall=QUERY)  # a logged decision
    # After the anchor: many more matching messages (enough to seal search segments, whose
    # statistics would change the scores if they leaked in), observations of earlier tool uses,
    # and checkpoints covering seqs before the anchor.
    later: list[fr.Frame] = []
    for i in range(300):
        later.append(text("user", f"alembic migration {i} of orders again", f"x{i}"))
    later.append(fr.ObservationRecorded(tool_use_id="tu1", text="alembic failed: orders exists"))
    t.append(later)
    create_checkpoint(store, THREAD, anchor, text="alembic migration orders summary")
    create_checkpoint(store, THREAD, 3, text="alembic early summary")
    for use_caches in (True, False):
        _same(
            ref,
            compile_context(
                store, THREAD, anchor=anchor, recall=QUERY, log=False, use_caches=use_caches
            ),
        )
        _same(
            ref_true,
            compile_context(
                store, THREAD, anchor=anchor, recall=True, log=False, use_caches=use_caches
            ),
        )
    _same(ref, compile_context(store, THREAD, anchor="u4", recall=QUERY, log=False))
    latest = compile_context(store, THREAD, recall=QUERY, log=False)
    assert latest.bundle.anchor_seq > anchor and latest.bundle_id != ref.bundle_id


_COMPILE_IN_A_CHILD = """
import sys
from continuity.context.compiler import compile_context
from continuity.store.jsonl import Store

res = compile_context(Store(sys.argv[1]), "t", recall=sys.argv[2], log=False)
print(res.bundle_id, len(res.bundle.recalled))
"""


@pytest.mark.slow
def test_same_bundle_in_other_processes_whatever_the_hash_seed(
    session: tuple[Store, int],
) -> None:
    store, _ = session
    ref = compile_context(store, THREAD, recall=QUERY, log=False)
    argv = [sys.executable, "-c", _COMPILE_IN_A_CHILD, str(store.root), QUERY]
    for seed in ("0", "1", "12345"):
        shutil.rmtree(store.cache_dir, ignore_errors=True)
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == [ref.bundle_id, str(len(ref.bundle.recalled))]


def _long_thread(store: BaseStore, n: int) -> None:
    """``n`` varied messages (search documents), so the index holds sealed segments and a tail."""
    words = ["alembic", "retry", "orders", "pytest", "frontend", "header", "schema", "lint"]
    frames: list[fr.Frame] = [fr.ThreadCreated(thread_id=THREAD)]
    for i in range(n):
        a, b = words[i % len(words)], words[(i * 7 + 3) % len(words)]
        if i % 5 == 4:
            frames.append(call(f"m{i}", f"tu{i}", "Bash", command=f"{a} --step {i} {b}"))
            frames.append(result(f"r{i}", f"tu{i}", f"{b} done {i}"))
        else:
            frames.append(text("user" if i % 2 else "assistant", f"{a} {b} note {i % 13}", f"m{i}"))
    store.thread(THREAD).append(frames)


@pytest.mark.slow
def test_same_bundle_whether_the_index_has_sealed_segments_or_not(
    tmp_store: Store, clock: FixedClock
) -> None:
    """At an anchor past several sealed 256-document segments, with the index caught up to the
    anchor or far beyond it, or absent: the same bundle as the plain scan of the prefix."""
    _long_thread(tmp_store, 700)
    create_checkpoint(tmp_store, THREAD, 600, text="the first 600 seqs")
    question = text("user", "which alembic step broke orders?", "q")
    [anchor] = tmp_store.thread(THREAD).append(question)
    limits = fr.Limits(recall_budget_tokens=400)
    ref = compile_context(
        tmp_store, THREAD, recall=True, limits=limits, log=False, use_caches=False
    )
    assert len(ref.bundle.recalled) >= 3
    assert all(r.seq <= 600 for r in ref.bundle.recalled)
    _same(ref, compile_context(tmp_store, THREAD, recall=True, limits=limits, log=False))
    memory = MemoryStore(clock=clock)
    _long_thread(memory, 700)
    create_checkpoint(memory, THREAD, 600, text="the first 600 seqs")
    memory.thread(THREAD).append(question)
    _same(ref, compile_context(memory, THREAD, recall=True, limits=limits, log=False))

    # Far more documents after the anchor (a 16-segment merge happens at 4,096).
    def segments() -> set[str]:
        return {p.name for p in (tmp_store.cache_dir / "search" / THREAD).glob("seg-*")}

    def at_anchor() -> CompileResult:
        return compile_context(
            tmp_store, THREAD, anchor=anchor, recall=True, limits=limits, log=False
        )

    more = [text("assistant", f"alembic orders follow-up {i}", f"y{i}") for i in range(3500)]
    tmp_store.thread(THREAD).append(more)
    sealed = segments()
    assert len(sealed) >= 2
    # The index reaches the recall's prefix already: it is read as it is, not caught up.
    _same(ref, at_anchor())
    assert segments() == sealed
    # Caught up far beyond the anchor, merging the sealed segments: read again by this process
    # (what the catch-up added) and by one that holds nothing of it yet.
    ThreadSearchIndex(tmp_store.thread(THREAD)).refresh()
    assert segments() != sealed, "the catch-up merged the sealed segments"
    _same(ref, at_anchor())
    forget()
    _same(ref, at_anchor())
    shutil.rmtree(tmp_store.cache_dir / "search")
    _same(ref, at_anchor())
    forget()
    _same(ref, at_anchor())


# --- properties over random threads ----------------------------------------------------------

_WORDS = ["cmd", "out1", "out2.0", "contents", "tu1", "f1", "/f2", "waiting", "m3", "Bash"]
_QUERIES = st.one_of(
    st.just(True),
    st.lists(st.sampled_from(_WORDS), min_size=1, max_size=4).map(" ".join),
    st.sampled_from(["!!", "line 2 yyy", "summary through", "observed tu2", "xxxx m1"]),
)


@st.composite
def recall_limits(draw: st.DrawFn) -> fr.Limits:
    limits = draw(limits_strategy())
    budget = draw(st.none() | st.integers(1, 300), label="recall budget")
    return msgspec.structs.replace(limits, recall_budget_tokens=budget)


def _check_recall(res: CompileResult, frames_by_seq: dict[int, fr.Frame], store: BaseStore) -> None:
    bundle, decision = res.bundle, res.decision
    if bundle.limits.budget_tokens is not None:
        assert bundle.tokens <= bundle.limits.budget_tokens
    recalled = bundle.recalled
    assert sum(r.tokens for r in recalled) <= (bundle.limits.recall_budget_tokens or 1500)
    if bundle.summaries:
        bound = bundle.summaries[-1].to_seq
    elif bundle.messages:
        bound = bundle.messages[0].seq - 1
    else:
        bound = bundle.anchor_seq
    window = {m.seq for m in bundle.messages}
    for r in recalled:
        assert r.seq <= bound
        assert r.seq not in window
        assert r.source_kind in ("message", "observation")
        frame = frames_by_seq[r.seq]
        kind = "message" if isinstance(frame, fr.MessageAppended) else "observation"
        assert r.source_kind == kind
        whole = frame_text(frame, store)
        assert r.text.strip("…") in whole
    assert all(h.seq <= bound for h in decision.recall_hits)
    included = [(h.seq, h.score) for h in decision.recall_hits if h.included]
    assert included == [(r.seq, r.score) for r in recalled]
    assert decision.tokens == bundle.tokens


@pytest.mark.slow
@settings(max_examples=80, deadline=None)
@given(scripts(max_steps=25), recall_limits(), _QUERIES, st.data())
def test_recall_agrees_across_paths_and_keeps_its_bounds(
    script: Script, limits: fr.Limits, recall: str | bool, data: st.DataObject
) -> None:
    cut = data.draw(st.integers(1, len(script.frames)), label="frames before the compile")
    anchor = data.draw(st.none() | st.integers(0, cut), label="anchor")
    with tempfile.TemporaryDirectory() as tmp:
        jsonl = Store(Path(tmp) / "s", create=True, durable=False, clock=FixedClock())
        memory = MemoryStore(clock=FixedClock())
        early = Script(script.frames[:cut], script.summaries, script.missing)
        for store in (jsonl, memory):
            early.replay(store)
        by_seq = {f.seq: f for f in memory.thread(THREAD).read()}

        def compile_all(at: int | None) -> list[CompileResult]:
            def compile_on(store: BaseStore, *, use_caches: bool = True) -> CompileResult:
                return compile_context(
                    store,
                    THREAD,
                    anchor=at,
                    limits=limits,
                    log=False,
                    recall=recall,
                    use_caches=use_caches,
                )

            return all_or_too_small(
                [
                    lambda: compile_on(jsonl),
                    lambda: compile_on(jsonl, use_caches=False),
                    lambda: compile_on(memory),
                ]
            )

        try:
            first = compile_all(anchor)
        except TooSmallEverywhere:
            return
        assert len({r.bundle_bytes() for r in first}) == 1
        assert len({msgspec.json.encode(r.decision) for r in first}) == 1
        _check_recall(first[0], by_seq, memory)
        fixed_anchor = first[0].bundle.anchor_seq
        shutil.rmtree(jsonl.cache_dir)
        assert compile_all(fixed_anchor)[0].bundle_bytes() == first[0].bundle_bytes()
        if cut < len(script.frames):
            for store in (jsonl, memory):
                store.thread(THREAD).append(script.frames[cut:])
        later = compile_all(fixed_anchor)
        assert {r.bundle_bytes() for r in later} == {first[0].bundle_bytes()}
        assert {msgspec.json.encode(r.decision) for r in later} == {
            msgspec.json.encode(first[0].decision)
        }
        by_seq = {f.seq: f for f in memory.thread(THREAD).read()}
        try:
            latest = compile_all(None)
        except TooSmallEverywhere:
            return
        assert len({r.bundle_bytes() for r in latest}) == 1
        _check_recall(latest[0], by_seq, memory)


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(scripts(max_steps=20), recall_limits(), _QUERIES)
def test_recall_never_breaks_the_token_budget(
    script: Script, limits: fr.Limits, recall: str | bool
) -> None:
    memory = MemoryStore(clock=FixedClock())
    script.replay(memory)
    res = compile_or_too_small(memory, limits=limits, recall=recall, log=False)
    without = compile_or_too_small(memory, limits=limits, log=False)
    assert (res is None) == (without is None)  # recall never makes the limits too small
    if res is None or without is None:
        return
    if limits.budget_tokens is not None:
        assert res.bundle.tokens <= limits.budget_tokens
    # Recall only adds items: the rest of the bundle is what it is without recall.
    assert res.bundle.summaries == without.bundle.summaries
    assert res.bundle.messages == without.bundle.messages
    assert res.bundle.tokens == without.bundle.tokens + sum(r.tokens for r in res.bundle.recalled)


# --- rendering -------------------------------------------------------------------------------


def _system_text(system: str | list[dict[str, str]]) -> str:
    """Anthropic's ``system``: a string, or text blocks (with cache breakpoints)."""
    return system if isinstance(system, str) else "\n\n".join(b["text"] for b in system)


def test_recalled_items_render_oldest_first_under_their_heading(
    session: tuple[Store, int],
) -> None:
    store, _ = session
    res = compile_context(store, THREAD, recall=QUERY, log=False)
    seqs = [r.seq for r in res.bundle.recalled]
    assert len(seqs) >= 2 and seqs != sorted(seqs)  # best first in the bundle…
    for text_of in (
        lambda b: _system_text(to_anthropic(b)["system"]),
        lambda b: to_openai(b)[0]["content"],
        to_text,
    ):
        rendered = text_of(res.bundle)
        section = rendered.split("## Recalled from earlier in this thread\n", 1)[1]
        shown = [int(m) for m in re.findall(r"^- \[seq (\d+)", section, re.MULTILINE)]
        assert shown == sorted(seqs)  # …oldest first when rendered
        for r in res.bundle.recalled:
            assert " ".join(r.text.split()) in section


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(scripts(max_steps=20), recall_limits(), _QUERIES, st.integers(0, 3000))
def test_text_with_recall_stays_within_max_chars(
    script: Script, limits: fr.Limits, recall: str | bool, max_chars: int
) -> None:
    memory = MemoryStore(clock=FixedClock())
    script.replay(memory)
    res = compile_or_too_small(memory, limits=limits, recall=recall, log=False)
    if res is None:
        return
    bundle = res.bundle
    assert len(to_text(bundle, max_chars=max_chars)) <= max_chars
    whole = to_text(bundle)
    assert ("## Recalled from earlier" in whole) == bool(bundle.recalled)
