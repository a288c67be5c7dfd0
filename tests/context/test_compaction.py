"""Compaction: where cuts land, cumulative summaries on their base, jobs, locks, and compile."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from continuity import frames as fr
from continuity.context.compaction import (
    CompactionJob,
    ManualCut,
    StrideMessages,
    TokenThreshold,
    create_checkpoint,
    parse_cut_rule,
    plan_cuts,
    run_compaction,
)
from continuity.context.compiler import STRATEGY_HIERARCHICAL, compile_context
from continuity.context.sources import open_source
from continuity.errors import InvalidCutRule, JobInFlight
from continuity.store import base as store_base
from continuity.store.base import BaseStore
from continuity.store.jsonl import Store
from continuity.store.memory import MemoryStore
from continuity.summary import SummaryContent, SummaryDoc, decode_summary
from continuity.testing import FixedClock
from tests.support.compile import THREAD, RecordingSummarizer, call, checkpoint, put_summary, text
from tests.support.processes import reap


@pytest.fixture(params=["jsonl", "memory"])
def store(request: pytest.FixtureRequest, tmp_store: Store, memory_store: MemoryStore) -> BaseStore:
    return tmp_store if request.param == "jsonl" else memory_store


def _plan(store: BaseStore, rule: StrideMessages | TokenThreshold | ManualCut) -> list[int]:
    cuts = plan_cuts(open_source(store.thread(THREAD)), rule)
    assert cuts == plan_cuts(open_source(store.thread(THREAD), use_caches=False), rule)
    return cuts


def _message_seqs(store: BaseStore) -> list[int]:
    return [f.seq for f in store.thread(THREAD).read() if isinstance(f, fr.MessageAppended)]


def _checkpoints(store: BaseStore) -> list[fr.CompactionCheckpointCreated]:
    return [f for f in store.thread(THREAD).read() if isinstance(f, fr.CompactionCheckpointCreated)]


def _summary(store: BaseStore, frame: fr.CompactionCheckpointCreated) -> SummaryDoc:
    return decode_summary(store.artifacts.get(frame.summary_artifact_id))


def _chatter(store: BaseStore, n: int, *, start: int = 1, every_obs: int = 0) -> None:
    """``n`` text messages m<start>…; an observation after every ``every_obs``-th one, so
    seqs and message ordinals differ."""
    frames: list[fr.Frame] = []
    for i in range(start, start + n):
        frames.append(text("user" if i % 2 else "assistant", f"m{i} " + "x" * (i % 7), f"m{i}"))
        if every_obs and i % every_obs == 0:
            frames.append(fr.ObservationRecorded(tool_use_id=f"none{i}", text="noise"))
    store.thread(THREAD).append(frames)


# --- cut rules ------------------------------------------------------------------------------


def test_parse_cut_rule() -> None:
    assert parse_cut_rule("stride_messages_v1/200") == StrideMessages(200)
    assert parse_cut_rule("token_threshold_v1/50000") == TokenThreshold(50000)
    assert StrideMessages(7).id == "stride_messages_v1/7"
    assert TokenThreshold(9).id == "token_threshold_v1/9"
    assert ManualCut(3).id == "manual_v1"
    for bad in ("stride_messages_v1/0", "stride_messages_v1/-1", "stride/3", "manual_v1", ""):
        with pytest.raises(InvalidCutRule):
            parse_cut_rule(bad)


def test_stride_cuts_land_on_every_nth_message(store: BaseStore) -> None:
    _chatter(store, 23, every_obs=3)
    seqs = _message_seqs(store)
    assert seqs != list(range(1, 24))  # the observations shift seqs away from ordinals
    assert _plan(store, StrideMessages(5)) == [seqs[4], seqs[9], seqs[14], seqs[19]]
    assert _plan(store, StrideMessages(1)) == seqs
    assert _plan(store, StrideMessages(24)) == []


def test_a_stride_cut_moves_past_the_result_of_a_call_at_the_cut(store: BaseStore) -> None:
    _chatter(store, 4)
    store.thread(THREAD).append(
        [
            call("c5", "tu1"),
            _result("r6", "tu1"),
            *[text("user", f"m{i}", f"m{i}") for i in range(7, 13)],
        ]
    )
    seqs = {
        f.message_id: f.seq
        for f in store.thread(THREAD).read()
        if isinstance(f, fr.MessageAppended)
    }
    # The 5th message is the call: the cut moves to its result; the 10th is still the 10th.
    assert _plan(store, StrideMessages(5)) == [seqs["r6"], seqs["m10"]]


def _result(mid: str, *ids: str) -> fr.MessageAppended:
    return fr.message(
        "user",
        content=[fr.ToolResultBlock(tool_use_id=i, content=f"out {i}") for i in ids],
        message_id=mid,
    )


def test_a_cut_waits_for_every_result_of_the_calls_at_the_cut(store: BaseStore) -> None:
    two_calls = fr.message(
        "assistant",
        content=[fr.ToolUseBlock(id="tu1", name="Read"), fr.ToolUseBlock(id="tu2", name="Read")],
        message_id="c2",
    )
    store.thread(THREAD).append(
        [
            text("user", "read both", "m1"),
            two_calls,
            _result("r1", "tu1"),
            _result("r2", "tu2"),
            text("assistant", "done", "m5"),
        ]
    )
    seqs = {
        f.message_id: f.seq
        for f in store.thread(THREAD).read()
        if isinstance(f, fr.MessageAppended)
    }
    # A cut after r1 would leave tu2's call in the summary and its result in the window.
    assert _plan(store, StrideMessages(2)) == [seqs["r2"]]
    assert _plan(store, ManualCut("c2")) == [seqs["r2"]]


def _reference_threshold(
    tokens: list[int], start: int, limit: int, pairs: dict[int, int]
) -> list[int]:
    """Ordinals of the cuts: the running total of the uncovered messages first exceeds the
    limit; a cut on a call moves to the message answering it; counting restarts after the cut."""
    cuts = []
    running = 0
    i = start
    while i < len(tokens):
        running += tokens[i]
        if running > limit:
            i = pairs.get(i, i)
            cuts.append(i)
            running = 0
        i += 1
    return cuts


def test_token_threshold_cuts_land_where_the_total_first_exceeds(store: BaseStore) -> None:
    frames: list[fr.Frame] = []
    for i in range(1, 31):
        frames.append(text("user", f"m{i} " + "t" * (40 * (i % 5)), f"m{i}"))
    store.thread(THREAD).append(frames)
    msgs = [f for f in store.thread(THREAD).read() if isinstance(f, fr.MessageAppended)]
    tokens = [m.tokens for m in msgs]
    want = _reference_threshold(tokens, 0, 100, {})
    assert len(want) >= 3
    assert _plan(store, TokenThreshold(100)) == [msgs[o].seq for o in want]
    assert _plan(store, TokenThreshold(sum(tokens))) == []
    assert _plan(store, TokenThreshold(sum(tokens) - 1)) == [msgs[-1].seq]


def test_token_threshold_counts_from_the_latest_cumulative_checkpoint(store: BaseStore) -> None:
    store.thread(THREAD).append([text("user", f"m{i} " + "t" * 60, f"m{i}") for i in range(1, 21)])
    msgs = [f for f in store.thread(THREAD).read() if isinstance(f, fr.MessageAppended)]
    aid = put_summary(store, msgs[9].seq, "first ten")
    store.thread(THREAD).append(checkpoint("c10", msgs[9].seq, aid))
    # An unsupported checkpoint later on does not count as covering anything.
    aid2 = put_summary(store, msgs[14].seq, "other", kind="segment_v1")
    store.thread(THREAD).append(checkpoint("s15", msgs[14].seq, aid2, kind="segment_v1"))
    tokens = [m.tokens for m in msgs]
    limit = 3 * tokens[0] - 1  # every third uncovered message crosses it
    want = _reference_threshold(tokens, 10, limit, {})
    assert want == [12, 15, 18]
    assert _plan(store, TokenThreshold(limit)) == [msgs[o].seq for o in want]


def test_token_threshold_restarts_counting_after_a_moved_cut(store: BaseStore) -> None:
    frames: list[fr.Frame] = [text("user", "m1 " + "t" * 60, "m1")]
    frames += [call("c2", "tu1", command="x" * 60), _result("r3", "tu1")]
    frames += [text("user", f"m{i} " + "t" * 60, f"m{i}") for i in range(4, 12)]
    store.thread(THREAD).append(frames)
    msgs = [f for f in store.thread(THREAD).read() if isinstance(f, fr.MessageAppended)]
    tokens = [m.tokens for m in msgs]
    limit = tokens[0] + tokens[1] - 1  # crossed at the call (ordinal 1): the cut moves to 2
    want = _reference_threshold(tokens, 0, limit, {1: 2})
    assert want[0] == 2
    assert _plan(store, TokenThreshold(limit)) == [msgs[o].seq for o in want]


def test_manual_cuts_by_seq_and_by_message_id(store: BaseStore) -> None:
    _chatter(store, 12, every_obs=4)
    seqs = {
        f.message_id: f.seq
        for f in store.thread(THREAD).read()
        if isinstance(f, fr.MessageAppended)
    }
    assert _plan(store, ManualCut("m7")) == [seqs["m7"]]
    assert _plan(store, ManualCut(seqs["m7"])) == [seqs["m7"]]
    # A seq that is not a message cuts at the latest message before it.
    obs_seq = seqs["m8"] + 1
    assert _plan(store, ManualCut(obs_seq)) == [seqs["m8"]]
    head = store.thread(THREAD).head()
    assert head is not None
    for bad in (ManualCut(head.seq + 1), ManualCut(-1), ManualCut("nope"), ManualCut(0)):
        with pytest.raises(InvalidCutRule):
            _plan(store, bad)


def test_plan_cuts_skips_cuts_already_checkpointed(store: BaseStore) -> None:
    _chatter(store, 20)
    seqs = _message_seqs(store)
    aid = put_summary(store, seqs[9], "ten")
    store.thread(THREAD).append(checkpoint("c10", seqs[9], aid))
    aid2 = put_summary(store, seqs[4], "five", kind="segment_v1")
    store.thread(THREAD).append(checkpoint("s5", seqs[4], aid2, kind="segment_v1"))
    # The segment checkpoint at the 5th message is not cumulative: that cut is still missing.
    assert _plan(store, StrideMessages(5)) == [seqs[4], seqs[14], seqs[19]]
    run_compaction(store, THREAD, StrideMessages(5), summarizer=RecordingSummarizer())
    assert _plan(store, StrideMessages(5)) == []
    _chatter(store, 5, start=21)
    assert _plan(store, StrideMessages(5)) == [_message_seqs(store)[24]]


# --- summaries and their bases --------------------------------------------------------------


def test_each_cumulative_summary_records_its_base(store: BaseStore) -> None:
    _chatter(store, 15, every_obs=4)
    seqs = _message_seqs(store)
    summarizer = RecordingSummarizer()
    res = run_compaction(store, THREAD, StrideMessages(5), summarizer=summarizer)
    assert res.status == "succeeded" and res.planned == [seqs[4], seqs[9], seqs[14]]
    frames = _checkpoints(store)
    assert [(f.checkpoint_id, f.seq) for f in frames] == [
        (f.checkpoint_id, f.seq) for f in res.checkpoints
    ]
    docs = [_summary(store, f) for f in frames]
    assert [d.to_seq for d in docs] == [f.to_seq for f in frames] == res.planned
    assert docs[0].base_checkpoint_id is None and docs[0].base_summary_artifact_id is None
    for prev, frame, doc in zip(frames, frames[1:], docs[1:], strict=False):
        assert doc.base_checkpoint_id == prev.checkpoint_id == frame.base_checkpoint_id
        assert doc.base_summary_artifact_id == prev.summary_artifact_id
    for f, d in zip(frames, docs, strict=True):
        assert (f.summary_kind, d.summary_kind, f.from_seq, d.from_seq) == (
            "cumulative_v1",
            "cumulative_v1",
            0,
            0,
        )
        assert f.cut_rule_id == "stride_messages_v1/5"
        assert f.produced_by == d.produced_by == "test.recording/1"
        assert d.thread_id == THREAD
        assert f.to_message_id == f"m{seqs.index(f.to_seq) + 1}"
    # The summarizer saw the base document and exactly the messages after it up to the cut.
    assert [c[1] for c in summarizer.calls] == [seqs[0:5], seqs[5:10], seqs[10:15]]
    assert summarizer.calls[0][0] is None
    assert summarizer.calls[1][0] == docs[0] and summarizer.calls[2][0] == docs[1]
    assert docs[2].text.split() == [f"{s}:m{i + 1}" for i, s in enumerate(seqs)]
    assert docs[2].sections == {"seqs": [str(s) for s in seqs[10:15]]}

    # A later job builds on the last checkpoint of the earlier one.
    _chatter(store, 5, start=16)
    later = RecordingSummarizer()
    run_compaction(store, THREAD, StrideMessages(5), summarizer=later)
    new = _checkpoints(store)[-1]
    assert _summary(store, new).base_checkpoint_id == frames[-1].checkpoint_id
    assert later.calls[0][0] == docs[2]
    assert later.calls[0][1] == _message_seqs(store)[15:20]


def test_a_base_whose_summary_is_missing_is_skipped(store: BaseStore) -> None:
    _chatter(store, 10)
    seqs = _message_seqs(store)
    store.thread(THREAD).append(checkpoint("ghost", seqs[4], "d" * 64))
    summarizer = RecordingSummarizer()
    frame = create_checkpoint(store, THREAD, seqs[9], summarizer=summarizer)
    assert summarizer.calls == [(None, seqs)]
    assert frame.base_checkpoint_id is None


def test_create_checkpoint_with_a_given_text(store: BaseStore) -> None:
    _chatter(store, 10)
    seqs = _message_seqs(store)
    first = create_checkpoint(store, THREAD, seqs[3], text="# What happened\nthe first four")
    doc = _summary(store, first)
    assert doc.text == "# What happened\nthe first four"
    assert doc.produced_by == first.produced_by == "manual"
    assert doc.sections == {} and doc.base_checkpoint_id is None
    assert first.cut_rule_id == "manual_v1" and first.to_seq == seqs[3]
    assert first.to_message_id == "m4"
    head = store.thread(THREAD).head()
    assert head is not None and first.seq == head.seq
    second = create_checkpoint(store, THREAD, seqs[9], text="all ten", produced_by="claude-sonnet")
    doc2 = _summary(store, second)
    assert (doc2.text, doc2.produced_by, second.produced_by) == (
        "all ten",
        "claude-sonnet",
        "claude-sonnet",
    )
    assert doc2.base_checkpoint_id == first.checkpoint_id == second.base_checkpoint_id
    assert doc2.base_summary_artifact_id == first.summary_artifact_id
    res = compile_context(store, THREAD, log=False)
    assert [s.text for s in res.bundle.summaries] == ["# What happened\nthe first four", "all ten"]
    with pytest.raises(InvalidCutRule):
        create_checkpoint(store, THREAD, 10**6, text="x")


# --- jobs -----------------------------------------------------------------------------------


def test_run_compaction_logs_the_job_around_its_checkpoints(store: BaseStore) -> None:
    _chatter(store, 10)
    head = store.thread(THREAD).head()
    assert head is not None
    res = run_compaction(store, THREAD, StrideMessages(5), summarizer=RecordingSummarizer())
    new = list(store.thread(THREAD).read(from_seq=head.seq + 1))
    assert [f.__struct_config__.tag for f in new] == [
        "job_spawned",
        "compaction_checkpoint_created",
        "compaction_checkpoint_created",
        "job_ended",
    ]
    spawned, ended = new[0], new[-1]
    assert isinstance(spawned, fr.JobSpawned) and isinstance(ended, fr.JobEnded)
    assert spawned.job_id == ended.job_id == res.job_id
    assert spawned.kind == "compaction"
    assert spawned.params == {"cut_rule_id": "stride_messages_v1/5", "cuts": res.planned}
    assert (ended.status, ended.error, ended.result) == ("succeeded", None, {"checkpoints": 2})
    assert [f.seq for f in res.checkpoints] == [new[1].seq, new[2].seq]


@pytest.mark.parametrize("fail_at", [0, 1])
def test_a_failing_summarizer_is_logged_and_leaves_no_checkpoint(
    store: BaseStore, fail_at: int
) -> None:
    _chatter(store, 15)
    res = run_compaction(
        store, THREAD, StrideMessages(5), summarizer=RecordingSummarizer(fail_at_call=fail_at)
    )
    assert res.status == "failed"
    assert res.error == "RuntimeError: summarizer exploded on purpose"
    assert len(res.checkpoints) == fail_at == len(_checkpoints(store))
    last = store.thread(THREAD).tail(1)[0]
    assert isinstance(last, fr.JobEnded) and last.job_id == res.job_id
    assert (last.status, last.error) == ("failed", res.error)
    assert last.result == {"checkpoints": fail_at}
    # The failed cut (and those after it) are still planned for the next job.
    assert _plan(store, StrideMessages(5)) == res.planned[fail_at:]


def test_an_interruption_is_logged_as_cancelled_and_raised(store: BaseStore) -> None:
    _chatter(store, 15)

    class Interrupted(RecordingSummarizer):
        def summarize(
            self, base: SummaryDoc | None, messages: Sequence[fr.MessageAppended]
        ) -> SummaryContent:
            if self.calls:
                raise KeyboardInterrupt
            return super().summarize(base, messages)

    with pytest.raises(KeyboardInterrupt):
        run_compaction(store, THREAD, StrideMessages(5), summarizer=Interrupted())
    last = store.thread(THREAD).tail(1)[0]
    assert isinstance(last, fr.JobEnded)
    assert (last.status, last.error, last.result) == (
        "cancelled",
        "KeyboardInterrupt",
        {"checkpoints": 1},
    )
    # The lock was given back, and the next job plans what is missing.
    res = run_compaction(store, THREAD, StrideMessages(5), summarizer=RecordingSummarizer())
    assert res.status == "succeeded" and len(res.checkpoints) == 2


def test_the_job_steps_are_the_job(store: BaseStore) -> None:
    """``CompactionJob`` (what run_compaction and the async face both drive): start, then
    plan, summarize, commit per cut, then end, gives run_compaction's checkpoints."""
    _chatter(store, 15)
    summarizer = RecordingSummarizer()
    job = CompactionJob(store.thread(THREAD), StrideMessages(5))
    started_before = job.started  # a name of its own: mypy would keep job.started narrowed
    assert not started_before
    with store.job_lock(THREAD, "compaction"):
        cuts = job.start()
        assert job.started and cuts == job.result.planned
        for to_seq in cuts:
            plan = job.plan(to_seq)
            assert plan.to_seq == to_seq and plan.messages[-1].seq == to_seq
            assert (plan.base is None) == (to_seq == cuts[0])
            job.commit(plan, summarizer.summarize(plan.base, plan.messages), summarizer.id)
        result = job.end()
    assert result.status == "succeeded" and len(result.checkpoints) == 3
    assert [c.checkpoint_id for c in result.checkpoints] == [
        c.checkpoint_id for c in _checkpoints(store)
    ]
    ended = store.thread(THREAD).tail(1)[0]
    assert isinstance(ended, fr.JobEnded) and ended.result == {"checkpoints": 3}
    again = CompactionJob(store.thread(THREAD), StrideMessages(5))
    assert again.start() == [] and not again.started  # nothing to do: nothing appended
    assert again.result.status == "nothing_to_do"


def test_nothing_planned_logs_no_job(store: BaseStore) -> None:
    _chatter(store, 4)
    head = store.thread(THREAD).head()
    res = run_compaction(store, THREAD, StrideMessages(5), summarizer=RecordingSummarizer())
    assert (res.status, res.checkpoints, res.planned) == ("nothing_to_do", [], [])
    assert store.thread(THREAD).head() == head


class _Blocking:
    """A summarizer that holds its job open until released."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    @property
    def id(self) -> str:
        return "test.blocking/1"

    def summarize(
        self, base: SummaryDoc | None, messages: Sequence[fr.MessageAppended]
    ) -> SummaryContent:
        self.entered.set()
        assert self.release.wait(30)
        return SummaryContent(text="held")


def test_a_second_job_for_the_thread_raises_job_in_flight(
    store: BaseStore, store_path: Path, clock: FixedClock
) -> None:
    _chatter(store, 10)
    blocking = _Blocking()
    outcome: list[object] = []
    worker = threading.Thread(
        target=lambda: outcome.append(
            run_compaction(store, THREAD, StrideMessages(5), summarizer=blocking)
        )
    )
    worker.start()
    try:
        assert blocking.entered.wait(30)
        with pytest.raises(JobInFlight):
            run_compaction(store, THREAD, StrideMessages(5), summarizer=RecordingSummarizer())
        if isinstance(store, Store):  # another handle on the same folder: the file lock
            other = Store(store_path, durable=False, clock=clock)
            with pytest.raises(JobInFlight):
                run_compaction(other, THREAD, StrideMessages(5), summarizer=RecordingSummarizer())
        # Another thread of the same store is not blocked.
        store.thread("other").append(text("user", "hi", "o1"))
        res = run_compaction(store, "other", StrideMessages(1), summarizer=RecordingSummarizer())
        assert res.status == "succeeded"
    finally:
        blocking.release.set()
        worker.join(30)
    assert len(outcome) == 1
    assert len(_checkpoints(store)) == 2
    again = run_compaction(store, THREAD, ManualCut("m3"), summarizer=RecordingSummarizer())
    assert again.status == "succeeded"


_HOLDER = textwrap.dedent(
    """
    import sys
    from continuity.context.compaction import StrideMessages, run_compaction
    from continuity.store.jsonl import Store
    from continuity.summary import SummaryContent

    class Holder:
        id = "test.holder/1"
        def summarize(self, base, messages):
            print("holding", flush=True)
            sys.stdin.read()  # until the parent closes our stdin
            return SummaryContent(text="held")

    res = run_compaction(Store(sys.argv[1], durable=False), "t", StrideMessages(5),
                         summarizer=Holder())
    print(res.status, len(res.checkpoints), flush=True)
    """
)


@pytest.mark.slow
def test_a_job_held_by_another_process_blocks_this_one(tmp_store: Store) -> None:
    _chatter(tmp_store, 5)
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(tmp_store.root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdin is not None
        assert proc.stdout.readline().strip() == "holding"
        with pytest.raises(JobInFlight):
            run_compaction(tmp_store, THREAD, ManualCut("m2"), summarizer=RecordingSummarizer())
        proc.stdin.close()
        assert proc.stdout.readline().split() == ["succeeded", "1"]
        assert proc.wait(60) == 0
    finally:
        reap(proc)
    res = run_compaction(tmp_store, THREAD, ManualCut("m2"), summarizer=RecordingSummarizer())
    assert res.status == "succeeded"


# --- compile after compaction ---------------------------------------------------------------


def test_compile_after_compaction_selects_the_new_checkpoints(store: BaseStore) -> None:
    _chatter(store, 40)
    run_compaction(store, THREAD, StrideMessages(4), summarizer=RecordingSummarizer())
    made = {f.to_seq: f for f in _checkpoints(store)}
    assert sorted(made) == list(range(4, 41, 4))
    res = compile_context(store, THREAD, log=False)
    # 40, then the latest <= 20 (20), then the latest <= 10 (8).
    assert [s.to_seq for s in res.bundle.summaries] == [8, 20, 40]
    assert res.bundle.strategy == STRATEGY_HIERARCHICAL
    assert [s.checkpoint_id for s in res.bundle.summaries] == [
        made[t].checkpoint_id for t in (8, 20, 40)
    ]
    # The checkpoint covers m40, yet the newest message and the user turn it answers stay raw:
    # a request always holds them (ADR 0018).
    assert [m.message_id for m in res.bundle.messages] == ["m39", "m40"]
    assert [m.role for m in res.bundle.messages] == ["user", "assistant"]
    _chatter(store, 3, start=41)
    res2 = compile_context(store, THREAD, log=False)
    assert [m.message_id for m in res2.bundle.messages] == ["m41", "m42", "m43"]
    assert [s.to_seq for s in res2.bundle.summaries] == [8, 20, 40]
    # The summaries in the bundle are the stored ones.
    assert res2.bundle.summaries[-1].text == _summary(store, made[40]).text


class _SlowSet(set[tuple[int, str, str]]):
    """Widens the gap between checking for a running job and claiming the thread."""

    def __contains__(self, item: object) -> bool:
        found = super().__contains__(item)
        time.sleep(0.05)  # between the answer and the caller acting on it
        return found


def test_two_jobs_started_at_once_on_a_memory_store_run_one_at_a_time(
    memory_store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    _chatter(memory_store, 10)
    monkeypatch.setattr(store_base, "_HELD", _SlowSet())
    blocking = _Blocking()
    outcomes: list[str] = []
    start = threading.Barrier(2)

    def job() -> None:
        start.wait()
        try:
            run_compaction(memory_store, THREAD, StrideMessages(5), summarizer=blocking)
            outcomes.append("ran")
        except JobInFlight:
            outcomes.append("in flight")

    workers = [threading.Thread(target=job) for _ in range(2)]
    for w in workers:
        w.start()
    deadline = time.monotonic() + 10
    while not outcomes and time.monotonic() < deadline:
        time.sleep(0.01)
    blocking.release.set()
    for w in workers:
        w.join(30)
    assert sorted(outcomes) == ["in flight", "ran"]
    assert len(_checkpoints(memory_store)) == 2


def _long_run_batches(turns: int) -> list[list[fr.MessageAppended]]:
    """Batches as a runner appends them, with tool calls answered in a later batch, calls
    answered one message at a time, and calls never answered: pair-keeping at the thread's end
    is undecided until the answer arrives."""
    from tests.support.compile import result

    batches: list[list[fr.MessageAppended]] = []
    for i in range(turns):
        user = text("user", f"turn {i}", f"u{i}")
        if i % 4 == 0:
            batches.append([user, call(f"c{i}", f"t{i}")])
            batches.append([result(f"r{i}", f"t{i}"), text("assistant", "done", f"a{i}")])
        elif i % 4 == 1:
            two = fr.message(
                "assistant",
                content=[
                    fr.ToolUseBlock(id=f"t{i}a", name="Bash", input={}),
                    fr.ToolUseBlock(id=f"t{i}b", name="Bash", input={}),
                ],
                message_id=f"c{i}",
            )
            batches.append([user, two, result(f"r{i}a", f"t{i}a")])
            batches.append([result(f"r{i}b", f"t{i}b")])
        elif i % 4 == 2:
            batches.append([user, call(f"c{i}", f"t{i}x")])  # never answered
        else:
            batches.append([user, text("assistant", "plain", f"a{i}")])
    return batches


@pytest.mark.slow
@pytest.mark.parametrize("rule", [StrideMessages(3), StrideMessages(5), TokenThreshold(40)])
def test_remembered_pair_keeping_plans_the_same_cuts_over_a_long_run(
    tmp_path: Path, rule: StrideMessages | TokenThreshold, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job remembers pair-keeping answers between runs (so a run that cuts nothing reads no
    frames for the cuts made before); the checkpoints of a long run are the ones planning from
    scratch each time makes, also after a retraction takes summarised messages back."""
    from continuity.context import compaction
    from continuity.context.retract import retract

    def run(store: BaseStore) -> list[tuple[int, str]]:
        t = store.thread(THREAD)
        for n, batch in enumerate(_long_run_batches(60)):
            t.append(batch)
            if n == 50:
                retract(t, message_ids=["u3", "a3"])
            source = open_source(t)
            assert compaction._plan_cuts(
                source, rule, compaction._pair_memo(t, source)
            ) == plan_cuts(open_source(t, use_caches=False), rule)
            run_compaction(t, rule)
        return [(c.to_seq, c.base_checkpoint_id or "") for c in _checkpoints(store)]

    remembered = run(Store(tmp_path / "a", create=True, durable=False, clock=FixedClock()))
    with monkeypatch.context() as m:
        m.setattr(compaction, "_pair_memo", lambda thread, source: None)
        scratch = run(Store(tmp_path / "b", create=True, durable=False, clock=FixedClock()))
    assert len(remembered) > 10 and remembered == scratch


def test_remembered_pair_keeping_is_dropped_for_another_log(tmp_path: Path) -> None:
    """The answers are checked against one frame's digest (the chain pins the frames before it):
    a log replaced under the same id, pairs placed differently, is planned from scratch."""
    from continuity.context import compaction
    from tests.support.compile import result

    a = Store(tmp_path / "a", create=True, durable=False, clock=FixedClock())
    b = Store(tmp_path / "b", create=True, durable=False, clock=FixedClock())
    rule = StrideMessages(2)
    a.thread(THREAD).append(
        [text("user", "q", "u"), call("c", "t1"), result("r", "t1"), text("user", "x", "x")]
    )
    b.thread(THREAD).append([text("user", "q" * 400, "u"), text("assistant", "a", "a")] * 2)
    t = a.thread(THREAD)
    source = open_source(t)
    assert compaction._plan_cuts(source, rule, compaction._pair_memo(t, source)) == [3, 4]
    a.thread(THREAD).path.write_bytes(b.thread(THREAD).path.read_bytes())
    source = open_source(t)
    assert compaction._plan_cuts(source, rule, compaction._pair_memo(t, source)) == plan_cuts(
        open_source(t, use_caches=False), rule
    )
