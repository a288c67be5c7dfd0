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

from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import msgspec

from continuity._fs import read_checked, write_checked
from continuity.agents.base.hook import HookOutcome, HookSpec, run_guarded
from continuity.paths import StoreLocation
from continuity.store.base import BaseStore, Thread

if TYPE_CHECKING:
    pass

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


class SessionState(msgspec.Struct, kw_only=True):
    """Per-session hook state (a cache: losing it costs at most one restore more)."""

    compressed: str = ""
    """The latest checkpoint of a compression the hooks archived."""
    restored: str = ""
    """The checkpoint whose restore was given last."""


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
    from continuity.agents.base.restore import restore_context

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
        if not out.stdout:  # the rolling context manager's reminder (ADR 0056)
            from continuity.rolling.queue import prompt_reminder

            text = prompt_reminder(thread)
            if text:
                out.stdout = msgspec.json.encode(
                    {
                        "hookSpecificOutput": {
                            "hookEventName": "BeforeAgent",
                            "additionalContext": text,
                        }
                    }
                ).decode()
    return out


def _ingest_kept(store: BaseStore, path: Path, final: bool, notes: list[str]) -> None:
    _ingest(store, path, final=final, out=HookOutcome(notes=notes))


SPEC: Final = HookSpec(
    agent="gemini",
    event_of=_event_name,
    run=run_hook,
    ingest_kept=_ingest_kept,
    final_events=FINAL_EVENTS,
    log_suffix=" (gemini)",
)
"""What the guarded runner (:mod:`continuity.agents.base.hook`) runs for Gemini CLI."""


def main(argv: list[str], *, store: StoreLocation | None = None, stdin: bytes | None = None) -> int:
    """Run one Gemini CLI hook; always 0 (a hook must not break the session). On a server
    store, a sick server costs the hook nothing it waits on (ADR 0041; see
    :mod:`continuity.agents.base.hook`)."""
    return run_guarded(SPEC, argv, store=store, stdin=stdin)
