"""Claude's memory tool (``memory_20250818``) on a thread: the SDK's own abstract class, its own
command parsing and tool runner, against the log; every version kept, the files searchable."""

from __future__ import annotations

from typing import Any

import pytest
from anthropic import Anthropic
from anthropic.lib.tools import ToolError

from continuity.context.records import records
from continuity.integrations.anthropic_memory import KIND, ContinuityMemoryTool
from continuity.retrieval.search import search
from continuity.store.jsonl import Store
from tests.support.model_server import ModelServer, Reply, Rule, Script, ToolCall


def _tool(store: Store) -> ContinuityMemoryTool:
    return ContinuityMemoryTool(store.thread("agent"))


def _call(tool: ContinuityMemoryTool, **command: Any) -> str:
    out = tool.call(command)  # the SDK parses the command, as its runner does
    assert isinstance(out, str)
    return out


def test_the_six_commands_and_every_version_kept(tmp_store: Store) -> None:
    tool = _tool(tmp_store)
    assert tool.to_dict() == {"type": "memory_20250818", "name": "memory"}
    _call(tool, command="create", path="/memories/prefs.md", file_text="likes: tea\ngroup: ops")
    assert "1\tlikes: tea" in _call(tool, command="view", path="/memories/prefs.md")
    _call(tool, command="str_replace", path="/memories/prefs.md", old_str="tea", new_str="coffee")
    _call(tool, command="insert", path="/memories/prefs.md", insert_line=0, insert_text="# Me")
    assert tool.files() == {"/memories/prefs.md": "# Me\nlikes: coffee\ngroup: ops"}
    listing = _call(tool, command="view", path="/memories")
    assert "/memories/prefs.md" in listing
    _call(tool, command="rename", old_path="/memories/prefs.md", new_path="/memories/a/me.md")
    assert list(tool.files()) == ["/memories/a/me.md"]
    _call(tool, command="delete", path="/memories/a")
    assert tool.files() == {}
    versions = [r.data["text"] for r in records(tmp_store.thread("agent"), KIND)]
    assert versions[::-1] == [
        "likes: tea\ngroup: ops",
        "likes: coffee\ngroup: ops",
        "# Me\nlikes: coffee\ngroup: ops",
        "# Me\nlikes: coffee\ngroup: ops",  # the new name
        "",  # the old name, gone
        "",  # deleted
    ]


def test_bad_commands_are_tool_errors_and_write_nothing(tmp_store: Store) -> None:
    tool = _tool(tmp_store)
    _call(tool, command="create", path="/memories/x.md", file_text="one one")
    for command in (
        {"command": "create", "path": "/memories/x.md", "file_text": "again"},
        {"command": "create", "path": "/etc/passwd", "file_text": "x"},
        {"command": "view", "path": "/memories/../secrets"},
        {"command": "view", "path": "/memories/none.md"},
        {"command": "str_replace", "path": "/memories/x.md", "old_str": "one", "new_str": "2"},
        {"command": "insert", "path": "/memories/x.md", "insert_line": 9, "insert_text": "z"},
        {"command": "delete", "path": "/memories"},
    ):
        with pytest.raises(ToolError):
            tool.call(command)
    assert len(list(records(tmp_store.thread("agent"), KIND))) == 1


def test_memory_files_are_found_by_search(tmp_store: Store) -> None:
    tool = _tool(tmp_store)
    _call(tool, command="create", path="/memories/deploy.md", file_text="The capybara cluster.")
    hits = search(tmp_store, "capybara cluster", thread="agent", k=3)
    assert hits and hits[0].kind == "note" and "capybara" in hits[0].snippet.lower()


def test_the_sdks_tool_runner_uses_it(tmp_store: Store) -> None:
    tool = _tool(tmp_store)
    create = ToolCall(
        "memory",
        {"command": "create", "path": "/memories/user.md", "file_text": "prefers dark mode"},
    )
    script = Script(
        [
            Rule(Reply(tool_calls=(create,)), name="create", after_tool=False),
            # the runner continues the server-side thread: the tool's result alone, no tools
            Rule(Reply(text="Noted."), name="done", main=None, anywhere="File created"),
        ]
    )
    with (
        ModelServer(script) as server,
        Anthropic(base_url=server.url, api_key="test", max_retries=0) as client,
    ):
        runner = client.beta.messages.tool_runner(
            model="claude-test",
            max_tokens=256,
            tools=[tool],
            messages=[{"role": "user", "content": "Remember that I prefer dark mode."}],
        )
        last = runner.until_done()
    assert script.unused() == []
    assert tool.files() == {"/memories/user.md": "prefers dark mode"}
    assert any(b.type == "text" and b.text == "Noted." for b in last.content)
