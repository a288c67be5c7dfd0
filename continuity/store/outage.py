"""What a hook on a server store remembers about the server between processes: a mark saying
it has been unreachable since when (so the next hooks skip it at once, and retry later), and
the transcripts no hook could archive while it was (caught up by the next hook that reaches
it). Both live in the store's local folder (:func:`continuity.paths.local_dir_of`).

Standard library only, and no database driver: a hook checks the mark and probes the server
before psycopg (about a second of a loaded machine's hook) is imported.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import msgspec

from continuity._fs import atomic_write

TYPE_CHECKING = False  # not typing's: the hook path imports this module
if TYPE_CHECKING:
    from typing import Any, Final

__all__ = [
    "HOOK_STORE_OPTIONS",
    "PROBE_SECONDS",
    "Mark",
    "Pending",
    "backoff",
    "clear_mark",
    "mark_of",
    "note_unreachable",
    "pending",
    "probe",
    "remember",
    "settle",
    "skip_for",
]

HOOK_STORE_OPTIONS: Final[dict[str, Any]] = {
    "connect_timeout": 2.0,  # psycopg's floor (libpq's): the probe answers sooner
    "statement_timeout": 0.8,
    "lock_timeout": 0.4,
    "pooled": False,
}
"""What a hook opens a server store with: every statement and lock wait bounded well under a
second (Claude Code kills a hook at 30 s; a prompt waits for it), and no connection pool (one
login, no pool module or worker threads: a hook makes its calls one after another)."""

PROBE_SECONDS: Final = 0.5
"""How long a hook waits for the server to answer its first byte before it counts as down."""

_MARK: Final = "server-unreachable.json"
_PENDING: Final = "pending"
_FIRST_WAIT: Final = 30.0
_LONGEST_WAIT: Final = 300.0
_SSL_REQUEST: Final = (8).to_bytes(4, "big") + (80877103).to_bytes(4, "big")


def probe(url: str, *, timeout: float = PROBE_SECONDS) -> str | None:
    """None when the server at ``url`` answers a first message within ``timeout`` seconds (or
    the URL names no single address this can try: psycopg's own timeout applies then), else
    why not in a few words. It sends PostgreSQL's SSLRequest, which any server or pooler
    answers with one byte before a login, and closes: a server that accepts connections and
    never answers (hung, or its machine overloaded) is found out as fast as one that is down."""
    address = _address(url)
    if address is None:
        return None
    import socket  # only when probing: a hook that skips a marked server never needs it

    try:
        if isinstance(address, str):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.settimeout(timeout)
                sock.connect(address)
            except BaseException:
                sock.close()
                raise
        else:
            sock = socket.create_connection(address, timeout=timeout)
    except TimeoutError:
        return f"no connection within {timeout:g} s"
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    try:
        sock.settimeout(timeout)
        sock.sendall(_SSL_REQUEST)
        answer = sock.recv(1)
    except TimeoutError:
        return f"connected, but no answer within {timeout:g} s"
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    finally:
        sock.close()
    return None if answer else "the server closed the connection without a word"


def _address(url: str) -> tuple[str, int] | str | None:
    """The one TCP address or Unix socket path ``url`` names, or None (several hosts, a service
    file, or an empty host that libpq would look up from its environment)."""
    from urllib.parse import parse_qs, unquote, urlsplit

    try:
        parts = urlsplit(url)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        if "," in parts.netloc:
            return None
        host = query.get("hostaddr") or query.get("host") or unquote(parts.hostname or "")
        port_text = query.get("port") or ""
        port_num = int(port_text) if port_text else (parts.port or 5432)
    except ValueError:
        return None
    if not host or "," in host or "," in port_text or "service" in query:
        return None
    if host.startswith("/"):
        return f"{host}/.s.PGSQL.{port_num}"
    return host, port_num


class Mark(msgspec.Struct, frozen=True):
    """The server has been unreachable since ``since`` (Unix seconds); ``failures`` hooks in a
    row found it so, the last at ``last_try``; ``reason``: what the last one saw."""

    since: float
    last_try: float
    failures: int
    reason: str


def backoff(failures: int) -> float:
    """Seconds to leave the server alone after ``failures`` failed tries in a row: 30 s, then
    doubling, at most 5 minutes."""
    return float(min(_FIRST_WAIT * 2 ** max(0, min(failures, 16) - 1), _LONGEST_WAIT))


def mark_of(local: Path) -> Mark | None:
    """The unreachable mark in ``local``, or None (none, or unreadable: try the server)."""
    try:
        data = msgspec.json.decode((local / _MARK).read_bytes())
        return Mark(
            float(data["since"]), float(data["last_try"]), int(data["failures"]), data["reason"]
        )
    except (OSError, ValueError, KeyError, TypeError, msgspec.DecodeError):
        return None


def skip_for(local: Path, *, now: float | None = None) -> Mark | None:
    """The mark when a hook should not try the server now (it failed less than its backoff
    ago), else None: no mark, or time for one hook to retry."""
    mark = mark_of(local)
    now = time.time() if now is None else now
    if mark is None or now >= mark.last_try + backoff(mark.failures) or now < mark.last_try:
        return None
    return mark


def note_unreachable(local: Path, reason: str, *, now: float | None = None) -> Mark:
    """Write (or extend) the mark: one more failed try, now."""
    now = time.time() if now is None else now
    old = mark_of(local)
    mark = Mark(old.since if old else now, now, (old.failures if old else 0) + 1, reason)
    local.mkdir(parents=True, exist_ok=True)
    data = {"since": mark.since, "last_try": now, "failures": mark.failures, "reason": reason}
    atomic_write(local / _MARK, msgspec.json.encode(data), durable=False)
    return mark


def clear_mark(local: Path) -> bool:
    """Remove the mark (the server answered); whether there was one."""
    try:
        (local / _MARK).unlink()
    except FileNotFoundError:
        return False
    return True


class Pending(msgspec.Struct, frozen=True):
    """A transcript a hook could not archive: its ``path``, the ``agent`` that wrote it, the
    ``session`` it holds, whether a hook wanted it ingested as ``final`` (the session ended or
    compacted), when (Unix seconds), and the entry's ``file`` and ``nonce`` (see
    :func:`settle`)."""

    path: Path
    agent: str
    session: str
    final: bool
    time: float
    file: Path
    nonce: str


def remember(local: Path, transcript: Path, *, agent: str, session: str, final: bool) -> Pending:
    """Keep ``transcript`` for the next hook that reaches the server: one small file per
    transcript (named by a digest of its path, written atomically), so parallel hooks never
    lose each other's entries and a transcript is listed once. ``final`` sticks. Returns the
    entry as written (its nonce settles it)."""
    import blake3  # local_dir_of imported it for the server's URL already

    folder = local / _PENDING
    folder.mkdir(parents=True, exist_ok=True)
    name = blake3.blake3(os.fsencode(transcript)).hexdigest()[:24] + ".json"
    old = _read_entry(folder / name)
    entry = Pending(
        transcript,
        agent,
        session,
        final or (old is not None and old.final),
        time.time(),
        folder / name,
        os.urandom(8).hex(),
    )
    data = {
        "path": os.fsdecode(transcript),
        "agent": agent,
        "session": session,
        "final": entry.final,
        "time": entry.time,
        "nonce": entry.nonce,
    }
    atomic_write(folder / name, msgspec.json.encode(data), durable=False)
    return entry


def _read_entry(file: Path) -> Pending | None:
    try:
        data = msgspec.json.decode(file.read_bytes())
        return Pending(
            Path(data["path"]),
            str(data["agent"]),
            str(data["session"]),
            bool(data["final"]),
            float(data["time"]),
            file,
            str(data["nonce"]),
        )
    except (OSError, ValueError, KeyError, TypeError, msgspec.DecodeError):
        return None


def pending(local: Path) -> list[Pending]:
    """The transcripts waiting to be archived, oldest first (an unreadable entry is dropped:
    it names nothing a hook could ingest)."""
    folder = local / _PENDING
    try:
        files = sorted(p for p in folder.iterdir() if p.suffix == ".json")
    except OSError:
        return []
    found = []
    for file in files:
        entry = _read_entry(file)
        if entry is None:
            file.unlink(missing_ok=True)
        else:
            found.append(entry)
    return sorted(found, key=lambda e: e.time)


def settle(entry: Pending) -> None:
    """Remove ``entry`` after its transcript was archived, unless another hook wrote it again
    meanwhile (its nonce changed): that one's lines may not be in yet."""
    now = _read_entry(entry.file)
    if now is not None and now.nonce == entry.nonce:
        entry.file.unlink(missing_ok=True)
