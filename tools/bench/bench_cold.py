"""The cold tier (ADR 0057): how much smaller, and what reading from it costs.

    python -m tools.bench.bench_cold [--sizes 100000] [--repeat 7] [--fixtures DIR] [--json]

At each size, a generated thread is copied twice; one copy's log is tiered up to its newest
2,000 frames. Then, round by round (the two copies interleaved, so load disturbs both alike):

* ``read all``: every line of the log (``read_lines``), the chain checked;
* ``log cold``: 200 frames from a random place in the cold stretch (``continuity log`` reads so);
* ``compile cold``: ``compile_context`` anchored at a random seq in the cold stretch, caches on;
* ``search``: a store-wide query whose hits are read back from the cold stretch (index warm);
* ``verify``: ``verify_store`` of the whole store.

Each row's ``vs plain`` is tiered/untiered (target ≤ 1.2×). ``size`` rows: the log's bytes on
disk before and after (``st_blocks``), and the stretch's raw bytes over its segment's (target
≥ 4×). ``--fixtures DIR`` also ingests every Claude Code transcript under DIR into a store, tiers
all of it and reports the same ratios for real sessions.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from continuity.context.compiler import compile_context
from continuity.maintenance.verify import verify_store
from continuity.retrieval.search import search
from continuity.store.cold import cold_dir, drop_cached_blocks, segments_of
from continuity.store.jsonl import JsonlThread, Store
from tools.bench._common import (
    BENCH_THREAD,
    Report,
    Row,
    cached_thread,
    common_parser,
    continuity_command,
    copy_store,
    emit,
    log,
    median,
    short_size,
    time_once,
    time_row,
    work_dir,
)

__all__ = ["main", "run"]

TARGET_READ: float = 1.2
TARGET_SMALLER: float = 4.0
KEEP_FRAMES: int = 2_000
DEFAULT_SIZES: tuple[int, ...] = (100_000,)


def _disk(path: Path) -> int:
    return os.stat(path).st_blocks * 512


def _cold_disk(thread: JsonlThread) -> int:
    return sum(_disk(Path(s.path)) for s in segments_of(cold_dir(thread.path)) or [])


def _tier(store: Store, keep: int) -> tuple[int, int, int]:
    """Tier the bench thread up to its newest ``keep`` frames: (last cold seq, raw, stored)."""
    thread = store.thread(BENCH_THREAD)
    head = thread.head()
    assert head is not None
    last = max(0, head.seq - keep)
    upto = thread.offset_of(last + 1)
    assert upto is not None
    moved = thread.move_to_cold(upto)
    return last, moved.end - moved.start, moved.stored


def _size_rows(report: Report, label: str, before: int, after: int, raw: int, stored: int) -> None:
    report.rows.append(Row(f"{label} log on disk before", before / 1e6, "MB"))
    report.rows.append(Row(f"{label} log + segments on disk after", after / 1e6, "MB"))
    smaller = before / max(after, 1)
    report.rows.append(
        Row(f"{label} disk before/after", smaller, "x", target=TARGET_SMALLER, better="higher")
    )
    ratio = raw / max(stored, 1)
    report.rows.append(
        Row(f"{label} cold stretch raw/segment", ratio, "x", target=TARGET_SMALLER, better="higher")
    )


def _one_size(frames: int, repeat: int, seed: int, report: Report) -> None:
    source = cached_thread(frames, seed)
    with work_dir(f"cold-{frames}") as work:
        plain = copy_store(source, work / "plain")
        tiered = copy_store(source, work / "tiered")
        for store in (plain, tiered):  # the search index warm in both, untimed
            search(store, "error", k=5)
        thread = tiered.thread(BENCH_THREAD)
        before = _disk(thread.path)
        last_cold, raw, stored = _tier(tiered, KEEP_FRAMES)
        after = _disk(thread.path) + _cold_disk(thread)
        label = short_size(frames)
        _size_rows(report, label, before, after, raw, stored)
        rng = random.Random(seed)
        ops: dict[str, Callable[[Store, int], object]] = {
            "read all": lambda s, _x: sum(1 for _ in s.thread(BENCH_THREAD).read_lines()),
            "log cold": lambda s, x: list(
                s.thread(BENCH_THREAD).read_lines(from_seq=x, to_seq=x + 200)
            ),
            "compile cold": lambda s, x: compile_context(s, BENCH_THREAD, anchor=x, log=False),
            "search": lambda s, _x: search(s, "error timeout", k=10),
            "verify": lambda s, _x: verify_store(s),
        }
        cli = continuity_command()

        def fresh(argv: list[str]) -> Callable[[Store, int], object]:
            def go(store: Store, at: int) -> object:
                args = [a.replace("{at}", str(at)).replace("{to}", str(at + 200)) for a in argv]
                return subprocess.run(
                    [*cli, "--store", str(store.root), *args], check=True, capture_output=True
                )

            return go

        ops["process: log cold"] = fresh(
            ["log", BENCH_THREAD, "--from-seq", "{at}", "--to-seq", "{to}"]
        )
        ops["process: search"] = fresh(["search", "error timeout"])
        times: dict[tuple[str, str], list[float]] = {}
        for _round in range(repeat):
            at = rng.randrange(0, max(1, last_cold - 200))
            for name, op in ops.items():
                pair = [("plain", plain), ("tiered", tiered)]
                rng.shuffle(pair)
                for which, store in pair:
                    drop_cached_blocks()  # each read decompresses what it needs, none kept

                    def once(
                        op: Callable[[Store, int], object] = op, s: Store = store, x: int = at
                    ) -> object:
                        return op(s, x)

                    times.setdefault((name, which), []).append(time_once(once))
        for name in ops:
            base = times[(name, "plain")]
            cold = times[(name, "tiered")]
            report.rows.append(time_row(f"{name} {label} untiered", base))
            report.rows.append(time_row(f"{name} {label} tiered", cold))
            ratio = median(cold) / max(median(base), 1e-9)
            report.rows.append(
                Row(f"{name} {label} tiered/untiered", ratio, "x", target=TARGET_READ)
            )


def _fixtures(folder: Path, report: Report) -> None:
    transcripts = sorted(str(p) for p in folder.rglob("*.jsonl"))
    if not transcripts:
        report.notes.append(f"no transcripts under {folder}")
        return
    with work_dir("cold-fixtures") as work:
        root = work / "store"
        env = {**os.environ, "HOME": str(work / "home")}
        cmd = [*continuity_command(), "--store", str(root)]
        subprocess.run([*cmd, "init"], check=True, capture_output=True, env=env)
        subprocess.run([*cmd, "ingest", *transcripts], capture_output=True, env=env)
        store = Store(root)
        threads = [store.thread(t) for t in store.threads()]
        before = sum(_disk(t.path) for t in threads)
        raw = stored = 0
        for t in threads:
            end = t.committed_size()
            if end:
                moved = t.move_to_cold(end)
                raw += moved.end - moved.start
                stored += moved.stored
        after = sum(_disk(t.path) + _cold_disk(t) for t in threads)
        _size_rows(report, f"fixtures ({len(threads)} threads)", before, after, raw, stored)


def run(
    *,
    sizes: tuple[int, ...] = DEFAULT_SIZES,
    repeat: int = 7,
    seed: int = 0,
    fixtures: Path | None = None,
) -> Report:
    report = Report("cold", {"sizes": list(sizes), "repeat": repeat, "keep_frames": KEEP_FRAMES})
    for frames in sizes:
        log(f"cold tier at {frames:,} frames")
        _one_size(frames, repeat, seed, report)
    if fixtures is not None:
        _fixtures(fixtures, report)
    return report


def main(argv: list[str] | None = None) -> None:
    parser = common_parser(__doc__, sizes=DEFAULT_SIZES)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--fixtures", type=Path, default=None)
    args = parser.parse_args(argv)
    emit(
        [run(sizes=args.sizes, repeat=args.repeat, seed=args.seed, fixtures=args.fixtures)],
        args.json,
    )


if __name__ == "__main__":
    main(sys.argv[1:])
