"""``continuity hook <event> --agent codex``: Codex's lifecycle hooks.

Codex (0.169) runs a hook command with one JSON object on stdin (``session_id``,
``transcript_path`` — the rollout —, ``cwd``, ``hook_event_name``, …) and reads JSON from its
stdout (Claude Code's shape: ``hookSpecificOutput.additionalContext``). Every event archives
what is new in the rollout. After Codex's own compaction (PostCompact, then SessionStart with
``source: "compact"``) continuity's restore — the exact detail Codex's summary loses — goes back
as additional context on that SessionStart, or on the next UserPromptSubmit if it was not
delivered. A hook never breaks the session: any failure is one line on stderr and exit 0.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import msgspec

from continuity._fs import private_dirs, read_checked, write_checked
from continuity.store.base import BaseStore

if TYPE_CHECKING:
    import threading

__all__ = ["EVENTS", "main", "run_hook"]

EVENTS: Final = {
    "session-start": "SessionStart",
    "user-prompt-submit": "UserPromptSubmit",
    "pre-tool-use": "PreToolUse",
    "post-tool-use": "PostToolUse",
    "pre-compact": "PreCompact",
    "post-compact": "PostCompact",
    "stop": "Stop",
    "session-end": "SessionEnd",
}
_BY_NAME: Final = {v: k for k, v in EVENTS.items()}
_MAX_STDIN: Final = 16 << 20


class _State(msgspec.Struct, kw_only=True):
    """Per-session hook state (a cache: losing it costs at most one restore)."""

    restore_pending: bool = False


def _state_path(store: BaseStore, thread_id: str) -> Path | None:
    from continuity.agents.common import cache_dir

    base = cache_dir(store, "codex")
    return None if base is None else base / "sessions" / f"{thread_id}.json"


def _load_state(store: BaseStore, thread_id: str) -> _State:
    path = _state_path(store, thread_id)
    try:
        data = read_checked(path) if path is not None else None
        return _State() if data is None else msgspec.json.decode(data, type=_State)
    except (OSError, ValueError, msgspec.DecodeError, msgspec.ValidationError):
        return _State()


def _save_state(store: BaseStore, thread_id: str, state: _State) -> None:
    path = _state_path(store, thread_id)
    if path is not None:
        private_dirs(path.parent)
        write_checked(path, msgspec.json.encode(state))


def _context(event: str, text: str) -> str:
    out = {"hookSpecificOutput": {"hookEventName": EVENTS[event], "additionalContext": text}}
    return msgspec.json.encode(out).decode()


def _event(arg: str | None, payload: dict[str, Any]) -> str:
    if arg in EVENTS:
        return arg
    named = arg or payload.get("hook_event_name")
    if isinstance(named, str) and named in _BY_NAME:
        return _BY_NAME[named]
    raise ValueError(f"unknown Codex hook event {named!r}")


def run_hook(store: BaseStore, event: str, payload: dict[str, Any]) -> str:
    """Archive what is new in the rollout, then what ``event`` calls for; the hook's stdout."""
    from continuity.agents.codex.ingest import ingest_rollout, session_of_name, thread_id

    raw = payload.get("transcript_path")
    rollout = Path(raw).expanduser() if isinstance(raw, str) and raw else None
    session = payload.get("session_id")
    tid = None
    if rollout is not None and rollout.is_file():
        tid = ingest_rollout(store, rollout, final=event in ("stop", "session-end")).thread
    elif isinstance(session, str) and session:
        tid = thread_id(session)
    elif rollout is not None:
        tid = thread_id(session_of_name(rollout))
    if tid is None:
        return ""
    thread = store.thread(tid)
    if event == "post-compact" or event == "pre-compact":
        state = _load_state(store, tid)
        state.restore_pending = True
        _save_state(store, tid, state)
        return ""
    restoring = event == "session-start" and payload.get("source") == "compact"
    if event == "user-prompt-submit":
        restoring = _load_state(store, tid).restore_pending
    if not restoring or not thread.exists():
        return ""
    from continuity.claude_code.restore import compacted, restore_context

    if not compacted(thread):
        return ""  # the compaction line is not in the rollout yet: the next prompt restores
    text = restore_context(thread)
    _save_state(store, tid, _State(restore_pending=False))
    return _context(event, text)


def _payload(raw: bytes) -> dict[str, Any]:
    payload = msgspec.json.decode(raw) if raw.strip() else {}
    if not isinstance(payload, dict):
        raise ValueError("hook input is not a JSON object")
    return payload


def _log(local: Path, label: str, message: str) -> None:
    from continuity.claude_code.hooks import log_error

    log_error(local, f"{label} (codex)", message, server=True)


def _ingest_kept(store: BaseStore, path: Path, final: bool) -> None:
    from continuity.agents.codex.ingest import ingest_rollout

    ingest_rollout(store, path, final=final)


def main(argv: list[str], *, store: str | None = None, stdin: bytes | None = None) -> int:
    """Run a Codex hook: ``argv`` is ``[event]`` (or empty: the event comes from stdin). On a
    server store, a sick server costs the hook nothing it waits on (ADR 0041; see
    :mod:`continuity.claude_code.server_guard`)."""
    from continuity.claude_code import server_guard as guard
    from continuity.paths import default_store_location, is_store_url, resolve_store_location
    from continuity.store.locate import open_store

    opened: BaseStore | None = None
    payload: dict[str, Any] | None = None
    url = ""
    event = argv[0] if argv else None
    timer: threading.Timer | None = None
    try:
        location = resolve_store_location(store) if store else default_store_location()
        payload = _payload(stdin if stdin is not None else sys.stdin.buffer.read(_MAX_STDIN))
        event = _event(argv[0] if argv else None, payload)
        if is_store_url(location):
            url = str(location)
            down = guard.server_down(url)
            if down is not None:
                return _keep(url, event, payload, down[0], news=down[1], busy=False)
            from continuity.store.outage import HOOK_STORE_OPTIONS

            kept, late = payload, "no answer within the hook's deadline"
            timer = guard.watchdog(
                lambda: _keep(url, str(event), kept, late, news=True, busy=False)
            )
            opened = open_store(location, create=True, **HOOK_STORE_OPTIONS)
        else:
            opened = open_store(location, create=True)
        out = run_hook(opened, event, payload)
        notes: list[str] = []
        if url:
            guard.catch_up(opened, url, notes, agent="codex", ingest=_ingest_kept, log=_log)
        for note in notes:
            sys.stderr.write(f"continuity: {note}\n")
    except Exception as exc:  # a hook never breaks the session: one line, exit 0
        failed = guard.unavailable(exc) if url and payload is not None else None
        if failed is not None and payload is not None:
            return _keep(
                url, str(event), payload, guard.one_line(exc), news=True, busy=failed == "busy"
            )
        sys.stderr.write(f"continuity: {guard.one_line(exc)}\n")
        if os.environ.get("CONTINUITY_DEBUG"):
            import traceback

            traceback.print_exc()
        return 0
    finally:
        if opened is not None:
            opened.close()
        if timer is not None:
            timer.cancel()
    if out:
        sys.stdout.buffer.write(out.encode("utf-8", "replace") + b"\n")
        sys.stdout.buffer.flush()
    return 0


def _keep(
    url: str, event: str, payload: dict[str, Any], reason: str, *, news: bool, busy: bool
) -> int:
    from continuity.claude_code.server_guard import keep_for_later

    final = event in ("stop", "session-end")
    return keep_for_later(
        url, event, payload, reason, news=news, busy=busy, agent="codex", final=final, log=_log
    )
