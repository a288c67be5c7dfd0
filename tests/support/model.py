"""A tiny model2vec model written by hand, with numpy and json alone (no tokenizers, safetensors
or network): a WordPiece ``tokenizer.json``, a ``model.safetensors`` holding an ``embeddings``
matrix, and a ``config.json``.

Its rows are set so that words of one topic point the same way (axis 0: keeping data on disk,
axis 1: databases, axis 2: tests, axis 3: the web, axis 4: search), each word a little off its
axis so no two are equal; filler words are short vectors on the last axes. So "persist" and
"storage" are close while sharing no letters: a paraphrase BM25 cannot match.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np

from continuity.retrieval.embedders import Embedder

TOPICS: dict[int, tuple[str, ...]] = {
    0: ("persist", "persistence", "storage", "disk", "save", "saved", "durable", "fsync", "write"),
    1: ("database", "schema", "migration", "sql", "table", "postgres"),
    2: ("test", "tests", "pytest", "suite", "fails", "failing", "error"),
    3: ("router", "http", "request", "page", "render", "renderer"),
    4: ("search", "index", "query", "rank", "ranking"),
}
FILLER = ("the", "a", "of", "we", "should", "how", "do", "to", "on", "it", "is", "and", "in")
DIM = 8


def vocabulary() -> dict[str, int]:
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", ".", ",", "!", "?", "-", "'", "/"]
    for words in TOPICS.values():
        tokens += words
    tokens += FILLER
    return {t: i for i, t in enumerate(dict.fromkeys(tokens))}


def matrix(vocab: dict[str, int], dim: int = DIM) -> np.ndarray:
    rows = np.zeros((len(vocab), dim), dtype=np.float32)
    for axis, words in TOPICS.items():
        for i, word in enumerate(words):
            row = rows[vocab[word]]
            row[axis] = 1.0
            row[5 + i % 3] = 0.05 * (1 + i // 3)
    for i, word in enumerate(FILLER):
        rows[vocab[word], 5 + i % 3] = 0.1
    return rows


def write_safetensors(path: Path, tensors: dict[str, np.ndarray]) -> None:
    """The safetensors format: an 8-byte little-endian header length, a JSON header naming
    each tensor's dtype, shape and byte range (padded with spaces to 8 bytes), the bytes."""
    kinds = {np.dtype("<f4"): "F32", np.dtype("<f2"): "F16", np.dtype("<i8"): "I64"}
    header: dict[str, object] = {}
    body = b""
    for name, value in tensors.items():
        data = np.ascontiguousarray(value).tobytes()
        header[name] = {
            "dtype": kinds[value.dtype.newbyteorder("<")],
            "shape": list(value.shape),
            "data_offsets": [len(body), len(body) + len(data)],
        }
        body += data
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + body)


def tokenizer_spec(vocab: dict[str, int]) -> dict[str, object]:
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": {
            "type": "BertNormalizer",
            "clean_text": True,
            "handle_chinese_chars": True,
            "strip_accents": None,
            "lowercase": True,
        },
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": None,
        "decoder": None,
        "model": {
            "type": "WordPiece",
            "unk_token": "[UNK]",
            "continuing_subword_prefix": "##",
            "max_input_chars_per_word": 100,
            "vocab": vocab,
        },
    }


def build_tiny_model(folder: Path, *, scale: float = 1.0) -> Path:
    """The tiny model in ``folder`` (created); ``scale`` changes its matrix (another model)."""
    vocab = vocabulary()
    folder.mkdir(parents=True, exist_ok=True)
    write_safetensors(folder / "model.safetensors", {"embeddings": matrix(vocab) * scale})
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer_spec(vocab)))
    config = {"model_type": "model2vec", "normalize": True, "hidden_dim": DIM}
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def assert_batch_invariant(embedder: Embedder, long_text: str) -> None:
    """A text's vector has the same bits embedded alone, among others, shuffled and split in
    two: what a vector cache caught up thread by thread and one made in one go must agree on."""
    rng = random.Random(7)
    words = "the retry loop sync worker backs off when the server answers 503 build failed"
    vocab = words.split(" ")
    texts = [" ".join(rng.choice(vocab) for _ in range(rng.randint(1, 120))) for _ in range(8)]
    texts += ["x", long_text]
    together = embedder.embed(texts)
    alone = np.stack([embedder.embed([t])[0] for t in texts])
    order = list(range(len(texts)))
    rng.shuffle(order)
    shuffled = embedder.embed([texts[i] for i in order])
    back = np.empty_like(shuffled)
    back[order] = shuffled
    halves = np.concatenate([embedder.embed(texts[:5]), embedder.embed(texts[5:])])
    for name, other in (("alone", alone), ("shuffled", back), ("split", halves)):
        differ = [i for i in range(len(texts)) if other[i].tobytes() != together[i].tobytes()]
        assert not differ, f"{name}: texts {differ} got other bits than embedded together"
