"""What the README, getting-started and CONTRIBUTING say an install brings is what it brings: the
core's count exactly, the dev extra's within a tenth. Counted as pip resolves them: this
checkout's requirements from its ``pyproject.toml``, the others' from the installed
distributions' metadata (markers evaluated for this Python, extras followed), so no index is
asked; an environment that lacks one of them skips that count, saying why."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

from continuity.errors import DISTRIBUTION

ROOT = Path(__file__).resolve().parents[2]
CLAIMS = [
    ("README.md", r"installs the core \((\d+)\s+packages", ()),
    ("docs/getting-started.md", r"the core alone \((\d+) packages", ()),
    ("docs/getting-started.md", r"`dev` extra \(about (\d+) packages", ("dev",)),
    ("CONTRIBUTING.md", r"About (\d+)\s+packages", ("dev",)),
]


def _requirements(dist_name: str, key: str) -> list[str] | None:
    """The requirements of ``dist_name``: this checkout's own from its ``pyproject.toml`` (an
    installed copy's metadata may be older), any other's from its installed metadata (None
    when it is not installed)."""
    if key == DISTRIBUTION:
        project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
        extras = project.get("optional-dependencies", {})
        return [
            *project["dependencies"],
            *(f"{r}; extra == '{extra}'" for extra, reqs in extras.items() for r in reqs),
        ]
    try:
        return metadata.distribution(dist_name).requires or []
    except metadata.PackageNotFoundError:
        return None


def closure(name: str, extras: tuple[str, ...]) -> tuple[set[str], set[str]]:
    """The distributions ``pip install 'name[extras]'`` installs (with ``name``), by their
    canonical names, and those of them not installed here (whose requirements are unknown)."""
    requirements = pytest.importorskip("packaging.requirements")
    utils = pytest.importorskip("packaging.utils")
    wanted: dict[str, frozenset[str]] = {}
    missing: set[str] = set()
    todo = [(name, frozenset(extras))]
    while todo:
        dist_name, asked = todo.pop()
        key = utils.canonicalize_name(dist_name)
        if key in wanted and asked <= wanted[key]:
            continue
        wanted[key] = wanted.get(key, frozenset()) | asked
        lines = _requirements(dist_name, key)
        if lines is None:
            missing.add(key)
            continue
        for line in lines:
            req = requirements.Requirement(line)
            if req.marker is None or any(
                req.marker.evaluate({"extra": extra}) for extra in wanted[key] or {""}
            ):
                todo.append((req.name, frozenset(req.extras)))
    return set(wanted), missing


@pytest.mark.parametrize(
    ("page", "claim", "extras"), CLAIMS, ids=[c[0] + str(c[2]) for c in CLAIMS]
)
def test_the_stated_package_count_is_what_pip_installs(
    page: str, claim: str, extras: tuple[str, ...]
) -> None:
    found = re.search(claim, (ROOT / page).read_text(encoding="utf-8"))
    assert found, f"{page} no longer says {claim!r}: update CLAIMS here"
    stated = int(found.group(1))
    names, missing = closure(DISTRIBUTION, extras)
    if missing:
        pytest.skip(f"not installed here, so their requirements are unknown: {sorted(missing)}")
    if extras:
        assert abs(len(names) - stated) <= len(names) / 10, (
            f"{page} says about {stated} packages; pip installs {len(names)}"
        )
    else:
        assert len(names) == stated, f"{page} says {stated} packages; pip installs {sorted(names)}"
