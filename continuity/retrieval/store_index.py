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

**Damage.** A manifest that does not decode, files that do not match it (sizes, document
counts, length sums, the tail against ``docs.bin``, per-thread counts, seqs in order per
thread) or a hit whose indexed document is not the one its frame makes rebuild the index from
the logs. A writer killed at any point leaves the last manifest and every file it names intact
(``docs.bin`` and a tail are cut back to the manifest's extent before they grow; new segments
get new names; old files go after the new manifest).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import struct
import tempfile
from collections.abc import Callable, Iterator, Mapping
from itertools import chain, islice
from pathlib import Path
from typing import Final

import msgspec
import numpy as np
import numpy.typing as npt

from continuity import frames as fr
from continuity._fs import atomic_write, no_room, private_dirs
from continuity.caches.thread_index import DAMAGE, ThreadIndex, caches_writable, writing_caches
from continuity.errors import CachesReadOnly, ContinuityError
from continuity.retrieval.documents import Doc, doc_of_line
from continuity.retrieval.index import log_holds
from continuity.retrieval.ranking import Corpus, Part
from continuity.retrieval.segments import (
    BLOCK,
    FANOUT,
    DocsSegment,
    Segment,
    SegmentRef,
    build_segment,
    merge_due,
    merge_segments,
    read_map,
)
from continuity.store.base import BaseStore, LogStamp, Thread

__all__ = [
    "FOLDER",
    "STORE_DOC",
    "StoreSearchView",
    "ThreadDocs",
    "ThreadEntry",
    "has_store_search",
    "open_store_search",
    "rebuild_store_search",
    "store_search_problems",
    "thread_documents",
]

FOLDER: Final = "search-store"
_VERSION: Final = 2  # 2: stemmed terms (search index version 4, ADR 0032)
_TAIL: Final = 67
"""A sealed line ends with its 64 hex digest, ``"}`` and a newline."""
_CHUNK: Final = 16_384
_DOC: Final = struct.Struct("<QIIBB6x")
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
    try:
        m = _manifest_decoder.decode((folder / "manifest.json").read_bytes())
    except (OSError, msgspec.DecodeError, UnicodeDecodeError, msgspec.ValidationError):
        return None
    return m if m.version == _VERSION else None


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


class StoreSearchView:
    """One consistent read of the store-wide index (one manifest, its files), checked."""

    def __init__(self, folder: Path, m: StoreManifest) -> None:
        self.manifest = m
        self.names = [e.thread_id for e in m.threads]
        raw = read_map(folder / "docs.bin") if m.docs else b""
        if len(raw) < m.docs * _DOC.size:
            raise ValueError("docs.bin is shorter than its manifest says")
        docs = np.frombuffer(raw, dtype=STORE_DOC, count=m.docs)
        self.seqs: npt.NDArray[np.uint64] = docs["seq"]
        self.lengths: npt.NDArray[np.uint32] = docs["len"]
        self.thread_of: npt.NDArray[np.uint32] = docs["thread"]
        self.kinds: npt.NDArray[np.uint8] = docs["kind"]
        self.roles: npt.NDArray[np.uint8] = docs["role"]
        n_threads = len(m.threads)
        counts: list[int] = [0] * n_threads
        sums: list[int] = [0] * n_threads
        if m.docs:
            if int(self.thread_of.max()) >= n_threads:
                raise ValueError("docs.bin names a thread the manifest does not hold")
            counts = [int(c) for c in np.bincount(self.thread_of, minlength=n_threads)]
            weights = self.lengths.astype(np.float64)  # exact: sums stay far below 2^53
            sums = [int(x) for x in np.bincount(self.thread_of, weights, n_threads)]
        if counts != [e.docs for e in m.threads] or sums != [e.total_length for e in m.threads]:
            raise ValueError("docs.bin does not hold the documents its manifest counts")
        if int(self.lengths.sum(dtype=np.uint64)) != m.total_length or m.docs != sum(
            e.docs for e in m.threads
        ):
            raise ValueError("docs.bin lengths do not sum to what the manifest says")
        if m.docs > 1:
            # Seqs ascend within each thread (a damaged seq would give a document another
            # frame's place): stable order by thread keeps each thread's documents in order.
            by = np.argsort(self.thread_of, kind="stable")
            t, s = self.thread_of[by], self.seqs[by]
            same = t[1:] == t[:-1]
            if not bool(np.all(s[1:][same] > s[:-1][same])):
                raise ValueError("docs.bin holds a thread's seqs out of order")
            last = np.zeros(n_threads, np.uint64)
            np.maximum.at(last, t, s)
            if any(int(last[i]) > e.last_seq for i, e in enumerate(m.threads) if e.docs):
                raise ValueError("docs.bin holds a seq past its thread's watermark")
        self.parts: list[Part] = []
        first = 0
        for ref in m.segments:
            segment = Segment(read_map(folder / ref.name), ref.first_doc)
            if segment.n_docs != ref.n_docs or ref.first_doc != first:
                raise ValueError(f"{ref.name} is not the segment its manifest names")
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

    def corpus(self, project: str | None = None) -> Corpus | None:
        """Every indexed document (or those of the threads of ``project``) as one corpus."""
        m = self.manifest
        parts = self.parts
        n_docs, total = m.docs, m.total_length
        if project is not None:
            chosen = [i for i, e in enumerate(m.threads) if e.project == project and e.docs]
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
        raise ValueError("the tail is shorter than its manifest says")
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
    stamps = _stamps(store)
    if stamps is None:
        return None
    view = _current_view(folder, stamps)
    if view is not None:
        return view
    if not caches_writable(store.cache_dir or folder):
        return None
    try:
        with writing_caches(store.cache_dir or folder), _lock(folder, fcntl.LOCK_EX):
            m = _read_manifest(folder)
            try:
                if m is not None:
                    StoreSearchView(folder, m)  # damage found here rebuilds, never extends
                m = _catch_up(store, folder, m, stamps, progress, handle)
                return StoreSearchView(folder, m)
            except DAMAGE as exc:
                if no_room(exc):
                    raise  # not damage: the disk is full
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


def thread_documents(thread: Thread) -> ThreadDocs | None:
    """Every document of ``thread`` from the start of its log, as a rebuild of the store-wide
    index reads them; None when it has no committed frame or cannot be read (the rebuild reads
    it again and says what is wrong)."""
    try:
        project, end, last, docs = _read_docs(thread, 0, 0, None)
    except ContinuityError:
        return None
    if last is None:
        return None
    sealed = fr.unseal(last[1])
    assert sealed is not None  # read_lines checked the chain
    return ThreadDocs(project, end, last[0], sealed[1].hex(), docs)


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


def _current_view(folder: Path, stamps: dict[str, LogStamp]) -> StoreSearchView | None:
    try:
        with _lock(folder, fcntl.LOCK_SH, create=False):
            m = _read_manifest(folder)
            if m is None or not _is_current(m, stamps):
                return None
            try:
                return StoreSearchView(folder, m)
            except DAMAGE:
                return None  # the writer's path sees what is wrong and rebuilds
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
        m = None  # build again
    if m is None:
        _clear(folder)
        m = _EMPTY
    todo = run.behind(m)
    if not todo:
        if not (folder / "manifest.json").exists():
            _write(folder / "manifest.json", _encoder.encode(m))
        return m
    found = run.documents(m, todo)
    first = next(found, None)
    if first is None and not run.changed and (folder / "manifest.json").exists():
        return m  # nothing new (a log with a batch still being written): nothing to write
    return _add(folder, m, chain([first] if first else [], found), run.entries)


class _NewDocs(msgspec.Struct, frozen=True):
    """What one thread adds: its documents after the watermark, and the new watermark."""

    project: str | None
    log_end: int
    last_seq: int
    digest: str
    docs: list[Doc]


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
        self.changed = False

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
                return False
        return True

    def behind(self, m: StoreManifest) -> list[str]:
        """The threads whose logs moved past what ``m`` indexed, by id."""
        known = {e.thread_id: e for e in m.threads}
        return [
            tid for tid in sorted(self.stamps) if not _current(known.get(tid), self.stamps[tid])
        ]

    def documents(self, m: StoreManifest, todo: list[str]) -> Iterator[tuple[int, Doc]]:
        """The new documents of the threads ``todo``, as (thread ordinal, document); each
        thread's entry is brought up to date as its documents are read."""
        known = {e.thread_id: e for e in m.threads}
        self.entries = list(m.threads)
        ordinal = {e.thread_id: i for i, e in enumerate(self.entries)}
        for done, tid in enumerate(todo):
            if self.progress is not None:
                self.progress(done, len(todo))
            new = self._read(tid, known.get(tid))
            if new is None:
                continue
            i = ordinal.get(tid)
            if i is None:
                i = ordinal[tid] = len(self.entries)
                self.entries.append(ThreadEntry(tid, new.project, 0, -1, "", 0, 0))
            e = self.entries[i]
            self.entries[i] = ThreadEntry(
                tid,
                new.project,
                new.log_end,
                new.last_seq,
                new.digest,
                e.docs + len(new.docs),
                e.total_length + sum(min(d.length, 2**32 - 1) for d in new.docs),
            )
            self.changed = True
            for d in new.docs:
                yield i, d
        if self.progress is not None:
            self.progress(len(todo), len(todo))

    def _read(self, tid: str, old: ThreadEntry | None) -> _NewDocs | None:
        """What thread ``tid`` adds after ``old`` (its entry, None when not indexed yet): from
        a part read already while it is current, else from its log. None when the log holds
        nothing new."""
        part = None if self.parts is None or old is not None else self.parts.get(tid)
        if part is not None and _current_part(part, self.stamps[tid]):
            return _NewDocs(part.project, part.log_end, part.last_seq, part.digest, part.docs)
        thread = self.handle(tid)
        start, from_seq = (old.log_end, old.last_seq + 1) if old is not None else (0, 0)
        before = old.project if old is not None else None
        project, end, last, docs = _read_docs(thread, start, from_seq, before)
        if last is None:
            if old is None and ThreadIndex.available(thread):
                ThreadIndex(thread).check_length()  # a log cut to nothing it knew
            return None
        sealed = fr.unseal(last[1])
        assert sealed is not None  # read_lines checked the chain
        return _NewDocs(project, end, last[0], sealed[1].hex(), docs)


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
    replaces it."""
    private_dirs(folder)
    kept = {s.name for s in m.segments}
    segments = list(m.segments)
    sealed_before = sealed = m.sealed
    tail = _read_tail(folder, m)
    tail_threads: list[int] = []
    n_old_tail = len(tail)
    n_docs, total = m.docs, m.total_length
    fd = os.open(folder / "docs.bin", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with os.fdopen(fd, "ab") as f:
        f.truncate(m.docs * _DOC.size)
        while chunk := list(islice(docs, _CHUNK)):
            total += sum(min(d.length, 2**32 - 1) for _, d in chunk)
            f.write(
                b"".join(
                    _DOC.pack(d.seq, min(d.length, 2**32 - 1), t, d.kind, d.role) for t, d in chunk
                )
            )
            n_docs += len(chunk)
            tail.extend(d for _, d in chunk)
            tail_threads.extend(t for t, _ in chunk)
            start = 0
            while len(tail) - start >= BLOCK:
                ref = SegmentRef(sealed, BLOCK)
                _write(folder / ref.name, build_segment(tail[start : start + BLOCK]))
                segments.append(ref)
                sealed += BLOCK
                start += BLOCK
                segments = _merge(folder, segments, kept)
            del tail[:start]
    new_tail = f"tail-{sealed:010d}.jsonl"
    if sealed == sealed_before:
        lines = b"".join(_encoder.encode(d) + b"\n" for d in tail[n_old_tail:])
        fd = os.open(folder / new_tail, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(fd, "ab") as f:
            f.truncate(m.tail_bytes)
            f.write(lines)
        tail_bytes = m.tail_bytes + len(lines)
    else:
        whole = b"".join(_encoder.encode(d) + b"\n" for d in tail)
        if whole:
            _write(folder / new_tail, whole)
        tail_bytes = len(whole)
    manifest = StoreManifest(_VERSION, entries, n_docs, total, tail_bytes, segments)
    _write(folder / "manifest.json", _encoder.encode(manifest))
    live = {s.name for s in segments} | {new_tail}
    for p in folder.iterdir():
        if p.name.startswith(("seg-", "tail-")) and p.name not in live:
            p.unlink(missing_ok=True)
    return manifest


def _merge(folder: Path, segments: list[SegmentRef], kept: set[str]) -> list[SegmentRef]:
    while merge_due(segments):
        group = segments[-FANOUT:]
        size = group[0].n_docs
        merged = merge_segments([Segment(read_map(folder / s.name), s.first_doc) for s in group])
        ref = SegmentRef(group[0].first_doc, size * FANOUT)
        _write(folder / ref.name, merged)
        segments = [*segments[:-FANOUT], ref]
        for s in group:
            if s.name not in kept:
                (folder / s.name).unlink(missing_ok=True)
    return segments


# --- verify ------------------------------------------------------------------------------------


def store_search_problems(store: BaseStore) -> list[str]:
    """What is wrong with the store-wide index on disk (empty when it is sound, absent, or no
    longer the logs' prefix: then the next search rebuilds it). The index is made again in a
    scratch folder from the logs, up to each thread's watermark, the documents in the order
    the index took them, and every file compared byte for byte."""
    folder = _folder(store)
    if folder is None or not (folder / "manifest.json").exists():
        return []
    try:
        with _lock(folder, fcntl.LOCK_SH, create=False):  # a read-only store is checked too
            return _problems(store, folder)
    except FileNotFoundError:
        return []  # no lock: not an index this version wrote


def _problems(store: BaseStore, folder: Path) -> list[str]:
    m = _read_manifest(folder)
    if m is None:
        return ["manifest.json does not decode (the next search rebuilds the index)"]
    for e in m.threads:
        if not log_holds(store.thread(e.thread_id), e.log_end, e.digest, exact=False):
            return []  # a log cut or replaced: the next search rebuilds the index
    owners = _owners(folder, m)
    if isinstance(owners, str):
        return [owners]
    with tempfile.TemporaryDirectory(prefix="continuity-verify-") as scratch:
        fresh = Path(scratch)
        try:
            found = _index_again(store, fresh, m, owners)
        except ValueError as exc:
            return [str(exc)]
        return found + _files_differ(folder, fresh, m)


def _owners(folder: Path, m: StoreManifest) -> list[int] | str:
    """Each document's thread ordinal, as ``docs.bin`` has them; a problem when it cannot."""
    try:
        raw = (folder / "docs.bin").read_bytes()[: m.docs * _DOC.size] if m.docs else b""
    except OSError as exc:
        return f"docs.bin cannot be read: {exc}"
    runs = np.frombuffer(raw, dtype=STORE_DOC)["thread"]
    if len(runs) != m.docs or (m.docs and int(runs.max()) >= len(m.threads)):
        return "docs.bin does not hold the documents its manifest counts"
    owners: list[int] = runs.tolist()
    return owners


def _index_again(store: BaseStore, fresh: Path, m: StoreManifest, owners: list[int]) -> list[str]:
    """Index the logs again into ``fresh``, up to each thread's watermark in ``m``, taking the
    documents in the order ``owners`` says the index took them; what differs from ``m``.
    ValueError when ``owners`` holds more documents of a thread than its log makes."""
    streams = [_thread_docs(store, e) for e in m.threads]
    entries = [_fresh_entry(store, e) for e in m.threads]

    def documents() -> Iterator[tuple[int, Doc]]:
        for t in owners:
            d = next(streams[t], None)
            if d is None:
                raise ValueError(
                    f"docs.bin holds more documents of thread {m.threads[t].thread_id} "
                    "than its log makes"
                )
            yield t, d

    want = _add(fresh, _EMPTY, documents(), entries)
    found = [
        f"thread {e.thread_id}: the log makes documents it does not hold"
        for e, stream in zip(m.threads, streams, strict=True)
        if next(stream, None) is not None
    ]
    if want != msgspec.structs.replace(m, threads=entries):
        found.append("manifest.json differs from a fresh index of the logs")
    return found


def _files_differ(folder: Path, fresh: Path, m: StoreManifest) -> list[str]:
    """The files of the index in ``folder`` whose bytes (as far as ``m`` names them) are not
    the fresh index's."""
    found = []
    for name in dict.fromkeys(["docs.bin", m.tail_name, *(ref.name for ref in m.segments)]):
        mine, theirs = folder / name, fresh / name
        have = mine.read_bytes() if mine.exists() else b""
        should = theirs.read_bytes() if theirs.exists() else b""
        if name == "docs.bin":
            have = have[: m.docs * _DOC.size]
        elif name == m.tail_name:
            have = have[: m.tail_bytes]
        if have != should:
            found.append(f"{name} differs from a fresh index of the logs")
    return found


def _thread_docs(store: BaseStore, e: ThreadEntry) -> Iterator[Doc]:
    thread = store.thread(e.thread_id)
    for seq, line in thread.read_lines(to_seq=e.last_seq):
        d = doc_of_line(thread, seq, line)
        if d is not None:
            yield d


def _fresh_entry(store: BaseStore, e: ThreadEntry) -> ThreadEntry:
    """``e`` as the log makes it up to its watermark: project, documents and their lengths
    counted again, the watermark's seq checked to carry its digest."""
    thread = store.thread(e.thread_id)
    docs = list(_thread_docs(store, e))
    first = next(thread.read_lines(to_seq=0), None)
    project = _project(thread.decode(0, first[1])) if first is not None else None
    last = next(thread.read_lines(from_seq=e.last_seq, to_seq=e.last_seq), None)
    sealed = fr.unseal(last[1]) if last is not None else None
    digest = sealed[1].hex() if sealed is not None else ""
    return ThreadEntry(
        e.thread_id,
        project,
        e.log_end,
        e.last_seq,
        digest,
        len(docs),
        sum(min(d.length, 2**32 - 1) for d in docs),
    )
