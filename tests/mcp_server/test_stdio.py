"""``continuity mcp`` as an MCP client meets it: a fresh process spoken to over stdio by the
official SDK's own client, on stores built by the real ingest (the shared fixture transcripts,
a session written while hooks ingest it) and by the bulk API (a 100,000-frame thread)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from continuity import frames as fr
from continuity.mcp_server.schemas import TOOLS
from continuity.store.jsonl import Store
from tests.support.fixtures import shared_fixture
from tests.support.mcp import Transcript, mcp_client, require_sdk, server_env, text_of
from tests.support.processes import reap

pytestmark = pytest.mark.slow

FIXTURE_PROJECT = "/Users/user/project"  # the claude-history fixture sessions' cwd


@pytest.fixture(scope="module")
def fixture_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every shared fixture transcript, ingested by the real ``continuity ingest``."""
    require_sdk()
    source = shared_fixture("claude-code")
    store = tmp_path_factory.mktemp("mcp") / "store"
    subprocess.run([sys.executable, "-m", "continuity", "--store", str(store), "init"], check=True)
    done = subprocess.run(
        [sys.executable, "-m", "continuity", "--store", str(store), "ingest", str(source)],
        capture_output=True,
    )
    # exit 1: the fixtures hold lines damaged on purpose (claude-code-log/edge_cases.jsonl),
    # which ingest names as not archived; everything else is
    assert done.returncode in (0, 1) and b"Traceback" not in done.stderr, done.stderr
    return store


def test_lists_its_tools_with_their_schemas_and_answers_every_tool(
    fixture_store: Path, tmp_path: Path
) -> None:
    async def session() -> None:
        env = server_env(CLAUDE_PROJECT_DIR=FIXTURE_PROJECT)
        args = ("--structured",)
        async with mcp_client(fixture_store, cwd=tmp_path, env=env, args=args) as client:
            listed = await client.list_tools()
            assert [t.name for t in listed.tools] == [t["name"] for t in TOOLS]
            for tool, spec in zip(listed.tools, TOOLS, strict=True):
                assert tool.input_schema == spec["inputSchema"]
                assert tool.description == spec["description"]
            assert listed.tools[0].annotations is not None
            assert listed.tools[0].annotations.read_only_hint is True
            assert listed.tools[4].annotations is not None
            assert listed.tools[4].annotations.read_only_hint is False

            sessions = await client.call_tool("sessions", {})
            assert not sessions.is_error, text_of(sessions)
            current = sessions.structured_content["sessions"][0]
            assert current["current"] and current["thread"].startswith("cc-")

            found = await client.call_tool("search", {"query": "test file", "limit": 2})
            hits = found.structured_content["hits"]
            assert len(hits) == 2 and found.structured_content["next_cursor"]
            more = await client.call_tool(
                "search",
                {
                    "query": "test file",
                    "limit": 2,
                    "cursor": found.structured_content["next_cursor"],
                },
            )
            assert {(h["thread"], h["seq"]) for h in more.structured_content["hits"]}.isdisjoint(
                (h["thread"], h["seq"]) for h in hits
            )

            read = await client.call_tool(
                "read", {"thread": hits[0]["thread"], "seq": hits[0]["seq"]}
            )
            assert f"▶ #{hits[0]['seq']}" in text_of(read)

            restored = await client.call_tool("restore", {})
            assert "Restored by continuity" in text_of(restored)

            everywhere = await client.call_tool("sessions", {"scope": "all", "limit": 100})
            compacted = [s for s in everywhere.structured_content["sessions"] if s["compactions"]]
            assert compacted  # the fixtures hold compactions
            again = await client.call_tool("restore", {"thread": compacted[0]["thread"]})
            assert "not been compacted" not in text_of(again)

    anyio.run(session)


BAD_CALLS: list[tuple[str, dict[str, Any], str]] = [
    ("search", {"query": ""}, "query is empty"),
    ("read", {"thread": "cc-nope"}, "no thread 'cc-nope'"),
    ("read", {"thread": "cc-small", "seq": 99999}, "past the end"),
    ("search", {"query": "x", "cursor": "garbage"}, "cursor"),
    ("sessions", {"limit": "many"}, "limit must be an integer"),
    ("remember", {"text": "x", "kind": "summary", "thread": "cc-small"}, "needs to_seq"),
]


def test_a_bad_call_is_a_tool_error_and_the_server_goes_on(
    fixture_store: Path, tmp_path: Path
) -> None:
    async def session() -> None:
        async with mcp_client(fixture_store, cwd=tmp_path) as client:
            for name, args, says in BAD_CALLS:
                bad = await client.call_tool(name, args)
                assert bad.is_error, (name, args)
                line = text_of(bad)
                assert says in line and "\n" not in line and "Traceback" not in line
                good = await client.call_tool("sessions", {"scope": "all", "limit": 1})
                assert not good.is_error
                # Text only unless --structured: Claude Code would show the model the data.
                assert good.structured_content is None and "cc-" in text_of(good)
            # A tool that does not exist is a protocol error (the spec's -32602), not a result
            from mcp.shared.exceptions import MCPError

            with pytest.raises(MCPError) as raised:
                await client.call_tool("nope", {})
            assert raised.value.error.code == -32602 and "nope" in raised.value.error.message

    anyio.run(session)


def test_a_missing_store_is_a_tool_error_not_a_dead_server(tmp_path: Path) -> None:
    require_sdk()

    async def session() -> None:
        async with mcp_client(tmp_path / "no-store", cwd=tmp_path) as client:
            got = await client.call_tool("search", {"query": "anything"})
            assert got.is_error and "no continuity store" in text_of(got)

    anyio.run(session)


def _hook(store: Path, event: str, payload: dict[str, Any], cwd: Path) -> subprocess.Popen[bytes]:
    """A real ``continuity hook EVENT`` process, started in the background."""
    import json
    import tempfile

    env = server_env(CONTINUITY_HOME=str(store), CLAUDE_PROJECT_DIR=str(cwd))
    with tempfile.TemporaryFile() as given:
        given.write(json.dumps(payload).encode())
        given.seek(0)
        return subprocess.Popen(
            [sys.executable, "-m", "continuity", "hook", event],
            stdin=given,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )


def _finish(proc: subprocess.Popen[bytes]) -> tuple[int, bytes]:
    """Wait for a hook process: its exit code and what it wrote on stderr."""
    try:
        _out, err = proc.communicate(timeout=120)
    finally:
        reap(proc)
    return proc.returncode, err


def test_hooks_ingest_a_growing_session_while_the_server_reads_and_remembers(
    tmp_path: Path,
) -> None:
    require_sdk()
    store = tmp_path / "store"
    Store(store, create=True).close()
    project = tmp_path / "project"
    project.mkdir()
    session_id = "dddddddd-4444-4444-8444-444444444444"
    t = Transcript(tmp_path / f"{session_id}.jsonl", session_id, str(project))
    t.prompt("start the kangaroo refactor")
    t.flush()
    start = _hook(store, "session-start", t.payload("SessionStart", source="startup"), project)
    assert _finish(start) == (0, b"")
    rounds = 12
    hooks: list[subprocess.Popen[bytes]] = []

    async def session() -> None:
        async with mcp_client(store, cwd=project) as client:
            for i in range(rounds):
                t.tool("Bash", {"command": f"pytest -k kangaroo_{i}"}, f"kangaroo {i} passed")
                t.say(f"Round {i} of the kangaroo refactor is done.")
                t.flush()
                # two hooks of one event at once, as Claude Code runs matching handlers
                for _ in range(2):
                    hooks.append(_hook(store, "post-tool-use", t.payload("PostToolUse"), project))
                found = await client.call_tool("search", {"query": "kangaroo"})
                assert not found.is_error, text_of(found)
                read = await client.call_tool("read", {"max_tokens": 500})
                assert not read.is_error or "not archived" in text_of(read), text_of(read)
                if i % 4 == 3:
                    said = await client.call_tool(
                        "remember", {"text": f"kangaroo decision {i}", "kind": "decision"}
                    )
                    assert not said.is_error, text_of(said)

    anyio.run(session)
    assert [_finish(proc) for proc in hooks] == [(0, b"")] * len(hooks)
    t.prompt("thanks")  # the last response is archived once a line follows it
    t.flush()
    assert _finish(_hook(store, "stop", t.payload("Stop"), project)) == (0, b"")
    opened = Store(store)
    thread = opened.thread(t.thread_id)
    frames = list(thread.read())
    texts = [
        b.text
        for f in frames
        if isinstance(f, fr.MessageAppended)
        for b in f.content
        if isinstance(b, fr.TextBlock)
    ]
    assert [x for x in texts if x.startswith("Round")] == [
        f"Round {i} of the kangaroo refactor is done." for i in range(rounds)
    ]  # each once, in order: nothing lost or doubled around the remembered frames
    notes = [f for f in frames if isinstance(f, fr.RecordAppended)]
    assert [n.data["text"] for n in notes] == [f"kangaroo decision {i}" for i in (3, 7, 11)]
    verified = subprocess.run(
        [sys.executable, "-m", "continuity", "--store", str(store), "verify"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_reads_pages_of_a_100k_frame_thread(tmp_path: Path) -> None:
    require_sdk()
    from tools.gen_thread import write_thread

    store_path = tmp_path / "store"
    store = Store(store_path, create=True, durable=False)
    write_thread(store, "big", 100_000, seed=7)
    store.close()

    async def session() -> None:
        async with mcp_client(store_path, cwd=tmp_path, args=("--structured",)) as client:
            middle = await client.call_tool("read", {"thread": "big", "seq": 50_000})
            assert "▶ #50000" in text_of(middle), text_of(middle)
            latest = await client.call_tool("read", {"thread": "big", "max_tokens": 300})
            assert "#99999" in text_of(latest) or latest.structured_content["next_cursor"]
            page = await client.call_tool(
                "read", {"thread": "big", "from_seq": 99_990, "to_seq": 99_999}
            )
            assert not page.is_error and page.structured_content["last_seq"] == 99_999

    anyio.run(session)


def test_the_server_takes_its_project_from_the_working_directory(tmp_path: Path) -> None:
    require_sdk()
    store = tmp_path / "store"
    project = tmp_path / "here"
    project.mkdir()
    session_id = "eeeeeeee-5555-4555-8555-555555555555"
    t = Transcript(tmp_path / f"{session_id}.jsonl", session_id, str(project))
    t.prompt("the echidna plan")
    t.flush()
    Store(store, create=True).close()
    env = server_env(CONTINUITY_HOME=str(store))
    proc = subprocess.Popen(
        [sys.executable, "-m", "continuity", "hook", "user-prompt-submit"],
        stdin=subprocess.PIPE,
        env=env,
        cwd=os.fspath(project),
    )
    import json

    proc.communicate(json.dumps(t.payload("UserPromptSubmit", prompt="x")).encode())

    async def session() -> None:
        async with mcp_client(store, cwd=project, args=("--structured",)) as client:
            listed = await client.call_tool("sessions", {})
            rows = listed.structured_content["sessions"]
            assert [r["thread"] for r in rows] == [t.thread_id] and rows[0]["current"]
            found = await client.call_tool("search", {"query": "echidna"})
            assert found.structured_content["hits"][0]["thread"] == t.thread_id

    anyio.run(session)
