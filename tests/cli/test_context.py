"""The context commands (compile, checkpoint, compact, decisions) through typer's CliRunner.

Each error test checks the CLI's contract: one ``error:`` line on stderr, nothing on stdout, a
non-zero exit, and not a byte appended to the log. Usage errors (typer's own validation) exit 2.
"""

from __future__ import annotations

import fcntl
import itertools
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import blake3
import msgspec
import pytest
from typer.testing import CliRunner, Result

from continuity import frames as fr
from continuity.cli.app import app
from continuity.context.bundle import ContextBundle, MessageItem, ToolStubBlock, decode_bundle
from continuity.store.jsonl import Store
from continuity.summary import decode_summary
from tests.support.narrow import narrow

Run = Callable[..., Result]


def _message(mid: str, role: str, *blocks: dict[str, Any]) -> dict[str, Any]:
    return {"type": "message_appended", "message_id": mid, "role": role, "content": list(blocks)}


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _call(tool_id: str, name: str, **tool_input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}


def _result(tool_id: str, output: str, *, is_error: bool = False) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_id, "content": output}
    if is_error:
        block["is_error"] = True
    return block


FAILED = "FAILED tests/test_app.py::test_add\n1 failed"

# A short coding session: seq 0 is thread_created, then these messages at seqs 1..10.
SESSION = [
    _message("u1", "user", _text("Fix the failing test in app.py")),
    _message("a1", "assistant", _text("Running the tests."), _call("t1", "Bash", command="pytest")),
    _message("r1", "user", _result("t1", FAILED, is_error=True)),
    _message("a2", "assistant", _text("The fix: a + b."), _call("t2", "Edit", file_path="app.py")),
    _message("r2", "user", _result("t2", "The file app.py has been updated.")),
    _message("a3", "assistant", _call("t3", "Bash", command="pytest")),
    _message("r3", "user", _result("t3", "....\n4 passed in 0.02s")),
    _message("a4", "assistant", _text("All tests pass.")),
    _message("u2", "user", _text("Thanks. Now bump the version to 1.2.")),
    _message("a5", "assistant", _text("Bumped the version to 1.2 in pyproject.toml.")),
]  # fmt: skip
TOOL_CALL_SEQS = {2, 4, 6}  # assistant messages whose calls are answered by the next message


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may reach the real default store."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CONTINUITY_HOME", raising=False)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "s"


@pytest.fixture
def run(store: Path) -> Run:
    runner = CliRunner()

    def _run(*args: str, input: str | bytes | None = None) -> Result:
        return runner.invoke(app, ["--store", str(store), *args], input=input)

    return _run


@pytest.fixture
def demo(run: Run, store: Path) -> Path:
    """Thread ``demo`` holding SESSION; returns its log file."""
    assert run("init").exit_code == 0
    lines = "".join(json.dumps(m) + "\n" for m in SESSION)
    appended = run("append", "demo", input=lines)
    assert appended.exit_code == 0, appended.stderr
    assert appended.stdout.split() == [str(s) for s in range(1, 11)]
    return store / "threads" / "demo.jsonl"


def frames_of(log: Path) -> list[fr.Frame]:
    return [fr.decode_frame(line) for line in log.read_bytes().splitlines()]


def of_type(log: Path, cls: type[Any]) -> list[Any]:
    return [f for f in frames_of(log) if isinstance(f, cls)]


def artifact_files(store: Path) -> set[str]:
    return {p.name for p in (store / "artifacts").rglob("*.zst")}


def assert_one_line_error(result: Result, *needles: str) -> str:
    assert result.exit_code != 0, result.stdout
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def assert_usage_error(result: Result, option: str) -> None:
    assert result.exit_code == 2, result.stdout
    assert result.stdout == ""
    assert option in result.stderr


@pytest.fixture
def unchanged(demo: Path, store: Path) -> Iterator[None]:
    """The test must leave the log and the artifacts as they were."""
    log, artifacts = demo.read_bytes(), artifact_files(store)
    yield
    assert demo.read_bytes() == log, "the log changed"
    assert artifact_files(store) == artifacts, "artifacts were written"


def bundle_of(result: Result) -> ContextBundle:
    assert result.exit_code == 0, result.stderr
    return decode_bundle(result.stdout_bytes.rstrip(b"\n"))


def compile_json(run: Run, *args: str) -> ContextBundle:
    return bundle_of(run("compile", "demo", "--dry-run", *args))


# --- compile ----------------------------------------------------------------------------------


def test_compile_prints_the_bundle_and_logs_one_decision(run: Run, demo: Path, store: Path) -> None:
    before = frames_of(demo)
    result = run("compile", "demo")
    bundle = bundle_of(result)
    assert bundle.thread_id == "demo"
    assert bundle.strategy == "recent_messages_v1"
    assert bundle.anchor_seq == 10 and bundle.anchor_message_id == "a5"
    assert [m.seq for m in bundle.messages] == list(range(1, 11))
    assert bundle.tokens == sum(i.tokens for i in bundle.items)

    after = frames_of(demo)
    assert after[: len(before)] == before
    assert len(after) == len(before) + 1
    decision = after[-1]
    assert isinstance(decision, fr.ContextSelectionDecided)
    assert decision.seq == 11
    # stdout is the canonical bytes: their hash is the logged bundle id, and it is stored
    bundle_id = blake3.blake3(result.stdout_bytes.rstrip(b"\n")).hexdigest()
    assert decision.bundle_artifact_id == bundle_id
    assert bundle_id + ".zst" in artifact_files(store)
    assert (decision.window_from_seq, decision.window_to_seq) == (1, 10)
    assert decision.window_messages == 10 and decision.tokens == bundle.tokens
    assert result.stderr.startswith("recent_messages_v1: 0 summaries, 10 messages")
    assert f"bundle {bundle_id}; logged at seq 11" in result.stderr


def test_compiling_twice_gives_the_same_bundle(run: Run, demo: Path) -> None:
    first = run("compile", "demo")
    second = run("compile", "demo")
    assert first.exit_code == second.exit_code == 0
    assert first.stdout == second.stdout  # the decision frames do not move the default anchor
    # the second is the first decision repeated: on record, without a second full decision
    (decision,) = of_type(demo, fr.ContextSelectionDecided)
    (repeat,) = of_type(demo, fr.ContextSelectionRepeated)
    assert (decision.seq, repeat.seq, repeat.decision_seq) == (11, 12, 11)
    assert repeat.bundle_artifact_id == decision.bundle_artifact_id


def test_dry_run_appends_and_stores_nothing(run: Run, demo: Path, unchanged: None) -> None:
    result = run("compile", "demo", "--dry-run")
    bundle = bundle_of(result)
    assert len(bundle.messages) == 10
    assert "not logged (dry run)" in result.stderr


def test_dry_run_shows_what_a_logged_compile_logs(run: Run, demo: Path) -> None:
    dry = run("compile", "demo", "--dry-run")
    logged = run("compile", "demo")
    assert dry.stdout == logged.stdout


def test_format_anthropic(run: Run, demo: Path) -> None:
    result = run("compile", "demo", "--format", "anthropic", "--dry-run")
    assert result.exit_code == 0, result.stderr
    body = json.loads(result.stdout)
    assert set(body) <= {"system", "messages"} and "messages" in body  # no empty system
    roles = [m["role"] for m in body["messages"]]
    assert roles[0] == "user"
    assert all(a != b for a, b in itertools.pairwise(roles)), roles
    uses = [b["id"] for m in body["messages"] for b in m["content"] if b["type"] == "tool_use"]
    results = [
        b["tool_use_id"]
        for m in body["messages"]
        for b in m["content"]
        if b["type"] == "tool_result"
    ]
    assert uses == results == ["t1", "t2", "t3"]


def test_format_openai(run: Run, demo: Path) -> None:
    result = run("compile", "demo", "--format", "openai", "--dry-run")
    assert result.exit_code == 0, result.stderr
    messages = json.loads(result.stdout)
    assert isinstance(messages, list)
    assert messages[0] == {"role": "user", "content": "Fix the failing test in app.py"}
    tool_ids = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    assert tool_ids == ["t1", "t2", "t3"]
    assert messages[-1]["role"] == "assistant"


def test_format_text(run: Run, demo: Path) -> None:
    result = run("compile", "demo", "--format", "text", "--dry-run")
    assert result.exit_code == 0, result.stderr
    text = result.stdout
    assert text.startswith("# Context of thread demo at seq 10 (strategy recent_messages_v1)")
    assert "## Recent messages" in text
    assert "[user] Thanks. Now bump the version to 1.2." in text
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)


def test_max_chars_bounds_the_text(run: Run, demo: Path) -> None:
    full = run("compile", "demo", "--format", "text", "--dry-run")
    short = run("compile", "demo", "--format", "text", "--dry-run", "--max-chars", "200")
    assert short.exit_code == 0, short.stderr
    assert len(full.stdout) > 201
    assert len(short.stdout.rstrip("\n")) <= 200
    assert "Bumped the version to 1.2" in short.stdout  # the newest message is kept


def test_recent_limits_the_window(run: Run, demo: Path) -> None:
    bundle = compile_json(run, "--recent", "3")
    assert [m.seq for m in bundle.messages] == [8, 9, 10]
    assert bundle.limits.recent_messages == 3


def test_the_window_never_starts_with_a_tool_result(run: Run, demo: Path) -> None:
    bundle = compile_json(run, "--recent", "4")  # seq 7 (a result) would come first
    assert [m.seq for m in bundle.messages] == [8, 9, 10]


def test_keep_tool_outputs_turns_older_results_into_stubs(run: Run, demo: Path) -> None:
    def blocks(bundle: ContextBundle) -> list[Any]:
        kinds = fr.ToolResultBlock | ToolStubBlock
        return [b for m in bundle.messages for b in m.content if isinstance(b, kinds)]

    whole = blocks(compile_json(run))
    assert [type(b) for b in whole] == [fr.ToolResultBlock] * 3
    one = blocks(compile_json(run, "--keep-tool-outputs", "1"))
    assert [type(b) for b in one] == [ToolStubBlock, ToolStubBlock, fr.ToolResultBlock]
    stub = one[0]
    assert isinstance(stub, ToolStubBlock)
    assert (stub.tool_use_id, stub.tool_name, stub.is_error) == ("t1", "Bash", True)
    assert stub.first_line == "FAILED tests/test_app.py::test_add"
    none = blocks(compile_json(run, "--keep-tool-outputs", "0"))
    assert all(isinstance(b, ToolStubBlock) for b in none)


def test_budget_tokens_is_never_exceeded(run: Run, demo: Path) -> None:
    full = compile_json(run)
    budget = full.tokens // 2
    bundle = compile_json(run, "--budget-tokens", str(budget))
    assert bundle.tokens <= budget
    assert bundle.limits.budget_tokens == budget
    assert 0 < len(bundle.messages) < len(full.messages)
    assert bundle.messages[-1].seq == 10  # the oldest messages go first
    assert bundle.notes == []


def test_a_budget_too_small_for_the_newest_message_says_so(run: Run, demo: Path) -> None:
    before = demo.read_bytes()
    result = run("compile", "demo", "--budget-tokens", "3")
    assert result.exit_code == 1 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: budget_tokens=3 is too small for this context")
    assert "needs budget_tokens >= " in line
    assert demo.read_bytes() == before  # no decision logged for a compile that failed


def test_compile_has_a_default_budget_and_no_budget_opts_out(run: Run, demo: Path) -> None:
    assert compile_json(run).limits.budget_tokens == 100_000
    assert compile_json(run, "--budget-tokens", "500").limits.budget_tokens == 500
    assert compile_json(run, "--no-budget").limits.budget_tokens is None
    both = run("compile", "demo", "--dry-run", "--no-budget", "--budget-tokens", "5")
    assert both.exit_code == 2 and both.stdout == ""
    assert "--budget-tokens N or --no-budget, not both" in both.stderr


def test_compile_warns_on_stderr_of_an_elided_message(run: Run, demo: Path) -> None:
    paste = _message("big", "user", _text("error log:\n" + "E" * 800_000))
    assert run("append", "demo", input=json.dumps(paste) + "\n").exit_code == 0
    result = run("compile", "demo", "--dry-run", "--format", "text")
    assert result.exit_code == 0, result.stderr
    assert "[text elided: 800011 bytes, ~200003 tokens" in result.stdout
    warning, report = result.stderr.splitlines()
    assert warning.startswith("warning: elided: message seq 11 (user) needs ~200007 tokens")
    assert report.startswith("recent_messages_v1: 0 summaries, 11 messages")
    whole = run("compile", "demo", "--dry-run", "--no-budget")
    assert len(whole.stdout) > 800_000 and "warning" not in whole.stderr


def test_compile_warns_on_stderr_when_a_summary_cannot_be_read(
    run: Run, demo: Path, store: Path
) -> None:
    summary = store / "summary.md"
    summary.write_text("The user fixed add() in app.py.\n")
    done = run("checkpoint", "demo", "--to-seq", "7", "--summary-file", str(summary))
    assert done.exit_code == 0, done.stderr
    (cp,) = of_type(demo, fr.CompactionCheckpointCreated)
    assert "The user fixed add()" in run("compile", "demo", "--format", "text").stdout
    (artifact,) = (store / "artifacts").rglob(f"{cp.summary_artifact_id}.zst")
    artifact.unlink()
    result = run("compile", "demo", "--format", "text")
    assert result.exit_code == 0, result.stderr  # a usable bundle was still compiled
    assert "The user fixed add()" not in result.stdout
    warning, report = result.stderr.splitlines()
    assert warning == (
        f"warning: summary_unreadable: checkpoint {cp.checkpoint_id} (seq {cp.seq}, to_seq 7) "
        f"was passed over: its summary artifact {cp.summary_artifact_id} is missing; "
        "no older summary stands in for it"
    )
    assert report.startswith("recent_messages_v1: 0 summaries, 10 messages")


def test_anchor_by_seq(run: Run, demo: Path) -> None:
    bundle = compile_json(run, "--anchor", "5")
    assert bundle.anchor_seq == 5
    assert [m.seq for m in bundle.messages] == [1, 2, 3, 4, 5]


def test_anchor_by_message_id(run: Run, demo: Path) -> None:
    bundle = compile_json(run, "--anchor", "r2")
    assert bundle.anchor_seq == 5 and bundle.anchor_message_id == "r2"
    assert bundle.messages[-1].message_id == "r2"


@pytest.mark.parametrize("anchor", ["11", "999"])
def test_anchor_outside_the_log(run: Run, demo: Path, unchanged: None, anchor: str) -> None:
    assert_one_line_error(run("compile", "demo", "--anchor", anchor), "outside the log")


def test_anchor_unknown_message_id(run: Run, demo: Path, unchanged: None) -> None:
    assert_one_line_error(run("compile", "demo", "--anchor", "nope"), "no message with id 'nope'")


def test_compile_unknown_thread(run: Run, demo: Path, store: Path, unchanged: None) -> None:
    assert_one_line_error(run("compile", "ghost"), "ghost")
    assert not (store / "threads" / "ghost.jsonl").exists()


def test_compile_bad_thread_id(run: Run, demo: Path, unchanged: None) -> None:
    assert_one_line_error(run("compile", "../demo"))


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--recent", "-1"),
        ("--budget-tokens", "0"),
        ("--budget-tokens", "-5"),
        ("--keep-tool-outputs", "-1"),
        ("--max-summaries", "-1"),
        ("--max-chars", "0"),
        ("--format", "xml"),
    ],
)
def test_compile_bad_limits_are_usage_errors(
    run: Run, demo: Path, unchanged: None, option: str, value: str
) -> None:
    assert_usage_error(run("compile", "demo", option, value), option)


# --- checkpoint -------------------------------------------------------------------------------


def test_checkpoint_with_a_summary_file(run: Run, demo: Path, store: Path, tmp_path: Path) -> None:
    summary = tmp_path / "s.md"
    summary.write_text("The user asked to fix test_add; it is fixed.\n", encoding="utf-8")
    result = run("checkpoint", "demo", "--to-seq", "7", "--summary-file", str(summary))
    assert result.exit_code == 0, result.stderr
    frame = of_type(demo, fr.CompactionCheckpointCreated)[-1]
    assert frame.seq == 11 and frame.to_seq == 7 and frame.from_seq == 0
    assert frame.summary_kind == "cumulative_v1" and frame.cut_rule_id == "manual_v1"
    assert frame.to_message_id == "r3" and frame.produced_by == "manual"
    assert result.stdout == (
        f"checkpoint {frame.checkpoint_id} at seq 11: to_seq 7, "
        f"summary {frame.summary_artifact_id}\n"
    )
    doc = decode_summary(Store(store).artifacts.get(frame.summary_artifact_id))
    assert doc.text == summary.read_text(encoding="utf-8")
    assert (doc.thread_id, doc.to_seq, doc.produced_by) == ("demo", 7, "manual")

    bundle = compile_json(run)
    assert bundle.strategy == "summaries_recent_messages_v1"
    assert [s.text for s in bundle.summaries] == [doc.text]
    assert bundle.summaries[0].checkpoint_id == frame.checkpoint_id
    assert [m.seq for m in bundle.messages] == [8, 9, 10]


def test_checkpoint_summary_from_stdin_with_produced_by(run: Run, demo: Path, store: Path) -> None:
    result = run(
        "checkpoint", "demo", "--to-seq", "5", "--summary-file", "-", "--produced-by", "an LLM",
        input="Résumé: app.py fixed ✓\n",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    frame = of_type(demo, fr.CompactionCheckpointCreated)[-1]
    assert frame.produced_by == "an LLM"
    doc = decode_summary(Store(store).artifacts.get(frame.summary_artifact_id))
    assert doc.text == "Résumé: app.py fixed ✓\n"


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"", "empty"),
        (b"  \n\t\n", "empty"),
        (b"caf\xe9 latin-1\n", "not UTF-8"),
        (b"text\x00with a NUL\n", "NUL"),
    ],
    ids=["empty", "blank", "not-utf8", "nul"],
)
def test_checkpoint_refuses_a_bad_summary_file(
    run: Run, demo: Path, tmp_path: Path, unchanged: None, content: bytes, needle: str
) -> None:
    summary = tmp_path / "s.md"
    summary.write_bytes(content)
    result = run("checkpoint", "demo", "--to-seq", "5", "--summary-file", str(summary))
    assert result.exit_code == 1
    assert_one_line_error(result, needle)


def test_checkpoint_missing_summary_file(
    run: Run, demo: Path, tmp_path: Path, unchanged: None
) -> None:
    missing = tmp_path / "nope.md"
    result = run("checkpoint", "demo", "--to-seq", "5", "--summary-file", str(missing))
    assert result.exit_code == 1
    assert_one_line_error(result, "cannot read summary file")


def test_checkpoint_uses_the_default_summarizer(run: Run, demo: Path, store: Path) -> None:
    result = run("checkpoint", "demo", "--to-seq", "7")
    assert result.exit_code == 0, result.stderr
    frame = of_type(demo, fr.CompactionCheckpointCreated)[-1]
    assert frame.produced_by == "continuity.extractive/2"
    doc = decode_summary(Store(store).artifacts.get(frame.summary_artifact_id))
    assert doc.produced_by == "continuity.extractive/2"
    assert "## Requests\n- Fix the failing test in app.py" in doc.text
    assert doc.sections["files"] == ["edited app.py"]
    assert any("resolved" in e for e in doc.sections["errors"])


@pytest.mark.parametrize("to_seq", ["11", "500"])
def test_checkpoint_beyond_the_log(run: Run, demo: Path, unchanged: None, to_seq: str) -> None:
    result = run("checkpoint", "demo", "--to-seq", to_seq)
    assert result.exit_code == 1
    assert_one_line_error(result, "outside the log")


def test_checkpoint_before_any_message(run: Run, demo: Path, unchanged: None) -> None:
    assert_one_line_error(run("checkpoint", "demo", "--to-seq", "0"), "no message")


def test_checkpoint_unknown_thread(run: Run, demo: Path, store: Path, unchanged: None) -> None:
    assert_one_line_error(run("checkpoint", "ghost", "--to-seq", "1"), "ghost")
    assert not (store / "threads" / "ghost.jsonl").exists()


def test_checkpoint_needs_to_seq(run: Run, demo: Path, unchanged: None) -> None:
    assert_usage_error(run("checkpoint", "demo"), "--to-seq")
    assert_usage_error(run("checkpoint", "demo", "--to-seq", "-1"), "--to-seq")


# --- compact ----------------------------------------------------------------------------------


def test_compact_by_stride(run: Run, demo: Path) -> None:
    before = len(frames_of(demo))
    result = run("compact", "demo", "--stride", "3")
    assert result.exit_code == 0, result.stderr
    new = frames_of(demo)[before:]
    assert isinstance(new[0], fr.JobSpawned) and isinstance(new[-1], fr.JobEnded)
    spawned, ended = new[0], new[-1]
    assert all(isinstance(c, fr.CompactionCheckpointCreated) for c in new[1:-1])
    checkpoints = [narrow(fr.CompactionCheckpointCreated, c) for c in new[1:-1]]
    # messages 3, 6, 9 are at seqs 3, 6, 9; seq 6 is a call answered by seq 7, so that cut moves
    assert [c.to_seq for c in checkpoints] == [3, 7, 9]
    assert not {c.to_seq for c in checkpoints} & TOOL_CALL_SEQS
    assert {c.cut_rule_id for c in checkpoints} == {"stride_messages_v1/3"}
    assert spawned.kind == "compaction"
    assert spawned.params == {"cut_rule_id": "stride_messages_v1/3", "cuts": [3, 7, 9]}
    assert ended.job_id == spawned.job_id and ended.status == "succeeded"
    assert ended.error is None and ended.result == {"checkpoints": 3}
    lines = result.stdout.splitlines()
    assert lines[:3] == [
        f"checkpoint at seq {c.seq}: to_seq {c.to_seq} (stride_messages_v1/3)" for c in checkpoints
    ]
    assert lines[3] == f"job {spawned.job_id}: 3 checkpoints created"


def test_compact_builds_each_summary_on_the_previous_one(run: Run, demo: Path) -> None:
    assert run("compact", "demo", "--stride", "3").exit_code == 0
    checkpoints = of_type(demo, fr.CompactionCheckpointCreated)
    assert checkpoints[0].base_checkpoint_id is None
    assert [c.base_checkpoint_id for c in checkpoints[1:]] == [
        c.checkpoint_id for c in checkpoints[:-1]
    ]


def test_compile_after_compaction_selects_the_new_checkpoints(run: Run, demo: Path) -> None:
    assert run("compact", "demo", "--stride", "3").exit_code == 0
    bundle = compile_json(run)
    # latest to_seq 9, then the latest <= 4 is 3: 7 is skipped by the halving
    assert bundle.strategy == "hierarchical_summaries_recent_messages_v1"
    assert [s.to_seq for s in bundle.summaries] == [3, 9]
    # seq 10, and the user turn it answers (covered by the summary, kept raw: ADR 0018)
    assert [m.seq for m in bundle.messages] == [9, 10]
    assert bundle.messages[0].role == "user"


def test_a_second_compaction_plans_nothing(run: Run, demo: Path) -> None:
    assert run("compact", "demo", "--stride", "3").exit_code == 0
    log = demo.read_bytes()
    again = run("compact", "demo", "--stride", "3")
    assert again.exit_code == 0, again.stderr
    assert again.stdout.startswith("nothing to do: every cut stride_messages_v1/3 calls for")
    assert demo.read_bytes() == log  # no job frames for a job that has nothing to do


def test_compact_by_token_threshold(run: Run, demo: Path) -> None:
    result = run("compact", "demo", "--token-threshold", "40")
    assert result.exit_code == 0, result.stderr
    checkpoints = of_type(demo, fr.CompactionCheckpointCreated)
    assert checkpoints, result.stdout
    assert {c.cut_rule_id for c in checkpoints} == {"token_threshold_v1/40"}
    assert not {c.to_seq for c in checkpoints} & TOOL_CALL_SEQS
    tokens = {m.seq: m.tokens for m in of_type(demo, fr.MessageAppended)}
    start = 0
    for c in checkpoints:  # every cut comes once the uncovered messages exceed the threshold
        assert sum(t for s, t in tokens.items() if start < s <= c.to_seq) > 40
        start = c.to_seq
    assert sum(t for s, t in tokens.items() if s > start) <= 40  # else it would cut again
    assert [c.to_seq for c in checkpoints] == [3, 7]  # 12+15+15 > 40; 15+13+10+10 > 40
    assert isinstance(frames_of(demo)[-1], fr.JobEnded)


def test_compact_with_nothing_to_do(run: Run, demo: Path, unchanged: None) -> None:
    result = run("compact", "demo", "--token-threshold", "100000")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("nothing to do")


@pytest.mark.parametrize(
    "args",
    [[], ["--stride", "2", "--token-threshold", "50"]],
    ids=["neither", "both"],
)
def test_compact_needs_exactly_one_rule(
    run: Run, demo: Path, unchanged: None, args: list[str]
) -> None:
    result = run("compact", "demo", *args)
    assert result.exit_code == 2
    assert_one_line_error(result, "exactly one of --stride N or --token-threshold T")


@pytest.mark.parametrize("args", [["--stride", "0"], ["--token-threshold", "-1"]])
def test_compact_refuses_a_non_positive_rule(
    run: Run, demo: Path, unchanged: None, args: list[str]
) -> None:
    assert_usage_error(run("compact", "demo", *args), args[0])


@pytest.mark.slow
def test_compact_unknown_thread(run: Run, demo: Path, store: Path, unchanged: None) -> None:
    assert_one_line_error(run("compact", "ghost", "--stride", "2"), "ghost")
    assert not (store / "threads" / "ghost.jsonl").exists()


def test_compact_while_a_job_is_in_flight(
    run: Run, demo: Path, store: Path, unchanged: None
) -> None:
    lock = store / "cache" / "jobs" / "demo.compaction.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another process's job holds it
        result = run("compact", "demo", "--stride", "2")
        assert result.exit_code == 1
        assert_one_line_error(result, "already running")
    finally:
        os.close(fd)


def test_compact_runs_once_the_job_lock_is_released(run: Run, demo: Path, store: Path) -> None:
    lock = store / "cache" / "jobs" / "demo.compaction.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.close(fd)  # what the kernel does for a killed job
    assert run("compact", "demo", "--stride", "5").exit_code == 0
    assert [c.to_seq for c in of_type(demo, fr.CompactionCheckpointCreated)] == [5, 10]


# --- decisions --------------------------------------------------------------------------------


def test_decisions_lists_the_logged_decisions(run: Run, demo: Path) -> None:
    assert run("compile", "demo").exit_code == 0
    assert run("compile", "demo", "--recent", "4", "--keep-tool-outputs", "0").exit_code == 0
    first, second = of_type(demo, fr.ContextSelectionDecided)
    result = run("decisions", "demo")
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert out.count("recent_messages_v1") == 2
    lines = out.splitlines()
    assert lines[0].startswith("seq 11 ") and lines[0].endswith("recent_messages_v1")
    assert "  anchor 10  summaries to_seq [none]  window 1..10 (10)" in lines
    assert "  anchor 10  summaries to_seq [none]  window 8..10 (3)" in lines
    assert f"  ~{first.tokens} tokens  bundle {first.bundle_artifact_id}" in lines
    assert f"  ~{second.tokens} tokens  bundle {second.bundle_artifact_id}" in lines
    for reason in second.reasons:
        assert f"  - {reason}" in lines
    assert out.index("seq 11 ") < out.index("seq 12 ")


def test_decisions_limit_shows_the_newest(run: Run, demo: Path) -> None:
    for recent in ("16", "3"):
        assert run("compile", "demo", "--recent", recent).exit_code == 0
    result = run("decisions", "demo", "--limit", "1")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("seq 12 ")
    assert "seq 11 " not in result.stdout


@pytest.mark.slow
def test_decisions_json_lines_decode(run: Run, demo: Path) -> None:
    assert run("compile", "demo").exit_code == 0
    assert run("checkpoint", "demo", "--to-seq", "5").exit_code == 0
    assert run("compile", "demo").exit_code == 0
    result = run("decisions", "demo", "--json")
    assert result.exit_code == 0, result.stderr
    decoded = [
        msgspec.json.decode(line, type=fr.ContextSelectionDecided)
        for line in result.stdout_bytes.splitlines()
    ]
    assert [d.seq for d in decoded] == [d.seq for d in of_type(demo, fr.ContextSelectionDecided)]
    assert [d.strategy for d in decoded] == ["recent_messages_v1", "summaries_recent_messages_v1"]
    latest = decoded[-1]
    assert latest.checkpoint is not None and latest.checkpoint.to_seq == 5
    assert latest.checkpoints == [latest.checkpoint]


def test_decisions_of_a_thread_without_any(run: Run, demo: Path) -> None:
    result = run("decisions", "demo")
    assert result.exit_code == 0
    assert result.stdout == "no selection decisions in thread demo\n"


def test_decisions_unknown_thread(run: Run, demo: Path) -> None:
    assert_one_line_error(run("decisions", "ghost"), "ghost")


def test_decisions_show_resets(run: Run, demo: Path, store: Path) -> None:
    odd = fr.CompactionCheckpointCreated(
        checkpoint_id="odd",
        cut_rule_id="manual_v1",
        summary_kind="delta_v9",
        summary_artifact_id="ab" * 32,
        from_seq=0,
        to_seq=4,
    )
    appended = run("append", "demo", input=msgspec.json.encode(odd).decode() + "\n")
    assert appended.exit_code == 0, appended.stderr
    bundle = bundle_of(run("compile", "demo"))
    assert bundle.strategy == "recent_messages_v1"
    result = run("decisions", "demo")
    assert "  ! checkpoint odd (to_seq 4) ignored: unsupported summary kind 'delta_v9'" in (
        result.stdout.splitlines()
    )


def test_the_context_commands_have_help(run: Run) -> None:
    for name in ("compile", "checkpoint", "compact", "decisions"):
        shown = run(name, "--help")
        assert shown.exit_code == 0
        assert "Usage:" in shown.stdout


def test_compile_messages_keep_their_log_content(run: Run, demo: Path) -> None:
    bundle = compile_json(run)
    by_seq = {m.seq: m for m in of_type(demo, fr.MessageAppended)}
    for item in bundle.messages:
        assert isinstance(item, MessageItem)
        frame = by_seq[item.seq]
        assert (item.message_id, item.role, item.content) == (
            frame.message_id,
            frame.role,
            frame.content,
        )
        assert item.tokens == frame.tokens


@pytest.mark.parametrize("asked", sorted(TOOL_CALL_SEQS))
def test_checkpoint_never_separates_a_tool_call_from_its_result(
    run: Run, demo: Path, asked: int
) -> None:
    result = run("checkpoint", "demo", "--to-seq", str(asked), "--summary-file", "-", input="s\n")
    assert result.exit_code == 0, result.stderr
    (cp,) = of_type(demo, fr.CompactionCheckpointCreated)
    assert cp.to_seq == asked + 1  # moved onto the message holding the call's result
    assert f"to_seq {asked} moved to {asked + 1}" in result.stderr


def test_checkpoint_on_a_plain_message_stays_where_asked(run: Run, demo: Path) -> None:
    result = run("checkpoint", "demo", "--to-seq", "8", "--summary-file", "-", input="s\n")
    assert result.exit_code == 0, result.stderr
    (cp,) = of_type(demo, fr.CompactionCheckpointCreated)
    assert cp.to_seq == 8 and "moved" not in result.stderr


@pytest.mark.slow
def test_decisions_show_a_repeat_as_the_decision_it_names(run: Run, demo: Path) -> None:
    assert run("compile", "demo").exit_code == 0
    assert run("compile", "demo").exit_code == 0  # the same selection again
    (decision,) = of_type(demo, fr.ContextSelectionDecided)
    result = run("decisions", "demo")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"seq {decision.seq} ")
    assert lines[-2].endswith(f"repeats the decision at seq {decision.seq}")
    assert lines[-1] == f"  bundle {decision.bundle_artifact_id}"
    raw = run("decisions", "demo", "--json").stdout_bytes.splitlines()
    assert [fr.decode_frame(line).seq for line in raw] == [decision.seq, decision.seq + 1]


@pytest.mark.slow
def test_min_recent_keeps_raw_messages_behind_the_summary(run: Run, demo: Path) -> None:
    assert run("checkpoint", "demo", "--to-seq", "10").exit_code == 0
    plain = compile_json(run)
    assert [m.seq for m in plain.messages] == [9, 10]  # the turn in flight only
    kept = compile_json(run, "--min-recent", "5")
    assert [m.seq for m in kept.messages] == [6, 7, 8, 9, 10]
    assert kept.limits.min_recent == 5
    bad = run("compile", "demo", "--dry-run", "--recent", "3", "--min-recent", "4")
    assert bad.exit_code == 2 and "--min-recent 4 is more than --recent 3" in bad.stderr
