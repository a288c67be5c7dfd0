"""Compile under faults and hostile sizes (issue 10, ADR 0017): a default token budget, a
message too large for it elided rather than carried whole, and a summary that cannot be read
named in the bundle's notes instead of silently leaving the context."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pytest

from continuity import frames as fr
from continuity.context.bundle import ElidedBlock, ToolStubBlock
from continuity.context.compiler import (
    COMPILER_ID,
    DEFAULT_BUDGET_TOKENS,
    DEFAULT_LIMITS,
    compile_context,
)
from continuity.context.render import to_anthropic, to_text
from continuity.store.base import BaseStore
from continuity.store.jsonl import Store
from continuity.store.memory import MemoryStore
from tests.support.compile import THREAD, call, checkpoint, put_summary, result, text

# About 150,000 tokens: more than the default budget on its own.
HUGE = "Traceback (most recent call last):\n" + "  File x.py, line 1, in f\n" * 24_000


@pytest.fixture(params=["jsonl", "memory"])
def store(request: pytest.FixtureRequest, tmp_store: Store, memory_store: MemoryStore) -> BaseStore:
    return tmp_store if request.param == "jsonl" else memory_store


def _chat(store: BaseStore, n: int) -> None:
    store.thread(THREAD).append([text("user", f"m{i}", f"m{i}") for i in range(1, n + 1)])


# --- the default budget ---------------------------------------------------------------------


def test_without_limits_a_compile_has_the_default_budget_and_records_it(store: BaseStore) -> None:
    _chat(store, 3)
    store.thread(THREAD).append(text("user", HUGE, "paste"))
    store.thread(THREAD).append(text("assistant", "That is a long trace.", "reply"))
    res = compile_context(store, THREAD)
    bundle = res.bundle
    assert DEFAULT_BUDGET_TOKENS == 100_000
    assert bundle.limits == DEFAULT_LIMITS == fr.Limits(budget_tokens=100_000)
    assert res.decision.limits == DEFAULT_LIMITS  # the decision can be replayed as it is
    assert bundle.compiler_id == COMPILER_ID == "continuity.compile/4"
    assert bundle.tokens <= DEFAULT_BUDGET_TOKENS
    # Every message is there; the paste is a stub that says what it stands for.
    assert [m.message_id for m in bundle.messages] == ["m1", "m2", "m3", "paste", "reply"]
    paste = bundle.messages[3]
    (stub,) = paste.content
    assert isinstance(stub, ElidedBlock)
    assert (stub.block_type, stub.size, stub.first_line) == (
        "text",
        len(HUGE),
        "Traceback (most recent call last):",
    )
    (note,) = bundle.notes
    assert note.startswith(f"elided: message seq {paste.seq} (user) needs ~")
    assert f"more than the budget of {DEFAULT_BUDGET_TOKENS} on its own" in note
    assert note in res.decision.reasons
    assert "[text elided:" in to_text(bundle)
    # The same log and the same limits give the same bytes, with or without caches.
    again = compile_context(store, THREAD, log=False, use_caches=False)
    assert again.decision.anchor_seq == res.decision.anchor_seq
    assert again.bundle_bytes() == res.bundle_bytes()


def test_library_callers_opt_out_of_the_budget_explicitly(store: BaseStore) -> None:
    _chat(store, 2)
    store.thread(THREAD).append(text("user", HUGE, "paste"))
    res = compile_context(store, THREAD, log=False, limits=fr.Limits(budget_tokens=None))
    assert res.bundle.limits.budget_tokens is None
    assert res.bundle.messages[-1].content == [fr.TextBlock(text=HUGE)]
    assert res.bundle.tokens > DEFAULT_BUDGET_TOKENS
    assert res.bundle.notes == []
    # Explicit limits are taken as they are: leaving budget_tokens out means no budget.
    same = compile_context(store, THREAD, log=False, limits=fr.Limits(recent_messages=16))
    assert same.bundle_bytes() == res.bundle_bytes()


# --- what gives way to the budget -----------------------------------------------------------


def test_an_oversize_tool_result_becomes_a_stub_and_keeps_its_call(store: BaseStore) -> None:
    _chat(store, 2)
    store.thread(THREAD).append(
        [
            call("c", "tu1", command="cat huge.log"),
            result("r", "tu1", "first line of the log\n" + "x" * 8000, is_error=True),
            text("assistant", "It fails at the end.", "a"),
        ]
    )
    res = compile_context(store, THREAD, log=False, limits=fr.Limits(budget_tokens=500))
    items = {m.message_id: m for m in res.bundle.messages}
    assert list(items) == ["m1", "m2", "c", "r", "a"]
    (stub,) = items["r"].content
    assert isinstance(stub, ToolStubBlock)
    assert (stub.tool_use_id, stub.tool_name, stub.is_error) == ("tu1", "Bash", True)
    assert stub.first_line == "first line of the log"
    assert items["c"].content[0] == fr.ToolUseBlock(
        id="tu1", name="Bash", input={"command": "cat huge.log"}
    )
    (note,) = res.bundle.notes
    assert note.startswith(f"elided: message seq {items['r'].seq} (user)")
    assert "tool_result of 8022 bytes" in note
    assert res.bundle.tokens <= 500


def test_an_oversize_call_is_elided_and_still_pairs_with_its_result(store: BaseStore) -> None:
    _chat(store, 1)
    store.thread(THREAD).append(
        [
            fr.message(
                "assistant",
                content=[
                    fr.TextBlock(text="Writing the fixture."),
                    fr.ToolUseBlock(
                        id="tu1",
                        name="Write",
                        input={"file_path": "big.csv", "content": "a,b\n" * 3000},
                    ),
                ],
                message_id="c",
            ),
            result("r", "tu1", "File created."),
        ]
    )
    res = compile_context(store, THREAD, log=False, limits=fr.Limits(budget_tokens=400))
    c, r = res.bundle.messages[-2:]
    assert c.content[0] == fr.TextBlock(text="Writing the fixture.")  # the small block stays
    stub = c.content[1]
    assert isinstance(stub, ElidedBlock)
    assert (stub.block_type, stub.tool_use_id, stub.tool_name) == ("tool_use", "tu1", "Write")
    assert stub.first_line.startswith('{"file_path":"big.csv","content":"a,b')
    assert r.content == [fr.ToolResultBlock(tool_use_id="tu1", content="File created.")]
    request = to_anthropic(res.bundle)
    uses = [b for m in request["messages"] for b in m["content"] if b["type"] == "tool_use"]
    assert [(u["id"], u["name"]) for u in uses] == [("tu1", "Write")]
    answers = [b for m in request["messages"] for b in m["content"] if b["type"] == "tool_result"]
    assert [a["tool_use_id"] for a in answers] == ["tu1"]


def test_only_the_largest_blocks_give_way(store: BaseStore) -> None:
    store.thread(THREAD).append(
        fr.message(
            "user",
            content=[
                fr.TextBlock(text="small prose stays"),
                fr.TextBlock(text="A" * 2000),
                fr.TextBlock(text="B" * 1200),
            ],
            message_id="m",
        )
    )
    # 4 + 5 + 500 + 300 tokens; a budget of 400 needs only the 2,000-character block gone.
    res = compile_context(store, THREAD, log=False, limits=fr.Limits(budget_tokens=400))
    (item,) = res.bundle.messages
    first, second, third = item.content
    assert first == fr.TextBlock(text="small prose stays")
    assert isinstance(second, ElidedBlock) and second.size == 2000
    assert third == fr.TextBlock(text="B" * 1200)
    assert "text of 2000 bytes" in res.bundle.notes[0]


def test_an_elided_message_the_window_then_leaves_out_is_not_noted(store: BaseStore) -> None:
    store.thread(THREAD).append(text("user", "z" * 4000, "old"))
    _chat(store, 6)
    # Room for the six small messages, not for the old one's stub beside them.
    res = compile_context(store, THREAD, log=False, limits=fr.Limits(budget_tokens=60))
    assert [m.message_id for m in res.bundle.messages] == [f"m{i}" for i in range(1, 7)]
    assert res.bundle.notes == []
    assert not any(r.startswith("elided:") for r in res.decision.reasons)


# --- a summary that cannot be read ----------------------------------------------------------


def _summaries(store: BaseStore, latest: bytes | None = None) -> dict[str, str]:
    """Checkpoints through seqs 10, 20 and 40; ``latest`` is the last one's artifact bytes."""
    _chat(store, 40)
    ids = {}
    for cid, to_seq in (("c10", 10), ("c20", 20), ("c40", 40)):
        if to_seq == 40 and latest is not None:
            ids[cid] = store.artifacts.put(latest)
        else:
            ids[cid] = put_summary(store, to_seq, f"summary through {to_seq}")
        store.thread(THREAD).append(checkpoint(cid, to_seq, ids[cid]))
    return ids


def _artifact_file(store: Store, aid: str) -> Path:
    (found,) = (store.root / "artifacts").rglob(f"{aid}*")
    return found


@pytest.mark.parametrize("damage", ["missing", "corrupt", "not a summary"])
def test_a_damaged_latest_summary_is_named_in_the_notes(tmp_store: Store, damage: str) -> None:
    if damage == "not a summary":  # a sound artifact: neither a summary document nor UTF-8
        ids = _summaries(tmp_store, latest=b"\xff\xfe\x00binary")
        problem = "is not a summary (neither a summary.v1 document nor UTF-8 text)"
    else:
        ids = _summaries(tmp_store)
        before = compile_context(tmp_store, THREAD, log=False)
        assert [s.to_seq for s in before.bundle.summaries] == [10, 20, 40]
        assert before.bundle.notes == []
        path = _artifact_file(tmp_store, ids["c40"])
        if damage == "missing":
            path.unlink()
            problem = "is missing"
        else:
            path.write_bytes(path.read_bytes()[:-3] + b"xyz")
            problem = "is corrupt (it does not decompress or does not match its id)"
    res = compile_context(tmp_store, THREAD, log=False)
    # The rule falls back to the summary through seq 20: messages 21..24 are in neither part.
    assert [s.to_seq for s in res.bundle.summaries] == [10, 20]
    assert res.bundle.messages[0].seq == 25
    (note,) = res.bundle.notes
    assert note == (
        f"summary_unreadable: checkpoint c40 (seq 43, to_seq 40) was passed over: its summary "
        f"artifact {ids['c40']} {problem}; the bundle falls back to the summary through seq 20 "
        "(checkpoint c20)"
    )
    assert any("c40" in r and "cannot be read" in r for r in res.decision.resets)
    # Deterministic: the scan path and a second compile say the same, byte for byte.
    scan = compile_context(tmp_store, THREAD, log=False, use_caches=False)
    assert scan.bundle_bytes() == res.bundle_bytes()


def test_with_every_summary_gone_the_notes_say_no_summary_stands_in(store: BaseStore) -> None:
    _chat(store, 20)
    store.thread(THREAD).append(checkpoint("gone", 16, "e" * 64))
    res = compile_context(store, THREAD, log=False)
    assert res.bundle.summaries == []
    (note,) = res.bundle.notes
    assert note == (
        f"summary_unreadable: checkpoint gone (seq 21, to_seq 16) was passed over: its summary "
        f"artifact {'e' * 64} is missing; no older summary stands in for it"
    )


def test_a_damaged_lower_tier_is_named_too(store: BaseStore) -> None:
    _chat(store, 40)
    for cid, to_seq in (("c4", 4), ("c16", 16), ("c32", 32)):
        store.thread(THREAD).append(checkpoint(cid, to_seq, put_summary(store, to_seq, cid)))
    store.thread(THREAD).append(checkpoint("c8", 8, "d" * 64))  # the missing middle tier
    res = compile_context(store, THREAD, log=False)
    assert [s.to_seq for s in res.bundle.summaries] == [4, 16, 32]
    (note,) = res.bundle.notes
    assert note.startswith("summary_unreadable: checkpoint c8 (seq 44, to_seq 8)")
    assert note.endswith("the bundle falls back to the summary through seq 4 (checkpoint c4)")


# --- the contract ---------------------------------------------------------------------------


def test_the_bundle_contract_documents_the_elided_block_and_every_note_word() -> None:
    doc = (Path(__file__).resolve().parents[2] / "contracts" / "context_bundle.md").read_text()
    start = doc.index("### The `elided` block")
    section = doc[start : doc.index("\n## ", start)]
    for field in msgspec.structs.fields(ElidedBlock):
        assert re.search(rf"^\| `{field.encode_name}` \|", section, re.M), field.encode_name
    notes = doc[doc.index("\n## Notes\n") :]
    for word in ("summary_unreadable", "elided", "budget_insufficient"):
        assert f"| `{word}` |" in notes, word
    assert f"`{COMPILER_ID}`" in doc
