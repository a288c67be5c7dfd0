"""Append throughput and latency of the JSONL store, with realistic generated frames.

    python -m tools.bench.bench_append [--frames 100000] [--repeat 5] [--durable-batches 30]
                                       [--single 100] [--json]

* batched append without fsync, batches of 1,000 and 10,000 (frames/s; target >= 250k/s);
  baselines in the same run: ``seal_batch`` alone (the library's CPU work, no I/O) and a raw
  ``os.write`` of the same sealed bytes (the I/O floor);
* a durable batch of 1,000 frames (ms per batch; target <= 15 ms); baseline: a raw write plus
  ``fdatasync`` of the same number of bytes;
* a single-frame append, durable and not (ms); baseline: a raw one-line write plus ``fdatasync``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path

import msgspec

from continuity import frames as fr
from continuity.store.artifacts import MemoryArtifactStore
from continuity.store.base import seal_batch
from continuity.store.jsonl import Store
from tools.bench._common import (
    Report,
    common_parser,
    emit,
    log,
    rate_row,
    time_once,
    time_row,
    work_dir,
)
from tools.gen_thread import FIXED_CLOCK_MS, generate_frames

__all__ = ["main", "run"]

APPEND_TARGET: float = 250_000
DURABLE_BATCH_TARGET_MS: float = 15


def _pool(n: int, seed: int) -> list[fr.Frame]:
    """``n`` generated frames without their seqs (so they fit any thread), thread_created first.
    Large outputs are put in a throwaway artifact store, so frames carry previews as in a store."""
    frames = generate_frames(n, seed=seed, artifacts=MemoryArtifactStore())
    return [msgspec.structs.replace(f, seq=-1) for f in frames]


def _short_pool(n: int) -> list[fr.Frame]:
    """Short chat messages (about 300 bytes a line): the small-frame end of the spectrum."""
    texts = ["Sure, I will update the parser and rerun the tests now.", "Looks good, thanks!"]
    return [
        fr.ThreadCreated(thread_id="x"),
        *(
            fr.message(
                "user" if i % 2 else "assistant",
                f"{texts[i % 2]} ({i})",
                message_id=f"{i:032x}",
                ts_ms=FIXED_CLOCK_MS + i,
            )
            for i in range(1, n)
        ),
    ]


def _batches(pool: list[fr.Frame], tid: str, size: int) -> list[list[fr.Frame]]:
    first = fr.ThreadCreated(thread_id=tid, ts_ms=pool[0].ts_ms)
    frames = [first, *pool[1:]]
    return [frames[i : i + size] for i in range(0, len(frames), size)]


def _sealed(tid: str, batches: Sequence[Sequence[fr.Frame]]) -> list[bytes]:
    out = []
    head = None
    for batch in batches:
        lines, head = seal_batch(tid, batch, head, now_ms=FIXED_CLOCK_MS)
        out.append(b"".join(lines))
    return out


def _raw_write(path: Path, chunks: Sequence[bytes], *, sync: bool) -> list[float]:
    """Per-chunk seconds of a plain ``O_APPEND`` write (plus ``fdatasync`` when ``sync``)."""
    times = []
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        for chunk in chunks:
            start = time.perf_counter_ns()
            os.write(fd, chunk)
            if sync:
                os.fdatasync(fd)
            times.append((time.perf_counter_ns() - start) / 1e9)
    finally:
        os.close(fd)
    return times


def run(
    frames: int = 100_000,
    repeat: int = 5,
    durable_batches: int = 30,
    single: int = 100,
    seed: int = 0,
) -> Report:
    started = time.perf_counter()
    report = Report(
        "bench_append",
        {
            "frames": frames,
            "repeat": repeat,
            "durable_batches": durable_batches,
            "single": single,
            "seed": seed,
        },
    )
    log(f"bench_append: generating {frames:,} frames in memory")
    pool = _pool(frames, seed)
    total_bytes = short_bytes = 0
    short = _short_pool(frames)
    short_s: list[float] = []
    sizes = (1_000, 10_000)
    append_s: dict[int, list[float]] = {s: [] for s in sizes}
    seal_s: dict[int, list[float]] = {s: [] for s in sizes}
    raw_s: dict[int, list[float]] = {s: [] for s in sizes}
    with work_dir("append") as work:
        for r in range(repeat):
            log(f"bench_append: batched round {r + 1}/{repeat}")
            for size in sizes:  # interleaved, so drift on a noisy machine hits both alike
                tid = f"b{size}"
                batches = _batches(pool, tid, size)
                store = Store(work / f"s{r}-{size}", create=True, durable=False)
                thread = store.thread(tid)
                start = time.perf_counter()
                for batch in batches:
                    thread.append(batch, durable=False)
                append_s[size].append(time.perf_counter() - start)
                total_bytes = thread.path.stat().st_size
                thread.path.unlink()

                start = time.perf_counter()
                chunks = _sealed(tid, batches)
                seal_s[size].append(time.perf_counter() - start)
                raw = work / f"raw-{r}-{size}"
                raw_s[size].append(sum(_raw_write(raw, chunks, sync=False)))
                raw.unlink()

            store = Store(work / f"short{r}", create=True, durable=False)
            thread = store.thread("short")
            batches = _batches(short, "short", 10_000)
            start = time.perf_counter()
            for batch in batches:
                thread.append(batch, durable=False)
            short_s.append(time.perf_counter() - start)
            short_bytes = thread.path.stat().st_size
            thread.path.unlink()

        for size in sizes:
            row = rate_row(
                f"append, batches of {size:,}, no fsync",
                frames,
                append_s[size],
                "frames/s",
                target=APPEND_TARGET,
                baseline="seal_batch only",
            )
            seal = rate_row(
                f"  baseline: seal_batch only ({size:,})", frames, seal_s[size], "frames/s"
            )
            raw_rate = rate_row(
                f"  baseline: raw write of the sealed bytes ({size:,})",
                frames,
                raw_s[size],
                "frames/s",
            )
            row.ratio = row.median / seal.median
            report.rows += [row, seal, raw_rate]
        report.rows.append(
            rate_row(
                f"  for scale: short chat messages ({short_bytes // frames} B), batches of 10,000",
                frames,
                short_s,
                "frames/s",
            )
        )
        report.notes.append(
            f"log: {total_bytes / 1e6:,.0f} MB for {frames:,} generated frames "
            f"({total_bytes / frames:,.0f} B/frame, {total_bytes / frames * 250_000 / 1e6:,.0f} "
            "MB/s at the target rate)"
        )

        log("bench_append: durable batches")
        store = Store(work / "durable", create=True, durable=True)
        tid = "durable"
        thread = store.thread(tid)
        thread.append(fr.ThreadCreated(thread_id=tid))
        body = pool[1:]
        batch_times = []
        raw_chunks = []
        for i in range(durable_batches):
            batch = [body[(i * 1_000 + j) % len(body)] for j in range(1_000)]
            before = thread.path.stat().st_size
            batch_times.append(time_once(partial(thread.append, batch, durable=True)))
            raw_chunks.append(b"x" * (thread.path.stat().st_size - before - 1) + b"\n")
        raw_batch = _raw_write(work / "raw-durable", raw_chunks, sync=True)
        durable_row = time_row(
            "durable batch of 1,000 frames",
            batch_times,
            target=DURABLE_BATCH_TARGET_MS,
            baseline="raw write+fdatasync",
        )
        raw_row = time_row("  baseline: raw write+fdatasync, same bytes", raw_batch)
        durable_row.ratio = durable_row.median / raw_row.median
        report.rows += [durable_row, raw_row]

        log("bench_append: single frames")
        one = [m for m in body[:200] if isinstance(m, fr.MessageAppended)]
        durable_one = []
        fast_one = []
        for i in range(single):
            frame = one[i % len(one)]
            durable_one.append(time_once(partial(thread.append, frame, durable=True)))
            fast_one.append(time_once(partial(thread.append, frame, durable=False)))
        line = b"x" * (len(fr.encode_body(one[0])) + 80) + b"\n"
        raw_one = _raw_write(work / "raw-one", [line] * single, sync=True)
        one_row = time_row(
            "single-frame append, durable", durable_one, baseline="raw write+fdatasync"
        )
        raw_one_row = time_row("  baseline: raw one-line write+fdatasync", raw_one)
        one_row.ratio = one_row.median / raw_one_row.median
        fast_row = time_row("single-frame append, no fsync", fast_one)
        report.rows += [one_row, fast_row, raw_one_row]
    report.notes.append(
        "durable figures are dominated by this machine's fdatasync; compare with the raw baseline"
    )
    report.seconds = time.perf_counter() - started
    return report


def main(argv: list[str] | None = None) -> None:
    parser = common_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=100_000, help="frames per batched run")
    parser.add_argument("--repeat", type=int, default=5, help="batched runs per batch size")
    parser.add_argument("--durable-batches", type=int, default=30)
    parser.add_argument("--single", type=int, default=100, help="single-frame appends")
    args = parser.parse_args(argv)
    report = run(args.frames, args.repeat, args.durable_batches, args.single, args.seed)
    emit([report], args.json)


if __name__ == "__main__":
    main()
