"""Search: index build, queries in-process, incremental update, ``continuity search`` as a process.

    python -m tools.bench.bench_search [--sizes 10000,100000,1000000] [--build-repeat 3]
        [--large-build-repeat 1] [--repeat 30] [--update-rounds 200] [--cross-repeat 3]
        [--cross-max-fill 70000] [--process-repeat 9] [--profile] [--json]

Each size is the cached generated thread (see ``tools/bench/_common.py``), copied to a scratch
store (log and frame caches copied, artifacts hard-linked, any search index left behind) because
the update rounds append to it. The frame caches are current before anything is timed, so every
figure is the search index's own cost unless a row says otherwise.

* build: ``ThreadSearchIndex.rebuild()`` from scratch, in documents/s and frames/s,
  ``--build-repeat`` (3) times below 1M frames and ``--large-build-repeat`` (1) times from 1M up
  (a 1M build takes minutes); baseline in the same run: reading and decoding every frame through
  the offset index (``ThreadIndex.read``), the floor any build pays;
* query: ``search(store, query, k=10)`` (every thread of the store; it holds one) for a file
  path, a command, an error phrase and a two-word concept, ``--repeat`` (30) rounds with the
  queries and sizes interleaved; target p50 <= 50 ms at 1M, and rows ``1M/10k`` give the ratio
  largest/smallest size. Components in the same rounds: ``current_view()`` with nothing new
  (what every search pays per thread: the watermark check against the log's end, then opening
  the index) and ``view()`` (opening it alone);
* update: append one turn (a user prompt, an assistant ``tool_use`` of Bash, its
  ``tool_result``, an assistant reply: four documents; untimed), then time the frame caches'
  catch-up (``ThreadIndex.refresh``) and the search index's (``ThreadSearchIndex.refresh``),
  ``--update-rounds`` (200) rounds; the row ``update after one turn`` is their sum (target p50
  <= 10 ms). A block of 256 documents is sealed into a segment about every 64 turns: those rounds
  are also shown apart. Then the merges: appended frames (untimed) bring the index to just below
  the next multiple of 4,096 documents (``--cross-repeat`` times: seal + merge of 16 x 256) and of
  65,536 (seal + the cascade of merges up to it; segments stop growing there, ADR 0011, so at
  1M frames the crossing of 1,048,576 is one more 16 x 4,096 merge),
  and one more turn crosses it (timed, one sample each; skipped when more than
  ``--cross-max-fill`` documents would be needed);
* process (largest size): ``continuity search QUERY`` as a fresh process for each query (a
  process calling ``search()`` directly when the CLI has no ``search`` command), ``--process-
  repeat`` (9) rounds after a warm-up (children run without ``PYTHONDONTWRITEBYTECODE``, as
  users' installs cache bytecode); baselines ``python -c pass`` and
  ``python -c "import continuity.retrieval.search"``; target <= 300 ms. Peak RSS from ``os.wait4``.

``--profile`` prints to stderr cProfile's view of 10 searches per query and of one full build, at
the largest size (the profiled build runs about twice as long as a timed one).
"""

from __future__ import annotations

import cProfile
import gc
import itertools
import os
import pstats
import random
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any, Final

import msgspec

from continuity import frames as fr
from continuity.caches.thread_index import ThreadIndex
from continuity.retrieval.index import SearchManifest, ThreadSearchIndex
from continuity.retrieval.search import Hit, search
from continuity.retrieval.segments import BLOCK, FANOUT, SegmentRef
from continuity.store.jsonl import Store
from tools.bench._common import (
    BENCH_THREAD,
    Launcher as _Launcher,
    Report,
    Row,
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
from tools.gen_thread import generate_frames

__all__ = ["QUERIES", "main", "run"]

DEFAULT_SIZES: Final = (10_000, 100_000, 1_000_000)
LARGE: Final = 1_000_000
"""From this many frames a build runs ``--large-build-repeat`` times."""
QUERY_TARGET_MS: Final = 50.0
UPDATE_TARGET_MS: Final = 10.0
PROCESS_TARGET_MS: Final = 300.0
K: Final = 10
QUERIES: Final = (
    ("file path", "src/app/storage/cursor.py"),
    ("command", "pytest -x -q tests/test_index.py -k offset"),
    ("error phrase", "KeyError: 'manifest'"),
    ("two-word concept", "cache watermark"),
)
"""(label, query): each matches what the generator writes (tools/gen_thread.py)."""


# --- stores ---------------------------------------------------------------------------------


def _manifest(index: ThreadSearchIndex) -> SearchManifest:
    m = index.manifest()
    assert m is not None, "the search index has no manifest"
    return m


# --- appending ------------------------------------------------------------------------------

_IDENTS: Final = ("retry", "backoff", "cursor", "manifest", "segment", "offset", "digest", "lock")
_PACKAGES: Final = ("core", "storage", "api", "cli")


def _message(role: fr.Role, content: list[fr.ContentBlock], rng: random.Random) -> fr.Frame:
    return fr.MessageAppended(
        message_id=f"{rng.getrandbits(128):032x}",
        role=role,
        content=content,
        tokens=fr.estimate_message_tokens(content),
    )


def _turn(rng: random.Random) -> list[fr.Frame]:
    """One new turn: prompt, tool call, its result, reply (the store numbers and times them)."""
    a, b = rng.sample(_IDENTS, 2)
    pkg = rng.choice(_PACKAGES)
    path = f"src/app/{pkg}/{a}.py"
    test = f"tests/test_{a}.py"
    tool_id = "toolu_01" + "".join(rng.choices("0123456789ABCDEFabcdef", k=22))
    command = f"pytest -x -q {test} -k {b}"
    output = "\n".join(
        [
            f"FAILED {test}::test_{a}_{b} - AssertionError: assert {rng.randrange(900)} == 0",
            "Traceback (most recent call last):",
            f'  File "{path}", line {rng.randrange(1, 900)}, in {a}_{b}',
            f"    {b} = self._{a}[{b}]",
            f"KeyError: '{b}'",
            f"1 failed, {rng.randrange(10, 300)} passed in {rng.random() * 9:.2f}s",
        ]
    )
    return [
        _message(
            "user",
            [fr.TextBlock(text=f"The {a} {b} test fails again after the last change to {path}.")],
            rng,
        ),
        _message(
            "assistant",
            [
                fr.TextBlock(text=f"I will run the {a} tests to see the failure first."),
                fr.ToolUseBlock(
                    id=tool_id, name="Bash", input={"command": command, "description": "Run tests"}
                ),
            ],
            rng,
        ),
        _message(
            "user",
            [
                fr.ToolResultBlock(
                    tool_use_id=tool_id, content=output, size=len(output.encode()), is_error=True
                )
            ],
            rng,
        ),
        _message(
            "assistant",
            [
                fr.TextBlock(
                    text=f"The {b} key is missing from the {a} map when the {pkg} cache is "
                    f"rebuilt; {path} now checks for it before the lookup."
                )
            ],
            rng,
        ),
    ]


def _fill(store: Store, index: ThreadSearchIndex, docs: int, seed: int) -> None:
    """Append generated frames (untimed) until the search index holds exactly ``docs``
    documents. A generated frame makes at most one document, so it never overshoots."""
    thread = store.thread(BENCH_THREAD)
    for _ in range(50):
        missing = docs - _manifest(index).docs
        if missing <= 0:
            return
        head = thread.head()
        assert head is not None
        frames = generate_frames(
            missing,
            seed=seed,
            thread_id=BENCH_THREAD,
            start_seq=head.next_seq,
            start_ms=thread.tail(1)[0].ts_ms + 1_000,
        )
        while batch := list(itertools.islice(frames, 10_000)):
            thread.append([msgspec.structs.replace(f, seq=-1) for f in batch], durable=False)
        index.refresh()
    raise RuntimeError(f"could not fill the index to {docs:,} documents")


def _change(before: list[SegmentRef], after: list[SegmentRef]) -> str:
    """What a refresh did to the segments: '' (tail only), 'seal' or 'merge N'."""
    new = [s for s in after if s not in before]
    if not new:
        return ""
    biggest = max(s.n_docs for s in new)
    return "seal" if biggest <= BLOCK else f"merge {biggest:,}"


# --- the phases -----------------------------------------------------------------------------


def _read_all(index: ThreadIndex, frames: int) -> None:
    for _ in index.read(0, frames - 1):
        pass


def _build(
    stores: dict[int, Store], repeat: int, large_repeat: int, report: Report
) -> dict[int, int]:
    """Rebuild each size's index; return its document count."""
    docs: dict[int, int] = {}
    for n, store in stores.items():
        index = ThreadSearchIndex(store.thread(BENCH_THREAD))
        frames_index = ThreadIndex(store.thread(BENCH_THREAD))
        frames = frames_index.frame_count()
        runs = large_repeat if n >= LARGE else repeat
        build_s: list[float] = []
        read_s: list[float] = []
        for r in range(runs):
            log(f"bench_search: build @{_short(n)} {r + 1}/{runs}")
            read_s.append(time_once(partial(_read_all, frames_index, frames)))
            gc.collect()
            seconds, docs[n] = timed(index.rebuild)
            build_s.append(seconds)
        row = rate_row(
            f"build @{_short(n)}",
            docs[n],
            build_s,
            "docs/s",
            baseline="read every frame",
        )
        frames_row = rate_row(f"  build @{_short(n)}, frames", frames, build_s, "frames/s")
        read_row = rate_row(
            f"  baseline: read every frame via the index @{_short(n)}", frames, read_s, "frames/s"
        )
        frames_row.baseline = "read every frame"
        frames_row.ratio = row.ratio = frames_row.median / read_row.median
        report.rows += [row, frames_row, read_row]
        m = _manifest(index)
        size = sum(p.stat().st_size for p in index.dir.iterdir() if p.is_file())
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        report.notes.append(
            f"index @{_short(n)}: {docs[n]:,} docs of {frames:,} frames, "
            f"{len(m.segments)} segments, {size / 1e6:,.0f} MB; build {median(build_s):.1f} s; "
            f"benchmark peak RSS so far {peak:,.0f} MB"
        )
    return docs


def _queries(stores: dict[int, Store], repeat: int, report: Report) -> None:
    sizes = list(stores)
    indexes = {n: ThreadSearchIndex(s.thread(BENCH_THREAD)) for n, s in stores.items()}
    samples: dict[tuple[str, int], list[float]] = {
        (label, n): [] for label, _ in QUERIES for n in sizes
    }
    refresh_s: dict[int, list[float]] = {n: [] for n in sizes}
    view_s: dict[int, list[float]] = {n: [] for n in sizes}
    top: dict[tuple[str, int], Hit | None] = {}
    for label, query in QUERIES:  # warm up (page cache, imports), and check there are hits
        for n in sizes:
            hits = search(stores[n], query, k=K)
            top[(label, n)] = hits[0] if hits else None
    gc.collect()
    gc.freeze()
    log(f"bench_search: {repeat} rounds of {len(QUERIES)} queries at {len(sizes)} sizes")
    for _ in range(repeat):
        for n in sizes:
            refresh_s[n].append(time_once(indexes[n].current_view))
            view_s[n].append(time_once(indexes[n].view))
        for label, query in QUERIES:
            for n in sizes:
                samples[(label, n)].append(time_once(partial(search, stores[n], query, k=K)))
    gc.unfreeze()

    small, large = sizes[0], sizes[-1]
    for label, _query in QUERIES:
        for n in sizes:
            row = time_row(f"search {label} @{_short(n)}", samples[(label, n)])
            row.baseline = "current_view(), nothing new"
            row.ratio = row.median / (median(refresh_s[n]) * 1e3)
            if n == large:
                row.target = QUERY_TARGET_MS
            report.rows.append(row)
        if len(sizes) > 1:
            ratio = median(samples[(label, large)]) / median(samples[(label, small)])
            report.rows.append(Row(f"  search {label} {_short(large)}/{_short(small)}", ratio, "x"))
    for n in sizes:
        report.rows.append(
            time_row(f"  component: current_view(), nothing new @{_short(n)}", refresh_s[n])
        )
        report.rows.append(time_row(f"  component: view() @{_short(n)}", view_s[n]))
    for label, query in QUERIES:
        hit = top[(label, large)]
        found = f"seq {hit.seq} ({hit.kind}, {hit.score:.2f}): {hit.snippet[:70]!r}" if hit else "-"
        report.notes.append(f"{label} {query!r} @{_short(large)}: top hit {found}")


def _updates(
    stores: dict[int, Store],
    rounds: int,
    cross_repeat: int,
    cross_max_fill: int,
    seed: int,
    report: Report,
) -> None:
    sizes = list(stores)
    rng = random.Random(seed)
    frame_indexes = {n: ThreadIndex(s.thread(BENCH_THREAD)) for n, s in stores.items()}
    indexes = {n: ThreadSearchIndex(s.thread(BENCH_THREAD)) for n, s in stores.items()}
    threads = {n: s.thread(BENCH_THREAD) for n, s in stores.items()}

    def one_turn(n: int) -> tuple[float, float, str]:
        """Append a turn (untimed); (frame caches s, search index s, what it did)."""
        before = list(_manifest(indexes[n]).segments)
        threads[n].append(_turn(rng), durable=False)
        frames_s = time_once(frame_indexes[n].refresh)
        seconds, added = timed(indexes[n].refresh)
        assert added == 4, f"one turn made {added} documents, expected 4"
        return frames_s, seconds, _change(before, list(_manifest(indexes[n]).segments))

    total: dict[int, list[float]] = {n: [] for n in sizes}
    alone: dict[int, list[float]] = {n: [] for n in sizes}
    frames_only: dict[int, list[float]] = {n: [] for n in sizes}
    current: dict[int, list[float]] = {n: [] for n in sizes}
    sealed: dict[int, list[float]] = {n: [] for n in sizes}
    plain: dict[int, list[float]] = {n: [] for n in sizes}
    for n in sizes:  # warm up
        one_turn(n)
    gc.collect()
    gc.freeze()
    log(f"bench_search: {rounds} rounds of one new turn at {len(sizes)} sizes")
    for _ in range(rounds):
        for n in sizes:
            frames_s, search_s, change = one_turn(n)
            total[n].append(frames_s + search_s)
            alone[n].append(search_s)
            frames_only[n].append(frames_s)
            (sealed[n] if change else plain[n]).append(frames_s + search_s)
            current[n].append(time_once(indexes[n].refresh))
    gc.unfreeze()
    for n in sizes:
        at = f"@{_short(n)}"
        row = time_row(
            f"update after one turn {at}",
            total[n],
            target=UPDATE_TARGET_MS,
            baseline="refresh, nothing new",
        )
        row.ratio = median(total[n]) / median(current[n])
        report.rows.append(row)
        report.rows.append(time_row(f"  search index alone {at}", alone[n]))
        report.rows.append(time_row(f"  frame caches' catch-up {at}", frames_only[n]))
        if plain[n]:
            report.rows.append(time_row(f"  rounds that only grew the tail {at}", plain[n]))
        if sealed[n]:
            report.rows.append(time_row(f"  rounds that sealed a block of {BLOCK} {at}", sealed[n]))
        report.rows.append(time_row(f"  baseline: search refresh, nothing new {at}", current[n]))
        report.notes.append(
            f"update {at}: max {max(total[n]) * 1e3:.1f} ms; {len(sealed[n])} of {rounds} rounds "
            f"sealed a block (max {max(sealed[n], default=0) * 1e3:.1f} ms)"
        )

    # The occasional merges, forced: fill to just below a boundary, then one turn crosses it.
    for n in sizes:
        crossings: dict[str, list[float]] = {}
        boundaries = [BLOCK * FANOUT] * cross_repeat + [BLOCK * FANOUT**2]
        for step in boundaries:
            docs = _manifest(indexes[n]).docs
            boundary = (docs // step + 1) * step
            if boundary - docs > cross_max_fill:
                report.notes.append(
                    f"@{_short(n)}: crossing {boundary:,} docs skipped (needs "
                    f"{boundary - docs:,} more documents; --cross-max-fill {cross_max_fill:,})"
                )
                continue
            log(f"bench_search: @{_short(n)}: {boundary - 3 - docs:,} more docs, then cross")
            _fill(stores[n], indexes[n], boundary - 3, seed)
            frame_indexes[n].refresh()
            frames_s, search_s, change = one_turn(n)
            crossings.setdefault(f"crossing a multiple of {step:,} docs ({change})", []).append(
                frames_s + search_s
            )
            if step > BLOCK * FANOUT:
                report.notes.append(
                    f"@{_short(n)}: the turn that crossed {boundary:,} docs did: {change}"
                )
        for name, seconds in crossings.items():
            row = time_row(f"  update {name} @{_short(n)}", seconds, baseline="update p50")
            row.ratio = median(seconds) / median(total[n])
            report.rows.append(row)


_LIBRARY_SEARCH: Final = (
    "import sys\n"
    "from continuity.retrieval.search import search\n"
    "from continuity.store.jsonl import Store\n"
    "search(Store(sys.argv[1], durable=False), sys.argv[2], k=10)\n"
)


def _has_search_command(cli: list[str]) -> bool:
    probe = subprocess.run([*cli, "search", "--help"], capture_output=True, check=False)
    return probe.returncode == 0


def _processes(store: Store, n: int, repeat: int, report: Report) -> None:
    ThreadSearchIndex(store.thread(BENCH_THREAD)).refresh()
    cli = [*_continuity_command(), "--store", str(store.root)]
    size = _short(n)
    processes: dict[str, list[str]] = {
        "python -c pass": [sys.executable, "-c", "pass"],
        'python -c "import continuity.retrieval.search"': [
            sys.executable,
            "-c",
            "import continuity.retrieval.search",
        ],
    }
    searched: list[str] = []
    use_cli = _has_search_command(cli)
    for label, query in QUERIES:
        name = f"continuity search {label} @{size}" if use_cli else f"process: search() {label}"
        argv = [*cli, "search", query] if use_cli else [sys.executable, "-c", _LIBRARY_SEARCH]
        if not use_cli:
            argv += [str(store.root), query]
        processes[name] = argv
        searched.append(name)
    if not use_cli:
        report.notes.append("the CLI has no search command: processes call search() directly")
    log(f"bench_search: {repeat} rounds of {len(processes)} fresh processes")
    wall: dict[str, list[float]] = {name: [] for name in processes}
    rss: dict[str, list[float]] = {name: [] for name in processes}
    # The children inherit the launcher's environment: measure them with bytecode caching, as
    # users' installs have it (else every module changed since its .pyc is compiled each run).
    no_pyc = os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    try:
        launcher = _Launcher()
    finally:
        if no_pyc is not None:
            os.environ["PYTHONDONTWRITEBYTECODE"] = no_pyc
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
        if name in searched:
            row.target = PROCESS_TARGET_MS
        if name != "python -c pass":
            row.baseline = "python -c pass"
            row.ratio = median(wall[name]) / base
        report.rows.append(row)
    base_rss = median(rss["python -c pass"])
    for name in ["python -c pass", *searched]:
        row = Row(
            f"peak RSS: {name}",
            median(rss[name]),
            "MB",
            p90=percentile(rss[name], 90),
            n=len(rss[name]),
        )
        if name != "python -c pass":
            row.baseline = "python -c pass"
            row.ratio = row.median / base_rss
        report.rows.append(row)


def _print_profile(title: str, fn: Callable[[], object]) -> None:
    profile = cProfile.Profile()
    started = time.perf_counter()
    profile.runcall(fn)
    print(f"\n===== cProfile: {title} ({time.perf_counter() - started:.1f} s)", file=sys.stderr)
    stats = pstats.Stats(profile, stream=sys.stderr)
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats(30)


def _profile(store: Store, n: int) -> None:
    def queries() -> None:
        for _ in range(10):
            for _label, query in QUERIES:
                search(store, query, k=K)

    log(f"bench_search: profiling searches and a build @{_short(n)}")
    _print_profile(f"10 x {len(QUERIES)} searches @{_short(n)}", queries)
    _print_profile(f"one build @{_short(n)}", ThreadSearchIndex(store.thread(BENCH_THREAD)).rebuild)


# --- the benchmark --------------------------------------------------------------------------


def run(
    sizes: tuple[int, ...] = DEFAULT_SIZES,
    build_repeat: int = 3,
    large_build_repeat: int = 1,
    repeat: int = 30,
    update_rounds: int = 200,
    cross_repeat: int = 3,
    cross_max_fill: int = 70_000,
    process_repeat: int = 9,
    seed: int = 0,
    profile: bool = False,
) -> Report:
    started = time.perf_counter()
    params: dict[str, Any] = {
        "sizes": ",".join(_short(s) for s in sizes),
        "build_repeat": f"{build_repeat}/{large_build_repeat}",
        "repeat": repeat,
        "update_rounds": update_rounds,
        "process_repeat": process_repeat,
        "seed": seed,
    }
    report = Report("bench_search", params)
    with work_dir("search") as work:
        stores: dict[int, Store] = {}
        for n in sizes:
            cached = cached_thread(n, seed)
            ThreadIndex(Store(cached, durable=False).thread(BENCH_THREAD)).refresh()
            log(f"bench_search: copying the {_short(n)} store")
            stores[n] = copy_store(cached, work / _short(n), search_index=False)
        _build(stores, build_repeat, large_build_repeat, report)
        _queries(stores, repeat, report)
        _updates(stores, update_rounds, cross_repeat, cross_max_fill, seed, report)
        _processes(stores[sizes[-1]], sizes[-1], process_repeat, report)
        if profile:
            _profile(stores[sizes[-1]], sizes[-1])
    report.notes.append(
        f"queries: k={K}, every thread of the store (one); page cache warm; stores durable=False "
        "in-process, the CLI's store durable (a search does not write the log)"
    )
    report.seconds = time.perf_counter() - started
    return report


def main(argv: list[str] | None = None) -> None:
    parser = common_parser(__doc__.split("\n\n")[0], DEFAULT_SIZES)
    parser.add_argument("--build-repeat", type=int, default=3, help="builds below 1M frames")
    parser.add_argument("--large-build-repeat", type=int, default=1, help="builds from 1M up")
    parser.add_argument("--repeat", type=int, default=30, help="timed searches per query, size")
    parser.add_argument("--update-rounds", type=int, default=200, help="one-turn updates")
    parser.add_argument("--cross-repeat", type=int, default=3, help="forced 4,096 crossings")
    parser.add_argument("--cross-max-fill", type=int, default=70_000, metavar="DOCS")
    parser.add_argument("--process-repeat", type=int, default=9, help="fresh processes each")
    parser.add_argument("--profile", action="store_true", help="cProfile the largest size")
    args = parser.parse_args(argv)
    report = run(
        sizes=args.sizes,
        build_repeat=args.build_repeat,
        large_build_repeat=args.large_build_repeat,
        repeat=args.repeat,
        update_rounds=args.update_rounds,
        cross_repeat=args.cross_repeat,
        cross_max_fill=args.cross_max_fill,
        process_repeat=args.process_repeat,
        seed=args.seed,
        profile=args.profile,
    )
    emit([report], args.json)


if __name__ == "__main__":
    main()
