"""The restore's own extraction and its packing by value (``continuity.agents.base._restore_*``):
files grouped by folder, commands deduplicated with counts and outcomes, the line that carries an
error and what fixed it, open tasks and decisions, and the budget on a huge session."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from continuity import frames as fr
from continuity.agents.base._restore_extract import extract
from continuity.agents.base._restore_pack import common_root, group_paths, pack, sections
from continuity.agents.base.restore import GUIDANCE_MAX_CHARS, RESTORE_MAX_CHARS
from continuity.agents.claude_code.hooks import run_hook
from continuity.context.summarize import ExtractiveSummarizer
from continuity.context.transcript_rules import error_line as error_line_of
from continuity.store.jsonl import Store
from tests.agents.claude_code.test_hooks import Transcript, context_of, work


class Session:
    """Messages as the ingest makes them: tool calls in assistant messages, results in user ones."""

    def __init__(self) -> None:
        self.messages: list[fr.MessageAppended] = []
        self.n = 0

    def prompt(self, text: str) -> None:
        self.messages.append(fr.message("user", text))

    def say(self, text: str) -> None:
        self.messages.append(fr.message("assistant", text))

    def tool(self, name: str, tool_input: dict[str, Any], output: str, error: bool = False) -> None:
        self.n += 1
        use = fr.ToolUseBlock(id=f"t{self.n}", name=name, input=tool_input)
        self.messages.append(fr.message("assistant", content=[use]))
        result = fr.ToolResultBlock(tool_use_id=f"t{self.n}", content=output, is_error=error)
        self.messages.append(fr.message("user", content=[result]))

    def run(self, command: str, output: str = "ok", error: bool = False) -> None:
        self.tool("Bash", {"command": command}, output, error)

    def edit(self, path: str) -> None:
        self.tool("Edit", {"file_path": path, "old_string": "a", "new_string": "b"}, "updated")

    def text(self, budget: int = RESTORE_MAX_CHARS, *, guidance: bool = False) -> str:
        """The packed sections, with a final newline (as when more follows)."""
        return pack(sections(extract(self.messages), guidance=guidance), budget) + "\n"


def test_files_are_grouped_by_folder_under_their_common_root() -> None:
    paths = [
        "/home/u/proj/src/pkg/a.py",
        "/home/u/proj/README.md",
        "/home/u/proj/src/pkg/b.py",
        "/home/u/proj/tests/test_a.py",
    ]
    root = common_root(paths)
    assert root == "/home/u/proj/"
    # a group takes the place of its newest file; a lone file keeps its path
    assert group_paths(paths, root) == ["README.md", "src/pkg/: a.py, b.py", "tests/test_a.py"]
    assert common_root(["/a.py", "/b/c.py"]) == ""
    assert common_root(["relative/a.py", "/b/c.py"]) == ""

    s = Session()
    for p in paths:
        s.edit(p)
    s.tool("Read", {"file_path": "/home/u/proj/src/pkg/a.py"}, "x")  # changed: not read again
    s.tool("Read", {"file_path": "/home/u/proj/docs/guide.md"}, "x")
    text = s.text()
    assert text.startswith(
        "## Files changed\n(paths under /home/u/proj/)\n"
        "- README.md\n- src/pkg/: a.py, b.py\n- tests/test_a.py\n"
    )
    assert "## Files read\n- docs/guide.md\n" in text


def test_commands_are_deduplicated_with_counts_and_their_last_outcome() -> None:
    s = Session()
    s.run("pytest -q", "Exit code 1\n=== 1 failed, 3 passed in 0.2s ===\nFAILED t.py::x", True)
    s.edit("/w/app.py")
    s.run("pytest  -q", "4 passed in 0.1s")  # the same command, spaced differently
    s.run("make deploy\necho done", "Exit code 2\nmake: *** [deploy] Error 2", True)
    s.run("ls", "a b")
    text = s.text()
    assert "- `pytest -q` ×2 → ok (4 passed in 0.1s) after 1 failed\n" in text
    assert "- `make deploy …` → failed: make: *** [deploy] Error 2\n" in text
    assert text.count("`pytest -q`") == 2  # once as a command, once as a fixed error
    assert (
        "## Errors and what fixed them\n"
        "- `pytest -q`: FAILED t.py::x — fixed: a later run passed after editing app.py\n"
    ) in text


def error_line(output: str) -> str:
    return error_line_of(output, 200)


def test_the_error_line_is_the_one_that_says_what_failed() -> None:
    mix = (
        "Exit code 2\nGetting extensions in current project...\n> fine\n"
        "Running ExUnit with seed: 1\n\n  1) test sync is idempotent (SyncTest)\n"
        "     Assertion with == failed\n\n3 tests, 1 failure\n"
    )
    assert error_line(mix) == "1) test sync is idempotent (SyncTest)"
    traceback = (
        "Traceback (most recent call last):\n"
        '  File "x.py", line 3, in <module>\n    raise KeyError("k")\n'
        '  File "y.py", line 9, in f\n    raise ValueError("bad value")\n'
        "ValueError: bad value\n"
    )
    assert error_line(traceback) == "ValueError: bad value"
    assert error_line("Exit code 1\nCompiling…\nsrc/a.rs:3: error: expected `;`") == (
        "src/a.rs:3: error: expected `;`"
    )
    assert error_line("Exit code 128\nfatal: not a git repository") == "fatal: not a git repository"
    assert error_line("warning: unused x\nbuild failed") == "build failed"
    assert error_line("Exit code 2\n─────\nChecking 3 files ...") == "Checking 3 files ..."
    assert error_line("Exit code 7\n") == "Exit code 7"


def test_open_tasks_are_requests_no_work_followed_and_unfinished_todos() -> None:
    s = Session()
    s.prompt("Fix the parser")
    s.edit("/w/parser.py")
    s.prompt("Now add a CLI flag for the verbose mode")
    s.say("Sure, which name do you want?")
    s.run("false", "Exit code 1", error=True)  # a failed command is no work done
    todos = [
        {"content": "Add the flag", "status": "in_progress"},
        {"content": "Write its docs", "status": "pending"},
        {"content": "Fix the parser", "status": "completed"},
    ]
    s.tool("TodoWrite", {"todos": todos}, "ok")
    ex = extract(s.messages)
    assert ex.open_prompts() == ["Now add a CLI flag for the verbose mode"]
    text = s.text()
    assert (
        "## Open tasks\n"
        "- asked, not yet done: Now add a CLI flag for the verbose mode\n"
        "- todo [in progress] Add the flag\n- todo [pending] Write its docs\n"
    ) in text
    assert "Fix the parser\n- todo" not in text


def test_a_question_the_agent_answered_is_no_open_task() -> None:
    s = Session()
    s.prompt("Which parser does the CLI use?")
    s.say("It uses the recursive-descent parser in parser.py.")
    s.prompt("Now make it faster")
    s.say("I will profile it first.")
    s.run("false", "Exit code 1", error=True)  # the turn ends in work, not in an answer
    ex = extract(s.messages)
    assert ex.open_prompts() == ["Now make it faster"]
    s.say("Profiling failed; the parser is unchanged.")  # the agent answered: the turn ended
    assert extract(s.messages).open_prompts() == []


def test_decisions_state_a_choice_not_a_step() -> None:
    s = Session()
    s.say(
        "I'll read the file first. I'll fix it now. "
        "Let's use SQLite instead of Postgres, so the tests need no server.\n"
        "```\nx = a if b else c  # instead of a loop\n```"
    )
    s.say("I decided to keep the old API rather than break callers.")
    s.prompt("Don't use mocks for the store: we won't ship a fake backend.")
    ex = extract(s.messages)
    assert ex.decisions == [
        "Let's use SQLite instead of Postgres, so the tests need no server.",
        "I decided to keep the old API rather than break callers.",
        "(user) Don't use mocks for the store: we won't ship a fake backend.",
    ]


def test_the_user_words_skip_wrappers_notifications_and_meta_lines() -> None:
    s = Session()
    s.prompt("<command-name>/clear</command-name>\n<command-args></command-args>")
    s.prompt("<task-notification><status>completed</status></task-notification>\nRead it")
    s.prompt("Please rename  the\nmodule")
    s.prompt("continue")
    s.prompt("Please rename the module")  # said again: kept once, at its newest place
    meta = fr.message("user", "Caveat: generated")
    s.messages.append(fr.MessageAppended(**{**_fields(meta), "meta": {"is_meta": "true"}}))
    assert [t for _, t in extract(s.messages).prompts] == ["continue", "Please rename the module"]


def _fields(frame: fr.MessageAppended) -> dict[str, Any]:
    return {f: getattr(frame, f) for f in frame.__struct_fields__}


@pytest.mark.slow
def test_a_huge_session_fills_the_budget_by_value_and_never_over_it(tmp_path: Path) -> None:
    s = Session()
    for i in range(400):
        s.prompt(f"Step {i}: " + "please do the next thing carefully " * 20)
        s.edit(f"/repo/src/{'deep/' * (i % 7)}module_{i:03d}.py")
        s.tool("Read", {"file_path": f"/repo/docs/page_{i:03d}.md"}, "x")
        s.run(
            f"pytest tests/test_module_{i:03d}.py -x " + "-k 'slow and not flaky' " * 5, "1 passed"
        )
        s.say(f"Instead of patching module {i}, we rewrite it rather than extend it.")
    for budget in (RESTORE_MAX_CHARS, 3_000, GUIDANCE_MAX_CHARS):
        text = s.text(budget)
        assert len(text) <= budget + 1
        assert text.startswith("## Files changed")
        assert "module_399.py" in text  # the newest survive
        assert "`pytest tests/test_module_399.py" in text
    guidance = s.text(GUIDANCE_MAX_CHARS, guidance=True)
    assert len(guidance) <= GUIDANCE_MAX_CHARS + 1 and "The user's own words" not in guidance

    # through the hooks: the restore stays within its budget with recent turns after it
    t = Transcript(tmp_path / "projects" / "p" / "s.jsonl")
    for i in range(120):
        work(t, [f"/work/demo/{'nested/' * 9}component_{i:03d}.py"], [f"pytest -k case_{i}"])
    t.flush()
    store = Store(tmp_path / "store", create=True, durable=False)
    run_hook(store, "pre-compact", t.payload("PreCompact", trigger="auto"))
    guidance = run_hook(store, "pre-compact", t.payload("PreCompact", trigger="auto")).stdout
    assert 0 < len(guidance) <= GUIDANCE_MAX_CHARS and "component_119.py" in guidance
    t.compaction("Many components.")
    t.flush()
    out = run_hook(store, "session-start", t.payload("SessionStart", source="compact"))
    text = context_of(out.stdout, "SessionStart")
    assert RESTORE_MAX_CHARS - 1_000 < len(text) <= RESTORE_MAX_CHARS
    assert "component_119.py" in text and "`pytest -k case_119` → ok (3 passed)" in text
    assert text.index("## Files changed") < text.index("## Commands run")


def test_after_several_compactions_the_restore_gives_back_only_the_latest_stretch(
    tmp_path: Path,
) -> None:
    """Claude's context after its third compaction holds its summary of everything: what the
    third compaction dropped is the stretch since the second, and only that is restored (the
    earlier stretches were restored after their own compactions)."""
    t = Transcript(tmp_path / "projects" / "p" / "s.jsonl")
    store = Store(tmp_path / "store", create=True, durable=False)
    stretches = ("alpha", "beta", "gamma")
    for n, name in enumerate(stretches):
        work(t, [f"/work/demo/{name}/{name}_{i}.py" for i in range(3)], [f"pytest -k {name}"])
        t.flush()
        run_hook(store, "pre-compact", t.payload("PreCompact", trigger="auto"))
        t.compaction(f"Compaction number {n + 1}.")
        t.flush()
        out = run_hook(store, "session-start", t.payload("SessionStart", source="compact"))
        text = context_of(out.stdout, "SessionStart")
        assert len(text) <= RESTORE_MAX_CHARS
        for other in stretches:
            named = [f"{other}_{i}.py" in text for i in range(3)]
            named.append(f"`pytest -k {other}` → ok (3 passed)" in text)
            named.append(f"Please fix the bug in /work/demo/{other}/{other}_0.py" in text)
            assert all(named) if other == name else not any(named), (name, other, named)
    cps = list(store.thread("cc-s").read(types=["compaction_checkpoint_created"]))
    assert [c.cut_rule_id for c in cps if isinstance(c, fr.CompactionCheckpointCreated)] == [
        "claude_code_compact/auto"
    ] * 3


def test_the_restore_names_what_subagents_changed_in_the_stretch(tmp_path: Path) -> None:
    t = Transcript(tmp_path / "projects" / "p" / "s.jsonl")
    agent = Transcript(t.path.with_suffix("") / "subagents" / "agent-x1.jsonl", session="s")
    agent.prompt("Build the helper")
    agent.tool("Write", {"file_path": "/work/demo/sub/helper.py", "content": "x"}, "created")
    agent.tool("Edit", {"file_path": "/work/demo/app.py"}, "updated")  # the session's too
    agent.tool("Bash", {"command": "npm run build"}, "built")
    for line in agent.pending:
        line.update(isSidechain=True, agentId="x1")
    agent.flush()  # its lines are timed before the session's compaction
    store = Store(tmp_path / "store", create=True, durable=False)
    work(t, ["/work/demo/app.py"], ["pytest -q"])
    t.flush()
    run_hook(store, "pre-compact", t.payload("PreCompact", trigger="auto"))
    t.compaction("First.")
    t.flush()
    out = run_hook(store, "session-start", t.payload("SessionStart", source="compact"))
    text = context_of(out.stdout, "SessionStart")
    assert len(text) <= RESTORE_MAX_CHARS
    # under the session's common root, named in its "Files changed" section
    assert "## Files changed by subagents\n- sub/helper.py\n\n" in text
    assert "## Commands run by subagents\n- `npm run build` → ok\n" in text
    order = [
        "## Files changed\n",
        "## Files changed by subagents",
        "## Commands run (",
        "## Commands run by",
    ]
    assert [text.index(h) for h in order] == sorted(text.index(h) for h in order)
    # app.py, which the session changed too, is named as the session's change only
    assert "## Files changed\n(paths under /work/demo/)\n- app.py\n\n## Files changed by" in text
    # the next stretch: the subagent's work was before the compaction that ends it
    work(t, ["/work/demo/later.py"], ["pytest -k later"])
    t.flush()
    run_hook(store, "pre-compact", t.payload("PreCompact", trigger="auto"))
    t.compaction("Second.")
    t.flush()
    out = run_hook(store, "session-start", t.payload("SessionStart", source="compact"))
    text = context_of(out.stdout, "SessionStart")
    assert "later.py" in text and "helper.py" not in text and "by subagents" not in text


def test_a_budget_too_small_for_the_subagents_sections_keeps_the_sessions_own() -> None:
    s, a = Session(), Session()
    for i in range(60):
        s.edit(f"/repo/src/main_{i:02d}.py")
        a.edit(f"/repo/agent/{'deep/' * 6}sub_{i:02d}.py")
        a.run(f"make target_{i:02d} " + "--flag " * 10)
    text = pack(sections(extract(s.messages), agents=extract(a.messages)), 3_000)
    assert len(text) <= 3_000
    assert "main_59.py" in text and "sub_59.py" in text and "make target_59" in text
    head, _, rest = text.partition("## Files changed by subagents")
    assert "## Files changed\n" in head and rest


@pytest.mark.parametrize(
    "output",
    [
        "Exit code 2\nnpm warn Unknown env config\nsrc/a.ts(6,33): error TS2307: no module",
        "warning: unused import: std::error::Error\nFinished dev",
        "Compiling x\nwarning: unused import: std::error::Error\nFinished dev",
        "make: *** [all] Error 2\nexit status 2",
        "Traceback (most recent call last):\n  File 'x.py'\nValueError: bad value",
        "=== 3 passed in 0.2s ===",
        "Finished in 0.1s\n18 tests, 0 failures",
        "all good",
    ],
)
def test_the_restore_and_the_summary_read_an_output_alike(output: str) -> None:
    """One rule (continuity.context.transcript_rules) for both: whether a run failed, the line
    that says why, a passing run's tally."""
    s = Session()
    s.run("make", output)
    command = extract(s.messages).commands["make"]
    (summarized,) = ExtractiveSummarizer().summarize(None, s.messages).sections["commands"]
    if command.last_ok:
        assert summarized == (
            f"`make` → ok ({command.ok_detail})" if command.ok_detail else "`make` → ok"
        )
    else:
        assert summarized == f"`make` → error: {command.error}"


def test_the_restore_reads_the_notes_search_indexes_without_importing_search(
    tmp_path: Path,
) -> None:
    """The restore's notes are the kinds the search indexes as notes; finding them costs the
    restore no import of the search's documents (its terms and stemmer: about 1 ms a hook)."""
    from continuity.agents.base.restore import _NOTE_KINDS
    from continuity.retrieval.documents import NOTE_KINDS

    assert _NOTE_KINDS == NOTE_KINDS
    probe = (
        "import sys\n"
        "from continuity.agents.base.restore import _notes\n"
        "from continuity.context.records import record\n"
        "from continuity.store.jsonl import Store\n"
        f"t = Store({str(tmp_path / 'store')!r}, create=True).thread('t')\n"
        "record(t, 'continuity.decision', {'text': 'use blake3'})\n"
        "print(_notes(t, 1000))\n"
        "print('continuity.retrieval.documents' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False, timeout=60
    )
    assert done.returncode == 0, done.stderr
    notes, imported = done.stdout.strip().rsplit("\n", 1)
    assert "use blake3" in notes
    assert imported == "False"
