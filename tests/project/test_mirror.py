"""The tests mirror the package (issue 38): ``tests/<path>/`` for every package
``continuity/<path>/``, no test folder that mirrors nothing, every folder a package, and the tests
that need something from outside the venv in ``tests/outside/`` and nowhere else. Each failure
says what to move where.

Checked on the source, without importing or collecting the tests: a marker counts where the code
names it (``pytest.mark.browser``, ``mark.browser``, ``add_marker("browser")``).
"""

from __future__ import annotations

import ast
import functools
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Final, TypeGuard

from tests.conftest import NEEDS

ROOT: Final = Path(__file__).resolve().parents[2]
PACKAGE: Final = ROOT / "continuity"
TESTS: Final = ROOT / "tests"

NOT_MIRRORS: Final = {
    "support": "helpers shared by the test folders (imported, never collected)",
    "data": "the suite's committed data files",
    "project": "the project's own rules, and the tools' and the test harness's own tests",
    "docs": "the documentation's examples and its site",
    "outside": "the tests that need something from outside the venv",
    "agents/fifth_agent": "Scribe, a made-up agent that stands for an outside package: its "
    "adapter and its test in one folder, as a third party's would be (ADR 0046)",
}
"""The folders of ``tests/`` (with what is below them) that mirror nothing in ``continuity/``."""

UNTESTED_PACKAGES: Final = {
    "testing": "the contract suites themselves, run (not tested) by every backend's tests: "
    "tests/store/test_store.py, tests/store/postgres/test_store.py, "
    "tests/context/test_context_contract.py",
}
"""Packages of ``continuity/`` without a test folder of their own, each with the reason."""

OUTSIDE: Final = {
    "agents": ("clients", "a real agent client from npm"),
    "browser": ("browser", "headless Chromium"),
    "upstream": ("upstream", "a framework's own test suite from its sdist"),
    "pgbouncer": ("pgbouncer", "PgBouncer"),
}
"""The markers of what a test needs from outside the venv: the folder of ``tests/outside/``
its tests live in, and what it needs."""

_NAMES_A_MARKER: Final = re.compile(r"\bmark\.(?:" + "|".join(OUTSIDE) + r")\b|add_marker")


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _folders(top: Path) -> Iterator[Path]:
    for path in sorted(top.rglob("*")):
        parts = path.relative_to(top).parts
        if path.is_dir() and "__pycache__" not in parts and not parts[0].startswith("."):
            yield path


def _packages() -> list[str]:
    """Every package below ``continuity/``, as a path relative to it (``agents/base``)."""
    return [
        folder.relative_to(PACKAGE).as_posix()
        for folder in _folders(PACKAGE)
        if (folder / "__init__.py").is_file()
    ]


def _test_folders() -> list[str]:
    """Every folder of ``tests/`` that must mirror something, relative to ``tests/``."""
    folders = (folder.relative_to(TESTS) for folder in _folders(TESTS))
    return [
        folder.as_posix()
        for folder in folders
        if not any(folder.is_relative_to(known) for known in NOT_MIRRORS)
    ]


# --- markers, read from the source ------------------------------------------------------------


def _marker_of(node: ast.AST) -> str | None:
    """The marker ``node`` names: ``pytest.mark.X`` or ``mark.X``, or ``add_marker("X")``."""
    if isinstance(node, ast.Attribute):
        base = node.value
        if (isinstance(base, ast.Attribute) and base.attr == "mark") or (
            isinstance(base, ast.Name) and base.id == "mark"
        ):
            return node.attr
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "add_marker"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        return node.args[0].value
    return None


def _outside_marks(nodes: list[ast.expr] | ast.AST) -> set[str]:
    """The outside markers named anywhere in ``nodes``."""
    roots = nodes if isinstance(nodes, list) else [nodes]
    found = {_marker_of(node) for root in roots for node in ast.walk(root)}
    return {name for name in found if name in OUTSIDE}


@functools.cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _marker_lines(path: Path) -> Iterator[tuple[int, str]]:
    """Where the module at ``path`` names an outside marker: (line, marker)."""
    if not _NAMES_A_MARKER.search(path.read_text(encoding="utf-8")):
        return
    for node in ast.walk(_tree(path)):
        name = _marker_of(node)
        if name in OUTSIDE:
            yield getattr(node, "lineno", 0), name


def _pytestmark(body: list[ast.stmt]) -> set[str]:
    """The outside markers of a module's or a class's ``pytestmark``."""
    marks: set[str] = set()
    for stmt in body:
        if isinstance(stmt, ast.Assign):
            targets, value = stmt.targets, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets, value = [stmt.target], stmt.value
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in targets):
            marks |= _outside_marks(value)
    return marks


def _is_test(node: ast.stmt) -> TypeGuard[ast.FunctionDef | ast.AsyncFunctionDef]:
    return isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test")


def _unmarked_tests(path: Path) -> Iterator[str]:
    """The tests of the module at ``path`` that carry no outside marker."""
    module = _tree(path)
    module_marks = _pytestmark(module.body)
    for node in module.body:
        if _is_test(node):
            if not module_marks | _outside_marks(node.decorator_list):
                yield node.name
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            class_marks = module_marks | _outside_marks(node.decorator_list)
            class_marks |= _pytestmark(node.body)
            for method in node.body:
                if _is_test(method) and not class_marks | _outside_marks(method.decorator_list):
                    yield f"{node.name}::{method.name}"


# --- the mirror -------------------------------------------------------------------------------


def test_every_package_has_its_test_folder() -> None:
    packages = _packages()
    missing = [
        f"continuity/{package}/ has no tests/{package}/: make it (with an __init__.py) and move "
        f"the tests of continuity.{package.replace('/', '.')} there from wherever they are, or "
        "list the package in UNTESTED_PACKAGES with the reason it has none"
        for package in packages
        if package not in UNTESTED_PACKAGES and not (TESTS / package).is_dir()
    ]
    stale = [
        f"UNTESTED_PACKAGES lists {package}, but "
        + (
            f"tests/{package}/ exists now: take it off the list"
            if (TESTS / package).is_dir()
            else f"continuity/{package}/ is no package: take it off the list"
        )
        for package in UNTESTED_PACKAGES
        if package not in packages or (TESTS / package).is_dir()
    ]
    assert not missing + stale, "\n".join(missing + stale)


def test_every_test_folder_mirrors_a_package_or_a_module() -> None:
    gone = [
        f"NOT_MIRRORS lists tests/{known}/, which is not there: take it off the list"
        for known in NOT_MIRRORS
        if not (TESTS / known).is_dir()
    ]
    packages = set(_packages())
    astray = [
        f"tests/{folder}/ mirrors nothing: there is no package continuity/{folder}/ and no "
        f"module continuity/{folder}.py. Move its tests into the folder of the package or "
        "module they test (tests/project/ for project-wide checks and the tools' tests, "
        "tests/outside/ for tests that need something from outside the venv)"
        for folder in _test_folders()
        if folder not in packages and not (PACKAGE / f"{folder}.py").is_file()
    ]
    assert not gone + astray, "\n".join(gone + astray)


def test_every_test_folder_is_a_package() -> None:
    # The suite's modules are tests.<folder>.test_x: two folders may each hold a test_ingest.py.
    bare = [
        f"{_rel(folder)}/ holds Python files but no __init__.py: add one (a docstring saying "
        "what it tests)"
        for folder in _folders(TESTS)
        if any(folder.glob("*.py")) and not (folder / "__init__.py").is_file()
    ]
    assert not bare, "\n".join(bare)


# --- what needs something from outside the venv -----------------------------------------------


def test_the_outside_markers_are_registered_and_left_out_by_fast() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    declared = config["tool"]["pytest"]["ini_options"]["markers"]
    registered = {line.split(":", 1)[0].strip() for line in declared}
    assert set(OUTSIDE) <= registered, f"not in pyproject.toml: {set(OUTSIDE) - registered}"
    # --fast does not even import tests/outside/: that is right only while all it holds is
    # left out by --fast anyway
    assert set(OUTSIDE) <= set(NEEDS), f"not in conftest's NEEDS: {set(OUTSIDE) - set(NEEDS)}"
    folders = {folder for folder, _ in OUTSIDE.values()}
    unknown = [
        f"tests/outside/{path.name}/ is the folder of no marker: add its marker to OUTSIDE "
        "here (and to pyproject.toml and conftest's NEEDS), or move its tests"
        for path in sorted((TESTS / "outside").iterdir())
        if path.is_dir() and path.name != "__pycache__" and path.name not in folders
    ]
    assert not unknown, "\n".join(unknown)


def test_tests_that_need_something_outside_live_in_tests_outside() -> None:
    misplaced: list[str] = []
    for path in sorted(TESTS.rglob("*.py")):
        named = sorted(_marker_lines(path))
        homes = [TESTS / "outside" / OUTSIDE[marker][0] for _, marker in named]
        if named and not any(path.is_relative_to(home) for home in homes):
            line, marker = named[0]
            misplaced.append(
                f"{_rel(path)}:{line} is marked {marker} (needs {OUTSIDE[marker][1]}): move it "
                f"to {_rel(homes[0])}/"
            )
    assert not misplaced, "\n".join(misplaced)


def test_every_test_in_tests_outside_needs_something_outside() -> None:
    markers = ", ".join(OUTSIDE)
    unmarked = [
        f"{_rel(path)}::{test} is marked none of {markers}: mark it with what it needs, or "
        "move it to the folder of what it tests (a tool's test goes to tests/project/)"
        for path in sorted((TESTS / "outside").rglob("test_*.py"))
        for test in _unmarked_tests(path)
    ]
    assert not unmarked, "\n".join(unmarked)
