"""The cold tier of the folder store (ADR 0057): old stretches of a log kept zstd-compressed.

A log ``threads/<id>.jsonl`` is append-only and never rewritten. Tiering copies a *prefix* of
it, whole lines, into compressed segment files beside it, then gives the prefix's disk blocks
back to the file system by punching a hole over it (``fallocate(PUNCH_HOLE | KEEP_SIZE)``): the
file keeps its size and every byte offset, so appends, the offset index and every cache keyed
by offset are untouched, and each read of the prefix is served from the segments instead::

    <store>/threads/<id>.jsonl                       the log; bytes [0, E) read as zeros
    <store>/threads/<id>.cold/<start>-<end>.seg      bytes [start, end) of the log, compressed

The segments of a log cover ``[0, E)`` without gap, in order. A segment file is a run of
independent zstd frames, each the compression of whole lines (about :data:`BLOCK` bytes), then
a footer: the blocks' places, the blake3 digest of the raw bytes, its length (8 bytes, little
endian) and :data:`MAGIC`. A read decompresses only the blocks it touches.

Crash safety: a segment is written whole to a temporary name, fsynced, renamed and its folder
fsynced *before* any hole is punched, so at every instant each byte of the prefix is in the
segment, in the log, or both; a reader that loaded the segment list before a tiering ran reads
zeros where a hole was just punched — JSON lines never hold a NUL byte — and loads the list
again (:meth:`ColdReader.pread`).
"""

from __future__ import annotations

import _thread  # threading.Lock itself, without threading's import (a hook's 0.5 ms)
import errno
import os
import sys
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Final, Protocol

import blake3
import msgspec

from continuity import frames as fr
from continuity._fs import fsync_dir, private_dirs
from continuity.errors import CorruptFrame
from continuity.store.base import ColdMove

__all__ = [
    "BLOCK",
    "MAGIC",
    "ColdMove",
    "ColdReader",
    "Segment",
    "check_segment",
    "cold_dir",
    "covered_end",
    "drop_cached_blocks",
    "punch_hole",
    "segment_name",
    "segments_of",
    "write_segment",
]

BLOCK: Final = 1 << 18
"""Raw bytes per compressed block (cut at a line end; a longer line is a block of its own)."""
MAGIC: Final = b"continuity-cold-segment-v1\n"
SUFFIX: Final = ".seg"
_LEVEL: Final = 10
_CACHE_BYTES: Final = 32 << 20
"""Decompressed blocks kept by a process, shared by its readers (the MCP server, the viewer and
a search read the same few blocks again and again)."""
_TAIL: Final = 8 + len(MAGIC)


class _Block(msgspec.Struct, array_like=True, frozen=True):
    raw_at: int  # offset in the log
    raw_len: int
    at: int  # offset in the segment file
    length: int
    first_seq: int  # the seq of the block's first line: a seq is found without a bisection


class _Footer(msgspec.Struct, frozen=True):
    version: int
    start: int
    end: int
    blake3: str
    blocks: list[_Block]


_footer_decoder: Final = msgspec.json.Decoder(_Footer)


def cold_dir(log_path: Path) -> Path:
    """The folder that holds the segments of the log at ``log_path``."""
    return log_path.with_suffix(".cold")


def segment_name(start: int, end: int) -> str:
    return f"{start:015d}-{end:015d}{SUFFIX}"


class Segment(msgspec.Struct, frozen=True):
    """One segment file: the log's bytes ``[start, end)``."""

    start: int
    end: int
    path: str


def segments_of(folder: Path) -> list[Segment] | None:
    """The segments in ``folder``, in order (None when there is no folder: an untiered log).
    Names that are not segments (a temporary file of a tiering in flight) are ignored."""
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return None
    found: list[Segment] = []
    for name in names:
        if not name.endswith(SUFFIX):
            continue
        a, sep, b = name[: -len(SUFFIX)].partition("-")
        if sep and a.isdigit() and b.isdigit() and int(a) < int(b):
            found.append(Segment(int(a), int(b), str(folder / name)))
    found.sort(key=lambda s: s.start)
    return found


def covered_end(segments: list[Segment]) -> int:
    """The end of the prefix ``[0, E)`` the segments cover without a gap (0 if none)."""
    end = 0
    for seg in segments:
        if seg.start != end:
            break
        end = seg.end
    return end


class _Open:
    """A segment file opened, its footer read (once per process while the file is the same)."""

    __slots__ = ("blocks", "fd", "key", "segment", "starts")

    def __init__(self, segment: Segment, log_name: str) -> None:
        self.segment = segment
        self.fd = os.open(segment.path, os.O_RDONLY)
        try:
            st = os.fstat(self.fd)
            self.key = (segment.path, st.st_ino, st.st_size, st.st_mtime_ns)
            with _LOCK:
                known = _FOOTERS.get(segment.path)
            if known is not None and known[0] == self.key:
                footer = known[1]
            else:
                footer = read_footer(self.fd, segment, log_name)
                with _LOCK:
                    if len(_FOOTERS) > 1024:
                        _FOOTERS.clear()
                    _FOOTERS[segment.path] = (self.key, footer)
        except BaseException:
            os.close(self.fd)
            raise
        self.blocks = footer.blocks
        self.starts = [b.raw_at for b in footer.blocks]


_LOCK: Final = _thread.allocate_lock()
_FOOTERS: dict[str, tuple[tuple[str, int, int, int], _Footer]] = {}
_BLOCKS: OrderedDict[tuple[tuple[str, int, int, int], int], bytes] = OrderedDict()
_cached_bytes = [0]


def _cached(key: tuple[tuple[str, int, int, int], int]) -> bytes | None:
    with _LOCK:
        data = _BLOCKS.get(key)
        if data is not None:
            _BLOCKS.move_to_end(key)
        return data


def _keep(key: tuple[tuple[str, int, int, int], int], data: bytes) -> None:
    with _LOCK:
        if key in _BLOCKS:
            return
        _BLOCKS[key] = data
        _cached_bytes[0] += len(data)
        while _cached_bytes[0] > _CACHE_BYTES and len(_BLOCKS) > 1:
            _k, old = _BLOCKS.popitem(last=False)
            _cached_bytes[0] -= len(old)


def drop_cached_blocks() -> None:
    """Forget every decompressed block and footer this process keeps (benchmarks, tests)."""
    with _LOCK:
        _BLOCKS.clear()
        _FOOTERS.clear()
        _cached_bytes[0] = 0


def read_footer(fd: int, segment: Segment, log_name: str) -> _Footer:
    """The footer of an open segment file, checked against its name; a damaged one is a
    :class:`CorruptFrame` naming the segment."""
    size = os.fstat(fd).st_size

    def bad(why: str) -> CorruptFrame:
        where = os.path.basename(segment.path)
        return CorruptFrame(log_name, None, segment.start, f"cold segment {where}: {why}")

    if size < _TAIL:
        raise bad("shorter than its footer")
    tail = os.pread(fd, _TAIL, size - _TAIL)
    if tail[8:] != MAGIC:
        raise bad("no end marker (cut short or not a segment)")
    n = int.from_bytes(tail[:8], "little")
    if not 0 < n <= size - _TAIL:
        raise bad("footer length out of range")
    try:
        footer = _footer_decoder.decode(os.pread(fd, n, size - _TAIL - n))
    except msgspec.DecodeError as exc:
        raise bad(f"unreadable footer ({exc})") from None
    if (footer.start, footer.end) != (segment.start, segment.end):
        raise bad(f"its footer says bytes {footer.start}-{footer.end}")
    pos = footer.start
    for block in footer.blocks:
        if block.raw_at != pos or block.raw_len <= 0:
            raise bad("its blocks do not cover its range in order")
        pos += block.raw_len
    if pos != footer.end:
        raise bad("its blocks do not cover its range")
    return footer


class ColdReader:
    """Reads a log's bytes, serving its cold prefix from the segments.

    ``raw(n, offset)`` reads the log file itself. The list of segments is read when a read of
    the file meets a NUL byte — a hole, punched before or while this reader lives (JSON lines
    never hold one) — so an untiered log is never listed, and a long-lived reader stays right
    while the log is tiered under it. Where tiering could not punch a hole the file's bytes are
    still there, and the same.
    """

    __slots__ = ("_folder", "_log_name", "_open", "_raw", "end", "segments")

    def __init__(self, folder: Path, log_name: str, raw: Callable[[int, int], bytes]) -> None:
        self._folder = folder
        self._log_name = log_name
        self._raw = raw
        self._open: dict[int, _Open] = {}
        self.segments: list[Segment] = []
        self.end = 0  # nothing is listed until a read meets a hole

    def reload(self) -> bool:
        """Read the segment list again; whether the cold prefix grew."""
        segments = segments_of(self._folder) or []
        end = covered_end(segments)
        grew = end > self.end
        self.segments = [s for s in segments if s.end <= end]
        self.end = end
        return grew

    def close(self) -> None:
        for opened in self._open.values():
            os.close(opened.fd)
        self._open.clear()

    def pread(self, n: int, offset: int) -> bytes:
        if n <= 0:
            return b""
        if offset >= self.end:
            data = self._raw(n, offset)
            if b"\0" not in data or not self.reload() or offset >= self.end:
                return data
        head = self._cold(min(n, self.end - offset), offset)
        if offset + n <= self.end:
            return head
        rest = self.pread(offset + n - self.end, self.end)
        return head + rest

    def narrow(self, seq: int) -> tuple[int, int | None] | None:
        """Where frame ``seq`` is, when it is in the cold tier: (the start of its block, the
        start of the next block or None) — a line start whose seq is at most ``seq``, and a
        bound past it. None when the log has no cold tier or the seq is not in it."""
        if not self.end:
            self.reload()
        found: tuple[int, int | None] | None = None
        for seg in self.segments:
            opened = self._opened(seg)
            if not opened.blocks or opened.blocks[0].first_seq > seq:
                break
            firsts = [b.first_seq for b in opened.blocks]
            i = _bisect_right(firsts, seq) - 1
            nxt = opened.blocks[i + 1].raw_at if i + 1 < len(opened.blocks) else None
            found = (opened.blocks[i].raw_at, nxt)
            if nxt is not None:
                break
        return found

    def _cold(self, n: int, offset: int) -> bytes:
        """``n`` bytes at ``offset``, all inside ``[0, end)``."""
        parts: list[bytes] = []
        pos, stop = offset, offset + n
        while pos < stop:
            seg = self._segment_at(pos)
            opened = self._opened(seg)
            i = _bisect_right(opened.starts, pos) - 1
            while pos < stop and i < len(opened.blocks):
                block = opened.blocks[i]
                data = self._block(opened, block)
                lo = pos - block.raw_at
                hi = min(block.raw_len, stop - block.raw_at)
                parts.append(data[lo:hi] if lo or hi != len(data) else data)
                pos = block.raw_at + hi
                i += 1
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _segment_at(self, pos: int) -> Segment:
        segs = self.segments
        lo, hi = 0, len(segs)
        while lo < hi:
            mid = (lo + hi) // 2
            if segs[mid].end <= pos:
                lo = mid + 1
            else:
                hi = mid
        return segs[lo]

    def _opened(self, seg: Segment) -> _Open:
        opened = self._open.get(seg.start)
        if opened is None:
            try:
                opened = _Open(seg, self._log_name)
            except FileNotFoundError:
                raise CorruptFrame(
                    self._log_name, None, seg.start, f"cold segment {seg.path} is missing"
                ) from None
            self._open[seg.start] = opened
        return opened

    def _block(self, opened: _Open, block: _Block) -> bytes:
        key = (opened.key, block.raw_at)
        data = _cached(key)
        if data is None:
            data = _decompress(opened.fd, block, self._log_name)
            _keep(key, data)
        return data


def _decompress(fd: int, block: _Block, log_name: str) -> bytes:
    """One block of an open segment file, decompressed; a damaged one is a CorruptFrame."""
    comp = os.pread(fd, block.length, block.at)
    try:
        data = _decompressor().decompress(comp, max_output_size=block.raw_len)
    except Exception as exc:  # zstandard.ZstdError: a damaged block
        raise CorruptFrame(log_name, None, block.raw_at, f"cold block unreadable ({exc})") from None
    if len(comp) != block.length or len(data) != block.raw_len:
        raise CorruptFrame(log_name, None, block.raw_at, "cold block shorter than its footer says")
    return data


def _bisect_right(a: list[int], x: int) -> int:
    lo, hi = 0, len(a)
    while lo < hi:
        mid = (lo + hi) // 2
        if x < a[mid]:
            hi = mid
        else:
            lo = mid + 1
    return lo


_DECOMPRESSOR: list[object] = []


def _decompressor() -> _Decompressor:
    if not _DECOMPRESSOR:
        import zstandard

        _DECOMPRESSOR.append(zstandard.ZstdDecompressor())
    return _DECOMPRESSOR[0]  # type: ignore[return-value]


class _Decompressor(Protocol):  # the part of zstandard.ZstdDecompressor used here
    def decompress(self, data: bytes, max_output_size: int = 0) -> bytes: ...


def write_segment(
    folder: Path, log_name: str, read: Callable[[int, int], bytes], start: int, end: int
) -> Segment:
    """Compress the log's bytes ``[start, end)`` (whole lines, read with ``read``) into a new
    segment in ``folder``: written to a temporary name, fsynced, renamed, the folder fsynced.
    A NUL byte in what is read — a hole, its segment missing — is refused, never copied."""
    import zstandard

    private_dirs(folder)
    name = segment_name(start, end)
    tmp = folder / f".{name}.{os.getpid()}.tmp"
    comp = zstandard.ZstdCompressor(level=_LEVEL, write_checksum=True)
    digest = blake3.blake3()
    blocks: list[_Block] = []
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        at, block_at, pos, carry = 0, start, start, b""
        while block_at < end:
            want = min(BLOCK, end - pos)
            new = read(want, pos) if want > 0 else b""
            if want > 0 and not new:
                raise OSError(f"{log_name}: the log ended at byte {pos}, before {end}")
            if b"\0" in new:
                raise CorruptFrame(
                    log_name, None, pos, "NUL bytes in the log (a hole whose segment is missing)"
                )
            pos += len(new)
            data = carry + new
            if pos < end:
                cut = data.rfind(b"\n") + 1
                if cut == 0:  # one line longer than a block: read on to its end
                    carry = data
                    continue
            elif data.endswith(b"\n"):
                cut = len(data)
            else:
                raise CorruptFrame(log_name, None, end, "the stretch does not end a line")
            chunk, carry = data[:cut], data[cut:]
            packed = comp.compress(chunk)
            _write_all(fd, packed)
            first = fr.envelope(chunk[: chunk.index(b"\n")])
            if first is None:
                raise CorruptFrame(log_name, None, block_at, "not a sealed frame")
            blocks.append(_Block(block_at, len(chunk), at, len(packed), first.seq))
            digest.update(chunk)
            block_at += len(chunk)
            at += len(packed)
        footer = msgspec.json.encode(_Footer(1, start, end, digest.hexdigest(), blocks))
        _write_all(fd, footer + len(footer).to_bytes(8, "little") + MAGIC)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    final = folder / name
    os.replace(tmp, final)
    fsync_dir(folder)
    return Segment(start, end, str(final))


def check_segment(segment: Segment, log_name: str) -> int:
    """Decompress a whole segment and check it against its footer's digest; its raw size."""
    try:
        fd = os.open(segment.path, os.O_RDONLY)
    except FileNotFoundError:
        raise CorruptFrame(
            log_name, None, segment.start, f"cold segment {segment.path} is missing"
        ) from None
    try:
        footer = read_footer(fd, segment, log_name)
        digest = blake3.blake3()
        for block in footer.blocks:
            digest.update(_decompress(fd, block, log_name))
        if digest.hexdigest() != footer.blake3:
            where = os.path.basename(segment.path)
            raise CorruptFrame(
                log_name, None, segment.start, f"cold segment {where}: digest differs"
            )
        return segment.end - segment.start
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


_FALLOC_FL_KEEP_SIZE: Final = 0x01
_FALLOC_FL_PUNCH_HOLE: Final = 0x02
_fallocate: list[Callable[..., int]] = []


def punch_hole(fd: int, offset: int, length: int) -> str | None:
    """Give the disk blocks under ``[offset, offset + length)`` back (they read as zeros);
    None when done, else why the file system could not (the bytes then stay, readable)."""
    if length <= 0:
        return None
    if not sys.platform.startswith("linux"):
        return f"punching holes is not supported on {sys.platform}"
    if not _fallocate:
        import ctypes.util

        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fn = libc.fallocate
        fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
        fn.restype = ctypes.c_int
        _fallocate.append(fn)
    mode = _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE
    if _fallocate[0](fd, mode, offset, length) != 0:
        import ctypes

        err = ctypes.get_errno()
        if err in (errno.EOPNOTSUPP, errno.ENOSYS):
            return "the file system cannot punch holes"
        raise OSError(err, os.strerror(err))
    return None
