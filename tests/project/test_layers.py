"""The layout's rules (ADR 0012), checked on the source: imports point down the layers, there is
no import cycle, and the layers between the store and the faces reach a backend only through
the store interface."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "continuity"

# Bottom to top. A module may import from its own layer or any layer below it.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "ground",
        (
            "continuity.errors",
            "continuity.frames",
            "continuity.tokens",
            "continuity.summary",
            "continuity.paths",
            "continuity._fs",
            "continuity._text",
            "continuity._version",
            "continuity._install",
            "continuity.redaction",
            "continuity.agents.table",
            "continuity.registry",
        ),
    ),
    ("store", ("continuity.store",)),
    ("caches", ("continuity.caches",)),
    # search below the context layer: what compile's recall ranks with (a thread's prefix)
    (
        "search index",
        (
            "continuity.retrieval.stem",
            "continuity.retrieval.terms",
            "continuity.retrieval.documents",
            "continuity.retrieval.segments",
            "continuity.retrieval.index",
            "continuity.retrieval.state",
            "continuity.retrieval.ranking",
        ),
    ),
    ("context", ("continuity.context",)),
    (
        "search and checks",
        (
            "continuity.retrieval",  # the package's docstring: a map, no imports
            "continuity.retrieval.store_index",
            "continuity.retrieval.server_index",
            "continuity.retrieval.embedders",
            "continuity.retrieval.bert",
            "continuity.retrieval.bert_onnx",
            "continuity.retrieval.vectors",
            "continuity.retrieval.fusion",
            "continuity.retrieval.models",
            "continuity.retrieval.leads",
            "continuity.retrieval.search",
            "continuity.maintenance",
            "continuity.maintenance.verify",
            "continuity.maintenance.bulk",
            "continuity.maintenance.stats",
            "continuity.maintenance.migrate",
            # the rolling context manager (ADR 0056): usage, segments, the queue, the warm
            # tier and the runtimes' policy; rebuild-index rebuilds its cache, the agents'
            # hooks and restore and the MCP server call it
            "continuity.rolling",
        ),
    ),
    # the agents wing (ADR 0046): the foundation every adapter builds on, then the adapters,
    # peers that never import each other (test_agents_are_peers)
    (
        "agent foundation",
        ("continuity.agents.base", "continuity.agents.contract", "continuity.agents.registry"),
    ),
    ("agents", ("continuity.agents",)),
    # `continuity demo`: a scripted Claude Code session replayed through the hooks
    ("demo", ("continuity.demo",)),
    ("testing", ("continuity.testing",)),
    # the web viewer (ADR 0027): `continuity serve` in the CLI imports it
    ("viewer", ("continuity.viewer",)),
    # the MCP server (issue 28): `continuity mcp` in the CLI imports it
    ("mcp server", ("continuity.mcp_server",)),
    ("faces", ("continuity.cli", "continuity.__main__", "continuity.aio")),
    # the runtimes' own storage interfaces, built on the async face; nothing imports them
    ("integrations", ("continuity.integrations",)),
]
BACKEND_NEUTRAL = ("caches", "search index", "context", "search and checks", "viewer")
"""Layers that may only know the store interface (base and artifacts), never a backend."""
STORE_INTERFACE = {
    "continuity.store",
    "continuity.store.base",
    "continuity.store.artifacts",
    "continuity.store.catalog",
    "continuity.store.derived",
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@functools.cache
def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PACKAGE.rglob("*.py")}


@functools.cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text())


def _layer(module: str) -> int:
    for rank, (_name, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return rank
    raise AssertionError(f"{module} is in no layer: add it to LAYERS (and to ADR 0012)")


def _imports(path: Path, module: str, *, for_types: bool = False) -> set[str]:
    """The continuity modules ``path`` imports anywhere (in functions too), except under
    ``if TYPE_CHECKING:`` unless ``for_types``."""
    tree = _tree(path)
    skipped: set[int] = set()
    for node in () if for_types else ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    known = _modules()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in known else base)
    return {m for m in found if m.split(".")[0] == "continuity" and m != module}


@functools.cache
def _edges(*, for_types: bool = False) -> dict[str, set[str]]:
    return {m: _imports(p, m, for_types=for_types) for m, p in _modules().items()}


def test_every_module_is_in_a_layer() -> None:
    for module in _modules():
        if module != "continuity":
            _layer(module)


@pytest.mark.parametrize("module", sorted(m for m in _modules() if m != "continuity"))
def test_imports_point_down_the_layers(module: str) -> None:
    rank = _layer(module)
    for target in _edges()[module]:
        if target == "continuity":  # the package root: lazy names only
            raise AssertionError(f"{module} imports the package root; import the home module")
        assert _layer(target) <= rank, (
            f"{module} ({LAYERS[rank][0]}) imports {target} ({LAYERS[_layer(target)][0]})"
        )


@pytest.mark.parametrize(
    "module",
    sorted(m for m in _modules() if m != "continuity" and LAYERS[_layer(m)][0] in BACKEND_NEUTRAL),
)
def test_layers_above_the_store_know_only_its_interface(module: str) -> None:
    for target in _edges()[module]:
        if target.startswith("continuity.store"):
            assert target in STORE_INTERFACE, f"{module} imports the backend {target}"


@pytest.mark.parametrize("for_types", [False, True], ids=["run time", "with types"])
def test_there_is_no_import_cycle(for_types: bool) -> None:
    """Not at run time, and not through imports for type checking either: a cycle of those is
    a class spread over several files (its methods in one module, its helpers in another that
    names it as a type)."""
    edges = _edges(for_types=for_types)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in edges:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in edges:
        if v not in index:
            visit(v)
    assert cycles == []


def test_the_rules_are_checked_on_real_imports() -> None:
    """The parser sees what it must: a function-level import counts, a TYPE_CHECKING one not."""
    edges = _edges()
    assert "continuity.context.compiler" in edges["continuity.agents.base.restore"]  # in a def
    assert "continuity.store.locate" in edges["continuity.agents.base.hook"]  # in a def
    assert "continuity.store.jsonl" in edges["continuity.store.locate"]
    # the root names everything under TYPE_CHECKING and serves it from a literal table
    assert edges["continuity"] == set()


AGENTS_WING = "continuity.agents"


def _agent_package(module: str) -> str | None:
    """The agent adapter package ``module`` belongs to (``continuity.agents.codex``), or None
    for the wing's foundation, its table and registry, and every module outside the wing."""
    parts = module.split(".")
    if module.startswith(AGENTS_WING + ".") and len(parts) > 2:
        package = ".".join(parts[:3])
        if package in _modules() and _modules()[package].name == "__init__.py":
            return None if parts[2] == "base" else package
    return None


@pytest.mark.parametrize("module", sorted(m for m in _modules() if _agent_package(m) is not None))
def test_agents_are_peers(module: str) -> None:
    """An agent's adapter imports the foundation, never another agent's adapter: a fix to one
    agent is one fix, and a fifth agent is one folder."""
    mine = _agent_package(module)
    for target in _edges()[module] | _edges(for_types=True)[module]:
        other = _agent_package(target)
        assert other is None or other == mine, f"{module} imports {target}, another agent's"


# --- private names stay in their module -------------------------------------------------------


@functools.cache
def _private_definitions() -> dict[str, set[str]]:
    """Per module, the private names it defines: functions, classes, module and class
    variables, and attributes set on ``self`` or ``cls``."""
    out: dict[str, set[str]] = {}
    for module, path in _modules().items():
        names: set[str] = set()
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.alias):
                names.add(node.asname or node.name.split(".")[0])
        out[module] = {n for n in names if n.startswith("_") and not n.startswith("__")}
    return out


def _private_uses(module: str) -> list[str]:
    """The private names of other modules that ``module`` imports or reaches as an attribute
    (``saver._lock``) without defining them itself."""
    path = _modules()[module]
    tree = _tree(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    mine = _private_definitions()[module]
    elsewhere = set().union(*(v for m, v in _private_definitions().items() if m != module))
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            for alias in node.names:
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                if private and f"{base}.{alias.name}" not in _modules():  # a module is fine
                    found.append(f"line {node.lineno}: imports {alias.name} from {base}")
        elif isinstance(node, ast.Attribute):
            name = node.attr
            if not name.startswith("_") or name.startswith("__") or name in mine:
                continue
            if name in elsewhere:
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


@pytest.mark.parametrize("module", sorted(m for m in _modules() if m != "continuity"))
def test_no_module_reaches_another_modules_private_names(module: str) -> None:
    """Internal modules (``_name.py``) may have public names; a private name (``_x``) is its
    module's own: no other module imports it or reaches it on an object."""
    assert _private_uses(module) == []
