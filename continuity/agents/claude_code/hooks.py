"""``continuity hook <event>``: the Claude Code hook entry point.

A hook must never break Claude Code. Whatever happens, this module exits 0 (2 only in the
opt-in pre-compact block mode); an error becomes one line on stderr and in the store's
``errors.log``; stdout gets either nothing, plain text or one complete JSON document, written in
one piece at the end. It imports only the store and the transcript reader unless a context has
to be compiled: ``continuity hook`` is dispatched before the CLI stack is imported.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import msgspec

from continuity._fs import read_checked, write_checked
from continuity.agents.base.hook import HookOutcome, HookSpec, log_error, run_guarded
from continuity.paths import StoreLocation

if TYPE_CHECKING:
    from continuity.agents.claude_code.ingest import IngestReport
    from continuity.store.base import BaseStore, Thread

__all__ = ["EVENTS", "HookConfig", "HookOutcome", "log_error", "main", "run_hook"]

EVENTS: Final = {
    "session-start": "SessionStart",
    "user-prompt-submit": "UserPromptSubmit",
    "pre-tool-use": "PreToolUse",
    "post-tool-use": "PostToolUse",
    "pre-compact": "PreCompact",
    "post-compact": "PostCompact",
    "stop": "Stop",
    "subagent-stop": "SubagentStop",
    "session-end": "SessionEnd",
    "notification": "Notification",
}
_BY_NAME: Final = {v: k for k, v in EVENTS.items()}


class HookConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=False):
    """Settings in ``<store>/claude-code.json`` (all optional)."""

    restore_on_prompt: bool = True
    """Offer the restored context on the first prompt after a compaction if SessionStart did
    not deliver it."""
    block_compaction: bool = False
    """Exit 2 from pre-compact (blocks the compaction) after archiving. Off by default."""
    startup_pointer: bool = True
    """On startup/clear, point Claude at the previous session of the same project."""
    restore_max_chars: int = 9_500
    recall_on_prompt: bool = False
    """Search the archive for each prompt and inject what Claude no longer has in context:
    this session before its last compaction, and earlier sessions of the same project."""
    recall_max_chars: int = 1_500


class SessionState(msgspec.Struct, kw_only=True):
    """Per-session hook state (a cache: losing it costs at most one restore)."""

    compactions: int = 0
    restore_pending: bool = False
    restore_upto: int = -1
    """The archive's head when the latest compaction began (PreCompact): what that compaction
    drops ends there. -1: not recorded (the latest archived compaction is restored)."""


def _event_name(arg: str | None, payload: dict[str, Any]) -> str:
    raw = arg or ""
    if raw in EVENTS:
        return raw
    if raw in _BY_NAME:
        return _BY_NAME[raw]
    named = payload.get("hook_event_name")
    if isinstance(named, str) and named in _BY_NAME:
        return _BY_NAME[named]
    if raw:
        raise ValueError(f"unknown hook event {raw!r}")
    raise ValueError("no hook event given (argument or hook_event_name)")


def _config(store: BaseStore) -> HookConfig:
    if store.local_dir is None:
        return HookConfig()
    path = store.local_dir / "claude-code.json"
    try:
        return msgspec.json.decode(path.read_bytes(), type=HookConfig)
    except FileNotFoundError:
        return HookConfig()


def _state_path(store: BaseStore, thread_id: str) -> Path | None:
    from continuity.agents.base.ingest import cache_dir

    cache = cache_dir(store, "claude-code")
    return None if cache is None else cache / "sessions" / f"{thread_id}.json"


def _load_state(store: BaseStore, thread_id: str) -> SessionState:
    path = _state_path(store, thread_id)
    if path is None:
        return SessionState()
    try:
        data = read_checked(path)
    except (FileNotFoundError, ValueError):  # none, or damaged: start from a fresh state
        return SessionState()
    if data is None:  # an older version's: it decodes as it is
        data = path.read_bytes()
    try:
        return msgspec.json.decode(data, type=SessionState)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return SessionState()


def _save_state(store: BaseStore, thread_id: str, state: SessionState) -> None:
    path = _state_path(store, thread_id)
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    write_checked(path, msgspec.json.encode(state))  # a cache


def _context_json(event: str, text: str) -> str:
    return msgspec.json.encode(
        {"hookSpecificOutput": {"hookEventName": EVENTS[event], "additionalContext": text}}
    ).decode()


def _ingest(store: BaseStore, transcript: Path, *, final: bool, notes: list[str]) -> Thread:
    """Ingest the transcript (and its subagent files when final); return the session's thread
    (the handle everything after the ingest works on). What could not be archived is added to
    ``notes``."""
    from continuity.agents.claude_code.ingest import transcript_kind
    from continuity.agents.table import CLAUDE_CODE

    session, _agent = transcript_kind(transcript)
    if transcript.is_file():
        _ingest_file(store, transcript, final=final, notes=notes)
        if final:
            # Subagents, as bulk ingest finds them: 2.1.x writes <session>/subagents/agent-*,
            # 2.0.x flat agent-* files beside the session's (those of this session only).
            sub = transcript.with_suffix("") / "subagents"
            if sub.is_dir():
                for agent in sorted(sub.glob("agent-*.jsonl")):
                    _ingest_file(store, agent, final=True, notes=notes)
            if session:
                for agent in sorted(transcript.parent.glob("agent-*.jsonl")):
                    if agent != transcript and _flat_agent_session(agent) == session:
                        _ingest_file(store, agent, final=True, notes=notes)
    return store.thread(CLAUDE_CODE.thread_id(session))


_SNIFF_BYTES: Final = 1 << 16


def _flat_agent_session(path: Path) -> str:
    """The session a flat ``agent-<id>.jsonl`` belongs to, as ingest reads it: the
    ``sessionId`` of its first conversation line (only its first 64 KiB are read; "" when none
    is there or the file cannot be read)."""
    try:
        with open(path, "rb") as f:
            head = f.read(_SNIFF_BYTES)
    except OSError:
        return ""
    for raw in head.split(b"\n"):
        if b"sessionId" not in raw:
            continue
        try:
            obj = msgspec.json.decode(raw)
        except (msgspec.DecodeError, UnicodeDecodeError):
            continue
        if isinstance(obj, dict) and (
            obj.get("type") in ("user", "assistant") or obj.get("subtype") == "compact_boundary"
        ):
            sid = obj.get("sessionId")
            if isinstance(sid, str) and sid:
                return sid
    return ""


def _ingest_file(store: BaseStore, path: Path, *, final: bool, notes: list[str]) -> None:
    from continuity.agents.base.lines import MAX_LINE_BYTES, SKIPPED_OVERSIZE
    from continuity.agents.claude_code.ingest import ingest_transcript

    report = ingest_transcript(store, path, final=final)
    shown = str(path).encode("utf-8", "backslashreplace").decode()  # errors.log is UTF-8
    # Each said once: the cursor moves past what was read, so no later hook meets it again.
    unreadable = _unreadable(path, report)
    if unreadable:
        notes.append(f"{shown}: {unreadable}")
    oversize = report.skipped.get(SKIPPED_OVERSIZE, 0)
    if oversize:
        lines = "a line" if oversize == 1 else f"{oversize} lines"
        cap = MAX_LINE_BYTES
        size = f"{cap >> 20} MiB" if cap % (1 << 20) == 0 else f"{cap} bytes"
        notes.append(
            f"{shown}: {lines} over {size} skipped, not archived "
            "(a transcript line is loaded whole only up to that size)"
        )


def _unreadable(path: Path, report: IngestReport) -> str:
    """What a hook says of what it could not read in ``path`` ("" for nothing): a file that is
    not text is named as such (it may hold no line at all, and would otherwise archive nothing
    without a word); else the unreadable lines, counted and the first few placed."""
    from continuity.agents.base.lines import UNREADABLE, is_text, line_numbers

    bad = sum(report.skipped.get(k, 0) for k in UNREADABLE)
    first_read = report.restarted is not None and not report.bytes_read
    if not (report.messages or report.checkpoints) and (bad or first_read) and not is_text(path):
        return "not a text file, so not a Claude Code transcript: nothing archived from it"
    if not bad:
        return ""
    try:
        said = ", ".join(map(str, line_numbers(path, report.unreadable)))
    except OSError:  # gone since the read: where it was is still a place to look
        said = ", ".join(f"at byte {o}" for o in report.unreadable)
    shown = len(report.unreadable)
    more = f" and {bad - shown} more" if bad > shown else ""
    if bad == 1:
        return f"1 unreadable line skipped (not a JSON object): line {said}"
    return f"{bad} unreadable lines skipped (not JSON objects): lines {said}{more}"


def run_hook(store: BaseStore, event: str, payload: dict[str, Any]) -> HookOutcome:
    """Do what ``event`` calls for; raise on failure (``main`` turns that into exit 0).

    Every event archives what is new in the transcript first; then pre-compact gives Claude
    what to keep, session-start restores (or points to the previous session), and
    user-prompt-submit delivers a pending restore and the recall for the prompt."""
    from continuity.agents.claude_code import quick

    out = HookOutcome()
    seen = quick.stamps(event, payload)  # before the ingest: what is written during it is new
    transcript = _transcript_of(payload, event)
    # A new session's transcript may not be written yet when SessionStart fires: the pointer
    # to the previous session does not need it (and _ingest skips a missing file).
    final = event in ("pre-compact", "session-end")
    thread = _ingest(store, transcript, final=final, notes=out.notes)
    if event in ("session-start", "user-prompt-submit"):  # the live session: the MCP default
        from continuity.caches.live_session import note_hook_session

        note_hook_session(store, payload, thread.id, "claude-code")
    # Read after the ingest: a broken claude-code.json must not stop the archiving.
    cfg = _config(store)
    if event == "subagent-stop":
        agent_path = payload.get("agent_transcript_path")
        if isinstance(agent_path, str) and Path(agent_path).is_file():
            _ingest_file(store, Path(agent_path), final=True, notes=out.notes)
    elif event == "pre-compact":
        _before_compaction(store, thread, cfg, out, manual=payload.get("trigger") == "manual")
    elif event == "session-start":
        _on_session_start(store, thread, cfg, payload, out)
    elif event == "user-prompt-submit":
        _on_prompt(store, thread, cfg, payload, out)
    from continuity.agents.base.ingest import cache_dir

    quick.note_seen(cache_dir(store, "claude-code"), payload, seen)  # the fast path's note
    return out


_NO_TRANSCRIPT_YET: Final = frozenset({"session-start", "user-prompt-submit", "session-end"})


def _transcript_of(payload: dict[str, Any], event: str) -> Path:
    raw_path = payload.get("transcript_path")
    if not isinstance(raw_path, str) or not raw_path:
        raise ValueError("the hook input has no transcript_path")
    transcript = Path(raw_path).expanduser()
    # A new session's transcript is written after its first prompt is submitted: SessionStart
    # and the first UserPromptSubmit may both come before it exists (seen with the real CLI),
    # and a session that never had a prompt ends without one (`claude mcp list` fires
    # SessionEnd for the session it starts to check the servers).
    if not transcript.is_file() and event not in _NO_TRANSCRIPT_YET:
        raise FileNotFoundError(f"transcript {transcript} does not exist")
    return transcript


def _before_compaction(
    store: BaseStore, thread: Thread, cfg: HookConfig, out: HookOutcome, *, manual: bool
) -> None:
    """Mark a restore as due after the compaction, and tell Claude what its summary must keep
    (or block the compaction, when configured to).

    Not on a manual ``/compact``: Claude Code (2.1.328) shows a PreCompact hook's output to the
    user as the command's output, and keeps it in the new context, as well as adding it to the
    summary's instructions (one text for both; for an automatic compaction the display is
    suppressed). The restore after the compaction gives the details back either way."""
    from continuity.agents.base.restore import preservation_guidance

    if not cfg.block_compaction:  # a blocked compaction leaves nothing to restore
        state = _load_state(store, thread.id)
        state.restore_pending = True
        # The transcript is complete here; at SessionStart (compact) the new compaction is not
        # in it yet (claude-code.md): the restore then covers up to this head.
        head = thread.head()
        state.restore_upto = -1 if head is None else head.seq
        _save_state(store, thread.id, state)
    if thread.exists() and not manual:
        out.stdout = preservation_guidance(thread)
    if cfg.block_compaction:
        out.exit_code = 2
        out.stderr = "continuity: compaction blocked by configuration (block_compaction)"


def _on_session_start(
    store: BaseStore, thread: Thread, cfg: HookConfig, payload: dict[str, Any], out: HookOutcome
) -> None:
    """After a compaction or on resume, the restore; on a new session, where the previous one of
    the project is archived."""
    source = payload.get("source")
    if source == "resume" and thread.exists():
        from continuity.agents.base.restore import RESTORE_MARK, compacted

        # A resumed session that never compacted is loaded whole: a restore would only repeat it.
        if not compacted(thread):
            return
        # Claude Code loads a compacted session from its last compaction on, with the hook
        # context given then (a restore after that compaction, or at an earlier resume): one
        # more would put the restore into the context twice.
        if _context_holds(_transcript_of(payload, "session-start"), RESTORE_MARK):
            return
    if source in ("compact", "resume") and thread.exists():
        from continuity.agents.base.restore import restore_context

        state = _load_state(store, thread.id)
        upto = _pending_upto(state) if source == "compact" else None
        text = restore_context(thread, max_chars=cfg.restore_max_chars, upto=upto)
        out.stdout = _context_json("session-start", text)
        if source == "compact":
            state.compactions += 1
        state.restore_pending = False
        _save_state(store, thread.id, state)
    elif source in ("startup", "clear") and cfg.startup_pointer:
        pointer = _previous_session_pointer(store, thread.id, payload.get("cwd"))
        if pointer:
            out.stdout = _context_json("session-start", pointer)


def _pending_upto(state: SessionState) -> int | None:
    """Where the stretch of the compaction being restored ends (recorded at PreCompact), or
    None: not recorded, the latest archived compaction's."""
    return state.restore_upto if state.restore_pending and state.restore_upto >= 0 else None


_TAIL_CHUNK: Final = 1 << 16
_TAIL_MAX: Final = 64 << 20


def _context_holds(transcript: Path, mark: str) -> bool:
    """Whether hook context holding ``mark`` is in the transcript after its last
    ``compact_boundary`` (what Claude Code loads on resume). Read backwards from the end, at
    most 64 MiB: past that (or in a file that cannot be read) it is taken as absent."""
    needle = mark.encode()
    try:
        f = open(transcript, "rb")  # noqa: SIM115 - closed below, in every path
    except OSError:
        return False
    with f:
        pos = f.seek(0, 2)
        tail = b""
        start = pos
        while pos > 0 and start - pos < _TAIL_MAX:
            step = min(_TAIL_CHUNK, pos)
            pos -= step
            f.seek(pos)
            tail = f.read(step) + tail
            lines = tail.split(b"\n")
            tail = lines[0] if pos > 0 else b""  # maybe a part of a line: read with the next
            for raw in reversed(lines[1:] if pos > 0 else lines):
                if b"compact_boundary" in raw and _is_boundary(raw):
                    return False
                if needle in raw and b"hook_additional_context" in raw:
                    return True
    return False


def _is_boundary(raw: bytes) -> bool:
    try:
        obj = msgspec.json.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return False
    return isinstance(obj, dict) and obj.get("subtype") == "compact_boundary"


def _on_prompt(
    store: BaseStore, thread: Thread, cfg: HookConfig, payload: dict[str, Any], out: HookOutcome
) -> None:
    """A restore still due (Claude Code did not show the session-start one), then what the
    archive holds about the prompt."""
    parts: list[str] = []
    state = _load_state(store, thread.id)
    restoring = cfg.restore_on_prompt and state.restore_pending and thread.exists()
    if restoring:
        from continuity.agents.base.restore import restore_context

        text = restore_context(thread, max_chars=cfg.restore_max_chars, upto=_pending_upto(state))
        parts.append(text)
    prompt = payload.get("prompt")
    if cfg.recall_on_prompt and isinstance(prompt, str) and prompt.strip():
        from continuity.agents.base.restore import prompt_recall

        cwd = payload.get("cwd")
        recalled = prompt_recall(
            thread,
            prompt,
            project=cwd if isinstance(cwd, str) else None,
            max_chars=cfg.recall_max_chars,
            model=_recall_model(store, out),
        )
        if recalled:
            parts.append(recalled)
    if restoring:  # delivered only now: a failing recall must not swallow the restore
        state.restore_pending = False
        _save_state(store, thread.id, state)
    parts.extend(_rolling_reminder(thread, out))
    if parts:
        out.stdout = _context_json("user-prompt-submit", "\n\n".join(parts))


def _rolling_reminder(thread: Thread, out: HookOutcome) -> list[str]:
    """The rolling context manager's reminder to compress cold segments (ADR 0056), when the
    context is past its hot threshold; a failure is a note, never the prompt's."""
    from continuity.errors import ContinuityError
    from continuity.rolling.queue import prompt_reminder

    try:
        text = prompt_reminder(thread)
    except (ContinuityError, OSError) as exc:
        out.notes.append(f"rolling reminder: {exc}")
        return []
    return [text] if text else []


def _recall_model(store: BaseStore, out: HookOutcome) -> tuple[Any, int] | None:
    """The store's model (``continuity model use``) and the documents a recall may embed now
    (``embed_budget``; the rest is searched as its vector cache holds it), or None: BM25
    alone. A model that cannot be loaded is a note, and the recall goes on by words alone."""
    from continuity.errors import ContinuityError
    from continuity.retrieval.settings import read_search_settings

    try:
        settings = read_search_settings(store)
        if not settings.model:
            return None
        from continuity.retrieval.models import load_model

        # The engine every other search uses ($CONTINUITY_ENGINE, else onnxruntime when the
        # extra is installed): numpy would answer ~0.4 s sooner in a one-shot process, but the
        # documents a hook embeds go into the store's vector cache, and the two engines agree
        # to a cosine of 0.9999, not to the bit: one cache, one engine (ADR 0042).
        return load_model(settings.model, kind=settings.embedder), settings.embed_budget
    except ContinuityError as exc:
        out.notes.append(f"recall_on_prompt: {exc}; searched by words alone")
        return None


def _previous_session_pointer(store: BaseStore, thread_id: str, cwd: object) -> str:
    from continuity.agents.base.sessions import previous_session

    if not isinstance(cwd, str) or not cwd:
        return ""
    prev = previous_session(store, cwd, exclude=thread_id)
    if prev is None:
        return ""
    return (
        f"continuity archived the previous session of this project as thread {prev.thread_id} "
        f"(last active {prev.last_active} UTC). "
        f"`continuity compile {prev.thread_id} --format text` shows its context."
    )


def _ingest_kept(store: BaseStore, path: Path, final: bool, notes: list[str]) -> None:
    _ingest(store, path, final=final, notes=notes)


SPEC: Final = HookSpec(
    agent="claude-code",
    event_of=_event_name,
    run=run_hook,
    ingest_kept=_ingest_kept,
    final_events=frozenset({"pre-compact", "session-end"}),
    warm="continuity.agents.claude_code.ingest",  # every hook in this process ingests
)
"""What the guarded runner (:mod:`continuity.agents.base.hook`) runs for Claude Code."""


def main(argv: list[str], *, store: StoreLocation | None = None, stdin: bytes | None = None) -> int:
    """Run a hook: ``argv`` is ``[event]`` (or empty: the event comes from stdin); the store is
    ``store`` (a folder or a server URL) or the default one; ``stdin``: the input when it was
    read already (the fast path reads it). The guarded runner does the rest
    (:func:`continuity.agents.base.hook.run_guarded`): on a server store the hook never waits
    on a sick server (ADR 0041)."""
    return run_guarded(SPEC, argv, store=store, stdin=stdin)
