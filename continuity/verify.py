"""Checking a store end to end: every chain, every referenced artifact, every cache."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import msgspec

from continuity import frames as fr
from continuity.caches.thread_index import ThreadIndex
from continuity.errors import ArtifactCorrupt, ArtifactNotFound, ContinuityError, CorruptFrame
from continuity.store.base import BaseStore, Recovery, Thread

__all__ = ["Problem", "VerifyReport", "verify_store"]


@dataclass(frozen=True, slots=True)
class Problem:
    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


@dataclass(slots=True)
class VerifyReport:
    threads: int = 0
    frames: int = 0
    artifacts: int = 0
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    quarantined: list[Recovery] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _verify_log(thread: Thread, report: VerifyReport, refs: dict[str, str]) -> None:
    tid = thread.id
    prev = fr.GENESIS_DIGEST
    expected = 0
    try:
        for seq, line in thread.read_lines():
            sealed = fr.unseal(line)
            if sealed is None:  # read_lines already refuses these; belt and braces
                raise CorruptFrame(tid, seq, -1, "not a sealed frame")
            body, digest = sealed
            if fr.chain(prev, body) != digest:
                offset = thread.offset_of(seq)
                raise CorruptFrame(tid, seq, -1 if offset is None else offset, "broken chain")
            prev = digest
            try:
                frame = fr.decode_frame(line)
            except msgspec.DecodeError as exc:
                offset = thread.offset_of(seq)
                raise CorruptFrame(tid, seq, -1 if offset is None else offset, str(exc)) from None
            if seq == 0 and not (
                isinstance(frame, fr.ThreadCreated) and frame.thread_id in ("", tid)
            ):
                report.problems.append(
                    Problem(f"thread {tid}", "seq 0 is not this thread's thread_created")
                )
            for aid in fr.artifact_refs(frame):
                refs.setdefault(aid, f"thread {tid} seq {seq}")
            expected = seq + 1
    except CorruptFrame as exc:
        report.problems.append(Problem(f"thread {tid}", str(exc)))
    report.frames += expected
    log = thread.open_log()
    if log is None:
        return
    with log:
        size, committed = log.size(), log.end
    if size > committed:
        report.notes.append(
            f"thread {tid}: {size - committed} bytes past the last committed frame "
            "(a write in progress, or a crash's torn tail: the next append quarantines it)"
        )


def verify_store(
    store: BaseStore,
    threads: Sequence[Thread] | None = None,
    *,
    progress: Callable[[str], None] | None = None,
) -> VerifyReport:
    """Check logs, artifacts and caches of the given threads (default: every thread); return
    what is wrong (nothing is repaired)."""
    report = VerifyReport()
    chosen = [store.thread(tid) for tid in store.threads()] if threads is None else threads
    refs: dict[str, str] = {}
    for thread in chosen:
        if progress is not None:
            progress(thread.id)
        report.threads += 1
        _verify_log(thread, report, refs)
        if not ThreadIndex.available(thread):
            continue
        try:
            for problem in ThreadIndex(thread).problems():
                report.problems.append(Problem(f"cache of thread {thread.id}", problem))
        except ContinuityError as exc:
            report.problems.append(Problem(f"cache of thread {thread.id}", str(exc)))
    checked: set[str] = set()
    for aid, where in sorted(refs.items()):
        checked.add(aid)
        try:
            store.artifacts.verify(aid)
        except ArtifactNotFound:
            report.problems.append(Problem(f"artifact {aid}", f"missing (referenced by {where})"))
        except ArtifactCorrupt as exc:
            report.problems.append(Problem(f"artifact {aid}", str(exc)))
    if threads is None:
        for aid in store.artifacts.ids():
            if aid in checked:
                continue
            checked.add(aid)
            try:
                store.artifacts.verify(aid)
            except ArtifactCorrupt as exc:
                report.problems.append(Problem(f"artifact {aid}", str(exc)))
    report.artifacts = len(checked)
    ids = None if threads is None else {t.id for t in threads}
    report.quarantined = [r for r in store.quarantined() if ids is None or r.thread_id in ids]
    return report
