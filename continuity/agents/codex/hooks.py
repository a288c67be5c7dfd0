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

from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import msgspec

from continuity._fs import private_dirs, read_checked, write_checked
from continuity.agents.base.hook import HookOutcome, HookSpec, run_guarded
from continuity.paths import StoreLocation

if TYPE_CHECKING:
    from continuity.store.base import BaseStore, Thread

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


class _State(msgspec.Struct, kw_only=True):
    """Per-session hook state (a cache: losing it costs at most one restore)."""

    restore_pending: bool = False


def _state_path(store: BaseStore, thread_id: str) -> Path | None:
    from continuity.agents.base.ingest import cache_dir

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
        return _reminder(event, thread)
    from continuity.agents.base.restore import compacted, restore_context

    if not compacted(thread):
        return ""  # the compaction line is not in the rollout yet: the next prompt restores
    text = restore_context(thread)
    _save_state(store, tid, _State(restore_pending=False))
    return _context(event, text)


def _reminder(event: str, thread: Thread) -> str:
    """At a prompt, the rolling context manager's reminder to compress cold segments (ADR
    0056), when Codex's context is past the hot threshold; else ""."""
    if event != "user-prompt-submit":
        return ""
    from continuity.rolling.queue import prompt_reminder

    text = prompt_reminder(thread)
    return _context(event, text) if text else ""


def _run(store: BaseStore, event: str, payload: dict[str, Any]) -> HookOutcome:
    return HookOutcome(stdout=run_hook(store, event, payload))


def _ingest_kept(store: BaseStore, path: Path, final: bool, notes: list[str]) -> None:
    from continuity.agents.codex.ingest import ingest_rollout

    ingest_rollout(store, path, final=final)


SPEC: Final = HookSpec(
    agent="codex",
    event_of=_event,
    run=_run,
    ingest_kept=_ingest_kept,
    final_events=frozenset({"stop", "session-end"}),
    log_suffix=" (codex)",
    warm="continuity.agents.codex.ingest",  # every hook in this process ingests
)
"""What the guarded runner (:mod:`continuity.agents.base.hook`) runs for Codex."""


def main(argv: list[str], *, store: StoreLocation | None = None, stdin: bytes | None = None) -> int:
    """Run a Codex hook: ``argv`` is ``[event]`` (or empty: the event comes from stdin). On a
    server store, a sick server costs the hook nothing it waits on (ADR 0041; see
    :mod:`continuity.agents.base.hook`)."""
    return run_guarded(SPEC, argv, store=store, stdin=stdin)
