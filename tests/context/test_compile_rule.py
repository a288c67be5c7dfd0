"""The compile rule of ARCHITECTURE.md: which checkpoints a compile selects, and the strategy.

``select_checkpoints`` is checked against a brute-force reference written here from the rule's
text alone; the compiler around it against hand-built threads and the peer's golden log.
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import msgspec
import pytest
from hypothesis import example, given, settings, strategies as st

from continuity import frames as fr
from continuity.caches.thread_index import CheckpointEntry
from continuity.context.compiler import (
    STRATEGY_HIERARCHICAL,
    STRATEGY_RECENT,
    STRATEGY_SUMMARIES,
    compile_context,
    select_checkpoints,
)
from continuity.store.base import BaseStore
from continuity.store.jsonl import Store
from continuity.store.memory import MemoryStore
from continuity.testing import FixedClock
from tests.support.compile import THREAD, checkpoint, put_summary, text
from tests.support.fixtures import shared_fixture

# --- the reference ------------------------------------------------------------------------


def reference_selection(
    checkpoints: list[CheckpointEntry], anchor: int, max_refs: int
) -> list[CheckpointEntry]:
    """The rule, read literally:

    - eligible: summary_kind "cumulative_v1", to_seq <= anchor (and the frame itself in the
      log prefix the anchor closes); of two with one to_seq, the later frame in the log wins;
    - the latest eligible one, then repeatedly the latest with to_seq <= floor(prev / 2), until
      max_refs are selected or none is left; emitted in ascending to_seq.
    """
    eligible = [
        c
        for c in checkpoints
        if c.summary_kind == "cumulative_v1" and c.to_seq <= anchor and c.seq <= anchor
    ]
    winners = [
        c for c in eligible if not any(d.to_seq == c.to_seq and d.seq > c.seq for d in eligible)
    ]
    chosen: list[CheckpointEntry] = []
    bound: float = math.inf
    while len(chosen) < max_refs:
        candidates = [c for c in winners if c.to_seq <= bound and c not in chosen]
        if not candidates:
            break
        latest = max(candidates, key=lambda c: c.to_seq)
        chosen.append(latest)
        bound = math.floor(latest.to_seq / 2)
    return sorted(chosen, key=lambda c: c.to_seq)


_KIND = st.sampled_from(["cumulative_v1", "cumulative_v1", "cumulative_v1", "segment_v1", "v2"])


@st.composite
def checkpoint_sets(draw: st.DrawFn) -> list[CheckpointEntry]:
    """Checkpoints in log order: distinct ascending seqs, each covering an earlier seq."""
    n = draw(st.integers(0, 10))
    seqs = sorted(draw(st.sets(st.integers(1, 60), min_size=n, max_size=n)))
    out = []
    for i, seq in enumerate(seqs):
        # Small to_seqs make ties and the 0/1 edge cases frequent.
        to_seq = draw(st.integers(0, min(seq - 1, 12)) | st.integers(0, seq - 1))
        out.append(CheckpointEntry(seq, to_seq, f"c{i}", "r", draw(_KIND), f"a{i}"))
    return out


def _entry(seq: int, to_seq: int, kind: str = "cumulative_v1") -> CheckpointEntry:
    return CheckpointEntry(seq, to_seq, f"c{seq}", "r", kind, f"a{seq}")


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(checkpoint_sets(), st.integers(0, 70), st.integers(0, 4))
@example([_entry(2, 0), _entry(3, 1)], 5, 3)  # 1 -> floor(1/2) = 0 -> stop at to_seq 0
@example([_entry(2, 0), _entry(3, 0)], 5, 3)  # a tie at 0: the later one, once
@example([_entry(5, 4), _entry(6, 4), _entry(7, 2)], 9, 4)  # a tie, then halving
@example([_entry(3, 1, "v2"), _entry(4, 1)], 9, 2)  # the unsupported twin does not win
@example([_entry(9, 8), _entry(10, 9)], 9, 3)  # the frame after the anchor is not seen
def test_selection_matches_the_brute_force_reference(
    checkpoints: list[CheckpointEntry], anchor: int, max_refs: int
) -> None:
    got = select_checkpoints(checkpoints, anchor, max_refs)
    want = reference_selection(checkpoints, anchor, max_refs)
    assert got == want
    tos = [c.to_seq for c in got]
    assert tos == sorted(set(tos)), "ascending, no to_seq twice"
    for lower, upper in itertools.pairwise(tos):
        assert lower <= upper // 2


def test_selection_examples_by_hand() -> None:
    cps = [_entry(61, 8), _entry(62, 16), _entry(63, 32)]
    assert [c.to_seq for c in select_checkpoints(cps, 63)] == [8, 16, 32]
    assert [c.to_seq for c in select_checkpoints(cps, 63, max_refs=1)] == [32]
    assert [c.to_seq for c in select_checkpoints(cps, 62)] == [8, 16]
    assert select_checkpoints(cps, 60) == []
    # 17 is not <= floor(32/2): the next tier is 16, then 8.
    cps2 = [_entry(40, 8), _entry(41, 16), _entry(42, 17), _entry(43, 32)]
    assert [c.to_seq for c in select_checkpoints(cps2, 50)] == [8, 16, 32]
    # Later frame wins a tie: the second checkpoint at to_seq 16 replaces the first.
    cps3 = [_entry(20, 16), _entry(21, 16)]
    assert select_checkpoints(cps3, 30) == [cps3[1]]


# --- strategies, resets, missing summaries through compile_context --------------------------


def _thread_with_messages(store: BaseStore, n: int) -> None:
    store.thread(THREAD).append([text("user", f"m{i}", f"m{i}") for i in range(1, n + 1)])


def _add_checkpoint(store: BaseStore, cid: str, to_seq: int, *, kind: str = "cumulative_v1") -> str:
    aid = put_summary(store, to_seq, f"summary through {to_seq}", kind=kind)
    store.thread(THREAD).append(checkpoint(cid, to_seq, aid, kind=kind))
    return aid


@pytest.fixture(params=["jsonl", "memory"])
def store(request: pytest.FixtureRequest, tmp_store: Store, memory_store: MemoryStore) -> BaseStore:
    return tmp_store if request.param == "jsonl" else memory_store


def _compile(
    store: BaseStore, *, anchor: int | None = None, limits: fr.Limits | None = None
) -> tuple[str, list[int], fr.ContextSelectionDecided]:
    res = compile_context(store, THREAD, log=False, anchor=anchor, limits=limits)
    tos = [s.to_seq for s in res.bundle.summaries]
    assert [r.to_seq for r in res.decision.checkpoints] == tos
    return res.bundle.strategy, tos, res.decision


def test_strategy_switches_as_checkpoints_appear(store: BaseStore) -> None:
    _thread_with_messages(store, 40)
    assert _compile(store)[:2] == (STRATEGY_RECENT, [])
    _add_checkpoint(store, "a", 12)
    assert _compile(store)[:2] == (STRATEGY_SUMMARIES, [12])
    # Two checkpoints exist, but 12 > floor(20 / 2): only one is selected.
    _add_checkpoint(store, "b", 20)
    assert _compile(store)[:2] == (STRATEGY_SUMMARIES, [20])
    _add_checkpoint(store, "c", 5)
    assert _compile(store)[:2] == (STRATEGY_HIERARCHICAL, [5, 20])
    _add_checkpoint(store, "d", 40)
    strategy, tos, decision = _compile(store)
    assert (strategy, tos) == (STRATEGY_HIERARCHICAL, [5, 20, 40])
    assert decision.checkpoint is not None and decision.checkpoint.to_seq == 40
    _add_checkpoint(store, "e", 2)
    assert _compile(store)[1] == [5, 20, 40]  # max_summary_refs defaults to 3
    # max_summary_refs bounds the hierarchy; 0 turns it off.
    assert _compile(store, limits=fr.Limits(max_summary_refs=4))[1] == [2, 5, 20, 40]
    assert _compile(store, limits=fr.Limits(max_summary_refs=1))[:2] == (STRATEGY_SUMMARIES, [40])
    assert _compile(store, limits=fr.Limits(max_summary_refs=0))[:2] == (STRATEGY_RECENT, [])
    # An earlier anchor sees only the checkpoints in its prefix with to_seq <= anchor.
    assert _compile(store, anchor=40)[:2] == (STRATEGY_RECENT, [])  # checkpoint frames are later
    assert _compile(store, anchor=41)[:2] == (STRATEGY_SUMMARIES, [12])
    assert _compile(store, anchor=43)[:2] == (STRATEGY_HIERARCHICAL, [5, 20])


def test_the_window_starts_after_the_latest_selected_checkpoint(store: BaseStore) -> None:
    _thread_with_messages(store, 30)
    _add_checkpoint(store, "a", 25)
    res = compile_context(store, THREAD, log=False)
    assert [m.seq for m in res.bundle.messages] == list(range(26, 31))
    assert res.decision.window_from_seq == 26 and res.decision.window_to_seq == 30


def test_unsupported_kinds_are_ignored_and_listed_in_resets(store: BaseStore) -> None:
    _thread_with_messages(store, 40)
    _add_checkpoint(store, "old", 8)
    _add_checkpoint(store, "seg_low", 4, kind="segment_v1")
    _add_checkpoint(store, "mid", 16)
    _add_checkpoint(store, "seg_tie", 16, kind="segment_v1")  # later on a tie, but unsupported
    _add_checkpoint(store, "seg_new", 36, kind="segment_v1")
    strategy, tos, decision = _compile(store)
    assert (strategy, tos) == (STRATEGY_HIERARCHICAL, [8, 16])
    assert decision.checkpoint is not None and decision.checkpoint.checkpoint_id == "mid"
    for cid in ("seg_low", "seg_tie", "seg_new"):
        assert any(cid in r and "unsupported summary kind" in r for r in decision.resets), (
            cid,
            decision.resets,
        )
    assert len(decision.resets) == 3
    assert not any("old" in r or "mid" in r for r in decision.resets)


def test_a_checkpoint_whose_summary_is_missing_is_ignored_and_listed(store: BaseStore) -> None:
    _thread_with_messages(store, 40)
    _add_checkpoint(store, "a", 4)
    _add_checkpoint(store, "b", 8)
    _add_checkpoint(store, "c", 16)
    missing = "f" * 64
    store.thread(THREAD).append(checkpoint("gone", 32, missing))
    strategy, tos, decision = _compile(store)
    assert (strategy, tos) == (STRATEGY_HIERARCHICAL, [4, 8, 16])
    assert [r for r in decision.resets if "gone" in r and missing in r]
    assert len(decision.resets) == 1


def test_a_missing_lower_tier_summary_is_listed_too(store: BaseStore) -> None:
    _thread_with_messages(store, 40)
    _add_checkpoint(store, "a", 4)
    store.thread(THREAD).append(checkpoint("gone", 8, "e" * 64))
    _add_checkpoint(store, "c", 16)
    _add_checkpoint(store, "d", 32)
    strategy, tos, decision = _compile(store)
    # 8 would be the third tier; without its summary the rule goes on to 4.
    assert (strategy, tos) == (STRATEGY_HIERARCHICAL, [4, 16, 32])
    assert len(decision.resets) == 1 and "gone" in decision.resets[0]


def test_a_summary_that_is_not_a_summary_doc_is_read_as_plain_text(store: BaseStore) -> None:
    _thread_with_messages(store, 10)
    aid = store.artifacts.put(b"written by hand\n")
    store.thread(THREAD).append(checkpoint("plain", 5, aid))
    res = compile_context(store, THREAD, log=False)
    assert [s.text for s in res.bundle.summaries] == ["written by hand\n"]


# --- golden semantics: the peer's log -------------------------------------------------------


def convert_rip_log(path: Path, store: BaseStore) -> dict[int, str]:
    """Append the peer's events to ``store`` as our frames; return {to_seq: checkpoint id}.

    The peer's summary blobs are not published, so each checkpoint gets a placeholder
    ``SummaryDoc`` stored under our own artifact id.
    """
    events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    assert [e["seq"] for e in events] == list(range(len(events)))
    frames: list[fr.Frame] = []
    ids: dict[int, str] = {}
    for e in events:
        kind = e["type"]
        if kind == "continuity_created":
            frames.append(fr.ThreadCreated(thread_id=THREAD, title=e["title"], seq=e["seq"]))
        elif kind == "continuity_message_appended":
            role: fr.Role = "user" if e["actor_id"] == "user" else "assistant"
            m = fr.message(role, e["content"], message_id=e["id"], ts_ms=e["timestamp_ms"])
            frames.append(msgspec.structs.replace(m, seq=e["seq"]))
        elif kind == "continuity_compaction_checkpoint_created":
            aid = put_summary(store, e["to_seq"], f"peer summary through {e['to_seq']}")
            frames.append(
                fr.CompactionCheckpointCreated(
                    seq=e["seq"],
                    ts_ms=e["timestamp_ms"],
                    checkpoint_id=e["checkpoint_id"],
                    cut_rule_id=e["cut_rule_id"],
                    summary_kind=e["summary_kind"],
                    summary_artifact_id=aid,
                    from_seq=e["from_seq"],
                    to_seq=e["to_seq"],
                    to_message_id=e["to_message_id"],
                )
            )
            ids[e["to_seq"]] = e["checkpoint_id"]
        else:  # pragma: no cover - the fixture holds only these three
            pytest.fail(f"unexpected event type {kind}")
    store.thread(THREAD).append(frames)
    return ids


@pytest.mark.parametrize("backend", ["jsonl_with_caches", "jsonl_scan", "memory"])
def test_the_peer_log_gives_the_peers_hierarchy_and_window(
    backend: str, tmp_path: Path, clock: FixedClock
) -> None:
    path = shared_fixture("rip", "hierarchical_summaries_v1.events.jsonl")
    store: BaseStore
    if backend == "memory":
        store = MemoryStore(clock=clock)
    else:
        store = Store(tmp_path / "s", create=True, durable=False, clock=clock)
    ids = convert_rip_log(path, store)
    assert sorted(ids) == [8, 16, 32]
    res = compile_context(store, THREAD, log=False, use_caches=backend != "jsonl_scan")
    bundle = res.bundle
    assert bundle.strategy == STRATEGY_HIERARCHICAL
    assert bundle.anchor_seq == 63  # the default anchor: the last frame that can change a choice
    assert [s.to_seq for s in bundle.summaries] == [8, 16, 32]
    assert [s.checkpoint_id for s in bundle.summaries] == [ids[8], ids[16], ids[32]]
    assert [m.seq for m in bundle.messages] == list(range(45, 61))
    assert [m.message_id for m in bundle.messages] == [
        f"00000000-0000-0000-0000-{i:012x}" for i in range(45, 61)
    ]
    assert res.decision.window_messages == 16
    assert (res.decision.window_from_seq, res.decision.window_to_seq) == (45, 60)
    assert res.decision.checkpoint is not None and res.decision.checkpoint.to_seq == 32
    assert res.decision.resets == []
    # At the last message (before the checkpoints were logged) nothing is selected yet.
    early = compile_context(store, THREAD, log=False, anchor=60)
    assert early.bundle.strategy == STRATEGY_RECENT
    assert [m.seq for m in early.bundle.messages] == list(range(45, 61))


def test_the_peer_log_compiles_to_the_same_bytes_everywhere(
    tmp_path: Path, clock: FixedClock
) -> None:
    path = shared_fixture("rip", "hierarchical_summaries_v1.events.jsonl")
    jsonl = Store(tmp_path / "s", create=True, durable=False, clock=clock)
    memory = MemoryStore(clock=clock)
    convert_rip_log(path, jsonl)
    convert_rip_log(path, memory)
    results = [
        compile_context(jsonl, THREAD, log=False),
        compile_context(jsonl, THREAD, log=False, use_caches=False),
        compile_context(memory, THREAD, log=False),
    ]
    assert len({r.bundle_bytes() for r in results}) == 1
    assert len({r.bundle_id for r in results}) == 1
