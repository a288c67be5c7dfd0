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

import _thread  # not threading: compile runs on the hook path
import re
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Final, overload

import msgspec

from continuity import frames as fr
from continuity.caches.marks import is_in
from continuity.caches.thread_index import CheckpointEntry
from continuity.context.bundle import (
    ContextBundle,
    ElidedBlock,
    ItemBlock,
    MessageItem,
    RecallItem,
    SummaryItem,
    ToolStubBlock,
    bundle_bytes as _bundle_bytes,
)
from continuity.context.provider_compaction import (
    ProviderSummary,
    is_provider_kind,
    latest_provider_summary,
    newest_in_window,
)
from continuity.context.sources import ThreadSource, halving, latest_checkpoint_in, open_source
from continuity.errors import (
    AnchorNotFound,
    ArtifactCorrupt,
    ArtifactNotFound,
    ContextTooSmall,
    CorruptCache,
    InvalidLimits,
    InvalidQuery,
    note_rebuilt,
)
from continuity.store.artifacts import artifact_id
from continuity.store.base import BaseStore, Thread, resolve_thread
from continuity.summary import CUMULATIVE_V1, decode_summary, is_compaction_block
from continuity.tokens import Tokenizer, estimate_text

if TYPE_CHECKING:
    from continuity.retrieval.ranking import Hit

RecallFuser = Callable[[Thread, str, "list[Hit]", int, int, "set[int]"], "list[Hit]"]
"""What fuses recall's BM25 hits with a model's ranking of the same prefix (the store's model,
ADR 0033): ``(thread, query, bm25 hits, max seq, k, seqs to leave out) -> hits``, best first
(:func:`continuity.retrieval.fusion.prefix_fuser` makes one). The context layer knows no model:
the caller passes it."""

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

COMPILER_ID: Final = "continuity.compile/4"
"""``/4``: a provider's own compaction (an Anthropic ``compaction`` block, an OpenAI Responses
``compaction`` item) is a summary that bounds the window. ``/3``: the latest user turn and
the tool exchange in flight are always in the window (or :class:`ContextTooSmall`),
``min_recent``, retractions (ADR 0018); recall ranks with the query's informative terms (ADR
0022). ``/2``: oversize messages are elided and unreadable summaries named in the notes (ADR
0017)."""
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
_EXCLUDE_MAX: Final = 100_000
"""Retracted seqs beyond this many are filtered from recall's hits, not listed to the ranking."""


class CompileResult(msgspec.Struct, frozen=True):
    """What a compile chose (the bundle and its id) and the decision that records it."""

    bundle: ContextBundle
    bundle_id: str
    decision: fr.ContextSelectionDecided
    logged: bool
    """True when the compile is on record: its decision was appended (``decision.seq`` is then
    its seq), or it repeated the thread's latest decision exactly and a
    ``context_selection_repeated`` frame naming that decision was appended (``record_seq``)."""
    record_seq: int | None = None
    """The seq of the frame this compile appended: its decision, or the repeat."""

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
    if not 0 <= limits.min_recent <= limits.recent_messages:
        raise InvalidLimits("min_recent must be >= 0 and <= recent_messages")


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
        return block.text
    if isinstance(block, ToolStubBlock | ElidedBlock):
        return block.text()
    if isinstance(block, fr.ProviderBlock):
        return block.text or msgspec.json.encode(block.data).decode()
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
        self.anchor_seq = -1
        self.fuse_recall: RecallFuser | None = None
        self.elided: dict[int, str] = {}
        """seq → the note of each message that gave up blocks to fit the budget."""

    def count(self, text: str) -> int:
        return self.tokenizer.count(text) if self.tokenizer else estimate_text(text)

    # -- summaries --

    def retracted_checkpoints(self, anchor_seq: int) -> frozenset[str]:
        """The checkpoints a retraction at or before the anchor took back: made before it, and
        covering a message it retracts (their summaries still tell what was retracted)."""
        marks = self.source.marks()
        if not marks.has_retractions(anchor_seq):
            return frozenset()
        checkpoints = self.source.checkpoints()
        gone = marks.invalidated(checkpoints, anchor_seq)
        for c in checkpoints:
            if c.checkpoint_id in gone and not is_provider_kind(c.summary_kind):
                self.resets.append(
                    f"checkpoint {c.checkpoint_id} (to_seq {c.to_seq}) passed over: "
                    f"its summary covers messages retracted at seq {gone[c.checkpoint_id]}"
                )
        return frozenset(gone)

    def summaries(self, anchor_seq: int) -> list[SummaryItem]:
        """The summaries the halving rule selects at the anchor, passing over the checkpoints
        a retraction took back and those whose summary cannot be read; every ignored
        checkpoint is recorded as a reset, and an unreadable one the rule chose is named in
        the notes."""
        retracted = self.retracted_checkpoints(anchor_seq)
        items, unreadable = self._readable_summaries(anchor_seq, retracted)
        self._reset_ignored(anchor_seq, [c for c, _ in unreadable.values()])
        self._note_unreadable(items, unreadable)
        if items:
            tos = ", ".join(str(i.to_seq) for i in items)
            self.reasons.append(
                f"summaries: {len(items)} selected by the halving rule (to_seq {tos})"
            )
        return items

    def _readable_summaries(
        self, anchor_seq: int, retracted: frozenset[str]
    ) -> tuple[list[SummaryItem], dict[str, tuple[CheckpointEntry, str]]]:
        """The halving rule's selection, chosen again without each checkpoint whose summary
        cannot be read until every summary it selects can be; and the unreadable ones (by
        checkpoint id, with what is wrong with their artifact)."""
        unreadable: dict[str, tuple[CheckpointEntry, str]] = {}
        while True:
            excluded = frozenset(unreadable) | retracted

            def latest(x: int, ex: frozenset[str] = excluded) -> CheckpointEntry | None:
                return self.source.latest_checkpoint(x, anchor_seq, ex)

            selected = halving(latest, anchor_seq, self.limits.max_summary_refs)
            items: list[SummaryItem] = []
            for c in selected:
                text, problem = self._summary_text(c)
                if text is None:
                    unreadable[c.checkpoint_id] = (c, problem)
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
                return items, unreadable

    def _reset_ignored(self, anchor_seq: int, unreadable: list[CheckpointEntry]) -> None:
        # Every ignored checkpoint the anchor could see is a reset, whatever its to_seq: an
        # unreadable one may have been a lower tier, and an unsupported one may tie a selected one.
        others = self.source.other_checkpoints(anchor_seq)
        # a provider's compaction is no unsupported kind: compile weighs it (_select)
        ignored = [*(c for c in others if not is_provider_kind(c.summary_kind)), *unreadable]
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

    def _note_unreadable(
        self, items: list[SummaryItem], unreadable: dict[str, tuple[CheckpointEntry, str]]
    ) -> None:
        for c, problem in sorted(unreadable.values(), key=lambda u: u[0].seq):
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
                f"{problem}; {instead}"
            )

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
        self, after_seq: int, anchor_seq: int, floor: bool = False
    ) -> tuple[fr.MessageAppended | None, list[fr.MessageAppended], dict[str, str]]:
        """The recent window: up to ``recent_messages`` messages that are not retracted, the
        newest at or before the anchor, after ``after_seq`` (the latest summary's ``to_seq``)
        but reaching before it for ``min_recent`` of them; and the observations recorded for
        their tool uses. When the latest user message that holds more than tool results is not
        among them, it comes first, alone (the *pinned* message): a request always holds the
        turn it answers. Returns (pinned or None, the window, observations).

        ``floor``: nothing at or before ``after_seq`` may be in the window at all (a provider's
        compaction bounds it: the provider takes nothing from before its block)."""
        hi = self.source.message_count_upto(anchor_seq)
        base = self.source.message_count_upto(after_seq) if after_seq >= 0 else 0
        retracted = self.source.marks().retracted(anchor_seq)
        gaps = [  # retracted spans as message ordinals [lo, hi)
            (self.source.message_count_upto(lo - 1), self.source.message_count_upto(t))
            for lo, t in retracted
        ]
        explained = gaps
        if floor and base > 0:
            gaps = [(0, base), *gaps]  # below the floor is as good as retracted
        # The tool exchange in flight (or the newest message) is in every window, summarised
        # or not; min_recent messages too, as far as recent_messages allows.
        exchange = self._exchange_that_fits(hi, gaps)
        chosen = self._choose(hi, base, gaps, max(self.limits.min_recent, exchange))
        self._explain_choice(chosen, hi, base, explained, retracted)
        messages, observations = self._read_chosen(chosen, anchor_seq, retracted)
        start = _valid_start(messages, 0)
        if start:
            self.reasons.append(
                f"window: {start} leading message(s) dropped (tool result without its call)"
            )
        messages = messages[start:]
        pinned = None
        if not any(_is_user_turn(m) for m in messages):
            pinned, messages = self._pin_user_turn(messages, min(chosen) if chosen else hi, gaps)
        if pinned is not None and exchange + 1 > self.limits.recent_messages:
            self._too_few(exchange + 1)
        return pinned, messages, observations

    def _exchange_that_fits(self, hi: int, gaps: list[tuple[int, int]]) -> int:
        """How many of the newest messages the tool exchange in flight takes: it is in every
        window, summarised or not (:class:`ContextTooSmall` when ``recent_messages`` cannot
        hold it, with the user turn before it)."""
        exchange, user_inside = self._exchange(hi, gaps)
        if exchange > self.limits.recent_messages:
            before = 0 if user_inside else self._has_user_turn(hi, gaps, exchange)
            self._too_few(exchange + before)
        return exchange

    def _choose(self, hi: int, base: int, gaps: list[tuple[int, int]], floor: int) -> list[int]:
        """The ordinals of the window, newest first: the live messages below ``hi``, at most
        ``recent_messages``, reaching below ``base`` (into the summary) for ``floor`` of them
        (``min_recent`` and the exchange in flight)."""
        recent = self.limits.recent_messages
        chosen: list[int] = []
        for o in _live_ordinals(hi, gaps):
            if len(chosen) >= recent:
                break
            if o < base and len(chosen) >= floor:
                break
            chosen.append(o)
        return chosen

    def _explain_choice(
        self,
        chosen: list[int],
        hi: int,
        base: int,
        gaps: list[tuple[int, int]],
        retracted: list[tuple[int, int]],
    ) -> None:
        """The reasons of the choice: messages after the summary left out, messages before it
        kept, retracted spans skipped."""
        limits = self.limits
        # the live messages after the summary: all of them but the retracted ones
        live_after = max(0, hi - base) - sum(
            max(0, min(g_hi, hi) - max(g_lo, base)) for g_lo, g_hi in gaps
        )
        skipped = max(0, live_after - sum(1 for o in chosen if o >= base))
        if skipped:
            self.reasons.append(
                f"window: the last {len(chosen)} of {live_after} messages "
                f"(recent_messages={limits.recent_messages})"
            )
        reached = sum(1 for o in chosen if o < base)
        if reached:
            self.reasons.append(
                f"window: {reached} message(s) the summary covers kept raw "
                f"(min_recent={limits.min_recent})"
            )
        if gaps:
            self.reasons.append(
                "window: retracted messages left out ("
                + ", ".join(f"seq {lo}..{t}" if lo != t else f"seq {lo}" for lo, t in retracted)
                + ")"
            )

    def _read_chosen(
        self, chosen: list[int], anchor_seq: int, retracted: list[tuple[int, int]]
    ) -> tuple[list[fr.MessageAppended], dict[str, str]]:
        """The chosen messages read from the log, in log order, and the observations recorded
        among them (by tool use id)."""
        messages: list[fr.MessageAppended] = []
        observations: dict[str, str] = {}
        if not chosen:
            return messages, observations
        wanted = {self.source.message_seq(o) for o in chosen}
        first = min(wanted)
        for lo_seq, hi_seq in _runs(first, anchor_seq, retracted):
            for frame in self.source.frames(lo_seq, hi_seq):
                if isinstance(frame, fr.MessageAppended):
                    if frame.seq not in wanted:
                        break
                    messages.append(frame)
                elif isinstance(frame, fr.ObservationRecorded):
                    observations[frame.tool_use_id] = frame.text
        if len(messages) != len(wanted):
            # The window is every live message from the first chosen to the anchor, so the log
            # read must hold exactly the chosen ones: any other message, or one missing, means
            # the message index names seqs the log does not (a damaged cache). Never compile
            # from it: the caller rebuilds and selects again.
            raise CorruptCache(
                self.thread.id,
                f"the message index does not match the log between seq {first} and {anchor_seq}",
            )
        return messages, observations

    def _pin_user_turn(
        self, messages: list[fr.MessageAppended], lowest: int, gaps: list[tuple[int, int]]
    ) -> tuple[fr.MessageAppended | None, list[fr.MessageAppended]]:
        """The latest user turn below ordinal ``lowest`` (the window holds none), pinned before
        the window, whose oldest message gives way to it when the window is full; and the
        window."""
        recent = self.limits.recent_messages
        pinned = self._latest_user_turn(lowest, gaps)
        if pinned is None:
            return None, messages
        if len(messages) >= max(1, recent):
            # the pinned message counts: the oldest of the window gives way to it
            cut = len(messages) - recent + 1
            messages = messages[_valid_start(messages, cut) :]
        self.reasons.append(
            f"window: the latest user turn (seq {pinned.seq}) kept before the newest "
            f"{len(messages)} message(s)"
        )
        return pinned, messages

    def _too_few(self, need: int) -> None:
        raise ContextTooSmall(
            "recent_messages",
            need,
            self.limits.recent_messages,
            "the latest user turn and the tool exchange in flight",
        )

    def _has_user_turn(self, hi: int, gaps: list[tuple[int, int]], after: int) -> int:
        """1 when there is a user turn before the newest ``after`` messages, else 0."""
        ordinals = _live_ordinals(hi, gaps)
        below = hi
        for _ in range(after):
            below = next(ordinals, 0)
        return int(self._latest_user_turn(below, gaps) is not None)

    def _exchange(self, hi: int, gaps: list[tuple[int, int]]) -> tuple[int, bool]:
        """How many of the newest messages the tool exchange in flight takes (the newest
        message, and back to the calls its results answer; 0 without messages), and whether
        it holds the user turn."""
        found: list[fr.MessageAppended] = []
        for n, o in enumerate(_live_ordinals(hi, gaps)):
            frame = self._message(o, hi)
            found.insert(0, frame)
            if _valid_start(found, 0) == 0 or n >= _USER_TURN_LOOKBACK:
                break
        return len(found), bool(found) and _is_user_turn(found[-1])

    def _latest_user_turn(
        self, below: int, gaps: list[tuple[int, int]]
    ) -> fr.MessageAppended | None:
        """The latest user message below ordinal ``below`` that holds more than tool results
        (looking back at most :data:`_USER_TURN_LOOKBACK` messages)."""
        for n, o in enumerate(_live_ordinals(below, gaps)):
            if n >= _USER_TURN_LOOKBACK:
                return None
            frame = self._message(o, below)
            if _is_user_turn(frame):
                return frame
        return None

    def _message(self, ordinal: int, count: int) -> fr.MessageAppended:
        """The message with ``ordinal`` (of ``count`` messages), checked against the index's
        neighbours: its seq lies strictly between theirs and the frame there is a message. Between
        two neighbouring messages' seqs there is exactly one message, so a damaged record can
        name no other one unnoticed (:class:`CorruptCache`: the caller rebuilds and selects
        again)."""
        source = self.source
        seq = source.message_seq(ordinal)
        below = source.message_seq(ordinal - 1) if ordinal > 0 else -1
        above = source.message_seq(ordinal + 1) if ordinal + 1 < count else None
        frame = next(iter(source.frames(seq, seq)), None) if below < seq else None
        if (
            not isinstance(frame, fr.MessageAppended)
            or frame.seq != seq
            or (above is not None and above <= seq)
        ):
            raise CorruptCache(
                self.thread.id, f"the message index names seq {seq} for message {ordinal}"
            )
        return frame

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
                if is_compaction_block(b):
                    # sent once, as the summary, or not at all (an older or failed one)
                    changed = True
                    continue
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
                    meta=_provider_hints(m.meta),
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
        if isinstance(block, fr.ThinkingBlock) and (block.signature or block.data):
            return None  # signed: a provider takes it back unchanged or not at all
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
        images = 0
        if isinstance(block, fr.ToolResultBlock) and block.parts:
            pictures: list[fr.ContentBlock] = [
                p for p in block.parts if isinstance(p, fr.ImageBlock)
            ]
            images = fr.estimate_message_tokens(pictures) - fr.estimate_message_tokens([])
        return self.count(_block_text(block)) + images

    @staticmethod
    def _stub(block: fr.ToolResultBlock, name: str, observations: dict[str, str]) -> ToolStubBlock:
        text = block.text
        size = block.size or len(text.encode("utf-8", "surrogatepass"))
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
        self, query: str, before_seq: int, room: int, use_caches: bool, shown: set[int]
    ) -> tuple[list[RecallItem], list[fr.RecallRef]]:
        """The best hits with seq ≤ ``before_seq`` that fit in ``room`` tokens."""
        # On use: ranking needs numpy, which a compile without recall (a hook's) never pays for.
        from continuity.retrieval.documents import frame_text
        from continuity.retrieval.ranking import query_terms, rank_prefix

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
        gone = self.source.marks().retracted(self.anchor_seq)
        many = sum(hi - lo + 1 for lo, hi in gone) > _EXCLUDE_MAX
        left_out = shown if many else {*shown, *(q for lo, hi in gone for q in range(lo, hi + 1))}
        k = _RECALL_HITS * 8 if many else _RECALL_HITS
        hits = rank_prefix(
            self.thread,
            terms,
            max_seq=before_seq,
            k=k,
            use_caches=use_caches,
            exclude_seqs=left_out,
        )
        if self.fuse_recall is not None:  # the store's model (ADR 0033), passed by the caller
            hits = self.fuse_recall(self.thread, query, hits, before_seq, k, left_out)
        if many:  # too many to list: ranked as usual, the retracted ones dropped after
            hits = [h for h in hits if not is_in(gone, h.seq)][:_RECALL_HITS]
        items: list[RecallItem] = []
        refs: list[fr.RecallRef] = []
        used = 0
        for h in hits:
            if h.kind == "summary":  # never included: its text is the summaries' own
                refs.append(fr.RecallRef(seq=h.seq, score=h.score, included=False))
                continue
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
        pinned: bool,
    ) -> tuple[list[SummaryItem], list[MessageItem]]:
        """Fit the bundle in the budget: the window's oldest messages go first, then the
        summaries (oldest first) make room for the newest messages. What a request cannot go
        without — the latest user turn and the tool exchange in flight — always stays, its
        largest blocks given up to stubs if it must, or :class:`ContextTooSmall` names the
        budget. ``pinned``: the first item is the pinned user turn, apart from the window.
        ``summaries`` loses the ones dropped."""
        budget = self.limits.budget_tokens
        head = items[:1] if pinned else []
        body = items[1:] if pinned else list(items)
        body_src = sources[1:] if pinned else sources
        if budget is None:
            return summaries, [*head, *body]
        head, required, user_idx = self._squeeze_in_flight(head, body, body_src, budget)
        last = required if user_idx is None else user_idx
        start = self._window_start(summaries, body, body_src, budget - _tokens(head), last)
        if user_idx is not None and start > user_idx:
            # the budget cut the user turn out of the window: it stays, before the newest part
            head = [body[user_idx]]
            self.reasons.append(
                f"budget: the latest user turn (seq {head[0].seq}) kept before the newest messages"
            )
            room = budget - _tokens(head)
            start = max(self._window_start(summaries, body, body_src, room, required), user_idx + 1)
        if start:
            self.reasons.append(
                f"budget: window cut to {len(body) - start} of {len(body)} messages "
                f"to fit {budget} tokens"
            )
        kept = [*head, *body[start:]]
        for item in kept:
            note = self.elided.get(item.seq)
            if note is not None:
                self.notes.append(note)
                self.reasons.append(note)
        used = _tokens(kept)
        while summaries and _tokens(summaries) + used > budget:
            dropped = summaries.pop(0)
            self.reasons.append(f"budget: summary to_seq {dropped.to_seq} dropped")
        return summaries, kept

    def _squeeze_in_flight(
        self,
        head: list[MessageItem],
        body: list[MessageItem],
        body_src: list[fr.MessageAppended],
        budget: int,
    ) -> tuple[list[MessageItem], int, int | None]:
        """Make what a request cannot go without fit the budget on its own: the pinned ``head``
        (or else the latest user turn in ``body``) and the tool exchange in flight, their
        largest blocks given up to stubs (in ``body`` itself); :class:`ContextTooSmall` when
        even that is too much. Returns the head, where the exchange in flight starts in
        ``body``, and the index of the user turn in ``body`` when it must stay and is before
        the exchange (else None)."""
        required = _required_from(body_src)
        user_at = _last_user_turn_index(body_src)
        user_idx = None if head or user_at is None or user_at >= required else user_at
        must_idx = ([] if user_idx is None else [user_idx]) + list(range(required, len(body)))
        must = [*head, *(body[i] for i in must_idx)]
        names = {b.id: b.name for m in must for b in m.content if isinstance(b, fr.ToolUseBlock)}
        minimum = sum(self._min_tokens(m, names) for m in must)
        if minimum > budget:
            raise ContextTooSmall(
                "budget_tokens",
                minimum,
                budget,
                f"the latest user turn and the tool exchange in flight ({len(must)} "
                "message(s), with their largest blocks elided)",
            )
        squeezed = self._squeeze(must, budget)
        for i, item in zip(must_idx, squeezed[len(head) :], strict=True):
            body[i] = item
        return squeezed[: len(head)], required, user_idx

    def _window_start(
        self,
        summaries: list[SummaryItem],
        body: list[MessageItem],
        body_src: list[fr.MessageAppended],
        room: int,
        last: int,
    ) -> int:
        """The window's start, dropping ``summaries`` (oldest first) until the messages from
        ``last`` on fit in ``room`` tokens beside them."""
        start = _suffix_start(body, body_src, room - _tokens(summaries))
        while start > last and summaries:
            dropped = summaries.pop(0)
            self.reasons.append(
                f"budget: summary to_seq {dropped.to_seq} dropped to make room for the newest"
            )
            start = _suffix_start(body, body_src, room - _tokens(summaries))
        return start

    def _min_tokens(self, item: MessageItem, names: dict[str, str]) -> int:
        """The fewest tokens ``item`` can take: every block that has a smaller stub elided."""
        total = 4
        for b in item.content:
            cost = self._block_tokens(b)
            stub = None if _is_stub(b) else self._elided(b, cost, names, {})
            total += cost if stub is None else min(cost, self._block_tokens(stub))
        return total

    def _squeeze(self, items: list[MessageItem], room: int) -> list[MessageItem]:
        """``items`` in at most ``room`` tokens: their largest blocks give way to stubs, one at
        a time; :class:`ContextTooSmall` when even that cannot make them fit."""
        total = sum(m.tokens for m in items)
        if total <= room:
            return items
        out = list(items)
        costs = [[self._block_tokens(b) for b in m.content] for m in out]
        order = sorted(
            ((c, -i, -j) for i, row in enumerate(costs) for j, c in enumerate(row)), reverse=True
        )
        names = {b.id: b.name for m in out for b in m.content if isinstance(b, fr.ToolUseBlock)}
        gone: dict[int, list[str]] = {}
        for cost, ni, nj in order:
            if total <= room:
                break
            i, j = -ni, -nj
            block = out[i].content[j]
            stub = self._elided(block, cost, names, {}) if not _is_stub(block) else None
            if stub is None:
                continue
            new = self._block_tokens(stub)
            if new >= cost:
                continue
            content = list(out[i].content)
            content[j] = stub
            out[i] = msgspec.structs.replace(
                out[i], content=content, tokens=out[i].tokens + new - cost
            )
            total += new - cost
            kind = "tool_result" if isinstance(stub, ToolStubBlock) else stub.block_type
            gone.setdefault(i, []).append(f"{kind} of {stub.size} bytes")
        if total > room:  # callers check the minimum first; this is the same promise, kept
            self._too_small_budget(total, room)
        for i, what in gone.items():
            m = out[i]
            self.elided[m.seq] = (
                f"elided: message seq {m.seq} ({m.role}) is part of the turn in flight, which "
                f"needs more than the budget; in this bundle a stub stands for its "
                f"{', '.join(what)} (the log keeps it whole)"
            )
        return out

    def _too_small_budget(self, needed: int, room: int) -> None:
        budget = self.limits.budget_tokens or 0
        raise ContextTooSmall(
            "budget_tokens",
            budget + (needed - room),
            budget,
            f"the latest user turn and the tool exchange in flight (~{needed} tokens with "
            "their largest blocks elided)",
        )


_USER_TURN_LOOKBACK: Final = 4096
"""How far back (in messages) a compile looks for the latest user turn to pin."""


def _is_user_turn(m: fr.MessageAppended) -> bool:
    """A user message that holds more than tool results: a turn the model answers."""
    return m.role == "user" and any(not isinstance(b, fr.ToolResultBlock) for b in m.content)


_HINT_PREFIXES: Final = ("anthropic.", "openai.")


def _provider_hints(meta: dict[str, str]) -> dict[str, str]:
    """The keys of a message's meta a renderer reads (other labels, such as Claude Code's,
    stay out of the bundle, so its bytes do not change with them)."""
    if not meta:
        return {}
    return {k: v for k, v in meta.items() if k.startswith(_HINT_PREFIXES)}


def _is_stub(block: ItemBlock) -> bool:
    return isinstance(block, ToolStubBlock | ElidedBlock)


def _last_user_turn_index(messages: Sequence[fr.MessageAppended]) -> int | None:
    for i in range(len(messages) - 1, -1, -1):
        if _is_user_turn(messages[i]):
            return i
    return None


def _required_from(messages: Sequence[fr.MessageAppended]) -> int:
    """Where the part of the window a request cannot go without starts: the shortest suffix
    that holds the newest message and the calls of every result in it (the tool exchange in
    flight)."""
    for i in range(len(messages) - 1, -1, -1):
        if _valid_start(messages, i) == i:
            return i
    return len(messages)


def _tokens(items: Sequence[SummaryItem | RecallItem | MessageItem]) -> int:
    return sum(i.tokens for i in items)


def _suffix_start(
    body: Sequence[MessageItem], body_src: Sequence[fr.MessageAppended], room: int
) -> int:
    """Where the longest valid suffix of the window (``body``, made from ``body_src``) within
    ``room`` tokens starts."""
    start = len(body)
    used = 0
    for i in range(len(body) - 1, -1, -1):
        if used + body[i].tokens > room:
            break
        used += body[i].tokens
        start = i
    return _valid_start(body_src, start)


def _live_ordinals(hi: int, gaps: list[tuple[int, int]], stop: int = 0) -> Iterator[int]:
    """Message ordinals from ``hi - 1`` down to ``stop``, skipping the retracted ``gaps``
    (ordinal ranges ``[lo, hi)``, sorted)."""
    o = hi - 1
    g = len(gaps) - 1
    while o >= stop:
        while g >= 0 and gaps[g][0] > o:
            g -= 1
        if g >= 0 and gaps[g][0] <= o < gaps[g][1]:
            o = gaps[g][0] - 1
            continue
        yield o
        o -= 1


def _runs(first: int, last: int, retracted: list[tuple[int, int]]) -> Iterator[tuple[int, int]]:
    """``[first, last]`` minus the retracted seq spans, as (from, to) runs."""
    lo = first
    for a, b in retracted:
        if b < lo or a > last:
            continue
        if a > lo:
            yield lo, a - 1
        lo = b + 1
    if lo <= last:
        yield lo, last


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
    recall_model: RecallFuser | None = None,
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
    recall_model: RecallFuser | None = None,
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
    recall_model: RecallFuser | None = None,
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
    ``limits.recall_budget_tokens`` (default 1,500) and the overall budget. ``recall_model``
    fuses those hits with a model's (:data:`RecallFuser`; the CLI passes the store's model).
    """
    limits = DEFAULT_LIMITS if limits is None else limits
    _check_limits(limits)
    thread = resolve_thread(target, thread_id)
    try:
        return _compile(thread, anchor, limits, log, use_caches, tokenizer, (recall, recall_model))
    except CorruptCache as exc:
        # The caches are derived: rebuild them from the log and select again (a store this
        # process cannot write is read from the log instead). The log itself is never guessed.
        from continuity.caches.thread_index import ThreadIndex, caches_writable
        from continuity.retrieval.index import ThreadSearchIndex

        cache_dir = thread.store.cache_dir
        if cache_dir is None or not caches_writable(cache_dir):
            note_rebuilt(f"the caches of thread {thread.id!r}", exc.reason, "read from the log")
            return _compile(thread, anchor, limits, log, False, tokenizer, (recall, recall_model))
        note_rebuilt(f"the caches of thread {thread.id!r}", exc.reason)
        ThreadIndex(thread).rebuild()
        ThreadSearchIndex(thread).rebuild()
        return _compile(thread, anchor, limits, log, use_caches, tokenizer, (recall, recall_model))


class _Selection(msgspec.Struct, frozen=True):
    """What a compile chose, before it is built into a bundle and a decision."""

    summaries: list[SummaryItem]
    recalled: list[RecallItem]
    kept: list[MessageItem]
    anchor_message_id: str | None
    """The id of the newest message of the window (before the budget)."""
    recall_query: str | None
    recall_hits: list[fr.RecallRef]


def _compile(
    thread: Thread,
    anchor: int | str | None,
    limits: fr.Limits,
    log: bool,
    use_caches: bool,
    tokenizer: Tokenizer | None,
    recalling: tuple[str | bool | None, RecallFuser | None],
) -> CompileResult:
    recall, c_fuse = recalling
    source = open_source(thread, use_caches=use_caches)
    c = _Compiler(thread, source, limits, tokenizer)
    c.fuse_recall = c_fuse
    c.anchor_seq = _resolve_anchor(source, anchor)
    selection = _select(c, recall, use_caches)
    bundle = _build_bundle(c, selection)
    data = _bundle_bytes(bundle)
    decision = _build_decision(c, selection, bundle, artifact_id(data))
    if not log:
        return CompileResult(bundle, decision.bundle_artifact_id, decision, False)
    return _log(thread, bundle, data, decision)


# -- select --


def _select(c: _Compiler, recall: str | bool | None, use_caches: bool) -> _Selection:
    """The summaries, the window fitted in the budget, and the recall hits (ADR 0018, 0022)."""
    anchor_seq = c.anchor_seq
    summaries = c.summaries(anchor_seq)
    provider = latest_provider_summary(
        c.source, anchor_seq, c.source.marks().retracted(anchor_seq), c.count, c.resets
    )
    summaries, floor = _weigh_provider(c, summaries, provider)
    after = summaries[-1].to_seq if summaries else -1
    said = len(c.reasons)
    pinned, messages, observations = c.window(after, anchor_seq, floor)
    # a compacting message in the window newer than every summary bounds it in turn (the
    # anchor is that message, or its checkpoint was never written)
    bound = summaries[-1].message_seq if floor else None
    newer = newest_in_window(messages, after if bound is None else bound, c.count)
    if newer is not None:
        del c.reasons[said:]  # that window is not the one chosen
        summaries, floor = _weigh_provider(c, summaries, newer, derived=True)
        after = summaries[-1].to_seq
        pinned, messages, observations = c.window(after, anchor_seq, floor)
    sources = [pinned, *messages] if pinned is not None else messages
    items = c.items(sources, observations)
    summaries, kept = c.fit_budget(summaries, items, sources, pinned is not None)
    recalled: list[RecallItem] = []
    recall_refs: list[fr.RecallRef] = []
    query: str | None = None
    if recall:
        query = recall if isinstance(recall, str) else _anchor_text(c.source, anchor_seq)
        recalled, recall_refs = _recall_in_room(c, query, recall, summaries, kept, use_caches)
    return _Selection(
        summaries=summaries,
        recalled=recalled,
        kept=kept,
        anchor_message_id=messages[-1].message_id if messages else None,
        recall_query=query,
        recall_hits=recall_refs,
    )


def _weigh_provider(
    c: _Compiler,
    summaries: list[SummaryItem],
    provider: ProviderSummary | None,
    *,
    derived: bool = False,
) -> tuple[list[SummaryItem], bool]:
    """The summaries to send beside a provider's compaction, and whether it bounds the window.

    The newer boundary wins. A cumulative summary through the compacting message or later
    supersedes the provider's (it was built from the log, which holds everything the provider
    compacted): the block is not sent. Otherwise the provider's compaction is the one summary:
    the window starts after its ``to_seq`` and never reaches before it, and the older
    cumulative summaries are not sent (the provider's summary covers all they do)."""
    if provider is None:
        return summaries, False
    p = provider.item
    name = f"checkpoint {p.checkpoint_id}" if p.checkpoint_id else f"message seq {p.message_seq}"
    if summaries and summaries[-1].to_seq >= provider.message_seq:
        c.reasons.append(
            f"provider compaction: {p.summary_kind} ({name}) superseded by the summary "
            f"through seq {summaries[-1].to_seq}"
        )
        return summaries, False
    how = "held by the window's message, no checkpoint yet" if derived else "its checkpoint"
    c.reasons.append(
        f"provider compaction: {p.summary_kind} at seq {provider.message_seq} ({how}) bounds "
        f"the window: nothing through seq {p.to_seq} is sent"
        + (f"; {len(summaries)} older summary(ies) not sent" if summaries else "")
    )
    return [p], True


def _recall_in_room(
    c: _Compiler,
    query: str,
    recall: str | bool,
    summaries: list[SummaryItem],
    kept: list[MessageItem],
    use_caches: bool,
) -> tuple[list[RecallItem], list[fr.RecallRef]]:
    """The hits for ``query`` from before the latest summary (or before the window when there
    is none), in the room the recall budget and the overall budget leave."""
    if not query.strip():
        what = "the query is empty" if isinstance(recall, str) else "the anchor has no text"
        c.reasons.append(f"recall: {what}: nothing to search for")
        return [], []
    before = summaries[-1].to_seq if summaries else (kept[0].seq - 1 if kept else c.anchor_seq)
    room = c.limits.recall_budget_tokens or _RECALL_BUDGET
    if c.limits.budget_tokens is not None:
        room = min(room, c.limits.budget_tokens - _tokens(summaries) - _tokens(kept))
    shown = {m.seq for m in kept}  # the window may reach behind the summary (ADR 0018)
    return c.recall(query, before, room, use_caches, shown)


# -- build --


def _build_bundle(c: _Compiler, selection: _Selection) -> ContextBundle:
    s = selection
    return ContextBundle(
        compiler_id=COMPILER_ID,
        strategy=_strategy(len(s.summaries)),
        thread_id=c.thread.id,
        anchor_seq=c.anchor_seq,
        anchor_message_id=s.anchor_message_id,
        limits=c.limits,
        items=[*s.summaries, *s.recalled, *s.kept],
        tokens=_tokens(s.summaries) + _tokens(s.recalled) + _tokens(s.kept),
        notes=c.notes,
    )


def _build_decision(
    c: _Compiler, selection: _Selection, bundle: ContextBundle, bundle_artifact_id: str
) -> fr.ContextSelectionDecided:
    s = selection
    refs = [
        fr.CheckpointRef(
            checkpoint_id=i.checkpoint_id,
            seq=i.checkpoint_seq,
            to_seq=i.to_seq,
            summary_kind=i.summary_kind,
            summary_artifact_id=i.summary_artifact_id,
        )
        for i in s.summaries
    ]
    return fr.ContextSelectionDecided(
        compiler_id=COMPILER_ID,
        strategy=bundle.strategy,
        anchor_seq=c.anchor_seq,
        anchor_message_id=s.anchor_message_id,
        limits=c.limits,
        checkpoint=refs[-1] if refs else None,
        checkpoints=refs,
        window_from_seq=s.kept[0].seq if s.kept else None,
        window_to_seq=s.kept[-1].seq if s.kept else None,
        window_messages=len(s.kept),
        reasons=c.reasons,
        resets=c.resets,
        bundle_artifact_id=bundle_artifact_id,
        tokens=bundle.tokens,
        recall_query=s.recall_query,
        recall_hits=s.recall_hits,
    )


# -- log --


def _log(
    thread: Thread, bundle: ContextBundle, data: bytes, decision: fr.ContextSelectionDecided
) -> CompileResult:
    """Put the compile on record: a repeat of the thread's latest decision when it is the same
    selection, else the bundle stored and the decision appended."""
    previous = _previous_decision(thread, decision.anchor_seq)
    if previous is not None and _repeats(previous, decision):
        # The same selection again (a retried call, a second look): on record in ~150 bytes,
        # its bundle the decision's (ADR 0020).
        repeat = fr.ContextSelectionRepeated(
            decision_seq=previous.seq, bundle_artifact_id=decision.bundle_artifact_id
        )
        seq = thread.append(repeat)[0]
        logged = msgspec.structs.replace(decision, seq=previous.seq)
        return CompileResult(bundle, decision.bundle_artifact_id, logged, True, seq)
    # The bundle is stored as a delta of the thread's previous one when this process made that
    # one (they share most of their window), and neither it nor the decision waits for its own
    # fsync: the next durable append to the log makes the decision durable, and a bundle is
    # derived from the log (ADR 0020).
    base = _last_bundles.get(thread)
    thread.store.artifacts.put_like(data, base, durable=False)
    _last_bundles.put(thread, decision.bundle_artifact_id, data)
    seqs = thread.append(decision, durable=False)
    logged = msgspec.structs.replace(decision, seq=seqs[0])
    return CompileResult(bundle, decision.bundle_artifact_id, logged, True, seqs[0])


class _LastBundles:
    """The last bundle each thread's compiles stored in this process (the base of the next
    one's delta), for the most recently compiled threads."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._lock = _thread.allocate_lock()
        self._kept: dict[tuple[int, str], tuple[str, bytes]] = {}

    def get(self, thread: Thread) -> tuple[str, bytes] | None:
        with self._lock:
            return self._kept.get((id(thread.store), thread.id))

    def put(self, thread: Thread, aid: str, data: bytes) -> None:
        key = (id(thread.store), thread.id)
        with self._lock:
            self._kept.pop(key, None)
            self._kept[key] = (aid, data)
            while len(self._kept) > self._size:
                del self._kept[next(iter(self._kept))]


_last_bundles: Final = _LastBundles(256)


_REPEAT_LOOKBACK: Final = 64
"""How many frames back from the head a compile looks for the decision it may repeat."""


def _previous_decision(thread: Thread, anchor_seq: int) -> fr.ContextSelectionDecided | None:
    """The thread's latest decision, when it is among the last frames and after the anchor
    (a decision for the same anchor is always after it); None otherwise."""
    for n, (seq, line) in enumerate(thread.read_lines_backwards()):
        if seq <= anchor_seq or n >= _REPEAT_LOOKBACK:
            return None
        if b'"type":"context_selection_' not in line[:40]:
            continue
        frame = thread.decode(seq, line)
        if isinstance(frame, fr.ContextSelectionRepeated):
            if frame.decision_seq <= anchor_seq:
                return None
            found = next(thread.read_lines(from_seq=frame.decision_seq, to_seq=frame.decision_seq))
            frame = thread.decode(*found)
        return frame if isinstance(frame, fr.ContextSelectionDecided) else None
    return None


def _repeats(previous: fr.ContextSelectionDecided, decision: fr.ContextSelectionDecided) -> bool:
    """Whether ``decision`` is ``previous`` exactly (but for its seq and time)."""
    strip = {"seq": -1, "ts_ms": 0, "more": False, "digest": ""}
    return msgspec.structs.replace(previous, **strip) == msgspec.structs.replace(decision, **strip)
