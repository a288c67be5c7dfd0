"""What the benchmarks share: timing and statistics, cached generated threads, the report table.

Generated threads are cached under the bench folder (``$CONTINUITY_BENCH_DIR``, else
``<tmp>/continuity-bench``) keyed by (generator version, frames, seed), so repeated runs do not
generate them again. A cached store is only read by the benchmarks (plus its ``cache/`` folder,
which is derived anyway); anything that appends works on a copy under ``work/``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, TypeVar

from continuity.store.jsonl import Store
from tools.gen_thread import FIXED_CLOCK_MS, write_thread

__all__ = [
    "BENCH_THREAD",
    "CHECKPOINT_EVERY",
    "Report",
    "Row",
    "bench_dir",
    "cached_thread",
    "common_parser",
    "continuity_command",
    "copy_store",
    "emit",
    "env_info",
    "median",
    "percentile",
    "render",
    "time_once",
    "timed",
    "work_dir",
]

GENERATOR_VERSION: Final = 1
"""Bump when tools/gen_thread.py changes what it writes: cached threads are keyed by it."""
BENCH_THREAD: Final = "bench"
CHECKPOINT_EVERY: Final = 200
"""Cached threads get a compaction checkpoint about every 200 messages."""
_MARKER: Final = "bench-thread.json"
T = TypeVar("T")


def bench_dir() -> Path:
    root = os.environ.get("CONTINUITY_BENCH_DIR")
    path = Path(root) if root else Path(tempfile.gettempdir()) / "continuity-bench"
    path.mkdir(parents=True, exist_ok=True)
    return path


def log(message: str) -> None:
    """Progress for the human at the terminal (stderr, so ``--json`` output stays clean)."""
    print(message, file=sys.stderr, flush=True)


# --- statistics -----------------------------------------------------------------------------


def median(samples: Sequence[float]) -> float:
    ordered = sorted(samples)
    n = len(ordered)
    mid = n // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def percentile(samples: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100): with few samples, p90 is close to the max."""
    ordered = sorted(samples)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def time_once(fn: Callable[[], object]) -> float:
    """Seconds one call of ``fn`` takes."""
    return timed(fn)[0]


def timed(fn: Callable[[], T]) -> tuple[float, T]:
    """(seconds, result) of one call of ``fn``."""
    start = time.perf_counter_ns()
    result = fn()
    return (time.perf_counter_ns() - start) / 1e9, result


# --- results --------------------------------------------------------------------------------


@dataclass(slots=True)
class Row:
    """One measured figure. For rates, ``p90`` is the rate at the 90th-percentile time (the slow
    end), so both columns read the same way: ``p90`` is the worse one."""

    metric: str
    median: float
    unit: str
    p90: float | None = None
    n: int = 0
    target: float | None = None
    better: Literal["higher", "lower"] = "lower"
    baseline: str = ""
    ratio: float | None = None

    @property
    def ok(self) -> bool | None:
        if self.target is None:
            return None
        return self.median >= self.target if self.better == "higher" else self.median <= self.target


def rate_row(metric: str, work: float, seconds: Sequence[float], unit: str, **kw: Any) -> Row:
    """A throughput row from per-run times of ``work`` units each."""
    return Row(
        metric,
        work / median(seconds),
        unit,
        p90=work / percentile(seconds, 90),
        n=len(seconds),
        better="higher",
        **kw,
    )


def time_row(metric: str, seconds: Sequence[float], unit: str = "ms", **kw: Any) -> Row:
    scale = {"s": 1.0, "ms": 1e3, "us": 1e6}[unit]
    return Row(
        metric,
        median(seconds) * scale,
        unit,
        p90=percentile(seconds, 90) * scale,
        n=len(seconds),
        **kw,
    )


@dataclass(slots=True)
class Report:
    bench: str
    params: dict[str, Any]
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        for row, raw in zip(self.rows, out["rows"], strict=True):
            raw["ok"] = row.ok
        return out


def _num(value: float) -> str:
    if value >= 1000:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}" if value >= 0.01 else f"{value:.2g}"


def render(report: Report) -> str:
    params = ", ".join(f"{k}={v}" for k, v in report.params.items())
    head = ("metric", "median", "p90", "unit", "n", "vs baseline", "target", "ok")
    rows = []
    for r in report.rows:
        target = ""
        if r.target is not None:
            target = f"{'>=' if r.better == 'higher' else '<='} {_num(r.target)}"
        vs = f"{r.ratio:.2f}x {r.baseline}" if r.ratio is not None else r.baseline
        ok = {None: "", True: "yes", False: "NO"}[r.ok]
        p90 = "" if r.p90 is None else _num(r.p90)
        rows.append((r.metric, _num(r.median), p90, r.unit, str(r.n or ""), vs, target, ok))
    widths = [max(len(x) for x in col) for col in zip(head, *rows, strict=True)]
    right = {1, 2, 4}

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    out = [f"== {report.bench}  ({params}; {report.seconds:.0f} s)", line(head)]
    out.append(line(["-" * w for w in widths]))
    out.extend(line(r) for r in rows)
    out.extend(f"  note: {n}" for n in report.notes)
    return "\n".join(out)


def env_info() -> dict[str, Any]:
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
    }


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(s) for s in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not comma-separated integers: {text!r}") from None
    if not sizes or min(sizes) <= 0:
        raise argparse.ArgumentTypeError(f"sizes must be positive: {text!r}")
    return sizes


def common_parser(
    description: str, sizes: tuple[int, ...] | None = None, unit: str = "frames"
) -> argparse.ArgumentParser:
    """``--json`` and ``--seed``; with ``sizes``, also ``--sizes`` (parsed to a tuple of ints,
    ``sizes`` by default), the thread or transcript sizes a benchmark runs at, in ``unit``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--seed", type=int, default=0, help="generator seed (default 0)")
    if sizes is not None:
        parser.add_argument(
            "--sizes",
            type=_sizes,
            default=sizes,
            help=f"comma-separated sizes in {unit} (default {','.join(map(str, sizes))})",
        )
    return parser


def emit(reports: list[Report], as_json: bool) -> None:
    if as_json:
        print(json.dumps({"env": env_info(), "reports": [r.to_json() for r in reports]}, indent=2))
        return
    env = env_info()
    print(f"# {env['date']}  cpus={env['cpu_count']}  python={env['python']}  {env['platform']}")
    for r in reports:
        print()
        print(render(r))


# --- generated threads ----------------------------------------------------------------------


def cached_thread(frames: int, seed: int = 0) -> Path:
    """A store holding thread ``bench`` with ``frames`` generated frames, generated once."""
    root = bench_dir() / f"thread-g{GENERATOR_VERSION}-f{frames}-s{seed}"
    marker = root / _MARKER
    if marker.is_file():
        info = json.loads(marker.read_text())
        log_path = root / "threads" / f"{BENCH_THREAD}.jsonl"
        if log_path.is_file() and log_path.stat().st_size == info["log_bytes"]:
            return root
        log(f"cached thread {root} does not match its marker: generating it again")
    shutil.rmtree(root, ignore_errors=True)
    tmp = root.with_name(f"{root.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    log(f"generating {frames:,} frames (seed {seed}) into {root} (cached for later runs)")
    store = Store(tmp, create=True, durable=False, clock=lambda: FIXED_CLOCK_MS)
    stats = write_thread(store, BENCH_THREAD, frames, seed=seed, checkpoint_every=CHECKPOINT_EVERY)
    (tmp / _MARKER).write_text(
        json.dumps({"frames": frames, "seed": seed, "log_bytes": stats.log_bytes}) + "\n"
    )
    log(f"  {stats.log_bytes / 1e6:,.0f} MB in {stats.seconds:.1f} s")
    os.replace(tmp, root)
    return root


def copy_store(source: Path, target: Path, *, search_index: bool = True) -> Store:
    """A writable copy of a cached store: log and caches copied (the search index only with
    ``search_index``), artifacts hard-linked (they are immutable: written to a temp file and
    renamed, never changed in place)."""

    def copy(src: str, dst: str) -> object:
        if f"{os.sep}artifacts{os.sep}" in src:
            try:
                os.link(src, dst)
                return dst
            except OSError:
                pass
        return shutil.copy2(src, dst)

    def ignore(folder: str, names: list[str]) -> set[str]:
        skip = {_MARKER}
        if not search_index and Path(folder).name == "cache":
            skip.add("search")
        return skip & set(names)

    shutil.copytree(source, target, copy_function=copy, ignore=ignore)
    return Store(target, durable=False)


@contextmanager
def work_dir(name: str) -> Iterator[Path]:
    """A scratch folder under the bench folder, removed afterwards."""
    path = bench_dir() / "work" / f"{name}-{os.getpid()}"
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def short_size(n: int) -> str:
    """1000000 -> '1M', 10000 -> '10k'."""
    for unit, div in (("M", 1_000_000), ("k", 1_000)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return str(n)


# --- fresh processes ------------------------------------------------------------------------


def continuity_command() -> list[str]:
    script = shutil.which("continuity", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-m", "continuity"]


# A child's ru_maxrss starts at its parent's peak RSS (Linux carries it across fork and exec),
# so the processes are started by this small launcher, not by the benchmark (tens of MB).
LAUNCHER_SCRIPT: Final = """
import json, os, subprocess, sys, tempfile, time
for line in sys.stdin:
    argv, env, cwd = json.loads(line)
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter_ns()
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = (time.perf_counter_ns() - start) / 1e9
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        err.seek(0)
        message = err.read().decode(errors="replace") if code else ""
    cpu = usage.ru_utime + usage.ru_stime
    print(json.dumps([seconds, cpu, usage.ru_maxrss, code, message]), flush=True)
"""


class Launcher:
    """Runs fresh processes for the benchmark: (seconds, peak RSS in MB) of each, or with
    :meth:`measure` (wall seconds, CPU seconds, peak RSS in MB)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", LAUNCHER_SCRIPT],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def run(self, argv: list[str]) -> tuple[float, float]:
        seconds, _cpu, mb = self.measure(argv)
        return seconds, mb

    def measure(
        self, argv: list[str], env: dict[str, str] | None = None, cwd: Path | None = None
    ) -> tuple[float, float, float]:
        """``env``/``cwd``: the child's (default: the launcher's)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps([argv, env, None if cwd is None else str(cwd)]) + "\n")
        self.proc.stdin.flush()
        seconds, cpu, maxrss_kib, code, message = json.loads(self.proc.stdout.readline())
        if code != 0:
            raise RuntimeError(f"{' '.join(argv)} exited with {code}: {message}")
        return seconds, cpu, maxrss_kib / 1024

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.wait()
        self.proc.stdout.close()


PG_URL_ENV: Final = "CONTINUITY_BENCH_PG_URL"
"""An external server for the PostgreSQL benchmarks (they make and drop their own schemas)."""


@contextmanager
def pg_server() -> Iterator[str]:
    """A PostgreSQL server for a benchmark: ``$CONTINUITY_BENCH_PG_URL``, or a throwaway
    ``pgserver`` in a temporary folder, stopped when the block ends."""
    external = os.environ.get(PG_URL_ENV)
    if external:
        yield external
        return
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if not runtime or not Path(runtime).is_dir() or Path(runtime).stat().st_mode & 0o077:
        os.environ["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="continuity-xdg-")
    import pgserver

    with tempfile.TemporaryDirectory(prefix="continuity-bench-pg-") as tmp:
        server = pgserver.get_server(Path(tmp) / "pgdata", cleanup_mode="stop")  # type: ignore[attr-defined]
        try:
            yield server.get_uri()
        finally:
            server.cleanup()


def slowest_imports(
    command: Sequence[str],
    env: dict[str, str],
    *,
    stdin: bytes = b"",
    cwd: str | None = None,
    runs: int = 3,
) -> list[str]:
    """The slowest imports of ``command`` (a Python process's arguments after the interpreter,
    run with ``-X importtime``): the best of ``runs`` for each module, nested ones indented."""
    best: dict[str, tuple[int, int]] = {}
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", *command],
            input=stdin,
            capture_output=True,
            env=env,
            cwd=cwd,
            check=False,
        )
        for line in done.stderr.decode().splitlines():
            parts = line.removeprefix("import time:").split("|")
            if len(parts) != 3 or not parts[0].strip().isdigit():
                continue
            name = parts[2].rstrip()
            cum, own = int(parts[1]), int(parts[0])
            best[name] = min(best.get(name, (cum, own)), (cum, own))
    top_level = sum(cum for name, (cum, _) in best.items() if not name.startswith("  "))
    rows = sorted(best.items(), key=lambda kv: -kv[1][0])[:14]
    out = [f"all imports: {top_level / 1000:.1f} ms (cumulative ms, own ms, module)"]
    out += [f"{cum / 1000:6.1f} {own / 1000:6.1f} {name}" for name, (cum, own) in rows]
    return out
