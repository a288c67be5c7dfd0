"""Context usage per session from the agents' own numbers, and the model's window."""

from __future__ import annotations

from pathlib import Path

import pytest

from continuity import frames as fr
from continuity.agents.claude_code.ingest import ingest_transcript
from continuity.agents.codex.ingest import ingest_rollout
from continuity.rolling.usage import (
    DEFAULT_WINDOW,
    WINDOW_ENV,
    context_tokens_of,
    session_usage,
    window_for,
)
from continuity.store.jsonl import Store
from tests.rolling.sessions import long_session
from tests.support.transcripts import Transcript

DATA = Path(__file__).resolve().parents[1] / "data" / "agents"


def test_claude_codes_usage_is_kept_and_summed(tmp_store: Store, tmp_path: Path) -> None:
    t = long_session(tmp_path, final_tokens=123_456)
    report = ingest_transcript(tmp_store, t.path, final=True)
    thread = tmp_store.thread(report.threads[0])
    last = thread.tail(1, types=["message_appended"])[0]
    assert isinstance(last, fr.MessageAppended)
    assert last.meta["usage_cache_read"] == str(123_456 - 610)
    usage = session_usage(thread)
    assert usage is not None
    assert (usage.tokens, usage.window, usage.window_source) == (123_456, 200_000, "model")
    assert usage.seq == last.seq and usage.fraction == pytest.approx(0.617, abs=1e-3)


def test_a_session_without_figures_has_no_usage(tmp_store: Store, tmp_path: Path) -> None:
    t = Transcript(tmp_path / "s.jsonl", "00000000-0000-4000-8000-0000000000aa", "/w")
    t.prompt("hello there")
    t.say("hi")
    t.flush()
    report = ingest_transcript(tmp_store, t.path, final=True)
    assert session_usage(tmp_store.thread(report.threads[0])) is None


def test_the_agents_compaction_voids_the_figures_before_it(
    tmp_store: Store, tmp_path: Path
) -> None:
    t = long_session(tmp_path, final_tokens=150_000)
    t.compaction("what we did")
    t.prompt("go on")
    t.flush()
    report = ingest_transcript(tmp_store, t.path, final=True)
    assert session_usage(tmp_store.thread(report.threads[0])) is None


def test_codex_token_counts_go_into_the_answer_before_them(tmp_store: Store) -> None:
    report = ingest_rollout(tmp_store, DATA / "codex_rollout_autocompact.jsonl")
    thread = tmp_store.thread(report.thread)
    answers = [
        f
        for f in thread.read(types=["message_appended"])
        if isinstance(f, fr.MessageAppended) and "context_tokens" in f.meta
    ]
    assert answers and all(a.role == "assistant" for a in answers)
    assert {a.meta["context_window"] for a in answers} == {"258400"}
    # no token_count became a frame of its own
    kinds = {f.kind for f in thread.read(types=["record_appended"])}  # type: ignore[union-attr]
    assert not any("token_count" in k for k in kinds)


def test_each_agents_keys_give_its_context() -> None:
    claude = {"usage_input": "3", "usage_cache_creation": "10", "usage_cache_read": "80"}
    assert context_tokens_of({**claude, "usage_output": "7"}) == 100
    assert context_tokens_of({"context_tokens": "6044", "usage_input": "1"}) == 6044
    gemini = {"tokens_input": "900", "tokens_cached": "800", "tokens_output": "50"}
    assert context_tokens_of({**gemini, "tokens_total": "990"}) == 990
    assert context_tokens_of(gemini) == 950  # cached tokens are part of the input
    opencode = {"tokens_input": "100", "tokens_cache_read": "800", "tokens_cache_write": "50"}
    assert context_tokens_of({**opencode, "tokens_output": "40", "tokens_reasoning": "10"}) == 1000
    assert context_tokens_of({"model": "x"}) is None
    assert context_tokens_of({"usage_input": "-1"}) is None


def test_windows_known_configured_and_overridden(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(WINDOW_ENV, raising=False)
    assert window_for("claude-sonnet-4-5") == (200_000, "model")
    assert window_for("claude-sonnet-4-5[1m]") == (1_000_000, "model")
    assert window_for("gemini-2.5-pro") == (1_048_576, "model")
    assert window_for("gpt-5-codex", reported=258_400) == (258_400, "agent")
    assert window_for("mystery") == (DEFAULT_WINDOW, "default")
    assert window_for("mystery", default=32_000) == (32_000, "config")
    assert window_for("claude-x", windows={"claude-x": 64_000}) == (64_000, "config")
    monkeypatch.setenv(WINDOW_ENV, "50000")
    assert window_for("claude-sonnet-4-5", reported=9) == (50_000, "config")


def test_sessions_and_mcp_sessions_show_the_context(tmp_store: Store, tmp_path: Path) -> None:
    import json

    from typer.testing import CliRunner

    from continuity.cli.app import app
    from continuity.mcp_server.archive import Archive
    from continuity.mcp_server.tools import call_tool

    t = long_session(tmp_path, final_tokens=130_000)
    ingest_transcript(tmp_store, t.path, final=True)
    store = ["--store", str(tmp_store.root)]
    shown = CliRunner().invoke(app, [*store, "sessions", "--context"])
    assert shown.exit_code == 0, shown.output
    assert "context 130,000/200,000 (65%)" in shown.output
    plain = CliRunner().invoke(app, [*store, "sessions"])
    assert "context" not in plain.output
    as_json = CliRunner().invoke(app, [*store, "sessions", "--context", "--json"])
    row = json.loads(as_json.output.splitlines()[0])
    assert (row["context_tokens"], row["context_window"]) == (130_000, 200_000)
    result = call_tool(Archive(tmp_store, "/work"), "sessions", {})
    assert "context 130,000 of 200,000 tokens" in result.text
    assert isinstance(result.data, dict)
    assert result.data["sessions"][0]["context_tokens"] == 130_000
