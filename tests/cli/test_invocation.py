"""Suggested commands are typed the way ``continuity`` was run (``.venv/bin/continuity``,
``python -m continuity``, ``continuity``), so that they work in the shell it was run from: the
README's one-line quick start leaves a shell with no ``continuity`` on its PATH."""

from __future__ import annotations

import os
import shlex
import subprocess
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


@pytest.mark.parametrize("how", ["script", "module"])
def test_the_demos_next_lines_run_in_the_quick_starts_shell(tmp_path: Path, how: str) -> None:
    """As the README's quick start leaves it: ``continuity`` is not on PATH; the demo is run as
    ``.venv/bin/continuity demo`` (or ``.venv/bin/python -m continuity demo``), and every
    "Next" line but ``install`` (which writes the agent's settings) runs as printed."""
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    # a venv of its own (its python is .venv/bin/python) that sees this one's packages
    base = Path(getattr(sys, "_base_executable", sys.executable))
    (bin_dir / "python").symlink_to(base)
    (tmp_path / ".venv" / "pyvenv.cfg").write_text(f"home = {base.parent}\n")
    script = bin_dir / "continuity"
    script.write_text(
        f"#!{sys.executable}\nimport sys\nfrom continuity.__main__ import main\nsys.exit(main())\n"
    )
    script.chmod(0o755)
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path / "home"),
        "CONTINUITY_HOME": str(tmp_path / "store"),
        # the tree under test (whatever the venv has installed), and what this process imports
        "PYTHONPATH": os.pathsep.join([str(ROOT), *(p for p in sys.path if p)]),
        "TMPDIR": str(tmp_path),
        "COLUMNS": "100",
        "LANG": "C.UTF-8",
    }
    command = ".venv/bin/continuity" if how == "script" else ".venv/bin/python -m continuity"

    def shell(line: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", line],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    done = shell(f"{command} demo")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.partition("\nNext ")[2].splitlines()[1:]
    assert [line.split(" install ")[0] for line in lines[-1:]] == [command]
    suggested = [line for line in lines if " install " not in line]
    assert len(suggested) == 3, done.stdout
    for line in suggested:
        assert line.startswith(f"{command} "), line
        ran = shell(line)
        assert ran.returncode == 0, f"{line}: {ran.stderr}"
    assert os.listdir(tmp_path / "store" / "threads") == ["cc-demo-invoice-service.jsonl"]
