"""The first ``--model`` search of a large store: embedding every document, with progress,
interrupted (Ctrl-C) and resumed, and documents/s with one and two worker processes.

    python -m tools.bench.bench_vectors [--threads 10000] [--seconds 0.002]
                                        [--interrupt-after 15] [--json]

The store is ``tools/bench/gen_threads.py``'s (``--threads`` threads, made once under the bench
folder). The embedder is the test suite's :class:`tests.support.slow_embedder.SlowEmbedder`:
hashed-feature vectors after a busy loop of ``--seconds`` CPU a document (0.002: 500 documents a
CPU-second; a contextual model such as MiniLM is 20-60, so its times are these × 10-25 for the
embedding part). What is measured is the vector cache's own work around the model: reading the
logs, chunking, the worker pool, writing the records, committing the manifest.

1. ``first search, interrupted``: a process runs ``search(store, q, embedder=...)`` with
   ``--jobs 2`` and progress on stderr (documents done / total, rate, time left); SIGINT after
   ``--interrupt-after`` seconds. Reported: the progress lines, the exit code and message, the
   threads kept.
2. ``first search, resumed``: the same command again; it embeds only what the first did not
   keep. Reported: documents embedded, seconds, documents/s.
3. ``build --jobs 1`` and ``build --jobs 2``: the whole cache rebuilt in this process
   (``build_vectors(rebuild=True)``): documents/s.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from continuity.retrieval.vectors import build_vectors
from continuity.store.jsonl import Store
from tests.support.slow_embedder import SlowEmbedder
from tools.bench._common import Report, bench_dir, common_parser, emit, log, rate_row
from tools.bench.gen_threads import write_threads

__all__ = ["main", "run"]

ROOT = Path(__file__).resolve().parents[2]

_SEARCH = """
import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # as at a terminal (nohup ignores it)
sys.path.insert(0, {root!r})
from continuity.cli.embedding import embedding_progress
from continuity.retrieval.search import Embedding, search
from continuity.retrieval.vectors import EmbeddingInterrupted
from continuity.store.jsonl import Store
from tests.support.slow_embedder import SlowEmbedder
try:
    hits = search(Store({store!r}), "where are the sessions stored", k=5,
                  embedder=SlowEmbedder({seconds!r}),
                  embedding=Embedding(progress=embedding_progress(tty=False, slow=0.0), jobs=2))
except EmbeddingInterrupted as exc:
    print(exc, file=sys.stderr)
    sys.exit(130)
print(len(hits))
"""


def _store(threads: int) -> Path:
    path = bench_dir() / f"vectors-store-{threads}"
    if not (path / ".made").exists():
        shutil.rmtree(path, ignore_errors=True)
        log(f"writing {threads:,} threads to {path}")
        write_threads(Store(path, create=True, durable=False), threads)
        (path / ".made").write_text("")
    return path


def _drop_vectors(path: Path) -> None:
    shutil.rmtree(path / "cache" / "vectors", ignore_errors=True)


def _search(path: Path, seconds: float, stop_after: float | None) -> tuple[int, float, list[str]]:
    script = path.parent / "bench_vectors_search.py"
    script.write_text(_SEARCH.format(root=str(ROOT), store=str(path), seconds=seconds))
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    if stop_after is not None:
        try:
            proc.wait(timeout=stop_after)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate()
    return proc.returncode, time.perf_counter() - started, err.splitlines()


def _kept_threads(path: Path) -> int:
    (manifest,) = (path / "cache" / "vectors").glob("*/manifest.json")
    return len(json.loads(manifest.read_bytes())["threads"])


def run(threads: int = 10_000, seconds: float = 0.002, interrupt_after: float = 15.0) -> Report:
    report = Report(
        "vectors",
        {"threads": threads, "seconds_a_document": seconds, "interrupt_after": interrupt_after},
    )
    begun = time.perf_counter()
    path = _store(threads)
    _drop_vectors(path)
    code, took, lines = _search(path, seconds, interrupt_after)
    kept = _kept_threads(path)
    report.notes.append(
        f"first search interrupted after {took:.1f} s: exit {code}, {kept:,} threads kept"
    )
    report.notes += [f"  stderr: {line}" for line in lines]
    code, took, lines = _search(path, seconds, None)
    done = [ln for ln in lines if ln.startswith("embedding documents")]
    resumed = int(done[-1].split(": ", 1)[1].split("/", 1)[0].replace(",", "")) if done else 0
    report.notes.append(f"resumed: exit {code}, {resumed:,} documents embedded in {took:.1f} s")
    report.notes += [f"  stderr: {line}" for line in lines]
    report.rows.append(rate_row("first search, resumed (--jobs 2)", resumed, [took], "docs/s"))
    store = Store(path)
    for jobs in (1, 2):
        started = time.perf_counter()
        built = build_vectors(store, SlowEmbedder(seconds), jobs=jobs, rebuild=True)
        took = time.perf_counter() - started
        assert built is not None
        report.rows.append(rate_row(f"build --jobs {jobs}", built.embedded, [took], "docs/s"))
        report.notes.append(
            f"build --jobs {jobs}: {built.embedded:,} documents of {built.threads:,} threads "
            f"in {took:.1f} s"
        )
    report.seconds = time.perf_counter() - begun
    return report


def main() -> None:
    parser = common_parser(__doc__ or "")
    parser.add_argument("--threads", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=0.002, help="CPU s a document")
    parser.add_argument("--interrupt-after", type=float, default=15.0)
    args = parser.parse_args()
    emit([run(args.threads, args.seconds, args.interrupt_after)], as_json=args.json)


if __name__ == "__main__":
    main()
