"""Search and recall across a store: BM25 over the search index, with optional re-ranking.

``search(store, query)`` ranks every thread's messages, observations and summaries (or one
thread's, or one project's) with one set of statistics; ``search_prefix(thread, query, ...)``
ranks one thread's documents up to a seq with statistics over that prefix alone. Both are
deterministic (the ranking is :mod:`continuity.retrieval.ranking`: BM25 summed rarest term first,
ties broken by thread and seq) and give each hit a snippet. An :class:`Embedder` can re-rank the
best candidates by cosine similarity; the default :class:`HashedEmbedder` is deterministic
hashed features, and a real model can be plugged in by the caller (nothing is downloaded).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, overload

import msgspec

from continuity import frames as fr
from continuity.agents.table import Agent, agent_named, known_agent_names
from continuity.caches.live import marks_of
from continuity.caches.marks import is_in
from continuity.caches.thread_index import DAMAGE as _DAMAGE, ThreadIndex, check_no_lost_threads
from continuity.errors import ArtifactCorrupt, CorruptCache, CorruptFrame, InvalidQuery
from continuity.retrieval.documents import Doc, doc_of, documents_of_lines, summary_text, text_of
from continuity.retrieval.index import ThreadSearchIndex
from continuity.retrieval.leads import candidates, lead
from continuity.retrieval.projects import in_project, project_scope
from continuity.retrieval.ranking import (
    Corpus,
    Hit,
    corpus_of_state,
    query_terms,
    rank,
    rank_prefix,
)
from continuity.retrieval.server_index import wide_corpus
from continuity.retrieval.state import forget, search_state
from continuity.retrieval.store_index import (
    Progress,
    StoreSearchView,
    open_store_search,
    rebuild_store_search,
)
from continuity.retrieval.terms import SURFACE, as_written, token_spans, words_of
from continuity.store.base import BaseStore, Thread, WideSearchBackend, resolve_thread

if TYPE_CHECKING:
    from continuity.retrieval.embedders import Embedder  # a protocol: annotations only

__all__ = ["Embedding", "Hit", "search", "search_prefix"]


@dataclass(frozen=True)
class Embedding:
    """How a fused search may embed what its model's vector cache lacks (ADR 0033)."""

    progress: Callable[[int, int], None] | None = None
    """Hears (documents embedded, documents to embed) while the cache is made or caught up."""
    jobs: int = 1
    """Worker processes embedding (an embedder with a ``spec``: :mod:`.embed_workers`)."""
    budget: int | None = None
    """At most this many documents embedded now (a hook's); the rest caught up by later
    searches. Until every thread in scope is embedded the search ranks by BM25 alone and says
    so (``on_damage``)."""
    first: str | None = None
    """The thread a budget catches up first: the live session."""


_EMBED_NOW: Final = Embedding()

_SNIPPET: Final = 160


# --- snippets -------------------------------------------------------------------------------


def _snippet(text: str, terms: list[str]) -> tuple[str, list[str]]:
    """A window of ``text`` around the first place a query term comes from, and what matched:
    for each query term the text holds (as the index saw it: a stem need not be a substring),
    the first word of the text it stands for, lowercased ("migrations" for ``migrat``)."""
    wanted = {t for t in terms if not t.startswith(SURFACE)}  # found only with their stems
    if not wanted:  # a hit of the semantic ranking alone: its text from the start
        return text[:_SNIPPET] + ("…" if len(text) > _SNIPPET else ""), []
    found: dict[str, str] = {}
    first = -1
    for start, end, tokens in token_spans(text):
        hit = [t for t in tokens if t in wanted and t not in found]
        if hit:
            if first < 0:
                first = start
            found.update(zip(hit, words_of(text[start:end], hit), strict=True))
            if len(found) == len(wanted):
                break
    matched = list(dict.fromkeys(found[t] for t in terms if t in found))
    if not matched:
        return text[:_SNIPPET], []
    start = max(0, first - _SNIPPET // 3)
    piece = text[start : start + _SNIPPET]
    return ("…" if start else "") + piece + ("…" if start + _SNIPPET < len(text) else ""), matched


def _with_snippets(
    threads: dict[str, Thread],
    hits: list[Hit],
    terms: list[str],
    *,
    use_caches: bool = True,
    on_damage: Callable[[str], None] | None = None,
    corpora: tuple[dict[str, Corpus], dict[tuple[str, int], int]] | None = None,
    frames: dict[tuple[str, int], fr.Frame] | None = None,
) -> list[Hit]:
    """``hits`` (of the given threads) with their time, snippet and matched terms (``frames``:
    those already read, by (thread id, seq), through the same offset index). A summary
    hit whose artifact is missing or damaged is told to ``on_damage`` (and kept, its snippet
    made of the checkpoint frame alone), or raises when there is no ``on_damage``. With the
    ``corpora`` the hits were ranked from (by thread) and each hit's document ordinal, each
    hit's indexed document must be the one its frame makes (:class:`CorruptCache` if not: the
    index is damaged)."""
    by_thread, ordinals = corpora if corpora is not None else ({}, {})
    readers: dict[str, Callable[[int], fr.Frame | None]] = {}

    def reader(thread: Thread) -> Callable[[int], fr.Frame | None]:
        if use_caches and ThreadIndex.available(thread):
            index = ThreadIndex(thread)  # straight to the line, no bisection
            return lambda seq: next(index.read(seq, seq), None)
        return lambda seq: next(iter(thread.read(from_seq=seq, to_seq=seq)), None)

    out = []
    gone: dict[str, list[tuple[int, int]]] = {}
    written = as_written(terms)
    for h in hits:
        thread = threads[h.thread_id]
        if h.thread_id not in gone:
            if use_caches:
                ThreadIndex.current(thread)  # up to date, or read from the log (a full disk)
            gone[h.thread_id] = marks_of(thread, use_caches=use_caches).retracted()
        frame = None if frames is None else frames.get((h.thread_id, h.seq))
        if frame is None:
            read = readers.get(h.thread_id)
            if read is None:
                read = readers[h.thread_id] = reader(thread)
            frame = read(h.seq)
        if frame is None:  # the index names a frame the log does not hold
            raise CorruptFrame(
                thread.id, h.seq, -1, "the search index names this frame but the log ends before it"
            )
        summary = summary_text(thread.store, frame)  # read once: the checks and the snippet
        unreadable = isinstance(frame, fr.CompactionCheckpointCreated) and summary is None
        if unreadable:
            assert isinstance(frame, fr.CompactionCheckpointCreated)
            aid = frame.summary_artifact_id
            what = (
                f"thread {thread.id} seq {h.seq}: summary artifact {aid} is missing or damaged; "
                "its text is not searched or shown (run `continuity verify`)"
            )
            if on_damage is None:
                thread.store.artifacts.get(aid)  # raises ArtifactNotFound / ArtifactCorrupt
                raise ArtifactCorrupt(what)
            on_damage(what)
        corpus = by_thread.get(h.thread_id)
        doc = None if unreadable else doc_of(frame, summary)
        if corpus is not None and not unreadable:
            _check_indexed(corpus, ordinals[(h.thread_id, h.seq)], doc, frame.seq, thread, terms)
        # Only the query terms its document holds are looked for in the text: the scan stops
        # once they are all placed instead of reading a long output to its end for the rest.
        held = [t for t in terms if doc is not None and t in doc.tf]
        snippet, matched = _snippet(text_of(frame, summary), held)
        if terms and not matched and not unreadable:
            # The index says this frame holds a query term and the frame (checked against the
            # chain) does not: the index is damaged, not the log.
            raise CorruptCache(thread.id, f"the search index names seq {h.seq} for {terms}")
        out.append(
            msgspec.structs.replace(
                h,
                ts_ms=frame.ts_ms,
                snippet=snippet,
                terms=matched,
                retracted=h.kind == "message" and is_in(gone[h.thread_id], h.seq),
                message_id=frame.message_id if isinstance(frame, fr.MessageAppended) else "",
                exact=any(t in written for t in held),
            )
        )
    return out


class _Pending:
    """What a lazy search defers (issue 44: re-reading, checking and snippeting every ranked
    candidate was most of a query's time, so its cost grew with ``k`` and a fused search
    snippeted BM25's 50): the ranking's corpora, to check and snippet only the hits shown."""

    def __init__(self) -> None:
        self.checks: dict[str, Corpus] = {}
        self.ordinals: dict[tuple[str, int], int] = {}

    def snippets(
        self,
        threads: dict[str, Thread],
        hits: list[Hit],
        terms: list[str],
        on_damage: Callable[[str], None] | None,
        frames: dict[tuple[str, int], fr.Frame],
    ) -> list[Hit]:
        """``hits`` with their snippets: BM25's checked against the corpora they were ranked
        from, the semantic ranking's alone from the start of their text (``frames``: those
        :func:`~.leads.lead` read already)."""
        ranked = [h for h in hits if (h.thread_id, h.seq) in self.ordinals]
        found = [h for h in hits if (h.thread_id, h.seq) not in self.ordinals]
        shown = {
            (h.thread_id, h.seq): h
            for h in _with_snippets(
                {h.thread_id: threads[h.thread_id] for h in ranked},
                ranked,
                terms,
                on_damage=on_damage,
                corpora=(self.checks, self.ordinals),
                frames=frames,
            )
        }
        if found:
            alone = _with_snippets(
                {h.thread_id: threads[h.thread_id] for h in found},
                found,
                [],
                on_damage=on_damage,
                frames=frames,
            )
            shown.update({(h.thread_id, h.seq): h for h in alone})
        return [shown[(h.thread_id, h.seq)] for h in hits]


_LAZY: Final[ContextVar[_Pending | None]] = ContextVar("continuity_lazy_snippets", default=None)


def _shown(
    threads: dict[str, Thread],
    hits: list[Hit],
    terms: list[str],
    on_damage: Callable[[str], None] | None,
    corpora: tuple[dict[str, Corpus], dict[tuple[str, int], int]],
) -> list[Hit]:
    """The ranked ``hits`` with snippets now, or, in a lazy search, as they are (their corpora
    kept to check and snippet the hits shown)."""
    pending = _LAZY.get()
    if pending is None:
        return _with_snippets(threads, hits, terms, on_damage=on_damage, corpora=corpora)
    pending.checks.update(corpora[0])
    pending.ordinals.update(corpora[1])
    return hits


def _check_indexed(
    corpus: Corpus, ordinal: int, doc: Doc | None, seq: int, thread: Thread, terms: list[str]
) -> None:
    """The hit's document as the index holds it (kind, role, length, each query term's count)
    must be ``doc``, the one its frame makes: a flipped posting or length would change its
    score."""
    held = corpus.indexed(ordinal, terms)
    want = None
    if doc is not None:
        counts = {t: min(doc.tf[t], 65535) for t in terms if t in doc.tf}
        want = (doc.kind, doc.role, min(doc.length, 2**32 - 1), counts)
    if held != want:
        raise CorruptCache(thread.id, f"the search index's document for seq {seq} ≠ its frame")


# --- the two entry points -------------------------------------------------------------------


def _threads(
    store: BaseStore,
    thread: str | None,
    project: str | None,
    only: Collection[str] | None = None,
) -> list[Thread]:
    if thread is not None:
        found = store.existing_thread(thread)
        return [found] if only is None or found.id in only else []
    check_no_lost_threads(store)  # a thread whose every frame was cut is an error, not a miss
    chosen = []
    for tid in store.threads():
        if only is not None and tid not in only:
            continue
        handle = store.thread(tid)
        if project is not None:
            first = next(iter(handle.read(to_seq=0)), None)
            stored = first.meta.get("project") if isinstance(first, fr.ThreadCreated) else None
            if not in_project(stored if isinstance(stored, str) else None, project):
                continue
        chosen.append(handle)
    return chosen


def _corpus(thread: Thread) -> Corpus | None:
    """The whole thread as one corpus: what the process holds of its documents, brought up to
    the log's end (through its search index when the store keeps caches, else from the log)."""
    state = search_state(thread)
    return corpus_of_state(state, None) if state is not None and state.n else None


def _agent_threads(store: BaseStore, agent: str) -> frozenset[str]:
    """The threads the agent named ``agent`` wrote (any of its names in
    :mod:`continuity.agents.table`), by their first frame's ``source`` as the store catalog
    knows it: no log is read but those the catalog has no row for. :class:`InvalidQuery` when
    ``agent`` names no agent."""
    from continuity.caches.catalog import thread_sources  # not on a plain search's path

    found = _agent(agent)
    return frozenset(t for t, source in thread_sources(store).items() if source == found.source)


def _thread_sources(store: BaseStore) -> dict[str, str]:
    from continuity.caches.catalog import thread_sources

    return thread_sources(store)


class _StoreModel:
    """The default embedder of :func:`search`: the store's model (``continuity model use``)."""

    def __repr__(self) -> str:
        return "STORE_MODEL"


STORE_MODEL: Final = _StoreModel()
"""``search(..., embedder=STORE_MODEL)`` (the default): fuse the store's model, if it has one."""

_loaded: dict[tuple[str, str | None], Embedder] = {}  # a model is loaded once a process


def _store_model(store: BaseStore) -> Embedder | None:
    from continuity.retrieval.settings import read_search_settings

    settings = read_search_settings(store)
    if not settings.model:
        return None
    key = (settings.model, settings.embedder)
    found = _loaded.get(key)
    if found is None:
        from continuity.retrieval.models import load_model

        found = _loaded[key] = load_model(settings.model, kind=settings.embedder)
    return found


def search(
    store: BaseStore,
    query: str,
    *,
    thread: str | Collection[str] | None = None,
    project: str | None = None,
    agent: str | None = None,
    k: int = 10,
    embedder: Embedder | _StoreModel | None = STORE_MODEL,
    rerank: int = 50,
    on_damage: Callable[[str], None] | None = None,
    progress: Progress | None = None,
    embedding: Embedding = _EMBED_NOW,
) -> list[Hit]:
    """The best ``k`` documents for ``query`` across the store (or one thread, several
    threads — ``thread=["a", "b"]`` — or one project: its folder however written, and its
    subfolders).

    Across the store or a project, a store that keeps caches is searched through its
    store-wide index (:mod:`continuity.retrieval.store_index`, ADR 0029): the postings of the
    query's terms, nothing per thread; ``progress`` hears (threads done, threads to do) while
    that index is built or caught up. The hits are those of ranking every thread's own index.

    A damaged search index is rebuilt and the search goes on. A hit on a checkpoint whose
    summary artifact is missing or damaged raises :class:`ArtifactCorrupt`, or, with
    ``on_damage``, is told to it (once per hit) and shown without the summary.

    Brings each searched thread's index up to date first (incremental). ``embedder`` is by
    default the store's model (:data:`STORE_MODEL`: ``continuity model use``, loaded once a
    process), or one given (:func:`continuity.retrieval.models.load_model`), or None for BM25
    alone. With one, BM25's best ``rerank`` candidates and the embedder's best ``rerank``
    documents by cosine similarity (over a vector cache of every searched document) are fused
    (:func:`~.fusion.fused_order`, ADR 0052): a document no query word matches can be found,
    and no BM25 hit sinks more than one place. Deterministic for a given model; one ranking
    whatever ``k`` is, so a bigger ``k`` only adds hits after the same first ones.
    ``embedding`` says how what the vector cache lacks is embedded (progress, worker
    processes, a budget); until every thread in scope is embedded the hits are BM25's, and
    ``on_damage`` hears so.

    Hits that lead somewhere (ADR 0034): a summary hit's ``covers``, a subagent hit's
    ``parent_thread_id``, and one hit (``also`` the other seqs) for a merged response's parts;
    a message hit's ``message_id``.

    ``agent`` keeps the threads that agent wrote (:func:`_agent_threads`): the store-wide
    index ranks their documents alone, as it does a project's.
    """
    if k <= 0:
        raise InvalidQuery("k must be positive")
    only: frozenset[str] | _Source | None = None
    if agent is not None:
        # a server's store-wide index keeps each thread's source: no thread is listed first
        only = _Source(_agent(agent).source) if _server(store) else _agent_threads(store, agent)
    if thread is not None and not isinstance(thread, str):  # several threads
        chosen = frozenset(store.existing_thread(t).id for t in thread)
        if isinstance(only, _Source):
            only = _only(store, only)
        only = chosen if only is None else chosen & only
        thread = None
    if isinstance(embedder, _StoreModel):
        embedder = _store_model(store)
    fusing = None if embedder is None else (embedder, embedding)
    scope = project_scope(project)  # however its path is written, and its subfolders
    return _search(store, query, thread, scope, only, k, fusing, rerank, on_damage, progress)


class _Source(str):
    """The agent filter as its source, for a backend's store-wide index (ADR 0041)."""


def _agent(agent: str) -> Agent:
    found = agent_named(agent)
    if found is None:
        raise InvalidQuery(f"unknown agent {agent!r}: the agents are {known_agent_names()}")
    return found


def _server(store: BaseStore) -> WideSearchBackend | None:
    """The store's backend index when it answers store-wide queries itself (ADR 0041)."""
    if store.cache_dir is not None:
        return None
    backend = store.search_backend()
    return backend if isinstance(backend, WideSearchBackend) else None


def _only(store: BaseStore, only: frozenset[str] | _Source | None) -> frozenset[str] | None:
    """The threads an agent filter keeps, listed (the paths that rank thread by thread)."""
    if isinstance(only, _Source):
        sources = _thread_sources(store)
        return frozenset(t for t, source in sources.items() if source == str(only))
    return only


def _search(
    store: BaseStore,
    query: str,
    thread: str | None,
    project: str | None,
    only: frozenset[str] | _Source | None,
    k: int,
    fusing: tuple[Embedder, Embedding] | None,
    rerank: int,
    on_damage: Callable[[str], None] | None,
    progress: Progress | None,
    lazy: bool = True,
) -> list[Hit]:
    terms = query_terms(query)
    want = max(candidates(k), rerank if fusing else k)  # room to collapse responses
    told: list[str] = []  # said once, after a retry
    handles: dict[str, Thread] = {}  # one per thread: the ranking's, the snippets' and the leads'
    pending = _Pending() if lazy else None
    token = _LAZY.set(pending)
    try:
        wide = (
            _wide(store, terms, want, (project, only), told, on_damage, progress, handles)
            if thread is None
            else None
        )
        if wide is not None:
            hits = wide
        else:
            listed = _only(store, only)
            hits = _per_thread(
                store, terms, want, thread, project, told, on_damage, handles, listed
            )
        if on_damage is not None:
            for message in dict.fromkeys(told):
                on_damage(message)
        if fusing is not None:
            hits = _fused(
                store, query, fusing, hits, (want, rerank), (thread, project), on_damage, handles
            )
            kept = _only(store, only)
            if kept is not None:  # the semantic ranking knows no agents: its hits are kept after
                hits = [h for h in hits if h.thread_id in kept]
    finally:
        _LAZY.reset(token)
    frames: dict[tuple[str, int], fr.Frame] = {}  # read once: for the leads and the snippets
    led = lead(handles, hits, k, frames)  # one hit per merged response, where each leads (ADR 34)
    if len(led) < k and len(hits) == want:  # parts of responses filled the candidates
        said = set(told)
        return _search(
            store,
            query,
            thread,
            project,
            only,
            2 * want,
            fusing,
            rerank,
            None if on_damage is None else lambda m: None if m in said else on_damage(m),
            progress,
            lazy,
        )[:k]
    if pending is None:
        return led
    late: list[str] = []
    try:
        shown = pending.snippets(handles, led, terms, late.append if on_damage else None, frames)
    except (CorruptCache, *_DAMAGE):
        # A damaged index shows when a hit is checked: the eager path finds and mends it.
        said = set(told)
        return _search(
            store,
            query,
            thread,
            project,
            only,
            k,
            fusing,
            rerank,
            None if on_damage is None else lambda m: None if m in said else on_damage(m),
            progress,
            lazy=False,
        )
    if on_damage is not None:
        for message in dict.fromkeys(late):
            if message not in told:
                on_damage(message)
    return shown


def _wide(
    store: BaseStore,
    terms: list[str],
    want: int,
    scope: tuple[str | None, Collection[str] | _Source | None],
    told: list[str],
    on_damage: Callable[[str], None] | None,
    progress: Progress | None,
    handles: dict[str, Thread],
) -> list[Hit] | None:
    """The hits through the store-wide index, or None when the store keeps none (or it is
    still damaged after a rebuild: then every thread's own index answers)."""

    def handle(tid: str) -> Thread:  # one handle per thread, for the catch-up and the hits
        found = handles.get(tid)
        if found is None:
            found = handles[tid] = store.thread(tid)
        return found

    server = _server(store)
    if server is not None:
        return _server_wide(server, handle, terms, want, scope, told, on_damage, progress)
    view = open_store_search(store, progress, handle)
    if view is None:
        return None
    try:
        return _ranked_wide(handle, view, terms, want, scope, told.append if on_damage else None)
    except (CorruptCache, *_DAMAGE):
        told.clear()
        if rebuild_store_search(store, progress) is None:
            return None
        view = open_store_search(store, progress, handle)
        if view is None:
            return None
        try:
            return _ranked_wide(
                handle, view, terms, want, scope, told.append if on_damage else None
            )
        except (CorruptCache, *_DAMAGE):
            told.clear()
            return None  # the damage is elsewhere (a thread's frame caches): the slow path


def _server_wide(
    server: WideSearchBackend,
    handle: Callable[[str], Thread],
    terms: list[str],
    want: int,
    scope: tuple[str | None, Collection[str] | _Source | None],
    told: list[str],
    on_damage: Callable[[str], None] | None,
    progress: Progress | None,
) -> list[Hit] | None:
    """The hits through the backend's store-wide index (ADR 0041): one query for the runs that
    hold the terms, across every thread of the scope; rebuilt once when damaged. A connection
    that may not write answers from the index as it is and says how far it lags."""
    project, only = scope
    if only is not None and not isinstance(only, _Source):
        return None  # a list of threads: ranked thread by thread
    source = None if only is None else str(only)
    for attempt in (0, 1):
        found = server.search_wide(
            terms, documents_of_lines, project=project, source=source, progress=progress
        )
        if found.lagging_threads:
            told.append(
                f"the search index lags the log: {found.lagging_threads:,} threads "
                f"({found.lagging_frames:,} frames) are not indexed yet and this connection "
                "may not index them (read-only); their hits are missing"
            )
        try:
            corpus = wide_corpus(found, terms)
            if corpus is None:
                return []
            ordinals: dict[tuple[str, int], int] = {}
            hits = rank([corpus], terms, want, frozenset(), ordinals)
            threads = {h.thread_id: handle(h.thread_id) for h in hits}
            checks = dict.fromkeys(threads, corpus)
            return _shown(
                threads, hits, terms, told.append if on_damage else None, (checks, ordinals)
            )
        except (CorruptCache, *_DAMAGE):
            told.clear()
            if attempt or not server.writable():
                return None  # the damage is elsewhere, or cannot be mended here: the slow path
            server.rebuild_search(None, documents_of_lines)
            forget()
    return None


def _ranked_wide(
    handle: Callable[[str], Thread],
    view: StoreSearchView,
    terms: list[str],
    k: int,
    scope: tuple[str | None, Collection[str] | None],
    on_damage: Callable[[str], None] | None,
) -> list[Hit]:
    """The hits of the store-wide index's documents of the threads in ``scope`` (a project,
    a set of threads: None, any)."""
    corpus = view.corpus(*scope)
    if corpus is None:
        return []
    ordinals: dict[tuple[str, int], int] = {}
    hits = rank([corpus], terms, k, frozenset(), ordinals)
    threads = {h.thread_id: handle(h.thread_id) for h in hits}
    checks = dict.fromkeys(threads, corpus)
    return _shown(threads, hits, terms, on_damage, (checks, ordinals))


def _per_thread(
    store: BaseStore,
    terms: list[str],
    want: int,
    thread: str | None,
    project: str | None,
    told: list[str],
    on_damage: Callable[[str], None] | None,
    handles: dict[str, Thread] | None = None,
    only: Collection[str] | None = None,
) -> list[Hit]:
    """The hits of ranking every chosen thread's own index together (the reference the
    store-wide index equals); ``only``: of those threads alone."""
    threads = {t.id: t for t in _threads(store, thread, project, only)}
    if handles is not None:
        handles.update(threads)
    try:
        hits = _ranked(threads, terms, want, told.append if on_damage else None)
    except (CorruptCache, *_DAMAGE):
        # A damaged index is derived data: find the thread(s) it belongs to, rebuild, go on.
        for t in threads.values():
            try:
                _ranked({t.id: t}, terms, want, (lambda _m: None) if on_damage else None)
            except (CorruptCache, *_DAMAGE):
                _rebuild(t)
        told.clear()
        hits = _ranked(threads, terms, want, told.append if on_damage else None)
    return hits


def _rebuild(t: Thread) -> None:
    """Rebuild a thread's search index: its files, or the backend's own (ADR 0026)."""
    backend = t.store.search_backend() if t.store.cache_dir is None else None
    if backend is not None:
        backend.rebuild_search([t], documents_of_lines)
        forget(t)
        return
    ThreadIndex(t).rebuild()
    ThreadSearchIndex(t).rebuild()


def _ranked(
    threads: dict[str, Thread],
    terms: list[str],
    k: int,
    on_damage: Callable[[str], None] | None = None,
) -> list[Hit]:
    corpora = [c for t in threads.values() if (c := _corpus(t)) is not None]
    ordinals: dict[tuple[str, int], int] = {}
    hits = rank(corpora, terms, k, frozenset(), ordinals)
    checks = {c.thread_id: c for c in corpora}
    return _shown(threads, hits, terms, on_damage, (checks, ordinals))


def _fused(
    store: BaseStore,
    query: str,
    fusing: tuple[Embedder, Embedding],
    hits: list[Hit],
    sizes: tuple[int, int],
    scope: tuple[str | None, str | None],
    on_damage: Callable[[str], None] | None,
    handles: dict[str, Thread],
) -> list[Hit]:
    """BM25's hits fused with the embedder's ranking of the same documents
    (:func:`~.fusion.fused_order`, ADR 0052): the first ``want`` of one ranking fused
    ``depth`` deep, whatever ``want`` is (``sizes``: (want, depth)); a hit BM25 did not find
    gets its snippet here (from the start of its text: no query term need be in it)."""
    from continuity.retrieval.fusion import fused_hits

    embedder, how = fusing
    want, depth = sizes
    fused, new = fused_hits(
        store,
        query,
        embedder,
        hits,
        want,
        thread=scope[0],
        project=scope[1],
        depth=depth,
        progress=how.progress,
        jobs=how.jobs,
        budget=how.budget,
        first=how.first or scope[0],
        told=on_damage,
    )
    for h in new:
        if h.thread_id not in handles:
            handles[h.thread_id] = store.thread(h.thread_id)
    if not new or _LAZY.get() is not None:  # a lazy search snippets the hits it shows
        return fused
    threads = {h.thread_id: handles[h.thread_id] for h in new}
    shown = {(h.thread_id, h.seq): h for h in _with_snippets(threads, new, [], on_damage=on_damage)}
    return [shown.get((h.thread_id, h.seq), h) for h in fused]


@overload
def search_prefix(
    target: Thread,
    query: str,
    /,
    *,
    max_seq: int,
    k: int,
    exclude_seqs: Iterable[int] = (),
    use_caches: bool = True,
    embedder: Embedder | None = None,
    budget: int | None = None,
) -> list[Hit]: ...
@overload
def search_prefix(
    target: BaseStore,
    thread_id: str,
    query: str,
    /,
    *,
    max_seq: int,
    k: int,
    exclude_seqs: Iterable[int] = (),
    use_caches: bool = True,
    embedder: Embedder | None = None,
    budget: int | None = None,
) -> list[Hit]: ...
def search_prefix(
    target: BaseStore | Thread,
    /,
    *args: str,
    max_seq: int,
    k: int,
    exclude_seqs: Iterable[int] = (),
    use_caches: bool = True,
    embedder: Embedder | None = None,
    budget: int | None = None,
) -> list[Hit]:
    """The best ``k`` documents of one thread with seq ≤ ``max_seq``, ranked with statistics
    over exactly those documents, with snippets: the result is a function of the log prefix
    alone, through the index or by reading the log (``use_caches=False``, any backend).

    ``search_prefix(thread, query, ...)`` with a thread handle, or
    ``search_prefix(store, thread_id, query, ...)``. With an ``embedder`` the hits are fused
    with its ranking of the same prefix (:func:`~.fusion.fused_prefix`; ``budget``: at most
    that many documents embedded now).
    """
    thread_id: str | None = None
    match target, args:
        case Thread(), (str() as query,):
            pass
        case BaseStore(), (str() as thread_id, str() as query):
            pass
        case _:
            raise TypeError(
                "search_prefix(thread, query, ...) or search_prefix(store, thread_id, query, ...)"
            )
    terms = query_terms(query)
    # Both paths refuse an unknown thread alike (the index alone would just find nothing).
    thread = resolve_thread(target, thread_id)
    if embedder is not None:
        exclude_seqs = frozenset(exclude_seqs)  # read twice
    hits = rank_prefix(
        thread, terms, max_seq=max_seq, k=k, exclude_seqs=exclude_seqs, use_caches=use_caches
    )
    if embedder is not None:
        from continuity.retrieval.fusion import fused_prefix

        hits = fused_prefix(
            thread,
            query,
            embedder,
            hits,
            max_seq=max_seq,
            k=k,
            exclude_seqs=exclude_seqs,
            budget=budget,
        )
    return _with_snippets({thread.id: thread}, hits, terms, use_caches=use_caches)
