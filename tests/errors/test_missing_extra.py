"""A missing extra names a command that works from where continuity was installed
(``continuity._install``): the checkout it runs from or was built from, with the installer that
manages its environment; the name on the index only when it came from there."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import continuity
from continuity._install import Installed, install_line, installed, installer_of, source_of
from continuity.errors import DISTRIBUTION, MissingExtra

CHECKOUT = Path(continuity.__file__).resolve().parents[1]


def test_from_this_checkout_the_line_installs_the_checkout_editably() -> None:
    where = installed()
    assert (where.source, where.editable) == (str(CHECKOUT), True)
    exc = MissingExtra("a PostgreSQL store", "postgres", "psycopg")
    assert str(exc) == (
        "a PostgreSQL store needs the `postgres` extra (psycopg is missing): "
        + install_line("postgres")
    )
    assert str(exc).endswith(f"install -e '{CHECKOUT}[postgres]'")
    assert isinstance(exc, ImportError) and exc.name == "psycopg"


def test_the_line_works_in_a_shell(tmp_path: Path) -> None:
    """The line, run by a shell with pip swapped for a stub, asks for the checkout's extra."""
    stub = tmp_path / "python"
    stub.write_text('#!/bin/sh\nprintf "%s\\n" "$@"\n')
    stub.chmod(0o755)
    where = installed()._replace(python=str(stub), active=False, installer="pip")
    line = install_line("postgres", where)
    said = subprocess.run(["sh", "-c", line], capture_output=True, text=True, check=True)
    assert said.stdout.splitlines() == ["-m", "pip", "install", "-e", f"{CHECKOUT}[postgres]"]


def test_an_installed_copy_is_installed_again_from_the_folder_it_was_built_from(
    tmp_path: Path,
) -> None:
    site = tmp_path / "venv" / "lib" / "site-packages" / "continuity"
    source = tmp_path / "my checkout"
    source.mkdir()
    url = {"url": source.as_uri(), "dir_info": {}}
    assert source_of(site, url) == (str(source), False)
    editable = {"url": source.as_uri(), "dir_info": {"editable": True}}
    assert source_of(site, editable) == (str(source), True)


@pytest.mark.parametrize(
    "direct_url",
    [
        None,  # from the index (a wheel downloaded by pip records no direct_url.json)
        {"url": "https://example.org/agent_continuity-0.1.0-py3-none-any.whl", "archive_info": {}},
        {"url": "file:///no/such/folder", "dir_info": {}},  # a checkout deleted since
    ],
    ids=["index", "archive", "gone"],
)
def test_otherwise_the_name_on_the_index(tmp_path: Path, direct_url: dict[str, object]) -> None:
    site = tmp_path / "venv" / "lib" / "site-packages" / "continuity"
    assert source_of(site, direct_url) == (DISTRIBUTION, False)
    where = Installed(DISTRIBUTION, False, "pip", "/venv/bin/python", True)
    assert install_line("serve", where) == "pip install 'agent-continuity[serve]'"


def test_a_checkout_is_only_a_checkout_of_this_distribution(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "something-else"\n')
    assert source_of(tmp_path / "continuity", None) == (DISTRIBUTION, False)
    (tmp_path / "pyproject.toml").write_text(f'[project]\nname = "{DISTRIBUTION}"\n')
    assert source_of(tmp_path / "continuity", None) == (str(tmp_path), True)


@pytest.mark.parametrize(
    ("prefix", "recorded", "installer"),
    [
        ("/home/me/.local/share/pipx/venvs/agent-continuity", "pip", "pipx"),
        ("/home/me/.local/pipx/venvs/agent-continuity", "pip", "pipx"),
        ("/home/me/.local/share/uv/tools/agent-continuity", "uv", "uv tool"),
        ("/work/app/.venv", "uv\n", "uv"),
        ("/work/app/.venv", "pip\n", "pip"),
        ("/usr", "", "pip"),
    ],
)
def test_the_installer_that_manages_the_environment(
    prefix: str, recorded: str, installer: str
) -> None:
    assert installer_of(Path(prefix), recorded) == installer


@pytest.mark.parametrize(
    ("where", "line"),
    [
        (
            Installed("/src/checkout", True, "pip", "/src/checkout/.venv/bin/python", False),
            "/src/checkout/.venv/bin/python -m pip install -e '/src/checkout[postgres]'",
        ),
        (
            Installed("/src/checkout", True, "pip", "/src/checkout/.venv/bin/python", True),
            "pip install -e '/src/checkout[postgres]'",
        ),
        (
            Installed(
                "/src/checkout", False, "pipx", "/p/venvs/agent-continuity/bin/python", False
            ),
            "pipx install --force '/src/checkout[postgres]'",
        ),
        (
            Installed("/src/checkout", True, "uv tool", "/u/tools/x/bin/python", False),
            "uv tool install --force --editable '/src/checkout[postgres]'",
        ),
        (
            Installed("/my src", True, "uv", "/my src/.venv/bin/python", False),
            "uv pip install --python '/my src/.venv/bin/python' -e '/my src[postgres]'",
        ),
        (
            Installed(DISTRIBUTION, False, "pipx", "/p/bin/python", False),
            "pipx install --force 'agent-continuity[postgres]'",
        ),
    ],
    ids=["venv", "active-venv", "pipx", "uv-tool", "uv-pip", "pipx-index"],
)
def test_each_installer_s_line(where: Installed, line: str) -> None:
    assert install_line("postgres", where) == line


def test_the_error_path_alone_reads_package_metadata() -> None:
    code = (
        "import sys; import continuity.errors as e; "
        "assert 'importlib.metadata' not in sys.modules; "
        "str(e.MissingExtra('x', 'postgres')); "
        "assert 'importlib.metadata' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=CHECKOUT)


def test_an_unreadable_direct_url_is_ignored(tmp_path: Path) -> None:
    site = tmp_path / "continuity"
    assert source_of(site, json.loads('{"url": 3}')) == (DISTRIBUTION, False)
