"""The distribution: installed as ``agent-continuity`` (ADR 0043), imported and run as
``continuity``; and no file tells a user to install the other project that holds the name
``continuity`` on the package index.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import pytest

import continuity
from continuity._install import Installed, install_line
from continuity.errors import DISTRIBUTION

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())

# What would install the unrelated `continuity` project: `pip install continuity`,
# `pip install 'continuity[postgres]'`, `uv tool install continuity`, or the requirement
# `continuity[serve]` (the extra of that project) anywhere.
_WRONG = re.compile(
    r"""(?:pip3?|pipx|uv\s+tool|uv\s+pip|uv)\s+install\s+(?:-\S+\s+)*['"]?continuity\b(?![-_.])"""
    r"""|(?<![\w.-])continuity\[[\w,\s-]+\]"""
)
# Where the old name may stay: the records of how it was (the ADRs, the changelog), and this
# file.
_MAY_NAME_IT = ("adr/", "CHANGELOG.md", "tests/project/test_distribution.py")


def test_the_distribution_is_agent_continuity_with_a_continuity_command() -> None:
    project = PYPROJECT["project"]
    assert project["name"] == DISTRIBUTION == "agent-continuity"
    assert project["scripts"] == {"continuity": "continuity.__main__:main"}
    # the dev extra names the others through the distribution's own name
    assert project["optional-dependencies"]["dev"][0].startswith(f"{DISTRIBUTION}[")


def test_the_installed_metadata_says_so() -> None:
    try:
        dist = distribution(DISTRIBUTION)
    except PackageNotFoundError:
        pytest.skip(f"{DISTRIBUTION} is not installed (pip install -e .)")
    assert dist.metadata["Name"] == DISTRIBUTION
    # one version: pyproject reads it from continuity.__version__, which --version prints
    assert PYPROJECT["project"]["dynamic"] == ["version"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "continuity._version.__version__"
    }
    assert dist.version == continuity.__version__
    scripts = {e.name: e.value for e in dist.entry_points if e.group == "console_scripts"}
    assert scripts == {"continuity": "continuity.__main__:main"}
    extras = set(dist.metadata.get_all("Provides-Extra") or [])
    assert {"postgres", "serve", "mcp", "langgraph", "openai-agents"} <= extras


def _tracked() -> list[Path]:
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout: the tracked files are not known")
    names = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    return [ROOT / n.decode() for n in names if n]


def _wrong_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if _WRONG.search(line)]


def test_the_pattern_finds_the_old_install_lines_and_not_the_new() -> None:
    old = [
        "pip install continuity",
        "pip install 'continuity[postgres]'",
        '`pip install -U "continuity[serve]"`',
        "uv tool install continuity",
        "pipx install continuity",
        'dependencies = ["continuity[mcp]"]',
        "the extra (``continuity[langgraph]``)",
    ]
    new = [
        f"pip install '{DISTRIBUTION}[postgres]'",
        f"pip install {DISTRIBUTION}",
        "pipx install .",
        "pip install -e '.[dev]'",
        "pip install continuity-other",
        "from continuity import open_store",
        r're.compile(r"from (continuity[\w.]*) import")',
        "agent-continuity[postgres,serve]",
    ]
    assert [line for line in old if not _wrong_lines(line)] == []
    assert [line for line in new if _wrong_lines(line)] == []


@pytest.mark.slow
def test_no_file_tells_users_to_install_the_other_continuity() -> None:
    found = []
    for path in _tracked():
        name = path.relative_to(ROOT).as_posix()
        if name.startswith(_MAY_NAME_IT) or not path.is_file():
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue  # not text: no install line
        found += [f"{name}: {line}" for line in _wrong_lines(text)]
    assert found == [], f"install lines that name `continuity`, not {DISTRIBUTION}"


def test_a_missing_extra_names_the_distribution() -> None:
    # installed from the index; from a checkout the line names it (tests/errors/)
    where = Installed(DISTRIBUTION, False, "pip", sys.executable, True)
    assert install_line("postgres", where) == "pip install 'agent-continuity[postgres]'"


@pytest.mark.slow
def test_a_wheel_of_the_checkout_installs_agent_continuity_with_the_command(
    tmp_path: Path,
) -> None:
    """What ``pipx install .`` or ``uv tool install .`` install: a wheel built from the
    checkout, whose metadata names the distribution and whose entry point is the command."""
    if not (ROOT / "pyproject.toml").exists():
        pytest.skip("not a source checkout")
    built = subprocess.run(
        [
            sys.executable,
            *("-m", "pip", "wheel", "--no-deps", "--quiet"),
            *("--wheel-dir", str(tmp_path), str(ROOT)),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if built.returncode != 0 and "setuptools" in built.stderr and "satisf" in built.stderr:
        pytest.skip(f"no build backend from the package index here: {built.stderr.strip()}")
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("*.whl")
    version = continuity.__version__
    assert wheel.name == f"agent_continuity-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as z:
        info = f"agent_continuity-{version}.dist-info"
        metadata = z.read(f"{info}/METADATA").decode()
        entry_points = z.read(f"{info}/entry_points.txt").decode()
        packages = {n.split("/")[0] for n in z.namelist()}
    assert f"\nName: {DISTRIBUTION}\n" in metadata
    assert "[console_scripts]\ncontinuity = continuity.__main__:main" in entry_points
    assert packages == {"continuity", info}  # the import package, and nothing else of ours
