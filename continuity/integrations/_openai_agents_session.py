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
import contextlib
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from os import PathLike
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final

import msgspec
from agents.memory.session_settings import (
    SessionSettings,
    coerce_session_settings,
    resolve_session_limit,
)

from continuity import aio, frames as fr
from continuity.aio import AsyncStore, AsyncThread
from continuity.caches.marks import merge_spans
from continuity.context.compaction import CompactionResult, CutRule, ManualCut
from continuity.context.compiler import CompileResult
from continuity.context.retract import clear_messages, live_messages, pop_message
from continuity.errors import BadFrame, JobInFlight, SeqConflict
from continuity.integrations._openai_agents_items import (
    compiled_items,
    frames_for_items,
    items_of,
)
from continuity.integrations._thread_ids import safe_thread_id
from continuity.store.base import BaseStore, Head, Thread

if TYPE_CHECKING:
    from typing import Self

    from agents.items import TResponseInputItem

    from continuity.summary import AsyncSummarizer, Summarizer

__all__ = [
    "DEFAULT_SESSION_LIMITS",
    "META_SESSION_ID",
    "SOURCE",
    "CompactionSnapshot",
    "CompiledSession",
    "ContinuitySession",
    "StoreLike",
]

StoreLike = BaseStore | AsyncStore | str | PathLike[str]
"""Where a session's thread lives: a store (``Store``, ``MemoryStore``, any backend), an
``AsyncStore`` around one, or a location: the path of a JSONL store folder or a ``postgresql://``
URL (created when missing; the session opened it, so :meth:`ContinuitySession.close` closes
it)."""

POP_REASON: Final = "pop_item"
CLEAR_REASON: Final = "clear_session"
COMPACT_REASON: Final = "responses.compact"
"""The reason of the retraction that swaps a compacted suffix in (the SDK's compaction)."""
RENDERED_CACHE_BYTES: Final = 64 << 20
"""How many bytes of rendered items (as JSON) the sessions of a process keep between
``get_items`` calls, all threads together (the least recently read go first)."""
SOURCE: Final = "openai-agents"
"""``meta["source"]`` of a session's first frame (``continuity threads`` shows it as its kind)."""
META_SESSION_ID: Final = "openai_agents.session_id"
"""``meta`` of a session's first frame: the session id (its title too), whatever the thread id."""
THREAD_PREFIX: Final = "oa-"
"""The thread id of a session id that is not a valid thread id: this and a hash of it."""

_encode = msgspec.json.Encoder().encode
_decode_items = msgspec.json.Decoder(list[Any]).decode


def _async_store(store: StoreLike) -> tuple[AsyncStore, bool]:
    """The store, and whether the session opened it (and so closes it)."""
    if isinstance(store, AsyncStore):
        return store, False
    if isinstance(store, BaseStore):
        return AsyncStore(store), False
    from continuity.store.locate import open_store

    return AsyncStore(open_store(store, create=True)), True


@dataclass(frozen=True)
class CompactionSnapshot:
    """The newest live items of a session and how to swap a suffix of them for others in one
    commit: the shape of the Agents SDK's compaction snapshot (``items``, ``complete``,
    ``replace_suffix(start, items) -> bool``), which ``OpenAIResponsesCompactionSession`` asks
    a session for through ``_get_compaction_snapshot``."""

    items: list[TResponseInputItem]
    complete: bool
    """Whether ``items`` are all the live items (no older one exists)."""
    replace_suffix: Callable[[int, list[TResponseInputItem]], Awaitable[bool]]


class _View:
    """The live messages as last read: each one's seq and rendered items (JSON, no brackets),
    up to the frame ``head_seq`` (whose digest is ``head_digest``)."""

    __slots__ = ("head_digest", "head_seq", "parts", "seqs", "size")

    def __init__(self, head: Head | fr.Frame, seqs: list[int], parts: list[bytes]) -> None:
        self.head_seq = head.seq
        self.head_digest = head.digest
        self.seqs = seqs
        self.parts = parts
        self.size = sum(map(len, parts))


class _Views:
    """The views of the process, by thread id, least recently used first. Shared by every
    session object (a new one reads only what was appended since any of them last read): a
    view is used only where the thread's frame at its head has its digest, which chains the
    whole log before it, so a view of another log under the same id is never used."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._views: OrderedDict[str, _View] = OrderedDict()
        self._size = 0

    def get(self, thread_id: str) -> _View | None:
        with self._lock:
            view = self._views.get(thread_id)
            if view is not None:
                self._views.move_to_end(thread_id)
            return view

    def put(self, thread_id: str, view: _View | None) -> None:
        with self._lock:
            old = self._views.pop(thread_id, None)
            self._size -= old.size if old is not None else 0
            if view is None or view.size > RENDERED_CACHE_BYTES:
                return
            self._views[thread_id] = view
            self._size += view.size
            while self._size > RENDERED_CACHE_BYTES:
                _, dropped = self._views.popitem(last=False)
                self._size -= dropped.size


_VIEWS: Final = _Views()


class ContinuitySession:
    """An Agents SDK ``Session`` kept in a continuity thread, item for item, losslessly.

    ``session_id`` names the session for the SDK and, unless ``thread_id`` says otherwise, the
    thread: the id itself when it is a valid thread id, else ``oa-`` and a hash of it (any
    string works: ``"user/42"``, ``"conv 1"``, ``"é"``, a long one). A new thread's first frame
    names the session (its title, and ``meta["openai_agents.session_id"]``), so ``continuity
    threads`` shows it; a hashed thread that names another session is a clear error.
    ``session_settings`` is the SDK's (its ``limit`` is the default of :meth:`get_items`).
    Sessions on one store object share its worker and its ordering; any number of sessions,
    processes or agents may use one thread, as with any thread.

    :meth:`close` (or ``async with``) closes the store when the session opened it (a path or a
    URL), never a store it was given.
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
        self.store, self._owns_store = _async_store(store)
        tid = safe_thread_id(session_id, prefix=THREAD_PREFIX) if thread_id is None else thread_id
        self.thread: AsyncThread = self.store.thread(tid)
        self._hashed = thread_id is None and tid != session_id
        self._named = False  # the thread's first frame is known to be this session's (or fine)
        self.session_settings = (
            coerce_session_settings(session_settings)
            if session_settings is not None
            else SessionSettings()
        )
        self.closed = False
        # Concurrent pops take distinct items by themselves (pop_message commits its retraction
        # only on the head it read, and reads again after a conflict), from any number of
        # processes. Within one session object the lock just queues them, so they do not keep
        # two workers busy re-reading the log for a conflict they would both see.
        self._mutating: asyncio.Lock | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.session_id!r}, thread={self.thread.id!r})"

    # -- lifecycle -------------------------------------------------------------------------

    async def close(self) -> None:
        """Close the session: the store too when the session opened it from a path or URL.
        Closing again does nothing; any other call afterwards raises ``RuntimeError``."""
        if self.closed:
            return
        self.closed = True
        if self._owns_store:
            await self.store.run_in_worker(self.store.store.close, must_finish=True)

    async def __aenter__(self) -> Self:
        self._check_open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def _check_open(self) -> None:
        if self.closed:
            raise RuntimeError(f"{self!r} is closed")

    # -- the Session protocol --------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The session's items, oldest first, each exactly as added: all of them, or the newest
        ``limit`` (default ``session_settings.limit``; a negative limit means all, as SQLite's
        ``LIMIT`` does for :class:`~agents.SQLiteSession`)."""
        self._check_open()
        return await self._raw_items(resolve_session_limit(limit, self.session_settings))

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append ``items`` as one batch, one frame each (all or nothing). Raises
        :class:`~continuity.BadFrame` naming ``items[i]`` when one is not a Responses item."""
        self._check_open()
        if not items:
            return
        frames = await self.store.run_blocking(self._prepare, list(items))
        await self.thread.append(frames)
        await self._after_add(len(frames))

    async def pop_item(self) -> TResponseInputItem | None:
        """Take back the newest item and return it (None when the session has none). A
        retraction: the log keeps the item, and says it was popped."""
        self._check_open()
        async with self._lock():
            return await self.store.run_blocking(self._pop)

    async def clear_session(self) -> None:
        """Take back every item of the session, in one retraction (the log keeps them all)."""
        self._check_open()
        async with self._lock():
            await self.store.run_blocking(self._clear)

    # -- the SDK's compaction hooks (OpenAIResponsesCompactionSession) ---------------------

    async def _get_compaction_snapshot(
        self, limit: int, *, prune_prefix: Callable[[TResponseInputItem], bool] | None = None
    ) -> CompactionSnapshot | None:
        """The newest live items (about ``limit``: whole messages) and a ``replace_suffix``
        that swaps ``items[start:]`` for the compacted items in one batch: a retraction of the
        replaced messages and the new items, committed only if those messages are still the
        newest live ones (else False, nothing written). ``prune_prefix`` (the SDK's
        ``EncryptedSession`` passes it) names items that may go too: the oldest live messages
        whose items it accepts, up to the first it does not, are retracted in the same batch."""
        self._check_open()
        read = await self.store.run_blocking(self._snapshot, limit)
        if read is None:
            return None
        messages, items, owners, complete = read

        async def replace_suffix(start: int, output: list[TResponseInputItem]) -> bool:
            self._check_open()
            if not 0 <= start < len(items) or (start and owners[start - 1] == owners[start]):
                return False  # nothing to replace, or half of a message another writer grouped
            expected = [(m.seq, m.digest) for m in messages[owners[start] :]]
            async with self._lock():
                return await self.store.run_blocking(
                    self._replace, expected, list(output), prune_prefix
                )

        return CompactionSnapshot(items, complete, replace_suffix)

    async def _atomic_replace_items(self, items: list[TResponseInputItem]) -> bool:
        """Swap the whole history for ``items`` in one batch (the SDK's manual compaction)."""
        self._check_open()
        async with self._lock():
            return await self.store.run_blocking(self._replace, None, list(items), None)

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

    def _name(self, thread: Thread, *, create: bool) -> None:
        """Make the thread's first frame name this session (``create``, for a new thread),
        and check that a hashed thread is this session's."""
        if self._named:
            return
        first = next(iter(thread.read(to_seq=0)), None)
        if first is None and create:
            meta = {"source": SOURCE, META_SESSION_ID: self.session_id}
            created = fr.ThreadCreated(thread_id=thread.id, title=self.session_id, meta=meta)
            with contextlib.suppress(BadFrame):  # another writer created it first: checked below
                thread.append(created)
            first = next(iter(thread.read(to_seq=0)), None)
        if first is None:
            return
        if self._hashed and not (
            isinstance(first, fr.ThreadCreated)
            and first.meta.get(META_SESSION_ID) == self.session_id
        ):
            raise ValueError(
                f"continuity thread {thread.id!r} exists and is not Agents SDK session "
                f"{self.session_id!r}'s: pass a thread_id, or use another store"
            )
        self._named = True

    def _prepare(self, items: list[Any]) -> list[fr.MessageAppended]:
        frames = frames_for_items(items, artifacts=self.thread.thread)
        self._name(self.thread.thread, create=True)
        return frames

    def _read(self, limit: int | None) -> list[TResponseInputItem]:
        thread = self.thread.thread
        head = thread.head()
        if head is None:
            return []
        if self._hashed and not self._named:
            self._name(thread, create=False)
        view = self._current(thread, head, whole=limit is None)
        if view is None:  # a tail of a session not read whole yet: read only the tail
            # a message this session wrote is one item; one another writer grouped may be
            # several, so `limit` messages hold at least `limit` items
            parts = [self._render(m) for m in live_messages(thread, limit=limit)]
        else:
            parts = view.parts if limit is None else view.parts[-limit:]
        out: list[Any] = _decode_items(b"[" + b",".join(p for p in parts if p) + b"]")
        return out if limit is None else out[-limit:]

    def _current(self, thread: Thread, head: Head, *, whole: bool) -> _View | None:
        """The view brought up to ``head`` (None when there is none and ``whole`` is False)."""
        view = _VIEWS.get(thread.id)
        if view is not None and (view.head_seq, view.head_digest) == (head.seq, head.digest):
            return view
        fresh = self._caught_up(thread, view) if view is not None else None
        if fresh is None:
            if not whole:
                return None
            messages = [m for m in live_messages(thread) if m.seq <= head.seq]
            fresh = _View(head, [m.seq for m in messages], [self._render(m) for m in messages])
        _VIEWS.put(thread.id, fresh)
        return fresh

    def _caught_up(self, thread: Thread, view: _View) -> _View | None:
        """``view`` with what was appended since it was read (None: not the same log)."""
        frames = iter(thread.read(from_seq=view.head_seq))
        last = next(frames, None)
        if last is None or last.digest != view.head_digest:
            return None
        seqs, parts = list(view.seqs), list(view.parts)
        for frame in frames:
            if isinstance(frame, fr.MessageAppended):
                seqs.append(frame.seq)
                parts.append(self._render(frame))
            elif isinstance(frame, fr.MessagesRetracted):
                gone = merge_spans((s.from_seq, s.to_seq) for s in frame.spans)
                keep = [i for i, s in enumerate(seqs) if not any(a <= s <= b for a, b in gone)]
                seqs, parts = [seqs[i] for i in keep], [parts[i] for i in keep]
            last = frame
        return _View(last, seqs, parts)

    def _render(self, message: fr.MessageAppended) -> bytes:
        """The message's items as JSON, without the brackets (empty: none)."""
        return _encode(items_of(message, self.store.store.artifacts))[1:-1]

    def _items(self, messages: Sequence[fr.MessageAppended]) -> list[TResponseInputItem]:
        parts = [p for p in map(self._render, messages) if p]
        out: list[Any] = _decode_items(b"[" + b",".join(parts) + b"]")
        return out

    def _pop(self) -> TResponseInputItem | None:
        thread: Thread = self.thread.thread
        if not thread.exists():
            return None
        popped = pop_message(thread, reason=POP_REASON)
        if popped is None:
            return None
        items = self._items([popped])
        return items[-1] if items else None

    def _clear(self) -> None:
        if self.thread.thread.exists():
            clear_messages(self.thread.thread, reason=CLEAR_REASON)

    def _snapshot(
        self, limit: int
    ) -> tuple[list[fr.MessageAppended], list[Any], list[int], bool] | None:
        thread = self.thread.thread
        if limit <= 0 or not thread.exists():
            return None
        if self._hashed and not self._named:
            self._name(thread, create=False)
        messages = live_messages(thread, limit=limit + 1)
        complete = len(messages) <= limit
        messages = messages[-limit:]
        items: list[Any] = []
        owners: list[int] = []
        for i, m in enumerate(messages):
            got = self._items([m])
            items += got
            owners += [i] * len(got)
        return messages, items, owners, complete

    def _replace(
        self,
        expected: list[tuple[int, str]] | None,
        output: list[Any],
        prune_prefix: Callable[[Any], bool] | None,
    ) -> bool:
        """Retract the messages ``expected`` (seq, digest) — all live ones when None — and
        append ``output`` after them, in one batch that commits only on the head read; False
        when the newest live messages are no longer ``expected``."""
        thread = self.thread.thread
        frames = frames_for_items(output, artifacts=thread) if output else []
        if frames or expected is None:
            self._name(thread, create=True)
        while True:
            last = thread.head()
            if last is None:
                return False
            head = last.seq
            if expected is None:
                seqs = [m.seq for m in live_messages(thread) if m.seq <= head]
            else:
                newest = live_messages(thread, limit=len(expected))
                if [(m.seq, m.digest) for m in newest] != expected:
                    return False
                seqs = [s for s, _ in expected]
                if prune_prefix is not None:
                    seqs += self._expired(thread, seqs[0], prune_prefix)
            batch: list[fr.Frame] = []
            if seqs:
                spans = [
                    fr.SeqSpan(from_seq=a, to_seq=b) for a, b in merge_spans((s, s) for s in seqs)
                ]
                batch.append(fr.MessagesRetracted(spans=spans, reason=COMPACT_REASON))
            try:
                if batch or frames:
                    thread.append([*batch, *frames], expected_seq=head + 1)
                return True
            except SeqConflict:
                continue  # another writer appended: decide again on the log as it is now

    def _expired(self, thread: Thread, before: int, prune: Callable[[Any], bool]) -> list[int]:
        """The oldest live messages before seq ``before`` whose items ``prune`` all accepts, up
        to the first it does not."""
        out: list[int] = []
        for m in live_messages(thread):
            if m.seq >= before:
                break
            items = self._items([m])
            if not items or not all(prune(i) for i in items):
                break
            out.append(m.seq)
        return out

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
        self._check_open()
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
            compiled_items,
            result.bundle,
            self.store.store.artifacts,
            system_prefix=self.system_prefix,
        )
        return rendered

    async def compact(self, *, force: bool = False) -> CompactionResult | None:
        """Run the cut rule now (a no-op when it calls for no cut; ``force``: cut at the newest
        item whatever the rule says). None when there is nothing to compact, or when another
        job on the thread is compacting it already."""
        self._check_open()
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
