"""``continuity hook <event> --agent scribe``: the foundation's guarded runner, with Scribe's
events and its SessionStart answer (the restore, after a compaction)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

from continuity.agents.base.hook import HookOutcome, HookSpec, run_guarded
from continuity.paths import StoreLocation
from continuity.store.base import BaseStore

EVENTS: Final = {"session-start": "SessionStart", "turn-end": "TurnEnd", "compact": "Compact"}
_BY_NAME: Final = {v: k for k, v in EVENTS.items()}


def _event(arg: str | None, payload: dict[str, Any]) -> str:
    named = arg or payload.get("hook_event_name")
    if named in EVENTS:
        return str(named)
    if isinstance(named, str) and named in _BY_NAME:
        return _BY_NAME[named]
    raise ValueError(f"unknown Scribe hook event {named!r}")


def _run(store: BaseStore, event: str, payload: dict[str, Any]) -> HookOutcome:
    from tests.agents.fifth_agent.ingest import ingest_session

    raw = payload.get("transcript_path")
    if not isinstance(raw, str) or not raw:
        raise ValueError("the hook input has no transcript_path")
    report = ingest_session(store, Path(raw))
    if event != "session-start" or payload.get("source") != "compact" or not report.thread:
        return HookOutcome()
    from continuity.agents.base.restore import compacted, restore_context

    thread = store.thread(report.thread)
    if not compacted(thread):
        return HookOutcome()
    return HookOutcome(stdout=json.dumps({"context": restore_context(thread, log=False)}))


def _kept(store: BaseStore, path: Path, final: bool, notes: list[str]) -> None:
    from tests.agents.fifth_agent.ingest import ingest_session

    ingest_session(store, path)


SPEC: Final = HookSpec(
    agent="scribe", event_of=_event, run=_run, ingest_kept=_kept, log_suffix=" (scribe)"
)


def main(argv: list[str], *, store: StoreLocation | None = None, stdin: bytes | None = None) -> int:
    return run_guarded(SPEC, argv, store=store, stdin=stdin)
