r"""Derived, deletable indexes over a thread's log kept as bytes, each with a watermark.

Per thread, under ``<store>/cache/threads/<thread_id>/``::

    offsets.v1.u64         byte offset of every frame, indexed by seq (little-endian uint64)
    messages.v1.bin        one 16-byte record per message, by ordinal: seq u64, tokens u32,
                           role u8 (1 user, 2 assistant, 3 system), 3 zero bytes
    checkpoints.v1.jsonl   one line per compaction_checkpoint_created frame (a projection)
    checkpoints.v1.sel     the cumulative_v1 checkpoints sorted by (to_seq, seq), 24 bytes each:
                           to_seq u64, seq u64, byte offset of its line in the .jsonl — so
                           the compile rule's "latest with to_seq <= x" is a bisection
    checkpoints.v1.other   byte offsets (u64) of the other checkpoints' lines, in log order
    marks.v1.jsonl         one line per record_appended and messages_retracted frame (what
                           the record index and retraction-aware readers need)
    manifest.v1.json       the watermark of each file: last seq applied, its chain digest,
                           entries and bytes; plus the log offset just past that frame

Nothing here imports numpy: the files are read with ``struct`` over ``mmap`` or small
``pread``\ s, so the hook path can use the caches at the cost of a few system calls.

The data files are appended first and the manifest replaced atomically last: the manifest is the
commit point, and bytes past it are cut off before the next append. A refresh trusts the caches
only while the log still holds the watermark frame with the watermark digest at the recorded
offset; then it parses just the bytes after it. Otherwise it rebuilds. Everything here is a pure
function of the log, so deleting the folder and rebuilding gives byte-identical files.
"""

from __future__ import annotations

import fcntl
import functools
import mmap
import os
import struct
import time
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from itertools import accumulate
from pathlib import Path
from typing import Final, Literal, NamedTuple, TypeVar

import blake3
import msgspec

from continuity import frames as fr
from continuity._fs import atomic_write, no_room, private_dirs, remove_temps
from continuity.caches.blocksums import (
    BLOCK,
    SUM,
    CheckedFile,
    block_sums,
    file_check,
    pread_file,
    sums_path,
    tail_of,
)
from continuity.errors import CachesReadOnly, CorruptCache, CorruptFrame, note_rebuilt
from continuity.store.base import BaseStore, LogReader, Thread
from continuity.store.derived import (
    ROLE_CODES,
    CheckpointEntry,
    Entries,
    MarkEntry,
    clip_u32,
    probe_lines,
    sort_probes,
)
from continuity.summary import CUMULATIVE_V1 as CUMULATIVE

__all__ = [
    "DAMAGE",
    "MESSAGE_RECORD",
    "CheckpointEntry",
    "CheckpointSelection",
    "IndexDelta",
    "IndexRun",
    "MarkEntry",
    "MessageRecord",
    "MessageRecords",
    "Progress",
    "RefreshResult",
    "ThreadIndex",
    "caches_writable",
    "check_no_lost_threads",
    "keeps_none",
    "log_is_small",
    "rebuild_all",
    "writing_caches",
]

MESSAGE_RECORD: Final = struct.Struct("<QIB3x")
"""One ``messages.v1.bin`` record: seq, token estimate, role code, 3 zero bytes."""
_SEL_RECORD: Final = struct.Struct("<QQQ")
_U64: Final = struct.Struct("<Q")
_MANIFEST_VERSION: Final = 4
"""4: each data file has block checksums (``<name>.b3``, :mod:`.blocksums`) and the manifest
a checksum of itself; caches of an older version are rebuilt."""
ROLE_NAMES: Final = {v: k for k, v in ROLE_CODES.items()}

_OFFSETS: Final = "offsets.v1.u64"
_MESSAGES: Final = "messages.v1.bin"
_CHECKPOINTS: Final = "checkpoints.v1.jsonl"
_SELECTION: Final = "checkpoints.v1.sel"
_OTHER: Final = "checkpoints.v1.other"
_MARKS: Final = "marks.v1.jsonl"
_MANIFEST: Final = "manifest.v1.json"
_DATA_FILES: Final = (_OFFSETS, _MESSAGES, _CHECKPOINTS, _SELECTION, _OTHER, _MARKS)
_SUMS: Final = {name: sums_path(Path(name)).name for name in _DATA_FILES}
"""The block checksums of each data file (:mod:`.blocksums`)."""
_CHUNK: Final = 2 << 20

_T = TypeVar("_T")

Progress = Callable[[int, int], None]
"""Called with (log bytes indexed so far, log bytes to index)."""


def _small_log_bytes() -> int:
    raw = os.environ.get("CONTINUITY_SMALL_LOG_BYTES", "")
    try:
        return max(0, int(raw)) if raw.strip() else 65536
    except ValueError:
        return 65536


SMALL_LOG_BYTES = _small_log_bytes()
"""A log shorter than this keeps no per-thread caches (ADR 0031): its readers read it whole, which
costs about what opening its caches would (64 KiB: a few hundred frames, a millisecond or two),
and a store of many small threads is spared a dozen files each. ``CONTINUITY_SMALL_LOG_BYTES``
sets it (0: every thread keeps caches, as before ADR 0031)."""


def log_is_small(thread: Thread) -> bool:
    """Whether ``thread``'s log (or its absence) is under :data:`SMALL_LOG_BYTES`."""
    limit = SMALL_LOG_BYTES
    if limit <= 0:
        return False
    log = thread.open_log()
    if log is None:
        return True
    with log:
        return log.size() < limit


def keeps_none(thread: Thread) -> bool:
    """Whether ``thread`` keeps no caches (ADR 0031): its log is small and it has none (caches
    an older version made, or that the log outgrew before it was cut short, are kept in use —
    they know how far the log went — until ``rebuild-index`` drops them)."""
    cache_dir = thread.store.cache_dir
    if cache_dir is None:
        return True
    if SMALL_LOG_BYTES <= 0 or (cache_dir / "threads" / thread.id / _MANIFEST).exists():
        return False
    return log_is_small(thread)


class Watermark(msgspec.Struct, frozen=True):
    last_seq: int
    digest: str
    entries: int
    bytes: int
    check: str = ""
    """:func:`~.blocksums.file_check` of the file's first ``bytes`` bytes."""


class Manifest(msgspec.Struct, frozen=True):
    version: int
    thread_id: str
    log_end: int
    offsets: Watermark
    messages: Watermark
    checkpoints: Watermark
    selection: Watermark
    other: Watermark
    marks: Watermark
    check: str = ""
    """A digest of the manifest itself (with ``check`` empty): a damaged one is not trusted."""


class _Versioned(msgspec.Struct):
    """What any version's manifest holds (a file that does not is damaged, not older)."""

    version: int
    thread_id: str
    log_end: int


def _manifest_check(m: Manifest) -> str:
    return blake3.blake3(_encoder.encode(m)).hexdigest(16)


def _sealed(m: Manifest) -> bool:
    return m.check == _manifest_check(msgspec.structs.replace(m, check=""))


class MessageRecord(NamedTuple):
    seq: int
    tokens: int
    role: int


_manifest_decoder: Final = msgspec.json.Decoder(Manifest)
_checkpoint_decoder: Final = msgspec.json.Decoder(CheckpointEntry)
_checkpoints_decoder: Final = msgspec.json.Decoder(list[CheckpointEntry])
_mark_decoder: Final = msgspec.json.Decoder(MarkEntry)
_marks_decoder: Final = msgspec.json.Decoder(list[MarkEntry])
_encoder: Final = msgspec.json.Encoder()


class RefreshResult(msgspec.Struct, frozen=True):
    """What a refresh did: nothing (``current``), indexed what was new, or rebuilt.
    ``frames_applied``: the frames indexed; after a rebuild, every frame of the log (a small log
    keeps no caches, ADR 0031, and still counts them)."""

    mode: Literal["current", "caught_up", "rebuilt"]
    frames_applied: int


class IndexDelta(msgspec.Struct):
    """The index entries of a run of the log, as the bytes each cache file gets (a run from
    the start of the log: the files' whole contents)."""

    offsets: bytes
    messages: bytes
    checkpoints: bytes
    marks: bytes
    mark_count: int
    frames: int
    message_count: int
    checkpoint_count: int
    last_seq: int
    digest: str
    end: int
    cumulative: list[tuple[int, int, int]]
    """(to_seq, seq, line offset within ``checkpoints``) of the new cumulative_v1 entries."""
    other: list[int]
    """Line offsets within ``checkpoints`` of the new entries of other kinds."""

    def selection_bytes(self, base_offset: int = 0) -> bytes:
        recs = sorted((t, s, o + base_offset) for t, s, o in self.cumulative)
        return b"".join(_SEL_RECORD.pack(*r) for r in recs)

    def other_bytes(self, base_offset: int = 0) -> bytes:
        return b"".join(_U64.pack(o + base_offset) for o in self.other)


def _index_run(
    thread_id: str,
    log: LogReader,
    start: int,
    end: int,
    first_seq: int,
    progress: Progress | None = None,
) -> IndexDelta:
    """Index the committed lines in ``[start, end)`` (which begin with seq ``first_seq``): the
    probes of each chunk, sorted into entries by :func:`~continuity.store.derived.sort_probes`."""
    run = IndexRun(first_seq)
    last_line = b""
    for pos, lines in _line_chunks(log, start, end):
        starts = list(accumulate(map((1).__add__, map(len, lines)), initial=pos))
        found = probe_lines(thread_id, lines, run.last_seq + 1, starts)
        run.add(starts[:-1], sort_probes(found), run.last_seq + len(found))
        last_line = lines[-1]
        if progress is not None:
            progress(starts[-1] - start, end - start)
    digest = ""
    if run.frames:
        sealed = fr.unseal(last_line)
        if sealed is None:
            raise CorruptFrame(thread_id, run.last_seq, end - len(last_line) - 1, "no digest")
        digest = sealed[1].hex()
    return run.delta(digest, end)


def _line_chunks(log: LogReader, start: int, end: int) -> Iterator[tuple[int, list[bytes]]]:
    """(offset, lines without their newlines) of the committed lines in ``[start, end)``, about
    :data:`_CHUNK` bytes at a time (a longer line alone)."""
    pos = start
    while pos < end:
        chunk = log.pread(min(_CHUNK, end - pos), pos)
        cut = chunk.rfind(b"\n") + 1
        if cut == 0:  # a single line longer than the chunk
            cut = log.line_end(pos, end) - pos
            chunk = log.pread(cut, pos)
        yield pos, chunk[: cut - 1].split(b"\n")
        pos += cut


_LITTLE: Final = array("H", [1]).tobytes() == b"\x01\x00"


class IndexRun:
    """The index entries of a run of a log, added a chunk of frames at a time, each chunk as
    :func:`~continuity.store.derived.sort_entries` sorted it: from the probes of the lines
    (:func:`_index_run`) or from frames decoded whole, by a caller that decodes every frame
    anyway (``verify``, ADR 0030). Runs of consecutive byte ranges are joined with
    :meth:`joined`."""

    __slots__ = (
        "_checkpoints",
        "_cp_bytes",
        "_cumulative",
        "_marks",
        "_messages",
        "_offsets",
        "_other",
        "checkpoints",
        "frames",
        "last_seq",
        "marks",
        "messages",
    )

    def __init__(self, first_seq: int = 0) -> None:
        self._offsets = array("Q")
        self._messages: list[bytes] = []
        self._checkpoints: list[bytes] = []
        self._marks: list[bytes] = []
        self._cumulative: list[tuple[int, int, int]] = []
        self._other: list[int] = []
        self._cp_bytes = 0
        self.frames = self.messages = self.checkpoints = self.marks = 0
        self.last_seq = first_seq - 1

    def add(self, starts: Sequence[int], entries: Entries, last_seq: int) -> None:
        """The next frames: the byte offsets where their lines start, their entries, and the
        seq of the last of them."""
        self._offsets.extend(starts)
        self.frames += len(starts)
        self.last_seq = last_seq
        pack, role = MESSAGE_RECORD.pack, ROLE_CODES.get
        self._messages.append(
            b"".join([pack(m.seq, clip_u32(m.tokens), role(m.role, 0)) for m in entries.messages])
        )
        self.messages += len(entries.messages)
        for entry in entries.checkpoints:
            line = _encoder.encode(entry) + b"\n"
            if entry.summary_kind == CUMULATIVE:
                self._cumulative.append((entry.to_seq, entry.seq, self._cp_bytes))
            else:
                self._other.append(self._cp_bytes)
            self._checkpoints.append(line)
            self._cp_bytes += len(line)
        self.checkpoints += len(entries.checkpoints)
        self._marks.append(b"".join([_encoder.encode(m) + b"\n" for m in entries.marks]))
        self.marks += len(entries.marks)

    def delta(self, digest: str, end: int) -> IndexDelta:
        """The delta of this run, which ends at byte ``end`` with a frame whose digest is
        ``digest`` (hex)."""
        return IndexRun.joined([self], digest, end)

    @staticmethod
    def joined(runs: Sequence[IndexRun], digest: str, end: int) -> IndexDelta:
        """The delta of consecutive runs from the start of the log to ``end``, whose last frame
        has ``digest`` (hex)."""
        offsets = array("Q")
        cumulative: list[tuple[int, int, int]] = []
        other: list[int] = []
        base = 0
        for run in runs:
            offsets.extend(run._offsets)
            cumulative += [(t, s, o + base) for t, s, o in run._cumulative]
            other += [o + base for o in run._other]
            base += run._cp_bytes
        return IndexDelta(
            offsets=offsets.tobytes() if _LITTLE else _swapped(offsets),
            messages=b"".join([b for r in runs for b in r._messages]),
            checkpoints=b"".join([b for r in runs for b in r._checkpoints]),
            marks=b"".join([b for r in runs for b in r._marks]),
            mark_count=sum(r.marks for r in runs),
            frames=sum(r.frames for r in runs),
            message_count=sum(r.messages for r in runs),
            checkpoint_count=sum(r.checkpoints for r in runs),
            last_seq=runs[-1].last_seq if runs else -1,
            digest=digest if runs and runs[-1].frames else "",
            end=end,
            cumulative=cumulative,
            other=other,
        )


@functools.lru_cache(maxsize=4096)
def _paths(folder: Path) -> dict[str, Path]:
    """The path of each file of a thread's cache folder (joined once per folder and process)."""
    names = (*_DATA_FILES, *(_SUMS[n] for n in _DATA_FILES), _MANIFEST, ".lock")
    return {name: folder / name for name in names}


def _swapped(values: array[int]) -> bytes:
    copy = array("Q", values)
    copy.byteswap()
    return copy.tobytes()


def _last_line(path: Path, size: int) -> bytes:
    """The last line (with its newline) of the first ``size`` bytes of a file."""
    with open(path, "rb") as f:
        step = 4096
        while True:
            start = max(0, size - step)
            f.seek(start)
            data = f.read(size - start)
            i = data.rfind(b"\n", 0, len(data) - 1)
            if i >= 0 or start == 0:
                return data[i + 1 :]
            step *= 4


class ThreadIndex:
    """The caches of one thread, in its store's ``cache_dir`` (``ValueError`` for a store that
    keeps none: see :meth:`available`)."""

    def __init__(self, thread: Thread) -> None:
        cache_dir = thread.store.cache_dir
        if cache_dir is None:
            raise ValueError(f"the store of thread {thread.id!r} keeps no caches")
        self.thread = thread
        self.cache_dir = cache_dir
        self.dir = cache_dir / "threads" / thread.id
        self._snap: Manifest | None = None
        """The manifest this handle last refreshed to (or found current)."""
        self._files: dict[tuple[str, int, str], CheckedFile] = {}

    @staticmethod
    def available(thread: Thread) -> bool:
        """Whether readers should go through this thread's caches: its store keeps them (its log
        is then readable as bytes) and they can be brought up to date — written, or, in a store
        this process cannot write (a read-only archive), current already. Otherwise readers
        compute what they need from the log itself — as for a small thread without caches
        (:func:`keeps_none`)."""
        cache_dir = thread.store.cache_dir
        if cache_dir is None or keeps_none(thread):
            return False
        if caches_writable(cache_dir):
            return True
        index = ThreadIndex(thread)
        return index._current_read_only() is not False

    def _current_read_only(self) -> bool | None:
        """Without writing: True when the caches describe the log up to its committed end,
        None when they say the log once went further (a refresh raises), else False."""
        log = self.thread.open_log()
        if log is None:
            return False
        with log:
            end = log.end
            manifest = self.manifest()
            if self._shortfall(manifest, end) is not None:
                return None
            try:
                start = self._trusted_end(manifest, log, end)
            except OSError:
                return False
        return start is not None and start[1] == end

    # -- keeping the caches current --

    def _path(self, name: str) -> Path:
        return _paths(self.dir)[name]

    def manifest(self) -> Manifest | None:
        """The committed manifest; None when there is none, or it does not decode or does not
        match its own checksum (damaged: the next refresh rebuilds)."""
        try:
            m = _manifest_decoder.decode(self._path(_MANIFEST).read_bytes())
        except (FileNotFoundError, msgspec.DecodeError, UnicodeDecodeError):
            return None
        return m if _sealed(m) else None

    def _checked(self, m: Manifest, name: str) -> CheckedFile:
        """The data file ``name`` as ``m`` committed it, its blocks checked as they are read
        (``ValueError`` when its sums or last block are not what ``m`` recorded). Kept per
        handle and watermark: a file is opened once, each block hashed once."""
        mark = self._watermark(m, name)
        key = (name, mark.bytes, mark.check)
        found = self._files.get(key)
        if found is None:
            found = CheckedFile.open(self._path(name), mark.bytes, mark.check)
            if len(self._files) >= 32:
                self._files.clear()
            self._files[key] = found
        return found

    def refresh(self, progress: Progress | None = None) -> RefreshResult:
        """Bring the caches up to the log's committed end: catch up, or rebuild if they diverge.

        In a store this process cannot write, current caches are used as they are, and caches
        that are not raise :class:`CachesReadOnly` (:meth:`available` says so beforehand; a
        refresh that finds the disk full learns it here: see :meth:`current`)."""
        if caches_writable(self.cache_dir):
            try:
                with writing_caches(self.cache_dir):
                    return self._catch_up(progress)
            except CachesReadOnly:
                pass  # no room to write them: read as in a read-only store, from now on
        state = self._current_read_only()
        if state:
            self._snap = self.manifest()
            return RefreshResult("current", 0)
        if state is None:
            self.check_length()
        raise CachesReadOnly(
            f"the caches of thread {self.thread.id!r} are out of date and cannot be written "
            f"({self.cache_dir} cannot be written{_why_unwritable(self.cache_dir)})"
        )

    @staticmethod
    def current(thread: Thread) -> ThreadIndex | None:
        """The thread's caches brought up to its log's end, when readers should go through
        them (:meth:`available`); None when they compute what they need from the log instead:
        also when the refresh found no room to write them (a full disk, a quota), which makes
        this process read the store as a read-only one from then on (:func:`writing_caches`)."""
        if not ThreadIndex.available(thread):
            return None
        index = ThreadIndex(thread)
        try:
            index.refresh()
        except CachesReadOnly:
            return None
        return index

    def _catch_up(self, progress: Progress | None) -> RefreshResult:
        with self._lock():
            log = self.thread.open_log()
            if log is None:
                self._remove()
                return RefreshResult("current", 0)
            with log:
                end = log.end
                manifest = self.manifest()
                shortfall = self._shortfall(manifest, end)
                if shortfall is not None:
                    raise CorruptFrame(self.thread.id, shortfall[0], end, shortfall[1])
                start = self._trusted_end(manifest, log, end)
                if start is None:
                    self._note_untrusted(manifest)
                    delta = _index_run(self.thread.id, log, 0, end, 0, progress)
                    self._write_fresh(delta)
                    return RefreshResult("rebuilt", delta.frames)
                manifest, start_offset = start
                if start_offset == end:
                    self._snap = manifest
                    return RefreshResult("current", 0)
                delta = _index_run(
                    self.thread.id, log, start_offset, end, manifest.offsets.last_seq + 1, progress
                )
                self._snap = self._append(manifest, delta)
                return RefreshResult("caught_up", delta.frames)

    def _note_untrusted(self, m: Manifest | None) -> None:
        """Say on stderr why caches that were there are rebuilt: damage, not a first build, a
        small log that grew, or caches of another version."""
        if m is None:
            if self._path(_MANIFEST).exists() and self._raw_version() in (_MANIFEST_VERSION, None):
                what = f"{_MANIFEST} is damaged"
            else:
                return
        elif m.version != _MANIFEST_VERSION:
            return
        else:
            what = "; ".join(self._file_problems(m)) or "they do not match the log"
        note_rebuilt(f"the caches of thread {self.thread.id!r}", what)

    def _raw_version(self) -> int | None:
        """The version the manifest file says it has, if it says one (a damaged one may not)."""
        try:
            return msgspec.json.decode(self._path(_MANIFEST).read_bytes(), type=_Versioned).version
        except (OSError, msgspec.DecodeError, UnicodeDecodeError):
            return None

    def _file_problems(self, m: Manifest) -> list[str]:
        """What is wrong with each data file as ``m`` committed it (its size, its sums, its last
        block): what a read of it would refuse."""
        found = []
        for name in _DATA_FILES:
            try:
                self._checked(m, name)
            except (ValueError, OSError) as exc:
                found.append(str(exc))
        return found

    def rebuild(self, progress: Progress | None = None) -> RefreshResult:
        """Drop the caches and index the whole log again (a small log: drop them, folder and
        all, and index nothing: ADR 0031). Either way the result counts the log's frames."""
        if keeps_none(self.thread) and not self.dir.exists():
            return self._rebuilt_small()  # nothing to drop: no folder is made for it
        with self._lock():
            log = self.thread.open_log()
            if log is None:
                self._remove()
                return RefreshResult("rebuilt", 0)
            with log:
                if SMALL_LOG_BYTES <= 0 or log.size() >= SMALL_LOG_BYTES:
                    delta = _index_run(self.thread.id, log, 0, log.end, 0, progress)
                    self._write_fresh(delta)
                    return RefreshResult("rebuilt", delta.frames)
                self._remove()
        import shutil  # not at the top: it imports bz2, lzma and zlib, a hook's 1 ms

        shutil.rmtree(self.dir, ignore_errors=True)  # a small log: the lock goes too
        return self._rebuilt_small()

    def _rebuilt_small(self) -> RefreshResult:
        """A small log's rebuild: no caches, and its frames counted as a large log's are (what
        ``rebuild-index`` and ``verify`` report for the thread agree)."""
        head = self.thread.head()
        return RefreshResult("rebuilt", 0 if head is None else head.seq + 1)

    def problems(self, fresh: IndexDelta | None = None) -> list[str]:
        """What is wrong with the caches on disk (empty when they are sound or absent).

        Caches behind the log are sound (the next refresh catches them up); caches that disagree
        with a fresh index of the same log prefix are not. ``fresh`` is such an index of the
        log up to some end (:meth:`IndexRun.joined`), made by a caller that read every frame
        anyway; used when the caches end there too.
        """
        found = self._problems(fresh)
        if found and self.dir.is_dir():
            # Confirm under the lock: a refresh in another process may have been replacing the
            # files while they were read. Only then, so a sound cache never blocks a refresh.
            with self._lock():
                found = self._problems()
        return found

    def _problems(self, fresh: IndexDelta | None = None) -> list[str]:
        self._files.clear()  # read every file again: verify trusts nothing a handle saw
        manifest = self.manifest()
        if manifest is None:
            if not (self._path(_MANIFEST)).exists():
                return []
            if self._raw_version() not in (_MANIFEST_VERSION, None):
                return []  # another version's caches: the next refresh rebuilds them
            return [f"{_MANIFEST} does not decode or does not match its checksum"]
        log = self.thread.open_log()
        if log is None:
            return ["caches exist for a thread with no log"]
        with log:
            shortfall = self._shortfall(manifest, log.end)
            if shortfall is not None:
                return [f"seq {shortfall[0]}, byte offset {log.end}: {shortfall[1]}"]
            damaged = self._file_problems(manifest)
            if damaged:
                return damaged
            if self._trusted_end(manifest, log, log.end) is None:
                return ["watermark does not match the log (a refresh will rebuild)"]
            if fresh is not None and fresh.end == manifest.log_end:
                delta = fresh
            else:
                delta = _index_run(self.thread.id, log, 0, manifest.log_end, 0)
        found = []
        contents = self._file_contents(delta)
        if manifest != self._manifest_for(delta, None, self._fresh_checks(contents)):
            found.append(f"{_MANIFEST} differs from the log")
        for name, want in contents.items():
            mark = self._watermark(manifest, name)
            try:
                with open(self._path(name), "rb") as f:
                    have = f.read(mark.bytes)
                with open(self._path(_SUMS[name]), "rb") as f:
                    sums = f.read(mark.bytes // BLOCK * SUM)
            except FileNotFoundError:
                found.append(f"{name} or its sums are missing")
                continue
            if have != want:
                found.append(f"{name} differs from the log")
            elif sums != block_sums(want):
                found.append(f"{_SUMS[name]} differs from {name}")
        return found

    # -- lookups (O(1) or O(k) reads; call refresh() first for current answers) --

    def frame_count(self) -> int:
        m = self.manifest()
        return 0 if m is None else m.offsets.entries

    def message_count(self) -> int:
        m = self.manifest()
        return 0 if m is None else m.messages.entries

    def checkpoint_count(self) -> int:
        m = self.manifest()
        return 0 if m is None else m.checkpoints.entries

    def offset(self, seq: int) -> int | None:
        # A committed frame's offset never changes while the log keeps it: the manifest this
        # handle last refreshed to answers for the frames it covers, without reading it again.
        # (A log cut short and indexed again is caught by the read itself: a wrong offset is
        # only a hint the log checks.)
        snap = self._snap
        if snap is not None and 0 <= seq < snap.offsets.entries:
            return self._offset_in(snap, seq)
        return self._offset_in(self.manifest(), seq)

    def _offset_in(self, m: Manifest | None, seq: int) -> int | None:
        """Where frame ``seq`` starts, as ``m`` indexed it; None when not indexed, or when the
        offsets' block is damaged (said on stderr): the log is then read from its start, which
        gives the same frames (an offset is only a hint the log checks)."""
        if m is None or not 0 <= seq < m.offsets.entries:
            return None
        try:
            raw = self._checked(m, _OFFSETS).pread(8, seq * 8)
        except (ValueError, OSError) as exc:
            note_rebuilt(f"the caches of thread {self.thread.id!r}", f"{exc}", "read from the log")
            return None
        return int.from_bytes(raw, "little") if len(raw) == 8 else None

    def messages(self, start: int, stop: int) -> list[MessageRecord]:
        """Message records with ordinals in ``[start, stop)`` (clipped to what is indexed)."""

        def read(m: Manifest | None) -> list[MessageRecord]:
            n = 0 if m is None else m.messages.entries
            lo, hi = max(0, start), min(stop, n)
            if hi <= lo:
                return []
            assert m is not None
            size = MESSAGE_RECORD.size
            raw = self._checked(m, _MESSAGES).pread((hi - lo) * size, lo * size)
            return [MessageRecord(*r) for r in MESSAGE_RECORD.iter_unpack(raw)]

        return self._consistent(read)

    def message_records(self) -> MessageRecords:
        """Every indexed message record, memory-mapped (pages are read only when touched)."""

        def read(m: Manifest | None) -> MessageRecords:
            if m is None:
                return MessageRecords(b"", 0)
            n = m.messages.entries
            checked = self._checked(m, _MESSAGES)
            return MessageRecords(_map(self._path(_MESSAGES), n * MESSAGE_RECORD.size), n, checked)

        return self._consistent(read)

    def checkpoints(self) -> list[CheckpointEntry]:
        """Every checkpoint entry, in log order (O(checkpoints): for planning, not for compile)."""

        def read(m: Manifest | None) -> list[CheckpointEntry]:
            if m is None or not m.checkpoints.bytes:
                return []
            raw = self._checked(m, _CHECKPOINTS).pread(m.checkpoints.bytes, 0)
            return _checkpoints_decoder.decode(b"[" + raw[:-1].replace(b"\n", b",") + b"]")

        return self._consistent(read)

    def selection(self) -> CheckpointSelection:
        """The cumulative checkpoints by (to_seq, seq), for the compile rule's bisections."""

        def read(m: Manifest | None) -> CheckpointSelection:
            if m is None:
                return CheckpointSelection(b"", 0, self._path(_CHECKPOINTS), thread=self.thread)
            n = m.selection.entries
            data = _map(self._path(_SELECTION), n * _SEL_RECORD.size)
            self._checked(m, _SELECTION).check_span(data, 0, n * _SEL_RECORD.size)
            return CheckpointSelection(
                data,
                n,
                self._path(_CHECKPOINTS),
                thread=self.thread,
                entries_size=m.checkpoints.bytes,
                offsets=self,
                entries_checked=self._checked(m, _CHECKPOINTS),
            )

        return self._consistent(read)

    def other_checkpoints(self) -> list[CheckpointEntry]:
        """The checkpoints of kinds other than cumulative_v1, in log order."""

        def read(m: Manifest | None) -> list[CheckpointEntry]:
            if m is None or not m.other.entries:
                return []
            raw = self._checked(m, _OTHER).pread(m.other.bytes, 0)
            entries = self._checked(m, _CHECKPOINTS)
            path = self._path(_CHECKPOINTS)
            return [
                _entry_at(path, off, m.checkpoints.bytes, entries)
                for (off,) in _U64.iter_unpack(raw)
            ]

        return self._consistent(read)

    def marks(self, start_bytes: int = 0) -> tuple[list[MarkEntry], int]:
        """The record and retraction entries from byte ``start_bytes`` of the marks file (0:
        all of them, in log order), and the committed size it was read to. A reader that keeps
        what it read asks again from that size for only the new ones."""

        def read(m: Manifest | None) -> tuple[list[MarkEntry], int]:
            if m is None or m.marks.bytes <= start_bytes:
                return [], 0 if m is None else m.marks.bytes
            marks = self._checked(m, _MARKS)
            raw = marks.pread(m.marks.bytes - start_bytes, start_bytes)
            if start_bytes and marks.pread(1, start_bytes - 1) != b"\n":
                raise ValueError(f"{_MARKS}: byte {start_bytes} does not start a line")
            entries = _marks_decoder.decode(b"[" + raw[:-1].replace(b"\n", b",") + b"]")
            return entries, m.marks.bytes

        return self._consistent(read)

    def _consistent(self, read: Callable[[Manifest | None], _T]) -> _T:
        """``read(manifest)`` over files that match that manifest, without taking the lock.

        A writer removes the manifest before it rewrites any committed byte (a rebuild, the
        merge of the sorted checkpoint file) and commits a new one after; appends only add bytes
        past the watermark. So the same manifest before and after the read proves the read saw
        its version; a missing one, with the folder there, means a rewrite is under way (or
        died), and the lock waits for the writer.
        """
        try:
            return self._consistent_read(read)
        except DAMAGE as exc:
            raise CorruptCache(self.thread.id, f"{type(exc).__name__}: {exc}") from None

    def _consistent_read(self, read: Callable[[Manifest | None], _T]) -> _T:
        for _ in range(3):
            m = self.manifest()
            if m is None:
                break
            try:
                value = read(m)
            except DAMAGE:
                if self.manifest() == m:
                    raise  # the files of a committed version do not hold what it recorded
                continue  # a rewrite replaced them under this read: read the new version
            if self.manifest() == m:
                return value
        if not self.dir.is_dir():
            return read(None)
        with self._lock():
            return read(self.manifest())

    def read(self, from_seq: int, to_seq: int | None = None) -> Iterator[fr.Frame]:
        """Frames from ``from_seq`` on, seeking straight to it through the offset index."""
        for seq, line in self.thread.read_lines(
            from_seq=from_seq, to_seq=to_seq, start_offset=self.offset(from_seq)
        ):
            yield self.thread.decode(seq, line)

    def last_messages(self, k: int) -> list[fr.MessageAppended]:
        """The last ``k`` messages, each read through the offset index."""
        n = self.message_count()
        out: list[fr.MessageAppended] = []
        for rec in self.messages(n - k, n):
            seq = rec.seq
            for frame in self.read(seq, seq):
                assert isinstance(frame, fr.MessageAppended)
                out.append(frame)
        return out

    # -- files --

    def _lock(self) -> _FileLock:
        private_dirs(self.dir)
        return _FileLock(self._path(".lock"))

    def _pread(self, name: str, n: int, at: int) -> bytes:
        return pread_file(self._path(name), n, at)

    @staticmethod
    def _watermark(m: Manifest, name: str) -> Watermark:
        return {
            _OFFSETS: m.offsets,
            _MESSAGES: m.messages,
            _CHECKPOINTS: m.checkpoints,
            _SELECTION: m.selection,
            _OTHER: m.other,
            _MARKS: m.marks,
        }[name]

    def check_length(self) -> None:
        """Raise :class:`CorruptFrame` when the log is shorter than these caches recorded (frames
        were cut from its end). Reads a manifest and the log's end; writes nothing."""
        manifest = self.manifest()
        if manifest is None:
            return
        log = self.thread.open_log()
        end = 0
        if log is not None:
            with log:
                end = log.end
        shortfall = self._shortfall(manifest, end)
        if shortfall is not None:
            raise CorruptFrame(self.thread.id, shortfall[0], end, shortfall[1])

    def _shortfall(self, m: Manifest | None, end: int) -> tuple[int, str] | None:
        """(first missing seq, what is wrong) when the caches indexed this log further than it
        now goes: committed frames were cut from its end (a crash never does that: a torn tail
        is a batch that was never committed, and so never indexed). None otherwise."""
        if m is None or m.version != _MANIFEST_VERSION or m.thread_id != self.thread.id:
            return None
        if m.log_end <= end:
            return None
        return (
            self._first_missing(end),
            f"the log ends here, but its caches indexed it up to seq {m.offsets.last_seq} "
            f"(byte {m.log_end}): committed frames are missing from the log. If that is "
            "expected, `continuity rebuild-index` accepts the log as it is now",
        )

    def _first_missing(self, end: int) -> int:
        """The seq of the first frame at or past byte ``end``, by the offset index."""
        data = self._pread(_OFFSETS, 1 << 30, 0)
        offsets = array("Q")
        offsets.frombytes(data[: len(data) - len(data) % 8])
        if not _LITTLE:
            offsets.byteswap()
        return bisect_left(offsets, end)

    def _trusted_end(
        self, m: Manifest | None, log: LogReader, end: int
    ) -> tuple[Manifest, int] | None:
        """(manifest, log offset to resume from) if the caches still describe this log.

        O(1) reads: the watermark frame must be the one line that ends at ``log_end`` and carry
        the watermark digest (so, the chain being a hash chain, the whole prefix is the one that
        was indexed), and the last entry of each file must equal a fresh index of the log line
        it names (so a damaged or swapped file is caught without reading all of it).
        """
        if (
            m is None
            or m.version != _MANIFEST_VERSION
            or m.thread_id != self.thread.id
            or m.log_end > end
        ):
            return None
        marks = (m.offsets, m.messages, m.checkpoints, m.selection, m.other, m.marks)
        if any((w.last_seq, w.digest) != (m.offsets.last_seq, m.offsets.digest) for w in marks):
            return None
        if (
            m.offsets.entries != m.offsets.last_seq + 1
            or m.offsets.bytes != 8 * m.offsets.entries
            or m.messages.bytes != MESSAGE_RECORD.size * m.messages.entries
            or m.selection.bytes != _SEL_RECORD.size * m.selection.entries
            or m.other.bytes != _U64.size * m.other.entries
            or m.selection.entries + m.other.entries != m.checkpoints.entries
        ):
            return None
        for name in _DATA_FILES:
            mark = self._watermark(m, name)
            path = self._path(name)
            if not path.exists() or path.stat().st_size < mark.bytes:
                return None
        if self._file_problems(m):
            return None
        if m.offsets.entries == 0:
            empty = m.log_end == 0 and m.messages.entries == m.checkpoints.entries == 0
            empty = empty and m.marks.entries == 0
            return (m, 0) if empty else None
        at = self._offset_in(m, m.offsets.last_seq)
        if at is None or at >= m.log_end or (at > 0 and log.pread(1, at - 1) != b"\n"):
            return None
        line = log.pread(m.log_end - at, at)
        if line.find(b"\n") != len(line) - 1:
            return None
        sealed = fr.unseal(line[:-1])
        if sealed is None or sealed[1].hex() != m.offsets.digest:
            return None
        return (m, m.log_end) if self._last_entries_match(log, m) else None

    def _last_entries_match(self, log: LogReader, m: Manifest) -> bool:
        try:
            if m.messages.entries:
                size = MESSAGE_RECORD.size
                raw = self._pread(_MESSAGES, size, m.messages.bytes - size)
                seq = MESSAGE_RECORD.unpack(raw)[0]
                if self._index_line(log, m, seq).messages != raw:
                    return False
            if m.checkpoints.entries:
                raw = _last_line(self._path(_CHECKPOINTS), m.checkpoints.bytes)
                seq = _checkpoint_decoder.decode(raw).seq
                if self._index_line(log, m, seq).checkpoints != raw:
                    return False
            if m.marks.entries:
                raw = _last_line(self._path(_MARKS), m.marks.bytes)
                seq = _mark_decoder.decode(raw).seq
                if self._index_line(log, m, seq).marks != raw:
                    return False
            entries = self._path(_CHECKPOINTS)
            if m.selection.entries:
                raw = self._pread(
                    _SELECTION, _SEL_RECORD.size, m.selection.bytes - _SEL_RECORD.size
                )
                to_seq, seq, offset = _SEL_RECORD.unpack(raw)
                entry = _entry_at(entries, offset, m.checkpoints.bytes)
                if (entry.to_seq, entry.seq, entry.summary_kind) != (to_seq, seq, CUMULATIVE):
                    return False
            if m.other.entries:
                raw = self._pread(_OTHER, _U64.size, m.other.bytes - _U64.size)
                entry = _entry_at(entries, _U64.unpack(raw)[0], m.checkpoints.bytes)
                if entry.summary_kind == CUMULATIVE:
                    return False
        except (CorruptFrame, msgspec.DecodeError, ValueError, IndexError, struct.error):
            return False
        return True

    def _index_line(self, log: LogReader, m: Manifest, seq: int) -> IndexDelta:
        """The index entries of the single log line of frame ``seq`` (as ``m`` locates it)."""
        at = self._offset_in(m, seq)
        if at is None or at >= m.log_end:
            raise IndexError(seq)
        return _index_run(self.thread.id, log, at, log.line_end(at, m.log_end), seq)

    def _manifest_for(
        self, delta: IndexDelta, base: Manifest | None, checks: dict[str, str]
    ) -> Manifest:
        """The manifest that commits ``delta`` on top of ``base`` (None: a fresh index), each
        file's ``checks`` recorded, and its own checksum."""

        def mark(name: str, prev: Watermark | None, entries: int, size: int) -> Watermark:
            e0, b0 = (prev.entries, prev.bytes) if prev else (0, 0)
            return Watermark(delta.last_seq, delta.digest, e0 + entries, b0 + size, checks[name])

        m = Manifest(
            version=_MANIFEST_VERSION,
            thread_id=self.thread.id,
            log_end=delta.end,
            offsets=mark(
                _OFFSETS, base.offsets if base else None, delta.frames, len(delta.offsets)
            ),
            messages=mark(
                _MESSAGES, base.messages if base else None, delta.message_count, len(delta.messages)
            ),
            checkpoints=mark(
                _CHECKPOINTS,
                base.checkpoints if base else None,
                delta.checkpoint_count,
                len(delta.checkpoints),
            ),
            selection=mark(
                _SELECTION,
                base.selection if base else None,
                len(delta.cumulative),
                _SEL_RECORD.size * len(delta.cumulative),
            ),
            other=mark(
                _OTHER,
                base.other if base else None,
                len(delta.other),
                _U64.size * len(delta.other),
            ),
            marks=mark(_MARKS, base.marks if base else None, delta.mark_count, len(delta.marks)),
        )
        return msgspec.structs.replace(m, check=_manifest_check(m))

    @staticmethod
    def _file_contents(delta: IndexDelta) -> dict[str, bytes]:
        """What each data file holds for a fresh index of ``delta`` (a run from the start)."""
        return {
            _OFFSETS: delta.offsets,
            _MESSAGES: delta.messages,
            _CHECKPOINTS: delta.checkpoints,
            _SELECTION: delta.selection_bytes(),
            _OTHER: delta.other_bytes(),
            _MARKS: delta.marks,
        }

    @staticmethod
    def _fresh_checks(contents: dict[str, bytes]) -> dict[str, str]:
        return {
            name: file_check(block_sums(data), tail_of(data, len(data)))
            for name, data in contents.items()
        }

    def _write_fresh(self, delta: IndexDelta) -> None:
        self._snap = None
        self._files.clear()
        self._snap = self._write_fresh_files(delta)

    def _write_fresh_files(self, delta: IndexDelta) -> Manifest:
        # Without a manifest nothing is trusted: a crash between the files below cannot pair
        # the old manifest with some new files and some old ones.
        (self._path(_MANIFEST)).unlink(missing_ok=True)
        remove_temps(self.dir, holding_lock=True)  # every writer here holds self._lock()
        contents = self._file_contents(delta)
        for name, data in contents.items():
            _write_cache(self._path(name), data)
            _write_cache(self._path(_SUMS[name]), block_sums(data))
        m = self._manifest_for(delta, None, self._fresh_checks(contents))
        _write_cache(self._path(_MANIFEST), _encoder.encode(m))
        return m

    def _append(self, base: Manifest, delta: IndexDelta) -> Manifest:
        """Append ``delta`` to the files ``base`` committed (their sums too) and commit the new
        manifest, which is returned. The files' last blocks were found whole by
        :meth:`_trusted_end` (so their sums never take in damage)."""
        appends = {
            _OFFSETS: delta.offsets,
            _MESSAGES: delta.messages,
            _CHECKPOINTS: delta.checkpoints,
            _OTHER: delta.other_bytes(base.checkpoints.bytes),
            _MARKS: delta.marks,
        }
        selection = delta.selection_bytes(base.checkpoints.bytes)
        merged: bytes | None = None
        if selection and base.selection.entries:
            sel = self._checked(base, _SELECTION)
            last = sel.pread(_SEL_RECORD.size, base.selection.bytes - _SEL_RECORD.size)
            if _SEL_RECORD.unpack(selection[: _SEL_RECORD.size])[:2] < _SEL_RECORD.unpack(last)[:2]:
                # An older to_seq than the newest indexed: the sorted file is rewritten whole.
                old = sel.pread(base.selection.bytes, 0)
                recs = sorted([*_SEL_RECORD.iter_unpack(old), *_SEL_RECORD.iter_unpack(selection)])
                merged = b"".join(_SEL_RECORD.pack(*r) for r in recs)
        checks: dict[str, str] = {}
        if merged is None:
            appends[_SELECTION] = selection
        else:
            (self._path(_MANIFEST)).unlink()  # the rewrite is only trusted once committed below
            _write_cache(self._path(_SELECTION), merged)
            _write_cache(self._path(_SUMS[_SELECTION]), block_sums(merged))
            checks[_SELECTION] = file_check(block_sums(merged), tail_of(merged, len(merged)))
        for name, data in appends.items():
            checks[name] = self._append_file(name, self._watermark(base, name), data)
        m = self._manifest_for(delta, base, checks)
        _write_cache(self._path(_MANIFEST), _encoder.encode(m))
        return m

    def _append_file(self, name: str, mark: Watermark, data: bytes) -> str:
        """Append ``data`` to data file ``name`` past its watermark, and the sums of the blocks
        it completes past the committed ones; returns the file's new check."""
        path, sums = self._path(name), self._path(_SUMS[name])
        full = mark.bytes // BLOCK
        if not data and os.stat(path).st_size == mark.bytes:
            if os.stat(sums).st_size != full * SUM:
                os.truncate(sums, full * SUM)
            return mark.check  # nothing to add, and nothing past the watermark to drop
        tail = self._pread(name, mark.bytes - full * BLOCK, full * BLOCK)
        grown = tail + data
        added = block_sums(grown)
        with open(path, "r+b") as f:
            f.truncate(mark.bytes)  # drop what a crashed writer left past the watermark
            f.seek(mark.bytes)
            f.write(data)
        with open(sums, "r+b") as f:
            f.truncate(full * SUM)
            f.seek(full * SUM)
            f.write(added)
        kept = self._pread(_SUMS[name], full * SUM, 0)
        return file_check(kept + added, tail_of(grown, mark.bytes + len(data)))

    def _remove(self) -> None:
        self._snap = None
        self._files.clear()
        for name in (_MANIFEST, *_DATA_FILES, *_SUMS.values()):
            (self._path(name)).unlink(missing_ok=True)


DAMAGE: Final = (
    msgspec.DecodeError,
    msgspec.ValidationError,
    UnicodeDecodeError,
    ValueError,
    IndexError,
    struct.error,
    OSError,
)
"""What reading a damaged cache file raises (a bad offset seeks to EINVAL: an OSError)."""

_WRITABLE: Final[dict[Path, bool]] = {}
_NO_ROOM: Final[dict[Path, tuple[float, str]]] = {}
"""Cache folders a write found no room in: when (``time.monotonic()``), and the reason."""
NO_ROOM_RETRY_SECONDS: Final = 30.0
"""How long a process reads a store whose disk was full as a read-only one before it tries to
write its caches again (a CLI command ends long before; a viewer catches up after that)."""


def caches_writable(cache_dir: Path) -> bool:
    """Whether this process can write the caches in ``cache_dir`` (asked once per process):
    not on a read-only mount or in a folder it lacks permission for, nor, for a while, on a
    disk where a write found no room (:func:`writing_caches`)."""
    full = _NO_ROOM.get(cache_dir)
    if full is not None:
        if time.monotonic() - full[0] < NO_ROOM_RETRY_SECONDS:
            return False
        _NO_ROOM.pop(cache_dir, None)
    known = _WRITABLE.get(cache_dir)
    if known is None:
        folder = cache_dir
        while not folder.exists() and folder.parent != folder:
            folder = folder.parent  # a deleted cache folder is made again where it was
        known = _WRITABLE[cache_dir] = os.access(folder, os.W_OK)
    return known


@contextmanager
def writing_caches(cache_dir: Path) -> Iterator[None]:
    """Around the writes that bring caches in ``cache_dir`` up to date. One that finds no room
    (a full disk, a quota, a file size limit: :func:`continuity._fs.no_room`) raises
    :class:`CachesReadOnly` saying so, and teaches this process that the folder cannot be
    written: :func:`caches_writable` says False from then on, so every reader takes the path
    of a read-only store, computing what it needs in memory (and a refresh uses caches that
    are current already). What the failed write left is never trusted: an atomic write left
    nothing; an append left bytes past a watermark, which the next one drops."""
    try:
        yield
    except OSError as exc:
        if not no_room(exc):
            raise
        reason = exc.strerror or str(exc)
        _NO_ROOM[cache_dir] = (time.monotonic(), reason)
        raise CachesReadOnly(f"the caches in {cache_dir} cannot be written: {reason}") from None


def _why_unwritable(cache_dir: Path) -> str:
    full = _NO_ROOM.get(cache_dir)
    return "" if full is None else f": {full[1]}"


class _FileLock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = -1

    def __enter__(self) -> _FileLock:
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)


def _write_cache(path: Path, data: bytes) -> None:
    atomic_write(path, data, durable=False)  # no fsync: a cache is rebuilt, not recovered


def check_no_lost_threads(store: BaseStore) -> None:
    """Raise :class:`CorruptFrame` when a log that holds no committed frame any more was indexed
    further by its caches: every committed frame of that thread was cut from its log. Such a
    thread is not in :meth:`BaseStore.threads`, so a store-wide answer (``stats``, ``threads``,
    a search of every thread) would leave it out without a word; one log's end and manifest
    per such log, nothing for the others."""
    if store.cache_dir is None:
        return
    live = set(store.threads())
    for tid in store.stored_thread_ids():
        if tid not in live:
            thread = store.thread(tid)
            if ThreadIndex.available(thread):
                ThreadIndex(thread).check_length()


def rebuild_all(
    store: BaseStore,
    threads: Sequence[Thread] | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, RefreshResult]:
    """Rebuild the caches of the given threads (default: all), removing caches of vanished ones;
    for a store that keeps its derived data as rows (:meth:`Thread.derived`), drop and derive
    those rows again (nothing to do for a store that keeps neither)."""
    chosen = [store.thread(tid) for tid in store.threads()] if threads is None else threads
    if store.cache_dir is None:
        rebuilt: dict[str, RefreshResult] = {}
        for thread in chosen:
            derived = thread.derived()
            if derived is not None:
                rebuilt[thread.id] = RefreshResult("rebuilt", derived.rebuild())
        return rebuilt
    results: dict[str, RefreshResult] = {}
    for thread in chosen:
        step = None if progress is None else functools.partial(progress, thread.id)
        results[thread.id] = ThreadIndex(thread).rebuild(step)
    if threads is None:
        folder = store.cache_dir / "threads"
        if folder.is_dir():
            for sub in folder.iterdir():
                if sub.is_dir() and sub.name not in results:
                    import shutil  # not at the top: it imports bz2, lzma and zlib, a hook's 1 ms

                    shutil.rmtree(sub, ignore_errors=True)
    return results


def _map(path: Path, size: int) -> bytes | mmap.mmap:
    """The first ``size`` bytes of a file: mapped when large, read when small."""
    if size <= 0:
        return b""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return b""
    try:
        if size <= 64 * 1024:
            return os.pread(fd, size, 0)
        return mmap.mmap(fd, size, access=mmap.ACCESS_READ)
    finally:
        os.close(fd)


def _entry_at(
    path: Path, offset: int, size: int | None = None, checked: CheckedFile | None = None
) -> CheckpointEntry:
    """The entry whose line starts at ``offset``; with ``size``, it must lie within that many
    bytes and start a line (else ValueError), as a check of an index that may be damaged; with
    ``checked``, the blocks under the line must match their checksums."""
    with open(path, "rb") as f:
        if size is not None:
            if not 0 <= offset < size:
                raise ValueError(f"checkpoint entry offset {offset} outside {size} bytes")
            if offset > 0:
                f.seek(offset - 1)
                if f.read(1) != b"\n":
                    raise ValueError(f"checkpoint entry offset {offset} is not a line start")
        f.seek(offset)
        line = f.readline()
    if checked is not None:
        line = checked.pread(len(line), offset)
    return _checkpoint_decoder.decode(line)


class MessageRecords:
    """The message index as a read-only sequence of :class:`MessageRecord`, without copying."""

    def __init__(self, data: bytes | mmap.mmap, n: int, checked: CheckedFile | None = None) -> None:
        self._data = data
        self._n = n
        self._checked = checked
        """The file's block checksums: each block a lookup touches is checked (once)."""

    def __len__(self) -> int:
        return self._n

    def _at(self, i: int) -> int:
        if not 0 <= i < self._n:
            raise IndexError(i)
        at = i * MESSAGE_RECORD.size
        if self._checked is not None:
            try:
                self._checked.check_span(self._data, at, at + MESSAGE_RECORD.size)
            except ValueError as exc:
                raise CorruptCache("", str(exc)) from None
        return at

    def __getitem__(self, i: int) -> MessageRecord:
        return MessageRecord(*MESSAGE_RECORD.unpack_from(self._data, self._at(i)))

    def seq(self, i: int) -> int:
        return int(_U64.unpack_from(self._data, self._at(i))[0])

    def count_upto(self, seq: int) -> int:
        """How many messages have a seq ≤ ``seq`` (a bisection). Each record the bisection
        looks at is checked against its neighbours (the seqs rise strictly): a damaged record
        that would steer the answer is :class:`CorruptCache`, never a wrong count (one that is
        never looked at leaves the path, and so the answer, as it was)."""
        lo, hi = 0, self._n
        get = self.seq
        while lo < hi:
            mid = (lo + hi) // 2
            here = get(mid)
            if (mid > 0 and get(mid - 1) >= here) or (mid + 1 < self._n and get(mid + 1) <= here):
                raise CorruptCache("", f"{_MESSAGES} is not in seq order at record {mid}")
            if seq < here:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def tokens(self, start: int, stop: int) -> list[int]:
        start, stop = max(0, start), min(stop, self._n)
        size = MESSAGE_RECORD.size
        if stop <= start:
            return []
        if self._checked is not None:
            try:
                self._checked.check_span(self._data, start * size, stop * size)
            except ValueError as exc:
                raise CorruptCache("", str(exc)) from None
        return [r[1] for r in MESSAGE_RECORD.iter_unpack(self._data[start * size : stop * size])]


class _Column:
    """A sequence view of one field, for :func:`bisect.bisect_right`."""

    def __init__(self, source: MessageRecords | CheckpointSelection, get: Callable[[int], int]):
        self._len = len(source)
        self._get = get

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, i: int) -> int:
        return self._get(i)


_ORDERED: Final[set[bytes]] = set()
"""blake3 digests of selection records found in (to_seq, seq) order in this process."""


class CheckpointSelection:
    """The cumulative_v1 checkpoints sorted by (to_seq, seq), read by bisection.

    ``latest(max_to_seq, anchor_seq)`` is the compile rule's step: the checkpoint with the
    greatest ``to_seq <= max_to_seq`` (the later frame on a tie) among those at or before the
    anchor, skipping excluded checkpoint ids.
    """

    def __init__(
        self,
        data: bytes | mmap.mmap,
        n: int,
        entries: Path,
        *,
        thread: Thread | None = None,
        entries_size: int | None = None,
        offsets: ThreadIndex | None = None,
        entries_checked: CheckedFile | None = None,
    ) -> None:
        self._data = data
        self._n = n
        self._entries = entries
        self._entries_checked = entries_checked
        self._thread = thread
        self._entries_size = entries_size
        self._offsets = offsets
        if thread is not None and n > 1:
            # A bisection trusts the order: check it whole (24 bytes a checkpoint), so a damaged
            # record can never steer the compile rule to another checkpoint unnoticed. Records
            # once found in order are remembered by their hash (a tenth of the sort's time).
            raw = bytes(data[: n * _SEL_RECORD.size])
            digest = blake3.blake3(raw).digest()
            if digest not in _ORDERED:
                keys = array("Q")
                keys.frombytes(raw)
                if not _LITTLE:
                    keys.byteswap()
                pairs = list(zip(keys[0::3], keys[1::3], strict=True))
                if pairs != sorted(pairs):
                    raise CorruptCache(thread.id, f"{_SELECTION} is not in (to_seq, seq) order")
                if len(_ORDERED) >= 1024:
                    _ORDERED.clear()
                _ORDERED.add(digest)

    def __len__(self) -> int:
        return self._n

    def _to_seq(self, i: int) -> int:
        return int(_U64.unpack_from(self._data, i * _SEL_RECORD.size)[0])

    def latest(
        self, max_to_seq: int, anchor_seq: int, exclude: frozenset[str] = frozenset()
    ) -> CheckpointEntry | None:
        try:
            return self._latest(max_to_seq, anchor_seq, exclude)
        except DAMAGE as exc:
            tid = self._thread.id if self._thread is not None else "?"
            raise CorruptCache(tid, f"{type(exc).__name__}: {exc}") from None

    def _latest(
        self, max_to_seq: int, anchor_seq: int, exclude: frozenset[str]
    ) -> CheckpointEntry | None:
        i = bisect_right(_Column(self, self._to_seq), max_to_seq) - 1
        if self._thread is not None and i + 1 < self._n:
            # The record after the answer bounds it: a to_seq raised by damage (order kept)
            # would hide the right checkpoint behind an older one. Check it against its entry.
            to_seq, seq, offset = _SEL_RECORD.unpack_from(self._data, (i + 1) * _SEL_RECORD.size)
            after = _entry_at(self._entries, offset, self._entries_size, self._entries_checked)
            if (after.to_seq, after.seq) != (to_seq, seq):
                raise CorruptCache(self._thread.id, f"checkpoint record {i + 1} ≠ its entry")
        while i >= 0:
            to_seq, seq, offset = _SEL_RECORD.unpack_from(self._data, i * _SEL_RECORD.size)
            i -= 1
            if self._thread is None:
                if seq > anchor_seq:
                    continue
                entry = _entry_at(self._entries, offset)
            else:  # every record looked at, skipped or not, must be its entry's
                entry = _entry_at(self._entries, offset, self._entries_size, self._entries_checked)
                if (entry.to_seq, entry.seq) != (to_seq, seq):
                    raise CorruptCache(self._thread.id, f"checkpoint record {i + 1} ≠ its entry")
                if seq > anchor_seq:
                    continue
                self._check(entry, to_seq, seq)
            if entry.checkpoint_id not in exclude:
                return entry
        return None

    def _check(self, entry: CheckpointEntry, to_seq: int, seq: int) -> None:
        """The entry a compile is about to use must be its record's and its frame's: one
        checked read of the checkpoint frame from the log (which the chain vouches for)."""
        thread = self._thread
        if thread is None:
            return
        if (entry.to_seq, entry.seq) != (to_seq, seq):
            raise CorruptCache(thread.id, f"checkpoint entry at seq {entry.seq} ≠ its record")
        start = self._offsets.offset(seq) if self._offsets is not None else None
        line = next(thread.read_lines(from_seq=seq, to_seq=seq, start_offset=start), None)
        frame = thread.decode(seq, line[1]) if line is not None else None
        if not (
            isinstance(frame, fr.CompactionCheckpointCreated) and CheckpointEntry.of(frame) == entry
        ):
            raise CorruptCache(thread.id, f"checkpoint entry at seq {seq} is not the log's")
