"""The Claude Code commands of the CLI: ``ingest`` (and what it skips, and an interrupted one),
``sessions``, ``compile`` after an ingest, and ``hook`` with ``--store`` anywhere.

Counts printed by the commands are checked against the store itself, so the tests hold for any
fixture set the ``../shared/fixtures`` folder carries.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from continuity import frames as fr
from continuity.cli.app import app
from continuity.store.jsonl import Store
from tests.support.fixtures import shared_fixture

INGESTED = re.compile(
    r"^ingested (\d+) transcripts? into (\d+) threads?: (\d+) new messages?, "
    r"(\d+) compactions?, (\d+) already archived, (\d+) unreadable lines skipped$"
)
SESSION_LINE = re.compile(
    r"^(?P<agent>claude-code|codex|gemini|opencode) +(?P<thread>\S+) +"
    r"(?P<project>\S+)(?: \((?P<branch>[^)]*)\))?  started (?P<started>.+?)  "
    r"(?P<messages>\d+) messages?, (?P<compactions>\d+) compactions?(?:  “(?P<title>.*)”)?$"
)


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for name in ("CONTINUITY_HOME", "XDG_DATA_HOME", "CLAUDE_PROJECT_DIR"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    Store(path, create=True)
    return path


@pytest.fixture
def spotter() -> Path:
    return shared_fixture("claude-code", "spotter")


def run(store: Path, *args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(app, ["--store", str(store), *args], input=input)


def ingested(result: Result) -> dict[str, int]:
    assert result.exit_code == 0, result.output
    match = INGESTED.match(result.stdout.strip())
    assert match, result.stdout
    names = ("transcripts", "threads", "messages", "compactions", "archived", "bad")
    return dict(zip(names, map(int, match.groups()), strict=True))


def threads_bytes(store: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((store / "threads").glob("*.jsonl"))}


def message_counts(store: Path) -> dict[str, int]:
    s = Store(store)
    return {
        tid: sum(1 for _ in s.thread(tid).read(types=["message_appended"])) for tid in s.threads()
    }


def claude_checkpoints(store: Path) -> int:
    s = Store(store)
    return sum(
        1
        for tid in s.threads()
        for f in s.thread(tid).read(types=["compaction_checkpoint_created"])
        if isinstance(f, fr.CompactionCheckpointCreated) and f.produced_by == "claude-code"
    )


@pytest.mark.slow
def test_ingest_reports_counts_and_is_idempotent(store: Path, spotter: Path) -> None:
    files = sorted(spotter.rglob("*.jsonl"))
    first = ingested(run(store, "ingest", str(spotter)))
    assert first["transcripts"] == len(files)
    counts = message_counts(store)
    assert first["messages"] == sum(counts.values()) > 0
    assert first["threads"] == len(counts)
    assert first["compactions"] == claude_checkpoints(store) >= 1
    before = threads_bytes(store)

    second = ingested(run(store, "ingest", str(spotter)))
    assert second["transcripts"] == len(files)
    assert (second["messages"], second["compactions"]) == (0, 0)
    assert threads_bytes(store) == before

    # With the cursors gone every line is read again, and recognised.
    shutil.rmtree(store / "cache")
    third = ingested(run(store, "ingest", str(spotter)))
    assert (third["messages"], third["compactions"]) == (0, 0)
    assert third["archived"] > 0
    assert threads_bytes(store) == before


def test_ingest_of_one_file(store: Path, spotter: Path) -> None:
    report = ingested(run(store, "ingest", str(spotter / "short.jsonl")))
    assert report["transcripts"] == 1 and report["threads"] == 1
    assert message_counts(store) == {"cc-short": report["messages"]}


def test_ingest_of_a_missing_path_fails_and_writes_nothing(store: Path, spotter: Path) -> None:
    missing = store.parent / "no-such-folder"
    result = run(store, "ingest", str(spotter / "short.jsonl"), str(missing))
    assert result.exit_code == 1
    assert result.stdout == ""
    assert str(missing) in result.stderr and result.stderr.count("\n") == 1
    assert threads_bytes(store) == {}


def test_ingest_of_a_folder_without_transcripts_fails(store: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    result = run(store, "ingest", str(empty))
    assert result.exit_code == 1
    assert "no transcripts" in result.stderr


def test_ingest_creates_a_missing_store(tmp_path: Path, spotter: Path) -> None:
    result = run(tmp_path / "new", "ingest", str(spotter / "short.jsonl"))
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "new" / "store.json").is_file()
    assert Store(tmp_path / "new").threads()


def test_ingest_of_a_missing_path_creates_no_store(tmp_path: Path) -> None:
    result = run(tmp_path / "new", "ingest", str(tmp_path / "absent.jsonl"))
    assert result.exit_code == 1
    assert not (tmp_path / "new").exists()


def sessions(store: Path, *args: str) -> dict[str, dict[str, str]]:
    result = run(store, "sessions", *args)
    assert result.exit_code == 0, result.output
    found = {}
    for line in result.stdout.splitlines():
        match = SESSION_LINE.match(line)
        assert match, line
        found[match["thread"]] = match.groupdict()
    return found


@pytest.mark.slow
def test_sessions_lists_what_was_ingested(store: Path, spotter: Path) -> None:
    assert run(store, "sessions").stdout.strip() == "no sessions archived yet"
    ingested(run(store, "ingest", str(spotter)))
    counts = message_counts(store)
    listed = sessions(store)
    mains = {tid for tid in counts if ".agent-" not in tid}
    assert set(listed) == mains
    s = Store(store)
    for tid, row in listed.items():
        assert int(row["messages"]) == counts[tid]
        created = next(iter(s.thread(tid).read(to_seq=0)))
        assert isinstance(created, fr.ThreadCreated)
        assert row["project"] == created.meta["project"]
        assert (row["branch"] or "") == created.meta.get("git_branch", "")
    compacted = [tid for tid, row in listed.items() if int(row["compactions"]) > 0]
    assert len(compacted) == claude_checkpoints(store)

    with_agents = sessions(store, "--agents")
    assert set(with_agents) == set(counts)
    agents = set(with_agents) - mains
    assert agents and all(".agent-" in tid for tid in agents)
    for tid in agents:
        assert int(with_agents[tid]["messages"]) == counts[tid]


def test_compile_after_ingest(store: Path, spotter: Path) -> None:
    session = "cc-4d5611e5-241a-462a-8d15-5122611a9569"
    ingested(run(store, "ingest", str(spotter / "4d5611e5-241a-462a-8d15-5122611a9569.jsonl")))
    result = run(store, "compile", session, "--format", "text")
    assert result.exit_code == 0, result.output
    assert session in result.stdout
    # compile builds on Claude's own compaction: its summary is the context's start
    assert "This session is being continued from a previous conversation" in result.stdout
    decisions = list(Store(store).thread(session).read(types=["context_selection_decided"]))
    assert len(decisions) == 1


def test_hook_through_the_cli_uses_the_store_option(
    store: Path, spotter: Path, tmp_path: Path
) -> None:
    transcript = tmp_path / "short.jsonl"
    transcript.write_bytes((spotter / "short.jsonl").read_bytes())
    payload = json.dumps({"transcript_path": str(transcript), "hook_event_name": "Stop"})
    result = run(store, "hook", "stop", input=payload)
    assert result.exit_code == 0
    assert (result.stdout, result.stderr) == ("", "")
    assert message_counts(store).get("cc-short", 0) > 0

    result = run(store, "hook", "stop", input="not json")
    assert result.exit_code == 0
    assert result.stdout == "" and result.stderr.startswith("continuity: ")
    assert len((store / "errors.log").read_text().splitlines()) == 1


@pytest.mark.slow
def test_subagent_threads_are_linked_to_their_session(store: Path, spotter: Path) -> None:
    from continuity.agents.base.sessions import list_sessions

    ingested(run(store, "ingest", str(spotter)))
    agents = [
        s for s in list_sessions(Store(store), include_agents=True) if ".agent-" in s.thread_id
    ]
    assert agents
    for info in agents:
        assert info.parent_thread_id == info.thread_id.split(".agent-")[0]


# --- ingest under misuse --------------------------------------------------------------------


def test_ingest_of_a_file_that_is_not_a_transcript_fails(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# A project\n\nSome words.\n" * 20)
    result = run(tmp_path / "new", "ingest", str(readme))
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert result.stderr == (
        f"error: {readme}: not a session file of any agent continuity reads "
        "(tried Claude Code, Codex, Gemini CLI, opencode); nothing was ingested\n"
    )
    assert not (tmp_path / "new").exists()  # nothing was given, so no store was made


def test_ingest_of_json_lines_that_are_not_a_transcript_fails(store: Path, tmp_path: Path) -> None:
    other = tmp_path / "metrics.jsonl"
    other.write_text('{"cpu": 0.5}\n{"cpu": 0.7}\n')
    notes = tmp_path / "notes.txt"
    notes.write_text("plain text\n")
    result = run(store, "ingest", str(other), str(notes))
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == (
        "error: 2 paths: not a session file of any agent continuity reads "
        "(tried Claude Code, Codex, Gemini CLI, opencode); nothing was ingested\n"
    )
    assert threads_bytes(store) == {}
    # with --agent, that agent's reader says it
    result = run(store, "ingest", "--agent", "claude-code", str(other), str(notes))
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert lines[:2] == [
        f"skipped {other}: not a Claude Code transcript",
        f"skipped {notes}: not a Claude Code transcript",
    ]
    assert lines[2] == "error: no Claude Code transcript among the 2 files; nothing was ingested"


def test_ingest_skips_and_names_what_is_not_a_transcript(
    store: Path, spotter: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "projects"
    folder.mkdir()
    shutil.copy(spotter / "short.jsonl", folder / "short.jsonl")
    (folder / "notes.jsonl").write_text("# not a transcript\n")
    (folder / "empty.jsonl").write_bytes(b"")  # a session that has not begun: a transcript
    report = ingested(run(store, "ingest", str(folder)))
    assert report["transcripts"] == 2 and report["threads"] == 1
    result = run(store, "ingest", str(folder))
    assert result.stderr == f"skipped {folder / 'notes.jsonl'}: not a Claude Code transcript\n"


def test_a_long_first_line_is_judged_by_its_start(store: Path, tmp_path: Path) -> None:
    transcript = tmp_path / "s.jsonl"
    line = {
        "type": "user",
        "uuid": "00000000-0000-4000-8000-000000000001",
        "sessionId": "s",
        "timestamp": "2026-01-05T09:00:00Z",
        "cwd": "/work",
        "message": {"role": "user", "content": "x" * 200_000},  # a pasted file
    }
    transcript.write_text(json.dumps(line) + "\n")
    assert ingested(run(store, "ingest", str(transcript)))["messages"] == 1


def test_ingest_of_a_folder_goes_past_a_file_name_that_is_not_utf8(
    store: Path, spotter: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "projects"
    folder.mkdir()
    shutil.copy(spotter / "short.jsonl", folder / "short.jsonl")
    odd = os.path.join(os.fsencode(folder), b"caf\xe9.jsonl")
    shutil.copy(os.fsencode(spotter / "tool_heavy.jsonl"), odd)
    result = run(store, "ingest", str(folder))
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert message_counts(store).get("cc-short", 0) > 0  # the others were ingested
    assert INGESTED.match(result.stdout.strip())
    assert result.stderr.splitlines() == [
        f"error: not archived (1 file): {folder}/caf\\xe9.jsonl (its name is not UTF-8; "
        "rename it to ingest it)"
    ]


def test_a_fifo_in_a_folder_does_not_hang_ingest(
    store: Path, spotter: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "projects"
    folder.mkdir()
    shutil.copy(spotter / "short.jsonl", folder / "short.jsonl")
    os.mkfifo(folder / "pipe.jsonl")
    result = run(store, "ingest", str(folder))
    assert result.exit_code == 0, result.output
    assert result.stderr == f"skipped {folder / 'pipe.jsonl'}: not a regular file\n"


@pytest.mark.slow
def test_an_interrupted_ingest_says_where_it_stopped_and_resumes(
    store: Path, spotter: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import continuity.agents.claude_code.ingest as ingest_module

    whole = tmp_path / "whole"
    Store(whole, create=True)
    ingested(run(whole, "ingest", str(spotter)))

    real = ingest_module.ingest_transcript
    calls: list[Path] = []

    def interrupted(store_: Store, path: Path, **kwargs: bool) -> object:
        calls.append(path)
        if len(calls) == 3:
            raise KeyboardInterrupt  # Ctrl-C while the third file is read
        return real(store_, path, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ingest_module, "ingest_transcript", interrupted)
    result = run(store, "ingest", str(spotter))
    assert result.exit_code == 130
    assert result.stdout == ""
    total = len(list(spotter.rglob("*.jsonl")))
    assert result.stderr == (
        f"interrupted while ingesting {calls[2]} (2 of {total} transcripts done); what was "
        "archived is kept: run the same command again to resume\n"
    )
    monkeypatch.setattr(ingest_module, "ingest_transcript", real)
    again = ingested(run(store, "ingest", str(spotter)))
    assert again["messages"] > 0
    assert message_counts(store) == message_counts(whole)  # nothing lost, nothing twice


# --- --store after the command, through the hook's fast path --------------------------------


def test_hook_takes_the_store_option_after_its_event(
    store: Path, spotter: Path, tmp_path: Path
) -> None:
    transcript = tmp_path / "short.jsonl"
    transcript.write_bytes((spotter / "short.jsonl").read_bytes())
    payload = json.dumps({"transcript_path": str(transcript), "hook_event_name": "Stop"})
    result = CliRunner().invoke(app, ["hook", "stop", "--store", str(store)], input=payload)
    assert (result.exit_code, result.stdout, result.stderr) == (0, "", "")
    assert message_counts(store).get("cc-short", 0) > 0


@pytest.mark.slow
@pytest.mark.parametrize("where", ["after", "before", "equals"])
def test_a_hook_process_takes_the_store_option_before_or_after(
    spotter: Path, tmp_path: Path, where: str
) -> None:
    transcript = tmp_path / "short.jsonl"
    transcript.write_bytes((spotter / "short.jsonl").read_bytes())
    payload = json.dumps({"transcript_path": str(transcript), "hook_event_name": "Stop"})
    store = tmp_path / "named"
    args = {
        "after": ["hook", "stop", "--store", str(store)],
        "before": ["--store", str(store), "hook", "stop"],
        "equals": ["hook", "--store=" + str(store), "stop"],
    }[where]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONTINUITY_", "CLAUDE_"))}
    env["HOME"] = str(tmp_path / "home")
    done = subprocess.run(
        [sys.executable, "-m", "continuity", *args],
        input=payload.encode(),
        capture_output=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert message_counts(store).get("cc-short", 0) > 0
    assert not (tmp_path / "home" / ".local").exists()  # not the default store
