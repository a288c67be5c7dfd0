"""The static embedder (model2vec format, numpy only) against model2vec itself, on models the
tests build: the same token ids as Hugging Face's WordPiece tokenizer, the same vectors as
``StaticModel.encode``, and clear errors for folders it cannot read."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from continuity.errors import ModelError
from continuity.retrieval.embedders import Embedder, StaticEmbedder, read_safetensors

tokenizers = pytest.importorskip("tokenizers", reason="the parity tests need tokenizers")
safetensors_numpy = pytest.importorskip("safetensors.numpy", reason="needs safetensors")
model2vec = pytest.importorskip("model2vec", reason="the parity tests need model2vec")

WORDS = [
    "the",
    "test",
    "suite",
    "fails",
    "because",
    "migration",
    "of",
    "the",
    "database",
    "schema",
    "broke",
    "a",
    "renderer",
    "router",
    "session",
    "agent",
    "hook",
    "compaction",
    "summary",
    "search",
    "token",
    "café",
    "naïve",
    "pytest",
    "error",
    "fix",
    "fixed",
    "fixing",
    "quoted",
    "comma",
    "csv",
    "export",
    "invoice",
    "日本",
    "ünïcödé",
]
PIECES = ["##s", "##ing", "##ed", "##er", "##ation", "##e", "##a", "##t", "##i", "##o", "##n"]


def _vocab() -> dict[str, int]:
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", ".", ",", "!", "(", ")", "-", "'", "/"]
    stems = sorted({w.lower() for w in WORDS} | {"migrat", "render", "fix", "sess", "ion"})
    tokens += stems + PIECES + list("abcdefghijklmnopqrstuvwxyz")
    return {t: i for i, t in enumerate(dict.fromkeys(tokens))}


def build_model(
    folder: Path,
    *,
    normalize: bool = True,
    dtype: str = "float32",
    weights: bool = False,
    lowercase: bool = True,
) -> Path:
    """A model2vec folder made with the real tokenizers and safetensors packages."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    vocab = _vocab()
    tok = Tokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=lowercase)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    rng = np.random.default_rng(7)
    tensors = {"embeddings": rng.normal(size=(len(vocab), 16)).astype(dtype)}
    if weights:
        tensors["weights"] = rng.uniform(0.1, 2.0, size=len(vocab)).astype("float32")
    safetensors_numpy.save_file(tensors, str(folder / "model.safetensors"))
    config = {"model_type": "model2vec", "normalize": normalize, "hidden_dim": 16}
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    return build_model(tmp_path / "tiny")


TEXTS = st.lists(
    st.sampled_from([*WORDS, *"., !()-'/", "xyzzy", "Migrations", "FIXED"]), max_size=12
)


@pytest.mark.slow
@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(words=TEXTS, joiner=st.sampled_from([" ", "", "  \t", "\n"]))
def test_token_ids_are_hugging_faces(model_dir: Path, words: list[str], joiner: str) -> None:
    from tokenizers import Tokenizer

    text = joiner.join(words)
    ours = StaticEmbedder(model_dir).tokenizer.encode(text)
    theirs = Tokenizer.from_file(str(model_dir / "tokenizer.json")).encode(
        text, add_special_tokens=False
    )
    assert ours == theirs.ids


@pytest.mark.slow
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(batch=st.lists(TEXTS.map(" ".join), min_size=1, max_size=5))
def test_vectors_are_model2vecs(model_dir: Path, batch: list[str]) -> None:
    from model2vec import StaticModel

    ours = StaticEmbedder(model_dir).embed(batch)
    theirs = StaticModel.from_pretrained(model_dir).encode(batch)
    assert ours.shape == theirs.shape
    assert ours.dtype == np.float32
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("options"),
    [
        {"normalize": False},
        {"dtype": "float16"},
        {"weights": True},
        {"lowercase": False},
    ],
)
def test_model_variants_match_model2vec(tmp_path: Path, options: dict[str, object]) -> None:
    from model2vec import StaticModel

    folder = build_model(tmp_path / "m", **options)  # type: ignore[arg-type]
    texts = ["The Migration broke the Renderer!", "naïve café", "xyzzy", "", "FIXED fixing"]
    ours = StaticEmbedder(folder).embed(texts)
    theirs = StaticModel.from_pretrained(folder).encode(texts)
    np.testing.assert_allclose(ours, theirs, rtol=1e-3 if "dtype" in options else 1e-5, atol=1e-5)


def test_it_is_an_embedder_named_by_its_matrix(model_dir: Path, tmp_path: Path) -> None:
    e: Embedder = StaticEmbedder(model_dir)  # what search takes (checked by mypy's eye too)
    assert e.id.startswith("static/tiny/")
    assert StaticEmbedder(model_dir).id == e.id
    other = build_model(tmp_path / "tiny2", weights=True)
    assert StaticEmbedder(other).id.split("/")[-1] != e.id.split("/")[-1]
    same = e.embed(["database schema migration"]), e.embed(["database schema migration"])
    assert np.array_equal(*same)
    unit = e.embed(["the test suite fails", "xyzzy qqq"])
    assert np.isclose(np.linalg.norm(unit[0]), 1.0)
    assert not unit[1].any()  # nothing but unknown words: no direction at all


def test_a_paraphrase_is_closer_than_an_unrelated_text(model_dir: Path) -> None:
    e = StaticEmbedder(model_dir)
    a, b, c = e.embed(["database schema migration", "the schema migration of a database", "café"])
    assert float(a @ b) > float(a @ c)


def test_folders_it_cannot_read_are_clear_errors(tmp_path: Path, model_dir: Path) -> None:
    with pytest.raises(ModelError, match="not a folder"):
        StaticEmbedder(tmp_path / "missing")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ModelError, match=r"no model\.safetensors"):
        StaticEmbedder(empty)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "model.safetensors").write_bytes((10**9).to_bytes(8, "little") + b"{}")
    (bad / "tokenizer.json").write_text((model_dir / "tokenizer.json").read_text())
    with pytest.raises(ModelError, match="header length"):
        StaticEmbedder(bad)
    (bad / "model.safetensors").write_bytes((2).to_bytes(8, "little") + b"{x")
    with pytest.raises(ModelError, match="not JSON"):
        StaticEmbedder(bad)
    spec = json.loads((model_dir / "tokenizer.json").read_text())
    spec["model"]["type"] = "Unigram"
    (bad / "model.safetensors").write_bytes((model_dir / "model.safetensors").read_bytes())
    (bad / "tokenizer.json").write_text(json.dumps(spec))
    with pytest.raises(ModelError, match="only WordPiece"):
        StaticEmbedder(bad)


def test_read_safetensors_reads_what_safetensors_wrote(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    tensors = {
        "a": rng.normal(size=(3, 4)).astype("float32"),
        "b": rng.normal(size=(5,)).astype("float16"),
        "c": np.arange(6, dtype="int64").reshape(2, 3),
    }
    path = tmp_path / "t.safetensors"
    safetensors_numpy.save_file(tensors, str(path))
    got = read_safetensors(path)
    assert set(got) == set(tensors)
    for name, value in tensors.items():
        assert np.array_equal(got[name], value)
