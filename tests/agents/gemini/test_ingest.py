"""Gemini CLI sessions archived from the genuine and recorded fixture files, message by message.

Every fixture session (two genuine legacy ``.json`` ones, the hand-modelled v0.40 ``.jsonl``,
and the two recorded from Gemini CLI 0.61.0) is ingested and compared with the file itself:
the messages by kind, the tool pairs, the compression's checkpoint; then re-ingest, growth, a
rewrite, a rewind and a line cut mid-way.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from continuity import frames as fr
from continuity.agents.gemini import detect
from continuity.agents.gemini.ingest import CUT_RULE, ingest_file
from continuity.agents.table import GEMINI
from continuity.store.base import BaseStore
from continuity.store.locate import open_store
from continuity.summary import decode_summary
from tests.support.fixtures import shared_fixture

pytestmark = pytest.mark.slow


def _legacy() -> list[Path]:
    root = shared_fixture("agents", "gemini", "codemie-code")
    return sorted(root.glob("tmp/*/chats/session-*.json"))


def _store(tmp_path: Path) -> BaseStore:
    return open_store(tmp_path / "store", create=True)


def _frames(store: BaseStore, thread_id: str) -> list[fr.Frame]:
    return list(store.thread(thread_id).read())


def _messages(frames: list[fr.Frame]) -> list[fr.MessageAppended]:
    return [f for f in frames if isinstance(f, fr.MessageAppended)]


def _lines(store: BaseStore, thread_id: str) -> list[bytes]:
    return [line for _seq, line in store.thread(thread_id).read_lines()]


def test_every_legacy_json_session_is_archived_message_by_message(tmp_path: Path) -> None:
    files = _legacy()
    assert len(files) == 2
    store = _store(tmp_path)
    for path in files:
        assert detect(path)
        record = json.loads(path.read_text())
        report = ingest_file(store, path, final=True)
        thread_id = GEMINI.thread_id(record["sessionId"])
        frames = _frames(store, thread_id)
        created = frames[0]
        assert isinstance(created, fr.ThreadCreated)
        assert created.meta["source"] == "gemini-cli"
        assert created.meta["session_id"] == record["sessionId"]
        assert created.meta["transcript"] == str(path.resolve())
        messages = _messages(frames)
        users = [m for m in record["messages"] if m["type"] == "user"]
        geminis = [m for m in record["messages"] if m["type"] == "gemini"]
        calls = [c for m in geminis for c in m.get("toolCalls", [])]
        # each record once under its own id; each gemini record with calls adds its results
        by_id = {m.message_id: m for m in messages}
        for rec in users:
            got = by_id[rec["id"]]
            assert got.role == "user"
            assert [b.text for b in got.content if isinstance(b, fr.TextBlock)] == [rec["content"]]
        for rec in geminis:
            got = by_id[rec["id"]]
            assert got.role == "assistant"
            texts = [b.text for b in got.content if isinstance(b, fr.TextBlock)]
            assert texts == ([rec["content"]] if rec["content"] else [])
            thinking = [b for b in got.content if isinstance(b, fr.ThinkingBlock)]
            assert len(thinking) == len(rec.get("thoughts", []))
            assert got.meta["tokens_total"] == str(rec["tokens"]["total"])
            assert got.meta["model"] == rec["model"]
        uses = [b for m in messages for b in m.content if isinstance(b, fr.ToolUseBlock)]
        results = [b for m in messages for b in m.content if isinstance(b, fr.ToolResultBlock)]
        assert [u.id for u in uses] == [c["id"] for c in calls]
        assert [r.tool_use_id for r in results] == [c["id"] for c in calls]
        # every call's result directly follows its call's message
        for i, m in enumerate(messages):
            ids = [b.id for b in m.content if isinstance(b, fr.ToolUseBlock)]
            if ids:
                nxt = messages[i + 1]
                assert [
                    b.tool_use_id for b in nxt.content if isinstance(b, fr.ToolResultBlock)
                ] == ids
        assert (
            report.messages
            == len(messages)
            == len(users) + len(geminis) + sum(1 for m in geminis if m.get("toolCalls"))
        )
        # large outputs went to artifacts with a preview
        for r in results:
            if r.size > 16 * 1024:
                assert r.artifact_id is not None and len(r.preview) == 2000


def test_reingest_is_byte_identical_and_without_cursors(tmp_path: Path) -> None:
    store = _store(tmp_path)
    paths = [
        *_legacy(),
        shared_fixture("agents", "recorded", "gemini_transcript_resume_compress.jsonl"),
    ]
    for p in paths:
        ingest_file(store, p, final=True)
    before = {t: _lines(store, t) for t in store.threads()}
    for p in paths:
        assert ingest_file(store, p, final=True).messages == 0
    shutil.rmtree(tmp_path / "store" / "cache")
    for p in paths:
        again = ingest_file(store, p, final=True)
        assert again.messages == 0 and again.checkpoints == 0
    assert {t: _lines(store, t) for t in store.threads()} == before


def _jsonl_records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_recorded_compression_becomes_a_checkpoint_over_the_replaced_messages(
    tmp_path: Path,
) -> None:
    path = shared_fixture("agents", "recorded", "gemini_transcript_resume_compress.jsonl")
    store = _store(tmp_path)
    report = ingest_file(store, path, final=True)
    assert report.checkpoints == 1
    frames = _frames(store, "gemini-fb5b2188-1801-48c1-82f3-df2140e79338")
    messages = _messages(frames)
    # The conversation once: the resume and the compression rewrote it, new ids included.
    user_texts = [
        b.text
        for m in messages
        if m.role == "user"
        for b in m.content
        if isinstance(b, fr.TextBlock)
    ]
    assert user_texts[1:] == ["Please RUN_ECHO now", "AUTOCOMPACT_TEST please"]
    assert messages[0].meta.get("is_meta") == "true"  # the CLI's <session_context>
    uses = [
        b.input["command"] for m in messages for b in m.content if isinstance(b, fr.ToolUseBlock)
    ]
    assert uses == ["echo hi", "echo big"]
    results = [b.content for m in messages for b in m.content if isinstance(b, fr.ToolResultBlock)]
    assert len(results) == 2 and "Output: big" in results[1]
    assert not any(
        "Got it. Thanks" in b.text
        for m in messages
        for b in m.content
        if isinstance(b, fr.TextBlock)
    )
    (cp,) = [f for f in frames if isinstance(f, fr.CompactionCheckpointCreated)]
    assert cp.cut_rule_id == CUT_RULE and cp.produced_by == "gemini-cli"
    assert cp.summary_kind == "cumulative_v1"
    # It covers up to the answer before the turn the compression kept.
    covered = next(m for m in messages if m.seq == cp.to_seq)
    assert [b.text for b in covered.content if isinstance(b, fr.TextBlock)] == [
        "The command printed hi. Done."
    ]
    summary = decode_summary(store.artifacts.get(cp.summary_artifact_id))
    assert summary.text == "<state_snapshot>SCRIPTED_SNAPSHOT: user ran echo big.</state_snapshot>"
    # compile starts from it
    from continuity.context.compiler import compile_context

    result = compile_context(
        store.thread(cp_thread := "gemini-fb5b2188-1801-48c1-82f3-df2140e79338")
    )
    assert result.decision.checkpoint is not None
    assert result.decision.checkpoint.checkpoint_id == cp.checkpoint_id
    assert cp_thread


def test_growing_file_line_by_line_gives_the_same_archive(tmp_path: Path) -> None:
    """Fed one line (and half-lines) at a time, with hooks' non-final ingests, then a final
    one: the same frames as one read of the whole file."""
    source = shared_fixture("agents", "recorded", "gemini_transcript_resume_compress.jsonl")
    whole = _store(tmp_path / "a")
    ingest_file(whole, source, final=True)
    store = _store(tmp_path / "b")
    target = tmp_path / "chats" / "session-x.jsonl"
    target.parent.mkdir()
    data = source.read_bytes()
    lines = data.splitlines(keepends=True)
    written = b""
    for line in lines:
        half = line[: len(line) // 2]
        target.write_bytes(written + half)  # a line cut mid-way: left for later
        ingest_file(store, target)
        written += line
        target.write_bytes(written)
        ingest_file(store, target)
    ingest_file(store, target, final=True)
    tid = "gemini-fb5b2188-1801-48c1-82f3-df2140e79338"

    def shape(s: BaseStore) -> list[tuple[str, str, str]]:
        out = []
        for f in _frames(s, tid):
            if isinstance(f, fr.MessageAppended):
                out.append((type(f).__name__, f.message_id, repr(f.content)))
            elif isinstance(f, fr.CompactionCheckpointCreated):
                out.append((type(f).__name__, f.checkpoint_id, str(f.to_seq)))
        return out

    assert shape(store) == shape(whole)


def test_a_message_is_archived_in_its_final_form(tmp_path: Path) -> None:
    """The gemini message is written empty, then again with its tool call: a non-final ingest
    between the two archives nothing of it; the call and its result come once."""
    source = shared_fixture("agents", "recorded", "gemini_transcript_basic.jsonl")
    lines = source.read_bytes().splitlines(keepends=True)
    target = tmp_path / "chats" / "session-y.jsonl"
    target.parent.mkdir()
    target.write_bytes(b"".join(lines[:6]))  # up to the empty gemini message and its $set
    store = _store(tmp_path)
    first = ingest_file(store, target)
    assert first.held_back
    tid = "gemini-2c5fb175-e316-4b2a-98e2-6835ae661533"
    assert [m.role for m in _messages(_frames(store, tid))] == ["user", "user"]
    target.write_bytes(b"".join(lines))
    ingest_file(store, target, final=True)
    messages = _messages(_frames(store, tid))
    assert [m.role for m in messages] == ["user", "user", "assistant", "user", "assistant"]
    assert isinstance(messages[2].content[0], fr.ToolUseBlock)
    assert isinstance(messages[3].content[0], fr.ToolResultBlock)


def test_rewind_retracts_and_later_messages_are_appended(tmp_path: Path) -> None:
    source = shared_fixture("agents", "recorded", "gemini_transcript_basic.jsonl")
    target = tmp_path / "chats" / "session-z.jsonl"
    target.parent.mkdir()
    data = source.read_bytes()
    target.write_bytes(data)
    store = _store(tmp_path)
    ingest_file(store, target, final=True)
    extra = [
        {"$rewindTo": "eea3a017-4bee-4773-9192-bd6496e2f582"},
        {
            "id": "n1",
            "timestamp": "2026-11-26T12:43:00.000Z",
            "type": "user",
            "content": [{"text": "again"}],
        },
        {
            "id": "n2",
            "timestamp": "2026-11-26T12:43:01.000Z",
            "type": "info",
            "content": "Request cancelled.",
        },
        {
            "id": "n3",
            "timestamp": "2026-11-26T12:43:02.000Z",
            "type": "gemini",
            "content": "ok",
            "thoughts": [{"subject": "S", "description": "D"}],
        },
    ]
    target.write_bytes(data + b"".join(json.dumps(e).encode() + b"\n" for e in extra))
    report = ingest_file(store, target, final=True)
    assert report.retractions == 1 and report.messages == 2 and report.notices == 1
    tid = "gemini-2c5fb175-e316-4b2a-98e2-6835ae661533"
    frames = _frames(store, tid)
    (retraction,) = [f for f in frames if isinstance(f, fr.MessagesRetracted)]
    rewound = [
        m
        for m in _messages(frames)
        if retraction.spans[0].from_seq <= m.seq <= retraction.spans[0].to_seq
    ]
    assert rewound[0].message_id == "eea3a017-4bee-4773-9192-bd6496e2f582"
    assert len(rewound) == 4  # the prompt, the call, its result, the answer
    (notice,) = [f for f in frames if isinstance(f, fr.RecordAppended)]
    assert notice.kind == "gemini-cli.info" and notice.data["text"] == "Request cancelled."
    last = _messages(frames)[-1]
    assert isinstance(last.content[0], fr.ThinkingBlock) and last.content[0].text == "**S** D"
    # compile leaves the rewound messages out
    from continuity.context.compiler import compile_context

    bundle_ids = [m.message_id for m in _messages(frames)]
    result = compile_context(store.thread(tid))
    assert result.decision.window_messages == len(bundle_ids) - 4
    assert ingest_file(store, target, final=True).retractions == 0
    shutil.rmtree(tmp_path / "store" / "cache")  # no cursor: the log's keys alone
    lines = _lines(store, tid)
    again = ingest_file(store, target, final=True)
    assert (again.messages, again.notices, again.retractions) == (0, 0, 0)
    assert _lines(store, tid) == lines


def test_subagent_recording_is_a_child_thread_and_project_root_is_found(tmp_path: Path) -> None:
    home = tmp_path / "home" / ".gemini"
    chats = home / "tmp" / "my-repo" / "chats"
    (chats / "parent-session").mkdir(parents=True)
    (home / "projects.json").write_text(json.dumps({"projects": {"/src/my-repo": "my-repo"}}))
    main = chats / "session-2026-11-26T12-42-parent-s.jsonl"
    main.write_text(
        json.dumps({"sessionId": "parent-session", "projectHash": "x", "kind": "main"})
        + "\n"
        + json.dumps({"id": "u1", "type": "user", "content": [{"text": "hi"}]})
        + "\n"
    )
    sub = chats / "parent-session" / "sub-1.jsonl"
    sub.write_text(
        json.dumps({"sessionId": "sub-1", "projectHash": "x", "kind": "subagent"})
        + "\n"
        + json.dumps({"id": "s1", "type": "gemini", "content": "sub answer"})
        + "\n"
    )
    store = _store(tmp_path)
    from continuity.agents.gemini import ingest_paths

    reports = ingest_paths(store, [home / "tmp"], final=True)
    assert [r.threads for r in reports] == [
        ["gemini-parent-session"],
        ["gemini-parent-session.agent-sub-1"],
    ]
    child = _frames(store, "gemini-parent-session.agent-sub-1")[0]
    assert isinstance(child, fr.ThreadCreated)
    assert child.parent_thread_id == "gemini-parent-session"
    parent = _frames(store, "gemini-parent-session")[0]
    assert isinstance(parent, fr.ThreadCreated) and parent.meta["project"] == "/src/my-repo"
    (chats.parent / ".project_root").write_text("/elsewhere/my-repo\n")
    from continuity.agents.gemini.ingest import project_root

    assert project_root(main, {}) == "/elsewhere/my-repo"


def test_bad_lines_are_skipped_and_counted(tmp_path: Path) -> None:
    target = tmp_path / "chats" / "session-b.jsonl"
    target.parent.mkdir()
    target.write_text(
        json.dumps({"sessionId": "b", "projectHash": "x"})
        + "\nnot json\n[1]\n"
        + json.dumps({"id": "u", "type": "user", "content": "q"})
        + "\n"
    )
    report = ingest_file(_store(tmp_path), target, final=True)
    assert report.messages == 1 and sum(report.skipped.values()) == 2
    with pytest.raises(FileNotFoundError):
        ingest_file(_store(tmp_path), tmp_path / "missing.jsonl")


def test_a_rewritten_json_session_that_lost_a_message_adds_only_the_new_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cursor's recent keys cannot cover a long session: the log's keys decide."""
    from continuity.agents.gemini import ingest as gemini_ingest

    monkeypatch.setattr(gemini_ingest, "_RECENT_KEYS", 2)
    (source, *_rest) = _legacy()
    target = tmp_path / "chats" / source.name
    target.parent.mkdir()
    record = json.loads(source.read_text())
    target.write_text(json.dumps(record, indent=2))
    store = _store(tmp_path)
    first = ingest_file(store, target, final=True)
    del record["messages"][-3]  # the file is rewritten whole, without a message
    record["messages"].append({"id": "late", "type": "user", "content": "one more"})
    target.write_text(json.dumps(record, indent=2))
    again = ingest_file(store, target, final=True)
    assert again.messages == 1 and first.messages > 1
    assert _messages(_frames(store, GEMINI.thread_id(record["sessionId"])))[-1].message_id == "late"
