"""Checksums of a cache file by 4 KiB blocks, so a damaged byte is never served, at the cost
of hashing only the blocks a read touches.

A data file of ``size`` bytes that only grows by appends keeps, beside it, a sums file: 8 bytes
of blake3 for each *complete* 4 KiB block, in order (``<name>.b3``). The partial last block
has no entry there (appending would change it in place, under the feet of a reader of the
committed prefix); instead the manifest that commits ``size`` holds one digest,
:func:`file_check`, over the complete blocks' sums and the partial block's sum. So:

- opening a file for reads (:meth:`CheckedFile.open`) reads its sums (a 512th of the file) and
  its partial block, and compares one digest with the manifest's: the sums file and the last
  block are proven whole;
- each complete block a read touches is hashed and compared with its sum, once per handle.

Appends add sums for the blocks they complete (past the committed ones: a reader of the old
prefix sees the sums it expects), and the manifest, replaced last, commits the new digest.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path
from typing import Final

import blake3

__all__ = [
    "BLOCK",
    "SUM",
    "CheckedFile",
    "block_sums",
    "file_check",
    "pread_file",
    "sums_path",
    "tail_of",
]

BLOCK: Final = 4096
SUM: Final = 8


def _sum(block: bytes | memoryview) -> bytes:
    return blake3.blake3(block).digest(SUM)


def block_sums(data: bytes | memoryview) -> bytes:
    """The sums of the complete blocks of ``data`` (which starts on a block boundary)."""
    view = memoryview(data)
    return b"".join(_sum(view[i : i + BLOCK]) for i in range(0, len(view) - BLOCK + 1, BLOCK))


def tail_of(data: bytes, size: int) -> bytes:
    """The partial last block of a file whose first ``size`` bytes ``data`` ends with."""
    return data[len(data) - size % BLOCK :] if size % BLOCK else b""


def file_check(sums: bytes, tail: bytes) -> str:
    """The digest a manifest keeps of a file: its complete blocks' sums and its partial block."""
    return blake3.blake3(sums + (_sum(tail) if tail else b"")).hexdigest(16)


def sums_path(path: Path) -> Path:
    return path.with_name(path.name + ".b3")


class CheckedFile:
    """Reads of the first ``size`` bytes of a data file, each block checked against its sum."""

    def __init__(self, path: Path, size: int, sums: bytes) -> None:
        self.path = path
        self.size = size
        self._sums = sums
        self._ok = bytearray(len(sums) // SUM)
        """1 for each complete block found whole by this handle."""

    @classmethod
    def open(cls, path: Path, size: int, check: str) -> CheckedFile:
        """The file as committed with ``check`` at ``size`` bytes; ``ValueError`` when its sums
        or its partial last block do not hash to ``check`` (a missing file is empty)."""
        full = size // BLOCK
        sums = pread_file(sums_path(path), full * SUM, 0)
        tail = pread_file(path, size - full * BLOCK, full * BLOCK)
        if len(sums) != full * SUM or len(tail) != size - full * BLOCK:
            raise ValueError(f"{path.name} is shorter than its manifest records ({size} bytes)")
        if file_check(sums, tail) != check:
            raise ValueError(f"{path.name} does not match its checksum (its last block or sums)")
        return cls(path, size, sums)

    def check(self, data: bytes | memoryview, start: int) -> None:
        """``ValueError`` unless ``data``, read from byte ``start`` and ending at a block boundary
        or at :attr:`size`, holds every complete block it covers whole."""
        view = memoryview(data)
        first = start // BLOCK
        stop = (start + len(view)) // BLOCK
        for block in range(first, min(stop, len(self._ok))):
            if self._ok[block]:
                continue
            lo = block * BLOCK - start
            if lo < 0 or _sum(view[lo : lo + BLOCK]) != self._sums[block * SUM : block * SUM + SUM]:
                raise ValueError(f"{self.path.name}: block {block} does not match its checksum")
            self._ok[block] = 1

    def check_span(self, data: bytes | mmap.mmap | memoryview, lo: int, hi: int) -> None:
        """Check the blocks under bytes ``[lo, hi)`` of ``data``, the whole file mapped."""
        start = lo - lo % BLOCK
        stop = min(self.size, -(-hi // BLOCK) * BLOCK)
        first, last = start // BLOCK, (stop - 1) // BLOCK
        if all(self._ok[b] for b in range(first, min(last + 1, len(self._ok)))):
            return
        self.check(memoryview(data)[start:stop], start)

    def pread(self, n: int, at: int) -> bytes:
        """``n`` bytes at ``at`` (clipped to :attr:`size`), every block under them checked."""
        n = max(0, min(n, self.size - at))
        if n <= 0:
            return b""
        start = at - at % BLOCK
        stop = min(self.size, -(-(at + n) // BLOCK) * BLOCK)
        raw = pread_file(self.path, stop - start, start)
        if len(raw) != stop - start:
            raise ValueError(f"{self.path.name} is shorter than its manifest records")
        self.check(raw, start)
        return raw[at - start : at - start + n]


def pread_file(path: Path, n: int, at: int) -> bytes:
    """Up to ``n`` bytes of ``path`` at ``at`` (``b""`` for a missing file or nothing asked)."""
    if n <= 0:
        return b""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return b""
    try:
        return os.pread(fd, n, at)
    finally:
        os.close(fd)
