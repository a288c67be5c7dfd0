"""What the viewer shows, as plain data: a page of a thread's timeline, a decision and the
bundle it chose, the checkpoint hierarchy, search hits. No web framework here: the pages
(:mod:`continuity.viewer.app`) only lay these out.

Every read goes through the store's interface and the thread's source (the caches where the
store keeps them), so a page of a 1M-frame thread reads that page's frames and nothing else.
Nothing here appends to a log or stores an artifact: "compile here" compiles with ``log=False``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, Protocol

import msgspec

from continuity import frames as fr
from continuity.caches.marks import is_in
from continuity.caches.thread_index import ThreadIndex
from continuity.context.bundle import (
    ContextBundle,
    ElidedBlock,
    ItemBlock,
    MessageItem,
    RecallItem,
    SummaryItem,
    ToolStubBlock,
    decode_bundle,
)
from continuity.context.compiler import DEFAULT_LIMITS, compile_context
from continuity.context.render import render, to_text
from continuity.context.sources import ThreadSource, open_source
from continuity.errors import CorruptCache
from continuity.maintenance.stats import ThreadInfo, list_threads, thread_info
from continuity.maintenance.verify import verify_store
from continuity.retrieval.ranking import Hit
from continuity.retrieval.search import Embedding, search
from continuity.store.base import BaseStore, Thread
from continuity.store.derived import CheckpointEntry
from continuity.summary import (
    ANTHROPIC_COMPACTION_V1,
    PROVIDER_SUMMARY_KINDS,
    decode_summary,
    provider_block,
    provider_summary_text,
)

__all__ = [
    "PAGE_SIZE",
    "THREADS_PER_PAGE",
    "BlockView",
    "DecisionRow",
    "DecisionView",
    "FrameView",
    "Hierarchy",
    "ItemView",
    "Page",
    "Tell",
    "ThreadRow",
    "artifact_bytes",
    "block_full",
    "compile_here",
    "decision_rows",
    "decision_view",
    "filter_rows",
    "frames_after",
    "hierarchy",
    "highlight",
    "limits_for",
    "search_hits",
    "store_model",
    "summary_text",
    "thread_rows",
    "timeline",
    "verify_all",
    "verify_thread",
]

PAGE_SIZE: Final = 100
"""Frames on a page of the timeline."""
THREADS_PER_PAGE: Final = 200
"""Threads on a page of the threads list (a store may hold tens of thousands)."""
INLINE_CHARS: Final = 4_000
"""A block longer than this shows its beginning; the rest is opened on demand."""
_SCAN_STEP: Final = 512
"""Seqs read at a time when looking backwards for decisions."""
SCAN_LIMIT: Final = 20_000
"""At most this many frames are read back for one answer about decisions (a page of them, the
previous one): the caches index no decisions, and a page must not read a 1M-frame log."""


# --- the threads -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ThreadRow:
    info: ThreadInfo
    quarantined: int = 0
    """Torn tails moved aside from this thread's log."""


def thread_rows(store: BaseStore) -> list[ThreadRow]:
    """Every thread, the most recently active first, with its torn tails counted."""
    torn: dict[str, int] = {}
    for rec in store.quarantined():
        torn[rec.thread_id] = torn.get(rec.thread_id, 0) + 1
    return [ThreadRow(info, torn.get(info.thread_id, 0)) for info in reversed(list_threads(store))]


def filter_rows(
    rows: Sequence[ThreadRow],
    *,
    text: str = "",
    kind: str = "",
    project: str = "",
    agent: str = "",
) -> list[ThreadRow]:
    """The rows of the given ``kind``, ``project`` and ``agent`` (its name: ``codex``) whose
    id, title, project or branch holds ``text`` (case-insensitively)."""
    needle = text.strip().lower()
    return [
        r
        for r in rows
        if (not kind or r.info.kind == kind)
        and (not project or r.info.project == project)
        and (not agent or r.info.agent == agent)
        and (
            not needle
            or any(
                needle in (value or "").lower()
                for value in (r.info.thread_id, r.info.title, r.info.project, r.info.git_branch)
            )
        )
    ]


# --- a page of the timeline ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BlockView:
    """One content block as the page shows it."""

    index: int
    kind: str
    """text, thinking, tool_use, tool_result, image, provider, tool_stub or elided."""
    title: str
    body: str
    size: int = 0
    """The whole block's length in characters (or bytes, for an artifact)."""
    clipped: bool = False
    """``body`` is the beginning only: the rest is opened on demand."""
    artifact_id: str | None = None
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class FrameView:
    seq: int
    ts_ms: int
    type: str
    label: str
    role: str = ""
    blocks: list[BlockView] = field(default_factory=list)
    summary: str = ""
    """One line for a frame that is not a message."""
    retracted: bool = False
    tokens: int = 0
    checkpoint_id: str = ""
    summary_artifact_id: str = ""
    decision_seq: int | None = None
    """For a decision (or a repeat of one): the seq of the decision frame."""
    fork_of: fr.ForkPoint | None = None
    parent_thread_id: str | None = None


@dataclass(frozen=True, slots=True)
class Page:
    thread_id: str
    info: ThreadInfo
    frames: list[FrameView]
    head_seq: int
    """-1 for an empty thread."""
    first_seq: int
    last_seq: int
    focus: int | None = None
    children: list[ThreadInfo] = field(default_factory=list)
    """Threads that name this one as their parent: subagents and forks."""

    @property
    def older(self) -> int | None:
        """The seq the previous page ends before, when there is one."""
        return self.first_seq if self.frames and self.first_seq > 0 else None

    @property
    def newer(self) -> int | None:
        """The seq the next page starts at, when there is one."""
        return self.last_seq + 1 if self.frames and self.last_seq < self.head_seq else None

    @property
    def at_head(self) -> bool:
        return self.last_seq >= self.head_seq


def _clip(text: str, limit: int = INLINE_CHARS) -> tuple[str, bool]:
    return (text, False) if len(text) <= limit else (text[:limit], True)


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


def _block_text(block: ItemBlock) -> tuple[str, str, str, bool, int]:
    """(kind, title, the whole body, is_error, size) of one block."""
    if isinstance(block, fr.TextBlock):
        return "text", "", block.text, False, len(block.text)
    if isinstance(block, fr.ThinkingBlock):
        body = block.text or ("[redacted thinking]" if block.data else "")
        return "thinking", "thinking", body, False, len(body)
    if isinstance(block, fr.ToolUseBlock):
        body = _json(block.input)
        return "tool_use", f"{block.name} call", body, False, len(body)
    if isinstance(block, fr.ToolResultBlock):
        body = block.content or block.preview
        for part in block.parts:
            if isinstance(part, fr.TextBlock) and part.text not in body:
                body += ("\n" if body else "") + part.text
        size = block.size or len(body)
        title = "tool output" + (" (error)" if block.is_error else "")
        return "tool_result", title, body, block.is_error, size
    if isinstance(block, fr.ImageBlock):
        what = f"image {block.media_type}, {block.size} bytes"
        return "image", "image", block.url or what, False, block.size
    if isinstance(block, fr.ProviderBlock):
        body = block.text or _json(block.data)
        return "provider", f"{block.provider} {block.kind}", body, False, len(body)
    if isinstance(block, ToolStubBlock):
        body = block.text()
        return "tool_stub", f"{block.tool_name or 'tool'} output (elided)", body, block.is_error, 0
    if isinstance(block, ElidedBlock):
        return "elided", f"{block.block_type} (elided)", block.text(), False, block.size
    raise TypeError(f"unknown block {type(block).__name__}")  # pragma: no cover


def block_view(index: int, block: ItemBlock, *, limit: int = INLINE_CHARS) -> BlockView:
    kind, title, body, is_error, size = _block_text(block)
    shown, clipped = _clip(body, limit)
    artifact = getattr(block, "artifact_id", None)
    return BlockView(index, kind, title, shown, size, clipped, artifact, is_error)


def _summary_line(frame: fr.Frame) -> str:
    if isinstance(frame, fr.ThreadCreated):
        parts = [f"thread {frame.thread_id} created"]
        if frame.title:
            parts.append(f"title {frame.title!r}")
        parts += [f"{k}={v}" for k, v in sorted(frame.meta.items())]
        return "; ".join(parts)
    if isinstance(frame, fr.CompactionCheckpointCreated):
        return (
            f"checkpoint {frame.checkpoint_id}: a {frame.summary_kind} summary of seq "
            f"{frame.from_seq}..{frame.to_seq} ({frame.cut_rule_id}, by {frame.produced_by})"
        )
    if isinstance(frame, fr.ContextSelectionDecided):
        tos = ", ".join(str(c.to_seq) for c in frame.checkpoints) or "none"
        window = (
            f"{frame.window_from_seq}..{frame.window_to_seq} ({frame.window_messages} messages)"
            if frame.window_from_seq is not None
            else "empty"
        )
        return (
            f"compiled at anchor {frame.anchor_seq}: summaries to seq [{tos}], window {window},"
            f" ~{frame.tokens} tokens"
        )
    if isinstance(frame, fr.ContextSelectionRepeated):
        return f"the decision at seq {frame.decision_seq} again"
    if isinstance(frame, fr.ObservationRecorded):
        return f"observation of {frame.tool_use_id}: {frame.text}"
    if isinstance(frame, fr.JobSpawned):
        return f"job {frame.job_id} ({frame.kind}) spawned"
    if isinstance(frame, fr.JobEnded):
        error = f": {frame.error}" if frame.error else ""
        return f"job {frame.job_id} {frame.status}{error}"
    if isinstance(frame, fr.MessagesRetracted):
        spans = ", ".join(f"{s.from_seq}..{s.to_seq}" for s in frame.spans)
        reason = f" ({frame.reason})" if frame.reason else ""
        return f"messages retracted: seq {spans}{reason}"
    if isinstance(frame, fr.RecordAppended):
        key = f" {frame.key}" if frame.key else ""
        data = "" if frame.data is None else " " + json.dumps(frame.data, default=str)[:200]
        return f"record {frame.kind}{key}{data}"
    return str(frame.__struct_config__.tag).replace("_", " ")


def frame_view(frame: fr.Frame, retracted: Sequence[tuple[int, int]] = ()) -> FrameView:
    tag = str(frame.__struct_config__.tag)
    label = tag.replace("_", " ")
    if isinstance(frame, fr.MessageAppended):
        blocks = [block_view(i, b) for i, b in enumerate(frame.content)]
        return FrameView(
            frame.seq,
            frame.ts_ms,
            tag,
            label,
            role=frame.role,
            blocks=blocks,
            retracted=is_in(list(retracted), frame.seq),
            tokens=frame.tokens,
        )
    view = FrameView(frame.seq, frame.ts_ms, tag, label, summary=_summary_line(frame))
    if isinstance(frame, fr.CompactionCheckpointCreated):
        return replace(
            view,
            checkpoint_id=frame.checkpoint_id,
            summary_artifact_id=frame.summary_artifact_id,
        )
    if isinstance(frame, fr.ContextSelectionDecided):
        return replace(view, decision_seq=frame.seq)
    if isinstance(frame, fr.ContextSelectionRepeated):
        return replace(view, decision_seq=frame.decision_seq)
    if isinstance(frame, fr.ThreadCreated):
        return replace(view, fork_of=frame.fork_of, parent_thread_id=frame.parent_thread_id)
    return view


def _head(source: ThreadSource) -> int:
    head = source.head_seq()
    return -1 if head is None else head


def timeline(
    store: BaseStore,
    thread_id: str,
    *,
    start: int | None = None,
    before: int | None = None,
    around: int | None = None,
    size: int = PAGE_SIZE,
) -> Page:
    """One page of a thread: from ``start``, the page ending before ``before``, the page around
    ``around``, or (none given) the latest page. O(page) whatever the thread's length."""
    thread = store.existing_thread(thread_id)
    source = open_source(thread)
    head = _head(source)
    if start is not None:
        lo = start
    elif before is not None:
        lo = before - size
    elif around is not None:
        lo = around - size // 2
    else:
        lo = head - size + 1
    lo = max(0, min(lo, head - size + 1)) if start is None else max(0, lo)
    hi = min(head, lo + size - 1)
    frames: list[FrameView] = []
    if head >= 0 and lo <= hi:
        spans = source.marks().retracted(None)
        frames = [frame_view(f, spans) for f in source.frames(lo, hi)]
    # One listing gives the thread's row and its children: the store's catalog keeps the rows
    # current by reading only what was appended since (a row read alone would count a long
    # log's redactions again).
    listed = list_threads(store)
    info = next((t for t in listed if t.thread_id == thread_id), None) or thread_info(thread)
    children = [t for t in listed if t.parent_thread_id == thread_id]
    return Page(thread_id, info, frames, head, lo, hi, around, children)


def frames_after(store: BaseStore, thread_id: str, after: int, limit: int = 200) -> list[FrameView]:
    """The frames after seq ``after`` (at most ``limit``): what the live view adds."""
    thread = store.existing_thread(thread_id)
    head = thread.head()
    if head is None or head.seq <= after:
        return []
    source = open_source(thread)
    spans = source.marks().retracted(None)
    hi = min(head.seq, after + limit)
    return [frame_view(f, spans) for f in source.frames(after + 1, hi)]


def _lines(thread: Thread, lo: int, hi: int) -> Iterator[tuple[int, bytes]]:
    """The stored lines of seqs ``lo``..``hi``: the offset index (when the store keeps one)
    says where the first one is, so nothing before it is read."""
    start = None
    if ThreadIndex.available(thread):
        try:
            start = ThreadIndex(thread).offset(lo)
        except CorruptCache:
            start = None  # only a hint: the log is bisected instead
    return thread.read_lines(from_seq=lo, to_seq=hi, start_offset=start)


def _frame_at(thread: Thread, seq: int) -> fr.Frame:
    for found, line in _lines(thread, seq, seq):
        return thread.decode(found, line)
    raise LookupError(f"thread {thread.id} has no frame at seq {seq}")


def frame_at(store: BaseStore, thread_id: str, seq: int) -> tuple[fr.Frame, str]:
    """The frame at ``seq`` and its stored line, pretty-printed."""
    thread = store.existing_thread(thread_id)
    for found, line in _lines(thread, seq, seq):
        frame = thread.decode(found, line)
        return frame, _json(msgspec.json.decode(line))
    raise LookupError(f"thread {thread_id} has no frame at seq {seq}")


def block_full(store: BaseStore, thread_id: str, seq: int, index: int) -> BlockView:
    """Block ``index`` of the message at ``seq``, whole (an output kept as an artifact read
    from it)."""
    thread = store.existing_thread(thread_id)
    frame = _frame_at(thread, seq)
    if not isinstance(frame, fr.MessageAppended) or not 0 <= index < len(frame.content):
        raise LookupError(f"thread {thread_id}, seq {seq} has no block {index}")
    block = frame.content[index]
    view = block_view(index, block, limit=10**12)
    if isinstance(block, fr.ToolResultBlock) and block.artifact_id and not block.content:
        data = store.artifacts.get(block.artifact_id)
        text = data.decode("utf-8", errors="replace")
        return replace(view, body=text, size=len(data))
    return view


def artifact_bytes(store: BaseStore, artifact_id: str) -> bytes:
    return store.artifacts.get(artifact_id)


def summary_text(store: BaseStore, artifact_id: str) -> tuple[str, dict[str, list[str]], str]:
    """(text, sections, what it covers) of a stored summary (a provider's compaction block:
    its readable summary, or a note that it is encrypted)."""
    data = store.artifacts.get(artifact_id)
    for kind in PROVIDER_SUMMARY_KINDS:
        block = provider_block(kind, data)
        if block is not None and ("content" in block.data) == (kind == ANTHROPIC_COMPACTION_V1):
            return provider_summary_text(block), {}, f"{kind} compaction by {block.provider}"
    doc = decode_summary(data)
    covers = f"{doc.summary_kind} summary of seq {doc.from_seq}..{doc.to_seq} by {doc.produced_by}"
    return doc.text, dict(doc.sections), covers


# --- decisions -------------------------------------------------------------------------------


_DECISION_PREFIX: Final = b'"type":"context_selection_'


def _decisions_before(thread: Thread, before: int, floor: int = 0) -> Iterator[fr.Frame]:
    """The decision frames (and repeats) from seq ``floor`` to before seq ``before``, newest
    first: read backwards a range of seqs at a time (the offset index seeks), decoding only the
    lines that hold one (a range past the log's end reads nothing)."""
    hi = before - 1
    while hi >= floor:
        lo = max(floor, hi - _SCAN_STEP + 1)
        found = [
            (seq, line) for seq, line in _lines(thread, lo, hi) if _DECISION_PREFIX in line[:48]
        ]
        for s, line in reversed(found):
            yield thread.decode(s, line)
        hi = lo - 1


@dataclass(frozen=True, slots=True)
class DecisionRow:
    seq: int
    ts_ms: int
    decision: fr.ContextSelectionDecided
    repeat_of: int | None = None
    """For a ``context_selection_repeated`` frame: the decision it repeats."""


def decision_rows(
    store: BaseStore, thread_id: str, *, before: int | None = None, limit: int = 30
) -> tuple[list[DecisionRow], int | None]:
    """The ``limit`` latest decisions before seq ``before`` (newest first) among the
    :data:`SCAN_LIMIT` frames before it, and the seq to ask for the next older page with
    (None: the thread's start was reached)."""
    thread = store.existing_thread(thread_id)
    head = _head(open_source(thread))
    end = head + 1 if before is None else min(before, head + 1)
    floor = max(0, end - SCAN_LIMIT)
    rows: list[DecisionRow] = []
    cache: dict[int, fr.ContextSelectionDecided] = {}
    for frame in _decisions_before(thread, end, floor):
        if len(rows) >= limit:
            return rows, rows[-1].seq
        if isinstance(frame, fr.ContextSelectionDecided):
            cache[frame.seq] = frame
            rows.append(DecisionRow(frame.seq, frame.ts_ms, frame))
        elif isinstance(frame, fr.ContextSelectionRepeated):
            original = cache.get(frame.decision_seq)
            if original is None:
                decoded = _frame_at(thread, frame.decision_seq)
                if not isinstance(decoded, fr.ContextSelectionDecided):
                    continue
                original = cache[frame.decision_seq] = decoded
            rows.append(DecisionRow(frame.seq, frame.ts_ms, original, frame.decision_seq))
    return rows, (floor if floor > 0 else None)


@dataclass(frozen=True, slots=True)
class ItemView:
    """One item of a bundle, as the model read it, and how it compares with the previous
    decision's bundle."""

    kind: str
    """summary, recall or message."""
    key: str
    seq: int
    title: str
    tokens: int
    status: str = "same"
    """new (not in the previous bundle), changed (there, but read otherwise), same, or dropped
    (in the previous bundle only)."""
    role: str = ""
    text: str = ""
    blocks: list[BlockView] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Part:
    name: str
    tokens: int
    css: str


@dataclass(frozen=True, slots=True)
class HalvingStep:
    bound: int
    """The greatest ``to_seq`` this step may take."""
    chosen: CheckpointEntry | None


@dataclass(frozen=True, slots=True)
class DecisionView:
    thread_id: str
    decision: fr.ContextSelectionDecided
    bundle: ContextBundle
    items: list[ItemView]
    dropped: list[ItemView]
    parts: list[Part]
    budget: int | None
    previous_seq: int | None
    steps: list[HalvingStep]
    text: str
    """The bundle as plain text (``--format text``)."""
    anthropic: str
    """The bundle as an Anthropic Messages request body, pretty-printed."""
    dry_run: bool = False


def _item_key(item: SummaryItem | RecallItem | MessageItem) -> tuple[str, str]:
    if isinstance(item, SummaryItem):
        return "summary", item.checkpoint_id
    if isinstance(item, RecallItem):
        return "recall", str(item.seq)
    return "message", str(item.seq)


def _item_view(item: SummaryItem | RecallItem | MessageItem, status: str) -> ItemView:
    kind, key = _item_key(item)
    if isinstance(item, SummaryItem):
        title = f"summary of seq 0..{item.to_seq} (checkpoint at seq {item.checkpoint_seq})"
        return ItemView(kind, key, item.checkpoint_seq, title, item.tokens, status, text=item.text)
    if isinstance(item, RecallItem):
        title = f"recalled {item.source_kind} at seq {item.seq} (score {item.score:.3f})"
        return ItemView(
            kind, key, item.seq, title, item.tokens, status, role=item.role, text=item.text
        )
    blocks = [block_view(i, b) for i, b in enumerate(item.content)]
    title = f"{item.role} at seq {item.seq}"
    return ItemView(kind, key, item.seq, title, item.tokens, status, role=item.role, blocks=blocks)


def _bundle_of(store: BaseStore, decision: fr.ContextSelectionDecided) -> ContextBundle:
    return decode_bundle(store.artifacts.get(decision.bundle_artifact_id))


def _halving_steps(source: ThreadSource, anchor_seq: int, max_refs: int) -> list[HalvingStep]:
    """The compile rule's steps at ``anchor_seq``: the latest checkpoint at or before the
    anchor, then the latest with ``to_seq <= floor(previous / 2)``, and so on."""
    steps: list[HalvingStep] = []
    bound = anchor_seq
    taken = 0
    while taken < max_refs:
        chosen = source.latest_checkpoint(bound, anchor_seq)
        steps.append(HalvingStep(bound, chosen))
        if chosen is None:
            break
        taken += 1
        if chosen.to_seq <= 0:
            break
        bound = chosen.to_seq // 2
    return steps


def _view(
    store: BaseStore,
    thread: Thread,
    decision: fr.ContextSelectionDecided,
    bundle: ContextBundle,
    previous: ContextBundle | None,
    previous_seq: int | None,
    *,
    dry_run: bool,
) -> DecisionView:
    before: dict[tuple[str, str], bytes] = {}
    old_items: dict[tuple[str, str], SummaryItem | RecallItem | MessageItem] = {}
    if previous is not None:
        for old in previous.items:
            key = _item_key(old)
            before[key] = msgspec.json.encode(old)
            old_items[key] = old
    items: list[ItemView] = []
    seen: set[tuple[str, str]] = set()
    for item in bundle.items:
        key = _item_key(item)
        seen.add(key)
        if previous is None:
            status = "same"
        elif key not in before:
            status = "new"
        else:
            status = "same" if before[key] == msgspec.json.encode(item) else "changed"
        items.append(_item_view(item, status))
    dropped = [_item_view(old, "dropped") for key, old in old_items.items() if key not in seen]
    parts = [
        Part("summaries", sum(i.tokens for i in bundle.summaries), "p-summary"),
        Part("recall", sum(i.tokens for i in bundle.recalled), "p-recall"),
        Part("window", sum(i.tokens for i in bundle.messages), "p-window"),
    ]
    source = open_source(thread)
    steps = _halving_steps(source, decision.anchor_seq, decision.limits.max_summary_refs)
    return DecisionView(
        thread.id,
        decision,
        bundle,
        items,
        dropped,
        parts,
        decision.limits.budget_tokens,
        previous_seq,
        steps,
        to_text(bundle),
        _json(json.loads(render(bundle, "anthropic"))),
        dry_run,
    )


def _previous(
    store: BaseStore, thread: Thread, before: int, bundle_id: str
) -> tuple[ContextBundle | None, int | None]:
    """The latest decision before seq ``before`` (among the :data:`SCAN_LIMIT` frames before
    it) whose bundle differs from ``bundle_id``."""
    for frame in _decisions_before(thread, before, max(0, before - SCAN_LIMIT)):
        if isinstance(frame, fr.ContextSelectionDecided):
            if frame.bundle_artifact_id == bundle_id:
                continue
            return _bundle_of(store, frame), frame.seq
    return None, None


def decision_view(store: BaseStore, thread_id: str, seq: int) -> DecisionView:
    """The decision at ``seq`` (or the one a repeat at ``seq`` names), its bundle, and how it
    differs from the previous decision's."""
    thread = store.existing_thread(thread_id)
    frame = _frame_at(thread, seq)
    if isinstance(frame, fr.ContextSelectionRepeated):
        frame = _frame_at(thread, frame.decision_seq)
    if not isinstance(frame, fr.ContextSelectionDecided):
        raise LookupError(f"seq {seq} of thread {thread_id} is not a selection decision")
    bundle = _bundle_of(store, frame)
    previous, previous_seq = _previous(store, thread, frame.seq, frame.bundle_artifact_id)
    return _view(store, thread, frame, bundle, previous, previous_seq, dry_run=False)


def limits_for(*, recent: int | None, refs: int | None, budget: int | None) -> fr.Limits:
    """Compile's default limits with the given ones in their place."""
    base = DEFAULT_LIMITS
    return msgspec.structs.replace(
        base,
        recent_messages=base.recent_messages if recent is None else recent,
        max_summary_refs=base.max_summary_refs if refs is None else refs,
        budget_tokens=base.budget_tokens if budget is None else budget,
    )


def compile_here(
    store: BaseStore,
    thread_id: str,
    *,
    anchor: int | None,
    limits: fr.Limits | None = None,
    recall: str | None = None,
) -> DecisionView:
    """What a compile at ``anchor`` would give now, compared with the latest decision before
    it. Nothing is written: the compile is not logged and its bundle is not stored."""
    thread = store.existing_thread(thread_id)
    fuser = None
    embedder = store_model(store) if recall else None
    if embedder is not None:
        from continuity.retrieval.fusion import prefix_fuser

        fuser = prefix_fuser(embedder)
    result = compile_context(
        thread, anchor=anchor, limits=limits, log=False, recall=recall, recall_model=fuser
    )
    decision = result.decision
    previous, previous_seq = _previous(
        store, thread, decision.anchor_seq + 1, decision.bundle_artifact_id
    )
    return _view(store, thread, decision, result.bundle, previous, previous_seq, dry_run=True)


# --- the hierarchy ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Hierarchy:
    thread_id: str
    head_seq: int
    checkpoints: list[CheckpointEntry]
    anchor_seq: int
    steps: list[HalvingStep]
    selected: set[str]
    decision: fr.ContextSelectionDecided | None
    rows: list[DecisionRow]


def hierarchy(store: BaseStore, thread_id: str, *, decision_seq: int | None = None) -> Hierarchy:
    """The thread's checkpoints on its seq axis; the halving rule's steps at a decision's anchor
    (the latest decision's by default; the head's when there is none); the recent decisions and
    what each selected."""
    thread = store.existing_thread(thread_id)
    source = open_source(thread)
    head = _head(source)
    rows, _more = decision_rows(store, thread_id, limit=30)
    decision: fr.ContextSelectionDecided | None = None
    if decision_seq is not None:
        frame = _frame_at(thread, decision_seq)
        if isinstance(frame, fr.ContextSelectionRepeated):
            frame = _frame_at(thread, frame.decision_seq)
        if not isinstance(frame, fr.ContextSelectionDecided):
            raise LookupError(f"seq {decision_seq} of thread {thread_id} is not a decision")
        decision = frame
    elif rows:
        decision = rows[0].decision
    anchor = decision.anchor_seq if decision is not None else max(head, 0)
    max_refs = decision.limits.max_summary_refs if decision is not None else 3
    steps = _halving_steps(source, anchor, max_refs) if head >= 0 else []
    selected = (
        {c.checkpoint_id for c in decision.checkpoints}
        if decision is not None
        else {s.chosen.checkpoint_id for s in steps if s.chosen is not None}
    )
    return Hierarchy(thread_id, head, source.checkpoints(), anchor, steps, selected, decision, rows)


# --- search and integrity --------------------------------------------------------------------


class Tell(Protocol):
    """How long work says how it goes: (phase, done, total, unit); total 0 when the phase has
    no count. Called from the thread doing the work."""

    def __call__(self, phase: str, done: int = 0, total: int = 0, unit: str = "") -> None: ...


def search_hits(
    store: BaseStore,
    query: str,
    *,
    thread: str | None = None,
    project: str | None = None,
    agent: str | None = None,
    tell: Tell | None = None,
) -> list[Hit]:
    """The best 30 hits for ``query`` (of the threads of ``agent``, when named). The first
    search of a long thread (or of the store) builds an index: ``tell`` hears how that goes
    (phase, done, total, unit)."""
    told = tell or _silent
    if thread:
        handle = store.existing_thread(thread)
        if ThreadIndex.available(handle):
            phase = "reading the thread's log into its offset index"
            told(phase)
            ThreadIndex(handle).refresh(lambda done, total: told(phase, done, total, "bytes"))
        told("bringing the thread's search index up to date (its first search indexes it all)")
    else:
        told("bringing the search index up to date")

    def caught_up(done: int, total: int) -> None:
        told("bringing the store-wide search index up to date", done, total, "threads")

    def embedded(done: int, total: int) -> None:
        told(
            "embedding documents for the store's model (its first search embeds them all)",
            done,
            total,
            "documents",
        )

    return search(
        store,
        query,
        thread=thread or None,
        project=project or None,
        agent=agent or None,
        k=30,
        progress=caught_up,
        embedder=store_model(store),
        embedding=Embedding(progress=embedded),
    )


_MODELS: dict[tuple[str, str | None], Any] = {}
"""The models this process loaded, by the name and embedder kind the store's settings give
(loaded once)."""


def store_model(store: BaseStore) -> Any:
    """The store's model (``continuity model use``), loaded once per process; None: BM25."""
    from continuity.retrieval.settings import read_search_settings

    settings = read_search_settings(store)
    if not settings.model:
        return None
    chosen = (settings.model, settings.embedder)
    if chosen not in _MODELS:
        from continuity.retrieval.models import load_model

        _MODELS[chosen] = load_model(settings.model, kind=settings.embedder)
    return _MODELS[chosen]


def _silent(phase: str, done: int = 0, total: int = 0, unit: str = "") -> None:
    """A :data:`Tell` that tells no one."""


def highlight(text: str, terms: Sequence[str]) -> list[tuple[str, bool]]:
    """``text`` cut into (piece, matched) runs: the words the query matched, as search matched
    them (case-insensitively, at the start of a word)."""
    words = sorted({t for t in terms if t}, key=len, reverse=True)
    if not words:
        return [(text, False)]
    pattern = re.compile(
        r"(?<![0-9A-Za-z_])(" + "|".join(re.escape(w) for w in words) + r")", re.IGNORECASE
    )
    out: list[tuple[str, bool]] = []
    pos = 0
    for m in pattern.finditer(text):
        if m.start() > pos:
            out.append((text[pos : m.start()], False))
        out.append((m.group(0), True))
        pos = m.end()
    if pos < len(text):
        out.append((text[pos:], False))
    return out


@dataclass(frozen=True, slots=True)
class Integrity:
    thread_id: str
    ok: bool
    frames: int
    problems: list[str]
    notes: list[str]
    quarantined: list[str]


@dataclass(frozen=True, slots=True)
class StoreIntegrity:
    threads: list[Integrity]
    """Every thread, the ones with problems first."""
    store_problems: list[str]
    """Problems that belong to no one thread (an artifact, a stray log)."""
    truncated: bool


def verify_all(store: BaseStore, *, limit: int = 500, tell: Tell | None = None) -> StoreIntegrity:
    """``continuity verify`` of the whole store (it reads every log), as one row a thread;
    ``tell`` hears the threads checked."""
    told = tell or _silent
    phase = "checking every log, its caches and the artifacts they name"
    told(phase)
    report = verify_store(
        store,
        limit=limit,
        on_progress=lambda done, total, _frames: told(phase, done, total, "threads"),
    )
    by_thread: dict[str, list[str]] = {}
    loose: list[str] = []
    for p in report.problems:
        if p.thread_id is None:
            loose.append(str(p))
        else:
            by_thread.setdefault(p.thread_id, []).append(str(p))
    torn: dict[str, list[str]] = {}
    for rec in report.quarantined:
        torn.setdefault(rec.thread_id, []).append(
            f"{rec.length} bytes from offset {rec.offset} ({rec.reason})"
        )
    rows = [
        Integrity(
            tid,
            tid not in by_thread,
            0,
            by_thread.get(tid, []),
            [],
            torn.get(tid, []),
        )
        for tid in sorted(set(store.stored_thread_ids()) | set(by_thread))
    ]
    rows.sort(key=lambda r: (r.ok, not r.quarantined, r.thread_id))
    return StoreIntegrity(rows, loose, report.truncated)


def verify_thread(store: BaseStore, thread_id: str, *, tell: Tell | None = None) -> Integrity:
    """``continuity verify`` of one thread (its log, caches and the artifacts it names);
    ``tell`` hears how many frames there are to check, and (at the end) that they were."""
    told = tell or _silent
    thread = store.existing_thread(thread_id)
    head = thread.head()
    frames = 0 if head is None else head.seq + 1
    phase = f"checking {frames:,} frames: the log's chain, its caches and the artifacts it names"
    # verify_store tells how many frames are checked as it goes (every 32,768 in a long log)
    told(phase)
    report = verify_store(
        store,
        [thread],
        limit=50,
        on_progress=lambda _done, _threads, checked: told(phase, checked, frames, "frames"),
    )
    torn = [
        f"{rec.length} bytes from offset {rec.offset} ({rec.reason})"
        for rec in report.quarantined
        if rec.thread_id == thread_id
    ]
    return Integrity(
        thread_id,
        report.ok,
        report.frames,
        [str(p) for p in report.problems],
        list(report.notes),
        torn,
    )
