"""The opencode adapter's ingest, on what opencode really wrote: a database made by the real
CLI (``tests/data/opencode/opencode-1.18.33.db``, ``tools/gen_opencode_db.py``) and the
recorded ``opencode export`` in ``../shared/fixtures/agents/recorded/``.

Messages, tool calls with their results, sub-agent sessions under their parent, opencode's
compaction as a checkpoint with its summary; a second ingest appends nothing and gives the
same bytes, with or without its cursor; a session that grows is read from where it stopped,
an unfinished message held back until it is finished; the database is never written, and no
``-wal``/``-shm`` file is left behind, even while another connection writes.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import time
from pathlib import Path
from typing import Any

import msgspec

from continuity import frames as fr
from continuity.agents.opencode._frames import CLEARED
from continuity.agents.opencode.ingest import (
    CUT_RULE,
    detect,
    ingest_paths,
    ingest_session,
    ingest_source,
)
from continuity.agents.opencode.source import DbSource, StorageSource, data_dir, open_source
from continuity.agents.table import OPENCODE
from continuity.store.jsonl import Store
from continuity.summary import decode_summary
from tests.support.fixtures import shared_fixture

DB = Path(__file__).resolve().parents[2] / "data" / "opencode" / "opencode-1.18.33.db"
ROOT = "ses_de5ae599dffewqH0pMyudaCGW5"
CHILD = "ses_de5ae31f4ffeJiXamn7EnfzK7o"
SUMMARY = "SUMMARY: the user asked to run echo; it printed hi-from-bash."


def _store(tmp_path: Path, name: str = "store") -> Store:
    return Store(tmp_path / name, create=True)


def _frames(store: Store, thread_id: str) -> list[fr.Frame]:
    return list(store.thread(thread_id).read())


def _messages(frames: list[fr.Frame]) -> list[fr.MessageAppended]:
    return [f for f in frames if isinstance(f, fr.MessageAppended)]


def _db(tmp_path: Path, *, wal: bool = True) -> Path:
    """A copy of the real database (in WAL mode, as opencode keeps it, when ``wal``)."""
    path = tmp_path / "data" / "opencode.db"
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(DB, path)
    if wal:
        con = sqlite3.connect(path)
        con.execute("PRAGMA journal_mode=wal")
        con.close()  # the last connection: SQLite checkpoints and removes -wal and -shm
    return path


def _thread_bytes(store: Store) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((store.root / "threads").glob("*.jsonl"))}


# --- what is archived -------------------------------------------------------------------------


def test_the_real_database_archives_messages_tools_the_sub_agent_and_the_compaction(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path)
    db = _db(tmp_path)
    report = ingest_source(store, db)
    root = OPENCODE.thread_id(ROOT)
    child = f"{root}.agent-{CHILD}"
    assert report.threads == [root, child]
    assert (report.sessions, report.messages, report.checkpoints) == (2, 12, 1)

    frames = _frames(store, root)
    head = frames[0]
    assert isinstance(head, fr.ThreadCreated)
    assert head.meta == {
        "source": "opencode",
        "project": "/home/dev/proj",
        "session_id": ROOT,
        "transcript": str(db),
        "opencode_version": "1.18.33",
    }
    messages = _messages(frames)
    assert [m.role for m in messages] == ["user", "assistant"] * 5
    assert messages[0].content == [fr.TextBlock(text='"Please RUN_ECHO now"')]
    call = messages[1].content[0]
    assert isinstance(call, fr.ToolUseBlock) and call.name == "bash"
    assert call.input == {"command": "echo hi-from-bash", "description": "echo"}
    result = messages[2].content[0]
    assert isinstance(result, fr.ToolResultBlock)
    assert (result.tool_use_id, result.content) == (call.id, "hi-from-bash\n")
    # and its token counts: how full opencode's context was (continuity.rolling.usage)
    assert messages[1].meta == {
        "model": "fake/fake-model",
        "agent": "build",
        "tokens_input": "1000",
        "tokens_output": "20",
        "tokens_reasoning": "0",
        "tokens_cache_read": "0",
        "tokens_cache_write": "0",
    }
    assert all(m.source is not None and m.source.system == "opencode" for m in messages)

    # opencode's own compaction: the checkpoint covers up to the answer it summarized
    (cp,) = [f for f in frames if isinstance(f, fr.CompactionCheckpointCreated)]
    assert (cp.cut_rule_id, cp.produced_by, cp.summary_kind) == (
        CUT_RULE,
        "opencode",
        "cumulative_v1",
    )
    assert cp.to_seq == messages[3].seq and "printed hi-from-bash" in str(messages[3].content)
    assert decode_summary(store.artifacts.get(cp.summary_artifact_id)).text == SUMMARY
    after = [m for m in messages if m.seq > cp.seq]
    assert after[0].meta == {"synthetic": "true"}  # opencode's "Continue if you have next steps"
    assert not any(SUMMARY in str(m.content) for m in messages)  # the summary is the checkpoint

    # the task tool's sub-agent session: its own thread, under the session that ran it
    task = [b for m in messages for b in m.content if isinstance(b, fr.ToolUseBlock)][-1]
    assert task.name == "task"
    sub = _frames(store, child)
    sub_head = sub[0]
    assert isinstance(sub_head, fr.ThreadCreated)
    assert sub_head.parent_thread_id == root and sub_head.title == "child work (@general subagent)"
    assert [(m.role, m.content) for m in _messages(sub)] == [
        ("user", [fr.TextBlock(text="CHILD_WORK: say done")]),
        ("assistant", [fr.TextBlock(text="child done")]),
    ]


def test_the_recorded_export_archives_the_same_shapes(tmp_path: Path) -> None:
    export = shared_fixture("agents", "recorded", "opencode_export.json")
    store = _store(tmp_path)
    assert detect(export)
    (report,) = ingest_paths(store, [export])
    (thread,) = report.threads
    frames = _frames(store, thread)
    messages = _messages(frames)
    uses = [b for m in messages for b in m.content if isinstance(b, fr.ToolUseBlock)]
    results = [b for m in messages for b in m.content if isinstance(b, fr.ToolResultBlock)]
    assert [(u.name, u.id) for u in uses] == [("bash", "call_b2db8b4127f44c05b0d51a83")]
    assert [(r.tool_use_id, r.content) for r in results] == [(uses[0].id, "big\n")]
    (cp,) = [f for f in frames if isinstance(f, fr.CompactionCheckpointCreated)]
    assert cp.checkpoint_id == "oc-msg_217e43919001wJKzgemF2lLQes"
    assert cp.to_seq == messages[2].seq  # the tool result: the last message before compaction
    assert decode_summary(store.artifacts.get(cp.summary_artifact_id)).text == "OK"


def _storage_tree(export: dict[str, Any], root: Path) -> Path:
    """The export laid out as opencode 1.1 kept it: storage/session, message, part."""
    storage = root / "storage"
    info = export["info"]
    session_file = storage / "session" / info["projectID"] / f"{info['id']}.json"
    session_file.parent.mkdir(parents=True)
    session_file.write_text(json.dumps(info, indent=2))
    for m in export["messages"]:
        mfile = storage / "message" / info["id"] / f"{m['info']['id']}.json"
        mfile.parent.mkdir(parents=True, exist_ok=True)
        mfile.write_text(json.dumps(m["info"], indent=2))
        for p in m["parts"]:
            pfile = storage / "part" / m["info"]["id"] / f"{p['id']}.json"
            pfile.parent.mkdir(parents=True, exist_ok=True)
            pfile.write_text(json.dumps(p, indent=2))
    return storage


def test_the_legacy_storage_tree_gives_the_frames_the_export_gives(tmp_path: Path) -> None:
    export = shared_fixture("agents", "recorded", "opencode_export.json")
    storage = _storage_tree(json.loads(export.read_text()), tmp_path / "data")
    assert isinstance(open_source(storage.parent), StorageSource)
    a, b = _store(tmp_path, "a"), _store(tmp_path, "b")
    ingest_source(a, export)
    ingest_source(b, storage)
    (name,) = _thread_bytes(a)
    thread = name.removesuffix(".jsonl")

    def body(store: Store) -> list[fr.Frame]:
        # the digests chain from thread_created, which names the file each came from
        return [
            msgspec.structs.replace(f, digest="")
            for f in _frames(store, thread)
            if not isinstance(f, fr.ThreadCreated)
        ]

    assert body(a) == body(b)


# --- idempotence and growth -------------------------------------------------------------------


def test_re_ingest_appends_nothing_and_gives_the_same_bytes_with_or_without_cursors(
    tmp_path: Path,
) -> None:
    db = _db(tmp_path)
    store = _store(tmp_path)
    ingest_source(store, db)
    first = _thread_bytes(store)
    again = ingest_source(store, db)
    assert (again.messages, again.unchanged) == (0, 2)
    shutil.rmtree(store.root / "cache")
    lost = ingest_source(store, db)
    assert (lost.messages, lost.checkpoints) == (0, 0) and lost.duplicates > 0
    assert _thread_bytes(store) == first
    fresh = _store(tmp_path, "fresh")
    ingest_source(fresh, db)
    assert _thread_bytes(fresh) == first  # same input, same log


def _add_turn(con: sqlite3.Connection, n: int, *, completed: bool) -> tuple[str, str]:
    """A turn as opencode writes it: a user message and its text part, an assistant message
    (completed or still running) and its text part."""
    user, answer = f"msg_ffff{n:08d}aaaaaaaaaaaaaa", f"msg_ffff{n:08d}bbbbbbbbbbbbbb"
    stamp = 1_800_000_000_000 + n
    rows = [
        (user, {"role": "user", "time": {"created": stamp}, "agent": "build"}),
        (
            answer,
            {
                "role": "assistant",
                "parentID": user,
                "agent": "build",
                "modelID": "fake-model",
                "providerID": "fake",
                "time": {"created": stamp, **({"completed": stamp + 1} if completed else {})},
            },
        ),
    ]
    for mid, data in rows:
        con.execute(
            "INSERT INTO message (id, session_id, time_created, time_updated, data) "
            "VALUES (?, ?, ?, ?, ?)",
            (mid, ROOT, stamp, stamp, json.dumps(data)),
        )
    for mid, text in ((user, f"question {n}"), (answer, f"answer {n}")):
        con.execute(
            "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (f"prt_{mid[4:]}", mid, ROOT, stamp, stamp, json.dumps({"type": "text", "text": text})),
        )
    con.commit()
    return user, answer


def test_a_growing_session_is_read_from_where_it_stopped_and_holds_back_an_unfinished_answer(
    tmp_path: Path,
) -> None:
    db = _db(tmp_path)
    store = _store(tmp_path)
    root = OPENCODE.thread_id(ROOT)
    ingest_session(store, db, ROOT)
    before = len(_frames(store, root))

    writer = sqlite3.connect(db)  # opencode, still running
    try:
        _add_turn(writer, 1, completed=True)
        _, running = _add_turn(writer, 2, completed=False)
        report = ingest_session(store, db, ROOT)
        assert (report.messages, report.held_back) == (3, 1)  # turn 1, and turn 2's question
        texts = [str(m.content) for m in _messages(_frames(store, root))[-3:]]
        assert ["question 1" in texts[0], "answer 1" in texts[1], "question 2" in texts[2]] == [
            True
        ] * 3

        data = json.loads(
            writer.execute("SELECT data FROM message WHERE id = ?", (running,)).fetchone()[0]
        )
        data["time"]["completed"] = data["time"]["created"] + 5
        writer.execute("UPDATE message SET data = ? WHERE id = ?", (json.dumps(data), running))
        writer.commit()
        done = ingest_session(store, db, ROOT)
        assert (done.messages, done.held_back, done.duplicates) == (1, 0, 0)
    finally:
        writer.close()
    frames = _frames(store, root)
    assert len(frames) == before + 4
    assert "answer 2" in str(_messages(frames)[-1].content)


def test_a_final_ingest_takes_an_unfinished_answer_as_it_is(tmp_path: Path) -> None:
    db = _db(tmp_path)
    with sqlite3.connect(db) as writer:
        _add_turn(writer, 1, completed=False)
    store = _store(tmp_path)
    report = ingest_session(store, db, ROOT, final=True)
    assert report.held_back == 0
    assert "answer 1" in str(_messages(_frames(store, OPENCODE.thread_id(ROOT)))[-1].content)


def test_an_unfinished_answer_opencode_moved_on_from_is_taken(tmp_path: Path) -> None:
    db = _db(tmp_path)
    with sqlite3.connect(db) as writer:
        _add_turn(writer, 1, completed=False)  # opencode was killed here, then resumed
        _add_turn(writer, 2, completed=True)
    store = _store(tmp_path)
    report = ingest_session(store, db, ROOT)
    assert report.held_back == 0
    texts = [str(m.content) for m in _messages(_frames(store, OPENCODE.thread_id(ROOT)))[-4:]]
    assert ["answer 1" in texts[1], "answer 2" in texts[3]] == [True, True]


def test_a_final_sweep_leaves_a_running_session_s_unfinished_answer(tmp_path: Path) -> None:
    db = _db(tmp_path)
    with sqlite3.connect(db) as writer:
        _add_turn(writer, 1, completed=False)
        now = int(time.time() * 1000)
        writer.execute("UPDATE session SET time_updated = ? WHERE id = ?", (now, ROOT))
    store = _store(tmp_path)
    report = ingest_source(store, db, final=True)
    assert report.held_back == 1  # updated just now: opencode may be writing it
    assert "answer 1" not in str(_messages(_frames(store, OPENCODE.thread_id(ROOT)))[-1].content)


# --- tool outputs -----------------------------------------------------------------------------


def _tool_turn(con: sqlite3.Connection, state: dict[str, Any]) -> str:
    _user, answer = _add_turn(con, 7, completed=True)
    part = {"type": "tool", "tool": "read", "callID": "call_big", "state": state}
    con.execute(
        "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        ("prt_zzzz_tool", answer, ROOT, 1, 1, json.dumps(part)),
    )
    con.commit()
    return answer


def test_a_large_tool_output_goes_to_an_artifact_and_a_later_prune_changes_nothing(
    tmp_path: Path,
) -> None:
    db = _db(tmp_path)
    big = "line of output\n" * 3000
    state = {
        "status": "completed",
        "input": {"filePath": "/x"},
        "output": big,
        "title": "x",
        "metadata": {},
        "time": {"start": 1, "end": 2},
    }
    with sqlite3.connect(db) as writer:
        _tool_turn(writer, state)
    store = _store(tmp_path)
    ingest_session(store, db, ROOT)
    root = OPENCODE.thread_id(ROOT)
    (result,) = [
        b
        for m in _messages(_frames(store, root))[-1:]
        for b in m.content
        if isinstance(b, fr.ToolResultBlock)
    ]
    assert result.artifact_id is not None and result.size == len(big)
    assert store.artifacts.get(result.artifact_id).decode() == big
    assert result.preview == big[:2000]
    archived = _thread_bytes(store)

    # opencode prunes the old output later: what was archived stays as it was
    pruned = dict(state, output="", time={"start": 1, "end": 2, "compacted": 3})
    with sqlite3.connect(db) as writer:
        writer.execute(
            "UPDATE part SET data = ? WHERE id = 'prt_zzzz_tool'",
            (json.dumps({"type": "tool", "tool": "read", "callID": "call_big", "state": pruned}),),
        )
    ingest_session(store, db, ROOT)
    assert _thread_bytes(store) == archived


def test_an_output_pruned_before_it_was_archived_shows_as_cleared(tmp_path: Path) -> None:
    db = _db(tmp_path)
    state = {
        "status": "completed",
        "input": {},
        "output": "",
        "title": "x",
        "metadata": {},
        "time": {"start": 1, "end": 2, "compacted": 3},
    }
    with sqlite3.connect(db) as writer:
        _tool_turn(writer, state)
    store = _store(tmp_path)
    ingest_session(store, db, ROOT)
    last = _messages(_frames(store, OPENCODE.thread_id(ROOT)))[-1]
    assert last.content == [
        fr.ToolResultBlock(tool_use_id="call_big", content=CLEARED, size=len(CLEARED))
    ]
    assert last.meta == {"pruned": "call_big"}


# --- the database is only read ----------------------------------------------------------------


def _files(folder: Path) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


def test_reading_leaves_no_wal_or_shm_file_and_changes_nothing(tmp_path: Path) -> None:
    db = _db(tmp_path)
    before = _files(db.parent)
    digest = db.read_bytes()
    assert list(before) == ["opencode.db"]  # opencode closed: WAL mode, no -wal, no -shm
    ingest_source(_store(tmp_path), db)
    assert _files(db.parent) == before and db.read_bytes() == digest


def test_reading_while_opencode_writes_sees_what_it_committed(tmp_path: Path) -> None:
    db = _db(tmp_path)
    writer = sqlite3.connect(db)
    try:
        writer.execute("BEGIN IMMEDIATE")  # a write in progress holds the write lock
        _add_turn(writer, 3, completed=True)  # committed
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("UPDATE session SET title = 'renamed' WHERE id = ?", (ROOT,))
        store = _store(tmp_path)
        report = ingest_session(store, db, ROOT)  # not blocked by the open write
        assert report.messages == 10 + 2
        head = _frames(store, OPENCODE.thread_id(ROOT))[0]
        assert isinstance(head, fr.ThreadCreated) and head.title == "OK."  # uncommitted: unseen
        writer.commit()
        _add_turn(writer, 4, completed=True)  # opencode still writes after our read
    finally:
        writer.close()
    assert DbSource(db).session(ROOT) is not None


def test_where_opencode_keeps_its_data() -> None:
    assert data_dir({"XDG_DATA_HOME": "/x/data", "HOME": "/h"}) == Path("/x/data/opencode")
    assert data_dir({"HOME": "/h"}) == Path("/h/.local/share/opencode")


def test_what_is_not_opencode_s_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "notes.txt"
    bad.write_text("hello")
    assert not detect(bad)
    assert not detect(tmp_path / "missing.db")


def test_the_same_session_from_two_places_is_archived_once(tmp_path: Path) -> None:
    # opencode 1.2+ imports the legacy storage/ tree into its database and leaves it in place:
    # the default ingest reads both, and the message ids keep the thread whole and single
    export = shared_fixture("agents", "recorded", "opencode_export.json")
    storage = _storage_tree(json.loads(export.read_text()), tmp_path / "data")
    store = _store(tmp_path)
    first = ingest_source(store, export)
    second = ingest_source(store, storage)
    assert (first.messages, first.checkpoints) == (5, 1)
    assert (second.messages, second.checkpoints, second.threads) == (0, 0, first.threads)


def test_a_placeholder_title_gives_way_to_the_users_words_and_the_branch_is_read(
    tmp_path: Path,
) -> None:
    """opencode titles a session "New session - <time>" until its title request answers, and
    the first ingest (the first turn's end) often comes first: the thread's first frame, which
    is written once, takes the user's first words then. The branch is the session folder's
    checked-out one (opencode's files do not say it)."""
    db = _db(tmp_path)
    project = tmp_path / "proj"
    (project / ".git").mkdir(parents=True)
    (project / ".git" / "HEAD").write_text("ref: refs/heads/feature/login\n")
    con = sqlite3.connect(db)
    with con:
        con.execute(
            "UPDATE session SET title = 'New session - 2026-11-26T12:45:52.464Z', directory = ?",
            (str(project),),
        )
    con.close()
    store = _store(tmp_path)
    ingest_source(store, open_source(db))
    head = _frames(store, OPENCODE.thread_id(ROOT))[0]
    assert isinstance(head, fr.ThreadCreated)
    first = next(
        b.text
        for m in _messages(_frames(store, OPENCODE.thread_id(ROOT)))
        if m.role == "user"
        for b in m.content
        if isinstance(b, fr.TextBlock)
    )
    assert head.title == " ".join(first.split())[:80]
    assert not head.title.startswith("New session")
    assert head.meta["git_branch"] == "feature/login"
