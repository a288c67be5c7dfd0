"""The embedded default backend: one JSONL file per thread, in a folder.

On disk::

    <store>/store.json                 marks the folder as a store (format and version)
    <store>/threads/<thread_id>.jsonl  the log: one sealed frame per line, append-only
    <store>/artifacts/<ab>/<id>.zst    immutable blobs (see continuity.store.artifacts)
    <store>/quarantine/                torn tails moved aside by recovery, never deleted
    <store>/cache/                     derived indexes (continuity.caches): delete at will

Appends take an exclusive ``flock`` on the log file, read the next seq from the log's own tail,
write the whole batch with one ``write`` call and (by default) ``fdatasync`` it. Every frame of a
batch but its last carries ``more: true``: readers hide an unfinished batch, and recovery removes
one left by a crash, so batches are all-or-nothing.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import functools
import os
import stat
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from pathlib import Path
from typing import BinaryIO, Final

import msgspec

from continuity import frames as fr
from continuity._fs import atomic_write, fsync_dir, private_dirs
from continuity.errors import (
    CorruptFrame,
    InvalidThreadId,
    JobInFlight,
    SchemaTooNew,
    StoreNotFound,
    ThreadDeleted,
    ThreadNotFound,
    UnknownStoreFormat,
)
from continuity.store.artifacts import FileArtifactStore
from continuity.store.base import (
    BaseStore,
    ColdMove,
    DeletionReport,
    Head,
    LogReader,
    LogStamp,
    Recovery,
    Thread,
    Tombstone,
    batch_of,
    check_sealed,
    deletion_facts,
    now_ms,
    seal_batch,
    seal_frames,
    split_lines,
    validate_thread_id,
)
from continuity.store.cold import (
    ColdReader,
    check_segment,
    cold_dir,
    covered_end,
    punch_hole,
    segments_of,
    write_segment,
)

__all__ = ["STORE_FORMAT", "JsonlThread", "Store"]

_FORMAT: Final = "continuity-store"
_VERSION: Final = 1
STORE_FORMAT: Final = {"format": _FORMAT, "version": _VERSION}
"""What ``store.json`` holds (``contracts/event_frames.md``, "The store's marker"): the version
changes only with a layout older code cannot read or write safely, and a store whose marker
this code does not understand is not opened (:func:`_check_marker`)."""
_TIERED: Final = 2
"""The layout version of a store whose logs have a cold tier (ADR 0057): older code would read
the holes as zeros, so the first tiering writes it, and a store never tiered keeps version 1."""
_MARKER_MAX: Final = 1 << 16

_CHUNK: Final = 1 << 16
_QUARANTINE_CHUNK: Final = 3 << 20  # a multiple of 3: the base64 of the chunks joins up


def _probe_line(line: bytes) -> fr.Envelope | None:
    """The seq and batch flag of a stored line; None if the line is not a sealed frame."""
    return fr.envelope(line) if fr.unseal(line) is not None else None


class JsonlThread(Thread):
    """A thread stored as ``threads/<id>.jsonl``."""

    has_cold_tier = True

    def __init__(self, store: Store, thread_id: str) -> None:
        super().__init__(thread_id)
        self._store = store
        self.path = store.root / "threads" / f"{self.id}.jsonl"

    @property
    def store(self) -> Store:
        return self._store

    # -- appending (under the lock) --

    def append(
        self,
        frames: fr.Frame | Iterable[fr.Frame],
        *,
        expected_seq: int | None = None,
        durable: bool | None = None,
    ) -> range:
        batch = batch_of(frames)
        sync = self._store.durable if durable is None else durable
        created = False
        if not self.path.exists():
            # Refuse a bad first batch before the log file exists, so a failed append to a new
            # thread leaves nothing behind (under the lock the batch is sealed again for real).
            seal_batch(
                self.id,
                batch,
                None,
                now_ms=0,
                expected_seq=expected_seq,
                redact=self._store.redactor,
            )
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._refuse_deleted(fd)
            raw = _Raw(self.path, self.id, fd)
            size = self._recover(raw)
            head = self._head_at(raw, size)
            created = head is None
            if created:
                self._refuse_tombstoned(fd)
            lines, _head, given = seal_frames(
                self.id,
                batch,
                head,
                now_ms=self._store.clock(),
                expected_seq=expected_seq,
                redact=self._store.redactor,
                put_artifact=self._store.artifacts.put,
            )
            data = b"".join(lines)
            written = 0
            try:
                while written < len(data):
                    written += os.write(fd, data[written:])
            except OSError as exc:  # a full disk, a quota, a file size limit
                self._undo_partial_write(fd, size, written, exc)
                raise
            if sync:
                os.fdatasync(fd)
        finally:
            os.close(fd)  # closing releases the lock
        if created and sync:
            fsync_dir(self.path.parent)
        return given

    def append_sealed(self, lines: Sequence[bytes], *, durable: bool | None = None) -> range:
        sync = self._store.durable if durable is None else durable
        if not self.path.exists():
            check_sealed(self.id, lines, None)  # refuse bad lines before the file exists
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        created = False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._refuse_deleted(fd)
            raw = _Raw(self.path, self.id, fd)
            size = self._recover(raw)
            head = self._head_at(raw, size)
            created = head is None
            if created:
                self._refuse_tombstoned(fd)
            new_head = check_sealed(self.id, lines, head)
            data = b"".join(bytes(line) + b"\n" for line in lines)
            written = 0
            try:
                while written < len(data):
                    written += os.write(fd, data[written:])
            except OSError as exc:
                self._undo_partial_write(fd, size, written, exc)
                raise
            if sync:
                os.fdatasync(fd)
        finally:
            os.close(fd)
        if created and sync:
            fsync_dir(self.path.parent)
        return range(new_head.seq - len(lines) + 1, new_head.seq + 1)

    def _refuse_deleted(self, fd: int) -> None:
        """Under the lock: a log deleted while this writer waited for it is not written (the
        writer holds the removed file, which nobody will ever read)."""
        if os.fstat(fd).st_nlink == 0:
            raise ThreadDeleted(f"thread {self.id!r} was deleted; it is not written again", self.id)

    def _refuse_tombstoned(self, fd: int) -> None:
        """Under the lock, for a log with no frame yet: a deleted thread is not made again
        (the empty file this writer made goes again)."""
        if self._store.tombstone_of(self.id) is None:
            return
        if os.fstat(fd).st_size == 0:
            with contextlib.suppress(FileNotFoundError):
                if os.stat(self.path).st_ino == os.fstat(fd).st_ino:
                    os.unlink(self.path)
        raise ThreadDeleted(f"thread {self.id!r} was deleted; it is not written again", self.id)

    def quarantine_tail(self, offset: int, reason: str) -> Recovery:
        fd = os.open(self.path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # no append runs while the tail moves
            raw = _Raw(self.path, self.id, fd)
            size = os.fstat(fd).st_size
            if not 0 <= offset < size or (offset and raw.pread(1, offset - 1) != b"\n"):
                raise ValueError(f"byte {offset} is not the start of a line of {self.path}")
            recovery = self._quarantine(raw, offset, size, reason)
            os.ftruncate(fd, offset)
            os.fsync(fd)
            return recovery
        finally:
            os.close(fd)

    def _undo_partial_write(self, fd: int, size: int, written: int, exc: OSError) -> None:
        """Cut a batch that could not be written whole back off the log (under the lock, and
        invisible to readers: its last line is missing), so a failed append leaves nothing
        behind; or, if even that fails, say what was left."""
        if written == 0:
            return
        try:
            os.ftruncate(fd, size)
        except OSError:
            exc.add_note(
                f"{written} bytes of the unfinished batch are left at the end of "
                f"{self.path}; readers ignore them and the next append moves them to quarantine"
            )

    def _recover(self, raw: _Raw) -> int:
        """Move a torn or unfinished tail to quarantine and truncate; return the log's size."""
        size = os.fstat(raw.fd).st_size
        if size == 0:
            return 0
        cut = size
        reason = ""
        if raw.pread(1, size - 1) != b"\n":
            cut = _line_start(raw, size)
            reason = "torn last line (no newline)"
        # The last complete line must be a sealed frame; frames of an unfinished batch go too.
        while cut > 0:
            start = _line_start(raw, cut - 1)
            env = _probe_line(raw.pread(cut - 1 - start, start))
            if env is None:
                if reason.startswith("unparsable"):
                    # Two bad lines in a row is not a crash's torn tail: refuse to guess.
                    raise CorruptFrame(self.id, None, start, "unparsable line before the tail")
                reason = "unparsable last line"
                cut = start
                continue
            if env.more:
                reason = reason or "unfinished batch"
                cut = start
                continue
            break
        if cut == size:
            return size
        self._quarantine(raw, cut, size, reason or "unfinished batch")
        os.ftruncate(raw.fd, cut)
        os.fsync(raw.fd)
        return cut

    def _quarantine(self, raw: _Raw, cut: int, size: int, reason: str) -> Recovery:
        now = now_ms()
        qdir = self._store.root / "quarantine"
        private_dirs(qdir)
        name = f"{self.id}@{cut}.{now}.json"
        record = {
            "thread_id": self.id,
            "offset": cut,
            "length": size - cut,
            "reason": reason,
            "time_ms": now,
        }

        def write(out: BinaryIO) -> None:
            # The bytes are streamed into the record in base64, a chunk at a time: a repair
            # may move most of a large log, and memory must not hold it whole.
            out.write(msgspec.json.encode(record)[:-1] + b',"data_b64":"')
            pos = cut
            while pos < size:
                chunk = raw.pread(min(_QUARANTINE_CHUNK, size - pos), pos)
                if not chunk:
                    raise OSError(f"{self.path} ended at byte {pos}, before {size}")
                out.write(base64.b64encode(chunk))
                pos += len(chunk)
            out.write(b'"}\n')

        atomic_write(qdir / name, write, durable=True)
        rec = Recovery(self.id, cut, size - cut, reason, str(qdir / name), now)
        self._store._report(rec)
        return rec

    def _head_at(self, raw: _Raw, end: int) -> Head | None:
        """The head when the committed log ends at ``end``."""
        if end == 0:
            return None
        start = _line_start(raw, end - 1)
        line = raw.pread(end - 1 - start, start)
        sealed = fr.unseal(line)
        env = _probe_line(line)
        if sealed is None or env is None:
            raise CorruptFrame(self.id, None, start, "the last line is not a sealed frame")
        return Head(env.seq, sealed[1].hex())

    # -- reading (no lock: readers see whole committed batches only) --

    def _visible_end(self, raw: _Raw) -> int:
        """The end of the last committed batch: past a partial line or frames marked ``more``."""
        size = os.fstat(raw.fd).st_size
        end = _line_start(raw, size)
        while end > 0:
            start = _line_start(raw, end - 1)
            env = _probe_line(raw.pread(end - 1 - start, start))
            if env is None or not env.more:
                break
            end = start
        return end

    def open_log(self) -> LogReader | None:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        return _LogFile(self, fd)

    def head(self) -> Head | None:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            raw = _Raw(self.path, self.id, fd)
            return self._head_at(raw, self._visible_end(raw))
        finally:
            raw.close()

    def committed_size(self) -> int:
        """The byte length of the log's committed frames (a torn or unfinished tail excluded)."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return 0
        try:
            raw = _Raw(self.path, self.id, fd)
            return self._visible_end(raw)
        finally:
            raw.close()

    def offset_of(self, seq: int) -> int | None:
        """The byte offset of frame ``seq`` found by bisection over the log (no cache needed)."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            raw = _Raw(self.path, self.id, fd)
            end = self._visible_end(raw)
            found = self._locate(raw, end, seq)
            return found[0] if found is not None else None
        finally:
            raw.close()

    def _locate(self, raw: _Raw, end: int, seq: int) -> tuple[int, bytes] | None:
        """(offset, line) of frame ``seq`` within ``[0, end)``, by bisection on byte offsets."""
        if seq < 0 or end == 0:
            return None
        lo, hi = 0, end  # the line starting at lo has seq <= target; hi is an exclusive bound
        near = raw.cold.narrow(seq)  # in the cold tier: its block, from the segment's index
        if near is not None:
            lo = near[0]
            hi = min(end, near[1]) if near[1] is not None else end
        while hi - lo > _CHUNK:
            mid = (lo + hi) // 2
            start = _next_line_start(raw, mid, end)
            if start >= hi or start >= end:
                hi = mid
                continue
            line = _read_line(raw, start, end)
            env = _probe_line(line)
            if env is None:
                raise CorruptFrame(self.id, None, start, "not a sealed frame")
            if env.seq == seq:
                return start, line
            if env.seq < seq:
                lo = start
            else:
                hi = mid
        pos = lo
        expect: int | None = 0 if lo == 0 else None  # to name a damaged line by its seq
        while pos < end:
            line = _read_line(raw, pos, end)
            env = _probe_line(line)
            if env is None:
                raise CorruptFrame(self.id, expect, pos, "not a sealed frame")
            if env.seq == seq:
                return pos, line
            if env.seq > seq:
                # In a sound log the line after seq - 1 is seq: a frame is missing or misplaced.
                where = f"seq {env.seq} is where {seq} belongs"
                raise CorruptFrame(self.id, seq, pos, f"frame {seq} is missing ({where})")
            if expect is not None and env.seq != expect:
                raise CorruptFrame(self.id, expect, pos, f"seq {env.seq} where {expect} belongs")
            expect = env.seq + 1
            pos += len(line) + 1
        return None

    def read_lines(
        self, *, from_seq: int = 0, to_seq: int | None = None, start_offset: int | None = None
    ) -> Iterator[tuple[int, bytes]]:
        """Lines of ``[from_seq, to_seq]``; ``start_offset`` (from the offset index) skips the
        bisection when it is right, and is ignored when it is not."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            raw = _Raw(self.path, self.id, fd)
            end = self._visible_end(raw)
            if from_seq < 0:
                from_seq = 0
            if to_seq is not None and to_seq < from_seq:
                return
            pos: int | None = None
            if start_offset is not None and 0 <= start_offset < end:
                line = _read_line(raw, start_offset, end)
                env = _probe_line(line)
                if env is not None and env.seq == from_seq:
                    pos = start_offset
            if pos is None:
                located = self._locate(raw, end, from_seq)
                if located is None:
                    return
                pos = located[0]
            yield from self._iter_from(raw, pos, end, from_seq, to_seq)
        finally:
            raw.close()

    def _iter_from(
        self, raw: _Raw, pos: int, end: int, seq: int, to_seq: int | None
    ) -> Iterator[tuple[int, bytes]]:
        # Every frame returned is checked against the chain, the first one too: seq 0 against
        # genesis, any other against the digest stored at the end of the line before it (one
        # small pread), so a read that starts in the middle of the log never returns an edited
        # frame unnoticed.
        prev_digest = fr.GENESIS_DIGEST if seq == 0 else self._digest_before(raw, pos, seq)
        for at, line in split_lines(lambda n, off: raw.pread(n, off), pos, end):
            if at + len(line) >= end:  # no newline before the committed end
                raise CorruptFrame(self.id, seq, at, "line without newline inside the log")
            sealed = fr.unseal(line)
            env = _probe_line(line) if sealed is not None else None
            if sealed is None or env is None:
                raise CorruptFrame(self.id, seq, at, "not a sealed frame")
            if env.seq != seq:
                raise CorruptFrame(self.id, seq, at, f"seq {env.seq} where {seq} belongs")
            body, digest = sealed
            if fr.chain(prev_digest, body) != digest:
                raise CorruptFrame(self.id, seq, at, "digest does not chain")
            prev_digest = digest
            yield seq, line
            if to_seq is not None and seq >= to_seq:
                return
            seq += 1

    def _digest_before(self, raw: _Raw, pos: int, seq: int) -> bytes:
        """The digest stored by the line that ends just before ``pos`` (frame ``seq - 1``)."""
        want = fr.SEAL_SUFFIX_LEN
        tail = raw.pread(want + 1, pos - want - 1) if pos > want else b""
        digest = fr.stored_digest(tail[:-1]) if tail.endswith(b"\n") else None
        if digest is None:
            start = _line_start(raw, max(pos - 1, 0))
            raise CorruptFrame(self.id, seq - 1, start, "not a sealed frame")
        return digest

    def read_lines_backwards(self) -> Iterator[tuple[int, bytes]]:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            raw = _Raw(self.path, self.id, fd)
            pos = self._visible_end(raw)  # every byte before pos is whole lines
            expect: int | None = None
            step = 8192  # most callers want a few frames: start small, grow
            while pos > 0:
                start = _line_start(raw, max(0, pos - step))
                step = min(step * 4, _CHUNK * 4)
                lines = raw.pread(pos - start, start).split(b"\n")
                lines.pop()  # the empty string after the last newline
                offsets = [start]
                for line in lines[:-1]:
                    offsets.append(offsets[-1] + len(line) + 1)
                for j in range(len(lines) - 1, -1, -1):
                    line, off = lines[j], offsets[j]
                    sealed = fr.unseal(line)
                    env = _probe_line(line) if sealed is not None else None
                    if sealed is None or env is None:
                        raise CorruptFrame(self.id, expect, off, "not a sealed frame")
                    if expect is not None and env.seq != expect:
                        raise CorruptFrame(self.id, expect, off, f"seq {env.seq} out of order")
                    # Checked against its parent before it is given out: a caller that stops
                    # after the newest frame must not get it unchecked.
                    if off == 0:
                        parent: bytes | None = fr.GENESIS_DIGEST if env.seq == 0 else None
                    elif j > 0:
                        parent = fr.stored_digest(lines[j - 1])
                    else:
                        parent = self._digest_before(raw, off, env.seq)
                    if parent is None and off == 0:
                        raise CorruptFrame(self.id, 0, 0, f"seq {env.seq} where 0 belongs")
                    if parent is None:  # the line before it, in this chunk, is no frame
                        raise CorruptFrame(
                            self.id, env.seq - 1, offsets[j - 1], "not a sealed frame"
                        )
                    if fr.chain(parent, sealed[0]) != sealed[1]:
                        raise CorruptFrame(self.id, env.seq, off, "digest does not chain")
                    expect = env.seq - 1
                    yield env.seq, line
                pos = start
        finally:
            raw.close()

    # -- the cold tier (ADR 0057) --

    def cold_end(self) -> int:
        """How many bytes at the start of the log are in the cold tier (0 when none)."""
        return covered_end(segments_of(cold_dir(self.path)) or [])

    def move_to_cold(self, upto: int) -> ColdMove:
        """Move the log's bytes from the end of its cold tier up to ``upto`` (a line start) into
        a new compressed segment, then give their disk blocks back (ADR 0057).

        Readers see the same bytes throughout; appends are not held up (the log's lock is taken
        only for the hole punch, a few milliseconds). The segment is written and checked before
        any hole is punched, so a crash at any point loses nothing."""
        folder = cold_dir(self.path)
        with self._store.job_lock(self.id, "tier"):
            try:
                fd = os.open(self.path, os.O_RDWR)
            except FileNotFoundError:
                raise ThreadNotFound(f"no thread {self.id!r} in this store", self.id) from None
            raw = _Raw(self.path, self.id, fd)
            try:
                start = self.cold_end()
                end = self._visible_end(raw)
                if not start < upto <= end:
                    raise ValueError(
                        f"byte {upto} is not past the cold tier's end ({start}) and within the "
                        f"log's committed bytes ({end})"
                    )
                if raw.pread(1, upto - 1) != b"\n":
                    raise ValueError(f"byte {upto} is not the start of a line of {self.path}")
                self._store._mark_tiered()
                for stale in folder.glob(".*.tmp"):  # a tiering killed mid-write (we hold the job)
                    stale.unlink(missing_ok=True)
                seg = write_segment(folder, self.id, raw.pread, start, upto)
                try:
                    check_segment(seg, self.id)
                except BaseException:
                    Path(seg.path).unlink(missing_ok=True)
                    raise
                fcntl.flock(fd, fcntl.LOCK_EX)  # a delete in flight finishes first
                if os.fstat(fd).st_nlink == 0:  # deleted while the segment was written
                    self._store._drop_cold(self)
                    raise ThreadDeleted(f"thread {self.id!r} was deleted", self.id)
                # From byte 0: a tiering killed after its segment was made but before its hole
                # was punched left those blocks in place; punching a hole again costs nothing.
                why = punch_hole(fd, 0, upto)
                os.fsync(fd)
                return ColdMove(start, upto, os.stat(seg.path).st_size, why)
            finally:
                raw.close()


class _Raw:
    """A log's open file read through its cold tier (ADR 0057): the bytes of a tiered prefix,
    a hole in the file, come from its segments. Nothing is listed or opened until a read meets
    a hole, so an untiered log costs one ``memchr`` per read."""

    __slots__ = ("cold", "fd")

    def __init__(self, path: Path, name: str, fd: int) -> None:
        self.fd = fd
        self.cold = ColdReader(cold_dir(path), name, functools.partial(os.pread, fd))

    def pread(self, n: int, offset: int) -> bytes:
        return self.cold.pread(n, offset)

    def close(self) -> None:
        """Close the segments read and the file."""
        self.cold.close()
        os.close(self.fd)


class _LogFile(LogReader):
    """A JSONL log opened for reading; the committed end is found on first use."""

    def __init__(self, thread: JsonlThread, fd: int) -> None:
        self._thread = thread
        self._raw: _Raw | None = _Raw(thread.path, thread.id, fd)
        self._end: int | None = None

    def _open(self) -> _Raw:
        if self._raw is None:
            raise ValueError("read of a closed log")
        return self._raw

    @property
    def end(self) -> int:
        if self._end is None:
            self._end = self._thread._visible_end(self._open())
        return self._end

    def size(self) -> int:
        return os.fstat(self._open().fd).st_size

    def pread(self, n: int, offset: int) -> bytes:
        return self._open().pread(n, offset)

    def close(self) -> None:
        if self._raw is not None:
            self._raw.close()
            self._raw = None


_RACY_NS: Final = 2_000_000_000
"""A log changed this close to a read may change again with the same stat (file times are
coarse): it is read again."""


class _Stamped(msgspec.Struct, frozen=True):
    key: tuple[int, int, int, int, int]
    """inode, size, mtime, ctime, the tail asked for"""
    stamp: LogStamp
    read_ns: int


def _stamp_of(
    name: str, dir_fd: int, tail: int, memo: dict[str, _Stamped], now_ns: int
) -> LogStamp | None:
    """The stamp of the log ``name`` in the folder ``dir_fd``: the one in ``memo`` when its stat
    is unchanged and was settled when it was read; else read (None: gone, or not a file)."""
    try:
        st = os.stat(name, dir_fd=dir_fd)
    except FileNotFoundError:  # removed since the folder was listed
        return None
    known = memo.get(name)
    if (
        known is not None
        and known.key == (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, tail)
        and st.st_ctime_ns < known.read_ns - _RACY_NS
    ):
        return known.stamp
    try:
        fd = os.open(name, os.O_RDONLY, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    try:
        st = os.fstat(fd)
        size = st.st_size
        if size <= 0 or not stat.S_ISREG(st.st_mode):
            return None
        stamp = LogStamp(name[:-6], size, os.pread(fd, tail, max(0, size - tail)))
    finally:
        os.close(fd)
    key = (st.st_ino, size, st.st_mtime_ns, st.st_ctime_ns, tail)
    memo[name] = _Stamped(key, stamp, now_ns)
    return stamp


class Store(BaseStore):
    """The embedded default: a folder of JSONL logs plus content-addressed artifacts."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        create: bool = False,
        durable: bool = True,
        on_recovery: Callable[[Recovery], None] | None = None,
        clock: Callable[[], int] | None = None,
        redactor: Callable[[fr.Frame], fr.Frame] | None = None,
    ) -> None:
        self.root = Path(path).absolute()
        self.clock = clock or now_ms
        self.redactor = redactor
        self.durable = durable
        self.recoveries: list[Recovery] = []
        self._on_recovery = on_recovery
        self._stamp_memo: dict[str, _Stamped] = {}
        """log_stamps' last answer per log, with the stat it was read at (a long-lived reader —
        the MCP server, the viewer — asks again on every store-wide search)."""
        marker = self.root / "store.json"
        if create:
            self.init_layout()
        elif not marker.is_file():
            if self.root.exists() and not self.root.is_dir():
                raise StoreNotFound(f"{self.root} is a file, not a store folder")
            if self.root.is_dir() and any(self.root.iterdir()):
                raise StoreNotFound(
                    f"{self.root} is a folder that is not a continuity store (it has no store.json)"
                )
            raise StoreNotFound(
                f"no continuity store at {self.root} (create one with `continuity init`)"
            )
        _check_marker(marker)
        self.artifacts = FileArtifactStore(self.root / "artifacts", durable=durable)

    def init_layout(self) -> None:
        """Create the store's folders and marker (idempotent)."""
        marker = self.root / "store.json"
        if self.root.exists() and not self.root.is_dir():
            raise StoreNotFound(f"{self.root} exists and is not a folder")
        if self.root.is_dir() and not marker.exists() and not _being_made(self.root):
            raise StoreNotFound(f"{self.root} is a non-empty folder that is not a continuity store")
        for sub in ("threads", "artifacts", "quarantine", "cache"):
            private_dirs(self.root / sub)
        # Private whatever the umask or whoever made the folder: the store holds every prompt,
        # file and command output of every session (ADR 0002).
        mode = stat.S_IMODE(self.root.stat().st_mode)
        if mode & 0o077:
            with contextlib.suppress(PermissionError):  # not ours to change: leave it
                os.chmod(self.root, mode & 0o700)
        if not marker.exists():
            atomic_write(marker, msgspec.json.encode(STORE_FORMAT) + b"\n", durable=True)

    def thread(self, thread_id: str) -> JsonlThread:
        return JsonlThread(self, thread_id)

    def _mark_tiered(self) -> None:
        """Say in ``store.json`` that logs may have a cold tier (version 2), before the first
        hole is punched, so a continuity that predates it refuses the store instead of reading
        zeros."""
        marker = self.root / "store.json"
        with open(marker, "rb") as f:
            doc = msgspec.json.decode(f.read(_MARKER_MAX))
        if isinstance(doc, dict) and doc.get("version", 0) >= _TIERED:
            return
        doc = {**doc, "format": _FORMAT, "version": _TIERED}
        atomic_write(marker, msgspec.json.encode(doc) + b"\n", durable=True)

    def threads(self) -> list[str]:
        folder = self.root / "threads"
        if not folder.is_dir():
            return []
        ids = []
        for p in folder.iterdir():
            if p.suffix == ".jsonl" and p.stat().st_size > 0 and self._has_frames(p):
                ids.append(p.name[: -len(".jsonl")])
        return sorted(ids)

    def stored_thread_ids(self) -> list[str]:
        folder = self.root / "threads"
        if not folder.is_dir():
            return []
        ids = []
        for p in folder.iterdir():
            name = p.name[: -len(".jsonl")]
            if p.suffix == ".jsonl" and p.stat().st_size > 0 and _valid_id(name):
                ids.append(name)
        return sorted(ids)

    def log_stamps(self, tail: int) -> list[LogStamp]:
        """Each log's size and tail. A log whose stat (inode, size, mtime, ctime) is what it was
        at this store's last call, and whose last change was well before that call, is not
        opened again (one stat instead of open, fstat, pread and close): any write changes its
        ctime, and a change within the clock's granularity of the last read (a truncation and
        an append to the same size) is read again, as git treats a "racily clean" file."""
        folder = self.root / "threads"
        found: list[LogStamp] = []
        try:
            entries = os.scandir(folder)
        except FileNotFoundError:
            return found
        memo = self._stamp_memo
        seen: set[str] = set()
        now_ns = time.time_ns()
        dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            with entries:
                for entry in entries:
                    name = entry.name
                    if not name.endswith(".jsonl") or not _valid_id(name[:-6]):
                        continue
                    stamp = _stamp_of(name, dir_fd, tail, memo, now_ns)
                    if stamp is not None:
                        found.append(stamp)
                        seen.add(name)
        finally:
            os.close(dir_fd)
        if len(memo) > len(seen):  # logs gone since: forget them
            for name in [n for n in memo if n not in seen]:
                memo.pop(name, None)
        return found

    @property
    def stamps_read(self) -> bool:
        """Whether :meth:`log_stamps` has read this store's logs before (its memo then makes
        the next call one stat a log)."""
        return bool(self._stamp_memo)

    def settled_stats(self) -> dict[str, tuple[int, int, int, int]]:
        """The (inode, size, mtime, ctime) of each log at :meth:`log_stamps`' last read of it,
        by thread id, for the logs whose last change was well before that read (the racy-time
        rule above): a later stat equal to one of these means the log still has the stamp
        read then. The store catalog persists them for the listings' fast path."""
        return {
            name[:-6]: known.key[:4]
            for name, known in self._stamp_memo.items()
            if known.key[3] < known.read_ns - _RACY_NS
        }

    def _has_frames(self, path: Path) -> bool:
        # A log holding only a batch cut short by a crash has bytes but no committed frame.
        try:
            return JsonlThread(self, path.name[: -len(".jsonl")]).head() is not None
        except InvalidThreadId:
            return False
        except CorruptFrame:
            return True  # it has frames; `verify` says what is wrong with them

    @property
    def cache_dir(self) -> Path:
        return self.root / "cache"

    @property
    def location(self) -> Path:
        return self.root

    @property
    def local_dir(self) -> Path:
        return self.root

    def quarantined(self) -> list[Recovery]:
        """Every quarantine record in the store, oldest first."""
        folder = self.root / "quarantine"
        found: list[Recovery] = []
        if not folder.is_dir():
            return found
        for p in sorted(folder.glob("*.json")):
            try:
                rec = msgspec.json.decode(p.read_bytes())
                found.append(
                    Recovery(
                        rec["thread_id"],
                        rec["offset"],
                        rec["length"],
                        rec["reason"],
                        str(p),
                        rec["time_ms"],
                    )
                )
            except (msgspec.DecodeError, UnicodeDecodeError, KeyError, TypeError):
                continue
        found.sort(key=lambda r: (r.time_ms, r.thread_id, r.offset))
        return found

    def job_lock(self, thread_id: str, job: str) -> AbstractContextManager[None]:
        """Held by this process (the in-process lock) and by an ``flock`` on
        ``cache/jobs/<thread_id>.<job>.lock``, so other processes are excluded too; a killed
        holder releases it with its descriptor."""
        return self._job_flock(thread_id, job)

    @contextmanager
    def _job_flock(self, thread_id: str, job: str) -> Iterator[None]:
        with ExitStack() as held:
            held.enter_context(super().job_lock(thread_id, job))
            path = self.cache_dir / "jobs" / f"{thread_id}.{job}.lock"
            private_dirs(path.parent)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
            held.callback(os.close, fd)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise JobInFlight(f"a {job} job for this thread is already running") from None
            yield

    # -- forgetting (ADR 0040) --

    @property
    def tombstones_path(self) -> Path:
        return self.root / "tombstones.jsonl"

    def tombstones(self) -> list[Tombstone]:
        try:
            data = self.tombstones_path.read_bytes()
        except FileNotFoundError:
            return []
        found: list[Tombstone] = []
        for line in data.splitlines():
            try:
                found.append(_tombstone_decoder.decode(line))
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue  # a torn last line (a crash while it was written): not a tombstone
        return found

    def _add_tombstone(self, tomb: Tombstone) -> None:
        """Appended under an exclusive lock, whole, and fsynced before the log goes."""
        path = self.tombstones_path
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                os.write(fd, b"\n")  # end a torn line first: it stays unreadable, alone
            os.write(fd, msgspec.json.encode(tomb) + b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_dir(self.root)

    def delete_thread(self, thread_id: str, *, reason: str = "delete") -> DeletionReport:
        thread = self.thread(validate_thread_id(thread_id))
        try:
            fd = os.open(thread.path, os.O_RDWR)
        except FileNotFoundError:
            return self._deleted_before(thread_id)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # appends wait; they fail once the log is gone
            raw = _Raw(thread.path, thread.id, fd)
            if os.fstat(fd).st_nlink == 0:
                return self._deleted_before(thread_id)
            size = os.fstat(fd).st_size
            try:
                head = thread._head_at(raw, thread._visible_end(raw))
            except CorruptFrame:
                head = None  # a damaged log is deleted too; its tombstone says what it held
            lines = split_lines(lambda n, o: raw.pread(n, o), 0, size, first=_CHUNK)
            n, nbytes, refs, maybe = deletion_facts(line for _o, line in lines)
            earlier = self.tombstone_of(thread_id)
            same = earlier is not None and head is not None and earlier.head_digest == head.digest
            tomb = (
                earlier
                if same and earlier is not None
                else Tombstone(
                    thread_id=thread_id,
                    head_seq=-1 if head is None else head.seq,
                    head_digest="" if head is None else head.digest,
                    frames=n,
                    bytes=nbytes,
                    reason=reason,
                    time_ms=self.clock(),
                )
            )
            if not same:  # a second run after a crash finds its own tombstone
                self._add_tombstone(tomb)
            os.unlink(thread.path)
            fsync_dir(thread.path.parent)
        finally:
            raw.close()
        self._drop_cold(thread)
        self._drop_quarantined(thread_id)
        found = refs | {a for a in maybe if self.artifacts.exists(a)}
        return DeletionReport(tombstone=tomb, artifacts=tuple(sorted(found)))

    def _deleted_before(self, thread_id: str) -> DeletionReport:
        tomb = self.tombstone_of(thread_id)
        if tomb is None:
            raise ThreadNotFound(f"no thread {thread_id!r} in this store", thread_id)
        self._drop_cold(self.thread(thread_id))
        self._drop_quarantined(thread_id)
        return DeletionReport(tombstone=tomb, artifacts=(), finished_earlier=True)

    def _drop_cold(self, thread: JsonlThread) -> None:
        """The cold segments of a deleted log go with it (after the log: a crash in between
        leaves segments nothing reads, removed by the next delete or verify --repair)."""
        folder = cold_dir(thread.path)
        for seg in segments_of(folder) or ():
            Path(seg.path).unlink(missing_ok=True)
        if folder.exists():
            import shutil  # not at the top: it imports bz2, lzma and zlib, a hook's 1 ms

            shutil.rmtree(folder, ignore_errors=True)
            fsync_dir(folder.parent)

    def _drop_quarantined(self, thread_id: str) -> None:
        """The torn tails recovery moved aside hold the thread's bytes too: they go with it."""
        for rec in self.quarantined():
            if rec.thread_id == thread_id:
                Path(rec.quarantine_file).unlink(missing_ok=True)

    def referenced(self, ids: Iterable[str]) -> set[str]:
        """Each log's bytes, as they are (damaged lines too), searched for the ids."""
        remaining = {i.encode() for i in ids}
        found: set[str] = set()
        folder = self.root / "threads"
        for p in sorted(folder.glob("*.jsonl")) if remaining else ():
            try:
                fd = os.open(p, os.O_RDONLY)
            except FileNotFoundError:
                continue
            raw = _Raw(p, p.name[: -len(".jsonl")], fd)  # a cold prefix too
            try:
                pos, carry = 0, b""
                while chunk := raw.pread(_CHUNK * 16, pos):
                    pos += len(chunk)
                    data = carry + chunk
                    hit = {n for n in remaining if n in data}
                    remaining -= hit
                    found |= {h.decode() for h in hit}
                    if not remaining:
                        return found
                    carry = data[-63:]
            finally:
                raw.close()
        return found

    def _report(self, recovery: Recovery) -> None:
        self.recoveries.append(recovery)
        if self._on_recovery is not None:
            self._on_recovery(recovery)


_tombstone_decoder: Final = msgspec.json.Decoder(Tombstone)


# --- small file helpers ---------------------------------------------------------------------


def _valid_id(name: str) -> bool:
    try:
        validate_thread_id(name)
    except InvalidThreadId:
        return False
    return True


def _line_start(raw: _Raw, pos: int) -> int:
    """Offset just past the last newline before ``pos`` (0 if there is none): the start of the
    line that contains (or ends with the newline at) ``pos``."""
    step = 4096
    while pos > 0:
        start = max(0, pos - step)
        chunk = raw.pread(pos - start, start)
        i = chunk.rfind(b"\n")
        if i >= 0:
            return start + i + 1
        pos = start
        step = min(step * 4, _CHUNK * 4)
    return 0


def _line_end(raw: _Raw, pos: int, end: int) -> int:
    """Offset just past the first newline at or after ``pos`` (``end`` if none before it)."""
    while pos < end:
        chunk = raw.pread(min(_CHUNK, end - pos), pos)
        i = chunk.find(b"\n")
        if i >= 0:
            return pos + i + 1
        pos += len(chunk)
    return end


def _next_line_start(raw: _Raw, pos: int, end: int) -> int:
    """The first line start at or after ``pos`` (``end`` if none)."""
    # a line starts at pos if the byte before it is a newline
    return 0 if pos == 0 else _line_end(raw, pos - 1, end)


def _read_line(raw: _Raw, start: int, end: int) -> bytes:
    """The line starting at ``start`` (without its newline)."""
    parts: list[bytes] = []
    pos = start
    while pos < end:
        chunk = raw.pread(min(4096 if not parts else _CHUNK, end - pos), pos)
        i = chunk.find(b"\n")
        if i >= 0:
            parts.append(chunk[:i])
            break
        parts.append(chunk)
        pos += len(chunk)
    return b"".join(parts)


def _check_marker(marker: Path) -> None:
    """Refuse a store whose ``store.json`` this code does not understand: a newer version is
    :class:`SchemaTooNew`, anything else :class:`UnknownStoreFormat`. Members it does not know
    are ignored (a newer version may add some without changing the version)."""
    with open(marker, "rb") as f:
        raw = f.read(_MARKER_MAX)
    known = _TIERED
    try:
        doc = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        doc = msgspec.UNSET
    version = doc.get("version") if isinstance(doc, dict) else None
    if not isinstance(doc, dict):
        what = "is not JSON" if doc is msgspec.UNSET else "is not a JSON object"
    elif doc.get("format") != _FORMAT:
        what = f"names the format {doc.get('format')!r}, not {_FORMAT!r}"
    elif type(version) is not int or version < 1:
        what = f"names the version {version!r}, which no continuity wrote"
    elif version > known:
        raise SchemaTooNew(
            f"{marker} says version {version}: the store was made by a newer continuity, "
            f"and this one knows up to version {known}: upgrade continuity",
            found=version,
            needed=version,
            known=known,
        )
    else:
        return
    expected = f'{{"format": "{_FORMAT}", "version": {_VERSION}}}'
    raise UnknownStoreFormat(
        f"{marker} {what}: this is not a store continuity can open (a store's marker says "
        f"{expected}; nothing was read or written)",
        path=str(marker),
    )


_LAYOUT: Final = frozenset(("threads", "artifacts", "quarantine", "cache"))


def _being_made(root: Path) -> bool:
    """Whether ``root`` (no ``store.json`` yet) is empty, or holds only what creating a store
    puts there first — so another process is creating the store this very moment (two hooks
    of a first session start at once), and this one may finish the layout too."""
    for entry in root.iterdir():
        name = entry.name
        if name in _LAYOUT and entry.is_dir():
            continue
        if name.startswith(".store.json.") and name.endswith(".tmp"):
            continue
        if name == "store.json":  # the other process finished between our two looks
            continue
        return False
    return True
