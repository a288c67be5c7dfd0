"""``continuity demo``: a scripted Claude Code session replayed through the real hooks.

The demo writes a realistic transcript (:mod:`.script`: a bug fix with failing tests, new
tests, a profile with a large output, an auto compaction in the middle of the work, a commit) in
a temporary folder laid out like ``~/.claude/projects/<project>/<session>.jsonl``, growing it
line by line as Claude Code would, and runs the hook entry point (:func:`hooks.run_hook`)
in-process at every point Claude Code would run a hook. :mod:`.report` then tells what the
archive holds, what Claude's compaction dropped and what the restore gave back.

**One demo thread a store.** The session id is fixed (:data:`DEMO_SESSION_ID`), so its thread
is always :data:`DEMO_THREAD` (``cc-demo-invoice-service``): it never clashes with a real
session, and a store holds it once. The log is append-only and a deleted thread is never
written again, so a second run can neither replace the first one's thread nor write the same
session into it again (its messages would be there twice). When the store already holds a demo
thread (this one, or an earlier version's ``cc-demo-<uuid>``), or held it and it was deleted,
the replay goes into a throwaway store instead and the report says so: a search of the user's
store finds each of the demo's messages once, however many times the demo ran.
"""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import msgspec

from continuity import frames as fr
from continuity.agents.claude_code.hooks import EVENTS, run_hook
from continuity.agents.table import CLAUDE_CODE
from continuity.demo.script import CWD, HookCall, session
from continuity.demo.transcript import TranscriptWriter, project_folder_name
from continuity.errors import DemoError
from continuity.paths import StoreLocation, describe_store
from continuity.store.base import BaseStore, Recovery
from continuity.store.locate import open_store

__all__ = [
    "DEMO_SESSION_ID",
    "DEMO_THREAD",
    "Archive",
    "DemoResult",
    "HeldDemo",
    "HookRun",
    "held_demo",
    "run_demo",
    "run_in_temp",
]

DEMO_SESSION_ID: Final = "demo-invoice-service"
"""The demo session's id: the same every run, so that a store holds its thread once."""
DEMO_THREAD: Final = CLAUDE_CODE.thread_id(DEMO_SESSION_ID)
"""``cc-demo-invoice-service``."""
_EARLIER_DEMOS: Final = CLAUDE_CODE.thread_id("demo-")
"""The prefix of the demo's threads before its id was fixed (``cc-demo-<uuid>``)."""


@dataclass(frozen=True, slots=True)
class HookRun:
    """One hook run: what Claude Code would have seen, and what the archive gained."""

    event: str
    detail: str
    label: str
    transcript_bytes: int
    frames_added: int
    exit_code: int
    stdout: str


@dataclass(slots=True)
class Archive:
    """What the session's thread holds once the session has ended."""

    frames: Counter[str] = field(default_factory=Counter)
    prompts: int = 0
    assistant_messages: int = 0
    tool_results: int = 0
    tool_calls: Counter[str] = field(default_factory=Counter)
    compacted_messages: int = 0
    """The messages Claude's compaction summarised (those up to its checkpoint's ``to_seq``)."""
    artifacts: list[tuple[str, str, int]] = field(default_factory=list)
    """(artifact id, what it holds, size in bytes)."""
    problems: list[str] = field(default_factory=list)
    """What ``verify`` found wrong with the thread (nothing, normally)."""


@dataclass(frozen=True, slots=True)
class HeldDemo:
    """The demo thread a store already holds (or held: ``deleted``), so that the replay went
    into a throwaway store instead."""

    store: str
    """The store, as messages show it."""
    thread_id: str
    deleted: bool = False
    count: int = 1
    """How many demo threads the store holds (earlier versions made one a run)."""


def held_demo(store: BaseStore) -> HeldDemo | None:
    """The demo thread ``store`` holds or held (see the module's docstring), or None."""
    ids = store.stored_thread_ids()
    demos = sorted(t for t in ids if t.startswith(_EARLIER_DEMOS) and ".agent-" not in t)
    where = _where_store(store)
    if DEMO_THREAD in demos:
        return HeldDemo(where, DEMO_THREAD, count=len(demos))
    if demos:
        return HeldDemo(where, demos[-1], count=len(demos))
    if store.tombstone_of(DEMO_THREAD) is not None:
        return HeldDemo(where, DEMO_THREAD, deleted=True, count=0)
    return None


@dataclass(slots=True)
class DemoResult:
    store_root: str
    """Where the store is, as messages show it (a folder, or a URL without its password)."""
    transcript: Path
    thread_id: str
    runs: list[HookRun]
    guidance: str
    checkpoint: fr.CompactionCheckpointCreated
    claude_summary: str
    decision: fr.ContextSelectionDecided
    restored: str
    archive: Archive
    temporary_store: bool = False
    workdir: Path | None = None
    kept: bool = True
    held: HeldDemo | None = None
    """The demo thread the store asked for already held: the replay went to a throwaway one."""


def _detail(call: HookCall) -> str:
    for key in ("source", "trigger", "tool_name"):
        value = call.fields.get(key)
        if isinstance(value, str):
            return value
    return ""


def _head_seq(store: BaseStore, thread_id: str) -> int:
    head = store.thread(thread_id).head()
    return -1 if head is None else head.seq


def run_demo(store: BaseStore, workdir: Path, *, session_id: str = DEMO_SESSION_ID) -> DemoResult:
    """Write the scripted session under ``workdir`` and feed it through the hooks into ``store``."""
    thread_id = CLAUDE_CODE.thread_id(session_id)
    transcript = workdir / "projects" / project_folder_name(CWD) / f"{session_id}.jsonl"
    writer = TranscriptWriter(
        transcript,
        session_id=session_id,
        cwd=CWD,
        git_branch="fix/csv-quoting",
        start=datetime.now(UTC) - timedelta(minutes=20),
    )
    runs: list[HookRun] = []
    for call in session(writer):
        size = writer.flush()
        payload: dict[str, Any] = {
            "session_id": session_id,
            "transcript_path": str(transcript),
            "cwd": CWD,
            "permission_mode": "acceptEdits",
            "hook_event_name": EVENTS[call.event],
            **call.fields,
        }
        before = _head_seq(store, thread_id)
        try:
            outcome = run_hook(store, call.event, payload)
        except Exception as exc:  # any failure is the demo's one line, whatever raised it
            message = " ".join(f"{type(exc).__name__}: {exc}".split())
            raise DemoError(f"the {call.event} hook failed: {message}") from exc
        added = _head_seq(store, thread_id) - before
        runs.append(
            HookRun(
                call.event,
                _detail(call),
                call.label,
                size,
                added,
                outcome.exit_code,
                outcome.stdout,
            )
        )
    writer.flush()
    return _result(store, transcript, thread_id, runs)


def _result(store: BaseStore, transcript: Path, thread_id: str, runs: list[HookRun]) -> DemoResult:
    guidance = next((r.stdout for r in runs if r.event == "pre-compact"), "")
    restored_run = next(
        (r for r in runs if r.event == "session-start" and r.detail == "compact"), None
    )
    if restored_run is None or not restored_run.stdout:
        raise DemoError("session-start after the compaction gave Claude no context")
    try:
        out = msgspec.json.decode(restored_run.stdout)
        restored = out["hookSpecificOutput"]["additionalContext"]
    except (msgspec.DecodeError, KeyError, TypeError) as exc:
        raise DemoError(f"session-start printed something that is not hook JSON: {exc}") from None
    if not isinstance(restored, str):
        raise DemoError("session-start's additionalContext is not text")

    archive = Archive()
    checkpoint: fr.CompactionCheckpointCreated | None = None
    decision: fr.ContextSelectionDecided | None = None
    tool_names: dict[str, str] = {}
    message_seqs: list[int] = []
    for frame in store.thread(thread_id).read():
        archive.frames[str(frame.__struct_config__.tag)] += 1
        if isinstance(frame, fr.CompactionCheckpointCreated):
            checkpoint = frame
            archive.artifacts.append((frame.summary_artifact_id, "Claude's compaction summary", 0))
        elif isinstance(frame, fr.ContextSelectionDecided):
            decision = frame
            archive.artifacts.append((frame.bundle_artifact_id, "the restored context's bundle", 0))
        elif isinstance(frame, fr.MessageAppended):
            _count_message(archive, frame, tool_names)
            message_seqs.append(frame.seq)
    if checkpoint is None or checkpoint.produced_by != "claude-code":
        raise DemoError("Claude's compaction did not become a checkpoint in the archive")
    archive.compacted_messages = sum(1 for seq in message_seqs if seq <= checkpoint.to_seq)
    if decision is None:
        raise DemoError("the restore logged no selection decision")
    archive.artifacts = [
        (aid, what, len(store.artifacts.get(aid))) for aid, what, _ in archive.artifacts
    ]
    from continuity.maintenance.verify import verify_store
    from continuity.summary import decode_summary

    summary = decode_summary(store.artifacts.get(checkpoint.summary_artifact_id)).text
    report = verify_store(store, [store.thread(thread_id)])
    archive.problems = [str(p) for p in report.problems]
    return DemoResult(
        store_root=_where_store(store),
        transcript=transcript,
        thread_id=thread_id,
        runs=runs,
        guidance=guidance,
        checkpoint=checkpoint,
        claude_summary=summary,
        decision=decision,
        restored=restored,
        archive=archive,
    )


def _count_message(archive: Archive, frame: fr.MessageAppended, tool_names: dict[str, str]) -> None:
    results = [b for b in frame.content if isinstance(b, fr.ToolResultBlock)]
    if frame.role == "assistant":
        archive.assistant_messages += 1
        for b in frame.content:
            if isinstance(b, fr.ToolUseBlock):
                archive.tool_calls[b.name] += 1
                tool_names[b.id] = b.name
    elif results:
        archive.tool_results += len(results)
        for b in results:
            if b.artifact_id is not None:
                name = tool_names.get(b.tool_use_id, "tool")
                archive.artifacts.append(
                    (b.artifact_id, f"a large {name} output (seq {frame.seq})", 0)
                )
    elif frame.meta.get("is_meta") != "true":
        archive.prompts += 1


def _where_store(store: BaseStore) -> str:
    return "(in memory)" if store.location is None else describe_store(store.location)


def run_in_temp(
    store_path: StoreLocation | None,
    *,
    keep: bool = False,
    on_recovery: Callable[[Recovery], None] | None = None,
) -> DemoResult:
    """Run the demo with its transcript in a new temporary folder, into the store at
    ``store_path`` (created if missing) or, when ``store_path`` is None or that store already
    holds a demo thread (:func:`held_demo`), into a throwaway store in that folder. The folder
    is deleted afterwards unless ``keep``."""
    workdir = Path(tempfile.mkdtemp(prefix="continuity-demo-"))
    held: HeldDemo | None = None
    try:
        if store_path is not None:
            with open_store(store_path, create=True, on_recovery=on_recovery) as store:
                held = held_demo(store)
                if held is None:
                    result = run_demo(store, workdir)
        if store_path is None or held is not None:
            with open_store(workdir / "store", create=True) as store:
                result = run_demo(store, workdir)
    finally:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    result.temporary_store = store_path is None or held is not None
    result.held = held
    result.workdir = workdir
    result.kept = keep
    return result
