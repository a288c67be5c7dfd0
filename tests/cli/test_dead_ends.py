"""Errors that say what to do next (issue 39): an ``append`` line with a role outside the
closed set lists the roles, in one line, and nothing is written."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from continuity.cli.app import app


def test_append_with_a_bad_role_lists_the_roles(tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    runner = CliRunner()
    assert runner.invoke(app, ["--store", store, "init"]).exit_code == 0
    lines = '{"role":"user","text":"hello"}\n{"role":"tool","text":"ran it"}\n'
    got = runner.invoke(app, ["--store", store, "append", "t"], input=lines)
    assert got.exit_code == 1 and got.stdout == ""
    assert got.stderr == (
        "error: line 2: role must be one of 'user', 'assistant', 'system', not 'tool' "
        "(nothing was written)\n"
    )
    assert not (tmp_path / "s" / "threads" / "t.jsonl").exists()
