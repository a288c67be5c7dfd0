"""Start-up of the command line: how long a fresh ``continuity`` process takes before its work.

    python -m tools.bench.bench_startup [--repeat 11] [--commands init,search] [--profile]
                                        [--baseline-tree DIR] [--json]

``--repeat`` rounds (plus one untimed warm-up round), every case once a round as a fresh
process, the order of the cases rotated each round, each timed for wall and for CPU (the
child's user + sys time, ``os.wait4``):

* ``python -c pass``: the floor, the same interpreter starting and doing nothing;
* ``python -c "import continuity"``: the library's import, for scale;
* ``continuity --version`` and ``continuity --help`` (target: the floor + 60 ms);
* ``continuity <command> --help`` for every command of ``continuity/cli/app.py``'s ``COMMANDS``
  and ``GROUPS`` (target: the floor + 80 ms). A command's ``--help`` does its start-up (the
  console script, the app, the command's module and options, rich's help rendering) and none of
  its own work: the store is never opened, so it is the start-up a command pays before its work
  (a little more: the help rendering, which a run does not do);
* ``continuity threads`` on an empty store: a real run with next to no work of its own.

``--baseline-tree DIR`` (a checkout of another revision, e.g. ``git archive REV continuity |
tar -x -C DIR``) adds every ``continuity`` case run from that tree (``python -c`` of its
``continuity.__main__`` with ``PYTHONPATH=DIR``) in the same rounds, and a row of this tree's
median over the baseline's.

Each case gets three rows: its wall time (median, p90, ratio to the floor's median), the wall
time over the floor (``floor + X``, against the target) and the CPU time over the floor's CPU.
The children run in a temporary folder that is also their ``CONTINUITY_HOME`` (a new, empty
store), with ``COLUMNS=100`` and bytecode caching on (as users have it); stdout goes to a file
(not a terminal).
``--profile`` adds the slowest imports (``python -X importtime``, best of 3) of
``continuity --version``, ``continuity --help`` and the slowest command's ``--help``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from continuity.cli.app import COMMANDS, GROUPS
from tools.bench._common import (
    Report,
    Row,
    common_parser,
    continuity_command,
    emit,
    log,
    median,
    slowest_imports,
    time_row,
)

__all__ = ["main", "run"]

FLOOR: Final = "python -c pass"
IMPORT: Final = 'python -c "import continuity"'
VERSION_HELP_OVER_FLOOR_MS: Final = 60.0
"""``continuity --version`` and ``continuity --help``: at most the floor + 60 ms (issue 32)."""
COMMAND_OVER_FLOOR_MS: Final = 80.0
"""Every command's start-up before its own work: at most the floor + 80 ms (issue 32)."""


BASELINE: Final = " [baseline tree]"
_ENTRY: Final = (
    "import sys; sys.argv[0] = 'continuity'; from continuity.__main__ import main; main()"
)
"""The console script's entry, as ``python -c`` (``-X importtime`` needs the interpreter)."""


def cases(
    commands: Sequence[str] | None = None, baseline: Path | None = None
) -> dict[str, tuple[list[str], dict[str, str]]]:
    """Each case's name, command line and extra environment, the floor first."""
    runs = {
        "continuity --version": ["--version"],
        "continuity --help": ["--help"],
        "continuity threads (empty store)": ["threads"],
    }
    for name in commands if commands is not None else [*COMMANDS, *GROUPS]:
        runs[f"continuity {name} --help"] = [name, "--help"]
    out: dict[str, tuple[list[str], dict[str, str]]] = {
        FLOOR: ([sys.executable, "-c", "pass"], {}),
        IMPORT: ([sys.executable, "-c", "import continuity"], {}),
    }
    cli = continuity_command()
    for name, args in runs.items():
        out[name] = ([*cli, *args], {})
        if baseline is not None:
            there = {"PYTHONPATH": str(baseline)}
            out[name + BASELINE] = ([sys.executable, "-c", _ENTRY, *args], there)
    return out


def target_of(case: str) -> float | None:
    if case.endswith(BASELINE):
        return None
    if case in ("continuity --version", "continuity --help"):
        return VERSION_HELP_OVER_FLOOR_MS
    if case.startswith("continuity "):
        return COMMAND_OVER_FLOOR_MS
    return None


def child_env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # measure with bytecode caching, as users have it
    env.pop("CONTINUITY_DEBUG", None)
    env.update(CONTINUITY_HOME=str(home), COLUMNS="100")
    return env


def run_cpu(argv: Sequence[str], env: dict[str, str], cwd: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds: the child's user + sys) of a fresh process that must exit 0.
    The child is reaped here with ``os.wait4`` so that its own rusage is read."""
    with tempfile.TemporaryFile() as fout, tempfile.TemporaryFile() as ferr:
        start = time.perf_counter_ns()
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=fout, stderr=ferr, env=env, cwd=cwd
        )
        _pid, status, usage = os.wait4(proc.pid, 0)
        wall = (time.perf_counter_ns() - start) / 1e9
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        ferr.seek(0)
        err = ferr.read()
    if code != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {code}: {err.decode(errors='replace')}")
    return wall, usage.ru_utime + usage.ru_stime


def run(
    repeat: int = 11,
    commands: Sequence[str] | None = None,
    profile: bool = False,
    baseline: Path | None = None,
) -> Report:
    started = time.perf_counter()
    report = Report("bench_startup", {"repeat": repeat, "baseline tree": baseline or "-"})
    todo = cases(commands, baseline)
    names = list(todo)
    wall: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    log(f"bench_startup: {len(names)} cases, {repeat} rounds (+1 warm-up)")
    with tempfile.TemporaryDirectory(prefix="continuity-bench-startup-") as home:
        env = child_env(Path(home))
        run_cpu([*continuity_command(), "init"], env, home)
        for i in range(repeat + 1):
            shift = i % len(names)
            for name in names[shift:] + names[:shift]:
                argv, extra = todo[name]
                w, c = run_cpu(argv, {**env, **extra}, home)
                if i:  # the first round warms up (bytecode, page cache)
                    wall[name].append(w)
                    cpu[name].append(c)
        _rows(report, wall, cpu)
        if profile:
            mine = [n for n in names[2:] if not n.endswith(BASELINE)]
            slowest = max(mine[3:] or mine, key=lambda n: median(wall[n]))
            for name in dict.fromkeys(["continuity --version", "continuity --help", slowest]):
                argv, _extra = todo[name]
                report.notes.append(f"profile of {name}: -X importtime")
                report.notes.extend(f"  {line}" for line in importtime(argv, env, home))
    report.notes.append(
        "`<command> --help` is a command's start-up without its work (the store is never "
        "opened); CPU is the child's user + sys time (os.wait4)"
    )
    report.seconds = time.perf_counter() - started
    return report


def _rows(report: Report, wall: dict[str, list[float]], cpu: dict[str, list[float]]) -> None:
    floor_wall, floor_cpu = median(wall[FLOOR]), median(cpu[FLOOR])
    report.rows.append(time_row(f"{FLOOR} (wall)", wall[FLOOR]))
    report.rows.append(time_row(f"{FLOOR} (CPU)", cpu[FLOOR]))
    for name in list(wall)[1:]:
        row = time_row(name, wall[name])
        row.baseline, row.ratio = FLOOR, median(wall[name]) / floor_wall
        report.rows.append(row)
        over = (median(wall[name]) - floor_wall) * 1e3
        report.rows.append(Row("  floor + X (wall)", over, "ms", target=target_of(name)))
        over_cpu = (median(cpu[name]) - floor_cpu) * 1e3
        report.rows.append(Row("  floor + X (CPU)", over_cpu, "ms"))
        if name + BASELINE in wall:
            ratio = median(wall[name]) / median(wall[name + BASELINE])
            report.rows.append(Row("  this tree / baseline tree (wall)", ratio, "x"))
            ratio = median(cpu[name]) / median(cpu[name + BASELINE])
            report.rows.append(Row("  this tree / baseline tree (CPU)", ratio, "x"))


def importtime(argv: Sequence[str], env: dict[str, str], cwd: str, runs: int = 3) -> list[str]:
    """The slowest imports of a process (best of ``runs``; nested ones indented)."""
    command = ["-c", _ENTRY, *argv[len(continuity_command()) :]]
    return slowest_imports(command, env, cwd=cwd, runs=runs)


def main(argv: list[str] | None = None) -> None:
    parser = common_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=11, help="timed rounds (default 11)")
    parser.add_argument(
        "--commands",
        type=lambda s: [c for c in s.split(",") if c],
        default=None,
        help="comma-separated commands to time (default: every command)",
    )
    parser.add_argument("--profile", action="store_true", help="add -X importtime of the slowest")
    parser.add_argument(
        "--baseline-tree",
        type=Path,
        default=None,
        help="a source tree of another revision to time in the same rounds",
    )
    args = parser.parse_args(argv)
    emit([run(args.repeat, args.commands, args.profile, args.baseline_tree)], args.json)


if __name__ == "__main__":
    main()
