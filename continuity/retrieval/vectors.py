"""Semantic search: a vector per searchable document and cosine top-k (ADR 0033).

The documents are the search index's (:func:`.documents.doc_of`): messages,
observations and checkpoint summaries, each embedded from the text the index tokenizes
(:func:`~.documents.text_of`, cut at :data:`MAX_CHARS`). An embedder is
anything with an ``id`` and ``embed(texts) -> float32 [n, dim]`` unit rows
(:class:`continuity.retrieval.embedders.StaticEmbedder` for a model2vec model, or
:class:`~.embedders.HashedEmbedder`).

**The vector cache** of a store that keeps caches lives in
``<store>/cache/vectors/<model>/`` (``<model>``: the embedder's id made a file name), one
folder per model:

``<thread_id>.vec``  one record per document of the thread, in seq order: seq u64, kind u8,
                     role u8, 6 zero bytes, then the unit vector as ``dim`` little-endian
                     float16 (:func:`record_dtype`); a pure function of the thread's log and
                     the model, so a catch-up and a rebuild write the same bytes
``manifest.json``    the model id and dimension, and per thread (sorted by id): its project,
                     watermark (log bytes embedded, last seq and its chain digest), record count
                     and the BLAKE3 digest of its records

A query takes every log's stamp (size and last bytes, :meth:`BaseStore.log_stamps`) and trusts
a thread's records when its log still ends at the watermark; a grown thread gets records for its
new frames appended, a thread whose log no longer holds the watermark (cut, replaced) is
embedded again, a thread whose log is gone is dropped. Records are checked against their digest
on every read: a torn, truncated, rewritten or deleted file is embedded again, never trusted.
A store without a cache folder (memory, PostgreSQL) or whose cache folder cannot be written
embeds the chosen threads in memory on every call: the same float16 vectors, the same answers.

**Scores** are exact cosines (float16 rows widened to float32, one matrix product per thread),
rounded to 6 decimals; ties go to the lower (thread id, seq). Documents with a cosine ≤ 0 are
not hits, nor is anything for a query with no known token (a zero vector).

Fusion with BM25 is :mod:`.fusion`; fetching and finding models, :mod:`.models`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import time
import weakref
from collections.abc import Callable, Generator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

import blake3
import msgspec
import numpy as np
import numpy.typing as npt

from continuity import frames as fr
from continuity._fs import atomic_write, private_dirs
from continuity.caches.thread_index import caches_writable
from continuity.errors import ModelError
from continuity.retrieval.documents import doc_of, may_be_document, summary_text, text_of
from continuity.retrieval.embedders import embed_queries
from continuity.retrieval.index import log_holds
from continuity.retrieval.projects import in_project
from continuity.store.base import BaseStore, LogStamp, Thread

if TYPE_CHECKING:
    from continuity.retrieval.embedders import Embedder  # a protocol: annotations only

__all__ = [
    "CHUNK",
    "FOLDER",
    "MAX_CHARS",
    "Built",
    "EmbeddingInterrupted",
    "VectorCache",
    "build_vectors",
    "forget_vectors",
    "nearest",
    "nearest_covered",
    "orphaned_vectors",
    "rebuild_vectors",
    "record_dtype",
    "semantic_search",
    "vector_caches",
]

FOLDER: Final = "vectors"
MAX_CHARS: Final = 8_000
"""A document's text is cut here before it is embedded (a model reads its first 512 tokens)."""
_VERSION: Final = 1
_TAIL: Final = 67
"""A sealed line ends with its 64 hex digest, ``"}`` and a newline."""
CHUNK: Final = 16
"""Documents per ``embed`` call, and per task a worker process gets: a contextual model's
working memory grows with the batch (16 documents of 512 tokens: tens of MB), and progress is
told after each. An embedder must give a text the same vector whatever its batch-mates (the
cache's bytes must not depend on how documents were batched)."""
COMMIT_SECONDS: Final = 2.0
"""While embedding, the manifest is committed this often: an interrupted first search keeps
every thread embedded up to the last commit (and on Ctrl-C, every one)."""


def record_dtype(dim: int) -> np.dtype[np.void]:
    """One ``.vec`` record: seq, kind, role, padding, then ``dim`` float16 components."""
    return np.dtype(
        [("seq", "<u8"), ("kind", "u1"), ("role", "u1"), ("pad", "V6"), ("vec", "<f2", (dim,))]
    )


class _Entry(msgspec.Struct, frozen=True, array_like=True):
    project: str | None
    log_end: int
    last_seq: int
    digest: str
    rows: int
    blake3: str


class _Manifest(msgspec.Struct, frozen=True):
    version: int
    model: str
    dim: int
    threads: dict[str, _Entry]


_manifest_decoder: Final = msgspec.json.Decoder(_Manifest)


class _Rows:
    """The chosen threads' records: (thread ids, their records), threads in id order."""

    def __init__(self) -> None:
        self.threads: list[str] = []
        self.records: list[npt.NDArray[np.void]] = []
        self.wide: list[npt.NDArray[np.float32]] = []
        self.missing = 0
        """Threads in scope whose documents are not all embedded (a budget stopped, or another
        process holds the cache): the ranking is of part of the scope."""

    def add(self, tid: str, records: npt.NDArray[np.void], folder: Path | None = None) -> None:
        if len(records):
            self.threads.append(tid)
            self.records.append(records)
            self.wide.append(_wide(folder, tid, records))


# --- documents and their vectors ---------------------------------------------------------------


class _Doc(msgspec.Struct, frozen=True, array_like=True):
    seq: int
    kind: int
    role: int
    text: str


def _doc(store: BaseStore, frame: fr.Frame) -> _Doc | None:
    summary = summary_text(store, frame)
    d = doc_of(frame, summary)
    if d is None:
        return None
    return _Doc(frame.seq, d.kind, d.role, text_of(frame, summary)[:MAX_CHARS])


def _records(
    docs: Sequence[_Doc],
    embedder: Embedder,
    dim: int,
    tick: Callable[[int], None] | None = None,
) -> npt.NDArray[np.void]:
    out = np.zeros(len(docs), record_dtype(dim))
    for lo in range(0, len(docs), CHUNK):
        chunk = docs[lo : lo + CHUNK]
        vectors = np.asarray(embedder.embed([d.text for d in chunk]), dtype=np.float32)
        _fill(out[lo : lo + len(chunk)], chunk, vectors, embedder.id, dim)
        if tick is not None:
            tick(len(chunk))
    return out


def _fill(
    part: npt.NDArray[np.void],
    chunk: Sequence[_Doc],
    vectors: npt.NDArray[np.float32],
    model: str,
    dim: int,
) -> None:
    if vectors.shape != (len(chunk), dim):
        raise ModelError(f"embedder {model} gave vectors of shape {vectors.shape}")
    part["seq"] = [d.seq for d in chunk]
    part["kind"] = [d.kind for d in chunk]
    part["role"] = [d.role for d in chunk]
    part["vec"] = vectors.astype("<f2")


_dims: weakref.WeakKeyDictionary[Embedder, int] = weakref.WeakKeyDictionary()
"""Each embedder's dimension: its probe embedded once, not once a search (a query's worth)."""


def _dim(embedder: Embedder) -> int:
    try:
        return _dims[embedder]
    except (KeyError, TypeError):  # not probed yet, or an embedder that takes no weak reference
        pass
    probe = np.asarray(embedder.embed(["dimension"]), dtype=np.float32)
    if probe.ndim != 2 or probe.shape[0] != 1 or probe.shape[1] < 1:
        raise ModelError(f"embedder {embedder.id} gave vectors of shape {probe.shape}")
    dim = int(probe.shape[1])
    with contextlib.suppress(TypeError):
        _dims[embedder] = dim
    return dim


def _project_of(frame: fr.Frame) -> str | None:
    if isinstance(frame, fr.ThreadCreated):
        project = frame.meta.get("project")
        return project if isinstance(project, str) else None
    return None


def _read_docs(
    thread: Thread, start: int, from_seq: int, project: str | None, limit: int | None = None
) -> tuple[str | None, int, tuple[int, bytes] | None, list[_Doc]]:
    """(project, end, the last line read, documents) of ``thread``'s committed lines from seq
    ``from_seq`` (whose line starts at byte ``start``); with a ``limit``, reading stops after
    that many documents (the rest is caught up by a later call: a budget never skips a thread
    for being too big for it)."""
    end = start
    last: tuple[int, bytes] | None = None
    docs: list[_Doc] = []
    for seq, line in thread.read_lines(from_seq=from_seq, start_offset=start):
        if limit is not None and len(docs) >= limit and last is not None:
            break
        if seq == 0:
            project = _project_of(thread.decode(seq, line))
        if may_be_document(line):
            d = _doc(thread.store, thread.decode(seq, line))
            if d is not None:
                docs.append(d)
        end += len(line) + 1
        last = (seq, line)
    return project, end, last, docs


# --- the cache -----------------------------------------------------------------------------------


def _model_dir(store: BaseStore, embedder: Embedder) -> Path | None:
    if store.cache_dir is None:
        return None
    return store.cache_dir / FOLDER / _folder_name(embedder.id)


def _folder_name(model: str) -> str:
    """A model id made a folder name (each model its own folder: vectors never mixed)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", model).strip(".-")[:120] or "model"


def _current(e: _Entry, stamp: LogStamp) -> bool:
    return e.log_end == stamp.size and stamp.tail == e.digest.encode() + b'"}\n'


def _read_manifest(folder: Path, embedder_id: str, dim: int) -> _Manifest | None:
    try:
        m = _manifest_decoder.decode((folder / "manifest.json").read_bytes())
    except (OSError, msgspec.DecodeError, UnicodeDecodeError, msgspec.ValidationError):
        return None
    ok = m.version == _VERSION and m.model == embedder_id and m.dim == dim
    return m if ok else None


class _Held:
    """A thread's records as this process last read and checked them: trusted again while the
    file's stat (inode, size, mtime, ctime) is what it was and it was settled when read (any
    write changes its ctime; a change within the clock's granularity of the read is read
    again, as :meth:`~continuity.store.jsonl.Store.log_stamps` treats a log), and the manifest
    still names the same digest. ``wide``: the vectors widened to float32, made once."""

    __slots__ = ("data", "digest", "key", "read_ns", "wide")

    def __init__(self, key: tuple[int, int, int, int], digest: str, data: bytes) -> None:
        self.key = key
        self.digest = digest
        self.data = data
        self.read_ns = time.time_ns()
        self.wide: npt.NDArray[np.float32] | None = None


_HELD: Final[dict[Path, dict[str, _Held]]] = {}
"""By model folder and thread: the records read and checked (issue 44: reading and hashing
every thread's file, and widening every vector, on every query was a third of a warm fused
query). Pruned to the threads of the folder's last full read."""
_RACY_NS: Final = 2_000_000_000


def _stat_key(st: os.stat_result) -> tuple[int, int, int, int]:
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _load(
    folder: Path, tid: str, e: _Entry, dtype: np.dtype[np.void], *, cut: bool = True
) -> bytes | None:
    """A thread's records as its manifest entry describes them, or None (damaged, missing).
    ``cut``: bytes past them (a writer killed before its manifest) are cut (under the lock).
    Records this process read and checked are not read again while their file is unchanged
    (:class:`_Held`)."""
    size = e.rows * dtype.itemsize
    path = folder / f"{tid}.vec"
    held = _HELD.get(folder, {}).get(tid)
    if held is not None and held.digest == e.blake3 and len(held.data) == size:
        try:
            st = os.stat(path)
        except OSError:
            st = None
        if (
            st is not None
            and held.key == _stat_key(st)
            and st.st_ctime_ns < held.read_ns - _RACY_NS
        ):
            return held.data
    key = None
    try:
        with open(path, "r+b" if cut else "rb") as f:
            before = _stat_key(os.fstat(f.fileno()))
            data = f.read(size)
            if cut and f.read(1):
                f.truncate(size)  # a writer killed before its manifest: cut its bytes
            if before == _stat_key(os.fstat(f.fileno())):
                key = before
    except FileNotFoundError:
        data = b""
    except OSError:
        return None
    if len(data) != size or blake3.blake3(data).hexdigest() != e.blake3:
        return None
    if key is not None and key[1] == size:
        _HELD.setdefault(folder, {})[tid] = _Held(key, e.blake3, data)
    return data


def _wide(folder: Path | None, tid: str, records: npt.NDArray[np.void]) -> npt.NDArray[np.float32]:
    """A thread's vectors as float32 (the same array whether made now or held)."""
    held = None if folder is None else _HELD.get(folder, {}).get(tid)
    base: object = records.base  # the bytes it was made from
    if held is None or held.data is not base:
        return records["vec"].astype(np.float32)
    if held.wide is None:
        held.wide = records["vec"].astype(np.float32)
    return held.wide


class _Lock:
    def __init__(self, folder: Path, *, wait: bool = True) -> None:
        self.folder = folder
        self.wait = wait
        self.fd = -1
        self.held = False

    def __enter__(self) -> bool:
        """Whether the lock is held (always, when waiting for it)."""
        private_dirs(self.folder)
        self.fd = os.open(self.folder / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX if self.wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        self.held = True
        return True

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)


class EmbeddingInterrupted(KeyboardInterrupt):
    """Embedding for the vector cache was interrupted (Ctrl-C): every thread embedded so far
    is committed; the same command goes on from there."""

    def __init__(self, model: str, kept: int, left: int) -> None:
        super().__init__(model, kept, left)
        self.model = model
        self.kept = kept
        self.left = left

    def __str__(self) -> str:
        return (
            f"interrupted: the vectors of {self.kept:,} thread(s) are kept in the cache of model "
            f"{self.model}, {self.left:,} thread(s) are left to embed; run the same command "
            "again to go on from there"
        )


class _Work(msgspec.Struct):
    """A thread to embed: its old entry and records (None: from its start), what reading its
    log from there found."""

    tid: str
    have: tuple[_Entry, bytes] | None
    project: str | None
    end: int
    last: tuple[int, bytes]
    docs: list[_Doc]


class _Plan(msgspec.Struct):
    out: dict[str, tuple[_Entry, bytes]]
    """Threads whose records are ready (current, or all the budget leaves them)."""
    work: list[_Work]
    gone: set[str]
    """Threads whose entry is to be dropped (no committed frame, or damaged and unreadable)."""


def _plan(
    store: BaseStore,
    folder: Path,
    stamps: dict[str, LogStamp],
    known: dict[str, _Entry],
    dtype: np.dtype[np.void],
    chosen: Sequence[str],
    budget: _Budget | None,
) -> _Plan:
    """What each chosen thread needs: nothing (its records are current), or its new documents
    embedded. With a ``budget``, a thread that does not fit keeps the records it has."""
    plan = _Plan({}, [], set())
    for tid in chosen:
        stamp = stamps.get(tid)
        e = known.get(tid)
        data = _load(folder, tid, e, dtype, cut=budget is None) if e is not None else None
        have = (e, data) if e is not None and data is not None else None
        if have is not None and stamp is not None and _current(have[0], stamp):
            plan.out[tid] = have
            continue
        if budget is not None and not budget.open(have):
            if have is not None:
                plan.out[tid] = have  # what is cached: no time to catch it up now
            continue
        thread = store.thread(tid)
        if have is not None and not log_holds(thread, have[0].log_end, have[0].digest, exact=False):
            have = None  # its frames are no longer the log's: embed it again
        e0 = have[0] if have is not None else None
        start, from_seq, project = (e0.log_end, e0.last_seq + 1, e0.project) if e0 else (0, 0, None)
        limit = None if budget is None else budget.left
        project, end, last, docs = _read_docs(thread, start, from_seq, project, limit)
        if last is None:
            if have is not None:
                plan.out[tid] = have
            else:
                plan.gone.add(tid)
            continue
        if budget is not None:
            budget.take(len(docs))  # within it: what is left is caught up by the next call
        plan.work.append(_Work(tid, have, project, end, last, docs))
    return plan


class _Budget:
    """How many documents a call may still embed (a hook's, the MCP server's): threads are
    caught up in turn (``first`` first: the live session), a thread too big for what is left
    up to it, the rest of it by the next call; the project's threads alone are caught up."""

    def __init__(self, documents: int, project: str | None, first: str | None = None) -> None:
        self.left = documents
        self.project = project
        self.first = first

    def open(self, have: tuple[_Entry, bytes] | None) -> bool:
        if self.left <= 0:
            return False
        return have is None or in_project(have[0].project, self.project)

    def take(self, n: int) -> None:
        self.left -= min(n, self.left)

    def order(self, chosen: list[str], known: dict[str, _Entry]) -> list[str]:
        """``first``, then the threads of the project being caught up, then those never
        embedded (a new session among them), then the rest."""

        def rank(tid: str) -> tuple[int, str]:
            if tid == self.first:
                return (0, tid)
            e = known.get(tid)
            if e is not None and self.project is not None and in_project(e.project, self.project):
                return (1, tid)
            return (2 if e is None else 3, tid)

        return sorted(chosen, key=rank)


def _store_thread(folder: Path, w: _Work, new: bytes, dim: int) -> tuple[_Entry, bytes]:
    """Write a thread's new records (the manifest commits them) and return its entry."""
    data = w.have[1] if w.have is not None else b""
    path = folder / f"{w.tid}.vec"
    if w.have is None:
        if new:
            atomic_write(path, new, durable=False)  # a cache: rebuilt, not recovered
        else:
            path.unlink(missing_ok=True)
    elif new:
        # Appended: the manifest commits it; bytes past the old extent (a writer killed before
        # its manifest) are cut first.
        with open(path, "r+b" if path.exists() else "w+b") as f:
            f.truncate(len(data))
            f.seek(len(data))
            f.write(new)
    data += new
    sealed = fr.unseal(w.last[1])
    assert sealed is not None  # read_lines checked the chain
    rows = len(data) // record_dtype(dim).itemsize
    entry = _Entry(
        w.project, w.end, w.last[0], sealed[1].hex(), rows, blake3.blake3(data).hexdigest()
    )
    return entry, data


def _embedded(
    works: Sequence[_Work],
    embedder: Embedder,
    dim: int,
    jobs: int,
    progress: Callable[[int, int], None] | None,
) -> Generator[tuple[_Work, bytes]]:
    """Each work's new records, as they are ready: here, or by ``jobs`` worker processes (an
    embedder with a spec, more than one chunk of documents)."""
    from continuity.retrieval.embed_workers import embedder_spec

    total = sum(len(w.docs) for w in works)
    done = 0

    def tick(n: int) -> None:
        nonlocal done
        done += n
        if progress is not None:
            progress(done, total)

    if progress is not None and total:
        progress(0, total)  # the logs are read: embedding starts
    spec = embedder_spec(embedder)
    if jobs <= 1 or spec is None or total <= CHUNK:
        for w in works:
            yield w, _records(w.docs, embedder, dim, tick).tobytes()
        return
    yield from _in_workers(works, spec, embedder.id, dim, jobs, tick)


def _in_workers(
    works: Sequence[_Work],
    spec: tuple[str, tuple[object, ...]],
    model: str,
    dim: int,
    jobs: int,
    tick: Callable[[int], None],
) -> Generator[tuple[_Work, bytes]]:
    """:func:`_embedded` by worker processes: chunks of :data:`CHUNK` documents, at most two
    a worker in flight; a thread's records are yielded once all its chunks are back."""
    from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    from continuity.retrieval import embed_workers

    records = [np.zeros(len(w.docs), record_dtype(dim)) for w in works]
    missing = [len(range(0, len(w.docs), CHUNK)) for w in works]
    for i, w in enumerate(works):
        if not missing[i]:
            yield w, b""
    chunks = iter([(i, lo) for i, w in enumerate(works) for lo in range(0, len(w.docs), CHUNK)])
    pool = ProcessPoolExecutor(
        max_workers=jobs,
        mp_context=embed_workers.mp_context(),
        initializer=embed_workers.start_worker,
        initargs=(spec, os.getpid()),
    )
    running: dict[Future[npt.NDArray[np.float32]], tuple[int, int]] = {}
    try:
        while True:
            for i, lo in chunks:
                texts = [d.text for d in works[i].docs[lo : lo + CHUNK]]
                running[pool.submit(embed_workers.embed_texts, texts)] = (i, lo)
                if len(running) >= 2 * jobs:
                    break
            if not running:
                break
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for f in finished:
                i, lo = running.pop(f)
                chunk = works[i].docs[lo : lo + CHUNK]
                _fill(records[i][lo : lo + len(chunk)], chunk, f.result(), model, dim)
                tick(len(chunk))
                missing[i] -= 1
                if not missing[i]:
                    yield works[i], records[i].tobytes()
    except BrokenProcessPool:
        raise ModelError(
            "a worker process embedding documents died (out of memory?); "
            "--jobs 1 embeds in this process"
        ) from None
    finally:
        pool.shutdown(wait=not running, cancel_futures=True)


def _cached_rows(
    store: BaseStore,
    folder: Path,
    stamps: dict[str, LogStamp],
    embedder: Embedder,
    dim: int,
    only: str | None,
    progress: Callable[[int, int], None] | None = None,
    *,
    jobs: int = 1,
    budget: _Budget | None = None,
) -> tuple[dict[str, tuple[_Entry, bytes]], list[str]]:
    """Every thread's (or thread ``only``'s) entry and records, brought up to its log's end and
    committed to the manifest, and the threads left behind (a ``budget`` ran out). Held under
    the folder's lock. ``progress`` hears (documents embedded, documents to embed) after each
    chunk (a first search embeds them all: minutes at thousands of threads with a contextual
    model). The manifest is committed every
    :data:`COMMIT_SECONDS` and when anything (Ctrl-C) stops it: what was embedded is kept."""
    m = _read_manifest(folder, embedder.id, dim)
    known = dict(m.threads) if m is not None else {}
    if m is None:
        for p in folder.glob("*.vec"):
            p.unlink(missing_ok=True)
    dtype = record_dtype(dim)
    chosen = sorted(stamps) if only is None else [only]
    if budget is not None:
        chosen = budget.order(chosen, known)
    try:  # reading the logs: nothing is written yet
        plan = _plan(store, folder, stamps, known, dtype, chosen, budget)
    except KeyboardInterrupt:
        raise EmbeddingInterrupted(embedder.id, len(known), len(chosen) - len(known)) from None
    out = plan.out
    threads = {t: e for t, e in known.items() if t not in plan.gone}
    changed = m is None or len(threads) != len(known)
    if only is None:
        for tid in [t for t in threads if t not in stamps]:  # its log is gone
            (folder / f"{tid}.vec").unlink(missing_ok=True)
            del threads[tid]
            changed = True
    for tid in plan.gone:
        (folder / f"{tid}.vec").unlink(missing_ok=True)
    committed = time.monotonic()
    done = 0
    try:
        with contextlib.closing(_embedded(plan.work, embedder, dim, jobs, progress)) as ready:
            for w, new in ready:
                out[w.tid] = _store_thread(folder, w, new, dim)
                threads[w.tid] = out[w.tid][0]
                done += 1
                changed = True
                if time.monotonic() - committed >= COMMIT_SECONDS:
                    _commit(folder, embedder.id, dim, threads)
                    committed = time.monotonic()
    except KeyboardInterrupt:
        _commit(folder, embedder.id, dim, threads)
        raise EmbeddingInterrupted(embedder.id, len(threads), len(plan.work) - done) from None
    except BaseException:
        _commit(folder, embedder.id, dim, threads)
        raise
    if changed or not (folder / "manifest.json").exists():
        _commit(folder, embedder.id, dim, threads)
    behind = [t for t in chosen if t not in plan.gone and t in stamps]
    return out, [t for t in behind if t not in out or not _current(out[t][0], stamps[t])]


def _commit(folder: Path, model: str, dim: int, threads: dict[str, _Entry]) -> None:
    manifest = _Manifest(_VERSION, model, dim, dict(sorted(threads.items())))
    atomic_write(folder / "manifest.json", msgspec.json.encode(manifest), durable=False)


def _read_only_rows(
    folder: Path, embedder: Embedder, dim: int, only: str | None
) -> dict[str, tuple[_Entry, bytes]]:
    """The records the cache holds now, as they are (another process is writing it): those
    that match their digest; nothing is written."""
    m = _read_manifest(folder, embedder.id, dim)
    if m is None:
        return {}
    dtype = record_dtype(dim)
    out: dict[str, tuple[_Entry, bytes]] = {}
    for tid, e in m.threads.items():
        if only is None or tid == only:
            data = _load(folder, tid, e, dtype, cut=False)
            if data is not None:
                out[tid] = (e, data)
    return out


def _rows(
    store: BaseStore,
    embedder: Embedder,
    thread: str | None,
    project: str | None,
    progress: Callable[[int, int], None] | None = None,
    *,
    jobs: int = 1,
    budget: int | None = None,
    first: str | None = None,
) -> _Rows:
    """The records of the chosen threads: through the vector cache, or embedded now (with a
    ``budget``, ``first`` caught up first), and how many threads in scope they leave out."""
    if thread is not None:
        store.existing_thread(thread)  # an unknown thread is an error, not a miss
    dim = _dim(embedder)
    dtype = record_dtype(dim)
    folder = _model_dir(store, embedder)
    stamps = None
    if folder is not None and store.cache_dir is not None and caches_writable(store.cache_dir):
        listed = store.log_stamps(_TAIL)
        stamps = None if listed is None else {s.thread_id: s for s in listed}
    rows = _Rows()
    limit = None if budget is None else _Budget(budget, project, first)
    if folder is None or stamps is None:  # no cache to keep: embedded now, whole threads
        for tid in [thread] if thread is not None else store.threads():
            handle = store.thread(tid)
            proj, _end, _last, docs = _read_docs(handle, 0, 0, None)
            if not in_project(proj, project):
                continue
            if limit is not None and len(docs) > limit.left:
                rows.missing += 1
                continue
            if limit is not None:
                limit.take(len(docs))
            rows.add(tid, _records(docs, embedder, dim))
        return rows
    if thread is not None and thread not in stamps:
        return rows
    with _Lock(folder, wait=budget is None) as held:
        if held:
            got, behind = _cached_rows(
                store, folder, stamps, embedder, dim, thread, progress, jobs=jobs, budget=limit
            )
        else:  # a hook does not wait for a long build: it searches what is there
            got = _read_only_rows(folder, embedder, dim, thread)
            chosen = sorted(stamps) if thread is None else [thread]
            behind = [t for t in chosen if t not in got or not _current(got[t][0], stamps[t])]
    if thread is None and folder in _HELD:  # threads gone or not held: forgotten
        _HELD[folder] = {t: h for t, h in _HELD[folder].items() if t in got and h.data is got[t][1]}
    for tid in sorted(got):
        e, data = got[tid]
        if in_project(e.project, project):
            rows.add(tid, np.frombuffer(data, dtype), folder)
    rows.missing = sum(1 for tid in behind if _in_scope(store, tid, got.get(tid), project))
    return rows


def _in_scope(
    store: BaseStore, tid: str, got: tuple[_Entry, bytes] | None, project: str | None
) -> bool:
    """Whether a thread left behind is in the search's project (its entry says, or its log)."""
    if project is None:
        return True
    if got is not None and got[0].log_end > 0:
        return in_project(got[0].project, project)
    first = next(iter(store.thread(tid).read(to_seq=0)), None)
    return first is not None and in_project(_project_of(first), project)


def _model_folders(store: BaseStore) -> list[Path]:
    root = None if store.cache_dir is None else store.cache_dir / FOLDER
    return sorted(p for p in root.iterdir() if p.is_dir()) if root and root.is_dir() else []


def _any_manifest(folder: Path) -> _Manifest | None:
    try:
        return _manifest_decoder.decode((folder / "manifest.json").read_bytes())
    except (OSError, msgspec.DecodeError, UnicodeDecodeError, msgspec.ValidationError):
        return None


def forget_vectors(store: BaseStore, thread_ids: Sequence[str]) -> None:
    """Drop the records of ``thread_ids`` (deleted threads) from every model's vector cache:
    their files and their manifest entries, under each folder's lock."""
    gone = set(thread_ids)
    for folder in _model_folders(store):
        with _Lock(folder):
            m = _any_manifest(folder)
            for tid in gone:
                (folder / f"{tid}.vec").unlink(missing_ok=True)
            if m is not None and gone & set(m.threads):
                kept = {t: e for t, e in m.threads.items() if t not in gone}
                atomic_write(
                    folder / "manifest.json",
                    msgspec.json.encode(msgspec.structs.replace(m, threads=kept)),
                    durable=False,
                )


class VectorCache(msgspec.Struct, frozen=True):
    """One model's vector cache as :func:`vector_caches` finds it."""

    folder: str
    model: str | None
    """The model its manifest names (None: no manifest that reads: it is rebuilt on use)."""
    threads: int
    current: int
    """Threads whose records reach their log's end."""
    behind: int
    """Threads with frames not embedded yet (caught up by the next search or `index`)."""
    damaged: int
    """Threads whose records do not match their digest (embedded again on use)."""
    missing: int
    """Threads with a log and no records."""
    misplaced: bool
    """Its manifest names a model whose folder is another: never read (a model's vectors
    live in the folder its id names; two models are never mixed)."""


def vector_caches(store: BaseStore) -> list[VectorCache]:
    """Every model's vector cache (``verify`` reports them): whose model, how current."""
    folders = _model_folders(store)
    if not folders:
        return []
    stamps = store.log_stamps(_TAIL)
    known = {} if stamps is None else {s.thread_id: s for s in stamps}
    out: list[VectorCache] = []
    for folder in folders:
        m = _any_manifest(folder)
        if m is None:
            out.append(VectorCache(str(folder), None, 0, 0, 0, 0, len(known), False))
            continue
        dtype = record_dtype(m.dim)
        current = behind = damaged = 0
        for tid, e in m.threads.items():
            if _load(folder, tid, e, dtype, cut=False) is None:
                damaged += 1
            elif tid in known and _current(e, known[tid]):
                current += 1
            else:
                behind += 1
        missing = len(set(known) - set(m.threads))
        misplaced = folder.name != _folder_name(m.model)
        out.append(
            VectorCache(
                str(folder), m.model, len(m.threads), current, behind, damaged, missing, misplaced
            )
        )
    return out


def orphaned_vectors(store: BaseStore, logs: set[str]) -> list[tuple[str, str]]:
    """(thread id, model folder) of vector records kept for threads with no log in ``logs``."""
    found: list[tuple[str, str]] = []
    for folder in _model_folders(store):
        m = _any_manifest(folder)
        named = set(m.threads) if m is not None else set()
        named |= {p.name[:-4] for p in folder.glob("*.vec")}
        found += [(tid, folder.name) for tid in sorted(named - logs)]
    return found


class Built(msgspec.Struct, frozen=True):
    """What :func:`build_vectors` did."""

    model: str
    folder: str
    threads: int
    """Threads in the cache (every log's)."""
    documents: int
    """Documents in the cache."""
    embedded: int
    """Documents embedded now (0: it was current)."""


def build_vectors(
    store: BaseStore,
    embedder: Embedder,
    *,
    jobs: int = 1,
    progress: Callable[[int, int], None] | None = None,
    rebuild: bool = False,
) -> Built | None:
    """Bring ``embedder``'s vector cache up to every log's end ahead of a search (``continuity
    index --model``), embedding only what it lacks, by ``jobs`` worker processes when the
    embedder has a spec (:mod:`.embed_workers`); ``rebuild`` drops the cache first (the same
    bytes for the same logs and model). ``progress`` hears (documents embedded, documents to
    embed). Ctrl-C raises :class:`EmbeddingInterrupted` with every finished thread kept. None
    when the store keeps no caches (nothing to build: a search embeds in memory)."""
    folder = _model_dir(store, embedder)
    if folder is None or store.cache_dir is None:
        return None
    dim = _dim(embedder)
    stamps = store.log_stamps(_TAIL)
    if stamps is None:
        return None
    embedded = 0

    def heard(done: int, total: int) -> None:
        nonlocal embedded
        embedded = done
        if progress is not None:
            progress(done, total)

    with _Lock(folder):
        if rebuild:
            (folder / "manifest.json").unlink(missing_ok=True)
        got, _behind = _cached_rows(
            store, folder, {s.thread_id: s for s in stamps}, embedder, dim, None, heard, jobs=jobs
        )
    documents = sum(e.rows for e, _d in got.values())
    return Built(embedder.id, str(folder), len(got), documents, embedded)


def rebuild_vectors(
    store: BaseStore,
    embedder: Embedder,
    *,
    jobs: int = 1,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Drop ``embedder``'s vector cache and embed every thread again (the same bytes for the
    same logs and model); the documents embedded, or 0 when the store keeps no caches."""
    built = build_vectors(store, embedder, jobs=jobs, progress=progress, rebuild=True)
    return 0 if built is None else built.documents


# --- queries -------------------------------------------------------------------------------------


def semantic_search(
    store: BaseStore,
    query: str,
    embedder: Embedder,
    *,
    thread: str | None = None,
    project: str | None = None,
    k: int = 10,
) -> list[tuple[str, int, float]]:
    """The ``k`` documents closest to ``query`` by cosine, as (thread id, seq, cosine rounded
    to 6 decimals), best first, ties to the lower (thread id, seq); only documents with a
    cosine above 0. ``thread`` or ``project`` (``meta["project"]`` of a thread's
    ``thread_created``) narrow the search as :func:`~.search.search` does."""
    return [
        (t, s, c) for t, s, c, _kind, _role in nearest(store, query, embedder, thread, project, k)
    ]


def nearest(
    store: BaseStore,
    query: str,
    embedder: Embedder,
    thread: str | None,
    project: str | None,
    k: int,
    progress: Callable[[int, int], None] | None = None,
    *,
    jobs: int = 1,
    budget: int | None = None,
) -> list[tuple[str, int, float, int, int]]:
    """The ``k`` nearest documents as (thread id, seq, cosine, kind, role). ``progress``
    hears (documents embedded, documents to embed) while the cache is made or caught up, by
    ``jobs`` processes; ``budget``: embed at most this many documents now (a hook's), and
    search what the cache holds for the rest (without waiting for another process's lock)."""
    return nearest_covered(
        store, query, embedder, thread, project, k, progress, jobs=jobs, budget=budget
    )[0]


def nearest_covered(
    store: BaseStore,
    query: str,
    embedder: Embedder,
    thread: str | None,
    project: str | None,
    k: int,
    progress: Callable[[int, int], None] | None = None,
    *,
    jobs: int = 1,
    budget: int | None = None,
    first: str | None = None,
) -> tuple[list[tuple[str, int, float, int, int]], int]:
    """:func:`nearest`, and how many threads in scope the ranking leaves out because their
    documents are not all embedded yet (0: it ranks the whole scope). With a ``budget``,
    thread ``first`` (the live session) is caught up before the others."""
    if k <= 0:
        return [], 0
    q = embed_queries(embedder, [query])[0]  # a query prefix where the model has one
    if not q.any():
        return [], 0
    rows = _rows(store, embedder, thread, project, progress, jobs=jobs, budget=budget, first=first)
    if not rows.records:
        return [], rows.missing
    # Threads in id order, records in seq order: the concatenation is in (thread id, seq)
    # order, so a stable sort by score breaks ties by it.
    scores = np.concatenate([np.round((w @ q).astype(np.float64), 6) for w in rows.wide])
    sizes = [len(r) for r in rows.records]
    owner = np.repeat(np.arange(len(rows.threads)), sizes)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    if k < len(scores):
        floor = np.partition(scores, len(scores) - k)[len(scores) - k]
        candidates = np.flatnonzero(scores >= floor)
    else:
        candidates = np.arange(len(scores))
    order = candidates[np.argsort(-scores[candidates], kind="stable")][:k]
    found = []
    for i in order:
        if scores[i] <= 0:
            continue
        t = int(owner[i])
        record = rows.records[t][int(i - starts[t])]
        found.append(
            (
                rows.threads[t],
                int(record["seq"]),
                float(scores[i]),
                int(record["kind"]),
                int(record["role"]),
            )
        )
    return found, rows.missing
