"""The store catalog (ADR 0028): ``threads``, ``sessions`` and ``stats`` read one row per thread
from ``cache/catalog.v1.json``, and every row they serve agrees with the log it describes, after
appends by other processes, a deleted, damaged or torn catalog, a killed writer and in a store
that never had one. The expected answers are read here from the frames themselves, not through
the catalog's own code."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import blake3
import msgspec
import pytest
from typer.testing import CliRunner

from continuity import frames as fr
from continuity.agents.base.sessions import SessionInfo, list_sessions
from continuity.caches.catalog import CATALOG_FILE, catalog_view
from continuity.cli.app import app
from continuity.maintenance.stats import ThreadInfo, list_threads, store_stats
from continuity.maintenance.verify import verify_store
from continuity.store.base import BaseStore, Thread
from continuity.store.jsonl import Store
from continuity.store.memory import MemoryStore

ROOT = Path(__file__).resolve().parents[2]


# --- what the logs say, read here frame by frame ------------------------------------------------

AGENTS = {
    # source: (agent name, thread id prefix, its own compactions' cut rule prefix)
    "claude-code": ("claude-code", "cc-", "claude_code_compact/"),
    "codex": ("codex", "codex-", "codex_compact/"),
    "gemini-cli": ("gemini", "gemini-", "gemini_cli_compress/"),
    "opencode": ("opencode", "oc-", "opencode_compact/"),
}
OWN_COMPACTIONS = tuple(rule for _name, _prefix, rule in AGENTS.values())


def _expected_info(thread: Thread) -> ThreadInfo:
    frames = list(thread.read())
    first, last = frames[0], frames[-1]
    assert isinstance(first, fr.ThreadCreated)
    source = first.meta.get("source", "")
    if source in AGENTS:
        agent = first.parent_thread_id is not None or ".agent-" in thread.id
        kind = f"{source} subagent" if agent else f"{source} session"
    else:
        kind = source or "other"
    rules = [f.cut_rule_id for f in frames if isinstance(f, fr.CompactionCheckpointCreated)]
    return ThreadInfo(
        thread_id=thread.id,
        frames=len(frames),
        last_active_ms=last.ts_ms,
        kind=kind,
        title=first.title,
        parent_thread_id=first.parent_thread_id,
        project=first.meta.get("project", ""),
        git_branch=first.meta.get("git_branch", ""),
        messages=sum(isinstance(f, fr.MessageAppended) for f in frames),
        checkpoints=len(rules),
        compactions=sum(r.startswith(OWN_COMPACTIONS) for r in rules),
        log_bytes=_file_size(thread),
        head_digest=last.digest,
        agent=AGENTS[source][0] if source in AGENTS else "",
    )


def _file_size(thread: Thread) -> int:
    """What the log takes (an unfinished batch or a torn tail included, as ``stats`` says)."""
    path = getattr(thread, "path", None)
    if isinstance(path, Path):
        return path.stat().st_size
    return sum(len(line) + 1 for _seq, line in thread.read_lines())


def _expected_threads(store: BaseStore) -> list[ThreadInfo]:
    found = [_expected_info(store.thread(tid)) for tid in store.threads()]
    return sorted(found, key=lambda t: (t.last_active_ms, t.thread_id))


def _stamp(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(ms / 1000))


def _expected_sessions(store: BaseStore, include_agents: bool) -> list[SessionInfo]:
    found = []
    for tid in store.threads():
        if ".agent-" in tid and not include_agents:
            continue
        frames = list(store.thread(tid).read())
        first = frames[0]
        if not isinstance(first, fr.ThreadCreated):
            continue
        agent = AGENTS.get(first.meta.get("source", ""))
        if agent is None or not tid.startswith(agent[1]):
            continue
        messages = [f for f in frames if isinstance(f, fr.MessageAppended)]
        last_ms = messages[-1].ts_ms if messages else first.ts_ms
        rules = [f.cut_rule_id for f in frames if isinstance(f, fr.CompactionCheckpointCreated)]
        found.append(
            SessionInfo(
                thread_id=tid,
                agent=agent[0],
                project=first.meta.get("project", ""),
                git_branch=first.meta.get("git_branch", ""),
                started=_stamp(first.ts_ms),
                last_active=_stamp(last_ms),
                last_active_ms=last_ms,
                parent_thread_id=first.parent_thread_id,
                messages=len(messages),
                compactions=sum(r.startswith(OWN_COMPACTIONS) for r in rules),
                title=first.title,
                first_ms=first.ts_ms,
            )
        )
    return sorted(found, key=lambda s: (s.last_active_ms, s.thread_id))


def _redactions(store: BaseStore) -> dict[str, int]:
    found = {}
    for tid in store.threads():
        n = sum(int(getattr(f, "meta", {}).get("redacted", "0")) for f in store.thread(tid).read())
        if n:
            found[tid] = n
    return found


def _check(store: BaseStore) -> None:
    """Every listing equals what the logs say."""
    assert list_threads(store) == _expected_threads(store)
    for agents in (False, True):
        assert list_sessions(store, include_agents=agents) == _expected_sessions(store, agents)
    stats = store_stats(store)
    expected = _expected_threads(store)
    assert stats.threads == len(expected)
    assert stats.frames == sum(t.frames for t in expected)
    assert stats.messages == sum(t.messages for t in expected)
    assert stats.checkpoints == sum(t.checkpoints for t in expected)
    assert stats.log_bytes == sum(t.log_bytes for t in expected)
    assert stats.redactions_by_thread == _redactions(store)


# --- a small store of every kind of thread ----------------------------------------------------


def _session(store: BaseStore, tid: str, *, parent: str | None = None, n: int = 2) -> None:
    meta = {"source": "claude-code", "project": f"/p/{tid[:6]}", "git_branch": "main"}
    frames: list[fr.Frame] = [
        fr.ThreadCreated(
            title=None if parent else f"about {tid}", parent_thread_id=parent, meta=meta
        )
    ]
    for i in range(n):
        frames.append(fr.message("user", f"question {i} of {tid}", message_id=f"{tid}-u{i}"))
        frames.append(fr.message("assistant", f"answer {i}", message_id=f"{tid}-a{i}"))
    store.thread(tid).append(frames)


def _more(store: BaseStore, tid: str, i: int, *, redacted: int = 0) -> None:
    meta = {"redacted": str(redacted)} if redacted else {}
    batch: list[fr.Frame] = [
        fr.MessageAppended(
            message_id=f"{tid}-more{i}",
            role="user",
            content=[fr.TextBlock(text=f"more {i}")],
            meta=meta,
        ),
        fr.ObservationRecorded(tool_use_id=f"t{i}", text="ran"),
    ]
    if i % 2:
        head = store.thread(tid).head()
        assert head is not None
        batch.append(
            fr.CompactionCheckpointCreated(
                checkpoint_id=f"{tid}-cp{i}",
                cut_rule_id="claude_code_compact/auto" if i % 4 == 1 else "every_n",
                summary_kind="cumulative_v1",
                summary_artifact_id=store.artifacts.put(b"a summary"),
                from_seq=0,
                to_seq=head.seq,
            )
        )
    store.thread(tid).append(batch)


def _fill(store: BaseStore) -> None:
    _session(store, "cc-s1")
    _session(store, "cc-s1.agent-a1", parent="cc-s1", n=1)
    _session(store, "cc-s2", n=3)
    _more(store, "cc-s2", 1, redacted=2)
    store.thread("plain").append(fr.message("user", "no source here", message_id="p1"))
    store.thread("tool").append(
        [fr.ThreadCreated(title="mine", meta={"source": "my-runtime"}), fr.message("user", "x")]
    )
    _more(store, "tool", 3, redacted=1)


def _catalog(store: Store) -> Path:
    return store.cache_dir / CATALOG_FILE


# --- the tests ----------------------------------------------------------------------------------


def test_rows_equal_what_the_logs_say_cold_and_warm(tmp_store: Store) -> None:
    _fill(tmp_store)
    assert not _catalog(tmp_store).exists()  # a store written without one (an older version)
    _check(tmp_store)  # cold: read from the logs, and kept
    data = _catalog(tmp_store).read_bytes()
    assert b'"thread_id":"cc-s2"' in data
    _check(tmp_store)  # warm: from the catalog
    assert _catalog(tmp_store).read_bytes() == data  # nothing changed: nothing written


def test_a_store_without_a_cache_folder_lists_the_same(memory_store: MemoryStore) -> None:
    _fill(memory_store)
    _check(memory_store)
    _more(memory_store, "cc-s1", 5, redacted=4)
    _check(memory_store)


def test_appends_after_a_listing_are_seen(tmp_store: Store) -> None:
    _fill(tmp_store)
    _check(tmp_store)
    for i in range(4):
        _more(tmp_store, "cc-s1", i, redacted=i)
        _session(tmp_store, f"cc-new{i}")
        _check(tmp_store)


_APPENDER = """
import sys
from continuity import frames as fr
from continuity.store.jsonl import Store
store = Store(sys.argv[1], durable=False)
for tid in sys.argv[2:]:
    store.thread(tid).append(fr.MessageAppended(
        message_id=f"{tid}-x", role="user", content=[fr.TextBlock(text="from elsewhere")],
        meta={"redacted": "3"}))
"""


def test_appends_by_another_process_are_seen(tmp_store: Store) -> None:
    _fill(tmp_store)
    _check(tmp_store)
    before = _catalog(tmp_store).read_bytes()
    subprocess.run(
        [sys.executable, "-c", _APPENDER, str(tmp_store.root), "cc-s1", "plain", "cc-brand-new"],
        check=True,
    )
    assert _catalog(tmp_store).read_bytes() == before  # that process never touched it
    _check(tmp_store)
    assert any(t.thread_id == "cc-brand-new" for t in list_threads(tmp_store))
    assert store_stats(tmp_store).redactions_by_thread["plain"] == 3


@pytest.mark.parametrize(
    "damage",
    ["deleted", "garbage", "torn", "empty", "other version", "not json rows", "a folder"],
)
def test_a_damaged_catalog_is_read_again(tmp_store: Store, damage: str) -> None:
    _fill(tmp_store)
    _check(tmp_store)
    path = _catalog(tmp_store)
    good = path.read_bytes()
    if damage == "deleted":
        path.unlink()
    elif damage == "garbage":
        path.write_bytes(os.urandom(len(good)))
    elif damage == "torn":
        path.write_bytes(good[: len(good) // 2])
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "other version":
        path.write_bytes(good.replace(b'"version":3', b'"version":99'))
    elif damage == "not json rows":
        path.write_bytes(b'{"version":1,"threads":[{"thread_id":5}]}')
    else:
        path.unlink()
        path.mkdir()
    _more(tmp_store, "cc-s1", 9)  # and a thread that changed meanwhile
    _check(tmp_store)
    if damage != "a folder":
        assert msgspec.json.decode(path.read_bytes())["version"] == 3  # written again


def test_a_row_with_a_wrong_stamp_is_never_served(tmp_store: Store) -> None:
    """A row whose size or digest no longer matches its log is read again, whatever it says."""
    _fill(tmp_store)
    _check(tmp_store)
    path = _catalog(tmp_store)
    doc = msgspec.json.decode(path.read_bytes())
    for row in doc["threads"]:
        row["messages"] += 100
        if row["thread_id"] == "cc-s1":
            row["log_bytes"] += 1
        else:
            row["head_digest"] = "0" * 64
    path.write_bytes(msgspec.json.encode(doc))
    _check(tmp_store)


def test_an_unfinished_batch_and_a_torn_tail_are_not_kept(tmp_store: Store) -> None:
    _fill(tmp_store)
    _check(tmp_store)
    log = tmp_store.thread("cc-s2").path
    committed = log.read_bytes()
    with open(log, "ab") as f:  # a writer in the middle of its batch
        f.write(b'{"type":"message_appended","seq":99,"more":true,"digest":"' + b"a" * 64 + b'"}\n')
    _check(tmp_store)
    rows = msgspec.json.decode(_catalog(tmp_store).read_bytes())["threads"]
    assert "cc-s2" not in {r["thread_id"] for r in rows}  # read again each time until at rest
    with open(log, "ab") as f:
        f.write(b'{"type":"message_app')  # and a torn line after it
    _check(tmp_store)
    log.write_bytes(committed)  # the writer's batch went away (recovery)
    _check(tmp_store)
    rows = msgspec.json.decode(_catalog(tmp_store).read_bytes())["threads"]
    assert "cc-s2" in {r["thread_id"] for r in rows}


def test_a_log_with_no_committed_frame_is_no_thread(tmp_store: Store) -> None:
    _fill(tmp_store)
    (tmp_store.root / "threads" / "ghost.jsonl").write_bytes(b'{"type":"thread_cre')
    _check(tmp_store)
    assert "ghost" not in {t.thread_id for t in list_threads(tmp_store)}


_LOOPER = """
import sys
from continuity import frames as fr
from continuity.maintenance.stats import list_threads
from continuity.store.jsonl import Store
store = Store(sys.argv[1], durable=False)
i = 0
while True:
    i += 1
    tid = f"cc-loop{i % 7}"
    store.thread(tid).append(fr.message("user", f"turn {i}", message_id=f"{tid}-{i}"))
    list_threads(store)
    print(i, flush=True)
"""


@pytest.mark.slow
def test_a_killed_writer_leaves_a_catalog_that_is_old_or_new(tmp_store: Store) -> None:
    """SIGKILL at arbitrary moments of append + catalog rewrite: the next reader is right."""
    _fill(tmp_store)
    for i in range(30):
        _session(tmp_store, f"cc-bulk{i}")
    for round_ in range(4):
        with subprocess.Popen(
            [sys.executable, "-c", _LOOPER, str(tmp_store.root)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        ) as proc:
            assert proc.stdout is not None
            for _ in range(3 + round_ * 5):  # a few rounds done, then killed in one
                proc.stdout.readline()
            time.sleep(0.003 * round_)
            proc.send_signal(signal.SIGKILL)
        path = _catalog(tmp_store)
        if path.exists():  # the old file or the new one, never half of one
            msgspec.json.decode(path.read_bytes())
        reopened = Store(tmp_store.root, durable=False)  # recovers a torn log tail, if any
        _check(reopened)
        report = verify_store(reopened)
        assert not [p for p in report.problems if "catalog" in p.where], report.problems


def _tree(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.name.startswith(".")
    }


def test_rebuild_index_gives_the_same_bytes(tmp_store: Store) -> None:
    _fill(tmp_store)
    _check(tmp_store)
    for i in range(3):  # a catalog kept up to date row by row
        _more(tmp_store, "cc-s2", 10 + i, redacted=1)
        _session(tmp_store, f"cc-later{i}")
        list_threads(tmp_store)
    kept = _catalog(tmp_store).read_bytes()
    runner = CliRunner()
    result = runner.invoke(app, ["--store", str(tmp_store.root), "rebuild-index"])
    assert result.exit_code == 0, result.output
    assert _catalog(tmp_store).read_bytes() == kept
    shutil.rmtree(tmp_store.cache_dir)
    result = runner.invoke(app, ["--store", str(tmp_store.root), "rebuild-index"])
    assert result.exit_code == 0, result.output
    assert _catalog(tmp_store).read_bytes() == kept
    result = runner.invoke(app, ["--store", str(tmp_store.root), "rebuild-index", "cc-s1"])
    assert result.exit_code == 0, result.output
    assert _catalog(tmp_store).read_bytes() == kept


def test_verify_reports_a_damaged_catalog(tmp_store: Store) -> None:
    _fill(tmp_store)
    _check(tmp_store)
    assert verify_store(tmp_store).ok
    path = _catalog(tmp_store)
    good = path.read_bytes()
    doc = msgspec.json.decode(good)
    for row in doc["threads"]:
        if row["thread_id"] == "cc-s2":
            row["messages"] += 1  # a lie the stamp cannot see: its log did not change
    path.write_bytes(msgspec.json.encode(doc))
    report = verify_store(tmp_store)
    assert [(p.where, p.thread_id) for p in report.problems] == [
        ("catalog row of thread cc-s2", "cc-s2")
    ]
    assert "does not match its checksum" in report.problems[0].message
    # a row whose checksum was made to match (not damage: a forger) is still read against its log
    at = [r["thread_id"] for r in doc["threads"]].index("cc-s2")
    doc["checks"][at] = blake3.blake3(msgspec.json.encode(doc["threads"][at])).hexdigest(8)
    path.write_bytes(msgspec.json.encode(doc))
    report = verify_store(tmp_store)
    assert [(p.where, p.thread_id) for p in report.problems] == [
        ("catalog row of thread cc-s2", "cc-s2")
    ]
    assert "messages 8 (the log says 7)" in report.problems[0].message
    # only the threads asked about
    assert verify_store(tmp_store, [tmp_store.thread("cc-s1")]).ok
    path.write_bytes(good[:100])
    report = verify_store(tmp_store)
    assert [p.where for p in report.problems] == ["store catalog"]
    runner = CliRunner()
    result = runner.invoke(app, ["--store", str(tmp_store.root), "verify"])
    assert result.exit_code == 1
    assert "problem: store catalog: catalog.v1.json does not decode" in result.output
    list_threads(tmp_store)  # a listing writes it again
    assert verify_store(tmp_store).ok
    assert path.read_bytes() == good


def test_an_unreadable_thread_is_listed_with_its_problem_and_not_kept(tmp_store: Store) -> None:
    _fill(tmp_store)
    _check(tmp_store)
    log = tmp_store.thread("plain").path
    with open(log, "ab") as f:
        f.write(b"not a frame\n")  # a line that is no frame, after the last batch
    view = catalog_view(tmp_store)
    assert "plain" in view.problems
    listed = {t.thread_id: t for t in list_threads(tmp_store)}
    assert listed["plain"].problem and listed["plain"].kind == "?"
    rows = msgspec.json.decode(_catalog(tmp_store).read_bytes())["threads"]
    assert "plain" not in {r["thread_id"] for r in rows}
    with pytest.raises(Exception, match="plain"):
        store_stats(tmp_store)  # as before the catalog: a total needs every thread


def test_the_cli_listings_match_the_logs(tmp_store: Store) -> None:
    _fill(tmp_store)
    runner = CliRunner()
    out = []
    for _ in range(2):  # cold, then warm
        threads = runner.invoke(app, ["--store", str(tmp_store.root), "threads", "--json"])
        sessions = runner.invoke(app, ["--store", str(tmp_store.root), "sessions", "--agents"])
        assert threads.exit_code == 0 and sessions.exit_code == 0
        out.append((threads.output, sessions.output))
    assert out[0] == out[1]
    listed = [msgspec.json.decode(line)["thread_id"] for line in out[0][0].splitlines()]
    assert listed == [t.thread_id for t in _expected_threads(tmp_store)]
    assert [line.split()[1] for line in out[0][1].splitlines()] == [
        s.thread_id for s in _expected_sessions(tmp_store, True)
    ]


def _expected_previous(store: BaseStore, project: str, exclude: str) -> SessionInfo | None:
    found = [
        msgspec.structs.replace(s, messages=0, compactions=0)
        for s in _expected_sessions(store, include_agents=False)
        if s.project == project and s.thread_id != exclude
    ]
    return max(found, key=lambda s: (s.last_active_ms, s.thread_id), default=None)


def test_previous_session_reads_current_rows_and_never_writes(tmp_store: Store) -> None:
    """The session-start hook's pointer: current rows from the catalog, the other threads from
    their logs, and the catalog file left alone."""
    from continuity.agents.base.sessions import previous_session

    _fill(tmp_store)
    _session(tmp_store, "cc-s1b")  # the same project folder as cc-s1 ("/p/cc-s1")
    cases = [("/p/cc-s1", "cc-s1"), ("/p/cc-s1", "cc-s1b"), ("/p/cc-s2", "x"), ("/p/none", "x")]
    for project, exclude in cases:  # no catalog yet
        got = previous_session(tmp_store, project, exclude=exclude)
        assert got == _expected_previous(tmp_store, project, exclude)
    assert not _catalog(tmp_store).exists()
    list_threads(tmp_store)
    kept = _catalog(tmp_store).read_bytes()
    subprocess.run(
        [sys.executable, "-c", _APPENDER, str(tmp_store.root), "cc-s1", "cc-s1.agent-a1"],
        check=True,
    )
    for project, exclude in cases:  # some rows current, one behind its log
        got = previous_session(tmp_store, project, exclude=exclude)
        assert got == _expected_previous(tmp_store, project, exclude)
    assert _catalog(tmp_store).read_bytes() == kept


# --- a catalog that cannot lie (issue 26) ------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [("frames", 96), ("messages", 0), ("checkpoints", 0), ("project", "elsewhere"), ("title", "x")],
)
def test_an_edited_row_is_never_served(tmp_store: Store, field: str, value: object) -> None:
    """A row edited into other valid JSON (what a flipped digit does) fails its checksum: the
    listings are read from the log again, and say on stderr that the row was damaged."""
    _fill(tmp_store)
    _check(tmp_store)
    path = _catalog(tmp_store)
    doc = msgspec.json.decode(path.read_bytes())
    for row in doc["threads"]:
        row[field] = value  # each row, whether it had the field or not
    path.write_bytes(msgspec.json.encode(doc))
    out = subprocess.run(
        [sys.executable, "-m", "continuity", "--store", str(tmp_store.root), "stats"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "the store catalog" in out.stderr and "damaged row" in out.stderr
    assert "rebuilt from the log" in out.stderr
    _check(tmp_store)
    assert verify_store(tmp_store).ok  # and the file was written again, whole


@pytest.mark.slow
def test_a_small_log_cut_short_is_reported_until_accepted(tmp_store: Store) -> None:
    """A thread under the size that keeps per-thread caches has only the catalog to remember
    how far its log went: a log cut by its last line is a named problem for verify and for the
    listings (never a quietly shorter thread), until rebuild-index accepts the log as it is."""
    _fill(tmp_store)
    _check(tmp_store)
    log = tmp_store.thread("cc-s2").path
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(lines[:-1]))
    report = verify_store(tmp_store)
    assert [(p.where, p.thread_id) for p in report.problems] == [
        ("catalog row of thread cc-s2", "cc-s2")
    ]
    assert "committed frames are missing from the log" in report.problems[0].message
    view = catalog_view(tmp_store)
    assert set(view.problems) == {"cc-s2"}
    assert "the store catalog recorded" in str(view.problems["cc-s2"])
    assert "cc-s2" not in {r.thread_id for r in view.rows}
    assert catalog_view(tmp_store).problems.keys() == {"cc-s2"}  # kept until accepted
    runner = CliRunner()
    result = runner.invoke(app, ["--store", str(tmp_store.root), "verify"])
    assert result.exit_code == 1 and "cc-s2" in result.output
    for read in (["log", "cc-s2"], ["compile", "cc-s2", "--dry-run"]):  # never a shorter answer
        result = runner.invoke(app, ["--store", str(tmp_store.root), *read])
        assert result.exit_code == 1, (read, result.output)
        assert "the store catalog recorded" in result.output
    result = runner.invoke(app, ["--store", str(tmp_store.root), "log", "cc-s1"])
    assert result.exit_code == 0, result.output  # the other threads read as ever
    result = runner.invoke(app, ["--store", str(tmp_store.root), "rebuild-index"])
    assert result.exit_code == 0, result.output
    assert verify_store(tmp_store).ok
    _check(tmp_store)


def test_repair_drops_the_row_of_the_tail_it_moves(tmp_store: Store) -> None:
    """repair shortens a log on purpose: the catalog forgets how far it went."""
    from continuity.maintenance.verify import repair_thread

    _fill(tmp_store)
    _check(tmp_store)
    log = tmp_store.thread("cc-s2").path
    data = bytearray(log.read_bytes())
    data[-10] ^= 0x01  # a flipped digit of the last frame's digest
    log.write_bytes(bytes(data))
    assert repair_thread(tmp_store.thread("cc-s2")) is not None
    assert verify_store(tmp_store).ok
    _check(tmp_store)
