"""continuity: an agent conversation that goes on for as long as it needs to, losing nothing.

Each thread is an append-only, hash-chained log of frames (the truth); caches, indexes and
compiled contexts are derived from it. A runtime's loop, with everything it needs from here::

    from continuity import Limits, Store, StrideMessages, compile_context, message
    from continuity import run_compaction, to_anthropic

    store = Store("/path/to/store", create=True)  # or MemoryStore(): nothing on disk
    thread = store.thread("agent-1")               # a handle; the first append creates it
    thread.append(message("user", "The invoice total is off by one. Fix it."))
    while not done:
        result = compile_context(thread, limits=Limits(budget_tokens=8000))  # logged
        request = to_anthropic(result.bundle)      # {"system": ..., "messages": [...]}
        reply = call_your_model(request)
        thread.append(message("assistant", reply))
        run_compaction(thread, StrideMessages(50)) # cumulative summaries: it only adds

What is here, by what it is for (each name's docstring says more):

- **Stores and threads**: :class:`Store` (JSONL files, the embedded default),
  :class:`MemoryStore` (the reference model, nothing on disk), :class:`BaseStore` and
  :class:`Thread` (the interface: ``append``, ``read``, ``tail``, ``head``), :class:`Head`,
  :class:`Recovery`.
- **Frames**: :func:`message` builds a message; its content blocks are :class:`TextBlock`,
  :class:`ThinkingBlock`, :class:`ToolUseBlock`, :class:`ToolResultBlock` and
  :class:`ImageBlock`. Every frame type (:data:`Frame`: :class:`MessageAppended`,
  :class:`ObservationRecorded`, :class:`ContextSelectionDecided`, …) is here too.
- **Compile**: :func:`compile_context` with :class:`Limits` returns a :class:`CompileResult`
  whose ``bundle`` (:class:`ContextBundle`) holds summaries, recall and recent messages; the
  same log prefix and limits give the same bytes. A :class:`Tokenizer` can replace the
  estimate.
- **Render**: :func:`to_anthropic`, :func:`to_openai`, :func:`to_text`, or :func:`render` by
  name.
- **Compaction**: :func:`run_compaction` with a cut rule (:class:`StrideMessages`,
  :class:`TokenThreshold`, :class:`ManualCut`), or :func:`create_checkpoint` for one summary;
  a :class:`Summarizer` (the default is :class:`ExtractiveSummarizer`; an LLM can be one)
  writes :class:`SummaryContent`.
- **Search and recall**: :func:`search` across the store, :func:`search_prefix` within a
  thread's prefix; :class:`Hit`; an :class:`Embedder` (a model2vec ``StaticEmbedder`` from
  :mod:`continuity.retrieval.embedders`) is fused with BM25 by reciprocal rank fusion
  (:class:`HashedEmbedder` is a deterministic toy for tests).
  ``compile_context(..., recall=...)`` brings hits into a bundle.
- **Secret redaction**: a :class:`Redactor` (the built-in :class:`RedactionRule` set, plus
  yours) given as ``Store(path, redactor=Redactor())`` replaces API keys, tokens, private keys
  and passwords in every frame before it is sealed; :func:`load_redactor` reads a config file.
- **Errors**: every one is a :class:`ContinuityError` (the hierarchy is drawn in
  :mod:`continuity.errors`).

Entry points take a thread handle, or a store and a thread id: ``compile_context(thread)`` and
``compile_context(store, "agent-1")`` are the same. The names are imported on first use
(PEP 562, from the table ``_HOMES`` below), so ``import continuity`` costs nothing:
``continuity hook …`` starts through it.

Where things are, bottom layer first (ADRs 0012 and 0035; ``tests/project/test_layers.py``
keeps the arrows pointing down):

- the ground, alone because every layer and the hook path import them and they import nothing
  above: :mod:`~continuity.errors` (every error), :mod:`~continuity.frames` (the schema and
  the chained line codec), :mod:`~continuity.summary` (the summary artifact and the
  summarizer protocols), :mod:`~continuity.tokens` (estimates), :mod:`~continuity.paths` (the
  default store), :mod:`~continuity._fs` (atomic writes), :mod:`~continuity.redaction` (a
  store's redactor, applied before a frame is sealed);
- :mod:`continuity.store` — the truth: the interface, JSONL, memory, PostgreSQL, artifacts;
- :mod:`continuity.caches` — derived data: the thread index, marks, the live projection, the
  catalog;
- :mod:`continuity.retrieval` — everything search (its index and ranking below the context
  layer, for compile's recall; store-wide search, vectors and fusion above it);
- :mod:`continuity.context` — what the model sees: compile, render, convert, compaction;
- :mod:`continuity.maintenance` — work on a whole store: verify, rebuild-index, stats, migrate;
- :mod:`continuity.agents.claude_code` — the Claude Code adapter; :mod:`continuity.testing` — the
  contract suites any backend runs; :mod:`continuity.viewer` — ``continuity serve``;
- the faces: :mod:`continuity.cli`, :mod:`continuity.__main__` (the hook and search fast
  paths) and :mod:`~continuity.aio`, alone as the one async face of the whole library;
- :mod:`continuity.integrations` — LangGraph and the Agents SDK (optional extras).
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # not typing's: `import continuity` (and every hook) skips typing, 2 ms

# What type checkers and editors read: each public name re-exported as itself. The run time
# serves the same names from ``_HOMES`` below; a test keeps the two equal.
if TYPE_CHECKING:
    from continuity._version import __version__ as __version__
    from continuity.aio import AsyncStore as AsyncStore, AsyncThread as AsyncThread
    from continuity.context.bundle import (
        ContextBundle as ContextBundle,
        ElidedBlock as ElidedBlock,
        MessageItem as MessageItem,
        RecallItem as RecallItem,
        SummaryItem as SummaryItem,
        ToolStubBlock as ToolStubBlock,
    )
    from continuity.context.compaction import (
        CompactionResult as CompactionResult,
        CutRule as CutRule,
        ManualCut as ManualCut,
        StrideMessages as StrideMessages,
        TokenThreshold as TokenThreshold,
        create_checkpoint as create_checkpoint,
        run_compaction as run_compaction,
    )
    from continuity.context.compiler import (
        CompileResult as CompileResult,
        compile_context as compile_context,
    )
    from continuity.context.convert import (
        from_anthropic as from_anthropic,
        from_openai as from_openai,
        from_openai_responses as from_openai_responses,
    )
    from continuity.context.fork import fork as fork, fork_point as fork_point
    from continuity.context.records import (
        Record as Record,
        RecordView as RecordView,
        latest_record as latest_record,
        record as record,
        record_view as record_view,
        records as records,
    )
    from continuity.context.render import (
        render as render,
        to_anthropic as to_anthropic,
        to_openai as to_openai,
        to_openai_responses as to_openai_responses,
        to_text as to_text,
    )
    from continuity.context.retract import (
        clear_messages as clear_messages,
        live_messages as live_messages,
        pop_message as pop_message,
        retract as retract,
        retracted_spans as retracted_spans,
    )
    from continuity.context.summarize import ExtractiveSummarizer as ExtractiveSummarizer
    from continuity.errors import (
        AnchorNotFound as AnchorNotFound,
        ArtifactCorrupt as ArtifactCorrupt,
        ArtifactNotFound as ArtifactNotFound,
        BadFrame as BadFrame,
        CachesReadOnly as CachesReadOnly,
        CommandInterrupted as CommandInterrupted,
        CommandRefused as CommandRefused,
        ContextTooSmall as ContextTooSmall,
        ContinuityError as ContinuityError,
        CorruptCache as CorruptCache,
        CorruptFrame as CorruptFrame,
        DemoError as DemoError,
        InvalidCutRule as InvalidCutRule,
        InvalidLimits as InvalidLimits,
        InvalidQuery as InvalidQuery,
        InvalidSettings as InvalidSettings,
        InvalidThreadId as InvalidThreadId,
        JobInFlight as JobInFlight,
        MessageNotFound as MessageNotFound,
        MigrationConflict as MigrationConflict,
        MissingExtra as MissingExtra,
        ModelError as ModelError,
        SchemaTooNew as SchemaTooNew,
        SeqConflict as SeqConflict,
        StoreBusy as StoreBusy,
        StoreNotFound as StoreNotFound,
        StoreRefused as StoreRefused,
        StoreUnavailable as StoreUnavailable,
        ThreadDeleted as ThreadDeleted,
        ThreadKeyTaken as ThreadKeyTaken,
        ThreadNotFound as ThreadNotFound,
        UnknownName as UnknownName,
        UnreadableSession as UnreadableSession,
    )
    from continuity.frames import (
        CheckpointRef as CheckpointRef,
        CompactionCheckpointCreated as CompactionCheckpointCreated,
        ContentBlock as ContentBlock,
        ContextSelectionDecided as ContextSelectionDecided,
        ContextSelectionRepeated as ContextSelectionRepeated,
        ForkPoint as ForkPoint,
        Frame as Frame,
        ImageBlock as ImageBlock,
        JobEnded as JobEnded,
        JobSpawned as JobSpawned,
        Limits as Limits,
        MessageAppended as MessageAppended,
        MessagesRetracted as MessagesRetracted,
        ObservationRecorded as ObservationRecorded,
        ProviderBlock as ProviderBlock,
        RecallRef as RecallRef,
        RecordAppended as RecordAppended,
        Role as Role,
        SeqSpan as SeqSpan,
        SourceRef as SourceRef,
        TextBlock as TextBlock,
        ThinkingBlock as ThinkingBlock,
        ThreadCreated as ThreadCreated,
        ToolResultBlock as ToolResultBlock,
        ToolUseBlock as ToolUseBlock,
        message as message,
    )
    from continuity.maintenance.migrate import (
        MigrationReport as MigrationReport,
        ThreadCopy as ThreadCopy,
        migrate_store as migrate_store,
    )
    from continuity.redaction import (
        RedactionRule as RedactionRule,
        Redactor as Redactor,
        load_redactor as load_redactor,
    )
    from continuity.retrieval.embedders import (
        Embedder as Embedder,
        HashedEmbedder as HashedEmbedder,
        QueryEmbedder as QueryEmbedder,
        StaticEmbedder as StaticEmbedder,
        embed_queries as embed_queries,
    )
    from continuity.retrieval.search import (
        Embedding as Embedding,
        Hit as Hit,
        search as search,
        search_prefix as search_prefix,
    )
    from continuity.store.base import (
        BaseStore as BaseStore,
        DeletionReport as DeletionReport,
        Head as Head,
        Recovery as Recovery,
        Thread as Thread,
        Tombstone as Tombstone,
    )
    from continuity.store.jsonl import Store as Store
    from continuity.store.locate import open_store as open_store
    from continuity.store.memory import MemoryStore as MemoryStore
    from continuity.store.postgres import PostgresStore as PostgresStore
    from continuity.summary import (
        AsyncSummarizer as AsyncSummarizer,
        Summarizer as Summarizer,
        SummaryContent as SummaryContent,
        SummaryDoc as SummaryDoc,
    )
    from continuity.tokens import Tokenizer as Tokenizer

if TYPE_CHECKING:  # apart from the block above, which is the public API
    from typing import Any, Final

# Each public name and the module it is imported from on first use (PEP 562). A literal, so
# that serving a name reads no source: ``import continuity`` stays free.
_HOMES: Final[dict[str, str]] = {
    "AsyncStore": "continuity.aio",
    "AsyncThread": "continuity.aio",
    "ContextBundle": "continuity.context.bundle",
    "ElidedBlock": "continuity.context.bundle",
    "MessageItem": "continuity.context.bundle",
    "RecallItem": "continuity.context.bundle",
    "SummaryItem": "continuity.context.bundle",
    "ToolStubBlock": "continuity.context.bundle",
    "CompactionResult": "continuity.context.compaction",
    "CutRule": "continuity.context.compaction",
    "ManualCut": "continuity.context.compaction",
    "StrideMessages": "continuity.context.compaction",
    "TokenThreshold": "continuity.context.compaction",
    "create_checkpoint": "continuity.context.compaction",
    "run_compaction": "continuity.context.compaction",
    "CompileResult": "continuity.context.compiler",
    "compile_context": "continuity.context.compiler",
    "from_anthropic": "continuity.context.convert",
    "from_openai": "continuity.context.convert",
    "from_openai_responses": "continuity.context.convert",
    "fork": "continuity.context.fork",
    "fork_point": "continuity.context.fork",
    "Record": "continuity.context.records",
    "RecordView": "continuity.context.records",
    "latest_record": "continuity.context.records",
    "record": "continuity.context.records",
    "record_view": "continuity.context.records",
    "records": "continuity.context.records",
    "render": "continuity.context.render",
    "to_anthropic": "continuity.context.render",
    "to_openai": "continuity.context.render",
    "to_openai_responses": "continuity.context.render",
    "to_text": "continuity.context.render",
    "clear_messages": "continuity.context.retract",
    "live_messages": "continuity.context.retract",
    "pop_message": "continuity.context.retract",
    "retract": "continuity.context.retract",
    "retracted_spans": "continuity.context.retract",
    "ExtractiveSummarizer": "continuity.context.summarize",
    "AnchorNotFound": "continuity.errors",
    "ArtifactCorrupt": "continuity.errors",
    "ArtifactNotFound": "continuity.errors",
    "BadFrame": "continuity.errors",
    "CachesReadOnly": "continuity.errors",
    "CommandInterrupted": "continuity.errors",
    "CommandRefused": "continuity.errors",
    "ContextTooSmall": "continuity.errors",
    "ContinuityError": "continuity.errors",
    "CorruptCache": "continuity.errors",
    "CorruptFrame": "continuity.errors",
    "DemoError": "continuity.errors",
    "InvalidCutRule": "continuity.errors",
    "InvalidLimits": "continuity.errors",
    "InvalidQuery": "continuity.errors",
    "InvalidSettings": "continuity.errors",
    "InvalidThreadId": "continuity.errors",
    "JobInFlight": "continuity.errors",
    "MessageNotFound": "continuity.errors",
    "MigrationConflict": "continuity.errors",
    "MissingExtra": "continuity.errors",
    "ModelError": "continuity.errors",
    "SchemaTooNew": "continuity.errors",
    "SeqConflict": "continuity.errors",
    "StoreBusy": "continuity.errors",
    "StoreNotFound": "continuity.errors",
    "StoreRefused": "continuity.errors",
    "StoreUnavailable": "continuity.errors",
    "ThreadDeleted": "continuity.errors",
    "ThreadKeyTaken": "continuity.errors",
    "ThreadNotFound": "continuity.errors",
    "UnknownName": "continuity.errors",
    "UnreadableSession": "continuity.errors",
    "CheckpointRef": "continuity.frames",
    "CompactionCheckpointCreated": "continuity.frames",
    "ContentBlock": "continuity.frames",
    "ContextSelectionDecided": "continuity.frames",
    "ContextSelectionRepeated": "continuity.frames",
    "ForkPoint": "continuity.frames",
    "Frame": "continuity.frames",
    "ImageBlock": "continuity.frames",
    "JobEnded": "continuity.frames",
    "JobSpawned": "continuity.frames",
    "Limits": "continuity.frames",
    "MessageAppended": "continuity.frames",
    "MessagesRetracted": "continuity.frames",
    "ObservationRecorded": "continuity.frames",
    "ProviderBlock": "continuity.frames",
    "RecallRef": "continuity.frames",
    "RecordAppended": "continuity.frames",
    "Role": "continuity.frames",
    "SeqSpan": "continuity.frames",
    "SourceRef": "continuity.frames",
    "TextBlock": "continuity.frames",
    "ThinkingBlock": "continuity.frames",
    "ThreadCreated": "continuity.frames",
    "ToolResultBlock": "continuity.frames",
    "ToolUseBlock": "continuity.frames",
    "message": "continuity.frames",
    "MigrationReport": "continuity.maintenance.migrate",
    "ThreadCopy": "continuity.maintenance.migrate",
    "migrate_store": "continuity.maintenance.migrate",
    "RedactionRule": "continuity.redaction",
    "Redactor": "continuity.redaction",
    "load_redactor": "continuity.redaction",
    "Embedder": "continuity.retrieval.embedders",
    "HashedEmbedder": "continuity.retrieval.embedders",
    "QueryEmbedder": "continuity.retrieval.embedders",
    "StaticEmbedder": "continuity.retrieval.embedders",
    "embed_queries": "continuity.retrieval.embedders",
    "Embedding": "continuity.retrieval.search",
    "Hit": "continuity.retrieval.search",
    "search": "continuity.retrieval.search",
    "search_prefix": "continuity.retrieval.search",
    "BaseStore": "continuity.store.base",
    "DeletionReport": "continuity.store.base",
    "Head": "continuity.store.base",
    "Recovery": "continuity.store.base",
    "Thread": "continuity.store.base",
    "Tombstone": "continuity.store.base",
    "Store": "continuity.store.jsonl",
    "open_store": "continuity.store.locate",
    "MemoryStore": "continuity.store.memory",
    "PostgresStore": "continuity.store.postgres",
    "AsyncSummarizer": "continuity.summary",
    "Summarizer": "continuity.summary",
    "SummaryContent": "continuity.summary",
    "SummaryDoc": "continuity.summary",
    "Tokenizer": "continuity.tokens",
    # the version lives where pyproject reads it
    "__version__": "continuity._version",
}


def __getattr__(name: str) -> Any:
    if name == "__all__":  # ``from continuity import *``
        return __dir__()
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'continuity' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(_HOMES)
