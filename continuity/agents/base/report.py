"""What the agent commands tell the user, written once: counts, printable paths, and the lines
that report an install plan or an MCP server's registration (the CLI prints them)."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import TYPE_CHECKING

from continuity.errors import CommandRefused, ContinuityError, MissingExtra

if TYPE_CHECKING:
    from continuity.agents.base.install import InstallPlan
    from continuity.agents.base.mcp import McpTarget

__all__ = ["count", "mcp_installed", "mcp_uninstalled", "said_with", "shown"]

_APPROVAL = (
    "Claude Code asks each user to approve the servers of a project's .mcp.json the first "
    "time it starts there (`/mcp` shows them; the setting enableAllProjectMcpServers: true "
    "approves them all)"
)


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``1 file``, ``2 files``."""
    return f"{n} {noun}" if n == 1 else f"{n} {plural or noun + 's'}"


def shown(path: Path) -> str:
    """A path as it can be printed: bytes of its name that are not UTF-8 escaped (``\\xff``)."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def mcp_installed(target: McpTarget, plan: InstallPlan, backup: Path | None) -> list[str]:
    """What registering the MCP server with ``target``'s client did."""
    if not plan.changed:
        return [f"{target.path}: MCP server {target.client} entry already there, unchanged"]
    lines = [f"registered the MCP server `continuity` in {target.path} ({target.client})"]
    if backup is not None:
        lines.append(f"previous {target.path.name} saved to {backup}")
    if target.client == "claude-code" and target.scope == "project":
        lines.append(_APPROVAL)
    return lines


def mcp_uninstalled(target: McpTarget, plan: InstallPlan) -> list[str]:
    """What taking the MCP server's entry out of ``target``'s file did."""
    if not plan.changed:
        return [f"{target.path}: no continuity MCP server, nothing changed"]
    if plan.after is None:
        return [f"removed the MCP server: {target.path} held nothing else and was removed"]
    if plan.restores_backup:
        return [f"removed the MCP server: {target.path} is as it was before the install"]
    lines = [f"removed the MCP server `continuity` from {target.path}"]
    if plan.backup_differs:
        lines.append(
            f"{target.path} changed since the install: only continuity's entry was taken out "
            f"(its copy from before the install, {plan.backup.name}, was removed)"
        )
    return lines


def said_with(exc: Exception, suffix: str) -> Exception:
    """A store's error met while ingesting one file, said with where: what the command line
    prints of it (a missing extra stays itself: it exits 2)."""
    if isinstance(exc, MissingExtra):
        return exc
    if isinstance(exc, OSError) and exc.errno == errno.EROFS:
        return CommandRefused(f"the store is on a read-only file system ({exc.filename}){suffix}")
    if isinstance(exc, ContinuityError | OSError) and not getattr(exc, "__notes__", None):
        return CommandRefused(f"{exc}{suffix}")
    return exc
