"""The Agents SDK sessions: the whole log (``ContinuitySession``), or compiled history
(``CompiledSession``, a ``ContinuitySession`` that answers ``get_items()`` with a compile).

**ContinuitySession**: an OpenAI Agents SDK session whose history is a continuity thread.

The SDK's ``Session`` protocol is four coroutines over a list of Responses items; this class
keeps that list as a thread of the log (ADR 0024):

- ``add_items`` appends one ``message_appended`` frame per item, as one all-or-nothing batch;
  every item is converted and checked to render back exactly before anything is written, so a
  bad item raises :class:`~continuity.BadFrame` and leaves the thread as it was.
- ``get_items(limit)`` returns the live items, oldest first, each exactly as it was added;
  ``limit`` counts items and reads only the newest ones.
- ``pop_item`` and ``clear_session`` are retractions: a ``messages_retracted`` frame takes the
  items out of the conversation (and of every compile, summary and recall from then on), and the
  log keeps every byte; ``continuity log`` shows them ``[retracted]``.

All blocking work (the log's lock, fsync, reads, conversion) runs in the store's worker through
:class:`continuity.aio.AsyncStore`, so a session never blocks the event loop.

**CompiledSession**: an Agents SDK session that hands the runner compiled history.

The runner reads a session's history once per run (``get_items()``) and sends all of it to the
model; with a ``ContinuitySession`` that grows without
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

import asyncio
import threading
from collections.abc import Sequence
from os import PathLike
from typing import TYPE_CHECKING, Any, Final

import msgspec
from agents.memory.session_settings import (
    SessionSettings,
    coerce_session_settings,
    resolve_session_limit,
)

from continuity import aio, frames as fr
from continuity.aio import AsyncStore, AsyncThread
from continuity.context.compaction import CompactionResult, CutRule, ManualCut
from continuity.context.compiler import CompileResult
from continuity.context.render import to_openai_responses
from continuity.context.retract import clear_messages, live_messages, pop_message
from continuity.errors import JobInFlight
from continuity.integrations._openai_agents_items import frames_for_items, items_of
from continuity.store.base import BaseStore, Thread
from continuity.summary import AsyncSummarizer, Summarizer

if TYPE_CHECKING:
    from agents.items import TResponseInputItem

__all__ = ["DEFAULT_SESSION_LIMITS", "CompiledSession", "ContinuitySession", "StoreLike"]

StoreLike = BaseStore | AsyncStore | str | PathLike[str]
"""Where a session's thread lives: a store (``Store``, ``MemoryStore``, any backend), an
``AsyncStore`` around one, or a location: the path of a JSONL store folder or a ``postgresql://``
URL (created when missing)."""

POP_REASON: Final = "pop_item"
CLEAR_REASON: Final = "clear_session"
RENDERED_CACHE_BYTES: Final = 32 << 20
"""How many bytes of rendered items (as JSON) a session keeps between ``get_items`` calls."""

_encode = msgspec.json.Encoder().encode
_decode_items = msgspec.json.Decoder(list[Any]).decode


def _async_store(store: StoreLike) -> AsyncStore:
    if isinstance(store, AsyncStore):
        return store
    if isinstance(store, BaseStore):
        return AsyncStore(store)
    from continuity.store.locate import open_store

    return AsyncStore(open_store(store, create=True))


class ContinuitySession:
    """An Agents SDK ``Session`` kept in a continuity thread, item for item, losslessly.

    ``session_id`` names the session for the SDK and, unless ``thread_id`` says otherwise, the
    thread (a session id that is not a valid thread id raises ``InvalidThreadId``: pass a
    ``thread_id``). ``session_settings`` is the SDK's (its ``limit`` is the default of
    :meth:`get_items`). Sessions on one store object share its worker and its ordering; any
    number of sessions, processes or agents may use one thread, as with any thread.
    """

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        session_id: str,
        store: StoreLike,
        *,
        thread_id: str | None = None,
        session_settings: SessionSettings | dict[str, Any] | None = None,
    ) -> None:
        self.session_id = session_id
        self.store = _async_store(store)
        self.thread: AsyncThread = self.store.thread(session_id if thread_id is None else thread_id)
        self.session_settings = (
            coerce_session_settings(session_settings)
            if session_settings is not None
            else SessionSettings()
        )
        # Concurrent pops take distinct items by themselves (pop_message commits its retraction
        # only on the head it read, and reads again after a conflict), from any number of
        # processes. Within one session object the lock just queues them, so they do not keep
        # two workers busy re-reading the log for a conflict they would both see.
        self._mutating: asyncio.Lock | None = None
        # The items each stored message renders to, as JSON, by the frame's digest (a frame's
        # digest chains its whole prefix, so it names exactly one frame and its items never
        # change); read again, a message costs a lookup, not a render.
        self._rendered: dict[str, bytes] = {}
        self._rendered_bytes = 0
        self._rendered_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.session_id!r}, thread={self.thread.id!r})"

    # -- the Session protocol --------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The session's items, oldest first, each exactly as added: all of them, or the newest
        ``limit`` (default ``session_settings.limit``; a negative limit means all, as SQLite's
        ``LIMIT`` does for :class:`~agents.SQLiteSession`)."""
        return await self._raw_items(resolve_session_limit(limit, self.session_settings))

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append ``items`` as one batch, one frame each (all or nothing). Raises
        :class:`~continuity.BadFrame` naming ``items[i]`` when one is not a Responses item."""
        if not items:
            return
        frames = await self.store.run_blocking(
            frames_for_items, list(items), artifacts=self.thread.thread
        )
        await self.thread.append(frames)
        await self._after_add(len(frames))

    async def pop_item(self) -> TResponseInputItem | None:
        """Take back the newest item and return it (None when the session has none). A
        retraction: the log keeps the item, and says it was popped."""
        async with self._lock():
            return await self.store.run_blocking(self._pop)

    async def clear_session(self) -> None:
        """Take back every item of the session, in one retraction (the log keeps them all)."""
        async with self._lock():
            await self.store.run_blocking(clear_messages, self.thread.thread, reason=CLEAR_REASON)

    # -- for subclasses ----------------------------------------------------------------------

    async def _after_add(self, added: int) -> None:
        """Called after each successful ``add_items`` (the compiled session compacts here)."""

    async def _raw_items(self, limit: int | None) -> list[TResponseInputItem]:
        if limit is not None and limit < 0:
            limit = None
        if limit == 0:
            return []
        return await self.store.run_blocking(self._read, limit)

    # -- in the worker ----------------------------------------------------------------------

    def _read(self, limit: int | None) -> list[TResponseInputItem]:
        thread = self.thread.thread
        if not thread.exists():
            return []
        # a message this session wrote is one item; one another writer grouped may be several,
        # so `limit` messages hold at least `limit` items
        return self._items(live_messages(thread, limit=limit), limit)

    def _items(
        self, messages: Sequence[fr.MessageAppended], limit: int | None
    ) -> list[TResponseInputItem]:
        """The items of ``messages``, in order: each message's items rendered once (then kept,
        as JSON, by the frame's digest), and all of them decoded from one JSON array at the
        end, so the caller gets fresh objects without a copy per item."""
        artifacts = self.store.store.artifacts
        rendered = self._rendered
        parts: list[bytes] = []
        for m in messages:
            raw = rendered.get(m.digest) if m.digest else None
            if raw is None:
                raw = _encode(items_of(m, artifacts))[1:-1]
                if m.digest:
                    self._keep(m.digest, raw)
            if raw:
                parts.append(raw)
        out: list[Any] = _decode_items(b"[" + b",".join(parts) + b"]")
        return out if limit is None else out[-limit:]

    def _keep(self, digest: str, raw: bytes) -> None:
        with self._rendered_lock:
            if self._rendered_bytes + len(raw) <= RENDERED_CACHE_BYTES:
                self._rendered[digest] = raw
                self._rendered_bytes += len(raw)

    def _pop(self) -> TResponseInputItem | None:
        thread: Thread = self.thread.thread
        if not thread.exists():
            return None
        popped = pop_message(thread, reason=POP_REASON)
        if popped is None:
            return None
        items = self._items([popped], None)
        return items[-1] if items else None

    def _lock(self) -> asyncio.Lock:
        if self._mutating is None:
            self._mutating = asyncio.Lock()
        return self._mutating


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
        if not result.bundle.items:
            # nothing live (a new, cleared or popped-empty session): no history at all, never
            # a made-up turn for the renderer to start the window with
            return []
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
