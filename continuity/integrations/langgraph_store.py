"""A LangGraph long-term memory store whose truth is a continuity log (the `langgraph` extra).

:class:`ContinuityStore` implements :class:`langgraph.store.base.BaseStore`, sync and async:
namespaces, ``put``/``get``/``delete``, ``search`` (LangGraph's filters; a ``query`` ranked by
continuity's BM25 over the items' text, or by cosine similarity when an embedding model is
configured with ``index=``), ``list_namespaces``, and TTLs (``ttl=``, ``sweep_ttl``). One store
is one continuity thread (``langgraph-store`` unless told): each put or delete is one
``record_appended`` frame, the latest record of an item is the item, a delete is a tombstone
record, and nothing is rewritten (:mod:`._langgraph_store_log`). ``continuity log`` and
``verify`` see every memory ever written.

    from continuity.integrations.langgraph import ContinuitySaver, ContinuityStore

    with ContinuityStore("agent-store") as store:
        graph = builder.compile(checkpointer=ContinuitySaver("agent-store"), store=store)
        store.put(("users", "42"), "prefs", {"food": "pizza"})
        store.search(("users", "42"), query="what food")

Works on any continuity store: a JSONL folder, a ``postgresql://`` URL, or a store object.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, Final

import numpy as np
import numpy.typing as npt
from langchain_core.embeddings import Embeddings
from langgraph.store.base import (
    BaseStore as LangGraphBaseStore,
    GetOp,
    IndexConfig,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    ensure_embeddings,
    get_text_at_path,
    tokenize_path,
    validate_op_namespace,
)

from continuity import frames as fr
from continuity.aio import AsyncStore
from continuity.errors import BadFrame, SeqConflict
from continuity.integrations._langgraph_store_log import (
    ITEM,
    META_STORE,
    TOUCH,
    Entry,
    ItemLog,
    item_key,
    matches_filter,
    matches_namespace,
    record_frame,
)
from continuity.retrieval.ranking import corpus_of_docs, query_terms, rank
from continuity.store.base import BaseStore, Thread, validate_thread_id
from continuity.store.locate import open_store

__all__ = ["ContinuityStore"]

DEFAULT_THREAD: Final = "langgraph-store"
_RETRIES: Final = 16
_REFRESH_SHARE: Final = 100
"""A read refreshes an item's TTL (appends a touch) once ``ttl / 100`` has passed since the last
refresh: a read-heavy agent does not write a record per read, and an item lives at most 1% less
than its TTL says."""

Namespace = tuple[str, ...]
_Key = tuple[Namespace, str]


class _Embedded:
    """What a batch needs embedded before it touches the log: each put's texts, each query."""

    def __init__(self) -> None:
        self.put_texts: dict[_Key, list[tuple[str, str]]] = {}
        self.put_vectors: dict[_Key, tuple[list[str], npt.NDArray[np.float32]]] = {}
        self.queries: dict[str, npt.NDArray[np.float32]] = {}

    def texts(self) -> list[str]:
        return [text for pairs in self.put_texts.values() for _path, text in pairs]

    def take(self, vectors: Sequence[Sequence[float]]) -> None:
        at = 0
        for key, pairs in self.put_texts.items():
            rows = np.asarray(vectors[at : at + len(pairs)], dtype=np.float32)
            self.put_vectors[key] = ([path for path, _ in pairs], rows)
            at += len(pairs)


class _ContinuityEmbeddings(Embeddings):
    """A continuity :class:`~continuity.retrieval.embedders.Embedder` (a static model, the
    hashed embedder) as LangChain's ``Embeddings``."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [list(map(float, row)) for row in self.embedder.embed(texts)]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


class ContinuityStore(LangGraphBaseStore):
    """LangGraph's long-term memory (``BaseStore``) in a continuity store.

    ``store``: any continuity store, or a location (a JSONL store's folder, a ``postgresql://``
    URL), created when missing and closed by :meth:`close`. ``thread_id``: the continuity thread
    holding the items (several LangGraph stores can share a continuity store under different
    ids). ``index``: LangGraph's ``IndexConfig`` (``embed``: a LangChain ``Embeddings``, a
    function, a provider string, or a continuity embedder such as a static model; ``fields``:
    what of a value to embed, default the whole value); without it a ``query`` is ranked by BM25.
    ``ttl``: LangGraph's ``TTLConfig``.
    """

    supports_ttl: bool = True

    def __init__(
        self,
        store: BaseStore | str | os.PathLike[str],
        *,
        thread_id: str = DEFAULT_THREAD,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
    ) -> None:
        self._owns = not isinstance(store, BaseStore)
        self.store: BaseStore = (
            store if isinstance(store, BaseStore) else open_store(store, create=True)
        )
        self.thread_id = validate_thread_id(thread_id)
        self.thread: Thread = self.store.thread(self.thread_id)
        self.ttl_config = ttl
        self.index_config: dict[str, Any] | None = None
        self.embeddings: Embeddings | None = None
        if index:
            self.index_config = dict(index)
            embed = index.get("embed")
            if hasattr(embed, "embed") and hasattr(embed, "id") and not callable(embed):
                self.embeddings = _ContinuityEmbeddings(embed)
            else:
                self.embeddings = ensure_embeddings(embed)
        self._log = ItemLog(self.thread)
        self._lock = threading.RLock()
        self._aio = AsyncStore(self.store)
        self._sweeper: threading.Thread | None = None
        self._stop = threading.Event()

    # --- lifecycle -------------------------------------------------------------------------

    @classmethod
    @contextmanager
    def from_conn_string(
        cls,
        conn_string: str,
        *,
        thread_id: str = DEFAULT_THREAD,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
    ) -> Iterator[ContinuityStore]:
        """The store at ``conn_string`` (a ``postgresql://`` URL or a JSONL store's folder),
        closed when the ``with`` block ends, as LangGraph's ``PostgresStore.from_conn_string``."""
        with cls(conn_string, thread_id=thread_id, index=index, ttl=ttl) as store:
            yield store

    def setup(self) -> None:
        """Make the store ready (LangGraph's stores create their tables here): create the store's
        thread when it is missing (idempotent; a thread another process made first is read), and
        refuse a thread that is not a LangGraph store's."""
        with self._lock:
            if self._log.catch_up() is None:
                self._commit({}, _Embedded())

    def close(self) -> None:
        """Stop the TTL sweeper, and close the continuity store when this object opened it."""
        self.stop_ttl_sweeper()
        if self._owns:
            self.store.close()

    def __enter__(self) -> ContinuityStore:
        if self.ttl_config and self.ttl_config.get("sweep_interval_minutes"):
            self.start_ttl_sweeper()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> ContinuityStore:
        return self.__enter__()

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    # --- batches ---------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops``: the puts first, as one all-or-nothing append, then the reads, in order."""
        ops, puts = _checked(ops)
        embedded = self._to_embed(ops, puts)
        if self.embeddings is not None:
            if embedded.put_texts:
                embedded.take(self.embeddings.embed_documents(embedded.texts()))
            for query in list(embedded.queries):
                embedded.queries[query] = _vector(self.embeddings.embed_query(query))
        return self._execute(ops, puts, embedded)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """As :meth:`batch`, the log's work in a worker thread, embeddings awaited."""
        ops, puts = _checked(ops)
        embedded = self._to_embed(ops, puts)
        if self.embeddings is not None:
            if embedded.put_texts:
                embedded.take(await self.embeddings.aembed_documents(embedded.texts()))
            for query in list(embedded.queries):
                embedded.queries[query] = _vector(await self.embeddings.aembed_query(query))
        return await self._aio.run_blocking(self._execute, ops, puts, embedded)

    def _to_embed(self, ops: list[Op], puts: dict[_Key, PutOp]) -> _Embedded:
        embedded = _Embedded()
        if self.embeddings is None:
            return embedded
        for ident, op in puts.items():
            if op.value is None or op.index is False:
                continue
            pairs: list[tuple[str, str]] = []
            for path in self._paths(op.index):
                found = get_text_at_path(op.value, _tokens(path))
                labels = [f"{path}.{i}" for i in range(len(found))] if len(found) > 1 else [path]
                pairs.extend(zip(labels, found, strict=False))
            if pairs:
                embedded.put_texts[ident] = pairs
        for search in ops:
            if isinstance(search, SearchOp) and search.query:
                embedded.queries[search.query] = np.zeros(0, np.float32)
        return embedded

    def _paths(self, index: list[str] | bool | None) -> list[str]:
        if isinstance(index, list):
            return index
        fields = (self.index_config or {}).get("fields")
        return list(fields) if fields else ["$"]

    def _execute(self, ops: list[Op], puts: dict[_Key, PutOp], embedded: _Embedded) -> list[Result]:
        with self._lock:
            if puts:
                self._commit(puts, embedded)
            else:
                self._log.catch_up()
            now = self.store.clock()
            touched: dict[_Key, Entry] = {}
            results: list[Result] = []
            for op in ops:
                results.append(self._run(op, now, embedded, touched))
            if touched:
                self._touch(touched, now)
            return results

    def _run(self, op: Op, now: int, embedded: _Embedded, touched: dict[_Key, Entry]) -> Result:
        if isinstance(op, GetOp):
            entry = self._log.items.get((tuple(op.namespace), op.key))
            if entry is None or (self._omit_expired() and entry.expires_ms() <= now):
                return None
            if op.refresh_ttl:
                _note_touch(entry, now, touched)
            return _item(entry)
        if isinstance(op, SearchOp):
            found = self._search(op, now, embedded)
            if op.refresh_ttl:
                for entry, _score in found:
                    _note_touch(entry, now, touched)
            return [_search_item(entry, score) for entry, score in found]
        if isinstance(op, ListNamespacesOp):
            return self._namespaces(op, now)
        return None  # a put: done before the reads

    def _omit_expired(self) -> bool:
        return bool(self.ttl_config and self.ttl_config.get("omit_expired"))

    # --- writes ----------------------------------------------------------------------------

    def _commit(self, puts: dict[_Key, PutOp], embedded: _Embedded) -> None:
        refs = {ident: self._store_vectors(*pair) for ident, pair in embedded.put_vectors.items()}
        for _ in range(_RETRIES):
            head = self._log.catch_up()
            frames: list[fr.Frame] = []
            if head is None:
                meta = {META_STORE: "1"}
                frames.append(fr.ThreadCreated(thread_id=self.thread_id, meta=meta))
            for ident, op in puts.items():
                frame = self._put_frame(ident, op, refs.get(ident))
                if frame is not None:
                    frames.append(frame)
            if not frames:
                return
            try:
                self.thread.append(frames, expected_seq=0 if head is None else head.next_seq)
            except SeqConflict:
                continue  # another process appended: read it, and build the batch again
            except BadFrame:
                if head is None and self.thread.exists():
                    continue  # another process created the thread first: build it again
                raise
            self._log.catch_up()
            return
        raise SeqConflict(self.thread_id, -1, -1)

    def _put_frame(
        self, ident: _Key, op: PutOp, vectors: dict[str, Any] | None
    ) -> fr.RecordAppended | None:
        key = item_key(*ident)
        existing = self._log.items.get(ident)
        if op.value is None:
            if existing is None:
                return None  # nothing to hide
            return record_frame(self.thread, ITEM, key, {"deleted": "delete"})
        data: dict[str, Any] = {"value": dict(op.value)}
        if existing is not None:
            data["created"] = existing.created_ms
        if op.ttl is not None:
            data["ttl"] = op.ttl
        if op.index is not None:
            data["index"] = op.index
        if vectors is not None:
            data["vectors"] = vectors
        return record_frame(self.thread, ITEM, key, data)

    def _store_vectors(self, paths: list[str], rows: npt.NDArray[np.float32]) -> dict[str, Any]:
        body = np.ascontiguousarray(rows, dtype="<f4").tobytes()
        aid = self.store.artifacts.put(body)
        return {"artifact": aid, "paths": paths, "dims": int(rows.shape[1])}

    def _touch(self, touched: dict[_Key, Entry], now: int) -> None:
        frames = [fr.RecordAppended(kind=TOUCH, key=item_key(*ident)) for ident in touched]
        self.thread.append(frames)  # order-free: a touch needs no expected seq
        for entry in touched.values():
            entry.refreshed_ms = max(entry.refreshed_ms, now)

    # --- reads -----------------------------------------------------------------------------

    def _search(
        self, op: SearchOp, now: int, embedded: _Embedded
    ) -> list[tuple[Entry, float | None]]:
        if op.limit < 0 or op.offset < 0:
            raise ValueError(f"search limit and offset must be >= 0 (got {op.limit}, {op.offset})")
        prefix = tuple(op.namespace_prefix)
        candidates = [
            e
            for e in self._log.live(prefix, now, self._omit_expired())
            if not op.filter or matches_filter(e.value, op.filter)
        ]
        ranked: list[tuple[Entry, float | None]]
        if not op.query:
            ranked = [(e, None) for e in candidates]
        elif self.embeddings is not None:
            ranked = self._by_similarity(candidates, embedded.queries[op.query])
        else:
            ranked = self._by_terms(candidates, op.query)
        return ranked[op.offset : op.offset + op.limit]

    def _by_terms(self, entries: list[Entry], query: str) -> list[tuple[Entry, float | None]]:
        """BM25 (continuity's terms, stems and ranking) over the candidates; the items no query
        word matches follow, without a score, as LangGraph's stores list unscored items."""
        indexed = [e for e in entries if e.index is not False]
        docs = sorted((e.doc(self._texts(e)) for e in indexed), key=lambda d: d.seq)
        by_seq = {e.seq: e for e in indexed}
        docs = [d for d in docs if d.length]
        hits = (
            rank([corpus_of_docs(self.thread_id, docs)], query_terms(query), len(docs), frozenset())
            if docs
            else []
        )
        scored: list[tuple[Entry, float | None]] = [(by_seq[h.seq], h.score) for h in hits]
        seen = {h.seq for h in hits}
        return scored + [(e, None) for e in entries if e.seq not in seen]

    def _texts(self, entry: Entry) -> Iterator[str]:
        for path in self._paths(entry.index):
            yield from get_text_at_path(entry.value, _tokens(path))

    def _by_similarity(
        self, entries: list[Entry], query: npt.NDArray[np.float32]
    ) -> list[tuple[Entry, float | None]]:
        """Cosine similarity of the query to each item's best vector (LangGraph's max pooling);
        items without vectors (``index=False``, another model's dims) follow without a score."""
        scored: list[tuple[Entry, float | None]] = []
        rest: list[tuple[Entry, float | None]] = []
        q_norm = float(np.linalg.norm(query))
        for entry in entries:
            rows = self._vectors(entry)
            if rows is None or rows.shape[1] != query.shape[0] or not len(rows):
                rest.append((entry, None))
                continue
            norms = np.linalg.norm(rows, axis=1) * q_norm
            sims = np.divide(rows @ query, norms, out=np.zeros(len(rows)), where=norms != 0)
            scored.append((entry, float(sims.max())))
        scored.sort(key=lambda pair: -(pair[1] or 0.0))
        return scored + rest

    def _vectors(self, entry: Entry) -> npt.NDArray[np.float32] | None:
        if entry.vectors is None and entry.vector_ref is not None:
            ref = entry.vector_ref
            body = self.store.artifacts.get(ref["artifact"])
            entry.vectors = np.frombuffer(body, dtype="<f4").reshape(-1, int(ref["dims"]))
        return entry.vectors

    def _namespaces(self, op: ListNamespacesOp, now: int) -> list[Namespace]:
        if op.limit < 0 or op.offset < 0:
            raise ValueError(f"limit and offset must be >= 0 (got {op.limit}, {op.offset})")
        found = set(self._log.namespaces(now, self._omit_expired()))
        for cond in op.match_conditions or ():
            suffix = cond.match_type == "suffix"
            if cond.match_type not in ("prefix", "suffix"):
                raise ValueError(f"unknown namespace match type {cond.match_type!r}")
            found = {ns for ns in found if matches_namespace(ns, tuple(cond.path), suffix=suffix)}
        if op.max_depth is not None:
            found = {ns[: op.max_depth] for ns in found}
        return sorted(found)[op.offset : op.offset + op.limit]

    # --- TTL -------------------------------------------------------------------------------

    def sweep_ttl(self) -> int:
        """Append a tombstone for each expired item; return how many."""
        with self._lock:
            for _ in range(_RETRIES):
                head = self._log.catch_up()
                now = self.store.clock()
                expired = [i for i, e in self._log.items.items() if e.expires_ms() <= now]
                if not expired or head is None:
                    return 0
                frames = [
                    record_frame(self.thread, ITEM, item_key(*i), {"deleted": "ttl"})
                    for i in expired
                ]
                try:
                    self.thread.append(frames, expected_seq=head.next_seq)
                except SeqConflict:
                    continue
                self._log.catch_up()
                return len(frames)
            raise SeqConflict(self.thread_id, -1, -1)

    async def asweep_ttl(self) -> int:
        return await self._aio.run_blocking(self.sweep_ttl)

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> Future[None]:
        """Sweep every ``sweep_interval_minutes`` (default: the TTL config's, else 5) in a
        daemon thread until :meth:`stop_ttl_sweeper` or :meth:`close`; the future completes
        then."""
        minutes = (
            sweep_interval_minutes or (self.ttl_config or {}).get("sweep_interval_minutes") or 5
        )
        done: Future[None] = Future()
        if self._sweeper is not None:
            done.set_result(None)
            return done
        self._stop.clear()

        def loop() -> None:
            while not self._stop.wait(minutes * 60):
                self.sweep_ttl()
            done.set_result(None)

        self._sweeper = threading.Thread(target=loop, name="continuity-ttl-sweeper", daemon=True)
        self._sweeper.start()
        return done

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper; True once it has stopped (or none ran)."""
        sweeper, self._sweeper = self._sweeper, None
        if sweeper is None:
            return True
        self._stop.set()
        sweeper.join(timeout)
        return not sweeper.is_alive()


def _checked(ops: Iterable[Op]) -> tuple[list[Op], dict[_Key, PutOp]]:
    """The ops as a list, each checked (a clear error for what LangGraph's stores refuse), and
    the puts by item, the last put of an item in the batch winning."""
    ops = list(ops)
    puts: dict[_Key, PutOp] = {}
    for op in ops:
        if not isinstance(op, (GetOp, PutOp, SearchOp, ListNamespacesOp)):
            raise TypeError(f"not a LangGraph store operation: {type(op).__name__}")
        validate_op_namespace(op)
        if isinstance(op, PutOp):
            if not op.namespace:
                raise InvalidNamespaceError("Namespace cannot be empty.")
            if not isinstance(op.key, str):
                raise TypeError(f"an item's key must be a string, got {type(op.key).__name__}")
            if op.value is not None and not isinstance(op.value, Mapping):
                raise TypeError(
                    "a LangGraph store value must be a dict (or None to delete), "
                    f"got {type(op.value).__name__}"
                )
            if op.value is not None and not all(isinstance(k, str) for k in op.value):
                raise TypeError("a LangGraph store value's keys must be strings")
            if op.ttl is not None and not op.ttl > 0:
                raise ValueError(f"ttl must be a positive number of minutes, got {op.ttl!r}")
            puts[(tuple(op.namespace), op.key)] = op
    return ops, puts


def _tokens(path: str) -> str | list[str]:
    return path if path == "$" else tokenize_path(path)


def _vector(values: Sequence[float]) -> npt.NDArray[np.float32]:
    return np.asarray(values, dtype=np.float32)


def _note_touch(entry: Entry, now: int, touched: dict[_Key, Entry]) -> None:
    if entry.ttl is not None and now - entry.refreshed_ms >= entry.ttl * 60_000 / _REFRESH_SHARE:
        touched[(entry.namespace, entry.key)] = entry


def _when(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def _item(entry: Entry) -> Item:
    return Item(
        value=entry.copy_of_value(),
        key=entry.key,
        namespace=entry.namespace,
        created_at=_when(entry.created_ms),
        updated_at=_when(entry.updated_ms),
    )


def _search_item(entry: Entry, score: float | None) -> SearchItem:
    return SearchItem(
        namespace=entry.namespace,
        key=entry.key,
        value=entry.copy_of_value(),
        created_at=_when(entry.created_ms),
        updated_at=_when(entry.updated_ms),
        score=score,
    )
