"""What the rolling context manager costs (ADR 0056): the prompt hook's check, and a runtime's turn.

    python -m tools.bench.bench_rolling [--runs 21] [--turns 600] [--json]

Measures (medians, p90 beside them; the process rows interleaved, one round at a time):

* the check as a fresh process, against ``python -c pass`` (the floor): with nothing to do (a
  long Claude Code session at 55% of its window: settings, the log's tail, no segmentation;
  target floor + 10 ms) and on the reminder path (at 65%, pacing off: segments from the turns
  cache caught up, the queue logged as a record, the reminder's text; target floor + 40 ms);
* the whole ``user-prompt-submit`` hook process on that session with the manager on (nothing
  to do) and off (``CONTINUITY_ROLLING=0``): what the hook's common path pays;
* a runtime's turn in a 32k window (append a turn, then compile) with the policy
  (``ContextPolicy.prepare``: estimate, compaction jobs when due, compile of the whole raw
  stretch within 80% of the window) against today's loop (``compile_context`` with a budget of
  80% of the window), the two threads' turns interleaved; target <= 1.2x.

Self-contained: the session and the threads are written by the benchmark.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from continuity import frames as fr
from continuity.agents.claude_code.ingest import ingest_transcript
from continuity.context.compiler import compile_context
from continuity.rolling.policy import ContextPolicy
from continuity.rolling.settings import ENV, SETTINGS_FILE
from continuity.store.jsonl import Store
from tools.bench._common import Report, Row, common_parser, emit, median, time_row

ROOT = Path(__file__).resolve().parent.parent.parent
WINDOW = 32_000

_CHECK = """
import sys
from continuity.rolling.queue import prompt_reminder
from continuity.store.jsonl import Store
print(prompt_reminder(Store(sys.argv[1], durable=False).thread(sys.argv[2])))
"""


def _session(folder: Path, name: str, final_tokens: int) -> tuple[Path, Path, str]:
    """A 300-turn Claude Code session on 10 topics, ingested; (store, transcript, thread)."""
    sys.path.insert(0, str(ROOT))
    from tests.rolling.sessions import SESSION, topic
    from tests.support.transcripts import Transcript

    work = folder / name
    work.mkdir()
    t = Transcript(work / f"{SESSION}.jsonl", SESSION, "/work")
    for n in range(10):
        topic(t, n % 3, 30, tokens=final_tokens)
    t.flush()
    store = Store(work / "store", create=True, durable=False)
    ingest_transcript(store, t.path, final=True)
    return work / "store", t.path, t.thread_id


def _run(argv: list[str], env: dict[str, str], stdin: bytes = b"") -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, input=stdin, env=env, capture_output=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{argv[:3]} exited {done.returncode}: {done.stderr.decode()[-500:]}")
    return time.perf_counter() - start


def _payload(transcript: Path, tid: str) -> bytes:
    return json.dumps(
        {
            "session_id": tid.removeprefix("cc-"),
            "transcript_path": str(transcript),
            "cwd": "/work",
            "hook_event_name": "UserPromptSubmit",
            "prompt": "next",
        }
    ).encode()


def _in_process(store: Path, tid: str, runs: int) -> list[float]:
    """The check alone, in a process that has imported it (as the hook has)."""
    from continuity.rolling.queue import prompt_reminder

    out = []
    for _ in range(runs):
        thread = Store(store, durable=False).thread(tid)
        t0 = time.perf_counter()
        prompt_reminder(thread)
        out.append(time.perf_counter() - t0)
    return out


def processes(runs: int) -> Report:
    report = Report("rolling: the prompt hook's check", {"runs": runs})
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        quiet, quiet_path, tid = _session(folder, "quiet", 110_000)  # 55% of 200k
        hot, hot_path, _ = _session(folder, "hot", 130_000)  # 65%
        (hot / SETTINGS_FILE).write_text('{"every_turns": 0}')  # remind on every prompt
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        env.pop(ENV, None)
        py = sys.executable
        hook = [py, "-m", "continuity", "hook", "user-prompt-submit"]
        at_quiet = {**env, "CONTINUITY_HOME": str(quiet)}
        at_hot = {**env, "CONTINUITY_HOME": str(hot)}
        quiet_in, hot_in = _payload(quiet_path, tid), _payload(hot_path, tid)
        cases: dict[str, Callable[[], float]] = {
            "python -c pass (floor)": lambda: _run([py, "-c", "pass"], env),
            "the check alone as a process, nothing to do": lambda: _run(
                [py, "-c", _CHECK, str(quiet), tid], env
            ),
            "hook, 55% full: rolling off": lambda: _run(hook, {**at_quiet, ENV: "0"}, quiet_in),
            "hook, 55% full: rolling on (nothing to do)": lambda: _run(hook, at_quiet, quiet_in),
            "hook, 65% full: rolling off": lambda: _run(hook, {**at_hot, ENV: "0"}, hot_in),
            "hook, 65% full: rolling on (reminder path)": lambda: _run(hook, at_hot, hot_in),
        }
        for fn in cases.values():  # warm the caches and the OS's
            fn()
        times: dict[str, list[float]] = {k: [] for k in cases}
        for _ in range(runs):
            for name, fn in cases.items():
                times[name].append(fn())
        idle_in = _in_process(quiet, tid, runs)
        busy_in = _in_process(hot, tid, runs)
    floor = median(times["python -c pass (floor)"])
    for name, samples in times.items():
        row = time_row(name, samples)
        if name.startswith("the check"):
            row.baseline, row.ratio = "floor", median(samples) / floor
            row.target = (floor + 0.010) * 1e3
        report.rows.append(row)
    idle = median(times["hook, 55% full: rolling on (nothing to do)"]) - median(
        times["hook, 55% full: rolling off"]
    )
    busy = median(times["hook, 65% full: rolling on (reminder path)"]) - median(
        times["hook, 65% full: rolling off"]
    )
    report.rows.append(time_row("the check in the hook's process, nothing to do", idle_in))
    report.rows[-1].target = 10.0
    report.rows.append(time_row("the check in the hook's process, reminder path", busy_in))
    report.rows[-1].target = 40.0
    report.notes.append(
        f"what the hook pays with the manager on (on - off, medians of whole processes): "
        f"nothing to do {idle * 1e3:+.1f} ms (target 10), reminder path {busy * 1e3:+.1f} ms "
        f"(target 40); the check alone as a process is "
        f"{(median(times['the check alone as a process, nothing to do']) - floor) * 1e3:.0f} ms "
        "over the floor (imports: msgspec, the store)"
    )
    return report


def _turn(store: Store, tid: str, i: int) -> None:
    name = ("billing invoices", "search ranking", "upload retries", "login sessions")[(i // 40) % 4]
    use = fr.ToolUseBlock(
        id=f"t{i}", name="Edit", input={"file_path": f"src/{name[:4]}{i // 40}.py"}
    )
    store.thread(tid).append(
        [
            fr.message("user", f"Please continue the {name} work, part {i}."),
            fr.message("assistant", content=[use]),
            fr.message("user", content=[fr.ToolResultBlock(tool_use_id=f"t{i}", content="ok")]),
            fr.message("assistant", "Done: " + " ".join(["detail"] * (150 + i % 200))),
        ]
    )


def runtime(turns: int) -> Report:
    report = Report("rolling: a runtime's turn, 32k window", {"turns": turns, "window": WINDOW})
    budget = int(0.8 * WINDOW)
    loops: dict[str, Callable[[Store], int]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "store", create=True, durable=False)
        for tid in ("today", "wide", "policy"):
            store.thread(tid).append([fr.ThreadCreated(thread_id=tid)])
        policy = ContextPolicy(store.thread("policy"), window=WINDOW)
        default = fr.Limits(budget_tokens=budget)
        wide = fr.Limits(recent_messages=100_000, budget_tokens=budget)
        loops = {
            "today: append + compile (16 recent, budget 80%)": lambda s: (
                compile_context(s.thread("today"), limits=default).decision.tokens
            ),
            "today, the policy's window: append + compile (all recent, budget 80%)": (
                lambda s: compile_context(s.thread("wide"), limits=wide).decision.tokens
            ),
            "policy: append + prepare": lambda s: policy.prepare().result.decision.tokens,
        }
        tids = dict(zip(loops, ("today", "wide", "policy"), strict=True))
        times: dict[str, list[float]] = {k: [] for k in loops}
        biggest = 0
        for i in range(turns):
            for name, fn in loops.items():
                t0 = time.perf_counter()
                _turn(store, tids[name], i)
                tokens = fn(store)
                times[name].append(time.perf_counter() - t0)
                if name.startswith("policy"):
                    biggest = max(biggest, tokens)
    base = median(times["today: append + compile (16 recent, budget 80%)"])
    for name, samples in times.items():
        row = time_row(name, samples)
        if not name.startswith("today:"):
            row.baseline = "today"
            row.ratio = median(samples) / base
        if name.startswith("policy"):
            row.target = base * 1.2 * 1e3
        report.rows.append(row)
    largest = Row("largest request", float(biggest), "tokens", target=0.8 * WINDOW)
    report.rows.append(largest)
    wide_ratio = median(times["policy: append + prepare"]) / median(
        times["today, the policy's window: append + compile (all recent, budget 80%)"]
    )
    report.notes.append(
        f"policy per turn: {median(times['policy: append + prepare']) / base:.2f}x today's loop "
        f"(target 1.2x), {wide_ratio:.2f}x a compile of the same raw window; largest request "
        f"{biggest:,} tokens of {WINDOW:,}"
    )
    return report


def main() -> None:
    parser = common_parser(__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--turns", type=int, default=600)
    parser.add_argument("--part", choices=("all", "hook", "runtime"), default="all")
    args = parser.parse_args()
    reports = []
    if args.part in ("all", "hook"):
        reports.append(processes(args.runs))
    if args.part in ("all", "runtime"):
        reports.append(runtime(args.turns))
    emit(reports, args.json)


if __name__ == "__main__":
    main()
