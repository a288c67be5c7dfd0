"""The CLI root: which module registers which command, and a run that imports only the module of
the command it names (building every command costs typer more than most commands' work)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from continuity.cli.app import COMMANDS, MODULES, app, build_app, command_of


def _names(modules: list[str] | tuple[str, ...]) -> list[str | None]:
    return [c.name for c in build_app(modules).registered_commands]


def test_the_whole_app_registers_every_command_in_help_order() -> None:
    assert _names(MODULES) == list(COMMANDS)
    assert [c.name for c in app.registered_commands] == list(COMMANDS)


@pytest.mark.parametrize("module", MODULES)
def test_each_module_registers_the_commands_mapped_to_it(module: str) -> None:
    assert _names([module]) == [name for name, owner in COMMANDS.items() if owner == module]


def test_an_unknown_module_is_refused() -> None:
    with pytest.raises(ValueError, match="no command module"):
        build_app(["nope"])


@pytest.mark.parametrize(
    ("args", "command"),
    [
        (["compile", "t"], "compile"),
        (["--store", "/s", "search", "q"], "search"),
        (["--store=/s", "log", "t"], "log"),
        (["--help"], None),
        (["--store", "/s", "--help"], None),
        ([], None),
        (["--store"], None),
        (["nope", "x"], "nope"),
        (["stats", "--store", "/s"], "stats"),
        (["--version"], None),
    ],
)
def test_the_command_is_found_after_the_global_options(
    args: list[str], command: str | None
) -> None:
    assert command_of(args) == command


def _cli_modules(tmp_path: Path, args: list[str], stdin: bytes = b"") -> tuple[int, list[str]]:
    """The exit code of ``continuity ARGS`` and the continuity.cli modules it imported."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import json, runpy, sys\n"
        f"sys.argv = ['continuity', *{args!r}]\n"
        "code = 0\n"
        "try:\n"
        "    runpy.run_module('continuity', run_name='__main__')\n"
        "except SystemExit as exc:\n"
        "    code = exc.code or 0\n"
        "mods = sorted(m for m in sys.modules if m.startswith('continuity.cli.'))\n"
        "sys.stderr.write(json.dumps([code, mods]))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTINUITY_")}
    done = subprocess.run(
        [sys.executable, str(probe)],
        input=stdin,
        capture_output=True,
        env=env,
        timeout=60,
        check=False,
    )
    report = json.loads(done.stderr.decode().splitlines()[-1])
    return int(report[0]), report[1]


@pytest.mark.slow
def test_a_run_imports_the_module_of_its_command_alone(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    code, modules = _cli_modules(tmp_path, ["--store", store, "init"])
    assert code == 0
    assert "continuity.cli.store_commands" in modules
    assert not {"continuity.cli.context_commands", "continuity.cli.agent_commands"} & set(modules)
    code, modules = _cli_modules(tmp_path, ["--store", store, "compile", "nobody"])
    assert code == 1  # no such thread: the command ran
    assert "continuity.cli.context_commands" in modules
    assert "continuity.cli.store_commands" not in modules
    code, modules = _cli_modules(tmp_path, ["--help"])
    assert code == 0
    assert {f"continuity.cli.{m}" for m in MODULES} <= set(modules)


@pytest.mark.slow
@pytest.mark.parametrize("where", ["before", "after"])
def test_a_hook_with_the_store_option_runs_without_the_cli(tmp_path: Path, where: str) -> None:
    store = str(tmp_path / "store")
    args = (
        ["--store", store, "hook", "stop"]
        if where == "before"
        else ["hook", "stop", "--store", store]
    )
    code, modules = _cli_modules(tmp_path, args, stdin=b"{}")
    assert code == 0  # a hook never fails Claude Code
    assert modules == []  # dispatched before typer and the command modules
    assert (tmp_path / "store" / "errors.log").is_file()  # the named store, not the default


def test_version_needs_no_command() -> None:
    from typer.testing import CliRunner

    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.startswith("continuity ")
