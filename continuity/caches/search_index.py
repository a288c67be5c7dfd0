"""The search index: per-thread inverted indexes over messages, observations and summaries.

It is a cache like the others (``<store>/cache/search/<thread_id>/``): a watermark per
thread, incremental catch-up, rebuilt from the log, and deleting it changes no result. Its shape
is a pure function of the log, so a rebuild gives the same bytes:

``docs.bin``        one 16-byte record per document in log order: seq u64, weighted length u32,
                    kind u8 (1 message, 2 observation, 3 summary), role u8, 2 zero bytes
``seg-*.bin``       sealed segments of 256, 4,096 or 65,536 documents (256 × 16^k, k ≤ 2; an
                    inverted index each, see :class:`Segment`); every 16 equal neighbours below
                    the cap merge into one, at fixed document counts, so the set of segments
                    depends only on how many docs exist; no merge goes past ``MAX_SEGMENT``
                    (ADR 0011), so an update rewrites at most 65,536 documents
``tail.jsonl``      the documents not yet in a segment (fewer than 256), one line each; it only
                    grows between seals (each manifest names the bytes it covers)
``manifest.json``   the watermark (last seq, its digest, log offset) and the segment list

A catch-up (or a rebuild) reads the new frames ``_CHUNK`` documents at a time, sealing and
merging segments as they fill, so its memory does not grow with the thread; only its final
manifest commits what it wrote.

Documents are weighted bags of terms: code-aware tokens (paths and identifiers split on ``/``,
``.``, ``_``, ``-`` and camelCase, the whole kept too) with field weights — commands and file
paths count four times, tool names three, prose two, tool output one (given whole, as text
parts, or as the preview of an artifact), thinking and what a provider block says (its
``text``: a server tool's call or result, a document, a reasoning summary) one. Ranking is BM25
over those weighted counts (:mod:`continuity.caches.ranking`).

A document is a message, an observation or a checkpoint's summary: what the conversation said.
A ``record_appended`` frame is a runtime's own state and a ``messages_retracted`` frame a mark
on other frames: neither is a document. Each field is cut at 4,000 characters.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import re
import shutil
import struct
import sys
import tempfile
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain, islice
from pathlib import Path
from typing import Final, cast

import msgspec
import numpy as np
import numpy.typing as npt

from continuity import frames as fr
from continuity._fs import atomic_write, private_dirs
from continuity.caches.stem import stem
from continuity.caches.thread_index import (
    ThreadIndex,
    caches_writable,
    keeps_none,
    log_is_small,
)
from continuity.errors import ArtifactCorrupt, ArtifactNotFound, CachesReadOnly
from continuity.store.base import BaseStore, Thread

__all__ = [
    "DOC_RECORD",
    "DOC_TYPES",
    "KIND_MESSAGE",
    "KIND_OBSERVATION",
    "KIND_SUMMARY",
    "SURFACE",
    "Doc",
    "DocsSegment",
    "IndexView",
    "SearchManifest",
    "Segment",
    "SegmentRef",
    "ThreadSearchIndex",
    "build_segment",
    "cleared",
    "doc_of",
    "doc_of_line",
    "docs_of",
    "documents_of_lines",
    "frame_text",
    "log_holds",
    "merge_due",
    "merge_segments",
    "read_manifest",
    "rebuild_search",
    "summary_text",
    "text_of",
    "token_spans",
    "tokenize",
    "words_of",
]

KIND_MESSAGE: Final = 1
KIND_OBSERVATION: Final = 2
KIND_SUMMARY: Final = 3
KIND_NAMES: Final = {
    KIND_MESSAGE: "message",
    KIND_OBSERVATION: "observation",
    KIND_SUMMARY: "summary",
}
_ROLES: Final = {"user": 1, "assistant": 2, "system": 3}
ROLE_NAMES: Final = {v: k for k, v in _ROLES.items()}

BLOCK: Final = 256
FANOUT: Final = 16
K1: Final = 1.2
B: Final = 0.75
_MAX_FIELD_CHARS: Final = 4000
_DOC: Final = struct.Struct("<QIBB2x")
DOC_RECORD: Final = np.dtype(
    [("seq", "<u8"), ("len", "<u4"), ("kind", "u1"), ("role", "u1"), ("pad", "V2")]
)
"""A ``docs.bin`` record as numpy reads it (the layout of ``_DOC``)."""
MAX_SEGMENT: Final = BLOCK * FANOUT**2
"""No merge makes a segment larger (65,536 documents): an update rewrites at most that many."""
_CHUNK: Final = 16_384
"""Documents tokenized, written and sealed at a time by a catch-up."""
_VERSION: Final = 4  # 2: Unicode-aware tokens; 3: segments of at most MAX_SEGMENT documents;
# 4: ASCII words by their Snowball English stem (ADR 0032)
# (Tool results given as parts and provider blocks are indexed at version 3: they came with the
# schema that added them, so no log an older build indexed holds one, and no document changed.)

# --- tokenizing -----------------------------------------------------------------------------

# A word character is a Unicode letter or digit (``[^\W_]``): punctuation such as “ ” — … is
# a separator, and a non-ASCII letter stays inside its word. camelCase splits only at ASCII
# capitals, so "résumé" stays one part (not "r", "sum"), while "HTTPServerError" splits.
_CHUNK_RE: Final = re.compile(r"[^\W_]+(?:[._/\\:-]+[^\W_]+)*")
_SPLIT_RE: Final = re.compile(r"[._/\\:-]+")
_CAMEL_RE: Final = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[^\W_A-Z0-9]+|[A-Z]+|[0-9]+")
_STOP: Final = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "do",
        "for",
        "from",
        "has",
        "have",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "no",
        "not",
        "of",
        "on",
        "or",
        "our",
        "so",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "which",
        "will",
        "with",
        "you",
        "your",
    ]
)
_MAX_TOKEN: Final = 64


_TOKEN_CACHE_MAX: Final = 100_000
_CACHED_CHUNK_MAX: Final = 128
_token_cache: dict[str, tuple[str, ...]] = {}
"""Chunk → its tokens: paths, identifiers and words repeat a lot, in generated and real text.
At most ``_TOKEN_CACHE_MAX`` chunks of at most ``_CACHED_CHUNK_MAX`` characters (cleared when
full): about 350 bytes a chunk on generated threads (14 characters on average), so some 35 MB
when full; chunks near the length limit and split into many parts cost a few times that."""


SURFACE: Final = "="
"""The mark of a word's surface form as a term (``=migrations``): no token holds ``=``."""


def _words(word: str) -> tuple[str, ...]:
    """The terms of one lowercase part: an ASCII word by its Snowball English stem, and, when
    the stem differs, its surface form marked with :data:`SURFACE` ("migrations" →
    ``migrat``, ``=migrations``); anything else (digits, other scripts, mixed) as it is.
    Ranking counts a surface form at a fraction of its stem's weight (ADR 0032): the stem
    finds every form of a word, the surface form lifts the exact one."""
    if word.isascii() and word.isalpha():
        root = stem(word)
        if root == word:
            return (word,)
        # A term is at most _MAX_TOKEN long: a word of that length keeps only its stem.
        return (root, SURFACE + word) if len(word) < _MAX_TOKEN else (root,)
    return (word,)


def _chunk_tokens(chunk: str) -> tuple[str, ...]:
    """The tokens of one chunk (a word, path or identifier): whole, then its parts, each word
    by its stem and surface form. A chunk of several parts keeps its whole form as it is (an
    exact path or identifier is its own term)."""
    low = chunk.lower()
    parts = [p for piece in _SPLIT_RE.split(chunk) for p in _CAMEL_RE.findall(piece)]
    if len(parts) != 1 or parts[0].lower() != low:
        out = [low] if 1 < len(low) <= _MAX_TOKEN else []
        for p in parts:
            q = p.lower()
            if q not in _STOP and 1 < len(q) <= _MAX_TOKEN:
                out.extend(_words(q))
        return tuple(out)
    if low not in _STOP and 1 < len(low) <= _MAX_TOKEN:
        return _words(low)
    return ()


def tokenize(text: str) -> list[str]:
    """Lowercase tokens of ``text``: each path or identifier whole and split into its parts."""
    chunks = _CHUNK_RE.findall(text)
    cache = _token_cache
    found = list(map(cache.get, chunks))
    if None in found:
        for i, tokens in enumerate(found):
            if tokens is None:
                chunk = chunks[i]
                found[i] = tokens = _chunk_tokens(chunk)
                if len(chunk) <= _CACHED_CHUNK_MAX:
                    if len(cache) >= _TOKEN_CACHE_MAX:
                        cache.clear()
                    cache[chunk] = tokens
    return list(chain.from_iterable(cast("list[tuple[str, ...]]", found)))  # no None left


def words_of(chunk: str, terms: Iterable[str]) -> list[str]:
    """For each of ``terms`` (tokens of ``chunk``), the text it stands for, lowercased: the
    chunk's part whose stem it is ("migrat" in "db/migrations" → "migrations"), else itself."""
    parts = [p.lower() for piece in _SPLIT_RE.split(chunk) for p in _CAMEL_RE.findall(piece)]
    out = []
    for t in terms:
        out.append(next((p for p in parts if p != t and _words(p)[0] == t), t))
    return out


def token_spans(text: str) -> Iterator[tuple[int, int, tuple[str, ...]]]:
    """(start, end, tokens) of each chunk of ``text`` that has tokens, in order: where in the
    text each term :func:`tokenize` gives comes from (a stem is not a substring of its word)."""
    for m in _CHUNK_RE.finditer(text):
        chunk = m.group()
        tokens = _token_cache.get(chunk)
        if tokens is None:
            tokens = _chunk_tokens(chunk)
        if tokens:
            yield m.start(), m.end(), tokens


# --- documents ------------------------------------------------------------------------------


class Doc(msgspec.Struct, array_like=True):
    """A searchable unit: a message, an observation or a summary, as weighted term counts."""

    seq: int
    kind: int
    role: int
    length: int
    tf: dict[str, int]


_PATH_KEYS: Final = ("file_path", "path", "notebook_path", "filePath", "pattern", "glob")
_COMMAND_KEYS: Final = ("command", "cmd", "script")


def _fields(frame: fr.Frame, summary: str | None) -> Iterator[tuple[str, int]]:
    """(text, weight) pairs of what a frame says."""
    if isinstance(frame, fr.MessageAppended):
        for b in frame.content:
            if isinstance(b, fr.TextBlock):
                yield b.text, 2
            elif isinstance(b, fr.ThinkingBlock):
                yield b.text, 1
            elif isinstance(b, fr.ToolUseBlock):
                yield b.name, 3
                for key, value in b.input.items():
                    if isinstance(value, str):
                        weight = 4 if key in _PATH_KEYS or key in _COMMAND_KEYS else 2
                        yield value, weight
            elif isinstance(b, fr.ToolResultBlock):
                yield b.text(), 1  # content, its text parts, or an artifact's preview
            elif isinstance(b, fr.ProviderBlock):
                yield b.text, 1
    elif isinstance(frame, fr.ObservationRecorded):
        yield frame.text, 2
    elif summary is not None:
        yield summary, 1


def doc_of(frame: fr.Frame, summary: str | None = None) -> Doc | None:
    """The document of a frame (None for frames that say nothing searchable, and for frames
    that are not conversation: records, retractions, decisions, jobs)."""
    if isinstance(frame, fr.MessageAppended):
        kind, role = KIND_MESSAGE, _ROLES.get(frame.role, 0)
    elif isinstance(frame, fr.ObservationRecorded):
        kind, role = KIND_OBSERVATION, 0
    elif isinstance(frame, fr.CompactionCheckpointCreated) and summary is not None:
        kind, role = KIND_SUMMARY, 0
    else:
        return None
    # Each field's tokens ``weight`` times over, counted in one go: a token's count is the sum
    # of the weights of its occurrences.
    tokens: list[str] = []
    for text, weight in _fields(frame, summary):
        tokens += tokenize(text[:_MAX_FIELD_CHARS]) * weight
    tf = Counter(tokens)
    if not tf:
        return None
    return Doc(frame.seq, kind, role, sum(tf.values()), dict(sorted(tf.items())))


# --- segments -------------------------------------------------------------------------------

_HEADER: Final = struct.Struct("<8sQQQQ")
_MAGIC: Final = b"CSEG\x02\x00\x00\x00"  # 2: term checks after the postings


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
    pad = b"\0" * (-(4 * len(doc_ids) + 2 * len(doc_ids)) % 8)
    return b"".join(
        (
            _HEADER.pack(_MAGIC, n_docs, len(vocab), len(doc_ids), len(blob)),
            offsets.tobytes(),
            starts.tobytes(),
            blob,
            doc_ids[order].astype("<u4", copy=False).data,
            tfs[order].astype("<u2", copy=False).data,
            pad,
            checks[by_check].astype("<u8").tobytes(),
            counts[by_check].astype("<u4").tobytes(),
        )
    )


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

    def all_postings(
        self,
    ) -> tuple[list[str], npt.NDArray[np.int64], npt.NDArray[np.uint32], npt.NDArray[np.uint16]]:
        """(vocabulary, term id per posting, doc ids, counts)."""
        term_ids = np.repeat(np.arange(self.n_terms, dtype=np.int64), self._counts())
        return self.terms(), term_ids, self._docs, self._tfs

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


# --- the per-thread index -------------------------------------------------------------------


class SegmentRef(msgspec.Struct, frozen=True, array_like=True):
    first_doc: int
    n_docs: int

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


class SearchManifest(msgspec.Struct, frozen=True):
    version: int
    thread_id: str
    log_end: int
    last_seq: int
    digest: str
    docs: int
    tail_bytes: int
    segments: list[SegmentRef]
    total_length: int = -1
    """The sum of every document's length in ``docs.bin`` (BM25's average length comes from
    it): a search checks it, so a damaged length cannot shift every score unseen. -1 in an
    index written before it was kept."""


_manifest_decoder: Final = msgspec.json.Decoder(SearchManifest)
_doc_decoder: Final = msgspec.json.Decoder(Doc)
_encoder: Final = msgspec.json.Encoder()


def read_manifest(folder: Path) -> SearchManifest | None:
    """The manifest of the index in ``folder`` (None when it is missing or does not decode)."""
    try:
        return _manifest_decoder.decode((folder / "manifest.json").read_bytes())
    except (
        FileNotFoundError,
        msgspec.DecodeError,
        UnicodeDecodeError,
        msgspec.ValidationError,
    ):
        return None


def _read_map(path: Path) -> bytes | mmap.mmap:
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > 256 * 1024:
            return mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ)
        return f.read()


class ThreadSearchIndex:
    """The search index of one thread; ``refresh()`` brings it up to the log's end.

    ``frames`` is the thread's frame index when the caller holds one already (the search index
    reads the frames through it, and catches it up first)."""

    def __init__(self, thread: Thread, frames: ThreadIndex | None = None) -> None:
        cache_dir = thread.store.cache_dir
        if cache_dir is None:
            raise ValueError(f"the store of thread {thread.id!r} keeps no caches")
        self.frames = frames or ThreadIndex(thread)
        self.cache_dir = cache_dir
        self.thread = thread
        self.thread_id = thread.id
        self.dir = cache_dir / "search" / thread.id

    def manifest(self) -> SearchManifest | None:
        return read_manifest(self.dir)

    def problems(self) -> list[str]:
        """What is wrong with this index on disk (empty when it is sound, absent or behind the
        log): its manifest and files are compared, byte for byte, with a fresh build of the same
        log prefix made in a scratch folder (outside the store, which may be read-only)."""
        m = self.manifest()
        if m is None:
            return (
                ["manifest.json does not decode"] if (self.dir / "manifest.json").exists() else []
            )
        if m.version != _VERSION or m.thread_id != self.thread_id or m.last_seq < 0:
            return []  # another version's index, or an empty one: the next search rebuilds it
        line = next(self.thread.read_lines(from_seq=m.last_seq, to_seq=m.last_seq), None)
        if line is None:
            return [f"indexes up to seq {m.last_seq}, which the log does not hold"]
        sealed = fr.unseal(line[1])
        if sealed is None or sealed[1].hex() != m.digest:
            return [f"its watermark digest is not the log's at seq {m.last_seq}"]
        found: list[str] = []
        with tempfile.TemporaryDirectory(prefix="continuity-verify-") as scratch:
            fresh = ThreadSearchIndex(self.thread, self.frames)
            fresh.dir = Path(scratch)
            empty = SearchManifest(_VERSION, self.thread_id, 0, -1, "", 0, 0, [])
            docs = (
                d
                for f in self.frames.read(0, m.last_seq)
                if (d := doc_of(f, fresh._summary(f))) is not None
            )
            fresh._add(empty, docs, m.log_end, m.last_seq, m.digest)
            want = fresh.manifest()
            if want != m:
                found.append("manifest.json differs from a fresh index of the log")
            names = ["docs.bin", "tail.jsonl", *(ref.name for ref in m.segments)]
            for name in dict.fromkeys(names):
                mine, theirs = self.dir / name, fresh.dir / name
                have = mine.read_bytes() if mine.exists() else None
                should = theirs.read_bytes() if theirs.exists() else None
                if have != should:
                    found.append(f"{name} differs from a fresh index of the log")
        return found

    # -- building --

    def refresh(self) -> int:
        """Index what is new (rebuild if the watermark no longer matches); return docs added."""
        return self._refresh(rebuild=False)

    def rebuild(self) -> int:
        """Drop the index and build it again from the log; return the docs indexed."""
        return self._refresh(rebuild=True)

    def _refresh(self, *, rebuild: bool) -> int:
        index = self.frames
        if keeps_none(self.thread) or (rebuild and log_is_small(self.thread)):
            # A small thread keeps no search index either: its ranking reads the log (ADR 0031).
            if self.dir.is_dir():
                _CLEARED[self.dir] = _CLEARED.get(self.dir, 0) + 1
                shutil.rmtree(self.dir, ignore_errors=True)
            return 0
        index.refresh()
        private_dirs(self.dir)
        fd = os.open(self.dir / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            m = None if rebuild else self.manifest()
            # One read of the offsets' watermark: another process may catch the offset index up
            # while this one works, and the frames indexed must be exactly the ones it names.
            log = index.manifest()
            frames = 0 if log is None else log.offsets.entries
            if m is not None and not self._trusted(index, m):
                m = None
            if m is None:
                self._clear()
                m = SearchManifest(_VERSION, self.thread_id, 0, -1, "", 0, 0, [])
            if log is None or m.last_seq + 1 >= frames:
                return 0
            docs = (
                d
                for f in index.read(m.last_seq + 1, frames - 1)
                if (d := doc_of(f, self._summary(f))) is not None
            )
            return self._add(m, docs, log.log_end, log.offsets.last_seq, log.offsets.digest)
        finally:
            os.close(fd)

    def _trusted(self, index: ThreadIndex, m: SearchManifest) -> bool:
        if m.version != _VERSION or m.thread_id != self.thread_id:
            return False
        if m.last_seq < 0:
            return True
        at = index.offset(m.last_seq)
        if at is None:
            return False
        line = next(
            index.thread.read_lines(from_seq=m.last_seq, to_seq=m.last_seq, start_offset=at), None
        )
        sealed = fr.unseal(line[1]) if line is not None else None
        if sealed is None or sealed[1].hex() != m.digest:
            return False
        return self._files_match(m)

    def _files_match(self, m: SearchManifest) -> bool:
        """Whether the files hold what ``m`` names. A writer that died after rewriting
        ``tail.jsonl`` but before its manifest leaves a tail the old manifest cannot read: its
        first document is then not the one at the tail's ordinal in ``docs.bin``."""
        n_tail = m.docs - sum(s.n_docs for s in m.segments)
        if n_tail < 0 or (n_tail == 0) != (m.tail_bytes == 0):
            return False
        try:
            if (self.dir / "docs.bin").stat().st_size < m.docs * _DOC.size:
                return False
            for ref in m.segments:
                if (self.dir / ref.name).stat().st_size < _HEADER.size:
                    return False
            if not n_tail:
                return True
            with open(self.dir / "tail.jsonl", "rb") as f:
                raw = f.read(m.tail_bytes)
            with open(self.dir / "docs.bin", "rb") as f:
                f.seek((m.docs - n_tail) * _DOC.size)
                first_seq: int = _DOC.unpack(f.read(_DOC.size))[0]
                f.seek((m.docs - 1) * _DOC.size)
                last_seq: int = _DOC.unpack(f.read(_DOC.size))[0]
            if len(raw) != m.tail_bytes or raw.count(b"\n") != n_tail or raw[-1:] != b"\n":
                return False
            first = _doc_decoder.decode(raw[: raw.index(b"\n")])
            last = _doc_decoder.decode(raw[raw.rfind(b"\n", 0, len(raw) - 1) + 1 : -1])
        except (
            OSError,
            struct.error,
            msgspec.DecodeError,
            UnicodeDecodeError,
            msgspec.ValidationError,
        ):
            return False
        return first.seq == first_seq and last.seq == last_seq

    def _summary(self, frame: fr.Frame) -> str | None:
        return summary_text(self.thread.store, frame)

    def _clear(self) -> None:
        _CLEARED[self.dir] = _CLEARED.get(self.dir, 0) + 1
        for p in self.dir.glob("*"):
            if p.name != ".lock":
                p.unlink()

    def _add(
        self, m: SearchManifest, docs: Iterable[Doc], log_end: int, last_seq: int, digest: str
    ) -> int:
        """Append ``docs`` to the index of ``m`` and commit them with a new manifest; return how
        many there were. They are taken ``_CHUNK`` at a time, so memory stays bounded however
        many there are.

        Until the new manifest replaces ``m``, every byte ``m`` names stays as it was:
        ``docs.bin`` is cut back to ``m``'s length and only grows; new segments have names ``m``
        does not use, and ``m``'s are deleted only after the new manifest is written. Without a
        seal, ``tail.jsonl`` is cut back to ``m``'s length and only grows too; a seal replaces
        it, after which ``m`` cannot read it (``_files_match``) and the index would be rebuilt.
        """
        kept = {s.name for s in m.segments}
        segments = list(m.segments)
        sealed_before = sealed = sum(s.n_docs for s in segments)
        tail = self._tail(m)
        n_old_tail = len(tail)
        n_docs = m.docs
        total = 0 if not m.docs else m.total_length  # -1: an older index, left unchecked
        fd = os.open(self.dir / "docs.bin", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(fd, "ab") as f:
            f.truncate(m.docs * _DOC.size)
            new = iter(docs)
            while chunk := list(islice(new, _CHUNK)):
                if total >= 0:
                    total += sum(min(d.length, 2**32 - 1) for d in chunk)
                f.write(
                    b"".join(
                        _DOC.pack(d.seq, min(d.length, 2**32 - 1), d.kind, d.role) for d in chunk
                    )
                )
                n_docs += len(chunk)
                tail.extend(chunk)
                start = 0
                while len(tail) - start >= BLOCK:
                    ref = SegmentRef(sealed, BLOCK)
                    _write(self.dir / ref.name, build_segment(tail[start : start + BLOCK]))
                    segments.append(ref)
                    sealed += BLOCK
                    start += BLOCK
                    segments = self._merge(segments, kept)
                del tail[:start]
        if sealed == sealed_before:
            lines = b"".join(_encoder.encode(d) + b"\n" for d in tail[n_old_tail:])
            fd = os.open(self.dir / "tail.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            with os.fdopen(fd, "ab") as f:
                f.truncate(m.tail_bytes)
                f.write(lines)
            tail_bytes = m.tail_bytes + len(lines)
        else:
            whole = b"".join(_encoder.encode(d) + b"\n" for d in tail)
            _write(self.dir / "tail.jsonl", whole)
            tail_bytes = len(whole)
        manifest = SearchManifest(
            _VERSION,
            self.thread_id,
            log_end,
            last_seq,
            digest,
            n_docs,
            tail_bytes,
            segments,
            total,
        )
        _write(self.dir / "manifest.json", _encoder.encode(manifest))
        # Only now, so that a writer dying before its manifest leaves every file the old
        # manifest names in place.
        live = {s.name for s in segments}
        for p in self.dir.glob("seg-*.bin"):
            if p.name not in live:
                p.unlink()
        return n_docs - m.docs

    def _merge(self, segments: list[SegmentRef], kept: set[str]) -> list[SegmentRef]:
        """Merge the last 16 segments into one while they have one size, start at a multiple
        of the merged size, and the merged one holds at most ``MAX_SEGMENT`` documents. The
        merged ones that no manifest names (``kept`` are the live manifest's) go at once."""
        while merge_due(segments):
            group = segments[-FANOUT:]
            size = group[0].n_docs
            merged = merge_segments([self._segment(s) for s in group])
            ref = SegmentRef(group[0].first_doc, size * FANOUT)
            _write(self.dir / ref.name, merged)
            segments = [*segments[:-FANOUT], ref]
            for s in group:
                if s.name not in kept:
                    (self.dir / s.name).unlink(missing_ok=True)
        return segments

    def _tail(self, m: SearchManifest) -> list[Doc]:
        if not m.tail_bytes:
            return []
        with open(self.dir / "tail.jsonl", "rb") as f:
            raw = f.read(m.tail_bytes)
        if len(raw) != m.tail_bytes:
            raise ValueError("tail.jsonl is shorter than its manifest says")
        return [_doc_decoder.decode(line) for line in raw.splitlines()]

    def _segment(self, ref: SegmentRef) -> Segment:
        return Segment(_read_map(self.dir / ref.name), ref.first_doc)

    # -- reading --

    def view(self) -> IndexView | None:
        """The index as of its manifest (None if there is none; ``refresh()`` first).

        Read under a shared lock: a writer in another process rewrites ``tail.jsonl`` and
        removes merged segments before and after its manifest, never while this is held.
        """
        return self._locked_view(current_only=False)

    def current_view(self) -> IndexView | None:
        """The index as of the log's end. When nothing is new this costs one stat and one short
        read of the log: no catch-up of the frame caches, no other check. Otherwise (the log
        moved on, or the index is missing, old or damaged) it is ``refresh()`` then ``view()``.
        None if the thread has nothing indexed yet. In a store this process cannot write, an
        index that is not current raises :class:`CachesReadOnly` (see :meth:`usable`)."""
        view = self._locked_view(current_only=True)
        if view is not None:
            return view
        if not caches_writable(self.cache_dir):
            self.frames.check_length()
            raise CachesReadOnly(
                f"the search index of thread {self.thread_id!r} is out of date and cannot be "
                f"written ({self.cache_dir} cannot be written)"
            )
        self.refresh()
        return self.view()

    @staticmethod
    def usable(thread: Thread) -> bool:
        """Whether search should go through this thread's index: its store keeps caches and the
        index can be brought up to date (written, or current already in a store this process
        cannot write). Otherwise search reads the thread's documents from the log."""
        cache_dir = thread.store.cache_dir
        if cache_dir is None:
            return False
        if caches_writable(cache_dir):
            return True
        ThreadIndex(thread).check_length()
        try:
            return ThreadSearchIndex(thread)._locked_view(current_only=True) is not None
        except OSError:
            return False

    def _locked_view(self, *, current_only: bool) -> IndexView | None:
        """The view of the manifest, under the shared lock; with ``current_only``, None unless
        the manifest is this version's and the log ends where it says, and None (not an error)
        when a file behind it is missing or damaged."""
        try:
            fd = os.open(self.dir / ".lock", os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            m = self.manifest()
            if m is None:
                return None
            if not current_only:
                return IndexView(self, m)
            if (
                m.version != _VERSION
                or m.thread_id != self.thread_id
                or m.last_seq < 0
                or not self._log_ends_with(m.log_end, m.digest)
            ):
                return None
            try:
                return IndexView(self, m)
            except (OSError, ValueError, struct.error, msgspec.DecodeError):
                return None  # refresh() sees what is wrong and rebuilds
        finally:
            os.close(fd)

    def _log_ends_with(self, end: int, digest: str) -> bool:
        """Whether the thread's log is exactly ``end`` bytes long and its last line carries
        ``digest``: the chain digest of every frame up to it, so nothing indexed has changed."""
        return log_holds(self.thread, end, digest, exact=True)


def log_holds(thread: Thread, end: int, digest: str, *, exact: bool) -> bool:
    """Whether the line of ``thread``'s log that ends at byte ``end`` carries ``digest`` (the
    chain digest of every frame up to it: the log's first ``end`` bytes are the ones indexed),
    and, if ``exact``, the log ends there. One open and one short read."""
    want = fr.DIGEST_HEX_LEN + 32  # the sealed suffix and a few bytes of the body before it
    log = thread.open_log()
    if log is None:
        return False
    with log:
        if end <= want or (exact and log.size() != end):
            return False
        data = log.pread(want, end - want)
    sealed = fr.unseal(data[:-1]) if data.endswith(b"\n") else None
    return sealed is not None and sealed[1].hex() == digest


_CLEARED: Final[dict[Path, int]] = {}
"""How many times this process cleared each index folder (for a rebuild, or an index it could
not trust): what the process holds of an index (:mod:`continuity.caches.search_state`) is
dropped when this moves."""


def cleared(folder: Path) -> int:
    """How many times this process cleared the index in ``folder``."""
    return _CLEARED.get(folder, 0)


def _write(path: Path, data: bytes) -> None:
    atomic_write(path, data, durable=False)  # no fsync: a cache is rebuilt, not recovered


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


class IndexView:
    """A consistent read of one thread's index: docs, segments and tail of one manifest."""

    def __init__(self, index: ThreadSearchIndex, m: SearchManifest) -> None:
        self.thread_id = index.thread_id
        self.manifest = m
        raw = _read_map(index.dir / "docs.bin") if m.docs else b""
        self.docs = np.frombuffer(raw, dtype=DOC_RECORD, count=m.docs) if m.docs else None
        if self.docs is not None and m.total_length >= 0:
            held = int(self.docs["len"].sum(dtype=np.uint64))
            if held != m.total_length:
                raise ValueError(
                    f"docs.bin lengths sum to {held}, the manifest says {m.total_length}"
                )
        self.segments: list[Segment | DocsSegment] = []
        for ref in m.segments:
            segment = index._segment(ref)
            if segment.n_docs != ref.n_docs:
                raise ValueError(f"{ref.name} holds {segment.n_docs} documents")
            self.segments.append(segment)
        tail = index._tail(m)
        if tail:
            # The tail must be the documents docs.bin ends with: a writer that died between a
            # seal's tail.jsonl and its manifest leaves another tail under the old manifest.
            assert self.docs is not None
            if [d.seq for d in tail] != self.docs["seq"][m.docs - len(tail) :].tolist():
                raise ValueError("tail.jsonl is not the end of docs.bin")
            self.segments.append(DocsSegment(tail, m.docs - len(tail)))

    def seqs(self) -> npt.NDArray[np.uint64]:
        return self.docs["seq"] if self.docs is not None else np.zeros(0, np.uint64)

    def lengths(self) -> npt.NDArray[np.uint32]:
        return self.docs["len"] if self.docs is not None else np.zeros(0, np.uint32)


def summary_text(store: BaseStore, frame: fr.Frame) -> str | None:
    """The text of a checkpoint's summary (None for other frames or an unreadable artifact)."""
    if not isinstance(frame, fr.CompactionCheckpointCreated):
        return None
    from continuity.summary import decode_summary

    try:
        data = store.artifacts.get(frame.summary_artifact_id)
    except (ArtifactNotFound, ArtifactCorrupt):
        return None
    try:
        return decode_summary(data).text
    except (msgspec.DecodeError, UnicodeDecodeError):
        return data.decode("utf-8", "replace")


def frame_text(frame: fr.Frame, store: BaseStore) -> str:
    """What a frame says, as one line of text (the fields the index tokenizes)."""
    return text_of(frame, summary_text(store, frame))


def text_of(frame: fr.Frame, summary: str | None) -> str:
    """:func:`frame_text` for a caller that has read the checkpoint's summary already."""
    return " ".join(" ".join(t.split()) for t, _w in _fields(frame, summary))


def docs_of(frames: Iterable[fr.Frame], store: BaseStore) -> Iterator[Doc]:
    """The documents of ``frames`` as the index makes them (the scan path's reference)."""
    for f in frames:
        d = doc_of(f, summary_text(store, f))
        if d is not None:
            yield d


DOC_TYPES: Final = tuple(
    f'{{"type":"{kind.__struct_config__.tag}"'.encode()
    for kind in (fr.MessageAppended, fr.ObservationRecorded, fr.CompactionCheckpointCreated)
)
"""How the stored lines of the frames that can be documents start: the others (decisions,
jobs, records…) are not decoded."""


def doc_of_line(thread: Thread, seq: int, line: bytes) -> Doc | None:
    """The document of one stored line of ``thread`` (None for a frame that makes none); a line
    that cannot be a document is not decoded."""
    if line.startswith(DOC_TYPES) or not line.startswith(b'{"type":"'):
        frame = thread.decode(seq, line)
        return doc_of(frame, summary_text(thread.store, frame))
    return None


def documents_of_lines(thread: Thread, lines: Sequence[tuple[int, bytes]]) -> list[Doc]:
    """The documents of ``thread``'s stored lines ((seq, line) pairs, in log order): what a
    backend that keeps its own search index (:meth:`BaseStore.search_backend`) is given to
    index with, so that it makes the documents this module makes."""
    return [d for seq, line in lines if (d := doc_of_line(thread, seq, line)) is not None]


def rebuild_search(store: BaseStore, threads: Sequence[Thread] | None = None) -> int:
    """Rebuild the search indexes that exist (others are built by the first search that needs
    them) and remove those of threads that no longer exist; return how many were rebuilt. A
    backend that keeps its own index (a server's tables) drops and rebuilds it."""
    backend = store.search_backend() if store.cache_dir is None else None
    if backend is not None:
        return backend.rebuild_search(threads, documents_of_lines)
    root = None if store.cache_dir is None else store.cache_dir / "search"
    if root is None or not root.is_dir():
        return 0
    live = set(store.threads())
    chosen = None if threads is None else {t.id: t for t in threads}
    rebuilt = 0
    for sub in sorted(root.iterdir()):
        if not sub.is_dir():
            continue
        if sub.name not in live:
            if chosen is None:
                shutil.rmtree(sub, ignore_errors=True)
            continue
        if chosen is None or sub.name in chosen:
            thread = chosen[sub.name] if chosen is not None else store.thread(sub.name)
            ThreadSearchIndex(thread).rebuild()
            rebuilt += 1
    return rebuilt
