"""The Claude Code transcript reader against the real transcripts in ``../shared/fixtures``
and synthetic lines for what they do not show: it never raises on content, counts what it
skips, leaves a half-written last line for the next read, and keeps the fields a record needs.

Expected values are computed here from the raw JSON with the standard library, independently
of the reader. Long lines, which the line reader every adapter shares handles, are tested in
``tests/agents/base/test_lines.py``.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from continuity import frames as fr
from continuity.agents.claude_code.transcript import (
    AssistantPart,
    CompactBoundary,
    CompactSummary,
    LegacySummary,
    UserLine,
    read_records,
    text_of,
)
from tests.support.fixtures import SHARED_FIXTURES, shared_fixture

CC = "claude-code"
SPOTTER_A = "spotter/4d5611e5-241a-462a-8d15-5122611a9569.jsonl"


def _fixture_files() -> list[str]:
    root = SHARED_FIXTURES / CC
    if not root.is_dir():
        return ["<absent>"]  # the test then skips with the reason
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.jsonl"))


def fixture(rel: str) -> Path:
    return shared_fixture(CC, *rel.split("/"))


def raw_lines(path: Path) -> list[bytes]:
    """The file's lines (without newlines), the last one even if it has no newline."""
    data = path.read_bytes()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def parsed(line: bytes) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        return None


def write_lines(path: Path, objs: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(o) + "\n" for o in objs), encoding="utf-8")


def user_line(uuid: str, content: Any, **extra: Any) -> dict[str, Any]:
    return {
        "type": "user",
        "uuid": uuid,
        "parentUuid": None,
        "sessionId": "s-1",
        "timestamp": "2025-01-01T00:00:00.000Z",
        "cwd": "/p",
        "isSidechain": False,
        "message": {"role": "user", "content": content},
        **extra,
    }


def assistant_line(uuid: str, message_id: str, blocks: list[Any], **extra: Any) -> dict[str, Any]:
    return {
        "type": "assistant",
        "uuid": uuid,
        "sessionId": "s-1",
        "timestamp": "2025-01-01T00:00:01.000Z",
        "requestId": "req_1",
        "message": {"id": message_id, "model": "claude-x", "role": "assistant", "content": blocks},
        **extra,
    }


# --- every fixture --------------------------------------------------------------------------


@pytest.mark.parametrize("rel", _fixture_files())
def test_every_fixture_parses_and_accounts_for_every_line(rel: str) -> None:
    path = fixture(rel)
    result = read_records(path)
    lines = raw_lines(path)
    blank = sum(1 for line in lines if not line.strip())
    # every line is a record or counted as skipped; the whole file is consumed (every fixture
    # ends with a complete line, with or without its newline)
    assert len(result.records) + sum(result.skipped.values()) + blank == len(lines)
    assert result.end == path.stat().st_size
    offsets = [r.offset if isinstance(r, LegacySummary) else r.where.offset for r in result.records]
    assert offsets == sorted(offsets)
    starts = {0}
    pos = 0
    for line in lines:
        pos += len(line) + 1
        starts.add(pos)
    assert set(offsets) <= starts  # each record names the start of its own line


@pytest.mark.parametrize("rel", _fixture_files())
def test_reading_from_any_record_offset_gives_the_tail(rel: str) -> None:
    path = fixture(rel)
    whole = read_records(path)
    if len(whole.records) < 2:
        return
    mid = whole.records[len(whole.records) // 2]
    start = mid.offset if isinstance(mid, LegacySummary) else mid.where.offset
    tail = read_records(path, start)
    assert tail.records == whole.records[len(whole.records) // 2 :]
    assert tail.end == whole.end


# --- lines that are not conversation --------------------------------------------------------


def test_edge_cases_bad_lines_are_counted_never_fatal() -> None:
    path = fixture("claude-code-log/edge_cases.jsonl")
    lines = raw_lines(path)
    bad = [line for line in lines if not isinstance(parsed(line), dict)]
    assert len(bad) == 3  # what the fixture is known for
    result = read_records(path)
    assert result.skipped["<not object>"] + result.skipped["<not json>"] == 3
    # lines after the bad ones are still read, up to the last (unterminated) summary line
    last = result.records[-1]
    assert isinstance(last, LegacySummary)
    assert last.summary == json.loads(lines[-1])["summary"]
    bad_at = max(i for i, line in enumerate(lines) if not isinstance(parsed(line), dict))
    after = [json.loads(line) for line in lines[bad_at + 1 :]]
    expected = [o["uuid"] for o in after if o.get("type") in ("user", "assistant")]
    resumed = sum(len(line) + 1 for line in lines[: bad_at + 1])
    got = [_where_uuid(r) for r in result.records if _offset(r) >= resumed]
    assert expected and got == [*expected, None]  # and the summary line


def test_noise_lines_are_skipped_and_counted_by_type() -> None:
    path = fixture("agent-sessions/small.jsonl")
    objs = [parsed(line) for line in raw_lines(path)]
    expected = Counter(o["type"] for o in objs if o["type"] not in ("user", "assistant", "system"))
    expected.pop("summary")
    result = read_records(path)
    for noise in ("progress", "attachment", "file-history-snapshot", "queue-operation"):
        assert expected[noise] > 0, noise  # the catalogue holds every kind of noise
    for kind, n in expected.items():
        assert result.skipped[kind] == n, kind
    titles = [k for k in expected if k.endswith("title")]
    assert titles and all(result.skipped[k] for k in titles)
    system = Counter(o.get("subtype") for o in objs if o["type"] == "system")
    boundaries = system.pop("compact_boundary")
    assert sum(isinstance(r, CompactBoundary) for r in result.records) == boundaries
    for subtype, n in system.items():
        assert result.skipped[f"system/{subtype}"] == n


def test_spotter_noise_is_most_of_the_file_and_none_of_the_records() -> None:
    path = fixture(SPOTTER_A)
    objs = [json.loads(line) for line in raw_lines(path)]
    result = read_records(path)
    progress = sum(o["type"] == "progress" for o in objs)
    assert result.skipped["progress"] == progress > len(objs) / 2
    conversation = sum(o["type"] in ("user", "assistant") for o in objs)
    records = [
        r for r in result.records if isinstance(r, UserLine | AssistantPart | CompactSummary)
    ]
    assert len(records) == conversation


def test_unknown_line_types_and_fields_are_tolerated(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    write_lines(
        path,
        [
            {"type": "hologram-sync", "uuid": "h1", "payload": {"deep": [1, 2, {"x": None}]}},
            {"type": "system", "subtype": "quantum_notice", "content": "?"},
            {"no": "type at all"},
            user_line("u1", "hello", brandNewField={"a": 1}, isMeta=False, weird=[1, "2"]),
            assistant_line(
                "a1",
                "msg_1",
                [
                    {"type": "text", "text": "hi", "citations": [{"x": 1}]},
                    {"type": "server_tool_use", "id": "s1", "name": "web", "input": {}},
                ],
                futureFlag=True,
            ),
            {"type": "user", "uuid": "u2", "message": "not an object"},
        ],
    )
    result = read_records(path)
    # a kind not known here is skipped and counted; a line without a type, or a conversation
    # line without a message, is damaged: counted and placed as not a record
    assert result.skipped == Counter(
        {"hologram-sync": 1, "system/quantum_notice": 1, "<not a record>": 2}
    )
    assert len(result.unreadable) == 2
    user, assistant = result.records
    assert isinstance(user, UserLine) and user.blocks == [fr.TextBlock(text="hello")]
    assert isinstance(assistant, AssistantPart)
    assert assistant.blocks == [
        fr.TextBlock(text="hi"),
        fr.TextBlock(text="[server_tool_use block]"),
    ]
    assert result.end == path.stat().st_size


def test_lone_surrogates_and_bad_utf8_do_not_lose_or_break_a_line(tmp_path: Path) -> None:
    # Claude Code before 2.1.132 could cut an emoji in half when truncating a tool output and
    # write the lone UTF-16 surrogate as a JSON escape; a damaged file can hold bytes that are
    # not UTF-8. Either must cost at most the broken character, never the line or the read.
    path = tmp_path / "s.jsonl"
    lone = json.dumps(
        user_line("u1", [{"type": "tool_result", "tool_use_id": "t1", "content": "ok \ud83d"}])
    )
    assert "\\ud83d" in lone
    bad_utf8 = json.dumps(user_line("u2", "caf\u00e9 au lait"), ensure_ascii=False).encode()
    bad_utf8 = bad_utf8.replace(b"\xc3\xa9", b"\xe9")  # Latin-1, not UTF-8
    assert b"\xe9" in bad_utf8
    path.write_bytes(lone.encode() + b"\n" + bad_utf8 + b"\n")
    result = read_records(path)
    assert not result.skipped
    first, second = result.records
    assert isinstance(first, UserLine) and isinstance(second, UserLine)
    block = first.blocks[0]
    assert isinstance(block, fr.ToolResultBlock) and block.content == "ok \ufffd"
    assert second.blocks == [fr.TextBlock(text="caf\ufffd au lait")]
    assert result.end == path.stat().st_size


# --- a file being written -------------------------------------------------------------------


def test_half_written_last_line_is_left_for_the_next_read(tmp_path: Path) -> None:
    source = fixture("spotter/short.jsonl")
    lines = raw_lines(source)
    whole = read_records(source)
    path = tmp_path / "short.jsonl"
    for k in range(len(lines)):
        head = b"".join(line + b"\n" for line in lines[:k])
        cut = len(lines[k]) // 2
        path.write_bytes(head + lines[k][:cut])
        first = read_records(path)
        assert first.end == len(head)  # stops before the partial line
        assert not set(first.skipped) & {"<not json>", "<not object>"}
        expected_first = [r for r in whole.records if _offset(r) < len(head)]
        assert first.records == expected_first
        with path.open("ab") as f:  # the writer completes the line
            f.write(lines[k][cut:] + b"\n")
        second = read_records(path, first.end)
        assert second.end == len(head) + len(lines[k]) + 1
        assert first.records + second.records == [
            r for r in whole.records if _offset(r) <= len(head)
        ]


def test_half_written_multibyte_character_is_not_an_error(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    line = json.dumps(user_line("u1", "na\u00efve \u2603"), ensure_ascii=False).encode()
    cut = line.index("\u2603".encode()) + 1  # inside the snowman's three bytes
    path.write_bytes(line[:cut])
    assert read_records(path).end == 0 and not read_records(path).skipped
    path.write_bytes(line + b"\n")
    (rec,) = read_records(path).records
    assert isinstance(rec, UserLine) and rec.blocks == [fr.TextBlock(text="na\u00efve \u2603")]


def test_complete_last_line_without_newline_is_read(tmp_path: Path) -> None:
    # A file that ends without a newline (hand-made, or copied): its last line is complete JSON
    # and must not be lost; a writer that later adds "\n" and more lines just continues it.
    path = tmp_path / "s.jsonl"
    first = json.dumps(user_line("u1", "one")).encode()
    path.write_bytes(first)
    result = read_records(path)
    assert len(result.records) == 1 and result.end == len(first)
    second = json.dumps(user_line("u2", "two")).encode()
    with path.open("ab") as f:
        f.write(b"\n" + second + b"\n")
    more = read_records(path, result.end)
    assert [r.where.uuid for r in more.records if isinstance(r, UserLine)] == ["u2"]
    assert more.end == path.stat().st_size and not more.skipped


def _offset(r: object) -> int:
    if isinstance(r, LegacySummary):
        return r.offset
    assert isinstance(r, UserLine | AssistantPart | CompactBoundary | CompactSummary)
    return r.where.offset


# --- records --------------------------------------------------------------------------------


def test_streamed_response_lines_share_their_message_id() -> None:
    path = fixture(SPOTTER_A)
    objs = [json.loads(line) for line in raw_lines(path)]
    assistant = [o for o in objs if o["type"] == "assistant"]
    by_id = Counter(o["message"]["id"] for o in assistant)
    split = [mid for mid, n in by_id.items() if n >= 3]
    assert split  # real transcripts write one API response over several lines
    parts = [r for r in read_records(path).records if isinstance(r, AssistantPart)]
    assert len(parts) == len(assistant)
    for mid in split:
        raw = [o for o in assistant if o["message"]["id"] == mid]
        mine = [p for p in parts if p.message_id == mid]
        assert [p.where.uuid for p in mine] == [o["uuid"] for o in raw]
        assert {p.request_id for p in mine} == {o["requestId"] for o in raw}
        assert all(
            len(p.blocks) == len(o["message"]["content"]) for p, o in zip(mine, raw, strict=True)
        )


def test_tool_result_content_as_string_and_as_blocks(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    write_lines(
        path,
        [
            user_line("u1", [{"type": "tool_result", "tool_use_id": "t1", "content": "héllo"}]),
            user_line(
                "u2",
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t2",
                        "is_error": True,
                        "content": [
                            {"type": "text", "text": "line one"},
                            {"type": "image", "source": {"type": "base64", "data": "AA=="}},
                            {"type": "text", "text": "line two"},
                        ],
                    },
                    {"type": "text", "text": "and a note"},
                ],
            ),
            user_line("u3", [{"type": "tool_result", "tool_use_id": "t3"}]),
        ],
    )
    r1, r2, r3 = read_records(path).records
    assert isinstance(r1, UserLine) and isinstance(r2, UserLine) and isinstance(r3, UserLine)
    assert r1.blocks == [fr.ToolResultBlock(tool_use_id="t1", content="héllo", size=6)]
    text = "line one\n[image]\nline two"
    assert r2.blocks == [
        fr.ToolResultBlock(tool_use_id="t2", content=text, size=len(text), is_error=True),
        fr.TextBlock(text="and a note"),
    ]
    assert r3.blocks == [fr.ToolResultBlock(tool_use_id="t3")]


def test_tool_results_of_the_fixtures_in_both_shapes() -> None:
    path = fixture(SPOTTER_A)
    expected: dict[str, str] = {}
    shapes: Counter[str] = Counter()
    for line in raw_lines(path):
        o = json.loads(line)
        content = o.get("message", {}).get("content") if o["type"] == "user" else None
        for b in content if isinstance(content, list) else []:
            if b.get("type") == "tool_result":
                c = b.get("content")
                shapes[type(c).__name__] += 1
                expected[b["tool_use_id"]] = (
                    c if isinstance(c, str) else "\n".join(x["text"] for x in c if "text" in x)
                )
    assert shapes["str"] and shapes["list"]
    got = {
        b.tool_use_id: b.content
        for r in read_records(path).records
        if isinstance(r, UserLine)
        for b in r.blocks
        if isinstance(b, fr.ToolResultBlock)
    }
    assert got == expected


def test_text_of_odd_content() -> None:
    assert text_of(None) == ""
    assert text_of(["a", {"type": "text", "text": "b"}, {"type": "other"}, 3]) == "a\nb"
    assert text_of(42) == "42"


def test_compaction_records() -> None:
    path = fixture(SPOTTER_A)
    objs = [json.loads(line) for line in raw_lines(path)]
    (boundary_obj,) = [o for o in objs if o.get("subtype") == "compact_boundary"]
    (summary_obj,) = [o for o in objs if o.get("isCompactSummary")]
    records = read_records(path).records
    (boundary,) = [r for r in records if isinstance(r, CompactBoundary)]
    (summary,) = [r for r in records if isinstance(r, CompactSummary)]
    assert boundary.trigger == boundary_obj["compactMetadata"]["trigger"] == "auto"
    assert boundary.pre_tokens == boundary_obj["compactMetadata"]["preTokens"]
    assert boundary.where.uuid == boundary_obj["uuid"]
    assert summary.where.uuid == summary_obj["uuid"]
    assert summary.text == text_of(summary_obj["message"]["content"])
    assert summary.text.startswith("This session is being continued")
    assert records.index(summary) == records.index(boundary) + 1


def test_summary_lines() -> None:
    path = fixture("claude-code-log/todowrite_examples.jsonl")
    last = json.loads(raw_lines(path)[-1])
    assert last["type"] == "summary"
    rec = read_records(path).records[-1]
    assert isinstance(rec, LegacySummary)
    assert rec == LegacySummary(rec.offset, last["summary"], last["leafUuid"])


def test_empty_files(tmp_path: Path) -> None:
    path = fixture("claude-history/-Users-user-project/0f13eeba-e6ed-42ea-ad8c-d8db37e1304e.jsonl")
    assert path.stat().st_size == 0
    result = read_records(path)
    assert result.records == [] and result.end == 0 and not result.skipped
    blank = tmp_path / "blank.jsonl"
    blank.write_bytes(b"\n\n  \n")
    result = read_records(blank)
    assert result.records == [] and result.end == 5 and not result.skipped


def test_file_of_summary_lines_only() -> None:
    path = fixture("claude-history/-Users-user-project/3f6ddfee-788c-48a5-8f7a-d43377b51472.jsonl")
    objs = [json.loads(line) for line in raw_lines(path)]
    assert {o["type"] for o in objs} == {"summary"}
    result = read_records(path)
    assert [(r.summary, r.leaf_uuid) for r in result.records if isinstance(r, LegacySummary)] == [
        (o["summary"], o["leafUuid"]) for o in objs
    ]
    assert len(result.records) == len(objs) and not result.skipped


def test_file_of_snapshots_only() -> None:
    path = fixture("claude-history/-Users-user-project/6d3dc917-03e0-448d-a7a5-d5e6c1a6dd27.jsonl")
    objs = [json.loads(line) for line in raw_lines(path)]
    assert {o["type"] for o in objs} == {"file-history-snapshot"}
    result = read_records(path)
    assert result.records == [] and result.skipped == {"file-history-snapshot": len(objs)}
    assert result.end == path.stat().st_size


def test_sidechain_and_agent_fields(tmp_path: Path) -> None:
    source = fixture("claude-code-viewer/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl")
    path = tmp_path / "copy.jsonl"
    shutil.copyfile(source, path)
    objs = [json.loads(line) for line in raw_lines(path)]
    conversation = [o for o in objs if o["type"] in ("user", "assistant")]
    side = [o["uuid"] for o in conversation if o.get("isSidechain") is True]
    records = read_records(path).records
    assert side
    assert [_where_uuid(r) for r in records if _sidechain(r)] == side
    agent = fixture(
        "agent-sessions/subagent/0a1b2c3d-4e5f-4061-8071-2a3b4c5d6e7f/subagents/"
        "agent-a0ad4f44468bdf20d.jsonl"
    )
    agent_ids = {_offset_where(r).agent_id for r in read_records(agent).records if _sidechain(r)}
    assert agent_ids == {"a0ad4f44468bdf20d"}


def _where_uuid(r: object) -> str | None:
    return None if isinstance(r, LegacySummary) else _offset_where(r).uuid


def _sidechain(r: object) -> bool:
    return not isinstance(r, LegacySummary) and _offset_where(r).sidechain


def _offset_where(r: object) -> Any:
    assert isinstance(r, UserLine | AssistantPart | CompactBoundary | CompactSummary)
    return r.where
