"""The console runner (tests/docs/console.py): one session per page, like one clean terminal."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from tests.docs.console import Session, parse_page, run_blocks

pytestmark = pytest.mark.slow


def test_a_fresh_environment(tmp_path: Path) -> None:
    session = Session(tmp_path)
    result = session.run(
        'echo "$COLUMNS $TZ"; test -e "$CONTINUITY_HOME" || echo "no store yet"; '
        'ls -A "$HOME" | wc -l; pwd; command -v continuity; env | grep -c "^XDG_" || true'
    )
    assert result.exit_code == 0, result.output
    columns, store, home_entries, cwd, continuity, xdg = result.output.splitlines()
    assert columns == "100 UTC"
    assert store == "no store yet"
    assert home_entries == "0"
    assert cwd == str(tmp_path / "work")
    assert continuity == str(Path(sys.executable).parent / "continuity")
    assert xdg == "0"


def test_pipes_exit_codes_and_stderr_in_order(tmp_path: Path) -> None:
    session = Session(tmp_path)
    result = session.run("printf 'b\\na\\n' | sort; exit 3")
    assert (result.output, result.exit_code) == ("a\nb\n", 3)
    python = "import sys; print('out'); print('err', file=sys.stderr); print('out again')"
    result = session.run(f'python -c "{python}"')
    assert result.output == "out\nerr\nout again\n"


def test_cd_and_exported_variables_carry_over_but_shell_variables_do_not(tmp_path: Path) -> None:
    session = Session(tmp_path)
    assert (
        session.run("mkdir project && cd project && export GREETING=hello && LOCAL=1").exit_code
        == 0
    )
    result = session.run('pwd; echo "$GREETING ${LOCAL:-unset}"')
    assert result.output == f"{tmp_path / 'work' / 'project'}\nhello unset\n"
    # a command that fails still leaves its directory
    session.run("cd .. && false")
    assert session.run("pwd").output == f"{tmp_path / 'work'}\n"


def test_a_command_that_runs_too_long_is_killed_with_its_children(tmp_path: Path) -> None:
    session = Session(tmp_path, timeout=0.5)
    started = time.monotonic()
    result = session.run("echo started; sleep 30 & sleep 30")
    assert result.timed_out
    assert result.output == "started\n"
    assert time.monotonic() - started < 20


def test_a_page_runs_in_order_in_one_session(tmp_path: Path) -> None:
    page = "\n".join(
        [
            "<!-- console: setup mkdir -p made && echo hidden > made/file -->",
            "```console",
            "$ cat made/file",
            "hidden",
            "$ echo $((6 * 7)) && false",
            "<n>",
            "[exit 1]",
            "```",
            "<!-- console: skip would fail -->",
            "```console",
            "$ false",
            "```",
            "```console",
            "$ echo one; echo two",
            "one",
            "three",
            "```",
            "",
        ]
    )
    blocks = parse_page(page, "p.md")
    problems = [problem for *_, problem in run_blocks(blocks, tmp_path) if problem]
    assert len(problems) == 1
    assert problems[0].startswith("p.md:14: $ echo one; echo two\n")
    assert "-three\n+two" in problems[0]


def test_a_failing_setup_fails_the_page(tmp_path: Path) -> None:
    page = "<!-- console: setup echo broken; exit 4 -->\n```console\n$ true\n```\n"
    problems = [
        problem for *_, problem in run_blocks(parse_page(page, "p.md"), tmp_path) if problem
    ]
    assert problems == ["p.md:2: setup `echo broken; exit 4` exited 4:\nbroken\n"]
