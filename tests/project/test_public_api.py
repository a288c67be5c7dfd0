"""The public API: the names at the package root (exactly the guarded ones), served lazily from a
literal table equal to what type checkers see, each from a module that really has it, and
every other public name reached through its module by decision (ADR 0048)."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import pydoc
import subprocess
import sys
from pathlib import Path

import pytest

import continuity
from continuity import errors

# The package root, by what it is for (the rule is in the package's docstring and ADR 0048).
# A name added to or removed from the root fails here until this guard says so too: the root
# is what a newcomer reads first, so it grows by decision.
ROOT_NAMES = frozenset(
    {
        # stores and threads
        "Store",
        "MemoryStore",
        "PostgresStore",
        "open_store",
        "BaseStore",
        "Thread",
        # messages
        "message",
        "MessageAppended",
        "TextBlock",
        "ThinkingBlock",
        "ToolUseBlock",
        "ToolResultBlock",
        "ImageBlock",
        "ProviderBlock",
        # compile
        "compile_context",
        "CompileResult",
        "Limits",
        "ContextBundle",
        "Tokenizer",
        # to and from a model
        "render",
        "to_anthropic",
        "to_openai",
        "to_openai_responses",
        "to_text",
        "from_anthropic",
        "from_openai",
        "from_openai_responses",
        # compaction
        "run_compaction",
        "create_checkpoint",
        "StrideMessages",
        "TokenThreshold",
        "ManualCut",
        "CompactionResult",
        "Summarizer",
        "ExtractiveSummarizer",
        "SummaryDoc",
        "SummaryContent",
        # search and recall
        "search",
        "search_prefix",
        "Hit",
        "Embedder",
        # secret redaction
        "Redactor",
        "RedactionRule",
        "load_redactor",
        # errors: the base class, and those a runtime catches to recover and go on
        "ContinuityError",
        "StoreNotFound",
        "StoreUnavailable",
        "MissingExtra",
        "InvalidThreadId",
        "ThreadNotFound",
        "SeqConflict",
        "BadFrame",
        "InvalidQuery",
        "AnchorNotFound",
        "ContextTooSmall",
        "JobInFlight",
        "__version__",
    }
)

# What a user reaches through a module rather than the package root. Every name in one of these
# modules' ``__all__`` must be either at the root or listed here, so where a new public name
# goes is a decision, not an accident. ``continuity.errors`` is not listed: its ``__all__`` is
# the hierarchy its docstring draws (test_every_error_is_drawn_in_the_hierarchy), and an error
# that is not at the root is imported from it.
_RUNTIME_MODULES = {
    "continuity.frames": {
        # the frame types a runtime meets in what it reads, and their parts
        "CheckpointRef",
        "CompactionCheckpointCreated",
        "ContentBlock",
        "ContextSelectionDecided",
        "ContextSelectionRepeated",
        "ForkPoint",
        "Frame",
        "JobEnded",
        "JobSpawned",
        "MessagesRetracted",
        "ObservationRecorded",
        "RecallRef",
        "RecordAppended",
        "Role",
        "SeqSpan",
        "SourceRef",
        "ThreadCreated",
        # the chained line codec and its helpers
        "DIGEST_HEX_LEN",
        "Envelope",
        "GENESIS_DIGEST",
        "SEAL_SUFFIX_LEN",
        "Block",
        "FrameBase",
        "artifact_refs",
        "chain",
        "checked_body",
        "content_blocks",
        "decode_frame",
        "encode_body",
        "envelope",
        "estimate_message_tokens",
        "frame_types",
        "new_id",
        "normalize",
        "parse_payload",
        "seal",
        "stored_digest",
        "unseal",
    },
    "continuity.store.base": {
        # what a store reports back
        "DeletionReport",
        "Head",
        "Recovery",
        "Tombstone",
        "MAX_THREAD_ID_LEN",
        # what a backend with its own search index implements (ADR 0026), not API for users
        "DocumentsOf",
        "SearchBackend",
        "SearchDocument",
        "SearchWatermark",
        # what a server store's store-wide search index answers with (ADR 0041)
        "WideRun",
        "WideSearch",
        "WideSearchBackend",
        "LogReader",
        "LogStamp",  # what a backend gives the store catalog, not API for users
        "batch_of",
        "check_sealed",
        "deletion_facts",  # what a backend's delete_thread counts with (ADR 0040)
        "now_ms",
        "resolve_thread",
        "seal_batch",
        "seal_frames",
        "SealedBatch",
        "provider_checkpoints",
        "provider_summaries",
        "split_lines",
        "validate_thread_id",
    },
    "continuity.store.jsonl": {"STORE_FORMAT", "JsonlThread"},
    "continuity.store.postgres": {"PostgresArtifactStore", "PostgresThread", "is_postgres_url"},
    # a backend's author registers a URL scheme's opener (ADR 0047)
    "continuity.store.locate": {"STORE_SCHEMES", "StoreOpener"},
    # moving a store: a job on a whole store, beside the loop
    "continuity.maintenance.migrate": {"MigrationReport", "ThreadCopy", "migrate_store"},
    "continuity.store.memory": {"MemoryThread"},
    # the async face: the same entry points as coroutines
    "continuity.aio": {
        "AsyncArtifacts",
        "AsyncStore",
        "AsyncThread",
        "compile_context",
        "create_checkpoint",
        "run_compaction",
        "search",
        "search_prefix",
    },
    "continuity.context.compiler": {
        "COMPILER_ID",
        "DEFAULT_BUDGET_TOKENS",
        "DEFAULT_LIMITS",
        "STRATEGY_HIERARCHICAL",
        "STRATEGY_RECENT",
        "STRATEGY_SUMMARIES",
        "select_checkpoints",
    },
    "continuity.context.bundle": {
        # a bundle's items, met inside it
        "ElidedBlock",
        "MessageItem",
        "RecallItem",
        "SummaryItem",
        "ToolStubBlock",
        "BUNDLE_SCHEMA",
        "BundleItem",
        "bundle_bytes",
        "bundle_id",
        "decode_bundle",
    },
    "continuity.context.render": {
        "CONTINUING",
        "FORMATS",
        "ROLE_HINT",
        "CacheMode",
        "Format",
        "Provider",
        "ThinkingMode",
    },
    "continuity.context.convert": {"DEFAULT_MAX_INLINE_BYTES", "DEFAULT_PREVIEW_CHARS"},
    # beside the loop: forks, a runtime's own records, undo
    "continuity.context.fork": {"fork", "fork_point"},
    "continuity.context.records": {
        "Record",
        "RecordView",
        "latest_record",
        "record",
        "record_frame",  # for batches of a runtime's own (the LangGraph store)
        "record_view",
        "records",
    },
    "continuity.context.retract": {
        "clear_messages",
        "live_messages",
        "pop_message",
        "retract",
        "retracted_spans",
    },
    "continuity.context.compaction": {
        "CutRule",
        "covered_tokens",
        "pair_safe_cut",
        "parse_cut_rule",
        "plan_cuts",
    },
    "continuity.context.summarize": {"DEFAULT_BUDGETS", "SECTION_HEADINGS"},
    "continuity.summary": {
        "AsyncSummarizer",  # for the async face
        "CUMULATIVE_V1",
        "SUMMARY_SCHEMA",
        "decode_summary",
        "summary_bytes",
        # a provider's own compaction (the seal path and compile use them)
        "ANTHROPIC_COMPACTION_V1",
        "OPENAI_COMPACTION_V1",
        "PROVIDER_COMPACTION_RULE",
        "PROVIDER_SUMMARY_KINDS",
        "compaction_block",
        "compaction_checkpoint",
        "is_compaction_block",
        "provider_block",
        "provider_summary_text",
    },
    "continuity.retrieval.search": {"Embedding"},
    "continuity.retrieval.embedders": {
        # the embedders themselves: an optional refinement of search, with its own module
        "HashedEmbedder",
        "QueryEmbedder",
        "StaticEmbedder",
        "embed_queries",
        "WordPiece",
        "parse_safetensors",
        "read_safetensors",
    },
    "continuity.redaction": {
        "BUILTIN_RULES",
        "CONFIG_FILE",
        "MARKER_PREFIX",
        "META_KEY",
        "RedactionConfig",
        "RuleConfig",
        "redaction_count",
    },
    "continuity.tokens": {"HeuristicTokenizer", "estimate_text"},
}


def _type_checking_reexports(module_name: str) -> dict[str, str]:
    """Name → module of each import under the module's first top-level ``if TYPE_CHECKING:``,
    read from its source: the names a type checker sees re-exported."""
    module = importlib.import_module(module_name)
    assert module.__file__ is not None
    tree = ast.parse(Path(module.__file__).read_text())
    block = next(
        n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"
    )
    seen: dict[str, str] = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom) and node.module, ast.unparse(node)
        for alias in node.names:
            assert alias.asname == alias.name, f"{alias.name} is not re-exported ``as`` itself"
            seen[alias.name] = node.module
    return seen


def test_the_root_is_exactly_the_guarded_names() -> None:
    served = set(continuity.__all__)
    assert not served - ROOT_NAMES, f"at the root, not in ROOT_NAMES: {served - ROOT_NAMES}"
    assert not ROOT_NAMES - served, f"in ROOT_NAMES, not at the root: {ROOT_NAMES - served}"


def test_all_and_dir_are_the_lazy_table() -> None:
    assert continuity.__all__ == sorted(continuity._HOMES)
    assert dir(continuity) == continuity.__all__


@pytest.mark.parametrize("module_name", ["continuity", "continuity.context.render"])
def test_the_names_type_checkers_see_are_the_names_it_serves(module_name: str) -> None:
    """The imports under ``TYPE_CHECKING`` (what type checkers and editors read) and the table
    the module serves at run time (``_HOMES``, a literal: serving a name reads no source) name
    the same names from the same modules."""
    module = importlib.import_module(module_name)
    assert _type_checking_reexports(module_name) == module._HOMES


@pytest.mark.parametrize("name", sorted(ROOT_NAMES))
def test_every_root_name_lives_in_its_home_module(name: str) -> None:
    """The module a root name is served from has it, public (in its ``__all__``), as the very
    object the root gives: ``from <home> import <name>`` is the same name."""
    home = importlib.import_module(continuity._HOMES[name])
    if name == "__version__":  # the ground module pyproject reads, with no other name
        assert isinstance(home.__version__, str)
    else:
        assert name in home.__all__, f"{home.__name__} does not make {name} public"
    assert getattr(continuity, name) is getattr(home, name)


def test_the_render_package_serves_its_names_from_their_modules() -> None:
    from continuity.context import render

    for name, home in render._HOMES.items():
        assert name in render.__all__
        assert getattr(render, name) is getattr(importlib.import_module(home), name), name
    assert dir(render) == sorted({*vars(render), *render.__all__})


def test_star_import_gives_every_name() -> None:
    namespace: dict[str, object] = {}
    exec("from continuity import *", namespace)
    assert set(continuity.__all__) <= set(namespace)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'compile'"):
        continuity.compile  # noqa: B018


def test_a_name_that_left_the_root_is_an_attribute_error() -> None:
    """Names that moved to their modules are not served from the root any more (ADR 0048)."""
    with pytest.raises(AttributeError, match="no attribute 'ObservationRecorded'"):
        continuity.ObservationRecorded  # noqa: B018
    from continuity.frames import ObservationRecorded

    assert ObservationRecorded.__module__ == "continuity.frames"


@pytest.mark.parametrize("module_name", sorted(_RUNTIME_MODULES))
def test_every_public_name_is_at_the_root_or_reached_through_its_module(module_name: str) -> None:
    module = importlib.import_module(module_name)
    public = set(module.__all__)
    through = _RUNTIME_MODULES[module_name]
    assert through <= public, "the list must name public names"
    for name in sorted(public - through):
        assert name in continuity.__all__, f"{module_name}.{name}: at the root, or listed here?"
        assert getattr(module, name) is getattr(continuity, name), name
    for name in sorted(through):  # listed as reached through the module, yet at the root
        assert getattr(continuity, name, None) is not getattr(module, name), name


def test_every_error_is_drawn_in_the_hierarchy() -> None:
    doc = errors.__doc__ or ""
    for name in errors.__all__:
        cls = getattr(errors, name)
        assert issubclass(cls, errors.ContinuityError), name
        assert doc.count(f" {name} ") + doc.count(f" {name}\n") == 1, name
    at_root = {name for name, home in continuity._HOMES.items() if home == errors.__name__}
    assert at_root <= set(errors.__all__)
    defined = {
        n
        for n, v in vars(errors).items()
        if inspect.isclass(v) and issubclass(v, Exception) and v.__module__ == errors.__name__
    }
    assert defined == set(errors.__all__)


def test_errors_keep_their_standard_bases() -> None:
    assert issubclass(errors.InvalidThreadId, ValueError)
    assert issubclass(errors.BadFrame, ValueError)
    assert issubclass(errors.InvalidLimits, ValueError)
    assert issubclass(errors.InvalidCutRule, ValueError)
    assert issubclass(errors.InvalidQuery, ValueError)
    assert issubclass(errors.ArtifactNotFound, KeyError)


@pytest.mark.slow
def test_no_error_class_is_defined_outside_errors() -> None:
    """Every class deriving from ContinuityError lives in ``continuity.errors``."""
    import pkgutil

    for info in pkgutil.walk_packages(continuity.__path__, "continuity."):
        if info.name in ("continuity.testing", "continuity.__main__"):
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if inspect.isclass(value) and issubclass(value, errors.ContinuityError):
                assert value.__module__ == "continuity.errors", (info.name, value)


@pytest.mark.slow
def test_help_documents_the_loop_and_the_names() -> None:
    # typeshed leaves pydoc.plaintext out (an instance of a private class); it is public API
    text = pydoc.render_doc(continuity, renderer=pydoc.plaintext)  # type: ignore[attr-defined]
    for needed in ("compile_context(thread", "to_anthropic", "run_compaction", "class Store"):
        assert needed in text, needed


@pytest.mark.slow
def test_importing_the_package_imports_nothing_else() -> None:
    """``import continuity`` must stay free: the hook path starts through it."""
    probe = (
        "import json, sys; import continuity; "
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('continuity', 'msgspec', 'numpy', 'typer', 'blake3', 'zstandard'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, check=True, timeout=60
    ).stdout
    assert json.loads(out) == ["continuity"]


@pytest.mark.slow
def test_the_library_never_imports_the_integrations_runtimes() -> None:
    """The runtimes' packages (and the provider SDKs) are optional extras: the library, its
    converters and renderers, the async face and the CLI's modules import none of them; only
    ``continuity.integrations.<runtime>`` does, when a user imports it."""
    probe = (
        "import json, sys; import continuity, continuity.integrations\n"
        "import continuity.context.convert, continuity.context.render, continuity.aio\n"
        "import continuity.context.compiler, continuity.context.records\n"
        "import continuity.cli.app, continuity.maintenance.migrate, continuity.store.locate\n"
        "import continuity.store.postgres  # psycopg only once a server store is opened\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & {'langgraph', "
        "'langchain_core', 'agents', 'openai', 'anthropic', 'pydantic', 'psycopg', "
        "'psycopg_pool'})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, check=True, timeout=60
    ).stdout
    assert json.loads(out) == []


@pytest.mark.slow
def test_the_hook_paths_import_nothing_they_do_not_use() -> None:
    """What a hook process runs (ingest; the restore's compile, render and summary; the
    previous-session pointer) imports no numpy (30-60 ms of a fresh process: recall imports
    the ranking when asked), no CLI stack, and neither dataclasses (with inspect, 5 ms) nor
    threading (0.5 ms)."""
    probe = (
        "import json, sys\n"
        "sys.modules['typing_extensions'] = None  # as continuity.__main__ does for hooks\n"
        "import continuity.agents.claude_code.hooks, continuity.agents.claude_code.ingest\n"
        "import continuity.agents.base.restore, continuity.agents.base.sessions\n"
        "import continuity.context.compiler, continuity.context.render\n"
        "import continuity.context.summarize, continuity.context.compaction\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('numpy', 'typer', 'rich', 'click', 'dataclasses', 'inspect', 'threading'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, check=True, timeout=60
    ).stdout
    assert json.loads(out) == []
