"""Whole-process latency of the Gemini CLI hooks (``continuity hook <Event> --agent gemini``).

    python -m tools.bench.bench_gemini_hooks [--sizes 3,100] [--repeat 7] [--json-mb 3]

Sessions of ``--sizes`` MB in the ``.jsonl`` form (v0.39+) are built by repeating the turn of
the recorded Gemini CLI 0.61 session (``../shared/fixtures/agents/recorded``: a prompt, the
model's message written empty then again with its tool call and result, the result as a user
message, the answer, ``$set`` patches) with fresh ids, a tool output padded to ~3 KB, and
ingested once (untimed). Then ``--repeat`` rounds, sizes and the floor interleaved: one new
turn is appended and ``AfterAgent`` is timed as a fresh process (a final ingest of the new
bytes; target: p50 <= ``python -c pass`` + 25 ms, and the largest size within 1.1x of the
smallest), then ``BeforeAgent`` with nothing new.

The legacy ``.json`` form (up to v0.38) is rewritten whole on every update, so every hook
reads and parses the whole file: ``--json-mb`` sizes one such session, and ``AfterAgent`` after
one new turn is timed there too (no target: it grows with the file; the cursor only spares
re-archiving, which the message ids make idempotent anyway).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, Final

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

RECORDED: Final = (
    Path(__file__).resolve().parents[2]
    / ".."
    / "shared"
    / "fixtures"
    / "agents"
    / "recorded"
    / "gemini_transcript_basic.jsonl"
).resolve()
PAD: Final = "x" * 3000
SESSION: Final = "bench-gemini-session"


def _turn(n: int) -> list[dict[str, Any]]:
    """One turn's lines, fresh ids: prompt, empty message, message with call, result, answer."""
    prompt, model, result, answer = (str(uuid.uuid4()) for _ in range(4))
    call = f"run_shell_command_{n}_{uuid.uuid4().hex[:8]}"
    stamp = "2026-11-26T12:42:14.228Z"
    output = {"output": f"Output: {n} {PAD}"}
    base: dict[str, Any] = {"id": model, "timestamp": stamp, "type": "gemini", "content": ""}
    base["thoughts"] = []
    base["tokens"] = {
        "input": 100,
        "output": 20,
        "cached": 0,
        "thoughts": 0,
        "tool": 0,
        "total": 120,
    }
    base["model"] = "gemini-2.5-pro"
    with_call = {
        **base,
        "toolCalls": [
            {
                "id": call,
                "name": "run_shell_command",
                "args": {"command": f"echo {n}", "description": "echo"},
                "result": [
                    {
                        "functionResponse": {
                            "id": call,
                            "name": "run_shell_command",
                            "response": output,
                        }
                    }
                ],
                "status": "success",
                "timestamp": stamp,
                "resultDisplay": str(n),
            }
        ],
    }
    patch = {"$set": {"lastUpdated": stamp}}
    return [
        {
            "id": prompt,
            "timestamp": stamp,
            "type": "user",
            "content": [{"text": f"Please run {n}"}],
        },
        patch,
        base,
        patch,
        with_call,
        {
            "id": result,
            "timestamp": stamp,
            "type": "user",
            "content": [
                {"functionResponse": {"id": call, "name": "run_shell_command", "response": output}}
            ],
        },
        patch,
        {**base, "id": answer, "content": f"Printed {n}."},
        patch,
    ]


def _lines(records: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(r, separators=(",", ":")).encode() + b"\n" for r in records)


def _jsonl_session(path: Path, megabytes: int) -> int:
    header = json.loads(RECORDED.read_text().splitlines()[0])
    header["sessionId"] = SESSION + f"-{megabytes}"
    with open(path, "wb") as f:
        f.write(_lines([header]))
        n = 0
        while f.tell() < megabytes * 1_000_000:
            f.write(_lines(_turn(n)))
            n += 1
    return n


def _json_session(path: Path, megabytes: int) -> dict[str, Any]:
    record: dict[str, Any] = {
        "sessionId": SESSION + "-json",
        "projectHash": "0" * 64,
        "startTime": "2025-12-01T21:45:34.362Z",
        "lastUpdated": "2025-12-01T21:45:34.362Z",
        "messages": [],
    }
    n = 0
    while n * 3300 < megabytes * 1_000_000:
        turn = _turn(n)
        record["messages"] += [turn[0], turn[4], turn[7]]
        n += 1
    path.write_text(json.dumps(record, indent=2))
    return record


def _hook(event: str, store: Path, transcript: Path) -> float:
    payload = json.dumps(
        {
            "session_id": "s",
            "transcript_path": str(transcript),
            "cwd": str(store.parent),
            "hook_event_name": event,
            "prompt": "x",
        }
    )
    argv = [*continuity_command(), "--store", str(store), "hook", event, "--agent", "gemini"]
    cpu = _cpu()
    seconds, done = timed(
        lambda: subprocess.run(argv, input=payload, capture_output=True, text=True, check=False)
    )
    if done.returncode != 0 or done.stderr:
        raise SystemExit(f"hook {event} failed: {done.stderr}")
    CPU.setdefault(event + str(transcript), []).append(_cpu() - cpu)
    return seconds


CPU: Final[dict[str, list[float]]] = {}
"""CPU time (user + sys) of each timed child, by what it ran: on a loaded machine the wall
time of a 50 ms process varies by 2x, its CPU time much less."""


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _floor() -> float:
    cpu = _cpu()
    seconds = timed(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True))[0]
    CPU.setdefault("floor", []).append(_cpu() - cpu)
    return seconds


def run(sizes: tuple[int, ...], repeat: int, json_mb: int) -> Report:
    report = Report("gemini_hooks", {"sizes_mb": list(sizes), "repeat": repeat, "json_mb": json_mb})
    with work_dir("gemini-hooks") as work:
        store = work / "store"
        sessions: dict[int, Path] = {}
        for mb in sizes:
            path = work / "chats" / f"session-2026-11-26T12-42-{mb:08d}.jsonl"
            path.parent.mkdir(exist_ok=True)
            turns = _jsonl_session(path, mb)
            log(f"{mb} MB session: {turns} turns; first ingest (untimed)")
            _hook("AfterAgent", store, path)
            sessions[mb] = path
        legacy = work / "chats" / "session-2025-12-01T21-45-legacy00.json"
        record = _json_session(legacy, json_mb)
        _hook("AfterAgent", store, legacy)
        floor: list[float] = []
        after: dict[int, list[float]] = {mb: [] for mb in sizes}
        before: dict[int, list[float]] = {mb: [] for mb in sizes}
        legacy_after: list[float] = []
        for r in range(repeat):
            floor.append(_floor())
            for mb, path in sessions.items():
                with open(path, "ab") as f:
                    f.write(_lines(_turn(1_000_000 + r)))
                after[mb].append(_hook("AfterAgent", store, path))
                before[mb].append(_hook("BeforeAgent", store, path))
            turn = _turn(2_000_000 + r)
            record["messages"] += [turn[0], turn[4], turn[7]]
            legacy.write_text(json.dumps(record, indent=2))
            legacy_after.append(_hook("AfterAgent", store, legacy))
        base = median(floor)
        report.rows.append(time_row("python -c pass (floor)", floor))
        report.rows.append(time_row("python -c pass (floor), CPU", CPU["floor"]))
        smallest = min(sizes)
        for mb, path in sessions.items():
            row = time_row(f"AfterAgent, one new turn, {mb} MB .jsonl", after[mb])
            row.target = base * 1e3 + 25
            if mb != smallest:
                row.baseline = f"{smallest} MB"
                row.ratio = median(after[mb]) / median(after[smallest])
            report.rows.append(row)
            cpu = time_row(
                f"AfterAgent, one new turn, {mb} MB .jsonl, CPU", CPU[f"AfterAgent{path}"][1:]
            )
            cpu.target = median(CPU["floor"]) * 1e3 + 25
            report.rows.append(cpu)
            report.rows.append(time_row(f"BeforeAgent, nothing new, {mb} MB .jsonl", before[mb]))
            report.rows.append(
                time_row(
                    f"BeforeAgent, nothing new, {mb} MB .jsonl, CPU", CPU[f"BeforeAgent{path}"]
                )
            )
        report.rows.append(
            time_row(
                f"AfterAgent, one new turn, {json_mb} MB .json (rewritten whole)", legacy_after
            )
        )
        if len(sizes) > 1:
            ratio = median(after[max(sizes)]) / median(after[smallest])
            report.notes.append(
                f"flatness: {max(sizes)} MB / {smallest} MB = {ratio:.2f} (target <= 1.1)"
            )
    return report


def main() -> None:
    parser = common_parser(__doc__ or "", sizes=(3, 100), unit="MB")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json-mb", type=int, default=3)
    args = parser.parse_args()
    emit([run(args.sizes, args.repeat, args.json_mb)], args.json)


if __name__ == "__main__":
    main()
