"""Decision logging that scales: a compile that repeats the latest decision exactly is on record
as a small context_selection_repeated frame, not a second decision (ADR 0020)."""

from __future__ import annotations

from pathlib import Path

import pytest

from continuity import frames as fr
from continuity.context.compiler import compile_context
from continuity.errors import BadFrame
from continuity.maintenance.verify import verify_store
from continuity.store.base import BaseStore
from continuity.store.jsonl import Store
from continuity.store.memory import MemoryStore
from continuity.testing import FixedClock
from tests.support.compile import text


@pytest.fixture(params=["jsonl", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> BaseStore:
    if request.param == "jsonl":
        return Store(tmp_path / "s", create=True, durable=False, clock=FixedClock())
    return MemoryStore(clock=FixedClock())


def _frames(store: BaseStore) -> list[fr.Frame]:
    return list(store.thread("t").read())


def test_a_repeated_compile_is_recorded_small(store: BaseStore) -> None:
    t = store.thread("t")
    t.append([text("user", "fix the bug", "u"), text("assistant", "looking", "a")])
    first = compile_context(t)
    assert first.logged and first.record_seq == first.decision.seq
    second = compile_context(t)
    assert second.logged and second.bundle == first.bundle
    assert second.decision == first.decision  # the decision it repeats, with its seq
    assert second.record_seq is not None and second.record_seq > first.decision.seq
    frames = _frames(store)
    repeat = frames[-1]
    assert isinstance(repeat, fr.ContextSelectionRepeated)
    assert repeat.decision_seq == first.decision.seq
    assert repeat.bundle_artifact_id == first.bundle_id
    assert sum(isinstance(f, fr.ContextSelectionDecided) for f in frames) == 1
    # a third repeat names the same decision, not the repeat
    third = compile_context(t)
    last = _frames(store)[-1]
    assert isinstance(last, fr.ContextSelectionRepeated) and last.decision_seq == first.decision.seq
    assert third.decision == first.decision
    if isinstance(store, Store):
        lines = (store.root / "threads" / "t.jsonl").read_bytes().splitlines()
        assert len(lines[-1]) < 300  # versus a whole decision
        assert verify_store(store).ok


def test_anything_different_is_a_full_decision(store: BaseStore) -> None:
    t = store.thread("t")
    t.append([text("user", "fix the bug", "u"), text("assistant", "looking", "a")])
    compile_context(t)
    other_limits = compile_context(t, limits=fr.Limits(recent_messages=5))
    assert isinstance(_frames(store)[-1], fr.ContextSelectionDecided)
    assert other_limits.record_seq == other_limits.decision.seq
    recall = compile_context(t, limits=fr.Limits(recent_messages=5), recall="bug")
    assert isinstance(_frames(store)[-1], fr.ContextSelectionDecided)
    assert recall.decision.recall_query == "bug"
    t.append(text("user", "and now?", "u2"))
    moved = compile_context(t, limits=fr.Limits(recent_messages=5), recall="bug")
    assert isinstance(_frames(store)[-1], fr.ContextSelectionDecided)
    assert moved.decision.anchor_seq > recall.decision.anchor_seq
    # an explicit older anchor: its own decision, even though a later one exists
    old = compile_context(t, anchor=2)
    assert isinstance(_frames(store)[-1], fr.ContextSelectionDecided)
    again = compile_context(t, anchor=2)
    assert isinstance(_frames(store)[-1], fr.ContextSelectionRepeated)
    assert again.decision == old.decision


def test_a_repeat_must_name_an_earlier_frame(store: BaseStore) -> None:
    t = store.thread("t")
    t.append(text("user", "x", "u"))
    with pytest.raises(BadFrame, match="not an earlier frame"):
        t.append(fr.ContextSelectionRepeated(decision_seq=5, bundle_artifact_id="a" * 64))


def test_repeats_do_not_move_the_default_anchor(store: BaseStore) -> None:
    t = store.thread("t")
    t.append([text("user", "q", "u"), text("assistant", "a", "a")])
    first = compile_context(t)
    for _ in range(3):
        compile_context(t)
    assert compile_context(t, log=False).bundle.anchor_seq == first.bundle.anchor_seq
