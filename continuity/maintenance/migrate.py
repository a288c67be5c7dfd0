"""Copy a store into another — any backend to any backend — keeping every byte of every log.

``continuity migrate SRC DST`` (and :func:`migrate_store`) moves a store: a laptop's JSONL store to
the team's PostgreSQL, or back. Each thread's stored lines are copied as they are
(:meth:`~continuity.store.base.Thread.append_sealed`), so the destination's log is the source's
byte for byte and ``verify`` means the same on both; every line is checked against the chain
on its way in, a whole batch at a time. Artifacts go first (a frame never names one the
destination lacks), each read back through its hash in the source and stored under the same id.

Idempotent and resumable: a thread already in the destination is checked to be a prefix of the
source's (its head's digest is the source's digest at that seq, and the chain pins everything
before it) and only what follows is copied; one that differs is a
:class:`~continuity.errors.MigrationConflict`, and nothing of it is written. A copy cut short
(a crash, a lost connection) holds whole batches only; running it again goes on from there.
Caches are the destination's own business: they are rebuilt from the copied log as usual.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Final

import msgspec

from continuity import frames as fr
from continuity.errors import CorruptFrame, MigrationConflict
from continuity.store.base import BaseStore, Head, Thread

__all__ = ["MigrationReport", "ThreadCopy", "migrate_store"]

_CHUNK_LINES: Final = 10_000
_CHUNK_BYTES: Final = 32 << 20
"""A chunk is written once it reaches either (then at the end of the batch it is in)."""


class ThreadCopy(msgspec.Struct, frozen=True):
    """What :func:`migrate` did with one thread."""

    thread_id: str
    frames: int
    """Frames in the source (its head seq + 1)."""
    copied: int
    """Frames written to the destination by this run (0: it had them all)."""
    head_digest: str
    """The digest of the last frame, the same in both stores now."""


class MigrationReport(msgspec.Struct, frozen=True):
    threads: list[ThreadCopy]
    artifacts_copied: int
    artifacts_present: int

    @property
    def frames_copied(self) -> int:
        return sum(t.copied for t in self.threads)


def migrate_store(
    source: BaseStore,
    target: BaseStore,
    *,
    threads: Iterable[str] | None = None,
    on_progress: Callable[[str], None] | None = None,
) -> MigrationReport:
    """Copy every artifact and every thread (or the ``threads`` named) of ``source`` into
    ``target``, checking each line; return what was copied. Raises
    :class:`~continuity.errors.MigrationConflict` for a thread whose destination log is not a
    prefix of the source's (before writing anything of that thread), and
    :class:`~continuity.errors.CorruptFrame` for a damaged source line."""
    say = on_progress or (lambda _text: None)
    copied = present = 0
    for aid in source.artifacts.ids():
        if target.artifacts.exists(aid):
            present += 1
            continue
        stored = target.artifacts.put(source.artifacts.get(aid))  # get checks the hash
        if stored != aid:  # a backend that addresses content another way would lose it
            raise MigrationConflict(f"artifact {aid} was stored as {stored} in the destination")
        copied += 1
    if copied or present:
        say(f"artifacts: {copied} copied, {present} already there")
    ids = source.threads() if threads is None else list(threads)
    done: list[ThreadCopy] = []
    for n, thread_id in enumerate(ids, 1):
        result = _copy_thread(source.existing_thread(thread_id), target.thread(thread_id))
        done.append(result)
        say(
            f"[{n}/{len(ids)}] {thread_id}: "
            + (f"{result.copied} frames copied" if result.copied else "already there")
        )
    return MigrationReport(done, copied, present)


def _copy_thread(src: Thread, dst: Thread) -> ThreadCopy:
    head = src.head()
    assert head is not None  # existing_thread
    have = dst.head()
    if have is not None:
        _check_prefix(src, have)
    start = 0 if have is None else have.next_seq
    written = 0
    if start <= head.seq:
        # Chunks go in without waiting for stable storage but the last, which waits as the
        # destination's appends do (its fsync or commit covers the chunks before it).
        pending: list[bytes] | None = None
        for chunk in _chunks(src.id, src.read_lines(from_seq=start, to_seq=head.seq)):
            if pending is not None:
                written += len(dst.append_sealed(pending, durable=False))
            pending = chunk
        if pending is not None:
            written += len(dst.append_sealed(pending))
    final = dst.head()
    if final is None or final != head:
        raise MigrationConflict(
            f"thread {src.id}: the copy ends at {final}, the source at {head}", src.id
        )
    return ThreadCopy(src.id, head.seq + 1, written, head.digest)


def _check_prefix(src: Thread, have: Head) -> None:
    found = next(src.read_lines(from_seq=have.seq, to_seq=have.seq), None)
    parts = fr.unseal(found[1]) if found is not None else None
    if parts is None or parts[1].hex() != have.digest:
        what = (
            f"the destination has {have.seq + 1} frames, the source fewer"
            if found is None
            else f"frame {have.seq} differs (the destination's log is not the source's)"
        )
        raise MigrationConflict(f"thread {src.id}: {what}; nothing of it was copied", src.id)


def _chunks(thread_id: str, lines: Iterator[tuple[int, bytes]]) -> Iterator[list[bytes]]:
    """The lines in chunks that end where a batch ends (a chunk is stored all or nothing, and
    a destination holds whole batches only)."""
    chunk: list[bytes] = []
    size = 0
    for seq, line in lines:
        chunk.append(line)
        size += len(line)
        if len(chunk) >= _CHUNK_LINES or size >= _CHUNK_BYTES:
            env = fr.envelope(line)
            if env is None:
                raise CorruptFrame(thread_id, seq, -1, "no seq or batch flag")
            if not env.more:
                yield chunk
                chunk, size = [], 0
    if chunk:
        yield chunk
