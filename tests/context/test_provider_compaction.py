"""A provider's own compaction is a checkpoint, and compile sends exactly what the provider
requires: an Anthropic ``compaction`` block (beta ``compact_20260112``) first in the
conversation, alone, with nothing before it; an OpenAI Responses ``compaction`` item and what
follows it, with no made-up message. Built with the real ``anthropic`` and ``openai`` types."""

from __future__ import annotations

import functools
import itertools
import json
import shutil
from typing import Any, Final

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from continuity import frames as fr
from continuity.context.compiler import compile_context
from continuity.context.convert import from_anthropic, from_openai_responses
from continuity.context.render import to_anthropic, to_openai, to_openai_responses, to_text
from continuity.errors import ContextTooSmall
from continuity.maintenance.verify import verify_store
from continuity.store.base import BaseStore, Thread
from continuity.store.jsonl import Store
from continuity.store.memory import MemoryStore
from continuity.summary import (
    ANTHROPIC_COMPACTION_V1,
    OPENAI_COMPACTION_V1,
    PROVIDER_COMPACTION_RULE,
)
from tests.support.fixtures import fixture_params, shared_fixture

pydantic = pytest.importorskip("pydantic")
anthropic_beta = pytest.importorskip("anthropic.types.beta")
openai_responses = pytest.importorskip("openai.types.responses")

EVERYTHING = fr.Limits(budget_tokens=None, recent_messages=1000)


def _anthropic_reply(summary: str | None, text: str, signature: str = "sig") -> Any:
    """An assistant reply that compacted, as the SDK returns it (a ``BetaMessage``)."""
    return anthropic_beta.BetaMessage.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-x",
            "content": [
                {
                    "type": "compaction",
                    "content": summary,
                    "encrypted_content": "opaque-meta",
                    "signature": signature,
                },
                {"type": "text", "text": text},
            ],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    )


def _turns(thread: Thread, n: int, tag: str) -> None:
    for i in range(n):
        thread.append(from_anthropic({"role": "user", "content": f"{tag} question {i}"}))
        thread.append(from_anthropic({"role": "assistant", "content": f"{tag} answer {i}"}))


@functools.cache
def _adapter(typ: Any) -> Any:
    """One adapter per SDK type: building one takes ~0.5 s, validating with it microseconds."""
    return pydantic.TypeAdapter(typ)


def _valid_anthropic(request: dict[str, Any]) -> None:
    """Fail unless every message is the SDK's ``BetaMessageParam`` and the compaction rules
    hold: at most one compaction block with content, the first block of the conversation,
    never in ``system``."""
    adapter = _adapter(anthropic_beta.BetaMessageParam)
    for m in request["messages"]:
        adapter.validate_python(m)
    blocks = [
        (i, j, b)
        for i, m in enumerate(request["messages"])
        if isinstance(m["content"], list)
        for j, b in enumerate(m["content"])
    ]
    compactions = [(i, j) for i, j, b in blocks if b["type"] == "compaction" and b.get("content")]
    assert len(compactions) <= 1, "CompactionBlockAmbiguousError"
    if compactions:
        assert compactions == [(0, 0)], "CompactionBlockMisplacedError"
    assert '"compaction"' not in json.dumps(request.get("system", ""))
    roles = [m["role"] for m in request["messages"]]
    assert all(a != b for a, b in itertools.pairwise(roles)), roles


def _valid_responses(items: list[dict[str, Any]]) -> None:
    adapter = _adapter(openai_responses.ResponseInputItemParam)
    for item in items:
        adapter.validate_python(item)


# --- Anthropic ------------------------------------------------------------------------------


def test_an_anthropic_compaction_becomes_a_checkpoint_kept_byte_for_byte(
    tmp_store: Store,
) -> None:
    t = tmp_store.thread("a")
    _turns(t, 3, "old")
    reply = from_anthropic(_anthropic_reply("We fixed the parser.", "Done."))
    seqs = t.append(reply)
    frames = list(t.read())
    (cp,) = [f for f in frames if isinstance(f, fr.CompactionCheckpointCreated)]
    (m,) = [f for f in frames if f.seq in seqs]
    assert isinstance(m, fr.MessageAppended) and list(seqs) == [m.seq]  # the caller's seqs
    assert cp.seq == m.seq + 1  # same batch, right after the caller's frames
    assert (cp.cut_rule_id, cp.summary_kind, cp.produced_by) == (
        PROVIDER_COMPACTION_RULE,
        ANTHROPIC_COMPACTION_V1,
        "anthropic",
    )
    assert (cp.to_seq, cp.to_message_id) == (m.seq - 1, m.message_id)
    block = m.content[0]
    assert isinstance(block, fr.ProviderBlock)
    stored = tmp_store.artifacts.get(cp.summary_artifact_id)
    line = next(line for s, line in t.read_lines() if s == m.seq)
    assert stored == msgspec.json.encode(block.data) and stored in line  # byte for byte
    assert verify_store(tmp_store).ok


def test_compile_sends_one_compaction_block_first_and_nothing_before_it(
    tmp_store: Store,
) -> None:
    t = tmp_store.thread("a")
    _turns(t, 4, "old")
    t.append(from_anthropic({"role": "user", "content": "compact please"}))
    t.append(from_anthropic(_anthropic_reply("first summary", "ok one")))
    _turns(t, 2, "middle")
    t.append(from_anthropic({"role": "user", "content": "again"}))
    t.append(from_anthropic(_anthropic_reply("second summary", "ok two")))
    t.append(from_anthropic({"role": "user", "content": "newest question"}))
    result = compile_context(t, limits=EVERYTHING, log=False)
    request = to_anthropic(result.bundle)
    _valid_anthropic(request)
    sent = json.dumps(request)
    assert "second summary" in sent and "first summary" not in sent  # the second drops the first
    assert "old question" not in sent and "middle answer" not in sent and "again" not in sent
    first = request["messages"][0]
    assert first["role"] == "assistant"
    assert first["content"][0] == {
        "type": "compaction",
        "content": "second summary",
        "encrypted_content": "opaque-meta",
        "signature": "sig",
    }
    assert first["content"][1] == {"type": "text", "text": "ok two"}
    assert [m["role"] for m in request["messages"]] == ["assistant", "user"]
    assert "system" not in request  # the summary is the block, not told twice
    (summary,) = result.bundle.summaries
    assert result.decision.checkpoint is not None
    assert result.decision.checkpoint.summary_kind == ANTHROPIC_COMPACTION_V1
    # the budget counts what is sent: the summary and the two messages after it
    assert result.bundle.tokens == summary.tokens + sum(m.tokens for m in result.bundle.messages)
    assert len(result.bundle.messages) == 2


def test_the_budget_counts_only_what_is_sent(memory_store: MemoryStore) -> None:
    t = memory_store.thread("a")
    big = "word " * 4000
    for i in range(6):
        t.append(from_anthropic({"role": "user", "content": f"q{i} {big}"}))
        t.append(from_anthropic({"role": "assistant", "content": f"a{i}"}))
    t.append(from_anthropic(_anthropic_reply("short summary", "ok")))
    t.append(from_anthropic({"role": "user", "content": "next"}))
    limits = fr.Limits(budget_tokens=400)  # far less than one old message
    result = compile_context(t, limits=limits, log=False)
    assert result.bundle.tokens <= 400
    assert next(m.seq for m in result.bundle.messages) > 12
    assert result.bundle.summaries[0].block is not None
    assert not any("budget: window cut" in r for r in result.decision.reasons)


def test_a_failed_compaction_is_no_checkpoint_and_is_not_sent(memory_store: MemoryStore) -> None:
    t = memory_store.thread("a")
    _turns(t, 2, "old")
    t.append(from_anthropic(_anthropic_reply(None, "could not compact")))
    t.append(from_anthropic({"role": "user", "content": "go on"}))
    assert not list(t.read(types=["compaction_checkpoint_created"]))
    request = to_anthropic(compile_context(t, limits=EVERYTHING, log=False).bundle)
    _valid_anthropic(request)
    sent = json.dumps(request)
    assert '"compaction"' not in sent and "old question 0" in sent
    assert request["messages"][0] == {"role": "user", "content": "old question 0"}


def test_the_anchor_on_the_compacting_message_itself_is_bounded_by_it(
    memory_store: MemoryStore,
) -> None:
    # the checkpoint comes after the message in its batch: an anchor on the message does
    # not see it, and compile takes the boundary from the message in the window
    t = memory_store.thread("a")
    _turns(t, 2, "old")
    (seq,) = t.append(from_anthropic(_anthropic_reply("the summary", "ok")))
    result = compile_context(t, anchor=seq, limits=EVERYTHING, log=False)
    (summary,) = result.bundle.summaries
    assert summary.checkpoint_id == "" and summary.message_seq == seq
    request = to_anthropic(result.bundle)
    _valid_anthropic(request)
    assert request["messages"][0]["content"][0]["content"] == "the summary"
    assert "old question" not in json.dumps(request)


def test_a_log_without_the_checkpoint_still_compiles_right(memory_store: MemoryStore) -> None:
    # lines sealed elsewhere, by a writer that made no checkpoint (append_sealed keeps them)
    frames: list[fr.Frame] = [fr.ThreadCreated(thread_id="a")]
    for i in range(2):
        frames += from_anthropic({"role": "user", "content": f"old question {i}"})
        frames += from_anthropic({"role": "assistant", "content": f"old answer {i}"})
    frames += from_anthropic(_anthropic_reply("the summary", "ok"))
    frames += from_anthropic({"role": "user", "content": "next"})
    prev, lines = fr.GENESIS_DIGEST, []
    for seq, f in enumerate(frames):
        body = fr.encode_body(msgspec.structs.replace(f, seq=seq, ts_ms=1))
        prev = fr.chain(prev, body)
        lines.append(fr.seal(body, prev)[:-1])
    t = memory_store.thread("a")
    t.append_sealed(lines)
    assert not list(t.read(types=["compaction_checkpoint_created"]))
    result = compile_context(t, limits=EVERYTHING, log=False)
    request = to_anthropic(result.bundle)
    _valid_anthropic(request)
    assert request["messages"][0]["content"][0]["content"] == "the summary"
    assert "old question" not in json.dumps(request)


def test_a_newer_continuity_summary_supersedes_the_provider_block(
    memory_store: MemoryStore,
) -> None:
    from tests.support.compile import checkpoint, put_summary

    t = memory_store.thread("a")
    _turns(t, 2, "old")
    (m,) = t.append(from_anthropic(_anthropic_reply("provider summary", "ok")))
    _turns(t, 2, "later")
    head = t.head()
    assert head is not None
    aid = put_summary(memory_store, head.seq, "our own summary", thread_id="a")
    t.append(checkpoint("c1", head.seq, aid))
    t.append(from_anthropic({"role": "user", "content": "newest"}))
    result = compile_context(t, limits=EVERYTHING, log=False)
    assert [s.summary_kind for s in result.bundle.summaries] == ["cumulative_v1"]
    assert any("superseded" in r for r in result.decision.reasons)
    sent = json.dumps(to_anthropic(result.bundle))
    assert "our own summary" in sent and '"compaction"' not in sent and m > 0


def test_retracting_the_compacting_message_takes_the_checkpoint_back(
    memory_store: MemoryStore,
) -> None:
    from continuity.context.retract import retract

    t = memory_store.thread("a")
    _turns(t, 2, "old")
    (m,) = t.append(from_anthropic(_anthropic_reply("provider summary", "ok")))
    t.append(from_anthropic({"role": "user", "content": "next"}))
    retract(t, seqs=[m])
    result = compile_context(t, limits=EVERYTHING, log=False)
    assert result.bundle.summaries == []
    assert any("is retracted" in r for r in result.decision.resets)
    assert "old question 0" in json.dumps(to_anthropic(result.bundle))


# --- other renderers ------------------------------------------------------------------------


def test_other_renderers_tell_the_summary_and_never_send_the_block(
    memory_store: MemoryStore,
) -> None:
    t = memory_store.thread("a")
    _turns(t, 2, "old")
    t.append(from_anthropic(_anthropic_reply("the readable summary", "ok")))
    t.append(from_anthropic({"role": "user", "content": "next"}))
    bundle = compile_context(t, limits=EVERYTHING, log=False).bundle
    for rendered in (to_openai(bundle), to_openai_responses(bundle), to_text(bundle)):
        sent = json.dumps(rendered)
        assert "the readable summary" in sent and "opaque-meta" not in sent
        assert "old question" not in sent
    _valid_responses(to_openai_responses(bundle))


# --- OpenAI Responses -----------------------------------------------------------------------


def _item(value: dict[str, Any]) -> Any:
    return openai_responses.ResponseCompactionItem.model_validate(value)


def test_an_openai_compaction_item_is_sent_first_with_what_follows(
    memory_store: MemoryStore,
) -> None:
    t = memory_store.thread("o")
    t.append(from_openai_responses([{"role": "user", "content": "old q"}]))
    t.append(
        from_openai_responses(
            [
                {
                    "type": "message",
                    "role": "assistant",
                    "id": "m1",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": "old a", "annotations": []}],
                }
            ]
        )
    )
    item = _item({"type": "compaction", "id": "cmp_1", "encrypted_content": "ENC=="})
    t.append(from_openai_responses(item))
    t.append(from_openai_responses([{"role": "user", "content": "new q"}]))
    (cp,) = t.read(types=["compaction_checkpoint_created"])
    assert isinstance(cp, fr.CompactionCheckpointCreated)
    assert (cp.summary_kind, cp.produced_by) == (OPENAI_COMPACTION_V1, "openai.responses")
    items = to_openai_responses(compile_context(t, limits=EVERYTHING, log=False).bundle)
    _valid_responses(items)
    assert items == [
        {"type": "compaction", "id": "cmp_1", "encrypted_content": "ENC=="},
        {"role": "user", "content": "new q"},
    ]


def test_a_compacted_window_keeps_its_user_messages_ahead_of_the_item(
    memory_store: MemoryStore,
) -> None:
    # responses.compact returns the user's messages, then one compaction item; a session
    # stores them in one batch
    t = memory_store.thread("o")
    t.append(from_openai_responses([{"role": "user", "content": "q1"}]))
    t.append(from_openai_responses([{"role": "assistant", "content": "a1"}]))
    output = [
        {"role": "user", "content": "q1"},
        {"type": "compaction", "id": "cmp_1", "encrypted_content": "ENC=="},
    ]
    t.append([f for x in output for f in from_openai_responses([x])])
    t.append(from_openai_responses([{"role": "user", "content": "q2"}]))
    items = to_openai_responses(compile_context(t, limits=EVERYTHING, log=False).bundle)
    _valid_responses(items)
    assert items == [*output, {"role": "user", "content": "q2"}]


def _oldq_olda() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "OLDQ"},
        {
            "type": "message",
            "role": "assistant",
            "id": "m1",
            "status": "completed",
            "content": [{"type": "output_text", "text": "OLDA", "annotations": []}],
        },
    ]


_CMP: Final = {"type": "compaction", "id": "cmp_1", "encrypted_content": "ENC=="}


def test_a_compaction_item_is_never_merged_into_the_message_before_it(
    memory_store: MemoryStore,
) -> None:
    # issue 42: the item went into the assistant message before it, and compile sent that
    # message after the compaction that replaced it ([OLDQ, compaction, OLDA, AFTER])
    frames = from_openai_responses([*_oldq_olda(), _CMP, {"role": "user", "content": "AFTER"}])
    assert [[b.kind for b in f.content if isinstance(b, fr.ProviderBlock)] for f in frames] == [
        [],
        [],
        ["compaction"],
        [],
    ]
    t = memory_store.thread("o")
    t.append(frames)
    items = to_openai_responses(compile_context(t, limits=EVERYTHING, log=False).bundle)
    _valid_responses(items)
    assert items == [_CMP, {"role": "user", "content": "AFTER"}]


def test_a_server_side_compaction_stands_in_for_everything_before_it(
    memory_store: MemoryStore,
) -> None:
    # a response that compacted (context_management): its output is the item, then the reply;
    # the request's input (OLDQ, OLDA, the new question) is in the same batch before it
    t = memory_store.thread("o")
    t.append(from_openai_responses([{"role": "user", "content": "older"}]))
    reply = {
        "type": "message",
        "role": "assistant",
        "id": "m2",
        "status": "completed",
        "content": [{"type": "output_text", "text": "A", "annotations": []}],
    }
    response = {"id": "resp_1", "output": [_CMP, reply]}
    t.append(
        [
            *from_openai_responses([*_oldq_olda(), {"role": "user", "content": "Q"}]),
            *from_openai_responses(response),
        ]
    )
    items = to_openai_responses(compile_context(t, limits=EVERYTHING, log=False).bundle)
    _valid_responses(items)
    assert [i.get("type", "message") for i in items] == ["compaction", "message"]
    assert "OLDQ" not in json.dumps(items) and '"Q"' not in json.dumps(items)


def test_a_compacted_window_keeps_every_message_ahead_of_the_item(
    memory_store: MemoryStore,
) -> None:
    # what responses.compact returns may keep the model's messages too (Codex's remote
    # compaction does): all of them stay, in order, ahead of the item
    t = memory_store.thread("o")
    t.append(from_openai_responses([{"role": "user", "content": "q0"}]))
    t.append(from_openai_responses([{"role": "assistant", "content": "a0"}]))
    window = [*_oldq_olda(), {"role": "user", "content": "q1"}, _CMP]
    t.append(from_openai_responses(window))
    t.append(from_openai_responses([{"role": "user", "content": "q2"}]))
    items = to_openai_responses(compile_context(t, limits=EVERYTHING, log=False).bundle)
    _valid_responses(items)
    said = [json.dumps(i) for i in items]
    assert [s for s in said if "q0" in s or "a0" in s] == []
    assert [i for i, s in enumerate(said) if any(w in s for w in ("OLDQ", "OLDA", "q1"))] == [
        0,
        1,
        2,
    ]
    assert items[3:] == [_CMP, {"role": "user", "content": "q2"}]


def _codex_windows() -> list[object]:
    """Every recorded Codex ``compacted`` line whose ``replacement_history`` holds a
    compaction item (a remote compaction: the compact endpoint's window)."""
    found: list[object] = []
    for path in sorted(shared_fixture("agents").rglob("*.jsonl")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
            if '"compacted"' not in line:
                continue
            value = json.loads(line)
            history = value.get("payload", {}).get("replacement_history") or []
            if value.get("type") == "compacted" and any(
                isinstance(h, dict) and h.get("type") == "compaction" for h in history
            ):
                found.append(pytest.param(history, id=f"{path.name[:40]}:{n + 1}"))
    return found


def _said(items: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """What a list of Responses items says, in order: (kind, text) of each message and
    compaction item (ids, statuses and items of the API's own aside)."""
    out = []
    for i in items:
        kind = i.get("type", "message")
        if kind == "compaction":
            out.append(("compaction", i["encrypted_content"]))
        elif kind == "message":
            content = i["content"]
            text = (
                content if isinstance(content, str) else "".join(p.get("text", "") for p in content)
            )
            out.append(("message", text))
    return out


@pytest.mark.parametrize("history", fixture_params(_codex_windows))
def test_a_recorded_codex_window_compiles_to_itself(
    memory_store: MemoryStore, history: list[dict[str, Any]]
) -> None:
    t = memory_store.thread("codex")
    t.append(from_openai_responses([{"role": "user", "content": "before the compaction"}]))
    t.append(from_openai_responses([{"role": "assistant", "content": "an old answer"}]))
    t.append(from_openai_responses(history))
    t.append(from_openai_responses([{"role": "user", "content": "next"}]))
    items = to_openai_responses(compile_context(t, limits=EVERYTHING, log=False).bundle)
    said = _said(items)
    # the developer/system messages of the window go into the system item, first
    kept = [h for h in history if h.get("role") not in ("developer", "system")]
    expected = [*_said(kept), ("message", "next")]
    assert [s for s in said if s[1]][-len(expected) :] == expected
    assert not any("before the compaction" in s[1] or "an old answer" in s[1] for s in said)


def test_an_opaque_item_is_a_note_for_anthropic(memory_store: MemoryStore) -> None:
    t = memory_store.thread("o")
    t.append(from_openai_responses([{"role": "user", "content": "q1"}]))
    t.append(from_openai_responses({"type": "compaction", "id": "c", "encrypted_content": "E"}))
    t.append(from_openai_responses([{"role": "user", "content": "q2"}]))
    request = to_anthropic(compile_context(t, limits=EVERYTHING, log=False).bundle)
    _valid_anthropic(request)
    sent = json.dumps(request)
    assert "encrypted" in sent and '"E"' not in sent and "q1" not in sent


# --- the same bytes everywhere --------------------------------------------------------------

_events = st.lists(
    st.sampled_from(["user", "assistant", "compact", "failed", "item"]), min_size=1, max_size=14
)


def _batches(events: list[str]) -> list[list[fr.MessageAppended]]:
    """The batches of a thread (made once: the same frames go to every store)."""
    out = []
    for i, e in enumerate(events):
        if e == "user":
            out.append(from_anthropic({"role": "user", "content": f"u{i}"}))
        elif e == "assistant":
            out.append(from_anthropic({"role": "assistant", "content": f"a{i}"}))
        elif e == "compact":
            out.append(from_anthropic(_anthropic_reply(f"s{i}", f"r{i}")))
        elif e == "failed":
            out.append(from_anthropic(_anthropic_reply(None, f"r{i}")))
        else:
            out.append(from_openai_responses({"type": "compaction", "encrypted_content": f"E{i}"}))
    return out


def _build(store: BaseStore, batches: list[list[fr.MessageAppended]]) -> Thread:
    t = store.thread("p")
    for batch in batches:
        t.append(batch)
    return t


def _compiled(t: Thread, anchor: int, limits: fr.Limits, use_caches: bool = True) -> bytes:
    """The bundle's bytes, or the error when the limits are too small (the same everywhere)."""
    try:
        r = compile_context(t, anchor=anchor, limits=limits, log=False, use_caches=use_caches)
    except ContextTooSmall as exc:
        return f"too small: {exc}".encode()
    _valid_anthropic(to_anthropic(r.bundle))
    _valid_responses(to_openai_responses(r.bundle))
    return r.bundle_bytes()


@pytest.mark.slow
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(events=_events, recent=st.integers(1, 8))
def test_compile_is_the_same_on_every_backend_with_and_without_caches(
    tmp_path_factory: pytest.TempPathFactory, events: list[str], recent: int
) -> None:
    limits = fr.Limits(recent_messages=recent, budget_tokens=None)
    root = tmp_path_factory.mktemp("s")
    jsonl = Store(root, create=True, durable=False, clock=lambda: 1)
    memory = MemoryStore(clock=lambda: 1)
    batches = _batches(events)
    seen = []
    for store in (jsonl, memory):
        t = _build(store, batches)
        head = t.head()
        assert head is not None
        got = [_compiled(t, a, limits) for a in range(1, head.seq + 1)]
        assert got == [_compiled(t, a, limits, False) for a in range(1, head.seq + 1)]
        seen.append(got)
    assert seen[0] == seen[1]
    shutil.rmtree(root / "cache", ignore_errors=True)
    t = jsonl.thread("p")
    assert [_compiled(t, a, limits) for a in range(1, len(seen[0]) + 1)] == seen[0]


def test_search_and_the_viewer_read_the_summary_not_the_bytes(memory_store: MemoryStore) -> None:
    from continuity.retrieval.documents import summary_text
    from continuity.viewer.model import summary_text as viewer_summary_text

    t = memory_store.thread("a")
    t.append(from_anthropic(_anthropic_reply("the readable summary", "ok")))
    t.append(from_openai_responses({"type": "compaction", "encrypted_content": "E" * 3000}))
    cps = [f for f in t.read() if isinstance(f, fr.CompactionCheckpointCreated)]
    texts = [summary_text(memory_store, cp) for cp in cps]
    assert texts[0] == "the readable summary"
    assert texts[1] is not None and "encrypted" in texts[1] and "EEE" not in texts[1]
    shown = [viewer_summary_text(memory_store, cp.summary_artifact_id) for cp in cps]
    assert shown[0][0] == "the readable summary" and "anthropic" in shown[0][2]
    assert "encrypted" in shown[1][0] and "openai" in shown[1][2]
