"""Registering ``continuity mcp`` with MCP clients, and taking it out again.

Claude Code (``<project>/.mcp.json``, or ``~/.claude.json`` for the user and local scopes),
Codex (``$CODEX_HOME/config.toml``, ``~/.codex`` by default), Gemini CLI
(``~/.gemini/settings.json`` or a project's ``.gemini/settings.json``) and Cursor
(``~/.cursor/mcp.json`` or a project's ``.cursor/mcp.json``). Only our server's entry changes:
it is edited as text (:mod:`continuity.agents.base._json_text`, and our own table for TOML),
so every other byte of files that hold much else (``~/.claude.json``) stays as it was. The
plans are :class:`~continuity.agents.claude_code.install.InstallPlan`\\ s, with the hook install's
dry-run diff, backup and byte-exact uninstall: an uninstall after an install gives back the
original bytes, and a file the install created is removed again.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from continuity.agents.base._json_text import remove_member, set_member, value_span
from continuity.agents.base.install import (
    InstallPlan,
    backup_path,
    confine,
    entry_point,
    read_backup,
    read_text,
)
from continuity.errors import InvalidSettings

__all__ = [
    "CLIENTS",
    "SERVER_NAME",
    "Client",
    "McpTarget",
    "cannot_start",
    "config_snippet",
    "edit_entry",
    "mcp_target",
    "plan_mcp_install",
    "plan_mcp_uninstall",
    "server_argv",
    "server_entry",
]

Client = Literal["claude-code", "codex", "gemini", "cursor", "opencode"]
CLIENTS: Final[tuple[Client, ...]] = ("claude-code", "codex", "gemini", "cursor", "opencode")
SERVER_NAME: Final = "continuity"
Scope = Literal["user", "project", "local"]


@dataclass(frozen=True, slots=True)
class McpTarget:
    """Where one client keeps its MCP servers: the file, the keys of the object holding them
    (``mcp_servers`` for Codex's TOML), and the folder writes must stay in (project scopes)."""

    client: Client
    scope: Scope
    path: Path
    keys: tuple[str, ...]
    within: Path | None = None

    @property
    def toml(self) -> bool:
        return self.path.suffix == ".toml"

    @property
    def own_folder(self) -> bool:
        """Whether the file sits in the client's own folder (``.codex``, ``.gemini``,
        ``.cursor``), which goes with it when install made both; ``.mcp.json`` and
        ``~/.claude.json`` sit in the project's and the home folder, which never go."""
        return self.path.parent.name in (".codex", ".gemini", ".cursor")


def server_argv(store: str | os.PathLike[str] | None = None) -> list[str]:
    """The command that starts the server: the absolute entry point the hooks use, ``mcp``,
    and ``--store`` when one is named."""
    extra = ["--store", os.fspath(store)] if store is not None else []
    return [*entry_point(), "mcp", *extra]


START_TIMEOUT_S: Final = 30.0
_PROBE: Final = (
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
    b'"capabilities":{},"clientInfo":{"name":"continuity-install","version":"0"}}}\n'
)


def cannot_start(argv: list[str], *, timeout: float = START_TIMEOUT_S) -> str | None:
    """Why the server ``argv`` starts cannot serve here (None: it answered MCP's
    ``initialize``, as a client's first request). Run at install, so that no client is given a
    server that fails to connect (a core install without what the server needs, a moved
    interpreter): the reason is the server's last line on stderr, or what went wrong."""
    import subprocess
    import tempfile

    with tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                cwd=tempfile.gettempdir(),
            )
        except OSError as exc:
            return f"{argv[0]}: {exc.strerror or exc}"
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(_PROBE)
            proc.stdin.flush()
            answer = _first_line(proc.stdout, timeout)
        except OSError:
            answer = b""
        finally:
            for close in (proc.stdin.close, proc.stdout.close):
                with contextlib.suppress(OSError):
                    close()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if b'"result"' in answer and b'"id":1' in answer.replace(b" ", b""):
            return None
        err.seek(0)
        said = [line.strip(" │╭╮╰╯─") for line in err.read().decode(errors="replace").splitlines()]
        said = [line for line in said if line.strip()]
        if said:
            return said[-1].strip()
        if proc.returncode not in (None, 0):
            return f"it exited with code {proc.returncode} before answering"
        return f"it did not answer within {timeout:g} s"


def _first_line(stream: Any, timeout: float) -> bytes:
    """The first line ``stream`` gives within ``timeout`` seconds (b"" if none)."""
    import threading

    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    return got[0] if got else b""


def server_entry(client: Client, argv: list[str]) -> dict[str, Any]:
    """Our server's entry in ``client``'s configuration (a stdio server)."""
    if client == "opencode":  # opencode.json: mcp.<name> {type: "local", command: [argv]}
        return {"type": "local", "command": list(argv), "enabled": True}
    entry: dict[str, Any] = {"command": argv[0], "args": argv[1:]}
    if client == "claude-code":
        return {"type": "stdio", **entry}
    if client == "codex":
        # Codex starts MCP servers beside the session and does not wait for one that is not
        # required: a short run (the first turn after a compaction) then had none of our tools.
        return {**entry, "required": True}
    return entry


def _project(project_dir: Path | None) -> Path:
    base = (project_dir or Path(os.environ.get("CLAUDE_PROJECT_DIR") or Path.cwd())).absolute()
    if not base.is_dir():
        raise InvalidSettings(f"no project folder {base} (--project names an existing folder)")
    return base


def mcp_target(
    client: Client,
    scope: Scope = "user",
    project_dir: Path | None = None,
    home: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> McpTarget:
    """Where ``client`` reads MCP servers for ``scope`` (see the module's docstring).

    Claude Code: ``project`` is ``<project>/.mcp.json`` (shared, committed), ``user`` the
    top-level ``mcpServers`` of ``~/.claude.json`` and ``local`` that of
    ``projects[<project>]`` there. Gemini and Cursor: ``user`` or ``project``. Codex: ``user``
    only (``$CODEX_HOME``, default ``~/.codex``)."""
    env = os.environ if env is None else env
    home = home or Path.home()
    if client not in CLIENTS:
        raise InvalidSettings(f"unknown MCP client {client!r} (one of: {', '.join(CLIENTS)})")
    if client == "claude-code":
        if scope == "project":
            base = _project(project_dir)
            return McpTarget(client, scope, base / ".mcp.json", ("mcpServers",), within=base)
        if scope == "local":
            # Claude Code keys projects by the real path of the folder it runs in.
            key = str(_project(project_dir).resolve())
            return McpTarget(client, scope, home / ".claude.json", ("projects", key, "mcpServers"))
        return McpTarget(client, scope, home / ".claude.json", ("mcpServers",))
    if scope == "local":
        raise InvalidSettings(f"{client} has no local scope (use user or project)")
    if client == "codex":
        if scope != "user":
            raise InvalidSettings("continuity registers with Codex in ~/.codex/config.toml only")
        codex_home = env.get("CODEX_HOME")
        folder = Path(codex_home).expanduser() if codex_home else home / ".codex"
        return McpTarget(client, scope, folder / "config.toml", ("mcp_servers",))
    if client == "opencode":
        if scope == "project":
            base = _project(project_dir)
            return McpTarget(client, scope, base / "opencode.json", ("mcp",), within=base)
        xdg = env.get("XDG_CONFIG_HOME")
        folder = (Path(xdg).expanduser() if xdg else home / ".config") / "opencode"
        return McpTarget(client, scope, folder / "opencode.json", ("mcp",))
    name = ".gemini/settings.json" if client == "gemini" else ".cursor/mcp.json"
    if scope == "project":
        base = _project(project_dir)
        return McpTarget(client, scope, base / name, ("mcpServers",), within=base)
    return McpTarget(client, scope, home / name, ("mcpServers",))


# --- reading ----------------------------------------------------------------------------------


def _parse(target: McpTarget, text: str) -> dict[str, Any]:
    """The file's data; a file that is not a JSON object (TOML document) is refused."""
    if target.toml:
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise InvalidSettings(
                f"{target.path} is not valid TOML ({exc}); it was not changed"
            ) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidSettings(
            f"{target.path} is not valid JSON ({exc}); it was not changed"
        ) from None
    if not isinstance(data, dict):
        raise InvalidSettings(f"{target.path} does not hold a JSON object; it was not changed")
    return data


def _servers(target: McpTarget, data: dict[str, Any]) -> dict[str, Any] | None:
    """The object holding the servers (None when a step is missing); a step that is there but
    not an object is refused."""
    node: Any = data
    for i, key in enumerate(target.keys):
        if key not in node:
            return None
        node = node[key]
        if not isinstance(node, dict):
            where = ".".join(target.keys[: i + 1])
            raise InvalidSettings(f"{target.path}: {where} is not an object; it was not changed")
    return dict(node)


def _with(target: McpTarget, data: dict[str, Any], entry: Any) -> dict[str, Any]:
    """``data`` with our entry set (``entry`` not None) or removed (containers left as they
    are): what the edited text must parse to."""
    out: dict[str, Any] = json.loads(json.dumps(data))
    node = out
    for key in target.keys:
        node = node.setdefault(key, {})
    if entry is None:
        node.pop(SERVER_NAME, None)
    else:
        node[SERVER_NAME] = entry
    return out


# --- TOML: our own table, edited as text ------------------------------------------------------

_HEADER: Final = re.compile(r"^[ \t]*\[(?!\[)([^\]\n]*)\][ \t]*(?:#.*)?$", re.MULTILINE)
_ARRAY_HEADER: Final = re.compile(r"^[ \t]*\[\[", re.MULTILINE)


def _key_path(header: str) -> tuple[str, ...]:
    return tuple(part.strip().strip("\"'") for part in header.split("."))


def _toml_span(text: str, table: tuple[str, ...]) -> tuple[int, int] | None:
    """Where our table and its subtables are: from its header to the next other header
    (trailing blank lines left out), or None."""
    headers = sorted(
        [(m.start(), _key_path(m.group(1))) for m in _HEADER.finditer(text)]
        + [(m.start(), ("[[",)) for m in _ARRAY_HEADER.finditer(text)]
    )
    start: int | None = None
    for offset, path in headers:
        ours = path[: len(table)] == table
        if start is None and path == table:
            start = offset
        elif start is not None and not ours:
            return start, len(text[:offset].rstrip("\r\n \t"))
    if start is None:
        return None
    return start, len(text.rstrip("\r\n \t"))


def _toml_block(table: tuple[str, ...], entry: dict[str, Any], nl: str) -> str:
    def value(v: Any) -> str:
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return json.dumps(v, ensure_ascii=False)  # a valid TOML basic string or boolean

    lines = [f"[{'.'.join(table)}]", *(f"{k} = {value(v)}" for k, v in entry.items())]
    return nl.join(lines)


def _toml_set(text: str, target: McpTarget, entry: dict[str, Any]) -> str:
    table = (*target.keys, SERVER_NAME)
    nl = "\r\n" if "\r\n" in text else "\n"
    block = _toml_block(table, entry, nl)
    span = _toml_span(text, table)
    if span is not None:
        start, end = span
        return text[:start] + block + text[end:]
    if not text.strip():
        return block + nl
    sep = "" if text.endswith(nl * 2) else nl if text.endswith(nl) else nl * 2
    return text + sep + block + nl


def _toml_remove(text: str, target: McpTarget) -> str:
    span = _toml_span(text, (*target.keys, SERVER_NAME))
    if span is None:
        return text
    start, end = span
    nl = "\r\n" if "\r\n" in text else "\n"
    head, tail = text[:start], text[end:]
    if tail.startswith(nl):
        tail = tail[len(nl) :]  # the line end of our last line
    if head.endswith(nl * 2):  # the blank line before our table (install puts one there)
        if not tail.strip():
            head = head[: -len(nl)]
        elif tail.startswith(nl):
            tail = tail[len(nl) :]
    return head + tail


# --- plans ------------------------------------------------------------------------------------


def _edit(target: McpTarget, text: str, entry: dict[str, Any] | None) -> str:
    """``text`` with our entry set (or removed, with the containers install made around it
    that are empty now), checked by parsing the result."""
    if target.toml:
        return _toml_set(text, target, entry) if entry else _toml_remove(text, target)
    keys = list(target.keys)
    if entry is not None:
        return set_member(text, keys, SERVER_NAME, entry)
    return remove_member(text, keys, SERVER_NAME)


def _prune(target: McpTarget, text: str, before_install: dict[str, Any] | None) -> str:
    """Remove the containers on our path that are empty now and were not there before the
    install (all of them when that is unknown: no backup)."""
    if target.toml:
        return text
    keys = list(target.keys)
    for n in range(len(keys), 0, -1):
        span = value_span(text, keys[:n])
        if span is None:
            continue
        start, end = span
        if json.loads(text[start:end]) != {}:
            break
        if before_install is not None and _has_path(before_install, keys[:n]):
            break
        text = remove_member(text, keys[: n - 1], keys[n - 1])
    return text


def _has_path(data: dict[str, Any], keys: list[str]) -> bool:
    node: Any = data
    for key in keys:
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return True


def _norm(target: McpTarget, data: dict[str, Any]) -> dict[str, Any]:
    """``data`` without the empty tables on our path (TOML: a table that holds nothing but
    our server's table is gone with it)."""
    if not target.toml:
        return data
    out: dict[str, Any] = json.loads(json.dumps(data))
    keys = list(target.keys)
    for n in range(len(keys), 0, -1):
        node: Any = out
        for key in keys[: n - 1]:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict) and node.get(keys[n - 1]) == {}:
            del node[keys[n - 1]]
    return out


def _checked(target: McpTarget, after: str, expected: dict[str, Any]) -> str:
    """``after`` if it parses to ``expected``; else the edit is refused (a layout the text
    editing did not follow), nothing written."""
    if _norm(target, _parse(target, after)) != _norm(target, expected):
        raise InvalidSettings(
            f"{target.path}: continuity could not edit its entry in this file's layout; it "
            f"was not changed (add the entry by hand: `continuity install mcp --client "
            f"{target.client} --print` shows it)"
        )
    return after


def edit_entry(target: McpTarget, text: str, entry: dict[str, Any] | None) -> str:
    """``text`` (the client's file, "" for none) with our server's entry set, or removed when
    ``entry`` is None: the edit the plans below make, for a caller that changes more of the
    same file in one plan (``install codex``: the hooks' trust in ``config.toml``)."""
    data = _parse(target, text) if text.strip() else {}
    servers = _servers(target, data)
    if entry is None and (servers is None or SERVER_NAME not in servers):
        return text
    present = servers is not None and SERVER_NAME in servers
    if target.toml and present and _toml_span(text, (*target.keys, SERVER_NAME)) is None:
        raise InvalidSettings(
            f"{target.path} defines mcp_servers.{SERVER_NAME} in a form continuity does not "
            "edit (not a [mcp_servers.continuity] table); it was not changed"
        )
    if entry is not None and servers is not None and servers.get(SERVER_NAME) == entry:
        return text
    return _checked(target, _edit(target, text, entry), _with(target, data, entry))


def plan_mcp_install(target: McpTarget, entry: dict[str, Any]) -> InstallPlan:
    """The client's file with our server's entry set (replaced when there already)."""
    confine(target.path, target.within)
    kind = "TOML" if target.toml else "JSON"
    before = read_text(target.path, kind)
    backup = backup_path(target.path)
    read_backup(backup)  # a link planted there is refused before anything is written
    data = _parse(target, before) if before is not None else {}
    servers = _servers(target, data)
    present = servers is not None and SERVER_NAME in servers
    if present and servers is not None and servers[SERVER_NAME] == entry and before is not None:
        return InstallPlan(
            target.path,
            before,
            before,
            backup,
            within=target.within,
            keep_folder=not target.own_folder,
        )
    if before is None and not target.toml:  # a new file: laid out as the clients write them
        text = json.dumps(_with(target, data, entry), indent=2, ensure_ascii=False) + "\n"
        return InstallPlan(
            target.path, None, text, backup, within=target.within, keep_folder=not target.own_folder
        )
    text = before if before is not None else ""
    if target.toml and present and _toml_span(text, (*target.keys, SERVER_NAME)) is None:
        raise InvalidSettings(
            f"{target.path} defines mcp_servers.{SERVER_NAME} in a form continuity does not "
            "edit (not a [mcp_servers.continuity] table); it was not changed"
        )
    after = _checked(target, _edit(target, text, entry), _with(target, data, entry))
    save = before is not None and not present
    return InstallPlan(
        target.path,
        before,
        after,
        backup,
        save_backup=save,
        within=target.within,
        keep_folder=not target.own_folder,
    )


def plan_mcp_uninstall(target: McpTarget) -> InstallPlan:
    """The client's file without our server's entry: the backup's bytes when it holds exactly
    what is left (then it is removed), no file when install created it and nothing else is
    in it, else the file with only our entry (and the containers install made) taken out."""
    confine(target.path, target.within)
    before = read_text(target.path, "TOML" if target.toml else "JSON")
    backup = backup_path(target.path)
    if before is None:
        return InstallPlan(
            target.path, None, None, backup, within=target.within, keep_folder=not target.own_folder
        )
    data = _parse(target, before)
    servers = _servers(target, data)
    if servers is None or SERVER_NAME not in servers:
        return InstallPlan(
            target.path,
            before,
            before,
            backup,
            within=target.within,
            keep_folder=not target.own_folder,
        )
    saved = read_backup(backup)
    saved_data: dict[str, Any] | None = None
    if saved is not None:
        try:
            saved_data = _parse(target, saved)
        except InvalidSettings:
            saved_data = None
    expected = _with(target, data, None)
    after = _prune(target, _checked(target, _edit(target, before, None), expected), saved_data)
    left = _parse(target, after)
    if saved is not None and saved_data == left:
        return InstallPlan(
            target.path,
            before,
            saved,
            backup,
            restores_backup=True,
            within=target.within,
            keep_folder=not target.own_folder,
        )
    if saved is None and not left and not target.path.is_symlink():
        return InstallPlan(
            target.path,
            before,
            None,
            backup,
            within=target.within,
            keep_folder=not target.own_folder,
        )
    return InstallPlan(
        target.path,
        before,
        after,
        backup,
        backup_differs=saved is not None,
        drops_backup=saved is not None,
        within=target.within,
        keep_folder=not target.own_folder,
    )


# --- printing ---------------------------------------------------------------------------------


def config_snippet(target: McpTarget, entry: dict[str, Any]) -> str:
    """The exact configuration to add by hand, with where it goes (``--print``)."""
    where = f"{target.path}: " + (
        f"[{'.'.join((*target.keys, SERVER_NAME))}]"
        if target.toml
        else ".".join(json.dumps(k) if "." in k or "/" in k else k for k in target.keys)
        + f".{SERVER_NAME}"
    )
    if target.toml:
        body = _toml_block((*target.keys, SERVER_NAME), entry, "\n")
    else:
        nested: Any = {SERVER_NAME: entry}
        for key in reversed(target.keys):
            nested = {key: nested}
        body = json.dumps(nested, indent=2, ensure_ascii=False)
    lines = [f"# {where}", body]
    if target.client == "claude-code":
        import shlex

        scope = target.scope
        argv = [entry["command"], *entry["args"]]
        lines.append(
            "# or: claude mcp add --scope "
            f"{scope} {SERVER_NAME} -- " + " ".join(shlex.quote(a) for a in argv)
        )
    if target.client == "gemini":
        lines.append('# add "trust": true to the entry to skip Gemini\'s confirmation of each call')
    return "\n".join(lines) + "\n"
