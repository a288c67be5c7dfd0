"""The generated pages (tools/docs_gen.py) are what a fresh render gives, so none can drift:
the CLI reference from every command's ``--help``, the API reference from the public names,
the ADR index from ``adr/``, and performance from ``docs/figures/bench.json``.

A failure means the page is stale: ``python -m tools.docs_gen`` writes them all again.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import continuity
from continuity.cli.app import COMMANDS, GROUPS
from tools import docs_gen

STALE = "is stale: run `python -m tools.docs_gen` and commit the page"


def _committed(rel: str) -> str:
    return (docs_gen.ROOT / rel).read_text()


@pytest.mark.slow  # a `--help` process per command
def test_the_cli_reference_is_every_command_s_own_help() -> None:
    assert _committed("docs/cli-reference.md") == docs_gen.cli_reference(), f"cli-reference {STALE}"


def test_the_cli_reference_has_a_section_for_every_command() -> None:
    headings = set(
        re.findall(r"^## `continuity ?([^`]*)`$", _committed("docs/cli-reference.md"), re.M)
    )
    listed = {path.split(" ")[0] for path in headings if path}
    assert set(COMMANDS) | set(GROUPS) <= listed
    assert "" in headings  # the root's help: the global options


def test_the_api_reference_names_every_public_name() -> None:
    page = _committed("docs/api.md")
    assert page == docs_gen.api_reference(), f"api {STALE}"
    at_root = {name for names in docs_gen.public_names().values() for name in names}
    assert at_root == set(continuity.__all__) - {"__version__"}
    documented = docs_gen.reference_modules()
    for module, names in docs_gen.public_names().items():
        assert set(names) <= set(documented[module]), module
        for name in names:  # linked from the list of the root's names
            assert f"[`{name}`][{module}.{name}]" in page
    for module in docs_gen.BESIDE_THE_LOOP:
        assert f"::: {module}\n" in page


def test_the_adr_index_lists_every_adr() -> None:
    page = _committed("docs/decisions.md")
    assert page == docs_gen.adr_index(), f"decisions {STALE}"
    for path in (docs_gen.ROOT / "adr").glob("[0-9][0-9][0-9][0-9]-*.md"):
        assert f"(adr/{path.name})" in page


def test_the_performance_page_shows_the_saved_figures() -> None:
    page = _committed("docs/performance.md")
    assert page == docs_gen.performance(), f"performance {STALE}"
    assert "cores" in page and "| target |" in page.replace("target | ok", "target |")


def test_an_adr_without_a_title_line_is_named(tmp_path: Path) -> None:
    (tmp_path / "0001-fine.md").write_text("# ADR 0001: Fine\n")
    assert "- [ADR 0001](adr/0001-fine.md): Fine" in docs_gen.adr_index(tmp_path)
    (tmp_path / "0002-untitled.md").write_text("Some words\n")
    with pytest.raises(SystemExit, match=r"0002-untitled\.md: the first line is not"):
        docs_gen.adr_index(tmp_path)
