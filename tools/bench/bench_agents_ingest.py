"""Other agents' sessions into the archive: the Codex hook on large rollouts, and bulk ingest of
a home folder of mixed agents (issue 29).

    python -m tools.bench.bench_agents_ingest [--sizes 3,100] [--repeat 11] [--sessions 1000]
                                              [--quick] [--json]

Hooks: Codex rollouts of ``--sizes`` MB are built by repeating the lines of the Codex fixture
rollouts (``../shared/fixtures/agents/codex/``, one ``session_meta`` first) with fresh call and
item ids and increasing timestamps on every repetition, cached under the bench folder, copied
into a scratch folder and first ingested in full (untimed). Then ``--repeat`` rounds, sizes and
the floor interleaved: one new turn is appended (a prompt, an ``exec_command`` call, its output
and an answer) and ``continuity hook post-tool-use --agent codex`` is timed as a fresh process,
beside ``python -c pass`` (the interpreter's floor). Targets: the largest size within 1.1x of
the smallest, and each at most the floor + 25 ms.

Bulk: a home folder with ``--sessions`` sessions, half Claude Code transcripts (the fixtures of
``../shared/fixtures/claude-code/``) and half Codex rollouts, each a copy with fresh ids, laid
out as the agents do (``~/.claude/projects/<project>/<session>.jsonl``,
``~/.codex/sessions/YYYY/MM/DD/rollout-…-<session>.jsonl``), is ingested into an empty store,
in-process: first the Claude Code transcripts alone, then the whole home (every agent in
:data:`AGENTS`). Target: the mixed rate (MB/s of session files) at least the Claude Code one.
``--quick``: sizes 3,12, 5 rounds, 100 sessions.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from continuity.agents.claude_code.ingest import ingest_transcript
from continuity.agents.codex import rollouts
from continuity.agents.codex.ingest import ingest_rollout
from continuity.store.base import BaseStore
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
    time_row,
    work_dir,
)

__all__ = ["AGENTS", "cached_rollout", "main", "run_bulk", "run_hooks"]

SHARED: Final = Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures"
CODEX_FIXTURES: Final = SHARED / "agents" / "codex"
CLAUDE_FIXTURES: Final = SHARED / "claude-code"
TEMPLATE_VERSION: Final = 1
SESSION_ID: Final = "019c0000-0000-7000-8000-00000000b3c4"
DEFAULT_SIZES: Final = (3, 100)
FLAT_TARGET: Final = 1.1
OVER_FLOOR_MS: Final = 25.0
FLOOR: Final = "python -c pass"
_MB: Final = 1_000_000
_UUID: Final = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_CALL: Final = re.compile(rb'"((?:call|fc|msg|rs|ws|ctc|fco|resp)_[A-Za-z0-9_-]{6,})"')
_STAMP: Final = re.compile(rb'^\{"timestamp":"[^"]*"')
_BASE_MS: Final = 1_795_000_000_000


# --- Codex rollouts -------------------------------------------------------------------------


def _fixture_rollouts() -> list[Path]:
    found = sorted(rollouts([CODEX_FIXTURES]))
    if not found:
        raise SystemExit(f"bench_agents_ingest: no Codex fixture rollouts in {CODEX_FIXTURES}")
    return found


def _stamp(ms: int) -> bytes:
    t = time.gmtime(ms // 1000)
    return f'{{"timestamp":"{time.strftime("%Y-%m-%dT%H:%M:%S", t)}.{ms % 1000:03d}Z"'.encode()


def _rollout_body() -> tuple[bytes, list[bytes]]:
    """The first fixture's session_meta line (with our session id) and every other line of all
    fixture rollouts (their session_meta lines left out)."""
    meta = b""
    body: list[bytes] = []
    for path in _fixture_rollouts():
        for line in path.read_bytes().splitlines():
            if b'"type":"session_meta"' in line[:120]:
                if not meta:
                    meta = _UUID.sub(SESSION_ID.encode(), line, count=2)
                continue
            if line.strip():
                body.append(line)
    return meta, body


def _cycle(body: list[bytes], cycle: int, clock: Iterator[int]) -> bytes:
    """One repetition of ``body``: fresh ids (their tail is the cycle) and timestamps."""
    tag = f"{cycle:06x}".encode()
    out = []
    for line in body:
        line = _CALL.sub(lambda m: b'"' + m.group(1)[:-6] + tag + b'"', line)
        out.append(_STAMP.sub(_stamp(next(clock)), line, count=1) + b"\n")
    return b"".join(out)


def cached_rollout(megabytes: int) -> Path:
    """A rollout of about ``megabytes`` MB (cut at a line end), built once and cached."""
    name = f"rollout-2026-11-27T00-00-00-{SESSION_ID}.jsonl"
    path = bench_dir() / f"codex-rollout-t{TEMPLATE_VERSION}-{megabytes}mb" / name
    marker = path.with_suffix(".size")
    if (
        path.is_file()
        and marker.is_file()
        and marker.read_text().strip() == str(path.stat().st_size)
    ):
        return path
    log(f"bench_agents_ingest: building a {megabytes} MB rollout in {path} (cached)")
    meta, body = _rollout_body()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    clock = itertools.count(_BASE_MS, 7)
    target = megabytes * _MB
    with open(tmp, "wb") as f:
        f.write(meta + b"\n")
        written = len(meta) + 1
        for cycle in itertools.count():
            chunk = _cycle(body, cycle, clock)
            if written + len(chunk) > target:
                cut = chunk.find(b"\n", target - written)
                chunk = chunk[: cut + 1] if cut >= 0 else chunk
            f.write(chunk)
            written += len(chunk)
            if written >= target:
                break
    os.replace(tmp, path)
    marker.write_text(f"{written}\n")
    return path


@dataclass
class _Rollout:
    """A scratch copy of a cached rollout that rounds append turns to."""

    path: Path
    store: Path
    turns: int = 0

    def add_turn(self) -> bytes:
        """Append one turn (prompt, exec_command call and output, answer); the hook's input."""
        self.turns += 1
        n = self.turns
        ms = _BASE_MS + 10_000_000_000 + n * 1000
        call = f"call_bench{n:08d}"
        items: list[tuple[str, dict[str, Any]]] = [
            ("response_item", {"type": "message", "role": "user",
                               "content": [{"type": "input_text", "text": f"run step {n}"}]}),
            ("response_item", {"type": "function_call", "name": "exec_command",
                               "arguments": json.dumps({"cmd": f"echo step {n}"}),
                               "call_id": call}),
            ("response_item", {"type": "function_call_output", "call_id": call,
                               "output": f"Process exited with code 0\nOutput:\nstep {n}\n"}),
            ("response_item", {"type": "message", "role": "assistant",
                               "content": [{"type": "output_text", "text": f"Step {n} ran."}]}),
        ]  # fmt: skip
        with open(self.path, "ab") as f:
            for i, (kind, payload) in enumerate(items):
                line = {"type": kind, "payload": payload}
                f.write(_stamp(ms + i) + b"," + json.dumps(line).encode()[1:] + b"\n")
        payload_in = {
            "session_id": SESSION_ID,
            "turn_id": f"turn-{n}",
            "transcript_path": str(self.path),
            "cwd": "/home/dev/proj",
            "hook_event_name": "PostToolUse",
            "model": "gpt-5.1-codex",
            "tool_name": "Bash",
            "tool_input": {"command": f"echo step {n}"},
            "tool_response": f"step {n}\n",
            "tool_use_id": call,
        }
        return json.dumps(payload_in).encode()


def _env(store: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode cached, as users have it
    env.pop("CONTINUITY_DEBUG", None)
    if store is not None:
        env["CONTINUITY_HOME"] = str(store)
    return env


def _run(argv: Sequence[str], env: dict[str, str], stdin: bytes = b"") -> float:
    start = time.perf_counter_ns()
    done = subprocess.run(argv, input=stdin, capture_output=True, env=env, check=False)
    seconds = (time.perf_counter_ns() - start) / 1e9
    if done.returncode != 0 or done.stderr:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr!r}")
    return seconds


def run_hooks(sizes: Sequence[int] = DEFAULT_SIZES, repeat: int = 11) -> Report:
    started = time.perf_counter()
    report = Report(
        "bench_agents_ingest (Codex hook)",
        {"sizes": ",".join(f"{s}MB" for s in sizes), "repeat": repeat},
    )
    hook = [*continuity_command(), "hook", "post-tool-use", "--agent", "codex"]
    floor = [sys.executable, "-c", "pass"]
    with work_dir("bench_agents_ingest") as scratch:
        copies: dict[int, _Rollout] = {}
        for mb in sizes:
            folder = scratch / f"r{mb}"
            folder.mkdir()
            source = cached_rollout(mb)
            copy = _Rollout(folder / source.name, folder / "store")
            shutil.copyfile(source, copy.path)
            t0 = time.perf_counter()
            r = ingest_rollout(Store(copy.store, create=True), copy.path, final=False)
            report.notes.append(
                f"{mb} MB rollout: {copy.path.stat().st_size:,} bytes, {r.messages:,} messages, "
                f"{r.checkpoints} compactions; first full ingest in-process "
                f"{(time.perf_counter() - t0) * 1e3:,.0f} ms (untimed here)"
            )
            copies[mb] = copy
            _run(hook, _env(copy.store), copy.add_turn())  # warm: bytecode, page cache
        _run(floor, _env(None))
        samples: dict[int, list[float]] = {mb: [] for mb in sizes}
        floor_s: list[float] = []
        log(f"bench_agents_ingest: {repeat} rounds of the Codex hook at {sizes} MB")
        for _ in range(repeat):
            floor_s.append(_run(floor, _env(None)))
            for mb in sizes:
                payload = copies[mb].add_turn()
                samples[mb].append(_run(hook, _env(copies[mb].store), payload))
        base = median(floor_s)
        report.rows.append(time_row(FLOOR, floor_s))
        small = min(sizes)
        for mb in sizes:
            row = time_row(f"hook post-tool-use --agent codex, {mb} MB, one new turn", samples[mb])
            if mb != small:
                row.baseline = f"{small} MB"
                row.ratio = median(samples[mb]) / median(samples[small])
                report.rows.append(row)
                ratio = Row(f"  {mb} MB over {small} MB", row.ratio, "x", target=FLAT_TARGET)
                report.rows.append(ratio)
            else:
                report.rows.append(row)
            over = (median(samples[mb]) - base) * 1e3
            report.rows.append(Row("  floor + X", over, "ms", target=OVER_FLOOR_MS))
    report.notes.append("fresh processes, bytecode cached, warm page cache; medians")
    report.seconds = time.perf_counter() - started
    return report


# --- bulk ingest of a home folder -----------------------------------------------------------


@dataclass(frozen=True)
class Agent:
    """One agent's sessions in a home folder: how to lay out a copy, find them, ingest one."""

    name: str
    fixtures: Callable[[], list[Path]]
    place: Callable[[Path, bytes, str, int], Path]
    """(home, content with fresh ids, the new session id, index) -> where the copy goes."""
    find: Callable[[Path], list[Path]]
    ingest: Callable[[BaseStore, Path], object]


def _claude_fixtures() -> list[Path]:
    return sorted(p for p in CLAUDE_FIXTURES.rglob("*.jsonl") if p.stat().st_size > 2_000)


def _claude_place(home: Path, data: bytes, session: str, i: int) -> Path:
    return home / ".claude" / "projects" / f"-home-dev-proj{i % 7}" / f"{session}.jsonl"


def _codex_place(home: Path, data: bytes, session: str, i: int) -> Path:
    day = home / ".codex" / "sessions" / "2026" / "11" / f"{1 + i % 27:02d}"
    return day / f"rollout-2026-11-{1 + i % 27:02d}T10-00-{i % 60:02d}-{session}.jsonl"


AGENTS: Final = (
    Agent(
        "claude-code",
        _claude_fixtures,
        _claude_place,
        lambda home: sorted((home / ".claude" / "projects").rglob("*.jsonl")),
        lambda store, p: ingest_transcript(store, p, final=True),
    ),
    Agent(
        "codex",
        _fixture_rollouts,
        _codex_place,
        lambda home: list(rollouts([home / ".codex" / "sessions"])),
        lambda store, p: ingest_rollout(store, p, final=True),
    ),
)
"""The agents whose sessions the bulk benchmark lays out and ingests (Gemini CLI and opencode
join here with their adapters)."""


def _fresh_ids(data: bytes) -> tuple[bytes, str]:
    """``data`` with every UUID replaced by a fresh one (the same one each time it recurs);
    the first one's replacement is the session id."""
    seen: dict[bytes, bytes] = {}

    def fresh(m: re.Match[bytes]) -> bytes:
        return seen.setdefault(m.group(0), str(uuid.uuid4()).encode())

    out = _UUID.sub(fresh, data)
    first = next(iter(seen.values()), str(uuid.uuid4()).encode())
    return out, first.decode()


def build_home(home: Path, sessions: int) -> dict[str, int]:
    """Lay out ``sessions`` sessions, split evenly over :data:`AGENTS`; bytes by agent."""
    sizes: dict[str, int] = {}
    per = sessions // len(AGENTS)
    for agent in AGENTS:
        fixtures = agent.fixtures()
        for i in range(per):
            data, session = _fresh_ids(fixtures[i % len(fixtures)].read_bytes())
            target = agent.place(home, data, session, i)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            sizes[agent.name] = sizes.get(agent.name, 0) + len(data)
    return sizes


def _ingest(store: BaseStore, agents: Sequence[Agent], home: Path) -> float:
    start = time.perf_counter()
    for agent in agents:
        for path in agent.find(home):
            agent.ingest(store, path)
    return time.perf_counter() - start


def run_bulk(sessions: int = 1000, repeat: int = 3) -> Report:
    started = time.perf_counter()
    report = Report("bench_agents_ingest (bulk)", {"sessions": sessions, "repeat": repeat})
    with work_dir("bench_agents_bulk") as scratch:
        home = scratch / "home"
        sizes = build_home(home, sessions)
        total = sum(sizes.values())
        claude = [a for a in AGENTS if a.name == "claude-code"]
        alone: list[float] = []
        mixed: list[float] = []
        for n in range(repeat):
            alone.append(_ingest(Store(scratch / f"a{n}", create=True), claude, home))
            mixed.append(_ingest(Store(scratch / f"m{n}", create=True), AGENTS, home))
            log(f"bench_agents_ingest: bulk round {n + 1}: {alone[-1]:.1f} s, {mixed[-1]:.1f} s")
        cc_rate = sizes["claude-code"] / _MB / median(alone)
        mixed_rate = total / _MB / median(mixed)
        report.rows.append(Row("Claude Code transcripts alone", cc_rate, "MB/s", better="higher"))
        row = Row("every agent's sessions", mixed_rate, "MB/s", better="higher", target=cc_rate)
        row.baseline, row.ratio = "Claude Code alone", mixed_rate / cc_rate
        report.rows.append(row)
        for agent in AGENTS:
            files = agent.find(home)
            report.notes.append(
                f"{agent.name}: {len(files)} sessions, {sizes.get(agent.name, 0) / _MB:.1f} MB"
            )
    report.notes.append("in-process, each round into an empty store; medians of the rounds")
    report.seconds = time.perf_counter() - started
    return report


def main(argv: list[str] | None = None) -> None:
    parser = common_parser(__doc__.split("\n\n")[0], DEFAULT_SIZES, unit="MB (rollouts)")
    parser.add_argument("--repeat", type=int, default=11, help="timed hook runs per size")
    parser.add_argument("--sessions", type=int, default=1000, help="sessions in the home folder")
    parser.add_argument("--bulk-repeat", type=int, default=3, help="bulk ingest rounds")
    parser.add_argument("--quick", action="store_true", help="3,12 MB, 5 rounds, 100 sessions")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.repeat, args.sessions, args.bulk_repeat = (3, 12), 5, 100, 1
    emit([run_hooks(args.sizes, args.repeat), run_bulk(args.sessions, args.bulk_repeat)], args.json)


if __name__ == "__main__":
    main()
