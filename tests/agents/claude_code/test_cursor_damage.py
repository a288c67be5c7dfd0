"""An ingest cursor that says it went further than it did would skip transcript lines for ever:
cursors carry a checksum (issue 26), and a damaged one makes the next ingest read the whole
transcript again (idempotent: the source keys in the log say what is archived)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from continuity import frames as fr
from continuity.agents.claude_code.ingest import ingest_transcript
from continuity.store.jsonl import Store


def _line(n: int) -> str:
    return json.dumps(
        {
            "type": "user",
            "uuid": f"00000000-0000-4000-8000-{n:012d}",
            "sessionId": "s",
            "timestamp": f"2026-01-05T09:00:{n:02d}Z",
            "cwd": "/work",
            "message": {"role": "user", "content": f"prompt number {n}"},
        }
    )


def _texts(store: Store) -> list[str]:
    out: list[str] = []
    for tid in store.threads():
        for f in store.thread(tid).read():
            if isinstance(f, fr.MessageAppended):
                out.extend(b.text for b in f.content if isinstance(b, fr.TextBlock))
    return out


@pytest.mark.parametrize("damage", ["offset moved", "flipped byte", "old format", "emptied"])
def test_a_damaged_cursor_costs_a_re_read_never_a_lost_line(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = Store(tmp_path / "store", create=True)
    transcript = tmp_path / "s.jsonl"
    transcript.write_text("".join(_line(n) + "\n" for n in range(1, 6)))
    assert ingest_transcript(store, transcript, final=False).messages == 5
    assert store.cache_dir is not None
    (cursor,) = (store.cache_dir / "claude-code" / "cursors").glob("*.json")
    raw = cursor.read_bytes()
    body, trailer = raw.split(b"\n#b3:")
    doc = json.loads(body)
    more = "".join(_line(n) + "\n" for n in range(6, 9))
    if damage == "offset moved":  # to the end of what the file will hold: 3 lines skipped
        doc["offset"] += len(more)
        cursor.write_bytes(json.dumps(doc, separators=(",", ":")).encode() + b"\n#b3:" + trailer)
    elif damage == "flipped byte":
        at = body.index(b'"offset":') + len(b'"offset":')
        cursor.write_bytes(raw[:at] + bytes([raw[at] ^ 0x01]) + raw[at + 1 :])
    elif damage == "old format":
        cursor.write_bytes(body)
    else:
        cursor.write_bytes(b"")
    with open(transcript, "a") as f:
        f.write(more)
    report = ingest_transcript(store, transcript, final=False)
    assert report.messages == 3
    assert sorted(_texts(store)) == sorted(f"prompt number {n}" for n in range(1, 9))
    if damage in ("offset moved", "flipped byte"):
        assert any("ingest cursor" in r.getMessage() for r in caplog.records)


def test_verify_names_a_damaged_cursor(tmp_path: Path) -> None:
    from continuity.maintenance.verify import verify_store

    store = Store(tmp_path / "store", create=True)
    transcript = tmp_path / "s.jsonl"
    transcript.write_text("".join(_line(n) + "\n" for n in range(1, 4)))
    ingest_transcript(store, transcript, final=False)
    assert verify_store(store).ok
    assert store.cache_dir is not None
    (cursor,) = (store.cache_dir / "claude-code" / "cursors").glob("*.json")
    raw = cursor.read_bytes()
    cursor.write_bytes(raw[:5] + bytes([raw[5] ^ 0x02]) + raw[6:])
    report = verify_store(store)
    assert [p.where for p in report.problems] == [f"cache file claude-code/cursors/{cursor.name}"]
    cursor.write_bytes(b"")
    assert not verify_store(store).ok
    cursor.write_bytes(raw.split(b"\n#b3:")[0])  # an older version's cursor: no checksum yet
    assert verify_store(store).ok
