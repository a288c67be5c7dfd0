"""Codex rollouts into the archive: every fixture rollout checked message by message against
its file, re-ingest byte-identical, cursor resumption, a cut line, .zst (issue 29 item 1)."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import zstandard

from continuity import frames as fr
from continuity.agents.codex import rollouts
from continuity.agents.codex.ingest import CUT_RULE, ingest_rollout
from continuity.agents.codex.rollout import parse_line
from continuity.store.base import BaseStore
from continuity.store.locate import open_store
from continuity.summary import decode_summary
from tests.support.fixtures import fixture_params, shared_fixture

pytestmark = pytest.mark.slow


def _fixture_rollouts() -> list[Path]:
    root = shared_fixture("agents", "codex")
    found = [*rollouts([root]), root / "agent-sessions" / "small.jsonl"]
    return [*found, shared_fixture("agents", "recorded", "codex_rollout_autocompact.jsonl")]


def _expected(path: Path) -> Counter[str]:
    """What the file holds, counted independently of the adapter: conversation items by type
    (each one message), compactions, and the session's first session_meta."""
    want: Counter[str] = Counter()
    for raw in path.read_bytes().splitlines():
        line = json.loads(raw)
        p = line.get("payload")
        if line.get("type") == "response_item" and isinstance(p, dict):
            if p.get("type") == "message" and p.get("role") not in (
                "user",
                "assistant",
                "developer",
                "system",
            ):
                continue
            if p.get("type") == "message" and not p.get("content"):
                continue
            want[f"item:{p.get('type')}"] += 1
        elif line.get("type") == "compacted":
            want["compacted"] += 1
    return want


def _store(tmp_path: Path) -> BaseStore:
    return open_store(tmp_path / "store", create=True)


def _frames(store: BaseStore, tid: str) -> list[fr.Frame]:
    return list(store.thread(tid).read())


def _kind(f: fr.MessageAppended) -> str:
    return f.meta.get("codex_kind", "message")


@pytest.mark.parametrize(
    "path",
    fixture_params(_fixture_rollouts),
    ids=lambda p: p.name[-24:] if isinstance(p, Path) else "no-fixtures",
)
def test_every_fixture_rollout_is_archived_item_by_item(tmp_path: Path, path: Path) -> None:
    store = _store(tmp_path)
    report = ingest_rollout(store, path)
    frames = _frames(store, report.thread)
    assert isinstance(frames[0], fr.ThreadCreated)
    assert frames[0].meta["source"] == "codex"
    assert frames[0].meta["session_id"] in report.thread
    messages = [f for f in frames if isinstance(f, fr.MessageAppended)]
    got = Counter(f"item:{_kind(m)}" for m in messages)
    got["compacted"] = sum(isinstance(f, fr.CompactionCheckpointCreated) for f in frames)
    assert +got == +_expected(path)
    # every tool output pairs with a call of the same call_id archived before it (not in the
    # hand-trimmed catalogue, whose call ids were replaced)
    calls: set[str] = set()
    paired = path.name != "small.jsonl"
    for m in messages:
        for b in m.content:
            if isinstance(b, fr.ToolUseBlock):
                calls.add(b.id)
            elif isinstance(b, fr.ToolResultBlock):
                assert b.tool_use_id in calls or not paired, b.tool_use_id
    # reasoning: the opaque item kept whole (encrypted content too), never a text block
    for m in messages:
        if _kind(m) == "reasoning":
            (block,) = m.content
            assert isinstance(block, fr.ProviderBlock)
            assert "encrypted_content" not in block.text


def test_injected_context_is_kept_apart_from_the_users_words(tmp_path: Path) -> None:
    store = _store(tmp_path)
    path = shared_fixture("agents", "recorded", "codex_rollout_autocompact.jsonl")
    report = ingest_rollout(store, path)
    users = [
        m
        for m in _frames(store, report.thread)
        if isinstance(m, fr.MessageAppended) and m.role == "user" and _kind(m) == "message"
    ]
    own = [m for m in users if "is_meta" not in m.meta]
    assert [m.content[0].text for m in own] == ["AUTOCOMPACT_TEST please"]  # type: ignore[union-attr]
    assert all(m.meta.get("is_meta") == "true" for m in users if m not in own)


def test_compaction_is_a_checkpoint_with_codexs_summary(tmp_path: Path) -> None:
    store = _store(tmp_path)
    path = shared_fixture("agents", "recorded", "codex_rollout_autocompact.jsonl")
    report = ingest_rollout(store, path)
    frames = _frames(store, report.thread)
    (cp,) = [f for f in frames if isinstance(f, fr.CompactionCheckpointCreated)]
    assert cp.cut_rule_id == CUT_RULE
    last_before = max(f.seq for f in frames if isinstance(f, fr.MessageAppended) and f.seq < cp.seq)
    assert cp.to_seq == last_before
    doc = decode_summary(store.artifacts.get(cp.summary_artifact_id))
    assert doc.text.endswith("\nOK") and "summary produced by the other language model" in doc.text
    kept = [f for f in frames if isinstance(f, fr.RecordAppended) and f.kind == "codex.compacted"]
    assert len(kept) == 1  # the replacement_history, kept whole


def test_remote_compaction_keeps_the_opaque_item(tmp_path: Path) -> None:
    store = _store(tmp_path)
    path = shared_fixture("agents", "codex", "agent-sessions", "small.jsonl")
    report = ingest_rollout(store, path)
    cps = [
        f for f in _frames(store, report.thread) if isinstance(f, fr.CompactionCheckpointCreated)
    ]
    docs = [decode_summary(store.artifacts.get(c.summary_artifact_id)) for c in cps]
    opaque = [d for d in docs if "unreadable_codex_compaction" in d.sections]
    assert opaque and all("encrypted" in d.text for d in opaque)
    assert report.unknown  # kinds not known here are counted (and kept as records)


def _log_bytes(store_dir: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(store_dir)): p.read_bytes()
        for p in sorted(store_dir.rglob("*"))
        if p.is_file() and "cache" not in p.relative_to(store_dir).parts
    }


def test_reingest_leaves_the_log_byte_identical_even_without_cursors(tmp_path: Path) -> None:
    store = _store(tmp_path)
    paths = _fixture_rollouts()
    for p in paths:
        ingest_rollout(store, p)
    before = _log_bytes(tmp_path / "store")
    for p in paths:
        assert ingest_rollout(store, p).messages == 0
    shutil.rmtree(tmp_path / "store" / "cache")
    for p in paths:
        report = ingest_rollout(store, p)
        assert (report.messages, report.records, report.checkpoints) == (0, 0, 0)
        assert report.restarted == "no cursor"
    assert _log_bytes(tmp_path / "store") == before


def _messages(store: BaseStore, tid: str) -> list[Any]:
    return [(m.role, m.content) for m in _frames(store, tid) if isinstance(m, fr.MessageAppended)]


def test_growth_a_cut_line_truncation_and_zst_give_what_one_read_gives(tmp_path: Path) -> None:
    source = shared_fixture(
        "agents",
        "codex",
        "localpush",
        "sessions",
        "2026",
        "02",
        "23",
        "rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl",
    )
    data = source.read_bytes()
    whole = _store(tmp_path / "a")
    tid = ingest_rollout(whole, source).thread

    live = tmp_path / "live" / source.name
    live.parent.mkdir()
    store = _store(tmp_path / "b")
    cut = data.index(b"\n", len(data) // 2) + 40  # mid-line
    live.write_bytes(data[:cut])
    first = ingest_rollout(store, live)
    assert first.bytes_read < cut  # the cut line is left for later
    live.write_bytes(data)  # the line completed, the file grown
    assert ingest_rollout(store, live).restarted is None
    assert _messages(store, tid) == _messages(whole, tid)

    live.write_bytes(data[: len(data) // 3])  # truncated: read again, nothing duplicated
    assert ingest_rollout(store, live).restarted is not None
    assert _messages(store, tid) == _messages(whole, tid)

    packed = tmp_path / "live" / (source.name + ".zst")
    packed.write_bytes(zstandard.ZstdCompressor().compress(data))
    live.unlink()
    assert list(rollouts([live.parent])) == [packed]
    report = ingest_rollout(store, packed)
    assert report.messages == 0 and report.duplicates > 0
    fresh = _store(tmp_path / "c")
    ingest_rollout(fresh, packed)
    assert _messages(fresh, tid) == _messages(whole, tid)


def test_a_damaged_zst_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "rollout-2026-01-01T00-00-00-00000000-0000-0000-0000-000000000000.jsonl.zst"
    bad.write_bytes(b"not zstd")
    with pytest.raises(ValueError, match="not a zstandard file"):
        ingest_rollout(_store(tmp_path), bad)


def test_continuitys_own_restore_is_not_archived_again() -> None:
    # Codex hands a hook's additionalContext to the model as a developer message, and writes it
    # into the rollout: the restore is made from the archive, so archiving it would repeat it.
    restore = "# Restored by continuity from the archive of this session (thread codex-x)\n..."
    line: dict[str, Any] = {
        "timestamp": "2026-01-05T09:00:00.000Z",
        "type": "response_item",
        "payload": {
            "type": "message",
            "role": "developer",
            "content": [{"type": "input_text", "text": restore}],
        },
    }
    assert parse_line(line, 0) == "response_item/message/continuity_restore"
    other = {
        **line,
        "payload": {**line["payload"], "content": [{"type": "input_text", "text": "x"}]},
    }
    assert not isinstance(parse_line(other, 0), str)
