"""One archive for every agent at the command line: ``sessions`` lists every agent's sessions
side by side (an agent column, ``--agent``, ``--project``, ``--json``), ``threads`` names each
thread's agent, ``stats`` counts sessions by agent, ``search --agent`` keeps one agent's
threads (the fast path and the typer command alike), and no secret of a title is shown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from continuity import frames as fr
from continuity.cli.app import app
from continuity.cli.fast_search import fast_search
from continuity.store.base import BaseStore
from continuity.store.jsonl import Store
from tests.redaction.test_redaction import GITHUB_PAT
from tests.support.archive import MINUTE, agent_session

T0 = 1_767_603_600_000  # 2026-01-05 09:00 UTC
SHOP = "/work/shop"


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    fill(Store(tmp_path / "s", create=True, durable=False))
    return tmp_path / "s"


def fill(store: BaseStore) -> None:
    """Claude Code, Codex, Gemini CLI and opencode on the same repository, a Codex session
    elsewhere, a Codex sub-agent, and a thread no agent wrote."""
    agent_session(
        store,
        "claude-code",
        "c1",
        project=SHOP,
        start_ms=T0,
        title="migrate the orders table",
        prompts=("alembic upgrade fails on orders",),
        compaction=True,
    )
    codex = agent_session(
        store,
        "codex",
        "x1",
        project=SHOP,
        start_ms=T0 + 10 * MINUTE,
        title="fix flaky test",
        prompts=("the alembic migration test is flaky",),
        compaction=True,
    )
    agent_session(store, "codex", "sub", project=SHOP, start_ms=T0 + 11 * MINUTE, parent=codex)
    agent_session(
        store,
        "gemini-cli",
        "g1",
        project=SHOP,
        start_ms=T0 + 20 * MINUTE,
        title=f"deploy with {GITHUB_PAT}",
        prompts=("document alembic",),
    )
    agent_session(store, "opencode", "o1", project=SHOP, start_ms=T0 + 30 * MINUTE)
    agent_session(store, "codex", "x2", project="/work/blog", start_ms=T0 + 40 * MINUTE)
    store.thread("notes").append(fr.message("user", "alembic notes, by hand"))


def cli(store_dir: Path, *args: str) -> Result:
    return CliRunner().invoke(app, ["--store", str(store_dir), *args])


def test_sessions_lists_every_agent_side_by_side(store_dir: Path) -> None:
    result = cli(store_dir, "sessions")
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.stdout.splitlines()]
    assert [(r[0], r[1]) for r in rows] == [
        ("claude-code", "cc-c1"),
        ("codex", "codex-x1"),
        ("gemini", "gemini-g1"),
        ("opencode", "oc-o1"),
        ("codex", "codex-x2"),
    ]
    lines = result.stdout.splitlines()
    assert lines[1].startswith(
        "codex        codex-x1   /work/shop (main)  started 2026-01-05 09:10"
    )
    assert lines[1].endswith("4 messages, 1 compaction  “fix flaky test”")
    assert lines[0].endswith("1 compaction  “migrate the orders table”")
    assert GITHUB_PAT not in result.stdout and "deploy with" in lines[2]
    with_agents = cli(store_dir, "sessions", "--agents").stdout
    assert "codex-x1.agent-sub" in with_agents and "notes" not in with_agents


def test_sessions_of_one_agent_or_one_project(store_dir: Path) -> None:
    def ids(*args: str) -> list[str]:
        result = cli(store_dir, "sessions", *args)
        assert result.exit_code == 0, result.output
        return [line.split()[1] for line in result.stdout.splitlines()]

    assert ids("--agent", "codex") == ["codex-x1", "codex-x2"]
    assert ids("--agent", "Gemini CLI") == ids("--agent", "gemini-cli") == ["gemini-g1"]
    assert ids("--project", SHOP) == ["cc-c1", "codex-x1", "gemini-g1", "oc-o1"]
    assert ids("--project", SHOP, "--agent", "codex") == ["codex-x1"]
    none = cli(store_dir, "sessions", "--agent", "opencode", "--project", "/work/blog")
    assert none.stdout == "no opencode sessions of /work/blog archived yet\n"
    bad = cli(store_dir, "sessions", "--agent", "cursor")
    assert bad.exit_code == 1
    assert bad.stderr == (
        "error: unknown agent 'cursor': the agents are claude-code, codex, gemini, opencode\n"
    )


def test_sessions_as_json_name_the_agent_and_carry_no_secret(store_dir: Path) -> None:
    result = cli(store_dir, "sessions", "--json", "--project", SHOP)
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(r["agent"], r["thread_id"]) for r in rows] == [
        ("claude-code", "cc-c1"),
        ("codex", "codex-x1"),
        ("gemini", "gemini-g1"),
        ("opencode", "oc-o1"),
    ]
    assert rows[1]["title"] == "fix flaky test" and rows[1]["compactions"] == 1
    assert GITHUB_PAT not in result.stdout and rows[2]["title"].startswith("deploy with ")


def test_threads_name_the_agent(store_dir: Path) -> None:
    table = cli(store_dir, "threads").stdout
    kinds = {line.split()[0]: line.split()[-2:] for line in table.splitlines()}
    assert kinds["codex-x1"] == ["codex", "session"]
    assert kinds["codex-x1.agent-sub"] == ["codex", "subagent"]
    assert kinds["gemini-g1"] == ["gemini-cli", "session"]
    assert kinds["oc-o1"] == ["opencode", "session"]
    assert kinds["cc-c1"] == ["claude-code", "session"]
    rows = {
        r["thread_id"]: r
        for r in map(json.loads, cli(store_dir, "threads", "--json").stdout.splitlines())
    }
    assert rows["codex-x1"]["agent"] == "codex" and rows["codex-x1"]["compactions"] == 1
    assert rows["gemini-g1"]["agent"] == "gemini"
    assert rows["notes"]["agent"] == "" and rows["notes"]["kind"] == "other"


def test_stats_count_sessions_by_agent(store_dir: Path) -> None:
    text = cli(store_dir, "stats").stdout
    assert "sessions     5 (Claude Code 1, Codex 2, Gemini CLI 1, opencode 1)\n" in text
    data = json.loads(cli(store_dir, "stats", "--json").stdout)
    assert data["sessions_by_agent"] == {"claude-code": 1, "codex": 2, "gemini": 1, "opencode": 1}


@pytest.mark.parametrize(
    ("line", "agents"),
    [
        (["search", "alembic", "--agent", "codex"], {"codex"}),
        (["search", "alembic", "--agent", "codex", "--json"], {"codex"}),
        (["search", "alembic", "--agent", "Gemini CLI", "--json"], {"gemini"}),
        (["search", "alembic", "--agent", "opencode"], set()),  # its session never says it
        (["search", "alembic", "--json"], {"claude-code", "codex", "gemini", ""}),
        (["search", "alembic", "--agent", "cc", "--project", SHOP, "--json"], {"claude-code"}),
        (["search", "alembic", "--agent", "gemini", "--thread", "codex-x1"], set()),
    ],
)
def test_search_by_agent_on_both_paths(
    store_dir: Path, line: list[str], agents: set[str], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--store", str(store_dir), *line]
    by_typer = CliRunner().invoke(app, argv)
    assert by_typer.exit_code == 0, by_typer.output
    assert fast_search(argv) == 0  # the fast path runs it
    assert capsys.readouterr().out == by_typer.stdout
    prefixes = {"claude-code": "cc-", "codex": "codex-", "gemini": "gemini-", "": "notes"}
    if "--json" in line:
        found = [json.loads(h) for h in by_typer.stdout.splitlines()]
        assert {h["agent"] for h in found} == agents
        assert all(h["thread_id"].startswith(prefixes[h["agent"]]) for h in found)
    elif agents:
        hits = [h.split()[0] for h in by_typer.stdout.splitlines() if not h.startswith(" ")]
        assert hits and {prefixes[a] for a in agents} == {h.split("-")[0] + "-" for h in hits}
    else:
        assert by_typer.stdout == "no hits for 'alembic'\n"


def test_search_for_an_unknown_agent_says_which_there_are(
    store_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--store", str(store_dir), "search", "alembic", "--agent", "cursor"]
    assert fast_search(argv) is None  # left to the typer command
    assert capsys.readouterr() == ("", "")
    res = CliRunner().invoke(app, argv)
    assert res.exit_code == 1
    assert (
        "unknown agent 'cursor': the agents are claude-code, codex, gemini, opencode" in res.stderr
    )


def test_the_store_wide_index_and_every_threads_own_agree_by_agent(store_dir: Path) -> None:
    """The same search by agent through the store-wide index (a store in a folder) and through
    each thread's own (a store in memory, which keeps no caches)."""
    from continuity.retrieval.search import search
    from continuity.store.memory import MemoryStore

    on_disk = Store(store_dir, durable=False)
    in_memory = MemoryStore()
    fill(in_memory)
    for agent in ("codex", "gemini-cli", "claude-code", "opencode"):
        wide = [(h.thread_id, h.seq) for h in search(on_disk, "alembic", agent=agent)]
        each = [(h.thread_id, h.seq) for h in search(in_memory, "alembic", agent=agent)]
        assert wide == each
        assert all(
            t.startswith({"codex": "codex-", "gemini-cli": "gemini-"}.get(agent, "cc-"))
            for t, _ in wide
        )
