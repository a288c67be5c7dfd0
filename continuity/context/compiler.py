"""``context.compile``: deterministically choose what the model sees next, and log the choice.

The rule (ARCHITECTURE.md, from the seed ADR-0018), applied to the log prefix ``[0, anchor]``:

1. Eligible checkpoints: ``compaction_checkpoint_created`` frames in the prefix with
   ``summary_kind == "cumulative_v1"`` and ``to_seq <= anchor``; on equal ``to_seq`` the later
   frame wins. Checkpoints of other kinds (or whose summary artifact cannot be read) are
   ignored, and the decision records that reset.
2. Select the latest eligible checkpoint, then repeatedly the latest with
   ``to_seq <= floor(prev_to_seq / 2)`` (each at most once), up to ``max_summary_refs``.
   ``summary_ref`` items come in ascending ``to_seq``.
3. Strategy: ``hierarchical_summaries_recent_messages_v1`` with ≥ 2 summaries,
   ``summaries_recent_messages_v1`` with 1, ``recent_messages_v1`` with none.
4. The recent window: messages after the latest selected checkpoint's ``to_seq`` up to the
   anchor message, at most ``recent_messages``, within the token budget, never starting with a
   tool result whose call is outside the window. The ``keep_tool_outputs`` newest tool results
   stay whole; older ones become stubs (or their recorded observation). A message that does
   not fit the budget even alone gives up its largest blocks to stubs until it does.
5. Append ``context_selection_decided`` naming all of it and the bundle's artifact id.

Without ``limits`` a compile runs with :data:`DEFAULT_LIMITS`, whose token budget is
:data:`DEFAULT_BUDGET_TOKENS`; explicit ``Limits`` are taken as they are, so
``Limits(budget_tokens=None)`` compiles without a budget (ADR 0017). A summary that cannot be
read, and a message elided, are named in the bundle's ``notes``.

The default anchor is the last frame that can change a selection (not a decision or job frame),
so compiling twice in a row gives the same bundle. Everything read is in the prefix, so frames
appended after the anchor never change the result.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final, overload

import msgspec

from continuity import frames as fr
from continuity.caches.thread_index import CheckpointEntry
from continuity.context.bundle import (
    ContextBundle,
    ElidedBlock,
    ItemBlock,
    MessageItem,
    RecallItem,
    SummaryItem,
    ToolStubBlock,
)
from continuity.context.bundle import bundle_bytes as _bundle_bytes
from continuity.context.sources import ThreadSource, halving, latest_checkpoint_in, open_source
from continuity.errors import (
    AnchorNotFound,
    ArtifactCorrupt,
    ArtifactNotFound,
    CorruptCache,
    InvalidLimits,
    InvalidQuery,
)
from continuity.store.artifacts import artifact_id
from continuity.store.base import BaseStore, Thread, resolve_thread
from continuity.summary import CUMULATIVE_V1, decode_summary
from continuity.tokens import Tokenizer, estimate_text

__all__ = [
    "COMPILER_ID",
    "DEFAULT_BUDGET_TOKENS",
    "DEFAULT_LIMITS",
    "STRATEGY_HIERARCHICAL",
    "STRATEGY_RECENT",
    "STRATEGY_SUMMARIES",
    "CompileResult",
    "compile_context",
    "select_checkpoints",
]

COMPILER_ID: Final = "continuity.compile/2"
"""``/2``: oversize messages are elided and unreadable summaries named in the notes (ADR 0017)."""
STRATEGY_RECENT: Final = "recent_messages_v1"
STRATEGY_SUMMARIES: Final = "summaries_recent_messages_v1"
STRATEGY_HIERARCHICAL: Final = "hierarchical_summaries_recent_messages_v1"
DEFAULT_BUDGET_TOKENS: Final = 100_000
"""The token budget of a compile given no limits: half of a 200k context, and room to spare in
a 128k one, for the system prompt, the tools and the reply (ADR 0017)."""
DEFAULT_LIMITS: Final = fr.Limits(budget_tokens=DEFAULT_BUDGET_TOKENS)
_SUMMARY_OVERHEAD_TOKENS: Final = 8
_RECALL_BUDGET: Final = 1500
_RECALL_HITS: Final = 8
_RECALL_CHARS: Final = 800


class CompileResult(msgspec.Struct, frozen=True):
    """What a compile chose (the bundle and its id) and the decision that records it."""

    bundle: ContextBundle
    bundle_id: str
    decision: fr.ContextSelectionDecided
    logged: bool
    """True when the decision was appended (``decision.seq`` is then its seq)."""

    def bundle_bytes(self) -> bytes:
        return _bundle_bytes(self.bundle)


# --- the selection rule ---------------------------------------------------------------------


def select_checkpoints(
    checkpoints: Sequence[CheckpointEntry], anchor_seq: int, max_refs: int = 3
) -> list[CheckpointEntry]:
    """The hierarchy of cumulative checkpoints for ``anchor_seq``, ascending by ``to_seq``.

    ``checkpoints`` must be in log order (ascending ``seq``). This is the rule over a plain
    list; compile asks its source, which answers the same from the caches by bisection.
    """
    return halving(lambda x: latest_checkpoint_in(checkpoints, x, anchor_seq), anchor_seq, max_refs)


def _strategy(n_summaries: int) -> str:
    if n_summaries >= 2:
        return STRATEGY_HIERARCHICAL
    return STRATEGY_SUMMARIES if n_summaries == 1 else STRATEGY_RECENT


# --- compile --------------------------------------------------------------------------------


def _check_limits(limits: fr.Limits) -> None:
    if limits.recent_messages < 0:
        raise InvalidLimits("recent_messages must be >= 0")
    if limits.max_summary_refs < 0:
        raise InvalidLimits("max_summary_refs must be >= 0")
    if limits.budget_tokens is not None and limits.budget_tokens <= 0:
        raise InvalidLimits("budget_tokens must be > 0")
    if limits.recall_budget_tokens is not None and limits.recall_budget_tokens <= 0:
        raise InvalidLimits("recall_budget_tokens must be > 0")
    if limits.keep_tool_outputs is not None and limits.keep_tool_outputs < 0:
        raise InvalidLimits("keep_tool_outputs must be >= 0")


def _resolve_anchor(source: ThreadSource, anchor: int | str | None) -> int:
    head = source.head_seq()
    if head is None:
        raise AnchorNotFound("the thread has no frames")
    if anchor is None:
        found = source.default_anchor()
        return head if found is None else found
    if isinstance(anchor, int):
        if not 0 <= anchor <= head:
            raise AnchorNotFound(f"anchor seq {anchor} is outside the log (seqs 0..{head})")
        return anchor
    seq = source.seq_of_message_id(anchor)
    if seq is None:
        raise AnchorNotFound(f"no message with id {anchor!r}")
    return seq


# What str.splitlines splits on, so lines can be found one at a time in a text of megabytes.
_LINE_BREAK: Final = re.compile("\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")


def _first_line(text: str, width: int = 120) -> str:
    """The first non-blank line of ``text``, stripped, in at most ``width`` characters (``…``
    marks a cut); the lines after it are never looked at."""
    start = 0
    for found in _LINE_BREAK.finditer(text):
        line = text[start : found.start()].strip()
        if line:
            return line if len(line) <= width else line[: width - 1] + "…"
        start = found.end()
    line = text[start:].strip()
    return line if len(line) <= width else line[: width - 1] + "…"


def _block_text(block: ItemBlock) -> str:
    if isinstance(block, fr.TextBlock | fr.ThinkingBlock):
        return block.text
    if isinstance(block, fr.ToolUseBlock):
        return block.name + " " + msgspec.json.encode(block.input).decode()
    if isinstance(block, fr.ToolResultBlock):
        return block.content if block.artifact_id is None else block.preview
    if isinstance(block, ToolStubBlock | ElidedBlock):
        return block.text()
    return ""


def _utf8_size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


class _Compiler:
    def __init__(
        self,
        thread: Thread,
        source: ThreadSource,
        limits: fr.Limits,
        tokenizer: Tokenizer | None,
    ) -> None:
        self.thread = thread
        self.store = thread.store
        self.source = source
        self.limits = limits
        self.tokenizer = tokenizer
        self.reasons: list[str] = []
        self.resets: list[str] = []
        self.notes: list[str] = []
        self.elided: dict[int, str] = {}
        """seq → the note of each message that gave up blocks to fit the budget."""

    def count(self, text: str) -> int:
        return self.tokenizer.count(text) if self.tokenizer else estimate_text(text)

    # -- summaries --

    def summaries(self, anchor_seq: int) -> list[SummaryItem]:
        unreadable: dict[str, CheckpointEntry] = {}
        problems: dict[str, str] = {}
        while True:
            excluded = frozenset(unreadable)

            def latest(x: int, ex: frozenset[str] = excluded) -> CheckpointEntry | None:
                return self.source.latest_checkpoint(x, anchor_seq, ex)

            selected = halving(latest, anchor_seq, self.limits.max_summary_refs)
            items: list[SummaryItem] = []
            for c in selected:
                text, problem = self._summary_text(c)
                if text is None:
                    unreadable[c.checkpoint_id] = c
                    problems[c.checkpoint_id] = problem
                    break
                items.append(
                    SummaryItem(
                        checkpoint_id=c.checkpoint_id,
                        checkpoint_seq=c.seq,
                        to_seq=c.to_seq,
                        summary_kind=c.summary_kind,
                        summary_artifact_id=c.summary_artifact_id,
                        text=text,
                        tokens=self.count(text) + _SUMMARY_OVERHEAD_TOKENS,
                    )
                )
            else:
                break
        # Every ignored checkpoint the anchor could see is a reset, whatever its to_seq: an
        # unreadable one may have been a lower tier, and an unsupported one may tie a selected one.
        ignored = [*self.source.other_checkpoints(anchor_seq), *unreadable.values()]
        for c in sorted(ignored, key=lambda c: c.seq):
            if c.summary_kind != CUMULATIVE_V1:
                self.resets.append(
                    f"checkpoint {c.checkpoint_id} (to_seq {c.to_seq}) ignored: "
                    f"unsupported summary kind {c.summary_kind!r}"
                )
            else:
                self.resets.append(
                    f"checkpoint {c.checkpoint_id} (to_seq {c.to_seq}) ignored: "
                    f"summary artifact {c.summary_artifact_id} cannot be read"
                )
        for c in sorted(unreadable.values(), key=lambda c: c.seq):
            # The rule chose it, so what it covered leaves the bundle unless an older summary
            # takes its place: a consumer must know (and the CLI warns).
            older = [i for i in items if i.to_seq < c.to_seq]
            instead = (
                f"the bundle falls back to the summary through seq {older[-1].to_seq} "
                f"(checkpoint {older[-1].checkpoint_id})"
                if older
                else "no older summary stands in for it"
            )
            self.notes.append(
                f"summary_unreadable: checkpoint {c.checkpoint_id} (seq {c.seq}, to_seq "
                f"{c.to_seq}) was passed over: its summary artifact {c.summary_artifact_id} "
                f"{problems[c.checkpoint_id]}; {instead}"
            )
        if items:
            tos = ", ".join(str(i.to_seq) for i in items)
            self.reasons.append(
                f"summaries: {len(items)} selected by the halving rule (to_seq {tos})"
            )
        return items

    def _summary_text(self, c: CheckpointEntry) -> tuple[str | None, str]:
        """The summary's text, or None and what is wrong with its artifact (in fixed words:
        the notes are part of the bundle, which must not depend on the backend's messages)."""
        try:
            data = self.store.artifacts.get(c.summary_artifact_id)
        except ArtifactNotFound:
            return None, "is missing"
        except ArtifactCorrupt:
            return None, "is corrupt (it does not decompress or does not match its id)"
        try:
            return decode_summary(data).text, ""
        except msgspec.DecodeError:
            try:
                return data.decode("utf-8"), ""  # a plain-text summary written by another tool
            except UnicodeDecodeError:
                return None, "is not a summary (neither a summary.v1 document nor UTF-8 text)"

    # -- the window --

    def window(
        self, after_seq: int, anchor_seq: int
    ) -> tuple[list[fr.MessageAppended], dict[str, str]]:
        """Up to ``recent_messages`` messages in ``(after_seq, anchor]``, and the observations
        recorded in the prefix for their tool uses."""
        hi = self.source.message_count_upto(anchor_seq)
        lo = self.source.message_count_upto(after_seq) if after_seq >= 0 else 0
        available = hi - lo
        lo = max(lo, hi - self.limits.recent_messages)
        if hi <= lo:
            return [], {}
        if available > hi - lo:
            self.reasons.append(
                f"window: the last {hi - lo} of {available} messages "
                f"(recent_messages={self.limits.recent_messages})"
            )
        first = self.source.message_seq(lo)
        messages: list[fr.MessageAppended] = []
        observations: dict[str, str] = {}
        for frame in self.source.frames(first, anchor_seq):
            if isinstance(frame, fr.MessageAppended):
                messages.append(frame)
            elif isinstance(frame, fr.ObservationRecorded):
                observations[frame.tool_use_id] = frame.text
        start = _valid_start(messages, 0)
        if start:
            self.reasons.append(
                f"window: {start} leading message(s) dropped (tool result without its call)"
            )
        return messages[start:], observations

    def items(
        self, messages: list[fr.MessageAppended], observations: dict[str, str]
    ) -> list[MessageItem]:
        keep = self.limits.keep_tool_outputs
        names = {
            b.id: b.name for m in messages for b in m.content if isinstance(b, fr.ToolUseBlock)
        }
        verbatim = 0
        stubbed = observed = 0
        out: list[MessageItem] = []
        for m in reversed(messages):
            blocks: list[ItemBlock] = []
            changed = False
            for b in reversed(m.content):
                if isinstance(b, fr.ToolResultBlock) and keep is not None:
                    if verbatim >= keep:
                        stub = self._stub(b, names.get(b.tool_use_id, ""), observations)
                        stubbed += 1
                        observed += stub.observation is not None
                        blocks.append(stub)
                        changed = True
                        continue
                    verbatim += 1
                blocks.append(b)
            blocks.reverse()
            if changed or self.tokenizer is not None:
                tokens = 4 + sum(self._block_tokens(b) for b in blocks)
            else:
                tokens = m.tokens or fr.estimate_message_tokens(m.content)
            budget = self.limits.budget_tokens
            if budget is not None and tokens > budget:
                blocks, tokens = self._elide(m, blocks, tokens, budget, names, observations)
            out.append(
                MessageItem(
                    seq=m.seq,
                    message_id=m.message_id,
                    role=m.role,
                    ts_ms=m.ts_ms,
                    content=blocks,
                    tokens=tokens,
                )
            )
        out.reverse()
        if stubbed:
            self.reasons.append(
                f"tool outputs: {stubbed} older result(s) replaced "
                f"({observed} by observations), {verbatim} kept whole"
            )
        return out

    def _elide(
        self,
        m: fr.MessageAppended,
        blocks: list[ItemBlock],
        tokens: int,
        budget: int,
        names: dict[str, str],
        observations: dict[str, str],
    ) -> tuple[list[ItemBlock], int]:
        """A message that needs more than the whole budget gives up its largest blocks, one at
        a time (the earlier first on a tie), to stubs until it fits; a block whose stub would
        not be smaller stays. A message that cannot fit even so stays whole (the budget then
        leaves it out, as before). The window's rules apply to it like to any message."""
        costs = [self._block_tokens(b) for b in blocks]
        out = list(blocks)
        total = 4 + sum(costs)
        gone: list[str] = []
        for i in sorted(range(len(out)), key=lambda i: (-costs[i], i)):
            if total <= budget:
                break
            stub = self._elided(out[i], costs[i], names, observations)
            if stub is None:
                continue
            cost = self._block_tokens(stub)
            if cost >= costs[i]:
                continue
            kind = "tool_result" if isinstance(stub, ToolStubBlock) else stub.block_type
            gone.append(f"{kind} of {stub.size} bytes")
            out[i] = stub
            total += cost - costs[i]
        if not gone or total > budget:
            return blocks, tokens
        self.elided[m.seq] = (
            f"elided: message seq {m.seq} ({m.role}) needs ~{tokens} tokens, more than the "
            f"budget of {budget} on its own; in this bundle a stub stands for its "
            f"{', '.join(gone)} (the log keeps it whole)"
        )
        return out, total

    def _elided(
        self,
        block: ItemBlock,
        tokens: int,
        names: dict[str, str],
        observations: dict[str, str],
    ) -> ToolStubBlock | ElidedBlock | None:
        """The stub that stands for ``block`` when it is elided (None: it cannot be)."""
        if isinstance(block, fr.ToolResultBlock):
            return self._stub(block, names.get(block.tool_use_id, ""), observations)
        if isinstance(block, fr.TextBlock | fr.ThinkingBlock):
            kind = "text" if isinstance(block, fr.TextBlock) else "thinking"
            return ElidedBlock(
                block_type=kind,
                size=_utf8_size(block.text),
                tokens=tokens,
                first_line=_first_line(block.text),
            )
        if isinstance(block, fr.ToolUseBlock):
            data = msgspec.json.encode(block.input)
            return ElidedBlock(
                block_type="tool_use",
                size=len(data),
                tokens=tokens,
                first_line=_first_line(data[:4096].decode("utf-8", "replace")),
                tool_use_id=block.id,
                tool_name=block.name,
            )
        return None  # an image (a fixed cost) or a stub already

    def _block_tokens(self, block: ItemBlock) -> int:
        if isinstance(block, fr.ImageBlock):  # no text to count: the frames' fixed estimate
            return fr.estimate_message_tokens([block]) - fr.estimate_message_tokens([])
        return self.count(_block_text(block))

    @staticmethod
    def _stub(block: fr.ToolResultBlock, name: str, observations: dict[str, str]) -> ToolStubBlock:
        text = block.content if block.artifact_id is None else block.preview
        size = block.size or len(block.content.encode())
        return ToolStubBlock(
            tool_use_id=block.tool_use_id,
            tool_name=name,
            size=size,
            first_line=_first_line(text),
            artifact_id=block.artifact_id,
            observation=observations.get(block.tool_use_id),
            is_error=block.is_error,
        )

    def recall(
        self, query: str, before_seq: int, room: int, use_caches: bool
    ) -> tuple[list[RecallItem], list[fr.RecallRef]]:
        """The best hits with seq ≤ ``before_seq`` that fit in ``room`` tokens."""
        # On use: ranking needs numpy, which a compile without recall (a hook's) never pays for.
        from continuity.caches.ranking import query_terms, rank_prefix
        from continuity.caches.search_index import frame_text

        if before_seq < 0:
            self.reasons.append("recall: nothing before the window to search")
            return [], []
        if room <= 0:
            self.reasons.append("recall: no room left in the token budget")
            return [], []
        try:
            terms = query_terms(query)
        except InvalidQuery as exc:
            self.reasons.append(f"recall: {exc}")
            return [], []
        hits = rank_prefix(
            self.thread, terms, max_seq=before_seq, k=_RECALL_HITS, use_caches=use_caches
        )
        items: list[RecallItem] = []
        refs: list[fr.RecallRef] = []
        used = 0
        for h in hits:
            frame = next(iter(self.source.frames(h.seq, h.seq)), None)
            # The clip starts at the first query term the text holds.
            text = _clip_around(frame_text(frame, self.store), terms) if frame else ""
            tokens = self.count(text) + _SUMMARY_OVERHEAD_TOKENS
            include = h.kind != "summary" and bool(text) and used + tokens <= room
            refs.append(fr.RecallRef(seq=h.seq, score=h.score, included=include))
            if include:
                used += tokens
                items.append(
                    RecallItem(
                        seq=h.seq,
                        source_kind=h.kind,
                        role=h.role,
                        score=h.score,
                        text=text,
                        tokens=tokens,
                    )
                )
        self.reasons.append(
            f"recall: {len(items)} of {len(hits)} hits up to seq {before_seq} "
            f"({used} of {room} tokens)"
        )
        return items, refs

    def fit_budget(
        self,
        summaries: list[SummaryItem],
        items: list[MessageItem],
        sources: list[fr.MessageAppended],
    ) -> tuple[list[SummaryItem], list[MessageItem]]:
        budget = self.limits.budget_tokens
        if budget is None:
            return summaries, items
        total_s = sum(s.tokens for s in summaries)

        def fitting_start(room: int) -> int:
            """Where the longest valid suffix of the window within ``room`` tokens starts."""
            start = len(items)
            used = 0
            for i in range(len(items) - 1, -1, -1):
                if used + items[i].tokens > room:
                    break
                used += items[i].tokens
                start = i
            return _valid_start(sources, start)

        # Summaries make room for the newest messages, oldest summary first — but only when
        # there is a window and its newest message (with its call) fits in the budget at all.
        start = fitting_start(budget - total_s)
        if items and fitting_start(budget) < len(items):
            while start == len(items) and summaries:
                dropped = summaries.pop(0)
                total_s -= dropped.tokens
                self.reasons.append(
                    f"budget: summary to_seq {dropped.to_seq} dropped to make room for the newest"
                )
                start = fitting_start(budget - total_s)
        if start:
            self.reasons.append(
                f"budget: window cut to {len(items) - start} of {len(items)} messages "
                f"to fit {budget} tokens"
            )
        kept = items[start:]
        for item in kept:
            note = self.elided.get(item.seq)
            if note is not None:
                self.notes.append(note)
                self.reasons.append(note)
        while summaries and total_s > budget:
            dropped = summaries.pop(0)
            total_s -= dropped.tokens
            self.reasons.append(f"budget: summary to_seq {dropped.to_seq} dropped")
        if items and not kept:
            # The minimum is the newest message together with the calls its results answer.
            first = next(i for i in range(len(items) - 1, -1, -1) if _valid_start(sources, i) == i)
            need = sum(m.tokens for m in items[first:])
            what = (
                "the newest message needs"
                if first == len(items) - 1
                else f"the newest {len(items) - first} messages (a call and its result) need"
            )
            self.notes.append(
                f"budget_insufficient: {what} {need} tokens; "
                f"the budget is {budget} ({total_s} used by summaries)"
            )
            self.reasons.append(self.notes[-1])
        return summaries, kept


def _clip_around(text: str, terms: Sequence[str], width: int = _RECALL_CHARS) -> str:
    """At most ``width`` characters of ``text``, starting a little before the first match."""
    if len(text) <= width:
        return text
    low = text.lower()
    found = [i for t in terms if (i := low.find(t)) >= 0]
    start = max(0, min(found) - width // 4) if found else 0
    piece = text[start : start + width]
    return ("…" if start else "") + piece + ("…" if start + width < len(text) else "")


def _anchor_text(source: ThreadSource, anchor_seq: int) -> str:
    """The text of the latest message at or before the anchor (recall's default query)."""
    count = source.message_count_upto(anchor_seq)
    if count == 0:
        return ""
    seq = source.message_seq(count - 1)
    for frame in source.frames(seq, seq):
        if isinstance(frame, fr.MessageAppended):
            return " ".join(b.text for b in frame.content if isinstance(b, fr.TextBlock))
    return ""


def _valid_start(messages: Sequence[fr.MessageAppended], start: int) -> int:
    """The first index ≥ ``start`` from which no message of the window holds a tool result
    whose call is not earlier in the window (a call is never separated from its result)."""
    while start < len(messages):
        calls: set[str] = set()
        orphan = -1
        for i in range(start, len(messages)):
            content = messages[i].content
            calls.update(b.id for b in content if isinstance(b, fr.ToolUseBlock))
            if any(
                isinstance(b, fr.ToolResultBlock) and b.tool_use_id not in calls for b in content
            ):
                orphan = i
        if orphan < 0:
            return start
        start = orphan + 1
    return start


@overload
def compile_context(
    target: Thread,
    thread_id: None = None,
    *,
    anchor: int | str | None = None,
    limits: fr.Limits | None = None,
    log: bool = True,
    use_caches: bool = True,
    tokenizer: Tokenizer | None = None,
    recall: str | bool | None = None,
) -> CompileResult: ...
@overload
def compile_context(
    target: BaseStore,
    thread_id: str,
    *,
    anchor: int | str | None = None,
    limits: fr.Limits | None = None,
    log: bool = True,
    use_caches: bool = True,
    tokenizer: Tokenizer | None = None,
    recall: str | bool | None = None,
) -> CompileResult: ...
def compile_context(
    target: BaseStore | Thread,
    thread_id: str | None = None,
    *,
    anchor: int | str | None = None,
    limits: fr.Limits | None = None,
    log: bool = True,
    use_caches: bool = True,
    tokenizer: Tokenizer | None = None,
    recall: str | bool | None = None,
) -> CompileResult:
    """Compile a thread's context at ``anchor`` (a seq, a message id, or the latest):
    ``compile_context(thread)`` with a thread handle, or ``compile_context(store, thread_id)``.

    Stores the bundle as an artifact and appends a ``context_selection_decided`` frame unless
    ``log`` is false. ``use_caches=False`` reads the log directly (the reference path; any
    backend). The bundle is the same either way.

    ``limits`` default to :data:`DEFAULT_LIMITS` (a budget of :data:`DEFAULT_BUDGET_TOKENS`);
    explicit ``Limits`` are used as given, so ``Limits(budget_tokens=None)`` means no budget.

    ``recall`` (a query, or True for the anchor message's text) adds the best search hits from
    before the latest selected summary (or before the window when there is none), within
    ``limits.recall_budget_tokens`` (default 1,500) and the overall budget.
    """
    limits = DEFAULT_LIMITS if limits is None else limits
    _check_limits(limits)
    thread = resolve_thread(target, thread_id)
    try:
        return _compile(thread, anchor, limits, log, use_caches, tokenizer, recall)
    except CorruptCache:
        # The caches are derived: rebuild them from the log and select again (a store this
        # process cannot write is read from the log instead). The log itself is never guessed.
        from continuity.caches.search_index import ThreadSearchIndex
        from continuity.caches.thread_index import ThreadIndex, caches_writable

        cache_dir = thread.store.cache_dir
        if cache_dir is None or not caches_writable(cache_dir):
            return _compile(thread, anchor, limits, log, False, tokenizer, recall)
        ThreadIndex(thread).rebuild()
        ThreadSearchIndex(thread).rebuild()
        return _compile(thread, anchor, limits, log, use_caches, tokenizer, recall)


def _compile(
    thread: Thread,
    anchor: int | str | None,
    limits: fr.Limits,
    log: bool,
    use_caches: bool,
    tokenizer: Tokenizer | None,
    recall: str | bool | None,
) -> CompileResult:
    source = open_source(thread, use_caches=use_caches)
    anchor_seq = _resolve_anchor(source, anchor)
    c = _Compiler(thread, source, limits, tokenizer)
    summaries = c.summaries(anchor_seq)
    after = summaries[-1].to_seq if summaries else -1
    messages, observations = c.window(after, anchor_seq)
    items = c.items(messages, observations)
    summaries, kept = c.fit_budget(summaries, items, messages)
    recalled: list[RecallItem] = []
    recall_refs: list[fr.RecallRef] = []
    query: str | None = None
    if recall:
        query = recall if isinstance(recall, str) else _anchor_text(source, anchor_seq)
        if query.strip():
            before = (
                summaries[-1].to_seq if summaries else (kept[0].seq - 1 if kept else anchor_seq)
            )
            used = sum(s.tokens for s in summaries) + sum(m.tokens for m in kept)
            room = limits.recall_budget_tokens or _RECALL_BUDGET
            if limits.budget_tokens is not None:
                room = min(room, limits.budget_tokens - used)
            recalled, recall_refs = c.recall(query, before, room, use_caches)
        else:
            what = "the query is empty" if isinstance(recall, str) else "the anchor has no text"
            c.reasons.append(f"recall: {what}: nothing to search for")
    anchor_message_id = messages[-1].message_id if messages else None
    strategy = _strategy(len(summaries))
    bundle = ContextBundle(
        compiler_id=COMPILER_ID,
        strategy=strategy,
        thread_id=thread.id,
        anchor_seq=anchor_seq,
        anchor_message_id=anchor_message_id,
        limits=limits,
        items=[*summaries, *recalled, *kept],
        tokens=sum(s.tokens for s in summaries)
        + sum(r.tokens for r in recalled)
        + sum(m.tokens for m in kept),
        notes=c.notes,
    )
    data = _bundle_bytes(bundle)
    refs = [
        fr.CheckpointRef(
            checkpoint_id=s.checkpoint_id,
            seq=s.checkpoint_seq,
            to_seq=s.to_seq,
            summary_kind=s.summary_kind,
            summary_artifact_id=s.summary_artifact_id,
        )
        for s in summaries
    ]
    decision = fr.ContextSelectionDecided(
        compiler_id=COMPILER_ID,
        strategy=strategy,
        anchor_seq=anchor_seq,
        anchor_message_id=anchor_message_id,
        limits=limits,
        checkpoint=refs[-1] if refs else None,
        checkpoints=refs,
        window_from_seq=kept[0].seq if kept else None,
        window_to_seq=kept[-1].seq if kept else None,
        window_messages=len(kept),
        reasons=c.reasons,
        resets=c.resets,
        bundle_artifact_id=artifact_id(data),
        tokens=bundle.tokens,
        recall_query=query,
        recall_hits=recall_refs,
    )
    if not log:
        return CompileResult(bundle, decision.bundle_artifact_id, decision, False)
    thread.store.artifacts.put(data)
    seqs = thread.append(decision)
    logged = msgspec.structs.replace(decision, seq=seqs[0])
    return CompileResult(bundle, decision.bundle_artifact_id, logged, True)
