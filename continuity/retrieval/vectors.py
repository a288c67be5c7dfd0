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

import fcntl
import os
import re
from collections.abc import Callable, Sequence
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
from continuity.retrieval.index import log_holds
from continuity.store.base import BaseStore, LogStamp, Thread

if TYPE_CHECKING:
    from continuity.retrieval.embedders import Embedder  # a protocol: annotations only

__all__ = [
    "FOLDER",
    "MAX_CHARS",
    "forget_vectors",
    "nearest",
    "orphaned_vectors",
    "rebuild_vectors",
    "record_dtype",
    "semantic_search",
]

FOLDER: Final = "vectors"
MAX_CHARS: Final = 8_000
"""A document's text is cut here before it is embedded (a model reads its first 512 tokens)."""
_VERSION: Final = 1
_TAIL: Final = 67
"""A sealed line ends with its 64 hex digest, ``"}`` and a newline."""
_BATCH: Final = 512


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

    def add(self, tid: str, records: npt.NDArray[np.void]) -> None:
        if len(records):
            self.threads.append(tid)
            self.records.append(records)


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


def _records(docs: Sequence[_Doc], embedder: Embedder, dim: int) -> npt.NDArray[np.void]:
    out = np.zeros(len(docs), record_dtype(dim))
    for lo in range(0, len(docs), _BATCH):
        chunk = docs[lo : lo + _BATCH]
        vectors = np.asarray(embedder.embed([d.text for d in chunk]), dtype=np.float32)
        if vectors.shape != (len(chunk), dim):
            raise ModelError(f"embedder {embedder.id} gave vectors of shape {vectors.shape}")
        part = out[lo : lo + len(chunk)]
        part["seq"] = [d.seq for d in chunk]
        part["kind"] = [d.kind for d in chunk]
        part["role"] = [d.role for d in chunk]
        part["vec"] = vectors.astype("<f2")
    return out


def _dim(embedder: Embedder) -> int:
    probe = np.asarray(embedder.embed(["dimension"]), dtype=np.float32)
    if probe.ndim != 2 or probe.shape[0] != 1 or probe.shape[1] < 1:
        raise ModelError(f"embedder {embedder.id} gave vectors of shape {probe.shape}")
    return int(probe.shape[1])


def _project_of(frame: fr.Frame) -> str | None:
    if isinstance(frame, fr.ThreadCreated):
        project = frame.meta.get("project")
        return project if isinstance(project, str) else None
    return None


def _read_docs(
    thread: Thread, start: int, from_seq: int, project: str | None
) -> tuple[str | None, int, tuple[int, bytes] | None, list[_Doc]]:
    """(project, end, the last line read, documents) of ``thread``'s committed lines from seq
    ``from_seq`` (whose line starts at byte ``start``)."""
    end = start
    last: tuple[int, bytes] | None = None
    docs: list[_Doc] = []
    for seq, line in thread.read_lines(from_seq=from_seq, start_offset=start):
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
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", embedder.id).strip(".-")[:120] or "model"
    return store.cache_dir / FOLDER / name


def _current(e: _Entry, stamp: LogStamp) -> bool:
    return e.log_end == stamp.size and stamp.tail == e.digest.encode() + b'"}\n'


def _read_manifest(folder: Path, embedder_id: str, dim: int) -> _Manifest | None:
    try:
        m = _manifest_decoder.decode((folder / "manifest.json").read_bytes())
    except (OSError, msgspec.DecodeError, UnicodeDecodeError, msgspec.ValidationError):
        return None
    ok = m.version == _VERSION and m.model == embedder_id and m.dim == dim
    return m if ok else None


def _load(folder: Path, tid: str, e: _Entry, dtype: np.dtype[np.void]) -> bytes | None:
    """A thread's records as its manifest entry describes them, or None (damaged, missing)."""
    size = e.rows * dtype.itemsize
    try:
        with open(folder / f"{tid}.vec", "r+b") as f:
            data = f.read(size)
            if f.read(1):
                f.truncate(size)  # a writer killed before its manifest: cut its bytes
    except FileNotFoundError:
        data = b""
    except OSError:
        return None
    if len(data) != size or blake3.blake3(data).hexdigest() != e.blake3:
        return None
    return data


class _Lock:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.fd = -1

    def __enter__(self) -> None:
        private_dirs(self.folder)
        self.fd = os.open(self.folder / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)


def _catch_up_thread(
    thread: Thread,
    folder: Path,
    old: tuple[_Entry, bytes] | None,
    embedder: Embedder,
    dim: int,
) -> tuple[_Entry, bytes] | None:
    """The thread's entry and records brought to its log's end (None: no committed frame)."""
    e, data = old if old is not None else (None, b"")
    start, from_seq, project = (e.log_end, e.last_seq + 1, e.project) if e else (0, 0, None)
    project, end, last, docs = _read_docs(thread, start, from_seq, project)
    if last is None:
        return old
    sealed = fr.unseal(last[1])
    assert sealed is not None  # read_lines checked the chain
    new = _records(docs, embedder, dim).tobytes()
    path = folder / f"{thread.id}.vec"
    if e is None:
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
    rows = len(data) // record_dtype(dim).itemsize
    digest = blake3.blake3(data).hexdigest()
    return _Entry(project, end, last[0], sealed[1].hex(), rows, digest), data


def _cached_rows(
    store: BaseStore,
    folder: Path,
    stamps: dict[str, LogStamp],
    embedder: Embedder,
    dim: int,
    only: str | None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, tuple[_Entry, bytes]]:
    """Every thread's (or thread ``only``'s) entry and records, brought up to its log's end and
    committed to the manifest. Held under the folder's lock. ``progress`` hears (threads done,
    threads in all) after each thread that had to be embedded (a first search embeds them all:
    minutes at thousands of threads)."""
    m = _read_manifest(folder, embedder.id, dim)
    known = dict(m.threads) if m is not None else {}
    if m is None:
        for p in folder.glob("*.vec"):
            p.unlink(missing_ok=True)
    dtype = record_dtype(dim)
    out: dict[str, tuple[_Entry, bytes]] = {}
    changed = m is None
    chosen = sorted(stamps) if only is None else [only]
    for done, tid in enumerate(chosen, 1):
        stamp = stamps.get(tid)
        e = known.get(tid)
        data = _load(folder, tid, e, dtype) if e is not None else None
        have = (e, data) if e is not None and data is not None else None
        if have is not None and stamp is not None and _current(have[0], stamp):
            out[tid] = have
            continue
        thread = store.thread(tid)
        if have is not None and not log_holds(thread, have[0].log_end, have[0].digest, exact=False):
            have = None  # its frames are no longer the log's: embed it again
        got = _catch_up_thread(thread, folder, have, embedder, dim)
        if progress is not None:
            progress(done, len(chosen))
        if got is not None:
            out[tid] = got
        if got != (e, data):
            changed = True
    threads = dict(known)
    for tid in list(threads):
        if only is None and tid not in stamps:  # its log is gone
            (folder / f"{tid}.vec").unlink(missing_ok=True)
            del threads[tid]
            changed = True
    threads.update({tid: e for tid, (e, _d) in out.items()})
    for tid in [t for t in threads if t not in out and (only is None or t == only)]:
        del threads[tid]
    if changed or not (folder / "manifest.json").exists():
        manifest = _Manifest(_VERSION, embedder.id, dim, dict(sorted(threads.items())))
        atomic_write(folder / "manifest.json", msgspec.json.encode(manifest), durable=False)
    return out


def _rows(
    store: BaseStore,
    embedder: Embedder,
    thread: str | None,
    project: str | None,
    progress: Callable[[int, int], None] | None = None,
) -> _Rows:
    """The records of the chosen threads: through the vector cache, or embedded now."""
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
    if folder is None or stamps is None:
        for tid in [thread] if thread is not None else store.threads():
            handle = store.thread(tid)
            proj, _end, _last, docs = _read_docs(handle, 0, 0, None)
            if project is None or proj == project:
                rows.add(tid, _records(docs, embedder, dim))
        return rows
    if thread is not None and thread not in stamps:
        return rows
    with _Lock(folder):
        got = _cached_rows(store, folder, stamps, embedder, dim, thread, progress)
    for tid in sorted(got):
        e, data = got[tid]
        if project is None or e.project == project:
            rows.add(tid, np.frombuffer(data, dtype))
    return rows


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


def orphaned_vectors(store: BaseStore, logs: set[str]) -> list[tuple[str, str]]:
    """(thread id, model folder) of vector records kept for threads with no log in ``logs``."""
    found: list[tuple[str, str]] = []
    for folder in _model_folders(store):
        m = _any_manifest(folder)
        named = set(m.threads) if m is not None else set()
        named |= {p.name[:-4] for p in folder.glob("*.vec")}
        found += [(tid, folder.name) for tid in sorted(named - logs)]
    return found


def rebuild_vectors(store: BaseStore, embedder: Embedder) -> int:
    """Drop ``embedder``'s vector cache and embed every thread again (the same bytes for the
    same logs and model); the documents embedded, or 0 when the store keeps no caches."""
    folder = _model_dir(store, embedder)
    if folder is None or store.cache_dir is None:
        return 0
    dim = _dim(embedder)
    stamps = store.log_stamps(_TAIL)
    if stamps is None:
        return 0
    with _Lock(folder):
        (folder / "manifest.json").unlink(missing_ok=True)
        got = _cached_rows(store, folder, {s.thread_id: s for s in stamps}, embedder, dim, None)
    return sum(e.rows for e, _d in got.values())


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
) -> list[tuple[str, int, float, int, int]]:
    if k <= 0:
        return []
    q = np.asarray(embedder.embed([query]), dtype=np.float32)[0]
    if not q.any():
        return []
    rows = _rows(store, embedder, thread, project, progress)
    if not rows.records:
        return []
    # Threads in id order, records in seq order: the concatenation is in (thread id, seq)
    # order, so a stable sort by score breaks ties by it.
    scores = np.concatenate(
        [np.round((r["vec"].astype(np.float32) @ q).astype(np.float64), 6) for r in rows.records]
    )
    owner = np.repeat(np.arange(len(rows.threads)), [len(r) for r in rows.records])
    records = np.concatenate(rows.records)
    if k < len(scores):
        floor = np.partition(scores, len(scores) - k)[len(scores) - k]
        candidates = np.flatnonzero(scores >= floor)
    else:
        candidates = np.arange(len(scores))
    order = candidates[np.argsort(-scores[candidates], kind="stable")][:k]
    return [
        (
            rows.threads[int(owner[i])],
            int(records["seq"][i]),
            float(scores[i]),
            int(records["kind"][i]),
            int(records["role"][i]),
        )
        for i in order
        if scores[i] > 0
    ]
