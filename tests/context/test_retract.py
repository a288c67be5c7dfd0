"""Undo without deleting: retraction in the log, in compile, recall, log and verify."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from continuity import frames as fr
from continuity.context.compiler import compile_context
from continuity.context.render import to_anthropic
from continuity.context.retract import (
    clear_messages,
    live_messages,
    pop_message,
    retract,
    retracted_spans,
)
from continuity.errors import BadFrame, ContextTooSmall, MessageNotFound
from continuity.maintenance.verify import verify_store
from continuity.store.base import BaseStore
from continuity.store.jsonl import Store
from continuity.store.memory import MemoryStore
from continuity.testing import FixedClock
from tests.support.compile import call, checkpoint, put_summary, result, text
from tests.support.narrow import head_seq

T = "t"


@pytest.fixture(params=["jsonl", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> BaseStore:
    if request.param == "jsonl":
        return Store(tmp_path / "s", create=True, durable=False, clock=FixedClock())
    return MemoryStore(clock=FixedClock())


def _chat(store: BaseStore, n: int) -> None:
    roles: tuple[fr.Role, fr.Role] = ("user", "assistant")
    store.thread(T).append([text(roles[i % 2], f"turn {i} text", f"m{i}") for i in range(n)])


def _window_ids(
    store: BaseStore, *, anchor: int | None = None, limits: fr.Limits | None = None
) -> list[str]:
    res = compile_context(store, T, log=False, anchor=anchor, limits=limits)
    return [m.message_id for m in res.bundle.messages]


def test_a_retracted_message_leaves_the_context_but_not_the_log(store: BaseStore) -> None:
    _chat(store, 6)  # seqs 1..6
    t = store.thread(T)
    before_bytes = list(t.read_lines())
    seq = retract(t, message_ids=["m3"], reason="RemoveMessage")
    assert seq == 7
    (frame,) = t.read(from_seq=7)
    assert isinstance(frame, fr.MessagesRetracted)
    assert frame.spans == [fr.SeqSpan(from_seq=4, to_seq=4)] and frame.message_ids == ["m3"]
    assert list(t.read_lines())[:7] == before_bytes  # nothing before it changed
    assert _window_ids(store) == ["m0", "m1", "m2", "m4", "m5"]
    assert _window_ids(store, anchor=6) == [f"m{i}" for i in range(6)]  # before: unchanged
    assert retracted_spans(t) == [(4, 4)]
    assert retracted_spans(t, anchor_seq=6) == []
    assert [m.message_id for m in live_messages(t)] == ["m0", "m1", "m2", "m4", "m5"]
    report = verify_store(store) if isinstance(store, Store) else None
    assert report is None or report.ok


def test_retract_refuses_what_is_not_a_live_message(store: BaseStore) -> None:
    _chat(store, 3)
    t = store.thread(T)
    with pytest.raises(MessageNotFound, match="seq 0 is not a message"):
        retract(t, seqs=[0])
    with pytest.raises(MessageNotFound, match="seq 99"):
        retract(t, seqs=[99])
    with pytest.raises(MessageNotFound, match="'nope'"):
        retract(t, message_ids=["m1", "nope"])
    with pytest.raises(MessageNotFound, match="name the messages"):
        retract(t)
    head = t.head()
    assert retract(t, seqs=[2]) == 4
    assert retract(t, seqs=[2]) is None  # retracted already: nothing appended
    with pytest.raises(MessageNotFound):
        retract(t, message_ids=["m1"])  # m1 (seq 2) is no longer live
    assert head is not None and head_seq(t) == head.seq + 1
    with pytest.raises(BadFrame, match="must lie within"):
        t.append(fr.MessagesRetracted(spans=[fr.SeqSpan(from_seq=3, to_seq=9)]))
    with pytest.raises(BadFrame, match="retracts nothing"):
        t.append(fr.MessagesRetracted(spans=[]))


def test_a_reused_id_retracts_the_latest_live_message_with_it(store: BaseStore) -> None:
    t = store.thread(T)
    t.append([text("user", "v1", "x"), text("assistant", "ok", "a"), text("user", "v2", "x")])
    retract(t, message_ids=["x"])  # LangGraph replace-by-id: the newest "x" goes first
    assert [m.content for m in live_messages(t)] == [
        [fr.TextBlock(text="v1")],
        [fr.TextBlock(text="ok")],
    ]
    retract(t, message_ids=["x"])
    assert [m.message_id for m in live_messages(t)] == ["a"]


def test_pop_and_clear(store: BaseStore) -> None:
    _chat(store, 4)
    t = store.thread(T)
    popped = pop_message(t, reason="pop_item")
    assert popped is not None and popped.message_id == "m3"
    popped = pop_message(t)
    assert popped is not None and popped.message_id == "m2"
    assert [m.message_id for m in live_messages(t)] == ["m0", "m1"]
    assert [m.message_id for m in live_messages(t, limit=1)] == ["m1"]
    assert [m.message_id for m in live_messages(t, newest_first=True)] == ["m1", "m0"]
    assert clear_messages(t, reason="clear_session") is not None
    assert live_messages(t) == [] and pop_message(t) is None and clear_messages(t) is None
    res = compile_context(t, log=False)
    assert res.bundle.messages == []
    t.append(text("user", "a fresh start", "n1"))
    assert _window_ids(store) == ["n1"]
    assert len(list(t.read())) == 1 + 4 + 3 + 1  # every byte kept


_POPPER = textwrap.dedent(
    """
    import os, sys, time
    from continuity.context.retract import pop_message
    from continuity.store.jsonl import Store

    root, me = sys.argv[1], sys.argv[2]
    thread = Store(root, durable=False).thread("t")
    while not os.path.exists(os.path.join(root, "go")):
        time.sleep(0.001)
    popped = []
    while (m := pop_message(thread, reason="pop " + me)) is not None:
        popped.append(m.seq)
    print(" ".join(map(str, popped)))
    """
)


@pytest.mark.slow
def test_pops_from_several_processes_at_once_take_distinct_messages(tmp_path: Path) -> None:
    n, workers = 120, 4
    store = Store(tmp_path / "s", create=True, durable=False)
    _chat(store, n)  # seqs 1..n
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _POPPER, str(store.root), str(me)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
        )
        for me in range(workers)
    ]
    (store.root / "go").touch()
    popped: list[int] = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()
        mine = [int(s) for s in out.split()]
        assert mine == sorted(mine, reverse=True)  # each process pops newest first
        popped += mine
    assert sorted(popped) == list(range(1, n + 1))  # every message once, none twice
    t = store.thread(T)
    retractions = [f for f in t.read() if isinstance(f, fr.MessagesRetracted)]
    assert len(retractions) == n
    assert sorted(s.from_seq for r in retractions for s in r.spans) == list(range(1, n + 1))
    assert live_messages(t) == [] and pop_message(t) is None
    assert verify_store(store).ok


@pytest.mark.slow
def test_pops_from_several_threads_at_once_take_distinct_messages(store: BaseStore) -> None:
    n = 80
    _chat(store, n)
    popped: list[list[int]] = [[] for _ in range(4)]
    go = threading.Barrier(4)

    def pop_all(mine: list[int]) -> None:
        t = store.thread(T)  # a handle per thread, as separate callers have
        go.wait()
        while (m := pop_message(t)) is not None:
            mine.append(m.seq)

    workers = [threading.Thread(target=pop_all, args=(p,)) for p in popped]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert sorted(s for mine in popped for s in mine) == list(range(1, n + 1))


def test_a_clear_racing_a_pop_or_an_append(store: BaseStore) -> None:
    """A pop whose retraction loses to a clear reads the log again and finds nothing to pop; a
    message appended after the clear read the head stays live."""
    _chat(store, 3)
    t = store.thread(T)
    real_append = t.append
    calls = 0

    def clear_first(*args: object, **kwargs: object) -> range:
        nonlocal calls
        calls += 1
        clear_messages(store.thread(T))  # another writer commits between the read and the append
        return real_append(*args, **kwargs)  # type: ignore[arg-type]

    t.append = clear_first  # type: ignore[method-assign]
    assert pop_message(t) is None
    assert calls == 1  # the pop's retraction conflicted; the second read found nothing live
    retractions = [f for f in t.read() if isinstance(f, fr.MessagesRetracted)]
    assert [r.reason for r in retractions] == ["clear"]

    t = store.thread(T)
    head = t.head()
    assert head is not None
    real = t.append

    def append_first(*args: object, **kwargs: object) -> range:
        store.thread(T).append(text("user", "after the clear read", "late"))
        return real(*args, **kwargs)  # type: ignore[arg-type]

    t.append(text("user", "again", "again"))
    t.append = append_first  # type: ignore[method-assign]
    seq = clear_messages(t)
    assert seq is not None
    (frame,) = store.thread(T).read(from_seq=seq)
    assert isinstance(frame, fr.MessagesRetracted) and frame.spans[0].to_seq == seq - 2
    assert [m.message_id for m in live_messages(store.thread(T))] == ["late"]


def test_a_summary_covering_a_retracted_message_is_passed_over(store: BaseStore) -> None:
    _chat(store, 10)  # seqs 1..10
    t = store.thread(T)
    for cid, to_seq in (("c4", 4), ("c8", 8)):
        t.append(checkpoint(cid, to_seq, put_summary(store, to_seq, f"summary {to_seq}")))
    assert [s.to_seq for s in compile_context(t, log=False).bundle.summaries] == [4, 8]
    retract(t, seqs=[6])  # inside c8's range, after c4's
    res = compile_context(t, log=False)
    assert [s.to_seq for s in res.bundle.summaries] == [4]
    assert any("c8" in r and "retracted at seq" in r for r in res.decision.resets)
    assert [m.seq for m in res.bundle.messages] == [5, 7, 8, 9, 10]
    retract(t, seqs=[1])  # before every summary: none of them stands any more
    res2 = compile_context(t, log=False)
    assert res2.bundle.summaries == []
    assert [m.seq for m in res2.bundle.messages] == [2, 3, 4, 5, 7, 8, 9, 10]


def test_a_retracted_tool_call_leaves_no_orphan_in_the_request(store: BaseStore) -> None:
    t = store.thread(T)
    t.append([text("user", "run it", "u"), call("c", "tu1"), result("r", "tu1", "done")])
    t.append(text("assistant", "it ran", "a"))
    retract(t, message_ids=["c"])  # the call taken back, its result still there
    request = to_anthropic(compile_context(t, log=False).bundle)
    blocks = [b for m in request["messages"] for b in m["content"]]
    assert not any(b["type"] in ("tool_use", "tool_result") for b in blocks)
    assert any(b["type"] == "text" and "it ran" in b["text"] for b in blocks)


def test_retracting_the_turn_in_flight_moves_the_pinned_turn(store: BaseStore) -> None:
    t = store.thread(T)
    t.append([text("user", "first ask", "u1"), text("assistant", "answer", "a1")])
    t.append(text("user", "second ask", "u2"))
    retract(t, message_ids=["u2"])
    assert _window_ids(store, limits=fr.Limits(recent_messages=2)) == ["u1", "a1"]
    with pytest.raises(ContextTooSmall):
        compile_context(t, log=False, limits=fr.Limits(recent_messages=0))


def test_recall_does_not_bring_back_a_retracted_message(tmp_path: Path) -> None:
    store = Store(tmp_path / "s", create=True, durable=False, clock=FixedClock())
    t = store.thread(T)
    t.append(text("user", "the launch code is zebrafish-42", "secret"))
    for i in range(30):
        t.append(text("assistant" if i % 2 else "user", f"filler {i}", f"f{i}"))
    limits = fr.Limits(recent_messages=4)
    hit = compile_context(t, log=False, limits=limits, recall="zebrafish launch code")
    assert any("zebrafish" in r.text for r in hit.bundle.recalled)
    retract(t, message_ids=["secret"])
    gone = compile_context(t, log=False, limits=limits, recall="zebrafish launch code")
    assert not any("zebrafish" in r.text for r in gone.bundle.recalled)
    scan = compile_context(
        t, log=False, limits=limits, recall="zebrafish launch code", use_caches=False
    )
    assert scan.bundle == gone.bundle


def test_log_and_search_show_retracted_messages_as_retracted(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from continuity.cli.app import app
    from continuity.retrieval.search import search

    root = tmp_path / "s"
    store = Store(root, create=True, durable=False, clock=FixedClock())
    t = store.thread(T)
    t.append([text("user", "deploy the walrus service", "w"), text("assistant", "done", "d")])
    retract(t, message_ids=["w"], reason="pop_item")
    runner = CliRunner()
    out = runner.invoke(app, ["--store", str(root), "log", T])
    assert out.exit_code == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "[retracted] user: deploy the walrus service" in lines[1]
    assert "[retracted]" not in lines[2]
    assert "retracted seq 1: pop_item" in lines[3]
    raw = runner.invoke(app, ["--store", str(root), "log", T, "--json"])
    assert b"[retracted]" not in raw.stdout_bytes  # the stored bytes, as they are
    (hit,) = search(store, "walrus")
    assert hit.retracted and hit.seq == 1
    found = runner.invoke(app, ["--store", str(root), "search", "walrus"])
    assert found.exit_code == 0 and "[retracted]" in found.stdout.splitlines()[0]


def test_compaction_after_a_retraction_summarises_without_it(store: BaseStore) -> None:
    from continuity.context.compaction import StrideMessages, run_compaction

    t = store.thread(T)
    roles: tuple[fr.Role, fr.Role] = ("user", "assistant")
    t.append([text(roles[i % 2], f"note {i} about topic{i}", f"m{i}") for i in range(40)])
    first = run_compaction(t, StrideMessages(10))
    assert [c.to_seq for c in first.checkpoints] == [10, 20, 30, 40]
    retract(t, message_ids=["m14"], reason="RemoveMessage")  # seq 15
    res = compile_context(t, log=False)
    assert [s.to_seq for s in res.bundle.summaries] == [10]  # the others covered seq 15
    again = run_compaction(t, StrideMessages(10))
    assert [c.to_seq for c in again.checkpoints] == [20, 30, 40]  # made again, without it
    assert all(c.base_checkpoint_id for c in again.checkpoints)
    after = compile_context(t, log=False)
    assert [s.to_seq for s in after.bundle.summaries] == [10, 20, 40]
    assert all("topic14" not in s.text for s in after.bundle.summaries)
    assert (
        "topic12" in after.bundle.summaries[1].text and "topic16" in after.bundle.summaries[1].text
    )
    assert run_compaction(t, StrideMessages(10)).checkpoints == []  # nothing left to do
