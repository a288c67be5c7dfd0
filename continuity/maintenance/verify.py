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

import binascii
import contextlib
import itertools
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Final, NamedTuple, cast

import blake3
import msgspec

from continuity import frames as fr
from continuity._fs import read_checked
from continuity.caches.catalog import (
    CatalogRow,
    Facts,
    catalog_problems,
    rebuild_catalog,
    row_of,
    wants_last_message,
)
from continuity.caches.thread_index import DAMAGE, IndexDelta, IndexRun, ThreadIndex
from continuity.errors import ArtifactCorrupt, ArtifactNotFound, ContinuityError, CorruptFrame
from continuity.maintenance.bulk import available_jobs, batches, log_sizes, run_tasks, worker_store
from continuity.redaction import redaction_count
from continuity.store.base import BaseStore, LogReader, Recovery, Thread, split_lines
from continuity.store.derived import sort_frames

__all__ = ["Problem", "Repair", "VerifyReport", "first_problem", "repair_thread", "verify_store"]

_CHUNK: Final = 1 << 20
_TICK: Final = 1 << 15
"""Frames between two progress calls within one log."""
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

    def add(self, problem: Problem, at: int | None = None) -> None:
        """Record a problem (``at``: how many of its log's lines were checked by then, for a
        worker's record of it; the report itself does not keep it)."""
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


def _probe(line: bytes) -> tuple[fr.Envelope | None, fr.Frame | str]:
    """A line's envelope and its frame (or why it does not decode), from one decode when the
    line is sound: the frame carries the envelope's fields."""
    try:
        frame = fr.decode_frame(line)
    except msgspec.DecodeError as exc:
        return fr.envelope(line), f"does not decode: {exc}"
    seq = frame.seq
    return (fr.Envelope(seq, frame.more) if seq >= 0 else None), frame


def _with_next_seq(
    lines: Iterator[tuple[int, bytes]],
) -> Iterator[tuple[int, bytes, fr.Envelope | None, int | None, fr.Frame | str]]:
    """Each (offset, line) with its envelope, the seq of the line after it (None: last, or
    unparsable) and its decoded frame (or why it does not decode); every line is decoded once."""
    prev: tuple[int, bytes, fr.Envelope | None, fr.Frame | str] | None = None
    for offset, line in lines:
        env, frame = _probe(line)
        if prev is not None:
            yield prev[0], prev[1], prev[2], None if env is None else env.seq, prev[3]
        prev = (offset, line, env, frame)
    if prev is not None:
        yield prev[0], prev[1], prev[2], None, prev[3]


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
    # What the store catalog's row says of the log (ADR 0028), gathered in the same pass; only
    # used when the log has no problem (``sound``).
    sound: bool = True
    first: fr.Frame | None = None
    last: fr.Frame | None = None
    last_message_ms: int | None = None
    messages: int = 0
    cut_rules: list[str] = field(default_factory=list)
    redactions: int = 0

    def problem(self, seq: int | None, offset: int, what: str) -> None:
        where = f"seq {seq}" if seq is not None else "a line of unknown seq"
        self.sound = False
        self.report.add(
            Problem(
                f"thread {self.thread.id}",
                f"{where}, byte offset {offset}: {what}",
                self.thread.id,
                seq,
                offset,
            ),
            self.frames,
        )

    def facts(self) -> Facts:
        last_message_ms = self.last_message_ms
        if not wants_last_message(self.thread.id, self.first):
            last_message_ms = None
        return Facts(
            self.first,
            self.last,
            last_message_ms,
            self.messages,
            self.cut_rules,
            self.redactions,
        )

    def line(
        self,
        offset: int,
        line: bytes,
        env: fr.Envelope | None,
        next_seq: int | None,
        decoded: fr.Frame | str,
    ) -> None:
        """Check one line (``env``: its envelope, ``decoded``: its frame or why it does not
        decode); ``next_seq`` is the seq the following line carries (None if none or
        unparsable), which tells a line whose own seq was changed from a line that is
        missing. One problem a line, naming everything wrong with it."""
        self.frames += 1
        sealed = fr.unseal(line)
        if sealed is None or env is None:
            self.problem(self.expect, offset, "not a sealed frame (the line does not parse)")
            self.expect += 1
            self.unsealed_guess = None
            return
        seq, issues = self._placed(env.seq, next_seq)
        issues += self._chained(seq, *sealed)
        if isinstance(decoded, str):
            issues.append(decoded)
        else:
            issues += self._take(seq, decoded)
        if issues:
            self.problem(seq, offset, "; ".join(issues))

    def _placed(self, seq: int, next_seq: int | None) -> tuple[int, list[str]]:
        """Where a line carrying ``seq`` belongs (its seq, or the expected one when only its seq
        was changed), and what is wrong with its place; the seq expected next moves past it."""
        issues = []
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
        self.expect = max(self.expect, seq + 1)
        return seq, issues

    def _chained(self, seq: int, body: bytes, digest: bytes) -> list[str]:
        """Whether frame ``seq``'s body and stored digest chain from its parent's; its digest is
        kept for the lines after it."""
        issues = []
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
        self.digests[seq] = digest
        if len(self.digests) > _RECENT:
            self.digests.popitem(last=False)
        return issues

    def _take(self, seq: int, frame: fr.Frame) -> list[str]:
        """What the catalog row, the artifact check and the job notes need of a decoded frame;
        what is wrong with it (seq 0 must be this thread's ``thread_created``)."""
        if self.first is None:
            self.first = frame
        self.last = frame
        if isinstance(frame, fr.MessageAppended):
            self.messages += 1
            self.last_message_ms = frame.ts_ms
        elif isinstance(frame, fr.CompactionCheckpointCreated):
            self.cut_rules.append(frame.cut_rule_id)
        elif isinstance(frame, fr.JobSpawned):
            self.spawned[frame.job_id] = seq
        elif isinstance(frame, fr.JobEnded):
            self.spawned.pop(frame.job_id, None)
        self.redactions += redaction_count(frame)
        for aid in fr.artifact_refs(frame):
            self.refs.setdefault(aid, f"thread {self.thread.id} seq {seq}")
        if seq == 0 and not (
            isinstance(frame, fr.ThreadCreated) and frame.thread_id in ("", self.thread.id)
        ):
            return ["seq 0 is not this thread's thread_created"]
        return []


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


Row = tuple[CatalogRow, bool]
"""A catalog row read from a whole log, and whether the log was at rest (ADR 0028)."""


def _verify_log(
    thread: Thread,
    report: VerifyReport,
    refs: dict[str, str],
    tick: Callable[[int], None] | None = None,
) -> Row | None:
    """Check every line of a thread's log; the thread's catalog row, read in the same pass,
    when the log is sound (None otherwise: the catalog check reads it again). ``tick`` is told
    the report's frames checked so far every :data:`_TICK` frames (a long log's progress)."""
    check = _LogCheck(thread, report, refs)
    log = thread.open_log()
    size = committed = -1
    kept = 0  # a backend that keeps no bytes: what its lines would be as a log
    try:
        if log is None:  # a backend that keeps no bytes: its lines, offsets unknown
            for _offset, line, env, next_seq, frame in _with_next_seq(
                (-1, ln) for _, ln in thread.stored_lines()
            ):
                check.line(-1, line, env, next_seq, frame)
                kept += len(line) + 1
        else:
            with log:
                try:
                    for offset, line, env, next_seq, frame in _with_next_seq(_lines(log)):
                        check.line(offset, line, env, next_seq, frame)
                        if tick is not None and not check.frames % _TICK:
                            tick(report.frames + check.frames)
                except CorruptFrame as exc:  # a cold segment that cannot be read (ADR 0057)
                    check.problem(exc.seq, exc.offset, exc.reason)
                    return None
                size, committed = log.size(), log.end
                if size > committed:
                    _check_tail(check, log.pread(size - committed, committed), committed)
            if size > committed:
                report.notes.append(_tail_note(thread.id, size, committed))
    finally:
        report.frames += check.frames
        report.threads += check.frames > 0  # a log without a committed frame is no thread yet
    report.notes += _job_notes(thread.id, check.spawned)
    if not check.sound:
        return None
    if log is None:  # its row from this pass; the catalog check uses it for the same head
        return row_of(thread.id, check.facts(), kept), False
    at_rest = check.last is not None and size == committed and _still(thread, size)
    return row_of(thread.id, check.facts(), size), at_rest


def _tail_note(thread_id: str, size: int, committed: int) -> str:
    where = "past the last committed frame" if committed else "and no committed frame"
    return (
        f"thread {thread_id}: {size - committed} bytes {where} (a write in progress, "
        "or a crash's torn tail: the next append quarantines it)"
    )


def _job_notes(thread_id: str, spawned: dict[str, int]) -> list[str]:
    return [
        f"thread {thread_id}: job {job_id} started at seq {seq} and never ended "
        "(it is running, or its process died: the next compaction runs it again)"
        for job_id, seq in sorted(spawned.items(), key=lambda kv: kv[1])
    ]


def _still(thread: Thread, size: int) -> bool:
    """Whether the log, opened again, still has ``size`` bytes (it did not grow while read)."""
    log = thread.open_log()
    if log is None:
        return False
    with log:
        return log.size() == size


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


def _verify_caches(
    thread: Thread,
    report: VerifyReport,
    fresh: IndexDelta | None = None,
    *,
    index: bool = True,
    search: bool = True,
) -> None:
    """The thread's caches against its log (``fresh``: an index of the log made while it was
    checked; ``index`` and ``search`` choose the thread index and the search index)."""
    if index and thread.store.cache_dir is None:
        _verify_derived(thread, report)
    if not ThreadIndex.available(thread):
        return
    if index:
        try:
            found = ThreadIndex(thread).problems(fresh)
        except ContinuityError as exc:
            found = [str(exc)]
        except OSError as exc:
            found = [f"cannot be read: {exc}"]
        for problem in found:
            report.add(Problem(f"cache of thread {thread.id}", problem, thread.id))
    if not search:
        return
    from continuity.retrieval.index import ThreadSearchIndex

    try:
        found = ThreadSearchIndex(thread).problems()
    except (ContinuityError, *DAMAGE) as exc:
        found = [f"cannot be checked: {exc}"]
    for problem in found:
        report.add(Problem(f"search index of thread {thread.id}", problem, thread.id))


def _verify_catalog(
    store: BaseStore, report: VerifyReport, ids: set[str] | None, rows: dict[str, Row]
) -> None:
    """The store catalog's rows against the logs they claim to describe (``rows``: those read
    while the logs were checked)."""
    try:
        found = catalog_problems(store, ids, rows)
    except OSError as exc:
        found = [(None, f"cannot be read: {exc}")]
    for tid, problem in found:
        where = "store catalog" if tid is None else f"catalog row of thread {tid}"
        report.add(Problem(where, problem, tid))


def _verify_store_search(store: BaseStore, report: VerifyReport) -> None:
    """The store-wide search index against a fresh one of the logs (ADR 0029)."""
    from continuity.retrieval.store_index import store_search_problems

    try:
        found = store_search_problems(store)
    except (ContinuityError, *DAMAGE) as exc:
        found = [f"cannot be checked: {exc}"]
    for problem in found:
        report.add(Problem("store-wide search index", problem, None))


CHECKED_FOLDERS: Final = ("claude-code",)
"""Folders of ``cache/`` whose ``*.json`` files are written with a checksum (ingest cursors,
hook session state: :func:`continuity._fs.write_checked`)."""


def _verify_checked_files(store: BaseStore, report: VerifyReport) -> None:
    """Every small checksummed cache file (cursors, hook state) that fails its checksum: the
    next ingest would read its transcript again (nothing is lost; the damage is named)."""
    cache = store.cache_dir
    if cache is None:
        return
    for folder in CHECKED_FOLDERS:
        for path in sorted((cache / folder).rglob("*.json")):
            where = f"cache file {path.relative_to(cache)}"
            try:
                read_checked(path)  # None: an older version's, without a checksum: not damage
            except OSError as exc:
                report.add(Problem(where, f"unreadable: {exc}"))
            except ValueError as exc:
                report.add(Problem(where, f"{exc} (the next ingest reads its transcript again)"))


def _leftover(tid: str, deleted: dict[str, int]) -> str:
    if tid in deleted:
        return (
            f"left over from the deletion of thread {tid} at {_when(deleted[tid])} "
            f"(`continuity delete {tid}` finishes it)"
        )
    return (
        f"derived data of thread {tid}, which has no log and no tombstone "
        "(lost, or removed by hand)"
    )


def _when(ms: int) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _verify_forgetting(store: BaseStore, report: VerifyReport) -> None:
    """Deletions (ADR 0040): a tombstoned thread with no log is deleted, not lost (a note); one
    whose log is there again is a problem; derived data of a thread with no log (cache
    folders, catalog rows, vectors, a server's derived and search rows) is orphaned."""
    from continuity.caches.catalog import catalog_ids
    from continuity.retrieval.vectors import orphaned_vectors

    logs = set(store.stored_thread_ids())
    deleted = {t.thread_id: t.time_ms for t in store.tombstones()}
    gone = sorted(set(deleted) - logs)
    if gone:
        report.notes.append(
            f"{len(gone)} deleted thread{'s' if len(gone) != 1 else ''} (tombstones; not problems)"
        )
    for tid in sorted(set(deleted) & logs):
        report.add(
            Problem(
                f"thread {tid}",
                f"deleted at {_when(deleted[tid])} (tombstone) but its log is there: a deletion "
                f"cut short or a log brought back (`continuity delete {tid}` removes it)",
                tid,
            )
        )
    for line in store.orphaned_rows():
        report.add(Problem("orphaned derived rows", line))
    cache = store.cache_dir
    if cache is None:
        return
    folder = cache / "threads"
    for tid in sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else ():
        if tid not in logs:
            report.add(Problem(f"cache of thread {tid}", _leftover(tid, deleted), tid))
    for tid in sorted(catalog_ids(store) - logs):
        report.add(Problem(f"catalog row of thread {tid}", _leftover(tid, deleted), tid))
    for tid, model in orphaned_vectors(store, logs):
        report.add(Problem(f"vectors of thread {tid} ({model})", _leftover(tid, deleted), tid))
    _verify_vectors(store, report)


def _verify_vectors(store: BaseStore, report: VerifyReport) -> None:
    """Each model's vector cache (ADR 0033): which model, how current (a note: a cache is
    caught up by the next search, or ``continuity index``); records that do not match their
    digest, or a manifest in another model's folder, are problems (never read, re-embedded)."""
    from continuity.retrieval.vectors import vector_caches

    for v in vector_caches(store):
        name = v.folder.rsplit("/", 1)[-1]
        if v.model is None:
            report.notes.append(f"vectors {name}: no manifest that reads (embedded again on use)")
            continue
        report.notes.append(
            f"vectors of model {v.model}: {v.current} thread(s) current, {v.behind} behind their "
            f"logs, {v.missing} not embedded yet (`continuity index --model` catches up)"
        )
        if v.damaged:
            report.add(
                Problem(
                    f"vectors of model {v.model}",
                    f"{v.damaged} thread(s) whose records do not match their digest "
                    "(never trusted: embedded again by the next search)",
                )
            )
        if v.misplaced:
            report.add(
                Problem(
                    f"vector cache {name}",
                    f"its manifest names model {v.model}, whose vectors belong in another "
                    "folder: never read (delete the folder)",
                )
            )


def _ticker(
    on_progress: Callable[[int, int, int], None] | None, done: int, threads: int
) -> Callable[[int], None] | None:
    """Progress within a thread: (threads done before it, threads, frames checked so far)."""
    if on_progress is None:
        return None
    return lambda frames: on_progress(done, threads, frames)


def verify_store(
    store: BaseStore,
    threads: Sequence[Thread] | None = None,
    *,
    progress: Callable[[str], None] | None = None,
    limit: int | None = None,
    jobs: int | None = 1,
    on_progress: Callable[[int, int, int], None] | None = None,
) -> VerifyReport:
    """Check logs, artifacts and caches of the given threads (default: every thread, and every
    log that holds bytes without a committed frame); return everything that is wrong, or the
    first ``limit`` problems. Nothing is repaired.

    ``jobs`` > 1 (None: one per core) checks threads, and byte ranges of long logs, in worker
    processes (ADR 0030); the report is the same whatever their number. ``on_progress(threads
    done, threads, frames done)`` is called as threads are checked."""
    report = VerifyReport(limit=limit)
    chosen = (
        [store.thread(tid) for tid in store.stored_thread_ids()] if threads is None else threads
    )
    refs: dict[str, str] = {}
    rows: dict[str, Row] = {}
    n_jobs = available_jobs(jobs)
    search_found: list[Problem] | None = None
    try:
        # Workers are forked with the open store: only for logs kept as files (a server
        # backend's connection must not be shared by several processes).
        if n_jobs > 1 and len(chosen) > 0 and store.cache_dir is not None:
            search_found = _verify_in_workers(
                store, chosen, report, refs, rows, n_jobs, threads is None, on_progress
            )
        elif limit is None and len(chosen) > 1 and (many := store.read_many(chosen)) is not None:
            # A server's logs: one pass over the store reads every thread (ADR 0063).
            _verify_many(many, chosen, report, refs, rows, progress, on_progress)
        elif n_jobs > 1 and len(chosen) > 1 and limit is None:
            # A server's logs: the checks wait on the server, not the CPU; threads share the
            # store's connection pool (ADR 0054).
            _verify_in_threads(
                chosen, report, refs, rows, min(2 * n_jobs, 4), progress, on_progress
            )
        else:
            for done, thread in enumerate(chosen, start=1):
                if progress is not None:
                    progress(thread.id)
                tick = _ticker(on_progress, done - 1, len(chosen))
                row = _verify_log(thread, report, refs, tick)
                if row is not None:
                    rows[thread.id] = row
                _verify_caches(thread, report)
                if on_progress is not None:
                    on_progress(done, len(chosen), report.frames)
        _verify_catalog(store, report, None if threads is None else {t.id for t in threads}, rows)
        if search_found is not None:
            for problem in search_found:
                report.add(problem)
        elif threads is None:
            _verify_store_search(store, report)
        if threads is None:
            _verify_checked_files(store, report)
            _verify_forgetting(store, report)
        _verify_artifacts(store, report, refs, everything=threads is None)
    except _LimitReached:
        pass
    ids = None if threads is None else {t.id for t in threads}
    report.quarantined = [r for r in store.quarantined() if ids is None or r.thread_id in ids]
    return report


def _verify_many(
    many: AbstractContextManager[Iterator[Thread]],
    chosen: Sequence[Thread],
    report: VerifyReport,
    refs: dict[str, str],
    rows: dict[str, Row],
    progress: Callable[[str], None] | None,
    on_progress: Callable[[int, int, int], None] | None,
) -> None:
    """Each thread's log and derived data checked as the store's pass hands it out (in its own
    order); the findings added in the threads' order, so the report is the serial one's."""
    results: dict[str, tuple[VerifyReport, dict[str, str], Row | None]] = {}
    frames = 0
    with many as threads:
        for thread in threads:
            if progress is not None:
                progress(thread.id)
            part = VerifyReport()
            found: dict[str, str] = {}
            row = _verify_log(thread, part, found)
            _verify_caches(thread, part)
            results[thread.id] = (part, found, row)
            frames += part.frames
            if on_progress is not None:
                on_progress(len(results), len(chosen), frames)
    for thread in chosen:
        part, found, row = results[thread.id]
        for problem in part.problems:
            report.add(problem)
        report.frames += part.frames
        report.threads += part.threads
        report.notes += part.notes
        for aid, where in found.items():
            refs.setdefault(aid, where)
        if row is not None:
            rows[thread.id] = row


def _verify_in_threads(
    chosen: Sequence[Thread],
    report: VerifyReport,
    refs: dict[str, str],
    rows: dict[str, Row],
    workers: int,
    progress: Callable[[str], None] | None,
    on_progress: Callable[[int, int, int], None] | None,
) -> None:
    """Each thread's log and derived data checked in one of ``workers`` threads (a store whose
    logs are on a server, used through its pool); the findings added in the threads' order, so
    the report is the serial one's."""
    from concurrent.futures import ThreadPoolExecutor

    def one(thread: Thread) -> tuple[VerifyReport, dict[str, str], Row | None]:
        part = VerifyReport()
        found: dict[str, str] = {}
        row = _verify_log(thread, part, found)
        _verify_caches(thread, part)
        return part, found, row

    with ThreadPoolExecutor(workers, thread_name_prefix="verify") as pool:
        results = pool.map(one, chosen)
        for done, (thread, (part, found, row)) in enumerate(
            zip(chosen, results, strict=True), start=1
        ):
            if progress is not None:
                progress(thread.id)
            for problem in part.problems:
                report.add(problem)
            report.frames += part.frames
            report.threads += part.threads
            report.notes += part.notes
            for aid, where in found.items():
                refs.setdefault(aid, where)
            if row is not None:
                rows[thread.id] = row
            if on_progress is not None:
                on_progress(done, len(chosen), report.frames)


# --- in worker processes (ADR 0030) ------------------------------------------------------------

_SPLIT: Final = 16 << 20
"""A log this long (bytes) is checked in byte ranges by several workers."""
_RANGE_MIN: Final = 8 << 20


class _Recorder(VerifyReport):
    """A worker's report: every problem kept with how far its log was checked by then."""

    def __init__(self) -> None:
        super().__init__()
        self.marks: list[int] = []

    def add(self, problem: Problem, at: int | None = None) -> None:
        self.problems.append(problem)
        self.marks.append(-1 if at is None else at)


@dataclass(slots=True)
class _ThreadResult:
    """One thread's check, as a worker found it, to be replayed into the report in order."""

    thread_id: str
    log_problems: list[tuple[Problem, int]]
    frames: int
    notes: list[str]
    refs: list[tuple[str, str]]
    row: Row | None
    cache_problems: list[Problem]
    """Of its caches (a long log's search index is checked by a task of its own)."""


def _check_thread(thread: Thread, *, search: bool = True) -> _ThreadResult:
    """The in-process check of one thread, recorded (the reference path, run in a worker;
    ``search``: its search index too)."""
    log_report = _Recorder()
    refs: dict[str, str] = {}
    row = _verify_log(thread, log_report, refs)
    return _ThreadResult(
        thread.id,
        list(zip(log_report.problems, log_report.marks, strict=True)),
        log_report.frames,
        log_report.notes,
        list(refs.items()),
        row,
        _cache_problems(thread, search=search),
    )


def _cache_problems(thread: Thread, *, index: bool = True, search: bool = True) -> list[Problem]:
    cache_report = _Recorder()
    _verify_caches(thread, cache_report, index=index, search=search)
    return cache_report.problems


def _replay(report: VerifyReport, result: _ThreadResult, refs: dict[str, str]) -> None:
    """Add a worker's findings to the report as the in-process check would have."""
    for problem, at in result.log_problems:
        try:
            report.add(problem)
        except _LimitReached:
            report.frames += at
            report.threads += at > 0
            raise
    report.frames += result.frames
    report.threads += result.frames > 0
    report.notes += result.notes
    for aid, where in result.refs:
        refs.setdefault(aid, where)
    for problem in result.cache_problems:
        report.add(problem)


class _Range(NamedTuple):
    """What a worker found in a byte range of a sound log (a damaged one gives None)."""

    first_seq: int
    parent: bytes
    last_digest: bytes
    frames: int
    first: fr.Frame | None
    last: fr.Frame | None
    last_message_ms: int | None
    messages: int
    cut_rules: list[str]
    redactions: int
    refs: list[tuple[str, str]]
    jobs: list[tuple[bool, str, int]]  # (spawned, job id, seq), in log order
    entries: IndexRun  # the thread index's entries of these frames


_OPEN: Final = b',"digest":"'
_FEW: Final = 64


def _check_range(thread: Thread, start: int, end: int) -> _Range | None:
    """Check the lines in ``[start, end)`` (line boundaries) of a log for the sound case only:
    every line sealed, decoding, in seq order and chaining from the stored digest of the line
    before ``start``. At the first line that is not, give up (None): the whole log is then
    checked line by line, which names every problem."""
    log = thread.open_log()
    if log is None:
        return None
    with log:
        check = _RangeCheck.starting(thread.id, log, start)
        if check is None:
            return None
        for pos, lines in _range_chunks(log, start, end):
            if lines is None or not check.take(pos, lines):
                return None
    return check.result()


def _range_chunks(log: LogReader, start: int, end: int) -> Iterator[tuple[int, list[bytes] | None]]:
    """(offset, lines without their newlines) of ``[start, end)``, a few MB at a time (a
    longer line alone); None for lines that do not end, and nothing after them."""
    pos = start
    while pos < end:
        chunk = log.pread(min(_CHUNK * 4, end - pos), pos)
        cut = chunk.rfind(b"\n") + 1
        if cut == 0:  # a line longer than the chunk
            cut = log.line_end(pos, end) - pos
            chunk = log.pread(cut, pos)
            if not chunk.endswith(b"\n"):
                yield pos, None
                return
        yield pos, chunk[: cut - 1].split(b"\n")
        pos += cut


@dataclass(slots=True)
class _RangeCheck:
    """The state of :func:`_check_range`, a chunk of lines at a time: each chunk's lines
    checked (:meth:`_sound_frames`), what the thread's catalog row, artifacts and jobs need of
    its frames (:meth:`_gather`), and their index entries."""

    thread_id: str
    parent: bytes
    """The digest the next line chains from."""
    seq: int
    """The seq the next line carries (-1: whatever the range's first line carries)."""
    first_parent: bytes = b""
    first_seq: int = -1
    frames: int = 0
    first: fr.Frame | None = None
    last: fr.Frame | None = None
    last_message_ms: int | None = None
    messages: int = 0
    cut_rules: list[str] = field(default_factory=list)
    redactions: int = 0
    refs: list[tuple[str, str]] = field(default_factory=list)
    jobs: list[tuple[bool, str, int]] = field(default_factory=list)
    index: IndexRun = field(default_factory=IndexRun)

    def __post_init__(self) -> None:
        self.first_parent, self.first_seq = self.parent, self.seq

    @classmethod
    def starting(cls, thread_id: str, log: LogReader, start: int) -> _RangeCheck | None:
        """The check of a range from ``start``: chained from the digest stored at the end of the
        line before it (None: there is none to read)."""
        if start == 0:
            return cls(thread_id, fr.GENESIS_DIGEST, 0)
        suffix = fr.SEAL_SUFFIX_LEN
        stored = fr.stored_digest(log.pread(suffix, start - 1 - suffix))
        return None if stored is None else cls(thread_id, stored, -1)

    def take(self, pos: int, lines: list[bytes]) -> bool:
        """Check and take in the lines of a chunk that starts at byte ``pos``; False when one is
        not sound. A few lines at a time: their frames are still in the CPU's caches when they
        are gathered and indexed."""
        starts = list(accumulate(map((1).__add__, map(len, lines[:-1])), initial=pos))
        for i in range(0, len(lines), _FEW):
            frames = self._sound_frames(lines[i : i + _FEW])
            if frames is None:
                return False
            self._gather(frames)
            self.index.add(starts[i : i + _FEW], sort_frames(frames), self.seq - 1)
        return True

    def _sound_frames(self, lines: list[bytes]) -> list[fr.Frame] | None:
        """The lines' frames, each line checked to be sealed, decoding, the next seq and chained
        from the one before: one decode and one hash a line. None at the first that is not."""
        suffix = fr.SEAL_SUFFIX_LEN
        hex_at = len(_OPEN)
        hexlify = binascii.hexlify
        hasher = blake3.blake3
        decode = fr.decode_frame
        parent, seq = self.parent, self.seq
        frames: list[fr.Frame] = []
        for line in lines:
            at = len(line) - suffix
            if at <= 0 or line[at : at + hex_at] != _OPEN or not line.endswith(b'"}'):
                return None
            try:
                frame = decode(line)
            except msgspec.DecodeError:
                return None
            if seq < 0:
                seq = self.first_seq = frame.seq
            if frame.seq != seq or seq < 0:
                return None
            digest = hasher(parent + line[:at] + b"}").digest()
            if hexlify(digest) != line[at + hex_at : -2]:
                return None
            if seq == 0 and not (
                isinstance(frame, fr.ThreadCreated) and frame.thread_id in ("", self.thread_id)
            ):
                return None
            frames.append(frame)
            parent = digest
            seq += 1
        self.parent, self.seq = parent, seq
        return frames

    def _gather(self, frames: list[fr.Frame]) -> None:
        """What the catalog row, the artifact check and the job notes need of sound frames."""
        where = f"thread {self.thread_id} seq"
        messages = redactions = 0
        for frame in frames:
            if isinstance(frame, fr.MessageAppended):
                messages += 1
                self.last_message_ms = frame.ts_ms
            elif isinstance(frame, fr.CompactionCheckpointCreated):
                self.cut_rules.append(frame.cut_rule_id)
            elif isinstance(frame, fr.JobSpawned):
                self.jobs.append((True, frame.job_id, frame.seq))
            elif isinstance(frame, fr.JobEnded):
                self.jobs.append((False, frame.job_id, frame.seq))
            for aid in fr.artifact_refs(frame):
                self.refs.append((aid, f"{where} {frame.seq}"))
            redactions += redaction_count(frame)
        if frames:
            if self.first is None:
                self.first = frames[0]
            self.last = frames[-1]
        self.frames += len(frames)
        self.messages += messages
        self.redactions += redactions

    def result(self) -> _Range:
        return _Range(
            self.first_seq,
            self.first_parent,
            self.parent,
            self.frames,
            self.first,
            self.last,
            self.last_message_ms,
            self.messages,
            self.cut_rules,
            self.redactions,
            self.refs,
            self.jobs,
            self.index,
        )


def _merge_ranges(thread: Thread, parts: list[_Range | None], end: int) -> _ThreadResult | None:
    """One thread's result from its ranges, or None when a range was not sound, the ranges
    do not join or the log changed since: then the log is checked in full, line by line."""
    sound = _joined(parts)
    if sound is None or not _at_rest(thread, end):
        return None
    spawned: dict[str, int] = {}
    refs: list[tuple[str, str]] = []
    last_message_ms = None
    for part in sound:
        for started, job_id, seq in part.jobs:
            if started:
                spawned[job_id] = seq
            else:
                spawned.pop(job_id, None)
        refs += part.refs
        if part.last_message_ms is not None:
            last_message_ms = part.last_message_ms
    first = sound[0].first
    if not wants_last_message(thread.id, first):
        last_message_ms = None
    facts = Facts(
        first,
        sound[-1].last,
        last_message_ms,
        sum(p.messages for p in sound),
        [r for p in sound for r in p.cut_rules],
        sum(p.redactions for p in sound),
    )
    frames = sum(p.frames for p in sound)
    row = row_of(thread.id, facts, end), _still(thread, end)
    fresh = IndexRun.joined([p.entries for p in sound], sound[-1].last_digest.hex(), end)
    cache_report = _Recorder()
    _verify_caches(thread, cache_report, fresh, search=False)
    return _ThreadResult(
        thread.id, [], frames, _job_notes(thread.id, spawned), refs, row, cache_report.problems
    )


def _joined(parts: list[_Range | None]) -> list[_Range] | None:
    """The ranges, when each is sound and they join up from seq 0 (each starts at the seq
    after the last one's and chains from its digest); None otherwise."""
    sound: list[_Range] = []
    for part in parts:
        if part is None or part.frames == 0:
            return None
        if sound:
            prev = sound[-1]
            if part.first_seq != prev.first_seq + prev.frames or part.parent != prev.last_digest:
                return None
        elif part.first_seq != 0:
            return None
        sound.append(part)
    return sound


def _at_rest(thread: Thread, end: int) -> bool:
    """Whether the log still ends at ``end``, committed (it did not grow, and has no tail past
    its committed end): what its ranges were cut from."""
    log = thread.open_log()
    if log is None:
        return False
    with log:
        return log.size() == end and log.end == end


def _ranges(thread: Thread, jobs: int) -> list[tuple[int, int]] | None:
    """Byte ranges of a long log, each starting at a line boundary; None for a short log."""
    log = thread.open_log()
    if log is None:
        return None
    with log:
        end = log.end
        if end < _SPLIT or log.size() != end:
            return None
        n = max(2, min(jobs * 4, end // _RANGE_MIN))
        cuts = [0]
        for i in range(1, n):
            at = log.line_end(end * i // n, end)
            if cuts[-1] < at < end:
                cuts.append(at)
        cuts.append(end)
    return list(itertools.pairwise(cuts))


Task = tuple[str, tuple[str, ...], int, int]
"""(kind, thread ids, start, end): ``threads`` (check these threads), ``range`` (a byte range of
one log), ``search`` (one thread's search index), ``store_search`` (the store-wide index)."""


def _run_task(task: Task) -> object:
    store = worker_store()
    kind, ids, start, end = task
    if kind == "threads":
        return [_check_thread(store.thread(tid)) for tid in ids]
    if kind == "range":
        return _check_range(store.thread(ids[0]), start, end)
    if kind == "search":
        return _cache_problems(store.thread(ids[0]), index=False)
    report = _Recorder()
    _verify_store_search(store, report)
    return report.problems


def _verify_in_workers(
    store: BaseStore,
    chosen: Sequence[Thread],
    report: VerifyReport,
    refs: dict[str, str],
    rows: dict[str, Row],
    jobs: int,
    whole_store: bool,
    on_progress: Callable[[int, int, int], None] | None,
) -> list[Problem] | None:
    """The threads checked by worker processes, merged into ``report`` in thread order; the
    store-wide search index's problems (checked by a worker too, for the whole store)."""
    tasks, split = _plan_tasks(store, chosen, jobs, whole_store)
    progress = _Progress(len(chosen), on_progress)
    found = _Found.of(tasks, _run_verify_tasks(store, tasks, jobs, progress))
    for thread in chosen:
        result = found.threads.get(thread.id)
        if result is None:  # a long log: its ranges, or the full check when one was not sound
            result = found.long_log(thread, split[thread.id][-1][1])
            progress.threads_done(1)
        if result.row is not None:
            rows[thread.id] = result.row
        _replay(report, result, refs)
    return found.store_search


def _plan_tasks(
    store: BaseStore, chosen: Sequence[Thread], jobs: int, whole_store: bool
) -> tuple[list[Task], dict[str, list[tuple[int, int]]]]:
    """The tasks, long logs first (their ranges and search indexes spread over the workers),
    then batches of the other threads; and the byte ranges each long log is cut into."""
    tasks: list[Task] = []
    split: dict[str, list[tuple[int, int]]] = {}
    sizes = log_sizes(store, [t.id for t in chosen])
    for thread in chosen:
        ranges = _ranges(thread, jobs) if sizes[thread.id] >= _SPLIT else None
        if ranges is not None:
            split[thread.id] = ranges
            tasks.append(("search", (thread.id,), 0, 0))
    if whole_store:
        tasks.append(("store_search", (), 0, 0))
    for tid, ranges in split.items():
        tasks += [("range", (tid,), a, b) for a, b in ranges]
    small = [t.id for t in chosen if t.id not in split]
    tasks += [("threads", batch, 0, 0) for batch in batches(sizes, small, jobs)]
    return tasks, split


class _Progress:
    """Threads and frames checked so far, told to ``on_progress`` as they grow."""

    def __init__(self, threads: int, on_progress: Callable[[int, int, int], None] | None):
        self.total = threads
        self.on_progress = on_progress
        self.threads = self.frames = 0

    def threads_done(self, threads: int, frames: int = 0) -> None:
        self.threads += threads
        self.frames += frames
        if self.on_progress is not None:
            self.on_progress(self.threads, self.total, self.frames)


def _run_verify_tasks(
    store: BaseStore, tasks: list[Task], jobs: int, progress: _Progress
) -> list[object]:
    """Each task's result, in the order of ``tasks``."""
    results: list[object] = [None] * len(tasks)
    for i, result in run_tasks(store, _run_task, tasks, jobs, "verify"):
        results[i] = result
        kind = tasks[i][0]
        if kind == "threads":
            found = cast(list[_ThreadResult], result)
            progress.threads_done(len(found), sum(r.frames for r in found))
        elif kind == "range" and result is not None:
            progress.threads_done(0, cast(_Range, result).frames)
        else:
            progress.threads_done(0)
    return results


@dataclass(slots=True)
class _Found:
    """The workers' results, by what they are of."""

    threads: dict[str, _ThreadResult] = field(default_factory=dict)
    ranges: dict[str, list[_Range | None]] = field(default_factory=dict)
    """Of each long log, in order."""
    search: dict[str, list[Problem]] = field(default_factory=dict)
    """Of each long log's search index."""
    store_search: list[Problem] | None = None

    @classmethod
    def of(cls, tasks: list[Task], results: list[object]) -> _Found:
        found = cls()
        for (kind, ids, _start, _end), result in zip(tasks, results, strict=True):
            if kind == "threads":
                found.threads.update((r.thread_id, r) for r in cast(list[_ThreadResult], result))
            elif kind == "range":
                found.ranges.setdefault(ids[0], []).append(cast("_Range | None", result))
            elif kind == "search":
                found.search[ids[0]] = cast(list[Problem], result)
            else:
                found.store_search = cast(list[Problem], result)
        return found

    def long_log(self, thread: Thread, end: int) -> _ThreadResult:
        """A long log's result: its ranges merged, or its full check when one was not sound."""
        merged = _merge_ranges(thread, self.ranges[thread.id], end)
        result = merged if merged is not None else _check_thread(thread, search=False)
        result.cache_problems += self.search[thread.id]
        return result


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
        for offset, line, env, next_seq, frame in _with_next_seq(lines):
            if batch_ended:
                batch_at, batch_lines = offset, check.frames
            check.line(offset, line, env, next_seq, frame)
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
    from continuity.retrieval.index import ThreadSearchIndex
    from continuity.retrieval.store_index import drop_store_search

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
    rebuild_catalog(thread.store, {thread.id})  # the log is shorter now, on purpose
    if ThreadIndex.available(thread):
        ThreadIndex(thread).rebuild()
        ThreadSearchIndex(thread).rebuild()
    # The store-wide search index recorded frames the log no longer holds: the next search
    # builds it again (verify would name it as ahead of the log until then).
    drop_store_search(thread.store)
    return Repair(problem, offset, kept, recovery.length, recovery)
