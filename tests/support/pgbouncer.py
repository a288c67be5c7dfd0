"""A real PgBouncer in transaction pooling mode in front of the tests' PostgreSQL server.

PgBouncer is Debian's package, unpacked into the test cache by ``python -m tools.pgbouncer
install`` (``.ci/run`` does it). Without it the tests that need one skip, saying why: they never
download anything themselves.

:func:`pooled` starts one for a server URL and yields the URL of the same database through it.
``auth_type = any``: the pooler logs every client in as the server URL's user (the tests' server
trusts local logins), so the test itself never handles a password.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

import pytest

__all__ = ["pooled"]

_START_S: Final = 15.0
_RUN_AS: Final = "pgserver"
"""PgBouncer refuses to run as root; started as root, it changes to this user (pgserver's own,
which the tests' server already runs as)."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _executable() -> tuple[Path, dict[str, str]]:
    from tools import pgbouncer

    exe = pgbouncer.executable()
    if exe is None:
        pytest.skip(
            "PgBouncer is not in the test cache: run `python -m tools.pgbouncer install` "
            "(Debian's package, unpacked without root; .ci/run does it)"
        )
    return exe, pgbouncer.environment(pgbouncer.folder())


def _config(server_url: str, port: int, folder: Path, pool_size: int) -> str:
    from psycopg.conninfo import conninfo_to_dict

    params = conninfo_to_dict(server_url)
    target = " ".join(
        f"{k}={params[k]}" for k in ("host", "port", "user", "password") if params.get(k)
    )
    return "\n".join(
        [
            "[databases]",
            f"* = {target}",
            "[pgbouncer]",
            "listen_addr = 127.0.0.1",
            f"listen_port = {port}",
            "unix_socket_dir =",
            "auth_type = any",
            "pool_mode = transaction",
            f"default_pool_size = {pool_size}",
            "max_client_conn = 200",
            # What libpq and psycopg send at login; everything else (options) is refused.
            "ignore_startup_parameters = extra_float_digits",
            f"logfile = {folder / 'pgbouncer.log'}",
            f"pidfile = {folder / 'pgbouncer.pid'}",
            "",
        ]
    )


def _wait_listening(port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + _START_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            said = log.read_text(errors="replace") if log.exists() else ""
            pytest.fail(f"PgBouncer exited at start ({proc.returncode}): {said[-500:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    pytest.fail(f"PgBouncer did not listen on port {port} in {_START_S:g} s")


@contextmanager
def pooled(server_url: str, *, pool_size: int = 4) -> Iterator[str]:
    """The URL of ``server_url``'s database through a PgBouncer in transaction mode, with at
    most ``pool_size`` server connections (fewer than the clients: they must share them)."""
    from psycopg.conninfo import conninfo_to_dict

    exe, env = _executable()
    folder = Path(tempfile.mkdtemp(prefix="continuity-pgbouncer-"))
    try:
        port = _free_port()
        (folder / "pgbouncer.ini").write_text(_config(server_url, port, folder, pool_size))
        command = [str(exe), str(folder / "pgbouncer.ini")]
        if os.geteuid() == 0:  # it will not run as root: it changes user, who writes the log
            entry = pwd.getpwnam(_RUN_AS)
            os.chown(folder, entry.pw_uid, entry.pw_gid)
            command[1:1] = ["--user", _RUN_AS]
        proc = subprocess.Popen(
            command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            _wait_listening(port, proc, folder / "pgbouncer.log")
            params = conninfo_to_dict(server_url)
            user, dbname = params.get("user") or "postgres", params.get("dbname") or "postgres"
            yield f"postgresql://{user}@127.0.0.1:{port}/{dbname}"
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
