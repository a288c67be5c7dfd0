"""The MCP tools as plain functions over a real store (no SDK): what each returns, its pages,
its errors, redaction, and what ``remember`` leaves for later searches, restores and compiles.

The store is built as Claude Code builds it: transcripts written line by line and ingested by
the real hook (``run_hook``), which also notes the live session.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from continuity import frames as fr
from continuity.agents.claude_code.hooks import run_hook
from continuity.caches.live_session import live_folder, noted_session
from continuity.context.compiler import compile_context
from continuity.context.render import to_text
from continuity.mcp_server.archive import Archive, ToolError, ToolResult, parse_time
from continuity.mcp_server.schemas import TOOLS, tool_names
from continuity.mcp_server.tools import call_tool
from continuity.store.jsonl import Store
from tests.support.mcp import Transcript

PROJECT = "/work/demo-a"
OTHER = "/work/demo-b"
OLD = "aaaaaaaa-1111-4111-8111-111111111111"
LIVE = "bbbbbbbb-2222-4222-8222-222222222222"
ELSEWHERE = "cccccccc-3333-4333-8333-333333333333"
SECRET = "ghp_1234567890abcdefghijklmnopqrstuvwxyzAB"


def _session(tmp: Path, store: Store, session: str, cwd: str, turns: int) -> Transcript:
    t = Transcript(tmp / "transcripts" / f"{session}.jsonl", session, cwd)
    for i in range(turns):
        t.prompt(f"step {i}: please run the wombat migration number {i}")
        t.tool("Bash", {"command": f"make migrate-{i}"}, f"migration {i} ok\n" + "log line\n" * 80)
        t.say(f"Done with step {i}; the quokka index is rebuilt.")
    t.flush()
    run_hook(store, "user-prompt-submit", t.payload("UserPromptSubmit", prompt="go"))
    return t


@pytest.fixture
def archive(tmp_path: Path, tmp_store: Store) -> Archive:
    _session(tmp_path, tmp_store, OLD, PROJECT, 3)
    _session(tmp_path, tmp_store, ELSEWHERE, OTHER, 2)
    live = _session(tmp_path, tmp_store, LIVE, PROJECT, 12)
    live.prompt("the deploy key is " + SECRET)  # redacted by ingest, and by the server
    live.flush()
    run_hook(tmp_store, "user-prompt-submit", live.payload("UserPromptSubmit", prompt="go"))
    return Archive(tmp_store, PROJECT)


def call(archive: Archive, name: str, **args: Any) -> ToolResult:
    return call_tool(archive, name, args)


def test_the_tools_and_their_schemas_are_the_contract() -> None:
    assert tool_names() == ["search", "read", "sessions", "restore", "remember"]
    for tool in TOOLS:
        schema = tool["inputSchema"]
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert len(tool["description"]) > 100
        for name, prop in schema["properties"].items():
            assert prop.get("description"), (tool["name"], name)
    assert TOOLS[0]["inputSchema"]["required"] == ["query"]
    assert TOOLS[4]["inputSchema"]["required"] == ["text"]


def test_the_hooks_note_the_live_session_and_the_server_defaults_to_it(archive: Archive) -> None:
    note = noted_session(archive.store, PROJECT)
    assert note is not None and note.thread_id == f"cc-{LIVE}" and note.agent == "claude-code"
    assert archive.current() == f"cc-{LIVE}"
    folder = live_folder(archive.store)
    assert folder is not None
    for f in folder.iterdir():  # deleting the note loses only the default...
        f.unlink()
    assert noted_session(archive.store, PROJECT) is None
    # ...which is then the project's most recently active session
    assert archive.current() == f"cc-{LIVE}"
    assert Archive(archive.store, "/nowhere").current() is None


def test_search_gives_one_line_a_hit_in_the_project_and_pages_with_a_cursor(
    archive: Archive,
) -> None:
    first = call(archive, "search", query="wombat migration", limit=5)
    hits = first.data["hits"]
    assert len(hits) == 5 and first.data["next_cursor"]
    assert {h["thread"] for h in hits} <= {f"cc-{OLD}", f"cc-{LIVE}"}  # not the other project
    lines = first.text.splitlines()
    assert lines[1].startswith("1. cc-") and " user: " in lines[1]
    seen = [(h["thread"], h["seq"]) for h in hits]
    cursor = first.data["next_cursor"]
    while cursor:
        page = call(archive, "search", query="wombat migration", limit=5, cursor=cursor)
        seen += [(h["thread"], h["seq"]) for h in page.data["hits"]]
        cursor = page.data["next_cursor"]
    assert len(seen) == len(set(seen)) >= 15  # every page new, none lost
    everywhere = call(archive, "search", query="wombat migration", scope="all", limit=50)
    assert f"cc-{ELSEWHERE}" in {h["thread"] for h in everywhere.data["hits"]}
    session = call(archive, "search", query="wombat", scope="session", limit=50)
    assert {h["thread"] for h in session.data["hits"]} == {f"cc-{LIVE}"}


def test_search_filters_by_agent_thread_and_time(archive: Archive) -> None:
    assert call(archive, "search", query="quokka", agent="codex").data["hits"] == []
    assert call(archive, "search", query="quokka", agent="claude-code").data["hits"]
    only = call(archive, "search", query="quokka", thread=OLD, limit=50)  # a bare session id
    assert {h["thread"] for h in only.data["hits"]} == {f"cc-{OLD}"}
    assert call(archive, "search", query="quokka", since="2026-01-06").data["hits"] == []
    assert call(archive, "search", query="quokka", until="2026-01-05").data["hits"] == []
    assert call(archive, "search", query="quokka", since="2026-01-05T09:00Z").data["hits"]


@pytest.mark.parametrize(
    ("name", "args", "says"),
    [
        ("search", {"query": "  "}, "query is empty"),
        ("search", {"query": "x", "scope": "galaxy"}, "scope must be one of"),
        ("search", {"query": "x", "limit": 0}, "limit must be between 1 and 50"),
        ("search", {"query": "x", "cursor": "!!!"}, "cursor is not one search returned"),
        ("search", {"query": "x", "since": "last tuesday"}, "since must be an ISO date"),
        ("search", {"query": "x", "colour": "red"}, "search takes no argument colour"),
        ("read", {"thread": "nope"}, "no thread 'nope'"),
        ("read", {"seq": 10**9}, "past the end of thread"),
        ("read", {"seq": 3, "from_seq": 1}, "not both"),
        ("read", {"from_seq": 9, "to_seq": 3}, "from_seq 9 is after to_seq 3"),
        ("read", {"artifact": "00" * 32}, "no artifact"),
        ("read", {"seq": "ten"}, "seq must be an integer"),
        ("remember", {"text": ""}, "text is empty"),
        ("remember", {"text": "x", "kind": "summary"}, "a summary needs to_seq"),
        ("remember", {"text": "x", "to_seq": 3}, "from_seq and to_seq are for kind summary"),
        ("remember", {"text": "x", "kind": "summary", "to_seq": 10**6}, "past the end"),
        ("nothing", {}, "no tool 'nothing'"),
    ],
)
def test_bad_calls_fail_with_one_clear_line(
    archive: Archive, name: str, args: dict[str, Any], says: str
) -> None:
    with pytest.raises(ToolError) as err:
        call_tool(archive, name, args)
    message = str(err.value)
    assert says in message and "\n" not in message


def test_a_cursor_only_continues_the_listing_it_was_made_for(archive: Archive) -> None:
    cursor = call(archive, "search", query="wombat", limit=2).data["next_cursor"]
    with pytest.raises(ToolError, match="made for other arguments"):
        call(archive, "search", query="quokka", limit=2, cursor=cursor)
    with pytest.raises(ToolError, match="made for other arguments"):
        call(archive, "read", cursor=cursor)


def test_read_renders_turns_around_a_seq_within_the_budget_and_continues(
    archive: Archive,
) -> None:
    hit = call(archive, "search", query="migrate-7", scope="session").data["hits"][0]
    around = call(archive, "read", thread=hit["thread"], seq=hit["seq"], max_tokens=400)
    assert f"▶ #{hit['seq']}" in around.text and "→ Bash" in around.text
    assert len(around.text) < 400 * 4 + 400  # the budget holds
    seqs: list[int] = []
    page = call(archive, "read", from_seq=0, max_tokens=300)
    pages = 1
    while True:
        seqs += [int(line[1:].split()[0]) for line in page.text.splitlines() if line[:1] == "#"]
        cursor = page.data["next_cursor"]
        if not cursor:
            break
        page = call(archive, "read", from_seq=0, max_tokens=300, cursor=cursor)
        pages += 1
    assert pages > 3
    assert seqs == sorted(set(seqs)) and seqs[-1] == page.data["last_seq"]


def test_one_long_frame_is_read_whole_in_pages(archive: Archive) -> None:
    hit = call(archive, "search", query="migrate-3", scope="session").data["hits"][0]
    thread = archive.store.thread(hit["thread"])
    result_seq = next(
        f.seq
        for f in thread.read(from_seq=hit["seq"])
        if isinstance(f, fr.MessageAppended)
        and any(isinstance(b, fr.ToolResultBlock) for b in f.content)
    )
    cut = call(archive, "read", from_seq=result_seq - 1, to_seq=result_seq)
    assert f"read from_seq={result_seq} to_seq={result_seq}" in cut.text
    text = ""
    page = call(archive, "read", from_seq=result_seq, to_seq=result_seq, max_tokens=200)
    while True:
        body = page.text.splitlines()[1:]
        if page.data["next_cursor"]:
            body = body[:-1]
        text += "\n".join(body).removesuffix(" …")
        if not page.data["next_cursor"]:
            break
        page = call(
            archive,
            "read",
            from_seq=result_seq,
            to_seq=result_seq,
            max_tokens=200,
            cursor=page.data["next_cursor"],
        )
    assert text.count("log line") == 80 and "migration 3 ok" in text


@pytest.mark.slow
def test_an_artifact_is_read_in_pages(archive: Archive) -> None:
    big = "\n".join(f"row {i}: " + "x" * 50 for i in range(2_000))
    aid = archive.store.artifacts.put(big.encode())
    got = ""
    page = call(archive, "read", artifact=aid, max_tokens=2_000)
    n = 1
    while page.data["next_cursor"]:
        got += page.text.split(":\n", 1)[1].rsplit("\nMore: ", 1)[0]
        cursor = page.data["next_cursor"]
        page = call(archive, "read", artifact=aid, max_tokens=2_000, cursor=cursor)
        n += 1
    got += page.text.split(":\n", 1)[1]
    assert got == big and n > 10


def test_sessions_lists_the_project_most_recent_first_and_marks_the_current(
    archive: Archive,
) -> None:
    listed = call(archive, "sessions")
    threads = [s["thread"] for s in listed.data["sessions"]]
    assert threads == [f"cc-{LIVE}", f"cc-{OLD}"]
    assert listed.data["sessions"][0]["current"] and "(current)" in listed.text
    assert listed.data["sessions"][0]["messages"] > 30
    assert "wombat migration number 0" in listed.data["sessions"][0]["title"]
    everyone = call(archive, "sessions", scope="all", limit=1)
    assert len(everyone.data["sessions"]) == 1 and everyone.data["next_cursor"]
    rest = call(archive, "sessions", scope="all", limit=1, cursor=everyone.data["next_cursor"])
    assert rest.data["sessions"][0]["thread"] != everyone.data["sessions"][0]["thread"]
    assert call(archive, "sessions", agent="codex").data["sessions"] == []


def test_restore_gives_back_what_the_compaction_dropped_and_writes_nothing(
    tmp_path: Path, tmp_store: Store
) -> None:
    t = _session(tmp_path, tmp_store, LIVE, PROJECT, 4)
    t.compaction("We migrated wombats.")
    t.prompt("carry on")
    t.flush()
    run_hook(tmp_store, "user-prompt-submit", t.payload("UserPromptSubmit", prompt="go"))
    archive = Archive(tmp_store, PROJECT)
    head = tmp_store.thread(t.thread_id).head()
    got = call(archive, "restore")
    assert "make migrate-3" in got.text and "not been compacted" not in got.text
    assert got.data["compactions"] == 1
    assert tmp_store.thread(t.thread_id).head() == head  # read-only: no decision logged


def test_remembered_notes_are_found_by_search_and_given_back_by_restore(
    archive: Archive,
) -> None:
    said = call(archive, "remember", text="We chose SQLite over Redis for the zebra cache.")
    assert said.data["kind"] == "note"
    call(archive, "remember", kind="decision", text="Never deploy the platypus on Fridays.")
    hits = call(archive, "search", query="platypus fridays").data["hits"]
    assert hits[0]["kind"] == "decision" and hits[0]["thread"] == f"cc-{LIVE}"
    assert "Never deploy the platypus" in call(archive, "read", seq=hits[0]["seq"]).text
    restored = call(archive, "restore").text
    assert "[decision #" in restored and "zebra cache" in restored


def test_a_remembered_summary_is_what_later_compiles_start_from(archive: Archive) -> None:
    thread = archive.store.thread(f"cc-{LIVE}")
    head = thread.head()
    assert head is not None
    to_seq = head.seq - 6
    said = call(
        archive,
        "remember",
        kind="summary",
        from_seq=10,
        to_seq=to_seq,
        text="The agent's own account: wombat migrations 2 to 9 all passed.",
    )
    assert said.data["kind"] == "summary"
    result = compile_context(thread, log=False)
    text = to_text(result.bundle)
    assert "wombat migrations 2 to 9 all passed" in text
    assert result.decision.strategy == "summaries_recent_messages_v1"
    # the stretch before from_seq is carried by the default summarizer, not lost
    assert "migrate-0" in text or "migration number 0" in text
    hits = call(archive, "search", query="agent's own account").data["hits"]
    assert hits and hits[0]["kind"] == "summary"


def test_a_secret_never_comes_out_of_search_read_or_restore(archive: Archive) -> None:
    # written straight to the log, past ingest's redaction: the server redacts on the way out
    thread = archive.store.thread(f"cc-{LIVE}")
    thread.append(fr.message("user", content=[fr.TextBlock(text=f"my token {SECRET} leaks")]))
    outputs = [
        call(archive, "search", query="token leaks"),
        call(archive, "search", query="deploy key"),
        call(archive, "read"),
        call(archive, "read", from_seq=0, max_tokens=20_000),
        call(archive, "restore"),
        call(archive, "sessions"),
    ]
    assert outputs[0].data["hits"]
    for out in outputs:
        assert SECRET not in out.text and SECRET not in repr(out.data)
    assert "[REDACTED:github-token]" in outputs[2].text
    call(archive, "remember", text=f"the key {SECRET} is in the vault")
    last = thread.tail(1)[0]  # remember redacts on the way in
    assert isinstance(last, fr.RecordAppended)
    assert last.data["text"] == "the key [REDACTED:github-token] is in the vault"


def test_times_are_iso_or_ages() -> None:
    assert parse_time("2026-01-05", "since") == 1_767_571_200_000
    assert parse_time("2026-01-05T01:00+01:00", "since") == 1_767_571_200_000
    assert parse_time("2h", "since", now_ms=10_000_000) == 10_000_000 - 7_200_000
    with pytest.raises(ToolError):
        parse_time("soon", "until")


def test_a_missing_store_is_a_tool_error_on_each_call(tmp_path: Path) -> None:
    from continuity.store.locate import open_store

    archive = Archive(lambda: open_store(str(tmp_path / "none")), PROJECT)
    with pytest.raises(ToolError, match=r"no continuity store|does not exist|not found"):
        call(archive, "sessions")


@pytest.mark.parametrize("written", [PROJECT + "/", PROJECT + "/./", "/work/demo-a/sub/.."])
def test_sessions_find_the_project_however_its_path_is_written(
    tmp_path: Path, tmp_store: Store, written: str
) -> None:
    _session(tmp_path, tmp_store, OLD, PROJECT, 2)
    _session(tmp_path, tmp_store, LIVE, PROJECT + "/services/api", 2)  # a subfolder of it
    _session(tmp_path, tmp_store, ELSEWHERE, PROJECT + "-other", 2)  # a sibling, not in it
    listed = call(Archive(tmp_store, written), "sessions")
    assert sorted(s["thread"] for s in listed.data["sessions"]) == [f"cc-{OLD}", f"cc-{LIVE}"]


def test_sessions_without_times_come_after_the_timed_ones(tmp_path: Path) -> None:
    # ingested now, it would list first if its untimed lines took the time of the ingest; they
    # take the transcript's last change, older than the timed session
    tmp_store = Store(tmp_path / "s", create=True, durable=False)
    timed = _session(tmp_path, tmp_store, OLD, PROJECT, 2)
    untimed = Transcript(tmp_path / "transcripts" / f"{LIVE}.jsonl", LIVE, PROJECT)
    untimed.prompt("an old transcript whose lines carry no timestamp")
    untimed.say("so nobody knows when it happened")
    untimed.flush()
    lines = [json.loads(line) for line in untimed.path.read_text().splitlines()]
    untimed.path.write_text("".join(json.dumps(untimestamped(obj)) + "\n" for obj in lines))
    last_written = 1_735_689_600  # 2025-01-01: the file is older than the timed session
    os.utime(untimed.path, (last_written, last_written))
    run_hook(tmp_store, "user-prompt-submit", untimed.payload("UserPromptSubmit", prompt="go"))
    listed = call(Archive(tmp_store, PROJECT), "sessions", scope="all")
    threads = [s["thread"] for s in listed.data["sessions"]]
    assert threads == [timed.thread_id, f"cc-{LIVE}"], threads


def untimestamped(line: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in line.items() if k != "timestamp"}
