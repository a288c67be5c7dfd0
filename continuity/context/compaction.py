"""Compaction: decide where checkpoints fall, summarize, and record them. It only adds.

Cut rules name the message a checkpoint ends at (its ``to_seq``):

- ``stride_messages_v1/<n>``: after every n-th message (by ordinal: the n-th, 2n-th, …);
- ``token_threshold_v1/<t>``: whenever the messages not covered by a cumulative summary exceed
  t estimated tokens;
- ``manual_v1``: at a given seq or message id.

A cut never separates a tool call from its result: a cut landing on a message whose tool calls
are answered by the next message moves to that message.

Each checkpoint's ``cumulative_v1`` summary is built by a :class:`~continuity.summary.Summarizer`
from its base (the latest earlier cumulative summary) plus the messages after the base up to the
cut, in three steps: :func:`plan_checkpoint` reads the base and the messages,
the summarizer writes the content, :func:`commit_checkpoint` stores it and appends the frame.
``run_compaction`` runs the planned cuts as a job (:class:`CompactionJob`): ``job_spawned``, the
checkpoints, ``job_ended`` — with the error when it fails, or ``cancelled`` when it is
interrupted. A second job for the same thread does not start while one is in flight. The async
face (:mod:`continuity.aio`) runs the same steps with an awaited summarizer.
"""

from __future__ import annotations

import _thread  # not threading: compaction runs on the hook path (see store.base)
import re
import weakref
from collections.abc import Callable, Sequence
from typing import Final, Literal, overload

import blake3
import msgspec

from continuity import frames as fr
from continuity.caches.marks import is_in
from continuity.caches.thread_index import CheckpointEntry
from continuity.context.sources import ThreadSource, open_source
from continuity.errors import ArtifactCorrupt, ArtifactNotFound, InvalidCutRule
from continuity.store.base import BaseStore, Thread, resolve_thread
from continuity.summary import (
    CUMULATIVE_V1,
    Summarizer,
    SummaryContent,
    SummaryDoc,
    decode_summary,
    summary_bytes,
)

__all__ = [
    "CompactionResult",
    "CutRule",
    "ManualCut",
    "StrideMessages",
    "TokenThreshold",
    "covered_tokens",
    "create_checkpoint",
    "pair_safe_cut",
    "parse_cut_rule",
    "plan_cuts",
    "run_compaction",
]
# The steps below (CheckpointPlan, plan_checkpoint, commit_checkpoint, CompactionJob, …) are
# shared with the async face (continuity.aio), which runs the same job around an awaited
# summarizer; they are this module's, not the package's.


class StrideMessages(msgspec.Struct, frozen=True):
    n: int

    @property
    def id(self) -> str:
        return f"stride_messages_v1/{self.n}"


class TokenThreshold(msgspec.Struct, frozen=True):
    tokens: int

    @property
    def id(self) -> str:
        return f"token_threshold_v1/{self.tokens}"


class ManualCut(msgspec.Struct, frozen=True):
    at: int | str
    """A seq (the latest message at or before it) or a message id."""

    @property
    def id(self) -> str:
        return "manual_v1"


CutRule = StrideMessages | TokenThreshold | ManualCut
_RULE_RE: Final = re.compile(r"^(stride_messages_v1|token_threshold_v1)/([0-9]+)$")


def parse_cut_rule(rule_id: str) -> CutRule:
    """``stride_messages_v1/<n>`` or ``token_threshold_v1/<t>`` (manual cuts need a position)."""
    m = _RULE_RE.match(rule_id)
    if m is None:
        raise InvalidCutRule(
            f"unknown cut rule {rule_id!r} (use stride_messages_v1/<n> or token_threshold_v1/<t>)"
        )
    value = int(m.group(2))
    if value <= 0:
        raise InvalidCutRule(f"{rule_id}: the parameter must be positive")
    return StrideMessages(value) if m.group(1) == "stride_messages_v1" else TokenThreshold(value)


def _latest_cumulative(checkpoints: Sequence[CheckpointEntry]) -> CheckpointEntry | None:
    best: CheckpointEntry | None = None
    for c in checkpoints:
        if c.summary_kind == CUMULATIVE_V1 and (best is None or c.to_seq >= best.to_seq):
            best = c
    return best


def _sound(source: ThreadSource, checkpoints: Sequence[CheckpointEntry]) -> list[CheckpointEntry]:
    """``checkpoints`` without the ones a retraction took back (their summaries tell what was
    retracted)."""
    gone = source.marks().invalidated(checkpoints)
    return [c for c in checkpoints if c.checkpoint_id not in gone] if gone else list(checkpoints)


def _keep_pairs(
    source: ThreadSource, ordinal: int, total: int, memo: dict[int, int] | None = None
) -> int:
    """Move a cut at message ``ordinal`` past the messages answering its tool calls (all of
    them, when several calls are answered one message at a time).

    ``memo`` (:func:`_pair_memo`) keeps the answers that cannot change as the thread grows —
    those decided by messages already there, not cut short by the thread's end — so a plan
    that asks again reads no frame for them."""
    start = ordinal
    if memo is not None and (known := memo.get(start)) is not None:
        return known
    seq = source.message_seq(ordinal)
    message = next(f for f in source.frames(seq, seq) if isinstance(f, fr.MessageAppended))
    pending = {b.id for b in message.content if isinstance(b, fr.ToolUseBlock)}
    while pending and ordinal + 1 < total:
        nxt_seq = source.message_seq(ordinal + 1)
        nxt = next(f for f in source.frames(nxt_seq, nxt_seq) if isinstance(f, fr.MessageAppended))
        answered = {
            b.tool_use_id
            for b in nxt.content
            if isinstance(b, fr.ToolResultBlock) and b.tool_use_id in pending
        }
        if not answered:
            break  # decided by the next message: final
        ordinal += 1
        pending = (pending - answered) | {
            b.id for b in nxt.content if isinstance(b, fr.ToolUseBlock)
        }
    else:
        if pending:  # calls still unanswered at the thread's end: a later message may answer
            return ordinal
    if memo is not None:
        memo[start] = ordinal
    return ordinal


class _PairMemo:
    """:func:`_keep_pairs`'s final answers for one thread, valid for the log whose frame
    ``seq`` has ``digest``: the chain pins every frame before it, so one frame's digest,
    checked on each use, says the answers are still this log's."""

    def __init__(self) -> None:
        self.lock = _thread.allocate_lock()
        self.seq = -1
        self.digest = ""
        self.found: dict[int, int] = {}


_PAIR_MEMOS: Final[weakref.WeakKeyDictionary[BaseStore, dict[str, _PairMemo]]] = (
    weakref.WeakKeyDictionary()
)
_PAIR_MEMOS_GUARD: Final = _thread.allocate_lock()


def _digest_at(source: ThreadSource, seq: int) -> str:
    frame = next(iter(source.frames(seq, seq)), None)
    return frame.digest if frame is not None and frame.seq == seq else ""


def _pair_memo(thread: Thread, source: ThreadSource) -> dict[int, int] | None:
    """The pair-keeping answers this process knows for ``thread`` as ``source`` reads it (kept
    between plans, so planning a stride rule does not read two frames per cut ever made)."""
    head = source.head_seq()
    if head is None:
        return None
    with _PAIR_MEMOS_GUARD:
        memo = _PAIR_MEMOS.setdefault(thread.store, {}).setdefault(thread.id, _PairMemo())
    with memo.lock:
        if memo.seq >= 0 and (
            memo.seq > head or not memo.digest or _digest_at(source, memo.seq) != memo.digest
        ):
            memo.found = {}  # another log under this id (rebuilt, replaced): start over
        if memo.seq != head:
            memo.seq, memo.digest = head, _digest_at(source, head)
        return memo.found


def pair_safe_cut(source: ThreadSource, seq: int) -> int:
    """The ``to_seq`` a checkpoint asked for at ``seq`` should have: the latest message at or
    before ``seq``, moved past the messages answering its tool calls."""
    head = source.head_seq()
    if head is None or not 0 <= seq <= head:
        raise InvalidCutRule(f"seq {seq} is outside the log")
    count = source.message_count_upto(seq)
    if count == 0:
        raise InvalidCutRule(f"no message at or before seq {seq}")
    return source.message_seq(_keep_pairs(source, count - 1, source.message_count_upto(head)))


def plan_cuts(source: ThreadSource, rule: CutRule) -> list[int]:
    """The ``to_seq`` of every checkpoint the rule calls for that no cumulative checkpoint has
    yet, ascending."""
    return _plan_cuts(source, rule, None)


def _plan_cuts(source: ThreadSource, rule: CutRule, memo: dict[int, int] | None) -> list[int]:
    head = source.head_seq()
    if head is None:
        return []
    total = source.message_count_upto(head)
    # A checkpoint a later retraction took back is not done: its cut is made again, without
    # the retracted messages (ADR 0018).
    checkpoints = _sound(source, source.checkpoints())
    done = {c.to_seq for c in checkpoints if c.summary_kind == CUMULATIVE_V1}
    ordinals: list[int] = []
    if isinstance(rule, StrideMessages):
        ordinals = [_keep_pairs(source, o, total, memo) for o in range(rule.n - 1, total, rule.n)]
    elif isinstance(rule, TokenThreshold):
        latest = _latest_cumulative(checkpoints)
        start = source.message_count_upto(latest.to_seq) if latest else 0
        tokens = source.message_tokens(start, total)
        running = 0
        i = start
        while i < total:
            running += int(tokens[i - start])
            if running > rule.tokens:
                # The cut may move past the results of its calls: count again after them.
                i = _keep_pairs(source, i, total, memo)
                ordinals.append(i)
                running = 0
            i += 1
    else:
        if isinstance(rule.at, str):
            seq = source.seq_of_message_id(rule.at)
            if seq is None:
                raise InvalidCutRule(f"no message with id {rule.at!r}")
        else:
            if not 0 <= rule.at <= head:
                raise InvalidCutRule(f"seq {rule.at} is outside the log (seqs 0..{head})")
            seq = rule.at
        count = source.message_count_upto(seq)
        if count == 0:
            raise InvalidCutRule(f"no message at or before seq {seq}")
        ordinals = [_keep_pairs(source, count - 1, total)]
    cuts: list[int] = []
    for o in ordinals:
        to_seq = source.message_seq(o)
        if to_seq not in done and (not cuts or to_seq > cuts[-1]):
            cuts.append(to_seq)
    return cuts


def _checkpoint_id(thread_id: str, to_seq: int, summary_id: str) -> str:
    return blake3.blake3(f"{thread_id}\0{to_seq}\0{summary_id}".encode()).hexdigest()[:32]


def _load_summary(store: BaseStore, c: CheckpointEntry) -> SummaryDoc | None:
    try:
        return decode_summary(store.artifacts.get(c.summary_artifact_id))
    except (ArtifactNotFound, ArtifactCorrupt, msgspec.DecodeError):
        return None


# --- one checkpoint: plan, summarize, commit ---------------------------------------------------
#
# Each checkpoint is three steps, and every caller runs the same three: ``plan_checkpoint``
# reads what the summary is built from, a summarizer turns that into ``SummaryContent`` (the only
# step that may wait on the network: continuity.aio awaits an async summarizer here), and
# ``commit_checkpoint`` stores the summary and appends the frame. Reads and writes stay in the
# plan and commit steps, so the async face runs those two in a worker thread.


class CheckpointPlan(msgspec.Struct, frozen=True, kw_only=True):
    """What one cumulative checkpoint through ``to_seq`` is built from (the plan step's answer):
    its base (the latest earlier cumulative summary that can be read, or None) and the messages
    after the base up to ``to_seq``, in log order."""

    thread_id: str
    to_seq: int
    base_entry: CheckpointEntry | None
    base: SummaryDoc | None
    messages: list[fr.MessageAppended]


def plan_checkpoint(
    thread: Thread, to_seq: int, src: ThreadSource, *, extra: Sequence[CheckpointEntry] = ()
) -> CheckpointPlan:
    """The plan step: read the base summary and the messages a checkpoint through ``to_seq``
    summarizes, through ``src`` (``extra``: checkpoints a running job made since ``src`` was
    opened). Raises :class:`InvalidCutRule` for a ``to_seq`` outside the log or before the
    first message."""
    head = src.head_seq()
    if head is None or not 0 <= to_seq <= head:
        raise InvalidCutRule(f"to_seq {to_seq} is outside the log")
    candidates = [
        c
        for c in _sound(src, [*src.checkpoints(), *extra])
        if c.summary_kind == CUMULATIVE_V1 and c.to_seq < to_seq
    ]
    base_entry = max(candidates, key=lambda c: (c.to_seq, c.seq), default=None)
    base = _load_summary(thread.store, base_entry) if base_entry else None
    if base is None:
        base_entry = None
    first = src.message_count_upto(base_entry.to_seq) if base_entry else 0
    last = src.message_count_upto(to_seq)
    if last == 0:
        raise InvalidCutRule(f"no message at or before seq {to_seq}")
    messages: list[fr.MessageAppended] = []
    gone = src.marks().retracted()
    if first < last:
        messages = [
            f
            for f in src.frames(src.message_seq(first), src.message_seq(last - 1))
            if isinstance(f, fr.MessageAppended) and not is_in(gone, f.seq)
        ]
    return CheckpointPlan(
        thread_id=thread.id, to_seq=to_seq, base_entry=base_entry, base=base, messages=messages
    )


def default_summarizer(summarizer: Summarizer | None) -> Summarizer:
    """``summarizer``, or the default one
    (:class:`~continuity.context.summarize.ExtractiveSummarizer`)."""
    if summarizer is not None:
        return summarizer
    from continuity.context.summarize import ExtractiveSummarizer

    return ExtractiveSummarizer()


def commit_checkpoint(
    thread: Thread,
    plan: CheckpointPlan,
    content: SummaryContent,
    *,
    produced_by: str,
    cut_rule_id: str = "manual_v1",
) -> fr.CompactionCheckpointCreated:
    """The commit step: store ``content`` as the ``summary.v1`` artifact of ``plan`` and append
    its ``compaction_checkpoint_created`` frame. Returns the frame with its seq."""
    base_entry = plan.base_entry
    doc = SummaryDoc(
        thread_id=thread.id,
        to_seq=plan.to_seq,
        base_checkpoint_id=base_entry.checkpoint_id if base_entry else None,
        base_summary_artifact_id=base_entry.summary_artifact_id if base_entry else None,
        produced_by=produced_by,
        text=content.text,
        sections=content.sections,
    )
    aid = thread.store.artifacts.put(summary_bytes(doc))
    last = plan.messages[-1] if plan.messages else None
    frame = fr.CompactionCheckpointCreated(
        checkpoint_id=_checkpoint_id(thread.id, plan.to_seq, aid),
        cut_rule_id=cut_rule_id,
        summary_kind=CUMULATIVE_V1,
        summary_artifact_id=aid,
        from_seq=0,
        to_seq=plan.to_seq,
        to_message_id=last.message_id if last is not None and last.seq == plan.to_seq else None,
        base_checkpoint_id=doc.base_checkpoint_id,
        produced_by=doc.produced_by,
    )
    seqs = thread.append(frame)
    return msgspec.structs.replace(frame, seq=seqs[0])


def checkpoint_target(target: BaseStore | Thread, where: tuple[object, ...]) -> tuple[Thread, int]:
    """``create_checkpoint``'s arguments, ``(thread, to_seq)`` or ``(store, thread_id, to_seq)``,
    as the resolved thread and ``to_seq`` (:class:`ThreadNotFound` for a thread without frames)."""
    match target, where:
        case Thread(), (int() as to_seq,):
            return resolve_thread(target), to_seq
        case BaseStore(), (str() as thread_id, int() as to_seq):
            return resolve_thread(target, thread_id), to_seq
        case _:
            raise TypeError(
                "create_checkpoint(thread, to_seq) or create_checkpoint(store, thread_id, to_seq)"
            )


@overload
def create_checkpoint(
    target: Thread,
    to_seq: int,
    /,
    *,
    text: str | None = None,
    summarizer: Summarizer | None = None,
    cut_rule_id: str = "manual_v1",
    produced_by: str | None = None,
) -> fr.CompactionCheckpointCreated: ...
@overload
def create_checkpoint(
    target: BaseStore,
    thread_id: str,
    to_seq: int,
    /,
    *,
    text: str | None = None,
    summarizer: Summarizer | None = None,
    cut_rule_id: str = "manual_v1",
    produced_by: str | None = None,
) -> fr.CompactionCheckpointCreated: ...
def create_checkpoint(
    target: BaseStore | Thread,
    /,
    *where: str | int,
    text: str | None = None,
    summarizer: Summarizer | None = None,
    cut_rule_id: str = "manual_v1",
    produced_by: str | None = None,
) -> fr.CompactionCheckpointCreated:
    """Build (or take) the cumulative summary through ``to_seq`` and append its checkpoint:
    ``create_checkpoint(thread, to_seq)`` with a thread handle, or
    ``create_checkpoint(store, thread_id, to_seq)``.

    With ``text`` the summary is given (by a person or an LLM outside); otherwise ``summarizer``
    builds it from the base summary and the messages after it. Returns the appended frame.
    """
    thread, to_seq = checkpoint_target(target, where)
    plan = plan_checkpoint(thread, to_seq, open_source(thread))
    if text is not None:
        content, by = SummaryContent(text=text), produced_by or "manual"
    else:
        chosen = default_summarizer(summarizer)
        content, by = chosen.summarize(plan.base, plan.messages), produced_by or chosen.id
    return commit_checkpoint(thread, plan, content, produced_by=by, cut_rule_id=cut_rule_id)


# --- a compaction job ---------------------------------------------------------------------------


class CompactionResult(msgspec.Struct):
    """How a compaction job went: its id, ``succeeded``, ``failed`` or ``nothing_to_do``, the
    checkpoints it made, the cuts it planned, and the error that stopped it."""

    job_id: str
    status: str
    checkpoints: list[fr.CompactionCheckpointCreated] = msgspec.field(default_factory=list)
    planned: list[int] = msgspec.field(default_factory=list)
    error: str | None = None


class CompactionJob:
    """One compaction job's steps, shared by :func:`run_compaction` and its async twin in
    :mod:`continuity.aio`; the caller holds the thread's job lock around all of them::

        cuts = job.start()                       # plan the cuts; job_spawned (none: no frames)
        for to_seq in cuts:
            plan = job.plan(to_seq)              # read the base and the messages
            content = summarize(plan)            # the summarizer (awaited, in the async face)
            job.commit(plan, content, summarizer.id)
        result = job.end()                       # job_ended; job.end(exc) when something raised

    Every step but the summarizer reads or writes the store, so the async face runs them in a
    worker thread; the order of the frames they append is the same either way.
    """

    def __init__(self, thread: Thread, rule: CutRule) -> None:
        self.thread = thread
        self.rule = rule
        self.result = CompactionResult("", "nothing_to_do")
        self._source: ThreadSource | None = None
        self._made: list[CheckpointEntry] = []

    @property
    def started(self) -> bool:
        """True once ``job_spawned`` is appended: from then on the job must :meth:`end`."""
        return bool(self.result.job_id)

    def start(self) -> list[int]:
        """Plan the cuts the rule calls for; when there are any, append ``job_spawned``. Returns
        the cuts (none: nothing to do, and nothing appended)."""
        self._source = open_source(self.thread)
        cuts = _plan_cuts(self._source, self.rule, _pair_memo(self.thread, self._source))
        if not cuts:
            return []
        job_id = fr.new_id()
        self.thread.append(
            fr.JobSpawned(
                job_id=job_id,
                kind="compaction",
                params={"cut_rule_id": self.rule.id, "cuts": cuts},
            )
        )
        self.result = CompactionResult(job_id, "succeeded", planned=cuts)
        return cuts

    def plan(self, to_seq: int) -> CheckpointPlan:
        """The plan step for one cut (it sees the checkpoints this job made before it)."""
        assert self._source is not None, "start() the job first"
        return plan_checkpoint(self.thread, to_seq, self._source, extra=self._made)

    def commit(
        self, plan: CheckpointPlan, content: SummaryContent, produced_by: str
    ) -> fr.CompactionCheckpointCreated:
        """The commit step for one cut: the summary artifact and its checkpoint frame."""
        frame = commit_checkpoint(
            self.thread, plan, content, produced_by=produced_by, cut_rule_id=self.rule.id
        )
        self.result.checkpoints.append(frame)
        self._made.append(CheckpointEntry.of(frame))
        return frame

    def end(self, exc: BaseException | None = None) -> CompactionResult:
        """Append ``job_ended`` and return the result: ``succeeded``; ``failed`` with the error
        when ``exc`` is an exception (the job's failure is data: logged, then reported);
        ``cancelled`` when it is an interruption (``KeyboardInterrupt``, a cancelled task), which
        the caller raises again. The checkpoints made before ``exc`` stay: each is whole."""
        if exc is not None:
            self.result.status = "failed" if isinstance(exc, Exception) else "cancelled"
            said = str(exc)
            self.result.error = f"{type(exc).__name__}: {said}" if said else type(exc).__name__
        status: Literal["succeeded", "failed", "cancelled"] = "succeeded"
        if self.result.status in ("failed", "cancelled"):
            status = "failed" if self.result.status == "failed" else "cancelled"
        self.thread.append(
            fr.JobEnded(
                job_id=self.result.job_id,
                status=status,
                error=self.result.error,
                result={"checkpoints": len(self.result.checkpoints)},
            )
        )
        return self.result


def compaction_target(
    target: BaseStore | Thread, where: tuple[object, ...]
) -> tuple[Thread, CutRule]:
    """``run_compaction``'s arguments, ``(thread, rule)`` or ``(store, thread_id, rule)``, as the
    resolved thread and the rule (:class:`ThreadNotFound` for a thread without frames)."""
    match target, where:
        case Thread(), (StrideMessages() | TokenThreshold() | ManualCut() as rule,):
            return resolve_thread(target), rule
        case BaseStore(), (
            str() as thread_id,
            StrideMessages() | TokenThreshold() | ManualCut() as rule,
        ):
            return resolve_thread(target, thread_id), rule
        case _:
            raise TypeError(
                "run_compaction(thread, rule) or run_compaction(store, thread_id, rule)"
            )


@overload
def run_compaction(
    target: Thread,
    rule: CutRule,
    /,
    *,
    summarizer: Summarizer | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> CompactionResult: ...
@overload
def run_compaction(
    target: BaseStore,
    thread_id: str,
    rule: CutRule,
    /,
    *,
    summarizer: Summarizer | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> CompactionResult: ...
def run_compaction(
    target: BaseStore | Thread,
    /,
    *where: str | CutRule,
    summarizer: Summarizer | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> CompactionResult:
    """Plan the cuts ``rule`` calls for and create their checkpoints as one logged job:
    ``run_compaction(thread, rule)`` with a thread handle, or
    ``run_compaction(store, thread_id, rule)``.

    Returns the outcome; a summarizer failure is logged (``job_ended`` with status ``failed``
    and the error) and reported in the result, with the checkpoints made before it kept. An
    interruption (``KeyboardInterrupt``) is logged as ``cancelled`` and raised again.
    Raises :class:`~continuity.errors.JobInFlight` if a job for the thread is running.
    """
    thread, rule = compaction_target(target, where)
    chosen = default_summarizer(summarizer)
    with thread.store.job_lock(thread.id, "compaction"):
        job = CompactionJob(thread, rule)
        try:
            cuts = job.start()
            for i, to_seq in enumerate(cuts):
                plan = job.plan(to_seq)
                job.commit(plan, chosen.summarize(plan.base, plan.messages), chosen.id)
                if progress is not None:
                    progress(i + 1, len(cuts))
        except BaseException as exc:  # an interruption is logged too, then raised again
            if not job.started:
                raise
            job.end(exc)
            if not isinstance(exc, Exception):
                raise
            return job.result
        return job.end() if job.started else job.result


def covered_tokens(source: ThreadSource) -> tuple[int, int]:
    """(tokens covered by the latest cumulative summary, tokens after it) — for reports."""
    head = source.head_seq()
    if head is None:
        return 0, 0
    total = source.message_count_upto(head)
    latest = _latest_cumulative(source.checkpoints())
    split = source.message_count_upto(latest.to_seq) if latest else 0
    tokens = source.message_tokens(0, total)
    return sum(tokens[:split]), sum(tokens[split:])
