"""Corruption: damage a store's logs, artifacts and caches; does ``verify`` see it, do reads lie?

    python -m tools.faults.corruption [--flips 500] [--others 100] [--kinds K,K,...]
                                      [--frames 2000] [--jobs 2] [--scale F] [--seed S]
                                      [--json] [--keep]

A store is prepared once: thread ``main`` of about ``--frames`` frames whose messages each carry
distinctive words (a marker such as ``mk0412q`` and a few rare words), tool calls and results,
checkpoints made by the library's compaction (their summaries are artifacts), a logged compile
(its bundle is an artifact), more messages after the last checkpoint, and a small thread
``side``. Its caches are then built the way a user's are, by reads (``stats``, ``search``,
``compile --dry-run``, ``log``).

Each trial damages a fresh copy of it in one way (``--flips`` trials of ``log-flip``,
``--others`` of every other kind):

* ``log-flip``: one byte of ``threads/main.jsonl`` XORed with a random non-zero value;
* ``log-truncate``: the log cut at a random offset (the caches, built before, still describe
  the whole log: a crash cannot make a log shorter than its caches say);
* ``log-delete``, ``log-duplicate``, ``log-swap``: a line deleted; a line copied right after
  itself or to the end; two lines swapped (adjacent ones half the time);
* ``artifact-flip``, ``artifact-truncate``: one byte of an artifact file, or the file cut;
* ``cache-flip``, ``cache-truncate``: the same in a cache file (``cache/threads`` and
  ``cache/search``; lock files excluded).

Then each command runs on its own fresh copy of the damaged store: ``verify``,
``log main --from-seq K`` (K: the damaged frame's seq; a random one for artifacts and caches),
``log main``, ``compile main --dry-run --format text``, ``search "<marker> <word>"`` (the damaged
frame's words) and ``stats``; each read's output is compared with the same command's output on
the undamaged store (the store's path and the ``cache bytes`` line of ``stats`` aside). Counted:

* **verify detected**: exit 1 with a report that names the damaged thread (log kinds), the
  artifact (artifact kinds) or the cache file or its thread (cache kinds);
* **silent wrong output**: a read that exits 0 and prints something other than the undamaged
  store's output. For log and artifact damage a read may instead fail (non-zero exit, a message,
  no traceback); for cache damage it must not: a cache is rebuildable, so the right answer is
  the undamaged output (a failing read there is counted as a *needless error*). For artifact
  damage only, a read may also degrade if it says so: exit 0 with another output is *warned*,
  not silent, when its stderr names the damaged artifact (``compile`` passing over a corrupt
  summary for an older one and warning about it). A damaged log allows no such degrading: its
  reads fail or print exactly the undamaged output;
* **tracebacks**: any ``Traceback`` on stderr, whatever the exit code.

The invariants: verify detects 100% of every kind, 0 silent wrong outputs, 0 tracebacks, 0
needless errors.
"""

from __future__ import annotations

import random
import shutil
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from tools.faults._common import (
    Examples,
    FamilyResult,
    Proc,
    Table,
    cli,
    comparable,
    family_parser,
    finish,
    first_difference,
    log,
    scaled,
    scratch,
    start,
)

__all__ = ["KINDS", "main", "prepare_store", "run"]

THREAD: Final = "main"
LOG_KINDS: Final = ("log-flip", "log-truncate", "log-delete", "log-duplicate", "log-swap")
ARTIFACT_KINDS: Final = ("artifact-flip", "artifact-truncate")
CACHE_KINDS: Final = ("cache-flip", "cache-truncate")
KINDS: Final = LOG_KINDS + ARTIFACT_KINDS + CACHE_KINDS
READS: Final = ("log --from-seq", "log", "compile --dry-run", "search", "stats")
RARE: Final = (
    "abacus",
    "bergamot",
    "cormorant",
    "damask",
    "epaulette",
    "filigree",
    "gossamer",
    "harlequin",
    "isthmus",
    "juniper",
    "kestrel",
    "lamprey",
    "mandolin",
    "narwhal",
    "obsidian",
    "pangolin",
    "quince",
    "rosewood",
    "saffron",
    "tourmaline",
    "umbrella",
    "vermilion",
    "wainscot",
    "xylophone",
    "yarrow",
    "zeppelin",
    "anchovy",
    "bramble",
    "cassowary",
    "dirigible",
)
_CLOCK_MS: Final = 1_767_000_000_000


# --- the prepared store ---------------------------------------------------------------------


@dataclass(slots=True)
class Prepared:
    root: Path
    words: dict[int, str]
    """The search query for each message's seq: its marker and one of its rare words."""
    lines: int


def prepare_store(root: Path, frames: int, rng: random.Random) -> Prepared:
    """The undamaged store (see the module's docstring), its caches built by reads."""
    from continuity import (
        Limits,
        Store,
        StrideMessages,
        ToolResultBlock,
        ToolUseBlock,
        compile_context,
        frames as fr,
        message,
        run_compaction,
    )

    ms = [_CLOCK_MS]

    def clock() -> int:
        ms[0] += 1_000
        return ms[0]

    store = Store(root, create=True, durable=False, clock=clock)
    thread = store.thread(THREAD)
    words: dict[int, str] = {}
    n = 0

    def turn() -> None:
        nonlocal n
        head = thread.head()
        seq = 1 if head is None else head.next_seq
        batch: list[fr.Frame] = []
        for role in ("user", "assistant"):
            marker = f"mk{n:04d}q"
            picked = rng.sample(RARE, 3)
            text = f"{marker}: the {picked[0]} and the {picked[1]} near the {picked[2]} module"
            words[seq + len(batch)] = f"{marker} {picked[1]}"
            batch.append(message(role, text))
            n += 1
        if rng.random() < 0.3:
            tool_id = f"toolu_{n:06d}"
            call = ToolUseBlock(id=tool_id, name="Bash", input={"command": f"grep -rn mk{n:04d}"})
            out = ToolResultBlock(tool_use_id=tool_id, content=f"src/{rng.choice(RARE)}.py:12")
            batch += [message("assistant", content=[call]), message("user", content=[out])]
        thread.append(batch)

    target = max(frames, 200)
    while (thread.head() or _NoHead).next_seq < target * 0.45:
        turn()
    run_compaction(thread, StrideMessages(150))
    compile_context(thread, limits=Limits(recent_messages=12))
    while (thread.head() or _NoHead).next_seq < target * 0.9:
        turn()
    run_compaction(thread, StrideMessages(150))
    compile_context(thread, limits=Limits(recent_messages=12))
    while (thread.head() or _NoHead).next_seq < target:
        turn()
    side = store.thread("side")
    side.append([message("user", f"side note {i} about the {rng.choice(RARE)}") for i in range(60)])
    for args in (
        ["stats"],
        ["search", RARE[0]],
        ["compile", THREAD, "--dry-run"],
        ["log", THREAD],
    ):
        p = cli(root, *args)
        if not p.ok:
            raise SystemExit(f"corruption: preparing the store: {p.describe()}")
    lines = (root / "threads" / f"{THREAD}.jsonl").read_bytes().count(b"\n")
    return Prepared(root, words, lines)


class _NoHead:
    next_seq = 0


# --- damage ---------------------------------------------------------------------------------


@dataclass(slots=True)
class Damage:
    kind: str
    what: str
    """How to do it again, in words (file, offset, bytes, lines)."""
    seq: int
    """The seq the damage is about (the damaged frame), or a random one."""
    names: tuple[str, ...]
    """Strings of which verify's report must contain one to name the damage."""


def _line_starts(data: bytes) -> list[int]:
    starts = [0]
    pos = data.find(b"\n")
    while pos >= 0 and pos + 1 < len(data):
        starts.append(pos + 1)
        pos = data.find(b"\n", pos + 1)
    return starts


def damage(store: Path, kind: str, rng: random.Random, lines: int) -> Damage:
    """Damage ``store`` (a copy) in one way of ``kind``."""
    any_seq = rng.randrange(lines)
    if kind in LOG_KINDS:
        path = store / "threads" / f"{THREAD}.jsonl"
        data = path.read_bytes()
        starts = _line_starts(data)
        rows = data.split(b"\n")[:-1]
        names = (f"thread {THREAD}", f"'{THREAD}'", f"{THREAD}.jsonl")
        if kind == "log-flip":
            at = rng.randrange(len(data))
            seq = _line_of(starts, at)
            new = data[at] ^ rng.randrange(1, 256)
            path.write_bytes(data[:at] + bytes([new]) + data[at + 1 :])
            what = f"byte {at} of {path.name} (seq {seq}) {data[at]:#04x} -> {new:#04x}"
        elif kind == "log-truncate":
            at = rng.randrange(1, len(data))
            seq = _line_of(starts, at)
            path.write_bytes(data[:at])
            what = f"{path.name} cut at byte {at} of {len(data)} (inside seq {seq})"
        elif kind == "log-delete":
            seq = rng.randrange(len(rows))
            del rows[seq]
            path.write_bytes(b"".join(r + b"\n" for r in rows))
            what = f"line of seq {seq} deleted from {path.name}"
        elif kind == "log-duplicate":
            seq = rng.randrange(len(rows))
            to = seq + 1 if rng.random() < 0.5 else len(rows)
            rows.insert(to, rows[seq])
            path.write_bytes(b"".join(r + b"\n" for r in rows))
            where = "right after itself" if to == seq + 1 else "at the end"
            what = f"line of seq {seq} of {path.name} copied {where}"
        else:
            a = rng.randrange(len(rows) - 1)
            b = a + 1 if rng.random() < 0.5 else rng.randrange(a + 1, len(rows))
            rows[a], rows[b] = rows[b], rows[a]
            path.write_bytes(b"".join(r + b"\n" for r in rows))
            seq = a
            what = f"lines of seq {a} and {b} of {path.name} swapped"
        return Damage(kind, what, seq, names)
    if kind in ARTIFACT_KINDS:
        files = sorted((store / "artifacts").rglob("*.zst"))
        path = rng.choice(files)
        aid = path.name.removesuffix(".zst")
        original = path.read_bytes()
        for _ in range(_HARMLESS_RETRIES):
            what = _damage_file(path, kind, rng)
            if not _reads_the_same(store, aid):
                break
            # A flipped bit zstd does not read (a frame header field that changes nothing the
            # decoder returns): the artifact still holds its content, so this is no damage to
            # detect. Put the byte back and damage another one.
            path.write_bytes(original)
        return Damage(kind, f"artifact {aid[:16]}…: {what}", any_seq, (aid,))
    files = sorted(
        p
        for p in (store / "cache").rglob("*")
        if p.is_file()
        and not p.name.endswith(".lock")
        and p.stat().st_size
        and p.relative_to(store / "cache").parts[0] in ("threads", "search")
    )
    path = rng.choice(files)
    rel = path.relative_to(store / "cache")
    what = _damage_file(path, kind, rng)
    tid = rel.parts[1]
    return Damage(kind, f"cache/{rel}: {what}", any_seq, (path.name, f"thread {tid}", tid))


def _line_of(starts: list[int], offset: int) -> int:
    from bisect import bisect_right

    return bisect_right(starts, offset) - 1


_HARMLESS_RETRIES: Final = 20


def _reads_the_same(store: Path, aid: str) -> bool:
    """Whether the artifact still reads back as the content its id names, after the damage."""
    from continuity.errors import ContinuityError
    from continuity.store.jsonl import Store

    try:
        Store(store, durable=False).artifacts.get(aid)
    except (ContinuityError, OSError, ValueError):
        return False
    return True


def _damage_file(path: Path, kind: str, rng: random.Random) -> str:
    data = path.read_bytes()
    if kind.endswith("flip"):
        at = rng.randrange(len(data))
        new = data[at] ^ rng.randrange(1, 256)
        path.write_bytes(data[:at] + bytes([new]) + data[at + 1 :])
        return f"byte {at} of {len(data)} {data[at]:#04x} -> {new:#04x}"
    at = rng.randrange(len(data))
    path.write_bytes(data[:at])
    return f"cut at byte {at} of {len(data)}"


# --- trials ---------------------------------------------------------------------------------


@dataclass(slots=True)
class KindCounts:
    trials: int = 0
    detected: int = 0
    unnamed: int = 0
    """verify exited 1 but its report did not name the damage."""
    missed: int = 0
    verify_other: int = 0
    tracebacks: int = 0
    reads: int = 0
    same: int = 0
    errors: int = 0
    silent: dict[str, int] = field(default_factory=dict)
    needless: int = 0
    warned: int = 0
    """Artifact damage: another output, exit 0, and stderr naming the damaged artifact."""
    read_tracebacks: dict[str, int] = field(default_factory=dict)


def _commands(d: Damage, words: dict[int, str], rng: random.Random) -> dict[str, list[str]]:
    query = words.get(d.seq) or words[rng.choice(sorted(words))]
    return {
        "verify": ["verify"],
        "log --from-seq": ["log", THREAD, "--from-seq", str(d.seq)],
        "log": ["log", THREAD],
        "compile --dry-run": ["compile", THREAD, "--dry-run", "--format", "text"],
        "search": ["search", query],
        "stats": ["stats"],
    }


class Baselines:
    """Each command's output on the undamaged store (run once per distinct command)."""

    def __init__(self, master: Path, work: Path) -> None:
        self.master = master
        self.work = work
        self.lock = threading.Lock()
        self.known: dict[tuple[str, ...], tuple[int | None, bytes]] = {}
        self.slots = 0

    def get(self, name: str, args: list[str]) -> tuple[int | None, bytes]:
        key = tuple(args)
        with self.lock:
            if key in self.known:
                return self.known[key]
        if name == "log --from-seq":
            # The full log's lines from seq K on (one line per frame, seqs from 0): one process
            # fewer per trial (check_derived compares one with a real run).
            code, full = self.get("log", ["log", THREAD])
            k = int(args[args.index("--from-seq") + 1])
            derived = (code, b"".join(full.splitlines(keepends=True)[k:]))
            with self.lock:
                self.known[key] = derived
            return derived
        with self.lock:
            self.slots += 1
            slot = self.work / f"baseline-{self.slots}"
        shutil.copytree(self.master, slot)
        p = cli(slot, *args)
        got = (p.code, comparable(name, p, slot))
        shutil.rmtree(slot, ignore_errors=True)
        if not p.ok:
            raise SystemExit(f"corruption: {p.describe()} on the undamaged store")
        with self.lock:
            self.known[key] = got
        return got

    def check_derived(self) -> None:
        """The derived ``log --from-seq`` baselines hold: one real run compared."""
        args = ["log", THREAD, "--from-seq", "7"]
        derived = self.get("log --from-seq", args)
        with self.lock:
            del self.known[tuple(args)]
        slot = self.work / "baseline-check"
        shutil.copytree(self.master, slot)
        p = cli(slot, *args)
        real = (p.code, comparable("log --from-seq", p, slot))
        shutil.rmtree(slot, ignore_errors=True)
        if real != derived:
            raise SystemExit("corruption: `log --from-seq K` is not the lines of `log` from K")


def _trial(
    prepared: Prepared,
    baselines: Baselines,
    kind: str,
    seed: int,
    slot: Path,
    counts: KindCounts,
    examples: Examples,
    lock: threading.Lock,
) -> None:
    rng = random.Random(seed)
    shutil.rmtree(slot, ignore_errors=True)
    damaged = slot / "damaged"
    shutil.copytree(prepared.root, damaged)
    d = damage(damaged, kind, rng, prepared.lines)
    where = f"[{kind} seed {seed}] {d.what}"
    run_dir = slot / "run"
    for name, args in _commands(d, prepared.words, rng).items():
        shutil.rmtree(run_dir, ignore_errors=True)
        shutil.copytree(damaged, run_dir)
        p = cli(run_dir, *args)
        out = comparable(name, p, run_dir)
        with lock:
            _count(name, args, p, out, d, where, baselines, counts, examples)
    shutil.rmtree(slot, ignore_errors=True)


def _count(
    name: str,
    args: list[str],
    p: Proc,
    out: bytes,
    d: Damage,
    where: str,
    baselines: Baselines,
    c: KindCounts,
    examples: Examples,
) -> None:
    report = (p.stdout + p.stderr).decode(errors="replace")
    if name == "verify":
        c.trials += 1
        if p.traceback:
            c.tracebacks += 1
            examples.add(f"{d.kind}: verify traceback", f"{where}: {p.describe(300)}")
        if p.code == 1 and any(n in report for n in d.names):
            c.detected += 1
        elif p.code == 1:
            c.unnamed += 1
            examples.add(
                f"{d.kind}: verify does not name the damage",
                f"{where}: {report.strip()[-300:]!r}",
            )
        elif p.code == 0:
            c.missed += 1
            examples.add(f"{d.kind}: verify says ok", f"{where}: {report.strip()[-200:]!r}")
        else:
            c.verify_other += 1
            examples.add(f"{d.kind}: verify exit {p.code}", f"{where}: {p.describe(300)}")
        return
    c.reads += 1
    base_code, base_out = baselines.get(name, args)
    cmd = "`" + p.command().split(" ", 1)[1] + "`" if " " in p.command() else p.command()
    if p.traceback:
        c.read_tracebacks[name] = c.read_tracebacks.get(name, 0) + 1
        err = p.stderr.decode(errors="replace").strip().splitlines()
        examples.add(
            f"{d.kind}: {name} traceback",
            f"{where}: {cmd} exit {p.code}: {err[-1] if err else ''}",
        )
    elif p.code == base_code and out == base_out:
        c.same += 1
    elif p.code != 0:
        c.errors += 1
        if d.kind in CACHE_KINDS:
            c.needless += 1
            examples.add(
                f"{d.kind}: {name} fails over a rebuildable cache", f"{where}: {p.describe(300)}"
            )
    elif d.kind in ARTIFACT_KINDS and any(n.encode() in p.stderr for n in d.names):
        c.warned += 1
    else:
        c.silent[name] = c.silent.get(name, 0) + 1
        examples.add(
            f"{d.kind}: {name} silently wrong",
            f"{where}: {cmd} exit 0; {first_difference(out, base_out)}",
        )


def run(
    *,
    flips: int = 500,
    others: int = 100,
    kinds: tuple[str, ...] = KINDS,
    frames: int = 2_000,
    jobs: int = 2,
    seed: int | None = None,
    keep: bool = False,
    examples_per_kind: int = 3,
) -> FamilyResult:
    started = time.perf_counter()
    seed, rng = start("corruption", seed)
    result = FamilyResult(
        "corruption",
        {"flips": flips, "others": others, "frames": frames, "jobs": jobs, "seed": seed},
    )
    examples = Examples(examples_per_kind)
    counts = {k: KindCounts() for k in kinds}
    lock = threading.Lock()
    with scratch("corruption", keep) as work:
        log(f"corruption: preparing a store of {frames} frames")
        prepared = prepare_store(work / "master", frames, rng)
        baselines = Baselines(prepared.root, work)
        baselines.check_derived()
        plan = [
            (kind, rng.getrandbits(32))
            for kind in kinds
            for _ in range(flips if kind == "log-flip" else others)
        ]
        rng.shuffle(plan)
        log(f"corruption: {len(plan)} trials on {jobs} workers")
        free = list(range(jobs))
        done = [0]

        def one(item: tuple[str, int]) -> None:
            with lock:
                slot_id = free.pop()
            try:
                kind, trial_seed = item
                slot = work / f"slot-{slot_id}"
                _trial(prepared, baselines, kind, trial_seed, slot, counts[kind], examples, lock)
            finally:
                with lock:
                    free.append(slot_id)
                    done[0] += 1
                    if done[0] % 50 == 0:
                        log(f"corruption: {done[0]} of {len(plan)} trials")

        with ThreadPoolExecutor(jobs) as pool:
            list(pool.map(one, plan))
    _report(result, counts)
    result.examples = examples.lines()
    result.seconds = time.perf_counter() - started
    return result


def _report(result: FamilyResult, counts: dict[str, KindCounts]) -> None:
    result.tables.append(
        Table(
            "verify on the damaged store",
            ["damage", "trials", "detected", "%", "exit 1, unnamed", "said ok", "other", "tb"],
            [
                [
                    k,
                    c.trials,
                    c.detected,
                    f"{100 * c.detected / c.trials:.0f}%" if c.trials else "-",
                    c.unnamed,
                    c.missed,
                    c.verify_other,
                    c.tracebacks,
                ]
                for k, c in counts.items()
            ],
        )
    )
    result.tables.append(
        Table(
            "reads on the damaged store (each against the undamaged store's output)",
            [
                "damage",
                "reads",
                "same",
                "clean errors",
                "warned",
                "silent wrong",
                *READS,
                "tracebacks",
            ],
            [
                [
                    k,
                    c.reads,
                    c.same,
                    c.errors,
                    c.warned,
                    sum(c.silent.values()),
                    *(c.silent.get(r, 0) for r in READS),
                    sum(c.read_tracebacks.values()),
                ]
                for k, c in counts.items()
            ],
        )
    )
    result.tables.append(
        Table(
            "tracebacks by read",
            ["damage", *READS],
            [[k, *(c.read_tracebacks.get(r, 0) for r in READS)] for k, c in counts.items()],
        )
    )
    trials = sum(c.trials for c in counts.values())
    detected = sum(c.detected for c in counts.values())
    missed = {k: c.trials - c.detected for k, c in counts.items() if c.trials - c.detected}
    result.check(
        "verify detects (exit 1, naming it) 100% of the damage",
        not missed,
        f"{detected} of {trials}; missed: " + ", ".join(f"{k} {v}" for k, v in missed.items())
        if missed
        else f"{detected} of {trials}",
    )
    silent = {k: sum(c.silent.values()) for k, c in counts.items() if c.silent}
    result.check(
        "0 silent wrong outputs",
        not silent,
        ", ".join(f"{k} {v}" for k, v in silent.items()),
    )
    tbs = {
        k: c.tracebacks + sum(c.read_tracebacks.values())
        for k, c in counts.items()
        if c.tracebacks or c.read_tracebacks
    }
    result.check("0 tracebacks", not tbs, ", ".join(f"{k} {v}" for k, v in tbs.items()))
    needless = {k: c.needless for k, c in counts.items() if c.needless}
    result.check(
        "reads over a damaged cache give the undamaged output",
        not needless,
        ", ".join(f"{k} {v} failed reads" for k, v in needless.items()),
    )


def _kinds(text: str) -> tuple[str, ...]:
    chosen = tuple(k.strip() for k in text.split(",") if k.strip())
    unknown = [k for k in chosen if k not in KINDS]
    if unknown:
        raise SystemExit(f"unknown kinds {unknown}; known: {', '.join(KINDS)}")
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = family_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--flips", type=int, default=500, help="log-flip trials")
    parser.add_argument("--others", type=int, default=100, help="trials of every other kind")
    parser.add_argument("--kinds", type=_kinds, default=KINDS, help=f"of {', '.join(KINDS)}")
    parser.add_argument("--frames", type=int, default=2_000, help="frames of the main thread")
    parser.add_argument("--examples", type=int, default=3, help="examples kept per failure")
    args = parser.parse_args(argv)
    result = run(
        flips=scaled(args.flips, args.scale),
        others=scaled(args.others, args.scale),
        kinds=args.kinds,
        frames=args.frames,
        jobs=args.jobs,
        seed=args.seed,
        keep=args.keep,
        examples_per_kind=args.examples,
    )
    return finish([result], args.json)


if __name__ == "__main__":
    sys.exit(main())
