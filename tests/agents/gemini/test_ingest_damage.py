"""A Gemini CLI notice over 64 KiB (issue 40 item 3) is a record whose data is an artifact, not
a failure of its batch: the lines after it are archived, on the first run and every later one."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from continuity import frames as fr
from continuity.cli.app import app
from continuity.store.jsonl import Store


def test_a_large_notice_is_an_artifact_and_costs_nothing(tmp_path: Path) -> None:
    lines = [
        {"sessionId": "s-large", "projectHash": "x", "startTime": "2026-04-29T21:39:22Z"},
        {"id": "u1", "timestamp": "2026-04-29T21:39:33Z", "type": "user", "content": "first"},
        {"id": "n1", "timestamp": "2026-04-29T21:39:34Z", "type": "info", "content": "x" * 70_000},
        {"id": "u2", "timestamp": "2026-04-29T21:39:35Z", "type": "user", "content": "second"},
    ]
    path = tmp_path / "chats" / "session-2026-04-29T21-39-large.jsonl"
    path.parent.mkdir()
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    store = tmp_path / "store"
    args = ["--store", str(store), "ingest", "--agent", "gemini", str(path)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "ingested 1 Gemini CLI session: 2 new messages"
    opened = Store(store)
    frames = list(opened.thread("gemini-s-large").read())
    (notice,) = [f for f in frames if isinstance(f, fr.RecordAppended)]
    assert notice.kind == "gemini-cli.info" and notice.data is None
    assert notice.artifact_id is not None
    assert json.loads(opened.artifacts.get(notice.artifact_id))["text"] == "x" * 70_000
    messages = [f for f in frames if isinstance(f, fr.MessageAppended)]
    texts = [b.text for f in messages for b in f.content if isinstance(b, fr.TextBlock)]
    assert texts == ["first", "second"]
    again = CliRunner().invoke(app, args)
    assert (again.exit_code, again.stdout.strip()) == (
        0,
        "ingested 1 Gemini CLI session: 0 new messages",
    )
