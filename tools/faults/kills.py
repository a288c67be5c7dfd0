"""Kills: SIGKILL at random moments, of a durable writer and of the commands that write.

    python -m tools.faults.kills [--writer-kills 300] [--command-kills 25] [--verify-every 10]
                                 [--frames 30000] [--scale F] [--seed S] [--json] [--keep]

**A durable writer**, ``--writer-kills`` times: a fresh process appends durable batches to
thread ``crash`` for ever (most of a few short frames, one in seven of 3-12 frames of 20-80 kB,
so a kill can land inside a write) and, after each append returns, records the range it got in
a side file (fsynced): those frames are *acknowledged*. It is killed at a random moment (0-300
ms after it started, so some kills land in its start-up and in the recovery of the previous
writer's torn tail). After each kill the log's bytes are read independently of the store's
reader: the bytes committed before the round are unchanged, what follows is one chain of sealed
frames whose batches (their message ids name them, ``r4-b7-2of5``) are whole, and every frame
acknowledged so far is at its seq. ``log --from-seq S --json`` (S: the round's first seq) must
print exactly the committed lines: a reader never sees a partial batch. Every
``--verify-every`` kills, and after the last kill on a store, ``verify`` must exit 0 (a torn
tail is a note, not a problem). A store takes 10 kills; then one more append (which quarantines
the last torn tail), ``verify`` again, and no acknowledged frame may be in ``quarantine/``.

**Commands**, ``--command-kills`` times each, on a fresh copy of a prepared store, killed at a
random moment of their run (half the kills uniform over 0-110% of an uninterrupted run's
duration, half over its last 30%, where these commands write):

* ``rebuild-index`` on a store of ``--frames`` generated frames (checkpoints, artifacts): the
  logs are unchanged, ``verify`` exits 0, ``log``, ``compile --dry-run``, ``search`` and
  ``stats`` print what they printed before, and the caches end byte-identical to a fresh rebuild.
* ``compact --stride 100`` of a thread without checkpoints: the bytes before it are unchanged,
  the log is one chain of whole batches, ``verify`` exits 0, a second ``compact`` succeeds, and
  then the checkpoints and ``compile --dry-run --format text`` are an uninterrupted run's (but
  for the anchor seq in its first line: a killed job leaves its ``job_spawned`` frame).
* ``ingest`` of the largest real transcript in ``../shared/fixtures/claude-code/`` (skipped with
  a message when absent): ``verify`` exits 0, and after a second ``ingest`` every thread holds
  exactly the frames of an uninterrupted ingest (none lost, none twice).
* ``install claude-code`` with ``HOME`` in a scratch folder holding a settings file with other
  hooks: the settings file is still valid JSON and is the old or the new settings (the user's
  own kept), a backup is the old settings, and a second ``install`` gives an uninterrupted
  install's file.
"""

from __future__ import annotations

import base64
import json
import random
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import blake3
import msgspec

from tools.bench._common import continuity_command, copy_store, median
from tools.bench.bench_hooks import child_env
from tools.faults._common import (
    CC_FIXTURES,
    Examples,
    FamilyResult,
    Proc,
    Table,
    cli,
    comparable,
    compare_caches,
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

__all__ = ["main", "run"]

THREAD: Final = "crash"
ROUNDS_PER_STORE: Final = 10

# Says "started" once imported (before its first append, which recovers the previous torn tail),
# then appends durable batches for ever; after each append returns it records the range in the
# side file and fsyncs it, so the side file lists only acknowledged appends.
_WRITER: Final = textwrap.dedent(
    """
    import os, random, sys
    from continuity import frames as fr
    from continuity.store.jsonl import Store

    path, side, rnd, seed = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    rng = random.Random(seed)
    thread = Store(path, durable=True).thread("crash")
    fd = os.open(side, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    print("started", flush=True)
    b = 0
    while True:
        big = rng.random() < 0.3  # a batch of a few hundred kB: a kill can cut its write
        n = rng.randrange(3, 21) if big else rng.choice((1, 1, 2, 3, 5, 8))
        batch = []
        for i in range(n):
            size = rng.randrange(20_000, 100_000) if big else rng.randrange(10, 300)
            text = f"round {rnd} batch {b} " + "y" * size
            batch.append(fr.message("user", text, message_id=f"r{rnd}-b{b}-{i}of{n}"))
        seqs = thread.append(batch)
        os.write(fd, f"{seqs.start} {seqs.stop} {b}\\n".encode())
        os.fsync(fd)
        b += 1
    """
)


def _acknowledged(side: Path, rnd: int) -> list[tuple[int, str]]:
    """(seq, message id) of every acknowledged frame of a round; a line cut by the kill was
    never acknowledged."""
    out: list[tuple[int, str]] = []
    if not side.exists():
        return out
    for line in side.read_bytes().split(b"\n"):
        parts = line.split()
        if len(parts) != 3:
            continue
        a, b, batch = (int(x) for x in parts)
        out.extend((seq, f"r{rnd}-b{batch}-{i}of{b - a}") for i, seq in enumerate(range(a, b)))
    return out


@dataclass(slots=True)
class WriterKills:
    rounds: int = 0
    killed_before_first_ack: int = 0
    acknowledged: int = 0
    lost: int = 0
    torn_tails: int = 0
    partial_batches: int = 0
    unsound: int = 0
    changed_prefix: int = 0
    reader_wrong: int = 0
    verify_runs: int = 0
    verify_failed: int = 0
    quarantined_records: int = 0
    quarantined_acked: int = 0
    final_appends: int = 0
    final_appends_failed: int = 0


def _writer_kills(
    work: Path, rounds: int, verify_every: int, rng: random.Random, examples: Examples
) -> WriterKills:
    """``rounds`` kills, on a fresh store every ``ROUNDS_PER_STORE`` kills (so the log stays
    tens of MB and each round's checks stay cheap)."""
    s = WriterKills()
    done = 0
    while done < rounds:
        n = min(ROUNDS_PER_STORE, rounds - done)
        store = work / f"writer-store-{done}"
        _writer_epoch(store, work, range(done, done + n), verify_every, rng, examples, s)
        shutil.rmtree(store, ignore_errors=True)
        done += n
        log(f"kills: {done} writer kills")
    return s


@dataclass(slots=True)
class _Committed:
    """The committed log checked so far: its first ``end`` bytes (and their hash), the chain's
    digest there, the next seq, and the message id at each seq."""

    end: int = 0
    next_seq: int = 0
    digest: bytes | None = None
    prefix_hash: bytes = field(default_factory=lambda: blake3.blake3(b"").digest())
    at: dict[int, str | None] = field(default_factory=dict)


def _writer_epoch(
    store: Path,
    work: Path,
    rounds: range,
    verify_every: int,
    rng: random.Random,
    examples: Examples,
    s: WriterKills,
) -> None:
    if not cli(store, "init").ok:
        raise SystemExit("kills: continuity init failed")
    path = store / "threads" / f"{THREAD}.jsonl"
    env = child_env(store)
    committed = _Committed()
    acked: dict[int, str] = {}
    for rnd in rounds:
        side = work / f"acked-{rnd}.txt"
        if not _run_and_kill_writer(store, side, rnd, env, rng, examples):
            continue
        s.rounds += 1
        round_acks = _acknowledged(side, rnd)
        side.unlink(missing_ok=True)
        if not round_acks:
            s.killed_before_first_ack += 1
        s.acknowledged += len(round_acks)
        acked.update(round_acks)
        data = path.read_bytes() if path.exists() else b""
        round_first = committed.next_seq
        _check_log_after_kill(data, committed, rnd, round_acks, examples, s)
        _check_reader(store, data, round_first, committed.end, rnd, examples, s)
        last = rnd == rounds[-1]
        if verify_every and (rnd % verify_every == verify_every - 1 or last):
            s.verify_runs += 1
            v = cli(store, "verify")
            if not v.ok:
                s.verify_failed += 1
                examples.add(
                    "verify after a kill", f"round {rnd}: {v.describe(200)} {v.stdout[-300:]!r}"
                )
    _check_after_kills(store, acked, examples, s)


def _run_and_kill_writer(
    store: Path,
    side: Path,
    rnd: int,
    env: dict[str, str],
    rng: random.Random,
    examples: Examples,
) -> bool:
    """Start a writer and SIGKILL it at a random moment; False when it did not start."""
    seed = str(rng.getrandbits(32))
    child = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(store), str(side), str(rnd), seed],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        if line != b"started\n":
            _o, err = child.communicate(timeout=30)
            examples.add("writer did not start", err.decode(errors="replace")[-400:])
            return False
        time.sleep(rng.uniform(0.0, 0.3))
        child.send_signal(signal.SIGKILL)
        _out, err = child.communicate(timeout=30)
        if child.returncode != -signal.SIGKILL:
            examples.add(
                "writer died before the kill",
                f"round {rnd}: exit {child.returncode}: {err.decode(errors='replace')[-400:]}",
            )
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return True


def _check_log_after_kill(
    data: bytes,
    committed: _Committed,
    rnd: int,
    round_acks: list[tuple[int, str]],
    examples: Examples,
    s: WriterKills,
) -> None:
    """The log's bytes ``data`` after a kill, read independently of the store's reader: the
    committed bytes unchanged, then one chain of whole batches holding every acknowledged
    frame at its seq. Moves ``committed`` on to the end of the committed frames."""
    c = committed
    if len(data) < c.end or blake3.blake3(data[: c.end]).digest() != c.prefix_hash:
        s.changed_prefix += 1
        examples.add(
            "committed bytes changed by a later writer",
            f"round {rnd}: the first {c.end} bytes of the log are not what they were",
        )
    scan = scan_log(data, start=c.end, seq=c.next_seq, digest=c.digest)
    if scan.problem:
        s.unsound += 1
        examples.add("log unsound after a kill", f"round {rnd}: {scan.problem}")
    if scan.tail:
        s.torn_tails += 1
    c.at.update(zip(scan.seqs, scan.ids, strict=True))
    if scan.seqs:
        c.next_seq = scan.seqs[-1] + 1
    c.end, c.digest = scan.end, scan.digest
    c.prefix_hash = blake3.blake3(data[: c.end]).digest()
    whole = whole_batches(scan.ids)  # the round's committed frames start a batch
    if whole:
        s.partial_batches += 1
        examples.add("partial batch in the log", f"round {rnd}: {whole}")
    for seq, mid in round_acks:
        if c.at.get(seq) != mid:
            s.lost += 1
            examples.add(
                "acknowledged frame lost", f"round {rnd}: seq {seq} ({mid}) is {c.at.get(seq)}"
            )


def _check_reader(
    store: Path,
    data: bytes,
    round_first: int,
    end: int,
    rnd: int,
    examples: Examples,
    s: WriterKills,
) -> None:
    """What a reader sees: exactly the committed lines from the round's first seq."""
    p = cli(store, "log", THREAD, "--from-seq", str(round_first), "--json")
    committed = data[_offset_of(data, round_first, end) : end]
    if p.code != 0 or p.traceback or p.stdout != committed:
        s.reader_wrong += 1
        examples.add(
            "log --from-seq after a kill is not the committed frames",
            f"round {rnd}: {p.describe(200)}; printed {len(p.stdout)} bytes, "
            f"committed {len(committed)}",
        )


def _check_after_kills(
    store: Path, acked: dict[int, str], examples: Examples, s: WriterKills
) -> None:
    """The next append quarantines the last torn tail; nothing acknowledged may be in
    quarantine."""
    final = cli(store, "append", THREAD, stdin=b'{"role":"user","text":"after the kills"}\n')
    s.final_appends += 1
    if not final.ok:
        s.final_appends_failed += 1
        examples.add("append after the kills", final.describe())
    v = cli(store, "verify")
    s.verify_runs += 1
    if not v.ok:
        s.verify_failed += 1
        examples.add("verify after the kills", f"{v.describe(200)} {v.stdout[-300:]!r}")
    seq_of = {mid: seq for seq, mid in acked.items()}
    for q in sorted((store / "quarantine").glob("*.json")):
        s.quarantined_records += 1
        record = json.loads(q.read_bytes())
        held = base64.b64decode(record["data_b64"])
        for raw in held.split(b"\n"):
            try:
                mid = msgspec.json.decode(raw).get("message_id")
            except (msgspec.DecodeError, AttributeError):
                continue
            held_seq = seq_of.get(mid) if isinstance(mid, str) else None
            if held_seq is not None:
                s.quarantined_acked += 1
                examples.add(
                    "acknowledged frame in quarantine", f"{mid} (seq {held_seq}) in {q.name}"
                )


def _offset_of(data: bytes, seq: int, end: int) -> int:
    """The byte offset of frame ``seq`` in a log whose frames are numbered from 0 (``end`` if
    it is not there)."""
    pos = 0
    for _ in range(seq):
        nl = data.find(b"\n", pos, end)
        if nl < 0:
            return end
        pos = nl + 1
    return pos


# --- killing commands -----------------------------------------------------------------------


@dataclass(slots=True)
class CommandKills:
    name: str
    trials: int = 0
    killed: int = 0
    """Trials where the kill landed before the command finished."""
    failures: int = 0
    checks: dict[str, int] = field(default_factory=dict)
    uninterrupted_s: float = 0.0
    skipped: str = ""

    def fail(self, check: str) -> None:
        self.checks[check] = self.checks.get(check, 0) + 1


def _kill_at(argv: list[str], env: dict[str, str], delay: float) -> Proc:
    """Start a process, SIGKILL it ``delay`` seconds later (if it still runs)."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        proc.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
    out, err = proc.communicate()
    return Proc(argv, proc.returncode, out, err, time.perf_counter() - started)


def _delay(rng: random.Random, duration: float) -> float:
    if rng.random() < 0.5:
        return rng.uniform(0.0, 1.1 * duration)
    return rng.uniform(0.7 * duration, duration)


def _timed(argv: list[str], env: dict[str, str], repeat: int = 3) -> float:
    """The median duration of ``repeat`` uninterrupted runs."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(argv, env=env, capture_output=True, check=False)
        times.append(time.perf_counter() - t)
    return median(times)


def _read_outputs(store: Path, thread: str, word: str, seq: int) -> dict[str, Proc]:
    return {
        "log --from-seq": cli(
            store, "log", thread, "--from-seq", str(seq), "--to-seq", str(seq + 20)
        ),
        "compile --dry-run": cli(store, "compile", thread, "--dry-run", "--format", "text"),
        "search": cli(store, "search", word),
        "stats": cli(store, "stats"),
    }


def _rebuild_kills(
    work: Path, trials: int, frames: int, rng: random.Random, examples: Examples
) -> CommandKills:
    from continuity.store.jsonl import Store
    from tools.gen_thread import FIXED_CLOCK_MS, write_thread

    s = CommandKills("rebuild-index")
    master = work / "rebuild-master"
    store = Store(master, create=True, durable=False, clock=lambda: FIXED_CLOCK_MS)
    write_thread(store, "big", frames, seed=rng.getrandbits(32), checkpoint_every=200)
    write_thread(store, "small", 300, seed=rng.getrandbits(32), checkpoint_every=100)
    for args in (["stats"], ["search", "error"]):
        cli(master, *args)
    logs = {p.name: p.read_bytes() for p in (master / "threads").iterdir()}
    seq = frames // 2
    base = _read_outputs(master, "big", "error", seq)
    for name, p in base.items():
        if not p.ok:
            raise SystemExit(f"kills: {name} on the prepared store: {p.describe()}")
    want = {name: comparable(name, p, master) for name, p in base.items()}
    timing = work / "rebuild-timing"
    copy_store(master, timing)
    s.uninterrupted_s = _timed([*continuity_command(), "rebuild-index"], child_env(timing))
    shutil.rmtree(timing)
    for t in range(trials):
        trial = work / "rebuild-trial"
        shutil.rmtree(trial, ignore_errors=True)
        copy_store(master, trial)
        delay = _delay(rng, s.uninterrupted_s)
        p = _kill_at([*continuity_command(), "rebuild-index"], child_env(trial), delay)
        s.trials += 1
        s.killed += p.code == -signal.SIGKILL
        what = f"trial {t}: rebuild-index killed after {delay * 1000:.0f} ms"
        bad = 0
        for name, data in logs.items():
            if (trial / "threads" / name).read_bytes() != data:
                bad += 1
                s.fail("a log changed")
                examples.add("rebuild-index killed: a log changed", f"{what}: {name}")
        v = cli(trial, "verify")
        if not v.ok:
            bad += 1
            s.fail("verify")
            examples.add(
                "rebuild-index killed: verify fails", f"{what}: {v.describe(200)} {v.stdout!r}"
            )
        for name, r in _read_outputs(trial, "big", "error", seq).items():
            if not r.ok or comparable(name, r, trial) != want[name]:
                bad += 1
                s.fail(f"{name} output")
                diff = first_difference(comparable(name, r, trial), want[name])
                examples.add(
                    f"rebuild-index killed: {name} differs", f"{what}: {r.describe(200)}; {diff}"
                )
        _n, diffs = compare_caches(trial, work)
        if diffs:
            bad += 1
            s.fail("caches vs a fresh rebuild")
            examples.add("rebuild-index killed: caches differ afterwards", f"{what}: {diffs[0]}")
        s.failures += bad > 0
    shutil.rmtree(work / "rebuild-trial", ignore_errors=True)
    return s


def _checkpoints(store: Path, thread: str) -> list[int]:
    p = cli(store, "log", thread, "--type", "compaction_checkpoint_created", "--json")
    return [msgspec.json.decode(line)["to_seq"] for line in p.stdout.splitlines()]


def _unanchored(p: Proc) -> bytes:
    """A text bundle without the anchor seq of its first line."""
    head, _, rest = p.stdout.partition(b"\n")
    return re.sub(rb" at seq \d+ ", b" at seq <anchor> ", head) + b"\n" + rest


def _compact_kills(
    work: Path, trials: int, frames: int, rng: random.Random, examples: Examples
) -> CommandKills:
    from continuity.store.jsonl import Store
    from tools.gen_thread import FIXED_CLOCK_MS, write_thread

    s = CommandKills("compact")
    master = work / "compact-master"
    store = Store(master, create=True, durable=False, clock=lambda: FIXED_CLOCK_MS)
    write_thread(store, "c", frames, seed=rng.getrandbits(32))
    before = (master / "threads" / "c.jsonl").read_bytes()
    argv = [*continuity_command(), "compact", "c", "--stride", "100"]
    reference = work / "compact-reference"
    copy_store(master, reference)
    t0 = time.perf_counter()
    ref = cli(reference, *argv[len(continuity_command()) :])
    s.uninterrupted_s = time.perf_counter() - t0
    if not ref.ok:
        raise SystemExit(f"kills: {ref.describe()}")
    want_cps = _checkpoints(reference, "c")
    want_text = _unanchored(cli(reference, "compile", "c", "--dry-run", "--format", "text"))
    for t in range(trials):
        trial = work / "compact-trial"
        shutil.rmtree(trial, ignore_errors=True)
        copy_store(master, trial)
        delay = _delay(rng, s.uninterrupted_s)
        p = _kill_at(argv, child_env(trial), delay)
        s.trials += 1
        s.killed += p.code == -signal.SIGKILL
        what = f"trial {t}: compact killed after {delay * 1000:.0f} ms"
        bad = 0
        data = (trial / "threads" / "c.jsonl").read_bytes()
        scan = scan_log(data)
        if not data.startswith(before) or scan.problem or whole_batches(scan.ids):
            bad += 1
            s.fail("log")
            examples.add(
                "compact killed: the log is damaged",
                f"{what}: {scan.problem or whole_batches(scan.ids) or 'earlier bytes changed'}",
            )
        v = cli(trial, "verify")
        if not v.ok:
            bad += 1
            s.fail("verify")
            examples.add("compact killed: verify fails", f"{what}: {v.describe(200)} {v.stdout!r}")
        again = cli(trial, *argv[len(continuity_command()) :])
        if not again.ok:
            bad += 1
            s.fail("second compact")
            examples.add("compact killed: a second compact fails", f"{what}: {again.describe()}")
        cps = _checkpoints(trial, "c")
        if cps != want_cps:
            bad += 1
            s.fail("checkpoints")
            examples.add(
                "compact killed: checkpoints differ from an uninterrupted run",
                f"{what}: to_seqs {cps} vs {want_cps}",
            )
        text = cli(trial, "compile", "c", "--dry-run", "--format", "text")
        if not text.ok or _unanchored(text) != want_text:
            bad += 1
            s.fail("compile output")
            examples.add(
                "compact killed: compile differs from an uninterrupted run",
                f"{what}: {text.describe(200)}; {first_difference(_unanchored(text), want_text)}",
            )
        s.failures += bad > 0
    return s


def _projection(store: Path) -> dict[str, list[dict[str, Any]]]:
    """Every thread's frames without what an interruption may legitimately change: the chain
    digests, the append times and the batch flags."""
    out = {}
    for p in sorted((store / "threads").glob("*.jsonl")):
        frames = []
        for raw in p.read_bytes().splitlines():
            try:
                obj = msgspec.json.decode(raw)
            except msgspec.DecodeError:
                continue  # a torn tail
            for key in ("digest", "ts_ms", "more"):
                obj.pop(key, None)
            frames.append(obj)
        out[p.stem] = frames
    return out


def _ingest_kills(work: Path, trials: int, rng: random.Random, examples: Examples) -> CommandKills:
    s = CommandKills("ingest")
    files = sorted(CC_FIXTURES.rglob("*.jsonl"), key=lambda p: p.stat().st_size)
    if not files:
        s.skipped = f"no transcripts in {CC_FIXTURES}"
        log(f"kills: ingest skipped: {s.skipped}")
        return s
    transcript = files[-1]
    argv = [*continuity_command(), "ingest", str(transcript)]
    reference = work / "ingest-reference"
    t0 = time.perf_counter()
    ref = cli(reference, *argv[len(continuity_command()) :])
    s.uninterrupted_s = time.perf_counter() - t0
    if not ref.ok:
        raise SystemExit(f"kills: {ref.describe()}")
    want = _projection(reference)
    for t in range(trials):
        trial = work / "ingest-trial"
        shutil.rmtree(trial, ignore_errors=True)
        delay = _delay(rng, s.uninterrupted_s)
        p = _kill_at(argv, child_env(trial), delay)
        s.trials += 1
        s.killed += p.code == -signal.SIGKILL
        what = f"trial {t}: ingest {transcript.name} killed after {delay * 1000:.0f} ms"
        bad = 0
        if (trial / "store.json").exists():
            for log_path in sorted((trial / "threads").glob("*.jsonl")):
                scan = scan_log(log_path.read_bytes())
                if scan.problem:
                    bad += 1
                    s.fail("log")
                    examples.add("ingest killed: a log is damaged", f"{what}: {scan.problem}")
            v = cli(trial, "verify")
            if not v.ok:
                bad += 1
                s.fail("verify")
                examples.add(
                    "ingest killed: verify fails", f"{what}: {v.describe(200)} {v.stdout!r}"
                )
        again = cli(trial, *argv[len(continuity_command()) :])
        if not again.ok:
            bad += 1
            s.fail("second ingest")
            examples.add("ingest killed: a second ingest fails", f"{what}: {again.describe()}")
        have = _projection(trial)
        if have != want:
            bad += 1
            s.fail("frames")
            examples.add(
                "ingest killed: frames differ from an uninterrupted ingest",
                what + ": " + _frames_diff(have, want),
            )
        s.failures += bad > 0
    return s


def _frames_diff(
    have: dict[str, list[dict[str, Any]]], want: dict[str, list[dict[str, Any]]]
) -> str:
    out = []
    for tid in sorted(set(have) | set(want)):
        a, b = have.get(tid, []), want.get(tid, [])
        if a == b:
            continue
        ids_a = [f.get("message_id") for f in a if f.get("message_id")]
        ids_b = [f.get("message_id") for f in b if f.get("message_id")]
        lost = len(set(ids_b) - set(ids_a))
        twice = len(ids_a) - len(set(ids_a))
        first = next(
            (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
        )
        out.append(
            f"thread {tid}: {len(a)} frames vs {len(b)}, {lost} messages lost, {twice} twice, "
            f"first difference at seq {first}"
        )
    return "; ".join(out)


_USER_SETTINGS: Final = {
    "model": "opus",
    "permissions": {"allow": ["Bash(git status)"]},
    "hooks": {
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit"}]}],
    },
}


def _install_kills(work: Path, trials: int, rng: random.Random, examples: Examples) -> CommandKills:
    s = CommandKills("install claude-code")
    home = work / "home"
    store = work / "install-store"
    settings = home / ".claude" / "settings.json"
    original = json.dumps(_USER_SETTINGS, indent=1).encode()
    env = child_env(store)
    env["HOME"] = str(home)
    env.pop("CLAUDE_PROJECT_DIR", None)
    argv = [*continuity_command(), "install", "claude-code"]

    def reset() -> None:
        shutil.rmtree(home, ignore_errors=True)
        settings.parent.mkdir(parents=True)
        settings.write_bytes(original)

    reset()
    times = []
    for _ in range(3):
        reset()
        t0 = time.perf_counter()
        ref = subprocess.run(argv, env=env, capture_output=True, check=False)
        times.append(time.perf_counter() - t0)
        if ref.returncode != 0:
            raise SystemExit(f"kills: install failed: {ref.stderr.decode()}")
    s.uninterrupted_s = median(times)
    installed = json.loads(settings.read_bytes())
    for t in range(trials):
        reset()
        delay = _delay(rng, s.uninterrupted_s)
        p = _kill_at(argv, env, delay)
        s.trials += 1
        s.killed += p.code == -signal.SIGKILL
        what = f"trial {t}: install killed after {delay * 1000:.0f} ms"
        bad = 0
        try:
            now = json.loads(settings.read_bytes())
        except (OSError, ValueError) as exc:
            now = None
            bad += 1
            s.fail("settings valid JSON")
            examples.add("install killed: settings unreadable", f"{what}: {exc}")
        if now is not None and now not in (_USER_SETTINGS, installed):
            bad += 1
            s.fail("settings old or new")
            examples.add("install killed: settings neither old nor new", f"{what}: {now}")
        backups = list(settings.parent.glob("settings.json.continuity-backup*"))
        for b in backups:
            try:
                ok = json.loads(b.read_bytes()) == _USER_SETTINGS
            except ValueError:
                ok = False
            if not ok:
                bad += 1
                s.fail("backup")
                examples.add("install killed: the backup is not the old settings", f"{what}: {b}")
        again = subprocess.run(argv, env=env, capture_output=True, check=False)
        if again.returncode != 0 or json.loads(settings.read_bytes()) != installed:
            bad += 1
            s.fail("second install")
            examples.add(
                "install killed: a second install does not give the installed settings",
                f"{what}: exit {again.returncode} {again.stderr.decode()[-300:]}",
            )
        s.failures += bad > 0
    return s


# --- the family -----------------------------------------------------------------------------


PARTS: Final = ("writer", "rebuild-index", "compact", "ingest", "install claude-code")


def run(
    *,
    writer_kills: int = 300,
    command_kills: int = 25,
    verify_every: int = 10,
    frames: int = 30_000,
    parts: tuple[str, ...] = PARTS,
    seed: int | None = None,
    keep: bool = False,
) -> FamilyResult:
    started = time.perf_counter()
    seed, rng = start("kills", seed)
    result = FamilyResult(
        "kills",
        {
            "writer_kills": writer_kills,
            "command_kills": command_kills,
            "verify_every": verify_every,
            "frames": frames,
            "parts": ",".join(parts),
            "seed": seed,
        },
    )
    examples = Examples()
    with scratch("kills", keep) as work:
        w: WriterKills | None = None
        if "writer" in parts:
            log(f"kills: {writer_kills} kills of a durable writer")
            w = _writer_kills(work, writer_kills, verify_every, rng, examples)
        commands: list[CommandKills] = []
        jobs: list[tuple[str, Callable[[], CommandKills]]] = [
            ("rebuild-index", lambda: _rebuild_kills(work, command_kills, frames, rng, examples)),
            ("compact", lambda: _compact_kills(work, command_kills, 3_000, rng, examples)),
            ("ingest", lambda: _ingest_kills(work, command_kills, rng, examples)),
            ("install claude-code", lambda: _install_kills(work, command_kills, rng, examples)),
        ]
        for name, job in jobs:
            if name in parts:
                log(f"kills: {command_kills} kills of {name}")
                commands.append(job())

    if w is not None:
        _writer_report(result, w)
    if commands:
        _commands_report(result, commands)
    result.examples = examples.lines()
    result.seconds = time.perf_counter() - started
    return result


def _commands_report(result: FamilyResult, commands: list[CommandKills]) -> None:
    result.tables.append(
        Table(
            "commands killed at random moments (fresh copy each)",
            ["command", "uninterrupted s", "trials", "killed", "failed trials", "failed checks"],
            [
                [
                    c.name,
                    c.uninterrupted_s,
                    c.trials,
                    c.killed,
                    c.failures,
                    ", ".join(f"{k}: {v}" for k, v in c.checks.items()) or c.skipped or "-",
                ]
                for c in commands
            ],
        )
    )
    for c in commands:
        if c.skipped:
            result.notes.append(f"{c.name}: skipped ({c.skipped})")
    for c in commands:
        if c.skipped:
            continue
        result.check(
            f"{c.name} killed: every check held",
            c.failures == 0,
            f"{c.failures} of {c.trials} trials failed" if c.failures else "",
        )


def _writer_report(result: FamilyResult, w: WriterKills) -> None:
    result.tables.append(
        Table(
            "a durable writer killed at random moments",
            ["what", "count"],
            [
                ["kills", w.rounds],
                ["  of which before the first acknowledged append", w.killed_before_first_ack],
                ["frames acknowledged", w.acknowledged],
                ["acknowledged frames lost", w.lost],
                ["kills that left a torn or unfinished tail", w.torn_tails],
                ["partial batches in the committed log", w.partial_batches],
                ["logs unsound after a kill (not a crash's tail)", w.unsound],
                ["committed bytes changed by a later writer", w.changed_prefix],
                ["log --from-seq not the committed frames", w.reader_wrong],
                ["verify runs / failed", f"{w.verify_runs} / {w.verify_failed}"],
                ["quarantine records", w.quarantined_records],
                ["acknowledged frames in quarantine", w.quarantined_acked],
            ],
        )
    )
    result.check(
        "no acknowledged frame lost or quarantined",
        w.lost == w.quarantined_acked == 0,
        f"{w.lost} lost, {w.quarantined_acked} quarantined",
    )
    result.check(
        "no partial batch visible, committed bytes never change",
        w.partial_batches == w.unsound == w.changed_prefix == w.reader_wrong == 0,
        f"{w.partial_batches} partial batches, {w.unsound} unsound logs, "
        f"{w.changed_prefix} changed prefixes, {w.reader_wrong} wrong reads",
    )
    result.check(
        "verify ok after the kills, and the next append works",
        w.verify_failed == w.final_appends_failed == 0,
        f"{w.verify_failed} of {w.verify_runs} verify runs failed",
    )


def _parts(text: str) -> tuple[str, ...]:
    chosen = tuple(p.strip() for p in text.split(",") if p.strip())
    unknown = [p for p in chosen if p not in PARTS]
    if unknown:
        raise SystemExit(f"unknown parts {unknown}; known: {', '.join(PARTS)}")
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = family_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--writer-kills", type=int, default=300)
    parser.add_argument("--command-kills", type=int, default=25, help="kills per command")
    parser.add_argument(
        "--verify-every", type=int, default=10, help="run verify every N writer kills"
    )
    parser.add_argument(
        "--frames", type=int, default=30_000, help="frames of the rebuild-index store"
    )
    parser.add_argument(
        "--parts", type=_parts, default=PARTS, help=f"comma-separated, of {', '.join(PARTS)}"
    )
    args = parser.parse_args(argv)
    result = run(
        writer_kills=scaled(args.writer_kills, args.scale),
        command_kills=scaled(args.command_kills, args.scale),
        verify_every=args.verify_every,
        frames=args.frames,
        parts=args.parts,
        seed=args.seed,
        keep=args.keep,
    )
    return finish([result], args.json)


if __name__ == "__main__":
    sys.exit(main())
