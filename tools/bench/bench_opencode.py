"""Incremental ingest of a large opencode session, against the interpreter's floor.

    python -m tools.bench.bench_opencode [--sizes 1000,10000] [--repeat 11] [--json]

For each size (turns), a copy of the real database ``tests/data/opencode/opencode-1.18.33.db``
gets ``size`` more turns in its main session, written as opencode writes them (a user message
and its text part; an assistant message with a text part, a ``bash`` tool part with its input and
a 1 KB output, and step parts) — in WAL mode, a writer connection kept open as a running
opencode keeps one — and is ingested once in full (timed, in-process). Then ``--repeat`` rounds,
interleaved: one new turn is added and ``continuity ingest --agent opencode --session <id>
<db>`` is timed as a fresh process (what the plugin runs at each event), next to the floor
``python -c pass``; and the same incremental ingest in-process (``ingest_session``). Target:
the fresh process flat as the session grows (the largest size over the smallest <= 1.5x): the
read starts at the cursor's message id (one index range), not at the session's start.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any, Final

from continuity.agents.opencode.ingest import ingest_session
from continuity.store.jsonl import Store
from tools.bench._common import (
    Report,
    common_parser,
    emit,
    log,
    time_once,
    time_row,
    timed,
    work_dir,
)

DB: Final = (
    Path(__file__).resolve().parents[2] / "tests" / "data" / "opencode" / "opencode-1.18.33.db"
)
SESSION: Final = "ses_de5ae599dffewqH0pMyudaCGW5"
OUTPUT: Final = "x" * 1000


class Writer:
    """opencode's side: turns appended to the session as opencode writes them."""

    def __init__(self, db: Path) -> None:
        self.con = sqlite3.connect(db)
        self.con.execute("PRAGMA journal_mode=wal")
        self.n = 0

    def turns(self, count: int) -> None:
        for _ in range(count):
            self._turn()
        self.con.commit()

    def _turn(self) -> None:
        self.n += 1
        n = self.n
        stamp = 1_900_000_000_000 + n * 10
        user, answer = f"msg_f{n:011d}u{'a' * 13}", f"msg_f{n:011d}v{'a' * 13}"
        messages = [
            (user, {"role": "user", "time": {"created": stamp}, "agent": "build"}),
            (
                answer,
                {
                    "role": "assistant",
                    "parentID": user,
                    "agent": "build",
                    "mode": "build",
                    "modelID": "fake-model",
                    "providerID": "fake",
                    "time": {"created": stamp + 1, "completed": stamp + 5},
                    "finish": "stop",
                },
            ),
        ]
        for mid, data in messages:
            self.con.execute(
                "INSERT INTO message (id, session_id, time_created, time_updated, data) "
                "VALUES (?, ?, ?, ?, ?)",
                (mid, SESSION, stamp, stamp + 5, json.dumps(data)),
            )
        parts: list[tuple[str, dict[str, Any]]] = [
            (user, {"type": "text", "text": f"question number {n}: please run the tests"}),
            (answer, {"type": "step-start", "snapshot": "0" * 40}),
            (answer, {"type": "text", "text": f"Running them now (turn {n})."}),
            (
                answer,
                {
                    "type": "tool",
                    "tool": "bash",
                    "callID": f"call_{n:08d}",
                    "state": {
                        "status": "completed",
                        "input": {"command": "pytest -q", "description": "tests"},
                        "output": OUTPUT,
                        "title": "pytest -q",
                        "metadata": {"exit": 0},
                        "time": {"start": stamp + 2, "end": stamp + 3},
                    },
                },
            ),
            (answer, {"type": "step-finish", "reason": "stop", "tokens": {"input": 100}}),
        ]
        for i, (mid, data) in enumerate(parts):
            self.con.execute(
                "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (f"prt_{mid[4:]}{i:02d}", mid, SESSION, stamp, stamp, json.dumps(data)),
            )


def _process(argv: list[str], env: dict[str, str] | None = None) -> float:
    def run() -> None:
        subprocess.run(argv, check=True, capture_output=True, env=env)

    return time_once(run)


def _ingest(store: Store, db: Path) -> int:
    return ingest_session(store, db, SESSION).messages


def bench(sizes: tuple[int, ...], repeat: int) -> Report:
    with work_dir("opencode") as scratch:
        return _bench(scratch, sizes, repeat)


def _bench(scratch: Path, sizes: tuple[int, ...], repeat: int) -> Report:
    report = Report(
        "opencode ingest", {"sizes (turns)": ",".join(map(str, sizes)), "repeat": repeat}
    )
    floor: list[float] = []
    fresh: dict[int, list[float]] = {n: [] for n in sizes}
    inproc: dict[int, list[float]] = {n: [] for n in sizes}
    hook: dict[int, list[float]] = {n: [] for n in sizes}
    worlds: dict[int, tuple[Path, Store, Writer]] = {}
    for n in sizes:
        folder = scratch / f"opencode-{n}"
        # opencode's data folder ($XDG_DATA_HOME/opencode), where the plugin's hook reads
        db = folder / "xdg" / "opencode" / "opencode.db"
        db.parent.mkdir(parents=True)
        shutil.copyfile(DB, db)
        writer = Writer(db)
        writer.turns(n)
        store = Store(folder / "store", create=True)
        log(f"opencode: first ingest of {n} turns")
        seconds, got = timed(functools.partial(_ingest, store, db))
        report.rows.append(time_row(f"first ingest, {n} turns ({got} messages)", [seconds]))
        worlds[n] = (db, store, writer)
    for _ in range(repeat):
        floor.append(_process([sys.executable, "-c", "pass"]))
        for n in sizes:
            db, store, writer = worlds[n]
            writer.turns(1)
            argv = [sys.executable, "-m", "continuity", "--store", str(store.root)]
            argv += ["ingest", "--agent", "opencode", "--session", SESSION, str(db)]
            fresh[n].append(_process(argv))
            writer.turns(1)
            # what the plugin runs: the same ingest through the hook dispatch (no typer)
            hook_argv = [sys.executable, "-m", "continuity", "--store", str(store.root), "hook"]
            hook_argv += ["session.idle", "--agent", "opencode", "--session", SESSION]
            env = {**os.environ, "XDG_DATA_HOME": str(db.parent.parent)}
            hook[n].append(_process(hook_argv, env))
            writer.turns(1)
            inproc[n].append(time_once(functools.partial(_ingest, store, db)))
    report.rows.append(time_row("python -c pass (the floor)", floor))
    for n in sizes:
        report.rows.append(time_row(f"one new turn, {n} turns, fresh process", fresh[n]))
        report.rows.append(time_row(f"one new turn, {n} turns, the plugin's hook", hook[n]))
        report.rows.append(time_row(f"one new turn, {n} turns, in-process", inproc[n]))
    small, large = min(sizes), max(sizes)
    if small != large:
        ratio = (
            sorted(fresh[large])[len(fresh[large]) // 2]
            / sorted(fresh[small])[len(fresh[small]) // 2]
        )
        report.notes.append(
            f"fresh process, {large} over {small} turns: {ratio:.2f}x (target <= 1.5x)"
        )
    for _, _, writer in worlds.values():
        writer.con.close()
    return report


def main() -> None:
    parser = common_parser(__doc__ or "", sizes=(1_000, 10_000), unit="turns")
    parser.add_argument("--repeat", type=int, default=11)
    args = parser.parse_args()
    emit([bench(args.sizes, args.repeat)], args.json)


if __name__ == "__main__":
    main()
