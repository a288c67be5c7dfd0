"""What the contract suites use to build and check what they store: a fixed clock, messages
with deterministic ids, the chain check, reference batches, thread ids good and bad."""

from __future__ import annotations

import json
from typing import Final

from continuity import frames as fr
from continuity.store.base import MAX_THREAD_ID_LEN, BaseStore, Thread

__all__ = [
    "FIXED_MS",
    "INVALID_THREAD_IDS",
    "VALID_THREAD_IDS",
    "FixedClock",
    "drive_reference_batches",
    "msg",
    "stored_lines",
    "verify_chain",
]

FIXED_MS: Final = 1_732_240_000_000
"""The fixed clock's default time (2024-11-22), well inside any sane range."""


class FixedClock:
    """A store clock that returns the same millisecond until told otherwise.

    ``step`` (default 0) is added after every call, for tests that want time to move
    deterministically. Two stores on two fixed clocks given the same frames write the same
    bytes.
    """

    def __init__(self, ms: int = FIXED_MS, step: int = 0) -> None:
        self.ms = ms
        self.step = step
        self.calls = 0

    def __call__(self) -> int:
        now = self.ms
        self.ms += self.step
        self.calls += 1
        return now

    def advance(self, ms: int) -> None:
        self.ms += ms


def msg(i: int | str, role: fr.Role = "user", text: str | None = None) -> fr.MessageAppended:
    """A message with a deterministic id (so two backends write the same bytes)."""
    return fr.message(role, text if text is not None else f"message {i}", message_id=f"m{i}")


def verify_chain(lines: list[bytes]) -> None:
    """Every stored line (no newline) is sealed, numbered 0, 1, 2, … and chained from genesis."""
    prev = fr.GENESIS_DIGEST
    for seq, line in enumerate(lines):
        sealed = fr.unseal(line)
        assert sealed is not None, f"line {seq} is not sealed"
        body, digest = sealed
        assert fr.chain(prev, body) == digest, f"chain breaks at seq {seq}"
        assert json.loads(line)["seq"] == seq
        prev = digest


def stored_lines(thread: Thread) -> list[bytes]:
    """A thread's stored lines (without newlines), oldest first."""
    return [line for _seq, line in thread.read_lines()]


INVALID_THREAD_IDS: Final = [
    "",
    ".",
    "..",
    ".hidden",
    "a/b",
    "/abs",
    "../escape",
    "a\\b",
    "a b",
    " a",
    "a\n",
    "a\x00b",
    "-dash-first",
    "é",
    "x" * (MAX_THREAD_ID_LEN + 1),
]
VALID_THREAD_IDS: Final = [
    "a",
    "_x",
    "0",
    "a.b",
    "a..b",
    "A-1:2@3+4=5_b.c",
    "x" * MAX_THREAD_ID_LEN,
]


def drive_reference_batches(store: BaseStore) -> None:
    """Batches of every shape on two threads (``a`` and ``b``): a caller's ``thread_created``,
    multi-frame batches, a tool call with an artifact, ``expected_seq``, jobs, non-ASCII."""
    a = store.thread("a")
    a.append([fr.ThreadCreated(title="A"), msg(1)])
    a.append([msg(2, "assistant"), msg(3)])
    a.append(
        fr.message(
            "assistant",
            content=[
                fr.ToolUseBlock(id="tu", name="bash", input={"cmd": "ls -la", "n": 3}),
                fr.ToolResultBlock(tool_use_id="tu", artifact_id="cd" * 32, preview="p", size=99),
            ],
            message_id="tool",
        )
    )
    a.append(fr.JobSpawned(job_id="j", kind="compact", params={"to_seq": 3}), expected_seq=5)
    store.thread("b").append(msg("only", text='日本語 ✓ "quoted" \\ back\nslash'))
    a.append(fr.JobEnded(job_id="j", status="succeeded", result={"ok": True}))
