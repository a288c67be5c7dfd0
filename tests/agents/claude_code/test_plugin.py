"""The Claude Code plugin in the repository: its files follow the documented schemas of a
marketplace (``.claude-plugin/marketplace.json``), a plugin manifest (``plugin.json``), a
plugin's ``hooks/hooks.json`` and ``.mcp.json``; and they are what the install code makes
(``tools/gen_plugin.py``), so the plugin and ``continuity install claude-code`` never drift.

The rules checked are those of Claude Code's plugins reference and marketplace reference:
the manifest lives in ``.claude-plugin/plugin.json``, ``name`` is required and kebab-case,
paths are relative and start with ``./``, a marketplace has ``name``, ``owner.name`` and
``plugins`` (each with ``name`` and ``source``), hooks use the settings' hook shape with
event names Claude Code knows, and ``async`` belongs to command hooks.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from continuity.agents.claude_code.install import ASYNC_EVENTS, HOOKS, plan_install
from tools.gen_plugin import FILES, PLUGIN_DIR, ROOT, render, stale_files

KEBAB = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
SEMVER = re.compile(r"^\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$")
RESERVED_MARKETPLACES = {
    "claude-code-marketplace",
    "claude-code-plugins",
    "claude-plugins-official",
    "anthropic-marketplace",
    "anthropic-plugins",
    "agent-skills",
    "life-sciences",
}
HOOK_EVENTS = {
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "PermissionRequest",
    "Notification",
    "UserPromptSubmit",
    "Stop",
    "SubagentStart",
    "SubagentStop",
    "PreCompact",
    "PostCompact",
    "SessionStart",
    "SessionEnd",
}
NO_MATCHER = {"UserPromptSubmit", "Stop", "SubagentStop", "SessionEnd", "Notification"}
MANIFEST_FIELDS = {
    "name",
    "version",
    "description",
    "author",
    "homepage",
    "repository",
    "license",
    "keywords",
    "commands",
    "agents",
    "skills",
    "hooks",
    "mcpServers",
    "lspServers",
    "outputStyles",
    "userConfig",
}
MARKETPLACE_METADATA = {"description", "version", "pluginRoot"}
PLUGIN = ROOT / PLUGIN_DIR


def load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def relative_path(value: object) -> Path:
    """A component path as the reference wants it: relative, starting with ``./``, inside."""
    assert isinstance(value, str) and value.startswith("./"), value
    assert ".." not in Path(value).parts, value
    return Path(value)


def test_the_committed_plugin_is_what_the_code_makes() -> None:
    assert stale_files() == [], "run: python tools/gen_plugin.py"
    for path in FILES:
        assert (ROOT / path).read_bytes() == render(path)


def test_the_marketplace_follows_its_schema() -> None:
    market = load(ROOT / ".claude-plugin" / "marketplace.json")
    assert isinstance(market, dict)
    assert KEBAB.match(market["name"]) and market["name"] not in RESERVED_MARKETPLACES
    assert isinstance(market["owner"], dict) and isinstance(market["owner"]["name"], str)
    assert set(market.get("metadata", {})) <= MARKETPLACE_METADATA
    assert "$schema" not in market
    plugins = market["plugins"]
    assert isinstance(plugins, list) and plugins
    names = [p["name"] for p in plugins]
    assert len(names) == len(set(names))
    for entry in plugins:
        assert KEBAB.match(entry["name"])
        folder = ROOT / relative_path(entry["source"])
        assert (folder / ".claude-plugin" / "plugin.json").is_file()
        manifest = load(folder / ".claude-plugin" / "plugin.json")
        assert manifest["name"] == entry["name"]
        assert SEMVER.match(entry["version"]) and entry["version"] == manifest["version"]


def test_the_manifest_follows_its_schema() -> None:
    manifest = load(PLUGIN / ".claude-plugin" / "plugin.json")
    assert isinstance(manifest, dict)
    assert set(manifest) <= MANIFEST_FIELDS
    assert KEBAB.match(manifest["name"])
    assert SEMVER.match(manifest["version"])
    assert isinstance(manifest["description"], str) and manifest["description"]
    assert isinstance(manifest["author"], dict) and isinstance(manifest["author"]["name"], str)
    assert all(isinstance(k, str) for k in manifest["keywords"])
    for field in ("commands", "agents", "skills", "hooks", "mcpServers", "outputStyles"):
        value = manifest.get(field)
        for path in [value] if isinstance(value, str) else value or []:
            if isinstance(path, str):
                assert (PLUGIN / relative_path(path)).exists()
    # Only the manifest is in .claude-plugin/; components sit at the plugin's root.
    assert sorted(p.name for p in (PLUGIN / ".claude-plugin").iterdir()) == ["plugin.json"]
    # hooks/hooks.json and .mcp.json are loaded from their default places: naming them in
    # the manifest as well would load them twice.
    assert "hooks" not in manifest and "mcpServers" not in manifest


def test_the_hooks_file_has_the_hook_shape() -> None:
    doc = load(PLUGIN / "hooks" / "hooks.json")
    assert set(doc) <= {"description", "hooks"}
    hooks = doc["hooks"]
    assert isinstance(hooks, dict) and set(hooks) <= HOOK_EVENTS
    for event, groups in hooks.items():
        assert isinstance(groups, list) and groups
        for group in groups:
            assert set(group) <= {"matcher", "hooks"}
            if event in NO_MATCHER:
                assert "matcher" not in group, event
            else:
                assert isinstance(group.get("matcher"), str)
            for handler in group["hooks"]:
                assert set(handler) <= {"type", "command", "timeout", "async"}
                assert handler["type"] == "command"
                assert re.fullmatch(r"exec continuity hook [a-z-]+", handler["command"])
                assert isinstance(handler["timeout"], int) and handler["timeout"] > 0
                assert handler.get("async", False) is (event in ASYNC_EVENTS)


def test_ingest_only_events_are_async_and_the_others_are_not() -> None:
    hooks = load(PLUGIN / "hooks" / "hooks.json")["hooks"]
    asynchronous = {event for event, groups in hooks.items() if groups[0]["hooks"][0].get("async")}
    assert asynchronous == {"PostToolUse", "Stop", "SubagentStop"}
    for sync in ("UserPromptSubmit", "PreCompact", "SessionStart"):
        assert "async" not in hooks[sync][0]["hooks"][0]


def test_the_mcp_file_starts_continuity_mcp_from_path() -> None:
    doc = load(PLUGIN / ".mcp.json")
    assert doc == {
        "mcpServers": {"continuity": {"type": "stdio", "command": "continuity", "args": ["mcp"]}}
    }


def test_the_plugin_hooks_are_what_install_claude_code_writes(tmp_path: Path) -> None:
    """The same events, matchers, timeouts and async flags; only the command differs (the
    install names the absolute entry point, the plugin ``continuity`` on PATH)."""
    settings = tmp_path / "settings.json"
    plan = plan_install(settings)
    assert plan.after is not None
    installed = json.loads(plan.after)["hooks"]
    slug = re.compile(r" hook ([a-z-]+)$")
    for groups in installed.values():
        for group in groups:
            for handler in group["hooks"]:
                m = slug.search(handler["command"])
                assert m is not None
                handler["command"] = f"exec continuity hook {m.group(1)}"
    assert installed == load(PLUGIN / "hooks" / "hooks.json")["hooks"]
    assert set(installed) == {event for event, *_ in HOOKS}
