"""The projection a store without caches keeps in the process: what compile reads, current.

A store that keeps no cache folder (the in-memory store; any backend whose log is not bytes)
would otherwise make every compile read the whole thread. :class:`LiveIndex` keeps, per thread
and process, the same projections the cache files hold — message seqs and token estimates, the
checkpoints (sorted for the halving rule's bisection), records and retractions — and brings them
up to date by decoding only the frames appended since, after checking that the thread still
holds the last frame it read (else it starts over). So a compile costs O(k) on such a store too.
"""

from __future__ import annotations

import _thread  # not threading: the hook path must not import it (see store.base)
import weakref
from bisect import bisect_right
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from continuity import frames as fr
from continuity.caches.marks import DerivedMarks, Marks
from continuity.caches.thread_index import CheckpointEntry, MarkEntry, ThreadIndex
from continuity.store.base import BaseStore, Thread
from continuity.summary import CUMULATIVE_V1

__all__ = ["LiveIndex", "marks_of"]


class LiveIndex:
    """One thread's projections, in memory; :meth:`of` gives the process's one."""

    def __init__(self, thread: Thread) -> None:
        self.thread = thread
        self.lock = _thread.RLock()
        self._reset()

    def _reset(self) -> None:
        self.count = 0
        """Frames read: seqs ``[0, count)``."""
        self.digest = ""
        self.message_seqs: list[int] = []
        self.message_tokens: list[int] = []
        self.checkpoints: list[CheckpointEntry] = []
        self.selection: list[tuple[int, int, int]] = []
        """(to_seq, seq, position in ``checkpoints``) of the cumulative ones, sorted."""
        self.other: list[CheckpointEntry] = []
        self.marks = Marks()

    @staticmethod
    def of(thread: Thread) -> LiveIndex:
        with _GUARD:
            per_store = _LIVE.setdefault(thread.store, {})
            live = per_store.get(thread.id)
            if live is None or live.thread.store is not thread.store:
                live = per_store[thread.id] = LiveIndex(thread)
            return live

    def refresh(self) -> LiveIndex:
        """Bring the projections up to the thread's head; return self."""
        with self.lock:
            head = self.thread.head()
            if head is None:
                self._reset()
                return self
            if self.count:
                last = self.count - 1
                if head.seq == last and head.digest == self.digest:
                    return self
                found = next(self.thread.read_lines(from_seq=last, to_seq=last), None)
                sealed = fr.unseal(found[1]) if found is not None else None
                if head.seq < last or sealed is None or sealed[1].hex() != self.digest:
                    self._reset()
            for seq, line in self.thread.read_lines(from_seq=self.count, to_seq=head.seq):
                self._apply(self.thread.decode(seq, line))
                self.count = seq + 1
                sealed = fr.unseal(line)
                self.digest = sealed[1].hex() if sealed is not None else ""
            return self

    def _apply(self, frame: fr.Frame) -> None:
        if isinstance(frame, fr.MessageAppended):
            self.message_seqs.append(frame.seq)
            self.message_tokens.append(frame.tokens)
        elif isinstance(frame, fr.CompactionCheckpointCreated):
            entry = CheckpointEntry.of(frame)
            self.checkpoints.append(entry)
            if entry.summary_kind == CUMULATIVE_V1:
                key = (entry.to_seq, entry.seq, len(self.checkpoints) - 1)
                if self.selection and key < self.selection[-1]:
                    self.selection.insert(bisect_right(self.selection, key), key)
                else:
                    self.selection.append(key)
            else:
                self.other.append(entry)
        else:
            mark = MarkEntry.of(frame)
            if mark is not None:
                self.marks.add([mark])

    def latest_checkpoint(
        self, max_to_seq: int, anchor_seq: int, exclude: frozenset[str] = frozenset()
    ) -> CheckpointEntry | None:
        """The halving rule's step by bisection (as ``CheckpointSelection.latest``)."""
        i = bisect_right(self.selection, (min(max_to_seq, anchor_seq), 1 << 62, 0)) - 1
        while i >= 0:
            _to, seq, pos = self.selection[i]
            i -= 1
            if seq > anchor_seq:
                continue
            entry = self.checkpoints[pos]
            if entry.checkpoint_id not in exclude:
                return entry
        return None


_LIVE: Final[weakref.WeakKeyDictionary[BaseStore, dict[str, LiveIndex]]] = (
    weakref.WeakKeyDictionary()
)
_GUARD: Final = _thread.allocate_lock()


# --- one Marks per thread and process, kept current ----------------------------------------


class _Kept:
    def __init__(self) -> None:
        self.lock = _thread.allocate_lock()
        self.marks = Marks()
        self.read_to = 0
        """Bytes of the marks file read (stores with caches) or the last seq read (without)."""
        self.last_line = b""


_KEPT: Final[weakref.WeakKeyDictionary[BaseStore, dict[str, _Kept]]] = weakref.WeakKeyDictionary()
_KEPT_GUARD: Final = _thread.allocate_lock()


def _kept(thread: Thread) -> _Kept:
    with _KEPT_GUARD:
        per_store = _KEPT.setdefault(thread.store, {})
        kept = per_store.get(thread.id)
        if kept is None:
            kept = per_store[thread.id] = _Kept()
        return kept


def marks_of(thread: Thread, *, use_caches: bool = True) -> Marks:
    """The thread's records and retractions, up to date with the log (or its caches: call
    ``ThreadIndex(thread).refresh()`` first for a store that keeps them, as compile does).

    Kept between calls in this process; each call reads only what was added since."""
    if not use_caches:
        return Marks(_scan(thread))
    if thread.store.cache_dir is None:
        derived = thread.derived()
        if derived is not None:  # the backend's rows: O(retractions), records when asked
            return DerivedMarks(derived, derived.state().head_seq)
    kept = _kept(thread)
    with kept.lock:
        if ThreadIndex.available(thread):
            _catch_up_cached(thread, kept)
        else:
            _catch_up_live(thread, kept)
        return kept.marks


def _scan(thread: Thread) -> Iterator[MarkEntry]:
    for seq, line in thread.read_lines():
        if b'"type":"record_appended"' in line[:40] or b'"type":"messages_retracted"' in line[:40]:
            entry = MarkEntry.of(thread.decode(seq, line))
            if entry is not None:
                yield entry


def _catch_up_cached(thread: Thread, kept: _Kept) -> None:
    index = ThreadIndex(thread)
    start = kept.read_to
    if start and not _same_line(index.dir / "marks.v1.jsonl", start, kept.last_line):
        start = 0  # the file was rebuilt from another log: read it again
    entries, size = index.marks(start)
    if size < start:
        entries, size = index.marks(0)
        start = 0
    if start == 0:
        kept.marks = Marks()
    if entries:
        kept.marks.add(entries)
        kept.last_line = _tail_line(index.dir / "marks.v1.jsonl", size)
    kept.read_to = size


def _tail_line(path: Path, size: int) -> bytes:
    with open(path, "rb") as f:
        start = max(0, size - 4096)
        f.seek(start)
        data = f.read(size - start)
    return data[data.rfind(b"\n", 0, len(data) - 1) + 1 :]


def _same_line(path: Path, end: int, line: bytes) -> bool:
    """Whether the bytes of ``path`` just before ``end`` are ``line``."""
    if not line or end < len(line):
        return False
    try:
        with open(path, "rb") as f:
            f.seek(end - len(line))
            return f.read(len(line)) == line
    except OSError:
        return False


def _catch_up_live(thread: Thread, kept: _Kept) -> None:
    kept.marks = LiveIndex.of(thread).refresh().marks
    kept.read_to, kept.last_line = 0, b""  # a small thread that grows reads its file afresh
