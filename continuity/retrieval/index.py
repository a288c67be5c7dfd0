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
``manifest.json``   the watermark (last seq, its digest, log offset), the segment list, the
                    checksums of the other files and, last, its own (:func:`.segments.sealed_json`)

**Whole or not at all.** Every file says whether it is whole: the manifest carries the CRC-32 of
``docs.bin``'s committed records (extended, not recomputed, as they grow), of the tail's committed
bytes and of each segment, and its own. A reader checks what it reads (``docs.bin`` and the tail
always, a segment whenever it reads it whole) and a file that fails is never served: the index is
built again from the log, with a note on stderr. A rebuild writes ``docs.bin`` under a temporary
name and renames it whole, segments and the tail are written whole (temporary file, rename), and
the manifest goes last: it is the commit point. A catch-up appends to ``docs.bin`` and the tail
past the extent the live manifest names (cut back to it first), so a killed writer leaves every
byte that manifest names as it was. ``verify`` checks the checksums and the structure (counts,
seqs in order and within the log, the watermark against the log's frame): it never tokenizes.

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
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain, islice
from pathlib import Path
from typing import BinaryIO, Final

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
from continuity.errors import CachesReadOnly, ContinuityError, note_rebuilt
from continuity.retrieval import segments as seg_format
from continuity.retrieval.documents import Doc, doc_of, documents_of_lines, summary_text
from continuity.retrieval.segments import (
    DocsSegment,
    Segment,
    SegmentRef,
    build_segment,
    crc,
    load_sealed,
    open_segment,
    read_map,
    sealed_json,
    write_merged,
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
    "empty_files",
    "load_manifest",
    "log_holds",
    "read_manifest",
    "rebuild_search",
    "watermark_problem",
]

_DOC: Final = struct.Struct("<QIBB2x")
DOC_RECORD: Final = np.dtype(
    [("seq", "<u8"), ("len", "<u4"), ("kind", "u1"), ("role", "u1"), ("pad", "V2")]
)
"""A ``docs.bin`` record as numpy reads it (the layout of ``_DOC``)."""
_CHUNK: Final = 1_024
"""Documents tokenized, written and sealed at a time by a catch-up."""
VERSION: Final = 5  # 2: Unicode-aware tokens; 3: segments of at most MAX_SEGMENT documents;
# 4: ASCII words by their Snowball English stem (ADR 0032); 5: checksums of every file
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
    docs_crc: int = 0
    """The CRC-32 of ``docs.bin``'s first ``docs`` records."""
    tail_crc: int = 0
    """The CRC-32 of ``tail.jsonl``'s first ``tail_bytes`` bytes."""
    check: str = ""
    """The CRC-32 of the manifest's bytes before this field (:func:`.segments.sealed_json`)."""


_manifest_decoder: Final = msgspec.json.Decoder(SearchManifest)
DOC_DECODER: Final = msgspec.json.Decoder(Doc)
_encoder: Final = msgspec.json.Encoder()


def read_manifest(folder: Path) -> SearchManifest | None:
    """The manifest of the index in ``folder`` (None when it is missing or damaged; one of
    another version is returned unchecked: its version alone sends it to a rebuild)."""
    return load_manifest(folder)[0]


def load_manifest(folder: Path) -> tuple[SearchManifest | None, str | None]:
    """(the manifest of the index in ``folder``, what is wrong with it): (None, None) when
    there is none, (None, a problem) when it is damaged."""
    return load_sealed(folder / "manifest.json", _manifest_decoder, VERSION)


def _empty(thread_id: str) -> SearchManifest:
    return SearchManifest(VERSION, thread_id, 0, -1, "", 0, 0, [], 0)


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
        """What is wrong with this index on disk (empty when it is sound, absent, of another
        version, which the next search rebuilds, or behind the log). Its checksums and structure,
        never its terms (a 1M-frame index is checked in the time it takes to read it once): the
        manifest's own check, the watermark against the log (a log that ends before it, or whose
        frame there is another, is named), each file as long as the manifest says and matching
        its checksum, the documents' seqs ascending and within the watermark, their lengths
        summing to the manifest's, the segments following one another, the tail being the end of
        ``docs.bin``, and no empty file."""
        m, damage = load_manifest(self.dir)
        found = [] if damage is None else [damage]
        found += empty_files(self.dir)
        if m is None or m.version != VERSION:
            return found
        if m.thread_id != self.thread_id:
            return [*found, f"manifest.json names thread {m.thread_id!r}"]
        if m.last_seq >= 0:
            behind = watermark_problem(self.thread, m.last_seq, m.log_end, m.digest)
            if behind is not None:
                found.append(behind)
        elif m.docs or m.segments or m.tail_bytes:
            found.append("manifest.json names documents but no frame of the log")
        return found + _file_problems(self.dir, m)

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
            m = None if rebuild else self._manifest_to_extend()
            # One read of the offsets' watermark: another process may catch the offset index up
            # while this one works, and the frames indexed must be exactly the ones it names.
            log = index.manifest()
            frames = 0 if log is None else log.offsets.entries
            if m is not None:
                why = self._distrust(index, m)
                if why:
                    note_rebuilt(f"the search index of thread {self.thread_id}", why)
                if why is not None:
                    m = None
            if m is None:
                self._clear()
                m = _empty(self.thread_id)
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

    def _manifest_to_extend(self) -> SearchManifest | None:
        """The manifest a catch-up extends; a damaged one is said on stderr (and rebuilt)."""
        m, damage = load_manifest(self.dir)
        if damage is not None:
            note_rebuilt(f"the search index of thread {self.thread_id}", damage)
        return m

    def _distrust(self, index: ThreadIndex, m: SearchManifest) -> str | None:
        """Why ``m`` cannot be extended: "" for another version's index (rebuilt unsaid), a
        problem for an index that is not the log's or not whole; None when it can."""
        if m.version != VERSION or m.thread_id != self.thread_id:
            return ""
        if m.last_seq < 0:
            return None
        at = index.offset(m.last_seq)
        line = (
            None
            if at is None
            else next(
                index.thread.read_lines(from_seq=m.last_seq, to_seq=m.last_seq, start_offset=at),
                None,
            )
        )
        sealed = fr.unseal(line[1]) if line is not None else None
        if sealed is None or sealed[1].hex() != m.digest:
            return watermark_problem(self.thread, m.last_seq, m.log_end, m.digest) or (
                f"its watermark (seq {m.last_seq}) is not the log's frame there"
            )
        return self._files_problem(m)

    def _files_problem(self, m: SearchManifest) -> str | None:
        """What makes the files not hold what ``m`` names, as far as a catch-up can see in a few
        short reads: each file's length, and the tail (read whole: it is short) against its
        checksum and the end of ``docs.bin``. A writer that died after rewriting ``tail.jsonl``
        for a seal but before its manifest leaves a tail the old manifest's checksum refuses."""
        n_tail = m.docs - sum(s.n_docs for s in m.segments)
        if n_tail < 0 or (n_tail == 0) != (m.tail_bytes == 0):
            return "the manifest's segments and tail do not add up to its documents"
        try:
            if m.docs and (self.dir / "docs.bin").stat().st_size < m.docs * _DOC.size:
                return "docs.bin is shorter than its manifest says"
            for ref in m.segments:
                if (self.dir / ref.name).stat().st_size < seg_format.HEADER_BYTES:
                    return f"{ref.name} is cut short"
            if not n_tail:
                return None
            tail = _read_tail(self.dir / "tail.jsonl", m)
            with open(self.dir / "docs.bin", "rb") as f:
                f.seek((m.docs - n_tail) * _DOC.size)
                first_seq: int = _DOC.unpack(f.read(_DOC.size))[0]
                f.seek((m.docs - 1) * _DOC.size)
                last_seq: int = _DOC.unpack(f.read(_DOC.size))[0]
        except (
            OSError,
            ValueError,
            struct.error,
            msgspec.DecodeError,
            UnicodeDecodeError,
            msgspec.ValidationError,
        ) as exc:
            return str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
        if len(tail) != n_tail or (tail[0].seq, tail[-1].seq) != (first_seq, last_seq):
            return "tail.jsonl is not the end of docs.bin"
        return None

    def _summary(self, frame: fr.Frame) -> str | None:
        return summary_text(self.thread.store, frame)

    def _clear(self) -> None:
        _CLEARED[self.dir] = _CLEARED.get(self.dir, 0) + 1
        # The manifest first: without it nothing else is read, so no file goes while named.
        (self.dir / "manifest.json").unlink(missing_ok=True)
        for p in self.dir.glob("*"):
            if p.name != ".lock":
                p.unlink(missing_ok=True)

    def _add(
        self, m: SearchManifest, docs: Iterable[Doc], log_end: int, last_seq: int, digest: str
    ) -> int:
        """Append ``docs`` to the index of ``m`` and commit them with a new manifest; return how
        many there were. They are taken ``_CHUNK`` at a time, so memory stays bounded however
        many there are.

        Until the new manifest replaces ``m``, every byte ``m`` names stays as it was:
        ``docs.bin`` is cut back to ``m``'s length and only grows (or, when ``m`` has none, is
        written under a temporary name and renamed whole); new segments have names ``m`` does
        not use and are written whole, and ``m``'s are deleted only after the new manifest is
        written. Without a seal, ``tail.jsonl`` is cut back to ``m``'s length and only grows
        too; a seal replaces it whole, after which ``m``'s checksum refuses it and the index
        would be rebuilt.
        """
        run = _Run(self, m)
        new = iter(docs)
        first = next(new, None)
        if first is not None:
            found = chain([first], new)
            if m.docs:
                fd = os.open(self.dir / "docs.bin", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                with os.fdopen(fd, "ab") as f:
                    f.truncate(m.docs * _DOC.size)
                    run.take(found, f)
            else:
                atomic_write(self.dir / "docs.bin", lambda f: run.take(found, f), durable=False)
        tail_bytes, tail_crc = run.write_tail()
        manifest = SearchManifest(
            VERSION,
            self.thread_id,
            log_end,
            last_seq,
            digest,
            run.n_docs,
            tail_bytes,
            run.segments,
            run.total,
            run.docs_crc,
            tail_crc,
        )
        _write(self.dir / "manifest.json", sealed_json(_encoder.encode(manifest)))
        # Only now, so that a writer dying before its manifest leaves every file the old
        # manifest names in place.
        live = {s.name for s in run.segments}
        for p in self.dir.glob("seg-*.bin"):
            if p.name not in live:
                p.unlink()
        if not tail_bytes:
            (self.dir / "tail.jsonl").unlink(missing_ok=True)
        return run.n_docs - m.docs

    def _merge(self, segments: list[SegmentRef], kept: set[str]) -> list[SegmentRef]:
        """Merge the last 16 segments into one while they have one size, start at a multiple
        of the merged size, and the merged one holds at most ``MAX_SEGMENT`` documents. The
        merged ones that no manifest names (``kept`` are the live manifest's) go at once."""
        while seg_format.merge_due(segments):
            group = segments[-seg_format.FANOUT :]
            size = group[0].n_docs
            name = SegmentRef(group[0].first_doc, size * seg_format.FANOUT).name
            check = write_merged(self.dir / name, [self._segment(s, whole=True) for s in group])
            ref = SegmentRef(group[0].first_doc, size * seg_format.FANOUT, check)
            segments = [*segments[: -seg_format.FANOUT], ref]
            for s in group:
                if s.name not in kept:
                    (self.dir / s.name).unlink(missing_ok=True)
        return segments

    def _tail(self, m: SearchManifest) -> list[Doc]:
        return _read_tail(self.dir / "tail.jsonl", m)

    def _segment(self, ref: SegmentRef, *, whole: bool = False) -> Segment:
        return open_segment(self.dir / ref.name, ref, whole=whole)

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


def empty_files(folder: Path) -> list[str]:
    """The empty files of an index folder (its lock and temporary files aside): no writer
    leaves one (each file is written whole, or grown past a committed extent)."""
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    found = []
    for name in names:
        if name == ".lock" or (name.startswith(".") and name.endswith(".tmp")):
            continue
        try:
            if os.stat(folder / name).st_size == 0:
                found.append(f"{name} is empty")
        except OSError:
            continue
    return found


def watermark_problem(thread: Thread, last_seq: int, log_end: int, digest: str) -> str | None:
    """None when the log's line that ends at byte ``log_end`` carries ``digest`` (an index's
    watermark at seq ``last_seq``); else what is wrong, named: the log ends before it (frames
    the index recorded are gone from the log), or the log's frame there is another one."""
    if log_holds(thread, log_end, digest, exact=False):
        return None
    log = thread.open_log()
    size = 0
    if log is not None:
        with log:
            size = log.size()
    try:
        head = thread.head()
        n = head.seq + 1 if head is not None else 0
        held = f"{n} frame{'' if n == 1 else 's'}"
    except ContinuityError:
        held = f"{size} bytes"
    if size < log_end:
        return (
            f"recorded {last_seq + 1} frames ({log_end} bytes) of the log, which holds {held}: "
            "the log is shorter than what the search index recorded"
        )
    return (
        f"its watermark (seq {last_seq}) is not the log's frame there: the log was replaced "
        "or rewritten after it was indexed"
    )


def _file_problems(folder: Path, m: SearchManifest) -> list[str]:
    """``docs.bin``, the segments and the tail against what ``m`` says of them."""
    raw = b""
    if m.docs:
        try:
            with open(folder / "docs.bin", "rb") as f:
                raw = f.read(m.docs * _DOC.size)
        except OSError as exc:
            return [f"docs.bin cannot be read: {exc}"]
    if len(raw) < m.docs * _DOC.size:
        return ["docs.bin is shorter than its manifest says"]
    if crc(raw) != m.docs_crc:
        return ["docs.bin does not match its checksum"]
    records = np.frombuffer(raw, DOC_RECORD)
    seqs = records["seq"]
    found = []
    if len(seqs) and (not bool(np.all(seqs[1:] > seqs[:-1])) or int(seqs[-1]) > m.last_seq):
        found.append("docs.bin holds seqs out of order or past its watermark")
    if int(records["len"].sum(dtype=np.uint64)) != m.total_length:
        found.append("docs.bin's lengths do not sum to what its manifest says")
    first = 0
    for ref in m.segments:
        if ref.first_doc != first:
            found.append(f"{ref.name} does not follow the segment before it")
        first = ref.first_doc + ref.n_docs
        try:
            open_segment(folder / ref.name, ref, whole=True)
        except (OSError, ValueError, struct.error) as exc:
            found.append(str(exc) if isinstance(exc, ValueError) else f"{ref.name}: {exc}")
    n_tail = m.docs - first
    if n_tail < 0 or (n_tail == 0) != (m.tail_bytes == 0):
        return [*found, "the manifest's segments and tail do not add up to its documents"]
    try:
        tail = _read_tail(folder / "tail.jsonl", m)
    except (OSError, ValueError, msgspec.DecodeError) as exc:
        return [*found, str(exc)]
    if [d.seq for d in tail] != seqs[first:].tolist():
        found.append("tail.jsonl is not the end of docs.bin")
    return found


def _read_tail(path: Path, m: SearchManifest) -> list[Doc]:
    """The tail's documents, as far as ``m`` names them, checked against ``m``'s checksum."""
    if not m.tail_bytes:
        return []
    with open(path, "rb") as f:
        raw = f.read(m.tail_bytes)
    if len(raw) != m.tail_bytes:
        raise ValueError("tail.jsonl is shorter than its manifest says")
    if crc(raw) != m.tail_crc:
        raise ValueError("tail.jsonl does not match its checksum")
    return [DOC_DECODER.decode(line) for line in raw.splitlines()]


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


class _Run:
    """One ``_add``: the documents taken so far, the segments sealed and merged, ``docs.bin``'s
    running checksum and length sum, and the documents not sealed yet."""

    def __init__(self, index: ThreadSearchIndex, m: SearchManifest) -> None:
        self.index = index
        self.m = m
        self.kept = {s.name for s in m.segments}
        self.segments = list(m.segments)
        self.sealed_before = self.sealed = sum(s.n_docs for s in self.segments)
        self.tail = index._tail(m)
        self.n_old_tail = len(self.tail)
        self.n_docs = m.docs
        self.total = 0 if not m.docs else m.total_length
        self.docs_crc = 0 if not m.docs else m.docs_crc

    def take(self, docs: Iterator[Doc], f: BinaryIO) -> None:
        """Write ``docs``' records to ``f`` (``docs.bin``, open at its committed end), sealing
        and merging segments as the tail fills."""
        block = seg_format.BLOCK  # read here: tests make it small
        folder = self.index.dir
        while chunk := list(islice(docs, _CHUNK)):
            self.total += sum(min(d.length, 2**32 - 1) for d in chunk)
            records = b"".join(
                _DOC.pack(d.seq, min(d.length, 2**32 - 1), d.kind, d.role) for d in chunk
            )
            f.write(records)
            self.docs_crc = crc(records, self.docs_crc)
            self.n_docs += len(chunk)
            tail = self.tail
            tail.extend(chunk)
            start = 0
            while len(tail) - start >= block:
                data = build_segment(tail[start : start + block])
                ref = SegmentRef(self.sealed, block, crc(data))
                _write(folder / ref.name, data)
                self.segments.append(ref)
                self.sealed += block
                start += block
                self.segments = self.index._merge(self.segments, self.kept)
            del tail[:start]

    def write_tail(self) -> tuple[int, int]:
        """Write the documents not sealed (appended to the old tail, or the whole tail after a
        seal); return the tail's bytes and checksum."""
        m, path = self.m, self.index.dir / "tail.jsonl"
        if self.sealed == self.sealed_before and m.tail_bytes:
            lines = b"".join(_encoder.encode(d) + b"\n" for d in self.tail[self.n_old_tail :])
            if lines:
                fd = os.open(path, os.O_WRONLY | os.O_APPEND, 0o600)
                with os.fdopen(fd, "ab") as f:
                    f.truncate(m.tail_bytes)
                    f.write(lines)
            return m.tail_bytes + len(lines), crc(lines, m.tail_crc)
        whole = b"".join(_encoder.encode(d) + b"\n" for d in self.tail)
        if whole:
            _write(path, whole)
        return len(whole), crc(whole)


class IndexView:
    """A consistent read of one thread's index: docs, segments and tail of one manifest."""

    def __init__(self, index: ThreadSearchIndex, m: SearchManifest) -> None:
        self.thread_id = index.thread_id
        self.manifest = m
        raw = read_map(index.dir / "docs.bin") if m.docs else b""
        if len(raw) < m.docs * _DOC.size:
            raise ValueError("docs.bin is shorter than its manifest says")
        if m.docs and crc(memoryview(raw)[: m.docs * _DOC.size]) != m.docs_crc:
            raise ValueError("docs.bin does not match its checksum")
        self.docs = np.frombuffer(raw, dtype=DOC_RECORD, count=m.docs) if m.docs else None
        if self.docs is not None:
            held = int(self.docs["len"].sum(dtype=np.uint64))
            if held != m.total_length:
                raise ValueError(
                    f"docs.bin lengths sum to {held}, the manifest says {m.total_length}"
                )
        self.segments: list[Segment | DocsSegment] = [index._segment(ref) for ref in m.segments]
        tail = index._tail(m)
        if tail:
            # The tail must be the documents docs.bin ends with.
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
