"""The queue and the reminder, through Claude Code's prompt hook: past the hot threshold with cold
segments, the next prompt names them; paced, logged, off with one variable or the settings."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from continuity.agents.claude_code.hooks import main, run_hook
from continuity.context.records import records
from continuity.rolling.queue import KIND
from continuity.rolling.settings import ENV, SETTINGS_FILE, RollingSettings, write_default
from continuity.store.jsonl import Store
from tests.rolling.sessions import long_session, topic
from tests.support.transcripts import Transcript


def _prompt(store: Store, t: Transcript) -> str:
    out = run_hook(store, "user-prompt-submit", t.payload("UserPromptSubmit", prompt="next"))
    if not out.stdout:
        return ""
    context = json.loads(out.stdout)["hookSpecificOutput"]["additionalContext"]
    assert isinstance(context, str)
    return context


@pytest.fixture(autouse=True)
def _rolling_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)


def test_past_the_threshold_the_cold_segments_are_named(tmp_store: Store, tmp_path: Path) -> None:
    t = long_session(tmp_path, final_tokens=130_000)  # 65% of 200k
    said = _prompt(tmp_store, t)
    assert "65% full" in said and "`remember`" in said
    assert "seg-1:" in said and "login redirect" in said and "#1–#36" in said
    assert "seg-37:" in said and "tokenizer lexer" in said
    assert "deployment guide" not in said  # the current topic is hot
    (logged,) = records(tmp_store.thread(t.thread_id), KIND)
    assert isinstance(logged.data, dict)
    assert [s["segment_id"] for s in logged.data["segments"]] == ["seg-1", "seg-37"]
    assert logged.data["tokens"] == 130_000 and logged.data["window"] == 200_000


def test_under_the_threshold_nothing_is_said_or_logged(tmp_store: Store, tmp_path: Path) -> None:
    t = long_session(tmp_path, final_tokens=110_000)  # 55%
    assert _prompt(tmp_store, t) == ""
    assert list(records(tmp_store.thread(t.thread_id), KIND)) == []


def test_at_most_one_reminder_every_n_turns(tmp_store: Store, tmp_path: Path) -> None:
    t = long_session(tmp_path, final_tokens=130_000)
    assert _prompt(tmp_store, t)
    for _ in range(9):
        topic(t, 2, 1, tokens=131_000)
        t.flush()
        assert _prompt(tmp_store, t) == ""
    topic(t, 2, 1, tokens=132_000)
    t.flush()
    assert "seg-1:" in _prompt(tmp_store, t)


def test_off_with_the_variable_and_with_the_setting(
    tmp_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = long_session(tmp_path, final_tokens=130_000)
    monkeypatch.setenv(ENV, "0")
    assert _prompt(tmp_store, t) == ""
    monkeypatch.delenv(ENV)
    folder = tmp_store.local_dir
    assert folder is not None
    assert write_default(folder) and not write_default(folder)  # never overwrites
    assert msgspec.json.decode((folder / SETTINGS_FILE).read_bytes(), type=RollingSettings)
    (folder / SETTINGS_FILE).write_text('{"enabled": false}')
    assert _prompt(tmp_store, t) == ""
    (folder / SETTINGS_FILE).write_text("{not json")  # a broken file is the defaults
    assert "seg-1:" in _prompt(tmp_store, t)


def test_a_summarized_segment_is_not_queued_again(tmp_store: Store, tmp_path: Path) -> None:
    from continuity.mcp_server.archive import Archive
    from continuity.mcp_server.tools import call_tool

    t = long_session(tmp_path, final_tokens=130_000)
    assert "seg-1:" in _prompt(tmp_store, t)
    args = {"thread": t.thread_id, "kind": "summary", "segment": "seg-1", "text": "Fixed it."}
    call_tool(Archive(tmp_store, "/work"), "remember", args)
    for _ in range(10):
        topic(t, 2, 1, tokens=131_000)
    t.flush()
    said = _prompt(tmp_store, t)
    assert "seg-37:" in said and "seg-1:" not in said


def test_the_hook_process_exits_0_with_a_broken_store(tmp_path: Path) -> None:
    t = long_session(tmp_path, final_tokens=130_000)
    payload = json.dumps(t.payload("UserPromptSubmit", prompt="next")).encode()
    store = tmp_path / "store"
    Store(store, create=True)
    (store / "cache").mkdir(exist_ok=True)
    (store / "cache" / "rolling").write_text("a file where a folder should be")
    assert main(["user-prompt-submit"], store=store, stdin=payload) == 0


def test_a_paced_prompt_reads_no_segments(tmp_store: Store, tmp_path: Path) -> None:
    """Between reminders the check reads the frames since the last one, not the thread's
    turns (their cache is not even opened)."""
    from continuity.rolling.cache import cache_path

    t = long_session(tmp_path, final_tokens=130_000)
    assert _prompt(tmp_store, t)
    path = cache_path(tmp_store.thread(t.thread_id))
    assert path is not None and path.exists()
    path.unlink()
    topic(t, 2, 1, tokens=131_000)
    t.flush()
    assert _prompt(tmp_store, t) == ""
    assert not path.exists()
