"""``compile_context``: the recent window, the token budget, tool pairs, stubs, anchors, logging."""

from __future__ import annotations

from collections.abc import Iterator

import msgspec
import pytest
from hypothesis import given, settings, strategies as st

from continuity import frames as fr
from continuity.context.bundle import (
    ContextBundle,
    ElidedBlock,
    MessageItem,
    ToolStubBlock,
    bundle_bytes,
    decode_bundle,
)
from continuity.context.compiler import (
    STRATEGY_HIERARCHICAL,
    STRATEGY_RECENT,
    STRATEGY_SUMMARIES,
    CompileResult,
    compile_context,
)
from continuity.context.sources import IndexedSource
from continuity.errors import AnchorNotFound, ContextTooSmall, InvalidLimits, ThreadNotFound
from continuity.store.artifacts import artifact_id
from continuity.store.base import BaseStore
from continuity.store.jsonl import JsonlThread, Store
from continuity.store.memory import MemoryStore, MemoryThread
from continuity.tokens import estimate_text
from tests.support.compile import (
    THREAD,
    Script,
    call,
    checkpoint,
    compile_or_too_small,
    limits_strategy,
    put_summary,
    result,
    scripts,
    text,
)
from tests.support.narrow import head_seq


@pytest.fixture(params=["jsonl", "memory"])
def store(request: pytest.FixtureRequest, tmp_store: Store, memory_store: MemoryStore) -> BaseStore:
    return tmp_store if request.param == "jsonl" else memory_store


def _messages(store: BaseStore, n: int, *, size: int = 0) -> None:
    store.thread(THREAD).append(
        [text("user", f"m{i} " + "w" * size, f"m{i}") for i in range(1, n + 1)]
    )


# --- the recent window ----------------------------------------------------------------------


def test_the_window_is_bounded_by_recent_messages(store: BaseStore) -> None:
    _messages(store, 40)
    default = compile_context(store, THREAD, log=False)
    assert [m.seq for m in default.bundle.messages] == list(range(25, 41))
    assert any("the last 16 of 40 messages" in r for r in default.decision.reasons)
    five = compile_context(store, THREAD, log=False, limits=fr.Limits(recent_messages=5))
    assert [m.message_id for m in five.bundle.messages] == [f"m{i}" for i in range(36, 41)]
    # A request always holds the newest message and the turn it answers: no room is an error.
    with pytest.raises(ContextTooSmall) as none:
        compile_context(store, THREAD, log=False, limits=fr.Limits(recent_messages=0))
    assert (none.value.limit, none.value.needed, none.value.given) == ("recent_messages", 1, 0)
    assert "recent_messages=0 is too small" in str(none.value)
    many = compile_context(store, THREAD, log=False, limits=fr.Limits(recent_messages=100))
    assert len(many.bundle.messages) == 40
    assert not any(r.startswith("window:") for r in many.decision.reasons)


def test_message_items_carry_the_frames_content_and_tokens(store: BaseStore) -> None:
    _messages(store, 3, size=50)
    res = compile_context(store, THREAD, log=False)
    frames = [f for f in store.thread(THREAD).read() if isinstance(f, fr.MessageAppended)]
    for item, frame in zip(res.bundle.messages, frames, strict=True):
        assert (item.seq, item.message_id, item.role) == (frame.seq, frame.message_id, frame.role)
        assert item.content == frame.content and item.tokens == frame.tokens
    assert res.bundle.tokens == sum(m.tokens for m in frames)


# --- the token budget -----------------------------------------------------------------------


def _unbounded(limits: fr.Limits) -> fr.Limits:
    return msgspec.structs.replace(limits, budget_tokens=None)


def elided_seqs(bundle: ContextBundle) -> set[int]:
    """The seqs of the messages the notes say gave up blocks to stubs."""
    return {int(n.split()[3]) for n in bundle.notes if n.startswith("elided: message seq ")}


def assert_elided_from(item: MessageItem, whole: MessageItem, budget: int) -> None:
    """``item`` is ``whole`` with some blocks replaced by stubs, and now fits ``budget`` (a
    message elided alone exceeded it; one of the turn in flight made room for the rest)."""
    assert (item.seq, item.message_id, item.role) == (whole.seq, whole.message_id, whole.role)
    assert whole.tokens > item.tokens and budget >= item.tokens
    assert len(item.content) == len(whole.content)
    changed = [(a, b) for a, b in zip(item.content, whole.content, strict=True) if a != b]
    assert changed
    for stub, block in changed:
        assert isinstance(stub, ToolStubBlock | ElidedBlock), stub
        assert not isinstance(block, ToolStubBlock | ElidedBlock)


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(scripts(), limits_strategy(), st.data())
def test_the_budget_is_never_exceeded(
    script: Script, limits: fr.Limits, data: st.DataObject
) -> None:
    store = MemoryStore(clock=lambda: 1)
    script.replay(store)
    head = len(script.frames)
    anchor = data.draw(st.none() | st.integers(0, head), label="anchor")
    try:
        free = compile_context(store, THREAD, anchor=anchor, limits=_unbounded(limits), log=False)
    except ContextTooSmall as exc:  # too few recent_messages for the turn: budget or not
        assert exc.limit == "recent_messages" and exc.needed > limits.recent_messages
        with pytest.raises(ContextTooSmall):
            compile_context(store, THREAD, anchor=anchor, limits=limits, log=False)
        return
    try:
        got = compile_context(store, THREAD, anchor=anchor, limits=limits, log=False)
    except ContextTooSmall as exc:
        # Only the budget can be too small here (the unbounded compile went through), and only
        # when the turn in flight cannot fit it even with its largest blocks elided.
        assert exc.limit == "budget_tokens" and limits.budget_tokens is not None
        assert exc.needed > limits.budget_tokens == exc.given
        assert free.bundle.messages
        return
    bundle = got.bundle
    assert bundle.tokens == sum(i.tokens for i in bundle.items)
    if limits.budget_tokens is not None:
        assert bundle.tokens <= limits.budget_tokens
    # The budget only drops the oldest summaries and the oldest messages of the window, and
    # elides a message that cannot fit even alone (the notes name it).
    n_s = len(bundle.summaries)
    assert bundle.summaries == free.bundle.summaries[len(free.bundle.summaries) - n_s :]
    elided = elided_seqs(bundle)
    by_seq = {m.seq: m for m in free.bundle.messages}
    kept = bundle.messages
    pinned = kept[:1] if kept and len(kept) > 1 and kept[1].seq not in _after(free, kept[0]) else []
    n_m = len(kept) - len(pinned)
    suffix = free.bundle.messages[len(free.bundle.messages) - n_m :]
    if pinned:  # the latest user turn, kept before a window the budget cut short
        assert pinned[0].role == "user" and pinned[0].seq in by_seq
    for item, whole in zip(kept[len(pinned) :], suffix, strict=True):
        if item.seq in elided:
            assert limits.budget_tokens is not None
            assert_elided_from(item, whole, limits.budget_tokens)
        else:
            assert item == whole
    assert elided <= {m.seq for m in bundle.messages}
    assert bundle.strategy == {0: STRATEGY_RECENT, 1: STRATEGY_SUMMARIES}.get(
        n_s, STRATEGY_HIERARCHICAL
    )
    # The newest message is always there (whole, or elided when it alone exceeds the budget).
    assert bool(free.bundle.messages) == bool(bundle.messages)
    if free.bundle.messages:
        assert bundle.messages[-1].seq == free.bundle.messages[-1].seq
    budget = limits.budget_tokens
    if free.bundle.messages and budget is not None and free.bundle.messages[-1].tokens > budget:
        assert free.bundle.messages[-1].seq in elided, "the newest message exceeds the budget"


def _after(free: CompileResult, item: MessageItem) -> set[int]:
    """The seq of the message right after ``item`` in the unbounded window."""
    seqs = [m.seq for m in free.bundle.messages]
    i = seqs.index(item.seq) if item.seq in seqs else -1
    return {seqs[i + 1]} if 0 <= i < len(seqs) - 1 else set()


def test_a_message_too_large_for_the_budget_is_elided_and_the_notes_say_so(
    store: BaseStore,
) -> None:
    _messages(store, 10)
    aid = put_summary(store, 5, "short summary")
    store.thread(THREAD).append(checkpoint("c5", 5, aid))
    store.thread(THREAD).append(text("assistant", "z" * 4000 + "\nthe end", "huge"))
    res = compile_context(store, THREAD, log=False, limits=fr.Limits(budget_tokens=100))
    assert res.bundle.tokens <= 100
    newest = res.bundle.messages[-1]
    assert newest.message_id == "huge"
    (stub,) = newest.content
    assert isinstance(stub, ElidedBlock)
    assert (stub.block_type, stub.size, stub.tokens) == ("text", 4008, 1002)
    assert stub.first_line == "z" * 119 + "…"
    assert newest.tokens == 4 + estimate_text(stub.text())
    # The summary and the older messages that fit beside the stub stay.
    assert [s.to_seq for s in res.bundle.summaries] == [5]
    assert [m.seq for m in res.bundle.messages][:-1] == list(range(6, 11))
    (note,) = res.bundle.notes
    assert note.startswith(f"elided: message seq {newest.seq} (assistant) needs ~1006 tokens")
    assert "text of 4008 bytes" in note and note in res.decision.reasons
    # The log keeps the message whole.
    (frame,) = store.thread(THREAD).read(from_seq=newest.seq, to_seq=newest.seq)
    assert isinstance(frame, fr.MessageAppended)
    assert frame.content == [fr.TextBlock(text="z" * 4000 + "\nthe end")]


def test_when_not_even_a_stub_fits_the_decision_says_so(store: BaseStore) -> None:
    _messages(store, 10)
    aid = put_summary(store, 5, "short summary")
    store.thread(THREAD).append(checkpoint("c5", 5, aid))
    store.thread(THREAD).append(text("assistant", "z" * 4000, "huge"))
    with pytest.raises(ContextTooSmall) as small:
        compile_context(store, THREAD, log=False, limits=fr.Limits(budget_tokens=30))
    # the newest message elided still needs its stub's tokens, and the user turn before it
    assert (small.value.limit, small.value.given) == ("budget_tokens", 30)
    assert small.value.needed > 30
    ok = compile_context(
        store, THREAD, log=False, limits=fr.Limits(budget_tokens=small.value.needed)
    )
    assert ok.bundle.tokens <= small.value.needed
    assert ok.bundle.messages[-1].message_id == "huge"


def test_summaries_are_kept_when_the_window_is_empty(store: BaseStore) -> None:
    _messages(store, 10)
    for cid, to_seq in (("c4", 4), ("c10", 10)):
        aid = put_summary(store, to_seq, f"summary {to_seq}")
        store.thread(THREAD).append(checkpoint(cid, to_seq, aid))
    res = compile_context(store, THREAD, log=False, limits=fr.Limits(budget_tokens=1000))
    # The summary covers everything, yet the newest message stays raw: a request holds it.
    assert [m.seq for m in res.bundle.messages] == [10]
    assert [s.to_seq for s in res.bundle.summaries] == [4, 10]
    assert res.bundle.notes == []


def test_the_budget_drops_the_oldest_summary_first(store: BaseStore) -> None:
    _messages(store, 40, size=40)
    for to_seq in (8, 16, 32):
        aid = put_summary(store, to_seq, f"summary {to_seq} " + "s" * 400)
        store.thread(THREAD).append(checkpoint(f"c{to_seq}", to_seq, aid))
    free = compile_context(store, THREAD, log=False)
    assert [s.to_seq for s in free.bundle.summaries] == [8, 16, 32]
    s_tokens = [s.tokens for s in free.bundle.summaries]
    m_tokens = free.bundle.messages[-1].tokens
    budget = s_tokens[1] + s_tokens[2] + m_tokens  # room for two summaries and one message
    res = compile_context(store, THREAD, log=False, limits=fr.Limits(budget_tokens=budget))
    assert [s.to_seq for s in res.bundle.summaries] == [16, 32]
    assert [m.seq for m in res.bundle.messages] == [40]
    assert res.bundle.tokens == budget
    assert any("summary to_seq 8 dropped" in r for r in res.decision.reasons)
    assert any("window cut to 1 of" in r for r in res.decision.reasons)


def test_the_budget_keeps_a_call_with_its_result(store: BaseStore) -> None:
    _messages(store, 3)
    store.thread(THREAD).append([call("c", "tu1", command="x" * 400), result("r", "tu1", "short")])
    free = compile_context(store, THREAD, log=False)
    by_id = {m.message_id: m.tokens for m in free.bundle.messages}
    # Room for the result but not for its call: the exchange in flight cannot be cut.
    with pytest.raises(ContextTooSmall) as small:
        compile_context(store, THREAD, log=False, limits=fr.Limits(budget_tokens=by_id["r"] + 1))
    assert small.value.limit == "budget_tokens"
    both = by_id["r"] + by_id["c"] + by_id["m3"]
    res2 = compile_context(store, THREAD, log=False, limits=fr.Limits(budget_tokens=both))
    # the user turn, the call and its result: exactly the budget
    assert [m.message_id for m in res2.bundle.messages] == ["m3", "c", "r"]
    assert res2.bundle.tokens == both and not res2.bundle.notes


# --- tool pairs -----------------------------------------------------------------------------


def _result_ids(item: MessageItem) -> Iterator[str]:
    for b in item.content:
        if isinstance(b, fr.ToolResultBlock | ToolStubBlock):
            yield b.tool_use_id


def _call_ids(item: MessageItem) -> Iterator[str]:
    for b in item.content:
        if isinstance(b, fr.ToolUseBlock):
            yield b.id
        elif isinstance(b, ElidedBlock) and b.block_type == "tool_use":
            yield b.tool_use_id


def assert_pairs_intact(store: BaseStore, bundle: ContextBundle) -> None:
    window = bundle.messages
    if not window:
        return
    first_calls = set(_call_ids(window[0]))
    assert set(_result_ids(window[0])) <= first_calls, "the window starts with an orphan result"
    seen: set[str] = set()
    for item in window:
        seen.update(_call_ids(item))
        for rid in _result_ids(item):
            assert rid in seen, f"result {rid} at seq {item.seq} without its call in the window"
    in_window = {rid for item in window for rid in _result_ids(item)}
    frames = list(store.thread(THREAD).read(to_seq=bundle.anchor_seq))
    retracted = {
        q
        for f in frames
        if isinstance(f, fr.MessagesRetracted)
        for s in f.spans
        for q in range(s.from_seq, s.to_seq + 1)
    }
    assert not retracted & {m.seq for m in window}, "a retracted message is in the window"
    for frame in frames:
        if frame.seq in retracted:
            continue  # taken back: no longer part of the conversation
        if isinstance(frame, fr.MessageAppended) and frame.seq > window[0].seq:
            for b in frame.content:
                if isinstance(b, fr.ToolResultBlock) and b.tool_use_id in seen:
                    assert b.tool_use_id in in_window, f"call {b.tool_use_id} lost its result"


@pytest.mark.slow
@settings(max_examples=80, deadline=None)
@given(scripts(), limits_strategy(), st.data())
def test_tool_pairs_are_never_split(script: Script, limits: fr.Limits, data: st.DataObject) -> None:
    store = MemoryStore(clock=lambda: 1)
    script.replay(store)
    anchor = data.draw(st.none() | st.integers(0, len(script.frames)), label="anchor")
    res = compile_or_too_small(store, anchor=anchor, limits=limits, log=False)
    if res is None:
        return
    assert_pairs_intact(store, res.bundle)
    # keep_tool_outputs: the K newest results whole, every older one a stub (and a result too
    # large for the budget on its own a stub too, its message named in the notes).
    elided = elided_seqs(res.bundle)
    results = [
        (b, m.seq in elided)
        for m in res.bundle.messages
        for b in m.content
        if isinstance(b, fr.ToolResultBlock | ToolStubBlock)
    ]
    k = limits.keep_tool_outputs
    n_whole = len(results) if k is None else min(k, len(results))
    assert all(isinstance(b, ToolStubBlock) for b, _ in results[: len(results) - n_whole])
    assert all(
        isinstance(b, fr.ToolResultBlock) or was_elided
        for b, was_elided in results[len(results) - n_whole :]
    )


def test_a_window_never_starts_between_a_call_and_its_result(store: BaseStore) -> None:
    store.thread(THREAD).append(
        [
            text("user", "go", "u1"),
            call("a1", "tu1"),
            result("r1", "tu1", "one"),
            text("assistant", "done", "a2"),
        ]
    )
    res = compile_context(store, THREAD, log=False, limits=fr.Limits(recent_messages=2))
    # the user turn stays, before the newest message; the orphaned result does not
    assert [m.message_id for m in res.bundle.messages] == ["u1", "a2"]
    # the pinned user turn counts: three leave room for the newest message only
    res3 = compile_context(store, THREAD, log=False, limits=fr.Limits(recent_messages=3))
    assert [m.message_id for m in res3.bundle.messages] == ["u1", "a2"]
    res4 = compile_context(store, THREAD, log=False, limits=fr.Limits(recent_messages=4))
    assert [m.message_id for m in res4.bundle.messages] == ["u1", "a1", "r1", "a2"]
    assert any("leading message(s) dropped" in r for r in res.decision.reasons)


def test_results_answered_one_by_one_stay_with_their_calls(store: BaseStore) -> None:
    # Two calls in separate assistant messages, answered in order: a window that keeps the
    # second call but not the first must not keep the first call's result either.
    store.thread(THREAD).append(
        [
            text("user", "read both", "u1"),
            call("a1", "tu1", "Read"),
            call("a2", "tu2", "Read"),
            result("r1", "tu1", "first file"),
            result("r2", "tu2", "second file"),
            text("assistant", "both read", "a3"),
        ]
    )
    with pytest.raises(ContextTooSmall):  # a3 and the user turn u1 need two
        compile_context(store, THREAD, log=False, limits=fr.Limits(recent_messages=1))
    for n in range(2, 7):
        res = compile_context(store, THREAD, log=False, limits=fr.Limits(recent_messages=n))
        assert_pairs_intact(store, res.bundle)
    res4 = compile_context(store, THREAD, log=False, limits=fr.Limits(recent_messages=4))
    assert [m.message_id for m in res4.bundle.messages] == ["u1", "a3"]
    res5 = compile_context(store, THREAD, log=False, limits=fr.Limits(recent_messages=5))
    assert [m.message_id for m in res5.bundle.messages] == ["u1", "a3"]
    res6 = compile_context(store, THREAD, log=False, limits=fr.Limits(recent_messages=6))
    assert [m.message_id for m in res6.bundle.messages] == ["u1", "a1", "a2", "r1", "r2", "a3"]


# --- keep_tool_outputs: stubs and observations -----------------------------------------------

BIG = "\n".join(f"grep hit {i}: " + "q" * 60 for i in range(200))


@pytest.fixture
def tool_thread(store: BaseStore) -> tuple[BaseStore, int, str]:
    """Five tool pairs; the first has an observation in the prefix, the second's output lives
    in an artifact, the third has a blank first line; an observation for the second comes
    after the anchor."""
    big_id = store.artifacts.put(BIG.encode())
    t = store.thread(THREAD)
    t.append(
        [
            text("user", "start", "u0"),
            call("c1", "tu1", "Bash", command="ls"),
            result("r1", "tu1", "a.txt\nb.txt"),
            fr.ObservationRecorded(tool_use_id="tu1", text="ls listed a.txt and b.txt"),
            call("c2", "tu2", "Grep", pattern="hit"),
            result("r2", "tu2", BIG[:80] + "…", artifact_id=big_id, size=len(BIG.encode())),
            call("c3", "tu3", "Read", file_path="/x.py"),
            result("r3", "tu3", "\n\n   def main():  \n    pass", is_error=True),
            call("c4", "tu4", "Bash", command="pytest"),
            result("r4", "tu4", "4 passed"),
            call("c5", "tu5", "Bash", command="git status"),
            result("r5", "tu5", "clean"),
            fr.ObservationRecorded(tool_use_id="tu5", text="a kept output keeps its text"),
        ]
    )
    anchor = t.head()
    assert anchor is not None
    t.append(fr.ObservationRecorded(tool_use_id="tu2", text="recorded after the anchor"))
    return store, anchor.seq, big_id


def _blocks(bundle: ContextBundle) -> dict[str, fr.ToolResultBlock | ToolStubBlock]:
    return {
        b.tool_use_id: b
        for m in bundle.messages
        for b in m.content
        if isinstance(b, fr.ToolResultBlock | ToolStubBlock)
    }


def test_older_tool_outputs_become_stubs_or_observations(
    tool_thread: tuple[BaseStore, int, str],
) -> None:
    store, anchor, big_id = tool_thread
    original = {
        b.tool_use_id: b
        for f in store.thread(THREAD).read()
        if isinstance(f, fr.MessageAppended)
        for b in f.content
        if isinstance(b, fr.ToolResultBlock)
    }
    res = compile_context(
        store, THREAD, anchor=anchor, log=False, limits=fr.Limits(keep_tool_outputs=2)
    )
    blocks = _blocks(res.bundle)
    assert blocks["tu4"] == original["tu4"] and blocks["tu5"] == original["tu5"]
    assert blocks["tu1"] == ToolStubBlock(
        tool_use_id="tu1",
        tool_name="Bash",
        size=len(b"a.txt\nb.txt"),
        first_line="a.txt",
        observation="ls listed a.txt and b.txt",
    )
    assert blocks["tu1"].text() == "ls listed a.txt and b.txt"
    assert blocks["tu2"] == ToolStubBlock(
        tool_use_id="tu2",
        tool_name="Grep",
        size=len(BIG.encode()),
        first_line=BIG.splitlines()[0],
        artifact_id=big_id,
    )
    assert big_id in blocks["tu2"].text() and "Grep" in blocks["tu2"].text()
    stub3 = blocks["tu3"]
    assert isinstance(stub3, ToolStubBlock)
    assert (stub3.tool_name, stub3.first_line, stub3.is_error, stub3.observation) == (
        "Read",
        "def main():",
        True,
        None,
    )
    assert stub3.size == len(b"\n\n   def main():  \n    pass")
    assert any("3 older result(s) replaced (1 by observations)" in r for r in res.decision.reasons)
    # A stubbed message is cheaper than the original, and counted as what the model sees.
    item2 = next(m for m in res.bundle.messages if m.message_id == "r2")
    assert item2.tokens < next(f.tokens for f in _frames(store) if f.message_id == "r2") + 100
    assert res.bundle.tokens == sum(i.tokens for i in res.bundle.items)

    # The log keeps every output whole.
    again = {
        b.tool_use_id: b
        for f in _frames(store)
        for b in f.content
        if isinstance(b, fr.ToolResultBlock)
    }
    assert again == original
    assert store.artifacts.get(big_id) == BIG.encode()


def _frames(store: BaseStore) -> list[fr.MessageAppended]:
    return [f for f in store.thread(THREAD).read() if isinstance(f, fr.MessageAppended)]


def test_observations_after_the_anchor_are_not_used(
    tool_thread: tuple[BaseStore, int, str],
) -> None:
    store, anchor, _ = tool_thread
    limits = fr.Limits(keep_tool_outputs=0)
    at_anchor = _blocks(
        compile_context(store, THREAD, anchor=anchor, log=False, limits=limits).bundle
    )
    latest = _blocks(compile_context(store, THREAD, log=False, limits=limits).bundle)
    assert isinstance(at_anchor["tu2"], ToolStubBlock) and at_anchor["tu2"].observation is None
    assert isinstance(latest["tu2"], ToolStubBlock)
    assert latest["tu2"].observation == "recorded after the anchor"
    assert all(isinstance(b, ToolStubBlock) for b in latest.values())
    tu5 = latest["tu5"]
    assert isinstance(tu5, ToolStubBlock) and tu5.observation == "a kept output keeps its text"


def test_without_keep_tool_outputs_every_result_is_whole(
    tool_thread: tuple[BaseStore, int, str],
) -> None:
    store, anchor, _ = tool_thread
    res = compile_context(store, THREAD, anchor=anchor, log=False)
    assert all(isinstance(b, fr.ToolResultBlock) for b in _blocks(res.bundle).values())
    assert len(_blocks(res.bundle)) == 5
    assert not any(r.startswith("tool outputs") for r in res.decision.reasons)


# --- anchors and limits ---------------------------------------------------------------------


def test_anchor_by_seq_and_by_message_id(store: BaseStore) -> None:
    _messages(store, 30)
    by_seq = compile_context(store, THREAD, anchor=20, log=False)
    by_id = compile_context(store, THREAD, anchor="m20", log=False)
    assert by_seq.bundle_bytes() == by_id.bundle_bytes()
    assert by_seq.bundle.anchor_seq == 20 and by_seq.bundle.anchor_message_id == "m20"
    assert [m.seq for m in by_seq.bundle.messages] == list(range(5, 21))
    first = compile_context(store, THREAD, anchor=0, log=False)
    assert first.bundle.messages == [] and first.bundle.anchor_seq == 0


def test_the_default_anchor_skips_decisions_and_jobs(store: BaseStore) -> None:
    _messages(store, 5)
    store.thread(THREAD).append(fr.JobSpawned(job_id="j", kind="compaction"))
    store.thread(THREAD).append(fr.JobEnded(job_id="j", status="succeeded"))
    res = compile_context(store, THREAD)
    assert res.bundle.anchor_seq == 5
    again = compile_context(store, THREAD, log=False)
    assert again.bundle.anchor_seq == 5
    store.thread(THREAD).append(fr.ObservationRecorded(tool_use_id="x", text="y"))
    assert compile_context(store, THREAD, log=False).bundle.anchor_seq == 9


@pytest.mark.parametrize("anchor", [-1, 31, 10**9, "nope", ""])
def test_an_anchor_outside_the_log_raises(store: BaseStore, anchor: int | str) -> None:
    _messages(store, 30)
    with pytest.raises(AnchorNotFound):
        compile_context(store, THREAD, anchor=anchor, log=False)


def test_an_unknown_thread_raises(store: BaseStore) -> None:
    with pytest.raises(ThreadNotFound):
        compile_context(store, "missing", log=False)


@pytest.mark.parametrize(
    "limits",
    [
        fr.Limits(recent_messages=-1),
        fr.Limits(max_summary_refs=-1),
        fr.Limits(budget_tokens=0),
        fr.Limits(budget_tokens=-10),
        fr.Limits(keep_tool_outputs=-1),
    ],
)
def test_invalid_limits_raise(store: BaseStore, limits: fr.Limits) -> None:
    _messages(store, 3)
    with pytest.raises(InvalidLimits):
        compile_context(store, THREAD, limits=limits)
    assert head_seq(store.thread(THREAD)) == 3


# --- logging --------------------------------------------------------------------------------


def test_a_logged_compile_appends_one_decision_matching_the_bundle(store: BaseStore) -> None:
    _messages(store, 40, size=20)
    for to_seq in (8, 16, 36):
        aid = put_summary(store, to_seq, f"summary {to_seq}")
        store.thread(THREAD).append(checkpoint(f"c{to_seq}", to_seq, aid))
    limits = fr.Limits(recent_messages=3, budget_tokens=5000, keep_tool_outputs=1)
    before = store.thread(THREAD).head()
    assert before is not None
    res = compile_context(store, THREAD, limits=limits)
    after = store.thread(THREAD).head()
    assert after is not None and after.seq == before.seq + 1
    assert res.logged and res.decision.seq == after.seq
    logged = list(store.thread(THREAD).read(from_seq=after.seq))
    assert len(logged) == 1
    frame = logged[0]
    assert isinstance(frame, fr.ContextSelectionDecided)
    assert msgspec.structs.replace(frame, ts_ms=0, digest="") == res.decision

    bundle = res.bundle
    assert frame.strategy == bundle.strategy == STRATEGY_HIERARCHICAL
    assert frame.anchor_seq == bundle.anchor_seq == before.seq
    assert frame.limits == limits == bundle.limits
    refs = [(c.checkpoint_id, c.seq, c.to_seq, c.summary_artifact_id) for c in frame.checkpoints]
    assert refs == [
        (s.checkpoint_id, s.checkpoint_seq, s.to_seq, s.summary_artifact_id)
        for s in bundle.summaries
    ]
    assert [c.to_seq for c in frame.checkpoints] == [8, 16, 36]
    assert frame.checkpoint == frame.checkpoints[-1]
    assert (frame.window_from_seq, frame.window_to_seq) == (38, 40)
    assert frame.window_messages == len(bundle.messages) == 3
    assert frame.tokens == bundle.tokens
    assert frame.bundle_artifact_id == res.bundle_id == artifact_id(bundle_bytes(bundle))
    stored = store.artifacts.get(frame.bundle_artifact_id)
    assert stored == bundle_bytes(bundle)
    assert decode_bundle(stored) == bundle
    assert frame.reasons and frame.reasons[0].startswith("summaries: 3 selected")


def test_a_dry_run_appends_and_stores_nothing(store: BaseStore) -> None:
    _messages(store, 10)
    head = store.thread(THREAD).head()
    ids = list(store.artifacts.ids())
    res = compile_context(store, THREAD, log=False)
    assert not res.logged and res.decision.seq == -1
    assert store.thread(THREAD).head() == head
    assert list(store.artifacts.ids()) == ids
    assert not store.artifacts.exists(res.bundle_id)
    assert res.decision.bundle_artifact_id == res.bundle_id == artifact_id(res.bundle_bytes())


def test_a_failure_to_log_fails_the_compile(
    store: BaseStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    _messages(store, 10)
    head = store.thread(THREAD).head()

    def refuse(self: object, *args: object, **kwargs: object) -> range:
        raise OSError(28, "No space left on device")

    cls = JsonlThread if isinstance(store, Store) else MemoryThread
    monkeypatch.setattr(cls, "append", refuse)
    with pytest.raises(OSError, match="No space left"):
        compile_context(store, THREAD)
    monkeypatch.undo()
    assert store.thread(THREAD).head() == head
    # A dry run needs no append, so it still works.
    assert compile_context(store, THREAD, log=False).bundle.messages


def test_a_stubbed_message_still_counts_its_image(store: BaseStore) -> None:
    image = fr.ImageBlock(media_type="image/png", size=1000)
    store.thread(THREAD).append(
        [
            call("c1", "tu1", "Screenshot"),
            fr.message(
                "user",
                content=[fr.ToolResultBlock(tool_use_id="tu1", content="png\n" * 50), image],
                message_id="r1",
            ),
        ]
    )
    whole = compile_context(store, THREAD, log=False)
    stubbed = compile_context(store, THREAD, log=False, limits=fr.Limits(keep_tool_outputs=0))
    r_whole = whole.bundle.messages[-1]
    r_stub = stubbed.bundle.messages[-1]
    assert isinstance(r_stub.content[0], ToolStubBlock) and r_stub.content[1] == image
    image_tokens = fr.estimate_message_tokens([image]) - fr.estimate_message_tokens([])
    assert r_stub.tokens >= image_tokens
    assert r_stub.tokens < r_whole.tokens


def test_the_indexed_source_anchors_within_what_it_indexed(tmp_store: Store) -> None:
    _messages(tmp_store, 5)
    source = IndexedSource(tmp_store.thread(THREAD))
    # Another process appends after the source read the caches.
    tmp_store.thread(THREAD).append(text("user", "late", "late"))
    assert source.head_seq() == 5
    assert source.default_anchor() == 5
    assert source.seq_of_message_id("late") is None
    assert source.seq_of_message_id("m5") == 5


def test_compile_takes_a_thread_handle_or_a_store_and_an_id(store: BaseStore) -> None:
    _messages(store, 20)
    limits = fr.Limits(recent_messages=4)
    thread = store.thread(THREAD)
    via_thread = compile_context(thread, limits=limits, log=False)
    direct = compile_context(store, THREAD, limits=limits, log=False)
    assert via_thread.bundle_id == direct.bundle_id
    assert [m.seq for m in via_thread.bundle.messages] == [17, 18, 19, 20]
    logged = compile_context(thread, limits=limits)
    assert logged.logged and head_seq(thread) == logged.decision.seq
    with pytest.raises(ThreadNotFound):
        compile_context(store.thread("nobody"))
    with pytest.raises(TypeError):
        compile_context(store)  # type: ignore[call-overload]
    with pytest.raises(TypeError):
        compile_context(thread, "another")  # type: ignore[call-overload]


def test_tool_results_given_as_blocks_and_provider_blocks_count_and_stub(store: BaseStore) -> None:
    # A result given as parts (text and an image) costs its text and the image; its stub reads
    # its first line; a provider block costs its text; signed thinking is never elided.
    image = fr.ImageBlock(media_type="image/png", size=10, url="https://example.com/i.png")
    parts = fr.ToolResultBlock(
        tool_use_id="tu1",
        parts=[fr.TextBlock(text="first line of the output\n" + "p" * 4000), image],
    )
    server = fr.ProviderBlock(
        provider="anthropic", kind="web_search_tool_result", data={"x": 1}, text="w" * 800
    )
    thinking = fr.ThinkingBlock(text="t" * 4000, signature="sig")
    t = store.thread(THREAD)
    t.append(
        [
            text("user", "look", "u"),
            fr.message(
                "assistant", content=[thinking, call("c", "tu1").content[0]], message_id="c"
            ),
            fr.message("user", content=[parts, server], message_id="r"),
        ]
    )
    free = compile_context(store, THREAD, log=False, limits=fr.Limits(budget_tokens=None))
    r = free.bundle.messages[-1]
    assert r.tokens >= estimate_text("p" * 4000) + 1600 + estimate_text("w" * 800)
    tight = compile_context(store, THREAD, log=False, limits=fr.Limits(budget_tokens=2500))
    stub = tight.bundle.messages[-1].content[0]
    assert isinstance(stub, ToolStubBlock) and stub.first_line == "first line of the output"
    kept = tight.bundle.messages[1].content[0]
    assert kept == thinking  # signed thinking goes back unchanged or not at all
