"""``continuity install codex``: continuity's hooks in Codex's ``hooks.json``, trusted.

Codex (0.169) reads lifecycle hooks from ``hooks.json`` beside a config layer
(``$CODEX_HOME/hooks.json`` for the user, ``<project>/.codex/hooks.json`` for a project it
trusts), in Claude Code's shape under a top-level ``hooks`` object. It runs a hook only once the
user has trusted it: ``[hooks.state."<key>"] trusted_hash = "sha256:…"`` in the user's
``config.toml``, where the key is ``<real path of hooks.json>:<event>:<group>:<handler>`` and
the hash is SHA-256 of the handler's normalized identity (what Codex's ``/hooks`` review writes
when the user trusts a hook, and what ``codex app-server``'s ``hooks/list`` reports as
``currentHash``). Installing is the user's decision to run exactly these commands, so the
install trusts them, and only them: a handler changed by hand has another hash and Codex asks
again.

The plans are :class:`~continuity.agents.claude_code.install.InstallPlan`\\ s with the Claude Code
install's dry-run diff, backup and byte-exact uninstall. ``config.toml`` is edited as text (the
trust tables here, the MCP server's ``[mcp_servers.continuity]`` by
:func:`continuity.agents.base.mcp.edit_entry`), every other byte kept; ``hooks.json``
as JSON, as Claude Code's settings are.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from continuity.agents.base.install import (
    InstallPlan,
    backup_path,
    confine,
    entry_point,
    hook_shell_command,
    read_backup,
    read_text,
    strip_handlers,
)
from continuity.errors import InvalidSettings

__all__ = [
    "HOOKS",
    "CodexInstall",
    "codex_folder",
    "hook_command",
    "hook_groups",
    "hook_hash",
    "hooks_disabled",
    "hooks_path",
    "plan_codex_install",
    "plan_codex_uninstall",
    "project_trusted",
    "trust_key",
]

Scope = Literal["user", "project"]

# (Codex event, our event slug, timeout in seconds). Every event Codex 0.169 fires that
# continuity uses: each archives what is new in the rollout; PreCompact archives before the
# compaction; PostCompact, SessionStart (source "compact") and UserPromptSubmit bring back the
# restore; Stop and SessionEnd archive the end of a turn and of the session.
HOOKS: Final = (
    ("SessionStart", "session-start", 30),
    ("UserPromptSubmit", "user-prompt-submit", 30),
    ("PostToolUse", "post-tool-use", 30),
    ("PreCompact", "pre-compact", 120),
    ("PostCompact", "post-compact", 60),
    ("Stop", "stop", 30),
    ("SessionEnd", "session-end", 3),  # Codex caps it at 3 s (and trusts it by the cap)
)
_OURS: Final = re.compile(
    r"(?:^|[\s/])continuity(?:\.exe)?['\"]?\s+hook\s+[a-z-]+\s+--agent\s+codex\s*$"
    r"|-m continuity hook [a-z-]+ --agent codex\s*$"
)
_LABEL: Final = re.compile(r"(?<!^)(?=[A-Z])")


def codex_folder(env: Mapping[str, str] | None = None, home: Path | None = None) -> Path:
    """``$CODEX_HOME``, or ``~/.codex``."""
    env = os.environ if env is None else env
    found = env.get("CODEX_HOME")
    return Path(found).expanduser() if found else (home or Path.home()) / ".codex"


def hooks_path(
    scope: Scope,
    project_dir: Path | None = None,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> tuple[Path, Path | None]:
    """The ``hooks.json`` of ``scope`` and the folder its writes must stay in (a project's;
    None for the user's). A project folder must exist."""
    if scope == "user":
        return codex_folder(env, home) / "hooks.json", None
    base = (project_dir or Path.cwd()).absolute()
    if not base.is_dir():
        raise InvalidSettings(f"no project folder {base} (--project names an existing folder)")
    return base / ".codex" / "hooks.json", base


def hook_command(slug: str, store: Path | str | None = None) -> str:
    """The shell command Codex runs for one of our hooks."""
    return hook_shell_command([*entry_point(), "hook", slug, "--agent", "codex"], store)


def hook_groups(command: Callable[[str], str]) -> dict[str, list[dict[str, Any]]]:
    """Our groups by Codex event: no matcher (every tool, every session source)."""
    return {
        event: [{"hooks": [{"type": "command", "command": command(slug), "timeout": timeout}]}]
        for event, slug, timeout in HOOKS
    }


def _label(event: str) -> str:
    """Codex's key label of an event: ``PostToolUse`` -> ``post_tool_use``."""
    return _LABEL.sub("_", event).lower()


def trust_key(path: Path, event: str, group: int, handler: int) -> str:
    """Codex's key of a hook: the real path of its ``hooks.json``, the event, the positions."""
    return f"{path.resolve()}:{_label(event)}:{group}:{handler}"


def hook_hash(event: str, group: Mapping[str, Any], handler: Mapping[str, Any]) -> str:
    """The hash Codex trusts a command hook by: SHA-256 of its normalized identity (the event's
    label, the group's matcher, the handler with ``async`` and ``timeout`` filled in) as JSON
    with sorted keys and no spaces."""
    normal: dict[str, Any] = {
        "async": bool(handler.get("async", False)),
        "command": handler.get("command"),
        "timeout": max(1, int(handler.get("timeout") or 600)),
        "type": "command",
    }
    if isinstance(handler.get("statusMessage"), str):
        normal["statusMessage"] = handler["statusMessage"]
    identity: dict[str, Any] = {"event_name": _label(event), "hooks": [normal]}
    if isinstance(group.get("matcher"), str) and event not in ("UserPromptSubmit", "Stop"):
        identity["matcher"] = group["matcher"]
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _is_ours(handler: Any) -> bool:
    return (
        isinstance(handler, dict)
        and isinstance(handler.get("command"), str)
        and bool(_OURS.search(handler["command"]))
    )


# --- hooks.json -------------------------------------------------------------------------------


def _load_hooks(path: Path, text: str | None) -> dict[str, Any]:
    if text is None:
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidSettings(f"{path} is not valid JSON ({exc}); it was not changed") from None
    if not isinstance(data, dict):
        raise InvalidSettings(f"{path} does not hold a JSON object; it was not changed")
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict):
        raise InvalidSettings(f"{path}: 'hooks' is not an object; it was not changed")
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            raise InvalidSettings(f"{path}: hooks.{event} is not a list; it was not changed")
    return data


def _our_trust(path: Path, data: Mapping[str, Any]) -> dict[str, str]:
    """The trust entries (key -> hash) of our handlers in the hooks file ``data`` at ``path``."""
    found: dict[str, str] = {}
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return found
    for event, groups in hooks.items():
        for g, group in enumerate(groups if isinstance(groups, list) else []):
            handlers = group.get("hooks") if isinstance(group, dict) else None
            for h, handler in enumerate(handlers if isinstance(handlers, list) else []):
                if _is_ours(handler):
                    found[trust_key(path, event, g, h)] = hook_hash(event, group, handler)
    return found


def _dump(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def _hooks_install(path: Path, store: Path | str | None, within: Path | None) -> InstallPlan:
    confine(path, within)
    before = read_text(path)
    backup = backup_path(path)
    read_backup(backup)  # a link planted there is refused before anything is written
    original = _load_hooks(path, before)
    data = strip_handlers(original, _is_ours)
    hooks = data.setdefault("hooks", {})
    for event, groups in hook_groups(lambda slug: hook_command(slug, store)).items():
        hooks.setdefault(event, []).extend(groups)
    after = _dump(data)
    if before is not None and original == json.loads(after):
        after = before  # installed exactly like this already: the bytes stay
    save = before is not None and after != before and strip_handlers(original, _is_ours) == original
    return InstallPlan(
        path, before, after, backup, save_backup=save, within=within, keep_folder=within is None
    )


def _hooks_uninstall(path: Path, within: Path | None) -> InstallPlan:
    confine(path, within)
    before = read_text(path)
    backup = backup_path(path)
    keep = within is None
    if before is None:
        return InstallPlan(path, None, None, backup, within=within, keep_folder=keep)
    original = _load_hooks(path, before)
    data = strip_handlers(original, _is_ours)
    if data == original:
        return InstallPlan(path, before, before, backup, within=within, keep_folder=keep)
    saved = read_backup(backup)
    if saved is not None and _same_json(saved, data):
        return InstallPlan(
            path, before, saved, backup, restores_backup=True, within=within, keep_folder=keep
        )
    if saved is None and not data and not path.is_symlink():
        return InstallPlan(path, before, None, backup, within=within, keep_folder=keep)
    return InstallPlan(
        path,
        before,
        _dump(data),
        backup,
        backup_differs=saved is not None,
        within=within,
        keep_folder=keep,
    )


def _same_json(text: str, data: Any) -> bool:
    try:
        return bool(json.loads(text) == data)
    except json.JSONDecodeError:
        return False


# --- config.toml: the trust tables, edited as text --------------------------------------------

_HEADER: Final = re.compile(r"^[ \t]*\[\[?([^\n]*?)\]\]?[ \t]*(?:#.*)?$", re.MULTILINE)
_BARE: Final = re.compile(r"[A-Za-z0-9_-]+")


def _header_path(raw: str) -> tuple[str, ...] | None:
    """The key path of a table header's inside (``hooks.state."a.b"``), or None if it is not
    one this reader follows."""
    parts: list[str] = []
    i, n = 0, len(raw)
    while True:
        while i < n and raw[i] in " \t":
            i += 1
        if i < n and raw[i] == '"':
            try:
                key, end = json.JSONDecoder().raw_decode(raw, i)
            except json.JSONDecodeError:
                return None
            parts.append(str(key))
            i = end
        elif i < n and raw[i] == "'":
            end = raw.find("'", i + 1)
            if end < 0:
                return None
            parts.append(raw[i + 1 : end])
            i = end + 1
        else:
            m = _BARE.match(raw, i)
            if m is None:
                return None
            parts.append(m.group())
            i = m.end()
        while i < n and raw[i] in " \t":
            i += 1
        if i == n:
            return tuple(parts)
        if raw[i] != ".":
            return None
        i += 1


def _tables(text: str) -> list[tuple[int, tuple[str, ...] | None]]:
    return [(m.start(), _header_path(m.group(1))) for m in _HEADER.finditer(text)]


def _newline(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def _remove_tables(text: str, keys: set[str]) -> str:
    """``text`` without the ``[hooks.state."<key>"]`` tables of ``keys`` (each up to the next
    header; the blank line install put before it goes too)."""
    nl = _newline(text)
    while True:
        heads = _tables(text)
        span = None
        for i, (start, path) in enumerate(heads):
            if (
                path is not None
                and len(path) == 3
                and path[:2] == ("hooks", "state")
                and (path[2] in keys)
            ):
                end = heads[i + 1][0] if i + 1 < len(heads) else len(text)
                span = (start, end)
                break
        if span is None:
            return text
        start, end = span
        head, tail = text[:start], text[end:]
        if not tail and head.endswith(nl * 2):
            head = head[: -len(nl)]  # the blank line before a table at the end
        text = head + tail


def _add_tables(text: str, trust: Mapping[str, str]) -> str:
    if not trust:
        return text
    nl = _newline(text)
    blocks = [
        f"[hooks.state.{json.dumps(key, ensure_ascii=False)}]{nl}"
        f"trusted_hash = {json.dumps(value)}{nl}"
        for key, value in trust.items()
    ]
    body = nl.join(blocks)
    if not text.strip():
        return body
    sep = "" if text.endswith(nl * 2) else nl if text.endswith(nl) else nl * 2
    return text + sep + body


def _parse_toml(path: Path, text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidSettings(f"{path} is not valid TOML ({exc}); it was not changed") from None


def _trust_of(data: Mapping[str, Any]) -> dict[str, Any]:
    hooks = data.get("hooks")
    state = hooks.get("state") if isinstance(hooks, dict) else None
    return dict(state) if isinstance(state, dict) else {}


def _without_trust(data: dict[str, Any], keys: set[str]) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(json.dumps(data, default=str))
    hooks = out.get("hooks")
    state = hooks.get("state") if isinstance(hooks, dict) else None
    if isinstance(hooks, dict) and isinstance(state, dict):
        for key in keys:
            state.pop(key, None)
        if not state:
            del hooks["state"]
        if not hooks:
            del out["hooks"]
    return out


def _check_trust(path: Path, text: str, want: dict[str, Any]) -> None:
    try:
        got: Any = json.loads(json.dumps(tomllib.loads(text), default=str))
    except tomllib.TOMLDecodeError:
        got = None  # the edit broke the file: refused below, nothing written
    if got != want:
        raise InvalidSettings(
            f"{path}: continuity could not add the trust of its hooks in this file's layout "
            "(a [hooks] or hooks.state written inline?); it was not changed"
        )


# --- the plans --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CodexInstall:
    """What ``install codex`` / ``uninstall codex`` changes: the hooks file, and the user's
    ``config.toml`` (the hooks' trust and the MCP server's entry) — None when it is not touched."""

    hooks: InstallPlan
    config: InstallPlan | None
    trusted: tuple[str, ...] = ()
    """The keys of the hooks trusted (install) or no longer trusted (uninstall)."""
    mcp: bool = False
    """Whether the MCP server's entry is part of the config plan."""

    @property
    def plans(self) -> list[InstallPlan]:
        return [self.hooks] if self.config is None else [self.hooks, self.config]


def _mcp(store: Path | str | None, env: Mapping[str, str] | None) -> tuple[Any, dict[str, Any]]:
    from continuity.agents.base.mcp import mcp_target, server_argv, server_entry

    target = mcp_target("codex", "user", env=env)
    return target, server_entry("codex", server_argv(store))


def _config_plan(
    config: Path, before: str | None, after: str, data_after: dict[str, Any]
) -> InstallPlan:
    """The config file's plan: ``after`` unless it holds nothing and there was no file."""
    backup = backup_path(config)
    if before is None and not data_after and not after.strip():
        return InstallPlan(config, None, None, backup, keep_folder=True)
    return InstallPlan(config, before, after, backup, keep_folder=True)


def plan_codex_install(
    scope: Scope = "user",
    project_dir: Path | None = None,
    store: Path | str | None = None,
    *,
    mcp: bool = True,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> CodexInstall:
    """The hooks file with our hooks (ours replaced if there), and the user's ``config.toml``
    with their trust and (``mcp``) the MCP server's entry. Nothing is written."""
    from continuity.agents.base.mcp import edit_entry

    path, within = hooks_path(scope, project_dir, env, home)
    hooks = _hooks_install(path, store, within)
    config = codex_folder(env, home) / "config.toml"
    before = read_text(config, "TOML")
    data = _parse_toml(config, before) if before is not None else {}
    old = set(_our_trust(path, _load_hooks(path, hooks.before)))
    trust = _our_trust(path, json.loads(hooks.after or "{}"))
    text = before or ""
    if mcp:
        target, entry = _mcp(store, env)
        text = edit_entry(target, text, entry)
    mid = _without_trust(_parse_toml(config, text), old | set(trust))
    text = _add_tables(_remove_tables(text, old | set(trust)), trust)
    want = json.loads(json.dumps(mid))
    want.setdefault("hooks", {}).setdefault("state", {}).update(
        {k: {"trusted_hash": v} for k, v in trust.items()}
    )
    _check_trust(config, text, want)
    if before is not None and _parse_toml(config, text) == data:
        text = before  # nothing to change: the bytes stay
    # The backup keeps the file from before continuity's first entry: one there (from another
    # scope's install, or `install mcp`) is kept; a restore checks it holds what is left anyway.
    ours_before = bool(set(_trust_of(data)) & (old | set(trust))) or _has_server(data)
    fresh = read_backup(backup_path(config)) is None
    plan = _config_plan(config, before, text, want)
    if before is not None and text != before and not ours_before and fresh:
        plan = InstallPlan(config, before, text, plan.backup, save_backup=True, keep_folder=True)
    return CodexInstall(hooks, plan, tuple(trust), mcp)


def _has_server(data: Mapping[str, Any]) -> bool:
    servers = data.get("mcp_servers")
    return isinstance(servers, dict) and "continuity" in servers


def plan_codex_uninstall(
    scope: Scope = "user",
    project_dir: Path | None = None,
    *,
    mcp: bool = True,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> CodexInstall:
    """The hooks file without our hooks, and ``config.toml`` without their trust and (``mcp``)
    the MCP server's entry: each file's backup bytes when it holds exactly what is left (then
    the backup goes), no file when install created it and nothing else is in it."""
    from continuity.agents.base.mcp import edit_entry

    path, within = hooks_path(scope, project_dir, env, home)
    hooks = _hooks_uninstall(path, within)
    config = codex_folder(env, home) / "config.toml"
    before = read_text(config, "TOML")
    if before is None:
        return CodexInstall(hooks, None)
    data = _parse_toml(config, before)
    keys = set(_our_trust(path, _load_hooks(path, hooks.before))) & set(_trust_of(data))
    text = _remove_tables(before, keys)
    want = _without_trust(data, keys)
    _check_trust(config, text, want)
    if mcp and _has_server(data):
        target, _entry = _mcp(None, env)
        text = edit_entry(target, text, None)
    if text == before:
        return CodexInstall(hooks, InstallPlan(config, before, before, backup_path(config)))
    left = _parse_toml(config, text)
    backup = backup_path(config)
    saved = read_backup(backup)
    saved_data: dict[str, Any] | None = None
    if saved is not None:
        with contextlib.suppress(InvalidSettings):
            saved_data = _parse_toml(config, saved)
    if saved is not None and saved_data == left:
        plan = InstallPlan(config, before, saved, backup, restores_backup=True, keep_folder=True)
    elif saved is None and not left and not text.strip() and not config.is_symlink():
        plan = InstallPlan(config, before, None, backup, keep_folder=True)
    else:
        plan = InstallPlan(
            config, before, text, backup, backup_differs=saved is not None, keep_folder=True
        )
    return CodexInstall(hooks, plan, tuple(sorted(keys)), mcp)


def hooks_disabled(env: Mapping[str, str] | None = None, home: Path | None = None) -> str | None:
    """What in the user's ``config.toml`` turns Codex's hooks off (``[features] hooks =
    false``), or None. Hooks are on by default in Codex 0.169."""
    config = codex_folder(env, home) / "config.toml"
    try:
        text = read_text(config, "TOML")
        data = tomllib.loads(text) if text else {}
    except (InvalidSettings, tomllib.TOMLDecodeError, OSError):
        return None
    features = data.get("features")
    if isinstance(features, dict):
        for name in ("hooks", "codex_hooks"):
            if features.get(name) is False:
                return f"{config}: [features] {name} = false"
    return None


def project_trusted(
    project: Path, env: Mapping[str, str] | None = None, home: Path | None = None
) -> bool:
    """Whether Codex trusts ``project`` (``[projects."<path>"] trust_level = "trusted"`` in the
    user's ``config.toml``): it loads a project's ``.codex/`` only then."""
    config = codex_folder(env, home) / "config.toml"
    try:
        text = read_text(config, "TOML")
        data = tomllib.loads(text) if text else {}
    except (InvalidSettings, tomllib.TOMLDecodeError, OSError):
        return False
    projects = data.get("projects")
    if not isinstance(projects, dict):
        return False
    for name in {str(project), str(project.resolve())}:
        entry = projects.get(name)
        if isinstance(entry, dict) and entry.get("trust_level") == "trusted":
            return True
    return False
