"""The store's model (``continuity model use``, ``<store>/search.json``) is used everywhere
search is: ``continuity search``, compile's recall, the Claude Code hook's recall_on_prompt, the
viewer and the MCP server's search tool. Without one, every one of them is as before.

The tiny hand-made model puts "persist ... disk" and "storage" on one axis: a query that says
"storage" finds "we should persist it to disk" only through the model (BM25 has no such word).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from continuity import frames as fr
from continuity.agents.claude_code.hooks import run_hook
from continuity.agents.claude_code.ingest import ingest_transcript
from continuity.cli.app import app
from continuity.cli.fast_search import fast_search
from continuity.mcp_server.archive import Archive
from continuity.mcp_server.tools import search as search_tool
from continuity.retrieval.settings import FILE, read_search_settings
from continuity.store.jsonl import Store
from continuity.viewer.model import search_hits
from tests.agents.claude_code.test_hooks import (
    Transcript,
    configure,
    context_of,
    hook_modules,
    work,
)
from tests.support.model import build_tiny_model

PROJECT = "/home/dev/alpha"
PERSIST = "we should persist it to disk"


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CONTINUITY_MODELS", str(tmp_path / "models"))
    for name in ("CONTINUITY_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "CONTINUITY_MODEL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    return build_tiny_model(tmp_path / "tiny")


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(tmp_path / "store", create=True, durable=False)
    s.thread("a").append(
        [
            fr.ThreadCreated(meta={"project": PROJECT}),
            fr.message("user", PERSIST),
            *[fr.message("assistant", f"the router will render page {i}") for i in range(8)],
            fr.message("user", "and the last page?"),
            fr.message("assistant", "the last page renders too"),
        ]
    )
    s.thread("b").append(
        [
            fr.ThreadCreated(meta={"project": PROJECT}),
            fr.message("user", "the database schema migration fails"),
        ]
    )
    return s


def cli(store: Store, *args: str) -> str:
    result = CliRunner().invoke(app, ["--store", str(store.root), *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def use(store: Store, model_dir: Path) -> None:
    cli(store, "model", "use", str(model_dir))


@pytest.mark.slow
def test_model_use_writes_the_one_setting_and_none_takes_it_away(
    store: Store, model_dir: Path
) -> None:
    assert read_search_settings(store).model is None
    assert "none (BM25 alone)" in cli(store, "model", "use")
    use(store, model_dir)
    assert json.loads((store.root / FILE).read_text()) == {"model": str(model_dir)}
    assert str(model_dir) in cli(store, "model", "use")
    cli(store, "model", "use", "--none")
    assert read_search_settings(store).model is None
    bad = CliRunner().invoke(app, ["--store", str(store.root), "model", "use", "no/such"])
    assert bad.exit_code == 1 and "no model 'no/such'" in bad.output
    (store.root / FILE).write_text('{"modle": "x"}')
    broken = CliRunner().invoke(app, ["--store", str(store.root), "search", "disk"])
    assert broken.exit_code == 1 and "search.json" in broken.output


@pytest.mark.slow
def test_cli_search_fuses_the_stores_model(store: Store, model_dir: Path) -> None:
    lexical = cli(store, "search", "storage database", "--k", "3")
    assert "a  seq 1" not in lexical
    argv = ["--store", str(store.root), "search", "storage database"]
    use(store, model_dir)
    assert fast_search(argv) is None  # the typer command fuses
    fused = cli(store, "search", "storage database", "--k", "3")
    assert PERSIST in fused
    assert fused == cli(store, "search", "storage database", "--k", "3", "--model", str(model_dir))
    cli(store, "model", "use", "--none")
    assert cli(store, "search", "storage database", "--k", "3") == lexical  # as before


@pytest.mark.slow
def test_index_builds_the_vectors_ahead(store: Store, model_dir: Path) -> None:
    none = CliRunner().invoke(app, ["--store", str(store.root), "index"])
    assert none.exit_code == 1 and "no model" in none.output
    use(store, model_dir)
    out = cli(store, "index", "--jobs", "1")
    assert out.startswith("vectors of 2 threads (12 documents, 12 embedded now)")
    assert "0 embedded now" in cli(store, "index")


@pytest.mark.slow
def test_compile_recall_fuses_the_stores_model(store: Store, model_dir: Path) -> None:
    args = ["compile", "a", "--recent", "2", "--recall", "storage durable", "--dry-run"]
    assert PERSIST not in cli(store, *args)
    use(store, model_dir)
    assert PERSIST in cli(store, *args)


def sessions(tmp_path: Path, store: Store) -> dict[str, object]:
    earlier = Transcript(
        tmp_path / "projects" / "p" / "e.jsonl", "11111111-2222-4333-8444-555555555555", PROJECT
    )
    earlier.prompt(PERSIST)
    earlier.say("done, it is on disk now")
    earlier.flush()
    ingest_transcript(store, earlier.path, final=True)
    current = Transcript(tmp_path / "projects" / "p" / "c.jsonl", cwd=PROJECT)
    work(current, ["/work/demo/app.py"], ["pytest -q"])
    current.flush()
    return current.payload("UserPromptSubmit", prompt="storage durable")


@pytest.mark.slow
def test_the_hooks_recall_fuses_the_stores_model(
    tmp_path: Path, store: Store, model_dir: Path
) -> None:
    configure(store, recall_on_prompt=True)
    payload = sessions(tmp_path, store)
    assert run_hook(store, "user-prompt-submit", payload).stdout == ""  # BM25: no such words
    use(store, model_dir)
    out = run_hook(store, "user-prompt-submit", payload)
    assert PERSIST in context_of(out.stdout, "UserPromptSubmit")
    # a model that cannot be loaded: a note, and the recall goes on by words alone
    (store.root / FILE).write_text(json.dumps({"model": str(tmp_path / "gone")}))
    failed = run_hook(store, "user-prompt-submit", payload)
    assert failed.exit_code == 0 and failed.stdout == ""
    assert any("recall_on_prompt" in n and "searched by words alone" in n for n in failed.notes)


@pytest.mark.slow
def test_the_hook_without_a_model_imports_no_model_code(tmp_path: Path) -> None:
    store = Store(tmp_path / "store", create=True, durable=False)
    configure(store, recall_on_prompt=True)
    t = Transcript(tmp_path / "projects" / "p" / "s.jsonl")
    work(t, ["/work/demo/app.py"], ["pytest -q"])
    t.flush()
    modules = hook_modules(tmp_path, t.payload("UserPromptSubmit", prompt="xyzzy plugh"))
    assert "continuity.retrieval.search" in modules  # it did search
    model_code = {
        "continuity.retrieval.vectors",
        "continuity.retrieval.fusion",
        "continuity.retrieval.embedders",
        "continuity.retrieval.models",
        "continuity.retrieval.embed_workers",
    }
    assert not model_code & modules


@pytest.mark.slow
def test_the_viewer_searches_with_the_stores_model(store: Store, model_dir: Path) -> None:
    assert ("a", 1) not in [(h.thread_id, h.seq) for h in search_hits(store, "storage database")]
    use(store, model_dir)
    told: list[tuple[object, ...]] = []
    hits = search_hits(store, "storage database", tell=lambda *a: told.append(a))
    assert ("a", 1) in [(h.thread_id, h.seq) for h in hits]
    assert any(t[-1] == "documents" for t in told)  # the first search said it was embedding


@pytest.mark.slow
def test_the_mcp_search_tool_uses_the_stores_model(store: Store, model_dir: Path) -> None:
    archive = Archive(store, PROJECT)
    assert archive.embedder() is None
    before = search_tool(archive, {"query": "storage database", "scope": "all"}).text
    assert PERSIST not in before
    use(store, model_dir)
    assert archive.embedder() is not None and archive.embed_budget == 32
    after = search_tool(archive, {"query": "storage database", "scope": "all"})
    assert PERSIST in after.text


def test_the_python_search_uses_the_stores_model_several_threads_and_gives_message_ids(
    store: Store, model_dir: Path
) -> None:
    """``continuity.search`` fuses the store's model (``embedder=None``: BM25 alone), takes
    several threads, and each message hit carries its frame's ``message_id``."""
    import continuity

    store.thread("c").append([fr.ThreadCreated(), fr.message("user", "keep it on the disk")])
    lexical = continuity.search(store, "storage database", k=3)
    assert ("a", 1) not in [(h.thread_id, h.seq) for h in lexical]
    use(store, model_dir)
    fused = continuity.search(store, "storage database", k=3)
    assert ("a", 1) in [(h.thread_id, h.seq) for h in fused]
    assert continuity.search(store, "storage database", k=3, embedder=None) == lexical
    two = continuity.search(store, "disk", thread=["a", "c"], k=10, embedder=None)
    assert {h.thread_id for h in two} == {"a", "c"}
    assert continuity.search(store, "disk", thread=("c",), k=10, embedder=None)[0].thread_id == "c"
    ids = {
        f.seq: f.message_id for f in store.thread("a").read() if isinstance(f, fr.MessageAppended)
    }
    assert all(h.message_id == ids[h.seq] and h.message_id for h in fused if h.thread_id == "a")
