"""Every ```` ```console ```` block of README.md and docs/**/*.md runs and prints what it shows.

The format, the placeholders and the environment are in the docstring of tests/docs/console.py;
``python -m tests.docs.console PAGE.md`` prints what a page's blocks really print.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.console import ROOT, page_failures, pages, parse_page


def _id(page: Path) -> str:
    return str(page.relative_to(ROOT))


@pytest.mark.parametrize("page", pages(), ids=_id)
def test_a_page_follows_the_console_format(page: Path) -> None:
    parse_page(page.read_text(), _id(page))  # a FormatError names the line


def test_the_readme_has_console_blocks_that_run() -> None:
    blocks = parse_page((ROOT / "README.md").read_text(), "README.md")
    run = [block for block in blocks if block.skip is None]
    assert len(run) >= 2  # the quick start and Claude Code: the README is a short front door
    assert sum(len(block.commands) for block in run) >= 4


def test_the_docs_have_console_blocks_that_run() -> None:
    run = [
        block
        for page in pages()
        for block in parse_page(page.read_text(), _id(page))
        if block.skip is None
    ]
    assert len(run) >= 15
    assert sum(len(block.commands) for block in run) >= 35


@pytest.mark.slow
@pytest.mark.parametrize("page", pages(), ids=_id)
def test_a_page_s_console_blocks_print_what_they_show(page: Path) -> None:
    failures = page_failures(page)
    assert not failures, (
        f"{len(failures)} console example(s) of {_id(page)} differ:\n\n" + "\n\n".join(failures)
    )
