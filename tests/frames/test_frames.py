"""The frame schema and the chained line codec (continuity.frames)."""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec
import pytest

from continuity import frames as fr
from continuity.errors import BadFrame
from continuity.tokens import estimate_text

AID = "ab" * 32
AID2 = "cd" * 32


def _checkpoint(**kw: Any) -> fr.CompactionCheckpointCreated:
    fields: dict[str, Any] = {
        "checkpoint_id": "cp1",
        "cut_rule_id": "every_n",
        "summary_kind": "cumulative_v1",
        "summary_artifact_id": AID,
        "from_seq": 1,
        "to_seq": 9,
    }
    fields.update(kw)
    return fr.CompactionCheckpointCreated(**fields)


def _one_of_each() -> list[fr.Frame]:
    """One frame of every type, with most optional fields set."""
    ref = fr.CheckpointRef(
        checkpoint_id="cp1", seq=10, to_seq=9, summary_kind="cumulative_v1", summary_artifact_id=AID
    )
    return [
        fr.ThreadCreated(thread_id="t", title="Title", parent_thread_id="p", meta={"k": "v"}),
        fr.MessageAppended(
            message_id="m1",
            role="assistant",
            content=[
                fr.TextBlock(text="héllo ✓"),
                fr.ThinkingBlock(text="hmm", signature="sig"),
                fr.ToolUseBlock(id="tu1", name="bash", input={"cmd": "ls", "n": [1, 2]}),
                fr.ToolResultBlock(tool_use_id="tu1", content="out", size=3, is_error=True),
                fr.ToolResultBlock(tool_use_id="tu2", artifact_id=AID, preview="o", size=9),
                fr.ImageBlock(media_type="image/png", artifact_id=AID2, size=5),
            ],
            tokens=7,
            source=fr.SourceRef(system="claude_code", key="uuid-1"),
            meta={"a": "b"},
        ),
        _checkpoint(from_message_id="m1", to_message_id="m9", base_checkpoint_id="cp0"),
        fr.ContextSelectionDecided(
            compiler_id="c",
            strategy="summaries_recent_messages_v1",
            anchor_seq=12,
            anchor_message_id="m12",
            limits=fr.Limits(recent_messages=4, budget_tokens=1000),
            checkpoint=ref,
            checkpoints=[ref],
            window_from_seq=10,
            window_to_seq=12,
            window_messages=2,
            reasons=["r"],
            resets=["x"],
            bundle_artifact_id=AID2,
            tokens=99,
        ),
        fr.ObservationRecorded(tool_use_id="tu1", text="listed files", source_seq=3),
        fr.JobSpawned(job_id="j", kind="compact", params={"to_seq": 9}),
        fr.JobEnded(job_id="j", status="failed", error="boom", result={"x": 1}),
        fr.MessagesRetracted(
            spans=[fr.SeqSpan(from_seq=1, to_seq=2)], reason="pop_item", message_ids=["m"]
        ),
        fr.RecordAppended(kind="rt.state", key="k", data={"n": [1, 2.5, None, "x"]}),
        fr.ContextSelectionRepeated(decision_seq=3, bundle_artifact_id=AID2),
    ]


# --- the union and the codec ------------------------------------------------------------------


def test_frame_types_lists_every_tag_in_schema_order() -> None:
    assert fr.frame_types() == (
        "thread_created",
        "message_appended",
        "compaction_checkpoint_created",
        "context_selection_decided",
        "observation_recorded",
        "job_spawned",
        "job_ended",
        "messages_retracted",
        "record_appended",
        "context_selection_repeated",
    )
    assert {type(f) for f in _one_of_each()} == set(fr._FRAME_CLASSES)


@pytest.mark.parametrize("frame", _one_of_each(), ids=lambda f: type(f).__name__)
def test_every_frame_round_trips_through_the_codec(frame: fr.Frame) -> None:
    body = fr.encode_body(msgspec.structs.replace(frame, seq=5, ts_ms=123))
    tag = frame.__struct_config__.tag
    assert isinstance(tag, str)
    assert body.startswith(b'{"type":"' + tag.encode() + b'"')
    digest = fr.chain(fr.GENESIS_DIGEST, body)
    line = fr.seal(body, digest)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    decoded = fr.decode_frame(line[:-1])
    assert decoded == msgspec.structs.replace(frame, seq=5, ts_ms=123, digest=digest.hex())
    # Re-encoding what was read (minus the digest) gives back the exact stored body.
    assert fr.encode_body(msgspec.structs.replace(decoded, digest="")) == body


def test_encoding_is_canonical_type_first_defaults_omitted() -> None:
    body = fr.encode_body(fr.MessageAppended(role="user", content=[fr.TextBlock(text="hi")]))
    assert (
        body == b'{"type":"message_appended","role":"user","content":[{"type":"text","text":"hi"}]}'
    )
    # seq 0 is not the default (-1), so it is written; more=false and an empty digest are not.
    body0 = fr.encode_body(fr.ThreadCreated(seq=0, ts_ms=1, thread_id="t"))
    assert body0 == b'{"type":"thread_created","seq":0,"ts_ms":1,"thread_id":"t"}'
    assert b'"more"' not in body0 and b'"digest"' not in body0
    more = fr.encode_body(fr.ThreadCreated(seq=0, more=True))
    assert b'"more":true' in more


def test_replace_then_encode_equals_frame_built_with_its_envelope() -> None:
    content: list[fr.ContentBlock] = [fr.TextBlock(text="x"), fr.ToolUseBlock(id="1", name="n")]
    bare = fr.MessageAppended(message_id="m", role="user", content=content, tokens=3)
    built = fr.MessageAppended(
        seq=4, ts_ms=99, more=True, message_id="m", role="user", content=content, tokens=3
    )
    replaced = msgspec.structs.replace(bare, seq=4, ts_ms=99, more=True)
    assert fr.encode_body(replaced) == fr.encode_body(built)
    # The envelope keeps its place (right after the tag) whatever order fields are given in.
    assert fr.encode_body(built).startswith(b'{"type":"message_appended","seq":4,"ts_ms":99,')


def test_seal_places_the_digest_last_and_unseal_inverts_it() -> None:
    body = fr.encode_body(fr.ThreadCreated(seq=0, ts_ms=1, thread_id="t"))
    digest = fr.chain(fr.GENESIS_DIGEST, body)
    line = fr.seal(body, digest)
    assert line == body[:-1] + b',"digest":"' + digest.hex().encode() + b'"}\n'
    assert json.loads(line)["digest"] == digest.hex()
    assert fr.unseal(line[:-1]) == (body, digest)


@pytest.mark.parametrize(
    "line",
    [
        b"",
        b"{}",
        b'{"type":"thread_created"}',
        b'{"type":"thread_created","digest":"' + b"0" * 63 + b'"}',  # one hex digit short
        b'{"type":"thread_created","digest":"' + b"g" * 64 + b'"}',  # not hex
        b'{"type":"thread_created","digest":"' + b"0" * 64 + b'"} ',  # trailing byte
        b'{"type":"thread_created","digst":"' + b"0" * 64 + b'"}',  # wrong key
        b'{"type":"thread_created";"digest":"' + b"0" * 64 + b'"}',  # wrong separator
        b'{"type":"thread_created","digest":"' + "é".encode() * 32 + b'"}',
        b'{"type":"thread_created","digest":"' + b"AB" * 32 + b'"}',  # upper case
        b'{"type":"thread_created","digest":"' + b"ab " * 21 + b'a"}',  # spaces
    ],
)
def test_unseal_rejects_lines_without_a_digest_suffix(line: bytes) -> None:
    assert fr.unseal(line) is None


def test_chain_is_blake3_of_previous_digest_and_body() -> None:
    import blake3

    body = b'{"type":"thread_created","seq":0}'
    d0 = fr.chain(fr.GENESIS_DIGEST, body)
    assert d0 == blake3.blake3(bytes(32) + body).digest()
    assert len(d0) == 32 and len(d0.hex()) == fr.DIGEST_HEX_LEN
    # Chaining depends on the previous link and on every byte of the body.
    assert fr.chain(d0, body) != d0
    assert fr.chain(fr.GENESIS_DIGEST, body.replace(b"0", b"1")) != d0


def test_schema_evolution_unknown_field_still_decodes_and_verifies() -> None:
    """A line written by a newer schema (an extra field we do not know) still decodes, and its
    digest verifies from the stored bytes alone, without re-encoding the frame."""
    body = (
        b'{"type":"message_appended","seq":1,"ts_ms":5,"message_id":"m","role":"user",'
        b'"content":[{"type":"text","text":"hi","lang":"en"}],"tokens":5,'
        b'"future_field":{"nested":[1,2]}}'
    )
    prev = fr.chain(fr.GENESIS_DIGEST, b'{"type":"thread_created","seq":0}')
    line = fr.seal(body, fr.chain(prev, body))[:-1]
    frame = fr.decode_frame(line)
    assert isinstance(frame, fr.MessageAppended)
    assert frame.content == [fr.TextBlock(text="hi")]
    unsealed = fr.unseal(line)
    assert unsealed is not None
    stored_body, digest = unsealed
    assert stored_body == body
    assert fr.chain(prev, stored_body) == digest
    # Re-encoding would drop the unknown field, which is why the chain is checked on the bytes.
    assert fr.encode_body(msgspec.structs.replace(frame, digest="")) != body


def test_decode_frame_rejects_bad_input() -> None:
    with pytest.raises(msgspec.DecodeError):
        fr.decode_frame(b'{"type":"message_appended","role":"user"')
    with pytest.raises(msgspec.ValidationError):
        fr.decode_frame(b'{"type":"nope"}')
    with pytest.raises(msgspec.ValidationError):
        fr.decode_frame(b'{"type":"message_appended","role":"robot","content":[]}')


# --- content rules ----------------------------------------------------------------------------


def test_tool_result_holds_content_or_artifact_not_both() -> None:
    fr.ToolResultBlock(tool_use_id="t", content="x")
    fr.ToolResultBlock(tool_use_id="t", artifact_id=AID, preview="x")
    with pytest.raises(ValueError, match="not in two"):
        fr.ToolResultBlock(tool_use_id="t", content="x", artifact_id=AID)
    with pytest.raises(msgspec.ValidationError, match="not in two"):
        fr.decode_frame(
            b'{"type":"message_appended","role":"user","content":[{"type":"tool_result",'
            b'"tool_use_id":"t","content":"x","artifact_id":"' + AID.encode() + b'"}]}'
        )


def test_artifact_refs_names_every_artifact_a_frame_points_at() -> None:
    thread, msg, checkpoint, decision, observation, spawned, ended, *more = _one_of_each()
    retracted, record, repeated = more
    assert fr.artifact_refs(msg) == [AID, AID2]
    assert fr.artifact_refs(checkpoint) == [AID]
    assert fr.artifact_refs(decision) == [AID2]
    assert fr.artifact_refs(repeated) == [AID2]
    for frame in (thread, observation, spawned, ended, retracted, record):
        assert fr.artifact_refs(frame) == []
    big = fr.RecordAppended(kind="rt.state", artifact_id=AID, size=9)
    assert fr.artifact_refs(big) == [AID]
    image = fr.ImageBlock(media_type="image/png", artifact_id=AID2, size=3)
    parts = fr.message(
        "user",
        content=[fr.ToolResultBlock(tool_use_id="t", parts=[fr.TextBlock(text="x"), image])],
    )
    assert fr.artifact_refs(parts) == [AID2]
    inline = fr.message("user", content=[fr.ToolResultBlock(tool_use_id="t", content="x")])
    assert fr.artifact_refs(inline) == []


# --- building messages ------------------------------------------------------------------------


def test_message_fills_id_and_token_estimate() -> None:
    m = fr.message("user", "hello world")
    assert m.content == [fr.TextBlock(text="hello world")]
    assert len(m.message_id) == 32 and int(m.message_id, 16) >= 0
    assert m.tokens == fr.estimate_message_tokens(m.content) == 4 + estimate_text("hello world")
    assert fr.message("user", "x").message_id != fr.message("user", "x").message_id
    given = fr.message("assistant", "hi", message_id="m", ts_ms=7)
    assert (given.message_id, given.ts_ms) == ("m", 7)
    # text goes first, before the blocks given as content
    both = fr.message("user", "a", content=[fr.TextBlock(text="b")])
    assert [b.text for b in both.content if isinstance(b, fr.TextBlock)] == ["a", "b"]


def test_estimate_message_tokens_counts_each_kind_of_block() -> None:
    assert fr.estimate_message_tokens([]) == 4
    tool_use = fr.ToolUseBlock(id="1", name="bash", input={"cmd": "ls"})
    assert fr.estimate_message_tokens([tool_use]) == 4 + estimate_text("bash") + estimate_text(
        '{"cmd":"ls"}'
    )
    inline = fr.ToolResultBlock(tool_use_id="1", content="x" * 400)
    stub = fr.ToolResultBlock(tool_use_id="1", artifact_id=AID, preview="x" * 8, size=10**6)
    assert fr.estimate_message_tokens([inline]) == 4 + 100
    assert fr.estimate_message_tokens([stub]) == 4 + 2  # the preview, not the whole output
    image = fr.ImageBlock(media_type="image/png")
    assert fr.estimate_message_tokens([image]) == 4 + 1600


def test_normalize_fills_message_id_and_tokens() -> None:
    bare = fr.MessageAppended(role="user", content=[fr.TextBlock(text="abcdefgh")])
    filled = fr.normalize(bare)
    assert isinstance(filled, fr.MessageAppended)
    assert len(filled.message_id) == 32
    assert filled.tokens == 4 + 2
    # What the caller gave is kept.
    kept = fr.MessageAppended(message_id="m", role="user", content=[], tokens=42)
    assert fr.normalize(kept) is kept
    only_tokens = fr.normalize(fr.MessageAppended(message_id="m", role="user", content=[]))
    assert isinstance(only_tokens, fr.MessageAppended)
    assert (only_tokens.message_id, only_tokens.tokens) == ("m", 4)
    # Other frames pass through untouched.
    created = fr.ThreadCreated(thread_id="t")
    assert fr.normalize(created) is created


# --- parse_payload ----------------------------------------------------------------------------


def test_parse_payload_shorthand() -> None:
    frame = fr.parse_payload('{"role": "user", "text": "hello"}')
    assert isinstance(frame, fr.MessageAppended)
    assert frame.role == "user" and frame.content == [fr.TextBlock(text="hello")]
    assert len(frame.message_id) == 32 and frame.tokens == 4 + 2
    assert frame.seq == -1 and frame.ts_ms == 0 and frame.digest == ""
    full = fr.parse_payload(b'{"role":"assistant","text":"x","message_id":"m1","ts_ms":42}')
    assert isinstance(full, fr.MessageAppended)
    assert (full.role, full.message_id, full.ts_ms) == ("assistant", "m1", 42)
    with_seq = fr.parse_payload('{"role":"user","text":"x","seq":3}')
    assert with_seq.seq == 3  # an optimistic check, as in a full payload


def test_parse_payload_full_frame() -> None:
    for frame in _one_of_each():
        assert fr.parse_payload(fr.encode_body(frame)) == frame
    msg = fr.parse_payload(
        '{"type":"message_appended","role":"user","content":[{"type":"text","text":"hi"}]}'
    )
    assert isinstance(msg, fr.MessageAppended)
    assert msg.message_id and msg.tokens == 5  # normalized
    with_seq = fr.parse_payload('{"type":"thread_created","seq":0,"thread_id":"t"}')
    assert with_seq == fr.ThreadCreated(seq=0, thread_id="t")


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ("", "not a JSON object"),
        ("{", "not a JSON object"),
        ("not json", "not a JSON object"),
        ("[1, 2]", "not a JSON object"),
        ('"text"', "not a JSON object"),
        ("42", "not a JSON object"),
        ("{}", "expected a frame"),
        ('{"text": "no role"}', "expected a frame"),
        ('{"type": "nope"}', "unknown frame type 'nope'"),
        ('{"type": ["thread_created"]}', "unknown frame type"),
        ('{"role": "robot", "text": "hi"}', "robot"),
        ('{"type":"message_appended","role":"robot","content":[]}', "robot"),
        ('{"role": "user", "text": "hi", "digest": "00"}', "assigned by the store"),
        ('{"role": "user", "text": "hi", "more": true}', "assigned by the store"),
        ('{"type":"thread_created","digest":""}', "assigned by the store"),
        ('{"type":"thread_created","more":false}', "assigned by the store"),
        ('{"role": "user", "text": "hi", "colour": "red"}', "unknown field.*colour"),
        ('{"role": "user", "text": "hi", "b": 1, "a": 2}', "unknown field.*a, b"),
        ('{"role": "user"}', "string `text`"),
        ('{"role": "user", "text": 3}', "string `text`"),
        ('{"role": "user", "text": "hi", "ts_ms": "soon"}', "ts_ms"),
        ('{"role": "user", "text": "hi", "message_id": 7}', "message_id"),
        ('{"role": "user", "text": "hi", "seq": "1"}', "seq"),
        ('{"type":"message_appended","role":"user"}', "content"),
        ('{"type":"job_ended","job_id":"j","status":"exploded"}', "status"),
        (
            '{"type":"message_appended","role":"user","content":[{"type":"tool_result",'
            '"tool_use_id":"t","content":"x","artifact_id":"a"}]}',
            "not in two",
        ),
    ],
)
def test_parse_payload_errors(payload: str, reason: str) -> None:
    with pytest.raises(BadFrame, match=reason):
        fr.parse_payload(payload)


def test_bad_frame_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        fr.parse_payload("[]")


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        (
            {"role": "tool", "text": "x"},
            "role must be one of 'user', 'assistant', 'system', not 'tool'",
        ),
        ({"role": None, "text": "x"}, "not None"),
        ({"role": "user", "text": ["a", "b"]}, "text must be a string, not list"),
        ({"role": "user", "content": "hello"}, "content must be a list of blocks, not str"),
        ({"role": "user", "content": [7]}, "content is not a list of content blocks"),
        ({"role": "user", "text": "x", "message_id": 5}, "message_id must be a string, not int"),
    ],
)
def test_message_refuses_wrong_arguments_at_once(kwargs: dict[str, Any], says: str) -> None:
    with pytest.raises(BadFrame, match=re.escape(says)):
        fr.message(**kwargs)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        # each passes a wrong type on purpose: the check at run time is what is tested
        (lambda: fr.TextBlock(text=["a"]), "TextBlock.text must be str, not list"),  # type: ignore[arg-type]
        (lambda: fr.ThinkingBlock(text="t", signature=5), "ThinkingBlock.signature must be"),  # type: ignore[arg-type]
        (
            lambda: fr.ToolUseBlock(id="t", name="Bash", input="ls"),  # type: ignore[arg-type]
            "ToolUseBlock.input must be dict",
        ),
        (lambda: fr.ToolUseBlock(id=1, name="Bash"), "ToolUseBlock.id must be str, not int"),  # type: ignore[arg-type]
        (
            lambda: fr.ToolResultBlock(tool_use_id="t", content=[{"type": "text", "text": "x"}]),  # type: ignore[arg-type]
            "ToolResultBlock.content must be str, not list (a list of blocks goes in `parts`",
        ),
        (
            lambda: fr.ToolResultBlock(tool_use_id="t", parts=[{"type": "text", "text": "x"}]),  # type: ignore[list-item]
            "ToolResultBlock.parts[0] must be TextBlock or ImageBlock, not dict (a provider dict",
        ),
        (lambda: fr.ToolResultBlock(tool_use_id="t", is_error=1), "is_error must be bool"),  # type: ignore[arg-type]
        (lambda: fr.ImageBlock(media_type="image/png", size=True), "ImageBlock.size must be int"),
        (lambda: fr.ProviderBlock(provider="x", kind="y", data=[]), "ProviderBlock.data must be"),  # type: ignore[arg-type]
    ],
)
def test_block_constructors_check_their_fields_at_once(make: Any, message: str) -> None:
    with pytest.raises(BadFrame) as exc:
        make()
    assert message in str(exc.value)
