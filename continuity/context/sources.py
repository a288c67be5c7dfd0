"""How compile and compaction read a thread: through the caches, or by a plain scan.

:class:`IndexedSource` answers from the store's caches in O(k) for k frames selected;
:class:`ScanSource` reads the whole thread once and works on any backend — it is the reference
the indexed path is tested against (the same answers, so the same bundles). Both read a thread
handle the entry point resolved; neither looks the thread up again.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from typing import Final, Protocol

from continuity import frames as fr
from continuity.caches.live import LiveIndex, marks_of
from continuity.caches.marks import DerivedMarks, Marks
from continuity.caches.thread_index import ThreadIndex, caches_writable, keeps_none
from continuity.errors import CachesReadOnly, CorruptCache, note_rebuilt
from continuity.store.base import Thread
from continuity.store.derived import NOT_ANCHORS, CheckpointEntry, DerivedIndex, MarkEntry
from continuity.summary import CUMULATIVE_V1

__all__ = [
    "DerivedSource",
    "IndexedSource",
    "LiveSource",
    "ScanSource",
    "ThreadSource",
    "halving",
    "latest_checkpoint_in",
    "open_source",
]

_NOT_ANCHORS: Final = NOT_ANCHORS
"""Frames that cannot change a selection: the default anchor passes over them."""

# --- what the compiler reads ----------------------------------------------------------------


class ThreadSource(Protocol):
    """The few reads a compile needs; served by the caches (O(k)) or by a scan (reference)."""

    def head_seq(self) -> int | None: ...

    def default_anchor(self) -> int | None: ...

    def checkpoints(self) -> list[CheckpointEntry]:
        """Every checkpoint, in log order (O(checkpoints): planning, not compile)."""
        ...

    def latest_checkpoint(
        self, max_to_seq: int, anchor_seq: int, exclude: frozenset[str] = frozenset()
    ) -> CheckpointEntry | None:
        """The cumulative checkpoint at or before ``anchor_seq`` with the greatest
        ``to_seq <= max_to_seq`` (the later frame on a tie), skipping ``exclude``d ids."""
        ...

    def other_checkpoints(self, anchor_seq: int) -> list[CheckpointEntry]:
        """The checkpoints of other summary kinds the anchor can see, in log order."""
        ...

    def message_count_upto(self, seq: int) -> int:
        """How many messages have ``seq`` ≤ the given seq."""
        ...

    def message_seq(self, ordinal: int) -> int: ...

    def message_tokens(self, start: int, stop: int) -> list[int]:
        """The token estimates of the messages with ordinals in ``[start, stop)``."""
        ...

    def frames(self, from_seq: int, to_seq: int) -> Iterator[fr.Frame]: ...

    def seq_of_message_id(self, message_id: str) -> int | None: ...

    def marks(self) -> Marks:
        """The thread's records and retractions (as far as the source reads)."""
        ...


def latest_checkpoint_in(
    checkpoints: Sequence[CheckpointEntry],
    max_to_seq: int,
    anchor_seq: int,
    exclude: frozenset[str] = frozenset(),
) -> CheckpointEntry | None:
    """:meth:`ThreadSource.latest_checkpoint` over a list in log order (the reference)."""
    best: CheckpointEntry | None = None
    for c in checkpoints:
        if (
            c.seq <= anchor_seq
            and c.to_seq <= min(max_to_seq, anchor_seq)
            and c.summary_kind == CUMULATIVE_V1
            and c.checkpoint_id not in exclude
            and (best is None or c.to_seq >= best.to_seq)  # >=: the later frame wins a tie
        ):
            best = c
    return best


def halving(
    latest: Callable[[int], CheckpointEntry | None], anchor_seq: int, max_refs: int
) -> list[CheckpointEntry]:
    """The compile rule: the latest eligible checkpoint, then repeatedly the latest with
    ``to_seq <= floor(prev_to_seq / 2)`` (each at most once: to_seq 0 ends it), up to
    ``max_refs``; ascending by ``to_seq``. ``latest(x)`` answers "greatest to_seq <= x"."""
    selected: list[CheckpointEntry] = []
    current = latest(anchor_seq) if max_refs > 0 else None
    while current is not None:
        selected.append(current)
        if len(selected) >= max_refs or current.to_seq <= 0:
            break
        current = latest(current.to_seq // 2)
    selected.reverse()
    return selected


def _default_anchor_backwards(frames: Iterator[fr.Frame]) -> int | None:
    for frame in frames:
        if frame.__struct_config__.tag not in _NOT_ANCHORS:
            return frame.seq
    return None


class ScanSource:
    """Reads the whole thread once: any backend, no caches. The reference for the indexed one."""

    def __init__(self, thread: Thread) -> None:
        self._frames = list(thread.read())
        msgs = [f for f in self._frames if isinstance(f, fr.MessageAppended)]
        self._messages = [m.seq for m in msgs]
        self._tokens = [m.tokens for m in msgs]
        self._checkpoints = [
            CheckpointEntry.of(f)
            for f in self._frames
            if isinstance(f, fr.CompactionCheckpointCreated)
        ]
        self._marks = Marks(m for f in self._frames if (m := MarkEntry.of(f)) is not None)

    def marks(self) -> Marks:
        return self._marks

    def head_seq(self) -> int | None:
        return self._frames[-1].seq if self._frames else None

    def default_anchor(self) -> int | None:
        return _default_anchor_backwards(reversed(self._frames))

    def checkpoints(self) -> list[CheckpointEntry]:
        return list(self._checkpoints)

    def latest_checkpoint(
        self, max_to_seq: int, anchor_seq: int, exclude: frozenset[str] = frozenset()
    ) -> CheckpointEntry | None:
        return latest_checkpoint_in(self._checkpoints, max_to_seq, anchor_seq, exclude)

    def other_checkpoints(self, anchor_seq: int) -> list[CheckpointEntry]:
        return [
            c
            for c in self._checkpoints
            if c.summary_kind != CUMULATIVE_V1 and c.seq <= anchor_seq and c.to_seq <= anchor_seq
        ]

    def message_count_upto(self, seq: int) -> int:
        return bisect_right(self._messages, seq)

    def message_seq(self, ordinal: int) -> int:
        return self._messages[ordinal]

    def message_tokens(self, start: int, stop: int) -> list[int]:
        return self._tokens[max(0, start) : max(0, stop)]

    def frames(self, from_seq: int, to_seq: int) -> Iterator[fr.Frame]:
        return iter(self._frames[from_seq : to_seq + 1])

    def seq_of_message_id(self, message_id: str) -> int | None:
        # The latest message with the id, as the indexed source finds it searching backwards.
        for f in reversed(self._frames):
            if isinstance(f, fr.MessageAppended) and f.message_id == message_id:
                return f.seq
        return None


class _ReadsBackwards:
    """What a source bounded by its own head finds by reading the log from its end (frames
    appended after the source was opened are past that head and not looked at)."""

    _thread: Thread

    def head_seq(self) -> int | None:
        raise NotImplementedError

    def _backwards(self) -> Iterator[fr.Frame]:
        head = self.head_seq()
        if head is None:
            return
        for seq, line in self._thread.read_lines_backwards():
            if seq <= head:
                yield self._thread.decode(seq, line)

    def default_anchor(self) -> int | None:
        return _default_anchor_backwards(self._backwards())

    def seq_of_message_id(self, message_id: str) -> int | None:
        for frame in self._backwards():
            if isinstance(frame, fr.MessageAppended) and frame.message_id == message_id:
                return frame.seq
        return None


class IndexedSource(_ReadsBackwards):
    """Reads through the store's caches: O(k) in what is selected."""

    def __init__(self, thread: Thread) -> None:
        self._thread = thread
        self._index = ThreadIndex(thread)
        self._index.refresh()
        self._records = self._index.message_records()
        self._selection = self._index.selection()
        self._marks = marks_of(thread)

    def marks(self) -> Marks:
        return self._marks

    def head_seq(self) -> int | None:
        n = self._index.frame_count()
        return n - 1 if n else None

    def checkpoints(self) -> list[CheckpointEntry]:
        return self._index.checkpoints()

    def latest_checkpoint(
        self, max_to_seq: int, anchor_seq: int, exclude: frozenset[str] = frozenset()
    ) -> CheckpointEntry | None:
        return self._selection.latest(min(max_to_seq, anchor_seq), anchor_seq, exclude)

    def other_checkpoints(self, anchor_seq: int) -> list[CheckpointEntry]:
        return [
            c
            for c in self._index.other_checkpoints()
            if c.seq <= anchor_seq and c.to_seq <= anchor_seq
        ]

    def message_count_upto(self, seq: int) -> int:
        try:
            return self._records.count_upto(seq)
        except CorruptCache as exc:  # the records do not know their thread
            raise CorruptCache(self._thread.id, exc.reason) from None

    def message_seq(self, ordinal: int) -> int:
        return self._records.seq(ordinal)

    def message_tokens(self, start: int, stop: int) -> list[int]:
        return self._records.tokens(start, stop)

    def frames(self, from_seq: int, to_seq: int) -> Iterator[fr.Frame]:
        return self._index.read(from_seq, to_seq)


class LiveSource(_ReadsBackwards):
    """Reads a store that keeps no caches through the projection kept in the process
    (:class:`continuity.caches.live.LiveIndex`): O(k) in what is selected, like the indexed one."""

    def __init__(self, thread: Thread) -> None:
        self._thread = thread
        live = LiveIndex.of(thread)
        with live.lock:
            live.refresh()
            # A snapshot by length, not by copy (O(1)): the lists only grow at their end
            # (a thread that changed otherwise gets new lists), so reads bounded by these
            # lengths never see what is appended during the compile.
            self._count = live.count
            self._n = len(live.message_seqs)
            self._messages = live.message_seqs
            self._tokens = live.message_tokens
            self._checkpoints = live.checkpoints
            self._n_checkpoints = len(live.checkpoints)
            self._other = live.other[: len(live.other)]
            self._live = live
            self._marks = live.marks
            self._selection = list(live.selection)

    def head_seq(self) -> int | None:
        return self._count - 1 if self._count else None

    def checkpoints(self) -> list[CheckpointEntry]:
        return self._checkpoints[: self._n_checkpoints]

    def latest_checkpoint(
        self, max_to_seq: int, anchor_seq: int, exclude: frozenset[str] = frozenset()
    ) -> CheckpointEntry | None:
        i = bisect_right(self._selection, (min(max_to_seq, anchor_seq), 1 << 62, 0)) - 1
        while i >= 0:
            _to, seq, pos = self._selection[i]
            i -= 1
            if seq > anchor_seq:
                continue
            entry = self._checkpoints[pos]
            if entry.checkpoint_id not in exclude:
                return entry
        return None

    def other_checkpoints(self, anchor_seq: int) -> list[CheckpointEntry]:
        return [c for c in self._other if c.seq <= anchor_seq and c.to_seq <= anchor_seq]

    def message_count_upto(self, seq: int) -> int:
        return bisect_right(self._messages, seq, 0, self._n)

    def message_seq(self, ordinal: int) -> int:
        if not 0 <= ordinal < self._n:
            raise IndexError(ordinal)
        return self._messages[ordinal]

    def message_tokens(self, start: int, stop: int) -> list[int]:
        return self._tokens[max(0, start) : max(0, min(stop, self._n))]

    def frames(self, from_seq: int, to_seq: int) -> Iterator[fr.Frame]:
        to_seq = min(to_seq, self._count - 1)
        for seq, line in self._thread.read_lines(from_seq=from_seq, to_seq=to_seq):
            yield self._thread.decode(seq, line)

    def marks(self) -> Marks:
        return self._marks


class DerivedSource:
    """Reads through the derived rows a backend keeps current with its log
    (:meth:`Thread.derived`, ADR 0025): each read an indexed query, O(log n) or O(k), bounded
    by the head the source was opened at. Message ordinals are fetched a block at a time (a
    compile walks back from the newest), so a compile is a handful of round trips."""

    _BLOCK: Final = 64

    def __init__(self, thread: Thread, derived: DerivedIndex) -> None:
        self._thread = thread
        self._derived = derived
        state = derived.state()
        self._head = state.head_seq
        self._n = state.messages
        self._anchor = state.anchor_seq
        self._ordinals: dict[int, tuple[int, int]] = {}
        self._counts: dict[int, int] = {}
        self._frames: dict[int, fr.Frame] = {}
        self._marks: Marks | None = None

    def head_seq(self) -> int | None:
        return self._head if self._head >= 0 else None

    def default_anchor(self) -> int | None:
        return self._anchor if self._anchor >= 0 else None

    def marks(self) -> Marks:
        if self._marks is None:
            self._marks = DerivedMarks(self._derived, self._head)
        return self._marks

    def checkpoints(self) -> list[CheckpointEntry]:
        return self._derived.checkpoints(self._head)

    def latest_checkpoint(
        self, max_to_seq: int, anchor_seq: int, exclude: frozenset[str] = frozenset()
    ) -> CheckpointEntry | None:
        anchor_seq = min(anchor_seq, self._head)
        return self._derived.latest_checkpoint(min(max_to_seq, anchor_seq), anchor_seq, exclude)

    def other_checkpoints(self, anchor_seq: int) -> list[CheckpointEntry]:
        return self._derived.other_checkpoints(min(anchor_seq, self._head))

    def message_count_upto(self, seq: int) -> int:
        seq = min(seq, self._head)
        found = self._counts.get(seq)
        if found is None:
            found = self._counts[seq] = min(self._derived.count_upto(seq), self._n)
        return found

    def _fetch(self, start: int, stop: int) -> None:
        start, stop = max(0, start), min(stop, self._n)
        for i, row in enumerate(self._derived.messages(start, stop)):
            self._ordinals[start + i] = row

    def message_seq(self, ordinal: int) -> int:
        if not 0 <= ordinal < self._n:
            raise IndexError(ordinal)
        found = self._ordinals.get(ordinal)
        if found is None:
            self._fetch(ordinal - self._BLOCK + 1, ordinal + 1)
            found = self._ordinals[ordinal]
        return found[0]

    def message_tokens(self, start: int, stop: int) -> list[int]:
        start, stop = max(0, start), min(stop, self._n)
        if all(o in self._ordinals for o in range(start, stop)) if stop - start <= 256 else False:
            return [self._ordinals[o][1] for o in range(start, stop)]
        return [t for _seq, t in self._derived.messages(start, stop)]

    def frames(self, from_seq: int, to_seq: int) -> Iterator[fr.Frame]:
        to_seq = min(to_seq, self._head)
        if from_seq == to_seq and from_seq in self._frames:
            yield self._frames[from_seq]
            return
        for seq, line in self._thread.read_lines(from_seq=from_seq, to_seq=to_seq):
            frame = self._thread.decode(seq, line)
            if from_seq == to_seq:
                self._frames[seq] = frame
            yield frame

    def seq_of_message_id(self, message_id: str) -> int | None:
        return self._derived.seq_of_message_id(message_id, self._head)


def _check_length(thread: Thread) -> None:
    # imported here: the catalog (and the redaction rules it counts with) is not what a compile
    # of a thread with caches needs to load
    from continuity.caches.catalog import check_length

    check_length(thread)


def open_source(thread: Thread, *, use_caches: bool = True) -> ThreadSource:
    """The indexed source when the thread's store keeps caches (and ``use_caches``); for a
    store that keeps its derived data as rows (a server), those rows; for a store with neither,
    and for a small thread that keeps no caches (ADR 0031), the projection kept in the process;
    with ``use_caches=False``, a scan of the log (the reference)."""
    if not use_caches:
        return ScanSource(thread)
    if ThreadIndex.available(thread):
        if ThreadIndex(thread).manifest() is None:
            _check_length(thread)  # caches about to be made: the catalog knew how far it went
        try:
            return IndexedSource(thread)
        except CachesReadOnly:
            return ScanSource(thread)  # no room to bring the caches up to date: as read-only
        except CorruptCache as exc:
            # The caches are derived: rebuilt from the log, they are read again (the log itself
            # is never guessed); where this process cannot write them, the log is scanned.
            # Every reader that opens a source gets this, not only compile.
            cache_dir = thread.store.cache_dir
            where = f"the caches of thread {thread.id!r}"
            if cache_dir is None or not caches_writable(cache_dir):
                note_rebuilt(where, exc.reason, "read from the log")
                return ScanSource(thread)
            note_rebuilt(where, exc.reason)
            ThreadIndex(thread).rebuild()
            return IndexedSource(thread)
    if thread.store.cache_dir is None:
        derived = thread.derived()
        if derived is not None:
            return DerivedSource(thread, derived)
        return LiveSource(thread)
    if keeps_none(thread):
        # A small thread keeps no caches: its catalog row says how far its log went (a log cut
        # short since is an error, as it is for a thread with caches: never a shorter answer).
        _check_length(thread)
        return LiveSource(thread)
    return ScanSource(thread)
