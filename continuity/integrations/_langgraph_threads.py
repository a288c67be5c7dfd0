"""Which continuity thread holds a LangGraph thread, and one lock per thread for this process's
writers: what the saver and its deletes and copies share (ADR 0023)."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from continuity import frames as fr
from continuity.errors import BadFrame
from continuity.integrations._langgraph_known import Known, OwnWrites
from continuity.integrations._langgraph_log import META_THREAD
from continuity.integrations._langgraph_mirror import LiveMirror
from continuity.integrations._langgraph_values import Bases
from continuity.integrations._thread_ids import safe_thread_id
from continuity.store.base import BaseStore, Thread

__all__ = ["WRITES_KEPT", "LangGraphThreads", "continuity_thread_id"]

WRITES_KEPT: Final = 1024
"""Threads whose writes a saver keeps in memory (:class:`~._langgraph_known.OwnWrites`)."""


def continuity_thread_id(thread_id: str) -> str:
    """The continuity thread a LangGraph ``thread_id`` maps to: the id itself when it is a
    valid continuity id, else ``lg-`` and a hash of it (the original is in frame 0)."""
    return safe_thread_id(thread_id, prefix="lg-")


class LangGraphThreads:
    """The LangGraph threads of a store: each one's continuity thread, made and checked on
    first use (frame 0 names the LangGraph thread), and a lock per thread, so that a saver's
    writers in one process take turns on it (other processes meet at the log's own lock)."""

    def __init__(self, store: BaseStore) -> None:
        self.store = store
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._ours: set[str] = set()
        self.closed = False
        """Set when the saver is closed: every call is refused from then on."""
        self.known: dict[str, Known] = {}
        """What this process's own writes tell it about each thread (:mod:`._langgraph_known`)."""
        self.own_writes: OrderedDict[str, OwnWrites] = OrderedDict()
        """The writes records this process appended to the :data:`WRITES_KEPT` threads it
        wrote to last (:mod:`._langgraph_known`); a thread dropped from it is ``forgotten``:
        its reads go to the log from then on."""
        self.forgotten: set[str] = set()
        self.unsynced: dict[str, Thread] = {}
        """Threads whose log holds writes appended without a sync of their own: the next put's
        sync (or a special write's, or :meth:`sync`) makes them durable (ADR 0065)."""
        self.bases = Bases()
        """The bases channel values are stored as deltas against (:mod:`._langgraph_values`)."""
        self.mirrors: dict[str, LiveMirror] = {}
        """What each mirror thread shows as of its position, kept between puts (a write
        holds its thread's lock while it reads and updates its entry)."""

    def check_open(self) -> None:
        if self.closed:
            raise RuntimeError("this ContinuitySaver is closed: open a new one on the store")

    def thread(self, thread_id: str) -> Thread:
        """The continuity thread of LangGraph thread ``thread_id`` (it need not exist yet)."""
        self.check_open()
        return self.store.thread(continuity_thread_id(thread_id))

    def lock(self, cid: str) -> threading.Lock:
        """The lock of continuity thread ``cid``, for this process's writers."""
        with self._guard:
            return self._locks.setdefault(cid, threading.Lock())

    def writes_of(self, cid: str) -> OwnWrites:
        """The writes this process appended to continuity thread ``cid`` (taken under the
        thread's lock)."""
        with self._guard:
            found = self.own_writes.get(cid)
            if found is not None:
                self.own_writes.move_to_end(cid)
                return found
            made = self.own_writes[cid] = OwnWrites(given_up=cid in self.forgotten)
            while len(self.own_writes) > WRITES_KEPT:
                old, _writes = self.own_writes.popitem(last=False)
                self.forgotten.add(old)  # its writes so far are no longer all known here
            return made

    def sync(self) -> None:
        """Make every log holding writes appended without a sync durable now."""
        with self._guard:
            pending, self.unsynced = list(self.unsynced.values()), {}
        for thread in pending:
            sync_log(thread)

    def ensure(self, thread: Thread, thread_id: str) -> None:
        """Create the thread (frame 0 names the LangGraph thread) or check that it is one."""
        if thread.id in self._ours:
            return
        if thread.head() is None:
            created = fr.ThreadCreated(thread_id=thread.id, meta={META_THREAD: thread_id})
            try:
                thread.append(created)
            except BadFrame:  # another process created it first: check it below
                if thread.head() is None:
                    raise
        first = next(iter(thread.read(to_seq=0)), None)
        if not (
            isinstance(first, fr.ThreadCreated)
            and first.meta.get(META_THREAD) == thread_id
            and first.fork_of is None
        ):
            raise ValueError(
                f"continuity thread {thread.id!r} exists and is not LangGraph thread "
                f"{thread_id!r}'s: use another thread_id or another store"
            )
        self._ours.add(thread.id)

    def each(self) -> Iterator[tuple[str, Thread]]:
        """Every LangGraph thread of the store, with its continuity thread (forks are not)."""
        self.check_open()
        for cid in self.store.threads():
            thread = self.store.thread(cid)
            first = next(iter(thread.read(to_seq=0)), None)
            if isinstance(first, fr.ThreadCreated) and first.fork_of is None:
                tid = first.meta.get(META_THREAD)
                if tid is not None:
                    yield tid, thread


def sync_log(thread: Thread) -> None:
    """Sync a folder store's log file (on PostgreSQL a later commit flushes the write-ahead
    log up to it; the memory store has nothing to sync)."""
    path = getattr(thread, "path", None)
    if not isinstance(path, Path):
        return
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:  # deleted meanwhile: nothing left to make durable
        return
    try:
        os.fdatasync(fd)
    finally:
        os.close(fd)
