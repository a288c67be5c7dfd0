"""Whole-process latency of the Claude Code hooks on large transcripts.

    python -m tools.bench.bench_hooks [--sizes 3,100] [--repeat 11] [--first-repeat 9]
                                      [--profile] [--json]

Transcripts of ``--sizes`` MB (10^6 bytes) are built by repeating the real sessions in
``../shared/fixtures/claude-code/spotter/*.jsonl`` with fresh uuids, message, request and tool
ids on every repetition (so each repetition is new conversation to the ingest, compactions
included: about one per 3.3 MB), cached under the bench folder, copied into a scratch folder and
first ingested in full (untimed). Then, ``--repeat`` rounds, sizes and baselines interleaved:

* one new turn is appended (a prompt, a response split over three lines — thinking, text,
  a Bash tool_use — hook progress noise and the tool result; about 3 KB) and
  ``continuity hook user-prompt-submit`` is timed as a fresh process (target: p50 at most
  25 ms over the interpreter's floor at every size, and flat: the largest size over the
  smallest <= 1.5x);
* baselines as fresh processes: ``python -c pass`` (the floor: the same interpreter starting
  and doing nothing) and ``python -c "import continuity.store.jsonl"``.

Then ``--repeat`` rounds of a compaction: a new turn, ``pre-compact`` (timed, no target), a
``compact_boundary`` and an ``isCompactSummary`` line, and ``session-start`` with source
``compact`` (timed, whole process: target <= 60 ms over the floor, which these rounds time
again). And ``--first-repeat`` first ingests of the smallest transcript into an empty store,
in-process (``ingest_transcript``) and as a fresh ``continuity hook user-prompt-submit``
process (target <= 400 ms).

``--ingest-only`` runs only the ingest-only hooks instead (issue 28): on the smallest transcript,
``--repeat`` rounds of fresh processes, each timed for wall and for CPU (the child's user + sys
time, ``os.wait4``): ``python -c pass`` (the floor), then, before (the full path, forced with
``CONTINUITY_HOOK_FULL=1``) and after (the fast path), ``post-tool-use`` after one new tool
call, ``post-tool-use`` with nothing new and ``stop`` with nothing new (target: nothing new
<= the floor + 10 ms, wall and CPU).

``--long-lines`` runs only the long-line cases instead (issue 10): a small session whose
transcript then ends with an unterminated ``--unterminated-mb`` (200) MB line, then that line
completed, and a session with one complete ``--complete-mb`` (50) MB prompt line. Each is timed
as a fresh process with its peak RSS (``wait4``): ``user-prompt-submit`` while the long line is
unfinished (every hook meets it again), the hook that meets it completed (a new cursor each
round), the first ingest of the 50 MB line (a new store each round), then ``continuity compile
--dry-run`` of that thread (the bundle's tokens are noted) and ``session-start`` (``resume``).

Bytecode: the child processes run without ``PYTHONDONTWRITEBYTECODE`` (users' installs cache
bytecode) and every command is run once before timing. ``--profile`` adds where one hook
process spends its time: ``python -X importtime`` (slowest imports) and ``cProfile`` (functions
by cumulative and by own time).
"""

from __future__ import annotations

import io
import os
import pstats
import random
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any, Final

import msgspec

from continuity.agents.claude_code.ingest import ingest_transcript
from continuity.demo.transcript import TranscriptWriter
from continuity.store.jsonl import Store
from tools.bench._common import (
    Report,
    Row,
    bench_dir,
    common_parser,
    continuity_command,
    emit,
    log,
    median,
    slowest_imports,
    time_row,
    timed,
    work_dir,
)

__all__ = [
    "Session",
    "cached_transcript",
    "child_env",
    "main",
    "run",
    "run_cpu_process",
    "run_ingest_only",
    "run_long_lines",
    "run_measured",
    "run_process",
]

FIXTURES: Final = (
    Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures" / "claude-code" / "spotter"
)
TEMPLATE_VERSION: Final = 1
"""Bump when the way transcripts are built changes: cached transcripts are keyed by it."""
SESSION_ID: Final = "b3c4e1f0-6d2a-4c8e-9f71-2a5b8d0c4e13"
DEFAULT_SIZES: Final = (3, 100)
PROMPT_OVER_FLOOR_MS: Final = 25.0
"""user-prompt-submit's p50 over the interpreter's floor (``python -c pass``, same run)."""
FLAT_TARGET: Final = 1.5
FIRST_INGEST_TARGET_MS: Final = 400.0
SESSION_START_OVER_FLOOR_MS: Final = 60.0
INGEST_ONLY_OVER_FLOOR_MS: Final = 10.0
"""An ingest-only hook that finds nothing new: at most this over the floor (wall and CPU)."""
FLOOR: Final = "python -c pass"
_MB: Final = 1_000_000
_MARK: Final = b"~CYCLE"
_ID: Final = re.compile(
    rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    rb"|(?:msg|toolu|req)_[A-Za-z0-9]{12,}"
)
_CWD: Final = "/home/USER/projects/spotter-worktrees/spotter-dov"


# --- transcripts ----------------------------------------------------------------------------


def _fixture_files() -> list[Path]:
    files = sorted(p for p in FIXTURES.glob("*.jsonl") if p.stat().st_size > _MB)
    if not files:
        raise SystemExit(f"bench_hooks: no fixture transcripts in {FIXTURES}")
    return files


def _template() -> bytes:
    """The fixtures' lines with one session id, every other id's last 6 characters a marker."""
    files = _fixture_files()
    sessions = {p.stem.encode() for p in files}

    def mark(m: re.Match[bytes]) -> bytes:
        found = m.group(0)
        return SESSION_ID.encode() if found in sessions else found[:-6] + _MARK

    data = b"".join(p.read_bytes() for p in files)
    if _MARK in data:
        raise SystemExit("bench_hooks: the fixtures contain the id marker")
    return _ID.sub(mark, data)


def cached_transcript(megabytes: int) -> Path:
    """A transcript of about ``megabytes`` MB (cut at a line end), built once and cached."""
    path = bench_dir() / f"cc-transcript-t{TEMPLATE_VERSION}-{megabytes}mb" / f"{SESSION_ID}.jsonl"
    marker = path.with_suffix(".size")
    if (
        path.is_file()
        and marker.is_file()
        and marker.read_text().strip() == str(path.stat().st_size)
    ):
        return path
    log(f"bench_hooks: building a {megabytes} MB transcript in {path} (cached for later runs)")
    template = _template()
    target = megabytes * _MB
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    written = 0
    with open(tmp, "wb") as f:
        cycle = 0
        while written < target:
            chunk = template.replace(_MARK, f"{cycle:06x}".encode())
            if written + len(chunk) > target:
                cut = chunk.find(b"\n", target - written)
                chunk = chunk[: cut + 1] if cut >= 0 else chunk
            f.write(chunk)
            written += len(chunk)
            cycle += 1
    os.replace(tmp, path)
    marker.write_text(f"{written}\n")
    return path


class Session:
    """A scratch copy of a transcript that grows one turn at a time, as Claude Code writes it."""

    def __init__(self, source: Path, folder: Path, seed: int) -> None:
        project = folder / "projects" / "-home-USER-projects-spotter-worktrees-spotter-dov"
        project.mkdir(parents=True)
        self.path = project / source.name
        shutil.copyfile(source, self.path)
        self.store = folder / "store"
        self.writer = TranscriptWriter(
            self.path,
            session_id=SESSION_ID,
            cwd=_CWD,
            git_branch="spotter-dov",
            version="2.1.39",
            rng=random.Random(seed),
        )
        self.turns = 0

    def payload(self, event: str, **fields: Any) -> bytes:
        names = {
            "user-prompt-submit": "UserPromptSubmit",
            "pre-compact": "PreCompact",
            "session-start": "SessionStart",
            "post-tool-use": "PostToolUse",
            "stop": "Stop",
            "session-end": "SessionEnd",
        }
        return msgspec.json.encode(
            {
                "session_id": SESSION_ID,
                "transcript_path": str(self.path),
                "cwd": _CWD,
                "hook_event_name": names[event],
                **fields,
            }
        )

    def add_turn(self) -> str:
        """Append one turn (about 3 KB); return its prompt."""
        self.turns += 1
        w = self.writer
        prompt = f"Turn {self.turns}: rename render_turn to render_entry and rerun the tests."
        w.prompt(prompt)
        tool_id = w.tool_id()
        w.response(
            [
                w.thinking("Rename the helper everywhere, then run the suite to catch leftovers."),
                {"type": "text", "text": "I'll rename it and run the tests."},
                {
                    "type": "tool_use",
                    "id": tool_id,
                    "name": "Bash",
                    "input": {"command": "mix test", "description": "Run the test suite"},
                },
            ]
        )
        output = "".join(f"test/spotter/case_{i}_test.exs ....\n" for i in range(40))
        output += f"Finished in 4.1 seconds\n{160 + self.turns} tests, 0 failures\n"
        w.tool_result(
            tool_id,
            output,
            {"stdout": output, "stderr": "", "interrupted": False, "isImage": False},
        )
        w.hook_progress("PostToolUse", "Bash", "continuity hook post-tool-use", tool_id)
        w.flush()
        return prompt

    def add_tool_call(self) -> dict[str, Any]:
        """Append one tool call and its result (about 2 KB, as a response line and a result
        line); return the PostToolUse fields for it."""
        self.turns += 1
        w = self.writer
        tool_id = w.tool_id()
        tool_input = {"command": f"git status --short  # {self.turns}", "description": "Status"}
        w.response([{"type": "tool_use", "id": tool_id, "name": "Bash", "input": tool_input}])
        output = "".join(f" M lib/spotter/module_{i}.ex\n" for i in range(60))
        result = {"stdout": output, "stderr": "", "interrupted": False, "isImage": False}
        w.tool_result(tool_id, output, result)
        w.hook_progress("PostToolUse", "*", "continuity hook post-tool-use", tool_id)
        w.flush()
        return {
            "tool_name": "Bash",
            "tool_input": tool_input,
            "tool_use_id": tool_id,
            "tool_response": result,
        }

    def add_compaction(self) -> None:
        self.writer.compaction(
            "This session is being continued from a previous conversation that ran out of "
            "context. The summary below covers the earlier portion of the conversation.\n\n"
            f"Summary:\n1. Primary Request and Intent:\n   Rename helpers (turn {self.turns}).\n"
        )
        self.writer.flush()


# --- processes ------------------------------------------------------------------------------


def child_env(store: Path | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # measure with bytecode caching, as users have it
    env.pop("CONTINUITY_DEBUG", None)
    if store is not None:
        env["CONTINUITY_HOME"] = str(store)
    return env


def run_process(
    argv: Sequence[str],
    env: dict[str, str],
    stdin: bytes = b"",
    cwd: Path | None = None,
    stderr_ok: bool = False,
) -> tuple[float, bytes]:
    """(seconds, stdout) of a fresh process that must exit 0 (and, unless ``stderr_ok``,
    write nothing to stderr: a hook's report there is an error)."""
    start = time.perf_counter_ns()
    done = subprocess.run(argv, input=stdin, capture_output=True, env=env, cwd=cwd, check=False)
    seconds = (time.perf_counter_ns() - start) / 1e9
    if done.returncode != 0 or (done.stderr and not stderr_ok):
        raise RuntimeError(
            f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode(errors='replace')}"
        )
    return seconds, done.stdout


def _restored_chars(stdout: bytes) -> int:
    out = msgspec.json.decode(stdout)
    return len(out["hookSpecificOutput"]["additionalContext"])


# --- the benchmark --------------------------------------------------------------------------


def run(
    sizes: Sequence[int] = DEFAULT_SIZES,
    repeat: int = 11,
    first_repeat: int = 9,
    seed: int = 0,
    profile: bool = False,
) -> Report:
    started = time.perf_counter()
    report = Report(
        "bench_hooks",
        {
            "sizes": ",".join(f"{s}MB" for s in sizes),
            "repeat": repeat,
            "first_repeat": first_repeat,
            "seed": seed,
        },
    )
    sources = {mb: cached_transcript(mb) for mb in sizes}
    hook = [*continuity_command(), "hook"]
    small = min(sizes)
    with work_dir("bench_hooks") as scratch:
        _first_ingest(report, sources[small], scratch / "first", hook, first_repeat, small)
        sessions = {}
        for mb in sizes:
            s = Session(sources[mb], scratch / f"s{mb}", seed + mb)
            log(f"bench_hooks: first ingest of {mb} MB (untimed) into {s.store}")
            store = Store(s.store, create=True)
            t, r = timed(partial(ingest_transcript, store, s.path, final=True))
            report.notes.append(
                f"{mb} MB transcript: {s.path.stat().st_size:,} bytes, {r.messages:,} messages, "
                f"compactions: {r.checkpoints}; its first full ingest in-process: {t * 1e3:,.0f} ms"
            )
            sessions[mb] = s
        _prompts(report, sessions, hook, repeat)
        _compactions(report, sessions, hook, repeat)
        if profile:
            report.notes.extend(_profile(hook, sessions[max(sizes)], max(sizes)))
    report.notes.append(
        "child processes run without PYTHONDONTWRITEBYTECODE (bytecode cached, as users have it); "
        "each command ran once before timing; the page cache is warm"
    )
    report.seconds = time.perf_counter() - started
    return report


def _first_ingest(
    report: Report, source: Path, folder: Path, hook: list[str], repeat: int, mb: int
) -> None:
    log(f"bench_hooks: {repeat} first ingests of {mb} MB, in-process and as a hook process")
    inproc: list[float] = []
    process: list[float] = []
    for i in range(repeat + 1):  # the first round warms up
        for kind in ("in-process", "process"):
            run_dir = folder / f"{kind}-{i}"
            s = Session(source, run_dir, i)
            if kind == "in-process":
                store = Store(s.store, create=True)
                secs, _ = timed(partial(ingest_transcript, store, s.path))
                if i:
                    inproc.append(secs)
            else:
                payload = s.payload("user-prompt-submit", prompt="hello")
                secs, _ = run_process([*hook, "user-prompt-submit"], child_env(s.store), payload)
                if i:
                    process.append(secs)
            shutil.rmtree(run_dir)
    report.rows.append(
        time_row(
            f"first ingest {mb} MB, in-process (ingest_transcript)",
            inproc,
            target=FIRST_INGEST_TARGET_MS,
        )
    )
    report.rows.append(
        time_row(
            f"first ingest {mb} MB, whole process (hook user-prompt-submit)",
            process,
            target=FIRST_INGEST_TARGET_MS,
        )
    )


def _prompts(report: Report, sessions: dict[int, Session], hook: list[str], repeat: int) -> None:
    log(f"bench_hooks: {repeat} rounds of user-prompt-submit at {len(sessions)} sizes")
    env = child_env()
    baselines = {
        "python -c pass": [sys.executable, "-c", "pass"],
        'python -c "import continuity.store.jsonl"': [
            sys.executable,
            "-c",
            "import continuity.store.jsonl",
        ],
    }
    base_s: dict[str, list[float]] = {name: [] for name in baselines}
    hook_s: dict[int, list[float]] = {mb: [] for mb in sessions}
    for i in range(repeat + 1):  # the first round warms up
        for name, argv in baselines.items():
            secs, _ = run_process(argv, env)
            if i:
                base_s[name].append(secs)
        for mb, s in sessions.items():
            prompt = s.add_turn()
            payload = s.payload("user-prompt-submit", prompt=prompt)
            secs, out = run_process([*hook, "user-prompt-submit"], child_env(s.store), payload)
            if out:
                raise RuntimeError(f"user-prompt-submit printed {out[:200]!r}")
            if i:
                hook_s[mb].append(secs)
    base = median(base_s[FLOOR])
    for name, samples in base_s.items():
        row = time_row(name, samples)
        if name != FLOOR:
            row.baseline, row.ratio = FLOOR, median(samples) / base
        report.rows.append(row)
    for mb, samples in hook_s.items():
        row = time_row(f"hook user-prompt-submit, one new turn, {mb} MB", samples)
        row.baseline, row.ratio = FLOOR, median(samples) / base
        report.rows.append(row)
        report.rows.append(_over_floor(samples, base, PROMPT_OVER_FLOOR_MS))
    lo, hi = min(hook_s), max(hook_s)
    if lo != hi:
        ratio = median(hook_s[hi]) / median(hook_s[lo])
        report.rows.append(
            Row(f"  user-prompt-submit {hi}MB/{lo}MB", ratio, "x", target=FLAT_TARGET)
        )


def _over_floor(samples: Sequence[float], floor: float, target: float) -> Row:
    """The row under a hook's: its median over the floor's median of the same rounds (ms)."""
    over = (median(samples) - floor) * 1e3
    return Row(f"  floor + X (floor: {FLOOR}, {floor * 1e3:.1f} ms)", over, "ms", target=target)


def _compactions(
    report: Report, sessions: dict[int, Session], hook: list[str], repeat: int
) -> None:
    log(f"bench_hooks: {repeat} rounds of pre-compact + session-start (compact)")
    pre_s: dict[int, list[float]] = {mb: [] for mb in sessions}
    start_s: dict[int, list[float]] = {mb: [] for mb in sessions}
    chars: list[int] = []
    floor_s: list[float] = []
    for i in range(repeat + 1):
        secs, _ = run_process([sys.executable, "-c", "pass"], child_env())
        if i:
            floor_s.append(secs)
        for mb, s in sessions.items():
            env = child_env(s.store)
            s.add_turn()
            pre = s.payload("pre-compact", trigger="auto", custom_instructions=None)
            secs, _ = run_process([*hook, "pre-compact"], env, pre)
            if i:
                pre_s[mb].append(secs)
            s.add_compaction()
            start = s.payload("session-start", source="compact")
            secs, out = run_process([*hook, "session-start"], env, start)
            chars.append(_restored_chars(out))
            if i:
                start_s[mb].append(secs)
    for mb in sessions:
        report.rows.append(time_row(f"hook pre-compact, one new turn, {mb} MB", pre_s[mb]))
    floor = median(floor_s)
    report.rows.append(time_row(f"{FLOOR} (in the compaction rounds)", floor_s))
    for mb in sessions:
        row = time_row(f"hook session-start (compact) after a compaction, {mb} MB", start_s[mb])
        row.baseline, row.ratio = FLOOR, median(start_s[mb]) / floor
        report.rows.append(row)
        report.rows.append(_over_floor(start_s[mb], floor, SESSION_START_OVER_FLOOR_MS))
    report.notes.append(f"restored context: {min(chars):,}..{max(chars):,} characters")


# --- ingest-only hooks: before and after the fast path ------------------------------------


def run_cpu_process(
    argv: Sequence[str], env: dict[str, str], stdin: bytes = b""
) -> tuple[float, float, bytes]:
    """(wall seconds, CPU seconds: the child's user + sys, stdout) of a fresh process that
    must exit 0 and write nothing to stderr. Its input and output go through files, so the
    child is reaped here with ``os.wait4`` and its own rusage read."""
    from tempfile import TemporaryFile

    with TemporaryFile() as fin, TemporaryFile() as fout, TemporaryFile() as ferr:
        fin.write(stdin)
        fin.seek(0)
        start = time.perf_counter_ns()
        proc = subprocess.Popen(argv, stdin=fin, stdout=fout, stderr=ferr, env=env)
        _pid, status, usage = os.wait4(proc.pid, 0)
        wall = (time.perf_counter_ns() - start) / 1e9
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        fout.seek(0)
        ferr.seek(0)
        out, err = fout.read(), ferr.read()
    if code != 0 or err:
        raise RuntimeError(f"{' '.join(argv)} exited {code}: {err.decode(errors='replace')}")
    return wall, usage.ru_utime + usage.ru_stime, out


_INGEST_CASES: Final = (
    "post-tool-use, one new tool call",
    "post-tool-use, nothing new",
    "stop, nothing new",
)
_VARIANTS: Final = ("before (full path)", "after (fast path)")


def run_ingest_only(megabytes: int = 3, repeat: int = 15, seed: int = 0) -> Report:
    """Wall and CPU of the ingest-only hooks, before and after the fast path, and the floor,
    as fresh processes in the same rounds (the variants' order alternates by round)."""
    from continuity.agents.claude_code.quick import FULL_ENV

    started = time.perf_counter()
    report = Report(
        "bench_hooks --ingest-only", {"size": f"{megabytes}MB", "repeat": repeat, "seed": seed}
    )
    hook = [*continuity_command(), "hook"]
    source = cached_transcript(megabytes)
    wall: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}

    def record(name: str, sample: tuple[float, float, bytes], i: int) -> None:
        if i:  # the first round warms up
            wall.setdefault(name, []).append(sample[0])
            cpu.setdefault(name, []).append(sample[1])

    with work_dir("bench_hooks_ingest_only") as scratch:
        s = Session(source, scratch / "s", seed)
        log(f"bench_hooks: first ingest of {megabytes} MB (untimed), then {repeat} rounds")
        ingest_transcript(Store(s.store, create=True), s.path, final=True)
        envs = {
            _VARIANTS[0]: {**child_env(s.store), FULL_ENV: "1"},
            _VARIANTS[1]: child_env(s.store),
        }
        for i in range(repeat + 1):
            record(FLOOR, run_cpu_process([sys.executable, "-c", "pass"], child_env()), i)
            for variant in _VARIANTS if i % 2 else reversed(_VARIANTS):
                env = envs[variant]
                fields = s.add_tool_call()
                payload = s.payload("post-tool-use", **fields)
                post, new, stop = _INGEST_CASES
                record(
                    f"{post}, {variant}", run_cpu_process([*hook, "post-tool-use"], env, payload), i
                )
                record(
                    f"{new}, {variant}", run_cpu_process([*hook, "post-tool-use"], env, payload), i
                )
                stop_payload = s.payload("stop", stop_hook_active=False)
                record(f"{stop}, {variant}", run_cpu_process([*hook, "stop"], env, stop_payload), i)
    _ingest_only_rows(report, wall, cpu)
    report.notes.append(
        "before: the same tree with CONTINUITY_HOOK_FULL=1 (the full path: store, ingest, "
        "cursor); after: the fast path; CPU is the child's user + sys time (os.wait4)"
    )
    report.seconds = time.perf_counter() - started
    return report


def _ingest_only_rows(
    report: Report, wall: dict[str, list[float]], cpu: dict[str, list[float]]
) -> None:
    floor_wall, floor_cpu = median(wall[FLOOR]), median(cpu[FLOOR])
    report.rows.append(time_row(f"{FLOOR} (wall)", wall[FLOOR]))
    report.rows.append(time_row(f"{FLOOR} (CPU)", cpu[FLOOR]))
    for case in _INGEST_CASES:
        for variant in _VARIANTS:
            name = f"{case}, {variant}"
            target = (
                INGEST_ONLY_OVER_FLOOR_MS if "nothing new" in case and "after" in variant else None
            )
            row = time_row(f"hook {name} (wall)", wall[name])
            row.baseline, row.ratio = FLOOR, median(wall[name]) / floor_wall
            report.rows.append(row)
            over = (median(wall[name]) - floor_wall) * 1e3
            report.rows.append(Row("  wall over the floor", over, "ms", target=target))
            row = time_row(f"hook {name} (CPU)", cpu[name])
            row.baseline, row.ratio = f"{FLOOR} (CPU)", median(cpu[name]) / max(floor_cpu, 1e-9)
            report.rows.append(row)
            over = (median(cpu[name]) - floor_cpu) * 1e3
            report.rows.append(Row("  CPU over the floor", over, "ms", target=target))
        before, after = (f"{case}, {v}" for v in _VARIANTS)
        report.rows.append(
            Row(f"  {case}: before/after (CPU)", median(cpu[before]) / median(cpu[after]), "x")
        )


# --- long lines -----------------------------------------------------------------------------


_MEASURE: Final = """\
import os, subprocess, sys, time
start = time.perf_counter_ns()
child = subprocess.Popen(sys.argv[2:])
_pid, status, usage = os.wait4(child.pid, 0)
took = time.perf_counter_ns() - start
with open(sys.argv[1], "w") as f:
    f.write(f"{took} {usage.ru_maxrss} {os.waitstatus_to_exitcode(status)}")
"""


def run_measured(
    argv: Sequence[str], env: dict[str, str], stdin: bytes = b""
) -> tuple[float, float, bytes, bytes]:
    """(seconds, peak RSS in MB, stdout, stderr) of a fresh process that must exit 0.

    A small Python process starts it and reads its rusage: a child's peak RSS counts the peak
    of the process it was forked from (Linux carries the old memory's high-water mark across
    exec), and this benchmark's own process holds far more than a hook."""
    from tempfile import TemporaryDirectory, TemporaryFile

    with TemporaryDirectory() as tmp, TemporaryFile() as fin:
        fin.write(stdin)
        fin.seek(0)
        measured = Path(tmp) / "measured"
        done = subprocess.run(
            [sys.executable, "-c", _MEASURE, str(measured), *argv],
            stdin=fin,
            capture_output=True,
            env=env,
            check=False,
        )
        took, rss_kb, code = (int(x) for x in measured.read_text().split())
    if code != 0 or done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {code}: {done.stderr.decode()[:500]}")
    return took / 1e9, rss_kb / 1024, done.stdout, done.stderr


def _write_long_prompt(writer: TranscriptWriter, size: int, *, complete: bool) -> bytes:
    """Append a prompt line whose text is ``size`` bytes, written in 1 MB pieces (this process
    never holds it); without ``complete`` the line stops inside its text. Returns what completes
    it (the rest of the line, its newline included)."""
    writer.prompt("\x00")
    line = writer._pending.pop()  # the bench builds the line around the writer's envelope
    writer.flush()  # the snapshot line before the prompt
    head, tail = line.split(b"\\u0000", 1)
    piece = b"lorem ipsum dolor sit amet, consectetur adipiscing elit\\n" * 18_000
    with open(writer.path, "ab") as f:
        f.write(head)
        for _ in range(size // len(piece)):
            f.write(piece)
        f.write(b"x" * (size % len(piece)))
        if complete:
            f.write(tail)
    return tail


def _measure(
    rows: dict[str, tuple[list[float], list[float]]], name: str, secs: float, rss: float
) -> None:
    times, mems = rows.setdefault(name, ([], []))
    times.append(secs)
    mems.append(rss)


def run_long_lines(
    unterminated_mb: int = 200, complete_mb: int = 50, repeat: int = 5, seed: int = 0
) -> Report:
    started = time.perf_counter()
    report = Report(
        "bench_hooks --long-lines",
        {
            "unterminated": f"{unterminated_mb}MB",
            "complete": f"{complete_mb}MB",
            "repeat": repeat,
            "seed": seed,
        },
    )
    hook = [*continuity_command(), "hook"]
    rows: dict[str, tuple[list[float], list[float]]] = {}
    with work_dir("bench_hooks_long") as scratch:
        # An unterminated line: every hook meets it until it completes.
        s = _LongSession(scratch / "unterminated", seed)
        tail = _write_long_prompt(s.writer, unterminated_mb * _MB, complete=False)
        env = child_env(s.store)
        name = f"hook user-prompt-submit, unterminated {unterminated_mb} MB last line"
        for i in range(repeat + 1):
            secs, rss, out, err = run_measured([*hook, "user-prompt-submit"], env, s.payload())
            if i:
                _measure(rows, name, secs, rss)
        report.notes.append(f"unterminated line: stdout {out[:80]!r}, stderr {err[:200]!r}")
        with open(s.path, "ab") as f:
            f.write(tail)
        name = f"hook user-prompt-submit, that {unterminated_mb} MB line completed"
        cursors = s.store / "cache" / "claude-code" / "cursors"
        for i in range(repeat + 1):
            shutil.rmtree(cursors, ignore_errors=True)  # each round meets the line anew
            secs, rss, out, err = run_measured([*hook, "user-prompt-submit"], env, s.payload())
            if i:
                _measure(rows, name, secs, rss)
        report.notes.append(f"completed line: stdout {out[:80]!r}, stderr {err[:200]!r}")

        # A complete line: ingested, compiled, restored.
        name = f"hook user-prompt-submit, first ingest of a complete {complete_mb} MB line"
        s = _LongSession(scratch / "complete", seed + 1)
        _write_long_prompt(s.writer, complete_mb * _MB, complete=True)
        s.writer.response([{"type": "text", "text": "That is a long paste."}])
        s.writer.flush()
        env = child_env(s.store)
        for i in range(repeat + 1):
            shutil.rmtree(s.store, ignore_errors=True)
            secs, rss, out, err = run_measured([*hook, "user-prompt-submit"], env, s.payload())
            if i:
                _measure(rows, name, secs, rss)
        thread = f"cc-{SESSION_ID}"
        compile_argv = [*continuity_command(), "compile", thread, "--dry-run"]
        name = f"continuity compile --dry-run of the thread with the {complete_mb} MB message"
        for i in range(repeat + 1):
            secs, rss, out, err = run_measured(compile_argv, env)
            if i:
                _measure(rows, name, secs, rss)
        report.notes.append(
            f"compile: {len(out):,} bytes of bundle; stderr {err.decode().strip()[:300]!r}"
        )
        name = f"hook session-start (resume) with the {complete_mb} MB message"
        payload = s.payload(source="resume", event="SessionStart")
        for i in range(repeat + 1):
            secs, rss, out, err = run_measured([*hook, "session-start"], env, payload)
            if i:
                _measure(rows, name, secs, rss)
        report.notes.append(f"session-start: {len(out):,} bytes of stdout")
    for metric, (times, mems) in rows.items():
        report.rows.append(time_row(metric, times, unit="s"))
        report.rows.append(Row("  peak RSS of that process", median(mems), "MB", n=len(mems)))
    report.seconds = time.perf_counter() - started
    return report


class _LongSession:
    """A small session (three turns) in a scratch folder, and the hook payloads for it."""

    def __init__(self, folder: Path, seed: int) -> None:
        self.path = folder / "projects" / "p" / f"{SESSION_ID}.jsonl"
        self.store = folder / "store"
        self.writer = TranscriptWriter(
            self.path,
            session_id=SESSION_ID,
            cwd=_CWD,
            git_branch="main",
            rng=random.Random(seed),
        )
        for i in range(3):
            self.writer.prompt(f"Question {i}: where is the retry logic?")
            self.writer.response([{"type": "text", "text": f"In retry.py (answer {i})."}])
        self.writer.flush()

    def payload(self, event: str = "UserPromptSubmit", **fields: Any) -> bytes:
        return msgspec.json.encode(
            {
                "session_id": SESSION_ID,
                "transcript_path": str(self.path),
                "cwd": _CWD,
                "hook_event_name": event,
                "prompt": "go on",
                **fields,
            }
        )


# --- profile --------------------------------------------------------------------------------


def _importtime(argv: list[str], env: dict[str, str], stdin: bytes, runs: int = 3) -> list[str]:
    """The slowest imports of a process (best of ``runs``; nested ones indented)."""
    return slowest_imports(argv, env, stdin=stdin, runs=runs)


def _cprofile(event: str, env: dict[str, str], stdin: bytes, path: Path) -> list[str]:
    """cProfile of ``hooks.main`` (the lazy imports it makes included), top functions."""
    code = (
        "import cProfile\n"
        "from continuity.agents.claude_code.hooks import main\n"
        f"cProfile.run({f'main([{event!r}])'!r}, {str(path)!r})\n"
    )
    subprocess.run(
        [sys.executable, "-c", code], input=stdin, env=env, check=True, capture_output=True
    )
    buf = io.StringIO()
    stats = pstats.Stats(str(path), stream=buf)
    stats.sort_stats("cumulative").print_stats(20)
    stats.sort_stats("tottime").print_stats(8)
    keep = [line.rstrip() for line in buf.getvalue().splitlines()]
    return [line for line in keep if line.strip()[:1].isdigit() or "function calls" in line]


def _profile(hook: list[str], s: Session, mb: int) -> list[str]:
    """Where one hook process spends its time: user-prompt-submit after a new turn, and
    session-start after a compaction."""
    env = child_env(s.store)
    notes: list[str] = []
    argv = ["-m", "continuity", "hook", "user-prompt-submit"]
    s.add_turn()
    payload = s.payload("user-prompt-submit", prompt="profile")
    notes.append(f"profile at {mb} MB: user-prompt-submit, -X importtime")
    notes.extend(f"  {line}" for line in _importtime(argv, env, payload))
    s.add_turn()
    notes.append(f"profile at {mb} MB: user-prompt-submit, cProfile of hooks.main")
    notes.extend(
        f"  {line}" for line in _cprofile("user-prompt-submit", env, payload, s.store / "p1")
    )

    s.add_turn()
    run_process([*hook, "pre-compact"], env, s.payload("pre-compact", trigger="auto"))
    s.add_compaction()
    payload = s.payload("session-start", source="compact")
    argv = ["-m", "continuity", "hook", "session-start"]
    notes.append(f"profile at {mb} MB: session-start (compact), -X importtime")
    notes.extend(f"  {line}" for line in _importtime(argv, env, payload))
    notes.append(f"profile at {mb} MB: session-start (compact), cProfile of hooks.main")
    notes.extend(f"  {line}" for line in _cprofile("session-start", env, payload, s.store / "p2"))
    return notes


def main(argv: list[str] | None = None) -> None:
    parser = common_parser(__doc__.split("\n\n")[0], DEFAULT_SIZES, unit="MB (transcripts)")
    parser.add_argument("--repeat", type=int, default=11, help="timed hook runs per size")
    parser.add_argument("--first-repeat", type=int, default=9, help="timed first ingests")
    parser.add_argument("--profile", action="store_true", help="add importtime and cProfile")
    parser.add_argument(
        "--long-lines", action="store_true", help="run only the long-line cases (issue 10)"
    )
    parser.add_argument(
        "--ingest-only",
        action="store_true",
        help="run only the ingest-only hooks, before and after the fast path (issue 28)",
    )
    parser.add_argument("--unterminated-mb", type=int, default=200, help="with --long-lines")
    parser.add_argument("--complete-mb", type=int, default=50, help="with --long-lines")
    args = parser.parse_args(argv)
    if args.ingest_only:
        mb = min(args.sizes) if args.sizes else DEFAULT_SIZES[0]
        emit([run_ingest_only(mb, args.repeat, args.seed)], args.json)
        return
    if args.long_lines:
        report = run_long_lines(args.unterminated_mb, args.complete_mb, args.repeat, args.seed)
        emit([report], args.json)
        return
    emit([run(args.sizes, args.repeat, args.first_repeat, args.seed, args.profile)], args.json)


if __name__ == "__main__":
    main()
