"""``continuity mcp`` in the real Claude Code CLI (pinned, from npm), installed as a user has it.

``continuity install claude-code --scope project`` registers the server in the project's
``.mcp.json``; the user has approved the project's servers (``enableAllProjectMcpServers``) and
lets the model use continuity's tools (``permissions.allow: ["mcp__continuity"]``: in ``-p``
mode Claude Code denies a tool nobody allowed). ``claude mcp list`` must then report the server
connected, and in a real session against the scripted model server, the model calls ``search``,
``read`` and ``remember``; each result must reach the model's next request holding what the
archive holds. Skipped, saying why, while ``continuity mcp`` is not in this tree.

One session (two ``claude -p`` runs, about 3 s here) serves every test of the module.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

import pytest

from tests.support.agents import ClaudeRun, ClaudeWorld, client, continuity_mcp_missing, eventually
from tests.support.model_server import ModelServer, Reply, Request, Rule, Script, ToolCall

pytestmark = [pytest.mark.slow, pytest.mark.agents]

COMMAND: Final = "echo hello > greeting-7f3a.txt"
MARKER: Final = "quokka-5521"
"""In the note the model records with ``remember``: found in a record of the store, it came
from the tool, not from the transcript's copy of the tool call."""
NOTE: Final = f"Decision: the greeting lives in greeting-7f3a.txt ({MARKER})"
THREAD_ID: Final = re.compile(r"cc-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _read_what_search_found(request: Request) -> Reply:
    """``read`` the thread the search hit names, from its start (the page holds the command)."""
    found = THREAD_ID.search(" ".join(request.tool_results))
    args: dict[str, Any] = {"from_seq": 0}
    if found:
        args["thread"] = found.group(0)
    return Reply(tool_calls=(ToolCall("mcp__continuity__read", args),))


def script() -> Script:
    return Script(
        [
            Rule(
                Reply(tool_calls=(ToolCall("Bash", {"command": COMMAND, "description": "Write"}),)),
                name="run the command",
                phrase="write the greeting file",
                after_tool=False,
            ),
            Rule(Reply(text="Wrote the greeting file."), name="after bash", after_tool="Bash"),
            Rule(
                Reply(tool_calls=(ToolCall("mcp__continuity__search", {"query": "hello"}),)),
                name="search",
                phrase="Look in the archive",
                after_tool=False,
            ),
            Rule(_read_what_search_found, name="read", after_tool="mcp__continuity__search"),
            Rule(
                Reply(
                    tool_calls=(
                        ToolCall("mcp__continuity__remember", {"text": NOTE, "kind": "decision"}),
                    )
                ),
                name="remember",
                after_tool="mcp__continuity__read",
            ),
            Rule(
                Reply(text="Noted."), name="after remember", after_tool="mcp__continuity__remember"
            ),
        ]
    )


@dataclass
class McpSession:
    world: ClaudeWorld
    mcp_json: dict[str, Any]
    listed: str
    runs: list[ClaudeRun]
    thread: str


@pytest.fixture(scope="module")
def mcp_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpSession]:
    missing = continuity_mcp_missing()
    if missing:
        pytest.skip(f"the MCP server is not in this tree yet: {missing}")
    exe = client("claude-code")
    with ModelServer(script()) as server:
        world = ClaudeWorld(exe, tmp_path_factory.mktemp("claude-mcp"), server)
        world.user_settings(
            {
                "enableAllProjectMcpServers": True,
                "permissions": {"allow": ["Bash", "mcp__continuity"]},
            }
        )
        world.continuity("install", "claude-code", "--scope", "project")
        mcp_file = world.project / ".mcp.json"
        mcp_json = json.loads(mcp_file.read_text()) if mcp_file.exists() else {}
        listed = world.claude_cmd("mcp", "list")
        runs = [
            world.claude("Please write the greeting file.").check(),
            world.claude("Look in the archive for what we did.", "--continue").check(),
        ]
        try:
            yield McpSession(
                world, mcp_json, listed.stdout + listed.stderr, runs, f"cc-{runs[0].session_id}"
            )
        finally:
            server.dump(world.root / "requests.jsonl")


def _result_of(session: McpSession, tool: str) -> tuple[str, dict[str, Any]]:
    """The text of ``tool``'s result in the model's next request, and the block itself."""
    requests = [r for r in session.world.server.requests(main=True) if r.tool_result_of == tool]
    assert len(requests) == 1, [e.rule for e in session.world.server.log]
    blocks = [
        b
        for b in requests[0].body["messages"][-1]["content"]
        if isinstance(b, dict) and b.get("type") == "tool_result"
    ]
    return requests[0].tool_results[-1], blocks[-1]


def test_install_registers_the_server_and_claude_reports_it_connected(
    mcp_session: McpSession,
) -> None:
    assert "continuity" in mcp_session.mcp_json.get("mcpServers", {}), mcp_session.mcp_json
    line = next((ln for ln in mcp_session.listed.splitlines() if ln.startswith("continuity")), "")
    assert "Connected" in line, mcp_session.listed


def test_the_model_gets_continuity_s_tools(mcp_session: McpSession) -> None:
    assert mcp_session.world.server.script.unused() == []
    init = next(e for e in mcp_session.runs[1].events if e.get("subtype") == "init")
    tools = {t for t in init["tools"] if t.startswith("mcp__continuity__")}
    assert tools == {
        f"mcp__continuity__{name}" for name in ("search", "read", "sessions", "restore", "remember")
    }
    servers = {s["name"]: s["status"] for s in init.get("mcp_servers", [])}
    assert servers.get("continuity") == "connected", init.get("mcp_servers")


def test_search_finds_the_earlier_command_and_its_result_reaches_the_model(
    mcp_session: McpSession,
) -> None:
    text, block = _result_of(mcp_session, "mcp__continuity__search")
    assert not block.get("is_error"), text
    assert "hello" in text
    assert mcp_session.thread in text


def test_read_returns_the_archived_turns_to_the_model(mcp_session: McpSession) -> None:
    text, block = _result_of(mcp_session, "mcp__continuity__read")
    assert not block.get("is_error"), text
    assert COMMAND in text
    assert "Please write the greeting file." in text


def test_remember_records_the_note_in_the_archive(mcp_session: McpSession) -> None:
    text, block = _result_of(mcp_session, "mcp__continuity__remember")
    assert not block.get("is_error"), text
    world = mcp_session.world

    def records() -> list[dict[str, Any]]:
        shown = world.continuity("log", mcp_session.thread, "--json").stdout
        frames = [json.loads(line) for line in shown.splitlines() if line.strip()]
        # the transcript's copy of the tool call holds the marker too: a message, not a record
        return [f for f in frames if f["type"] != "message_appended" and MARKER in json.dumps(f)]

    assert eventually(records, bool), "no frame but the tool call's own holds the note"
    assert world.continuity("verify").stdout.startswith("ok:")


def test_tool_results_reach_the_model_as_readable_text(mcp_session: McpSession) -> None:
    """Claude Code 2.1.328 gives the model a tool's ``structuredContent`` (as JSON) in place of
    its text content when a result has both: the model must get the readable text."""
    for tool in ("search", "read", "remember"):
        text, _ = _result_of(mcp_session, f"mcp__continuity__{tool}")
        assert not text.lstrip().startswith("{"), f"{tool}: {text[:300]}"
