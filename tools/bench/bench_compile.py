"""``context.compile`` at 10k, 100k and 1M frames, in-process and as a fresh process; compaction.

    python -m tools.bench.bench_compile [--sizes 10000,100000,1000000] [--repeat 60]
        [--process-repeat 9] [--catchup-repeat 10] [--catchup-frames 20,1000]
        [--compaction-frames 100000] [--compaction-repeat 3] [--profile] [--json]

The threads are the cached generated ones (a cumulative checkpoint about every 200 messages, its
summary stored as a real artifact), so compile selects three summaries by the halving rule and
takes the hierarchical strategy; the benchmark checks that before timing. Each size is copied
into a scratch store first (log and caches copied, artifacts hard-linked), because a logged
compile appends its decision. All stores are opened with ``durable=False`` except by the CLI.

* in-process ``compile_context`` with ``recent_messages=16, keep_tool_outputs=3``, and again with
  ``budget_tokens=8000``; ``log=False`` and ``log=True``. The caches are refreshed (untimed)
  before each timed call; the sizes and configurations are interleaved round by round. Rows
  ``1M/10k`` give the ratio largest/smallest size (target <= 1.5x), and the largest size has the
  5 ms target. ``log=True, back to back`` skips the refresh, so it catches up the decision the
  previous logged compile appended;
* the first compile after appending ``--catchup-frames`` generated frames (untimed), so the cache
  catch-up is included; baseline: the compile right after it (warm);
* fresh processes at the largest size (``--process-repeat`` rounds, interleaved, after one
  warm-up each): ``continuity compile`` with ``--dry-run`` and logged (the CLI's store is
  durable), a process calling ``compile_context`` directly, and the baselines ``python -c pass``,
  ``continuity --help`` and ``python -c "import continuity.context.compiler"``. Their peak RSS
  comes from ``os.wait4`` (the child's own ``ru_maxrss``);
* compaction: ``run_compaction(StrideMessages(200))`` with the default ``ExtractiveSummarizer``
  on a copy of a ``--compaction-frames`` thread generated without checkpoints (messages covered
  per second, checkpoints per second); baselines in the same run: reading every frame through
  the offset index, and the summarizer alone on the same messages in batches of 200. Then
  compile on the compacted thread (real ``summary.v1`` summaries).

``--profile`` prints cProfile's view of 50 compiles at the largest size to stderr (after the
timed rounds, before the catch-up ones).
"""

from __future__ import annotations

import cProfile
import gc
import itertools
import os
import pstats
import shutil
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Final

import msgspec

from continuity import frames as fr
from continuity.caches.thread_index import ThreadIndex
from continuity.context.compaction import StrideMessages, run_compaction
from continuity.context.compiler import STRATEGY_HIERARCHICAL, CompileResult, compile_context
from continuity.context.sources import open_source
from continuity.context.summarize import ExtractiveSummarizer
from continuity.store.jsonl import Store
from continuity.summary import SummaryDoc
from tools.bench._common import (
    BENCH_THREAD,
    GENERATOR_VERSION,
    Launcher as _Launcher,
    Report,
    Row,
    bench_dir,
    cached_thread,
    common_parser,
    continuity_command as _continuity_command,
    copy_store,
    emit,
    log,
    median,
    percentile,
    rate_row,
    short_size as _short,
    time_once,
    time_row,
    timed,
    work_dir,
)
from tools.gen_thread import FIXED_CLOCK_MS, generate_frames, write_thread

__all__ = ["main", "run"]

DEFAULT_SIZES: Final = (10_000, 100_000, 1_000_000)
COMPILE_TARGET_MS: Final = 5.0
FLAT_TARGET: Final = 1.5
PROCESS_TARGET_MS: Final = 250.0
RSS_TARGET_MB: Final = 150.0
STRIDE: Final = 200
LIMITS: Final = fr.Limits(recent_messages=16, keep_tool_outputs=3)
BUDGET_LIMITS: Final = fr.Limits(recent_messages=16, keep_tool_outputs=3, budget_tokens=8000)


@dataclass(frozen=True, slots=True)
class _Config:
    name: str
    limits: fr.Limits
    log: bool
    refresh: bool = True
    """Bring the caches up to date (untimed) before the timed compile."""
    baseline: str = ""
    target: bool = True


_CONFIGS: Final = (
    _Config("compile log=False", LIMITS, log=False),
    _Config("compile log=True", LIMITS, log=True, baseline="compile log=False"),
    _Config(
        "compile log=True, back to back",
        LIMITS,
        log=True,
        refresh=False,
        baseline="compile log=True",
        target=False,
    ),
    _Config(
        "compile log=False budget=8000", BUDGET_LIMITS, log=False, baseline="compile log=False"
    ),
    _Config("compile log=True budget=8000", BUDGET_LIMITS, log=True, baseline="compile log=True"),
)


def _compile(store: Store, limits: fr.Limits = LIMITS, log: bool = False) -> CompileResult:
    return compile_context(store, BENCH_THREAD, limits=limits, log=log)


# --- stores ---------------------------------------------------------------------------------


def _thread_without_checkpoints(frames: int, seed: int) -> Path:
    """Like ``cached_thread`` but without checkpoints: what compaction starts from."""
    root = bench_dir() / f"thread-g{GENERATOR_VERSION}-f{frames}-s{seed}-nocheckpoints"
    log_path = root / "threads" / f"{BENCH_THREAD}.jsonl"
    marker = root / "bench-thread.json"
    if (
        marker.is_file()
        and log_path.is_file()
        and log_path.stat().st_size == int(marker.read_text().strip())
    ):
        return root
    shutil.rmtree(root, ignore_errors=True)
    tmp = root.with_name(f"{root.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    log(f"generating {frames:,} frames without checkpoints (seed {seed}) into {root}")
    store = Store(tmp, create=True, durable=False, clock=lambda: FIXED_CLOCK_MS)
    stats = write_thread(store, BENCH_THREAD, frames, seed=seed)
    ThreadIndex(store.thread(BENCH_THREAD)).refresh()
    (tmp / "bench-thread.json").write_text(f"{stats.log_bytes}\n")
    os.replace(tmp, root)
    return root


# --- in-process compile ---------------------------------------------------------------------


def _check_hierarchical(store: Store, n: int) -> str:
    result = _compile(store)
    bundle = result.bundle
    if bundle.strategy != STRATEGY_HIERARCHICAL or result.decision.resets:
        raise RuntimeError(
            f"{_short(n)}: expected the hierarchical strategy without resets, got "
            f"{bundle.strategy} {result.decision.resets}"
        )
    budget = _compile(store, BUDGET_LIMITS).decision.reasons
    cut = "; ".join(r for r in budget if r.startswith("budget")) or "budget=8000 cuts nothing"
    tos = ",".join(str(s.to_seq) for s in bundle.summaries)
    checkpoints = ThreadIndex(store.thread(BENCH_THREAD)).checkpoint_count()
    return (
        f"{_short(n)}: {checkpoints:,} checkpoints, {bundle.strategy}, summaries to_seq {tos}, "
        f"{len(bundle.messages)} messages, ~{bundle.tokens} tokens; {cut}"
    )


def _continuation(store: Store, n_frames: int, seed: int) -> Iterator[fr.Frame]:
    """Generated frames that continue the thread, without seqs (the store numbers them, so
    decisions appended in between do not matter)."""
    thread = store.thread(BENCH_THREAD)
    head = thread.head()
    assert head is not None
    frames = generate_frames(
        n_frames,
        seed=seed,
        thread_id=BENCH_THREAD,
        start_seq=head.next_seq,
        start_ms=thread.tail(1)[0].ts_ms + 1_000,
    )
    return (msgspec.structs.replace(f, seq=-1) for f in frames)


def _profile(store: Store) -> None:
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(50):
        _compile(store)
    profile.disable()
    stats = pstats.Stats(profile, stream=sys.stderr)
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats(25)


class _Continuations:
    """Generated frames that continue each store's thread, appended a few at a time."""

    def __init__(self, stores: dict[int, Store], n_frames: int, seed: int) -> None:
        self.stores = stores
        self.more = {n: _continuation(s, n_frames, seed) for n, s in stores.items()}

    def append(self, n: int, k: int) -> None:
        frames = list(itertools.islice(self.more[n], k))
        self.stores[n].thread(BENCH_THREAD).append(frames, durable=False)


_Samples = dict[tuple[str, int], list[float]]


def _in_process(
    stores: dict[int, Store],
    repeat: int,
    catchup_repeat: int,
    catchup_frames: Sequence[int],
    seed: int,
    report: Report,
    profile: bool = False,
) -> None:
    sizes = list(stores)
    indexes = {n: ThreadIndex(s.thread(BENCH_THREAD)) for n, s in stores.items()}
    more = _Continuations(stores, repeat + catchup_repeat * sum(catchup_frames), seed)
    for c in _CONFIGS:  # warm up (page cache, imports)
        for n in sizes:
            _compile(stores[n], c.limits, c.log)
    # What the benchmark keeps alive is not the compile's: keep the collector from walking it.
    gc.collect()
    gc.freeze()
    samples = _timed_rounds(stores, indexes, more, repeat)
    report.rows.extend(_round_rows(samples, sizes))
    if profile:
        _profile(stores[sizes[-1]])
    _catch_up(stores, more, catchup_repeat, catchup_frames, report)
    report.notes.append(
        f"each thread got {repeat:,} frames during the timed rounds and "
        f"{catchup_repeat * sum(catchup_frames):,} in the catch-up rounds"
    )
    gc.unfreeze()


def _timed_rounds(
    stores: dict[int, Store],
    indexes: dict[int, ThreadIndex],
    more: _Continuations,
    repeat: int,
) -> _Samples:
    """``repeat`` rounds of every configuration at every size, interleaved: the times by
    (configuration name, size)."""
    sizes = list(stores)
    samples: _Samples = {(c.name, n): [] for c in _CONFIGS for n in sizes}
    log(f"bench_compile: {repeat} rounds of {len(_CONFIGS)} compiles at {len(sizes)} sizes")
    for _ in range(repeat):
        # One new frame a round, so the logged compiles write new bundles and the default
        # anchor never sits behind a growing run of decisions.
        for n in sizes:
            more.append(n, 1)
        for c in _CONFIGS:
            for n in sizes:
                if c.refresh:
                    indexes[n].refresh()
                samples[(c.name, n)].append(
                    time_once(partial(_compile, stores[n], c.limits, c.log))
                )
    return samples


def _round_rows(samples: _Samples, sizes: list[int]) -> list[Row]:
    """A row per configuration and size (with its target and its ratio to its baseline), and
    the ratio of the largest size to the smallest."""
    rows: list[Row] = []
    small, large = sizes[0], sizes[-1]
    for c in _CONFIGS:
        for n in sizes:
            row = time_row(f"{c.name} @{_short(n)}", samples[(c.name, n)])
            if n == large and c.target:
                row.target = COMPILE_TARGET_MS
            if c.baseline:
                row.baseline = c.baseline
                row.ratio = median(samples[(c.name, n)]) / median(samples[(c.baseline, n)])
            rows.append(row)
        if len(sizes) > 1:
            ratio = median(samples[(c.name, large)]) / median(samples[(c.name, small)])
            target = FLAT_TARGET if c.target else None
            rows.append(
                Row(f"  {c.name} {_short(large)}/{_short(small)}", ratio, "x", target=target)
            )
    return rows


def _catch_up(
    stores: dict[int, Store],
    more: _Continuations,
    catchup_repeat: int,
    catchup_frames: Sequence[int],
    report: Report,
) -> None:
    """Catch-up: append (untimed), then the first compile pays the cache refresh."""
    sizes = list(stores)
    log(f"bench_compile: catch-up, {catchup_repeat} rounds of {list(catchup_frames)} frames")
    first: dict[tuple[int, int], list[float]] = {(k, n): [] for k in catchup_frames for n in sizes}
    warm: dict[tuple[int, int], list[float]] = {(k, n): [] for k in catchup_frames for n in sizes}
    for _ in range(catchup_repeat):
        for k in catchup_frames:
            for n, store in stores.items():
                more.append(n, k)
                first[(k, n)].append(time_once(partial(_compile, store)))
                warm[(k, n)].append(time_once(partial(_compile, store)))
    for k in catchup_frames:
        for n in sizes:
            row = time_row(
                f"compile log=False, first after appending {k:,} frames @{_short(n)}",
                first[(k, n)],
                baseline="the warm compile after it",
            )
            row.ratio = median(first[(k, n)]) / median(warm[(k, n)])
            report.rows.append(row)


# --- fresh processes ------------------------------------------------------------------------


_LIBRARY_COMPILE: Final = (
    "import sys\n"
    "from continuity.context.compiler import compile_context\n"
    "from continuity.frames import Limits\n"
    "from continuity.store.jsonl import Store\n"
    "compile_context(Store(sys.argv[1], durable=False), sys.argv[2], log=False,\n"
    "                limits=Limits(recent_messages=16, keep_tool_outputs=3))\n"
)


def _processes(store: Store, n: int, repeat: int, report: Report) -> None:
    cli = [*_continuity_command(), "--store", str(store.root)]
    compile_argv = [*cli, "compile", BENCH_THREAD, "--recent", "16", "--keep-tool-outputs", "3"]
    size = _short(n)
    processes: dict[str, list[str]] = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "continuity --help": [*cli, "--help"],
        'python -c "import continuity.context.compiler"': [
            sys.executable,
            "-c",
            "import continuity.context.compiler",
        ],
        f"process: compile_context(log=False) @{size}": [
            sys.executable,
            "-c",
            _LIBRARY_COMPILE,
            str(store.root),
            BENCH_THREAD,
        ],
        f"continuity compile --dry-run @{size}": [*compile_argv, "--dry-run"],
        f"continuity compile (logged, fsync) @{size}": compile_argv,
    }
    log(f"bench_compile: {repeat} rounds of {len(processes)} fresh processes")
    wall: dict[str, list[float]] = {name: [] for name in processes}
    rss: dict[str, list[float]] = {name: [] for name in processes}
    launcher = _Launcher()
    try:
        for argv in processes.values():  # warm up (page cache, .pyc)
            launcher.run(argv)
        for _ in range(repeat):
            for name, argv in processes.items():
                seconds, mb = launcher.run(argv)
                wall[name].append(seconds)
                rss[name].append(mb)
    finally:
        launcher.close()
    base = median(wall["python -c pass"])
    for name in processes:
        row = time_row(name, wall[name])
        if name.startswith("continuity compile"):
            row.target = PROCESS_TARGET_MS
        if name != "python -c pass":
            row.baseline = "python -c pass"
            row.ratio = median(wall[name]) / base
        report.rows.append(row)
    base_rss = median(rss["python -c pass"])
    for name in processes:
        row = Row(
            f"peak RSS: {name}",
            median(rss[name]),
            "MB",
            p90=percentile(rss[name], 90),
            n=len(rss[name]),
        )
        if "compile" in name and "import" not in name:
            row.target = RSS_TARGET_MB
        if name != "python -c pass":
            row.baseline = "python -c pass"
            row.ratio = row.median / base_rss
        report.rows.append(row)


# --- compaction -----------------------------------------------------------------------------


def _summarize_alone(messages: Sequence[fr.MessageAppended]) -> None:
    summarizer = ExtractiveSummarizer()
    base: SummaryDoc | None = None
    for lo in range(0, len(messages) - STRIDE + 1, STRIDE):
        batch = messages[lo : lo + STRIDE]
        content = summarizer.summarize(base, batch)
        base = SummaryDoc(
            thread_id=BENCH_THREAD,
            to_seq=batch[-1].seq,
            produced_by=summarizer.id,
            text=content.text,
            sections=content.sections,
        )


def _compaction(frames: int, repeat: int, compile_repeat: int, seed: int, report: Report) -> None:
    source = _thread_without_checkpoints(frames, seed)
    plain = Store(source, durable=False)
    index = ThreadIndex(plain.thread(BENCH_THREAD))
    index.refresh()
    head = index.frame_count() - 1

    def read_all() -> list[fr.MessageAppended]:
        return [f for f in index.read(0, head) if isinstance(f, fr.MessageAppended)]

    messages = read_all()
    compact_s: list[float] = []
    read_s: list[float] = []
    alone_s: list[float] = []
    covered = checkpoints = 0
    compiled: list[float] = []
    for r in range(repeat):
        log(f"bench_compaction: run {r + 1}/{repeat} on {frames:,} frames")
        read_s.append(time_once(read_all))
        alone_s.append(time_once(lambda: _summarize_alone(messages)))
        with work_dir("compaction") as work:
            store = copy_store(source, work / "store")
            seconds, result = timed(
                partial(run_compaction, store, BENCH_THREAD, StrideMessages(STRIDE))
            )
            if result.status != "succeeded" or not result.checkpoints:
                raise RuntimeError(f"compaction did not succeed: {result.status} {result.error}")
            compact_s.append(seconds)
            checkpoints = len(result.checkpoints)
            src = open_source(store.thread(BENCH_THREAD))
            covered = src.message_count_upto(result.checkpoints[-1].to_seq)
            if r == 0:
                check = _compile(store)
                assert check.bundle.strategy == STRATEGY_HIERARCHICAL, check.bundle.strategy
                compiled = [time_once(partial(_compile, store)) for _ in range(compile_repeat)]
    row = rate_row(
        f"run_compaction StrideMessages({STRIDE}), {frames:,} frames",
        covered,
        compact_s,
        "messages/s",
        baseline="read every frame",
    )
    read_row = rate_row(
        "  baseline: read every frame via the index", len(messages), read_s, "messages/s"
    )
    alone_row = rate_row(
        f"  baseline: ExtractiveSummarizer alone, batches of {STRIDE}",
        len(messages) // STRIDE * STRIDE,
        alone_s,
        "messages/s",
    )
    row.ratio = row.median / read_row.median
    cp_row = rate_row("  checkpoints created", checkpoints, compact_s, "checkpoints/s")
    report.rows += [row, cp_row, read_row, alone_row]
    report.rows.append(time_row(f"compile log=False on the compacted {_short(frames)}", compiled))
    report.notes.append(
        f"compaction: {checkpoints} checkpoints covering {covered:,} of {len(messages):,} messages"
    )


# --- the benchmark --------------------------------------------------------------------------


def run(
    sizes: tuple[int, ...] = DEFAULT_SIZES,
    repeat: int = 60,
    process_repeat: int = 9,
    catchup_repeat: int = 10,
    catchup_frames: tuple[int, ...] = (20, 1_000),
    compaction_frames: int = 100_000,
    compaction_repeat: int = 3,
    seed: int = 0,
    profile: bool = False,
) -> Report:
    started = time.perf_counter()
    params: dict[str, Any] = {
        "sizes": ",".join(_short(s) for s in sizes),
        "repeat": repeat,
        "process_repeat": process_repeat,
        "catchup": f"{catchup_repeat}x{'+'.join(str(k) for k in catchup_frames)}",
        "compaction_frames": compaction_frames,
        "seed": seed,
    }
    report = Report("bench_compile", params)
    with work_dir("compile") as work:
        stores: dict[int, Store] = {}
        for n in sizes:
            cached = cached_thread(n, seed)
            ThreadIndex(Store(cached, durable=False).thread(BENCH_THREAD)).refresh()
            log(f"bench_compile: copying the {_short(n)} store")
            stores[n] = copy_store(cached, work / _short(n))
            report.notes.append(_check_hierarchical(stores[n], n))
        _in_process(stores, repeat, catchup_repeat, catchup_frames, seed, report, profile)
        _processes(stores[sizes[-1]], sizes[-1], process_repeat, report)
    _compaction(compaction_frames, compaction_repeat, repeat, seed, report)
    report.notes.append(
        "page cache warm; in-process stores durable=False (no fsync), the CLI's store durable"
    )
    report.seconds = time.perf_counter() - started
    return report


def main(argv: list[str] | None = None) -> None:
    parser = common_parser(__doc__.split("\n\n")[0], DEFAULT_SIZES)
    parser.add_argument("--repeat", type=int, default=60, help="timed compiles per config, size")
    parser.add_argument("--process-repeat", type=int, default=9, help="fresh processes each")
    parser.add_argument("--catchup-repeat", type=int, default=10)
    parser.add_argument(
        "--catchup-frames", default="20,1000", help="comma-separated frames appended per round"
    )
    parser.add_argument("--compaction-frames", type=int, default=100_000)
    parser.add_argument("--compaction-repeat", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="cProfile the largest size")
    args = parser.parse_args(argv)
    report = run(
        sizes=args.sizes,
        repeat=args.repeat,
        process_repeat=args.process_repeat,
        catchup_repeat=args.catchup_repeat,
        catchup_frames=tuple(int(k) for k in args.catchup_frames.split(",")),
        compaction_frames=args.compaction_frames,
        compaction_repeat=args.compaction_repeat,
        seed=args.seed,
        profile=args.profile,
    )
    emit([report], args.json)


if __name__ == "__main__":
    main()
