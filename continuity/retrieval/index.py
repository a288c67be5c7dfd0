"""A thread's search index: an inverted index over its documents, a cache like the others.

It lives in ``<store>/cache/search/<thread_id>/``: a watermark per thread, incremental
catch-up, rebuilt from the log, and deleting it changes no result. Its shape is a pure function
of the log, so a rebuild gives the same bytes:

``docs.bin``        one 16-byte record per document in log order: seq u64, weighted length u32,
                    kind u8 (1 message, 2 observation, 3 summary), role u8, 2 zero bytes
``seg-*.bin``       sealed segments of 256, 4,096 or 65,536 documents (256 × 16^k, k ≤ 2; an
                    inverted index each, :mod:`.segments`); every 16 equal neighbours below
                    the cap merge into one, at fixed document counts, so the set of segments
                    depends only on how many docs exist; no merge goes past ``MAX_SEGMENT``
                    (ADR 0011), so an update rewrites at most 65,536 documents
``tail.jsonl``      the documents not yet in a segment (fewer than 256), one line each; it only
                    grows between seals (each manifest names the bytes it covers)
``manifest.json``   the watermark (last seq, its digest, log offset) and the segment list

A catch-up (or a rebuild) reads the new frames ``_CHUNK`` documents at a time, sealing and
merging segments as they fill, so its memory does not grow with the thread; only its final
manifest commits what it wrote. The documents are :mod:`.documents`', their terms
:mod:`.terms`'; ranking over the index is :mod:`.ranking`.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import struct
import tempfile
from collections.abc import Iterable, Sequence
from itertools import islice
from pathlib import Path
from typing import Final

import msgspec
import numpy as np
import numpy.typing as npt

from continuity import frames as fr
from continuity._fs import atomic_write, private_dirs, remove_temps
from continuity.caches.thread_index import (
    ThreadIndex,
    caches_writable,
    keeps_none,
    log_is_small,
    writing_caches,
)
from continuity.errors import CachesReadOnly
from continuity.retrieval import segments as seg_format
from continuity.retrieval.documents import Doc, doc_of, documents_of_lines, summary_text
from continuity.retrieval.segments import (
    DocsSegment,
    Segment,
    SegmentRef,
    build_segment,
    merge_segments,
    read_map,
)
from continuity.store.base import BaseStore, Thread

__all__ = [
    "DOC_DECODER",
    "DOC_RECORD",
    "VERSION",
    "IndexView",
    "SearchManifest",
    "ThreadSearchIndex",
    "cleared",
    "log_holds",
    "read_manifest",
    "rebuild_search",
]

_DOC: Final = struct.Struct("<QIBB2x")
DOC_RECORD: Final = np.dtype(
    [("seq", "<u8"), ("len", "<u4"), ("kind", "u1"), ("role", "u1"), ("pad", "V2")]
)
"""A ``docs.bin`` record as numpy reads it (the layout of ``_DOC``)."""
_CHUNK: Final = 16_384
"""Documents tokenized, written and sealed at a time by a catch-up."""
VERSION: Final = 4  # 2: Unicode-aware tokens; 3: segments of at most MAX_SEGMENT documents;
# 4: ASCII words by their Snowball English stem (ADR 0032)
# (Tool results given as parts and provider blocks are indexed at version 3: they came with the
# schema that added them, so no log an older build indexed holds one, and no document changed.)


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
DOC_DECODER: Final = msgspec.json.Decoder(Doc)
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
        if m.version != VERSION or m.thread_id != self.thread_id or m.last_seq < 0:
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
            empty = SearchManifest(VERSION, self.thread_id, 0, -1, "", 0, 0, [])
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
        """Index what is new (rebuild if the watermark no longer matches); return docs added.
        :class:`CachesReadOnly` when there is no room to write it (a full disk)."""
        with writing_caches(self.cache_dir):
            return self._refresh(rebuild=False)

    def rebuild(self) -> int:
        """Drop the index and build it again from the log; return the docs indexed."""
        with writing_caches(self.cache_dir):
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
                m = SearchManifest(VERSION, self.thread_id, 0, -1, "", 0, 0, [])
            if log is None or m.last_seq + 1 >= frames:
                return 0
            docs = (
                d
                for f in index.read(m.last_seq + 1, frames - 1)
                if (d := doc_of(f, self._summary(f))) is not None
            )
            # Under the lock every writer of the folder takes: a temporary file here is one a
            # writer killed between its write and its rename left behind.
            remove_temps(self.dir, holding_lock=True)
            return self._add(m, docs, log.log_end, log.offsets.last_seq, log.offsets.digest)
        finally:
            os.close(fd)

    def _trusted(self, index: ThreadIndex, m: SearchManifest) -> bool:
        if m.version != VERSION or m.thread_id != self.thread_id:
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
                if (self.dir / ref.name).stat().st_size < seg_format.HEADER_BYTES:
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
            first = DOC_DECODER.decode(raw[: raw.index(b"\n")])
            last = DOC_DECODER.decode(raw[raw.rfind(b"\n", 0, len(raw) - 1) + 1 : -1])
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
                while len(tail) - start >= seg_format.BLOCK:
                    ref = SegmentRef(sealed, seg_format.BLOCK)
                    _write(
                        self.dir / ref.name, build_segment(tail[start : start + seg_format.BLOCK])
                    )
                    segments.append(ref)
                    sealed += seg_format.BLOCK
                    start += seg_format.BLOCK
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
            VERSION,
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
        while seg_format.merge_due(segments):
            group = segments[-seg_format.FANOUT :]
            size = group[0].n_docs
            merged = merge_segments([self._segment(s) for s in group])
            ref = SegmentRef(group[0].first_doc, size * seg_format.FANOUT)
            _write(self.dir / ref.name, merged)
            segments = [*segments[: -seg_format.FANOUT], ref]
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
        return [DOC_DECODER.decode(line) for line in raw.splitlines()]

    def _segment(self, ref: SegmentRef) -> Segment:
        return Segment(read_map(self.dir / ref.name), ref.first_doc)

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
                m.version != VERSION
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
not trust): what the process holds of an index (:mod:`continuity.retrieval.state`) is
dropped when this moves."""


def cleared(folder: Path) -> int:
    """How many times this process cleared the index in ``folder``."""
    return _CLEARED.get(folder, 0)


def _write(path: Path, data: bytes) -> None:
    atomic_write(path, data, durable=False)  # no fsync: a cache is rebuilt, not recovered


class IndexView:
    """A consistent read of one thread's index: docs, segments and tail of one manifest."""

    def __init__(self, index: ThreadSearchIndex, m: SearchManifest) -> None:
        self.thread_id = index.thread_id
        self.manifest = m
        raw = read_map(index.dir / "docs.bin") if m.docs else b""
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
