"""Suggested commands are typed the way ``continuity`` was run (``.venv/bin/continuity``,
``python -m continuity``, ``continuity``), so that they work in the shell it was run from: the
README's one-line quick start leaves a shell with no ``continuity`` on its PATH."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from continuity.cli._invocation import invoked_as

ROOT = Path(__file__).resolve().parents[2]


def _which(found: dict[str, str]) -> Callable[[str], str | None]:
    """A PATH lookup that finds ``found``'s names alone."""
    return found.get


def test_the_console_script_by_its_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    script = tmp_path / ".venv" / "bin" / "continuity"
    script.parent.mkdir(parents=True)
    script.write_text("")
    typed = ".venv/bin/continuity"
    assert invoked_as(typed, sys.executable, _which({})) == typed
    # on PATH too (an activated venv): the bare name
    assert invoked_as(typed, sys.executable, _which({"continuity": str(script)})) == "continuity"
    # another continuity first on PATH: the path as typed, quoted for the shell
    other = tmp_path / "other"
    other.write_text("")
    elsewhere = _which({"continuity": str(other)})
    assert invoked_as(typed, sys.executable, elsewhere) == typed
    spaced = tmp_path / "my tools" / "continuity"
    assert invoked_as(str(spaced), sys.executable, elsewhere) == shlex.quote(str(spaced))


def test_python_dash_m(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    main = str(ROOT / "continuity" / "__main__.py")
    python = str(tmp_path / "proj" / ".venv" / "bin" / "python")
    found = _which({"python": python, "python3": "/usr/bin/python3"})
    assert invoked_as(main, python, found) == "python -m continuity"
    assert invoked_as(main, python, _which({"python3": python})) == "python3 -m continuity"
    # PATH finds another python: this one's path, relative to the folder when inside it
    elsewhere = _which({"python": "/usr/bin/python"})
    (tmp_path / "proj").mkdir()
    monkeypatch.chdir(tmp_path / "proj")
    assert invoked_as(main, python, elsewhere) == ".venv/bin/python -m continuity"
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert invoked_as(main, python, elsewhere) == f"{python} -m continuity"


def test_anything_else_is_the_bare_name() -> None:
    pytest_main = "/usr/lib/python3/site-packages/pytest/__main__.py"
    assert invoked_as(pytest_main, sys.executable, _which({})) == "continuity"
    assert invoked_as("", sys.executable, _which({})) == "continuity"
