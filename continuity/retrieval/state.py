"""What a ranking reads of one thread's search documents, held in the process and kept current.

A ranking over a thread's documents up to some seq needs each document's seq, length, kind and
role, the sum of their lengths up to a cut, and each query term's postings. Reading them from
the index files for every query — the manifest, ``docs.bin``, every segment, the tail — and
looking each term up in every segment was most of what a recall cost (ADR 0022). This module
keeps them per thread and process (:class:`SearchState`, one snapshot per update) and brings
them up to date with what was added since, like :mod:`continuity.caches.live` does for compile:

- a store with caches: read from its search index (``cache/search/<thread>/``), only what a
  newer manifest adds — the new ``docs.bin`` records, new segments, the tail's new lines — with
  the checks a fresh read makes (each segment's size, the length sum the manifest keeps, seqs in
  order and within the watermark, the tail being ``docs.bin``'s end). A file the process read
  that changed in a way no catch-up explains (a segment still named, a manifest not newer) sends
  it back to a full read; a rebuild in this process (:func:`~.index.cleared`) too.
- a store without (the in-memory one, other backends): the same documents, segments and tail
  built in memory from the log, the frames appended since the last use tokenized, after checking
  that the thread still holds the last frame read (else it starts over).

Whether a state may answer for a prefix is the log's to say: the line that ends where the state
was taken must carry its chain digest (one short read), and a state taken before seq ``max_seq``
was written sends the index to a catch-up first. The state of a prefix holds every document of
it and ranking cuts at ``max_seq``, so the hits are those of a fresh read, whatever the index
held. Query terms' postings over the sealed segments are concatenated once per term and process
(:class:`_Postings`, bounded), so a query looks each term up once, not once per segment.
"""

from __future__ import annotations

import _thread  # not threading: see continuity.caches.live
import fcntl
import os
import weakref
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Final, Generic, TypeVar

import msgspec
import numpy as np
import numpy.typing as npt

from continuity import frames as fr
from continuity.caches.thread_index import DAMAGE, ThreadIndex, caches_writable, keeps_none
from continuity.errors import CachesReadOnly, CorruptCache, note_rebuilt
from continuity.retrieval import segments as seg_format
from continuity.retrieval.documents import Doc, doc_of_line, documents_of_lines
from continuity.retrieval.index import (
    DOC_DECODER,
    DOC_RECORD,
    VERSION,
    SearchManifest,
    ThreadSearchIndex,
    cleared,
    log_holds,
    read_manifest,
)
from continuity.retrieval.segments import (
    Segment,
    SegmentRef,
    build_segment,
    crc,
    merge_due,
    merge_segments,
    open_segment,
)
from continuity.store.base import BaseStore, SearchBackend, Thread

__all__ = ["SearchState", "forget", "search_state"]

_POSTINGS_BYTES: Final = 32 << 20
"""Postings concatenated across segments kept per thread (bytes); past it they are dropped."""
_KEPT_THREADS: Final = 64
_KEPT_DOCS: Final = 4_000_000
"""Indexed threads held at once in a process, at most, and documents over all of them (16 bytes
each, plus the segments read into memory): the least recently used go first."""

_Arrays = tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint16]]
_EMPTY_DOCS: Final = np.zeros(0, np.uint32)
_EMPTY_TFS: Final = np.zeros(0, np.uint16)


_G = TypeVar("_G", bound=np.generic)


class _Column(Generic[_G]):
    """A growable array: a state keeps a view of its first ``n`` items, which later appends
    (written past them, or into a new buffer) never change."""

    def __init__(self, dtype: type[_G]) -> None:
        self.buf: npt.NDArray[_G] = np.zeros(0, dtype)
        self.n = 0

    def extend(self, values: npt.NDArray[_G]) -> None:
        need = self.n + len(values)
        if need > len(self.buf):
            grown = np.zeros(max(need, 2 * len(self.buf), 256), self.buf.dtype)
            grown[: self.n] = self.buf[: self.n]
            self.buf = grown
        self.buf[self.n : need] = values
        self.n = need

    def view(self) -> npt.NDArray[_G]:
        return self.buf[: self.n]


class _Tail:
    """The documents after the last sealed segment, with their terms inverted as they come: a
    term's documents are found without looking in each. Only grows; a seal starts a new one."""

    def __init__(self, first_doc: int) -> None:
        self.first_doc = first_doc
        self.docs: list[Doc] = []
        self.inverted: dict[str, tuple[list[int], list[int]]] = {}

    def add(self, docs: Sequence[Doc]) -> None:
        inverted = self.inverted
        for doc in docs:
            local = len(self.docs)
            self.docs.append(doc)
            for term, count in doc.tf.items():
                entry = inverted.get(term)
                if entry is None:
                    inverted[term] = ([local], [min(count, 65535)])
                else:
                    entry[0].append(local)
                    entry[1].append(min(count, 65535))


class TailPart:
    """The first ``n_docs`` documents of a tail, as a ranking reads a segment."""

    def __init__(self, tail: _Tail, n_docs: int) -> None:
        self.tail = tail
        self.first_doc = tail.first_doc
        self.n_docs = n_docs

    def postings(self, term: str) -> _Arrays:
        entry = self.tail.inverted.get(term)
        if entry is None:
            return _EMPTY_DOCS, _EMPTY_TFS
        ids, counts = entry
        n = len(ids) if ids[-1] < self.n_docs else bisect_left(ids, self.n_docs)
        return np.array(ids[:n], np.uint32), np.array(counts[:n], np.uint16)

    def count(self, term: str, end: int) -> int:
        """How many of the documents before ``end`` (a local id) hold ``term``."""
        entry = self.tail.inverted.get(term)
        if entry is None:
            return 0
        ids = entry[0]
        end = min(end, self.n_docs)
        return len(ids) if ids[-1] < end else bisect_left(ids, end)


class _Postings:
    """Each term's postings over all sealed segments, concatenated (doc ids from 0), made the
    first time a query asks and extended when segments are sealed: a query then looks a term up
    once instead of once per segment. Bounded by ``_POSTINGS_BYTES`` (dropped whole past it)."""

    def __init__(self) -> None:
        self.lock = _thread.allocate_lock()
        self.by_term: dict[str, tuple[int, npt.NDArray[np.uint32], npt.NDArray[np.uint16]]] = {}
        self.bytes = 0
        self.cuts: dict[str, tuple[int, npt.NDArray[np.uint32], int]] = {}
        """term → (end, its postings, how many are before end): the last cut asked for (a
        recall cuts at the same seq query after query)."""

    def count(self, term: str, segments: Sequence[Segment], n_sealed: int, end: int) -> int:
        """How many of the sealed documents before ``end`` hold ``term``."""
        docs = self.get(term, segments, n_sealed)[0]
        if not len(docs) or int(docs[-1]) < end:
            return len(docs)
        known = self.cuts.get(term)
        if known is not None and known[0] == end and known[1] is docs:
            return known[2]
        at = int(docs.searchsorted(end))
        self.cuts[term] = (end, docs, at)
        return at

    def get(self, term: str, segments: Sequence[Segment], n_sealed: int) -> _Arrays:
        found = self.by_term.get(term)
        if found is not None and found[0] >= n_sealed:
            covered, docs, tfs = found
            if covered > n_sealed:  # an older state's view
                cut = int(docs.searchsorted(n_sealed))
                return docs[:cut], tfs[:cut]
            return docs, tfs
        covered = 0 if found is None else found[0]
        doc_parts = [] if found is None else [found[1]]
        tf_parts = [] if found is None else [found[2]]
        for seg in segments:
            if seg.first_doc + seg.n_docs <= covered:
                continue
            docs, tfs = seg.postings(term)
            if seg.first_doc < covered:  # a merged segment holding documents already covered
                cut = int(docs.searchsorted(np.uint32(covered - seg.first_doc)))
                docs, tfs = docs[cut:], tfs[cut:]
            if len(docs):
                doc_parts.append(docs + np.uint32(seg.first_doc) if seg.first_doc else docs)
                tf_parts.append(tfs)
        if not doc_parts:
            docs, tfs = _EMPTY_DOCS, _EMPTY_TFS
        elif len(doc_parts) == 1:
            docs, tfs = doc_parts[0], tf_parts[0]
        else:
            docs, tfs = np.concatenate(doc_parts), np.concatenate(tf_parts)
        with self.lock:
            if self.bytes + docs.nbytes + tfs.nbytes > _POSTINGS_BYTES:
                self.by_term.clear()
                self.cuts.clear()
                self.bytes = 0
            old = self.by_term.get(term)
            if old is None or old[0] < n_sealed:
                if old is not None:
                    self.bytes -= old[1].nbytes + old[2].nbytes
                self.by_term[term] = (n_sealed, docs, tfs)
                self.bytes += docs.nbytes + tfs.nbytes
        return docs, tfs


class SealedPart:
    """The sealed segments of a state as one segment (doc ids from 0)."""

    first_doc = 0

    def __init__(self, state: SearchState) -> None:
        self.state = state
        self.n_docs = state.n_sealed

    def postings(self, term: str) -> _Arrays:
        s = self.state
        return s.postings.get(term, s.segments, s.n_sealed)

    def count(self, term: str, end: int) -> int:
        """How many of the documents before ``end`` hold ``term``."""
        s = self.state
        return s.postings.count(term, s.segments, s.n_sealed, end)


Columns = tuple[
    npt.NDArray[np.uint64],
    npt.NDArray[np.uint32],
    npt.NDArray[np.uint8],
    npt.NDArray[np.uint8],
    npt.NDArray[np.uint64],
]
"""A thread's document columns: seqs, lengths, kinds, roles, cumulative lengths."""


class SearchState:
    """One thread's documents as of one update: columns by document ordinal (seq, length,
    kind, role, and the running sum of lengths, ``cum[i]`` being that of the first ``i``), the
    sealed segments and the tail. Never changed once made."""

    def __init__(
        self,
        thread_id: str,
        last_seq: int,
        columns: Columns,
        segments: tuple[Segment, ...],
        n_sealed: int,
        tail: _Tail,
        postings: _Postings,
    ) -> None:
        self.thread_id = thread_id
        self.last_seq = last_seq
        """The last frame of the log prefix this state holds the documents of (-1: none)."""
        self.seqs, self.lengths, self.kinds, self.roles, self.cum = columns
        self.n = len(self.seqs)
        self.segments = segments
        self.n_sealed = n_sealed
        self.tail = tail
        self.n_tail = self.n - n_sealed
        self.postings = postings

    def parts(self, end: int | None = None) -> list[SealedPart | TailPart | ServerPart]:
        """The sealed documents as one part and the tail as another, for a ranking (``end``, the
        documents a ranking reads, is for states that fetch postings: these hold them all)."""
        out: list[SealedPart | TailPart | ServerPart] = []
        if self.n_sealed:
            out.append(SealedPart(self))
        if self.n_tail:
            out.append(TailPart(self.tail, self.n_tail))
        return out


class _Projection:
    """One thread's documents in the process; :meth:`state` is the current snapshot."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        self.lock = _thread.RLock()
        self._reset()

    def _reset(self) -> None:
        self.seqs = _Column(np.uint64)
        self.lengths = _Column(np.uint32)
        self.kinds = _Column(np.uint8)
        self.roles = _Column(np.uint8)
        self.cum = _Column(np.uint64)
        self.cum.extend(np.zeros(1, np.uint64))
        self.refs: list[SegmentRef] = []
        self.segments: list[Segment] = []
        self.tail = _Tail(0)
        self.postings = _Postings()
        self.state: SearchState | None = None

    @property
    def n_sealed(self) -> int:
        return sum(r.n_docs for r in self.refs)

    def _columns(
        self,
        seqs: npt.NDArray[np.uint64],
        lengths: npt.NDArray[np.uint32],
        kinds: npt.NDArray[np.uint8],
        roles: npt.NDArray[np.uint8],
    ) -> None:
        total = self.cum.view()[-1]
        self.seqs.extend(seqs)
        self.lengths.extend(lengths)
        self.kinds.extend(kinds)
        self.roles.extend(roles)
        self.cum.extend(total + np.cumsum(lengths, dtype=np.uint64))

    def _views(self) -> Columns:
        """The document columns as they are now (seqs, lengths, kinds, roles, cumulative
        lengths), for a state to hold."""
        return (
            self.seqs.view(),
            self.lengths.view(),
            self.kinds.view(),
            self.roles.view(),
            self.cum.view(),
        )

    def _snapshot(self, last_seq: int) -> SearchState:
        self.state = SearchState(
            self.thread_id,
            last_seq,
            self._views(),
            tuple(self.segments),
            self.n_sealed,
            self.tail,
            self.postings,
        )
        return self.state


# --- a store with caches: the search index, read incrementally ------------------------------


_Stat = tuple[int, int, int]


def _stat(path: Path | str) -> _Stat | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


class _FromIndex(_Projection):
    """The state of a thread whose store keeps caches, read from its search index."""

    def __init__(self, thread_id: str, folder: Path) -> None:
        self.folder = folder
        self.at = f"{folder}{os.sep}"
        super().__init__(thread_id)

    def _reset(self) -> None:
        super()._reset()
        self.manifest: SearchManifest | None = None
        self.docs_crc = 0
        """The checksum of the ``docs.bin`` records the state holds."""
        self.stats: dict[str, _Stat | None] = {}
        """Each file read for the state as it was then: what it came from."""
        self.epoch = cleared(self.folder)

    def unchanged(self) -> bool:
        """Whether every file the state was read from is as it was (a stat each)."""
        at = self.at
        return self.epoch == cleared(self.folder) and all(
            _stat(at + name) == known for name, known in self.stats.items()
        )

    def answers(self, thread: Thread, max_seq: int | None) -> bool:
        """Whether the state holds every document up to ``max_seq`` (None: the log's end) of the
        log as it is: the files it was read from are unchanged, and the log's line where the
        index stopped carries the digest it recorded (and ends the log, for None or a seq past
        it)."""
        m = self.manifest
        if self.state is None or m is None or not self.unchanged():
            return False
        exact = max_seq is None or max_seq > m.last_seq
        return log_holds(thread, m.log_end, m.digest, exact=exact)

    def load(self, thread: Thread) -> SearchState | None:
        """Read what the index's manifest holds and the state lacks, under the index's shared
        lock (a writer rewrites the tail and removes merged segments only under its exclusive
        one); None when there is no index of this version to read. Raises what a damaged file
        makes reading it raise (``DAMAGE``, msgspec's errors)."""
        try:
            fd = os.open(self.folder / ".lock", os.O_RDONLY)
        except FileNotFoundError:
            self._reset()
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            manifest_stat = _stat(self.folder / "manifest.json")
            m = read_manifest(self.folder)
            if m is None or m.version != VERSION or m.thread_id != self.thread_id:
                self._reset()
                return None
            if m.last_seq < 0 or not log_holds(thread, m.log_end, m.digest, exact=False):
                self._reset()  # empty, or of another log: not to be read (refresh() sees to it)
                return None
            old = self.manifest
            epoch = cleared(self.folder)  # moves only under the exclusive lock
            if old is not None and (self.epoch != epoch or not self._extends(thread, old, m)):
                self._reset()
                old = None
            try:
                self._read(m, old)
            except BaseException:
                self._reset()
                raise
            self.manifest = m
            self.epoch = epoch
            self.stats["manifest.json"] = manifest_stat
            return self._snapshot(m.last_seq)
        finally:
            os.close(fd)

    def _extends(self, thread: Thread, old: SearchManifest, m: SearchManifest) -> bool:
        """Whether ``m`` indexes a longer prefix of the log the state was read from, and the
        files the state holds were not touched otherwise."""
        if m == old:
            return self.unchanged()
        if m.last_seq < old.last_seq or m.docs < old.docs or m.log_end < old.log_end:
            return False
        if not log_holds(thread, old.log_end, old.digest, exact=False):
            return False
        kept = {r.name for r in m.segments}
        # A segment is written once and never changed: one still named must be as it was read.
        return all(
            _stat(self.at + name) == known
            for name, known in self.stats.items()
            if name.startswith("seg-") and name in kept
        )

    def _read(self, m: SearchManifest, old: SearchManifest | None) -> None:
        folder = self.folder
        stats: dict[str, _Stat | None] = {"docs.bin": _stat(folder / "docs.bin")}
        docs_crc = self._read_docs(m)
        # segments: those the state holds are kept, the others opened
        have = {r.name: s for r, s in zip(self.refs, self.segments, strict=True)}
        refs: list[SegmentRef] = []
        segments: list[Segment] = []
        first = 0
        for ref in m.segments:
            if ref.first_doc != first:
                raise ValueError(f"{ref.name} does not follow the segment before it")
            seg = have.get(ref.name)
            if seg is None:
                path = folder / ref.name
                stats[ref.name] = _stat(path)
                seg = open_segment(path, ref)
            else:
                stats[ref.name] = self.stats[ref.name]
            refs.append(ref)
            segments.append(seg)
            first += ref.n_docs
        n_tail = m.docs - first
        if n_tail < 0 or (n_tail == 0) != (m.tail_bytes == 0):
            raise ValueError("the manifest's segments and tail do not add up to its documents")
        # the tail: its new lines when nothing was sealed since, else all of it
        stats["tail.jsonl"] = _stat(folder / "tail.jsonl") if m.tail_bytes else None
        same_tail = old is not None and first == self.n_sealed and m.tail_bytes >= old.tail_bytes
        start = old.tail_bytes if same_tail and old is not None else 0
        tail_crc = old.tail_crc if same_tail and old is not None else 0
        tail = self.tail if same_tail else _Tail(first)
        if m.tail_bytes > start:
            with open(folder / "tail.jsonl", "rb") as f:
                raw = os.pread(f.fileno(), m.tail_bytes - start, start)
            if len(raw) != m.tail_bytes - start or not raw.endswith(b"\n"):
                raise ValueError("tail.jsonl is shorter than its manifest says")
            if crc(raw, tail_crc) != m.tail_crc:
                raise ValueError("tail.jsonl does not match its checksum")
            new = [DOC_DECODER.decode(line) for line in raw.splitlines()]
            want = self.seqs.view()[first + len(tail.docs) :]
            if [d.seq for d in new] != want.tolist():
                raise ValueError("tail.jsonl is not the end of docs.bin")
            tail.add(new)
        elif m.tail_bytes and tail_crc != m.tail_crc:
            raise ValueError("tail.jsonl does not match its checksum")
        if len(tail.docs) != n_tail:
            raise ValueError("tail.jsonl does not hold the manifest's tail")
        self.refs, self.segments, self.tail = refs, segments, tail
        self.stats = stats
        self.docs_crc = docs_crc

    def _read_docs(self, m: SearchManifest) -> int:
        """Take the ``docs.bin`` records the state lacks (all of them after a reset), checked;
        return the checksum of every record it then holds."""
        held = self.seqs.n
        docs_crc = self.docs_crc if held else 0
        if m.docs > held:
            with open(self.folder / "docs.bin", "rb") as f:
                raw = os.pread(
                    f.fileno(), (m.docs - held) * DOC_RECORD.itemsize, held * DOC_RECORD.itemsize
                )
            if len(raw) != (m.docs - held) * DOC_RECORD.itemsize:
                raise ValueError("docs.bin is shorter than its manifest says")
            # The checksum of what the state holds, extended by the records read: only the new
            # records are read, and every record the state holds was checked once.
            docs_crc = crc(raw, docs_crc)
            if docs_crc != m.docs_crc:
                raise ValueError("docs.bin does not match its checksum")
            records = np.frombuffer(raw, DOC_RECORD)
            seqs = records["seq"]
            before = self.seqs.view()[-1:]
            ordered = np.concatenate((before, seqs))
            if not bool(np.all(ordered[1:] > ordered[:-1])) or int(seqs[-1]) > m.last_seq:
                raise ValueError("docs.bin has seqs out of order or past its watermark")
            self._columns(seqs, records["len"], records["kind"], records["role"])
        if docs_crc != m.docs_crc:
            raise ValueError("docs.bin does not match its checksum")
        if int(self.cum.view()[-1]) != m.total_length:
            raise ValueError(
                f"docs.bin lengths sum to {int(self.cum.view()[-1])}, "
                f"the manifest says {m.total_length}"
            )
        return docs_crc


_FROM_INDEX: Final[OrderedDict[Path, _FromIndex]] = OrderedDict()
_FROM_INDEX_GUARD: Final = _thread.allocate_lock()


def _from_index(thread: Thread, folder: Path) -> _FromIndex:
    with _FROM_INDEX_GUARD:
        held = _FROM_INDEX.get(folder)
        if held is None:
            held = _FROM_INDEX[folder] = _FromIndex(thread.id, folder)
        _FROM_INDEX.move_to_end(folder)
        total = 0
        for key in reversed(_FROM_INDEX):
            total += _FROM_INDEX[key].seqs.n
        while len(_FROM_INDEX) > 1 and (len(_FROM_INDEX) > _KEPT_THREADS or total > _KEPT_DOCS):
            _key, dropped = _FROM_INDEX.popitem(last=False)
            total -= dropped.seqs.n
        return held


def _indexed_state(
    thread: Thread, folder: Path, max_seq: int | None, frames: ThreadIndex | None
) -> SearchState | None:
    """The state from the search index, caught up first if it does not answer for
    ``max_seq``; None when this process cannot write the caches and the index does not
    answer (the caller then reads the log)."""
    held = _from_index(thread, folder)
    with held.lock:
        if held.answers(thread, max_seq):
            return held.state
        writable = caches_writable(folder.parent.parent)
        if not writable:
            ThreadIndex(thread).check_length()  # a log that lost frames is refused, as ever
            try:
                state = held.load(thread)
            except (*DAMAGE, msgspec.DecodeError):
                return None
            return state if state is not None and held.answers(thread, max_seq) else None
        index = ThreadSearchIndex(thread, frames)
        try:
            index.refresh()
        except CachesReadOnly:
            return None  # no room to write it (a full disk): the log is read, as when read-only
        try:
            state = held.load(thread)
        except (*DAMAGE, msgspec.DecodeError) as exc:
            # A file the catch-up trusted is damaged: build the index again from the log.
            note_rebuilt(f"the search index of thread {thread.id}", str(exc))
            index.rebuild()
            try:
                state = held.load(thread)
            except (*DAMAGE, msgspec.DecodeError) as exc:
                raise CorruptCache(thread.id, f"the search index cannot be read: {exc}") from None
        return state


# --- a store without caches: the documents, from the log ------------------------------------


class _FromLog(_Projection):
    """The state of a thread whose store keeps no caches, built from its log."""

    def __init__(self, thread: Thread) -> None:
        self.thread = thread
        super().__init__(thread.id)

    def _reset(self) -> None:
        super()._reset()
        self.count = 0
        """Frames read: seqs ``[0, count)``."""
        self.digest = ""

    def current(self) -> SearchState:
        """The state up to the thread's head, reading only the frames appended since."""
        thread = self.thread
        with self.lock:
            head = thread.head()
            if head is None:
                self._reset()
                return self._snapshot(-1)
            if self.count:
                last = self.count - 1
                if head.seq == last and head.digest == self.digest and self.state is not None:
                    return self.state
                found = next(thread.read_lines(from_seq=last, to_seq=last), None)
                sealed = fr.unseal(found[1]) if found is not None else None
                if head.seq < last or sealed is None or sealed[1].hex() != self.digest:
                    self._reset()
            docs: list[Doc] = []
            count, digest = self.count, self.digest
            for seq, line in thread.read_lines(from_seq=self.count, to_seq=head.seq):
                doc = doc_of_line(thread, seq, line)
                if doc is not None:
                    docs.append(doc)
                sealed = fr.unseal(line)
                count, digest = seq + 1, sealed[1].hex() if sealed is not None else ""
            self._add(docs)
            self.count, self.digest = count, digest
            return self._snapshot(count - 1)

    def _add(self, docs: list[Doc]) -> None:
        """Append documents as the index would: sealed 256 at a time, merged 16 at a time."""
        if not docs:
            return
        self._columns(
            np.array([d.seq for d in docs], np.uint64),
            np.array([min(d.length, 2**32 - 1) for d in docs], np.uint32),
            np.array([d.kind for d in docs], np.uint8),
            np.array([d.role for d in docs], np.uint8),
        )
        tail = self.tail
        pending = [*tail.docs, *docs]
        sealed = self.n_sealed
        start = 0
        block, fanout = seg_format.BLOCK, seg_format.FANOUT  # read here: tests make them small
        while len(pending) - start >= block:
            self.refs.append(SegmentRef(sealed, block))
            self.segments.append(Segment(build_segment(pending[start : start + block]), sealed))
            sealed += block
            start += block
            while merge_due(self.refs):
                first, size = self.refs[-fanout].first_doc, self.refs[-fanout].n_docs * fanout
                merged = merge_segments(self.segments[-fanout:])
                self.refs[-fanout:] = [SegmentRef(first, size)]
                self.segments[-fanout:] = [Segment(merged, first)]
        if start:
            self.tail = _Tail(sealed)
            self.tail.add(pending[start:])
        else:
            tail.add(docs)


_FROM_LOG: Final[weakref.WeakKeyDictionary[BaseStore, dict[str, _FromLog]]] = (
    weakref.WeakKeyDictionary()
)
_FROM_LOG_GUARD: Final = _thread.allocate_lock()


def _from_log(thread: Thread) -> _FromLog:
    with _FROM_LOG_GUARD:
        per_store = _FROM_LOG.setdefault(thread.store, {})
        held = per_store.get(thread.id)
        if held is None or held.thread.store is not thread.store:
            held = per_store[thread.id] = _FromLog(thread)
        return held


# --- a store that keeps its own index (a server's tables) -----------------------------------


class ServerPart:
    """The documents ``0 .. n_docs - 1`` of a thread whose backend keeps the index, as a
    ranking reads a segment: each term's postings fetched once (with the query's other terms,
    :meth:`prefetch`) and held by the process for later queries."""

    first_doc = 0

    def __init__(self, held: _FromServer, n_docs: int) -> None:
        self.held = held
        self.n_docs = n_docs

    def prefetch(self, terms: Sequence[str]) -> None:
        self.held.fetch(terms, self.n_docs)

    def postings(self, term: str) -> _Arrays:
        return self.held.postings_of(term, self.n_docs)

    def count(self, term: str, end: int) -> int:
        """How many of the documents before ``end`` hold ``term``."""
        docs = self.postings(term)[0]
        return len(docs) if not len(docs) or int(docs[-1]) < end else int(docs.searchsorted(end))


class _ServerState(SearchState):
    """A state whose postings the backend holds (:class:`ServerPart`)."""

    held: _FromServer

    def parts(self, end: int | None = None) -> list[SealedPart | TailPart | ServerPart]:
        n = self.n if end is None else min(end, self.n)
        return [ServerPart(self.held, n)] if n else []


class _FromServer(_Projection):
    """The state of a thread whose backend keeps its search index (:class:`SearchBackend`):
    the document records read once and then only the new ones; the postings of the terms
    queries ask for, fetched when asked and kept (``_POSTINGS_BYTES`` at most)."""

    def __init__(self, thread: Thread, backend: SearchBackend) -> None:
        self.thread = thread
        self.backend = backend
        super().__init__(thread.id)

    def _reset(self) -> None:
        super()._reset()
        self.digest = ""
        self.held: dict[str, tuple[int, npt.NDArray[np.uint32], npt.NDArray[np.uint16]]] = {}
        """term → (documents covered, its postings among them)."""
        self.held_bytes = 0

    def current(self, max_seq: int | None) -> SearchState | None:
        """The state holding every document up to ``max_seq`` (None: the log's end), the
        backend's index caught up first when it does not reach it."""
        thread, backend = self.thread, self.backend
        with self.lock:
            state = self.state
            if (
                state is not None
                and max_seq is not None
                and max_seq <= state.last_seq
                and backend.search_holds(thread, state.last_seq, self.digest)
            ):
                return state
            mark = backend.search_watermark(thread, documents_of_lines, max_seq=max_seq)
            if mark is None:
                self._reset()
                return None
            if state is not None and (mark.last_seq, mark.digest) == (state.last_seq, self.digest):
                return state
            held = self.seqs.n
            if held and (
                mark.docs < held
                or mark.last_seq < state.last_seq  # type: ignore[union-attr]
                or not backend.search_holds(thread, state.last_seq, self.digest)  # type: ignore[union-attr]
            ):
                self._reset()
                held = 0
            if mark.docs > held:
                raw = backend.search_records(thread, held, mark.docs)
                records = np.frombuffer(raw, DOC_RECORD)
                seqs = records["seq"]
                ordered = np.concatenate((self.seqs.view()[-1:], seqs))
                if not bool(np.all(ordered[1:] > ordered[:-1])) or int(seqs[-1]) > mark.last_seq:
                    self._reset()
                    raise CorruptCache(thread.id, "the search rows hold seqs out of order")
                self._columns(seqs, records["len"], records["kind"], records["role"])
            if int(self.cum.view()[-1]) != mark.total_length:
                self._reset()
                raise CorruptCache(thread.id, "the search rows' lengths do not add up")
            self.digest = mark.digest
            return self._snapshot(mark.last_seq)

    def _snapshot(self, last_seq: int) -> SearchState:
        state = _ServerState(
            self.thread_id,
            last_seq,
            self._views(),
            (),
            0,
            _Tail(0),
            self.postings,
        )
        state.held = self
        self.state = state
        return state

    def fetch(self, terms: Sequence[str], n_docs: int) -> None:
        """Hold the postings of ``terms`` among the first ``n_docs`` documents: one query for
        the terms held nowhere, one for those held up to an earlier count."""
        with self.lock:
            by_start: dict[int, list[str]] = {}
            for term in dict.fromkeys(terms):
                found = self.held.get(term)
                covered = 0 if found is None else found[0]
                if covered < n_docs:
                    by_start.setdefault(covered, []).append(term)
            for start, group in sorted(by_start.items()):
                got = self.backend.search_postings(self.thread, group, start, n_docs)
                for term in group:
                    docs_raw, tfs_raw = got.get(term, (b"", b""))
                    docs = np.frombuffer(docs_raw, "<u4").astype(np.uint32, copy=False)
                    tfs = np.frombuffer(tfs_raw, "<u2").astype(np.uint16, copy=False)
                    old = self.held.get(term)
                    if old is not None and len(old[1]):
                        if len(docs):
                            docs = np.concatenate((old[1], docs))
                            tfs = np.concatenate((old[2], tfs))
                        else:
                            docs, tfs = old[1], old[2]
                        self.held_bytes -= old[1].nbytes + old[2].nbytes
                    if self.held_bytes + docs.nbytes + tfs.nbytes > _POSTINGS_BYTES:
                        self.held.clear()
                        self.held_bytes = 0
                    self.held[term] = (n_docs, docs, tfs)
                    self.held_bytes += docs.nbytes + tfs.nbytes

    def postings_of(self, term: str, n_docs: int) -> _Arrays:
        """``term``'s postings among the first ``n_docs`` documents."""
        with self.lock:
            found = self.held.get(term)
            if found is None or found[0] < n_docs:
                self.fetch([term], n_docs)
                found = self.held[term]
        covered, docs, tfs = found
        if covered > n_docs and len(docs) and int(docs[-1]) >= n_docs:
            cut = int(docs.searchsorted(n_docs))
            return docs[:cut], tfs[:cut]
        return docs, tfs


_FROM_SERVER: Final[weakref.WeakKeyDictionary[BaseStore, dict[str, _FromServer]]] = (
    weakref.WeakKeyDictionary()
)


def _from_server(thread: Thread, backend: SearchBackend) -> _FromServer:
    with _FROM_LOG_GUARD:
        per_store = _FROM_SERVER.setdefault(thread.store, {})
        held = per_store.get(thread.id)
        if held is None or held.thread.store is not thread.store:
            held = per_store[thread.id] = _FromServer(thread, backend)
        while len(per_store) > _KEPT_THREADS:
            per_store.pop(next(iter(per_store)))
        return held


# --- the entry point --------------------------------------------------------------------------


def search_state(
    thread: Thread, max_seq: int | None = None, frames: ThreadIndex | None = None
) -> SearchState | None:
    """``thread``'s documents up to ``max_seq`` at least (None: up to the log's end), as this
    process holds them: through the search index when the store keeps caches (caught up first
    when it does not reach ``max_seq``), else — and for a small thread that keeps none (ADR
    0031) — built from the log. The state may hold documents past ``max_seq``; a ranking cuts
    there. None when the thread has nothing indexed."""
    cache_dir = thread.store.cache_dir
    if cache_dir is not None and not keeps_none(thread):
        folder = cache_dir / "search" / thread.id
        state = _indexed_state(thread, folder, max_seq, frames)
        if state is not None or caches_writable(cache_dir):
            return state
    elif cache_dir is not None:
        # a small thread keeps no caches: its catalog row says how far its log went (imported
        # here: a compile of a thread with caches does not load the catalog)
        from continuity.caches.catalog import check_length

        check_length(thread)
    else:
        backend = thread.store.search_backend()
        if backend is not None:
            return _from_server(thread, backend).current(max_seq)
    return _from_log(thread).current()


def forget(thread: Thread | None = None) -> None:
    """Drop what this process holds of ``thread``'s documents (of every thread: None), so the
    next ranking reads them again."""
    with _FROM_INDEX_GUARD:
        for folder in list(_FROM_INDEX):
            if thread is None or (
                thread.store.cache_dir is not None
                and folder == thread.store.cache_dir / "search" / thread.id
            ):
                del _FROM_INDEX[folder]
    with _FROM_LOG_GUARD:
        if thread is None:
            _FROM_LOG.clear()
            _FROM_SERVER.clear()
        else:
            _FROM_LOG.get(thread.store, {}).pop(thread.id, None)
            _FROM_SERVER.get(thread.store, {}).pop(thread.id, None)
