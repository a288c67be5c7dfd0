"""The cold tier's policy (ADR 0057): which stretch of a log moves into compressed segments.

A stretch is cold when every frame of it is older than ``older_than_ms`` and it lies before
the newest ``keep_frames`` frames (what compile, the restore and the viewer read most stays as
it is). Tiering is lossless — the bytes move, the log reads the same — so the rule only decides
what is cheap to read and what is small on disk; the newest frames are never moved, and a
stretch smaller than ``min_bytes`` waits until it is worth a segment.

The moves are made by :meth:`continuity.store.jsonl.JsonlThread.move_to_cold`; the folder
store is the only backend with a cold tier (PostgreSQL compresses large values itself).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final, NamedTuple

import msgspec

from continuity.errors import ContinuityError
from continuity.store.base import BaseStore, ColdMove, split_lines

__all__ = [
    "DEFAULT_KEEP_FRAMES",
    "DEFAULT_MIN_BYTES",
    "TierPlan",
    "Tiered",
    "plan_tier",
    "tier_threads",
]

DEFAULT_KEEP_FRAMES: Final = 2_000
"""The newest frames of a log always stay as they are."""
DEFAULT_MIN_BYTES: Final = 1 << 20
"""A cold stretch smaller than this waits: a segment per few lines would cost more than it saves."""


class _Stamp(msgspec.Struct):
    seq: int = -1
    ts_ms: int = 0


_stamp: Final = msgspec.json.Decoder(_Stamp)


class TierPlan(NamedTuple):
    """The stretch of one log that would move: bytes ``[start, end)``, frames
    ``first_seq..last_seq``; ``cold_before`` bytes were in the cold tier already."""

    thread_id: str
    start: int
    end: int
    first_seq: int
    last_seq: int
    cold_before: int

    @property
    def frames(self) -> int:
        return self.last_seq - self.first_seq + 1

    @property
    def bytes(self) -> int:
        return self.end - self.start


class Tiered(NamedTuple):
    """What :func:`tier_threads` did for one thread: its plan, and the move (None in a dry
    run, or when the stretch was too small to move)."""

    plan: TierPlan | None
    moved: ColdMove | None


def plan_tier(
    store: BaseStore,
    thread_id: str,
    *,
    older_than_ms: int,
    now_ms: int,
    keep_frames: int = DEFAULT_KEEP_FRAMES,
) -> TierPlan | None:
    """The stretch of ``thread_id``'s log that is cold now (None when nothing is)."""
    if keep_frames < 0:
        raise ValueError(f"keep_frames must be 0 or more, not {keep_frames}")
    thread = store.existing_thread(thread_id)
    log = thread.open_log() if thread.has_cold_tier else None
    if log is None:
        thread.move_to_cold(0)  # a backend without a cold tier refuses, saying so
        return None
    with log:
        head = thread.head()
        if head is None:
            return None
        last_allowed = head.seq - keep_frames
        cutoff = now_ms - older_than_ms
        cold = thread.cold_end()
        first: int | None = None
        last = -1
        end = cold
        for at, line in split_lines(log.pread, cold, log.end):
            try:
                stamp = _stamp.decode(line)
            except msgspec.DecodeError as exc:
                raise ContinuityError(
                    f"thread {thread_id}: the line at byte {at} is not a frame ({exc}); "
                    "run `continuity verify` first"
                ) from None
            if stamp.seq > last_allowed or stamp.ts_ms >= cutoff:
                break
            if first is None:
                first = stamp.seq
            last = stamp.seq
            end = at + len(line) + 1
    if first is None:
        return None
    return TierPlan(thread_id, cold, end, first, last, cold)


def tier_threads(
    store: BaseStore,
    thread_ids: Iterable[str],
    *,
    older_than_ms: int,
    now_ms: int,
    keep_frames: int = DEFAULT_KEEP_FRAMES,
    min_bytes: int = DEFAULT_MIN_BYTES,
    dry_run: bool = False,
    on_thread: Callable[[Tiered], None] | None = None,
) -> list[Tiered]:
    """Move the cold stretch of each thread's log into the cold tier (see :func:`plan_tier`);
    a stretch under ``min_bytes`` is left for later. ``on_thread`` hears each one as it is done."""
    done: list[Tiered] = []
    for tid in thread_ids:
        plan = plan_tier(
            store, tid, older_than_ms=older_than_ms, now_ms=now_ms, keep_frames=keep_frames
        )
        moved = None
        if plan is not None and plan.bytes >= min_bytes and not dry_run:
            moved = store.thread(tid).move_to_cold(plan.end)
        result = Tiered(plan, moved)
        done.append(result)
        if on_thread is not None:
            on_thread(result)
    return done
