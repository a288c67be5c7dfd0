"""The store catalog knows every agent: each agent's own compactions are counted and each
agent's sessions carry their last message's time; a catalog written before that (version 2,
which counted Claude Code's alone) is read as absent and rebuilt, never served."""

from __future__ import annotations

from pathlib import Path

import blake3
import msgspec

from continuity.agents.base.sessions import list_sessions
from continuity.caches.catalog import CATALOG_FILE, catalog_problems, catalog_view
from continuity.maintenance.stats import list_threads
from continuity.store.jsonl import Store
from tests.support.archive import MINUTE, agent_session

T0 = 1_767_603_600_000


def _store(tmp_path: Path) -> Store:
    store = Store(tmp_path / "s", create=True, durable=False)
    for n, source in enumerate(["claude-code", "codex", "gemini-cli", "opencode"]):
        agent_session(store, source, f"s{n}", project="/p", start_ms=T0 + n, compaction=True)
    return store


def test_every_agents_own_compactions_are_counted(tmp_path: Path) -> None:
    store = _store(tmp_path)
    sessions = list_sessions(store)
    assert [(s.agent, s.compactions, s.messages) for s in sessions] == [
        ("claude-code", 1, 4),
        ("codex", 1, 4),
        ("gemini", 1, 4),
        ("opencode", 1, 4),
    ]
    # the last message's time, not the checkpoint's after it
    assert all(s.last_active_ms == s.first_ms + 4 * MINUTE for s in sessions)
    assert {t.thread_id: t.compactions for t in list_threads(store)} == {
        "cc-s0": 1,
        "codex-s1": 1,
        "gemini-s2": 1,
        "oc-s3": 1,
    }


def test_a_catalog_of_the_previous_version_is_rebuilt(tmp_path: Path) -> None:
    store = _store(tmp_path)
    catalog_view(store)
    path = tmp_path / "s" / "cache" / CATALOG_FILE
    now = msgspec.json.decode(path.read_bytes())
    assert now["version"] == 3
    # What version 2 wrote: other agents' compactions not counted, no last message time.
    old_rows = []
    for row in now["threads"]:
        if not row["thread_id"].startswith("cc-"):
            row = {**row, "compactions": 0}
            row.pop("last_message_ms", None)
        old_rows.append(msgspec.json.encode(row))
    checks = [blake3.blake3(raw).hexdigest(8) for raw in old_rows]
    old = b'{"version":2,"threads":[' + b",".join(old_rows) + b'],"checks":'
    path.write_bytes(old + msgspec.json.encode(checks) + b"}\n")
    assert catalog_problems(store) == []  # not damage: another version's file
    sessions = list_sessions(store)
    assert [s.compactions for s in sessions] == [1, 1, 1, 1]
    assert all(s.last_active_ms == s.first_ms + 4 * MINUTE for s in sessions)
    rebuilt = msgspec.json.decode(path.read_bytes())
    assert rebuilt["version"] == 3 and rebuilt["threads"] == now["threads"]
