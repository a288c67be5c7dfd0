"""Work too long for one request — verifying a long thread or the whole store, the first
search of a long thread (which builds its search index) — run by a few background threads.

A page asks for the work by its key (``("verify", thread_id)`` …): a job with that key still
under way is joined, never started twice; otherwise a new one is queued. The page waits a
moment for it (most work ends in that moment, and the page is the result), else answers at
once with the job's progress and an address to ask again (``?job=<id>``) that gets this very
job, finished or not, for :attr:`Jobs.keep_seconds` after it ended. Without ``?job=`` a
request never gets a finished job's result: a reload checks the store again.

At most ``workers`` jobs run at a time and at most ``limit`` are waiting or running: more is
refused (:class:`Busy`), so no number of requests can make the viewer do unbounded work. The
threads are daemons (a server stopped with Ctrl-C does not wait for a verify to end: what a
killed job leaves behind is a cache the next reader rebuilds) and end when idle.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = ["Busy", "Job", "Jobs", "Status"]

IDLE_SECONDS: Final = 30.0
"""A worker thread with nothing to do for this long ends (the next job starts another)."""


class Busy(Exception):
    """Too many jobs are waiting or running: the request is refused, not queued."""


@dataclass(frozen=True, slots=True)
class Status:
    """What a page shows of a job that has not ended (or has, between two looks)."""

    job: str
    what: str
    state: str
    """queued, running, done or failed."""
    phase: str
    done: int
    total: int
    """0: the phase has no count (the page shows time only)."""
    unit: str
    seconds: float
    """Since the job was asked for."""
    waiting_for: list[str]
    """For a queued job: what the workers are busy with."""


@dataclass(eq=False)
class Job:
    key: Hashable
    what: str
    """What the job does, for a person: ``verifying thread t``."""
    id: str = field(default_factory=lambda: secrets.token_urlsafe(9))
    state: str = "queued"
    progress: tuple[str, int, int, str] = ("waiting for a free worker", 0, 0, "")
    """(phase, done, total, unit), replaced whole by :meth:`tell` (one assignment: a reader in
    another thread never sees half of an update)."""
    asked: float = field(default_factory=time.monotonic)
    ended: float | None = None
    result: Any = None
    error: BaseException | None = None
    finished: threading.Event = field(default_factory=threading.Event)

    def tell(self, phase: str, done: int = 0, total: int = 0, unit: str = "") -> None:
        """Progress, from the work (any thread)."""
        self.progress = (phase, done, total, unit)

    def wait(self, seconds: float) -> bool:
        """Whether the job has ended, waiting at most ``seconds`` for it."""
        return self.finished.wait(seconds) if seconds > 0 else self.finished.is_set()

    def outcome(self) -> Any:
        """The work's result, or the exception it raised, raised again."""
        if self.error is not None:
            raise self.error
        return self.result


class Jobs:
    def __init__(
        self, workers: int = 2, *, limit: int = 16, keep_seconds: float = 120.0, keep: int = 64
    ) -> None:
        if workers < 1 or limit < 1:
            raise ValueError("a viewer needs at least one worker and room for one job")
        self.workers = workers
        self.limit = limit
        self.keep_seconds = keep_seconds
        self.keep = keep
        self._cond = threading.Condition()
        self._waiting: deque[tuple[Job, Callable[[Job], Any]]] = deque()
        self._running: list[Job] = []
        self._current: dict[Hashable, Job] = {}
        """The job under way for each key (queued or running)."""
        self._by_id: dict[str, Job] = {}
        self._alive = 0
        self._idle = 0

    def submit(
        self, key: Hashable, what: str, work: Callable[[Job], Any], *, job_id: str | None = None
    ) -> Job:
        """The job ``job_id`` names (when it is one for ``key``), or the one under way for
        ``key``, or a new one running ``work(job)``."""
        with self._cond:
            self._forget_old()
            named = self._by_id.get(job_id) if job_id else None
            if named is not None and named.key == key:
                return named
            current = self._current.get(key)
            if current is not None:
                return current
            if len(self._current) >= self.limit:
                busy = ", ".join(j.what for j in self._running) or "queued work"
                raise Busy(
                    f"the viewer has {len(self._current)} long jobs under way ({busy}); "
                    "try again in a moment"
                )
            job = Job(key, what)
            self._current[key] = job
            self._by_id[job.id] = job
            self._waiting.append((job, work))
            if self._idle == 0 and self._alive < self.workers:
                self._alive += 1
                threading.Thread(
                    target=self._work, name="continuity-viewer-job", daemon=True
                ).start()
            else:
                self._cond.notify()
            return job

    def status(self, job: Job) -> Status:
        phase, done, total, unit = job.progress
        with self._cond:
            waiting_for = [j.what for j in self._running] if job.state == "queued" else []
        end = job.ended if job.ended is not None else time.monotonic()
        return Status(
            job.id, job.what, job.state, phase, done, total, unit, end - job.asked, waiting_for
        )

    def _forget_old(self) -> None:
        ended = sorted(
            (j for j in self._by_id.values() if j.ended is not None), key=lambda j: j.ended or 0
        )
        cutoff = time.monotonic() - self.keep_seconds
        drop = [j for j in ended if (j.ended or 0) < cutoff]
        drop += ended[len(drop) : max(len(drop), len(ended) - self.keep)]
        for j in drop:
            self._by_id.pop(j.id, None)

    def _next(self) -> tuple[Job, Callable[[Job], Any]] | None:
        """The next job to run (None: none came while the worker idled, and it ends)."""
        with self._cond:
            self._idle += 1
            try:
                while not self._waiting:
                    if not self._cond.wait(IDLE_SECONDS) and not self._waiting:
                        self._alive -= 1
                        return None
                job, work = self._waiting.popleft()
                job.state = "running"
                job.tell("starting")
                self._running.append(job)
                return job, work
            finally:
                self._idle -= 1

    def _work(self) -> None:
        while (taken := self._next()) is not None:
            job, work = taken
            try:
                job.result = work(job)
                job.state = "done"
            except BaseException as exc:
                job.error = exc
                job.state = "failed"
                if not isinstance(exc, Exception):  # the thread ends: another takes its place
                    with self._cond:
                        self._alive -= 1
                    raise
            finally:
                with self._cond:
                    job.ended = time.monotonic()
                    self._running.remove(job)
                    if self._current.get(job.key) is job:
                        del self._current[job.key]
                job.finished.set()
