"""Rebuilding every cache of a large thread, and catching up after one more batch.

    python -m tools.bench.bench_rebuild [--frames 1000000] [--repeat 3] [--catchup-repeat 10]
                                        [--catchup-batch 1000] [--json]

* ``rebuild_all`` of a store holding one generated thread (frames/s; target >= 400k/s);
  baseline in the same run: reading the same log in 8 MiB chunks and counting its newlines (the
  I/O floor, page cache warm);
* ``ThreadIndex.refresh()`` after appending one batch of ``--catchup-batch`` frames, and after
  appending a single frame (ms); baseline: ``refresh()`` when nothing was appended.

The generated thread is cached (see ``tools/bench/_common.py``); the benchmark works on a copy of
its log, so the cached store is never appended to.
"""

from __future__ import annotations

import os
import shutil
import time

from continuity.caches.thread_index import ThreadIndex, rebuild_all
from continuity.store.jsonl import Store
from tools.bench._common import (
    BENCH_THREAD,
    Report,
    cached_thread,
    common_parser,
    emit,
    log,
    rate_row,
    time_once,
    time_row,
    timed,
    work_dir,
)
from tools.gen_thread import generate_frames

__all__ = ["main", "run"]

REBUILD_TARGET: float = 400_000


def _read_floor(path: os.PathLike[str] | str) -> int:
    """Read a file in 8 MiB chunks and count its lines: what any rebuild must at least do."""
    lines = 0
    fd = os.open(path, os.O_RDONLY)
    try:
        pos = 0
        while chunk := os.pread(fd, 8 << 20, pos):
            lines += chunk.count(b"\n")
            pos += len(chunk)
    finally:
        os.close(fd)
    return lines


def run(
    frames: int = 1_000_000,
    repeat: int = 3,
    catchup_repeat: int = 10,
    catchup_batch: int = 1_000,
    seed: int = 0,
) -> Report:
    started = time.perf_counter()
    report = Report(
        "bench_rebuild",
        {
            "frames": frames,
            "repeat": repeat,
            "catchup_repeat": catchup_repeat,
            "catchup_batch": catchup_batch,
            "seed": seed,
        },
    )
    source = cached_thread(frames, seed) / "threads" / f"{BENCH_THREAD}.jsonl"
    with work_dir("rebuild") as work:
        store = Store(work / "store", create=True, durable=False)
        log_path = store.root / "threads" / f"{BENCH_THREAD}.jsonl"
        log(f"bench_rebuild: copying the {source.stat().st_size / 1e6:,.0f} MB log")
        shutil.copyfile(source, log_path)
        size = log_path.stat().st_size

        rebuild_s: list[float] = []
        floor_s: list[float] = []
        for r in range(repeat):
            log(f"bench_rebuild: rebuild {r + 1}/{repeat}")
            floor_s.append(time_once(lambda: _read_floor(log_path)))
            seconds, results = timed(lambda: rebuild_all(store))
            rebuild_s.append(seconds)
            applied = results[BENCH_THREAD].frames_applied
            assert applied == frames, f"rebuilt {applied} frames, expected {frames}"
        row = rate_row(
            f"rebuild all caches, {frames:,} frames",
            frames,
            rebuild_s,
            "frames/s",
            target=REBUILD_TARGET,
            baseline="read+count lines",
        )
        floor = rate_row("  baseline: read the log, count lines", frames, floor_s, "frames/s")
        row.ratio = row.median / floor.median
        mb = rate_row("  rebuild, bytes", size / 1e6, rebuild_s, "MB/s")
        report.rows += [row, mb, floor]

        log("bench_rebuild: catch-up")
        index = ThreadIndex(store.thread(BENCH_THREAD))
        thread = store.thread(BENCH_THREAD)
        head = thread.head()
        assert head is not None
        last_ts = thread.tail(1)[0].ts_ms
        extra = list(
            generate_frames(
                catchup_repeat * (catchup_batch + 1),
                seed=seed,
                thread_id=BENCH_THREAD,
                start_seq=head.next_seq,
                start_ms=last_ts + 1_000,
            )
        )
        batch_s: list[float] = []
        single_s: list[float] = []
        current_s: list[float] = []
        pos = 0
        for _ in range(catchup_repeat):
            for n, samples in ((catchup_batch, batch_s), (1, single_s)):
                thread.append(extra[pos : pos + n], durable=False)
                pos += n
                seconds, result = timed(index.refresh)
                samples.append(seconds)
                assert result.mode == "caught_up" and result.frames_applied == n, result
            current_s.append(time_once(index.refresh))
        batch_row = time_row(
            f"catch-up after one batch of {catchup_batch:,}", batch_s, baseline="current refresh"
        )
        single_row = time_row("catch-up after one frame", single_s, baseline="current refresh")
        current_row = time_row("  baseline: refresh, nothing new", current_s)
        batch_row.ratio = batch_row.median / current_row.median
        single_row.ratio = single_row.median / current_row.median
        report.rows += [batch_row, single_row, current_row]
        report.notes.append(
            f"log: {size / 1e6:,.0f} MB, {size / frames:,.0f} B/frame; page cache warm"
        )
    report.seconds = time.perf_counter() - started
    return report


def main(argv: list[str] | None = None) -> None:
    parser = common_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3, help="rebuilds")
    parser.add_argument("--catchup-repeat", type=int, default=10)
    parser.add_argument("--catchup-batch", type=int, default=1_000)
    args = parser.parse_args(argv)
    report = run(args.frames, args.repeat, args.catchup_repeat, args.catchup_batch, args.seed)
    emit([report], args.json)


if __name__ == "__main__":
    main()
