"""``continuity hook <Event> --agent gemini``: Gemini CLI's hooks.

Every event archives what is new in the session file (``transcript_path``): AfterAgent and
SessionEnd as a final ingest (the turn is over: its last message is complete), the others
holding back a message that may still grow. BeforeAgent is where continuity speaks: when a
compression of the session was archived since the last restore it gave, it returns the
restore as ``hookSpecificOutput.additionalContext``, which Gemini CLI (0.61) appends to the
prompt as a ``<hook_context>`` part; the ingest leaves that part out of the archive (it holds
it already). A hook never breaks the session: it exits 0 whatever happens, an error is one line
on stderr and in the store's ``errors.log``, and stdout is one JSON document or nothing.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import msgspec

from continuity._fs import read_checked, write_checked
from continuity.paths import StoreLocation, default_store_location, is_store_url, local_dir_of
from continuity.store.base import BaseStore, Thread

if TYPE_CHECKING:
    import threading

__all__ = ["EVENTS", "FINAL_EVENTS", "HookOutcome", "main", "run_hook"]

EVENTS: Final = (
    "SessionStart",
    "BeforeAgent",
    "AfterTool",
    "AfterAgent",
    "PreCompress",
    "SessionEnd",
)
FINAL_EVENTS: Final = frozenset({"AfterAgent", "SessionEnd"})
RESTORE_MAX_CHARS: Final = 9_500
_MAX_STDIN: Final = 16 << 20


class SessionState(msgspec.Struct, kw_only=True):
    """Per-session hook state (a cache: losing it costs at most one restore more)."""

    compressed: str = ""
    """The latest checkpoint of a compression the hooks archived."""
    restored: str = ""
    """The checkpoint whose restore was given last."""


class HookOutcome(msgspec.Struct):
    stdout: str = ""
    notes: list[str] = msgspec.field(default_factory=list)


def _state_path(store: BaseStore, thread_id: str) -> Path | None:
    base = store.cache_dir
    if base is None and store.local_dir is not None:
        base = store.local_dir / "cache"
    return None if base is None else base / "gemini-cli" / "sessions" / f"{thread_id}.json"


def _load_state(store: BaseStore, thread_id: str) -> SessionState:
    path = _state_path(store, thread_id)
    try:
        data = read_checked(path) if path is not None else None
        return SessionState() if data is None else msgspec.json.decode(data, type=SessionState)
    except (OSError, ValueError, msgspec.DecodeError, msgspec.ValidationError):
        return SessionState()


def _save_state(store: BaseStore, thread_id: str, state: SessionState) -> None:
    path = _state_path(store, thread_id)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_checked(path, msgspec.json.encode(state))


def _event_name(arg: str | None, payload: dict[str, Any]) -> str:
    named = payload.get("hook_event_name")
    event = arg or (named if isinstance(named, str) else "")
    if not event:
        raise ValueError("no hook event given (argument or hook_event_name)")
    return event


def _ingest(store: BaseStore, transcript: Path, *, final: bool, out: HookOutcome) -> Thread | None:
    """Ingest the session file (and, when final, its sub-agents' recordings); the session's
    thread, or None when the file is not there yet (a new session's first SessionStart)."""
    from continuity.agents.gemini.ingest import ingest_file

    if not transcript.is_file():
        return None
    report = ingest_file(store, transcript, final=final)
    if report.checkpoint_ids and report.threads:
        state = _load_state(store, report.threads[0])
        state.compressed = report.checkpoint_ids[-1]
        _save_state(store, report.threads[0], state)
    if report.skipped.get("oversize"):
        out.notes.append(f"{transcript}: {report.skipped['oversize']} oversize line(s) skipped")
    if final:
        sub = transcript.parent / report.session_id
        if report.session_id and sub.is_dir():
            for child in sorted(sub.glob("*.jsonl")):
                ingest_file(store, child, final=True)
    return store.thread(report.threads[0]) if report.threads else None


def _restore(store: BaseStore, thread: Thread, out: HookOutcome) -> None:
    """After a compression not restored yet: the restore, as BeforeAgent's context."""
    state = _load_state(store, thread.id)  # O(1): not a scan of the log for checkpoints
    latest = state.compressed
    if not latest or state.restored == latest:
        return
    from continuity.claude_code.restore import restore_context

    text = restore_context(thread, max_chars=RESTORE_MAX_CHARS)
    out.stdout = msgspec.json.encode(
        {"hookSpecificOutput": {"hookEventName": "BeforeAgent", "additionalContext": text}}
    ).decode()
    state.restored = latest
    _save_state(store, thread.id, state)


def run_hook(store: BaseStore, event: str, payload: dict[str, Any]) -> HookOutcome:
    """Archive what is new; at BeforeAgent, give back the restore after a compression."""
    out = HookOutcome()
    raw_path = payload.get("transcript_path")
    if not isinstance(raw_path, str) or not raw_path:
        raise ValueError("the hook input has no transcript_path")
    thread = _ingest(store, Path(raw_path).expanduser(), final=event in FINAL_EVENTS, out=out)
    if thread is None:
        return out
    if event in ("SessionStart", "BeforeAgent"):
        from continuity.caches.live_session import note_hook_session

        note_hook_session(store, payload, thread.id, "gemini-cli")
    if event == "BeforeAgent":
        _restore(store, thread, out)
    return out


def _log_error(location: StoreLocation, event: str, message: str) -> None:
    from continuity.claude_code.hooks import log_error

    log_error(local_dir_of(location), f"{event} (gemini)", message, server=is_store_url(location))


def _payload(raw: bytes) -> dict[str, Any]:
    try:
        payload = msgspec.json.decode(raw) if raw.strip() else {}
    except msgspec.DecodeError as exc:
        raise ValueError(f"hook input is not JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise ValueError("hook input is not a JSON object")
    return payload


def _log(local: Path, label: str, message: str) -> None:
    from continuity.claude_code.hooks import log_error

    log_error(local, f"{label} (gemini)", message, server=True)


def _keep(
    url: str, event: str, payload: dict[str, Any], reason: str, *, news: bool, busy: bool
) -> int:
    from continuity.claude_code.server_guard import keep_for_later

    final = event in FINAL_EVENTS
    return keep_for_later(
        url, event, payload, reason, news=news, busy=busy, agent="gemini", final=final, log=_log
    )


def main(argv: list[str], *, store: StoreLocation | None = None, stdin: bytes | None = None) -> int:
    """Run one Gemini CLI hook; always 0 (a hook must not break the session). On a server
    store, a sick server costs the hook nothing it waits on (ADR 0041; see
    :mod:`continuity.claude_code.server_guard`)."""
    from continuity.claude_code import server_guard as guard
    from continuity.store.locate import open_store

    event: str | None = argv[0] if argv else None
    location = store if store is not None else default_store_location()
    url = str(location) if is_store_url(location) else ""
    opened: BaseStore | None = None
    payload: dict[str, Any] | None = None
    timer: threading.Timer | None = None
    try:
        if url:
            payload = _payload(stdin if stdin is not None else sys.stdin.buffer.read(_MAX_STDIN))
            event = _event_name(event, payload)
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
            payload = _payload(stdin if stdin is not None else sys.stdin.buffer.read(_MAX_STDIN))
            event = _event_name(event, payload)
        outcome = run_hook(opened, event, payload)
        if url:
            notes = outcome.notes

            def ingest(store: BaseStore, path: Path, final: bool) -> None:
                _ingest(store, path, final=final, out=outcome)

            guard.catch_up(opened, url, notes, agent="gemini", ingest=ingest, log=_log)
    except Exception as exc:  # never break the session: report and exit 0
        if opened is not None:
            opened.close()
        if timer is not None:
            timer.cancel()
        failed = guard.unavailable(exc) if url and payload is not None else None
        if failed is not None and payload is not None:
            return _keep(
                url, str(event), payload, guard.one_line(exc), news=True, busy=failed == "busy"
            )
        message = guard.one_line(exc)
        sys.stderr.write(f"continuity: {message}\n")
        _log_error(location, str(event), message)
        if os.environ.get("CONTINUITY_DEBUG"):
            import traceback

            traceback.print_exc()
        return 0
    try:
        if outcome.stdout:
            sys.stdout.buffer.write((outcome.stdout + "\n").encode("utf-8", "replace"))
            sys.stdout.buffer.flush()
        for note in outcome.notes:
            sys.stderr.write(f"continuity: {note}\n")
    except OSError:
        pass
    for note in outcome.notes:
        _log_error(location, str(event), note)
    opened.close()
    if timer is not None:
        timer.cancel()
    return 0
