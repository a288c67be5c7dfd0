"""The fast path of the ingest-only hooks: return at once when the transcript has not changed.

``PostToolUse``, ``Stop`` and ``SubagentStop`` only archive what is new in the transcript. After
every hook run that ingested, a small note per session records each file it read as its
``stat`` (size, mtime, ctime, inode, device) taken *before* the read: whatever was written after
that stat changes it. The next ingest-only hook stats the same files and, when every one is
as noted, returns without opening the store or importing the ingest (``continuity
hook`` dispatches here before anything else, see ``continuity/__main__.py``).

Nothing can be lost this way: a file that grew, shrank or was replaced has another stat and
takes the full path; a note that is missing, unreadable, or from another file takes the full
path (the note is a cache: deleting it costs one full check); the note is written only after
the hook's work succeeded. The full path on an unchanged file would read nothing new either:
an ingest's result depends only on the file's bytes (an unfinished tail held back stays held
back until the file grows; final ingests, ``PreCompact`` and ``SessionEnd``, never take this
path). ``CONTINUITY_HOOK_FULL=1`` turns the fast path off (the benchmark's baseline).

This module imports nothing at the top but ``os``: it runs in every tool call's hook.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

TYPE_CHECKING = False  # not typing's: importing typing is 2 ms of a fast hook
if TYPE_CHECKING:
    from typing import Final

__all__ = [
    "FULL_ENV",
    "MAX_STDIN",
    "QUICK_EVENTS",
    "cache_dir_of",
    "note_seen",
    "nothing_new",
    "stamps",
]

QUICK_EVENTS: Final = frozenset({"post-tool-use", "stop", "subagent-stop"})
"""The hook events that only ingest (not final): those the fast path may answer."""
FULL_ENV: Final = "CONTINUITY_HOOK_FULL"
MAX_STDIN: Final = 16 << 20
_NOTE_HEADER: Final = "continuity-seen 1\n"
_SAFE_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_FIELDS: Final = (b"session_id", b"transcript_path", b"agent_transcript_path")


def _field(raw: bytes, name: bytes) -> str | None:
    """A top-level string field of the hook's JSON input, read without parsing the whole of
    it (a PostToolUse input carries the tool's output, often large): None when the key is
    not there exactly once as a key, or its value is not a plain string (an escape in it)."""
    key = b'"' + name + b'"'
    if raw.count(key) != 1:
        return None
    m = re.search(re.escape(key) + rb'\s*:\s*"([^"\\]*)"', raw)
    if m is None:
        return None
    try:
        return m.group(1).decode("utf-8")
    except UnicodeDecodeError:
        return None


def _files(event: str, transcript: str | None, agent: str | None) -> list[str]:
    if not transcript:
        return []
    files = [os.path.abspath(os.path.expanduser(transcript))]
    if event == "subagent-stop" and agent:
        files.append(os.path.abspath(os.path.expanduser(agent)))
    return files


def _stamp(path: str) -> str | None:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return f"{st.st_size} {st.st_mtime_ns} {st.st_ctime_ns} {st.st_ino} {st.st_dev}"


def stamps(event: str, payload: dict[str, object]) -> dict[str, str]:
    """The stamp of each file ``event`` reads (those that exist), to note after the hook's
    work: take it before the work, so that what is written during it shows as a change."""

    def text(key: str) -> str | None:
        value = payload.get(key)
        return value if isinstance(value, str) else None

    files = _files(event, text("transcript_path"), text("agent_transcript_path"))
    found = {f: _stamp(f) for f in files}
    return {f: s for f, s in found.items() if s is not None}


def cache_dir_of(location: Path | str) -> Path:
    """The adapter's cache folder for a store ``location``, as
    :func:`continuity.agents.base.ingest.cache_dir` finds it for the opened store."""
    from continuity.paths import is_store_url, local_dir_of

    base = local_dir_of(location) if is_store_url(location) else Path(location)
    return base / "cache" / "claude-code"


def _note_path(cache: Path, session: str | None) -> Path | None:
    if not session or not _SAFE_ID.fullmatch(session):
        return None
    return cache / "seen" / f"{session}.txt"


def _read_note(path: Path) -> dict[str, str]:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError):
        return {}
    if not text.startswith(_NOTE_HEADER):
        return {}
    noted: dict[str, str] = {}
    for line in text[len(_NOTE_HEADER) :].splitlines():
        stamp, sep, file = line.partition("\t")
        if sep:
            noted[file] = stamp
    return noted


def nothing_new(event: str, raw: bytes, location: Path | str) -> bool:
    """Whether the hook ``event`` with input ``raw`` would find nothing new to archive in the
    store at ``location``: every file it reads is as the session's note has it. False on any
    doubt (the full path then decides)."""
    if event not in QUICK_EVENTS or os.environ.get(FULL_ENV):
        return False
    try:
        session, transcript, agent = (_field(raw, name) for name in _FIELDS)
        files = _files(event, transcript, agent)
        if not files or any("\n" in f or "\t" in f for f in files):
            return False
        note = _note_path(cache_dir_of(location), session)
        if note is None:
            return False
        noted = _read_note(note)
        return all(noted.get(f) is not None and noted.get(f) == _stamp(f) for f in files)
    except Exception:  # a hook never fails on its shortcut: the full path runs
        return False


def note_seen(cache: Path | None, payload: dict[str, object], seen: dict[str, str]) -> None:
    """Record ``seen`` (from :func:`stamps`, taken before the work that just succeeded) in the
    session's note, keeping what it says of other files. A cache: failures are ignored."""
    session = payload.get("session_id")
    if cache is None or not seen or not isinstance(session, str):
        return
    path = _note_path(cache, session)
    if path is None or any("\n" in f or "\t" in f for f in seen):
        return
    noted = _read_note(path)
    noted.update(seen)
    body = _NOTE_HEADER + "".join(f"{stamp}\t{file}\n" for file, stamp in noted.items())
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(body)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
