"""Embedders: texts to unit vectors, for the semantic ranking (:mod:`.vectors`, ADR 0033).

An :class:`Embedder` is anything with an ``id`` and ``embed(texts) -> float32 [n, dim]`` unit
rows, deterministic for a given ``id``. Two are here: :class:`HashedEmbedder`, hashed token
features (no model: a deterministic toy for tests), and :class:`StaticEmbedder`, static
embeddings in the model2vec format, with numpy alone.

A model2vec model is a folder: ``model.safetensors`` (a token × dimension matrix named
``embeddings``, optionally per-token ``weights`` and a token→row ``mapping``), ``tokenizer.json``
(a Hugging Face tokenizer) and ``config.json`` (``normalize``, ``max_length``). A text's vector is
the mean of its tokens' rows (unknown tokens left out), L2-normalised when the config says so —
what ``model2vec.StaticModel.encode`` computes, without its Rust tokenizer or safetensors
packages: the file format is a JSON header and raw little-endian arrays, and the tokenizers these
models ship are WordPiece ones, whose BERT normalisation, pre-tokenisation and greedy longest-match
split are a few dozen lines.

:class:`StaticEmbedder`'s ``id`` names the
model by the BLAKE3 digest of its matrix file, so results are deterministic for a given model.
"""

from __future__ import annotations

import json
import unicodedata
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final, Protocol

import blake3
import numpy as np
import numpy.typing as npt

from continuity.errors import ModelError
from continuity.retrieval.terms import tokenize

__all__ = [
    "Embedder",
    "HashedEmbedder",
    "QueryEmbedder",
    "StaticEmbedder",
    "WordPiece",
    "embed_queries",
    "parse_safetensors",
    "read_safetensors",
]

_DTYPES: Final[dict[str, np.dtype[Any]]] = {
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "F64": np.dtype("<f8"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
}
_HEADER_MAX: Final = 100 * 1024 * 1024


# --- the protocol, and a toy ------------------------------------------------------------------


class Embedder(Protocol):
    """Texts to unit vectors; must be deterministic. A real model is the caller's to plug in."""

    @property
    def id(self) -> str: ...

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...


# An embedder may also have ``spec``: ``("module:callable", args)`` such that
# ``callable(*args)`` makes the same embedder in another process (args: strings, numbers, such
# as its model folder). The vector cache embeds in worker processes with it (``--jobs``,
# :mod:`.embed_workers`); one without a spec embeds in the calling process.


class QueryEmbedder(Embedder, Protocol):
    """An embedder that embeds a query differently from a document (e5's ``query: `` and
    ``passage: ``, bge's query instruction): ``embed`` is for documents, ``embed_query`` for
    queries. Optional: :func:`embed_queries` falls back to ``embed``."""

    def embed_query(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...


def embed_queries(embedder: Embedder, texts: Sequence[str]) -> npt.NDArray[np.float32]:
    """Queries' vectors: the embedder's ``embed_query`` when it has one, else its ``embed``."""
    by_query = getattr(embedder, "embed_query", None)
    got = by_query(texts) if callable(by_query) else embedder.embed(texts)
    return np.asarray(got, dtype=np.float32)


class HashedEmbedder:
    """Hashed token features (signed, CRC32 buckets), L2-normalised: no model, no randomness."""

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim

    @property
    def id(self) -> str:
        return f"hashed/{self.dim}"

    @property
    def spec(self) -> tuple[str, tuple[int]]:
        return "continuity.retrieval.embedders:HashedEmbedder", (self.dim,)

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for token in tokenize(text):
                h = zlib.crc32(token.encode())
                out[row, h % self.dim] += 1.0 if (h >> 31) & 1 else -1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        unit: npt.NDArray[np.float32] = np.divide(
            out, norms, out=np.zeros_like(out), where=norms > 0
        )
        return unit


# --- safetensors ------------------------------------------------------------------------------


def read_safetensors(path: Path) -> dict[str, npt.NDArray[Any]]:
    """Every tensor of a ``.safetensors`` file, as numpy arrays (F32, F16, F64, BF16, I32,
    I64). The format: an 8-byte little-endian header length, a JSON header naming each tensor's
    dtype, shape and byte range, then the bytes."""
    return parse_safetensors(path.read_bytes(), path)


def parse_safetensors(data: bytes, path: Path) -> dict[str, npt.NDArray[Any]]:
    """:func:`read_safetensors` of a file's bytes already read (``path`` names it in errors);
    the arrays are views of ``data`` where the dtype allows (read-only)."""
    if len(data) < 8:
        raise ModelError(f"{path}: too short to be a safetensors file")
    n = int.from_bytes(data[:8], "little")
    if n > _HEADER_MAX or 8 + n > len(data):
        raise ModelError(f"{path}: its header length ({n}) does not fit the file")
    try:
        header = json.loads(data[8 : 8 + n])
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelError(f"{path}: its header is not JSON ({exc})") from None
    if not isinstance(header, dict):
        raise ModelError(f"{path}: its header is not an object")
    base = 8 + n
    out: dict[str, npt.NDArray[Any]] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            kind, shape, (begin, end) = info["dtype"], list(info["shape"]), info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise ModelError(f"{path}: tensor {name!r} is described badly: {info!r}") from None
        size = end - begin
        count = int(np.prod(shape)) if shape else 1
        if begin < 0 or size < 0 or base + end > len(data):
            raise ModelError(f"{path}: tensor {name!r} lies outside the file")
        if kind == "BF16":
            if size != count * 2:
                raise ModelError(f"{path}: tensor {name!r} has {size} bytes for {shape}")
            halves = np.frombuffer(data, "<u2", count, base + begin).astype(np.uint32) << 16
            out[name] = halves.view(np.float32).reshape(shape)
            continue
        dtype = _DTYPES.get(kind)
        if dtype is None:
            raise ModelError(f"{path}: tensor {name!r} has dtype {kind}, which is not supported")
        if size != count * dtype.itemsize:
            raise ModelError(f"{path}: tensor {name!r} has {size} bytes for {shape} {kind}")
        out[name] = np.frombuffer(data, dtype=dtype, count=count, offset=base + begin).reshape(
            shape
        )
    return out


# --- the tokenizer ---------------------------------------------------------------------------


def _is_punctuation(ch: str) -> bool:
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_chinese(cp: int) -> bool:
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2B73F
        or 0x2B740 <= cp <= 0x2B81F
        or 0x2B820 <= cp <= 0x2CEAF
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )


class WordPiece:
    """A Hugging Face ``tokenizer.json`` WordPiece tokenizer: the BERT normaliser (control
    characters dropped, whitespace made spaces, CJK characters spaced, lower case and accents
    stripped as configured), the BERT pre-tokeniser (split at whitespace; each punctuation
    character a word), then each word split greedily into the longest pieces in the vocabulary
    (``##`` before a piece inside a word); a word that cannot be split is the unknown token."""

    def __init__(self, spec: dict[str, Any]) -> None:
        model = spec.get("model") or {}
        if model.get("type") != "WordPiece":
            raise ModelError(
                f"the tokenizer is a {model.get('type')!r} model; only WordPiece is supported"
            )
        vocab = model.get("vocab")
        if not isinstance(vocab, dict) or not vocab:
            raise ModelError("the WordPiece tokenizer has no vocabulary")
        self.vocab: dict[str, int] = {str(k): int(v) for k, v in vocab.items()}
        self.unk_token: str = model.get("unk_token", "[UNK]")
        self.unk_id: int | None = self.vocab.get(self.unk_token)
        self.prefix: str = model.get("continuing_subword_prefix", "##")
        self.max_chars: int = int(model.get("max_input_chars_per_word", 100))
        norm = spec.get("normalizer") or {}
        if norm and norm.get("type") not in ("BertNormalizer", None):
            raise ModelError(f"normalizer {norm.get('type')!r} is not supported")
        self.clean_text = bool(norm.get("clean_text", True)) if norm else False
        self.chinese = bool(norm.get("handle_chinese_chars", True)) if norm else False
        self.lowercase = bool(norm.get("lowercase", True)) if norm else False
        strip = norm.get("strip_accents") if norm else False
        self.strip_accents = self.lowercase if strip is None else bool(strip)
        pre = spec.get("pre_tokenizer") or {}
        if pre.get("type") not in ("BertPreTokenizer", None):
            raise ModelError(f"pre-tokenizer {pre.get('type')!r} is not supported")

    def normalize(self, text: str) -> str:
        out: list[str] = []
        for ch in text:
            cp = ord(ch)
            if self.clean_text:
                if (
                    cp == 0
                    or cp == 0xFFFD
                    or (unicodedata.category(ch).startswith("C") and ch not in "\t\n\r")
                ):
                    continue
                if ch in "\t\n\r" or unicodedata.category(ch) == "Zs":
                    out.append(" ")
                    continue
            if self.chinese and _is_chinese(cp):
                out.append(f" {ch} ")
                continue
            out.append(ch)
        text = "".join(out)
        if self.strip_accents:
            text = "".join(
                c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn"
            )
        if self.lowercase:
            text = text.lower()
        return text

    @staticmethod
    def words(text: str) -> list[str]:
        words: list[str] = []
        current: list[str] = []
        for ch in text:
            if ch.isspace():
                if current:
                    words.append("".join(current))
                    current = []
            elif _is_punctuation(ch):
                if current:
                    words.append("".join(current))
                    current = []
                words.append(ch)
            else:
                current.append(ch)
        if current:
            words.append("".join(current))
        return words

    def _pieces(self, word: str) -> list[int]:
        if len(word) > self.max_chars:
            return [] if self.unk_id is None else [self.unk_id]
        ids: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            found: int | None = None
            while start < end:
                piece = word[start:end] if start == 0 else self.prefix + word[start:end]
                found = self.vocab.get(piece)
                if found is not None:
                    break
                end -= 1
            if found is None:
                return [] if self.unk_id is None else [self.unk_id]
            ids.append(found)
            start = end
        return ids

    def encode(self, text: str) -> list[int]:
        """The token ids of ``text`` (no special tokens added)."""
        ids: list[int] = []
        for word in self.words(self.normalize(text)):
            ids += self._pieces(word)
        return ids


# --- the embedder ----------------------------------------------------------------------------


class StaticEmbedder:
    """A model2vec model from a local folder, for :func:`~.search.search` and
    anything else that takes an :class:`Embedder`."""

    def __init__(self, folder: str | Path) -> None:
        root = Path(folder).expanduser()
        if not root.is_dir():
            raise ModelError(f"{root} is not a folder holding a model")
        matrix = next(
            (
                p
                for p in (
                    root / "model.safetensors",
                    root / "0_StaticEmbedding" / "model.safetensors",
                )
                if p.is_file()
            ),
            None,
        )
        if matrix is None:
            raise ModelError(f"{root} holds no model.safetensors")
        tok = matrix.parent / "tokenizer.json"
        if not tok.is_file():
            tok = root / "tokenizer.json"
        if not tok.is_file():
            raise ModelError(f"{root} holds no tokenizer.json")
        cfg_path = root / "config.json"
        try:
            config = json.loads(cfg_path.read_text()) if cfg_path.is_file() else {}
            spec = json.loads(tok.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ModelError(f"{root}: {exc}") from None
        tensors = read_safetensors(matrix)
        name = "embedding.weight" if "embedding.weight" in tensors else "embeddings"
        if name not in tensors or tensors[name].ndim != 2:
            raise ModelError(f"{matrix} holds no 2-dimensional 'embeddings' tensor")
        self.embeddings = tensors[name].astype(np.float32)
        self.weights = tensors["weights"].astype(np.float32) if "weights" in tensors else None
        self.mapping = tensors["mapping"].astype(np.int64) if "mapping" in tensors else None
        self.tokenizer = WordPiece(spec)
        self.normalize = bool(config.get("normalize", True))
        raw_max = config.get("max_length", 512)
        self.max_length: int | None = None if raw_max is None else int(raw_max)
        self.spec = ("continuity.retrieval.embedders:StaticEmbedder", (str(root.absolute()),))
        """How a worker process makes it again (:mod:`.embed_workers`)."""
        self._id = f"static/{root.name}/{blake3.blake3(matrix.read_bytes()).hexdigest()[:16]}"
        rows = self.embeddings.shape[0]
        top = max(self.tokenizer.vocab.values())
        if self.mapping is None and top >= rows:
            raise ModelError(f"{root}: the vocabulary names row {top}, the matrix has {rows}")

    @property
    def id(self) -> str:
        return self._id

    # The embedder kind "static" (continuity.retrieval.models.EMBEDDERS, ADR 0047):

    @classmethod
    def recognises(cls, folder: Path) -> bool:
        """Whether ``folder`` looks like a model2vec model: a ``model.safetensors`` (or
        ``0_StaticEmbedding/model.safetensors``). Its layout has no marker of its own, so
        :func:`~.models.load_folder` tries this kind last, as the fallback."""
        return (folder / "model.safetensors").is_file() or (
            folder / "0_StaticEmbedding" / "model.safetensors"
        ).is_file()

    @classmethod
    def from_folder(cls, folder: Path, *, engine: str | None = None) -> StaticEmbedder:
        """The model in ``folder`` (``engine`` does not apply: numpy alone)."""
        del engine
        return cls(folder)

    @property
    def dim(self) -> int:
        return int(self.embeddings.shape[1])

    def token_ids(self, text: str) -> list[int]:
        """The ids a text's vector is the mean of: unknown tokens left out, at most
        ``max_length`` (model2vec's own rule)."""
        ids = self.tokenizer.encode(text)
        if self.max_length is not None:
            ids = ids[: self.max_length]
        unk = self.tokenizer.unk_id
        return [i for i in ids if i != unk] if unk is not None else ids

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            ids = self.token_ids(text)
            if not ids:
                continue
            index = np.asarray(ids, dtype=np.int64)
            rows = self.embeddings[self.mapping[index] if self.mapping is not None else index]
            if self.weights is not None:
                rows = rows * self.weights[index][:, None]
            out[row] = rows.mean(axis=0)
        if self.normalize:
            norms = np.linalg.norm(out, axis=1, keepdims=True)
            out = np.divide(out, norms, out=np.zeros_like(out), where=norms > 0)
        return out
