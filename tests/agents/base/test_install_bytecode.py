"""``continuity install claude-code`` compiles the bytecode of what a hook imports (issue 14),
so that hooks start fast where Python may not write ``.pyc`` files itself."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import continuity
from continuity.agents.base import install
from continuity.agents.base.install import HOOK_PACKAGES, compile_bytecode
from continuity.cli.app import app


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A small package ``speedpkg`` (two modules, one in a sub-package) on ``sys.path``."""
    root = tmp_path / "site"
    pkg = root / "speedpkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from speedpkg import sub\n")
    (pkg / "sub" / "__init__.py").write_text("VALUE = 'from source'\n")
    monkeypatch.syspath_prepend(str(root))
    return pkg


def _quiet_import(root: Path, module: str) -> subprocess.CompletedProcess[str]:
    """``import module`` in a fresh process that may not write bytecode, verbose (``-v``
    names the file each module's code came from)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"}
    env.update(PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=str(root))
    code = f"import sys, {module}; print(sys.flags.dont_write_bytecode)"
    return subprocess.run(
        [sys.executable, "-v", "-c", code], capture_output=True, text=True, env=env, timeout=60
    )


def test_the_compiled_files_are_used_by_a_process_that_may_not_write_them(
    package: Path,
) -> None:
    sources = [package / "__init__.py", package / "sub" / "__init__.py"]
    (report,) = compile_bytecode(("speedpkg",))
    assert (report.package, report.folder, report.sources) == ("speedpkg", package, 2)
    assert (report.compiled, report.missing) == (2, 0)
    assert report.line().startswith("bytecode: 2 modules of speedpkg")
    for source in sources:
        assert Path(importlib.util.cache_from_source(str(source))).is_file()

    proc = _quiet_import(package.parent, "speedpkg")
    assert proc.returncode == 0 and proc.stdout.strip() == "1", proc.stderr
    for source in sources:
        assert f"code object from '{importlib.util.cache_from_source(str(source))}'" in proc.stderr

    # Again: nothing is stale, nothing is written.
    (again,) = compile_bytecode(("speedpkg",))
    assert (again.compiled, again.missing) == (0, 0)
    # A changed source is compiled again (its old bytecode would be ignored).
    sources[1].write_text("VALUE = 'changed, and longer than before'\n")
    (changed,) = compile_bytecode(("speedpkg",))
    assert (changed.compiled, changed.missing) == (1, 0)


def test_a_folder_it_cannot_write_is_reported_with_what_to_do(
    package: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import compileall

    def refused(*args: object, **kwargs: object) -> bool:
        raise PermissionError("read-only")

    monkeypatch.setattr(compileall, "compile_file", refused)
    (report,) = compile_bytecode(("speedpkg",))
    assert (report.sources, report.compiled, report.missing) == (2, 0, 2)
    line = report.line()
    assert "2 of 2 modules of speedpkg" in line and "not writable" in line
    assert "PYTHONPYCACHEPREFIX" in line


def test_a_pycache_prefix_receives_the_bytecode(
    package: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prefix = tmp_path / "pycache"
    monkeypatch.setattr(sys, "pycache_prefix", str(prefix))
    (report,) = compile_bytecode(("speedpkg",))
    assert (report.compiled, report.missing) == (2, 0)
    assert not (package / "__pycache__").exists()
    assert any(prefix.rglob("*.pyc"))


def test_packages_that_are_not_installed_or_not_folders_are_skipped() -> None:
    assert compile_bytecode(("no_such_package_here", "json.decoder")) == []


def test_install_compiles_what_a_hook_imports_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("CONTINUITY_HOME", str(tmp_path / "store"))
    for _run in range(2):  # the second install changes no setting and still checks the bytecode
        res = CliRunner().invoke(app, ["install", "claude-code"])
        assert res.exit_code == 0, res.output
        lines = [line for line in res.output.splitlines() if line.startswith("bytecode: ")]
        assert [line.split()[4] for line in lines] == list(HOOK_PACKAGES)
        assert all("could not" not in line for line in lines)
    # Every module of the package has current bytecode where this interpreter looks for it.
    folder = Path(continuity.__file__).parent
    sources = [p for p in folder.rglob("*.py") if "__pycache__" not in p.parts]
    assert sources and all(install._current(p) for p in sources)
