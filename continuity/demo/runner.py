"""``continuity demo``: a scripted Claude Code session replayed through the real hooks.

The demo writes a realistic transcript (:mod:`.script`: a bug fix with failing tests, new
tests, a profile with a large output, an auto compaction in the middle of the work, a commit) in
a temporary folder laid out like ``~/.claude/projects/<project>/<session>.jsonl``, growing it
line by line as Claude Code would, and runs the hook entry point (:func:`hooks.run_hook`)
in-process at every point Claude Code would run a hook. It then reports what the archive holds,
the pre-compact guidance, the selection decision the restore logged, and the context given back
to Claude after the compaction.

The session id is ``demo-<uuid>``, so the thread (``cc-demo-<uuid>``) never clashes with a
real session and is easy to tell apart in ``continuity sessions``.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

import msgspec

from continuity import frames as fr
from continuity.agents.base.restore import RESTORE_MAX_CHARS
from continuity.agents.claude_code.hooks import EVENTS, run_hook
from continuity.agents.table import CLAUDE_CODE
from continuity.demo.script import CWD, HookCall, session
from continuity.demo.transcript import TranscriptWriter, project_folder_name
from continuity.errors import DemoError
from continuity.paths import StoreLocation, describe_store
from continuity.store.base import BaseStore, Recovery
from continuity.store.locate import open_store

__all__ = [
    "Archive",
    "DemoResult",
    "HookRun",
    "print_report",
    "run_demo",
    "run_in_temp",
]


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
    artifacts: list[tuple[str, str, int]] = field(default_factory=list)
    """(artifact id, what it holds, size in bytes)."""
    problems: list[str] = field(default_factory=list)
    """What ``verify`` found wrong with the thread (nothing, normally)."""


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


def _detail(call: HookCall) -> str:
    for key in ("source", "trigger", "tool_name"):
        value = call.fields.get(key)
        if isinstance(value, str):
            return value
    return ""


def _head_seq(store: BaseStore, thread_id: str) -> int:
    head = store.thread(thread_id).head()
    return -1 if head is None else head.seq


def run_demo(store: BaseStore, workdir: Path, *, session_id: str | None = None) -> DemoResult:
    """Write the scripted session under ``workdir`` and feed it through the hooks into ``store``."""
    session_id = session_id or f"demo-{uuid.uuid4()}"
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
    if checkpoint is None or checkpoint.produced_by != "claude-code":
        raise DemoError("Claude's compaction did not become a checkpoint in the archive")
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
    ``store_path`` (created if missing) or, when ``store_path`` is None, into a throwaway store
    in that folder. The folder is deleted afterwards unless ``keep``."""
    workdir = Path(tempfile.mkdtemp(prefix="continuity-demo-"))
    try:
        root = workdir / "store" if store_path is None else store_path
        with open_store(root, create=True, on_recovery=on_recovery) as store:
            result = run_demo(store, workdir)
    finally:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    result.temporary_store = store_path is None
    result.workdir = workdir
    result.kept = keep
    return result


# --- the report -----------------------------------------------------------------------------


def _kb(n: int) -> str:
    return f"{n / 1024:,.1f} KB"


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _where(result: DemoResult) -> str:
    gone = "" if result.kept else "  (deleted at the end)"
    if result.temporary_store:
        which = "a temporary store" + ("" if result.kept else ", deleted at the end")
    else:
        which = "the configured store: --store, else $CONTINUITY_HOME, else the default"
    return "\n".join(
        [
            f"store       {result.store_root}  ({which})",
            f"transcript  {result.transcript}{gone}",
            f"thread      {result.thread_id}",
        ]
    )


_TIMELINE_NOTE = (
    "new frames: what the hook appended to the thread. The last response of a turn is held back\n"
    "until a later line shows it complete (one API response arrives as several lines)."
)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _timeline(result: DemoResult) -> str:
    rows = [("#", "hook", "transcript", "new frames", "")]
    for i, run in enumerate(result.runs, start=1):
        hook = run.event if run.event == "post-tool-use" else f"{run.event} {run.detail}".strip()
        note = _clip(run.label, 60)
        if run.event == "pre-compact":
            note += f": {len(run.stdout):,} characters of guidance"
            if run.exit_code == 2:
                note += " (exit 2: block_compaction is set; Claude Code would cancel it)"
        elif run.event == "session-start" and run.detail == "compact":
            note += f": {len(result.restored):,} characters restored"
        elif run.event == "session-start" and run.stdout:
            note += ": a pointer to the previous session of this project"
        added = f"+{run.frames_added}" if run.frames_added else "-"
        rows.append((str(i), hook, _kb(run.transcript_bytes), added, note))
    widths = [max(len(r[c]) for r in rows) for c in range(4)]
    table = [
        f"{r[0].rjust(widths[0])}  {r[1].ljust(widths[1])}  {r[2].rjust(widths[2])}  "
        f"{r[3].rjust(widths[3])}  {r[4]}".rstrip()
        for r in rows
    ]
    return "\n".join(table) + "\n\n" + _TIMELINE_NOTE


def _archive(result: DemoResult) -> str:
    a = result.archive
    messages = a.prompts + a.assistant_messages + a.tool_results
    frames = sum(a.frames.values())
    kinds = ", ".join(f"{n} {t.replace('_', ' ')}" for t, n in a.frames.most_common())
    tools = ", ".join(f"{name} {n}" for name, n in a.tool_calls.most_common())
    cp = result.checkpoint
    lines = [
        f"thread       {result.thread_id}: {_plural(frames, 'frame')} ({kinds})",
        f"messages     {messages}: {_plural(a.prompts, 'prompt')}, "
        f"{a.assistant_messages} assistant, {_plural(a.tool_results, 'tool result')}",
        f"tool calls   {sum(a.tool_calls.values())}: {tools}",
        f"checkpoint   {cp.checkpoint_id} at seq {cp.seq}: {cp.summary_kind} covering seq "
        f"{cp.from_seq}..{cp.to_seq}, produced by {cp.produced_by} ({cp.cut_rule_id})",
        f"artifacts    {len(a.artifacts)}:",
    ]
    lines += [f"  {aid[:16]}…  {_kb(size):>9}  {what}" for aid, what, size in a.artifacts]
    if a.problems:
        lines.append(f"verify       FAILED: {'; '.join(a.problems)}")
    else:
        lines.append("verify       ok: the hash chain, the artifacts and the caches check out")
    return "\n".join(lines)


def _decision(result: DemoResult) -> str:
    d = result.decision
    limits = ", ".join(
        f"{k}={v}" for k, v in msgspec.structs.asdict(d.limits).items() if v is not None
    )
    checkpoints = (
        "; ".join(f"{c.checkpoint_id} (to seq {c.to_seq}, {c.summary_kind})" for c in d.checkpoints)
        or "none: Claude's own summary is already in its context; this adds what it drops"
    )
    window = (
        f"seq {d.window_from_seq}..{d.window_to_seq} ({_plural(d.window_messages, 'message')})"
        if d.window_from_seq is not None
        else "empty"
    )
    lines = [
        f"frame        context_selection_decided at seq {d.seq}",
        f"strategy     {d.strategy}",
        f"anchor       seq {d.anchor_seq} (the last message before the compaction)",
        f"checkpoints  {checkpoints}",
        f"window       {window}",
        f"limits       {limits}",
        f"bundle       {d.bundle_artifact_id} (~{d.tokens:,} tokens)",
    ]
    lines += [f"reason       {r}" for r in d.reasons]
    return "\n".join(lines)


def _summary_head(text: str, lines: int = 12) -> str:
    kept = text.splitlines()[:lines]
    return "\n".join(kept) + f"\n… ({len(text):,} characters in all, stored whole as an artifact)"


def _next_steps(result: DemoResult) -> str:
    if not result.kept and result.temporary_store:
        return (
            "The temporary store is gone: run `continuity demo` without --temp-store to keep the "
            "session in your store, or add --keep.\n"
            "continuity install claude-code      # archive your real sessions the same way"
        )
    store = f"--store {result.store_root} " if result.temporary_store else ""
    return "\n".join(
        [
            f"continuity {store}log {result.thread_id}",
            f"continuity {store}compile {result.thread_id} --format text",
            f"continuity {store}sessions",
            "continuity install claude-code      # archive your real sessions the same way",
        ]
    )


def report_sections(result: DemoResult) -> list[tuple[str, str]]:
    """The report as (title, plain text) sections."""
    limit = f"{len(result.restored):,} characters, ≤ {RESTORE_MAX_CHARS:,}"
    return [
        (
            "continuity demo: a scripted Claude Code session replayed through the hooks",
            _where(result),
        ),
        ("The hooks, run where Claude Code would run them", _timeline(result)),
        ("What was archived", _archive(result)),
        ("pre-compact: guidance printed for Claude's compaction", result.guidance or "(none)"),
        ("Claude's compaction, archived as a checkpoint", _summary_head(result.claude_summary)),
        ("The selection decision the restore logged", _decision(result)),
        (f"session-start (compact): the context restored to Claude ({limit})", result.restored),
        ("Next", _next_steps(result)),
    ]


def print_report(result: DemoResult, file: TextIO, *, styled: bool = False) -> None:
    """Print the report: with rich panels when ``styled`` (a terminal), else plain text."""
    sections = report_sections(result)
    if not styled:
        for title, body in sections:
            file.write(f"== {title}\n{body}\n\n")
        return
    from rich.console import Console
    from rich.panel import Panel
    from rich.text import Text

    console = Console(file=file)
    for i, (title, body) in enumerate(sections):
        # the hook table reads best cut at the terminal's edge; prose and paths wrap
        text = Text(body, no_wrap=i == 1, overflow="ellipsis" if i == 1 else "fold")
        style = "bold green" if i == 6 else "cyan"
        heading = Text(title, style="bold")
        console.print(Panel(text, title=heading, title_align="left", border_style=style))
