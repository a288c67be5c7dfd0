"""``remember`` appends to a session's thread that the Claude Code ingest also appends to, from
hook processes: a frame written between two ingests must break nothing. A real fixture session
(with a compaction) is ingested in pieces, the agent remembering between them, and compared with
the same session ingested whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from continuity import frames as fr
from continuity.agents.claude_code.ingest import ingest_transcript
from continuity.context.compiler import compile_context
from continuity.context.render import to_text
from continuity.maintenance.verify import verify_store
from continuity.mcp_server.archive import Archive
from continuity.mcp_server.tools import call_tool
from continuity.store.jsonl import Store
from tests.support.fixtures import shared_fixture

SESSION = "fa812bfe-b295-4cca-9c2f-fdf01028cb46"  # spotter: a long session with a compaction


def _messages(store: Store, thread_id: str) -> list[tuple[str, str, list[fr.ContentBlock]]]:
    return [
        (f.role, f.message_id, f.content)
        for f in store.thread(thread_id).read()
        if isinstance(f, fr.MessageAppended)
    ]


@pytest.mark.slow
def test_frames_remembered_between_two_ingests_break_nothing(tmp_path: Path) -> None:
    source = shared_fixture("claude-code", "spotter", f"{SESSION}.jsonl")
    lines = source.read_bytes().splitlines(keepends=True)
    whole = Store(tmp_path / "whole", create=True, durable=False)
    ingest_transcript(whole, source, final=True)

    store = Store(tmp_path / "pieces", create=True, durable=False)
    transcript = tmp_path / f"{SESSION}.jsonl"
    transcript.write_bytes(b"")
    archive = Archive(store, "/nowhere")
    thread_id = f"cc-{SESSION}"
    cuts = [len(lines) // 5, len(lines) // 2, 4 * len(lines) // 5, len(lines)]
    done = 0
    for i, cut in enumerate(cuts):
        with open(transcript, "ab") as f:
            f.write(b"".join(lines[done:cut]))
        done = cut
        ingest_transcript(store, transcript)
        head = store.thread(thread_id).head()
        assert head is not None
        if i < 2:
            call_tool(
                archive,
                "remember",
                {"thread": thread_id, "kind": "decision", "text": f"ocelot decision {i}"},
            )
        elif i == 2:
            call_tool(
                archive,
                "remember",
                {
                    "thread": thread_id,
                    "kind": "summary",
                    "from_seq": head.seq // 2,
                    "to_seq": head.seq - 1,
                    "text": "The ocelot summary: the sync worker tests were fixed.",
                },
            )
    ingest_transcript(store, transcript, final=True)

    # every message once, in order, as the whole file gives them
    assert _messages(store, thread_id) == _messages(whole, thread_id)
    report = verify_store(store)
    assert report.ok, report
    # and what was remembered is used
    hits = call_tool(archive, "search", {"query": "ocelot decision", "scope": "all"})
    assert {h["kind"] for h in hits.data["hits"]} >= {"decision"}
    again = Store(tmp_path / "pieces")  # a new process's view: from the log and the caches
    thread = again.thread(thread_id)
    cps = [f for f in thread.read() if isinstance(f, fr.CompactionCheckpointCreated)]
    assert any(c.produced_by.startswith("agent") for c in cps)
    latest_agent = max(c.to_seq for c in cps if c.produced_by.startswith("agent"))
    text = to_text(compile_context(thread, anchor=latest_agent + 1, log=False).bundle)
    assert "The ocelot summary" in text
