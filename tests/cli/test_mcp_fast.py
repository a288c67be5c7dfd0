"""``continuity mcp`` before typer (:mod:`continuity.cli.fast_mcp`): the plain command lines are
served there, and everything else (help, an unknown or repeated option, a missing value) is left
to the typer command, which owns every message."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from continuity.cli.fast_mcp import parse


@pytest.mark.parametrize(
    ("argv", "found"),
    [
        (["mcp"], {}),
        (["--store", "/s", "mcp"], {"store": "/s"}),
        (["--store=/s", "mcp", "--structured"], {"store": "/s", "structured": True}),
        (
            ["mcp", "--store", "/s", "--project=/p", "--model", "m"],
            {"store": "/s", "project": "/p", "model": "m"},
        ),
        (["--store", "/a", "mcp", "--store", "/b"], {"store": "/b"}),  # the last one wins
        (["mcp", "--help"], None),
        (["mcp", "-h"], None),
        (["mcp", "--project"], None),
        (["mcp", "--project", "/a", "--project", "/b"], None),
        (["mcp", "--structured", "--structured"], None),
        (["mcp", "extra"], None),
        (["search", "mcp"], None),
        (["threads"], None),
    ],
)
def test_what_the_fast_path_takes(argv: list[str], found: dict[str, object] | None) -> None:
    assert parse(argv) == found


@pytest.mark.slow
def test_help_is_the_typer_commands(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "continuity", "mcp", "--help"],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0 and "--structured" in done.stdout
