"""How compile and compaction read a thread: through the caches, or by a plain scan.

:class:`IndexedSource` answers from the JSONL store's caches in O(k) for k frames selected;
:class:`ScanSource` reads the whole thread once and works on any backend — it is the reference
the indexed path is tested against (the same answers, so the same bundles).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator
from typing import Final, Protocol

import numpy as np
import numpy.typing as npt

from continuity import frames as fr
from continuity.caches import CheckpointEntry, ThreadIndex
from continuity.store import BaseStore, Store

__all__ = ["IndexedSource", "ScanSource", "ThreadSource", "open_source"]

_NOT_ANCHORS: Final = frozenset({"context_selection_decided", "job_spawned", "job_ended"})

# --- what the compiler reads ----------------------------------------------------------------


class ThreadSource(Protocol):
    """The few reads a compile needs; served by the caches (O(k)) or by a scan (reference)."""

    def head_seq(self) -> int | None: ...

    def default_anchor(self) -> int | None: ...

    def checkpoints(self) -> list[CheckpointEntry]: ...

    def message_count_upto(self, seq: int) -> int:
        """How many messages have ``seq`` ≤ the given seq."""
        ...

    def message_seq(self, ordinal: int) -> int: ...

    def message_tokens(self, start: int, stop: int) -> npt.NDArray[np.int64]:
        """The token estimates of the messages with ordinals in ``[start, stop)``."""
        ...

    def frames(self, from_seq: int, to_seq: int) -> Iterator[fr.Frame]: ...

    def seq_of_message_id(self, message_id: str) -> int | None: ...


def _default_anchor_backwards(frames: Iterator[fr.Frame]) -> int | None:
    for frame in frames:
        if frame.__struct_config__.tag not in _NOT_ANCHORS:
            return frame.seq
    return None


class ScanSource:
    """Reads the whole thread once: any backend, no caches. The reference for the indexed one."""

    def __init__(self, store: BaseStore, thread_id: str) -> None:
        self._frames = list(store.existing_thread(thread_id).read())
        msgs = [f for f in self._frames if isinstance(f, fr.MessageAppended)]
        self._messages = [m.seq for m in msgs]
        self._tokens = np.array([m.tokens for m in msgs], dtype=np.int64)

    def head_seq(self) -> int | None:
        return self._frames[-1].seq if self._frames else None

    def default_anchor(self) -> int | None:
        return _default_anchor_backwards(reversed(self._frames))

    def checkpoints(self) -> list[CheckpointEntry]:
        return [
            CheckpointEntry(
                f.seq,
                f.to_seq,
                f.checkpoint_id,
                f.cut_rule_id,
                f.summary_kind,
                f.summary_artifact_id,
            )
            for f in self._frames
            if isinstance(f, fr.CompactionCheckpointCreated)
        ]

    def message_count_upto(self, seq: int) -> int:
        return bisect_right(self._messages, seq)

    def message_seq(self, ordinal: int) -> int:
        return self._messages[ordinal]

    def message_tokens(self, start: int, stop: int) -> npt.NDArray[np.int64]:
        return self._tokens[start:stop]

    def frames(self, from_seq: int, to_seq: int) -> Iterator[fr.Frame]:
        return iter(self._frames[from_seq : to_seq + 1])

    def seq_of_message_id(self, message_id: str) -> int | None:
        # The latest message with the id, as the indexed source finds it searching backwards.
        for f in reversed(self._frames):
            if isinstance(f, fr.MessageAppended) and f.message_id == message_id:
                return f.seq
        return None


class IndexedSource:
    """Reads through the JSONL store's caches: O(k) in what is selected."""

    def __init__(self, store: Store, thread_id: str) -> None:
        store.existing_thread(thread_id)
        self._index = ThreadIndex(store, thread_id)
        self._index.refresh()
        self._records = self._index.message_records()

    def head_seq(self) -> int | None:
        n = self._index.frame_count()
        return n - 1 if n else None

    def default_anchor(self) -> int | None:
        # Frames appended after the refresh are not in the index: the anchor stays within it.
        head = self.head_seq()
        if head is None:
            return None
        return _default_anchor_backwards(
            self._index.thread._decode(seq, line)
            for seq, line in self._index.thread._lines_backwards()
            if seq <= head
        )

    def checkpoints(self) -> list[CheckpointEntry]:
        return self._index.checkpoints()

    def message_count_upto(self, seq: int) -> int:
        rec = self._records
        lo, hi = 0, len(rec)
        while lo < hi:
            mid = (lo + hi) // 2
            if int(rec[mid]["seq"]) <= seq:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def message_seq(self, ordinal: int) -> int:
        return int(self._records[ordinal]["seq"])

    def message_tokens(self, start: int, stop: int) -> npt.NDArray[np.int64]:
        return np.asarray(self._records["tokens"][start:stop], dtype=np.int64)

    def frames(self, from_seq: int, to_seq: int) -> Iterator[fr.Frame]:
        return self._index.read(from_seq, to_seq)

    def seq_of_message_id(self, message_id: str) -> int | None:
        head = self.head_seq()
        if head is None:
            return None
        for seq, line in self._index.thread._lines_backwards():
            if seq > head:
                continue
            frame = self._index.thread._decode(seq, line)
            if isinstance(frame, fr.MessageAppended) and frame.message_id == message_id:
                return seq
        return None


def open_source(store: BaseStore, thread_id: str, *, use_caches: bool = True) -> ThreadSource:
    """The indexed source for a JSONL store (unless ``use_caches`` is false), else a scan."""
    if use_caches and isinstance(store, Store):
        return IndexedSource(store, thread_id)
    return ScanSource(store, thread_id)
