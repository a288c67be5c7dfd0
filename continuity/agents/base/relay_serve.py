"""The resident relay of a PostgreSQL store (ADR 0062): ``python -m
continuity.agents.base.relay_serve <url>``, started detached by the first hook that needs it
(:mod:`continuity.agents.base.relay`).

It holds the driver and one connection opened with the hooks' budgets, listens on a Unix socket
(mode 0600) and runs each hook's work as the hook's own process would (the agent's
``HookSpec.run``, then the catch-up of kept transcripts), with the hook's environment and
working folder, one request at a time. Each request has its own watchdog: at the hook's
deadline (or, while a connection is being opened, the first-answer budget) the hook is told
the server did not answer (it keeps its transcript and marks the server, as an in-process hook
would), the request's connection is shut so the stuck call ends, and the next request gets a
fresh connection: a stuck request ends that request, not the relay.

It exits after ``$CONTINUITY_RELAY_IDLE`` seconds without a request, on ``SIGTERM``, when its
socket file is removed or replaced, and when a hook of another version asks (that hook starts
its own). One per store: it holds ``relay.pid`` locked for its whole life.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any, Final

import msgspec

from continuity.agents.base import relay
from continuity.agents.base.relay import Reply, Request

__all__ = ["Relay", "main"]

_WAKE_SECONDS: Final = 2.0
_LATE: Final = "no answer within the hook's deadline"
_decode_request = msgspec.json.Decoder(Request).decode
_encode = msgspec.json.Encoder().encode


class _Job:
    """One request: its connection to the hook, and whether it was answered already."""

    def __init__(self, conn: socket.socket, request: Request) -> None:
        self.conn = conn
        self.request = request
        self.lock = threading.Lock()
        self.answered = False
        self.store: Any = None
        """The store the request runs on: shut by the watchdog when it gives up."""

    def answer(self, reply: Reply) -> bool:
        """Send ``reply`` unless the request was answered already; whether this one was sent."""
        with self.lock:
            if self.answered:
                return False
            self.answered = True
        with contextlib.suppress(OSError):  # a hook gone (killed): its pending entry stays
            self.conn.sendall(_encode(reply) + b"\n")
        with contextlib.suppress(OSError):
            self.conn.close()
        return True


class Relay:
    """The relay of the store at ``url``; :meth:`serve` until idle."""

    def __init__(self, url: str, local: Path, path: Path, idle: float) -> None:
        self.url = url
        self.local = local
        self.path = path
        self.idle = idle
        self.version = relay.version()
        self.cond = threading.Condition()
        self.running: _Job | None = None
        self.store: Any = None
        """The open store kept between requests (one connection), or None."""
        self.last = time.monotonic()
        self.busy = 0
        self.listener: socket.socket | None = None
        self.inode = 0
        self.stopping = False
        self.pid_lock: int | None = None
        """The descriptor holding ``relay.pid`` locked: closed when the relay retires, so
        the relay that replaces it may start before this one's last requests end."""

    # --- the socket -----------------------------------------------------------------------

    def bind(self) -> None:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)  # the socket is born 0600: only this user's hooks connect
        try:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()  # stale: the pid lock says no relay of this store lives
            listener.bind(os.fspath(self.path))
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)
        listener.listen(64)
        listener.settimeout(_WAKE_SECONDS)
        self.inode = os.stat(self.path).st_ino
        self.listener = listener

    def _ours(self) -> bool:
        """Whether the socket file is still this relay's, and the store's local folder is
        still there (a removed folder, a test's or a benchmark's, has no hooks left to serve)."""
        try:
            return os.stat(self.path).st_ino == self.inode and self.local.is_dir()
        except OSError:
            return False

    def retire(self) -> None:
        """Stop taking requests (those in hand finish): remove the socket if it is still ours,
        so the next hook starts another relay."""
        with self.cond:
            if self.stopping:
                return
            self.stopping = True
        if self._ours():
            with contextlib.suppress(OSError):
                self.path.unlink()
        if self.listener is not None:
            with contextlib.suppress(OSError):
                self.listener.close()
        if self.pid_lock is not None:
            with contextlib.suppress(OSError):
                os.close(self.pid_lock)
            self.pid_lock = None

    def serve(self) -> None:
        assert self.listener is not None
        while not self.stopping:
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                with self.cond:
                    idle = not self.busy and time.monotonic() - self.last > self.idle
                if idle or not self._ours():
                    self.retire()
                continue
            except OSError:
                break
            with self.cond:
                self.busy += 1
                self.last = time.monotonic()
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()
        with self.cond:  # requests in hand finish (each bounded by its deadline)
            self.cond.wait_for(lambda: not self.busy, timeout=60.0)
        self._drop_store()

    # --- one request ----------------------------------------------------------------------

    def _handle(self, conn: socket.socket) -> None:
        try:
            request = self._read(conn)
            if request is None:
                conn.close()
                return
            if request.version != self.version:
                self.retire()
                _Job(conn, request).answer(Reply(kind="mismatch", reason=self.version))
                return
            conn.sendall(_encode(Reply(kind="ack")) + b"\n")
            job = _Job(conn, request)
            timer = threading.Timer(request.deadline, self._late, args=(job, _LATE))
            timer.daemon = True
            timer.start()
            try:
                self._run(job)
            finally:
                timer.cancel()
        except Exception as exc:  # the relay stays up; this hook keeps its entry
            _say(f"request failed: {type(exc).__name__}: {exc}")
            with contextlib.suppress(OSError):
                conn.close()
        finally:
            with self.cond:
                self.busy -= 1
                self.last = time.monotonic()
                self.cond.notify_all()

    def _read(self, conn: socket.socket) -> Request | None:
        conn.settimeout(relay.ACK_SECONDS)
        buf = bytearray()
        while not buf.endswith(b"\n"):
            chunk = conn.recv(1 << 20)
            if not chunk or len(buf) > relay.MAX_LINE:
                return None
            buf += chunk
        conn.settimeout(None)
        try:
            return _decode_request(buf)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None

    def _late(self, job: _Job, reason: str) -> None:
        """The request's watchdog: tell the hook the server did not answer (it keeps its
        transcript and marks the server), shut the request's connection so its call ends,
        and let the next request run on a fresh one."""
        if not job.answer(Reply(kind="unavailable", reason=reason)):
            return
        with self.cond:
            if self.running is job:
                self.running = None
                self.cond.notify_all()
            idle = job.store is not None and self.store is job.store  # done just now
            if idle:
                self.store = None
        if idle:
            _close(job.store)
        else:
            _shut(job.store)

    def _run(self, job: _Job) -> None:
        with self.cond:
            self.cond.wait_for(lambda: self.running is None or job.answered)
            if job.answered:  # its deadline passed while it waited
                return
            self.running = job
        try:
            _enter(job.request)
            reply = self._work(job)
        finally:
            with self.cond:
                if self.running is job:
                    self.running = None
                    self.cond.notify_all()
        job.answer(reply)

    def _open(self, job: _Job) -> Any:
        """The kept store when its connection is still there, else a new one: the server
        probed first (no driver wait on a server that is down), then the first-answer budget
        for the login and the schema check, as a hook in its own process has."""
        with self.cond:
            store, self.store = self.store, None
        if store is not None and _alive(store):
            return store
        _close(store)
        from continuity.store import outage

        reason = outage.probe(self.url)
        if reason is not None:
            raise _Unavailable(reason)
        from continuity.store.locate import open_store

        budget = job.request.first_answer
        why = f"logged in or answered nothing within {budget:g} s (behind a pooler?)"
        first = threading.Timer(budget, self._late, args=(job, why))
        first.daemon = True
        first.start()
        try:
            store = open_store(self.url, create=True, **outage.HOOK_STORE_OPTIONS)
        finally:
            first.cancel()
        if job.answered:  # given up on meanwhile: not kept
            _close(store)
            raise _Unavailable(why)
        return store

    def _work(self, job: _Job) -> Reply:
        from continuity.agents.base.guard import catch_up, one_line, unavailable
        from continuity.agents.base.hook import log_error

        request = job.request
        spec = getattr(importlib.import_module(request.module), "SPEC", None)
        if spec is None or spec.agent != request.agent:
            return Reply(kind="failed", reason=f"no hook of agent {request.agent!r} to relay")

        def log(local: Path, label: str, message: str) -> None:
            log_error(local, f"{label}{spec.log_suffix}", message, server=True)

        try:
            job.store = store = self._open(job)
        except _Unavailable as exc:
            return Reply(kind="unavailable", reason=str(exc))
        except Exception as exc:
            kind = unavailable(exc)
            if kind is None:
                return Reply(kind="failed", reason=one_line(exc))
            return Reply(kind="unavailable", reason=one_line(exc), busy=kind != "down")
        keep = True
        try:
            outcome = spec.run(store, request.event, request.payload)
            final = request.event in spec.final_events
            for file, nonce, was_final, main in request.kept:
                if main and (final or not was_final):  # archived by this run as kept
                    _settle(Path(file), nonce)
            notes = outcome.notes

            def ingest(store: Any, path: Path, final: bool) -> None:
                spec.ingest_kept(store, path, final, notes)

            catch_up(store, self.url, notes, agent=spec.agent, ingest=ingest, log=log)
        except Exception as exc:
            kind = unavailable(exc)
            keep = kind is None or kind == "busy"
            if kind is None:
                return Reply(kind="failed", reason=one_line(exc))
            return Reply(kind="unavailable", reason=one_line(exc), busy=kind != "down")
        finally:
            with self.cond:
                if keep and not job.answered and self.store is None and not self.stopping:
                    self.store = store
                    store = None
            _close(store)
        return Reply(
            kind="ok",
            exit_code=outcome.exit_code,
            stdout=outcome.stdout,
            stderr=outcome.stderr,
            notes=outcome.notes,
        )

    def _drop_store(self) -> None:
        with self.cond:
            store, self.store = self.store, None
        _close(store)


class _Unavailable(Exception):
    """The server could not be used for this request (probe failed, or no first answer)."""


def _settle(file: Path, nonce: str) -> None:
    """Remove the hook's own ``pending/`` entry, unless a later hook rewrote it."""
    try:
        data = msgspec.json.decode(file.read_bytes())
    except (OSError, msgspec.DecodeError):
        return
    if isinstance(data, dict) and data.get("nonce") == nonce:
        file.unlink(missing_ok=True)


def _enter(request: Request) -> None:
    """The hook's environment and working folder, for the request that runs now (one at a
    time): the hook's code reads both (``CLAUDE_PROJECT_DIR``, a relative transcript path)."""
    if os.environ != request.env:
        tz = os.environ.get("TZ")
        os.environ.clear()
        os.environ.update(request.env)
        if os.environ.get("TZ") != tz:
            time.tzset()
    with contextlib.suppress(OSError):
        if os.getcwd() != request.cwd:
            os.chdir(request.cwd)


def _held(store: Any) -> Any:
    """The connection a hook-opened store holds (None when it holds none)."""
    return getattr(getattr(store, "_db", None), "_held", None)


def _alive(store: Any) -> bool:
    """Whether the kept store's connection is still there: an idle connection with something
    to read has been closed by the server (a restart, an idle timeout). No round trip."""
    import select

    conn = _held(store)
    if conn is None:
        return not getattr(getattr(store, "_db", None), "closed", True)
    try:
        if conn.closed or conn.broken:
            return False
        readable, _, _ = select.select([conn.pgconn.socket], [], [], 0)
    except (OSError, ValueError, AttributeError):
        return False
    return not readable


def _shut(store: Any) -> None:
    """End whatever call is stuck on ``store``'s connection: shut its socket (the call then
    fails at once; the server rolls back what it had begun)."""
    conn = _held(store)
    if conn is None:
        return
    try:
        fd = os.dup(conn.pgconn.socket)
    except (OSError, ValueError, AttributeError):
        return
    with socket.socket(fileno=fd) as sock, contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def _close(store: Any) -> None:
    if store is not None:
        with contextlib.suppress(Exception):
            store.close()


def _say(message: str) -> None:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    with contextlib.suppress(OSError):
        sys.stderr.write(f"{stamp} relay {os.getpid()}: {message}\n")
        sys.stderr.flush()


def main(argv: list[str]) -> int:
    """Serve the store ``argv[0]`` until idle. Prints ``ready`` once it listens (the hook
    that started it waits for that line); exits at once, 0, when another relay of the store
    lives."""
    import fcntl

    from continuity.paths import local_dir_of

    url = argv[0]
    local = local_dir_of(url)
    path = relay.socket_path(local)
    if path is None:
        _say("no folder for a socket")
        return 1
    local.mkdir(parents=True, exist_ok=True)
    fd = os.open(local / relay.PID_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        _say("another relay of this store lives")
        return 0
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    server = Relay(url, local, path, relay.idle_seconds())
    server.pid_lock = fd
    signal.signal(signal.SIGTERM, lambda *_: _stop(server))
    server.bind()
    _say(f"listening on {path} ({server.version})")
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # the hook that started it reads no more and may be gone
    os.close(devnull)
    _quiet_driver()
    server.serve()
    _say("idle: exiting")
    return 0


def _stop(server: Relay) -> None:
    server.retire()
    os._exit(0)


def _quiet_driver() -> None:
    import logging

    logging.getLogger("psycopg").setLevel(logging.CRITICAL)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
