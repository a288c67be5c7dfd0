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
  :mod:`continuity.embedding`) is fused with BM25 by reciprocal rank fusion
  (:class:`HashedEmbedder` is a deterministic toy for tests).
  ``compile_context(..., recall=...)`` brings hits into a bundle.
- **Secret redaction**: a :class:`Redactor` (the built-in :class:`RedactionRule` set, plus
  yours) given as ``Store(path, redactor=Redactor())`` replaces API keys, tokens, private keys
  and passwords in every frame before it is sealed; :func:`load_redactor` reads a config file.
- **Errors**: every one is a :class:`ContinuityError` (the hierarchy is drawn in
  :mod:`continuity.errors`).

Entry points take a thread handle, or a store and a thread id: ``compile_context(thread)`` and
``compile_context(store, "agent-1")`` are the same. The names are imported on first use
(PEP 562), so ``import continuity`` costs nothing: ``continuity hook …`` starts through it.
Backends and their contract suites are in :mod:`continuity.store` and :mod:`continuity.testing`;
the Claude Code adapter is :mod:`continuity.claude_code`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from continuity.aio import (
        AsyncStore,
        AsyncThread,
    )
    from continuity.context.bundle import (
        ContextBundle,
        ElidedBlock,
        MessageItem,
        RecallItem,
        SummaryItem,
        ToolStubBlock,
    )
    from continuity.context.compaction import (
        CompactionResult,
        CutRule,
        ManualCut,
        StrideMessages,
        TokenThreshold,
        create_checkpoint,
        run_compaction,
    )
    from continuity.context.compiler import CompileResult, compile_context
    from continuity.context.convert import (
        from_anthropic,
        from_openai,
        from_openai_responses,
    )
    from continuity.context.fork import (
        fork,
        fork_point,
    )
    from continuity.context.records import (
        Record,
        RecordView,
        latest_record,
        record,
        record_view,
        records,
    )
    from continuity.context.render import (
        render,
        to_anthropic,
        to_openai,
        to_openai_responses,
        to_text,
    )
    from continuity.context.retract import (
        clear_messages,
        live_messages,
        pop_message,
        retract,
        retracted_spans,
    )
    from continuity.context.summarize import ExtractiveSummarizer
    from continuity.embedding import (
        StaticEmbedder,
    )
    from continuity.errors import (
        AnchorNotFound,
        ArtifactCorrupt,
        ArtifactNotFound,
        BadFrame,
        CachesReadOnly,
        ContextTooSmall,
        ContinuityError,
        CorruptCache,
        CorruptFrame,
        DemoError,
        InvalidCutRule,
        InvalidLimits,
        InvalidQuery,
        InvalidSettings,
        InvalidThreadId,
        JobInFlight,
        MessageNotFound,
        MigrationConflict,
        ModelError,
        SchemaTooNew,
        SeqConflict,
        StoreNotFound,
        StoreUnavailable,
        ThreadNotFound,
    )
    from continuity.frames import (
        CheckpointRef,
        CompactionCheckpointCreated,
        ContentBlock,
        ContextSelectionDecided,
        ContextSelectionRepeated,
        ForkPoint,
        Frame,
        ImageBlock,
        JobEnded,
        JobSpawned,
        Limits,
        MessageAppended,
        MessagesRetracted,
        ObservationRecorded,
        ProviderBlock,
        RecallRef,
        RecordAppended,
        Role,
        SeqSpan,
        SourceRef,
        TextBlock,
        ThinkingBlock,
        ThreadCreated,
        ToolResultBlock,
        ToolUseBlock,
        message,
    )
    from continuity.migrate import (
        MigrationReport,
        ThreadCopy,
        migrate_store,
    )
    from continuity.redaction import RedactionRule, Redactor, load_redactor
    from continuity.retrieval import Embedder, HashedEmbedder, Hit, search, search_prefix
    from continuity.store.base import BaseStore, Head, Recovery, Thread
    from continuity.store.jsonl import Store
    from continuity.store.locate import (
        open_store,
    )
    from continuity.store.memory import MemoryStore
    from continuity.store.postgres import (
        PostgresStore,
    )
    from continuity.summary import (
        AsyncSummarizer,
        Summarizer,
        SummaryContent,
        SummaryDoc,
    )
    from continuity.tokens import Tokenizer

__version__ = "0.1.0"

_HOMES: Final = {
    # stores and threads
    "BaseStore": "continuity.store.base",
    "Head": "continuity.store.base",
    "MemoryStore": "continuity.store.memory",
    "Recovery": "continuity.store.base",
    "Store": "continuity.store.jsonl",
    "Thread": "continuity.store.base",
    # frames and content blocks
    "CheckpointRef": "continuity.frames",
    "CompactionCheckpointCreated": "continuity.frames",
    "ContentBlock": "continuity.frames",
    "ContextSelectionDecided": "continuity.frames",
    "Frame": "continuity.frames",
    "ImageBlock": "continuity.frames",
    "JobEnded": "continuity.frames",
    "JobSpawned": "continuity.frames",
    "Limits": "continuity.frames",
    "MessageAppended": "continuity.frames",
    "ObservationRecorded": "continuity.frames",
    "RecallRef": "continuity.frames",
    "Role": "continuity.frames",
    "SourceRef": "continuity.frames",
    "TextBlock": "continuity.frames",
    "ThinkingBlock": "continuity.frames",
    "ThreadCreated": "continuity.frames",
    "ToolResultBlock": "continuity.frames",
    "ToolUseBlock": "continuity.frames",
    "message": "continuity.frames",
    # compile and the bundle
    "CompileResult": "continuity.context.compiler",
    "ContextBundle": "continuity.context.bundle",
    "MessageItem": "continuity.context.bundle",
    "RecallItem": "continuity.context.bundle",
    "SummaryItem": "continuity.context.bundle",
    "Tokenizer": "continuity.tokens",
    "ElidedBlock": "continuity.context.bundle",
    "ToolStubBlock": "continuity.context.bundle",
    "compile_context": "continuity.context.compiler",
    # rendering
    "render": "continuity.context.render",
    "to_anthropic": "continuity.context.render",
    "to_openai": "continuity.context.render",
    "to_text": "continuity.context.render",
    # compaction and summaries
    "CompactionResult": "continuity.context.compaction",
    "CutRule": "continuity.context.compaction",
    "ExtractiveSummarizer": "continuity.context.summarize",
    "ManualCut": "continuity.context.compaction",
    "StrideMessages": "continuity.context.compaction",
    "Summarizer": "continuity.summary",
    "SummaryContent": "continuity.summary",
    "SummaryDoc": "continuity.summary",
    "TokenThreshold": "continuity.context.compaction",
    "create_checkpoint": "continuity.context.compaction",
    "run_compaction": "continuity.context.compaction",
    # search and recall
    "Embedder": "continuity.retrieval",
    "HashedEmbedder": "continuity.retrieval",
    "Hit": "continuity.retrieval",
    "search": "continuity.retrieval",
    "search_prefix": "continuity.retrieval",
    # secret redaction
    "RedactionRule": "continuity.redaction",
    "Redactor": "continuity.redaction",
    "load_redactor": "continuity.redaction",
    # errors
    "AnchorNotFound": "continuity.errors",
    "ArtifactCorrupt": "continuity.errors",
    "ArtifactNotFound": "continuity.errors",
    "BadFrame": "continuity.errors",
    "CachesReadOnly": "continuity.errors",
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
    "SeqConflict": "continuity.errors",
    "StoreNotFound": "continuity.errors",
    "ThreadNotFound": "continuity.errors",
    "ContextSelectionRepeated": "continuity.frames",
    "ForkPoint": "continuity.frames",
    "MessagesRetracted": "continuity.frames",
    "ProviderBlock": "continuity.frames",
    "RecordAppended": "continuity.frames",
    "SeqSpan": "continuity.frames",
    "ContextTooSmall": "continuity.errors",
    "fork": "continuity.context.fork",
    "fork_point": "continuity.context.fork",
    "MessageNotFound": "continuity.errors",
    "Record": "continuity.context.records",
    "latest_record": "continuity.context.records",
    "record": "continuity.context.records",
    "records": "continuity.context.records",
    "clear_messages": "continuity.context.retract",
    "live_messages": "continuity.context.retract",
    "pop_message": "continuity.context.retract",
    "retract": "continuity.context.retract",
    "retracted_spans": "continuity.context.retract",
    "AsyncSummarizer": "continuity.summary",
    "from_anthropic": "continuity.context.convert",
    "from_openai": "continuity.context.convert",
    "from_openai_responses": "continuity.context.convert",
    "to_openai_responses": "continuity.context.render",
    "AsyncStore": "continuity.aio",
    "AsyncThread": "continuity.aio",
    "RecordView": "continuity.context.records",
    "record_view": "continuity.context.records",
    "SchemaTooNew": "continuity.errors",
    "StoreUnavailable": "continuity.errors",
    "MigrationConflict": "continuity.errors",
    "migrate_store": "continuity.migrate",
    "MigrationReport": "continuity.migrate",
    "ThreadCopy": "continuity.migrate",
    "open_store": "continuity.store.locate",
    "PostgresStore": "continuity.store.postgres",
    "ModelError": "continuity.errors",
    "StaticEmbedder": "continuity.embedding",
}

__all__ = [
    "AnchorNotFound",
    "ArtifactCorrupt",
    "ArtifactNotFound",
    "AsyncStore",
    "AsyncSummarizer",
    "AsyncThread",
    "BadFrame",
    "BaseStore",
    "CachesReadOnly",
    "CheckpointRef",
    "CompactionCheckpointCreated",
    "CompactionResult",
    "CompileResult",
    "ContentBlock",
    "ContextBundle",
    "ContextSelectionDecided",
    "ContextSelectionRepeated",
    "ContextTooSmall",
    "ContinuityError",
    "CorruptCache",
    "CorruptFrame",
    "CutRule",
    "DemoError",
    "ElidedBlock",
    "Embedder",
    "ExtractiveSummarizer",
    "ForkPoint",
    "Frame",
    "HashedEmbedder",
    "Head",
    "Hit",
    "ImageBlock",
    "InvalidCutRule",
    "InvalidLimits",
    "InvalidQuery",
    "InvalidSettings",
    "InvalidThreadId",
    "JobEnded",
    "JobInFlight",
    "JobSpawned",
    "Limits",
    "ManualCut",
    "MemoryStore",
    "MessageAppended",
    "MessageItem",
    "MessageNotFound",
    "MessagesRetracted",
    "MigrationConflict",
    "MigrationReport",
    "ModelError",
    "ObservationRecorded",
    "PostgresStore",
    "ProviderBlock",
    "RecallItem",
    "RecallRef",
    "Record",
    "RecordAppended",
    "RecordView",
    "Recovery",
    "RedactionRule",
    "Redactor",
    "Role",
    "SchemaTooNew",
    "SeqConflict",
    "SeqSpan",
    "SourceRef",
    "StaticEmbedder",
    "Store",
    "StoreNotFound",
    "StoreUnavailable",
    "StrideMessages",
    "Summarizer",
    "SummaryContent",
    "SummaryDoc",
    "SummaryItem",
    "TextBlock",
    "ThinkingBlock",
    "Thread",
    "ThreadCopy",
    "ThreadCreated",
    "ThreadNotFound",
    "TokenThreshold",
    "Tokenizer",
    "ToolResultBlock",
    "ToolStubBlock",
    "ToolUseBlock",
    "__version__",
    "clear_messages",
    "compile_context",
    "create_checkpoint",
    "fork",
    "fork_point",
    "from_anthropic",
    "from_openai",
    "from_openai_responses",
    "latest_record",
    "live_messages",
    "load_redactor",
    "message",
    "migrate_store",
    "open_store",
    "pop_message",
    "record",
    "record_view",
    "records",
    "render",
    "retract",
    "retracted_spans",
    "run_compaction",
    "search",
    "search_prefix",
    "to_anthropic",
    "to_openai",
    "to_openai_responses",
    "to_text",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'continuity' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
