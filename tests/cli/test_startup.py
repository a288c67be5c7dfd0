"""What a fresh ``continuity`` process imports before it prints its version or its help (issue
32: the start-up is most of a short command's time). ``--version`` is answered before typer;
help is rendered without rich's markdown and traceback modules; no command module imports the
store, the frames or msgspec before its command runs. These are the modules, not timings:
``tools/bench/bench_startup.py`` times them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from continuity.cli.app import COMMANDS, GROUPS

_PROBE = """\
import json, sys
sys.argv = ["continuity", *json.loads(sys.argv[1])]
code = 0
try:
    from continuity.__main__ import main
    main()
except SystemExit as exc:
    code = exc.code or 0
import gc
sys.stderr.write("\\n" + json.dumps([code, sorted(sys.modules), gc.isenabled()]))
"""

_RICH_UNUSED = ("rich.markdown", "rich.traceback", "markdown_it", "pygments")
"""What typer's help renderer imports but this app's help does not use."""
_STORE = ("continuity.frames", "continuity.store.base", "continuity.store.jsonl", "numpy")
"""What a command's run needs and its help does not."""


def _run(tmp_path: Path, args: list[str]) -> tuple[int, str, set[str]]:
    """The exit code, stdout and imported modules of the console script's entry with ``args``
    (a fresh interpreter in an empty folder, with an empty store)."""
    return _probe(tmp_path, args)[:3]


def _probe(tmp_path: Path, args: list[str]) -> tuple[int, str, set[str], bool]:
    """:func:`_run`, and whether the garbage collector was on at the end."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTINUITY_")}
    env.update(CONTINUITY_HOME=str(tmp_path / "store"), COLUMNS="100")
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(args)],
        capture_output=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
        check=False,
    )
    code, modules, collecting = json.loads(done.stderr.decode().splitlines()[-1])
    return int(code), done.stdout.decode(), set(modules), bool(collecting)


def _under(modules: set[str], roots: tuple[str, ...]) -> set[str]:
    return {m for m in modules if m in roots or m.startswith(tuple(r + "." for r in roots))}


@pytest.mark.slow
def test_version_is_answered_before_typer(tmp_path: Path) -> None:
    code, out, modules = _run(tmp_path, ["--version"])
    assert code == 0
    assert out.startswith("continuity ")
    assert not _under(modules, ("typer", "click", "rich", "msgspec", *_STORE))
    assert not _under(modules, ("continuity.cli.app", "continuity.cli._common"))


@pytest.mark.slow
def test_version_prints_what_the_apps_option_prints(tmp_path: Path) -> None:
    # --store before --version goes through typer's eager option: the same line
    fast = _run(tmp_path, ["--version"])
    full = _run(tmp_path, ["--store", str(tmp_path / "s"), "--version"])
    assert full[:2] == fast[:2]
    assert "typer" in full[2]


@pytest.mark.slow
def test_the_root_help_builds_no_command_and_skips_unused_rich(tmp_path: Path) -> None:
    code, out, modules = _run(tmp_path, ["--help"])
    assert code == 0
    assert all(name in out for name in [*COMMANDS, *GROUPS])
    assert "typer.rich_utils" in modules  # the help is typer's, as before
    assert not _under(modules, (*_RICH_UNUSED, *_STORE))


@pytest.mark.slow
@pytest.mark.parametrize("command", [*COMMANDS, *GROUPS])
def test_a_commands_help_imports_its_module_alone_and_no_store(
    tmp_path: Path, command: str
) -> None:
    code, out, modules = _run(tmp_path, [command, "--help"])
    assert code == 0
    assert f"continuity {command}" in out  # its usage line
    mine = f"continuity.cli.{COMMANDS.get(command) or GROUPS[command]}"
    assert mine in modules
    others = {f"continuity.cli.{m}" for m in {*COMMANDS.values(), *GROUPS.values()}} - {mine}
    assert not others & modules
    heavy = _under(modules, (*_RICH_UNUSED, *_STORE))
    if command != "search":  # its fast path (continuity.cli.fast_search) runs first: msgspec
        heavy |= _under(modules, ("msgspec",))
    assert not heavy


@pytest.mark.slow
def test_a_command_runs_with_the_garbage_collector_on(tmp_path: Path) -> None:
    # off during the start-up (the console script), on again before the command's work
    code, out, _modules, collecting = _probe(tmp_path, ["init"])
    assert (code, collecting) == (0, True)
    assert out.startswith("created store at ")
    assert not _probe(tmp_path, ["--help"])[3]  # the root's help exits before the callback


def test_the_help_renderer_leaves_no_stand_in_behind() -> None:
    # in this process: after the renderer is imported, rich's modules import as themselves
    from continuity.cli.rich_help import import_help_renderer

    import_help_renderer()
    import rich.markdown
    import rich.traceback
    import typer.rich_utils

    assert rich.markdown.Markdown.__module__ == "rich.markdown"
    assert rich.traceback.Traceback.__module__ == "rich.traceback"
    used = vars(typer.rich_utils)["Markdown"]  # the stand-in (or the real class, if typer's
    text = used("*a*")  # renderer was imported before): either makes the real thing
    assert isinstance(text, rich.markdown.Markdown)
    assert isinstance(text, used)
