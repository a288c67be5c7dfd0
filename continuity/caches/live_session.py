"""Which session of a project is live: a note the agent's hooks write and readers of the
archive (the MCP server, :mod:`continuity.mcp_server`) use as their default session.

A hook that fires for a session (Claude Code's ``SessionStart`` and ``UserPromptSubmit``)
notes it under the project's path: the session id, its thread, its transcript and when it was
noted. The note is a cache file in the store's local cache folder (``cache/live/``), written
atomically with a checksum; deleting it loses only the default (a reader then takes the
project's most recently active session). Two sessions live in one project at once: the one
that spoke last wins, which is what "the current session" means to a reader that cannot ask.

Imports only what the hook path already has: it is called from every prompt's hook.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

import blake3
import msgspec

from continuity._fs import read_checked, write_checked
from continuity.store.base import BaseStore

__all__ = [
    "LiveSession",
    "live_folder",
    "note_hook_session",
    "note_live_session",
    "noted_session",
    "session_note",
]

_FOLDER: Final = "live"


class LiveSession(msgspec.Struct, frozen=True, kw_only=True):
    """One project's live session as its hooks last saw it."""

    project: str
    agent: str
    session_id: str
    thread_id: str
    transcript: str = ""
    noted_ms: int = 0


def live_folder(store: BaseStore) -> Path | None:
    """Where the notes live: the store's cache folder, or for a store on a server its local
    folder's ``cache`` (None: nowhere, an in-memory store)."""
    base = store.cache_dir
    if base is None and store.local_dir is not None:
        base = store.local_dir / "cache"
    return None if base is None else base / _FOLDER


def _note_path(folder: Path, project: str) -> Path:
    return (
        folder / f"{blake3.blake3(project.encode('utf-8', 'surrogatepass')).hexdigest()[:32]}.json"
    )


def note_live_session(store: BaseStore, note: LiveSession, projects: Iterable[str] = ()) -> None:
    """Write ``note`` under its project (and under each of ``projects`` too: the same session
    seen from a subfolder). A folder that cannot be written is left alone: a note is a cache."""
    folder = live_folder(store)
    if folder is None:
        return
    data = msgspec.json.encode(note)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for project in dict.fromkeys([note.project, *projects]):
            if project:
                write_checked(_note_path(folder, project), data)
    except OSError:
        pass


def session_note(payload: dict[str, Any], thread_id: str, agent: str) -> LiveSession | None:
    """The note a hook's input makes (``cwd``, ``session_id``, ``transcript_path``; the project
    is ``$CLAUDE_PROJECT_DIR`` when the agent sets it, else the ``cwd``); None without a
    project or a session id."""
    cwd = payload.get("cwd")
    cwd = cwd if isinstance(cwd, str) else ""
    project = os.environ.get("CLAUDE_PROJECT_DIR") or cwd
    session = payload.get("session_id")
    if not project or not isinstance(session, str) or not session:
        return None
    transcript = payload.get("transcript_path")
    return LiveSession(
        project=project,
        agent=agent,
        session_id=session,
        thread_id=thread_id,
        transcript=transcript if isinstance(transcript, str) else "",
        noted_ms=int(time.time() * 1000),
    )


def note_hook_session(
    store: BaseStore, payload: dict[str, Any], thread_id: str, agent: str
) -> None:
    """Note the session a hook fired for, under its project and its ``cwd``."""
    note = session_note(payload, thread_id, agent)
    if note is not None:
        cwd = payload.get("cwd")
        note_live_session(store, note, [cwd] if isinstance(cwd, str) else [])


def noted_session(store: BaseStore, project: str) -> LiveSession | None:
    """The live session noted for ``project``, or None (no note, or a damaged one)."""
    folder = live_folder(store)
    if folder is None or not project:
        return None
    try:
        data = read_checked(_note_path(folder, project))
        if data is None:
            return None
        note = msgspec.json.decode(data, type=LiveSession)
    except (OSError, ValueError, msgspec.DecodeError, msgspec.ValidationError):
        return None
    return note
