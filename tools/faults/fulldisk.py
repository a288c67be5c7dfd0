"""Full disk: an append that does not fit fails clearly, says truthfully what it left behind,
and leaves every earlier frame and the chain intact; reads are served as on a roomy disk.

    python -m tools.faults.fulldisk [--trials 30] [--read-trials 10]
                                    [--mode auto|tmpfs|userns|fsize]
                                    [--scale F] [--seed S] [--json] [--keep]

How the disk is made full (``--mode``, printed with the results):

* ``tmpfs``: a real full file system. A small tmpfs (8 MB) is mounted for the run (this needs
  root); the store lives on it, and a filler file takes all of its space but for a random few
  bytes (none, less than a page, or room for part of the batch about to be appended; in whole
  pages).
* ``userns``: the same tmpfs, mounted inside a user and mount namespace (``unshare -r -m``), for
  a user who is not root; the family runs again inside it and hands its result back.
* ``fsize``: a simulation when no tmpfs can be mounted: the append runs with ``RLIMIT_FSIZE`` set
  to the log's size plus the random few bytes (and SIGXFSZ ignored), so its write fails part
  way with ``EFBIG`` ("File too large") as it would with ``ENOSPC``. Only the appending process
  is limited, and only files growing past that size are affected. The reads and writes of
  step 0 below run with the limit set to the few bytes alone, so a cache file that would grow
  past it cannot be written.

``auto`` (the default) takes the first of these that works. Each trial, on a fresh store of 200
frames in thread ``t`` (caches built by reads):

0. (the first ``--read-trials`` trials) the logs of ``t`` and of a second thread ``u`` are
   appended to after their caches were built, so a read must write caches to be current; the
   disk is made full (no room, less than a page, or a few pages), and every read command
   (``log``, ``log --json``, ``compile --dry-run``, ``search`` of the store and of ``t``,
   ``stats``, ``threads``, ``sessions``, ``verify``) must exit 0 with the output it gives on a
   copy of the store on a roomy disk, as a read-only store does: caches that cannot be
   written are computed in memory. Then writes that do not fit (``rebuild-index``,
   ``compact``) fail with one clear line, or succeed, and leave no temporary file;
1. ``append t`` of a batch of 4-12 frames of 20-60 kB that does not fit must fail: exit non-zero,
   no traceback, a message saying the disk is full (``No space left``, ``File too large``…);
2. truthfully: if it says nothing was written, the log is exactly what it was; if the log holds
   bytes of the failed batch, the message must say so (bytes left, partial, torn, quarantined);
   a quarantine file it names must exist;
3. the earlier bytes of the log are unchanged, and, still full, ``log t --json`` prints exactly
   the earlier frames and ``verify`` exits 0;
4. a small append, still full: it succeeds (and is then readable) or fails as clearly;
5. space freed: ``verify`` exits 0, an append succeeds, and the log is the earlier frames, the
   small append if it succeeded and the new one, on one chain of whole batches;
6. (the read trials) reads then catch the caches up: ``stats``, ``search``, ``log --json`` and
   ``compile --dry-run`` give the output of a copy of the store with no caches at all, every
   thread's frame caches end at its log's end, and ``verify`` exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from tools.faults._common import (
    ROOT,
    Examples,
    FamilyResult,
    Proc,
    Table,
    cli,
    family_parser,
    finish,
    first_difference,
    log,
    scaled,
    scan_log,
    scratch,
    start,
    whole_batches,
)

__all__ = ["MODES", "main", "run"]

MODES: Final = ("auto", "tmpfs", "userns", "fsize")
THREAD: Final = "t"
OTHER: Final = "u"
"""A second thread, also behind its caches, so store-wide reads have more than one."""
WORD: Final = "ahead"
"""What the reads search for: a word of the frames appended after the caches were built."""
READS: Final = (
    ("log", THREAD),
    ("log", THREAD, "--json"),
    ("compile", THREAD, "--dry-run"),
    ("search", WORD),
    ("search", WORD, "--thread", THREAD),
    ("stats",),
    ("threads",),
    ("sessions",),
    ("verify",),
)
CATCH_UP: Final = (
    ("stats",),
    ("search", WORD),
    ("log", THREAD, "--json"),
    ("compile", THREAD, "--dry-run"),
)
"""The reads run once space is freed: between them, they write every kind of cache."""
WRITES: Final = (("rebuild-index",), ("compact", THREAD, "--stride", "20"))
"""Writes, besides appends, run on the full disk: each fails clearly or succeeds."""
TMPFS_MB: Final = 8
PAGE: Final = 4096
NO_SPACE: Final = re.compile(
    rb"no space left|enospc|errno 28|disk is full|disk full|file too large|efbig|errno 27"
    rb"|out of space|not enough space",
    re.I,
)
SAYS_LEFT: Final = re.compile(rb"quarantin|partial|torn|\d+ bytes", re.I)
NOTHING_WRITTEN: Final = re.compile(rb"nothing was written", re.I)


# --- making the disk full -------------------------------------------------------------------


def _can_mount(target: Path) -> bool:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    target.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(target)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        return False
    subprocess.run(["umount", str(target)], capture_output=True, check=False)
    return True


def _can_unshare() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = "d=$(mktemp -d) && mount -t tmpfs -o size=1m tmpfs $d && umount $d; rmdir $d"
    done = subprocess.run(
        ["unshare", "-r", "-m", "sh", "-c", probe], capture_output=True, check=False
    )
    return done.returncode == 0


def resolve_mode(mode: str, probe_dir: Path) -> str:
    if mode != "auto":
        return mode
    if _can_mount(probe_dir):
        return "tmpfs"
    if _can_unshare():
        return "userns"
    return "fsize"


class Disk:
    """Where the stores live, and how it is made full."""

    def __init__(self, mode: str, folder: Path) -> None:
        self.mode = mode
        self.root = folder / "disk"
        self.root.mkdir(parents=True, exist_ok=True)
        self.mounted = False
        self.limit: int | None = None
        if mode == "tmpfs":
            done = subprocess.run(
                ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_MB}m", "tmpfs", str(self.root)],
                capture_output=True,
                check=False,
            )
            if done.returncode != 0:
                raise SystemExit(f"fulldisk: cannot mount a tmpfs: {done.stderr.decode()}")
            self.mounted = True

    def describe(self) -> str:
        if self.mode == "tmpfs":
            return f"tmpfs of {TMPFS_MB} MB mounted at {self.root} (a real ENOSPC)"
        return (
            "RLIMIT_FSIZE on the writing processes (simulated: writes past the limit fail "
            "with EFBIG, 'File too large'; SIGXFSZ ignored)"
        )

    def fill(self, free: int, log_path: Path | None) -> int:
        """Leave about ``free`` bytes; return what is actually free for the log to grow (for
        any file, without ``log_path``: with ``fsize``, the limit is then ``free`` alone)."""
        if self.mode == "fsize":
            self.limit = (0 if log_path is None else log_path.stat().st_size) + free
            return free
        filler = self.root / "filler"
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            block = b"\0" * (1 << 20)
            while True:  # unbuffered: every byte that fits is written, then ENOSPC
                try:
                    if os.write(fd, block) == 0:
                        break
                except OSError:
                    break
        finally:
            os.close(fd)
        size = filler.stat().st_size
        os.truncate(filler, max(0, size - free))
        st = os.statvfs(self.root)
        return st.f_bavail * st.f_frsize

    def free_space(self) -> None:
        self.limit = None
        (self.root / "filler").unlink(missing_ok=True)

    def preexec(self) -> Callable[[], None] | None:
        limit = self.limit
        if limit is None:
            return None

        def limited() -> None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

        return limited

    def close(self) -> None:
        if self.mounted:
            done = subprocess.run(["umount", str(self.root)], capture_output=True, check=False)
            if done.returncode != 0:
                subprocess.run(["umount", "-l", str(self.root)], capture_output=True, check=False)
            self.mounted = False


# --- one trial ------------------------------------------------------------------------------


@dataclass(slots=True)
class Counts:
    trials: int = 0
    failed_clearly: int = 0
    truthful: int = 0
    prefix_intact: int = 0
    reads_ok_full: int = 0
    second_ok: int = 0
    second_succeeded: int = 0
    after_ok: int = 0
    left_bytes: int = 0
    """Trials whose failed append left bytes in the log."""
    free: list[int] = field(default_factory=list)
    read_trials: int = 0
    reads_served: int = 0
    """Read trials in which every read command gave its roomy-disk output while full."""
    read_commands: int = 0
    read_commands_ok: int = 0
    read_free: list[int] = field(default_factory=list)
    writes_clear: int = 0
    """Read trials whose writes on the full disk failed clearly (or succeeded) and left no
    temporary file."""
    writes_failed: int = 0
    caught_up: int = 0


def _lines(n: int, size: tuple[int, int], rng: random.Random, tag: str) -> bytes:
    return b"".join(
        json.dumps(
            {
                "role": rng.choice(["user", "assistant"]),
                "text": f"{tag} {i} " + "z" * rng.randrange(*size),
            }
        ).encode()
        + b"\n"
        for i in range(n)
    )


def _trial(
    disk: Disk, t: int, rng: random.Random, c: Counts, examples: Examples, *, reads: bool
) -> None:
    store = disk.root / f"store-{t}"
    path = store / "threads" / f"{THREAD}.jsonl"
    _prepare(store, rng)
    roomy = disk.root.parent / f"roomy-{t}"
    want: dict[tuple[str, ...], bytes] = {}
    if reads:
        _ahead(store, rng)
        want = _roomy_reads(store, roomy, READS)
        shown = want[("log", THREAD, "--json")]
    else:
        shown = cli(store, "log", THREAD, "--json").stdout
    before = path.read_bytes()
    trial = _Trial(disk, store, path, before, f"trial {t}", c, examples)
    if reads:
        read_free = 0 if t == 0 else _room_for_reads(disk, rng)
        c.read_trials += 1
        c.read_free.append(disk.fill(read_free, None))
        trial.what = f"trial {t}: reads with {read_free:,} bytes free"
        trial.reads_while_full(want, rng)
        trial.writes_while_full()
        # what the writes that fit left (a compaction's first frames) is the log from here on
        trial.before = path.read_bytes()
        shown = _roomy_reads(store, roomy, (("log", THREAD, "--json"),))[("log", THREAD, "--json")]
    batch = _lines(rng.randrange(4, 13), (20_000, 60_000), rng, "big")
    free = disk.fill(_room_to_leave(disk, rng, len(batch)), path)
    c.trials += 1
    c.free.append(free)
    trial.what = f"trial {t}: {len(batch):,}-byte batch, {free:,} bytes free"
    # 1. the append that does not fit
    p = cli(store, "append", THREAD, stdin=batch, preexec=disk.preexec())
    trial.failed_clearly(p)
    after = trial.truthful(p)  # 2.
    trial.intact_while_full(after, shown)  # 3.
    small = trial.small_append(rng)  # 4.
    trial.after_freeing(rng, small)  # 5.
    if reads:
        trial.caught_up(roomy)  # 6.
    shutil.rmtree(store, ignore_errors=True)
    shutil.rmtree(roomy, ignore_errors=True)
    if trial.bad:
        log(f"fulldisk: {trial.what}: failed {', '.join(trial.bad)}")


def _prepare(store: Path, rng: random.Random) -> None:
    """A fresh store of 200 frames in thread ``t``, its caches built by reads."""
    if not cli(store, "init").ok:
        raise SystemExit("fulldisk: continuity init failed")
    for k in range(4):
        p = cli(store, "append", THREAD, stdin=_lines(50, (20, 400), rng, f"before{k}"))
        if not p.ok:
            raise SystemExit(f"fulldisk: preparing the store: {p.describe()}")
    for args in (["stats"], ["search", "before3"], ["log", THREAD]):
        cli(store, *args)


def _ahead(store: Path, rng: random.Random) -> None:
    """Frames appended to ``t`` and ``u`` after their caches were built (no read after them):
    a read must write caches to be current."""
    for thread, n in ((THREAD, rng.randrange(5, 60)), (OTHER, rng.randrange(1, 20))):
        p = cli(store, "append", thread, stdin=_lines(n, (20, 400), rng, WORD))
        if not p.ok:
            raise SystemExit(f"fulldisk: appending ahead of the caches: {p.describe()}")


def _roomy_reads(
    store: Path, roomy: Path, reads: tuple[tuple[str, ...], ...]
) -> dict[tuple[str, ...], bytes]:
    """What each read prints on a copy of ``store`` on a roomy disk (normalised:
    :func:`_normal`), made now (the copy is left for :meth:`_Trial.caught_up`)."""
    shutil.rmtree(roomy, ignore_errors=True)
    shutil.copytree(store, roomy, symlinks=True)
    out = {}
    for args in reads:
        p = cli(roomy, *args)
        if not p.ok:
            raise SystemExit(f"fulldisk: {' '.join(args)} on a roomy disk: {p.describe()}")
        out[args] = _normal(p.stdout, roomy)
    return out


def _normal(out: bytes, store: Path) -> bytes:
    """A read's output without what differs between two copies of a store: its path, and the
    size of its caches (``stats``)."""
    lines = out.replace(str(store).encode(), b"<store>").split(b"\n")
    return b"\n".join(line for line in lines if not line.startswith(b"cache bytes"))


def _room_for_reads(disk: Disk, rng: random.Random) -> int:
    """Room left for the reads: none (every write fails: always so in the first trial), less
    than a page, or a few pages (some cache files are written, others are not: the reads see
    caches of mixed ages)."""
    pick = rng.random()
    if pick < 0.4:
        return 0
    free = rng.randrange(1, PAGE) if pick < 0.6 else rng.randrange(PAGE, 8 * PAGE)
    return free - free % PAGE if disk.mode != "fsize" else free


def _temporary_files(store: Path) -> list[str]:
    """Temporary files of an atomic write (``.<name>.<pid>-<hex>.tmp``) left in ``store``."""
    return sorted(str(p.relative_to(store)) for p in store.rglob(".*.tmp"))


def _room_to_leave(disk: Disk, rng: random.Random, batch_size: int) -> int:
    """How many bytes to leave free: a quarter of the trials no room at all, a quarter less
    than a page, half room for part of the batch (so the write is cut inside it); in whole
    pages on a real file system."""
    pick = rng.random()
    if pick < 0.25:
        want_free = 0
    elif pick < 0.5:
        want_free = rng.randrange(1, PAGE)
    else:
        want_free = rng.randrange(PAGE, batch_size)
    want_free -= want_free % PAGE if disk.mode != "fsize" else 0
    return want_free


@dataclass(slots=True)
class _Trial:
    """The checks of one trial, on its store, counted in ``c``; ``bad`` names those it
    failed."""

    disk: Disk
    store: Path
    path: Path
    before: bytes
    """The log before the append that does not fit."""
    what: str
    c: Counts
    examples: Examples
    bad: list[str] = field(default_factory=list)

    def reads_while_full(self, want: dict[tuple[str, ...], bytes], rng: random.Random) -> None:
        """Every read command, on the full disk, gives what it gives on a roomy one (in a
        random order: where some room is left, the first read may catch some caches up)."""
        served = True
        for args, expected in rng.sample(list(want.items()), len(want)):
            p = cli(self.store, *args, preexec=self.disk.preexec())
            self.c.read_commands += 1
            got = _normal(p.stdout, self.store)
            if p.ok and got == expected:
                self.c.read_commands_ok += 1
                continue
            served = False
            problem = p.describe(300) if not p.ok else first_difference(got, expected)
            self.examples.add(f"`{' '.join(args)}` on the full disk", f"{self.what}: {problem}")
        self.c.reads_served += served
        if not served:
            self.bad.append("every read served while full")

    def writes_while_full(self) -> None:
        """Writes other than appends, on the full disk: each fails with one clear line, or
        succeeds; none leaves a temporary file."""
        clear = True
        for args in WRITES:
            p = cli(self.store, *args, preexec=self.disk.preexec())
            if p.ok:
                continue
            self.c.writes_failed += 1
            lines = p.stderr.strip().splitlines()
            if p.traceback or p.timed_out or not NO_SPACE.search(p.stderr) or len(lines) != 1:
                clear = False
                self.examples.add(
                    f"`{' '.join(args)}` on the full disk", f"{self.what}: {p.describe(300)}"
                )
        left = _temporary_files(self.store)
        if left:
            clear = False
            self.examples.add(
                "temporary files left by writes on the full disk", f"{self.what}: {left[:5]}"
            )
        self.c.writes_clear += clear
        if not clear:
            self.bad.append("writes while full")

    def caught_up(self, roomy: Path) -> None:
        """Space freed, reads catch the caches up: each gives the output of a copy of the store
        without caches, every frame cache ends at its log's end, and ``verify`` exits 0."""
        shutil.rmtree(roomy, ignore_errors=True)
        shutil.copytree(self.store, roomy, symlinks=True, ignore=shutil.ignore_patterns("cache"))
        problems = []
        for args in CATCH_UP:
            p, fresh = cli(self.store, *args), cli(roomy, *args)
            got, expected = _normal(p.stdout, self.store), _normal(fresh.stdout, roomy)
            if not (p.ok and fresh.ok and got == expected):
                detail = first_difference(got, expected) if p.ok else p.describe(300)
                problems.append(f"`{' '.join(args)}`: {detail}")
        for log_path in sorted((self.store / "threads").glob("*.jsonl")):
            manifest = self.store / "cache" / "threads" / log_path.stem / "manifest.v1.json"
            if not manifest.exists():
                continue  # a small log keeps no caches
            end = json.loads(manifest.read_bytes()).get("log_end")
            if end != log_path.stat().st_size:
                problems.append(
                    f"the caches of {log_path.stem} end at byte {end}, "
                    f"the log at {log_path.stat().st_size}"
                )
        v = cli(self.store, "verify")
        if not v.ok:
            problems.append(f"verify: {v.describe(200)} {v.stdout[-200:]!r}")
        if problems:
            self.bad.append("caught up")
            self.examples.add("reads once space is freed", f"{self.what}: {problems[0]}")
        else:
            self.c.caught_up += 1

    def failed_clearly(self, p: Proc) -> None:
        if p.code != 0 and not p.traceback and NO_SPACE.search(p.stderr):
            self.c.failed_clearly += 1
        else:
            self.bad.append("failed clearly")
            self.examples.add("the append that does not fit", f"{self.what}: {p.describe(300)}")

    def truthful(self, p: Proc) -> bytes:
        """Check that what the failed append ``p`` says it left is what the log holds; the
        log after it."""
        err, before, what = p.stderr, self.before, self.what
        after = self.path.read_bytes()
        grew = len(after) > len(before)
        truthful = True
        if NOTHING_WRITTEN.search(err) and after != before:
            truthful = False
            self.examples.add(
                "says nothing was written, but the log changed",
                f"{what}: the log went from {len(before):,} to {len(after):,} bytes; "
                f"{p.describe(300)}",
            )
        if grew and not SAYS_LEFT.search(err):
            truthful = False
            self.examples.add(
                "leaves bytes in the log without saying so",
                f"{what}: {len(after) - len(before):,} bytes of the batch left; {p.describe(300)}",
            )
        for named in re.findall(rb"(/\S*quarantine/\S+\.json)", err):
            if not Path(named.decode(errors="replace")).exists():
                truthful = False
                self.examples.add(
                    "names a quarantine file that does not exist", f"{what}: {named!r}"
                )
        self.c.truthful += truthful
        self.c.left_bytes += grew
        if not truthful:
            self.bad.append("truthful")
        return after

    def intact_while_full(self, after: bytes, shown: bytes) -> None:
        """The earlier frames are intact, and readable (``shown`` before) while the disk is
        full."""
        if after[: len(self.before)] == self.before:
            self.c.prefix_intact += 1
        else:
            self.bad.append("earlier bytes")
            self.examples.add("earlier bytes of the log changed", self.what)
        read = cli(self.store, "log", THREAD, "--json")
        v = cli(self.store, "verify")
        if read.ok and read.stdout == shown and v.ok:
            self.c.reads_ok_full += 1
        else:
            self.bad.append("reads while full")
            problem = read.describe(200) if read.stdout != shown or not read.ok else v.describe(200)
            self.examples.add(
                "reads on the full disk", f"{self.what}: {problem} {v.stdout[-200:]!r}"
            )

    def small_append(self, rng: random.Random) -> Proc:
        """A small append, still full: it succeeds or fails clearly."""
        small = cli(
            self.store,
            "append",
            THREAD,
            stdin=_lines(1, (10, 20), rng, "small"),
            preexec=self.disk.preexec(),
        )
        if small.ok:
            self.c.second_ok += 1
            self.c.second_succeeded += 1
        elif small.code != 0 and not small.traceback and NO_SPACE.search(small.stderr):
            self.c.second_ok += 1
        else:
            self.bad.append("second append")
            self.examples.add(
                "a small append on the full disk", f"{self.what}: {small.describe(300)}"
            )
        return small

    def after_freeing(self, rng: random.Random, small: Proc) -> None:
        """Space freed: the store verifies, takes an append, and its log is the earlier frames,
        the small append if it succeeded and the new one, on one chain of whole batches."""
        self.disk.free_space()
        v = cli(self.store, "verify")
        new = cli(self.store, "append", THREAD, stdin=_lines(1, (10, 20), rng, "freed"))
        v2 = cli(self.store, "verify")
        final = self.path.read_bytes()
        scan = scan_log(final)
        expected = len(self.before.splitlines()) + small.ok + new.ok
        log_ok = (
            not scan.problem
            and scan.tail == 0
            and not whole_batches(scan.ids)
            and final.startswith(self.before)
            and len(scan.seqs) == expected
        )
        if v.ok and new.ok and v2.ok and log_ok:
            self.c.after_ok += 1
            return
        self.bad.append("after freeing")
        detail = (
            scan.problem
            or (
                f"{len(scan.seqs)} frames, expected {expected}"
                if len(scan.seqs) != expected
                else ""
            )
            or ("" if final.startswith(self.before) else "earlier bytes changed")
        )
        failing = next((x for x in (v, new, v2) if not x.ok), None)
        self.examples.add(
            "after freeing the space",
            f"{self.what}: {failing.describe(300) if failing else detail}"
            + (f" {failing.stdout[-300:]!r}" if failing else ""),
        )


# --- the family -----------------------------------------------------------------------------


def run(
    *,
    trials: int = 30,
    read_trials: int = 10,
    mode: str = "auto",
    seed: int | None = None,
    keep: bool = False,
) -> FamilyResult:
    started = time.perf_counter()
    seed, rng = start("fulldisk", seed)
    with scratch("fulldisk", keep) as work:
        chosen = resolve_mode(mode, work / "probe")
        if chosen == "userns":
            result = _in_namespace(work, trials, read_trials, seed)
            result.seconds = time.perf_counter() - started
            return result
        params = {"trials": trials, "read_trials": read_trials, "mode": chosen, "seed": seed}
        result = FamilyResult("fulldisk", params)
        examples = Examples()
        c = Counts()
        disk = Disk(chosen, work)
        try:
            log(f"fulldisk: {trials} trials; {disk.describe()}")
            for t in range(trials):
                _trial(disk, t, rng, c, examples, reads=t < read_trials)
        finally:
            disk.close()
    result.notes.append(f"the full disk: {disk.describe()}")
    _report(result, c)
    result.examples = examples.lines()
    result.seconds = time.perf_counter() - started
    return result


def _in_namespace(work: Path, trials: int, read_trials: int, seed: int) -> FamilyResult:
    """Run the family again inside ``unshare -r -m`` (where a tmpfs can be mounted) and take
    its result back."""
    out = work / "result.json"
    env = dict(os.environ)
    # the checkout (for ``tools``) after any path the caller set (which may name a continuity)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [env.get("PYTHONPATH"), str(ROOT)]))
    argv = [
        "unshare", "-r", "-m", sys.executable, "-m", "tools.faults.fulldisk",
        "--mode", "tmpfs", "--trials", str(trials), "--read-trials", str(read_trials),
        "--seed", str(seed),
        "--result-file", str(out),
    ]  # fmt: skip
    log("fulldisk: running inside a user namespace (unshare -r -m) to mount a tmpfs")
    done = subprocess.run(argv, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, check=False)
    if not out.exists():
        raise SystemExit(f"fulldisk: the run inside the namespace failed (exit {done.returncode})")
    result = FamilyResult.from_json(json.loads(out.read_text()))
    result.params["mode"] = "userns"
    result.notes.append("run inside a user and mount namespace (unshare -r -m)")
    return result


def _report(result: FamilyResult, c: Counts) -> None:
    n = c.trials
    result.tables.append(
        Table(
            "appends that do not fit",
            ["what", "trials"],
            [
                ["trials", n],
                [
                    "free bytes (min..max)",
                    f"{min(c.free, default=0):,}..{max(c.free, default=0):,}",
                ],
                ["the append failed clearly (exit != 0, says the disk is full)", c.failed_clearly],
                ["it told the truth about what it left", c.truthful],
                ["  of which left bytes of the batch in the log", c.left_bytes],
                ["earlier bytes of the log unchanged", c.prefix_intact],
                ["log --json and verify right while full", c.reads_ok_full],
                ["a small append while full: ok or a clear failure", c.second_ok],
                ["  of which succeeded", c.second_succeeded],
                ["space freed: verify, append, the log whole", c.after_ok],
            ],
        )
    )
    r = c.read_trials
    result.tables.append(
        Table(
            "reads and other writes on the full disk (disk filled after appends the caches miss)",
            ["what", "count"],
            [
                ["read trials", r],
                [
                    "free bytes (min..max)",
                    f"{min(c.read_free, default=0):,}..{max(c.read_free, default=0):,}",
                ],
                ["read commands run while full", c.read_commands],
                ["  of which exit 0 with the roomy disk's output", c.read_commands_ok],
                ["trials whose every read was served", c.reads_served],
                ["writes that did not fit (rebuild-index, compact)", c.writes_failed],
                ["trials whose writes failed clearly, no temporary file left", c.writes_clear],
                ["space freed: reads caught the caches up, verify ok", c.caught_up],
            ],
        )
    )
    for name, got, of in (
        ("every read is served while full, as on a roomy disk", c.reads_served, r),
        ("other writes fail with one clear line, leaving no temporary file", c.writes_clear, r),
        ("space freed: reads catch the caches up", c.caught_up, r),
    ):
        result.check(name, got == of, f"{got} of {of}")
    for name, got in (
        ("the append fails clearly, saying the disk is full", c.failed_clearly),
        ("it says truthfully what was written and quarantined", c.truthful),
        ("every earlier frame and the chain intact", c.prefix_intact),
        ("reads right while the disk is full", c.reads_ok_full),
        ("a second append while full: ok or a clear failure", c.second_ok),
        ("after freeing space: verify ok, appends work, the log whole", c.after_ok),
    ):
        result.check(name, got == n, f"{got} of {n}")


def main(argv: list[str] | None = None) -> int:
    parser = family_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument(
        "--read-trials", type=int, default=10, help="trials that also run every read command"
    )
    parser.add_argument("--mode", choices=MODES, default="auto", help="how to fill the disk")
    parser.add_argument("--result-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    result = run(
        trials=scaled(args.trials, args.scale),
        read_trials=scaled(args.read_trials, args.scale),
        mode=args.mode,
        seed=args.seed,
        keep=args.keep,
    )
    if args.result_file is not None:
        args.result_file.write_text(json.dumps(result.to_json()))
    return finish([result], args.json)


if __name__ == "__main__":
    sys.exit(main())
