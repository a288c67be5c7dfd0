"""A hook's side of the resident relay (ADR 0062): a hook on a PostgreSQL store hands its work
to a process that holds the driver and a connection, over a Unix socket, with the standard
library and msgspec only, so the hook never imports psycopg.

The relay (:mod:`continuity.agents.base.relay_serve`) is one process per store on this machine:
the first hook that needs it starts it, detached; it exits after
``$CONTINUITY_RELAY_IDLE`` seconds without a request (:data:`IDLE_SECONDS`). A hook:

1. writes its ``pending/`` entry first (:mod:`continuity.store.outage`): whatever happens to
   the relay from then on, the next hook (or relay) that reaches the server archives it;
2. connects to ``relay.sock`` in the store's local folder (or, when that path is too long for
   a Unix socket, to one in a short per-user runtime folder); a missing or stale socket (a
   relay that died) starts a new relay, under a lock so racing hooks start one;
3. sends its request (the event, its parsed input, its environment and working folder) and
   waits for an acknowledgement, then for the answer: the same outcome the hook would have
   computed in its own process, which it writes as it would have.

``None`` from :func:`ask` means no relay could be reached or started: the hook runs in its own
process as before. ``$CONTINUITY_RELAY=0`` does that always (the off switch).
"""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any  # msgspec has imported typing already

import msgspec

if TYPE_CHECKING:
    from typing import Final

    from continuity.store.outage import Pending

__all__ = [
    "IDLE_SECONDS",
    "OFF_ENV",
    "PROTOCOL",
    "Reply",
    "Request",
    "ask",
    "enabled",
    "idle_seconds",
    "socket_path",
    "version",
    "wait_gone",
]

PROTOCOL: Final = 1
"""Bumped when the request or the reply changes shape; part of :func:`version`."""
OFF_ENV: Final = "CONTINUITY_RELAY"
"""``0`` (or ``off``, ``no``, ``false``): every hook works in its own process, as before."""
IDLE_ENV: Final = "CONTINUITY_RELAY_IDLE"
IDLE_SECONDS: Final = 600.0
"""How long a relay waits for its next request before it exits (``$CONTINUITY_RELAY_IDLE``)."""
START_SECONDS: Final = 10.0
"""How long a hook waits for a relay it started to listen; past that it works in-process."""
ACK_SECONDS: Final = 5.0
"""How long a hook waits for a relay to take its request (the answer has the hook's deadline)."""
SOCKET_NAME: Final = "relay.sock"
LOCK_NAME: Final = "relay.lock"
"""Held by the hook that starts a relay, so that two racing hooks start one."""
PID_NAME: Final = "relay.pid"
"""Held (``flock``) by the live relay for its whole life, with its process id inside."""
LOG_NAME: Final = "relay.log"
_MAX_SOCKET_PATH: Final = 100  # AF_UNIX's sun_path is 108 bytes with its NUL; some systems 104
MAX_LINE: Final = 64 << 20


class Request(msgspec.Struct, kw_only=True):
    """One hook's work, as its process would do it."""

    version: str
    module: str
    """The module whose ``SPEC`` is the agent's :class:`~continuity.agents.base.hook.HookSpec`."""
    agent: str
    location: str
    event: str
    payload: dict[str, Any]
    env: dict[str, str]
    cwd: str
    deadline: float
    first_answer: float
    kept: list[tuple[str, str, bool, bool]] = []
    """The ``pending/`` entries the hook wrote: file, nonce, whether final, whether the main
    transcript's (the relay removes those the run archived, so catch-up need not read them)."""


class Reply(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What a relay answers: ``ack`` (it took the request), ``mismatch`` (another version: it
    leaves), then ``ok`` (the outcome), ``unavailable`` (the server could not be used:
    ``reason``, and ``busy`` when it is there but gave up or refused), ``failed`` (one line);
    the hook's side adds ``lost`` (the relay took the request and gave no answer)."""

    kind: str
    exit_code: int = 0
    stdout: str = ""
    stderr: str = ""
    notes: list[str] = []
    reason: str = ""
    busy: bool = False


_encode = msgspec.json.Encoder().encode
_decode_reply = msgspec.json.Decoder(Reply).decode


def enabled(env: Any = None) -> bool:
    """Whether hooks use the relay (``$CONTINUITY_RELAY`` is not ``0``/``off``/``no``/``false``)."""
    value = (os.environ if env is None else env).get(OFF_ENV, "").strip().lower()
    return value not in ("0", "off", "no", "false")


def version() -> str:
    """The relay protocol, the package's version and where it is installed: a relay whose
    version differs from its hook's is replaced."""
    from continuity._version import __version__

    package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return f"{PROTOCOL} {__version__} {package}"


def idle_seconds(env: Any = None) -> float:
    try:
        return float((os.environ if env is None else env).get(IDLE_ENV) or IDLE_SECONDS)
    except ValueError:
        return IDLE_SECONDS


def socket_path(local: Path) -> Path | None:
    """Where the relay of the store whose local folder is ``local`` listens: ``relay.sock``
    there, or, when that path is too long for a Unix socket, a name derived from ``local`` in
    ``$XDG_RUNTIME_DIR/continuity`` or ``/tmp/continuity-<uid>`` (a folder only this user may
    use); None when neither can be used."""
    path = local / SOCKET_NAME
    if len(os.fsencode(path)) <= _MAX_SOCKET_PATH:
        return path
    import blake3

    name = f"relay-{blake3.blake3(os.fsencode(local)).hexdigest()[:20]}.sock"
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    for base in ([Path(runtime) / "continuity"] if runtime else []) + [
        Path("/tmp") / f"continuity-{os.getuid()}"  # checked below: ours, 0700
    ]:
        if len(os.fsencode(base / name)) > _MAX_SOCKET_PATH:
            continue
        try:
            base.mkdir(mode=0o700, parents=True, exist_ok=True)
            st = os.lstat(base)
        except OSError:
            continue
        import stat

        if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077:
            return base / name
    return None


def _deadline(env: Any, name: str, default: float) -> float:
    try:
        return float(env.get(name) or default)
    except ValueError:
        return default


def ask(
    location: str,
    local: Path,
    *,
    module: str,
    agent: str,
    event: str,
    payload: dict[str, Any],
    kept: list[tuple[Pending, bool]],
) -> Reply | None:
    """The relay's answer to this hook's request (``lost`` when it took the request and said
    nothing more within the hook's deadline), or None when no relay could be reached or
    started (the hook then works in its own process)."""
    from continuity.agents.base.guard import DEADLINE_SECONDS, FIRST_ANSWER_SECONDS

    path = socket_path(local)
    if path is None:
        return None
    env = dict(os.environ)
    deadline = _deadline(env, "CONTINUITY_HOOK_DEADLINE", DEADLINE_SECONDS)
    request = Request(
        version=version(),
        module=module,
        agent=agent,
        location=location,
        event=event,
        payload=payload,
        env=env,
        cwd=os.getcwd(),
        deadline=deadline,
        first_answer=_deadline(env, "CONTINUITY_HOOK_FIRST_ANSWER", FIRST_ANSWER_SECONDS),
        kept=[(os.fsdecode(p.file), p.nonce, p.final, main) for p, main in kept],
    )
    try:
        data = _encode(request) + b"\n"
    except (TypeError, ValueError):  # an adapter's payload that is not JSON: in-process
        return None
    for _ in range(2):  # a relay on its way out, or an older one: start another, once
        sock = _connect(path) or _start(location, local, path)
        if sock is None:
            return None
        with sock:
            try:
                sock.settimeout(ACK_SECONDS)
                sock.sendall(data)
                first = _read_reply(sock)
            except TimeoutError:
                _end_wedged(local)
                return Reply(kind="lost", reason=f"the relay took no request in {ACK_SECONDS:g} s")
            except OSError:
                first = None
            if first is None or first.kind == "mismatch":
                continue
            try:
                sock.settimeout(deadline + 2.0)  # the relay answers itself at the deadline
                reply = _read_reply(sock)
            except TimeoutError:  # past its own watchdog: wedged
                _end_wedged(local)
                return Reply(kind="lost", reason="the relay did not answer within the deadline")
            except OSError:
                reply = None
            if reply is None:
                return Reply(kind="lost", reason="the relay stopped before it answered")
            return reply
    return None


def _end_wedged(local: Path) -> None:
    """End the store's relay, which took no request or gave no answer past its own watchdog
    (wedged, or stopped): the next hook starts another rather than wait on it too. What the
    hooks asked it is in ``pending/``."""
    try:
        pid = int((local / PID_NAME).read_text())
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if b"continuity.agents.base.relay_serve" not in f.read():
                return  # the pid file outlived its relay: another process has that number
        import signal

        os.kill(pid, signal.SIGKILL)
    except (OSError, ValueError):
        pass


def _read_reply(sock: socket.socket) -> Reply | None:
    """One line from the relay, or None at its end of the stream before one."""
    buf = bytearray()
    while not buf.endswith(b"\n"):
        chunk = sock.recv(1 << 16)
        if not chunk:
            return None
        buf += chunk
        if len(buf) > MAX_LINE:
            return None
    try:
        return _decode_reply(buf)
    except msgspec.DecodeError:
        return None


def _connect(path: Path) -> socket.socket | None:
    """A connection to the relay at ``path``, or None (none there, or a stale socket)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(1.0)
        sock.connect(os.fspath(path))
    except OSError:
        sock.close()
        return None
    return sock


def _start(location: str, local: Path, path: Path) -> socket.socket | None:
    """Start the store's relay (unless a racing hook just did) and connect to it; None when it
    did not come up within :data:`START_SECONDS` (it could not import the driver, say)."""
    import fcntl

    try:
        local.mkdir(parents=True, exist_ok=True)
        fd = os.open(local / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # the holder waits at most START_SECONDS
        sock = _connect(path)  # a racing hook started it meanwhile
        if sock is not None:
            return sock
        return _spawn(location, local, path)
    finally:
        os.close(fd)  # releases the lock


def _spawn(location: str, local: Path, path: Path) -> socket.socket | None:
    import selectors
    import subprocess

    try:
        path.unlink(missing_ok=True)  # stale: nothing listens (the start lock is ours)
    except OSError:
        return None
    env = dict(os.environ)
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    try:
        with open(local / LOG_NAME, "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "continuity.agents.base.relay_serve", location],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=log,
                env=env,
                cwd="/",
                start_new_session=True,  # not in the agent's process group: it outlives the hook
                close_fds=True,
            )
    except OSError:
        return None
    assert proc.stdout is not None
    with proc.stdout, selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        ready = bool(sel.select(START_SECONDS)) and proc.stdout.readline() == b"ready\n"
    if not ready:
        return None
    return _connect(path)


def wait_gone(pid: int, seconds: float) -> bool:
    """Whether process ``pid`` is gone within ``seconds`` (for tests and the docs' stop)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.02)
    return False
