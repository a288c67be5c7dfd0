"""PgBouncer for the pooler tests (issue 30, ``tests/outside/pgbouncer/``).

The tests put a real PgBouncer in transaction pooling mode in front of the test server. It is
Debian bookworm's package (PgBouncer 1.18), never installed system-wide: ``apt-get download``
fetches the ``.deb`` (and ``libc-ares2``, the one shared library a bookworm system may lack),
``dpkg-deb -x`` unpacks it, without root, into the cache the other fetched test inputs use::

    python -m tools.pgbouncer install   # fetch and unpack it (skips when present)
    python -m tools.pgbouncer path      # where its executable is (installing if need be)

The cache is ``$CONTINUITY_TEST_CACHE`` (default ``~/.cache/continuity-tests/``), under
``pgbouncer/<version>``; the folder appears by an atomic rename of a complete unpack. Run it with
:func:`environment` (``LD_LIBRARY_PATH`` pointing at the unpacked libraries). Without apt (not
Debian) or its mirror, and nothing cached, the tests that need it skip, saying why.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from tools.upstream import cache_lock, cache_root

VERSION: Final = "1.18"
"""Debian bookworm's PgBouncer: the version the folder is named after."""
PACKAGES: Final = ("pgbouncer", "libc-ares2")
_BIN: Final = Path("usr/sbin/pgbouncer")
_LIBS: Final = Path("usr/lib/x86_64-linux-gnu")
TIMEOUT_S: Final = 300


class Unavailable(Exception):
    """PgBouncer could not be had (no apt, no mirror, or the package does not run here)."""


def folder(base: Path | None = None) -> Path:
    return (base or cache_root() / "pgbouncer") / f"pgbouncer-{VERSION}"


def environment(root: Path) -> dict[str, str]:
    """The environment to run ``root``'s PgBouncer in (its unpacked libraries found first)."""
    env = dict(os.environ)
    libs = str(root / _LIBS)
    env["LD_LIBRARY_PATH"] = (
        f"{libs}:{env['LD_LIBRARY_PATH']}" if env.get("LD_LIBRARY_PATH") else libs
    )
    return env


def _runs(root: Path) -> bool:
    exe = root / _BIN
    if not exe.exists():
        return False
    try:
        done = subprocess.run(
            [str(exe), "--version"],
            env=environment(root),
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
        )
    except OSError:
        return False
    return done.returncode == 0 and done.stdout.startswith(f"PgBouncer {VERSION}")


def executable(base: Path | None = None) -> Path | None:
    """The cached PgBouncer's executable, if it is there and runs (no network)."""
    root = folder(base)
    return root / _BIN if _runs(root) else None


def _run(command: list[str], cwd: Path) -> None:
    try:
        done = subprocess.run(
            command, cwd=cwd, capture_output=True, text=True, check=False, timeout=TIMEOUT_S
        )
    except FileNotFoundError:
        raise Unavailable(f"{command[0]} is not installed (PgBouncer comes from Debian)") from None
    except subprocess.TimeoutExpired:
        raise Unavailable(f"{' '.join(command)}: no answer in {TIMEOUT_S} s") from None
    if done.returncode != 0:
        said = [line for line in done.stderr.splitlines() if line.strip() and line[:2] != "W:"]
        raise Unavailable(
            f"{' '.join(command)} failed (exit {done.returncode}): "
            + (" | ".join(said[-3:]) or "nothing said")
        )


def install(base: Path | None = None) -> Path:
    """PgBouncer's executable: from the cache, else downloaded and unpacked into it. Raises
    :class:`Unavailable` (saying why) when it cannot be had."""
    base = base or cache_root() / "pgbouncer"
    found = executable(base)
    if found is not None:
        return found
    with cache_lock(base):
        found = executable(base)  # another run may have installed it while this one waited
        if found is not None:
            return found
        with tempfile.TemporaryDirectory(dir=base, prefix=".install-") as tmp:
            debs, staged = Path(tmp) / "debs", Path(tmp) / "root"
            debs.mkdir()
            _run(["apt-get", "download", *PACKAGES], debs)
            for deb in sorted(debs.glob("*.deb")):
                _run(["dpkg-deb", "-x", str(deb), str(staged)], debs)
            if not _runs(staged):
                raise Unavailable(f"the unpacked PgBouncer does not run here ({staged / _BIN})")
            final = folder(base)
            if final.exists():  # a partial unpack from an older run (executable() refused it)
                shutil.rmtree(final)
            staged.rename(final)
    found = executable(base)
    assert found is not None
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.pgbouncer", description=__doc__)
    parser.add_argument("command", choices=("install", "path"))
    parser.parse_args(argv)
    try:
        print(install())
    except Unavailable as exc:
        print(f"pgbouncer: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
