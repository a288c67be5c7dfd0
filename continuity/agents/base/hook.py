"""One guarded hook runner for every agent: what ``continuity hook <event> --agent X`` does around
the adapter's own work.

A hook must never break the agent's session. Whatever happens the runner exits with the
outcome's code (0 unless the adapter asks otherwise, as Claude Code's opt-in pre-compact block
does); an error becomes one line on stderr and in the store's ``errors.log``; stdout gets either
nothing or the adapter's one document, written in one piece at the end, in UTF-8 whatever the
locale. The steps, the same for every agent:

1. the store is opened (created) first on a folder, so that even malformed input is reported
   in its ``errors.log``; on a server store the input is read first, so that what a server that
   will not answer costs is kept for later (ADR 0041, :mod:`continuity.agents.base.guard`): a
   server marked unreachable a moment ago is skipped, the driver's own logging is quieted, every
   statement is bounded and a watchdog gives up at the deadline;
2. the event is named (the adapter's :attr:`HookSpec.event_of`) and the adapter's
   :attr:`HookSpec.run` archives and answers;
3. on a server store, what earlier hooks kept is caught up;
4. the outcome is written, each note on stderr and in ``errors.log``; the store is closed
   (under the deadline too: closing a pool waits on its connections).

An adapter gives the runner a :class:`HookSpec`; nothing here knows an agent's events or
payloads. It imports only the store's location and interface: it runs on the hook path.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import msgspec

from continuity.paths import StoreLocation, default_store_location, is_postgres_url, local_dir_of

if TYPE_CHECKING:
    import threading

    from continuity.store.base import BaseStore  # not imported by a hook the relay serves

__all__ = ["MAX_STDIN", "HookOutcome", "HookSpec", "log_error", "payload_of", "run_guarded"]

MAX_STDIN: Final = 16 << 20
"""The most of a hook's input that is read (an agent's payload is a few KiB)."""


class HookOutcome(msgspec.Struct):
    """What a hook answers: its exit code, stdout (one document), stderr, and notes."""

    exit_code: int = 0
    stdout: str = ""
    stderr: str = ""
    notes: list[str] = msgspec.field(default_factory=list)
    """What the archive could not take (a line over the size cap): one line each on stderr and
    in ``errors.log``; the hook still succeeds."""


class HookSpec(NamedTuple):
    """What an agent's adapter gives the runner."""

    agent: str
    """The agent's name (the agents table's): the outage memory keeps its kept inputs by it."""
    event_of: Callable[[str | None, dict[str, Any]], str]
    """The event's name from the argument (or None) and the payload; raises ``ValueError``
    for an event the agent does not have."""
    run: Callable[[BaseStore, str, dict[str, Any]], HookOutcome]
    """Archive what is new and answer ``event``."""
    ingest_kept: Callable[[BaseStore, Path, bool, list[str]], None]
    """Archive a session file a hook kept while the server was down (``final``, ``notes``)."""
    final_events: frozenset[str] = frozenset()
    """The events after which the session may be over: its file is read to the end."""
    log_suffix: str = ""
    """Added to the event in ``errors.log`` (`` (codex)``): whose hook the line is from."""
    payload: Callable[[list[str], bytes | None], dict[str, Any]] | None = None
    """The payload from the hook's arguments and stdin; None: stdin holds it as JSON."""
    warm: str = ""
    """A module the hook's own work needs (its ingest), imported with the collector off just
    before the work in this process: a hook that the store's relay serves never loads it."""


def log_error(local: Path | None, event: str, message: str, *, server: bool = False) -> None:
    """Add a line to ``errors.log`` in the store's local folder: a folder store's only when it
    is one (a hook never makes folders where a store is not), a server store's always (the
    server may be what failed)."""
    if local is None or (not server and not (local / "store.json").is_file()):
        return
    try:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        if server:
            local.mkdir(parents=True, exist_ok=True)
        with open(local / "errors.log", "a", encoding="utf-8") as f:
            f.write(f"{stamp} hook {event}: {message}\n")
    except OSError:
        pass


def payload_of(raw: bytes) -> dict[str, Any]:
    """A hook's JSON input (empty: ``{}``); ``ValueError`` when it is not a JSON object."""
    try:
        payload = msgspec.json.decode(raw) if raw.strip() else {}
    except msgspec.DecodeError as exc:
        raise ValueError(f"hook input is not JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise ValueError("hook input is not a JSON object")
    return payload


class _Run:
    """One hook run: where it stands, for the failure paths."""

    def __init__(self, spec: HookSpec, argv: list[str], stdin: bytes | None) -> None:
        self.spec = spec
        self.argv = argv
        self.stdin = stdin
        self.event: str | None = argv[0] if argv else None
        self.location: StoreLocation | None = None
        self.opened: BaseStore | None = None
        self.payload: dict[str, Any] | None = None
        self.server = False
        self.timer: threading.Timer | None = None

    def label(self, event: object) -> str:
        """How ``errors.log`` names the hook: its event, or ``(no event)`` when it failed
        before one was known (no argument, and input that names none or does not parse)."""
        return f"{'(no event)' if event is None else event}{self.spec.log_suffix}"

    def log(self, local: Path, label: str, message: str) -> None:
        log_error(local, self.label(label), message, server=True)

    def read_input(self) -> None:
        spec = self.spec
        if spec.payload is not None:
            self.payload = spec.payload(self.argv, self.stdin)
        else:
            raw = self.stdin if self.stdin is not None else sys.stdin.buffer.read(MAX_STDIN)
            self.payload = payload_of(raw)
        self.event = spec.event_of(self.event, self.payload)

    def keep(self, reason: str, news: bool, *, busy: bool = False) -> int:
        from continuity.agents.base.guard import keep_for_later

        assert self.payload is not None
        return keep_for_later(
            str(self.location),
            str(self.event),
            self.payload,
            reason,
            news=news,
            busy=busy,
            agent=self.spec.agent,
            final=self.event in self.spec.final_events,
            log=self.log,
        )

    def open(self) -> int | None:
        """Open the store and read the input, in the order the store's kind calls for; an exit
        code when the hook is over already (a server marked down: the input kept)."""
        self.location = location = self.location or default_store_location()
        self.server = is_postgres_url(location)  # ADR 0041's guard is PostgreSQL's
        if not self.server:
            from continuity.store.locate import open_store

            self.warm()
            self.opened = open_store(location, create=True)
            self.read_input()
            return None
        self.read_input()
        from continuity.agents.base import relay

        if relay.enabled():
            code = self.relayed(str(location))
            if code is not None:
                return code
        self.warm()
        from continuity.agents.base.guard import server_down

        down = server_down(str(location))
        if down is not None:
            return self.keep(*down)
        _quiet_driver()
        from continuity.agents.base.guard import open_server_store

        self.opened, self.timer = open_server_store(str(location), lambda why: self.keep(why, True))
        return None

    def warm(self) -> None:
        """Import the spec's :attr:`HookSpec.warm` module with the collector off (its objects
        live as long as the process: collections during the import only traverse them)."""
        if not self.spec.warm:
            return
        import gc

        was = gc.isenabled()
        gc.disable()
        try:  # __import__, not importlib's: `-X importtime` reports only the C import path
            __import__(self.spec.warm)
        finally:
            if was:
                gc.freeze()
                gc.enable()

    def relayed(self, location: str) -> int | None:
        """Hand the hook's work to the store's relay (ADR 0062), the transcript kept in
        ``pending/`` first; the exit code once it answered, or None: no relay (a server marked
        down a moment ago, or none could be started), the hook works in its own process."""
        from continuity.agents.base import relay
        from continuity.agents.base.guard import remember_input
        from continuity.store import outage

        spec = self.spec
        module = spec.run.__module__
        if getattr(sys.modules.get(module), "SPEC", None) is not spec:
            return None  # an adapter the relay could not find by its module: in-process
        assert self.payload is not None and self.event is not None
        local = local_dir_of(location)
        if outage.skip_for(local) is not None:
            return None  # skipped as before, without a relay
        final = self.event in spec.final_events
        kept = remember_input(local, self.payload, agent=spec.agent, final=final)
        reply = relay.ask(
            location,
            local,
            module=module,
            agent=spec.agent,
            event=self.event,
            payload=self.payload,
            kept=kept,
        )
        if reply is None:
            return None
        if reply.kind == "ok":
            outcome = HookOutcome(reply.exit_code, reply.stdout, reply.stderr, reply.notes)
            return _finish(outcome, local, self.label(self.event), server=True)
        if reply.kind in ("unavailable", "lost"):
            # lost: the relay, not the server, failed: the server is not marked
            return self.keep(reply.reason, True, busy=reply.busy or reply.kind == "lost")
        return self.report(reply.reason)

    def report(self, message: str) -> int:
        """One line on stderr and in ``errors.log``; exit 0."""
        sys.stderr.write(f"continuity: {message}\n")
        if self.location is not None:
            local = local_dir_of(self.location)
            log_error(local, self.label(self.event), message, server=self.server)
        return 0

    def failed(self, exc: Exception) -> int:
        """One line on stderr and in ``errors.log``; exit 0. What could not be written is still
        in the session file: the cursor did not move past it, so the next hook that reaches the
        store ingests it. On a server store that could not be used, the input is kept for the
        next hook that reaches it, and a server that failed (not one that only gave up waiting)
        is marked unreachable."""
        from continuity.agents.base.guard import one_line, unavailable

        if self.timer is not None:
            self.timer.cancel()
        if self.opened is not None:
            self.opened.close()
        failed = unavailable(exc) if self.server and self.payload is not None else None
        if failed is not None:
            return self.keep(one_line(exc), True, busy=failed != "down")
        self.report(one_line(exc))
        if os.environ.get("CONTINUITY_DEBUG"):
            import traceback  # only when debugging: it costs 5 ms to import

            traceback.print_exc()
        return 0


def _quiet_driver() -> None:
    """A hook says what failed in one line: the database driver's pool logs its own warnings
    (a connection it lost, a retry) to stderr through ``logging``, which would add more."""
    import logging

    logging.getLogger("psycopg").setLevel(logging.CRITICAL)


def _write(outcome: HookOutcome) -> None:
    try:
        if outcome.stdout:
            # UTF-8 whatever the locale (an ASCII or Latin-1 stdout would raise on the first
            # arrow or ellipsis), written in one piece.
            text = outcome.stdout if outcome.stdout.endswith("\n") else outcome.stdout + "\n"
            sys.stdout.flush()
            sys.stdout.buffer.write(text.encode("utf-8", "replace"))
            sys.stdout.buffer.flush()
        if outcome.stderr:
            sys.stderr.write(outcome.stderr + "\n")
        for note in outcome.notes:
            sys.stderr.write(f"continuity: {note}\n")
    except OSError:  # the agent stopped reading (a timed-out hook): nothing left to tell
        pass


def run_guarded(
    spec: HookSpec,
    argv: list[str],
    *,
    store: StoreLocation | None = None,
    stdin: bytes | None = None,
) -> int:
    """Run one hook of ``spec``'s agent: ``argv`` is ``[event, …]`` (or empty: the event comes
    from the payload); the store is ``store`` (a folder or a server URL) or the default one;
    ``stdin``: the input when it was read already (a fast path reads it)."""
    run = _Run(spec, argv, stdin)
    run.location = store
    try:
        done = run.open()
        if done is not None:
            return done
        assert run.opened is not None and run.payload is not None and run.event is not None
        outcome = spec.run(run.opened, run.event, run.payload)
        if run.server:
            from continuity.agents.base.guard import catch_up

            notes = outcome.notes

            def ingest(store: BaseStore, path: Path, final: bool) -> None:
                spec.ingest_kept(store, path, final, notes)

            catch_up(
                run.opened, str(run.location), notes, agent=spec.agent, ingest=ingest, log=run.log
            )
    except Exception as exc:  # a hook never breaks the session: report and exit 0
        return run.failed(exc)
    assert run.location is not None and run.opened is not None
    _finish(outcome, local_dir_of(run.location), run.label(run.event), server=run.server)
    run.opened.close()
    if run.timer is not None:
        run.timer.cancel()
    return outcome.exit_code


def _finish(outcome: HookOutcome, local: Path, label: str, *, server: bool) -> int:
    """Write the outcome, each note also in ``errors.log``; the hook's exit code."""
    _write(outcome)
    for note in outcome.notes:
        log_error(local, label, note, server=server)
    return outcome.exit_code
