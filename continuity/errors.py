"""Typed errors: every failure a caller can act on has its own class, never a bare ``Exception``."""

from __future__ import annotations

__all__ = [
    "ArtifactCorrupt",
    "ArtifactNotFound",
    "BadFrame",
    "ContinuityError",
    "CorruptFrame",
    "InvalidThreadId",
    "SeqConflict",
    "StoreNotFound",
    "ThreadNotFound",
]


class ContinuityError(Exception):
    """Base of every error this library raises on purpose."""


class StoreNotFound(ContinuityError):
    """The store directory does not exist (or is not a continuity store)."""


class InvalidThreadId(ContinuityError, ValueError):
    """A thread id that could escape the store, hide itself or is too long."""


class ThreadNotFound(ContinuityError):
    """A read asked for a thread that has no log."""


class BadFrame(ContinuityError, ValueError):
    """A frame given to ``append`` is not valid (bad shape, reserved type, wrong envelope)."""


class SeqConflict(ContinuityError):
    """The caller expected a different next seq than the log's tail gives."""

    def __init__(self, thread_id: str, expected: int, actual: int) -> None:
        super().__init__(
            f"seq conflict on thread {thread_id!r}: expected next seq {expected}, "
            f"the log's next seq is {actual}"
        )
        self.thread_id = thread_id
        self.expected = expected
        self.actual = actual


class CorruptFrame(ContinuityError):
    """A frame in the log cannot be trusted: it does not parse, breaks seq order or the chain."""

    def __init__(self, thread_id: str, seq: int | None, offset: int, reason: str) -> None:
        where = f"seq {seq}" if seq is not None else "unknown seq"
        super().__init__(
            f"corrupt frame in thread {thread_id!r} at {where}, byte offset {offset}: {reason}"
        )
        self.thread_id = thread_id
        self.seq = seq
        self.offset = offset
        self.reason = reason


class ArtifactNotFound(ContinuityError, KeyError):
    """No artifact is stored under this id."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "artifact not found"


class ArtifactCorrupt(ContinuityError):
    """An artifact's bytes do not hash to its id (or do not decompress)."""
