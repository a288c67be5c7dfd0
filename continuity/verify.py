"""Checking a store end to end: every frame of every log, every artifact, every cache.

``verify`` does not stop at the first bad frame: it reads each log line by line on its own
(not through the readers, which refuse a thread at its first bad line) and names every line
that is wrong — its thread, seq, byte offset and what is wrong with it — then goes on. After a
bad line it resynchronises on the seqs the following lines carry, so an edited frame is one
problem, a deleted line is one ("frame N is missing"), a duplicated or moved line is one per
misplaced line. Besides the logs it reports: referenced and stored artifacts that are missing or
do not hash to their id (a checkpoint's summary among them), caches that disagree with their log
or say the log once went further than it does now (frames removed from its end), logs that hold
bytes but no committed frame, torn tails, and jobs that started and never ended.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Final

import msgspec

from continuity import frames as fr
from continuity.caches.thread_index import DAMAGE, ThreadIndex
from continuity.errors import ArtifactCorrupt, ArtifactNotFound, ContinuityError
from continuity.store.base import BaseStore, LogReader, Recovery, Thread, split_lines

__all__ = ["Problem", "Repair", "VerifyReport", "first_problem", "repair_thread", "verify_store"]

_CHUNK: Final = 1 << 20
_RECENT: Final = 1024  # digests kept by seq, to check a line against wherever its parent is


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong: where (``thread t``, ``artifact …``, ``cache of thread t``) and what;
    for a frame also its thread, seq and byte offset (-1 for a log not kept as bytes)."""

    where: str
    message: str
    thread_id: str | None = None
    seq: int | None = None
    offset: int | None = None

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
    limit: int | None = None
    truncated: bool = False
    """True when the report stopped at ``limit`` problems (there may be more)."""

    @property
    def ok(self) -> bool:
        return not self.problems

    def add(self, problem: Problem) -> None:
        if self.limit is not None and len(self.problems) >= self.limit:
            self.truncated = True
            raise _LimitReached
        self.problems.append(problem)


class _LimitReached(Exception):
    pass


def _lines(log: LogReader) -> Iterator[tuple[int, bytes]]:
    """(offset, line) of every committed line, in big chunks (a last piece without a newline,
    which a committed end never leaves, comes as a line and fails its checks)."""
    return split_lines(log.pread, 0, log.end, first=_CHUNK)


def _with_next_seq(
    lines: Iterator[tuple[int, bytes]],
) -> Iterator[tuple[int, bytes, fr.Envelope | None, int | None]]:
    """Each (offset, line) with its envelope and the seq of the line after it (None: last, or
    unparsable); every line is probed once."""
    prev: tuple[int, bytes, fr.Envelope | None] | None = None
    for offset, line in lines:
        env = fr.envelope(line)
        if prev is not None:
            yield *prev, None if env is None else env.seq
        prev = (offset, line, env)
    if prev is not None:
        yield *prev, None


@dataclass(slots=True)
class _LogCheck:
    """The state of one log's check, line by line."""

    thread: Thread
    report: VerifyReport
    refs: dict[str, str]
    expect: int = 0
    frames: int = 0
    digests: OrderedDict[int, bytes] = field(default_factory=OrderedDict)
    # When the last line failed its chain check: the digest its body would have had, so a line
    # whose only damage was its stored digest is one problem, not two.
    unsealed_guess: tuple[int, bytes] | None = None
    spawned: dict[str, int] = field(default_factory=dict)

    def problem(self, seq: int | None, offset: int, what: str) -> None:
        where = f"seq {seq}" if seq is not None else "a line of unknown seq"
        self.report.add(
            Problem(
                f"thread {self.thread.id}",
                f"{where}, byte offset {offset}: {what}",
                self.thread.id,
                seq,
                offset,
            )
        )

    def line(self, offset: int, line: bytes, env: fr.Envelope | None, next_seq: int | None) -> None:
        """Check one line (``env``: its envelope); ``next_seq`` is the seq the following line
        carries (None if none or unparsable), which tells a line whose own seq was changed from
        a line that is missing."""
        self.frames += 1
        sealed = fr.unseal(line)
        if sealed is None or env is None:
            self.problem(self.expect, offset, "not a sealed frame (the line does not parse)")
            self.expect += 1
            self.unsealed_guess = None
            return
        seq = env.seq
        body, digest = sealed
        issues: list[str] = []  # one problem per line, naming everything wrong with it
        if seq != self.expect and next_seq == self.expect + 1:
            issues.append(f"carries seq {seq} where {self.expect} belongs (its seq was changed)")
            seq = self.expect
        elif seq > self.expect:
            missing = f"{self.expect}" if seq == self.expect + 1 else f"{self.expect}–{seq - 1}"
            issues.append(
                f"frame {missing} missing before it (the line before is not seq {seq - 1})"
            )
        elif seq < self.expect:
            issues.append(
                f"seq {seq} again, where {self.expect} belongs (a duplicated or moved line)"
            )
        parent = fr.GENESIS_DIGEST if seq == 0 else self.digests.get(seq - 1)
        computed = fr.chain(parent, body) if parent is not None else None
        guess = self.unsealed_guess
        self.unsealed_guess = None
        if computed is not None and computed != digest:
            self.unsealed_guess = (seq, computed)
            if not (
                guess is not None and guess[0] == seq - 1 and fr.chain(guess[1], body) == digest
            ):
                issues.append("digest does not chain (the frame's bytes were changed)")
            # else: the line before kept its body and lost its digest; it is named already
        self.expect = max(self.expect, seq + 1)
        self.digests[seq] = digest
        if len(self.digests) > _RECENT:
            self.digests.popitem(last=False)
        try:
            frame = fr.decode_frame(line)
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:
            issues.append(f"does not decode: {exc}")
        else:
            if seq == 0 and not (
                isinstance(frame, fr.ThreadCreated) and frame.thread_id in ("", self.thread.id)
            ):
                issues.append("seq 0 is not this thread's thread_created")
            for aid in fr.artifact_refs(frame):
                self.refs.setdefault(aid, f"thread {self.thread.id} seq {seq}")
            if isinstance(frame, fr.JobSpawned):
                self.spawned[frame.job_id] = seq
            elif isinstance(frame, fr.JobEnded):
                self.spawned.pop(frame.job_id, None)
        if issues:
            self.problem(seq, offset, "; ".join(issues))


def _check_tail(check: _LogCheck, tail: bytes, at: int) -> None:
    """Bytes past the committed end are a crash's unfinished batch only if every whole line of
    them is the next frame, chained, marked ``more`` (a torn last line has no newline). Anything
    else there — a copied line, garbage — was put there: a problem."""
    seq = check.expect
    prev = check.digests.get(seq - 1, fr.GENESIS_DIGEST if seq == 0 else None)
    for line in tail.split(b"\n")[:-1]:
        sealed = fr.unseal(line)
        env = fr.envelope(line) if sealed is not None else None
        if sealed is None or env is None:
            what = "is not a frame"
        elif env.seq != seq:
            what = f"is seq {env.seq} where {seq} would come next"
        elif not env.more:
            what = "ends a batch but was never committed"
        elif prev is not None and fr.chain(prev, sealed[0]) != sealed[1]:
            what = "does not chain"
        else:
            prev, seq, at = sealed[1], seq + 1, at + len(line) + 1
            continue
        check.problem(seq, at, f"a line past the last committed frame {what} (not a crash's tail)")
        return


def _verify_log(thread: Thread, report: VerifyReport, refs: dict[str, str]) -> None:
    check = _LogCheck(thread, report, refs)
    log = thread.open_log()
    try:
        if log is None:  # a backend that keeps no bytes: its lines, offsets unknown
            for _offset, line, env, next_seq in _with_next_seq(
                (-1, ln) for _, ln in thread.stored_lines()
            ):
                check.line(-1, line, env, next_seq)
        else:
            with log:
                for offset, line, env, next_seq in _with_next_seq(_lines(log)):
                    check.line(offset, line, env, next_seq)
                size, committed = log.size(), log.end
                if size > committed:
                    _check_tail(check, log.pread(size - committed, committed), committed)
            if size > committed:
                where = "past the last committed frame" if committed else "and no committed frame"
                report.notes.append(
                    f"thread {thread.id}: {size - committed} bytes {where} (a write in progress, "
                    "or a crash's torn tail: the next append quarantines it)"
                )
    finally:
        report.frames += check.frames
        report.threads += check.frames > 0  # a log without a committed frame is no thread yet
    for job_id, seq in sorted(check.spawned.items(), key=lambda kv: kv[1]):
        report.notes.append(
            f"thread {thread.id}: job {job_id} started at seq {seq} and never ended "
            "(it is running, or its process died: the next compaction runs it again)"
        )


def _verify_derived(thread: Thread, report: VerifyReport) -> None:
    """The derived rows of a backend that keeps them (PostgreSQL) against a fresh derivation of
    the frames they cover: any difference is drift (they are written with the frames)."""
    derived = thread.derived()
    if derived is None:
        return
    try:
        found = derived.problems()
    except ContinuityError as exc:
        found = [f"cannot be checked: {exc}"]
    for problem in found:
        report.add(Problem(f"derived rows of thread {thread.id}", problem, thread.id))


def _verify_caches(thread: Thread, report: VerifyReport) -> None:
    if thread.store.cache_dir is None:
        _verify_derived(thread, report)
    if not ThreadIndex.available(thread):
        return
    try:
        found = ThreadIndex(thread).problems()
    except ContinuityError as exc:
        found = [str(exc)]
    except OSError as exc:
        found = [f"cannot be read: {exc}"]
    for problem in found:
        report.add(Problem(f"cache of thread {thread.id}", problem, thread.id))
    from continuity.caches.search_index import ThreadSearchIndex

    try:
        found = ThreadSearchIndex(thread).problems()
    except (ContinuityError, *DAMAGE) as exc:
        found = [f"cannot be checked: {exc}"]
    for problem in found:
        report.add(Problem(f"search index of thread {thread.id}", problem, thread.id))


def _verify_catalog(store: BaseStore, report: VerifyReport, ids: set[str] | None) -> None:
    """The store catalog's rows against the logs they claim to describe."""
    from continuity.caches.catalog import catalog_problems

    try:
        found = catalog_problems(store, ids)
    except OSError as exc:
        found = [(None, f"cannot be read: {exc}")]
    for tid, problem in found:
        where = "store catalog" if tid is None else f"catalog row of thread {tid}"
        report.add(Problem(where, problem, tid))


def _verify_store_search(store: BaseStore, report: VerifyReport) -> None:
    """The store-wide search index against a fresh one of the logs (ADR 0029)."""
    from continuity.caches.store_search import store_search_problems

    try:
        found = store_search_problems(store)
    except (ContinuityError, *DAMAGE) as exc:
        found = [f"cannot be checked: {exc}"]
    for problem in found:
        report.add(Problem("store-wide search index", problem, None))


def verify_store(
    store: BaseStore,
    threads: Sequence[Thread] | None = None,
    *,
    progress: Callable[[str], None] | None = None,
    limit: int | None = None,
) -> VerifyReport:
    """Check logs, artifacts and caches of the given threads (default: every thread, and every
    log that holds bytes without a committed frame); return everything that is wrong, or the
    first ``limit`` problems. Nothing is repaired."""
    report = VerifyReport(limit=limit)
    chosen = (
        [store.thread(tid) for tid in store.stored_thread_ids()] if threads is None else threads
    )
    refs: dict[str, str] = {}
    try:
        for thread in chosen:
            if progress is not None:
                progress(thread.id)
            _verify_log(thread, report, refs)
            _verify_caches(thread, report)
        _verify_catalog(store, report, None if threads is None else {t.id for t in threads})
        if threads is None:
            _verify_store_search(store, report)
        _verify_artifacts(store, report, refs, everything=threads is None)
    except _LimitReached:
        pass
    ids = None if threads is None else {t.id for t in threads}
    report.quarantined = [r for r in store.quarantined() if ids is None or r.thread_id in ids]
    return report


def _verify_artifacts(
    store: BaseStore, report: VerifyReport, refs: dict[str, str], *, everything: bool
) -> None:
    checked: set[str] = set()
    for aid, where in sorted(refs.items()):
        checked.add(aid)
        report.artifacts = len(checked)
        try:
            store.artifacts.verify(aid)
        except ArtifactNotFound:
            report.add(Problem(f"artifact {aid}", f"missing (referenced by {where})"))
        except ArtifactCorrupt as exc:
            report.add(Problem(f"artifact {aid}", f"{exc} (referenced by {where})"))
    if everything:
        for aid in store.artifacts.ids():
            if aid in checked:
                continue
            checked.add(aid)
            report.artifacts = len(checked)
            try:
                store.artifacts.verify(aid)
            except ArtifactCorrupt as exc:
                report.add(Problem(f"artifact {aid}", str(exc)))
    report.artifacts = len(checked)


# --- repair -----------------------------------------------------------------------------------


def first_problem(thread: Thread) -> Problem | None:
    """The first bad line of a thread's log (None when every frame is sound): where a repair
    cuts. Reads the log up to that line only."""
    found = _first_problem(thread)
    return None if found is None else found[0]


def _first_problem(thread: Thread) -> tuple[Problem, int, int] | None:
    """(the first problem, the offset of the batch it is in, how many lines come before that
    batch): a repair cuts whole batches, so that what stays is all committed."""
    report = VerifyReport()
    check = _LogCheck(thread, report, {})
    log = thread.open_log()
    batch_at, batch_lines, batch_ended = 0, 0, True
    with log if log is not None else contextlib.nullcontext():
        if log is None:
            lines: Iterator[tuple[int, bytes]] = ((-1, line) for _, line in thread.stored_lines())
        else:
            lines = _lines(log)
        for offset, line, env, next_seq in _with_next_seq(lines):
            if batch_ended:
                batch_at, batch_lines = offset, check.frames
            check.line(offset, line, env, next_seq)
            if report.problems:
                return report.problems[0], batch_at, batch_lines
            batch_ended = env is None or not env.more
    return None


@dataclass(frozen=True, slots=True)
class Repair:
    """What ``repair_thread`` found and did: the first bad frame, and the tail moved from the
    start of its batch (``recovery``: None for a dry run)."""

    problem: Problem
    offset: int
    frames_kept: int
    bytes_moved: int
    recovery: Recovery | None


def repair_thread(thread: Thread, *, dry_run: bool = False) -> Repair | None:
    """Move a damaged log's tail, from the batch of its first bad frame to its end, into
    quarantine (kept,
    never deleted) and rebuild the thread's caches; the sound frames before it are not touched
    or re-chained, and the next append continues after the last of them. None when the log has
    no bad frame. Frames after the bad one go too: they chain through it, so nothing can vouch
    for them any more (their bytes stay in the quarantine record)."""
    from continuity.caches.search_index import ThreadSearchIndex

    found = _first_problem(thread)
    if found is None:
        return None
    problem, offset, kept = found
    if offset < 0:
        raise NotImplementedError(
            f"thread {thread.id}: {problem.message}; this store keeps its log as rows, and "
            "repair only moves a damaged tail of a log kept as bytes"
        )
    log = thread.open_log()
    size = 0
    if log is not None:
        with log:
            size = log.size()
    if dry_run:
        return Repair(problem, offset, kept, size - offset, None)
    recovery = thread.quarantine_tail(offset, f"repair: {problem.message}")
    if ThreadIndex.available(thread):
        ThreadIndex(thread).rebuild()
        ThreadSearchIndex(thread).rebuild()
    return Repair(problem, offset, kept, recovery.length, recovery)
