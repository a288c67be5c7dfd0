"""``continuity hook <event>``: the Claude Code hook contract, in-process and as real processes.

The contract (``../shared/design/claude-code.md``): a hook reads one JSON object on stdin, exits 0
whatever happens (2 only in the opt-in pre-compact block mode), reports an error as one line on
stderr and in ``<store>/errors.log``, and prints either nothing, plain text, or one complete JSON
object. Synthetic transcripts cover the logic; the real spotter fixture covers a real compaction.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from continuity import frames as fr
from continuity.agents.base import lines as lines_module
from continuity.agents.claude_code.hooks import main, run_hook
from continuity.agents.claude_code.ingest import ingest_transcript
from continuity.agents.table import CLAUDE_CODE
from continuity.store.jsonl import Store
from tests.support import transcripts
from tests.support.fixtures import shared_fixture
from tests.support.narrow import narrow

SESSION = "11111111-2222-4333-8444-555555555555"
CWD = "/work/demo"
RESTORE_LIMIT = 9_500
GUIDANCE_LIMIT = 2_000


# --- a synthetic Claude Code transcript ------------------------------------------------------


class Transcript(transcripts.Transcript):
    """The support writer with this module's session and project as defaults."""

    def __init__(self, path: Path, session: str = SESSION, cwd: str = CWD) -> None:
        super().__init__(path, session, cwd)


def work(t: Transcript, files: list[str], commands: list[str]) -> None:
    """A stretch of coding: a prompt, edits, commands, and a failing command."""
    t.prompt(f"Please fix the bug in {files[0]} and run the tests")
    for f in files:
        t.tool("Read", {"file_path": f}, "def f():\n    return 1\n")
        t.tool("Edit", {"file_path": f, "old_string": "1", "new_string": "2"}, "updated")
    for c in commands:
        t.tool("Bash", {"command": c}, "3 passed")
    t.tool("Bash", {"command": "make lint"}, "E501 line too long (120 > 100)", error=True)
    t.say("Fixed; the tests pass.")


@pytest.fixture
def transcript(tmp_path: Path) -> Transcript:
    return Transcript(tmp_path / "projects" / "-work-demo" / f"{SESSION}.jsonl")


def messages(store: Store, thread_id: str) -> list[fr.MessageAppended]:
    thread = store.thread(thread_id)
    if not thread.exists():
        return []
    return [f for f in thread.read(types=["message_appended"]) if isinstance(f, fr.MessageAppended)]


def context_of(stdout: str, event: str) -> str:
    """The additionalContext of the one JSON object a hook printed (checked strictly)."""
    assert stdout.startswith("{")
    doc = json.loads(stdout)  # the whole output is one JSON document
    assert isinstance(doc, dict)
    assert set(doc) == {"hookSpecificOutput"}
    out = doc["hookSpecificOutput"]
    assert out["hookEventName"] == event
    text = out["additionalContext"]
    assert isinstance(text, str)
    return text


def configure(store: Store, **settings: object) -> None:
    (store.root / "claude-code.json").write_text(json.dumps(settings))


# --- in process: run_hook -------------------------------------------------------------------


def test_user_prompt_submit_ingests_only_what_is_new_and_prints_nothing(
    tmp_store: Store, transcript: Transcript
) -> None:
    work(transcript, ["/work/demo/app.py"], ["pytest -q"])
    transcript.flush()
    out = run_hook(tmp_store, "user-prompt-submit", transcript.payload("UserPromptSubmit"))
    assert (out.exit_code, out.stdout, out.stderr) == (0, "", "")
    first = messages(tmp_store, transcript.thread_id)
    assert first and first[0].role == "user"

    # Nothing new: nothing appended.
    run_hook(tmp_store, "user-prompt-submit", transcript.payload("UserPromptSubmit"))
    assert messages(tmp_store, transcript.thread_id) == first

    work(transcript, ["/work/demo/db.py"], ["pytest tests/test_db.py"])
    transcript.flush()
    out = run_hook(tmp_store, "user-prompt-submit", transcript.payload("UserPromptSubmit"))
    assert out.stdout == ""
    grown = messages(tmp_store, transcript.thread_id)
    assert len(grown) > len(first)
    assert grown[: len(first)] == first
    keys = [m.source.key for m in grown if m.source is not None]
    assert len(keys) == len(set(keys)) == len(grown)
    assert any("/work/demo/db.py" in repr(m.content) for m in grown)


def test_pre_compact_archives_everything_and_prints_guidance(
    tmp_store: Store, transcript: Transcript
) -> None:
    files = [f"/work/demo/pkg/module_{i}.py" for i in range(3)]
    work(transcript, files, ["pytest -q", "ruff check ."])
    transcript.flush()
    run_hook(tmp_store, "user-prompt-submit", transcript.payload("UserPromptSubmit"))
    held = len(messages(tmp_store, transcript.thread_id))

    out = run_hook(tmp_store, "pre-compact", transcript.payload("PreCompact", trigger="auto"))
    assert out.exit_code == 0 and out.stderr == ""
    # final: the assistant's last reply, held back until now, is archived
    archived = messages(tmp_store, transcript.thread_id)
    assert len(archived) == held + 1
    assert archived[-1].role == "assistant"
    assert 0 < len(out.stdout) <= GUIDANCE_LIMIT
    assert not out.stdout.startswith("{")  # PreCompact takes no JSON context
    # the files changed first, under their common folder, then the commands with their outcome
    assert "## Files changed\n(paths under /work/demo/pkg/)\n" in out.stdout
    assert "- module_0.py, module_1.py, module_2.py\n" in out.stdout
    assert out.stdout.index("## Files changed") < out.stdout.index("## Commands run")
    assert "- `pytest -q` → ok (3 passed)\n" in out.stdout
    assert "- `make lint` → failed: E501 line too long (120 > 100)" in out.stdout


def test_final_hooks_ingest_the_flat_agent_files_of_their_session(
    tmp_store: Store, transcript: Transcript
) -> None:
    """Claude Code 2.0.x writes subagents as flat ``agent-<id>.jsonl`` files beside the
    session's: pre-compact and session-end ingest those of this session (by the ``sessionId``
    in their lines), as bulk ingest does, and leave other sessions' files alone."""

    project = transcript.path.parent
    other_session = "99999999-2222-4333-8444-555555555555"
    agents: dict[str, Transcript] = {}
    for agent_id, session in (("a1", SESSION), ("b2", SESSION), ("c3", other_session)):
        agent = Transcript(project / f"agent-{agent_id}.jsonl", session=session)
        agent.tool("Edit", {"file_path": f"/work/demo/{agent_id}.py"}, "updated")
        for line in agent.pending:
            line.update(isSidechain=True, agentId=agent_id)
        agent.flush()
        agents[agent_id] = agent
    work(transcript, ["/work/demo/app.py"], ["pytest -q"])
    transcript.flush()
    mine = [CLAUDE_CODE.subagent_thread_id(SESSION, a) for a in ("a1", "b2")]
    theirs = CLAUDE_CODE.subagent_thread_id(other_session, "c3")

    run_hook(tmp_store, "user-prompt-submit", transcript.payload("UserPromptSubmit"))
    assert not any(tmp_store.thread(t).exists() for t in [*mine, theirs])  # not on every prompt
    run_hook(tmp_store, "pre-compact", transcript.payload("PreCompact", trigger="auto"))
    for tid in mine:
        created = next(iter(tmp_store.thread(tid).read()))
        assert isinstance(created, fr.ThreadCreated)
        assert created.parent_thread_id == transcript.thread_id
        assert len(messages(tmp_store, tid)) == 2  # the response and its tool result
    assert not tmp_store.thread(theirs).exists()

    # what a subagent adds later is archived by the next final hook, once
    agents["a1"].tool("Bash", {"command": "make"}, "ok")
    for line in agents["a1"].pending:
        line.update(isSidechain=True, agentId="a1")
    agents["a1"].flush()
    run_hook(tmp_store, "session-end", transcript.payload("SessionEnd", reason="exit"))
    run_hook(tmp_store, "session-end", transcript.payload("SessionEnd", reason="exit"))
    assert len(messages(tmp_store, mine[0])) == 4
    assert not tmp_store.thread(theirs).exists()


def test_pre_compact_guidance_stays_within_its_limit(
    tmp_store: Store, transcript: Transcript
) -> None:
    for i in range(40):
        work(transcript, [f"/work/demo/{'deep/' * 12}file_{i:03d}.py"], [f"pytest -k case_{i}"])
    transcript.flush()
    out = run_hook(tmp_store, "pre-compact", transcript.payload("PreCompact", trigger="auto"))
    assert out.exit_code == 0
    assert 0 < len(out.stdout) <= GUIDANCE_LIMIT
    assert "file_039.py" in out.stdout  # the newest detail is the one kept


def test_a_manual_compaction_gets_no_guidance_shown_as_its_output(
    tmp_store: Store, transcript: Transcript
) -> None:
    """Claude Code shows a PreCompact hook's output as /compact's output (and keeps it in the
    new context): on a manual compaction the hook prints nothing, and the restore is still
    due."""
    work(transcript, ["/work/demo/app.py"], ["pytest -q"])
    transcript.flush()
    out = run_hook(tmp_store, "pre-compact", transcript.payload("PreCompact", trigger="manual"))
    assert (out.exit_code, out.stdout) == (0, "")
    transcript.compaction("The user fixed app.py.")
    transcript.flush()
    restored = run_hook(tmp_store, "user-prompt-submit", transcript.payload("UserPromptSubmit"))
    assert "`pytest -q`" in context_of(restored.stdout, "UserPromptSubmit")


def test_pre_compact_block_mode_exits_2_after_archiving(
    tmp_store: Store, transcript: Transcript
) -> None:
    configure(tmp_store, block_compaction=True)
    work(transcript, ["/work/demo/app.py"], ["pytest -q"])
    transcript.flush()
    out = run_hook(tmp_store, "pre-compact", transcript.payload("PreCompact", trigger="manual"))
    assert out.exit_code == 2
    assert "block" in out.stderr
    assert messages(tmp_store, transcript.thread_id)[-1].role == "assistant"
    # The compaction was blocked: the next prompt has nothing to restore.
    transcript.prompt("carry on")
    transcript.flush()
    nxt = run_hook(tmp_store, "user-prompt-submit", transcript.payload("UserPromptSubmit"))
    assert nxt.stdout == ""


def compacted(tmp_store: Store, transcript: Transcript) -> str:
    """A session with work, pre-compact, then Claude's compaction written to the transcript."""
    work(
        transcript, ["/work/demo/app.py", "/work/demo/models.py"], ["pytest -q", "mypy --strict ."]
    )
    transcript.flush()
    run_hook(tmp_store, "user-prompt-submit", transcript.payload("UserPromptSubmit"))
    run_hook(tmp_store, "pre-compact", transcript.payload("PreCompact", trigger="auto"))
    transcript.compaction("The user asked to fix a bug in app.py.")
    transcript.flush()
    return transcript.thread_id


def test_first_prompt_after_a_compaction_without_session_start_gets_the_context_once(
    tmp_store: Store, transcript: Transcript
) -> None:
    tid = compacted(tmp_store, transcript)
    out = run_hook(tmp_store, "user-prompt-submit", transcript.payload("UserPromptSubmit"))
    assert out.exit_code == 0
    text = context_of(out.stdout, "UserPromptSubmit")
    assert len(text) <= RESTORE_LIMIT
    for needle in (
        "(paths under /work/demo/)",
        "- app.py, models.py\n",
        "`pytest -q`",
        "`mypy --strict .`",
    ):
        assert needle in text
    assert "E501 line too long" in text  # the error message itself
    assert tid in text

    transcript.prompt("thanks, now the docs")
    transcript.flush()
    again = run_hook(tmp_store, "user-prompt-submit", transcript.payload("UserPromptSubmit"))
    assert again.stdout == ""


def test_restore_on_prompt_can_be_turned_off(tmp_store: Store, transcript: Transcript) -> None:
    configure(tmp_store, restore_on_prompt=False)
    compacted(tmp_store, transcript)
    out = run_hook(tmp_store, "user-prompt-submit", transcript.payload("UserPromptSubmit"))
    assert (out.exit_code, out.stdout) == (0, "")


def test_session_start_compact_restores_and_the_prompt_fallback_stands_down(
    tmp_store: Store, transcript: Transcript
) -> None:
    tid = compacted(tmp_store, transcript)
    out = run_hook(tmp_store, "session-start", transcript.payload("SessionStart", source="compact"))
    assert out.exit_code == 0
    text = context_of(out.stdout, "SessionStart")
    assert "(paths under /work/demo/)\n- app.py, models.py\n" in text
    assert "- `mypy --strict .` → ok (3 passed)\n" in text
    decisions = tmp_store.thread(tid).tail(1, types=["context_selection_decided"])
    assert decisions, "the restore's selection is logged"
    cps = tmp_store.thread(tid).tail(1, types=["compaction_checkpoint_created"])
    assert isinstance(cps[0], fr.CompactionCheckpointCreated)
    assert isinstance(decisions[0], fr.ContextSelectionDecided)
    assert decisions[0].anchor_seq == cps[0].to_seq

    nxt = run_hook(tmp_store, "user-prompt-submit", transcript.payload("UserPromptSubmit"))
    assert nxt.stdout == ""


def test_resume_restores_only_a_session_that_compacted(
    tmp_store: Store, transcript: Transcript
) -> None:
    # Never compacted: Claude Code loads the whole transcript on resume; a restore would repeat it.
    work(transcript, ["/work/demo/app.py"], ["pytest -q"])
    transcript.flush()
    run_hook(tmp_store, "user-prompt-submit", transcript.payload("UserPromptSubmit"))
    out = run_hook(tmp_store, "session-start", transcript.payload("SessionStart", source="resume"))
    assert (out.exit_code, out.stdout) == (0, "")

    # Compacted: what the resumed context lacks is given back.
    transcript.prompt("go on")
    run_hook(tmp_store, "pre-compact", transcript.payload("PreCompact", trigger="auto"))
    transcript.compaction("The user asked to fix a bug in app.py.")
    transcript.flush()
    out = run_hook(tmp_store, "session-start", transcript.payload("SessionStart", source="resume"))
    assert "`pytest -q`" in context_of(out.stdout, "SessionStart")


def test_a_second_compaction_restores_its_own_stretch_before_it_is_in_the_transcript(
    tmp_store: Store, transcript: Transcript
) -> None:
    """Claude Code fires SessionStart (compact) before the new compaction's boundary is in the
    transcript (real-agents.md): the restore covers what PreCompact saw, not the stretch of the
    previous compaction, and the first prompt's fallback gives the same."""
    compacted(tmp_store, transcript)  # the first compaction: app.py, pytest
    run_hook(tmp_store, "session-start", transcript.payload("SessionStart", source="compact"))
    work(transcript, ["/work/demo/views.py"], ["ruff check ."])
    transcript.flush()
    run_hook(tmp_store, "pre-compact", transcript.payload("PreCompact", trigger="auto"))
    # the second compaction is not in the transcript yet
    out = run_hook(tmp_store, "session-start", transcript.payload("SessionStart", source="compact"))
    text = context_of(out.stdout, "SessionStart")
    assert "`ruff check .`" in text
    assert "views.py" in text
    assert "`pytest -q`" not in text  # the first compaction's stretch: restored after it

    # a third, whose restore waits for the first prompt (SessionStart gave nothing), when the
    # boundary is in the transcript
    transcript.compaction("The user fixed views.py.")
    work(transcript, ["/work/demo/urls.py"], ["make docs"])
    transcript.flush()
    run_hook(tmp_store, "pre-compact", transcript.payload("PreCompact", trigger="auto"))
    transcript.compaction("The user fixed urls.py.")
    transcript.flush()
    text = context_of(
        run_hook(tmp_store, "user-prompt-submit", transcript.payload("UserPromptSubmit")).stdout,
        "UserPromptSubmit",
    )
    assert "`make docs`" in text
    assert "`ruff check .`" not in text


def hook_context_line(transcript: Transcript, text: str) -> None:
    """The attachment line Claude Code writes for a hook's additional context."""
    transcript.pending.append(
        {
            "type": "attachment",
            "attachment": {
                "type": "hook_additional_context",
                "content": [text],
                "hookName": "SessionStart",
                "hookEvent": "SessionStart",
            },
        }
    )


def test_a_resume_adds_no_restore_when_the_loaded_context_has_one(
    tmp_store: Store, transcript: Transcript
) -> None:
    """Claude Code loads a compacted session from its last boundary on, with the restore given
    after it: a second one would put it into the context twice."""
    compacted(tmp_store, transcript)
    given = run_hook(
        tmp_store, "session-start", transcript.payload("SessionStart", source="compact")
    )
    hook_context_line(transcript, context_of(given.stdout, "SessionStart"))
    transcript.prompt("go on")
    transcript.flush()
    out = run_hook(tmp_store, "session-start", transcript.payload("SessionStart", source="resume"))
    assert (out.exit_code, out.stdout) == (0, "")

    # a restore before the last boundary is not loaded: the resume gives one
    run_hook(tmp_store, "pre-compact", transcript.payload("PreCompact", trigger="auto"))
    transcript.compaction("The user went on.")
    transcript.flush()
    out = run_hook(tmp_store, "session-start", transcript.payload("SessionStart", source="resume"))
    assert "Restored by continuity" in context_of(out.stdout, "SessionStart")


def test_a_session_that_ends_before_its_transcript_exists_is_no_error(
    tmp_store: Store, transcript: Transcript
) -> None:
    """`claude mcp list` starts a session to check the servers and ends it (SessionEnd) with
    no transcript written: nothing to archive, and nothing wrong."""
    never = transcript.payload("SessionEnd", reason="other")
    never["transcript_path"] = str(transcript.path.with_name("never-written.jsonl"))
    out = run_hook(tmp_store, "session-end", never)
    assert (out.exit_code, out.stdout, out.notes) == (0, "", [])
    assert messages(tmp_store, transcript.thread_id) == []


def test_the_first_prompt_before_the_transcript_exists_is_no_error(
    tmp_store: Store, tmp_path: Path
) -> None:
    # The real CLI submits a new session's first prompt before it writes the transcript.
    missing = Transcript(tmp_path / "later" / f"{SESSION}.jsonl")
    missing.path.unlink()
    out = run_hook(tmp_store, "user-prompt-submit", missing.payload("UserPromptSubmit"))
    assert (out.exit_code, out.stdout, out.stderr, out.notes) == (0, "", "", [])
    # Any other event still says the transcript is missing.
    with pytest.raises(FileNotFoundError):
        run_hook(tmp_store, "stop", missing.payload("Stop"))


def test_restored_context_stays_within_budget_on_a_long_session(
    tmp_store: Store, transcript: Transcript
) -> None:
    for i in range(60):
        work(
            transcript,
            [f"/work/demo/src/{'nested/' * 8}component_{i:03d}.py"],
            [
                f"pytest tests/test_component_{i:03d}.py -x --maxfail=1 "
                + "-k 'slow and not flaky' " * 6
            ],
        )
    transcript.flush()
    run_hook(tmp_store, "pre-compact", transcript.payload("PreCompact", trigger="auto"))
    transcript.compaction("Lots of components were fixed.")
    transcript.flush()
    out = run_hook(tmp_store, "session-start", transcript.payload("SessionStart", source="compact"))
    text = context_of(out.stdout, "SessionStart")
    assert 5_000 < len(text) <= RESTORE_LIMIT
    assert "component_059.py" in text  # the last file changed survives the budget

    configure(tmp_store, restore_max_chars=3_000)
    out = run_hook(tmp_store, "session-start", transcript.payload("SessionStart", source="compact"))
    assert len(context_of(out.stdout, "SessionStart")) <= 3_000


def test_startup_points_at_the_previous_session_of_the_same_project(
    tmp_store: Store, tmp_path: Path
) -> None:
    project = tmp_path / "projects" / "-work-demo"
    old = Transcript(
        project / "aaaaaaaa-0000-4000-8000-000000000001.jsonl",
        session="aaaaaaaa-0000-4000-8000-000000000001",
    )
    work(old, ["/work/demo/app.py"], ["pytest -q"])
    old.flush()
    run_hook(tmp_store, "session-end", old.payload("SessionEnd", reason="exit"))
    other = Transcript(
        tmp_path / "projects" / "-elsewhere" / "cccccccc-0000-4000-8000-000000000003.jsonl",
        session="cccccccc-0000-4000-8000-000000000003",
        cwd="/elsewhere",
    )
    work(other, ["/elsewhere/x.py"], ["make"])
    other.flush()
    run_hook(tmp_store, "stop", other.payload("Stop", stop_hook_active=False))

    # The new session's transcript is not written yet when SessionStart fires.
    new = project / "bbbbbbbb-0000-4000-8000-000000000002.jsonl"
    payload = {
        "session_id": "bbbbbbbb-0000-4000-8000-000000000002",
        "transcript_path": str(new),
        "cwd": CWD,
        "hook_event_name": "SessionStart",
        "source": "startup",
    }
    out = run_hook(tmp_store, "session-start", payload)
    text = context_of(out.stdout, "SessionStart")
    assert len(text) < 600
    assert old.thread_id in text
    assert other.thread_id not in text

    assert run_hook(tmp_store, "session-start", {**payload, "cwd": "/nowhere"}).stdout == ""
    configure(tmp_store, startup_pointer=False)
    assert run_hook(tmp_store, "session-start", payload).stdout == ""


def test_a_broken_config_file_does_not_stop_the_archive(
    tmp_store: Store, transcript: Transcript
) -> None:
    (tmp_store.root / "claude-code.json").write_text("{not json")
    work(transcript, ["/work/demo/app.py"], ["pytest -q"])
    transcript.flush()
    with pytest.raises(msgspec.DecodeError):
        run_hook(tmp_store, "user-prompt-submit", transcript.payload("UserPromptSubmit"))
    assert messages(tmp_store, transcript.thread_id)


# --- in process: main() ----------------------------------------------------------------------


@pytest.fixture
def hook_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    store = tmp_path / "hook-store"
    monkeypatch.setenv("CONTINUITY_HOME", str(store))
    monkeypatch.delenv("CONTINUITY_DEBUG", raising=False)
    return store


def call_main(monkeypatch: pytest.MonkeyPatch, argv: list[str], stdin: bytes) -> int:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    return main(argv)


@pytest.mark.parametrize(
    "argv",
    [[], ["UserPromptSubmit"], ["user-prompt-submit"]],
    ids=["from-hook_event_name", "camel-case-argument", "slug-argument"],
)
def test_the_event_comes_from_the_argument_or_the_input(
    argv: list[str],
    hook_env: Path,
    transcript: Transcript,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    work(transcript, ["/work/demo/app.py"], ["pytest -q"])
    transcript.flush()
    code = call_main(monkeypatch, argv, json.dumps(transcript.payload("UserPromptSubmit")).encode())
    captured = capsys.readouterr()
    assert (code, captured.out, captured.err) == (0, "", "")
    assert messages(Store(hook_env), transcript.thread_id)


def test_an_argument_that_is_no_event_falls_back_to_hook_event_name(
    hook_env: Path,
    transcript: Transcript,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    transcript.prompt("hello")
    transcript.flush()
    payload = transcript.payload("PreCompact", trigger="manual")
    assert call_main(monkeypatch, ["no-such-event"], json.dumps(payload).encode()) == 0
    assert capsys.readouterr().err == ""
    assert messages(Store(hook_env), transcript.thread_id)  # pre-compact ingested it (final)


def read_errors(store: Path) -> list[str]:
    log = store / "errors.log"
    return log.read_text().splitlines() if log.exists() else []


def test_main_reports_a_failure_in_one_line_and_exits_0(
    hook_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert call_main(monkeypatch, ["stop"], b"[]") == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and captured.err.startswith("continuity: ")
    assert len(read_errors(hook_env)) == 1 and "stop" in read_errors(hook_env)[0]


# --- real processes ----------------------------------------------------------------------------


def hook_process(
    store: Path,
    args: list[str],
    stdin: bytes,
    *,
    extra_env: dict[str, str] | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONTINUITY_", "CLAUDE_"))}
    env.update({"CONTINUITY_HOME": str(store), **(extra_env or {})})
    return subprocess.run(
        [sys.executable, "-m", "continuity", "hook", *args],
        input=stdin,
        capture_output=True,
        env=env,
        timeout=timeout,
        check=False,
    )


def spawn_hook(store: Path, args: list[str], stdin: Path) -> subprocess.Popen[bytes]:
    """A hook process started in the background (its input read from the file ``stdin``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONTINUITY_", "CLAUDE_"))}
    env["CONTINUITY_HOME"] = str(store)
    with open(stdin, "rb") as f:
        return subprocess.Popen(
            [sys.executable, "-m", "continuity", "hook", *args],
            stdin=f,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )


def assert_reported(proc: subprocess.CompletedProcess[bytes], store: Path, *needles: str) -> None:
    """The failure contract: exit 0, nothing on stdout, one line on stderr and in errors.log."""
    err = proc.stderr.decode()
    assert proc.returncode == 0, err
    assert proc.stdout == b""
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert err.startswith("continuity: ")
    logged = read_errors(store)
    assert len(logged) == 1, logged
    for needle in needles:
        assert needle.lower() in err.lower()
        assert needle.lower() in logged[0].lower()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "stdin", "needle"),
    [
        (["user-prompt-submit"], b"this is not json", "not JSON"),
        (["user-prompt-submit"], b"[1, 2, 3]", "not a JSON object"),
        (["user-prompt-submit"], b"", "transcript_path"),
        (["user-prompt-submit"], b'{"session_id": "x", "cwd": "/"}', "transcript_path"),
        (["stop"], b'{"transcript_path": "/no/such/dir/s.jsonl"}', "does not exist"),
        (["bogus-event"], b'{"transcript_path": "/tmp/x.jsonl"}', "bogus-event"),
        ([], b'{"hook_event_name": "Bogus", "transcript_path": "/tmp/x.jsonl"}', "no hook event"),
    ],
    ids=[
        "not-json",
        "json-array",
        "empty",
        "no-transcript-path",
        "missing-file",
        "unknown",
        "none",
    ],
)
def test_bad_input_is_reported_and_never_breaks_claude_code(
    tmp_path: Path, args: list[str], stdin: bytes, needle: str
) -> None:
    store = tmp_path / "fresh-store"  # not created yet: the hook creates it to log the error
    proc = hook_process(store, args, stdin)
    assert_reported(proc, store, needle)


@pytest.mark.slow
@pytest.mark.parametrize("args", [[], ["UserPromptSubmit"]], ids=["no-argument", "camel-case"])
def test_a_hook_process_takes_the_event_from_its_input(
    tmp_path: Path, transcript: Transcript, args: list[str]
) -> None:
    work(transcript, ["/work/demo/app.py"], ["pytest -q"])
    transcript.flush()
    store = tmp_path / "store"
    proc = hook_process(store, args, json.dumps(transcript.payload("UserPromptSubmit")).encode())
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")
    assert messages(Store(store), transcript.thread_id)
    assert not (store / "errors.log").exists()


def hook_modules(tmp_path: Path, payload: dict[str, Any]) -> set[str]:
    """The numpy, typer, rich, click and continuity modules a whole
    ``continuity hook user-prompt-submit`` process imported for ``payload`` (which must succeed
    quietly), with the store in ``tmp_path / "store"`` and no CONTINUITY_ or CLAUDE_ setting."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import json, runpy, sys\n"
        "sys.argv = ['continuity', 'hook', 'user-prompt-submit']\n"
        "try:\n"
        "    runpy.run_module('continuity', run_name='__main__')\n"
        "except SystemExit as exc:\n"
        "    code = exc.code\n"
        "mods = sorted(m for m in sys.modules if m.split('.')[0] in\n"
        "    ('numpy', 'typer', 'rich', 'click', 'continuity'))\n"
        "sys.stdout.write(json.dumps({'code': code, 'modules': mods}))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONTINUITY_", "CLAUDE_"))}
    env["CONTINUITY_HOME"] = str(tmp_path / "store")
    proc = subprocess.run(
        [sys.executable, str(probe)],
        input=json.dumps(payload).encode(),
        capture_output=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0 and proc.stderr == b"", proc.stderr
    report = json.loads(proc.stdout)
    assert report["code"] == 0
    return set(report["modules"])


@pytest.mark.slow
def test_the_hook_path_imports_nothing_heavy(tmp_path: Path, transcript: Transcript) -> None:
    work(transcript, ["/work/demo/app.py"], ["pytest -q"])
    transcript.flush()
    modules = hook_modules(tmp_path, transcript.payload("UserPromptSubmit"))
    assert "continuity.agents.claude_code.ingest" in modules  # the hook did its work
    assert not {"numpy", "typer", "rich", "click"} & modules, modules
    assert "continuity.context.compiler" not in modules
    assert not {m for m in modules if m.startswith("continuity.cli")}, modules


@pytest.mark.slow
def test_output_is_utf8_whatever_the_locale(tmp_path: Path, transcript: Transcript) -> None:
    store = tmp_path / "store"
    work(transcript, ["/work/demo/café.py"], ["echo 'naïve → ok' … done"])
    transcript.flush()
    pre = hook_process(
        store, ["pre-compact"], json.dumps(transcript.payload("PreCompact")).encode()
    )
    assert pre.returncode == 0 and pre.stderr == b""
    transcript.compaction("A café was fixed.")
    transcript.flush()
    payload = json.dumps(transcript.payload("SessionStart", source="compact")).encode()
    proc = hook_process(store, ["session-start"], payload, extra_env={"PYTHONIOENCODING": "ascii"})
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stderr == b""
    text = context_of(proc.stdout.decode("utf-8"), "SessionStart")
    assert "/work/demo/café.py" in text and "naïve → ok" in text


def boundary_index(lines: list[bytes]) -> int:
    for i, raw in enumerate(lines):
        obj = json.loads(raw)
        if obj.get("type") == "system" and obj.get("subtype") == "compact_boundary":
            return i
    raise AssertionError("the fixture has no compact boundary")


def tool_inputs(lines: list[bytes], names: set[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(tool name, input) of every tool call in raw transcript lines (independent of the reader)."""
    for raw in lines:
        obj = json.loads(raw)
        if obj.get("type") != "assistant" or obj.get("isSidechain"):
            continue
        for block in obj["message"]["content"]:
            if block.get("type") == "tool_use" and block.get("name") in names:
                yield block["name"], block["input"]


def last_unique(values: list[str], n: int) -> list[str]:
    out: list[str] = []
    for v in reversed(values):
        if v not in out:
            out.append(v)
        if len(out) == n:
            break
    return out


SPOTTER = "4d5611e5-241a-462a-8d15-5122611a9569"


@pytest.mark.slow
def test_a_real_compaction_through_the_hooks(tmp_path: Path) -> None:
    """The spotter session, fed to real hook processes as Claude Code would around its
    compaction: the restored context carries the files changed and the commands run before it."""
    src = shared_fixture("claude-code", "spotter", f"{SPOTTER}.jsonl")
    lines = src.read_bytes().splitlines(keepends=True)
    boundary = boundary_index(lines)
    project = tmp_path / "projects" / "-home-USER-projects-spotter-worktrees-spotter-dov"
    transcript = project / f"{SPOTTER}.jsonl"
    (project / SPOTTER / "subagents").mkdir(parents=True)
    for agent in sorted((src.with_suffix("") / "subagents").glob("agent-*.jsonl")):
        (project / SPOTTER / "subagents" / agent.name).write_bytes(agent.read_bytes())
    store = tmp_path / "store"
    tid = CLAUDE_CODE.thread_id(SPOTTER)

    def payload(event: str, **extra: str) -> bytes:
        return json.dumps(
            {
                "session_id": SPOTTER,
                "transcript_path": str(transcript),
                "cwd": "/home/USER/projects/spotter-worktrees/spotter-dov",
                "hook_event_name": event,
                **extra,
            }
        ).encode()

    written = 0

    def grow(upto: int) -> None:
        nonlocal written
        with open(transcript, "ab") as f:
            f.write(b"".join(lines[written:upto]))
        written = upto

    transcript.touch()
    for upto, event in (
        (boundary // 3, "user-prompt-submit"),
        (2 * boundary // 3, "post-tool-use"),
    ):
        grow(upto)
        proc = hook_process(store, [event], payload("X"))
        assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")

    grow(boundary)
    pre = hook_process(store, ["pre-compact"], payload("PreCompact", trigger="auto"))
    assert pre.returncode == 0 and pre.stderr == b""
    guidance = pre.stdout.decode()
    assert 0 < len(guidance) <= GUIDANCE_LIMIT
    before = lines[:boundary]
    edited = [
        i.get("file_path") or i.get("notebook_path") or ""
        for _, i in tool_inputs(before, {"Edit", "Write", "MultiEdit", "NotebookEdit"})
    ]
    assert edited[-1].rsplit("/", 1)[-1] in guidance  # files are named under their folder

    opened = Store(store)
    agents = [t for t in opened.threads() if t.startswith(f"{tid}.agent-")]
    assert agents, "pre-compact ingests the subagent transcripts too"

    grow(len(lines))
    start = hook_process(store, ["session-start"], payload("SessionStart", source="compact"))
    assert start.returncode == 0 and start.stderr == b""
    out = start.stdout.decode()
    assert out.endswith("\n") and out.count("\n") == 1  # one JSON document, nothing else
    context = context_of(out, "SessionStart")
    assert 1_000 < len(context) <= RESTORE_LIMIT

    for path in last_unique(edited, 3):
        assert path.rsplit("/", 1)[-1] in context, path
    commands = [i["command"] for _, i in tool_inputs(before, {"Bash"})]
    for cmd in last_unique(commands, 3):
        assert cmd.splitlines()[0][:60] in context, cmd
    later = [i["command"] for _, i in tool_inputs(lines[boundary:], {"Bash"})]
    only_after = [c for c in later if c not in commands and len(c) > 20]
    assert only_after, "the fixture runs new commands after its compaction"
    assert not any(c.splitlines()[0][:60] in context for c in only_after)

    thread = Store(store).thread(tid)
    cps = [f for f in thread.read(types=["compaction_checkpoint_created"])]
    decisions = [f for f in thread.read(types=["context_selection_decided"])]
    assert len(cps) == 1 and len(decisions) == 1
    assert isinstance(cps[0], fr.CompactionCheckpointCreated)
    assert isinstance(decisions[0], fr.ContextSelectionDecided)
    assert decisions[0].anchor_seq == cps[0].to_seq

    # SessionStart delivered the context: the next prompt does not repeat it.
    nxt = hook_process(store, ["user-prompt-submit"], payload("UserPromptSubmit"))
    assert (nxt.returncode, nxt.stdout, nxt.stderr) == (0, b"", b"")


def comparable(store: Store, thread_id: str) -> list[dict[str, Any]]:
    """A thread's frames without what depends on how appends were batched."""
    out = []
    for _seq, line in store.thread(thread_id).read_lines():
        obj = json.loads(line)
        for volatile in ("more", "digest", "prev"):
            obj.pop(volatile, None)
        out.append(obj)
    return out


@pytest.mark.slow
def test_parallel_hooks_on_a_growing_transcript_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    session = "fa812bfe-b295-4cca-9c2f-fdf01028cb46"
    src = shared_fixture("claude-code", "spotter", f"{session}.jsonl")
    data = src.read_bytes()
    transcript = tmp_path / "projects" / "p" / f"{session}.jsonl"
    transcript.parent.mkdir(parents=True)
    transcript.touch()
    store = tmp_path / "store"
    Store(store, create=True)
    payload = json.dumps(
        {"session_id": session, "transcript_path": str(transcript), "cwd": "/"}
    ).encode()
    payload_file = tmp_path / "payload.json"
    payload_file.write_bytes(payload)

    # Cut points: line ends and a few mid-line cuts (a half-written line), then the whole file.
    ends = [i + 1 for i, b in enumerate(data) if b == 0x0A]
    cuts = [ends[len(ends) * k // 5] for k in range(1, 5)]
    cuts = sorted({*cuts, ends[len(ends) // 3] - 17, ends[len(ends) // 2] - 1, len(data)})
    written = 0

    def grow(upto: int) -> None:
        nonlocal written
        with open(transcript, "ab") as f:
            f.write(data[written:upto])
        written = upto

    for i, cut in enumerate(cuts):
        grow((written + cut) // 2)
        procs = [spawn_hook(store, ["user-prompt-submit"], payload_file) for _ in range(4)]
        procs.append(spawn_hook(store, ["post-tool-use"], payload_file))
        grow(cut)  # the file grows while the hooks read it
        for proc in procs:
            stdout, stderr = proc.communicate(timeout=60)
            assert proc.returncode == 0, (i, stderr.decode())
            assert stderr == b"", stderr.decode()
            assert stdout == b""
    end = hook_process(store, ["session-end"], payload)
    assert (end.returncode, end.stderr) == (0, b"")

    reference = Store(tmp_path / "reference", create=True)
    ingest_transcript(reference, transcript, final=True)
    tid = CLAUDE_CODE.thread_id(session)
    archived = Store(store)
    assert archived.threads() == reference.threads()
    got, want = comparable(archived, tid), comparable(reference, tid)
    assert len(got) == len(want)
    assert got == want
    keys = [f["source"]["key"] for f in got if f["type"] == "message_appended"]
    assert len(keys) == len(set(keys))
    assert any(f["type"] == "compaction_checkpoint_created" for f in got)


# --- long lines (ADR 0016) and oversize messages (ADR 0017) ----------------------------------


def test_a_line_over_the_cap_is_skipped_with_one_note_and_the_hook_succeeds(
    hook_env: Path,
    transcript: Transcript,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(lines_module, "MAX_LINE_BYTES", 4096)
    transcript.prompt("before the paste")
    transcript.prompt("P" * 10_000)
    transcript.prompt("after the paste")
    transcript.flush()
    payload = json.dumps(transcript.payload("UserPromptSubmit")).encode()
    assert call_main(monkeypatch, ["user-prompt-submit"], payload) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1, captured.err
    assert captured.err.startswith(f"continuity: {transcript.path}: a line over 4096 bytes")
    assert "not archived" in captured.err
    (logged,) = read_errors(hook_env)
    assert "hook user-prompt-submit" in logged and "a line over 4096 bytes" in logged
    texts = [
        narrow(fr.TextBlock, b).text
        for m in messages(Store(hook_env), transcript.thread_id)
        for b in m.content
    ]
    assert texts == ["before the paste", "after the paste"]
    # The cursor moved past it: the next hook neither meets it again nor says it again.
    transcript.prompt("and one more")
    transcript.flush()
    assert call_main(monkeypatch, ["user-prompt-submit"], payload) == 0
    assert capsys.readouterr() == ("", "")
    assert len(read_errors(hook_env)) == 1


def test_an_unfinished_long_line_waits_quietly_until_it_is_complete(
    tmp_store: Store, transcript: Transcript
) -> None:
    transcript.prompt("before the paste")
    transcript.flush()
    transcript.prompt("Q" * 300_000)
    transcript.pending.pop()  # its progress line
    whole = json.dumps(transcript.pending.pop()).encode() + b"\n"
    with open(transcript.path, "ab") as f:
        f.write(whole[: len(whole) // 2])
    for _ in range(2):  # every hook meets it, none archives or reports anything
        out = run_hook(tmp_store, "user-prompt-submit", transcript.payload("UserPromptSubmit"))
        assert (out.exit_code, out.stdout, out.stderr, out.notes) == (0, "", "", [])
        assert [m.content for m in messages(tmp_store, transcript.thread_id)] == [
            [fr.TextBlock(text="before the paste")]
        ]
    with open(transcript.path, "ab") as f:
        f.write(whole[len(whole) // 2 :])
    out = run_hook(tmp_store, "user-prompt-submit", transcript.payload("UserPromptSubmit"))
    assert (out.exit_code, out.notes) == (0, [])
    last = messages(tmp_store, transcript.thread_id)[-1]
    assert last.content == [fr.TextBlock(text="Q" * 300_000)]


def test_a_restore_elides_a_message_too_large_for_the_budget(
    tmp_store: Store, transcript: Transcript
) -> None:
    work(transcript, ["/work/demo/app.py"], ["pytest -q"])
    transcript.prompt("here is the whole log:\n" + "log line\n" * 60_000)  # ~135k tokens
    transcript.say("Read it; the failure is at line 12.")
    transcript.flush()
    run_hook(tmp_store, "pre-compact", transcript.payload("PreCompact", trigger="auto"))
    transcript.compaction("The user pasted a log.")
    transcript.flush()
    out = run_hook(tmp_store, "session-start", transcript.payload("SessionStart", source="compact"))
    text = context_of(out.stdout, "SessionStart")
    assert len(text) <= RESTORE_LIMIT
    assert "[text elided: 540023 bytes, ~135006 tokens" in text
    assert "the failure is at line 12" in text  # the turns after it are still there
    (decision,) = tmp_store.thread(transcript.thread_id).tail(
        1, types=["context_selection_decided"]
    )
    assert isinstance(decision, fr.ContextSelectionDecided)
    assert decision.limits.budget_tokens == 100_000 and decision.tokens <= 100_000
    assert any(r.startswith("elided: message seq") for r in decision.reasons)
    bundle = tmp_store.artifacts.get(decision.bundle_artifact_id)
    assert len(bundle) < 20_000  # not the 540 kB message


@pytest.mark.slow
def test_a_hook_process_skips_a_line_over_64_mib(tmp_path: Path, transcript: Transcript) -> None:
    transcript.prompt("before the paste")
    transcript.flush()
    transcript.prompt("")
    transcript.pending.pop()  # its progress line
    head, tail = json.dumps(transcript.pending.pop()).encode().split(b'"content": ""')
    with open(transcript.path, "ab") as f:  # written in pieces: the test never holds it
        f.write(head + b'"content": "')
        piece = b"x" * (1 << 20)
        for _ in range(65):
            f.write(piece)
        f.write(b'"' + tail + b"\n")
    transcript.prompt("after the paste")
    transcript.flush()
    store = tmp_path / "store"
    proc = hook_process(
        store, ["user-prompt-submit"], json.dumps(transcript.payload("UserPromptSubmit")).encode()
    )
    assert (proc.returncode, proc.stdout) == (0, b"")
    err = proc.stderr.decode()
    assert err.count("\n") == 1 and "a line over 64 MiB skipped, not archived" in err
    assert len(read_errors(store)) == 1
    texts = [
        narrow(fr.TextBlock, b).text
        for m in messages(Store(store), transcript.thread_id)
        for b in m.content
    ]
    assert texts == ["before the paste", "after the paste"]
