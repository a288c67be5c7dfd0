"""``CompiledSession``: an Agents SDK session that hands the runner compiled history.

The runner reads a session's history once per run (``get_items()``) and sends all of it to the
model; with :class:`~continuity.integrations.openai_agents.ContinuitySession` that grows without
bound. This session keeps the same log, item for item, but answers ``get_items()`` with the
compiled context (ADR 0005 / 0006): up to three cumulative summaries by the halving rule, then
the recent window bounded by ``limits`` (a message count and a token budget; the latest user turn
and the tool exchange in flight always in it), rendered as Responses items. Compaction — the
summaries — runs after each ``add_items`` on the cut rule given (``TokenThreshold(t)``: whenever
the messages no summary covers exceed ``t`` tokens; ``StrideMessages(n)``: every ``n`` items),
with the summarizer given (a sync ``Summarizer`` in a worker, an ``AsyncSummarizer`` awaited).

``get_items(limit)`` with a limit is the raw tail, exactly as added: that is what the runner
reads when it rewinds a retried turn or settles a resumed write, comparing items it wrote with
the newest ones stored, before it pops them. ``pop_item`` retracts the newest raw item whatever
the summaries cover: a summary that covered it is passed over from then on, and the next
compaction summarises without it (ADR 0018).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agents.memory.session_settings import SessionSettings, resolve_session_limit

from continuity import aio, frames as fr
from continuity.context.compaction import CompactionResult, CutRule, ManualCut
from continuity.context.compiler import CompileResult
from continuity.context.render import to_openai_responses
from continuity.errors import JobInFlight
from continuity.integrations._openai_agents_session import ContinuitySession, StoreLike
from continuity.summary import AsyncSummarizer, Summarizer

if TYPE_CHECKING:
    from agents.items import TResponseInputItem

__all__ = ["DEFAULT_SESSION_LIMITS", "CompiledSession"]

DEFAULT_SESSION_LIMITS = fr.Limits(recent_messages=40, min_recent=8, budget_tokens=60_000)
"""The window a compiled session gives when no ``limits`` are passed: at most 40 recent items
within 60k estimated tokens (room for the instructions, the tools and the reply in a 128k
window), and at least 8 raw items right after a compaction, so the model still sees the last
exchange verbatim."""


class CompiledSession(ContinuitySession):
    """A session whose ``get_items()`` is the compiled history: summaries + a bounded window.

    ``limits`` bound the window (:data:`DEFAULT_SESSION_LIMITS` by default). ``compaction`` is
    the cut rule (``None``: no automatic compaction; call :meth:`compact`). ``summarizer`` writes
    the summaries (default: the deterministic extractive one). ``auto_compact=False`` leaves
    compaction to the caller (:meth:`compact`, e.g. in a background task, so an LLM summary never
    delays a turn). ``log_decisions`` logs each compile as a ``context_selection_decided`` frame
    (a repeat as a small ``context_selection_repeated``): what the model was given stays
    explainable. ``system_prefix`` goes first in the system message that carries the summaries.
    """

    def __init__(
        self,
        session_id: str,
        store: StoreLike,
        *,
        limits: fr.Limits | None = None,
        compaction: CutRule | None = None,
        summarizer: Summarizer | AsyncSummarizer | None = None,
        auto_compact: bool = True,
        log_decisions: bool = True,
        system_prefix: str | None = None,
        thread_id: str | None = None,
        session_settings: SessionSettings | dict[str, Any] | None = None,
    ) -> None:
        super().__init__(session_id, store, thread_id=thread_id, session_settings=session_settings)
        self.limits = DEFAULT_SESSION_LIMITS if limits is None else limits
        self.compaction = compaction
        self.summarizer = summarizer
        self.auto_compact = auto_compact
        self.log_decisions = log_decisions
        self.system_prefix = system_prefix
        self.last_compile: CompileResult | None = None
        """The latest compile ``get_items()`` made (its bundle, decision, and reasons)."""

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """Without a limit (and no ``session_settings.limit``): the compiled history as
        Responses input items — a system message with the summaries, when there are any, then
        the recent window. With a limit: the newest ``limit`` items exactly as added."""
        wanted = resolve_session_limit(limit, self.session_settings)
        if wanted is not None:
            return await self._raw_items(wanted)
        if not await self.thread.exists():
            return []
        result = await aio.compile_context(self.thread, limits=self.limits, log=self.log_decisions)
        self.last_compile = result
        rendered: list[Any] = await self.store.run_blocking(
            to_openai_responses,
            result.bundle,
            system_prefix=self.system_prefix,
            artifacts=self.store.store,
        )
        return rendered

    async def compact(self, *, force: bool = False) -> CompactionResult | None:
        """Run the cut rule now (a no-op when it calls for no cut; ``force``: cut at the newest
        item whatever the rule says). None when there is nothing to compact, or when another
        job on the thread is compacting it already."""
        rule: CutRule | None = self.compaction
        if force:
            head = await self.thread.head()
            rule = ManualCut(head.seq) if head is not None else None
        if rule is None or not await self.thread.exists():
            return None
        try:
            return await aio.run_compaction(self.thread, rule, summarizer=self.summarizer)
        except JobInFlight:
            return None  # the job under way covers what this one would

    async def _after_add(self, added: int) -> None:
        if self.auto_compact and self.compaction is not None:
            await self.compact()
