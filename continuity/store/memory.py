"""The in-memory backend: the reference model of the store's behaviour.

It shares the batch rules and the line codec with every backend
(:func:`continuity.store.base.seal_batch`) and keeps its lines in lists: no files, no locks beyond a
mutex, no crash modes. Tests drive it side by side with the JSONL store and require the two to
agree frame for frame and digest for digest.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence

from continuity import frames as fr
from continuity.errors import ThreadDeleted, ThreadNotFound
from continuity.store.artifacts import MemoryArtifactStore
from continuity.store.base import (
    BaseStore,
    DeletionReport,
    Head,
    Thread,
    Tombstone,
    batch_of,
    check_sealed,
    deletion_facts,
    now_ms,
    seal_frames,
    validate_thread_id,
)

__all__ = ["MemoryStore", "MemoryThread"]


class MemoryThread(Thread):
    def __init__(self, store: MemoryStore, thread_id: str) -> None:
        super().__init__(thread_id)
        self._store = store

    @property
    def store(self) -> MemoryStore:
        return self._store

    @property
    def _lines(self) -> list[bytes]:
        return self._store._logs.setdefault(self.id, [])

    def append(
        self,
        frames: fr.Frame | Iterable[fr.Frame],
        *,
        expected_seq: int | None = None,
        durable: bool | None = None,
    ) -> range:
        batch = batch_of(frames)
        with self._store._lock:
            self._refuse_deleted()
            lines, head, given = seal_frames(
                self.id,
                batch,
                self._head(),
                now_ms=self._store.clock(),
                expected_seq=expected_seq,
                redact=self._store.redactor,
                put_artifact=self._store.artifacts.put,
            )
            self._lines.extend(line[:-1] for line in lines)
            self._store._heads[self.id] = head
        return given

    def append_sealed(self, lines: Sequence[bytes], *, durable: bool | None = None) -> range:
        with self._store._lock:
            self._refuse_deleted()
            head = self._head()
            new_head = check_sealed(self.id, lines, head)
            self._lines.extend(bytes(line) for line in lines)
            self._store._heads[self.id] = new_head
        return range(new_head.seq - len(lines) + 1, new_head.seq + 1)

    def _head(self) -> Head | None:
        return self._store._heads.get(self.id)

    def _refuse_deleted(self) -> None:
        if self._head() is None and any(t.thread_id == self.id for t in self._store._tombs):
            raise ThreadDeleted(f"thread {self.id!r} was deleted; it is not written again", self.id)

    def head(self) -> Head | None:
        with self._store._lock:
            return self._head()

    def read_lines(
        self, *, from_seq: int = 0, to_seq: int | None = None, start_offset: int | None = None
    ) -> Iterator[tuple[int, bytes]]:
        first = max(0, from_seq)
        with self._store._lock:  # a snapshot of the range only: O(frames read), not O(thread)
            log = self._store._logs.get(self.id, ())
            last = len(log) - 1 if to_seq is None else min(to_seq, len(log) - 1)
            lines = log[first : last + 1]
        for i, line in enumerate(lines):
            yield first + i, line

    def read_lines_backwards(self) -> Iterator[tuple[int, bytes]]:
        # Chunk by chunk from the end: a reader that stops after a few frames copies a few.
        with self._store._lock:
            end = len(self._store._logs.get(self.id, ()))
        step = 64
        while end > 0:
            start = max(0, end - step)
            with self._store._lock:
                chunk = self._store._logs.get(self.id, [])[start:end]
            for i in range(len(chunk) - 1, -1, -1):
                yield start + i, chunk[i]
            end = start
            step = min(step * 4, 1 << 16)


class MemoryStore(BaseStore):
    """Threads and artifacts in memory."""

    def __init__(
        self,
        *,
        clock: Callable[[], int] | None = None,
        redactor: Callable[[fr.Frame], fr.Frame] | None = None,
    ) -> None:
        self.clock = clock or now_ms
        self.redactor = redactor
        self._lock = threading.Lock()
        self._logs: dict[str, list[bytes]] = {}
        self._heads: dict[str, Head] = {}
        self._tombs: list[Tombstone] = []
        self.artifacts = MemoryArtifactStore()

    def thread(self, thread_id: str) -> MemoryThread:
        return MemoryThread(self, thread_id)

    def threads(self) -> list[str]:
        with self._lock:
            return sorted(t for t, lines in self._logs.items() if lines)

    def delete_thread(self, thread_id: str, *, reason: str = "delete") -> DeletionReport:
        validate_thread_id(thread_id)
        with self._lock:
            lines = self._logs.get(thread_id)
            if not lines:
                tomb = next((t for t in reversed(self._tombs) if t.thread_id == thread_id), None)
                if tomb is None:
                    raise ThreadNotFound(f"no thread {thread_id!r} in this store", thread_id)
                return DeletionReport(tombstone=tomb, artifacts=(), finished_earlier=True)
            n, size, refs, maybe = deletion_facts(lines)
            head = self._heads[thread_id]
            tomb = Tombstone(
                thread_id=thread_id,
                head_seq=head.seq,
                head_digest=head.digest,
                frames=n,
                bytes=size,
                reason=reason,
                time_ms=self.clock(),
            )
            self._tombs.append(tomb)
            del self._logs[thread_id], self._heads[thread_id]
        found = refs | {a for a in maybe if self.artifacts.exists(a)}
        return DeletionReport(tombstone=tomb, artifacts=tuple(sorted(found)))

    def tombstones(self) -> list[Tombstone]:
        with self._lock:
            return list(self._tombs)
