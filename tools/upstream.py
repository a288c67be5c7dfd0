"""The frameworks' own test suites, fetched for running against continuity (issue 27).

LangGraph's checkpointer-parametrized graph tests and the OpenAI Agents SDK's session and runner
tests run in our CI against continuity (``tests/outside/upstream/``). Their code is theirs: it
is never copied into this repository. It comes, at test time, from each framework's published
source distribution at the version pinned below (the version the ``dev`` extra installs, which
pins it), downloaded from the package index with ``pip download`` into a cache outside the
checkout, checked against the sha256 recorded here, and extracted once::

    python -m tools.upstream fetch          # download, verify and extract the pinned sdists
    python -m tools.upstream path langgraph # where its extracted tree is (fetching if need be)
    python -m tools.upstream hash NAME VER  # the sha256 of another version's sdist, to bump a pin

The cache is ``$CONTINUITY_TEST_CACHE`` (default ``~/.cache/continuity-tests/``; the same
folder holds the other things the tests fetch), under ``upstream/``: ``sdist/`` the verified
archives, ``src/NAME-VERSION/`` their trees. Concurrent runs are safe: one fetch at a time
holds ``upstream/.lock``, and a tree appears by an atomic rename of a complete extraction.
Without the network (and nothing cached) the upstream tests skip, saying why.

Running them (``tests/outside/upstream/test_suites.py``; PostgreSQL from ``pgserver`` or
``$CONTINUITY_TEST_PG_URL``, as for the rest of the suite)::

    .venv/bin/python -m pytest tests/outside/upstream        # the bounded CI run
    CONTINUITY_UPSTREAM=full .venv/bin/python -m pytest tests/outside/upstream  # all, ~8 min
    CONTINUITY_UPSTREAM=off  .venv/bin/python -m pytest      # without them

To move to a new version of a framework: change its pin in ``pyproject.toml``'s ``dev`` extra
and in :data:`PINS` (``python -m tools.upstream hash NAME VERSION`` prints the sha256), then
run the full suite and update ``tests/outside/upstream/deselect.toml`` and the floors.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Final

CACHE_ENV: Final = "CONTINUITY_TEST_CACHE"
DEFAULT_CACHE: Final = Path("~/.cache/continuity-tests")
PIP_TIMEOUT_S: Final = 30


@dataclass(frozen=True)
class Pin:
    """One framework's source distribution: the project's name on the index, the version, and
    the sha256 of its sdist."""

    name: str
    version: str
    sha256: str

    @property
    def tree(self) -> str:
        """The name of its extracted folder (and of the archive's top folder)."""
        return f"{self.name.replace('-', '_')}-{self.version}"

    @property
    def archive(self) -> str:
        return f"{self.tree}.tar.gz"


PINS: Final = {
    pin.name: pin
    for pin in (
        Pin(
            "langgraph",
            "1.2.24",
            "86b0dd611b7201cb393da2de0e064029c1bef520f11a5e6ee04be53c2a815bc7",
        ),
        Pin(
            "langgraph-checkpoint",  # its store and saver tests (for a BaseStore, issue 27)
            "4.3.2",
            "fcab8468c7e965d7055e2a35c253d73a145624ef4728b150ca7c361f4afca286",
        ),
        Pin(
            "openai-agents",
            "0.24.0",
            "4b4b285f4fed81fdf1b4ac426a9101658d9cd29b4fb1aaeee18f639b77e704e3",
        ),
    )
}
"""The pinned sdists. The ``dev`` extra pins the same versions (``==``): a framework's tests
test that version's behaviour, and the sha256 recorded here is what makes the download ours."""

KEPT: Final = ("tests/", "pyproject.toml", "LICENSE", "README.md")
"""What is extracted of an sdist: its tests and its pytest configuration. Its package source is
left out, so its tests import the installed framework (the same version), not a copy."""


class Unavailable(Exception):
    """The sdist could not be had (no network, the index refused it, or a checksum mismatch)."""


def cache_root() -> Path:
    """``$CONTINUITY_TEST_CACHE`` or ``~/.cache/continuity-tests``."""
    given = os.environ.get(CACHE_ENV)
    return Path(given).expanduser() if given else DEFAULT_CACHE.expanduser()


def upstream_dir() -> Path:
    return cache_root() / "upstream"


def pin_of(name: str) -> Pin:
    try:
        return PINS[name]
    except KeyError:
        raise Unavailable(f"no pinned sdist named {name!r} (pinned: {', '.join(PINS)})") from None


def installed_mismatch(name: str) -> str | None:
    """Why the installed framework is not the pinned one (None when it is)."""
    pin = pin_of(name)
    try:
        have = metadata.version(name)
    except metadata.PackageNotFoundError:
        return f"{name} is not installed (the dev extra installs {name}=={pin.version})"
    if have != pin.version:
        return (
            f"{name} {have} is installed but its tests are pinned at {pin.version} "
            "(tools/upstream.py PINS and the dev extra in pyproject.toml must agree)"
        )
    return None


def source(pin: Pin) -> Path | None:
    """The extracted tree of ``pin``'s sdist, if it is in the cache (no network)."""
    tree = upstream_dir() / "src" / pin.tree
    return tree if (tree / "tests").is_dir() else None


def fetch(name: str) -> Path:
    """The extracted tree of ``name``'s pinned sdist: see :func:`fetch_pin`."""
    return fetch_pin(pin_of(name))


def fetch_pin(pin: Pin) -> Path:
    """The extracted tree of ``pin``'s sdist: from the cache, else downloaded, checked and
    extracted. Raises :class:`Unavailable` (saying why) when it cannot be had."""
    found = source(pin)
    if found is not None:
        return found
    base = upstream_dir()
    with cache_lock(base):
        found = source(pin)  # another run may have fetched it while this one waited
        if found is not None:
            return found
        archive = download(pin, base / "sdist")
        return extract(pin, archive, base / "src")


def fetch_all(names: Sequence[str] = ()) -> dict[str, Path]:
    return {name: fetch(name) for name in (names or PINS)}


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@contextlib.contextmanager
def cache_lock(base: Path) -> Iterator[None]:
    """``base`` (made if missing) locked for one installer at a time (``base/.lock``): the
    test cache is shared by every process that installs into it."""
    base.mkdir(parents=True, exist_ok=True)
    with (base / ".lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def pip_download(name: str, version: str, into: Path) -> Path:
    """``pip download --no-deps --no-binary :all: NAME==VERSION`` into ``into``; the archive."""
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--quiet",
        "--no-deps",
        "--no-binary",
        ":all:",
        "--timeout",
        str(PIP_TIMEOUT_S),
        "--retries",
        "1",
        "--dest",
        str(into),
        f"{name}=={version}",
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    archives = sorted(into.glob("*.tar.gz"))
    if done.returncode != 0 or len(archives) != 1:
        said = [line for line in done.stderr.splitlines() if "is ignored" not in line]
        raise Unavailable(
            f"pip download {name}=={version} failed (exit {done.returncode}; no network?): "
            + (" | ".join(said[-3:]) or "no sdist came")
        )
    return archives[0]


def download(pin: Pin, into: Path) -> Path:
    """``pin``'s sdist in ``into``: the one there if its sha256 is right, else downloaded and
    checked (a wrong sha256 is :class:`Unavailable`, and the file is not kept)."""
    archive = into / pin.archive
    if archive.is_file() and sha256_of(archive) == pin.sha256:
        return archive
    into.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=into, prefix=".download-") as tmp:
        got = pip_download(pin.name, pin.version, Path(tmp))
        digest = sha256_of(got)
        if digest != pin.sha256:
            raise Unavailable(
                f"{got.name}: sha256 {digest}, but {pin.sha256} is pinned in tools/upstream.py "
                "(a different file was served: not used)"
            )
        got.replace(archive)
    return archive


def extract(pin: Pin, archive: Path, into: Path) -> Path:
    """Extract what :data:`KEPT` names of ``archive`` into ``into/<pin.tree>``, all at once (an
    atomic rename of a complete extraction)."""
    into.mkdir(parents=True, exist_ok=True)
    final = into / pin.tree
    with tempfile.TemporaryDirectory(dir=into, prefix=".extract-") as tmp:
        with tarfile.open(archive, "r:gz") as tar:
            members = [m for m in tar.getmembers() if kept(m.name, pin.tree)]
            tar.extractall(tmp, members=members, filter="data")
        staged = Path(tmp) / pin.tree
        if not (staged / "tests").is_dir():
            raise Unavailable(f"{archive.name} has no {pin.tree}/tests folder")
        if final.exists():  # a partial tree from an older run (source() did not accept it)
            shutil.rmtree(final)
        staged.rename(final)
    return final


def kept(member: str, top: str) -> bool:
    """Whether an archive member (``top/...``) is one :data:`KEPT` names."""
    prefix = top + "/"
    if not member.startswith(prefix):
        return False
    inner = member[len(prefix) :]
    return any(inner == k or (k.endswith("/") and inner.startswith(k)) for k in KEPT)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.upstream", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    fetch_p = sub.add_parser("fetch", help="download, verify and extract the pinned sdists")
    fetch_p.add_argument("names", nargs="*", help=f"some of {', '.join(PINS)} (default: all)")
    path_p = sub.add_parser("path", help="print where a pinned sdist's tree is (fetching it)")
    path_p.add_argument("name")
    hash_p = sub.add_parser("hash", help="print the sha256 of NAME==VERSION's sdist")
    hash_p.add_argument("name")
    hash_p.add_argument("version")
    args = parser.parse_args(argv)
    try:
        if args.command == "fetch":
            for name, tree in fetch_all(args.names).items():
                mismatch = installed_mismatch(name)
                note = f"  (note: {mismatch})" if mismatch else ""
                print(f"{name}=={pin_of(name).version}: {tree}{note}")
        elif args.command == "path":
            print(fetch(args.name))
        else:
            with tempfile.TemporaryDirectory() as tmp:
                got = pip_download(args.name, args.version, Path(tmp))
                print(f"{got.name} {sha256_of(got)}")
    except Unavailable as exc:
        print(f"upstream: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
