"""The warm tier: the agent's summary of a segment (MCP ``remember``) is a checkpoint over its
range with its key decisions, files and ratio; search finds it, compile uses it, and the restore
after the agent's own compaction carries it instead of extracting that stretch again."""

from __future__ import annotations

from pathlib import Path

import pytest

from continuity import frames as fr
from continuity.agents.base.restore import restore_context
from continuity.agents.claude_code.ingest import ingest_transcript
from continuity.context.compiler import compile_context
from continuity.mcp_server.archive import Archive, ToolError
from continuity.mcp_server.tools import call_tool
from continuity.retrieval.search import search
from continuity.rolling.warm import compressed_segments
from continuity.store.jsonl import Store
from tests.rolling.sessions import long_session

SUMMARY = "The wombat fix: the login redirect loop came from a stale session cookie."


def _remember(store: Store, thread_id: str, **args: object) -> dict[str, object]:
    result = call_tool(Archive(store, "/work"), "remember", {"thread": thread_id, **args})
    assert isinstance(result.data, dict)
    return result.data


@pytest.fixture
def session(tmp_store: Store, tmp_path: Path) -> str:
    t = long_session(tmp_path, final_tokens=130_000)
    ingest_transcript(tmp_store, t.path, final=True)
    return t.thread_id


def test_a_segment_summary_is_a_checkpoint_with_its_keys_and_ratio(
    tmp_store: Store, session: str
) -> None:
    data = _remember(
        tmp_store,
        session,
        kind="summary",
        segment="seg-1",
        text=SUMMARY,
        key_decisions=["clear the cookie on logout", "clear the cookie on logout"],
        key_files=["auth/login.py"],
    )
    assert data["to_seq"] == 36
    (warm,) = compressed_segments(tmp_store.thread(session))
    assert (warm.from_seq, warm.to_seq, warm.segment_id) == (1, 36, "seg-1")
    assert warm.key_decisions == ["clear the cookie on logout"]  # once
    assert warm.key_files == ["auth/login.py"]
    assert 0 < warm.compressed_tokens < warm.original_tokens
    assert warm.ratio == round(warm.compressed_tokens / warm.original_tokens, 4)
    cps = [
        f
        for f in tmp_store.thread(session).read(types=["compaction_checkpoint_created"])
        if isinstance(f, fr.CompactionCheckpointCreated)
    ]
    assert [c.checkpoint_id for c in cps] == [warm.checkpoint_id] and cps[0].to_seq == 36

    hits = search(tmp_store, "wombat cookie", thread=session, k=3)
    assert hits and hits[0].seq == cps[0].seq
    bundle = compile_context(tmp_store, session, log=False).bundle
    text = msgspec_text(bundle)
    assert "wombat fix" in text and "clear the cookie on logout" in text


def msgspec_text(bundle: object) -> str:
    import msgspec

    return msgspec.json.encode(bundle).decode()


def test_an_unknown_segment_is_a_clear_error(tmp_store: Store, session: str) -> None:
    with pytest.raises(ToolError, match="no segment 'seg-999'"):
        _remember(tmp_store, session, kind="summary", segment="seg-999", text="x")


def test_the_restore_after_a_compaction_carries_the_agents_words(
    tmp_store: Store, tmp_path: Path
) -> None:
    t = long_session(tmp_path, final_tokens=130_000)
    ingest_transcript(tmp_store, t.path, final=True)
    before = restore_context(tmp_store.thread(t.thread_id), log=False)
    _remember(
        tmp_store,
        t.thread_id,
        kind="summary",
        segment="seg-1",
        text=SUMMARY,
        key_files=["auth/login.py"],
    )
    t.compaction("Claude's own summary.")
    t.prompt("go on")
    t.flush()
    ingest_transcript(tmp_store, t.path, final=True)
    after = restore_context(tmp_store.thread(t.thread_id), log=False)
    assert SUMMARY not in before
    assert "as you summarized them" in after and SUMMARY in after and "#1–#36" in after
    assert len(after) <= 9_500
