"""Embedder kinds by name (``continuity.retrieval.models.EMBEDDERS``, ADR 0047): ``bert`` and
``static`` built in, recognised from a model's folder as before; one an installed package adds
(``tests/support/outside.py``'s ``hashtest``, found through a real entry point); and a store's
``search.json`` naming the kind of its model (``continuity model use NAME --embedder KIND``),
which every search of the store then loads it as."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from typer.testing import CliRunner

from continuity import frames as fr
from continuity.cli.app import app
from continuity.errors import InvalidSettings, ModelError, UnknownName
from continuity.mcp_server.archive import Archive
from continuity.retrieval.embedders import StaticEmbedder
from continuity.retrieval.models import EMBEDDERS, load_folder, load_model
from continuity.retrieval.settings import (
    FILE,
    SearchSettings,
    configured_embedder,
    read_search_settings,
    write_search_settings,
)
from continuity.store.jsonl import Store
from continuity.viewer.model import store_model
from tests.support.model import build_tiny_model
from tests.support.outside import HashtestEmbedder, hashtest_model, install


@pytest.fixture(scope="module", autouse=True)
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The outside package, installed for this module's tests."""
    site = install(tmp_path_factory.mktemp("site"))
    EMBEDDERS.unregister("hashtest")  # a lookup before it was installed is not remembered
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(site))
        yield site
    EMBEDDERS.unregister("hashtest")


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CONTINUITY_MODELS", str(tmp_path / "models"))
    for name in ("CONTINUITY_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "CONTINUITY_MODEL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(tmp_path / "store", create=True, durable=False)
    s.thread("a").append([fr.message("user", "we should persist it to disk")])
    return s


def cli(store: Store, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["--store", str(store.root), *args])
    return result.exit_code, result.output


# --- search.json ------------------------------------------------------------------------------


def test_search_json_may_name_the_kind_and_old_files_read_as_before(store: Store) -> None:
    path = store.root / FILE
    path.write_text('{"model": "m", "embed_budget": 8}')
    assert read_search_settings(store) == SearchSettings(model="m", embed_budget=8)
    path.write_text('{"model": "m", "embedder": "hashtest"}')
    assert read_search_settings(store).embedder == "hashtest"
    path.write_text('{"model": "m", "embedder": ""}')
    with pytest.raises(InvalidSettings, match="embedder names no kind"):
        read_search_settings(store)
    path.write_text('{"model": "m", "embeder": "bert"}')  # a field it does not know
    with pytest.raises(InvalidSettings, match="embeder"):
        read_search_settings(store)
    # no kind named: the file is byte for byte what it was before the field existed
    write_search_settings(store, SearchSettings(model="m"))
    assert path.read_bytes() == b'{\n  "model": "m"\n}\n'
    write_search_settings(store, SearchSettings(model="m", embedder="bert"))
    assert json.loads(path.read_text()) == {"model": "m", "embedder": "bert"}


# --- loading a folder -------------------------------------------------------------------------


def test_a_folder_is_recognised_as_before_and_a_named_kind_is_used_instead(tmp_path: Path) -> None:
    tiny = build_tiny_model(tmp_path / "tiny")
    found = load_folder(tiny)
    assert isinstance(found, StaticEmbedder)
    assert load_folder(tiny, kind="static").id == found.id
    with pytest.raises(ModelError):
        load_folder(tiny, kind="bert")  # named: not recognised, so not rescued either
    with pytest.raises(UnknownName, match="unknown embedder 'nope': known are bert, static"):
        load_model(str(tiny), kind="nope")


def test_an_installed_kind_is_asked_when_no_builtin_reads_the_folder(tmp_path: Path) -> None:
    model = hashtest_model(tmp_path / "hashed", dim=32)
    assert load_folder(model).id == "hashtest/32"  # static could not read it
    assert "hashtest" in EMBEDDERS.names()
    with pytest.raises(ModelError, match=r"holds no model\.safetensors"):
        load_folder(tmp_path)  # no kind knows it: the fallback's error, as before


def test_a_folder_the_builtins_read_is_theirs_whatever_else_is_known(tmp_path: Path) -> None:
    """What a folder loads as never depends on what the process looked up before."""
    both = build_tiny_model(tmp_path / "both")  # a model2vec folder, and a hashtest one too
    (both / "hashtest.json").write_text('{"dim": 16}')
    assert isinstance(load_folder(both), StaticEmbedder)
    EMBEDDERS.register("mine", HashtestEmbedder)
    try:
        EMBEDDERS.installed()
        assert isinstance(load_folder(both), StaticEmbedder)
        assert load_folder(both, kind="mine").id == "hashtest/16"
    finally:
        EMBEDDERS.unregister("mine")


# --- continuity model use --embedder, and every search after it -------------------------------


def test_model_use_records_the_embedder_kind_and_every_search_loads_it(
    store: Store, tmp_path: Path
) -> None:
    model = hashtest_model(tmp_path / "hashed")
    code, out = cli(store, "model", "use", str(model), "--embedder", "hashtest")
    assert code == 0, out
    assert "fuse" in out and "(id hashtest/64;" in out
    assert json.loads((store.root / FILE).read_text()) == {
        "model": str(model),
        "embedder": "hashtest",
    }
    assert cli(store, "model", "use") == (0, f"model: {model} (embedder hashtest)\n")
    # the commands, the viewer and the MCP server load it as that kind
    assert isinstance(configured_embedder(store), HashtestEmbedder)
    assert isinstance(store_model(store), HashtestEmbedder)
    assert isinstance(Archive(store, "/p").embedder(), HashtestEmbedder)
    code, out = cli(store, "index", "--jobs", "1")
    assert code == 0 and "for model hashtest/64" in out, out
    # naming the model alone goes back to recognising its kind
    tiny = build_tiny_model(tmp_path / "tiny")
    assert cli(store, "model", "use", str(tiny))[0] == 0
    assert json.loads((store.root / FILE).read_text()) == {"model": str(tiny)}


def test_an_unknown_embedder_is_a_clear_error_that_writes_nothing(
    store: Store, tmp_path: Path
) -> None:
    tiny = build_tiny_model(tmp_path / "tiny")
    code, out = cli(store, "model", "use", str(tiny), "--embedder", "nope")
    assert code == 1
    assert out.startswith("error: unknown embedder 'nope': known are bert, static")
    assert "'continuity.embedders'" in out
    assert not (store.root / FILE).exists()
    code, out = cli(store, "model", "use", "--embedder", "static")
    assert (code, out) == (1, "error: --embedder says how to load the model named: name one\n")


def test_the_hook_loads_the_kind_the_settings_name(store: Store, tmp_path: Path) -> None:
    from continuity.agents.claude_code.hooks import run_hook
    from tests.agents.claude_code.test_hooks import SESSION, Transcript, configure, work

    configure(store, recall_on_prompt=True)
    transcript = Transcript(tmp_path / "projects" / "p" / f"{SESSION}.jsonl")
    work(transcript, ["/work/demo/app.py"], ["pytest -q"])
    transcript.flush()
    payload = transcript.payload("UserPromptSubmit", prompt="persist disk")
    model = hashtest_model(tmp_path / "hashed")
    settings = SearchSettings(model=str(model), embedder="hashtest")
    write_search_settings(store, settings)
    assert run_hook(store, "user-prompt-submit", payload).notes == []
    write_search_settings(store, msgspec.structs.replace(settings, embedder="nope"))
    notes = run_hook(store, "user-prompt-submit", payload).notes
    assert len(notes) == 1 and "unknown embedder 'nope'" in notes[0]
    assert "searched by words alone" in notes[0]
