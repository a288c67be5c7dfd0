"""Writers: many processes append to one thread while others read it and rebuild its caches.

    python -m tools.faults.writers [--single-writers 16] [--singles 5000]
                                   [--batch-writers 8] [--batches 500] [--batch-size 20]
                                   [--no-fsync] [--scale F] [--seed S] [--json] [--keep]

``--single-writers`` processes each append ``--singles`` single-frame batches and
``--batch-writers`` processes each ``--batches`` batches of ``--batch-size`` frames, all into
thread ``shared`` of one store, started together (``--scale`` multiplies the appends per
process, not the processes). Each writer records every range an append returned, after it
returned: those frames are *acknowledged*. A frame's message id names its writer, its batch and
its place in the batch (``w3-b17-2of20``). While they write, one loop each runs, as fresh
processes, ``log --json`` (every snapshot must be one chain of whole batches with contiguous
seqs), ``log --from-seq K --to-seq K+50 --json``, ``compile --dry-run``, ``search WORD``,
``stats`` and ``rebuild-index``.

Then: every acknowledged frame is in the log exactly once, at the seq its append returned, with
nothing else; seqs are contiguous and the chain is whole (read independently of the store's
reader); ``verify`` exits 0; and after a ``stats`` and a ``search`` (which bring the caches up
to date the way any read does) the cache files are byte-identical to a fresh rebuild (a copy of
the store, its ``cache/`` deleted, ``rebuild-index``, then one ``search`` to build the search
indexes, which ``rebuild-index`` only rebuilds where they exist). Appends are durable (an
fsync each, under the lock), as the library's and the CLI's are by default: that also keeps the
writers busy long enough for the readers to run many times alongside them; ``--no-fsync``
skips it.
"""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import msgspec

from tools.bench.bench_hooks import child_env
from tools.faults._common import (
    Examples,
    FamilyResult,
    Scan,
    Table,
    cli,
    compare_caches,
    family_parser,
    finish,
    log,
    scaled,
    scan_log,
    scratch,
    start,
    whole_batches,
)

__all__ = ["main", "run"]

THREAD: Final = "shared"
WORDS: Final = (
    "aardvark",
    "bassoon",
    "cinnabar",
    "dulcimer",
    "eiderdown",
    "fandango",
    "gazebo",
    "hullabaloo",
    "ibex",
    "jodhpur",
    "kumquat",
    "lorgnette",
    "marzipan",
    "nuthatch",
    "ocarina",
    "palanquin",
    "quagga",
    "rhubarb",
    "sassafras",
    "tamarind",
)

# Started by the harness; says "ready", waits for "go", appends, and records each acknowledged
# range ("start stop batch") in its side file after the append returned.
_WRITER: Final = textwrap.dedent(
    """
    import os, random, sys
    from continuity import frames as fr
    from continuity.store.jsonl import Store

    path, worker, count, size, durable, seed, side = sys.argv[1:8]
    worker, count, size, seed = int(worker), int(count), int(size), int(seed)
    words = sys.argv[8].split()
    rng = random.Random(seed)
    thread = Store(path, durable=durable == "1").thread("shared")
    fd = os.open(side, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    print("ready", flush=True)
    sys.stdin.readline()
    for b in range(count):
        batch = [
            fr.message(
                "user" if (b + i) % 2 else "assistant",
                " ".join(rng.choice(words) for _ in range(rng.randrange(3, 12))),
                message_id=f"w{worker}-b{b}-{i}of{size}",
            )
            for i in range(size)
        ]
        seqs = thread.append(batch[0] if size == 1 else batch)
        os.write(fd, f"{seqs.start} {seqs.stop} {b}\\n".encode())
    print("done", flush=True)
    """
)


@dataclass(slots=True)
class ReaderStats:
    runs: int = 0
    failed: int = 0
    tracebacks: int = 0
    inconsistent: int = 0
    seconds: list[float] = field(default_factory=list)


def _check_snapshot(stdout: bytes, first_seq: int, whole: bool) -> str:
    """What is wrong with a ``log --json`` snapshot (empty if nothing): contiguous seqs from
    ``first_seq``, one chain, whole batches (a batch writer's frames all there, in order)."""
    if not stdout:
        return "" if first_seq else "printed nothing"  # a range past the head is empty
    lines = stdout.split(b"\n")
    if lines[-1] != b"":
        return "output does not end with a newline"
    data = stdout
    if first_seq == 0:
        scan = scan_log(data)
        if scan.problem:
            return scan.problem
        if scan.tail:
            return f"the snapshot ends inside a batch ({scan.tail} bytes after seq {scan.seqs[-1]})"
        seqs, ids = scan.seqs, scan.ids
    else:
        seqs, ids = [], []
        for raw in lines[:-1]:
            obj = msgspec.json.decode(raw)
            seqs.append(obj["seq"])
            ids.append(obj.get("message_id"))
        if seqs != list(range(first_seq, first_seq + len(seqs))):
            return f"seqs are not contiguous from {first_seq}: {seqs[:5]}…"
    if whole:
        return whole_batches(ids)
    return ""


def _reader_loops(
    store: Path, stop: threading.Event, rng: random.Random, examples: Examples
) -> tuple[dict[str, ReaderStats], list[threading.Thread]]:
    stats: dict[str, ReaderStats] = {}
    threads = []

    def loop(name: str, command: Callable[[random.Random], list[str]], check: str) -> None:
        own = random.Random(rng.random())
        s = stats[name] = ReaderStats()
        while not stop.is_set():
            args = command(own)
            p = cli(store, *args, timeout=600)
            s.runs += 1
            s.seconds.append(p.seconds)
            if p.traceback:
                s.tracebacks += 1
                examples.add(f"reader {name}: traceback", p.describe())
            elif p.code != 0:
                s.failed += 1
                examples.add(f"reader {name}: exit {p.code}", p.describe())
            elif check:
                first = int(args[args.index("--from-seq") + 1]) if "--from-seq" in args else 0
                problem = _check_snapshot(p.stdout, first, whole=first == 0)
                if problem:
                    s.inconsistent += 1
                    examples.add(f"reader {name}: inconsistent snapshot", f"{problem}")
            time.sleep(0.05)

    def ranged(r: random.Random) -> list[str]:
        k = r.randrange(1, 2_000)
        return ["log", THREAD, "--from-seq", str(k), "--to-seq", str(k + 50), "--json"]

    loops: list[tuple[str, Callable[[random.Random], list[str]], str]] = [
        ("log --json", lambda r: ["log", THREAD, "--json"], "snapshot"),
        ("log --from-seq", ranged, "snapshot"),
        ("compile --dry-run", lambda r: ["compile", THREAD, "--dry-run"], ""),
        ("search", lambda r: ["search", r.choice(WORDS)], ""),
        ("stats", lambda r: ["stats"], ""),
        ("rebuild-index", lambda r: ["rebuild-index"], ""),
    ]
    for name, command, check in loops:
        t = threading.Thread(target=loop, args=(name, command, check), daemon=True)
        threads.append(t)
    return stats, threads


@dataclass(slots=True)
class _Findings:
    """What a run found, phase by phase."""

    write_seconds: float = 0.0
    writer_errors: list[str] = field(default_factory=list)
    acked: dict[int, str] = field(default_factory=dict)
    """seq -> the message id the append put there (what the writers were told)."""
    clashes: int = 0
    """Seqs given to two appends."""
    scan: Scan = field(default_factory=Scan)
    lost: int = 0
    wrong: int = 0
    duplicates: int = 0
    extra: int = 0
    contiguous: bool = True
    whole: str = ""
    verify_ok: bool = True
    verify_detail: str = ""
    refresh_ok: bool = True
    compared: int = 0
    diffs: list[str] = field(default_factory=list)


def run(
    *,
    single_writers: int = 16,
    singles: int = 5_000,
    batch_writers: int = 8,
    batches: int = 500,
    batch_size: int = 20,
    durable: bool = True,
    seed: int | None = None,
    keep: bool = False,
) -> FamilyResult:
    started = time.perf_counter()
    seed, rng = start("writers", seed)
    result = FamilyResult(
        "writers",
        {
            "single_writers": single_writers,
            "singles": singles,
            "batch_writers": batch_writers,
            "batches": batches,
            "batch_size": batch_size,
            "durable": durable,
            "seed": seed,
        },
    )
    examples = Examples()
    plan = [(1, singles)] * single_writers + [(batch_size, batches)] * batch_writers
    total = sum(size * count for size, count in plan)
    found = _Findings()
    with scratch("writers", keep) as work:
        store = work / "store"
        init = cli(store, "init")
        if not init.ok:
            raise SystemExit(f"writers: {init.describe()}")
        procs = _start_writers(store, work, plan, durable, rng)
        log(f"writers: {len(procs)} writers, {total:,} frames, readers looping alongside")
        stop = threading.Event()
        reader_stats, loops = _reader_loops(store, stop, rng, examples)
        _write_alongside_readers(procs, loops, stop, found)
        log(f"writers: appends done in {found.write_seconds:.0f} s; checking")
        for e in found.writer_errors:
            examples.add("writer failed", e.strip())
        _read_acknowledged(work, plan, found, examples)
        _check_log(store, found, examples)
        _final_reads(store, work, found, examples)
    _report(result, len(plan), total, found, reader_stats)
    result.examples = examples.lines()
    result.seconds = time.perf_counter() - started
    return result


def _start_writers(
    store: Path, work: Path, plan: list[tuple[int, int]], durable: bool, rng: random.Random
) -> list[subprocess.Popen[bytes]]:
    """A writer process for each (batch size, batches) of ``plan``, waiting for "go"."""
    env = child_env(store)
    procs = []
    for k, (size, count) in enumerate(plan):
        argv = [
            sys.executable,
            "-c",
            _WRITER,
            str(store),
            str(k),
            str(count),
            str(size),
            "1" if durable else "0",
            str(rng.randrange(2**32)),
            str(work / f"acked-{k}.txt"),
            " ".join(WORDS),
        ]
        procs.append(
            subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
            )
        )
    return procs


def _write_alongside_readers(
    procs: list[subprocess.Popen[bytes]],
    loops: list[threading.Thread],
    stop: threading.Event,
    found: _Findings,
) -> None:
    """Tell the ready writers to go, start the reader loops, and wait for the writers."""
    writer_errors = found.writer_errors
    try:
        for p in procs:
            assert p.stdout is not None
            if p.stdout.readline() != b"ready\n":
                writer_errors.append(p.communicate(timeout=30)[1].decode(errors="replace"))
        for p in procs:
            assert p.stdin is not None
            p.stdin.write(b"go\n")
            p.stdin.flush()
        t0 = time.perf_counter()
        for t in loops:
            t.start()
        for k, p in enumerate(procs):
            _out, err = p.communicate()
            if p.returncode != 0:
                writer_errors.append(f"writer {k} exit {p.returncode}: {err.decode()[-400:]}")
        found.write_seconds = time.perf_counter() - t0
    finally:
        stop.set()
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for t in loops:
            if t.is_alive():
                t.join()


def _read_acknowledged(
    work: Path, plan: list[tuple[int, int]], found: _Findings, examples: Examples
) -> None:
    """What the writers were told, from their side files."""
    acked = found.acked
    for k, (size, _count) in enumerate(plan):
        side = work / f"acked-{k}.txt"
        for line in side.read_text().splitlines() if side.exists() else []:
            a, b, batch = (int(x) for x in line.split())
            for i, seq in enumerate(range(a, b)):
                if seq in acked:
                    found.clashes += 1
                    examples.add("two appends were given one seq", f"seq {seq}")
                acked[seq] = f"w{k}-b{batch}-{i}of{size}"


def _check_log(store: Path, found: _Findings, examples: Examples) -> None:
    """What the log holds, read independently of the store's reader, against what the
    writers were told."""
    data = (store / "threads" / f"{THREAD}.jsonl").read_bytes()
    scan = found.scan = scan_log(data)
    if scan.problem:
        examples.add("log unsound", scan.problem)
    at = dict(zip(scan.seqs, scan.ids, strict=True))
    for seq, mid in found.acked.items():
        if seq not in at:
            found.lost += 1
            examples.add("acknowledged frame lost", f"seq {seq} ({mid})")
        elif at[seq] != mid:
            found.wrong += 1
            examples.add("acknowledged frame misplaced", f"seq {seq}: {at[seq]} not {mid}")
    writer_ids = [m for m in scan.ids if m is not None]
    found.duplicates = len(writer_ids) - len(set(writer_ids))
    found.extra = sum(1 for s in scan.seqs if s and s not in found.acked)
    found.contiguous = scan.seqs == list(range(len(scan.seqs)))
    found.whole = whole_batches(scan.ids)
    if found.whole:
        examples.add("partial batch in the log", found.whole)


def _final_reads(store: Path, work: Path, found: _Findings, examples: Examples) -> None:
    """``verify``, then reads that bring the caches up to date, then the caches compared with
    a fresh rebuild."""
    verify = cli(store, "verify", timeout=900)
    found.verify_ok = verify.ok
    if not verify.ok:
        found.verify_detail = verify.describe(200)
        examples.add("verify failed", verify.describe() + " " + verify.stdout.decode()[-400:])
    refresh = [cli(store, "stats"), cli(store, "search", WORDS[0])]
    for r in refresh:
        if not r.ok:
            examples.add("final read failed", r.describe())
    found.refresh_ok = all(r.ok for r in refresh)
    found.compared, found.diffs = compare_caches(store, work)
    for d in found.diffs:
        examples.add("cache differs from a fresh rebuild", d)


def _report(
    result: FamilyResult,
    writers: int,
    total: int,
    f: _Findings,
    reader_stats: dict[str, ReaderStats],
) -> None:
    scan = f.scan
    result.tables.append(
        Table(
            f"appends ({f.write_seconds:.0f} s of concurrent writing)",
            ["what", "count"],
            [
                ["writer processes", writers],
                ["frames appended (planned)", total],
                ["frames acknowledged", len(f.acked)],
                ["frames in the log (after thread_created)", max(0, len(scan.seqs) - 1)],
                ["acknowledged frames lost", f.lost],
                ["acknowledged frames at another seq", f.wrong],
                ["seqs given to two appends", f.clashes],
                ["duplicated frames (same message id twice)", f.duplicates],
                ["frames nobody acknowledged", f.extra],
                ["bytes past the last whole batch", scan.tail],
                ["cache files compared with a fresh rebuild", f.compared],
                ["cache files that differ", len(f.diffs)],
            ],
        )
    )
    result.tables.append(
        Table(
            "readers while writing (fresh processes)",
            ["command", "runs", "failed", "tracebacks", "inconsistent", "max s"],
            [
                [
                    name,
                    s.runs,
                    s.failed,
                    s.tracebacks,
                    s.inconsistent,
                    max(s.seconds, default=0.0),
                ]
                for name, s in reader_stats.items()
            ],
        )
    )
    reader_bad = sum(s.failed + s.tracebacks + s.inconsistent for s in reader_stats.values())
    result.check(
        "every writer ran to its end", not f.writer_errors, f"{len(f.writer_errors)} failed"
    )
    result.check(
        "every acknowledged frame in the log exactly once, where its append said",
        f.lost == f.wrong == f.clashes == f.duplicates == f.extra == 0 and len(f.acked) == total,
        f"{f.lost} lost, {f.wrong} misplaced, {f.duplicates} duplicated, {f.extra} "
        f"unacknowledged, {len(f.acked):,} of {total:,} acknowledged",
    )
    result.check(
        "seqs contiguous, one chain, whole batches",
        f.contiguous and not scan.problem and not f.whole and scan.tail == 0,
        scan.problem or f.whole or ("" if f.contiguous else "seqs are not contiguous"),
    )
    result.check("verify exits 0", f.verify_ok, f.verify_detail)
    result.check(
        "concurrent readers: no failure, traceback or inconsistent snapshot",
        reader_bad == 0,
        f"{reader_bad} bad runs of {sum(s.runs for s in reader_stats.values())}",
    )
    result.check(
        "caches byte-identical to a fresh rebuild",
        not f.diffs and f.refresh_ok,
        f"{len(f.diffs)} of {f.compared} files differ" if f.diffs else "",
    )


def main(argv: list[str] | None = None) -> int:
    parser = family_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--single-writers", type=int, default=16)
    parser.add_argument("--singles", type=int, default=5_000, help="single-frame appends each")
    parser.add_argument("--batch-writers", type=int, default=8)
    parser.add_argument("--batches", type=int, default=500, help="batches each")
    parser.add_argument("--batch-size", type=int, default=20)
    parser.add_argument("--no-fsync", action="store_true", help="skip the fsync of every append")
    args = parser.parse_args(argv)
    result = run(
        single_writers=args.single_writers,
        singles=scaled(args.singles, args.scale),
        batch_writers=args.batch_writers,
        batches=scaled(args.batches, args.scale),
        batch_size=args.batch_size,
        durable=not args.no_fsync,
        seed=args.seed,
        keep=args.keep,
    )
    return finish([result], args.json)


if __name__ == "__main__":
    sys.exit(main())
