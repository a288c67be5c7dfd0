"""The MCP tools across agents: ``sessions`` names each session's agent and filters by any of
its names, ``search`` keeps one agent's threads, an unknown agent is an error that lists the
known ones, and another agent's secret title never reaches the agent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from continuity.mcp_server.archive import Archive, ToolError, ToolResult
from continuity.mcp_server.tools import call_tool
from continuity.store.jsonl import Store
from tests.redaction.test_redaction import GITHUB_PAT
from tests.support.archive import MINUTE, agent_session

PROJECT = "/work/shop"
T0 = 1_767_603_600_000


@pytest.fixture
def archive(tmp_path: Path) -> Archive:
    store = Store(tmp_path / "s", create=True, durable=False)
    agent_session(store, "claude-code", "c1", project=PROJECT, start_ms=T0, prompts=("quokka one",))
    agent_session(
        store,
        "codex",
        "x1",
        project=PROJECT,
        start_ms=T0 + MINUTE,
        title="fix flaky test",
        prompts=("quokka two",),
        compaction=True,
    )
    agent_session(
        store,
        "gemini-cli",
        "g1",
        project=PROJECT,
        start_ms=T0 + 2 * MINUTE,
        title=f"deploy with {GITHUB_PAT}",
        prompts=("quokka three",),
    )
    agent_session(store, "opencode", "o1", project="/elsewhere", start_ms=T0 + 3 * MINUTE)
    return Archive(store, PROJECT)


def call(archive: Archive, name: str, **args: Any) -> ToolResult:
    return call_tool(archive, name, args)


def test_sessions_name_each_agent(archive: Archive) -> None:
    listed = call(archive, "sessions")
    rows = listed.data["sessions"]
    assert [(r["thread"], r["agent"]) for r in rows] == [
        ("gemini-g1", "gemini"),
        ("codex-x1", "codex"),
        ("cc-c1", "claude-code"),
    ]
    lines = listed.text.splitlines()
    assert lines[1].startswith("- gemini-g1 (current) · Gemini CLI · “deploy with ")
    assert lines[2].startswith("- codex-x1 · Codex · “fix flaky test” · ")
    assert lines[2].endswith("1 compactions")
    assert GITHUB_PAT not in listed.text and GITHUB_PAT not in str(listed.data)
    everyone = call(archive, "sessions", scope="all", agent="opencode").data["sessions"]
    assert [(r["thread"], r["agent"]) for r in everyone] == [("oc-o1", "opencode")]


@pytest.mark.parametrize("name", ["gemini", "gemini-cli", "Gemini CLI"])
def test_any_name_of_an_agent_filters(archive: Archive, name: str) -> None:
    assert [r["thread"] for r in call(archive, "sessions", agent=name).data["sessions"]] == [
        "gemini-g1"
    ]
    hits = call(archive, "search", query="quokka", agent=name).data["hits"]
    assert hits and {h["thread"] for h in hits} == {"gemini-g1"}


def test_search_keeps_one_agents_threads(archive: Archive) -> None:
    every = {h["thread"] for h in call(archive, "search", query="quokka").data["hits"]}
    assert every == {"cc-c1", "codex-x1", "gemini-g1"}
    codex = call(archive, "search", query="quokka", agent="codex").data["hits"]
    assert {h["thread"] for h in codex} == {"codex-x1"}
    assert call(archive, "search", query="quokka", agent="opencode").data["hits"] == []


@pytest.mark.parametrize("tool", ["sessions", "search"])
def test_an_unknown_agent_lists_the_known_ones(archive: Archive, tool: str) -> None:
    with pytest.raises(ToolError) as caught:
        call(archive, tool, agent="cursor", **({"query": "quokka"} if tool == "search" else {}))
    assert str(caught.value) == (
        "unknown agent 'cursor': the agents are claude-code, codex, gemini, opencode"
    )
