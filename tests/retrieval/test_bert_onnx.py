"""The sentence encoder run by onnxruntime (the ``onnx`` extra) on the real all-MiniLM-L6-v2
weights: the graph built from the safetensors gives numpy's vectors (cosine >= 0.9999 on the
fixtures' real messages) under the same model id; int8 weights get an id of their own; the
converted graph is written once into the models home; the engine is chosen, reported and
refused as it should be."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from continuity.cli.app import app
from continuity.errors import ModelError
from continuity.retrieval import bert_onnx
from continuity.retrieval.bert import BertEmbedder, bert_embedder
from tests.retrieval.test_bert import GOLDEN, SENTENCES, _minilm_folder
from tests.support.fixtures import shared_fixture
from tests.support.model import assert_batch_invariant

pytest.importorskip("onnxruntime", reason="the onnx extra (onnxruntime) is not installed")
pytest.importorskip("onnx", reason="the onnx extra (onnx) is not installed")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("models")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CONTINUITY_MODELS", str(path))
        mp.delenv("CONTINUITY_ENGINE", raising=False)
        yield path


@pytest.fixture(scope="module")
def folder() -> Path:
    return _minilm_folder()


@pytest.fixture(scope="module")
def numpy_engine(folder: Path, home: Path) -> BertEmbedder:
    return BertEmbedder(folder, engine="numpy")


@pytest.fixture(scope="module")
def onnx_engine(folder: Path, home: Path) -> BertEmbedder:
    return BertEmbedder(folder, engine="onnx")


def _messages() -> list[str]:
    """Real message texts of the fixture transcripts: short and long (cut at 256 tokens)."""
    texts: list[str] = []
    for path in sorted(shared_fixture("claude-code", "claude-code-log").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            record = json.loads(line) if line.strip().startswith("{") else None
            message = record.get("message") if isinstance(record, dict) else None
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, str):
                texts.append(content)
            elif isinstance(content, list):
                texts += [b["text"] for b in content if isinstance(b, dict) and b.get("text")]
    return [t for t in texts if t.strip()][:40]


def test_onnx_gives_numpys_vectors_on_real_messages(
    numpy_engine: BertEmbedder, onnx_engine: BertEmbedder
) -> None:
    texts = _messages()
    assert len(texts) >= 10
    assert max(len(onnx_engine.token_ids(t)) for t in texts) > 256  # a cut one among them
    cosines = (numpy_engine.embed(texts) * onnx_engine.embed(texts)).sum(axis=1)
    assert cosines.min() >= 0.9999, cosines
    query = numpy_engine.embed_query(texts[:3]) @ onnx_engine.embed_query(texts[:3]).T
    assert np.diag(query).min() >= 0.9999


def test_onnx_matches_sentence_transformers(onnx_engine: BertEmbedder) -> None:
    got = onnx_engine.embed(SENTENCES)
    assert np.allclose(got[:, :8], np.asarray(GOLDEN), atol=2e-5)
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


def test_the_engine_is_not_part_of_the_models_id(
    numpy_engine: BertEmbedder, onnx_engine: BertEmbedder
) -> None:
    assert (numpy_engine.engine, onnx_engine.engine) == ("numpy", "onnx")
    assert onnx_engine.id == numpy_engine.id
    assert onnx_engine.spec is not None and numpy_engine.spec is not None
    # a --jobs worker makes the same engine again from the spec
    assert onnx_engine.spec[1][1] == "onnx" and numpy_engine.spec[1][1] == "numpy"


def test_an_onnx_vector_does_not_depend_on_its_batch(onnx_engine: BertEmbedder) -> None:
    """As numpy's: one sequence a run, never padded (padded batches changed the last bits)."""
    assert_batch_invariant(onnx_engine, " ".join(["a retry loop backs off on 503."] * 60))


def test_converted_once_into_the_models_home(folder: Path, home: Path) -> None:
    first = BertEmbedder(folder, engine="onnx")
    (graph,) = (home / ".onnx").glob("*.onnx")
    assert graph == bert_onnx.graph_path(first)
    stamp = graph.stat().st_mtime_ns
    again = bert_embedder(str(folder), "onnx")
    assert graph.stat().st_mtime_ns == stamp
    assert sorted(p.name for p in (home / ".onnx").iterdir()) == [graph.name]  # no temporaries
    assert np.array_equal(again.embed(["a retry loop"]), first.embed(["a retry loop"]))


def test_int8_is_close_but_its_own_model(
    folder: Path, home: Path, numpy_engine: BertEmbedder
) -> None:
    level = logging.getLogger().level
    small = BertEmbedder(folder, engine="onnx-int8")
    assert logging.getLogger().level == level  # quantising leaves the process's logging alone
    assert small.id == numpy_engine.id + "-int8"  # its vectors never share numpy's cache
    texts = [*SENTENCES, "The retry loop backs off when the server answers 503."]
    cosines = (small.embed(texts) * numpy_engine.embed(texts)).sum(axis=1)
    assert 0.97 < cosines.min() < 0.9999, cosines


def test_auto_takes_onnxruntime_when_installed_else_numpy(
    folder: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert BertEmbedder(folder).engine == "onnx"
    monkeypatch.setenv("CONTINUITY_ENGINE", "numpy")
    assert BertEmbedder(folder).engine == "numpy"
    monkeypatch.delenv("CONTINUITY_ENGINE")
    monkeypatch.setattr(bert_onnx, "available", lambda: False)
    assert BertEmbedder(folder).engine == "numpy"
    with pytest.raises(ModelError, match=r"needs onnx and onnxruntime .*install.*\[onnx\]"):
        BertEmbedder(folder, engine="onnx")
    with pytest.raises(ModelError, match="engine 'gpu' is not one of auto, numpy, onnx"):
        BertEmbedder(folder, engine="gpu")


def test_model_show_names_the_engine(
    folder: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    got = CliRunner().invoke(app, ["model", "show", str(folder)])
    assert got.exit_code == 0, got.output
    assert "engine: numpy for a query or a few texts, onnxruntime once a run is long" in got.output
    monkeypatch.setenv("CONTINUITY_ENGINE", "numpy")
    got = CliRunner().invoke(app, ["model", "show", str(folder)])
    assert "engine: numpy" in got.output
    monkeypatch.setenv("CONTINUITY_ENGINE", "tpu")
    got = CliRunner().invoke(app, ["model", "show", str(folder)])
    assert got.exit_code != 0 and "engine 'tpu' is not one of" in got.output


def test_import_continuity_and_the_hook_do_not_import_onnx() -> None:
    code = (
        "import sys, continuity, continuity.agents.claude_code.hooks, continuity.retrieval.models, "
        "continuity.retrieval.bert; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('onnx', 'onnxruntime')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
