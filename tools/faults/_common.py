"""What the fault families share: running continuity as a process, the result of a family (its
tables, invariants, failing examples and one-line summary), the command line, scratch folders.

Every family runs ``continuity`` the way a user or Claude Code does: as fresh processes (found by
:func:`tools.bench._common.continuity_command`, with the environment of
:func:`tools.bench.bench_hooks.child_env`). A child that imports the library directly (a writer
that must report each acknowledged append) is a small ``python -c`` script run the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

from continuity.caches.listing import CONTEXT_FILE, SESSIONS_FILE, STAT_FILE
from continuity.retrieval.store_index import FOLDER as SEARCH_FOLDER, STAT_FILE as SEARCH_STAT_FILE
from tools.bench._common import continuity_command, copy_store, env_info
from tools.bench.bench_hooks import child_env

__all__ = [
    "CC_FIXTURES",
    "ROOT",
    "Check",
    "Examples",
    "FamilyResult",
    "Proc",
    "Scan",
    "Table",
    "cli",
    "comparable",
    "compare_caches",
    "family_parser",
    "finish",
    "first_difference",
    "log",
    "normalize",
    "run",
    "scaled",
    "scan_log",
    "scratch",
    "start",
    "traceback_in",
    "whole_batches",
    "without_sizes",
]

ROOT: Final = Path(__file__).resolve().parents[2]
CC_FIXTURES: Final = (ROOT / ".." / "shared" / "fixtures" / "claude-code").resolve()
"""Real Claude Code transcripts (``../shared/fixtures/claude-code``); absent outside the dev
setup, in which case the parts that need them say so and are skipped."""
TRACEBACK: Final = b"Traceback (most recent call last)"


def log(message: str) -> None:
    """Progress for the human at the terminal (stderr, so ``--json`` output stays clean)."""
    print(message, file=sys.stderr, flush=True)


def traceback_in(data: bytes) -> bool:
    return TRACEBACK in data


# --- processes ------------------------------------------------------------------------------


@dataclass(slots=True)
class Proc:
    """A finished (or killed) process."""

    argv: list[str]
    code: int | None
    stdout: bytes
    stderr: bytes
    seconds: float
    timed_out: bool = False

    @property
    def traceback(self) -> bool:
        return traceback_in(self.stderr)

    @property
    def ok(self) -> bool:
        return self.code == 0 and not self.traceback and not self.timed_out

    def command(self) -> str:
        """The command as a user would type it (``continuity`` for the entry point)."""
        prefix = continuity_command()
        argv = self.argv
        if argv[: len(prefix)] == prefix:
            argv = ["continuity", *argv[len(prefix) :]]
        return " ".join(_quote(a) for a in argv)

    def describe(self, limit: int = 400) -> str:
        """``<command>`` exit N; stderr's last lines (and a note when it timed out)."""
        status = "timed out" if self.timed_out else f"exit {self.code}"
        err = self.stderr.decode(errors="replace").strip()
        if len(err) > limit:
            err = "…" + err[-limit:]
        return f"`{self.command()}` {status}" + (f"; stderr: {err}" if err else "")


def _quote(arg: str) -> str:
    if arg and all(c.isalnum() or c in "-_./:=@+," for c in arg):
        return arg
    return "'" + arg.replace("'", "'\\''") + "'"


def run(
    argv: Sequence[str],
    *,
    env: dict[str, str],
    stdin: bytes = b"",
    timeout: float | None = None,
    cwd: Path | None = None,
    preexec: Callable[[], None] | None = None,
) -> Proc:
    """Run a process to its end (killing it, and its group, at ``timeout`` seconds)."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
        preexec_fn=preexec,
        start_new_session=True,
    )
    timed_out = False
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc)
        out, err = proc.communicate()
    except BaseException:
        _kill_group(proc)
        proc.wait()
        raise
    return Proc(list(argv), proc.returncode, out, err, time.perf_counter() - start, timed_out)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def cli(
    store: Path,
    *args: str,
    stdin: bytes = b"",
    timeout: float | None = 300,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    preexec: Callable[[], None] | None = None,
) -> Proc:
    """``continuity <args>`` on ``store`` (named by ``CONTINUITY_HOME``, as the hooks find it)."""
    return run(
        [*continuity_command(), *args],
        env=env if env is not None else child_env(store),
        stdin=stdin,
        timeout=timeout,
        cwd=cwd,
        preexec=preexec,
    )


def first_difference(have: bytes, want: bytes, width: int = 160) -> str:
    """Where two outputs part: the first differing line of each (or which one is longer)."""
    a, b = have.split(b"\n"), want.split(b"\n")
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            # A long line (a JSON answer) is shown from a little before where the two part.
            at = next((j for j, (p, q) in enumerate(zip(x, y, strict=False)) if p != q), None)
            at = min(len(x), len(y)) if at is None else at
            start = max(0, at - width // 4) if at >= width // 2 else 0
            where = f" (from byte {start})" if start else ""
            return (
                f"line {i + 1}{where} is {x[start : start + width]!r}, "
                f"expected {y[start : start + width]!r}"
            )
    if len(a) == len(b):
        return "no difference"
    longer = "more" if len(a) > len(b) else "fewer"
    return f"{abs(len(a) - len(b))} {longer} lines than expected ({len(a)} vs {len(b)})"


def normalize(output: bytes, store: Path) -> bytes:
    """An output with the store's path replaced, so two copies of a store compare equal."""
    return output.replace(str(store).encode(), b"<store>")


_SIZES: Final = re.compile(rb"^(log bytes|cache bytes) .*$|\(\d+ bytes compressed\)", re.M)
_VIEWER_SIZES: Final = re.compile(rb'"log_bytes":\d+|\xc2\xb7 [\d.,]+ (?:bytes|KB|MB|GB)')


def comparable(command: str, p: Proc, store: Path) -> bytes:
    """A read's output as it is compared with the undamaged store's: the store's path replaced,
    and for ``stats`` its byte sizes left out (they measure files, damaged ones included; the
    counts are what it claims about the content)."""
    out = normalize(p.stdout, store)
    if command == "stats":
        out = _SIZES.sub(b"", out)
    return out


def without_sizes(body: bytes) -> bytes:
    """A viewer answer with the log sizes it shows left out, as for ``stats``: they measure
    files, damaged ones included (a line past the committed end counts); the frames are the
    claims."""
    return _VIEWER_SIZES.sub(b"", body)


# --- results --------------------------------------------------------------------------------


@dataclass(slots=True)
class Table:
    title: str
    headers: list[str]
    rows: list[list[Any]] = field(default_factory=list)

    def render(self) -> str:
        cells = [[_cell(c) for c in row] for row in self.rows]
        widths = [max(len(x) for x in col) for col in zip(self.headers, *cells, strict=True)]

        def line(row: Sequence[str]) -> str:
            return "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            ).rstrip()

        out = [self.title, line(self.headers), line(["-" * w for w in widths])]
        out.extend(line(r) for r in cells)
        return "\n".join(out)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


@dataclass(slots=True)
class Check:
    """One invariant: its name, whether it held, and the figure behind it."""

    name: str
    ok: bool
    detail: str = ""


class Examples:
    """Failing examples, a few per kind of failure (the first ones seen), with a count of all."""

    def __init__(self, per_key: int = 3) -> None:
        self.per_key = per_key
        self.counts: dict[str, int] = {}
        self.kept: dict[str, list[str]] = {}

    def add(self, key: str, text: str) -> None:
        self.counts[key] = self.counts.get(key, 0) + 1
        kept = self.kept.setdefault(key, [])
        if len(kept) < self.per_key:
            kept.append(text)

    def __len__(self) -> int:
        return sum(self.counts.values())

    def lines(self) -> list[str]:
        out = []
        for key, texts in self.kept.items():
            out.append(f"{key} ({self.counts[key]} in all):")
            out.extend(f"  - {t}" for t in texts)
        return out


@dataclass(slots=True)
class FamilyResult:
    family: str
    params: dict[str, Any]
    tables: list[Table] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def check(self, name: str, ok: bool, detail: str = "") -> bool:
        self.checks.append(Check(name, ok, detail))
        return ok

    def failed(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    def summary_line(self) -> str:
        bad = self.failed()
        if not bad:
            return f"{self.family}: ok, {len(self.checks)} invariants held ({self.seconds:.0f} s)"
        names = "; ".join(f"{c.name} ({c.detail})" if c.detail else c.name for c in bad)
        return (
            f"{self.family}: FAILED {len(bad)} of {len(self.checks)} invariants "
            f"({self.seconds:.0f} s): {names}"
        )

    def render(self) -> str:
        params = ", ".join(f"{k}={v}" for k, v in self.params.items())
        out = [f"== {self.family}  ({params})"]
        for t in self.tables:
            out += ["", t.render()]
        out += ["", "invariants:"]
        out += [
            f"  [{'ok' if c.ok else 'FAIL'}] {c.name}" + (f": {c.detail}" if c.detail else "")
            for c in self.checks
        ]
        if self.notes:
            out += ["", "notes:"] + [f"  {n}" for n in self.notes]
        if self.examples:
            out += ["", "failing examples:"] + [f"  {e}" for e in self.examples]
        out += ["", self.summary_line()]
        return "\n".join(out)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["ok"] = self.ok
        data["summary"] = self.summary_line()
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FamilyResult:
        """The result :meth:`to_json` wrote (a family run in another process)."""
        return cls(
            data["family"],
            data["params"],
            [Table(t["title"], t["headers"], t["rows"]) for t in data["tables"]],
            [Check(c["name"], c["ok"], c["detail"]) for c in data["checks"]],
            data["examples"],
            data["notes"],
            data["seconds"],
        )


# --- the command line -----------------------------------------------------------------------


def family_parser(description: str) -> argparse.ArgumentParser:
    """The options every family takes: --seed, --scale, --jobs, --json, --keep."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--seed", type=int, default=None, help="random seed (default: a new one, printed)"
    )
    parser.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="multiply every trial count by this (0.1 for a quick run; concurrency is kept)",
    )
    parser.add_argument(
        "--jobs", type=int, default=2, help="trials run in parallel where they can (default 2)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folders")
    return parser


def scaled(n: int, scale: float) -> int:
    """``n`` trials at ``scale``, at least 1."""
    return max(1, round(n * scale))


def start(family: str, seed: int | None) -> tuple[int, random.Random]:
    """The seed (a new one when none is given; always printed) and its generator."""
    if seed is None:
        seed = random.SystemRandom().randrange(2**32)
    log(f"{family}: seed {seed}")
    return seed, random.Random(seed)


def finish(results: list[FamilyResult], as_json: bool) -> int:
    """Print the results; the exit code (1 if an invariant failed)."""
    if as_json:
        print(json.dumps({"env": env_info(), "families": [r.to_json() for r in results]}, indent=2))
    else:
        env = env_info()
        cpus, python = env["cpu_count"], env["python"]
        print(f"# {env['date']}  cpus={cpus}  python={python}  {env['platform']}")
        for r in results:
            print()
            print(r.render())
        if len(results) > 1:
            print()
            for r in results:
                print(r.summary_line())
    sys.stdout.flush()
    return 0 if all(r.ok for r in results) else 1


@contextmanager
def scratch(name: str, keep: bool = False) -> Iterator[Path]:
    """A scratch folder (under ``$CONTINUITY_FAULTS_DIR``, else the system's temp folder),
    removed afterwards unless ``keep``."""
    base = os.environ.get("CONTINUITY_FAULTS_DIR")
    if base:
        Path(base).mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix=f"continuity-faults-{name}-", dir=base))
    try:
        yield path
    finally:
        if keep:
            log(f"{name}: kept {path}")
        else:
            shutil.rmtree(path, ignore_errors=True)


# --- an independent reading of a log -------------------------------------------------------


@dataclass(slots=True)
class Scan:
    """What a log's bytes hold, read without the store's reader: the committed frames (whole
    batches on one chain), where they end, and whatever lies past them (a torn or unfinished
    tail, which a crash may leave and the next append quarantines)."""

    seqs: list[int] = field(default_factory=list)
    ids: list[str | None] = field(default_factory=list)
    """Each committed frame's ``message_id`` (None for other frame types)."""
    end: int = 0
    """The byte offset just past the last committed frame."""
    digest: bytes = b""
    tail: int = 0
    """Bytes past ``end``."""
    problem: str = ""
    """The first thing that is wrong (not a crash's tail): empty when the log is sound."""


def scan_log(data: bytes, *, start: int = 0, seq: int = 0, digest: bytes | None = None) -> Scan:
    """Check ``data[start:]`` as a log that continues at ``seq`` after ``digest`` (the genesis
    digest by default): every complete line sealed, chained and numbered in order; frames of a
    batch (``more``) held back until the batch's last frame."""
    import msgspec

    from continuity import frames as fr

    prev = fr.GENESIS_DIGEST if digest is None else digest
    scan = Scan(end=start, digest=prev)
    pending: list[tuple[int, str | None]] = []
    pos = start
    while True:
        nl = data.find(b"\n", pos)
        if nl < 0:
            break
        line = data[pos:nl]
        sealed = fr.unseal(line)
        if sealed is None:
            scan.problem = f"line at offset {pos} (seq {seq}) is not a sealed frame"
            break
        if fr.chain(prev, sealed[0]) != sealed[1]:
            scan.problem = f"seq {seq} at offset {pos} does not chain"
            break
        try:
            obj = msgspec.json.decode(line)
        except msgspec.DecodeError as exc:
            scan.problem = f"seq {seq} at offset {pos} does not decode: {exc}"
            break
        if not isinstance(obj, dict) or obj.get("seq") != seq:
            found = obj.get("seq") if isinstance(obj, dict) else None
            scan.problem = f"seq {found} at offset {pos} where seq {seq} belongs"
            break
        prev = sealed[1]
        mid = obj.get("message_id")
        pending.append((seq, mid if isinstance(mid, str) else None))
        seq += 1
        pos = nl + 1
        if not obj.get("more", False):
            for s, m in pending:
                scan.seqs.append(s)
                scan.ids.append(m)
            pending.clear()
            scan.end = pos
            scan.digest = prev
    scan.tail = len(data) - scan.end
    return scan


def whole_batches(ids: Sequence[str | None]) -> str:
    """What is wrong with the batches among ``ids`` (empty if nothing): a frame whose message id
    reads ``<batch>-<i>of<n>`` must be one of ``n`` contiguous frames ``<batch>-0ofn``…; other
    ids (and frames without one) are not checked."""
    i = 0
    while i < len(ids):
        mid = ids[i]
        key, _, place = (mid or "").rpartition("-")
        i_s, _, n_s = place.partition("of")
        if not key or not i_s.isdigit() or not n_s.isdigit() or n_s == "1":
            i += 1
            continue
        n = int(n_s)
        want = [f"{key}-{j}of{n}" for j in range(n)]
        if list(ids[i : i + n]) != want:
            return f"batch {key} is not whole at index {i}: {list(ids[i : i + 3])}…"
        i += n
    return ""


# --- caches against a fresh rebuild ---------------------------------------------------------


def _cache_files(root: Path) -> dict[str, bytes]:
    """The cache files of a store by relative path (locks and job locks are not caches, nor
    the listing file and the search index's stat file, which record each log's inode and
    times: no copy of a store has them, and they are written only once the logs have been
    still for a while, ADR 0058 and 0061)."""
    out: dict[str, bytes] = {}
    cache = root / "cache"
    for p in sorted(cache.rglob("*")):
        rel = p.relative_to(cache)
        if not p.is_file() or p.name.endswith(".lock") or rel.parts[0] in ("jobs", "claude-code"):
            continue
        if str(rel) in (STAT_FILE, f"{SEARCH_FOLDER}/{SEARCH_STAT_FILE}"):
            continue
        out[str(rel)] = p.read_bytes()
    return out


_SETTLED_ONLY: Final = frozenset({SESSIONS_FILE, CONTEXT_FILE})
"""Caches written only when the listing file is (the logs still for a while): a function of
the catalog when both stores have one, compared then; whether one exists is the clock's."""


def compare_caches(store: Path, work: Path) -> tuple[int, list[str]]:
    """(files compared, differences) between the store's caches and a fresh rebuild of a copy
    of the store (its ``cache/`` deleted, then ``continuity rebuild-index`` and a ``search``)."""
    copy = work / "rebuilt"
    shutil.rmtree(copy, ignore_errors=True)
    copy_store(store, copy)
    shutil.rmtree(copy / "cache")
    # rebuild-index rebuilds the search indexes that exist; the first search builds the others
    for args in (["rebuild-index"], ["search", "rebuilt"]):
        p = cli(copy, *args)
        if not p.ok:
            return 0, [f"{args[0]} on the copy failed: {p.describe()}"]
    have, want = _cache_files(store), _cache_files(copy)
    diffs = []
    for name in sorted(set(have) | set(want)):
        a, b = have.get(name), want.get(name)
        if a == b:
            continue
        if name in _SETTLED_ONLY and (a is None or b is None):
            continue  # written only beside a listing file (ADR 0064): when, is the clock's
        if a is None:
            diffs.append(f"{name}: missing (the rebuild has {len(b or b'')} bytes)")
        elif b is None:
            diffs.append(f"{name}: {len(a)} bytes that a rebuild does not write")
        else:
            at = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)
            where = f"first difference at byte {at}" if at is not None else "one is a prefix"
            diffs.append(f"{name}: {len(a)} bytes vs {len(b)} rebuilt, {where}")
    shutil.rmtree(copy, ignore_errors=True)
    return len(set(have) | set(want)), diffs
