"""The public API: what ``import continuity`` offers, that it is complete, and that it is lazy."""

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

# What a runtime reaches through a module rather than the package root: lower-level names
# (codecs, schemas, constants, backend-author tools). Every name in one of these modules'
# ``__all__`` must be either exported by the package or listed here, so a new public name is
# a decision, not an accident.
_RUNTIME_MODULES = {
    "continuity.errors": set(),
    "continuity.frames": {
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
    "continuity.store.locate": set(),
    "continuity.maintenance.migrate": set(),
    "continuity.store.memory": {"MemoryThread"},
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
    "continuity.context.fork": set(),
    "continuity.context.records": {
        "record_frame"
    },  # for batches of a runtime's own (the LangGraph store)
    "continuity.context.retract": set(),
    "continuity.context.compaction": {
        "covered_tokens",
        "pair_safe_cut",
        "parse_cut_rule",
        "plan_cuts",
    },
    "continuity.context.summarize": {"DEFAULT_BUDGETS", "SECTION_HEADINGS"},
    "continuity.summary": {
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
    "continuity.retrieval.search": set(),
    "continuity.retrieval.embedders": {"WordPiece", "parse_safetensors", "read_safetensors"},
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


def test_every_listed_name_resolves_to_its_home_module() -> None:
    homes = continuity._HOMES
    assert continuity.__all__ == sorted(homes)
    for name in continuity.__all__:
        home = importlib.import_module(homes[name])
        if name != "__version__":  # the ground module pyproject reads, with no ``__all__``
            assert name in home.__all__, f"{home.__name__} does not make {name} public"
        assert getattr(continuity, name) is getattr(home, name), name
    assert dir(continuity) == continuity.__all__


@pytest.mark.parametrize("module_name", ["continuity", "continuity.context.render"])
def test_the_names_type_checkers_see_are_the_names_it_serves(module_name: str) -> None:
    """The imports under ``TYPE_CHECKING`` (what type checkers and editors read) and the table
    the module serves at run time (``_HOMES``, a literal: serving a name reads no source) name
    the same names from the same modules."""
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
    assert seen == module._HOMES
    for name, home in seen.items():
        assert getattr(module, name) is getattr(importlib.import_module(home), name), name


def test_star_import_gives_every_name() -> None:
    namespace: dict[str, object] = {}
    exec("from continuity import *", namespace)
    assert set(continuity.__all__) <= set(namespace)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'compile'"):
        continuity.compile  # noqa: B018


@pytest.mark.parametrize("module_name", sorted(_RUNTIME_MODULES))
def test_nothing_public_is_missing_from_the_package(module_name: str) -> None:
    module = importlib.import_module(module_name)
    public = set(module.__all__)
    reached_through_module = _RUNTIME_MODULES[module_name]
    assert reached_through_module <= public, "the exclusions must name public names"
    missing = public - reached_through_module - set(continuity.__all__)
    assert not missing, f"{module_name} has public names the package does not export"
    for name in public & set(continuity.__all__):
        assert getattr(module, name) is getattr(continuity, name)


def test_the_runtime_names_the_issue_lists_are_all_there() -> None:
    """Stores and thread, messages and blocks, limits, compile and its result, the bundle, the
    renderers, search and its hit, compaction with its rules and summarizer, the errors."""
    needed = {
        "Store",
        "MemoryStore",
        "BaseStore",
        "Thread",
        "message",
        "TextBlock",
        "ThinkingBlock",
        "ToolUseBlock",
        "ToolResultBlock",
        "ImageBlock",
        "Limits",
        "compile_context",
        "CompileResult",
        "ContextBundle",
        "to_anthropic",
        "to_openai",
        "to_text",
        "render",
        "search",
        "Hit",
        "run_compaction",
        "create_checkpoint",
        "StrideMessages",
        "TokenThreshold",
        "ManualCut",
        "Summarizer",
        "SummaryContent",
    }
    assert needed <= set(continuity.__all__)


def test_every_error_is_exported_and_drawn_in_the_hierarchy() -> None:
    doc = errors.__doc__ or ""
    for name in errors.__all__:
        cls = getattr(errors, name)
        assert issubclass(cls, errors.ContinuityError), name
        assert name in continuity.__all__, name
        assert doc.count(f" {name} ") + doc.count(f" {name}\n") == 1, name
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
