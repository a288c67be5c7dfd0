"""Every agent's tools as the restore reads them (:mod:`continuity.agents.base._restore_tools`):
the outputs are the real CLIs' (Codex 0.169.0, Gemini CLI 0.61.0, recorded against the scripted
model server)."""

from __future__ import annotations

import pytest

from continuity import frames as fr
from continuity.agents.base._restore_extract import extract
from continuity.agents.base._restore_tools import classify, command_outcome, failed_results

CODEX_FAILED = (
    "Chunk ID: 0f8076\nWall time: 0.0000 seconds\nProcess exited with code 1\n"
    "Original token count: 8\nOutput:\nerror: build broke at line 3\n"
)
CODEX_OK = (
    "Chunk ID: c6651d\nWall time: 0.0000 seconds\nProcess exited with code 0\n"
    "Original token count: 2\nOutput:\nerror handling is described here\n"
)
GEMINI_FAILED = (
    "<untrusted_context>\nOutput: error: build broke at line 3\nExit Code: 1\n"
    "Process Group PGID: 3984\n</untrusted_context>"
)
GEMINI_OK = "<untrusted_context>\nOutput: hi\nProcess Group PGID: 5325\n</untrusted_context>"
PATCH = (
    "*** Begin Patch\n*** Update File: src/notes.txt\n@@\n-a\n+b\n"
    "*** Add File: new.py\n+x\n*** End Patch\n"
)


@pytest.mark.parametrize(
    ("output", "code", "body"),
    [
        (CODEX_FAILED, 1, "error: build broke at line 3\n"),
        (CODEX_OK, 0, "error handling is described here\n"),
        (GEMINI_FAILED, 1, "error: build broke at line 3"),
        (GEMINI_OK, None, "hi"),
        ("3 passed in 0.1s", None, "3 passed in 0.1s"),
    ],
)
def test_the_outcome_is_the_reported_exit_code_and_the_body_the_commands_own(
    output: str, code: int | None, body: str
) -> None:
    assert command_outcome(output) == (code, body)


@pytest.mark.parametrize(
    ("name", "tool_input", "command", "read", "edited"),
    [
        ("Bash", {"command": "pytest -q"}, "pytest -q", [], []),
        ("exec_command", {"cmd": "cat a.py b.py"}, "cat a.py b.py", ["a.py", "b.py"], []),
        (
            "exec_command",
            {"cmd": "sed -n 1,80p src/x.py"},
            "sed -n 1,80p src/x.py",
            ["src/x.py"],
            [],
        ),
        (
            "exec_command",
            {"cmd": "nl -ba f.txt | sed -n 5,9p"},
            "nl -ba f.txt | sed -n 5,9p",
            ["f.txt"],
            [],
        ),
        ("exec_command", {"cmd": "sed -i s/a/b/ f.txt"}, "sed -i s/a/b/ f.txt", [], []),
        ("exec_command", {"cmd": "head -n 20 log.txt"}, "head -n 20 log.txt", ["log.txt"], []),
        (
            "exec_command",
            {"cmd": f"apply_patch <<'EOF'\n{PATCH}EOF\n"},
            None,
            [],
            ["src/notes.txt", "new.py"],
        ),
        ("apply_patch", {"input": PATCH}, None, [], ["src/notes.txt", "new.py"]),
        ("shell", {"command": ["bash", "-lc", "make"]}, ["bash", "-lc", "make"], [], []),
        ("run_shell_command", {"command": "make", "description": "d"}, "make", [], []),
        ("read_file", {"file_path": "README.md"}, None, ["README.md"], []),
        ("read_file", {"absolute_path": "/p/README.md"}, None, ["/p/README.md"], []),
        ("read_many_files", {"paths": ["a.md", "b.md"]}, None, ["a.md", "b.md"], []),
        ("replace", {"file_path": "a.py", "old_string": "x"}, None, [], ["a.py"]),
        ("write_file", {"file_path": "b.py", "content": "x"}, None, [], ["b.py"]),
        ("edit", {"filePath": "/p/c.ts"}, None, [], ["/p/c.ts"]),
        ("read", {"filePath": "/p/d.ts"}, None, ["/p/d.ts"], []),
        ("Read", {"file_path": "/p/e.py"}, None, ["/p/e.py"], []),
        ("Edit", {"file_path": "/p/e.py"}, None, [], ["/p/e.py"]),
    ],
)
def test_every_agents_calls_are_classified(
    name: str, tool_input: dict[str, object], command: object, read: list[str], edited: list[str]
) -> None:
    what = classify(name, tool_input)
    assert (what.command, what.read, what.edited) == (command, read, edited)


def _call(
    i: int, name: str, tool_input: dict[str, object], output: str
) -> list[fr.MessageAppended]:
    use = fr.MessageAppended(
        message_id=f"u{i}",
        role="assistant",
        content=[fr.ToolUseBlock(id=f"c{i}", name=name, input=tool_input)],
        tokens=1,
    )
    result = fr.MessageAppended(
        message_id=f"r{i}",
        role="user",
        content=[fr.ToolResultBlock(tool_use_id=f"c{i}", content=output)],
        tokens=1,
    )
    return [use, result]


def test_a_codex_session_extracts_like_a_claude_code_one() -> None:
    messages = [
        *_call(1, "exec_command", {"cmd": "cat notes.txt"}, CODEX_OK),
        *_call(2, "exec_command", {"cmd": "make build"}, CODEX_FAILED),
        *_call(3, "exec_command", {"cmd": f"apply_patch <<'EOF'\n{PATCH}EOF\n"}, "Success."),
    ]
    got = extract(messages)
    assert list(got.read) == ["notes.txt"]
    assert list(got.edited) == ["src/notes.txt", "new.py"]
    cat, make = got.commands["cat notes.txt"], got.commands["make build"]
    assert (cat.last_ok, make.last_ok) == (True, False)  # code 0 despite "error" in the output
    assert make.error == "error: build broke at line 3"
    assert failed_results(messages) == {"c2"}


def test_a_gemini_session_extracts_like_a_claude_code_one() -> None:
    messages = [
        *_call(1, "read_file", {"file_path": "README.md"}, "text"),
        *_call(2, "run_shell_command", {"command": "make build"}, GEMINI_FAILED),
        *_call(3, "replace", {"file_path": "notes.txt"}, "Successfully modified file"),
    ]
    got = extract(messages)
    assert list(got.read) == ["README.md"]
    assert list(got.edited) == ["notes.txt"]
    assert got.commands["make build"].last_ok is False
    assert got.commands["make build"].error == "error: build broke at line 3"
