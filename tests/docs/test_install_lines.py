"""The install lines the pages give work today: ``agent-continuity`` is not on the package index
yet (the name is reserved for the release), so no page tells a user to install it from there;
they install from a checkout (``pip install -e .``, ``pipx install .``, ``uv tool install .``),
and the README and getting-started say once why."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FROM_THE_INDEX = re.compile(
    r"\b(?:pip|pipx|uv(?: tool| pip)?)\s+(?:install|inject|add)\b[^`\n]*?"
    r"(?<![\w./-])['\"]?agent-continuity\b"
)


def _pages() -> list[Path]:
    return [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_the_pattern_finds_installs_from_the_index_only() -> None:
    wrong = [
        "pip install agent-continuity",
        "pip install 'agent-continuity[postgres]'",
        "`pipx install agent-continuity`",
        "uv tool install agent-continuity",
        'uv pip install -U "agent-continuity[serve]"',
    ]
    right = [
        "pip install -e '.[postgres]'",
        "pipx install --force '.[postgres]'",
        "uv tool install .",
        "the name `agent-continuity` is reserved for the release",
        "pip install -e '/src/agent-continuity[mcp]'",
    ]
    assert [line for line in wrong if not FROM_THE_INDEX.search(line)] == []
    assert [line for line in right if FROM_THE_INDEX.search(line)] == []


def test_no_page_installs_from_the_index() -> None:
    found = [
        f"{page.relative_to(ROOT)}:{number}: {line.strip()}"
        for page in _pages()
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1)
        if FROM_THE_INDEX.search(line)
    ]
    assert found == [], "install lines that fail until agent-continuity is published"


def test_the_readme_and_getting_started_say_the_name_is_reserved() -> None:
    for page in ("README.md", "docs/getting-started.md"):
        text = " ".join((ROOT / page).read_text(encoding="utf-8").split())
        assert "`agent-continuity` is reserved for the release" in text, page


def test_the_plugin_lines_name_the_marketplace_and_its_plugin() -> None:
    """``/plugin install <plugin>@<marketplace>``, as ``.claude-plugin/marketplace.json`` names
    them, wherever a page gives the two commands."""
    market = json.loads((ROOT / ".claude-plugin" / "marketplace.json").read_text(encoding="utf-8"))
    plugins = {entry["name"] for entry in market["plugins"]}
    given = {"README.md": 0, "docs/mcp.md": 0}
    for page in given:
        text = (ROOT / page).read_text(encoding="utf-8")
        assert "/plugin marketplace add " in text, page
        for plugin, marketplace in re.findall(r"^/plugin install (\S+)@(\S+)$", text, re.M):
            assert (plugin in plugins, marketplace) == (True, market["name"]), page
            given[page] += 1
    assert all(given.values()), given
