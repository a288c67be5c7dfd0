"""A real read-only standby of the tests' PostgreSQL server, and roles on it.

:func:`standby` copies a running pgserver server with ``pg_basebackup -R`` (which writes
``standby.signal`` and the primary's address) and starts the copy, from the same binaries, on
a socket folder of its own: a hot standby that streams the primary's WAL and refuses every write
(``cannot execute … in a read-only transaction``), as a managed replica does. It needs the
server to be pgserver's (its binaries, trusted local logins); with an external server the tests
that need it skip, saying why.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

import pytest

__all__ = ["as_role", "standby", "wait_replayed"]

_RUN_AS: Final = "pgserver"
"""The user pgserver runs its server as when the tests run as root (PostgreSQL refuses root)."""


def as_role(url: str, role: str) -> str:
    """``url`` logging in as ``role`` (no password: the tests' server trusts local logins)."""
    scheme, rest = url.split("://", 1)
    netloc, slash, tail = rest.partition("/")
    host = netloc.rpartition("@")[2]
    return f"{scheme}://{role}@{host}{slash}{tail}"


def _bin() -> Path:
    try:
        import pgserver
    except ImportError:
        pytest.skip("no pgserver: its binaries make the standby")
    return Path(pgserver.__file__).parent / "pginstall" / "bin"


def _run(command: list[str]) -> subprocess.CompletedProcess[str]:
    if os.geteuid() == 0:
        command = ["runuser", "-u", _RUN_AS, "--", *command]
    return subprocess.run(command, capture_output=True, text=True, check=False, timeout=60)


@contextmanager
def standby(primary_url: str) -> Iterator[str]:
    """The URL of a hot standby of ``primary_url``'s server (same database and user)."""
    from psycopg.conninfo import conninfo_to_dict

    if os.environ.get("CONTINUITY_TEST_PG_URL"):
        pytest.skip("the standby is made from pgserver's server, not an external one")
    params = conninfo_to_dict(primary_url)
    host = str(params.get("host") or "")
    if not host.startswith("/"):
        pytest.skip("the standby copies a server reached by its socket folder")
    binaries = _bin()
    home = Path(tempfile.mkdtemp(prefix="continuity-standby-"))
    home.chmod(0o755)
    if os.geteuid() == 0:
        shutil.chown(home, _RUN_AS, _RUN_AS)
    data = home / "data"
    try:
        user = str(params.get("user") or "postgres")
        copy = ["-D", str(data), "-R", "-X", "stream", "-h", host, "-U", user, "-c", "fast"]
        copied = _run([str(binaries / "pg_basebackup"), *copy])
        if copied.returncode != 0:
            pytest.skip(f"pg_basebackup could not copy the server: {copied.stderr.strip()[-300:]}")
        options = f"-p 5432 -k {home} -c listen_addresses='' -c hot_standby=on"
        start = ["-D", str(data), "-w", "-l", str(home / "log"), "-o", options, "start"]
        started = _run([str(binaries / "pg_ctl"), *start])
        if started.returncode != 0:
            pytest.skip(f"the standby did not start: {started.stderr.strip()[-300:]}")
        try:
            dbname = params.get("dbname") or user
            yield f"postgresql://{user}@/{dbname}?host={home}"
        finally:
            _run([str(binaries / "pg_ctl"), "-D", str(data), "-w", "-m", "immediate", "stop"])
    finally:
        shutil.rmtree(home, ignore_errors=True)


def wait_replayed(primary_url: str, standby_url: str, timeout: float = 30) -> None:
    """Wait until the standby has replayed everything the primary has written so far."""
    import psycopg

    with psycopg.connect(primary_url, autocommit=True) as conn:
        row = conn.execute("SELECT pg_current_wal_lsn()").fetchone()
    assert row is not None
    target = row[0]
    deadline = time.monotonic() + timeout
    with psycopg.connect(standby_url, autocommit=True) as conn:
        while True:
            done = conn.execute(
                "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [target]
            ).fetchone()
            if done is not None and done[0]:
                return
            assert time.monotonic() < deadline, "the standby did not catch up"
            time.sleep(0.05)
