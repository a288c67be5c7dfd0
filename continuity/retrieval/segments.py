"""Segments: the sealed inverted indexes a search index is made of, and how they merge.

A segment holds the postings of a run of consecutive documents (:class:`Segment`, built by
:func:`build_segment`, read in place and memory-mapped when large). An index seals its
documents ``BLOCK`` (256) at a time, and every ``FANOUT`` (16) equal neighbours merge into one
(:func:`merge_due`, :func:`merge_segments`) at fixed document counts, up to ``MAX_SEGMENT``
(65,536; ADR 0011): the set of segments depends only on how many documents exist. A merge is
written to disk a range of terms at a time (:func:`write_merged`, ADR 0061), so what it holds
does not grow with the segments it merges. A thread's
index (:mod:`.index`) and the store's (:mod:`.store_index`) use the same format; the documents
not yet sealed are read as a :class:`DocsSegment`.

The file: a header (magic, documents, terms, postings, vocabulary bytes), the term offsets and
postings' starts (u64 each), the vocabulary (UTF-8, sorted by code point, padded to 8), the
postings' local document ids (u32) and weighted counts (u16), padding, then every term's check
(CRC-32 and Adler-32 of its bytes) ascending with its number of postings: a damaged vocabulary
cannot silently hide a term or lend it another term's postings (``contracts/caches.md``).

Whole-file checks (the manifests that name the files keep them): :func:`crc` (CRC-32, which a
file grown by appends extends from the last value without reading it again), a segment's in
its :class:`SegmentRef` (checked whenever a segment is read whole: read into memory, merged,
verified), and a manifest's own in its last field (:func:`sealed_json`, :func:`json_sound`).
"""

from __future__ import annotations

import mmap
import os
import struct
import sys
import tempfile
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO, Final, TypeVar

import msgspec
import numpy as np
import numpy.typing as npt

from continuity._fs import atomic_write
from continuity.retrieval.documents import Doc

__all__ = [
    "BLOCK",
    "FANOUT",
    "HEADER_BYTES",
    "MAX_SEGMENT",
    "MERGE_POSTINGS",
    "DocsSegment",
    "Segment",
    "SegmentRef",
    "build_segment",
    "crc",
    "json_sound",
    "load_sealed",
    "merge_due",
    "merge_segments",
    "open_segment",
    "read_map",
    "sealed_json",
    "write_merged",
]

BLOCK: Final = 256
FANOUT: Final = 16
MAX_SEGMENT: Final = BLOCK * FANOUT**2
"""No merge makes a segment larger (65,536 documents): an update rewrites at most that many."""

_HEADER: Final = struct.Struct("<8sQQQQ")
_MAGIC: Final = b"CSEG\x02\x00\x00\x00"  # 2: term checks after the postings
HEADER_BYTES: Final = _HEADER.size
"""The size of a segment's header: no segment file is shorter."""


def _term_check(key: bytes) -> int:
    """A term's 64-bit check (CRC-32 and Adler-32 of its UTF-8 bytes): the same on every
    machine and cheap enough to take for every query term a segment is asked for."""
    return (zlib.crc32(key) << 32) | zlib.adler32(key)


def build_segment(docs: list[Doc]) -> bytes:
    """The bytes of a segment holding ``docs`` (local doc ids = their order)."""
    vocab = sorted({t for d in docs for t in d.tf})
    ids = {t: i for i, t in enumerate(vocab)}
    term_ids: list[int] = []
    doc_ids: list[int] = []
    tfs: list[int] = []
    lookup = ids.__getitem__
    for local, d in enumerate(docs):
        term_ids.extend(map(lookup, d.tf))
        doc_ids.extend([local] * len(d.tf))
        tfs.extend(d.tf.values())
    return _pack(
        vocab,
        np.array(term_ids, dtype=np.int64),
        np.array(doc_ids, dtype=np.uint32),
        np.minimum(np.array(tfs, dtype=np.int64), 65535).astype(np.uint16),
        len(docs),
    )


def _pack(
    vocab: list[str],
    term_ids: npt.NDArray[np.int32] | npt.NDArray[np.int64],
    doc_ids: npt.NDArray[np.uint32],
    tfs: npt.NDArray[np.uint16],
    n_docs: int,
) -> bytes:
    order = np.argsort(term_ids, kind="stable")  # stable: each term's postings stay in doc order
    counts = np.bincount(term_ids, minlength=len(vocab)) if len(vocab) else np.zeros(0, np.int64)
    head, end = _frame(vocab, counts, n_docs)
    return b"".join(
        (
            head,
            doc_ids[order].astype("<u4", copy=False).data,
            tfs[order].astype("<u2", copy=False).data,
            end,
        )
    )


def _frame(vocab: list[str], counts: npt.NDArray[np.int64], n_docs: int) -> tuple[bytes, bytes]:
    """A segment's bytes before its postings (header, offsets, starts, vocabulary) and after
    them (padding, term checks), from its vocabulary and each term's number of postings."""
    n_post = int(counts.sum())
    starts = np.zeros(len(vocab) + 1, dtype="<u8")
    np.cumsum(counts, out=starts[1:])
    encoded = [t.encode() for t in vocab]
    offsets = np.zeros(len(vocab) + 1, dtype="<u8")
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    blob = b"".join(encoded)
    blob += b"\0" * (-len(blob) % 8)
    # Term checks: every term's check, ascending, with its number of postings. A damaged byte
    # of the vocabulary, its offsets or the postings' starts would make a term look absent or
    # give it another term's postings, which a hit's document check cannot see (the document
    # that should have been a hit is not there to check): each lookup compares what it found
    # with its term's check (``Segment.postings``).
    checks = np.fromiter(map(_term_check, encoded), np.uint64, len(encoded))
    by_check = np.argsort(checks, kind="stable")
    pad = b"\0" * (-(4 * n_post + 2 * n_post) % 8)
    head = b"".join(
        (
            _HEADER.pack(_MAGIC, n_docs, len(vocab), n_post, len(blob)),
            offsets.tobytes(),
            starts.tobytes(),
            blob,
        )
    )
    end = b"".join(
        (
            pad,
            checks[by_check].astype("<u8").tobytes(),
            counts[by_check].astype("<u4").tobytes(),
        )
    )
    return head, end


_LITTLE_ENDIAN: Final = sys.byteorder == "little"


class Segment:
    """A sealed inverted index, read in place (memory-mapped when large)."""

    def __init__(self, data: bytes | mmap.mmap, first_doc: int) -> None:
        magic, n_docs, n_terms, n_post, blob_len = _HEADER.unpack_from(data, 0)
        if magic != _MAGIC:
            raise ValueError("not a continuity search segment")
        self.data = data
        self.first_doc = first_doc
        self.n_docs = n_docs
        self.n_terms = n_terms
        pos = _HEADER.size
        self._offsets = np.frombuffer(data, "<u8", n_terms + 1, pos)
        # The same offsets as Python ints without a numpy scalar per read: the binary search
        # of a term reads ~2 log2(terms) of them (native order is the file's on little-endian
        # machines; elsewhere the numpy array serves).
        self._offs: Sequence[int] | npt.NDArray[np.uint64] = (
            memoryview(data)[pos : pos + 8 * (n_terms + 1)].cast("Q")
            if _LITTLE_ENDIAN
            else self._offsets
        )
        pos += 8 * (n_terms + 1)
        self._starts = np.frombuffer(data, "<u8", n_terms + 1, pos)
        pos += 8 * (n_terms + 1)
        self._blob = pos
        pos += blob_len
        self._docs = np.frombuffer(data, "<u4", n_post, pos)
        pos += 4 * n_post
        self._tfs = np.frombuffer(data, "<u2", n_post, pos)
        pos += 2 * n_post
        pos += -pos % 8
        self._checks = np.frombuffer(data, "<u8", n_terms, pos)
        pos += 8 * n_terms
        self._check_counts = np.frombuffer(data, "<u4", n_terms, pos)
        if pos + 4 * n_terms != len(data):
            raise ValueError("a search segment of the wrong length")

    def term(self, i: int) -> str:
        a, b = int(self._offsets[i]), int(self._offsets[i + 1])
        return bytes(self.data[self._blob + a : self._blob + b]).decode()

    def terms(self) -> list[str]:
        """The whole vocabulary, decoded in one go: a newline put at every term boundary (no
        token holds one), one decode, one split."""
        if not self.n_terms:
            return []
        blob = np.frombuffer(self.data, np.uint8, int(self._offsets[-1]), self._blob)
        cuts = self._offsets[1:-1].astype(np.intp)
        out = np.insert(blob, cuts, np.uint8(10)).tobytes().decode().split("\n")
        if len(out) != self.n_terms:  # a term holding a newline: not one of ours, but readable
            return [self.term(i) for i in range(self.n_terms)]
        return out

    def find(self, term: str) -> int:
        """The id of ``term`` in the vocabulary, or -1. A binary search over the encoded terms:
        UTF-8 bytes sort as the code points the vocabulary was sorted by."""
        key = term.encode("utf-8", "surrogatepass")
        data, offs, base = self.data, self._offs, self._blob
        lo, hi = 0, self.n_terms
        while lo < hi:
            mid = (lo + hi) >> 1
            if data[base + int(offs[mid]) : base + int(offs[mid + 1])] < key:
                lo = mid + 1
            else:
                hi = mid
        if lo < self.n_terms and data[base + int(offs[lo]) : base + int(offs[lo + 1])] == key:
            return lo
        return -1

    def postings(self, term: str) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint16]]:
        """(local doc ids ascending, weighted counts) of ``term``; empty arrays if absent.
        ValueError when the lookup disagrees with the term's check (damage: see ``_pack``)."""
        i = self.find(term)
        check = _term_check(term.encode("utf-8", "surrogatepass"))
        checks = self._checks
        j = int(checks.searchsorted(np.uint64(check)))
        listed = j < len(checks) and int(checks[j]) == check
        if listed != (i >= 0) and not (listed and self._collides(j)):
            raise ValueError(f"a damaged search segment: term {term!r} against its check")
        if i >= 0:
            a, b = int(self._starts[i]), int(self._starts[i + 1])
            if b - a != int(self._check_counts[j]) and not self._collides(j):
                raise ValueError(f"a damaged search segment: the postings of {term!r}")
            return self._docs[a:b], self._tfs[a:b]
        return self._docs[:0], self._tfs[:0]

    def _collides(self, j: int) -> bool:
        """Two terms share check ``j`` (about one segment in 10^9): it vouches for neither."""
        checks = self._checks
        return j + 1 < len(checks) and checks[j + 1] == checks[j]

    def count(self, term: str, end: int) -> int:
        """How many documents before ``end`` (a local id) hold ``term``."""
        docs = self.postings(term)[0]
        return len(docs) if not len(docs) or int(docs[-1]) < end else int(docs.searchsorted(end))

    def _counts(self) -> npt.NDArray[np.int64]:
        """The number of postings of each term."""
        return np.diff(self._starts).astype(np.int64)

    def check(self) -> None:
        """ValueError unless every term and its number of postings agree with the term checks
        (a merge reads whole segments: what it writes must not carry damage on)."""
        vocab = [t.encode("utf-8", "surrogatepass") for t in self.terms()]
        checks = np.fromiter(map(_term_check, vocab), np.uint64, len(vocab))
        order = np.argsort(checks, kind="stable")
        if not (
            np.array_equal(checks[order], self._checks)
            and np.array_equal(self._counts()[order], self._check_counts.astype(np.int64))
            and np.all(self._starts[1:] >= self._starts[:-1])
        ):
            raise ValueError("a damaged search segment: its terms disagree with their checks")


def merge_segments(segments: list[Segment]) -> bytes:
    """One segment holding the documents of ``segments`` (consecutive, in order)."""
    for s in segments:
        s.check()
    vocabs = [s.terms() for s in segments]
    vocab = sorted(set().union(*vocabs))
    ids = {t: i for i, t in enumerate(vocab)}
    all_terms: list[npt.NDArray[np.int32]] = []
    all_docs: list[npt.NDArray[np.uint32]] = []
    all_tfs: list[npt.NDArray[np.uint16]] = []
    base = 0
    for s, local_vocab in zip(segments, vocabs, strict=True):
        # each posting's term, as an id in the merged vocabulary (int32: a few bytes less per
        # posting to hold; a segment has far fewer than 2^31 terms)
        remap = np.fromiter(map(ids.__getitem__, local_vocab), np.int32, len(local_vocab))
        all_terms.append(np.repeat(remap, s._counts()))
        all_docs.append(s._docs + np.uint32(base))
        all_tfs.append(s._tfs)
        base += s.n_docs
    # joined, and the parts let go before packing: the peak is what one merge holds at once
    term_ids = np.concatenate(all_terms) if all_terms else np.zeros(0, np.int32)
    doc_ids = np.concatenate(all_docs) if all_docs else np.zeros(0, np.uint32)
    tfs = np.concatenate(all_tfs) if all_tfs else np.zeros(0, np.uint16)
    del all_terms, all_docs, all_tfs
    return _pack(vocab, term_ids, doc_ids, tfs, base)


MERGE_POSTINGS: Final = 1 << 19
"""Postings a streamed merge (:func:`write_merged`) sorts at a time: about 16 bytes each are
held, so ~8 MB whatever the size of the segments merged."""

_COPY: Final = 1 << 20


def write_merged(path: Path, segments: list[Segment], *, budget: int | None = None) -> int:
    """Write to ``path`` (whole, under a temporary name renamed into place) the bytes
    :func:`merge_segments` returns for ``segments``, holding a bounded number of postings at
    once (``budget``, default :data:`MERGE_POSTINGS`) instead of every posting of the merged
    segment; return their CRC-32.

    The merged vocabulary and each term's count come first (what the header, offsets and
    starts need: a few numbers a term). Then the postings go out a range of terms at a time:
    a range of the merged (sorted) vocabulary is a contiguous range of each segment's postings,
    since each vocabulary is sorted too, so sorting a range's postings by term (stable, the
    segments in order) gives exactly the slice of the whole sort. The document ids go straight
    to the file; the counts, which follow all of them, wait in an unnamed temporary file beside
    it and are copied after: the file is written front to back and its CRC taken as it goes."""
    budget = MERGE_POSTINGS if budget is None else max(1, budget)
    for s in segments:
        s.check()
    vocabs = [s.terms() for s in segments]
    vocab = sorted(set().union(*vocabs))
    ids = {t: i for i, t in enumerate(vocab)}
    remaps = [np.fromiter(map(ids.__getitem__, v), np.int64, len(v)) for v in vocabs]
    del ids, vocabs
    counts = np.zeros(len(vocab), np.int64)
    for s, remap in zip(segments, remaps, strict=True):
        counts[remap] += s._counts()  # a term once per segment: no repeated index
    head, end = _frame(vocab, counts, sum(s.n_docs for s in segments))
    del vocab
    starts = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=starts[1:])
    bases = np.cumsum([0] + [s.n_docs for s in segments])
    check = 0

    def write(f: BinaryIO) -> None:
        nonlocal check
        with tempfile.TemporaryFile(dir=path.parent) as spill:
            f.write(head)
            check = zlib.crc32(head)
            a, n_terms = 0, len(counts)
            while a < n_terms:
                b = int(np.searchsorted(starts, starts[a] + budget, side="right")) - 1
                b = min(max(b, a + 1), n_terms)
                terms, docs, tfs = [], [], []
                for s, remap, base in zip(segments, remaps, bases, strict=False):
                    lo, hi = np.searchsorted(remap, (a, b))
                    if lo == hi:
                        continue
                    local = s._starts[lo : hi + 1].astype(np.int64)
                    terms.append(np.repeat(remap[lo:hi], np.diff(local)))
                    docs.append(s._docs[local[0] : local[-1]] + np.uint32(base))
                    tfs.append(s._tfs[local[0] : local[-1]])
                order = np.argsort(np.concatenate(terms), kind="stable")
                out = np.concatenate(docs)[order].astype("<u4", copy=False).tobytes()
                f.write(out)
                check = zlib.crc32(out, check)
                spill.write(np.concatenate(tfs)[order].astype("<u2", copy=False).tobytes())
                a = b
            spill.seek(0)
            while block := spill.read(_COPY):
                f.write(block)
                check = zlib.crc32(block, check)
            f.write(end)
            check = zlib.crc32(end, check)

    atomic_write(path, write, durable=False)  # a cache: rebuilt, not recovered
    return check


class SegmentRef(msgspec.Struct, frozen=True, array_like=True):
    first_doc: int
    n_docs: int
    crc: int = 0
    """The CRC-32 of the segment file's bytes (0 in a segment held in memory only)."""

    @property
    def name(self) -> str:
        return f"seg-{self.first_doc:010d}-{self.n_docs}.bin"


def merge_due(segments: Sequence[SegmentRef]) -> bool:
    """Whether the last 16 of ``segments`` merge into one: they have one size, start at a
    multiple of the merged size, and the merged one holds at most ``MAX_SEGMENT`` documents."""
    if len(segments) < FANOUT:
        return False
    group = segments[-FANOUT:]
    size = group[0].n_docs
    return (
        size * FANOUT <= MAX_SEGMENT
        and all(s.n_docs == size for s in group)
        and group[0].first_doc % (size * FANOUT) == 0
    )


def crc(data: bytes | bytearray | memoryview | mmap.mmap, start: int = 0) -> int:
    """The CRC-32 of ``data``, continuing ``start`` (the CRC of the bytes before it): a file that
    grows by appends is checked by extending its last CRC with the new bytes alone."""
    return zlib.crc32(data, start)


_CHECK_FIELD: Final = b',"check":"'


def sealed_json(encoded: bytes) -> bytes:
    """A manifest's JSON, whose last field ``check`` was encoded empty, with that field set to
    the CRC-32 (8 hex digits) of every byte before it."""
    empty = _CHECK_FIELD + b'"}'
    if not encoded.endswith(empty):
        raise ValueError("a manifest's last field must be an empty check")
    body = encoded[: -len(empty)]
    return body + _CHECK_FIELD + b"%08x" % zlib.crc32(body) + b'"}'


_M = TypeVar("_M", bound=msgspec.Struct)


def load_sealed(
    path: Path, decoder: msgspec.json.Decoder[_M], version: int
) -> tuple[_M | None, str | None]:
    """(the manifest at ``path``, what is wrong with it), as both search indexes read theirs:
    (None, None) when there is none, (None, a problem) when it cannot be read, does not decode
    or (of this ``version``) does not match its checksum. One of another version is returned
    unchecked: its version alone sends it to a rebuild."""
    name = path.name
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"{name} cannot be read: {exc}"
    try:
        m = decoder.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError, msgspec.ValidationError):
        return None, f"{name} does not decode" if raw else f"{name} is empty"
    if getattr(m, "version", None) == version and not json_sound(raw):
        return None, f"{name} does not match its checksum"
    return m, None


def json_sound(raw: bytes) -> bool:
    """Whether ``raw`` (a manifest :func:`sealed_json` wrote) ends with the check of the bytes
    before it: a flipped or cut byte anywhere in it is seen before any field is believed."""
    at = raw.rfind(_CHECK_FIELD)
    return at >= 0 and raw[at:] == _CHECK_FIELD + b"%08x" % zlib.crc32(raw[:at]) + b'"}'


def open_segment(path: Path, ref: SegmentRef, *, whole: bool = False) -> Segment:
    """The segment ``ref`` names, read from ``path``. ValueError when it is not the one named:
    its document count or (for a segment read into memory, or with ``whole``) its CRC-32. A
    large segment is memory-mapped and, without ``whole``, not read through: its term checks
    guard each lookup (hashing every segment for every process would read the whole index)."""
    data = read_map(path)
    if (whole or not isinstance(data, mmap.mmap)) and zlib.crc32(data) != ref.crc:
        raise ValueError(f"{path.name} does not match its checksum")
    segment = Segment(data, ref.first_doc)
    if segment.n_docs != ref.n_docs:
        raise ValueError(f"{path.name} holds {segment.n_docs} documents, not {ref.n_docs}")
    return segment


def read_map(path: Path) -> bytes | mmap.mmap:
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > 256 * 1024:
            return mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ)
        return f.read()


class DocsSegment:
    """A few documents (an index's tail) read as a segment without building one: postings are
    found by looking the term up in each document, as :class:`Segment` would hold them."""

    def __init__(self, docs: list[Doc], first_doc: int) -> None:
        self.docs = docs
        self.first_doc = first_doc
        self.n_docs = len(docs)

    def count(self, term: str, end: int) -> int:
        """How many documents before ``end`` (a local id) hold ``term``."""
        return sum(1 for d in self.docs[: max(0, end)] if term in d.tf)

    def postings(self, term: str) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint16]]:
        """(local doc ids ascending, weighted counts) of ``term``; empty arrays if absent."""
        found = [(i, d.tf[term]) for i, d in enumerate(self.docs) if term in d.tf]
        return (
            np.array([i for i, _ in found], dtype=np.uint32),
            np.array([min(w, 65535) for _, w in found], dtype=np.uint16),
        )
