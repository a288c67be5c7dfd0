"""Rendering a context bundle (continuity.context.render): API shapes that always validate,
bounded text."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from continuity import frames as fr
from continuity.context.bundle import (
    ContextBundle,
    ElidedBlock,
    MessageItem,
    RecallItem,
    SummaryItem,
    ToolStubBlock,
    bundle_bytes,
)
from continuity.context.compiler import compile_context
from continuity.context.convert import from_anthropic
from continuity.context.render import (
    CONTINUING,
    render,
    to_anthropic,
    to_openai,
    to_openai_responses,
    to_text,
)
from continuity.store.artifacts import MemoryArtifactStore
from continuity.store.memory import MemoryStore
from tests.context.test_provider_roundtrip import (
    check_anthropic,
    check_openai,
    check_responses,
)

AID = "ab" * 32
AID2 = "cd" * 32


# --- building bundles by hand ---------------------------------------------------------------


def _msg(seq: int, role: fr.Role, *blocks: Any) -> MessageItem:
    return MessageItem(seq=seq, message_id=f"m{seq}", role=role, content=list(blocks), tokens=1)


def _summary(to_seq: int, text: str) -> SummaryItem:
    return SummaryItem(
        checkpoint_id=f"cp{to_seq}",
        checkpoint_seq=to_seq + 1,
        to_seq=to_seq,
        summary_kind="cumulative_v1",
        summary_artifact_id=AID,
        text=text,
        tokens=len(text) // 4,
    )


def _bundle(*items: SummaryItem | MessageItem, thread_id: str = "t1") -> ContextBundle:
    return ContextBundle(
        compiler_id="test",
        strategy="summaries_recent_messages_v1",
        thread_id=thread_id,
        anchor_seq=99,
        limits=fr.Limits(),
        items=list(items),
        tokens=0,
    )


STUB = ToolStubBlock(tool_use_id="tu2", tool_name="Read", size=50, first_line="hello")


def _kitchen_sink() -> ContextBundle:
    """One bundle with every awkward case the renderers must handle."""
    return _bundle(
        _summary(4, "The user asked for a parser."),
        _summary(8, "The user asked for a parser; it now handles quotes."),
        # an orphan result at the window start (its call is before the window)
        _msg(10, "user", fr.ToolResultBlock(tool_use_id="gone", content="orphan output")),
        _msg(
            11,
            "assistant",
            fr.ThinkingBlock(text="secret reasoning", signature="sig"),
            fr.TextBlock(text="Running the tests."),
            fr.ToolUseBlock(id="tu1", name="Bash", input={"command": "pytest -q", "b": 1}),
        ),
        # consecutive user messages: text, then the (artifact-backed, failing) result
        _msg(12, "user", fr.TextBlock(text="meanwhile, a note")),
        _msg(
            13,
            "user",
            fr.ToolResultBlock(
                tool_use_id="tu1",
                artifact_id=AID2,
                preview="F.F\n2 failed",
                size=9999,
                is_error=True,
            ),
        ),
        _msg(14, "assistant", fr.ToolUseBlock(id="tu2", name="Read", input={"file_path": "/x.py"})),
        _msg(15, "user", STUB),
        _msg(
            16,
            "user",
            fr.ImageBlock(media_type="image/png", artifact_id=AID, size=5),
            fr.TextBlock(text="   "),
        ),
        # an unanswered call at the end
        _msg(
            17,
            "assistant",
            fr.TextBlock(text="One more check.  "),
            fr.ToolUseBlock(id="tu3", name="Bash", input={"command": "ls"}),
        ),
    )


# --- validators: what the APIs accept -------------------------------------------------------


def validate_anthropic(request: dict[str, Any]) -> None:
    """Fail unless ``request`` is a Messages API body the API accepts, pairing included (and
    an instance of the SDK's own types)."""
    check_anthropic(request)
    assert set(request) <= {"system", "messages"} and "messages" in request
    system = request.get("system", "x")
    if isinstance(system, list):
        assert system and all(b["type"] == "text" and b["text"].strip() for b in system)
        assert all(set(b) <= {"type", "text", "cache_control"} for b in system)
    else:
        assert isinstance(system, str) and system
    assert json.dumps(request).count('"cache_control"') <= 4, "at most 4 cache breakpoints"
    messages = request["messages"]
    assert messages, "at least one message"
    assert messages[0]["role"] == "user"
    seen_uses: set[str] = set()
    for i, msg in enumerate(messages):
        assert msg["role"] in ("user", "assistant")
        if i:
            assert msg["role"] != messages[i - 1]["role"], f"roles do not alternate at {i}"
        blocks = msg["content"]
        assert blocks, f"message {i} has no content"
        if isinstance(blocks, str):
            blocks = [{"type": "text", "text": blocks}]
        for j, block in enumerate(blocks):
            kind = block["type"]
            if kind in ("thinking", "redacted_thinking"):
                assert msg["role"] == "assistant"
                assert all(b["type"] in ("thinking", "redacted_thinking") for b in blocks[:j])
            elif kind == "text":
                assert set(block) <= {"type", "text", "cache_control"}
                assert block["text"].strip(), "empty text block"
            elif kind == "image":
                assert msg["role"] == "user"
            elif kind == "tool_use":
                assert msg["role"] == "assistant"
                assert set(block) <= {"type", "id", "name", "input", "cache_control"}
                assert isinstance(block["input"], dict)
                assert block["id"] not in seen_uses, "tool_use id repeated"
                seen_uses.add(block["id"])
            elif kind == "tool_result":
                assert msg["role"] == "user"
                assert set(block) <= {"type", "tool_use_id", "content", "is_error", "cache_control"}
                assert isinstance(block["content"], str | list)
                assert block.get("is_error", True) is True
            else:  # a provider block of Anthropic's own, sent back as it came
                assert kind in ("document", "server_tool_use", "search_result"), kind
        uses = [b["id"] for b in blocks if b["type"] == "tool_use"]
        results = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
        if msg["role"] == "user":
            before = messages[i - 1]["content"] if i else []
            called = {b["id"] for b in before if isinstance(b, dict) and b["type"] == "tool_use"}
            assert set(results) <= called, "tool_result without a call just before"
            assert len(results) == len(set(results)), "two results for one call"
            kinds = [b["type"] for b in blocks]
            assert kinds[: len(results)] == ["tool_result"] * len(results), "results not first"
        elif uses:
            assert i + 1 < len(messages), "tool_use in the last message"
            answered = {
                b["tool_use_id"] for b in messages[i + 1]["content"] if b["type"] == "tool_result"
            }
            assert set(uses) <= answered, "tool_use not answered in the next message"
    last = messages[-1]
    if last["role"] == "assistant":
        content = last["content"]
        text = content if isinstance(content, str) else content[-1].get("text", "")
        assert text == text.rstrip()


def validate_openai(messages: list[dict[str, Any]]) -> None:
    """Fail unless ``messages`` is a Chat Completions list the API accepts, pairing included
    (and an instance of the SDK's own types)."""
    check_openai(messages)
    pending: set[str] = set()
    calls_seen: set[str] = set()
    for i, msg in enumerate(messages):
        role = msg["role"]
        if role == "tool":
            assert set(msg) == {"role", "tool_call_id", "content"}
            assert msg["tool_call_id"] in pending, "tool message without a matching call before"
            assert isinstance(msg["content"], str | list)
            pending.discard(msg["tool_call_id"])
            continue
        assert not pending, f"calls {pending} not answered before message {i}"
        if role in ("system", "developer"):
            assert i == 0
            assert msg["content"]
        elif role == "user":
            assert set(msg) == {"role", "content"}
            content = msg["content"]
            assert (isinstance(content, str) and content.strip()) or (
                isinstance(content, list) and content
            )
        else:
            assert role == "assistant"
            assert set(msg) <= {"role", "content", "tool_calls", "refusal"}
            calls = msg.get("tool_calls", [])
            assert msg["content"] is not None or calls or msg.get("refusal"), (
                "assistant with neither text nor calls"
            )
            for call in calls:
                assert call["type"] == "function"
                assert set(call["function"]) == {"name", "arguments"}
                assert isinstance(json.loads(call["function"]["arguments"]), dict)
                assert call["id"] not in calls_seen, "tool call id repeated"
                calls_seen.add(call["id"])
            if "tool_calls" in msg:
                assert calls, "an empty tool_calls list is rejected"
            pending = {c["id"] for c in calls}
    assert not pending, "calls left unanswered at the end"


def validate_responses(items: list[dict[str, Any]]) -> None:
    """Fail unless ``items`` is Responses input the API accepts, pairing included (and an
    instance of the SDK's own types)."""
    check_responses(items)
    called: set[str] = set()
    answered: set[str] = set()
    for i, item in enumerate(items):
        kind = item.get("type", "message")
        if kind == "message":
            assert item["role"] in ("user", "assistant") or i == 0
            assert item["content"]
        elif kind == "function_call":
            assert item["call_id"] not in called, "call id repeated"
            assert isinstance(json.loads(item["arguments"]), dict)
            called.add(item["call_id"])
        elif kind == "function_call_output":
            assert item["call_id"] in called and item["call_id"] not in answered
            answered.add(item["call_id"])
        elif kind == "reasoning":
            assert i + 1 < len(items), "a reasoning item needs the item it belongs to"
    assert called == answered, "calls left unanswered"


def _blocks(request: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(m["role"], b) for m in request["messages"] for b in m["content"]]


# --- Anthropic ------------------------------------------------------------------------------


def test_anthropic_kitchen_sink_validates_and_keeps_the_facts() -> None:
    request = to_anthropic(_kitchen_sink(), system_prefix="You are a careful engineer.", cache=None)
    validate_anthropic(request)
    system = request["system"]
    assert system.startswith("You are a careful engineer.\n\n")
    through_4 = system.index("## Summary of the conversation through seq 4")
    through_8 = system.index("## Summary of the conversation through seq 8")
    assert through_4 < through_8
    assert system.endswith("it now handles quotes.")

    messages = request["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"] * 3
    dumped = json.dumps(request)
    assert "thinking" not in dumped and "secret reasoning" not in dumped

    # the orphan result at the start became text
    first = messages[0]["content"]
    assert [b["type"] for b in first] == ["text"]
    assert "gone" in first[0]["text"] and "orphan output" in first[0]["text"]

    assert messages[1]["content"] == [
        {"type": "text", "text": "Running the tests."},
        {
            "type": "tool_use",
            "id": "tu1",
            "name": "Bash",
            "input": {"command": "pytest -q", "b": 1},
        },
    ]
    # the two user messages merged, the result first; the artifact named with its size
    result, note = messages[2]["content"]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "tu1"
    assert result["is_error"] is True
    assert result["content"].startswith("F.F\n2 failed")
    assert AID2 in result["content"] and "9999" in result["content"]
    assert note == {"type": "text", "text": "meanwhile, a note"}

    # the stub answers its call; the image is a placeholder; the blank text is gone
    stub_result, image = messages[4]["content"]
    assert stub_result == {"type": "tool_result", "tool_use_id": "tu2", "content": STUB.text()}
    assert image["type"] == "text" and "image/png" in image["text"] and AID in image["text"]

    # the unanswered call at the end became text; no trailing whitespace at the end
    last = messages[5]["content"]
    assert [b["type"] for b in last] == ["text", "text"]
    assert last[0]["text"] == "One more check."
    assert "tu3" in last[1]["text"] and "Bash" in last[1]["text"] and '"ls"' in last[1]["text"]


def test_anthropic_window_starting_with_assistant_gets_a_user_turn_first() -> None:
    request = to_anthropic(_bundle(_msg(5, "assistant", fr.TextBlock(text="Done."))))
    validate_anthropic(request)
    assert request["messages"][0] == {
        "role": "user",
        "content": [{"type": "text", "text": CONTINUING}],
    }
    assert "system" not in request  # no empty system prompt


def test_anthropic_empty_window_still_validates() -> None:
    request = to_anthropic(_bundle(_summary(3, "All of it.")))
    validate_anthropic(request)
    assert "through seq 3" in request["system"][0]["text"]


def test_anthropic_message_left_empty_gets_a_placeholder() -> None:
    request = to_anthropic(
        _bundle(
            _msg(1, "user", fr.TextBlock(text="hi")),
            _msg(2, "assistant", fr.ThinkingBlock(text="hmm")),
            _msg(3, "user", fr.TextBlock(text="")),
        )
    )
    validate_anthropic(request)
    assert len(request["messages"]) == 3
    assert request["messages"][1]["content"][0]["text"].strip()
    assert request["messages"][2]["content"][0]["text"].strip()


def test_anthropic_results_follow_call_order_and_repeats_become_text() -> None:
    request = to_anthropic(
        _bundle(
            _msg(1, "user", fr.TextBlock(text="go")),
            _msg(
                2,
                "assistant",
                fr.ToolUseBlock(id="a", name="Bash", input={}),
                fr.ToolUseBlock(id="b", name="Bash", input={}),
                fr.ToolUseBlock(id="a", name="Bash", input={}),  # a repeated id
            ),
            _msg(
                3,
                "user",
                fr.ToolResultBlock(tool_use_id="b", content="B"),
                fr.ToolResultBlock(tool_use_id="a", content="A"),
                fr.ToolResultBlock(tool_use_id="a", content="A again"),
            ),
        )
    )
    validate_anthropic(request)
    # matched by position: the second call with id "a" gets the second result with it, under
    # a fresh id so the request's ids stay unique
    results = [b for _, b in _blocks(request) if b["type"] == "tool_result"]
    assert [(r["tool_use_id"], r["content"]) for r in results] == [
        ("a", "A"),
        ("b", "B"),
        ("a_2", "A again"),
    ]
    calls = [b["id"] for _, b in _blocks(request) if b["type"] == "tool_use"]
    assert calls == ["a", "b", "a_2"]


def test_ids_reused_across_turns_keep_every_pair() -> None:
    """Some runtimes number calls per turn: the newest call must not lose its result."""
    turn = [
        _msg(1, "user", fr.TextBlock(text="go")),
        _msg(2, "assistant", fr.ToolUseBlock(id="call_0", name="Bash", input={"n": 1})),
        _msg(3, "user", fr.ToolResultBlock(tool_use_id="call_0", content="first")),
        _msg(4, "assistant", fr.ToolUseBlock(id="call_0", name="Bash", input={"n": 2})),
        _msg(5, "user", fr.ToolResultBlock(tool_use_id="call_0", content="second")),
    ]
    request = to_anthropic(_bundle(*turn))
    validate_anthropic(request)
    pairs = [
        (b.get("id") or b.get("tool_use_id"), b.get("input") or b.get("content"))
        for _, b in _blocks(request)
        if b["type"] in ("tool_use", "tool_result")
    ]
    assert pairs == [
        ("call_0", {"n": 1}),
        ("call_0", "first"),
        ("call_0_2", {"n": 2}),
        ("call_0_2", "second"),
    ]
    messages = to_openai(_bundle(*turn))
    validate_openai(messages)
    assert [m["tool_call_id"] for m in messages if m["role"] == "tool"] == ["call_0", "call_0_2"]


def test_anthropic_misplaced_blocks_become_text_and_system_messages_join_the_system() -> None:
    bundle = _bundle(
        _msg(1, "system", fr.TextBlock(text="Be brief.")),
        _msg(2, "user", fr.ToolUseBlock(id="x", name="Bash", input={})),
        _msg(3, "assistant", fr.ToolResultBlock(tool_use_id="x", content="out")),
    )
    request = to_anthropic(bundle, system_prefix="You are careful.", cache=None)
    validate_anthropic(request)
    kinds = [b["type"] for _, b in _blocks(request)]
    assert kinds == ["text", "text"]
    assert request["system"] == "You are careful.\n\nBe brief."
    assert all("Be brief" not in b.get("text", "") for _, b in _blocks(request))
    messages = to_openai(bundle)
    assert messages[0] == {"role": "system", "content": "Be brief."}
    assert [m["role"] for m in messages[1:]] == ["user", "assistant"]


def test_anthropic_does_not_share_the_bundles_input_dicts() -> None:
    bundle = _bundle(
        _msg(1, "assistant", fr.ToolUseBlock(id="a", name="T", input={"k": [1]})),
        _msg(2, "user", fr.ToolResultBlock(tool_use_id="a", content="ok")),
    )
    request = to_anthropic(bundle)
    request["messages"][1]["content"][0]["input"]["k"].append(2)
    assert to_anthropic(bundle)["messages"][1]["content"][0]["input"] == {"k": [1]}


# --- OpenAI ---------------------------------------------------------------------------------


def test_openai_kitchen_sink() -> None:
    messages = to_openai(_kitchen_sink())
    validate_openai(messages)
    assert messages[0]["role"] == "system"
    assert "through seq 8" in messages[0]["content"]
    roles = [m["role"] for m in messages]
    assert roles == [
        "system",
        "user",
        "assistant",
        "tool",
        "user",
        "assistant",
        "tool",
        "user",
        "assistant",
    ]
    call = messages[2]["tool_calls"][0]
    assert call == {
        "id": "tu1",
        "type": "function",
        "function": {"name": "Bash", "arguments": '{"command":"pytest -q","b":1}'},
    }
    assert messages[2]["content"] == "Running the tests."
    assert messages[3]["tool_call_id"] == "tu1" and messages[3]["content"].startswith("[error]")
    assert AID2 in messages[3]["content"]
    assert messages[5]["content"] is None
    assert messages[6] == {"role": "tool", "tool_call_id": "tu2", "content": STUB.text()}
    assert "tool_calls" not in messages[8] and "tu3" in json.dumps(messages[8]["content"])


def test_openai_without_summaries_has_no_system_message() -> None:
    messages = to_openai(_bundle(_msg(1, "user", fr.TextBlock(text="hi"))))
    assert messages == [{"role": "user", "content": "hi"}]
    with_prefix = to_openai(_bundle(_msg(1, "user", fr.TextBlock(text="hi"))), system_prefix="S")
    assert with_prefix[0] == {"role": "system", "content": "S"}


# --- property: any window renders to a valid request ----------------------------------------

_IDS = st.sampled_from(["a", "b", "c", "d", "e"])
_TEXT = st.text(alphabet="abc xyzé\n", max_size=30)
_BLOCK = st.one_of(
    st.builds(fr.TextBlock, text=_TEXT),
    st.builds(fr.ThinkingBlock, text=_TEXT, signature=st.none() | st.just("sig")),
    st.builds(
        fr.ToolUseBlock,
        id=_IDS,
        name=st.sampled_from(["Bash", "Read"]),
        input=st.dictionaries(st.sampled_from(["command", "x", "n"]), _TEXT | st.integers()),
    ),
    st.builds(fr.ToolResultBlock, tool_use_id=_IDS, content=_TEXT, is_error=st.booleans()),
    st.builds(
        fr.ToolResultBlock,
        tool_use_id=_IDS,
        artifact_id=st.just(AID),
        preview=_TEXT,
        size=st.integers(0, 10**6),
    ),
    st.builds(ToolStubBlock, tool_use_id=_IDS, size=st.integers(0, 999), is_error=st.booleans()),
    st.builds(fr.ImageBlock, media_type=st.just("image/png"), artifact_id=st.none() | st.just(AID)),
    st.builds(fr.ImageBlock, media_type=st.just(""), url=st.just("https://example.com/a.png")),
    st.builds(fr.ThinkingBlock, text=st.just(""), data=st.just("opaque")),
    st.builds(
        fr.ToolResultBlock,
        tool_use_id=_IDS,
        parts=st.lists(
            st.builds(fr.TextBlock, text=_TEXT)
            | st.builds(fr.ImageBlock, media_type=st.just("image/png"), artifact_id=st.just(AID)),
            min_size=1,
            max_size=2,
        ),
    ),
    st.sampled_from(
        [
            fr.ProviderBlock(
                provider="anthropic",
                kind="document",
                data={
                    "type": "document",
                    "source": {"type": "text", "media_type": "text/plain", "data": "doc"},
                },
                text="doc",
            ),
            fr.ProviderBlock(
                provider="openai.responses",
                kind="reasoning",
                data={"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "e"},
            ),
            fr.ProviderBlock(
                provider="openai.responses",
                kind="web_search_call",
                data={
                    "type": "web_search_call",
                    "id": "ws_1",
                    "status": "completed",
                    "action": {"type": "search", "query": "q"},
                },
                text="q",
            ),
            fr.ProviderBlock(
                provider="openai.chat", kind="refusal", data={"refusal": "no"}, text="no"
            ),
        ]
    ),
    st.builds(
        ElidedBlock,
        block_type=st.sampled_from(["text", "thinking", "tool_use"]),
        size=st.integers(0, 10**8),
        first_line=_TEXT,
        tool_use_id=_IDS,
        tool_name=st.sampled_from(["Bash", "Write"]),
    ),
)


@st.composite
def bundles(draw: st.DrawFn, max_blocks: int = 5) -> ContextBundle:
    n_summaries = draw(st.integers(0, 3))
    summaries = [
        _summary(10 * (k + 1), draw(st.text(alphabet="abc dé\n", max_size=400)))
        for k in range(n_summaries)
    ]
    weighted: list[fr.Role] = ["user", "user", "assistant", "assistant", "system"]
    roles = draw(st.lists(st.sampled_from(weighted), max_size=12))
    messages = [
        _msg(100 + k, role, *draw(st.lists(_BLOCK, max_size=max_blocks)))
        for k, role in enumerate(roles)
    ]
    return _bundle(*summaries, *messages)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(bundles())
def test_any_window_renders_to_valid_requests(bundle: ContextBundle) -> None:
    for cache in ("system", "conversation", None):
        validate_anthropic(to_anthropic(bundle, system_prefix="prefix", cache=cache))
    validate_anthropic(to_anthropic(bundle, thinking="all"))
    validate_openai(to_openai(bundle))
    validate_responses(to_openai_responses(bundle, system_prefix="prefix"))
    validate_responses(to_openai_responses(bundle, thinking="all"))
    assert render(bundle, "anthropic") == render(bundle, "anthropic")
    assert render(bundle, "openai-responses") == render(bundle, "openai-responses")


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(bundles())
def test_paired_calls_survive(bundle: ContextBundle) -> None:
    """A call answered in the very next message, with ids never repeated, is kept as a call."""
    request = to_anthropic(bundle)
    kept = {b["id"] for _, b in _blocks(request) if b["type"] == "tool_use"}
    messages = bundle.messages
    uses = [b.id for m in messages for b in m.content if isinstance(b, fr.ToolUseBlock)]
    results = [
        b.tool_use_id
        for m in messages
        for b in m.content
        if isinstance(b, fr.ToolResultBlock | ToolStubBlock)
    ]
    for i, m in enumerate(messages[:-1]):
        nxt = messages[i + 1]
        if m.role != "assistant" or nxt.role != "user":
            continue
        answered = {
            b.tool_use_id for b in nxt.content if isinstance(b, fr.ToolResultBlock | ToolStubBlock)
        }
        for b in m.content:
            if (
                isinstance(b, fr.ToolUseBlock)
                and b.id in answered
                and uses.count(b.id) == 1
                and results.count(b.id) == 1
            ):
                assert b.id in kept


def _elided_call(use_id: str = "tu9") -> ElidedBlock:
    return ElidedBlock(
        block_type="tool_use",
        size=60_000_000,
        tokens=15_000_000,
        first_line='{"file_path":"/big.csv","content":"a,b,c',
        tool_use_id=use_id,
        tool_name="Write",
    )


def test_an_elided_call_still_pairs_with_its_result_and_elided_text_reads_as_its_stub() -> None:
    text = ElidedBlock(block_type="text", size=52_428_800, tokens=13_107_200, first_line="log:")
    thinking = ElidedBlock(block_type="thinking", size=9_000_000, tokens=2_250_000)
    bundle = _bundle(
        _msg(10, "user", text),
        _msg(11, "assistant", thinking, fr.TextBlock(text="Writing it."), _elided_call()),
        _msg(12, "user", fr.ToolResultBlock(tool_use_id="tu9", content="written")),
    )
    request = to_anthropic(bundle)
    validate_anthropic(request)
    blocks = _blocks(request)
    assert blocks[0] == ("user", {"type": "text", "text": text.text()})
    assert text.text() == (
        "[text elided: 52428800 bytes, ~13107200 tokens, more than the context budget; "
        "first line: 'log:'; the archive keeps it whole]"
    )
    use = next(b for _, b in blocks if b["type"] == "tool_use")
    assert (use["id"], use["name"]) == ("tu9", "Write")
    assert use["input"] == {"elided": _elided_call().text()}
    assert "Write call input elided: 60000000 bytes" in use["input"]["elided"]
    assert ("user", {"type": "tool_result", "tool_use_id": "tu9", "content": "written"}) in blocks
    assert not any("thinking" in json.dumps(b) for _, b in blocks)  # dropped, like thinking
    messages = to_openai(bundle)
    validate_openai(messages)
    (call,) = messages[1]["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {"elided": _elided_call().text()}
    plain = to_text(bundle)
    assert f"[user] {text.text()}" in plain
    assert f"[tool_use Write] {_elided_call().text()}" in plain
    assert "thinking elided" not in plain


# --- text -----------------------------------------------------------------------------------


def test_text_unbounded_layout() -> None:
    text = to_text(_kitchen_sink())
    lines = text.split("\n")
    assert lines[0] == "# Context of thread t1 at seq 99 (strategy summaries_recent_messages_v1)"
    latest = text.index("## Summary of the conversation through seq 8\n")
    earlier = text.index("## Earlier summary, through seq 4\n")
    recent = text.index("## Recent messages\n")
    assert latest < earlier < recent
    section = text[recent:].split("\n")[1:]
    assert section[0] == "[tool_result ok] orphan output"
    assert "[assistant] Running the tests." in section
    assert "[tool_use Bash] pytest -q" in section
    assert "[tool_result error] F.F" in section
    assert "  2 failed" in section
    assert "[tool_use Read] /x.py" in section
    assert f"[tool_result ok] {STUB.text()}" in section
    assert section[-2:] == ["[assistant] One more check.", "[tool_use Bash] ls"]
    assert "secret reasoning" not in text
    assert all(line.startswith(("[", "  ")) for line in section)


def test_text_tool_output_shows_its_first_lines() -> None:
    output = "\n".join(f"line {i}" for i in range(100))
    text = to_text(
        _bundle(
            _msg(1, "assistant", fr.ToolUseBlock(id="a", name="Bash", input={"command": "seq"})),
            _msg(2, "user", fr.ToolResultBlock(tool_use_id="a", content=output)),
        )
    )
    assert "line 5" in text and "line 6" not in text
    assert "…" in text


def test_text_drops_oldest_messages_first_then_cuts_the_summary() -> None:
    summary = "S" * 3000
    messages = [_msg(k, "user", fr.TextBlock(text=f"message {k} " + "x" * 80)) for k in range(20)]
    bundle = _bundle(_summary(5, summary), *messages)
    text = to_text(bundle, max_chars=3600)
    assert len(text) <= 3600
    assert summary in text  # whole: old messages went first
    assert "message 19 " in text and "message 0 " not in text
    kept = re.findall(r"message (\d+) ", text)
    assert kept == [str(k) for k in range(20 - len(kept), 20)]

    small = to_text(bundle, max_chars=1000)
    assert len(small) <= 1000
    assert "message 19 " in small and "message 18 " not in small
    assert "S…" in small and summary not in small


def test_text_shortens_an_overly_long_tool_output_before_dropping_messages() -> None:
    bundle = _bundle(
        _msg(1, "user", fr.TextBlock(text="first question")),
        _msg(
            2,
            "assistant",
            fr.TextBlock(text="Looking."),
            fr.ToolUseBlock(id="a", name="Bash", input={"command": "cat big"}),
        ),
        _msg(3, "user", fr.ToolResultBlock(tool_use_id="a", content="y" * 5000)),
    )
    text = to_text(bundle, max_chars=700)
    assert len(text) <= 700
    assert "first question" in text and "[assistant] Looking." in text
    assert re.search(r"\[tool_result ok\] y+…", text)


def test_text_older_summaries_only_when_there_is_room() -> None:
    bundle = _bundle(
        _summary(4, "older " * 50),
        _summary(8, "latest"),
        _msg(9, "user", fr.TextBlock(text="hello")),
    )
    full = to_text(bundle)
    assert "Earlier summary" in full
    tight = to_text(bundle, max_chars=len(full) - 1)
    assert "Earlier summary" not in tight and "latest" in tight and "[user] hello" in tight


def test_text_tiny_budgets() -> None:
    bundle = _kitchen_sink()
    assert to_text(bundle, max_chars=0) == ""
    assert to_text(bundle, max_chars=10) == "# Context…"
    with pytest.raises(ValueError):
        to_text(bundle, max_chars=-1)


def test_text_of_an_empty_bundle_is_its_header() -> None:
    assert to_text(_bundle()) == (
        "# Context of thread t1 at seq 99 (strategy summaries_recent_messages_v1)"
    )


_MARKER = re.compile(r"<m(\d+)>")


@st.composite
def marked_bundles(draw: st.DrawFn) -> ContextBundle:
    """Bundles whose every message starts with a short marker text ``<mSEQ>``, and whose tool
    outputs may be long."""
    base = draw(bundles(max_blocks=3))
    long_output = st.builds(
        fr.ToolResultBlock,
        tool_use_id=_IDS,
        content=st.text(alphabet="ab\n", min_size=500, max_size=3000),
    )
    items: list[SummaryItem | MessageItem] = list(base.summaries)
    for m in base.messages:
        extra = draw(st.lists(long_output, max_size=1))
        content = [fr.TextBlock(text=f"<m{m.seq}>"), *m.content, *extra]
        items.append(_msg(m.seq, m.role, *content))
    return _bundle(*items)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(marked_bundles(), st.integers(0, 6000))
def test_text_fits_and_keeps_the_newest(bundle: ContextBundle, max_chars: int) -> None:
    text = to_text(bundle, max_chars=max_chars)
    assert len(text) <= max_chars
    assert to_text(bundle, max_chars=max_chars) == text
    if len(to_text(bundle)) <= max_chars:
        assert text == to_text(bundle)
    heading = "\n## Recent messages\n"
    if heading not in text:
        return
    section = text[text.index(heading) + len(heading) :]
    seqs = [str(m.seq) for m in bundle.messages]
    markers = _MARKER.findall(section)
    if markers:  # a suffix of the window, the newest included
        assert markers == seqs[-len(markers) :]
    else:  # only the newest, shortened below its marker
        assert section.startswith(f"[{bundle.messages[-1].role}]")


# --- render ---------------------------------------------------------------------------------


def test_render_formats() -> None:
    bundle = _kitchen_sink()
    assert render(bundle, "json") == bundle_bytes(bundle).decode()
    assert json.loads(render(bundle, "anthropic", system_prefix="P")) == to_anthropic(
        bundle, system_prefix="P"
    )
    assert json.loads(render(bundle, "openai")) == to_openai(bundle)
    assert json.loads(render(bundle, "openai-responses")) == to_openai_responses(bundle)
    assert render(bundle, "text", max_chars=500) == to_text(bundle, max_chars=500)
    with pytest.raises(ValueError, match="unknown format"):
        render(bundle, "xml")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        render(bundle, "json", max_chars=3)


# --- the turn in flight: thinking and reasoning ---------------------------------------------

THOUGHT = fr.ThinkingBlock(text="Maybe the cache.", signature="sig-1")
REDACTED = fr.ThinkingBlock(text="", data="opaque")
REASONING = fr.ProviderBlock(
    provider="openai.responses",
    kind="reasoning",
    data={"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "E"},
)


def _tool_loop() -> ContextBundle:
    """An older answered question, then a question whose tool loop is still going."""
    return _bundle(
        _msg(1, "user", fr.TextBlock(text="Why is it slow?")),
        _msg(2, "assistant", THOUGHT, fr.TextBlock(text="The cache.")),
        _msg(3, "user", fr.TextBlock(text="Fix it.")),
        _msg(
            4,
            "assistant",
            fr.TextBlock(text="Looking."),
            REDACTED,  # out of place: goes first in its turn
            fr.ThinkingBlock(text="unsigned, never sent"),
            fr.ToolUseBlock(id="t1", name="Read", input={}),
        ),
        _msg(5, "user", fr.ToolResultBlock(tool_use_id="t1", content="code")),
        _msg(6, "assistant", THOUGHT, fr.ToolUseBlock(id="t2", name="Edit", input={})),
        _msg(7, "user", fr.ToolResultBlock(tool_use_id="t2", content="done")),
    )


def _kinds(message: dict[str, Any]) -> list[str]:
    return [b["type"] for b in message["content"]]


def test_anthropic_sends_the_signed_thinking_of_the_turn_in_flight_first() -> None:
    request = to_anthropic(_tool_loop(), cache=None)
    validate_anthropic(request)
    messages = request["messages"]
    assert _kinds(messages[1]) == ["text"]  # an answered turn: its thinking is dropped
    assert _kinds(messages[3]) == ["redacted_thinking", "text", "tool_use"]
    assert messages[3]["content"][0] == {"type": "redacted_thinking", "data": "opaque"}
    assert messages[5]["content"][0] == {
        "type": "thinking",
        "thinking": "Maybe the cache.",
        "signature": "sig-1",
    }
    everything = to_anthropic(_tool_loop(), cache=None, thinking="all")
    assert _kinds(everything["messages"][1]) == ["thinking", "text"]
    nothing = to_anthropic(_tool_loop(), cache=None, thinking="none")
    assert "thinking" not in json.dumps(nothing)
    assert "unsigned" not in json.dumps(everything)
    with pytest.raises(ValueError, match="thinking must be"):
        to_anthropic(_tool_loop(), thinking="some")  # type: ignore[arg-type]


def test_a_window_that_starts_inside_the_tool_loop_keeps_its_thinking() -> None:
    bundle = _bundle(*_tool_loop().messages[3:])
    request = to_anthropic(bundle, cache=None)
    validate_anthropic(request)
    assert request["messages"][0]["content"] == [{"type": "text", "text": CONTINUING}]
    assert _kinds(request["messages"][1])[0] == "redacted_thinking"


def test_reasoning_goes_to_responses_only_and_only_in_flight_and_with_its_item() -> None:
    meta = json.dumps(
        [[1, {"_k": "item"}], [1, {"_k": "call", "id": "fc_1", "status": "completed"}]]
    )
    hinted = MessageItem(
        seq=4,
        message_id="m4",
        role="assistant",
        content=[REASONING, fr.ToolUseBlock(id="t1", name="Read", input={})],
        tokens=1,
        meta={"openai.responses.layout": meta},
    )
    question = _msg(3, "user", fr.TextBlock(text="Fix it."))
    result = _msg(5, "user", fr.ToolResultBlock(tool_use_id="t1", content="code"))
    items = to_openai_responses(_bundle(question, hinted, result))
    validate_responses(items)
    assert items[1] == REASONING.data
    assert items[2]["id"] == "fc_1"  # with the reasoning it belongs to
    later = _msg(6, "user", fr.TextBlock(text="Thanks. Next?"))
    items = to_openai_responses(_bundle(question, hinted, result, later))
    validate_responses(items)
    assert REASONING.data not in items  # an answered turn's reasoning is dropped…
    assert items[1] == {"type": "function_call", "call_id": "t1", "name": "Read", "arguments": "{}"}
    # …and with it the id of the call, which the API would pair with it
    alone = _msg(4, "assistant", REASONING)
    items = to_openai_responses(_bundle(question, alone), thinking="all")
    assert items == [{"role": "user", "content": "Fix it."}]  # never without its item
    assert "reasoning" not in json.dumps(to_anthropic(_bundle(question, hinted, result)))
    assert "reasoning" not in json.dumps(to_openai(_bundle(question, hinted, result)))


def test_reasoning_stored_as_a_message_of_its_own_belongs_to_the_next_item() -> None:
    """An Agents SDK session stores one item per message (ADR 0024): the reasoning, then the
    call it belongs to, each a message. Same rules: in flight, both go with their ids; in an
    answered turn, the reasoning is dropped and so is the id of its call."""
    call_layout = json.dumps([[1, {"_k": "call", "id": "fc_1", "status": "completed"}]])
    call = MessageItem(
        seq=5,
        message_id="m5",
        role="assistant",
        content=[fr.ToolUseBlock(id="t1", name="Read", input={})],
        tokens=1,
        meta={"openai.responses.layout": call_layout},
    )
    question = _msg(3, "user", fr.TextBlock(text="Fix it."))
    reasoning = _msg(4, "assistant", REASONING)
    result = _msg(6, "user", fr.ToolResultBlock(tool_use_id="t1", content="code"))
    items = to_openai_responses(_bundle(question, reasoning, call, result))
    validate_responses(items)
    assert items[1] == REASONING.data and items[2]["id"] == "fc_1"
    later = _msg(7, "user", fr.TextBlock(text="Thanks. Next?"))
    items = to_openai_responses(_bundle(question, reasoning, call, result, later))
    validate_responses(items)
    assert items[1] == {"type": "function_call", "call_id": "t1", "name": "Read", "arguments": "{}"}
    # a reasoning message whose item is not in the window (taken back) stays out
    text = _msg(6, "assistant", fr.TextBlock(text="Reading."))
    items = to_openai_responses(_bundle(question, reasoning), thinking="all")
    assert items == [{"role": "user", "content": "Fix it."}]
    items = to_openai_responses(_bundle(question, reasoning, later, text), thinking="all")
    assert REASONING.data not in items


# --- cache_control --------------------------------------------------------------------------


def _with_recall() -> ContextBundle:
    recall = RecallItem(seq=2, source_kind="message", role="user", score=1.0, text="old", tokens=9)
    return _bundle(
        _summary(4, "Summary."),
        recall,  # type: ignore[arg-type]
        _msg(9, "user", fr.TextBlock(text="hi")),
        _msg(10, "assistant", fr.TextBlock(text="hello")),
        _msg(11, "user", fr.ToolResultBlock(tool_use_id="x", content="orphan")),
    )


def test_cache_breakpoints_follow_the_stable_prefix() -> None:
    bundle = _with_recall()
    request = to_anthropic(bundle, system_prefix="You are careful.")
    validate_anthropic(request)
    system = request["system"]
    ephemeral = {"type": "ephemeral"}
    assert [b.get("cache_control") for b in system] == [ephemeral, ephemeral, None]
    assert system[0]["text"] == "You are careful.\n\n"
    assert system[1]["text"].startswith("## Summary of the conversation through seq 4")
    assert system[2]["text"].startswith("## Recalled from earlier in this thread")
    joined = "".join(b["text"] for b in system)
    plain = to_anthropic(bundle, system_prefix="You are careful.", cache=None)
    assert joined == plain["system"]  # the same text either way
    assert "cache_control" not in json.dumps(plain)
    assert "cache_control" not in json.dumps(request["messages"])
    # the conversation too: its last block that can carry one
    request = to_anthropic(bundle, cache="conversation")
    validate_anthropic(request)
    assert [b.get("cache_control") for b in request["system"]] == [ephemeral, None]
    last = request["messages"][-1]["content"]
    assert last[-1]["cache_control"] == ephemeral
    assert sum("cache_control" in b for m in request["messages"] for b in m["content"]) == 1
    with pytest.raises(ValueError, match="cache must be"):
        to_anthropic(bundle, cache="all")  # type: ignore[arg-type]


def test_no_system_text_no_system_and_a_string_message_gets_its_breakpoint() -> None:
    store = MemoryStore()

    thread = store.thread("t")
    thread.append(from_anthropic([{"role": "user", "content": "hi"}]))

    bundle = compile_context(thread, log=False).bundle
    assert to_anthropic(bundle) == {"messages": [{"role": "user", "content": "hi"}]}
    assert to_anthropic(bundle, cache="conversation")["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}],
        }
    ]


# --- images, tool results as parts, provider blocks -----------------------------------------


def test_images_go_as_base64_with_a_store_by_url_or_as_a_placeholder() -> None:
    artifacts = MemoryArtifactStore()
    aid = artifacts.put(b"PNGDATA")
    image = fr.ImageBlock(media_type="image/png", artifact_id=aid, size=7)
    by_url = fr.ImageBlock(media_type="", url="https://x/y.png")
    parts = fr.ToolResultBlock(tool_use_id="t", parts=[fr.TextBlock(text="shot"), image])
    bundle = _bundle(
        _msg(1, "user", fr.TextBlock(text="look"), image, by_url),
        _msg(2, "assistant", fr.ToolUseBlock(id="t", name="screenshot", input={})),
        _msg(3, "user", parts),
    )
    data = base64.b64encode(b"PNGDATA").decode()
    request = to_anthropic(bundle, artifacts=artifacts, cache=None)
    validate_anthropic(request)
    source = {"type": "base64", "media_type": "image/png", "data": data}
    assert request["messages"][0]["content"][1:] == [
        {"type": "image", "source": source},
        {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}},
    ]
    assert request["messages"][2]["content"][0]["content"] == [
        {"type": "text", "text": "shot"},
        {"type": "image", "source": source},
    ]
    without = to_anthropic(bundle, cache=None)["messages"][0]["content"][1]
    assert without["type"] == "text" and aid in without["text"]  # no store: a placeholder

    messages = to_openai(bundle, artifacts=artifacts)
    validate_openai(messages)
    assert messages[0]["content"][1:] == [
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}},
        {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
    ]
    assert messages[2]["content"] == [  # a tool message holds text only
        {"type": "text", "text": "shot"},
        {"type": "text", "text": f"[image (image/png, artifact {aid}) not shown]"},
    ]
    items = to_openai_responses(bundle, artifacts=artifacts)
    validate_responses(items)
    assert items[0]["content"][1] == {
        "type": "input_image",
        "image_url": f"data:image/png;base64,{data}",
        "detail": "auto",
    }
    assert items[2]["output"][1] == {
        "type": "input_image",
        "image_url": f"data:image/png;base64,{data}",
    }


def test_provider_blocks_go_back_to_their_provider_and_are_told_to_the_others() -> None:
    search = fr.ProviderBlock(
        provider="anthropic",
        kind="server_tool_use",
        data={"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {"query": "q"}},
        text='web_search {"query":"q"}',
    )
    refusal = fr.ProviderBlock(
        provider="openai.chat", kind="refusal", data={"refusal": "No."}, text="No."
    )
    bundle = _bundle(
        _msg(1, "user", fr.TextBlock(text="search")),
        _msg(2, "assistant", search, refusal),
    )
    request = to_anthropic(bundle, cache=None)
    validate_anthropic(request)
    assert request["messages"][1]["content"] == [
        search.data,
        {"type": "text", "text": "[refusal] No."},
    ]
    messages = to_openai(bundle)
    validate_openai(messages)
    assert messages[1] == {
        "role": "assistant",
        "content": '[server_tool_use] web_search {"query":"q"}',
        "refusal": "No.",
    }
    items = to_openai_responses(bundle)
    validate_responses(items)
    assert items[1] == {
        "role": "assistant",
        "content": '[server_tool_use] web_search {"query":"q"}\n\n[refusal] No.',
    }
    text = to_text(bundle)
    assert "[assistant] [server_tool_use] web_search" in text


def test_the_system_role_comes_from_the_hint_or_the_argument() -> None:
    developer = MessageItem(
        seq=1,
        message_id="m1",
        role="system",
        content=[fr.TextBlock(text="Be brief.")],
        tokens=1,
        meta={"openai.role": "developer"},
    )
    bundle = _bundle(developer, _msg(2, "user", fr.TextBlock(text="hi")))
    assert to_openai(bundle)[0] == {"role": "developer", "content": "Be brief."}
    assert to_openai(bundle, system_role="system")[0]["role"] == "system"
    assert to_openai_responses(bundle)[0] == {"role": "developer", "content": "Be brief."}
    with_summary = _bundle(_summary(0, "S."), developer, _msg(2, "user", fr.TextBlock(text="hi")))
    first = to_openai(with_summary, system_prefix="P.")[0]
    assert first["role"] == "developer" and first["content"].startswith("P.\n\nBe brief.")
    assert to_openai(_bundle(_msg(2, "user", fr.TextBlock(text="hi"))), system_prefix="P")[0] == {
        "role": "system",
        "content": "P",
    }
    with pytest.raises(ValueError, match="system_role must be"):
        to_openai(bundle, system_role="admin")  # type: ignore[arg-type]


def test_an_error_result_says_so_where_the_api_has_no_flag() -> None:
    bundle = _bundle(
        _msg(1, "assistant", fr.ToolUseBlock(id="t", name="f", input={})),
        _msg(2, "user", fr.ToolResultBlock(tool_use_id="t", content="boom", is_error=True)),
    )
    assert to_openai(bundle)[-1]["content"] == "[error] boom"
    assert to_openai_responses(bundle)[-1]["output"] == "[error] boom"
    tool = to_anthropic(bundle, cache=None)["messages"][-1]["content"][0]
    assert tool["is_error"] is True and tool["content"] == "boom"
