"""The sentence encoder's forward pass run by onnxruntime (the optional ``onnx`` extra): the
same model as :class:`~.bert.BertEmbedder`'s numpy pass, about twice as fast a CPU-second.

No ONNX file is downloaded: the graph is built here from the weights the numpy encoder loaded
(``model.safetensors``), with the ``onnx`` package's helpers (opset 17): the word, position and
token-type embeddings (Gather, Slice, Add) and a LayerNormalization; per layer the query, key
and value projections (MatMul, Add), attention per head (Reshape, Transpose, MatMul, a scale,
the padding mask added, Softmax, MatMul), the output projection, a residual and
LayerNormalization, the feed-forward with the exact GELU (``x (1 + Erf(x / √2)) / 2``), a
residual and LayerNormalization; then the pooling (the mask-weighted mean of the tokens, or the
[CLS] token). Inputs: ``input_ids`` (int64 [batch, tokens]) and ``mask`` (float32, 1 for a
token, 0 for padding); output: ``pooled`` (float32 [batch, hidden], not normalised).

The graph is converted once per model into ``<models home>/.onnx/<key>.onnx`` (``key``: the
BLAKE3 digest of the weights' digest, the graph's settings and this module's graph version),
written atomically (a temporary file renamed: parallel workers converting at once each rename
a whole file), and read from there after. Without a writable models home the graph is built in
memory each time (a second or so).

A session runs one thread (``intra_op_num_threads=1``): the vector cache's ``--jobs`` workers
are the parallelism, one process a core.

This module is imported only when a model is loaded with the onnx engine; ``import
continuity`` and the hook path never import onnx or onnxruntime.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final, Protocol

import blake3
import numpy as np
import numpy.typing as npt

from continuity.errors import ModelError

__all__ = [
    "GRAPH_VERSION",
    "TOKEN_BUDGET",
    "OnnxEncoder",
    "available",
    "build_graph",
    "graph_path",
]

GRAPH_VERSION: Final = "1"
"""Bumped when the graph :func:`build_graph` makes changes (old converted files are ignored)."""
OPSET: Final = 17
TOKEN_BUDGET: Final = 1
"""A batch holds at most this many tokens, and always one sequence: so one sequence a run,
never padded. Padded batches (512 tokens measured fastest: 46-47 docs/CPU-s against 44-45 one
at a time) made a document's vector depend on what it was batched with (39 of 41 texts differed
in their last bits alone and together), and the vector cache must hold the same bytes whether it
was caught up thread by thread or made in one go (ADR 0042)."""
F32 = npt.NDArray[np.float32]


class LayerWeights(Protocol):
    qkv_w: F32
    qkv_b: F32
    out_w: F32
    out_b: F32
    ln1: tuple[F32, F32]
    up_w: F32
    up_b: F32
    down_w: F32
    down_b: F32
    ln2: tuple[F32, F32]


class EncoderWeights(Protocol):
    """What the graph is built from: a loaded :class:`~.bert.BertEmbedder`."""

    hidden: int
    heads: int
    head_dim: int
    n_layers: int
    eps: float
    pooling: str
    weights_digest: str
    word: F32
    position: F32
    type0: F32
    ln0: tuple[F32, F32]

    @property
    def layers(self) -> Sequence[LayerWeights]: ...


def available() -> bool:
    """Whether onnx and onnxruntime can be imported (the ``onnx`` extra is installed)."""
    return all(importlib.util.find_spec(m) is not None for m in ("onnx", "onnxruntime"))


def _key(w: EncoderWeights) -> str:
    settings = f"{GRAPH_VERSION}|{OPSET}|{w.weights_digest}|{w.pooling}|{w.eps!r}"
    settings += f"|{w.hidden}|{w.heads}|{w.n_layers}"
    return blake3.blake3(settings.encode()).hexdigest()[:24]


def graph_path(w: EncoderWeights, home: Path | None = None) -> Path:
    """Where the model's converted graph is kept."""
    from continuity.paths import models_home

    return (home or models_home()) / ".onnx" / f"{_key(w)}.onnx"


class _Graph:
    """A graph under construction: nodes, initializers, fresh names."""

    def __init__(self) -> None:
        import onnx

        self.helper = onnx.helper
        self.numpy_helper = onnx.numpy_helper
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self.n = 0
        self.activations: list[str] = []
        """MatMuls of two activations (attention's): int8 quantisation leaves them in fp32."""

    def const(self, value: npt.ArrayLike, dtype: Any = np.float32) -> str:
        self.n += 1
        name = f"c{self.n}"
        self.inits.append(self.numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def op(self, kind: str, *inputs: str, **attrs: Any) -> str:
        self.n += 1
        out = f"t{self.n}"
        self.nodes.append(self.helper.make_node(kind, list(inputs), [out], name=out, **attrs))
        return out

    def linear(self, x: str, w: F32, b: F32) -> str:
        return self.op("Add", self.op("MatMul", x, self.const(w)), self.const(b))

    def layer_norm(self, x: str, wb: tuple[F32, F32], eps: float) -> str:
        return self.op(
            "LayerNormalization", x, self.const(wb[0]), self.const(wb[1]), axis=-1, epsilon=eps
        )


def _attention(g: _Graph, w: EncoderWeights, x: str, layer: LayerWeights, bias: str) -> str:
    h = w.hidden
    heads = g.const([0, 0, w.heads, w.head_dim], np.int64)
    q, k, v = (
        g.op(
            "Reshape",
            g.linear(x, layer.qkv_w[:, i * h : (i + 1) * h], layer.qkv_b[i * h :][:h]),
            heads,
        )
        for i in range(3)
    )
    q = g.op("Transpose", q, perm=[0, 2, 1, 3])  # [batch, heads, tokens, head_dim]
    k = g.op("Transpose", k, perm=[0, 2, 3, 1])  # [batch, heads, head_dim, tokens]
    v = g.op("Transpose", v, perm=[0, 2, 1, 3])
    qk = g.op("MatMul", q, k)
    scores = g.op("Mul", qk, g.const(1.0 / np.sqrt(w.head_dim)))
    probs = g.op("Softmax", g.op("Add", scores, bias), axis=-1)
    pv = g.op("MatMul", probs, v)
    g.activations += [qk, pv]
    ctx = g.op("Transpose", pv, perm=[0, 2, 1, 3])
    return g.op("Reshape", ctx, g.const([0, 0, h], np.int64))


def _gelu(g: _Graph, x: str) -> str:
    erf = g.op("Erf", g.op("Mul", x, g.const(np.float32(0.7071067811865476))))
    return g.op("Mul", g.op("Mul", x, g.op("Add", erf, g.const(1.0))), g.const(0.5))


def build_graph(w: EncoderWeights) -> Any:
    """The encoder as an ONNX ModelProto (see the module's docstring)."""
    return _build(w, _Graph())


def _build(w: EncoderWeights, g: _Graph) -> Any:
    import onnx

    tokens = g.op("Shape", "input_ids", start=1, end=2)
    positions = g.op("Slice", g.const(w.position), g.const([0], np.int64), tokens)
    x = g.op("Add", g.op("Gather", g.const(w.word), "input_ids"), positions)
    x = g.layer_norm(g.op("Add", x, g.const(w.type0)), w.ln0, w.eps)
    # the padding mask made additive, [batch, 1, 1, tokens]: 0 for a token, -1e9 for padding
    masked = g.op("Mul", g.op("Sub", g.const(1.0), "mask"), g.const(-1e9))
    bias = g.op("Unsqueeze", masked, g.const([1, 2], np.int64))
    for layer in w.layers:
        ctx = _attention(g, w, x, layer, bias)
        x = g.layer_norm(g.op("Add", g.linear(ctx, layer.out_w, layer.out_b), x), layer.ln1, w.eps)
        up = _gelu(g, g.linear(x, layer.up_w, layer.up_b))
        x = g.layer_norm(g.op("Add", g.linear(up, layer.down_w, layer.down_b), x), layer.ln2, w.eps)
    if w.pooling == "cls":
        pooled = g.op("Gather", x, g.const(0, np.int64), axis=1)
    else:
        weights = g.op("Unsqueeze", "mask", g.const([2], np.int64))
        total = g.op("ReduceSum", g.op("Mul", x, weights), g.const([1], np.int64), keepdims=0)
        count = g.op("ReduceSum", "mask", g.const([1], np.int64), keepdims=1)
        pooled = g.op("Div", total, count)
    g.nodes.append(onnx.helper.make_node("Identity", [pooled], ["pooled"]))
    graph = onnx.helper.make_graph(
        g.nodes,
        "continuity-bert",
        [
            onnx.helper.make_tensor_value_info("input_ids", onnx.TensorProto.INT64, ["b", "t"]),
            onnx.helper.make_tensor_value_info("mask", onnx.TensorProto.FLOAT, ["b", "t"]),
        ],
        [onnx.helper.make_tensor_value_info("pooled", onnx.TensorProto.FLOAT, ["b", w.hidden])],
        g.inits,
    )
    model = onnx.helper.make_model(
        graph, opset_imports=[onnx.helper.make_opsetid("", OPSET)], producer_name="continuity"
    )
    model.ir_version = 8
    return model


def _converted(w: EncoderWeights, quantized: bool) -> bytes | str:
    """The converted graph: a file's path (made once, atomically), or its bytes when the models
    home cannot be written."""
    path = graph_path(w)
    if quantized:
        path = path.with_name(path.stem + "-int8.onnx")
    if path.is_file():
        return str(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=path.parent, prefix=".convert-") as tmp:
            made = Path(tmp) / "model.onnx"
            g = _Graph()
            made.write_bytes(_build(w, g).SerializeToString())
            if quantized:
                _quantize(made, Path(tmp) / "int8.onnx", g.activations)
                made = Path(tmp) / "int8.onnx"
            os.replace(made, path)
        return str(path)
    except OSError:
        if quantized:
            raise
        data: bytes = build_graph(w).SerializeToString()
        return data


def _quantize(source: Path, dest: Path, keep: list[str]) -> None:
    """The weights' MatMuls quantised to int8 per output channel (activations to uint8 per
    batch, dynamically); attention's MatMuls of two activations stay fp32."""
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # its advice to pre-process, on stderr, while it runs only
    try:
        quantize_dynamic(
            source,
            dest,
            weight_type=QuantType.QInt8,
            op_types_to_quantize=["MatMul"],
            nodes_to_exclude=keep,
            per_channel=True,
        )
    finally:
        root.setLevel(level)  # the process's logging is its own


class OnnxEncoder:
    """Pooled (not normalised) vectors of token sequences, by onnxruntime."""

    def __init__(self, w: EncoderWeights, *, quantized: bool = False) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        try:
            self.session = ort.InferenceSession(
                _converted(w, quantized), options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime's own errors: one line naming the model
            raise ModelError(f"onnxruntime cannot run the converted model: {exc}") from None
        self.hidden = w.hidden

    def __call__(self, seqs: Sequence[Sequence[int]]) -> F32:
        longest = max(len(s) for s in seqs)
        ids = np.zeros((len(seqs), longest), np.int64)
        mask = np.zeros((len(seqs), longest), np.float32)
        for i, s in enumerate(seqs):
            ids[i, : len(s)] = s
            mask[i, : len(s)] = 1.0
        (pooled,) = self.session.run(["pooled"], {"input_ids": ids, "mask": mask})
        return np.asarray(pooled, dtype=np.float32)
