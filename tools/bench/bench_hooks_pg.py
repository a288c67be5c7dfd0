"""What a Claude Code hook costs on a PostgreSQL store that is up, down or hung, against the
same hook on a folder store (issue 30, ADR 0041).

    python -m tools.bench.bench_hooks_pg [--repeat 9] [--json]

One small session (a few turns, written with the demo's transcript writer) is first archived
in full on each store (untimed). Then ``--repeat`` rounds, the cases interleaved so drift hits
them alike: one new turn is appended and ``continuity hook user-prompt-submit`` is timed as a
fresh process (wall time) on

* the folder store (the baseline) and ``python -c pass`` (the interpreter's floor);
* the server, up (probe, psycopg, the hook's budgets, the ingest);
* a port nobody listens on, with no unreachable mark (the probe is refused at once, the mark
  is written), and with the mark present (the hook skips the server: no probe, no psycopg);
* a listener that accepts and never answers, without the mark (the probe's 0.5 s) and with it.

Targets (issue 30 item 3): a hook on a sick server never waits for the driver's connect
timeout: without the mark <= 1 s over the folder store's hook, with it within 10 ms of it.
The server is a throwaway ``pgserver`` in a temporary folder, or ``$CONTINUITY_BENCH_PG_URL``
(the benchmark uses its database's default ``continuity`` schema).
"""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from continuity.claude_code.demo.transcript import TranscriptWriter
from continuity.paths import local_dir_of
from continuity.store import outage
from tools.bench._common import (
    Report,
    common_parser,
    continuity_command,
    emit,
    log,
    median,
    time_row,
    timed,
    work_dir,
)

PG_URL_ENV: Final = "CONTINUITY_BENCH_PG_URL"
SESSION: Final = "b5e1c0de-0000-4000-8000-000000000030"
_CWD: Final = "/work/bench-pg"


@contextmanager
def _server() -> Iterator[str]:
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


@contextmanager
def _silent_listener() -> Iterator[str]:
    """A URL whose server accepts connections and never says a word."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"postgresql://bench@127.0.0.1:{listener.getsockname()[1]}/bench"
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        listener.close()


def _closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"postgresql://bench@127.0.0.1:{s.getsockname()[1]}/bench"


class _Session:
    """A transcript that grows by one turn a round."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / f"{SESSION}.jsonl"
        self.writer = TranscriptWriter(
            self.path, session_id=SESSION, cwd=_CWD, git_branch="main", rng=random.Random(30)
        )
        self.turns = 0

    def turn(self) -> None:
        self.turns += 1
        w = self.writer
        w.prompt(f"Round {self.turns}: run the tests again and tell me what failed")
        w.response([{"type": "text", "text": f"Running them (round {self.turns})."}])
        w.end_turn([])
        w.flush()

    def payload(self) -> str:
        return json.dumps(
            {
                "session_id": SESSION,
                "transcript_path": str(self.path),
                "cwd": _CWD,
                "hook_event_name": "UserPromptSubmit",
                "prompt": "go on",
            }
        )


def _hook(store: str, session: _Session, env: dict[str, str]) -> float:
    argv = [*continuity_command(), "--store", store, "hook", "user-prompt-submit"]
    seconds, proc = timed(
        lambda: subprocess.run(
            argv, input=session.payload(), capture_output=True, text=True, env=env, check=False
        )
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{argv} exited with {proc.returncode}: {proc.stderr}")
    return seconds


def run(repeat: int) -> Report:
    import time

    began = time.monotonic()
    report = Report("hooks on a sick PostgreSQL server", {"repeat": repeat})
    with work_dir("hooks-pg") as work, _server() as up, _silent_listener() as hung:
        down = _closed_port_url()
        env = {k: v for k, v in os.environ.items() if not k.startswith("CONTINUITY_")}
        env["XDG_DATA_HOME"] = str(work / "xdg")
        local = {"XDG_DATA_HOME": env["XDG_DATA_HOME"]}
        sessions = {name: _Session(work / name) for name in ("folder", "up", "down", "hung")}
        stores = {"folder": str(work / "store"), "up": up, "down": down, "hung": hung}
        for name in ("folder", "up"):  # archived in full first, untimed
            (work / name).mkdir(exist_ok=True)
            for _ in range(5):
                sessions[name].turn()
            _hook(stores[name], sessions[name], env)
        for name in ("down", "hung"):
            (work / name).mkdir(exist_ok=True)
            sessions[name].turn()
        times: dict[str, list[float]] = {}
        for i in range(repeat):
            log(f"round {i + 1}/{repeat}")
            floor, _ = timed(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True))
            times.setdefault("floor", []).append(floor)
            for name in ("folder", "up"):
                sessions[name].turn()
                times.setdefault(name, []).append(_hook(stores[name], sessions[name], env))
            for name in ("down", "hung"):
                sessions[name].turn()
                mark = local_dir_of(stores[name], local)
                outage.clear_mark(mark)
                times.setdefault(f"{name} no mark", []).append(
                    _hook(stores[name], sessions[name], env)
                )
                assert outage.mark_of(mark) is not None, f"{name}: the hook wrote no mark"
                times.setdefault(f"{name} marked", []).append(
                    _hook(stores[name], sessions[name], env)
                )
        folder = median(times["folder"])
        labels = {
            "floor": "python -c pass (floor)",
            "folder": "user-prompt-submit, folder store",
            "up": "user-prompt-submit, PostgreSQL up",
            "down no mark": "server down (port closed), no mark: probe refused",
            "down marked": "server down, marked: skipped",
            "hung no mark": "server hung (accepts, silent), no mark: 0.5 s probe",
            "hung marked": "server hung, marked: skipped",
        }
        targets = {"down no mark": folder + 1.0, "hung no mark": folder + 1.0}
        for key, label in labels.items():
            row = time_row(label, times[key], baseline="folder store")
            row.ratio = median(times[key]) / folder if folder else None
            if key in targets:
                row.target = targets[key] * 1e3
            elif key.endswith("marked"):
                row.target = (folder + 0.010) * 1e3  # the folder store's hook, within noise
            report.rows.append(row)
        report.notes.append(
            "fresh processes; the server (pgserver) shares the machine's cores; kept transcripts "
            f"after the run: down {len(outage.pending(local_dir_of(down, local)))}, "
            f"hung {len(outage.pending(local_dir_of(hung, local)))} (one each: the same session)"
        )
    report.seconds = time.monotonic() - began
    return report


def main() -> None:
    parser = common_parser(__doc__ or "")
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    emit([run(args.repeat)], args.json)


if __name__ == "__main__":
    main()
