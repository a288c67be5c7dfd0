"""The store-wide search index: one inverted index over every thread's documents (ADR 0029).

A store-wide ``search`` ranked every thread's own index (:mod:`.index`) with one set of
statistics, which meant opening, checking and reading every thread's index: O(threads) even
when a query matched nothing. This index holds the documents of all threads in one sequence,
so a query reads the postings of its terms and nothing per thread. It lives in
``<store>/cache/search-store/``, a fixed handful of files whatever the number of threads:

``manifest.json``   the threads it indexes, in the order they were first indexed (their
                    ordinal), each with its watermark (log bytes indexed, last seq and its
                    digest), its project (``meta["project"]`` of its ``thread_created``), its
                    document count and length sum; the segment list and the tail's extent
``docs.bin``        one 24-byte record per document: seq u64, weighted length u32, thread
                    ordinal u32, kind u8, role u8, 6 zero bytes (:data:`STORE_DOC`)
``seg-*.bin``       sealed segments of 256 × 16^k (k ≤ 2) documents, merged exactly as a
                    thread's index merges them (:func:`.segments.merge_due`): the same
                    :class:`~.segments.Segment` format, over store-wide document ids
``tail-<n>.jsonl``  the documents after the last sealed one (fewer than 256), a line each;
                    named by the first of them, so a seal writes a new file and the old
                    manifest's stays readable until the new manifest replaces it

**Current without reading the threads.** A read takes every log's stamp
(:meth:`~continuity.store.base.BaseStore.log_stamps`: its size and last 67 bytes, a few system
calls a log, as the store catalog does) and trusts the index for a thread when the log still
has the size it indexed and ends with the digest of its last indexed frame: the chain vouches
for every byte before it, and logs only grow. Any other thread is caught up under the index's
lock (its new frames read from the byte after the watermark, the watermark's digest checked
first); a thread whose indexed frames are no longer the log's (cut, replaced, repaired) or whose
log is gone sends the whole index back to a rebuild: it is a cache.

**Deterministic.** A rebuild indexes the threads in id order, each in seq order, so
``continuity rebuild-index`` gives the same bytes every time; catch-ups append threads and
frames in the order they are found (by thread id within one catch-up). The ranking does not
depend on the order: BM25's statistics are sums, every document's score is summed term by term
in one order, and ties are broken by (thread id, seq), so the hits equal those of ranking every
thread's own index together (the reference the tests compare with).

**Bounded memory** (ADR 0061). A build or a catch-up streams each thread's documents as its
log is read, ``_CHUNK`` at a time, sealing and merging segments on disk as they fill
(:func:`.segments.write_merged`); the threads' entries are all it holds for the whole run. A
rebuild by bulk workers takes their parts from an unnamed temporary file
(:class:`SpooledParts`), a thread at a time, and the workers read no thread whose log is past
:data:`PART_MAX_BYTES`.

**Damage.** Every file says whether it is whole: the manifest carries the CRC-32 of
``docs.bin``'s committed records (extended as they grow), of the tail and of each segment, and
its own (:func:`.segments.sealed_json`). A manifest that does not decode or match its check,
files that do not match it (checksums, sizes, document counts, length sums, the tail against
``docs.bin``, per-thread counts, seqs in order per thread) or a hit whose indexed document is
not the one its frame makes rebuild the index from the logs, with a note on stderr. A writer
killed at any point leaves the last manifest and every file it names intact (``docs.bin`` is
written under a temporary name when the index starts empty, else cut back to the manifest's
extent before it grows; segments and a new tail are written whole under new names; old files go
after the new manifest, which is the commit point). ``verify`` checks the checksums and the
structure, and each thread's watermark against its log (a log shorter than what the index
recorded is named): it never tokenizes.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import struct
import tempfile
from collections.abc import Callable, Collection, Iterator, Mapping
from itertools import chain, islice
from pathlib import Path
from typing import BinaryIO, Final

import msgspec
import numpy as np
import numpy.typing as npt

from continuity import frames as fr
from continuity._fs import atomic_write, no_room, private_dirs, remove_temps
from continuity.caches.listing import content_digest, log_line, log_lines, logs_digest
from continuity.caches.thread_index import DAMAGE, ThreadIndex, caches_writable, writing_caches
from continuity.errors import CachesReadOnly, ContinuityError, note_rebuilt
from continuity.retrieval.documents import Doc, doc_of_line
from continuity.retrieval.index import empty_files, log_holds, watermark_problem
from continuity.retrieval.projects import in_project
from continuity.retrieval.ranking import Corpus, Part
from continuity.retrieval.segments import (
    BLOCK,
    FANOUT,
    DocsSegment,
    SegmentRef,
    build_segment,
    crc,
    json_sound,
    load_sealed,
    merge_due,
    open_segment,
    read_map,
    sealed_json,
    write_merged,
)
from continuity.store.base import BaseStore, LogStamp, Thread

__all__ = [
    "FOLDER",
    "PART_MAX_BYTES",
    "STORE_DOC",
    "SpooledParts",
    "StoreSearchView",
    "ThreadDocs",
    "ThreadEntry",
    "drop_store_search",
    "has_store_search",
    "open_store_search",
    "rebuild_store_search",
    "store_search_problems",
    "thread_documents",
]

FOLDER: Final = "search-store"
_WHERE: Final = "the store-wide search index"
_VERSION: Final = 3  # 2: stemmed terms (search index version 4, ADR 0032); 3: checksums
_TAIL: Final = 67
"""A sealed line ends with its 64 hex digest, ``"}`` and a newline."""
_CHUNK: Final = 1_024
_DOC: Final = struct.Struct("<QIIBB6x")
_U32: Final = 2**32 - 1
STORE_DOC: Final = np.dtype(
    {
        "names": ["seq", "len", "thread", "kind", "role"],
        "formats": ["<u8", "<u4", "<u4", "u1", "u1"],
        "offsets": [0, 8, 12, 16, 17],
        "itemsize": _DOC.size,
    }
)

Progress = Callable[[int, int], None]
"""(threads done, threads to do) while an index is built or caught up."""


class ThreadEntry(msgspec.Struct, frozen=True, array_like=True):
    """One indexed thread: its watermark, project and how many documents it has."""

    thread_id: str
    project: str | None
    log_end: int
    last_seq: int
    digest: str
    docs: int
    total_length: int


class ThreadDocs(msgspec.Struct, frozen=True, array_like=True):
    """One thread's documents read from the start of its log (by a bulk worker, ADR 0030),
    with the watermark they reach: what a rebuild indexes of it while its log still ends
    there."""

    project: str | None
    log_end: int
    last_seq: int
    digest: str
    docs: list[Doc]


class StoreManifest(msgspec.Struct, frozen=True):
    version: int
    threads: list[ThreadEntry]
    docs: int
    total_length: int
    tail_bytes: int
    segments: list[SegmentRef]
    docs_crc: int = 0
    """The CRC-32 of ``docs.bin``'s first ``docs`` records."""
    tail_crc: int = 0
    """The CRC-32 of the tail's first ``tail_bytes`` bytes."""
    check: str = ""
    """The CRC-32 of the manifest's bytes before this field (:func:`.segments.sealed_json`)."""

    @property
    def sealed(self) -> int:
        return sum(s.n_docs for s in self.segments)

    @property
    def tail_name(self) -> str:
        return f"tail-{self.sealed:010d}.jsonl"


_EMPTY: Final = StoreManifest(_VERSION, [], 0, 0, 0, [])
_manifest_decoder: Final = msgspec.json.Decoder(StoreManifest)
_doc_decoder: Final = msgspec.json.Decoder(Doc)
_encoder: Final = msgspec.json.Encoder()


def _sealed_end(digest: str) -> bytes:
    return digest.encode() + b'"}\n'


def _current(entry: ThreadEntry | None, stamp: LogStamp) -> bool:
    return (
        entry is not None
        and entry.log_end == stamp.size
        and stamp.tail == _sealed_end(entry.digest)
    )


def _current_part(part: ThreadDocs, stamp: LogStamp) -> bool:
    return part.log_end == stamp.size and stamp.tail == _sealed_end(part.digest)


def _folder(store: BaseStore) -> Path | None:
    return None if store.cache_dir is None else store.cache_dir / FOLDER


def _read_manifest(folder: Path) -> StoreManifest | None:
    return _load_manifest(folder)[0]


def _load_manifest(folder: Path) -> tuple[StoreManifest | None, str | None]:
    """(this version's manifest in ``folder``, what is wrong with it): (None, None) when there
    is none or it is another version's (rebuilt unsaid), (None, a problem) when it is damaged."""
    m, problem = load_sealed(folder / "manifest.json", _manifest_decoder, _VERSION)
    return (None, None) if m is not None and m.version != _VERSION else (m, problem)


def _encode_manifest(m: StoreManifest) -> bytes:
    return sealed_json(_encoder.encode(m))


def _write(path: Path, data: bytes) -> None:
    atomic_write(path, data, durable=False)  # a cache: rebuilt, not recovered


# --- reading ---------------------------------------------------------------------------------


class _Masked:
    """A part seen through a mask over store-wide document ids: postings of the documents a
    filter (``--project``) keeps."""

    def __init__(self, part: Part, mask: npt.NDArray[np.bool_]) -> None:
        self.part = part
        self.mask = mask
        self.first_doc = part.first_doc
        self.n_docs = part.n_docs

    def postings(self, term: str) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint16]]:
        docs, tfs = self.part.postings(term)
        if not len(docs):
            return docs, tfs
        keep = self.mask[docs.astype(np.int64) + self.first_doc]
        return docs[keep], tfs[keep]

    def count(self, term: str, end: int) -> int:
        docs = self.postings(term)[0]
        return len(docs) if not len(docs) or int(docs[-1]) < end else int(docs.searchsorted(end))


_CHECK_STEP: Final = 1 << 18
"""Documents of ``docs.bin`` checked at a time when a view opens: what the check holds (a sort
order and a few copies, ~30 bytes a document) stays a few MB however many there are."""


def _check_docs(
    m: StoreManifest,
    seqs: npt.NDArray[np.uint64],
    lengths: npt.NDArray[np.uint32],
    thread_of: npt.NDArray[np.uint32],
) -> None:
    """ValueError unless ``docs.bin``'s records are those ``m`` counts: per-thread counts and
    length sums, the total length, and each thread's seqs ascending and within its watermark.
    Read ``_CHECK_STEP`` records at a time (the documents of a 1M-frame thread checked at once
    held ~70 MB)."""
    n_threads = len(m.threads)
    counts = np.zeros(n_threads, np.int64)
    sums = np.zeros(n_threads, np.int64)
    if m.docs and int(thread_of.max()) >= n_threads:
        raise ValueError("docs.bin names a thread the manifest does not hold")
    last = np.zeros(n_threads, np.uint64)  # each thread's last seq so far
    seen = np.zeros(n_threads, np.bool_)
    in_order = True
    for a in range(0, m.docs, _CHECK_STEP):
        t, s = thread_of[a : a + _CHECK_STEP], seqs[a : a + _CHECK_STEP]
        counts += np.bincount(t, minlength=n_threads)
        weights = lengths[a : a + _CHECK_STEP].astype(np.float64)  # exact: far below 2^53
        sums += np.bincount(t, weights, n_threads).astype(np.int64)
        # Seqs ascend within each thread (a damaged seq would give a document another frame's
        # place): stable order by thread keeps each thread's documents in order; each
        # thread's first here must follow its last before.
        if not bool(np.all(t[1:] >= t[:-1])):  # in thread order already: a rebuild's
            by = np.argsort(t, kind="stable")
            t, s = t[by], s[by]
        same = t[1:] == t[:-1]
        firsts = np.concatenate(([True], ~same))
        lasts = np.concatenate((~same, [True]))
        ft = t[firsts]
        in_order = in_order and bool(
            np.all(s[1:][same] > s[:-1][same]) and not np.any(seen[ft] & (s[firsts] <= last[ft]))
        )
        last[t[lasts]] = s[lasts]
        seen[ft] = True
    if counts.tolist() != [e.docs for e in m.threads] or sums.tolist() != [
        e.total_length for e in m.threads
    ]:
        raise ValueError("docs.bin does not hold the documents its manifest counts")
    if int(lengths.sum(dtype=np.uint64)) != m.total_length or m.docs != sum(
        e.docs for e in m.threads
    ):
        raise ValueError("docs.bin lengths do not sum to what the manifest says")
    if not in_order:
        raise ValueError("docs.bin holds a thread's seqs out of order")
    if any(int(last[i]) > e.last_seq for i, e in enumerate(m.threads) if e.docs):
        raise ValueError("docs.bin holds a seq past its thread's watermark")


class StoreSearchView:
    """One consistent read of the store-wide index (one manifest, its files), checked."""

    def __init__(self, folder: Path, m: StoreManifest, *, whole: bool = False) -> None:
        """``whole``: every segment read through against its checksum (``verify``), not only
        those read into memory."""
        self.manifest = m
        self.names = [e.thread_id for e in m.threads]
        raw = read_map(folder / "docs.bin") if m.docs else b""
        if len(raw) < m.docs * _DOC.size:
            raise ValueError("docs.bin is shorter than its manifest says")
        if m.docs and crc(memoryview(raw)[: m.docs * _DOC.size]) != m.docs_crc:
            raise ValueError("docs.bin does not match its checksum")
        docs = np.frombuffer(raw, dtype=STORE_DOC, count=m.docs)
        self.seqs: npt.NDArray[np.uint64] = docs["seq"]
        self.lengths: npt.NDArray[np.uint32] = docs["len"]
        self.thread_of: npt.NDArray[np.uint32] = docs["thread"]
        self.kinds: npt.NDArray[np.uint8] = docs["kind"]
        self.roles: npt.NDArray[np.uint8] = docs["role"]
        _check_docs(m, self.seqs, self.lengths, self.thread_of)
        self.parts: list[Part] = []
        first = 0
        for ref in m.segments:
            if ref.first_doc != first:
                raise ValueError(f"{ref.name} does not follow the segment before it")
            segment = open_segment(folder / ref.name, ref, whole=whole)
            self.parts.append(segment)
            first += ref.n_docs
        tail = _read_tail(folder, m)
        if len(tail) != m.docs - first:
            raise ValueError("the tail does not hold the documents after the last segment")
        if tail:
            if [d.seq for d in tail] != self.seqs[first:].tolist():
                raise ValueError("the tail is not the end of docs.bin")
            self.parts.append(DocsSegment(tail, first))
        self._key: npt.NDArray[np.int64] | None = None

    def thread_key(self) -> npt.NDArray[np.int64]:
        """Each thread ordinal's place in thread id order (ties are broken by thread id)."""
        if self._key is None:
            key = np.zeros(len(self.names), np.int64)
            key[sorted(range(len(self.names)), key=self.names.__getitem__)] = np.arange(
                len(self.names)
            )
            self._key = key
        return self._key

    def corpus(
        self, project: str | None = None, only: Collection[str] | None = None
    ) -> Corpus | None:
        """Every indexed document (or those of the threads of ``project``, and of the threads
        in ``only``) as one corpus."""
        m = self.manifest
        parts = self.parts
        n_docs, total = m.docs, m.total_length
        if project is not None or only is not None:
            chosen = [
                i
                for i, e in enumerate(m.threads)
                if e.docs
                and in_project(e.project, project)
                and (only is None or e.thread_id in only)
            ]
            n_docs = sum(m.threads[i].docs for i in chosen)
            total = sum(m.threads[i].total_length for i in chosen)
            if chosen and n_docs < m.docs:
                wanted = np.zeros(len(m.threads), np.bool_)
                wanted[chosen] = True
                mask = wanted[self.thread_of]
                parts = [_Masked(p, mask) for p in parts]
        if not n_docs:
            return None
        return Corpus(
            "",
            parts,
            self.seqs,
            self.lengths,
            self.kinds,
            self.roles,
            m.docs,
            ordered=True,
            threads=(self.names, self.thread_of, self.thread_key()),
            n_docs=n_docs,
            total_length=total,
        )


def _read_tail(folder: Path, m: StoreManifest) -> list[Doc]:
    if not m.tail_bytes:
        return []
    with open(folder / m.tail_name, "rb") as f:
        raw = f.read(m.tail_bytes)
    if len(raw) != m.tail_bytes:
        raise ValueError(f"{m.tail_name} is shorter than its manifest says")
    if crc(raw) != m.tail_crc:
        raise ValueError(f"{m.tail_name} does not match its checksum")
    return [_doc_decoder.decode(line) for line in raw.splitlines()]


def _stamps(store: BaseStore) -> dict[str, LogStamp] | None:
    stamps = store.log_stamps(_TAIL)
    return None if stamps is None else {s.thread_id: s for s in stamps}


def _is_current(m: StoreManifest, stamps: dict[str, LogStamp]) -> bool:
    """Whether every log with frames is indexed up to its end (the logs of known threads have
    exactly the indexed bytes, and there is no other log but ones without a committed frame,
    which are checked by a catch-up)."""
    if len(m.threads) != len(stamps):
        return False
    for e in m.threads:
        stamp = stamps.get(e.thread_id)
        if stamp is None or not _current(e, stamp):
            return False
    return True


def open_store_search(
    store: BaseStore,
    progress: Progress | None = None,
    handle: Callable[[str], Thread] | None = None,
) -> StoreSearchView | None:
    """The store-wide index of ``store``, brought up to every log's end (built the first time,
    caught up after appends, rebuilt when damaged). None when the store cannot keep one (no
    cache folder, logs that are not bytes, or a folder this process cannot write while the
    index is not current): then search ranks every thread's own index. ``handle`` makes the
    thread handles a catch-up reads through (the caller's, so it makes one per thread)."""
    folder = _folder(store)
    if folder is None:
        return None
    view = _vouched_view(store, folder)
    if view is not None:
        return view
    stamps = _stamps(store)
    if stamps is None:
        return None
    view = _current_view(folder, stamps, store)
    if view is not None:
        return view
    if not caches_writable(store.cache_dir or folder):
        return None
    try:
        with writing_caches(store.cache_dir or folder), _lock(folder, fcntl.LOCK_EX):
            m, damage = _load_manifest(folder)
            if damage is not None:
                note_rebuilt(_WHERE, damage)
            try:
                if m is not None:
                    StoreSearchView(folder, m)  # damage found here rebuilds, never extends
                m = _catch_up(store, folder, m, stamps, progress, handle)
                return StoreSearchView(folder, m)
            except DAMAGE as exc:
                if no_room(exc):
                    raise  # not damage: the disk is full
                note_rebuilt(_WHERE, str(exc))
                m = _catch_up(store, folder, None, stamps, progress, handle)
                return StoreSearchView(folder, m)
    except CachesReadOnly:
        return None  # no room to write it (a full disk): each thread's own index, or its log


def rebuild_store_search(
    store: BaseStore,
    progress: Progress | None = None,
    *,
    if_present: bool = False,
    parts: Mapping[str, ThreadDocs] | None = None,
) -> int | None:
    """Drop the store-wide index and build it again from the logs (the same bytes for the same
    logs); the documents indexed, or None when the store keeps no such index (or, with
    ``if_present``, has none yet: the first search builds it). ``parts`` holds threads'
    documents read already (:func:`thread_documents`, in bulk workers): one is taken instead of
    reading its log when the log still ends where it was read (its size and last digest)."""
    folder = _folder(store)
    if folder is None or (if_present and not has_store_search(store)):
        return None
    stamps = _stamps(store)
    if stamps is None:
        return None
    with _lock(folder, fcntl.LOCK_EX):
        return _catch_up(store, folder, None, stamps, progress, parts=parts).docs


def has_store_search(store: BaseStore) -> bool:
    """Whether a search made the store-wide index (what ``rebuild-index`` rebuilds)."""
    folder = _folder(store)
    return folder is not None and (folder / "manifest.json").exists()


PART_MAX_BYTES: Final = 4 << 20
"""The largest log whose documents a bulk worker reads whole (:func:`thread_documents`): a
larger thread is streamed by the rebuild itself, so no part holds more than a few MB."""


def thread_documents(thread: Thread) -> ThreadDocs | None:
    """Every document of ``thread`` from the start of its log, as a rebuild of the store-wide
    index reads them; None when it has no committed frame or cannot be read (the rebuild reads
    it again and says what is wrong), or when its log is larger than :data:`PART_MAX_BYTES`
    (the rebuild streams it: its documents are never held whole)."""
    try:
        if thread.log_bytes() > PART_MAX_BYTES:
            return None
        project, end, last, docs = _read_docs(thread, 0, 0, None)
    except ContinuityError:
        return None
    if last is None:
        return None
    sealed = fr.unseal(last[1])
    assert sealed is not None  # read_lines checked the chain
    return ThreadDocs(project, end, last[0], sealed[1].hex(), docs)


class SpooledParts(Mapping[str, ThreadDocs]):
    """Threads' documents read by bulk workers (:class:`ThreadDocs` as msgpack, a thread
    each), kept in an unnamed temporary file beside the index and decoded one thread at a time
    as the rebuild takes it: what the calling process holds does not grow with the store. The
    file goes with the process, however it ends."""

    _decoder: Final = msgspec.msgpack.Decoder(ThreadDocs)

    def __init__(self, folder: Path | None) -> None:
        if folder is not None:
            private_dirs(folder)
        self._file = tempfile.TemporaryFile(dir=folder)  # noqa: SIM115 (closed by close())
        self._at: dict[str, tuple[int, int]] = {}
        self._end = 0

    def add(self, thread_id: str, encoded: bytes) -> None:
        """Keep ``encoded`` (one thread's :class:`ThreadDocs` as msgpack)."""
        self._file.seek(self._end)
        self._file.write(encoded)
        self._at[thread_id] = (self._end, len(encoded))
        self._end += len(encoded)

    def __getitem__(self, thread_id: str) -> ThreadDocs:
        start, size = self._at[thread_id]
        self._file.seek(start)
        return self._decoder.decode(self._file.read(size))

    def __iter__(self) -> Iterator[str]:
        return iter(self._at)

    def __len__(self) -> int:
        return len(self._at)

    def close(self) -> None:
        self._file.close()


def _read_docs(
    thread: Thread, start: int, from_seq: int, project: str | None
) -> tuple[str | None, int, tuple[int, bytes] | None, list[Doc]]:
    """(project, end, the last line read, documents) of ``thread``'s committed lines from seq
    ``from_seq`` (whose line starts at byte ``start``)."""
    end = start
    last: tuple[int, bytes] | None = None
    docs: list[Doc] = []
    for seq, line in thread.read_lines(from_seq=from_seq, start_offset=start):
        if seq == 0:
            project = _project(thread.decode(seq, line))
        d = doc_of_line(thread, seq, line)
        if d is not None:
            docs.append(d)
        end += len(line) + 1
        last = (seq, line)
    return project, end, last, docs


def drop_store_search(store: BaseStore) -> None:
    """Delete the store-wide index (the next search builds it again)."""
    folder = _folder(store)
    if folder is not None and folder.is_dir():
        with _lock(folder, fcntl.LOCK_EX):
            _clear(folder)


def _current_view(
    folder: Path, stamps: dict[str, LogStamp], store: BaseStore | None = None
) -> StoreSearchView | None:
    try:
        with _lock(folder, fcntl.LOCK_SH, create=False):
            m = _read_manifest(folder)
            if m is None or not _is_current(m, stamps):
                return None
            try:
                view = StoreSearchView(folder, m)
            except DAMAGE:
                return None  # the writer's path sees what is wrong and rebuilds
            if store is not None:
                _vouch(store, folder, stamps)
            return view
    except FileNotFoundError:
        return None


# --- the stat file: current without opening a log (ADR 0061) ----------------------------------

STAT_FILE: Final = "stat.v1"
"""``<store>/cache/search-store/stat.v1``: one line, ``continuity-search-store 1``, the digest
of ``manifest.json``'s bytes, the number of logs and the digest of every log's (thread id,
inode, size, mtime, ctime) (:func:`~continuity.caches.listing.log_lines`). Written when the
full check found that manifest current for every log and every log's stat was settled when its
stamp was read (the racy-time rule of :meth:`~continuity.store.jsonl.Store.log_stamps`);
while a stat of every log gives the same digest, that manifest is current without a log opened.
Anything else (a log appended, cut, replaced, added or gone, a moved or copied store, another
manifest, a damaged file) is the full check. A stale one vouches for nothing current."""
_STAT_MAGIC: Final = b"continuity-search-store 1"


def _stat_prefix(manifest: bytes) -> bytes:
    return _STAT_MAGIC + f" {content_digest(manifest)} ".encode()


def _stat_line(manifest: bytes, logs: list[str]) -> bytes:
    return _stat_prefix(manifest) + f"{len(logs)} {logs_digest(logs)}\n".encode()


def _stat_root(store: BaseStore, folder: Path) -> Path | None:
    """The folder store's root when ``folder`` is its index's (what the stat file is for)."""
    root = getattr(store, "root", None)
    if not isinstance(root, Path) or folder != root / "cache" / FOLDER:
        return None
    return root


def _vouch(store: BaseStore, folder: Path, stamps: dict[str, LogStamp]) -> None:
    """Write the stat file for the manifest in ``folder`` (found current for ``stamps``, under
    the index's lock) when every log's stat was settled when its stamp was read."""
    root = _stat_root(store, folder)
    settled_stats = getattr(store, "settled_stats", None)
    if root is None or settled_stats is None:
        return
    settled: dict[str, tuple[int, int, int, int]] = settled_stats()
    logs: list[str] = []
    for tid in stamps:  # log_stamps' order: the folder's, as log_lines reads it
        key = settled.get(tid)
        if key is None:
            return  # changed within the clock's granularity of its read: not vouched for
        logs.append(log_line(tid, *key))
    try:
        line = _stat_line((folder / "manifest.json").read_bytes(), logs)
        path = folder / STAT_FILE
        try:
            if path.read_bytes() == line:
                return
        except OSError:
            pass
        _write(path, line)
    except OSError:
        return  # a cache: the next search takes the full check again


def _vouched_view(store: BaseStore, folder: Path) -> StoreSearchView | None:
    """The index when its stat file vouches for every log of a folder store as a stat finds
    it now (no log opened); None otherwise (the full check). Only for a store that has not read
    its stamps yet: a long-lived one's memo is as cheap."""
    root = _stat_root(store, folder)
    if root is None or getattr(store, "stamps_read", True):
        return None
    try:
        with _lock(folder, fcntl.LOCK_SH, create=False):
            try:
                found = (folder / STAT_FILE).read_bytes()
                raw = (folder / "manifest.json").read_bytes()
            except OSError:
                return None
            if not found.startswith(_stat_prefix(raw)):
                return None
            logs = log_lines(root)
            if logs is None or found != _stat_line(raw, logs):
                return None
            try:
                m = _manifest_decoder.decode(raw)
            except (msgspec.DecodeError, UnicodeDecodeError, msgspec.ValidationError):
                return None
            if m.version != _VERSION or not json_sound(raw):
                return None
            try:
                return StoreSearchView(folder, m)
            except DAMAGE:
                return None
    except FileNotFoundError:
        return None


class _lock:
    def __init__(self, folder: Path, how: int, *, create: bool = True) -> None:
        self.folder, self.how, self.create = folder, how, create
        self.fd = -1

    def __enter__(self) -> None:
        if self.create:
            private_dirs(self.folder)
            self.fd = os.open(self.folder / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        else:
            self.fd = os.open(self.folder / ".lock", os.O_RDONLY)
        fcntl.flock(self.fd, self.how)

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)


def _clear(folder: Path) -> None:
    # The manifest first: without it nothing else is read, so no file goes while named.
    (folder / "manifest.json").unlink(missing_ok=True)
    for p in folder.iterdir():
        if p.name != ".lock":
            if p.is_dir():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)


# --- building ----------------------------------------------------------------------------------


def _catch_up(
    store: BaseStore,
    folder: Path,
    m: StoreManifest | None,
    stamps: dict[str, LogStamp],
    progress: Progress | None,
    make: Callable[[str], Thread] | None = None,
    *,
    parts: Mapping[str, ThreadDocs] | None = None,
) -> StoreManifest:
    """Bring the index of ``m`` (None: none, build it) up to the logs' ends; write and return
    the new manifest. Held under the exclusive lock. ``parts``: threads' documents read
    already, taken for a thread not yet indexed whose log still ends where they reach."""
    run = _CatchUp(make or store.thread, stamps, parts, progress)
    if m is not None and not run.still_holds(m):
        if run.why:
            note_rebuilt(_WHERE, run.why)
        m = None  # build again
    if m is None:
        _clear(folder)
        m = _EMPTY
    todo = run.behind(m)
    if not todo:
        if not (folder / "manifest.json").exists():
            _write(folder / "manifest.json", _encode_manifest(m))
        return m
    found = run.documents(m, todo)
    first = next(found, None)
    if first is None and not run.changed and (folder / "manifest.json").exists():
        return m  # nothing new (a log with a batch still being written): nothing to write
    return _add(folder, m, chain([first] if first else [], found), run.entries)


class _CatchUp:
    """One catch-up's phases: check what the index holds still is the logs' (``still_holds``),
    find the threads behind (``behind``), read their new documents (``documents``), which
    fills in ``entries``, the new manifest's threads."""

    def __init__(
        self,
        make: Callable[[str], Thread],
        stamps: dict[str, LogStamp],
        parts: Mapping[str, ThreadDocs] | None,
        progress: Progress | None,
    ) -> None:
        self.make = make
        self.stamps = stamps
        self.parts = parts
        self.progress = progress
        self.handles: dict[str, Thread] = {}
        self.entries: list[ThreadEntry] = []
        self.ordinal: dict[str, int] = {}
        self.changed = False
        self.why = ""
        """Why the index no longer holds (``still_holds``), when it is news."""

    def handle(self, tid: str) -> Thread:
        """One handle per thread."""
        found = self.handles.get(tid)
        if found is None:
            found = self.handles[tid] = self.make(tid)
        return found

    def still_holds(self, m: StoreManifest) -> bool:
        """Whether every thread ``m`` indexes still has its log and the frames it indexed."""
        if any(e.thread_id not in self.stamps for e in m.threads):
            return False  # a log is gone: its documents must go
        for e in m.threads:
            thread = self.handle(e.thread_id)
            if not _current(e, self.stamps[e.thread_id]) and not log_holds(
                thread, e.log_end, e.digest, exact=False
            ):
                # Frames it indexed are no longer the log's. Cut from its end, unknown to the
                # thread's own caches (repaired, or rebuild-index accepted the log as it is)?
                # Then build again; else they say what went missing.
                if ThreadIndex.available(thread):
                    ThreadIndex(thread).check_length()
                problem = watermark_problem(thread, e.last_seq, e.log_end, e.digest)
                self.why = f"thread {e.thread_id}: {problem}" if problem else ""
                return False
        return True

    def behind(self, m: StoreManifest) -> list[str]:
        """The threads whose logs moved past what ``m`` indexed, by id."""
        known = {e.thread_id: e for e in m.threads}
        return [
            tid for tid in sorted(self.stamps) if not _current(known.get(tid), self.stamps[tid])
        ]

    def documents(self, m: StoreManifest, todo: list[str]) -> Iterator[tuple[int, Doc]]:
        """The new documents of the threads ``todo``, as (thread ordinal, document), streamed
        as each log is read (no thread's documents are held whole: a 1M-frame thread's would
        not fit a laptop); each thread's entry is brought up to date once its last new document
        has been taken."""
        known = {e.thread_id: e for e in m.threads}
        self.entries = list(m.threads)
        self.ordinal = {e.thread_id: i for i, e in enumerate(self.entries)}
        for done, tid in enumerate(todo):
            if self.progress is not None:
                self.progress(done, len(todo))
            yield from self._read(tid, known.get(tid))
        if self.progress is not None:
            self.progress(len(todo), len(todo))

    def _place(self, tid: str, project: str | None) -> int:
        """Thread ``tid``'s ordinal (a new one, in the order threads are first found)."""
        i = self.ordinal.get(tid)
        if i is None:
            i = self.ordinal[tid] = len(self.entries)
            self.entries.append(ThreadEntry(tid, project, 0, -1, "", 0, 0))
        return i

    def _commit(
        self, i: int, project: str | None, end: int, last_seq: int, digest: str, n: int, total: int
    ) -> None:
        e = self.entries[i]
        self.entries[i] = ThreadEntry(
            e.thread_id, project, end, last_seq, digest, e.docs + n, e.total_length + total
        )
        self.changed = True

    def _read(self, tid: str, old: ThreadEntry | None) -> Iterator[tuple[int, Doc]]:
        """What thread ``tid`` adds after ``old`` (its entry, None when not indexed yet): from
        a part read already while it is current, else from its log, a line at a time. Nothing
        when the log holds nothing new."""
        part = None if self.parts is None or old is not None else self.parts.get(tid)
        n = total = 0
        if part is not None and _current_part(part, self.stamps[tid]):
            i = self._place(tid, part.project)
            for d in part.docs:
                n += 1
                total += min(d.length, _U32)
                yield i, d
            self._commit(i, part.project, part.log_end, part.last_seq, part.digest, n, total)
            return
        thread = self.handle(tid)
        start, from_seq = (old.log_end, old.last_seq + 1) if old is not None else (0, 0)
        project = old.project if old is not None else None
        end = start
        last: tuple[int, bytes] | None = None
        i = -1
        for seq, line in thread.read_lines(from_seq=from_seq, start_offset=start):
            if seq == 0:
                project = _project(thread.decode(seq, line))
            if i < 0:
                i = self._place(tid, project)
            found = doc_of_line(thread, seq, line)
            if found is not None:
                n += 1
                total += min(found.length, _U32)
                yield i, found
            end += len(line) + 1
            last = (seq, line)
        if last is None:
            if old is None and ThreadIndex.available(thread):
                ThreadIndex(thread).check_length()  # a log cut to nothing it knew
            return
        sealed = fr.unseal(last[1])
        assert sealed is not None  # read_lines checked the chain
        self._commit(i, project, end, last[0], sealed[1].hex(), n, total)


def _project(frame: fr.Frame) -> str | None:
    if isinstance(frame, fr.ThreadCreated):
        project = frame.meta.get("project")
        return project if isinstance(project, str) else None
    return None


def _add(
    folder: Path,
    m: StoreManifest,
    docs: Iterator[tuple[int, Doc]],
    entries: list[ThreadEntry],
) -> StoreManifest:
    """Append ``docs`` ((thread ordinal, document) pairs) to the index of ``m`` and commit them
    with a manifest naming ``entries`` (filled in while ``docs`` is consumed); as the
    per-thread index's ``_add``: every byte ``m`` names stays as it was until the new manifest
    replaces it, and every file is written whole (``docs.bin`` grows past ``m``'s extent, or is
    renamed whole into place when ``m`` has none)."""
    private_dirs(folder)
    remove_temps(folder, holding_lock=True)  # the exclusive lock: a killed writer's
    run = _Run(folder, m)
    first = next(docs, None)
    if first is not None:
        found = chain([first], docs)
        if m.docs:
            fd = os.open(folder / "docs.bin", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            with os.fdopen(fd, "ab") as f:
                f.truncate(m.docs * _DOC.size)
                run.take(found, f)
        else:
            atomic_write(folder / "docs.bin", lambda f: run.take(found, f), durable=False)
    new_tail, tail_bytes, tail_crc = run.write_tail()
    manifest = StoreManifest(
        _VERSION, entries, run.n_docs, run.total, tail_bytes, run.segments, run.docs_crc, tail_crc
    )
    _write(folder / "manifest.json", _encode_manifest(manifest))
    live = {s.name for s in run.segments} | {new_tail}
    for p in folder.iterdir():
        if p.name.startswith(("seg-", "tail-")) and p.name not in live:
            p.unlink(missing_ok=True)
    return manifest


class _Run:
    """One ``_add``: documents taken, segments sealed and merged, ``docs.bin``'s running
    checksum and length sum, and the documents not sealed yet."""

    def __init__(self, folder: Path, m: StoreManifest) -> None:
        self.folder = folder
        self.m = m
        self.kept = {s.name for s in m.segments}
        self.segments = list(m.segments)
        self.sealed_before = self.sealed = m.sealed
        self.tail = _read_tail(folder, m)
        self.n_old_tail = len(self.tail)
        self.n_docs, self.total = m.docs, m.total_length
        self.docs_crc = m.docs_crc if m.docs else 0

    def take(self, docs: Iterator[tuple[int, Doc]], f: BinaryIO) -> None:
        while chunk := list(islice(docs, _CHUNK)):
            self.total += sum(min(d.length, 2**32 - 1) for _, d in chunk)
            records = b"".join(
                _DOC.pack(d.seq, min(d.length, 2**32 - 1), t, d.kind, d.role) for t, d in chunk
            )
            f.write(records)
            self.docs_crc = crc(records, self.docs_crc)
            self.n_docs += len(chunk)
            tail = self.tail
            tail.extend(d for _, d in chunk)
            start = 0
            while len(tail) - start >= BLOCK:
                data = build_segment(tail[start : start + BLOCK])
                ref = SegmentRef(self.sealed, BLOCK, crc(data))
                _write(self.folder / ref.name, data)
                self.segments.append(ref)
                self.sealed += BLOCK
                start += BLOCK
                self.segments = _merge(self.folder, self.segments, self.kept)
            del tail[:start]

    def write_tail(self) -> tuple[str, int, int]:
        """Write the documents not sealed; (the tail's name, its bytes, its checksum)."""
        m = self.m
        new_tail = f"tail-{self.sealed:010d}.jsonl"
        if self.sealed == self.sealed_before and m.tail_bytes:
            lines = b"".join(_encoder.encode(d) + b"\n" for d in self.tail[self.n_old_tail :])
            if lines:
                fd = os.open(self.folder / new_tail, os.O_WRONLY | os.O_APPEND, 0o600)
                with os.fdopen(fd, "ab") as f:
                    f.truncate(m.tail_bytes)
                    f.write(lines)
            return new_tail, m.tail_bytes + len(lines), crc(lines, m.tail_crc)
        whole = b"".join(_encoder.encode(d) + b"\n" for d in self.tail)
        if whole:
            _write(self.folder / new_tail, whole)
        return new_tail, len(whole), crc(whole)


def _merge(folder: Path, segments: list[SegmentRef], kept: set[str]) -> list[SegmentRef]:
    while merge_due(segments):
        group = segments[-FANOUT:]
        size = group[0].n_docs
        name = SegmentRef(group[0].first_doc, size * FANOUT).name
        check = write_merged(
            folder / name, [open_segment(folder / s.name, s, whole=True) for s in group]
        )
        ref = SegmentRef(group[0].first_doc, size * FANOUT, check)
        segments = [*segments[:-FANOUT], ref]
        for s in group:
            if s.name not in kept:
                (folder / s.name).unlink(missing_ok=True)
    return segments


# --- verify ------------------------------------------------------------------------------------


def store_search_problems(store: BaseStore) -> list[str]:
    """What is wrong with the store-wide index on disk (empty when it is sound, absent, of
    another version, or behind the logs: then the next search catches it up). Its checksums and
    structure, never its terms: the manifest's own check, each thread's watermark against its
    log (a log shorter than what the index recorded, or another log, is named), every file
    against its checksum (each segment read whole), the documents' counts, length sums and
    seqs (in order per thread, within each watermark), and no empty file."""
    folder = _folder(store)
    if folder is None or not (folder / "manifest.json").exists():
        return []
    try:
        with _lock(folder, fcntl.LOCK_SH, create=False):  # a read-only store is checked too
            return _problems(store, folder)
    except FileNotFoundError:
        return []  # no lock: not an index this version wrote


def _problems(store: BaseStore, folder: Path) -> list[str]:
    m, damage = _load_manifest(folder)
    found = [] if damage is None else [damage]
    found += empty_files(folder)
    if m is None:
        return found
    for e in m.threads:
        problem = watermark_problem(store.thread(e.thread_id), e.last_seq, e.log_end, e.digest)
        if problem is not None:
            found.append(f"thread {e.thread_id}: {problem}")
    try:
        StoreSearchView(folder, m, whole=True)
    except DAMAGE as exc:
        found.append(str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}")
    return found
