"""How a hook on a server store never waits on a sick server (ADR 0041), for every agent's
hooks: skip a server marked unreachable a moment ago, probe it before the driver is imported,
keep what could not be archived in the store's local folder, and catch all of it up once the
server answers again. The mark and the kept list are :mod:`continuity.store.outage`'s."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from continuity.paths import describe_store, local_dir_of

if TYPE_CHECKING:
    from continuity.store.base import BaseStore
    from continuity.store.outage import Pending

__all__ = [
    "DEADLINE_SECONDS",
    "catch_up",
    "keep_for_later",
    "one_line",
    "remember_input",
    "server_down",
    "unavailable",
    "watchdog",
]

DEADLINE_SECONDS: Final = 10.0
"""The most a hook spends once it decided to use the server: a server that answered the probe
and then stops answering mid-statement (its process stopped, its machine swapping) is not
bounded by the server's own timeouts, so the hook gives up here, keeps its transcript and
exits 0 (Claude Code would kill it at 30 s, keeping nothing)."""

FIRST_ANSWER_SECONDS: Final = 1.0  # $CONTINUITY_HOOK_FIRST_ANSWER overrides it
"""How long a hook waits, once the driver is loaded, for the server to log it in and answer its
first query (the schema check): the hook's 1 s budget. Behind a pooler the probe proves only the
pooler alive: it answers for a server that is down or frozen, then holds the hook's login or
query while it waits for that server, where no server-side limit can fire (ADR 0054)."""
_LATE: Final = "no answer within the hook's deadline"

_CATCH_UP_SECONDS: Final = 5.0
"""A hook that finds many kept transcripts starts no new one after this long: the rest wait
for the next hook (each ingest is bounded by the statement and lock budgets)."""


def one_line(exc: BaseException) -> str:
    """``Type: message`` on one line, as a hook reports a failure."""
    return " ".join(f"{type(exc).__name__}: {exc}".split())


def unavailable(exc: BaseException) -> str | None:
    """``"busy"`` when the server gave up waiting (a held lock, a statement over the budget:
    the server is there), ``"refused"`` when it is there and refused the write (read-only, a
    privilege missing), ``"down"`` when it could not be used at all, else None. Only ``"down"``
    marks the server unreachable; all three keep the transcript for a later hook."""
    from continuity.errors import StoreBusy, StoreRefused, StoreUnavailable

    if isinstance(exc, StoreBusy):
        return "busy"
    if isinstance(exc, StoreRefused):
        return "refused"
    return "down" if isinstance(exc, StoreUnavailable) else None


def open_server_store(
    location: str, keep: Callable[[str], object]
) -> tuple[BaseStore, threading.Timer]:
    """The server store a hook uses, opened with the hooks' budgets, and the watchdog of the
    rest of the hook (cancel it when done). The driver is imported first; then the server has
    :data:`FIRST_ANSWER_SECONDS` to log the hook in and answer the schema check, else
    ``keep(reason)`` runs and the process ends with exit 0 (a pooler in front of a dead or
    frozen server)."""
    from continuity.store.locate import open_store
    from continuity.store.outage import HOOK_STORE_OPTIONS
    from continuity.store.postgres import need_driver

    if sys.modules.get("typing_extensions", False) is None:
        del sys.modules["typing_extensions"]  # kept out by the hook's fast path; psycopg needs it
    need_driver(pooled=False)  # its import (0.1-0.4 s) is not the server's time
    try:
        budget = float(os.environ.get("CONTINUITY_HOOK_FIRST_ANSWER") or FIRST_ANSWER_SECONDS)
    except ValueError:
        budget = FIRST_ANSWER_SECONDS
    why = f"logged in or answered nothing within {budget:g} s (behind a pooler?)"
    first = watchdog(lambda: keep(why), budget)
    try:
        store = open_store(location, create=True, **HOOK_STORE_OPTIONS)
    finally:
        first.cancel()
    return store, watchdog(lambda: keep(_LATE))


def server_down(url: str) -> tuple[str, bool] | None:
    """Why a hook should not use the server now, and whether that is news (a probe that just
    failed, rather than a mark a hook wrote a moment ago); None: go ahead. Imports no driver."""
    from continuity.store import outage

    local = local_dir_of(url)
    mark = outage.skip_for(local)
    if mark is not None:
        since = time.strftime("%H:%M:%S", time.localtime(mark.since))
        retry_at = mark.last_try + outage.backoff(mark.failures)
        retry = time.strftime("%H:%M:%S", time.localtime(retry_at))
        return f"unreachable since {since} ({mark.reason}); next try after {retry}", False
    reason = outage.probe(url)
    return None if reason is None else (reason, True)


def keep_for_later(
    url: str,
    label: str,
    payload: dict[str, Any],
    reason: str,
    *,
    news: bool,
    busy: bool,
    agent: str,
    final: bool,
    log: Callable[[Path, str, str], None],
) -> int:
    """The hook could not use the server: remember the transcript its input names (and a
    subagent's, always final) for the next hook of ``agent`` that reaches the server; mark the
    server unreachable unless it only gave up waiting (``busy``); one line on stderr, and in
    ``errors.log`` (through ``log(local, label, message)``) when it is ``news``. Returns 0,
    the hook's exit."""
    from continuity.store import outage

    local = local_dir_of(url)
    if news and not busy:
        outage.note_unreachable(local, reason)
    kept = remember_input(local, payload, agent=agent, final=final)
    what = "transcript kept to archive later" if kept else "nothing to keep"
    message = f"PostgreSQL store {describe_store(url)} not used ({reason}); {what}"
    sys.stderr.write(f"continuity: {message}\n")
    if news:  # one line per failed try: a hook that skips a marked server adds none
        log(local, label, message)
    return 0


def remember_input(
    local: Path, payload: dict[str, Any], *, agent: str, final: bool
) -> list[tuple[Pending, bool]]:
    """Keep the transcript the hook's input names (and a subagent's, always final) in the
    ``pending/`` list of the store whose local folder is ``local``: the entries written, each
    with whether it is the main transcript's."""
    from continuity.store import outage

    session = payload.get("session_id")
    session = session if isinstance(session, str) else ""
    kept = []
    for key, is_final in (("transcript_path", final), ("agent_transcript_path", True)):
        raw = payload.get(key)
        if isinstance(raw, str) and raw:
            path = Path(raw).expanduser().absolute()
            entry = outage.remember(local, path, agent=agent, session=session, final=is_final)
            kept.append((entry, key == "transcript_path"))
    return kept


def catch_up(
    store: BaseStore,
    url: str,
    notes: list[str],
    *,
    agent: str,
    ingest: Callable[[BaseStore, Path, bool], object],
    log: Callable[[Path, str, str], None],
) -> None:
    """The server answered: clear its mark, then ``ingest(store, path, final)`` every
    transcript of ``agent`` kept while it did not (sessions that ended meanwhile too), and
    forget each once archived. One that fails stays kept (a line in ``notes``); a server that
    fails again stops the catch-up."""
    from continuity.store import outage

    local = local_dir_of(url)
    was_down = outage.clear_mark(local)
    entries = [e for e in outage.pending(local) if e.agent == agent]
    if was_down:
        log(local, "catch-up", f"the server answers again; {len(entries)} transcript(s) kept")
    _ingest_kept(store, entries, notes, ingest)


def _ingest_kept(
    store: BaseStore,
    entries: Iterable[Any],
    notes: list[str],
    ingest: Callable[[BaseStore, Path, bool], object],
) -> None:
    from continuity.store import outage

    start = time.monotonic()
    for entry in entries:
        if time.monotonic() - start > _CATCH_UP_SECONDS:
            break
        try:
            if entry.path.is_file():  # a transcript deleted since has nothing left to give
                ingest(store, entry.path, entry.final)
        except Exception as exc:
            notes.append(f"catching up {entry.path} failed, kept for later: {one_line(exc)}")
            if unavailable(exc):
                break
            continue
        outage.settle(entry)


def watchdog(give_up: Callable[[], object], seconds: float | None = None) -> threading.Timer:
    """Start a timer that, unless cancelled within ``seconds`` (default
    ``$CONTINUITY_HOOK_DEADLINE`` or :data:`DEADLINE_SECONDS`), calls ``give_up`` (keep the
    transcript, mark the server) and ends the process with exit 0 at once: a hook blocked on
    a socket cannot be interrupted any other way. Cancel it when the hook's work is done."""
    if seconds is None:
        try:
            seconds = float(os.environ.get("CONTINUITY_HOOK_DEADLINE") or DEADLINE_SECONDS)
        except ValueError:
            seconds = DEADLINE_SECONDS

    def fire() -> None:
        try:
            give_up()
        finally:
            sys.stderr.flush()
            os._exit(0)

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    return timer
