"""A contextual sentence encoder: a BERT-family model (all-MiniLM-L6-v2, e5-small-v2,
bge-small-en-v1.5, ...) run in numpy alone, behind the :class:`~.embedders.Embedder` protocol.

A model is a sentence-transformers folder: ``config.json`` (a ``bert`` configuration: layers,
heads, sizes, ``layer_norm_eps``), ``model.safetensors`` (the encoder's weights, with or without
a ``bert.`` prefix), ``tokenizer.json`` (WordPiece: :class:`~.embedders.WordPiece`), and
optionally ``1_Pooling/config.json`` (mean or CLS pooling), ``sentence_bert_config.json``
(``max_seq_length``) and ``config_sentence_transformers.json`` (``prompts``: the text put before
a query or a document). Without those, a model named like e5 reads ``query: `` / ``passage: ``
and mean-pools, one named like bge puts its retrieval instruction before queries and takes the
CLS token; anything else mean-pools with no prefix. Vectors are always L2-normalised.

The forward pass is the encoder's own: embeddings (word + position + token type, layer-normed),
then per layer self-attention (a padding mask), a residual and layer norm, a GELU feed-forward
(the exact erf GELU, erf by Abramowitz & Stegun 7.1.26, error < 1.5e-7), a residual and layer
norm. Texts are sorted by length and run in batches of similar length, so padding costs little;
everything is float32 (BLAS matrix products).

A text longer than the model reads (``max_seq_length`` tokens with its [CLS] and [SEP]) is cut
there (``windows="first"``, the default, what sentence-transformers does), or into overlapping
windows whose vectors' mean (re-normalised) is its vector (``windows="mean"``);
:meth:`BertEmbedder.embed_windows` gives every window's vector, for a caller that keeps the best
window's score. On the labelled set's dev split the first window measured best (fused recall@5
0.605, the best window's score 0.605, the mean 0.512; issue 31), and costs the least.

The forward pass runs in numpy, or in onnxruntime (:mod:`.bert_onnx`, the optional ``onnx``
extra: a graph built from the same weights, about 1.5x the documents a CPU-second) — ``engine``
(else ``$CONTINUITY_ENGINE``, else ``auto``: onnxruntime when the extra is installed). Both give
the same vectors (cosine >= 0.9999) and the same ``id``: a store's vector cache is valid whichever
ran it. ``onnx-int8`` (int8 weights, about 2.5x) gives vectors of their own (cosine 0.98-0.99 with
fp32's, varying with the batch) and an id of its own (``-int8``): for measurement only.

The ``id`` (``bert/<layers>x<dim>/<weights digest>/<pooling>-<settings digest>``) names the
model by the BLAKE3 digest of its weights file, its pooling, its prefixes, its length and its
window rule, not by its folder's name: the same model imported under two names shares its
vectors, and vectors from one id are never mixed with another's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, Literal

import blake3
import numpy as np
import numpy.typing as npt

from continuity.errors import ModelError
from continuity.retrieval.embedders import WordPiece, parse_safetensors

__all__ = [
    "BGE_QUERY_INSTRUCTION",
    "ENGINES",
    "BertEmbedder",
    "bert_embedder",
    "gelu",
    "is_bert_folder",
]

BGE_QUERY_INSTRUCTION: Final = "Represent this sentence for searching relevant passages: "
WindowRule = Literal["mean", "first"]
ENGINES: Final = ("auto", "numpy", "onnx", "onnx-int8")
"""``auto``: onnxruntime when the ``onnx`` extra is installed, else numpy. ``onnx-int8`` is for
measurement (tools/bench/bench_encoder.py): its activations are quantised per batch, so a
document's vector depends on what it was batched with, and its dev recall@5 measured 0.581
against fp32's 0.605 (ADR 0042); never chosen unless named."""
_TOKEN_BUDGET: Final = 2048
"""A batch holds at most this many tokens (numpy; onnxruntime's batches are smaller, padded:
:data:`~.bert_onnx.TOKEN_BUDGET`)."""
_MAX_WINDOWS: Final = 16
_GELU_BLOCK: Final = 1 << 16
"""Elements of a block GELU works on at a time (a few hundred kB: in cache)."""
F32 = npt.NDArray[np.float32]


def gelu(x: F32) -> F32:
    """The exact GELU, ``x Φ(x) = x (1 + erf(x / √2)) / 2``, erf by Abramowitz & Stegun
    7.1.26 (absolute error below 1.5e-7), in float32, in place on small blocks of rows (large
    temporaries cost more in page faults than the arithmetic)."""
    out = np.empty_like(x)
    flat = x.reshape(-1, x.shape[-1]) if x.ndim > 1 else x.reshape(1, -1)
    dest = out.reshape(flat.shape)
    rows = max(1, _GELU_BLOCK // max(1, flat.shape[1]))
    for s in range(0, flat.shape[0], rows):
        c = flat[s : s + rows]
        z = np.abs(c)
        z *= np.float32(0.7071067811865476)
        np.minimum(z, np.float32(6.0), out=z)  # erf is 1 in float32 beyond; exp stays normal
        t = z * np.float32(0.3275911)
        t += np.float32(1.0)
        np.reciprocal(t, out=t)
        poly = t * np.float32(1.061405429)
        for a in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
            poly += np.float32(a)
            poly *= t
        z *= z
        np.negative(z, out=z)
        np.exp(z, out=z)
        poly *= z  # 1 - erf(|x| / √2)
        np.subtract(np.float32(1.0), poly, out=poly)
        np.copysign(poly, c, out=poly)  # erf(x / √2)
        poly += np.float32(1.0)
        poly *= c
        np.multiply(poly, np.float32(0.5), out=dest[s : s + rows])
    return out


def _layer_norm(x: F32, w: F32, b: F32, eps: float) -> F32:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(axis=-1, keepdims=True)
    out: F32 = centred / np.sqrt(var + np.float32(eps)) * w + b
    return out


def _json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        got = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelError(f"{path}: {exc}") from None
    if not isinstance(got, dict):
        raise ModelError(f"{path}: not a JSON object")
    return got


def is_bert_folder(folder: Path) -> bool:
    """Whether ``folder`` holds a BERT-family encoder (its ``config.json`` names one)."""
    config = _json(folder / "config.json")
    return config.get("model_type") in ("bert",) or any(
        "Bert" in str(a) for a in config.get("architectures") or []
    )


class _Layer:
    def __init__(self, t: dict[str, F32], p: str) -> None:
        self.qkv_w = np.ascontiguousarray(
            np.concatenate(
                [t[f"{p}attention.self.{n}.weight"] for n in ("query", "key", "value")]
            ).T
        )
        self.qkv_b = np.concatenate(
            [t[f"{p}attention.self.{n}.bias"] for n in ("query", "key", "value")]
        )
        self.out_w = np.ascontiguousarray(t[f"{p}attention.output.dense.weight"].T)
        self.out_b = t[f"{p}attention.output.dense.bias"]
        self.ln1 = (
            t[f"{p}attention.output.LayerNorm.weight"],
            t[f"{p}attention.output.LayerNorm.bias"],
        )
        self.up_w = np.ascontiguousarray(t[f"{p}intermediate.dense.weight"].T)
        self.up_b = t[f"{p}intermediate.dense.bias"]
        self.down_w = np.ascontiguousarray(t[f"{p}output.dense.weight"].T)
        self.down_b = t[f"{p}output.dense.bias"]
        self.ln2 = (t[f"{p}output.LayerNorm.weight"], t[f"{p}output.LayerNorm.bias"])


class BertEmbedder:
    """A BERT-family sentence encoder from a local folder, in numpy alone.

    ``embed`` embeds documents (with the model's document prefix), ``embed_query`` queries
    (with its query prefix); ``query_prefix``, ``document_prefix`` and ``pooling``
    (``"mean"`` or ``"cls"``) override what the folder says; ``max_tokens`` reads fewer tokens
    than the model's ``max_seq_length`` (a window's length, [CLS] and [SEP] included)."""

    def __init__(
        self,
        folder: str | Path,
        *,
        query_prefix: str | None = None,
        document_prefix: str | None = None,
        pooling: str | None = None,
        windows: WindowRule = "first",
        stride: float = 0.75,
        max_tokens: int | None = None,
        engine: str | None = None,
    ) -> None:
        root = Path(folder).expanduser()
        if not root.is_dir():
            raise ModelError(f"{root} is not a folder holding a model")
        self.root = root
        for needed in ("config.json", "model.safetensors", "tokenizer.json"):
            if not (root / needed).is_file():
                raise ModelError(f"{root} holds no {needed}")
        config = _json(root / "config.json")
        self._config(config, root)
        self.tokenizer = WordPiece(_json(root / "tokenizer.json"))
        self.cls_id = self._special("[CLS]")
        self.sep_id = self._special("[SEP]")
        self.max_tokens = self._max_tokens(root, config)
        if max_tokens is not None:  # fewer tokens, faster (128: 50 docs/CPU-s, a little worse)
            self.max_tokens = max(8, min(self.max_tokens, max_tokens))
        name = f"{root.name} {config.get('_name_or_path', '')}".lower()
        self.pooling = pooling or self._pooling(root, name)
        if self.pooling not in ("mean", "cls"):
            raise ModelError(f"{root}: pooling {self.pooling!r} is not mean or cls")
        q, d = self._prefixes(root, name)
        self.query_prefix = q if query_prefix is None else query_prefix
        self.document_prefix = d if document_prefix is None else document_prefix
        if windows not in ("mean", "first"):
            raise ModelError(f"window rule {windows!r} is not mean or first")
        self.windows: WindowRule = windows
        self.stride = stride
        weights = root / "model.safetensors"
        # Only the file's header and its digest here: the tensors are read when a text is
        # first encoded (`model show`, `model use` and a store's settings never pay for them)
        self._weights_path = weights
        self._loaded = False
        self._check_shapes(_tensor_shapes(weights), root)
        digest = _file_digest(weights)
        self.weights_digest = digest
        self.engine = self._engine(engine)
        settings = f"{self.pooling}|{self.query_prefix}|{self.document_prefix}|{self.max_tokens}"
        settings += f"|{windows}|{stride}"
        if (query_prefix, document_prefix, pooling, windows, stride, max_tokens) == (
            None,
            None,
            None,
            "first",
            0.75,
            None,
        ):
            # the vector cache's workers make the same encoder again from this (--jobs)
            self.spec = (
                "continuity.retrieval.bert:bert_embedder",
                (str(root.absolute()), self.engine),
            )
        tag = blake3.blake3(settings.encode()).hexdigest()[:8]
        shape = f"{self.n_layers}x{self.hidden}"
        self._id = f"bert/{shape}/{digest}/{self.pooling}-{tag}"
        if self.engine == "onnx-int8":  # not the same vectors: its own cache (ADR 0042)
            self._id += "-int8"

    # The embedder kind "bert" (continuity.retrieval.models.EMBEDDERS, ADR 0047):

    @classmethod
    def recognises(cls, folder: Path) -> bool:
        """Whether ``folder`` holds a model of this kind (its ``config.json`` names a
        BERT-family encoder: :func:`is_bert_folder`)."""
        return folder.is_dir() and is_bert_folder(folder)

    @classmethod
    def from_folder(cls, folder: Path, *, engine: str | None = None) -> BertEmbedder:
        """The encoder in ``folder``, run by ``engine`` (see :data:`ENGINES`)."""
        return cls(folder, engine=engine)

    def _engine(self, chosen: str | None) -> str:
        """The engine that runs the forward pass: ``chosen``, else ``$CONTINUITY_ENGINE``,
        else ``auto`` (onnxruntime when the ``onnx`` extra is installed, else numpy). Nothing
        is built here: the weights are read, and an onnxruntime session made, at the first
        encode (:meth:`_first_run`)."""
        import os

        name = chosen or os.environ.get("CONTINUITY_ENGINE") or "auto"
        if name not in ENGINES:
            raise ModelError(f"engine {name!r} is not one of {', '.join(ENGINES)}")
        from continuity.retrieval import bert_onnx

        self._adaptive = name == "auto" and bert_onnx.available()
        if name == "auto":
            name = "onnx" if self._adaptive else "numpy"
        if name != "numpy" and not bert_onnx.available():
            from continuity._install import install_line

            raise ModelError(f"engine {name} needs onnx and onnxruntime ({install_line('onnx')})")
        self._run: Callable[[Sequence[Sequence[int]]], F32] = self._first_run
        numpy_first = name == "numpy" or self._adaptive
        self._budget = _TOKEN_BUDGET if numpy_first else bert_onnx.TOKEN_BUDGET
        return name

    def _first_run(self, seqs: Sequence[Sequence[int]]) -> F32:
        """Read the weights, set the engine's runner, and run it."""
        self._load_weights()
        if self.engine == "numpy":
            self._run = self._forward
        elif self._adaptive:
            self._run = self._numpy_until_onnx_pays
        else:
            self._start_onnx()
        return self._run(seqs)

    def _start_onnx(self) -> None:
        from continuity.retrieval import bert_onnx

        self._run = bert_onnx.OnnxEncoder(self, quantized=self.engine == "onnx-int8")
        self._budget = bert_onnx.TOKEN_BUDGET

    def _numpy_until_onnx_pays(self, seqs: Sequence[Sequence[int]]) -> F32:
        """``auto`` with onnxruntime there: numpy until the CPU it has spent encoding reaches
        what reading the weights cost, then an onnxruntime session from then on. Building the
        session reads the same weights again (its graph holds them), so that is its cost's
        measure: a query or a few documents (a fresh process's one search) never pay for a
        session that would not win back its build, and a long run pays at most about twice
        what the better choice, known ahead, would have (the rent-or-buy rule). The vectors
        are the same either way (fp32), as is the id."""
        import time

        started = time.process_time()
        out = self._forward(seqs)
        self._numpy_cpu += time.process_time() - started
        if self._numpy_cpu >= self._load_cpu:
            self._start_onnx()
        return out

    def _load_weights(self) -> None:
        """The tensors, read once (what :meth:`_check_shapes` saw in the header)."""
        if self._loaded:
            return
        import time

        started = time.process_time()
        weights = self._weights_path
        try:
            data = weights.read_bytes()
        except OSError as exc:
            raise ModelError(f"{weights}: {exc.strerror or exc}") from None
        if _digest(data) != self.weights_digest:
            raise ModelError(f"{weights} changed since the model was opened")
        self._load(parse_safetensors(data, weights), self.root)
        self._loaded = True
        self._load_cpu = time.process_time() - started
        self._numpy_cpu = 0.0

    # --- loading ---------------------------------------------------------------------------

    def _config(self, config: dict[str, Any], root: Path) -> None:
        try:
            self.hidden = int(config["hidden_size"])
            self.heads = int(config["num_attention_heads"])
            self.n_layers = int(config["num_hidden_layers"])
            self.eps = float(config.get("layer_norm_eps", 1e-12))
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelError(f"{root}/config.json lacks a BERT setting ({exc})") from None
        act = config.get("hidden_act", "gelu")
        if act not in ("gelu", "gelu_new", "gelu_python"):
            raise ModelError(f"{root}: activation {act!r} is not supported (gelu only)")
        if config.get("position_embedding_type", "absolute") != "absolute":
            raise ModelError(f"{root}: only absolute position embeddings are supported")
        if self.hidden % self.heads:
            raise ModelError(f"{root}: {self.hidden} dimensions do not split in {self.heads} heads")
        self.head_dim = self.hidden // self.heads
        self.max_positions = int(config.get("max_position_embeddings", 512))

    def _special(self, token: str) -> int:
        found = self.tokenizer.vocab.get(token)
        if found is None:
            raise ModelError(f"{self.root}: the vocabulary has no {token}")
        return found

    def _max_tokens(self, root: Path, config: dict[str, Any]) -> int:
        st = _json(root / "sentence_bert_config.json").get("max_seq_length")
        chosen = int(st) if st else int(config.get("max_position_embeddings", 512))
        return max(8, min(chosen, int(config.get("max_position_embeddings", 512))))

    @staticmethod
    def _pooling(root: Path, name: str) -> str:
        pool = _json(root / "1_Pooling" / "config.json")
        if pool.get("pooling_mode_cls_token"):
            return "cls"
        if pool.get("pooling_mode_mean_tokens"):
            return "mean"
        if pool:
            raise ModelError(f"{root}/1_Pooling/config.json asks for a pooling other than mean/cls")
        return "cls" if "bge" in name else "mean"

    @staticmethod
    def _prefixes(root: Path, name: str) -> tuple[str, str]:
        prompts = _json(root / "config_sentence_transformers.json").get("prompts") or {}
        if isinstance(prompts, dict) and prompts:
            query = str(prompts.get("query", ""))
            doc = str(prompts.get("passage", prompts.get("document", prompts.get("doc", ""))))
            return query, doc
        if re.search(r"(^|[^a-z0-9])e5([^a-z0-9]|$)|multilingual-e5", name):
            return "query: ", "passage: "
        if "bge" in name and "-en" in name:
            return BGE_QUERY_INSTRUCTION, ""
        return "", ""

    def _check_shapes(self, shapes: dict[str, list[int]], root: Path) -> None:
        """What :meth:`_load` would refuse, seen in the weights file's header alone: no BERT
        embeddings, a missing tensor, a width or a vocabulary the config does not match; and
        the model's length as its position embeddings bound it."""
        prefix = _prefix(shapes, root)
        needed = [
            "embeddings.word_embeddings.weight",
            "embeddings.position_embeddings.weight",
            "embeddings.LayerNorm.weight",
            "embeddings.LayerNorm.bias",
        ]
        for i in range(self.n_layers):
            needed += [f"encoder.layer.{i}.{n}" for n in _LAYER_TENSORS]
        for name in needed:
            if prefix + name not in shapes:
                raise ModelError(f"{root}/model.safetensors lacks tensor {name!r}")
        word = shapes[prefix + "embeddings.word_embeddings.weight"]
        if len(word) != 2 or word[1] != self.hidden:
            raise ModelError(f"{root}: embeddings of {word[1:]}, config says {self.hidden}")
        top = max(self.tokenizer.vocab.values())
        if top >= word[0]:
            raise ModelError(f"{root}: the vocabulary names row {top}, the model has {word[0]}")
        position = shapes[prefix + "embeddings.position_embeddings.weight"]
        self.max_tokens = min(self.max_tokens, int(position[0]))

    def _load(self, tensors: dict[str, npt.NDArray[Any]], root: Path) -> None:
        prefix = _prefix(tensors, root)
        t = {
            k[len(prefix) :]: v.astype(np.float32)
            for k, v in tensors.items()
            if k.startswith(prefix)
        }
        try:
            self.word = t["embeddings.word_embeddings.weight"]
            self.position = t["embeddings.position_embeddings.weight"]
            types = t.get("embeddings.token_type_embeddings.weight")
            self.type0 = types[0] if types is not None else np.zeros(self.hidden, np.float32)
            self.ln0 = (t["embeddings.LayerNorm.weight"], t["embeddings.LayerNorm.bias"])
            self.layers = [_Layer(t, f"encoder.layer.{i}.") for i in range(self.n_layers)]
        except KeyError as exc:
            raise ModelError(f"{root}/model.safetensors lacks tensor {exc}") from None
        if self.word.shape[1] != self.hidden:
            raise ModelError(
                f"{root}: embeddings of {self.word.shape[1]}, config says {self.hidden}"
            )
        top = max(self.tokenizer.vocab.values())
        if top >= self.word.shape[0]:
            raise ModelError(
                f"{root}: the vocabulary names row {top}, the model has {len(self.word)}"
            )
        self.max_tokens = min(self.max_tokens, int(self.position.shape[0]))

    # --- the protocol ----------------------------------------------------------------------

    @property
    def id(self) -> str:
        return self._id

    @property
    def dim(self) -> int:
        return self.hidden

    @property
    def per_use(self) -> bool:
        """Whether the engine is chosen per use (``auto`` with onnxruntime there): numpy for a
        query or a few texts, onnxruntime once a run is long enough to win its session back."""
        return self._adaptive

    def embed(self, texts: Sequence[str]) -> F32:
        """Documents' unit vectors (the document prefix before each); a long text's is the
        mean of its windows' (or its first window's, as the window rule says)."""
        return self._pooled(texts, self.document_prefix, self.windows)

    def embed_query(self, texts: Sequence[str]) -> F32:
        """Queries' unit vectors (the query prefix before each; a long query is cut to the
        model's length)."""
        return self._pooled(texts, self.query_prefix, "first")

    def embed_windows(self, texts: Sequence[str]) -> tuple[F32, npt.NDArray[np.int64]]:
        """Every window of every document: (unit vectors [windows, dim], the text each row
        belongs to)."""
        seqs, owner = self._windows(texts, self.document_prefix, every=True)
        return self._encode(seqs), np.asarray(owner, dtype=np.int64)

    # --- tokens and windows ----------------------------------------------------------------

    def token_ids(self, text: str, prefix: str = "") -> list[int]:
        """A text's WordPiece ids, the prefix's first, without [CLS] and [SEP]."""
        return self.tokenizer.encode(prefix + text) if prefix else self.tokenizer.encode(text)

    def _windows(
        self, texts: Sequence[str], prefix: str, *, every: bool
    ) -> tuple[list[list[int]], list[int]]:
        head = self.tokenizer.encode(prefix) if prefix else []
        room = max(1, self.max_tokens - 2 - len(head))
        step = max(1, int(room * self.stride))
        seqs: list[list[int]] = []
        owner: list[int] = []
        for i, text in enumerate(texts):
            body = self.tokenizer.encode(text)
            starts = range(0, max(1, len(body) - room + step), step) if every else range(1)
            for n, start in enumerate(starts):
                if n >= _MAX_WINDOWS:
                    break
                seqs.append([self.cls_id, *head, *body[start : start + room], self.sep_id])
                owner.append(i)
        return seqs, owner

    def _pooled(self, texts: Sequence[str], prefix: str, rule: WindowRule) -> F32:
        seqs, owner = self._windows(texts, prefix, every=rule == "mean")
        vectors = self._encode(seqs)
        if len(seqs) == len(texts):
            return vectors
        out = np.zeros((len(texts), self.hidden), np.float32)
        np.add.at(out, np.asarray(owner), vectors)
        return _unit(out)

    # --- the forward pass ------------------------------------------------------------------

    def _encode(self, seqs: Sequence[Sequence[int]]) -> F32:
        """Unit vectors of token sequences (each with its [CLS] and [SEP]), in batches of
        similar length."""
        out = np.zeros((len(seqs), self.hidden), np.float32)
        order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
        start = 0
        while start < len(order):
            longest = len(seqs[order[start]])
            end = start + 1
            while end < len(order):
                longest = len(seqs[order[end]])
                if longest * (end - start + 1) > self._budget:
                    break
                end += 1
            chosen = order[start:end]
            out[chosen] = self._run([seqs[i] for i in chosen])
            start = end
        return _unit(out)

    def _forward(self, seqs: Sequence[Sequence[int]]) -> F32:
        """Pooled (not yet normalised) vectors of token sequences, packed: the linear layers
        run over every token of the batch at once, attention one sequence at a time over its
        own length (no padding anywhere, and each sequence's scores stay in cache)."""
        lengths = np.asarray([len(s) for s in seqs], dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        ids = np.fromiter((t for s in seqs for t in s), dtype=np.int64, count=int(lengths.sum()))
        positions = np.concatenate([np.arange(n) for n in lengths])
        x = self.word[ids] + self.position[positions] + self.type0
        x = _layer_norm(x, *self.ln0, self.eps)
        for layer in self.layers:
            qkv = (x @ layer.qkv_w + layer.qkv_b).reshape(-1, 3, self.heads, self.head_dim)
            ctx = self._attention(qkv, starts, lengths)
            x = _layer_norm(ctx @ layer.out_w + layer.out_b + x, *layer.ln1, self.eps)
            h = gelu(x @ layer.up_w + layer.up_b)
            x = _layer_norm(h @ layer.down_w + layer.down_b + x, *layer.ln2, self.eps)
        if self.pooling == "cls":
            pooled: F32 = x[starts]
        else:
            pooled = (np.add.reduceat(x, starts, axis=0) / lengths[:, None]).astype(np.float32)
        return pooled.astype(np.float32, copy=False)

    def _attention(
        self, qkv: F32, starts: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64]
    ) -> F32:
        ctx = np.empty((qkv.shape[0], self.hidden), np.float32)
        scale = np.float32(1.0 / np.sqrt(self.head_dim))
        for o, n in zip(starts.tolist(), lengths.tolist(), strict=True):
            block = qkv[o : o + n]
            q = np.ascontiguousarray(block[:, 0].transpose(1, 0, 2))
            q *= scale
            k = np.ascontiguousarray(block[:, 1].transpose(1, 0, 2))
            v = np.ascontiguousarray(block[:, 2].transpose(1, 0, 2))
            scores = np.matmul(q, k.transpose(0, 2, 1))
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            ctx[o : o + n] = np.matmul(scores, v).transpose(1, 0, 2).reshape(n, self.hidden)
        return ctx


_LAYER_TENSORS: Final = tuple(
    f"{part}.{wb}"
    for part in (
        "attention.self.query",
        "attention.self.key",
        "attention.self.value",
        "attention.output.dense",
        "attention.output.LayerNorm",
        "intermediate.dense",
        "output.dense",
        "output.LayerNorm",
    )
    for wb in ("weight", "bias")
)
_HASH_CHUNK: Final = 1 << 20


def _prefix(tensors: dict[str, Any], root: Path) -> str:
    for p in ("", "bert.", "model."):
        if f"{p}embeddings.word_embeddings.weight" in tensors:
            return p
    raise ModelError(f"{root}/model.safetensors holds no BERT embeddings")


def _tensor_shapes(path: Path) -> dict[str, list[int]]:
    """Each tensor's shape, from a safetensors file's header (8 bytes of its length, then
    JSON), without reading the tensors."""
    try:
        with path.open("rb") as f:
            head = f.read(8)
            n = int.from_bytes(head, "little") if len(head) == 8 else -1
            if n < 0 or n > 100 << 20:
                raise ModelError(f"{path}: not a safetensors file")
            header = json.loads(f.read(n))
    except OSError as exc:
        raise ModelError(f"{path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelError(f"{path}: its header is not JSON ({exc})") from None
    if not isinstance(header, dict):
        raise ModelError(f"{path}: its header is not an object")
    shapes: dict[str, list[int]] = {}
    for name, info in header.items():
        if name != "__metadata__" and isinstance(info, dict):
            shape = info.get("shape")
            if isinstance(shape, list) and all(isinstance(d, int) for d in shape):
                shapes[name] = shape
    return shapes


def _digest(data: bytes) -> str:
    # one thread: a multithreaded hash leaves a thread pool that a forked --jobs worker would
    # wait on for ever (it hashes the weights again)
    return blake3.blake3(data).hexdigest()[:16]


def _file_digest(path: Path) -> str:
    """:func:`_digest` of a file's bytes, read a chunk at a time (not held in memory)."""
    h = blake3.blake3()
    try:
        with path.open("rb") as f:
            while chunk := f.read(_HASH_CHUNK):
                h.update(chunk)
    except OSError as exc:
        raise ModelError(f"{path}: {exc.strerror or exc}") from None
    return h.hexdigest()[:16]


def bert_embedder(folder: str, engine: str | None = None) -> BertEmbedder:
    """A worker's encoder (an embedder's spec): the folder's model run by ``engine``."""
    return BertEmbedder(folder, engine=engine)


def _unit(x: F32) -> F32:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    out: F32 = np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)
    return out
