"""Every Claude Code hook on a PostgreSQL store through its relay, against the same hook on a
folder store (issue 42 item 3; ADR 0062), and in its own process for reference.

    python -m tools.bench.bench_hooks_relay [--repeat 7] [--json]

Each round starts one new session on each store (the stores alternate which goes first) and runs
a session's hooks on it as fresh processes: ``session-start`` (startup: the previous session's
pointer), ``user-prompt-submit``, ``post-tool-use`` and ``stop`` (each after a new turn, so each
archives), ``user-prompt-submit`` with ``recall_on_prompt``, ``pre-compact``, ``session-start``
after the compaction (the restore) and ``session-end``. Measured per hook: the hook process's
wall time and CPU (user + system, from its rusage), and for the relay also the relay's CPU spent
on the request (``/proc/<pid>/stat`` before and after, in clock ticks: its mean over the rounds
is added to the hook's CPU), so nothing it does is left uncounted.
The relay is started before the rounds (its start, once per store and idle period, is reported
on its own). Target: every hook through the relay within 1.5x the folder store's median, in CPU
and in wall time.

The server is a throwaway ``pgserver`` (a Unix socket, sharing this machine's cores) or
``$CONTINUITY_BENCH_PG_URL`` (the bench makes schemas ``bench_relay_*`` there and drops them).
"""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Final

from continuity.agents.base import relay
from continuity.paths import local_dir_of
from tools.bench._common import (
    Report,
    common_parser,
    continuity_command,
    emit,
    log,
    median,
    pg_server,
    time_row,
    work_dir,
)
from tools.bench.bench_hooks_pg import GrowingSession

_CWD: Final = "/work/bench-relay"
TARGET: Final = 1.5
VARIANTS: Final = ("folder", "relay", "inproc")
CASES: Final = {
    "start": "session-start (startup: the pointer)",
    "prompt": "user-prompt-submit",
    "tool": "post-tool-use",
    "stop": "stop",
    "recall": "user-prompt-submit, recall_on_prompt",
    "precompact": "pre-compact",
    "restore": "session-start (compact: the restore)",
    "end": "session-end",
}
_TICKS: Final = os.sysconf("SC_CLK_TCK")
_ACTIVE: Final = re.compile(r"last active [0-9-]+ [0-9:]+")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _process_cpu(pid: int | None) -> float:
    """User + system seconds of process ``pid`` so far (0 when there is none)."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS


class _Stores:
    def __init__(self, work: Path, url: str) -> None:
        sep = "&" if "?" in url else "?"
        self.location = {
            "folder": str(work / "store"),
            "relay": f"{url}{sep}schema=bench_relay_on",
            "inproc": f"{url}{sep}schema=bench_relay_off",
        }
        base = {k: v for k, v in os.environ.items() if not k.startswith("CONTINUITY_")}
        base["XDG_DATA_HOME"] = str(work / "xdg")
        base["CONTINUITY_HOOK_DEADLINE"] = "600"  # measured, not cut short
        self.env = {
            "folder": base,
            "relay": {**base, relay.OFF_ENV: "1"},
            "inproc": {**base, relay.OFF_ENV: "0"},
        }
        self.local = {
            name: local_dir_of(loc, {"XDG_DATA_HOME": base["XDG_DATA_HOME"]})
            for name, loc in self.location.items()
        }
        self.work = work

    def relay_pid(self) -> int | None:
        try:
            return int((self.local["relay"] / relay.PID_NAME).read_text())
        except (OSError, ValueError):
            return None

    def hook(self, name: str, event: str, payload: str) -> tuple[float, float, float, str]:
        """(wall, hook CPU, relay CPU, stdout) of one hook as a fresh process."""
        argv = [*continuity_command(), "--store", self.location[name], "hook", event]
        pid = self.relay_pid() if name == "relay" else None
        relay_before = _process_cpu(pid)
        cpu = _children_cpu()
        start = time.perf_counter()
        proc = subprocess.run(
            argv, input=payload, capture_output=True, text=True, env=self.env[name], check=False
        )
        wall = time.perf_counter() - start
        hook_cpu = _children_cpu() - cpu
        relay_cpu = _process_cpu(pid) - relay_before if pid is not None else 0.0
        if proc.returncode != 0 or proc.stderr:
            raise RuntimeError(f"{name} {event} exited {proc.returncode}: {proc.stderr}")
        return wall, hook_cpu, relay_cpu, proc.stdout

    def config(self, name: str, *, recall: bool) -> None:
        path = self.local[name] / "claude-code.json"
        if recall:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text('{"recall_on_prompt": true}\n')
        else:
            path.unlink(missing_ok=True)


def _round(
    i: int, stores: _Stores, samples: dict[tuple[str, str], list[tuple[float, float, float]]]
) -> None:
    order = list(VARIANTS[i % 3 :] + VARIANTS[: i % 3])
    outputs: dict[str, list[str]] = {}
    for name in order:
        folder = stores.work / "sessions" / name
        folder.mkdir(parents=True, exist_ok=True)
        session = GrowingSession(
            folder, f"b5e1c0de-0000-4000-8000-{i:012d}", seed=i, cwd=_CWD, prompt=None
        )
        outs = []
        for case in CASES:
            if case in ("prompt", "tool", "stop", "recall"):
                session.turn()
            if case == "precompact":
                session.turn()
                session.writer.compaction(f"Round {i}: the tests of round 2 failed.")
                session.writer.flush()
            event, payload = {
                "start": ("session-start", session.payload("SessionStart", source="startup")),
                "prompt": (
                    "user-prompt-submit",
                    session.payload("UserPromptSubmit", prompt="why did round 2 fail"),
                ),
                "tool": ("post-tool-use", session.payload("PostToolUse", tool_name="Bash")),
                "stop": ("stop", session.payload("Stop")),
                "recall": (
                    "user-prompt-submit",
                    session.payload("UserPromptSubmit", prompt="what failed in round 2"),
                ),
                "precompact": ("pre-compact", session.payload("PreCompact", trigger="auto")),
                "restore": ("session-start", session.payload("SessionStart", source="compact")),
                "end": ("session-end", session.payload("SessionEnd")),
            }[case]
            stores.config(name, recall=case == "recall")
            try:
                wall, cpu, relay_cpu, out = stores.hook(name, event, payload)
            finally:
                stores.config(name, recall=False)
            samples.setdefault((case, name), []).append((wall, cpu, relay_cpu))
            outs.append(out)
        outputs[name] = outs
    # the pointer names the previous session's last minute of activity: the clock's, not ours
    relayed, inproc = (
        [_ACTIVE.sub("last active …", out) for out in outputs[name]] for name in ("relay", "inproc")
    )
    if relayed != inproc:
        raise RuntimeError(f"the relay answered {relayed}, the in-process hook {inproc}")


def run(repeat: int) -> Report:
    began = time.monotonic()
    report = Report(
        "Claude Code hooks: PostgreSQL through the relay vs the folder store",
        {"repeat": repeat, "target": TARGET},
    )
    with work_dir("hooks-relay") as work, pg_server() as url:
        stores = _Stores(work, url)
        floors: list[float] = []
        try:
            samples: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
            _round(10_000, stores, {})  # warm-up, untimed: the relay starts here
            start_pid = stores.relay_pid()
            log(f"relay {start_pid} up")
            for i in range(repeat):
                log(f"round {i + 1}/{repeat}")
                cpu = _children_cpu()
                subprocess.run([sys.executable, "-c", "pass"], check=True)
                floors.append(_children_cpu() - cpu)
                _round(i, stores, samples)
            if stores.relay_pid() != start_pid:
                report.notes.append("the relay was restarted during the rounds")
        finally:
            pid = stores.relay_pid()
            if pid is not None:
                os.kill(pid, 15)
                relay.wait_gone(pid, 10)
        report.rows.append(time_row("python -c pass, CPU (the interpreter's floor)", floors))
        missed = []
        for case, label in CASES.items():
            folder = samples[case, "folder"]
            via = samples[case, "relay"]
            inproc = samples[case, "inproc"]
            f_wall, f_cpu = median([s[0] for s in folder]), median([s[1] for s in folder])
            relay_mean = sum(s[2] for s in via) / len(via)
            report.rows.append(time_row(f"{label}: folder, wall", [s[0] for s in folder]))
            report.rows.append(time_row(f"{label}: folder, CPU", [s[1] for s in folder]))
            for metric, values, base in (
                ("relay, wall", [s[0] for s in via], f_wall),
                ("relay, hook CPU", [s[1] for s in via], f_cpu),
                # the relay's CPU is counted in clock ticks (10 ms): its mean is added
                ("relay, hook + relay CPU", [s[1] + relay_mean for s in via], f_cpu),
                ("in-process, wall", [s[0] for s in inproc], f_wall),
                ("in-process, CPU", [s[1] for s in inproc], f_cpu),
            ):
                row = time_row(f"{label}: {metric}", values, baseline="folder")
                row.ratio = median(values) / base if base else None
                if metric.startswith("relay"):
                    row.target = TARGET * base * 1e3
                    if not row.ok:
                        missed.append(f"{label} ({metric}: {row.ratio:.2f}x)")
                report.rows.append(row)
        report.notes.append(
            f"fresh processes, {os.cpu_count()} cores shared with the server and other work "
            f"(load average {os.getloadavg()[0]:.1f} at the end); the relay started once, before "
            "the rounds; a new session a round on each store"
        )
        report.notes.append(
            "missed: " + "; ".join(missed) if missed else "every hook within the target"
        )
    report.seconds = time.monotonic() - began
    return report


def main() -> None:
    parser = common_parser(__doc__ or "")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    emit([run(args.repeat)], args.json)


if __name__ == "__main__":
    main()
