"""The console block format (tests/docs/console.py): parsing, markers, placeholders, ``...``."""

from __future__ import annotations

import pytest

from tests.docs.console import (
    Command,
    FormatError,
    Result,
    check,
    line_pattern,
    mismatch,
    parse_page,
)


def _page(*lines: str) -> str:
    return "\n".join(lines) + "\n"


# --- parsing -----------------------------------------------------------------------------------


def test_commands_their_output_and_continuation_lines() -> None:
    text = _page(
        "Intro.",
        "",
        "```console",
        "$ printf 'a\\n' \\",
        "    'b'",
        "a",
        "b",
        "$ true",
        "```",
        "```sh",
        "$ not run",
        "```",
    )
    (block,) = parse_page(text, "p.md")
    assert block.line == 3
    first, second = block.commands
    assert first.line == 4
    assert first.text == "printf 'a\\n' \\\n    'b'"
    assert first.expected == ["a", "b"]
    assert second.text == "true"
    assert second.expected == []
    assert (first.exit_code, second.exit_code) == (0, 0)


def test_a_continued_line_that_looks_like_a_command_stays_in_the_command() -> None:
    (block,) = parse_page(_page("```console", "$ echo \\", "$ x", "out", "```"), "p.md")
    (command,) = block.commands
    assert command.text == "echo \\\n$ x"
    assert command.expected == ["out"]


def test_the_exit_marker_is_the_last_output_line_and_is_not_output() -> None:
    text = _page("```console", "$ false", "oops", "[exit 1]", "", "$ true", "```")
    (block,) = parse_page(text, "p.md")
    assert block.commands[0].exit_code == 1
    assert block.commands[0].expected == ["oops"]
    assert block.commands[1].exit_code == 0


@pytest.mark.parametrize(
    ("lines", "complaint"),
    [
        (["```console", "$ false", "[exit 1]", "more", "```"], "must be the command's last line"),
        (["```console", "$ true", "[exit 0]", "```"], "[exit 0]` is the default"),
        (["```console", "output first", "$ true", "```"], "must start with `$ command`"),
        (["```console", "", "```"], "p.md:2: a console block must start"),
        (["```console", "```"], "without a command"),
        (
            ["<!-- console: skip -->", "```console", "$ x", "```"],
            "p.md:1: `console: skip` needs a reason",
        ),
        (["<!-- console: setup -->", "```console", "$ x", "```"], "needs a command"),
        (["<!-- console: skipp because -->", "```console", "$ x", "```"], "unknown console marker"),
        (
            ["<!-- console: skip no server -->", "", "Text.", "```console", "$ x", "```"],
            "no console block follows",
        ),
        (["<!-- console: skip no server -->", "```sh", "$ x", "```"], "block that is not console"),
        (["Text.", "<!-- console: setup true -->"], "p.md:2: a console marker that no console"),
        (["<!-- console: skip", "because -->", "```console", "$ x", "```"], "must be one line"),
        (["```console", "$ x"], "never closed"),
    ],
)
def test_format_errors_name_the_line(lines: list[str], complaint: str) -> None:
    with pytest.raises(FormatError) as caught:
        parse_page(_page(*lines), "p.md")
    assert complaint in str(caught.value)
    assert str(caught.value).startswith("p.md:")


def test_markers_before_a_block_over_blank_lines() -> None:
    text = _page(
        "<!-- console: setup continuity init -->",
        '<!-- console: setup echo \'{"role":"user","text":"hi"}\' | continuity append t -->',
        "",
        "```console",
        "$ continuity log t",
        "```",
        "<!-- console: skip needs a PostgreSQL server -->",
        "```console",
        "$ continuity init --store postgresql://db",
        "```",
        "<!-- an ordinary comment -->",
        "```console",
        "$ true",
        "```",
    )
    first, second, third = parse_page(text, "p.md")
    assert first.setup == [
        "continuity init",
        'echo \'{"role":"user","text":"hi"}\' | continuity append t',
    ]
    assert first.skip is None
    assert second.skip == "needs a PostgreSQL server"
    assert second.setup == []
    assert (third.skip, third.setup) == (None, [])


def test_an_indented_block_in_a_list() -> None:
    text = _page("1. Run it:", "", "   ```console", "   $ echo hi", "   hi", "   ```")
    (block,) = parse_page(text, "p.md")
    assert block.commands[0].text == "echo hi"
    assert block.commands[0].expected == ["hi"]


# --- placeholders ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expected", "line", "matches"),
    [
        ("bundle <id>; logged", "bundle b8498da4c0ffee; logged", True),
        ("bundle <id>; logged", "bundle 4d5611e5-9f0c-4a1b-8c2d-0e1f2a3b4c5d; logged", True),
        ("bundle <id>; logged", "bundle nothex; logged", False),
        ("bundle <id>; logged", "bundle ; logged", False),
        ("at <time>", "at 2026-11-22 03:47:05", True),
        ("at <time>", "at 2026-11-22T03:41:08Z", True),
        ("at <time>", "at 2026-11-22T03:41:08.123+00:00", True),
        ("took <time>", "took 12 ms", True),
        ("took <time>", "took 0.4 s", True),
        ("took <time>", "took 1m 20s", True),
        ("took <time>", "took soon", False),
        ("took <time>", "took 12 bananas", False),
        ("(<n>)", "(2.787)", True),
        ("(<n>)", "(-3)", True),
        ("(<n>)", "(1,500)", True),
        ("(<n>)", "(1e-05)", True),
        ("(<n>)", "(two)", False),
        ("[<n>, <n>]", "[3, 6]", True),
        ("store at <path>", "store at /tmp/console-x/store", True),
        ("store at <path>.", "store at ~/demo/store.", True),
        ("store at <path>", "store at nowhere", False),
        ("store at <path>", "store at /a b", False),
        ("error: <any>", "error: anything at all (even <this>)", True),
        ("error: <any>", "error: ", True),
        ("warning: <any>", "error: x", False),
        ("a <any> c", "a b b c", True),
        ("a <any> c", "a b b d", False),
        # the literal text is literal: no regular expressions slip through
        ("(2.787)", "(2x787)", False),
        ("a+b", "aab", False),
        ("[exit]", "e", False),
        ("…tes…", "…tes…", True),
    ],
)
def test_placeholders(expected: str, line: str, matches: bool) -> None:
    assert (line_pattern(expected).fullmatch(line) is not None) is matches


# --- whole outputs and `...` -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expected", "output", "matches"),
    [
        (["a", "b"], "a\nb\n", True),
        (["a", "b"], "a\nb   \n\n\n", True),  # trailing spaces and empty lines do not count
        (["a", "b", ""], "a\nb", True),
        (["a", "b"], "a\nb\nc\n", False),  # an extra line
        (["a", "b"], "a\n", False),  # a missing line
        (["a", "b"], "b\na\n", False),
        ([], "", True),
        ([], "something\n", False),
        (["..."], "", True),
        (["..."], "x\ny\nz\n", True),
        (["a", "...", "z"], "a\nz\n", True),  # zero lines
        (["a", "...", "z"], "a\nb\nc\nz\n", True),
        (["a", "...", "z"], "a\nb\nc\n", False),
        (["...", "z"], "z\nz\nz\n", True),
        (["a", "..."], "a\nb\n", True),
        (["a", "..."], "b\n", False),
        # backtracking: the first "x" after `...` is not the one that lets the rest match
        (["...", "x", "end"], "x\nq\nx\nend\n", True),
        (["a", "...", "<n>", "...", "done"], "a\nskip\n42\nmore\ndone\n", True),
        (["a", "...", "<n>", "...", "done"], "a\nskip\nmore\ndone\n", False),
        (["  ..."], "x\n", True),
        (["..", "x"], "..\nx\n", True),  # only a line of exactly `...` is the wildcard
        (["..", "x"], "y\nx\n", False),
    ],
)
def test_output_matching(expected: list[str], output: str, matches: bool) -> None:
    assert (mismatch(expected, output) is None) is matches


def test_a_mismatch_says_how_far_the_match_got() -> None:
    assert mismatch(["a", "b", "c"], "a\nb\nX\n") == (2, 2)
    assert mismatch(["a", "b"], "a\n") == (1, 1)


def test_check_reports_the_command_the_first_bad_line_and_a_diff() -> None:
    command = Command(line=12, text="continuity stats", expected=["threads  <n>", "frames   4"])
    assert check(command, Result("threads  1\nframes   4\n", 0)) is None
    problem = check(command, Result("threads  1\nframes   5\n", 0))
    assert problem is not None
    assert problem.startswith(":12: $ continuity stats\n")
    assert "first unmatched expected line: 'frames   4'" in problem
    assert "--- expected\n+++ printed" in problem
    assert "-frames   4\n+frames   5" in problem


def test_check_wants_the_exit_code_the_block_shows() -> None:
    plain = Command(line=3, text="false", expected=[])
    assert (
        check(plain, Result("", 1), "p.md")
        == "p.md:3: $ false\nexited 1, the block shows no `[exit N]` line"
    )
    marked = Command(line=3, text="false", expected=[], exit_code=2)
    problem = check(marked, Result("", 1))
    assert problem is not None and "exited 1, the block shows [exit 2]" in problem
    assert check(marked, Result("", 2)) is None
    assert check(marked, Result("", 0)) is not None


def test_check_names_a_timeout() -> None:
    problem = check(Command(line=1, text="sleep 99"), Result("partial\n", -9, timed_out=True))
    assert problem is not None
    assert "timed out (killed after" in problem and "partial" in problem


def test_the_diff_shows_only_what_differs() -> None:
    command = Command(line=1, text="x", expected=["head <n>", "...", "tail <id>", "last"])
    problem = check(command, Result("head 1\nmiddle\nmore\ntail beef\nLAST\n", 0))
    assert problem is not None
    diff_lines = problem.split("@@")[-1].splitlines()[1:]
    assert [line for line in diff_lines if line[:1] in "+-"] == ["-last", "+LAST"]
