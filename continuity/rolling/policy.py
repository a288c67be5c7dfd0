"""The runtimes' context policy: compress before the request passes the hot threshold (ADR 0056).

A runtime calls :meth:`ContextPolicy.prepare` (or ``await`` :meth:`ContextPolicy.aprepare`)
for each request instead of ``compile_context``. The policy takes the context's size from the
provider's reported usage of the previous request when given, else from the token estimate (the
latest checkpoint's summary plus the raw messages after it). Past ``hot`` × the window it runs a
compaction job (logged, with the runtime's summarizer) up to the end of the newest cold segment
(:mod:`.segments`: finished, not mentioned for ``cold_turns`` turns), or, when no segment is cold
enough, up to the turn that leaves the newest ``hot / 2`` of the window raw: the hot window keeps
the active topic. Each compaction is recorded in the warm tier (:mod:`.warm`) with its ratio.
The compile then runs with the whole raw stretch as its window and a budget of ``limit`` × the
window, so a compiled request never exceeds the window.
"""

from __future__ import annotations

import inspect
from typing import Final

import msgspec

from continuity import frames as fr
from continuity.context.compaction import CompactionJob, ManualCut, default_summarizer
from continuity.context.compiler import CompileResult, compile_context
from continuity.context.sources import open_source
from continuity.rolling.settings import RollingSettings
from continuity.store.base import Thread
from continuity.summary import AsyncSummarizer, Summarizer

__all__ = ["ContextPolicy", "Prepared"]

_RAW_MESSAGES: Final = 100_000  # the raw window is bounded by the threshold, not a count


class Prepared(msgspec.Struct, frozen=True, kw_only=True):
    """What :meth:`ContextPolicy.prepare` did for one request."""

    result: CompileResult
    tokens_before: int
    """The context's size that was checked (reported, or estimated)."""
    compacted_to: int | None = None
    """The seq a compaction job summarized up to, when one ran."""


class ContextPolicy:
    """Keeps ``thread``'s compiled requests under ``limit`` × ``window`` tokens by compressing
    cold segments first. ``summarizer``: the runtime's (sync or async); the default is the
    extractive one."""

    def __init__(
        self,
        thread: Thread,
        *,
        window: int,
        summarizer: Summarizer | AsyncSummarizer | None = None,
        settings: RollingSettings | None = None,
        limit: float = 0.8,
    ) -> None:
        if window <= 0:
            raise ValueError("window must be > 0 tokens")
        self.thread = thread
        self.window = window
        self.summarizer = summarizer
        self.settings = settings or RollingSettings()
        self.limit = limit
        self._summary_tokens: dict[str, int] = {}
        self._seen = -1  # the last seq the estimate has taken in
        self._raw = 0
        self._after = -1
        self._summary_at = 0

    # -- the size of the next request --------------------------------------------------------

    def estimate(self) -> tuple[int, int]:
        """(estimated tokens of the next request, the seq its raw stretch starts after): the
        latest cumulative summary's tokens plus the raw messages' after it. Kept up to date
        from the frames appended since the last call (a read from the seq after them)."""
        if self._seen < 0:
            return self._estimate_whole()
        for f in self.thread.read(from_seq=self._seen + 1):
            self._seen = f.seq
            if isinstance(f, fr.MessageAppended):
                self._raw += f.tokens
            elif (
                isinstance(f, fr.CompactionCheckpointCreated)
                and f.summary_kind == "cumulative_v1"
                and f.to_seq >= self._after
            ):
                return self._estimate_whole()
        return self._raw + self._summary_at, self._after

    def _estimate_whole(self) -> tuple[int, int]:
        source = open_source(self.thread)
        head = source.head_seq()
        if head is None:
            return 0, -1
        cps = [c for c in source.checkpoints() if c.summary_kind == "cumulative_v1"]
        latest = max(cps, key=lambda c: (c.to_seq, c.seq)) if cps else None
        after = latest.to_seq if latest is not None else -1
        lo = source.message_count_upto(after) if after >= 0 else 0
        self._raw = sum(source.message_tokens(lo, source.message_count_upto(head)))
        self._summary_at = self._summary(latest.summary_artifact_id) if latest else 0
        self._after, self._seen = after, head
        return self._raw + self._summary_at, after

    def _summary(self, artifact_id: str) -> int:
        if artifact_id not in self._summary_tokens:
            from continuity.summary import decode_summary
            from continuity.tokens import estimate_text

            doc = decode_summary(self.thread.store.artifacts.get(artifact_id))
            self._summary_tokens[artifact_id] = estimate_text(doc.text)
        return self._summary_tokens[artifact_id]

    # -- where to cut ----------------------------------------------------------------------------

    def cut(self, after: int) -> int | None:
        """The seq to compress up to now, or None (nothing old enough after ``after``)."""
        from continuity.rolling.cache import thread_turns
        from continuity.rolling.queue import cold_segments
        from continuity.rolling.segments import segment_turns

        turns = [t for t in thread_turns(self.thread) if t.from_seq > after]
        if len(turns) < 2:
            return None
        keep = int(self.window * self.settings.hot / 2)
        cold = cold_segments(segment_turns(turns), self.settings)
        raw_after = {t.index: sum(u.tokens for u in turns if u.index > t.index) for t in turns}
        for seg in reversed(cold):  # the newest cold segment that frees enough
            if raw_after[seg.last_turn] <= keep:
                return seg.to_seq
        # no cold segment frees enough: the oldest turns go, the newest `keep` tokens stay
        for t in turns[:-1]:
            if raw_after[t.index] <= keep:
                return t.to_seq
        return turns[-2].to_seq

    # -- one request ---------------------------------------------------------------------------

    def _needs(self, reported: int | None) -> tuple[int, int, bool]:
        tokens, after = self.estimate()
        if reported is not None:
            tokens = max(tokens, reported)
        return tokens, after, tokens > self.settings.hot * self.window

    def _compile(self, tokens: int, compacted: int | None) -> Prepared:
        limits = fr.Limits(
            recent_messages=_RAW_MESSAGES, budget_tokens=int(self.limit * self.window)
        )
        result = compile_context(self.thread, limits=limits)
        return Prepared(result=result, tokens_before=tokens, compacted_to=compacted)

    def prepare(self, *, reported_tokens: int | None = None) -> Prepared:
        """Compress cold segments if the next request would pass the hot threshold, then
        compile it. ``reported_tokens``: the provider's count for the previous request."""
        tokens, after, over = self._needs(reported_tokens)
        at = self.cut(after) if over else None
        if at is not None:
            chosen = self.summarizer
            if chosen is not None and inspect.iscoroutinefunction(chosen.summarize):
                raise TypeError("an async summarizer: use `await policy.aprepare()`")
            sync = default_summarizer(chosen)  # type: ignore[arg-type]
            self._run(at, after, lambda p: (sync.summarize(p.base, p.messages), sync.id))
        return self._compile(tokens, at)

    async def aprepare(self, *, reported_tokens: int | None = None) -> Prepared:
        """:meth:`prepare` for an event loop: an async summarizer is awaited."""
        tokens, after, over = self._needs(reported_tokens)
        at = self.cut(after) if over else None
        if at is not None:
            chosen = self.summarizer or default_summarizer(None)
            job = CompactionJob(self.thread, ManualCut(at=at))
            with self.thread.store.job_lock(self.thread.id, "compaction"):
                try:
                    for to_seq in job.start():
                        plan = job.plan(to_seq)
                        made = chosen.summarize(plan.base, plan.messages)
                        content = await made if inspect.isawaitable(made) else made
                        job.commit(plan, content, chosen.id)
                except Exception as exc:
                    if job.started:
                        job.end(exc)
                    raise
                result = job.end() if job.started else job.result
            self._warm(result.checkpoints, after, chosen.id)
        return self._compile(tokens, at)

    def _run(self, at: int, after: int, summarize: object) -> None:
        job = CompactionJob(self.thread, ManualCut(at=at))
        with self.thread.store.job_lock(self.thread.id, "compaction"):
            try:
                for to_seq in job.start():
                    plan = job.plan(to_seq)
                    content, by = summarize(plan)  # type: ignore[operator]
                    job.commit(plan, content, by)
            except Exception as exc:
                if job.started:
                    job.end(exc)
                raise
            result = job.end() if job.started else job.result
        by = self.summarizer.id if self.summarizer is not None else "continuity"
        self._warm(result.checkpoints, after, by)

    def _warm(self, made: list[fr.CompactionCheckpointCreated], after: int, by: str) -> None:
        """Record each checkpoint's new stretch (after the previous one) in the warm tier."""
        from continuity.rolling.warm import record_compressed
        from continuity.summary import decode_summary

        for cp in made:
            doc = decode_summary(self.thread.store.artifacts.get(cp.summary_artifact_id))
            record_compressed(
                self.thread,
                from_seq=after + 1,
                to_seq=cp.to_seq,
                checkpoint_id=cp.checkpoint_id,
                text=doc.text,
                by=by,
            )
