"""What to give Claude back after it compacts: the detail its own summary is known to lose.

Claude's summary keeps the story; it drops exact commands and their outcomes, error messages, the
full list of files read or changed, and the user's own words. The restore context puts those
back (extracted from the archived messages before the compaction), followed by the most recent
raw turns, within a character budget that Claude Code injects whole (it previews anything over
10,000 characters). The recent turns are chosen by ``compile`` at the compaction point, so the
selection is logged like every other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

import msgspec

from continuity import frames as fr
from continuity.agents.table import is_own_compaction
from continuity.caches.thread_index import CheckpointEntry
from continuity.context.bundle import BundleItem, ContextBundle, MessageItem, ToolStubBlock
from continuity.context.sources import ThreadSource, open_source
from continuity.context.transcript_rules import is_meta
from continuity.errors import ContinuityError, InvalidQuery
from continuity.store.base import Thread

if TYPE_CHECKING:  # search imports numpy: only when a prompt is searched
    from continuity.retrieval.search import Hit

__all__ = [
    "RESTORE_MARK",
    "RESTORE_MAX_CHARS",
    "compacted",
    "preservation_guidance",
    "restore_context",
]

RESTORE_MARK: Final = "Restored by continuity from the archive of this session"
"""In every restore's first line: how a hook finds a restore already in the agent's context."""
RESTORE_MAX_CHARS: Final = 9_500
GUIDANCE_MAX_CHARS: Final = 2_000
_EXTRACT_MESSAGES: Final = 2_000
_OTHER_HITS: Final = 3
_RECENT_MESSAGES: Final = 40  # as many as the room left allows: to_text keeps the newest
_MAX_RANKED: Final = 384
_NOTES: Final = 20  # of each kind
_NOTE_KINDS: Final = ("continuity.note", "continuity.decision")
""":data:`continuity.retrieval.documents.NOTE_KINDS`, named here: importing the search's
documents (its terms and stemmer) cost every restore a millisecond for two strings."""
_NOTES_MAX_CHARS: Final = 1_500
_OTHERS_MAX_CHARS: Final = 800


def _messages_between(
    source: ThreadSource, after_seq: int, to_seq: int
) -> list[fr.MessageAppended]:
    """The messages in ``(after_seq, to_seq]`` (the last ``_EXTRACT_MESSAGES`` of them)."""
    hi = source.message_count_upto(to_seq)
    lo = max(source.message_count_upto(after_seq) if after_seq >= 0 else 0, hi - _EXTRACT_MESSAGES)
    if hi <= lo:
        return []
    first = source.message_seq(lo)
    return [f for f in source.frames(first, to_seq) if isinstance(f, fr.MessageAppended)]


def _sections(
    messages: Sequence[fr.MessageAppended],
    budget: int,
    *,
    guidance: bool,
    agents: Sequence[fr.MessageAppended] = (),
) -> str:
    """The restore's own extraction (not the compaction summarizer's: its output is a contract),
    packed by value within ``budget``; ``agents``: the subagents' messages of the same stretch."""
    from continuity.agents.base._restore_extract import extract
    from continuity.agents.base._restore_pack import pack, sections

    by_agents = extract(agents) if agents else None
    return pack(sections(extract(messages), guidance=guidance, agents=by_agents), budget)


def _ts_of(source: ThreadSource, seq: int) -> int | None:
    frame = next(iter(source.frames(seq, seq)), None)
    return frame.ts_ms if frame is not None else None


def _subagent_messages(
    thread: Thread, after_ms: int | None, upto_ms: int | None
) -> list[fr.MessageAppended]:
    """The messages of the session's subagent threads (``<thread>.agent-*``, whose parent it
    is) timed in ``(after_ms, upto_ms]`` (None: unbounded): what they did in the stretch the
    compaction dropped. Each thread's messages stay together, so a call meets its result."""
    prefix = thread.id + ".agent-"
    store = thread.store
    found: list[fr.MessageAppended] = []
    # stored_thread_ids: the names alone (threads() would read every log's head, ~17 ms per
    # 1,000 threads on this path); a log with no committed frame yields no thread_created below
    for tid in store.stored_thread_ids():
        if not tid.startswith(prefix):
            continue
        frames = iter(store.thread(tid).read(types=["thread_created", "message_appended"]))
        created = next(frames, None)
        if not isinstance(created, fr.ThreadCreated) or created.parent_thread_id != thread.id:
            continue
        found.extend(
            f
            for f in frames
            if isinstance(f, fr.MessageAppended)
            and (after_ms is None or f.ts_ms > after_ms)
            and (upto_ms is None or f.ts_ms <= upto_ms)
        )
    return found[-_EXTRACT_MESSAGES:]


def _notes(thread: Thread, budget: int) -> str:
    """The decisions and notes the agent recorded in this session (the MCP ``remember``
    tool), the newest that fit ``budget`` characters, oldest first; "" when there are none."""
    from continuity.context.records import records

    found: list[tuple[int, str, str]] = []
    for kind in _NOTE_KINDS:
        for r in records(thread, kind, limit=_NOTES):
            text = r.data.get("text") if isinstance(r.data, dict) else None
            if isinstance(text, str) and text.strip():
                found.append((r.seq, kind.rpartition(".")[2], " ".join(text.split())))
    if not found:
        return ""
    title = "## Decisions and notes recorded in this session\n"
    lines: list[str] = []
    used = len(title) + 1
    for seq, kind, text in sorted(found, reverse=True):
        line = f"- [{kind} #{seq}] {text}"
        if len(line) > 400:
            line = line[:399] + "…"
        if used + len(line) + 1 > budget:
            break
        lines.append(line)
        used += len(line) + 1
    return title + "\n".join(reversed(lines)) + "\n\n" if lines else ""


def _checkpoints(source: ThreadSource) -> list[CheckpointEntry]:
    """The agent's own compactions of the thread (Claude's, or Codex's, Gemini CLI's, …:
    :func:`~continuity.agents.table.is_own_compaction`), from the index (a session has few). A
    checkpoint made by ``continuity compact`` takes nothing out of the agent's context, so it
    bounds nothing."""
    return [c for c in source.checkpoints() if is_own_compaction(c.cut_rule_id)]


def _others(thread: Thread, after_ms: int | None, upto_ms: int, budget: int) -> str:
    """The note on other agents' sessions of the project in the stretch; "" when there are
    none, or when it cannot be made (a restore never fails for it)."""
    from continuity.agents.base._restore_others import other_agents_note

    try:
        return other_agents_note(thread, after_ms, upto_ms, budget)
    except (ContinuityError, OSError):
        return ""


def agent_written(
    thread: Thread,
    after: int,
    upto: int,
    messages: list[fr.MessageAppended],
    budget: int,
) -> tuple[str, list[fr.MessageAppended]]:
    """The agent-written summaries of stretches in ``(after, upto]`` as a section of at most
    ``budget`` characters, and ``messages`` without those the summaries cover; ("",
    ``messages``) when there are none or they cannot be read (a restore never fails for
    them)."""
    from continuity.rolling.warm import agent_summaries

    try:
        text, spans = agent_summaries(thread, after, upto, budget)
    except (ContinuityError, OSError):
        return "", messages
    if not spans:
        return "", messages
    rest = [m for m in messages if not any(a <= m.seq <= b for a, b in spans)]
    return text + "\n", rest


def compacted(thread: Thread) -> bool:
    """Whether Claude has compacted the session at least once (what a resume loads then is its
    summary and what followed, so a restore has something to give back)."""
    return bool(_checkpoints(open_source(thread)))


def _bounds(
    cps: Sequence[CheckpointEntry], upto: int | None
) -> tuple[CheckpointEntry | None, CheckpointEntry | None]:
    """(the compaction before the stretch, the compaction that ends it) for a restore: the
    latest two checkpoints, or, for ``upto`` (the archive's head when the agent was about to
    compact), the last one before it and the first at or after it (None: not archived yet)."""
    if upto is None:
        return (cps[-2] if len(cps) > 1 else None), (cps[-1] if cps else None)
    before = [c for c in cps if c.to_seq < upto]
    after = [c for c in cps if c.to_seq >= upto]
    return (before[-1] if before else None), (after[0] if after else None)


def restore_context(
    thread: Thread,
    *,
    max_chars: int = RESTORE_MAX_CHARS,
    log: bool = True,
    upto: int | None = None,
) -> str:
    """The context to give Claude after its latest compaction (or on resume), ≤ ``max_chars``.

    ``upto``: the archive's head when the compaction began (recorded by the agent's
    pre-compaction hook). Claude Code fires SessionStart (``compact``) before the new
    compaction is in its transcript, so the latest archived checkpoint is then the previous
    one: the restore must cover the stretch that ends at ``upto``, not the one before it."""
    from continuity.context.compiler import DEFAULT_BUDGET_TOKENS, compile_context
    from continuity.context.render import to_text

    thread_id = thread.id
    source = open_source(thread)
    head = source.head_seq()
    if head is None:
        raise ContinuityError(f"thread {thread_id} is empty")
    if upto is not None:
        upto = min(upto, head)
    previous, latest = _bounds(_checkpoints(source), upto)
    end = latest.seq if latest is not None else (head if upto is None else upto)
    upto = latest.to_seq if latest is not None else end
    after = previous.to_seq if previous is not None else -1
    messages = _messages_between(source, after, upto)
    header = (
        f"# {RESTORE_MARK} (thread {thread_id})\n"
        "Exact details from before the compaction, which the summary above may have lost. "
        f"Everything is archived: `continuity log {thread_id}` shows it all.\n\n"
    )
    # The subagents' work in the same stretch, by time: after the previous compaction, up to
    # the latest (Claude's summary is written when it compacts).
    agents = _subagent_messages(
        thread,
        _ts_of(source, previous.seq) if previous is not None else None,
        None if latest is None and end == head else _ts_of(source, end),
    )
    header += _notes(thread, min(_NOTES_MAX_CHARS, max_chars // 4))
    # The agent's own summaries of old topics (the warm tier, ADR 0056) stand for their
    # stretches: the extraction below keeps to what they do not cover.
    own, messages = agent_written(thread, after, upto, messages, max_chars // 3)
    header += own
    # What other agents' sessions of the project did in the same stretch (since the previous
    # compaction, or the session's start): a line each.
    upto_ms = _ts_of(source, end)
    if upto_ms is not None:
        after_ms = _ts_of(source, previous.seq if previous is not None else 0)
        header += _others(thread, after_ms, upto_ms, min(_OTHERS_MAX_CHARS, max_chars // 8))
    extract = _sections(messages, max_chars - len(header), guidance=False, agents=agents)
    room = max_chars - len(header) - len(extract) - 2
    recent = ""
    if room > 200 and messages:
        # The default budget, as for any compile: a message too large for it (a pasted log of
        # megabytes) is elided in the bundle, not carried whole into a bundle and its artifact.
        # Only the stretch's own turns: those before the previous compaction were given back
        # after it, and Claude's latest summary covers them.
        # The agent's own injected context (AGENTS.md, Codex's <environment_context>, Gemini
        # CLI's <session_context>: meta messages) is not the user's words and the agent has it
        # again: it takes no place in the window.
        meta = {m.seq for m in messages[-4 * _RECENT_MESSAGES :] if is_meta(m.meta)}
        limits = fr.Limits(
            recent_messages=min(_RECENT_MESSAGES + len(meta), len(messages)),
            max_summary_refs=0,
            budget_tokens=DEFAULT_BUDGET_TOKENS,
            keep_tool_outputs=2,
        )
        result = compile_context(thread, anchor=upto, limits=limits, log=log)
        recent = to_text(_as_restored(result.bundle, meta, messages), max_chars=room)
    text = header + extract + ("\n\n" + recent if recent else "")
    return text[:max_chars]


def _as_restored(
    bundle: ContextBundle, meta: set[int], messages: Sequence[fr.MessageAppended]
) -> ContextBundle:
    """The bundle without the ``meta`` messages, each command result whose exit code (as the
    agent reports it: Codex, Gemini CLI) is not 0 marked as the error it is."""
    from continuity.agents.base._restore_tools import failed_results

    failed = failed_results(messages)
    kept: list[BundleItem] = []
    for item in bundle.items:
        if not isinstance(item, MessageItem):
            kept.append(item)
            continue
        if item.seq in meta:
            continue
        if failed and any(getattr(b, "tool_use_id", None) in failed for b in item.content):
            content = [
                msgspec.structs.replace(b, is_error=True)
                if isinstance(b, fr.ToolResultBlock | ToolStubBlock) and b.tool_use_id in failed
                else b
                for b in item.content
            ]
            item = msgspec.structs.replace(item, content=content)
        kept.append(item)
    return msgspec.structs.replace(bundle, items=kept)


def preservation_guidance(thread: Thread) -> str:
    """Short guidance for Claude's compaction (≤ 2,000 characters): what its summary must keep."""
    source = open_source(thread)
    head = source.head_seq()
    if head is None:
        return ""
    cps = _checkpoints(source)
    after = cps[-1].to_seq if cps else -1
    intro = (
        "When summarizing, keep these exactly (continuity archives the full session; "
        "details dropped here can be restored):\n"
    )
    messages = _messages_between(source, after, head)
    body = _sections(messages, GUIDANCE_MAX_CHARS - len(intro), guidance=True)
    return (intro + body)[:GUIDANCE_MAX_CHARS] if body else ""


def prompt_recall(
    thread: Thread,
    prompt: str,
    *,
    project: str | None,
    max_chars: int,
    model: tuple[Any, int] | None = None,
) -> str:
    """What the archive holds for ``prompt`` that Claude no longer has in context: this
    session's messages before its last compaction, and earlier sessions of the same project.
    "" when nothing is found (or the prompt has nothing searchable). ``model``: (the store's
    embedder, the documents each of the two searches may embed now) to fuse with BM25."""
    from continuity.retrieval.search import search_prefix

    thread_id = thread.id
    hits: list[Hit] = []
    try:
        if thread.exists():
            # Only Claude's own compactions take messages out of its context (a checkpoint
            # made by `continuity compact` does not).
            cps = _checkpoints(open_source(thread))
            if cps:
                embedder, budget = model if model is not None else (None, None)
                hits += search_prefix(
                    thread, prompt, max_seq=cps[-1].to_seq, k=3, embedder=embedder, budget=budget
                )
        if project:
            hits += _other_sessions(thread, prompt, project, model)
    except InvalidQuery:
        return ""
    if not hits:
        return ""
    lines = ["continuity recalled from the archive (no longer in this context):"]
    used = len(lines[0])
    for h in hits:
        where = "this session" if h.thread_id == thread_id else f"session {h.thread_id}"
        line = f"- [{where}, seq {h.seq}{' ' + h.role if h.role else ''}] {h.snippet}"
        if used + 1 + len(line) > max_chars:
            continue
        lines.append(line)
        used += 1 + len(line)
    return "\n".join(lines) if len(lines) > 1 else ""


def _other_sessions(
    thread: Thread, prompt: str, project: str, model: tuple[Any, int] | None
) -> list[Hit]:
    """The best hits of the project's other sessions, ranked across the whole project (one set
    of statistics). This session and its subagents rank too and are skipped, so the ranking is
    read further down while they crowd out everything else (up to ``_MAX_RANKED`` hits)."""
    from continuity.retrieval.search import Embedding, search

    thread_id = thread.id
    k = 2 * _OTHER_HITS
    embedder = None if model is None else model[0]
    how = Embedding() if model is None else Embedding(budget=model[1])
    while True:
        found = search(thread.store, prompt, project=project, k=k, embedder=embedder, embedding=how)
        others = [
            h
            for h in found
            if h.thread_id != thread_id and not h.thread_id.startswith(thread_id + ".")
        ]
        if len(others) >= _OTHER_HITS or len(found) < k or k >= _MAX_RANKED:
            return others[:_OTHER_HITS]
        k *= 8
