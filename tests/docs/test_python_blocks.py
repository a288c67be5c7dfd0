"""Every Python code block of README.md and docs/**/*.md runs, and prints what its ``# →``
comments say.

A line ``print(...)  # → text`` (or a ``print`` line followed by a comment line ``# → text``)
must print ``text``; ``…`` in ``text`` stands for anything. Each block runs on its own, in an
empty folder, so the docs cannot rot.
"""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
_EXPECT = re.compile(r"#\s*→\s*(.*)$")


def _blocks() -> list[Any]:
    """Each Python block with its page and first line's number; a block that imports LangGraph
    or the Agents SDK is marked ``integrations`` (their imports take seconds)."""
    found = []
    for page in _pages():
        text = page.read_text()
        name = str(page.relative_to(ROOT))
        for m in _BLOCK.finditer(text):
            code = m.group(1)
            sdk = re.search(r"^from (langgraph|agents)\b", code, re.M) is not None
            marks = [pytest.mark.integrations] if sdk else []
            where = f"{name}:{text.count(chr(10), 0, m.start()) + 2}"
            found.append(pytest.param(where, code, marks=marks, id=where))
    return found


def _expectations(code: str) -> dict[int, str]:
    """Line number (1-based, in the block) of each print → what it must print."""
    lines = code.splitlines()
    found: dict[int, str] = {}
    for i, line in enumerate(lines, start=1):
        match = _EXPECT.search(line)
        if match is None:
            continue
        before = line[: match.start()].strip()
        if before:
            assert "print(" in before, f"block line {i}: `# →` after something that is no print"
            found[i] = match.group(1).strip()
        else:  # a comment line: it belongs to the print just above
            assert i > 1 and "print(" in lines[i - 2], f"block line {i}: no print above"
            found[i - 1] = match.group(1).strip()
    return found


def _matches(expected: str, printed: str) -> bool:
    pattern = ".*".join(re.escape(part) for part in expected.split("…"))
    return re.fullmatch(pattern, printed, re.S) is not None


def test_the_pages_have_python_blocks_with_expectations() -> None:
    blocks = _blocks()
    assert len(blocks) >= 8
    assert sum(len(_expectations(block.values[1])) for block in blocks) >= 50
    readme = [block for block in blocks if str(block.values[0]).startswith("README.md:")]
    assert readme, "the README shows one Python example"
    assert all(_expectations(block.values[1]) for block in readme)


@pytest.mark.parametrize(("where", "code"), _blocks())
def test_a_page_s_python_block_runs_and_prints_what_it_says(
    where: str, code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("CONTINUITY_HOME", "XDG_DATA_HOME"):
        monkeypatch.delenv(name, raising=False)
    printed: dict[int, list[str]] = {}

    def recording_print(*args: object, sep: str = " ", **_kw: object) -> None:
        line = sys._getframe(1).f_lineno
        printed.setdefault(line, []).append(sep.join(str(a) for a in args))

    namespace: dict[str, object] = {"__name__": "docs_example", "print": recording_print}
    # A block that calls the Agents SDK's Runner.run_sync leaves the thread's default loop open
    # (on purpose, the SDK says): give the block one, and close it after.
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        exec(compile(code, where, "exec"), namespace)
    finally:
        asyncio.set_event_loop(None)
        loop.close()
    page, start = where.rsplit(":", 1)
    for line, expected in _expectations(code).items():
        at = f"{page} line {int(start) + line - 1}"
        outputs = printed.get(line)
        assert outputs, f"{at} printed nothing"
        for out in outputs:
            assert _matches(expected, out), f"{at} printed {out!r}, the page says {expected!r}"
