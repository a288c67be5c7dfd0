"""Regenerate the Claude Code plugin (and its marketplace) from the install code.

    python tools/gen_plugin.py          write the plugin's files
    python tools/gen_plugin.py --check  exit 1 and list the files that differ from the code

The plugin gives what ``continuity install claude-code`` writes, with ``continuity`` from PATH
instead of an absolute path: the same hook events, matchers, timeouts and ``async`` flags
(:func:`continuity.agents.claude_code.install.hook_groups`) and the MCP server
(:func:`continuity.agents.base.mcp.server_entry`). ``tests/agents/claude_code/test_plugin.py``
checks that the committed files are these and that they follow the documented schemas.

    .claude-plugin/marketplace.json                  the marketplace: this repository
    plugins/continuity/.claude-plugin/plugin.json    the plugin's manifest
    plugins/continuity/hooks/hooks.json              its hooks (loaded from the default place)
    plugins/continuity/.mcp.json                     its MCP server
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from continuity.agents.base.mcp import SERVER_NAME, server_entry
from continuity.agents.claude_code.install import hook_groups

__all__ = ["FILES", "PLUGIN_DIR", "ROOT", "main", "render", "stale_files", "write_files"]

ROOT: Final = Path(__file__).resolve().parent.parent
PLUGIN: Final = "continuity"
MARKETPLACE: Final = "continuity"
PLUGIN_DIR: Final = f"plugins/{PLUGIN}"
DESCRIPTION: Final = (
    "Archive every Claude Code session in continuity's hash-chained log, restore what a "
    "compaction dropped, and let Claude search and read its own archive over MCP"
)
OWNER: Final = {"name": "continuity"}
KEYWORDS: Final = ["memory", "archive", "compaction", "mcp", "hooks", "context"]


def _version() -> str:
    """The package's version (pyproject reads it from ``continuity.__version__``)."""
    from continuity._version import __version__

    return __version__


def _dump(obj: Any) -> bytes:
    return (json.dumps(obj, indent=2, ensure_ascii=True) + "\n").encode("ascii")


def _marketplace() -> Any:
    return {
        "name": MARKETPLACE,
        "owner": OWNER,
        "metadata": {"description": "The continuity plugin for Claude Code"},
        "plugins": [
            {
                "name": PLUGIN,
                "source": f"./{PLUGIN_DIR}",
                "description": DESCRIPTION,
                "version": _version(),
                "license": "MIT",
                "keywords": KEYWORDS,
            }
        ],
    }


def _manifest() -> Any:
    return {
        "name": PLUGIN,
        "version": _version(),
        "description": DESCRIPTION,
        "author": OWNER,
        "license": "MIT",
        "keywords": KEYWORDS,
    }


def _hooks() -> Any:
    return {
        "description": "continuity archives the session and restores context after compaction "
        "(needs `continuity` on PATH)",
        # exec: the hook replaces the shell (see hook_shell_command in agents/base/install.py)
        "hooks": hook_groups(lambda slug: f"exec continuity hook {slug}"),
    }


def _mcp() -> Any:
    return {"mcpServers": {SERVER_NAME: server_entry("claude-code", ["continuity", "mcp"])}}


FILES: Final[dict[str, Callable[[], Any]]] = {
    ".claude-plugin/marketplace.json": _marketplace,
    f"{PLUGIN_DIR}/.claude-plugin/plugin.json": _manifest,
    f"{PLUGIN_DIR}/hooks/hooks.json": _hooks,
    f"{PLUGIN_DIR}/.mcp.json": _mcp,
}


def render(path: str) -> bytes:
    return _dump(FILES[path]())


def stale_files(root: Path = ROOT) -> list[str]:
    """The plugin's files that are missing or differ from what the code renders."""
    stale = []
    for path in FILES:
        target = root / path
        if not target.is_file() or target.read_bytes() != render(path):
            stale.append(path)
    return stale


def write_files(root: Path = ROOT) -> list[str]:
    """Write the files that differ; return their paths."""
    written = []
    for path in stale_files(root):
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(render(path))
        written.append(path)
    return written


def _diff(root: Path, path: str) -> str:
    target = root / path
    old = target.read_text(encoding="utf-8") if target.is_file() else ""
    new = render(path).decode("ascii")
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), path, f"{path} (code)"
    )
    return "".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if a file differs"
    )
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_files()
        for path in stale:
            sys.stdout.write(_diff(ROOT, path))
        if stale:
            print(f"stale: {', '.join(stale)} (run python tools/gen_plugin.py)", file=sys.stderr)
        return 1 if stale else 0
    for path in write_files():
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
