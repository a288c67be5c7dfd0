"""What a Claude Code hook costs on a PostgreSQL store, against the same hook on a folder
store (issue 30, items 2 and 3; ADR 0041).

    python -m tools.bench.bench_hooks_pg [--repeat 9] [--threads 10000] [--part latency|sick|both]
                                         [--json]

Two parts, both fresh processes (wall time), the cases of a round interleaved so drift hits
them alike (the folder and the server store alternate which goes first):

``latency`` (item 2): the hooks a session runs, on a folder store and on the server, each
store holding the same small session (archived in full first, untimed) and, with
``--threads N``, ``N`` generated threads (:mod:`tools.bench.gen_threads`, the same seed on
both; 10,000 is the store of the issue). Each round grows the session by a turn before each
ingesting hook, then times ``user-prompt-submit`` without and with ``recall_on_prompt`` (the
store's ``claude-code.json``), ``session-start`` of a new session (source ``startup``: the
pointer to the bench session, checked to be the same on both stores), ``post-tool-use`` and
``stop``. Targets: ``user-prompt-submit`` and ``session-start`` on the server within 2x of the
folder store's (medians).

``sick`` (item 3): ``user-prompt-submit`` on the server up, on a port nobody listens on and on
a listener that accepts and never answers, each without and with the unreachable mark. Targets:
a hook on a sick server never waits for the driver's connect timeout: without the mark
<= 1 s over the folder store's hook, with it within 10 ms of it.

The hooks on the server go through its relay (ADR 0062; ``bench_hooks_relay`` measures every
hook that way), unless ``$CONTINUITY_RELAY=0`` is set for the benchmark.

The server is a throwaway ``pgserver`` in a temporary folder (a Unix socket, on this machine),
or ``$CONTINUITY_BENCH_PG_URL`` (the benchmark uses its database's default ``continuity``
schema: give it a database without a store, or one this benchmark made).
"""

from __future__ import annotations

import functools
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from continuity.demo.transcript import TranscriptWriter
from continuity.paths import local_dir_of
from continuity.store import outage
from tools.bench._common import (
    Report,
    common_parser,
    continuity_command,
    emit,
    log,
    median,
    pg_server,
    time_row,
    timed,
    work_dir,
)

SESSION: Final = "b5e1c0de-0000-4000-8000-000000000030"
_CWD: Final = "/work/bench-pg"
_RELAY: Final = "CONTINUITY_RELAY"
"""Kept from the benchmark's environment: ``0`` measures the hooks in their own processes."""


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


def _bench_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("CONTINUITY_") or k == _RELAY}


def _closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"postgresql://bench@127.0.0.1:{s.getsockname()[1]}/bench"


class GrowingSession:
    """A transcript that grows by one turn a round (``prompt``: put in every payload)."""

    def __init__(
        self,
        folder: Path,
        session_id: str = SESSION,
        *,
        seed: int = 30,
        cwd: str = _CWD,
        prompt: str | None = "go on: why did the tests fail in round 2",
    ) -> None:
        self.id = session_id
        self.path = folder / f"{session_id}.jsonl"
        self.cwd = cwd
        self.prompt = prompt
        self.writer = TranscriptWriter(
            self.path, session_id=session_id, cwd=cwd, git_branch="main", rng=random.Random(seed)
        )
        self.turns = 0

    def turn(self) -> None:
        self.turns += 1
        w = self.writer
        w.prompt(f"Round {self.turns}: run the tests again and tell me what failed")
        w.response([{"type": "text", "text": f"Running them (round {self.turns})."}])
        w.end_turn([])
        w.flush()

    def payload(self, event: str = "UserPromptSubmit", **extra: str) -> str:
        said = {} if self.prompt is None else {"prompt": self.prompt}
        return json.dumps(
            {
                "session_id": self.id,
                "transcript_path": str(self.path),
                "cwd": self.cwd,
                "hook_event_name": event,
                **said,
                **extra,
            }
        )


def _hook(
    store: str,
    session: GrowingSession,
    env: dict[str, str],
    event: str = "user-prompt-submit",
    payload: str | None = None,
) -> float:
    return _run_hook(store, event, payload or session.payload(), env, quiet=False)[0]


def _run_hook(
    store: str, event: str, payload: str, env: dict[str, str], *, quiet: bool = True
) -> tuple[float, str]:
    """(seconds, stdout) of the hook ``event`` run as a fresh process on ``store``; it must
    exit 0 (and, ``quiet``, say nothing on stderr)."""
    argv = [*continuity_command(), "--store", store, "hook", event]
    seconds, proc = timed(
        lambda: subprocess.run(
            argv, input=payload, capture_output=True, text=True, env=env, check=False
        )
    )
    if proc.returncode != 0 or (quiet and proc.stderr):
        raise RuntimeError(f"{argv} exited with {proc.returncode}: {proc.stderr}")
    return seconds, proc.stdout


_CASES: Final = {
    "prompt": "user-prompt-submit",
    "recall": "user-prompt-submit, recall_on_prompt",
    "start": "session-start (startup: the pointer)",
    "tool": "post-tool-use",
    "stop": "stop",
}
_FLOORS: Final = {
    "python -c pass (the interpreter's floor)": "pass",
    "python -c 'import psycopg' (the driver's import)": "import psycopg",
}
"""What every hook process costs, and what a hook on the server adds at least."""
_TARGETS: Final = {"prompt": 2.0, "start": 2.0}
"""Issue 30 item 2: the server store's median within this factor of the folder store's."""


def _fill(stores: dict[str, str], threads: int) -> None:
    """``threads`` generated threads in each store (the same seed: the same threads)."""
    from continuity.store.locate import open_store
    from tools.bench.gen_threads import write_threads
    from tools.gen_thread import FIXED_CLOCK_MS

    for name, location in stores.items():
        began = time.monotonic()
        store = open_store(location, create=True, durable=False, clock=lambda: FIXED_CLOCK_MS)
        try:
            if store.threads():
                raise SystemExit(f"the {name} store at {location} is not empty")
            write_threads(store, threads, progress=functools.partial(_progress, name))
        finally:
            store.close()
        log(f"{name}: {threads:,} threads in {time.monotonic() - began:.0f} s")


def _progress(name: str, done: int, total: int) -> None:
    log(f"  {name}: {done:,}/{total:,}")


def _config(local: Path, *, recall: bool) -> None:
    """The hook settings of the store whose local folder is ``local``: recall on or off."""
    path = local / "claude-code.json"
    if recall:
        local.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"recall_on_prompt": True}) + "\n")
    else:
        path.unlink(missing_ok=True)


def _latency_round(
    i: int,
    stores: dict[str, str],
    sessions: dict[str, GrowingSession],
    locals_: dict[str, Path],
    env: dict[str, str],
    times: dict[tuple[str, str], list[float]],
) -> None:
    """One round: every case on both stores, the store that goes first alternating."""
    order = ["folder", "pg"] if i % 2 == 0 else ["pg", "folder"]
    for floor, code in _FLOORS.items():
        argv = [sys.executable, "-c", code]
        seconds, _ = timed(functools.partial(subprocess.run, argv, check=True))
        times.setdefault((floor, ""), []).append(seconds)
    new = f"b5e1c0de-0000-4000-8000-{i:012d}"  # a new session, as at startup
    for case in _CASES:
        pointers: dict[str, str] = {}
        for name in order:
            session = sessions[name]
            if case == "start":
                payload = json.dumps(
                    {
                        "session_id": new,
                        "transcript_path": str(session.path.with_name(f"{new}.jsonl")),
                        "cwd": _CWD,
                        "hook_event_name": "SessionStart",
                        "source": "startup",
                    }
                )
                seconds, out = _run_hook(stores[name], "session-start", payload, env)
                pointers[name] = out
            else:
                session.turn()
                event = {"tool": "post-tool-use", "stop": "stop"}.get(case, "user-prompt-submit")
                _config(locals_[name], recall=case == "recall")
                try:
                    seconds, out = _run_hook(stores[name], event, session.payload(), env)
                finally:
                    _config(locals_[name], recall=False)
            times.setdefault((case, name), []).append(seconds)
        if case == "start" and (
            pointers["folder"] != pointers["pg"] or SESSION not in pointers["pg"]
        ):
            raise RuntimeError(f"session-start pointers differ: {pointers}")


def run_latency(repeat: int, threads: int) -> Report:
    began = time.monotonic()
    report = Report(
        "Claude Code hooks: folder vs PostgreSQL store", {"repeat": repeat, "threads": threads}
    )
    with work_dir("hooks-pg-latency") as work, pg_server() as url:
        env = _bench_env()
        env["XDG_DATA_HOME"] = str(work / "xdg")
        # Measured, not cut short: recall on a large server store takes longer than a hook's
        # deadline (issue 30 item 1's search index is what brings it down).
        env["CONTINUITY_HOOK_DEADLINE"] = "600"
        stores = {"folder": str(work / "store"), "pg": url}
        locals_ = {
            name: local_dir_of(s, {"XDG_DATA_HOME": env["XDG_DATA_HOME"]})
            for name, s in stores.items()
        }
        if threads:
            _fill(stores, threads)
        sessions = {name: GrowingSession(work / name) for name in stores}
        for name, session in sessions.items():  # archived in full first, untimed
            (work / name).mkdir()
            for _ in range(5):
                session.turn()
            _hook(stores[name], session, env)
        times: dict[tuple[str, str], list[float]] = {}
        for i in range(repeat):
            log(f"round {i + 1}/{repeat}")
            _latency_round(i, stores, sessions, locals_, env, times)
        for floor in _FLOORS:
            report.rows.append(time_row(floor, times[floor, ""]))
        for case, label in _CASES.items():
            folder = median(times[case, "folder"])
            report.rows.append(time_row(f"{label}, folder store", times[case, "folder"]))
            row = time_row(f"{label}, PostgreSQL", times[case, "pg"], baseline="folder store")
            row.ratio = median(times[case, "pg"]) / folder
            if case in _TARGETS:
                row.target = _TARGETS[case] * folder * 1e3
            report.rows.append(row)
        store_size = f"{threads:,} generated threads and" if threads else "only"
        report.notes.append(
            f"fresh processes; each store holds {store_size} the bench session; the server "
            "(pgserver, a Unix socket) shares the machine's cores"
        )
    report.seconds = time.monotonic() - began
    return report


def run_sick(repeat: int) -> Report:
    began = time.monotonic()
    report = Report("hooks on a sick PostgreSQL server", {"repeat": repeat})
    with work_dir("hooks-pg") as work, pg_server() as up, _silent_listener() as hung:
        down = _closed_port_url()
        env = _bench_env()
        env["XDG_DATA_HOME"] = str(work / "xdg")
        local = {"XDG_DATA_HOME": env["XDG_DATA_HOME"]}
        sessions = {name: GrowingSession(work / name) for name in ("folder", "up", "down", "hung")}
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
    parser.add_argument(
        "--threads", type=int, default=0, help="generated threads in both stores (latency part)"
    )
    parser.add_argument("--part", choices=("latency", "sick", "both"), default="both")
    args = parser.parse_args()
    reports = []
    if args.part in ("latency", "both"):
        reports.append(run_latency(args.repeat, args.threads))
    if args.part in ("sick", "both"):
        reports.append(run_sick(args.repeat))
    emit(reports, args.json)


if __name__ == "__main__":
    main()
