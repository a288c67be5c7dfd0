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

**What is at the root** (ADR 0048): the names a runtime's own code writes down in that loop —
what it opens, builds, calls, passes, implements or catches to keep a conversation, compile
it, send it to a model and take the reply back, compact it and search it, and the types those
calls return. A name it only meets inside what it gets back (a frame type other than the
message, a bundle's items, a store's reports), a name of a job beside the loop (undo, forks,
a runtime's own records, migration, the async face, embedding models) and every lower-level
tool are imported from their modules, named below; ``help()`` on a module lists them. By
what they are for:

- **Stores and threads**: :class:`Store` (JSONL files, the embedded default),
  :class:`MemoryStore` (the reference model, nothing on disk), :class:`PostgresStore`, or
  :func:`open_store` for a folder or a ``postgresql://`` URL; :class:`BaseStore` and
  :class:`Thread` are the interface (``append``, ``read``, ``tail``, ``head``). What a store
  reports back (``Head``, ``Recovery``, ``DeletionReport``) is in :mod:`continuity.store.base`.
- **Messages**: :func:`message` builds a :class:`MessageAppended` frame; its content blocks
  are :class:`TextBlock`, :class:`ThinkingBlock`, :class:`ToolUseBlock`,
  :class:`ToolResultBlock`, :class:`ImageBlock` and :class:`ProviderBlock` (a provider's own
  block, kept whole). Every other frame type (``ObservationRecorded``,
  ``ContextSelectionDecided``, …) and the log's codec are in :mod:`continuity.frames`.
- **Compile**: :func:`compile_context` with :class:`Limits` returns a :class:`CompileResult`
  whose ``bundle`` (:class:`ContextBundle`) holds summaries, recall and recent messages; the
  same log prefix and limits give the same bytes. A :class:`Tokenizer` can replace the
  estimate. The bundle's items are in :mod:`continuity.context.bundle`.
- **To and from a model**: :func:`to_anthropic`, :func:`to_openai`,
  :func:`to_openai_responses`, :func:`to_text`, or :func:`render` by name; a request or reply
  in a provider's shape becomes frames with :func:`from_anthropic`, :func:`from_openai` and
  :func:`from_openai_responses`.
- **Compaction**: :func:`run_compaction` with a cut rule (:class:`StrideMessages`,
  :class:`TokenThreshold`, :class:`ManualCut`) returns a :class:`CompactionResult`, or
  :func:`create_checkpoint` for one summary; a :class:`Summarizer` (the default is
  :class:`ExtractiveSummarizer`; an LLM can be one) reads a :class:`SummaryDoc` and writes
  :class:`SummaryContent`.
- **Search and recall**: :func:`search` across the store, :func:`search_prefix` within a
  thread's prefix; :class:`Hit`; an :class:`Embedder` (a model2vec ``StaticEmbedder`` from
  :mod:`continuity.retrieval.embedders`) is fused with BM25 by reciprocal rank fusion.
  ``compile_context(..., recall=...)`` brings hits into a bundle.
- **Secret redaction**: a :class:`Redactor` (the built-in :class:`RedactionRule` set, plus
  yours) given as ``Store(path, redactor=Redactor())`` replaces API keys, tokens, private keys
  and passwords in every frame before it is sealed; :func:`load_redactor` reads a config file.
- **Errors**: every one is a :class:`ContinuityError`. At the root are those a runtime catches
  to recover and go on: the store is not there or not reachable (:class:`StoreNotFound`,
  :class:`StoreUnavailable`, :class:`MissingExtra`), a thread id or thread it named
  (:class:`InvalidThreadId`, :class:`ThreadNotFound`), another writer came first
  (:class:`SeqConflict`), input from outside that is not valid (:class:`BadFrame`,
  :class:`InvalidQuery`), a compile that cannot be honoured (:class:`AnchorNotFound`,
  :class:`ContextTooSmall`), a compaction already running (:class:`JobInFlight`). The others
  (damage, maintenance, the other faces) and the hierarchy are in :mod:`continuity.errors`.
- **Beside the loop**, each in its module: undo (:mod:`continuity.context.retract`), a
  runtime's own records (:mod:`continuity.context.records`), forks
  (:mod:`continuity.context.fork`), asyncio (:mod:`continuity.aio`, the same entry points as
  coroutines), moving a store (:mod:`continuity.maintenance.migrate`).

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
  store's redactor, applied before a frame is sealed), :mod:`~continuity.agents.table` (the
  coding agents and their thread ids) and :mod:`~continuity.registry` (what is found by name);
- :mod:`continuity.store` — the truth: the interface, JSONL, memory, PostgreSQL, artifacts;
- :mod:`continuity.caches` — derived data: the thread index, marks, the live projection, the
  catalog;
- :mod:`continuity.retrieval` — everything search (its index and ranking below the context
  layer, for compile's recall; store-wide search, vectors and fusion above it);
- :mod:`continuity.context` — what the model sees: compile, render, convert, compaction;
- :mod:`continuity.maintenance` — work on a whole store: verify, rebuild-index, stats, migrate;
- :mod:`continuity.agents` — the coding agents' wing: :mod:`continuity.agents.base`, the
  foundation every adapter builds on (reading a session's lines, cursors, install, restore,
  the hook runner), then one package per agent (:mod:`continuity.agents.claude_code`,
  ``codex``, ``gemini``, ``opencode``), none importing another;
- :mod:`continuity.demo` — ``continuity demo``, a scripted Claude Code session replayed
  through the hooks; :mod:`continuity.testing` — the contract suites any backend runs;
  :mod:`continuity.viewer` — ``continuity serve``; :mod:`continuity.mcp_server` —
  ``continuity mcp``;
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
    from continuity.context.bundle import ContextBundle as ContextBundle
    from continuity.context.compaction import (
        CompactionResult as CompactionResult,
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
    from continuity.context.render import (
        render as render,
        to_anthropic as to_anthropic,
        to_openai as to_openai,
        to_openai_responses as to_openai_responses,
        to_text as to_text,
    )
    from continuity.context.summarize import ExtractiveSummarizer as ExtractiveSummarizer
    from continuity.errors import (
        AnchorNotFound as AnchorNotFound,
        BadFrame as BadFrame,
        ContextTooSmall as ContextTooSmall,
        ContinuityError as ContinuityError,
        InvalidQuery as InvalidQuery,
        InvalidThreadId as InvalidThreadId,
        JobInFlight as JobInFlight,
        MissingExtra as MissingExtra,
        SeqConflict as SeqConflict,
        StoreNotFound as StoreNotFound,
        StoreUnavailable as StoreUnavailable,
        ThreadNotFound as ThreadNotFound,
    )
    from continuity.frames import (
        ImageBlock as ImageBlock,
        Limits as Limits,
        MessageAppended as MessageAppended,
        ProviderBlock as ProviderBlock,
        TextBlock as TextBlock,
        ThinkingBlock as ThinkingBlock,
        ToolResultBlock as ToolResultBlock,
        ToolUseBlock as ToolUseBlock,
        message as message,
    )
    from continuity.redaction import (
        RedactionRule as RedactionRule,
        Redactor as Redactor,
        load_redactor as load_redactor,
    )
    from continuity.retrieval.embedders import Embedder as Embedder
    from continuity.retrieval.search import (
        Hit as Hit,
        search as search,
        search_prefix as search_prefix,
    )
    from continuity.store.base import BaseStore as BaseStore, Thread as Thread
    from continuity.store.jsonl import Store as Store
    from continuity.store.locate import open_store as open_store
    from continuity.store.memory import MemoryStore as MemoryStore
    from continuity.store.postgres import PostgresStore as PostgresStore
    from continuity.summary import (
        Summarizer as Summarizer,
        SummaryContent as SummaryContent,
        SummaryDoc as SummaryDoc,
    )
    from continuity.tokens import Tokenizer as Tokenizer

if TYPE_CHECKING:  # apart from the block above, which is the public API
    from typing import Any, Final

# Each public name and the module it is imported from on first use (PEP 562), by what it is
# for. A literal, so that serving a name reads no source: ``import continuity`` stays free.
_HOMES: Final[dict[str, str]] = {
    # stores and threads
    "Store": "continuity.store.jsonl",
    "MemoryStore": "continuity.store.memory",
    "PostgresStore": "continuity.store.postgres",
    "open_store": "continuity.store.locate",
    "BaseStore": "continuity.store.base",
    "Thread": "continuity.store.base",
    # messages
    "message": "continuity.frames",
    "MessageAppended": "continuity.frames",
    "TextBlock": "continuity.frames",
    "ThinkingBlock": "continuity.frames",
    "ToolUseBlock": "continuity.frames",
    "ToolResultBlock": "continuity.frames",
    "ImageBlock": "continuity.frames",
    "ProviderBlock": "continuity.frames",
    # compile
    "compile_context": "continuity.context.compiler",
    "CompileResult": "continuity.context.compiler",
    "Limits": "continuity.frames",
    "ContextBundle": "continuity.context.bundle",
    "Tokenizer": "continuity.tokens",
    # to and from a model
    "render": "continuity.context.render",
    "to_anthropic": "continuity.context.render",
    "to_openai": "continuity.context.render",
    "to_openai_responses": "continuity.context.render",
    "to_text": "continuity.context.render",
    "from_anthropic": "continuity.context.convert",
    "from_openai": "continuity.context.convert",
    "from_openai_responses": "continuity.context.convert",
    # compaction
    "run_compaction": "continuity.context.compaction",
    "create_checkpoint": "continuity.context.compaction",
    "StrideMessages": "continuity.context.compaction",
    "TokenThreshold": "continuity.context.compaction",
    "ManualCut": "continuity.context.compaction",
    "CompactionResult": "continuity.context.compaction",
    "Summarizer": "continuity.summary",
    "ExtractiveSummarizer": "continuity.context.summarize",
    "SummaryDoc": "continuity.summary",
    "SummaryContent": "continuity.summary",
    # search and recall
    "search": "continuity.retrieval.search",
    "search_prefix": "continuity.retrieval.search",
    "Hit": "continuity.retrieval.search",
    "Embedder": "continuity.retrieval.embedders",
    # secret redaction
    "Redactor": "continuity.redaction",
    "RedactionRule": "continuity.redaction",
    "load_redactor": "continuity.redaction",
    # errors: the base class, and those a runtime catches to recover and go on
    "ContinuityError": "continuity.errors",
    "StoreNotFound": "continuity.errors",
    "StoreUnavailable": "continuity.errors",
    "MissingExtra": "continuity.errors",
    "InvalidThreadId": "continuity.errors",
    "ThreadNotFound": "continuity.errors",
    "SeqConflict": "continuity.errors",
    "BadFrame": "continuity.errors",
    "InvalidQuery": "continuity.errors",
    "AnchorNotFound": "continuity.errors",
    "ContextTooSmall": "continuity.errors",
    "JobInFlight": "continuity.errors",
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
