"""Scribe's sessions into threads, incrementally and idempotently, with the foundation's cursor,
line reader, source keys and frames."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from continuity import frames as fr
from continuity.agents.base import ingest as common
from continuity.store.base import BaseStore, Thread
from tests.agents.fifth_agent.agent import SCRIBE

SYSTEM = "scribe"
CUT_RULE = "scribe_compact/auto"


@dataclass
class Report:
    thread: str = ""
    messages: int = 0
    checkpoints: int = 0
    skipped: dict[str, int] = field(default_factory=dict)


def _parse(obj: dict[str, Any], offset: int) -> dict[str, Any] | str:
    kind = obj.get("type")
    if kind in ("meta", "user", "assistant", "compact"):
        return {**obj, "offset": offset}
    return str(kind)


def _last_seq(thread: Thread) -> int:
    head = thread.head()
    return -1 if head is None else head.next_seq - 1


def detect(path: Path) -> bool:
    if path.is_dir():
        return any(detect(p) for p in path.glob("*.jsonl"))
    if path.suffix != ".jsonl" or not path.is_file():
        return False
    with open(path, "rb") as f:
        return f.readline().startswith(b'{"type": "meta"')


def ingest_session(store: BaseStore, path: Path) -> Report:
    path = path.absolute()
    report = Report()
    with common.locked(store, SYSTEM, path) as cursor_file:
        size = path.stat().st_size
        cursor, _why = common.resume(path, cursor_file, size=size)
        start = cursor.offset if cursor is not None else 0
        state: dict[str, Any] = dict(cursor.state) if cursor is not None else {}
        read = common.read_lines(path, start, _parse)
        report.skipped = dict(read.skipped)
        keys = common.Keys(SYSTEM, cursor.heads if cursor is not None else None)
        for rec in read.records:
            if rec["type"] == "meta":
                state["session"] = str(rec["session"])
                state["cwd"] = str(rec.get("cwd", ""))
                continue
            session = state.get("session") or path.stem
            thread = store.thread(SCRIBE.thread_id(session))
            report.thread = thread.id
            if not thread.exists():
                thread.append(
                    common.thread_created(
                        thread.id,
                        source=SCRIBE.source,
                        project=state.get("cwd", ""),
                        session_id=session,
                        transcript=str(path),
                    )
                )
            keys.load(thread)
            key = f"{rec['type']}:{rec['id']}"
            if rec["type"] == "compact":
                if keys.seen([f"c:{rec['id']}"]):
                    continue
                frame: fr.Frame = common.checkpoint(
                    store,
                    thread.id,
                    checkpoint_id=str(rec["id"]),
                    cut_rule_id=CUT_RULE,
                    produced_by=SYSTEM,
                    summary=str(rec["summary"]),
                    to_seq=_last_seq(thread),
                )
                keys.add([f"c:{rec['id']}"])
                report.checkpoints += 1
            else:
                if keys.seen([key]):
                    continue
                frame = common.message(
                    "user" if rec["type"] == "user" else "assistant",
                    [fr.TextBlock(text=str(rec["text"]))],
                    system=SYSTEM,
                    keys=[key],
                )
                keys.add([key])
                report.messages += 1
            thread.append(frame)
        heads = {report.thread: _last_seq(store.thread(report.thread))} if report.thread else {}
        common.save_cursor(
            cursor_file,
            common.FileCursor(
                path=str(path),
                offset=read.end,
                head_hash=common.head_hash(path, read.end),
                heads=heads,
                state=state,
            ),
        )
    return report
