"""The real agent clients, from npm, for the tests that run them (issue 28,
``tests/outside/clients/``).

Claude Code's CLI and the MCP Inspector are npm packages. The tests run them headless against
the suite's own scripted model server (``tests/support/model_server.py``) and against
``continuity mcp``, so what is tested is what a user runs. They are installed at the versions
pinned below, never globally: ``npm install --prefix <cache>/npm/<name>-<version>
<package>@<version>``, into the cache the other fetched test inputs use::

    python -m tools.agents install           # install the pinned clients (skips those present)
    python -m tools.agents path claude-code  # where its executable is (installing if need be)

The cache is ``$CONTINUITY_TEST_CACHE`` (default ``~/.cache/continuity-tests/``), under
``npm/``: one folder per pinned version (Claude Code is ~360 MB: its native binary). Concurrent
runs are safe: one install at a time holds ``npm/.lock``, and a folder appears by an atomic
rename of a complete install. Without npm or the registry (and nothing cached) the tests that
need a client skip, saying why.

To move to a new version: change its pin in :data:`PINS`, run ``python -m tools.agents install``
and ``pytest tests/outside/clients``; the old folder can be deleted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from tools.upstream import cache_lock, cache_root

NPM_TIMEOUT_S: Final = 600


@dataclass(frozen=True)
class NpmPin:
    """One client: our short name, its npm package, the version, and its executable (a name in
    ``node_modules/.bin``)."""

    name: str
    package: str
    version: str
    bin: str

    @property
    def folder(self) -> str:
        return f"{self.name}-{self.version}"


PINS: Final = {
    pin.name: pin
    for pin in (
        NpmPin("claude-code", "@anthropic-ai/claude-code", "2.1.328", "claude"),
        NpmPin("inspector", "@modelcontextprotocol/inspector", "2.12.0", "mcp-inspector"),
        NpmPin("opencode", "opencode-ai", "1.18.33", "opencode"),
        NpmPin("codex", "@openai/codex", "0.169.0", "codex"),
        NpmPin("gemini", "@google/gemini-cli", "0.61.0", "gemini"),
    )
}


class Unavailable(Exception):
    """The client could not be had (no npm, no registry, or the install is not what was asked)."""


def npm_dir() -> Path:
    return cache_root() / "npm"


def pin_of(name: str) -> NpmPin:
    try:
        return PINS[name]
    except KeyError:
        raise Unavailable(f"no pinned client named {name!r} (pinned: {', '.join(PINS)})") from None


def installed_version(prefix: Path, pin: NpmPin) -> str | None:
    manifest = prefix / "node_modules" / pin.package / "package.json"
    try:
        version = json.loads(manifest.read_text()).get("version")
    except (OSError, ValueError):
        return None
    return version if isinstance(version, str) else None


def executable(pin: NpmPin, base: Path | None = None) -> Path | None:
    """``pin``'s executable if it is installed in the cache (no network)."""
    prefix = (base or npm_dir()) / pin.folder
    exe = prefix / "node_modules" / ".bin" / pin.bin
    if exe.exists() and installed_version(prefix, pin) == pin.version:
        return exe
    return None


def npm_install(pin: NpmPin, prefix: Path) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise Unavailable("npm is not installed (the agent clients come from the npm registry)")
    command = [
        npm,
        "install",
        "--prefix",
        str(prefix),
        "--no-audit",
        "--no-fund",
        "--loglevel=error",
        f"{pin.package}@{pin.version}",
    ]
    try:
        # npm's own download cache in the test cache too: nothing lands in the user's ~/.npm
        env = {**os.environ, "npm_config_cache": str(cache_root() / "npm-cache")}
        done = subprocess.run(
            command, capture_output=True, text=True, check=False, timeout=NPM_TIMEOUT_S, env=env
        )
    except subprocess.TimeoutExpired:
        raise Unavailable(
            f"npm install {pin.package}@{pin.version}: no answer in {NPM_TIMEOUT_S} s"
        ) from None
    if done.returncode != 0:
        said = [line for line in done.stderr.splitlines() if line.strip()]
        raise Unavailable(
            f"npm install {pin.package}@{pin.version} failed (exit {done.returncode}; "
            "no registry?): " + (" | ".join(said[-3:]) or "nothing said")
        )


def install(name: str) -> Path:
    """The executable of ``name``'s pinned client: from the cache, else installed by npm into
    ``<cache>/npm/<name>-<version>`` (all at once: an atomic rename of a complete install).
    Raises :class:`Unavailable` (saying why) when it cannot be had."""
    return install_pin(pin_of(name))


def install_pin(pin: NpmPin, base: Path | None = None) -> Path:
    base = base or npm_dir()
    found = executable(pin, base)
    if found is not None:
        return found
    with cache_lock(base):
        found = executable(pin, base)  # another run may have installed it while this one waited
        if found is not None:
            return found
        with tempfile.TemporaryDirectory(dir=base, prefix=f".install-{pin.folder}-") as tmp:
            staged = Path(tmp) / pin.folder
            npm_install(pin, staged)
            got = installed_version(staged, pin)
            if got != pin.version or not (staged / "node_modules" / ".bin" / pin.bin).exists():
                raise Unavailable(
                    f"npm installed {pin.package} {got or '(nothing)'} without its "
                    f"{pin.bin!r} executable, not {pin.version}"
                )
            final = base / pin.folder
            if final.exists():  # a partial install from an older run (executable() refused it)
                shutil.rmtree(final)
            staged.rename(final)
    found = executable(pin, base)
    assert found is not None
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.agents", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    install_p = sub.add_parser("install", help="install the pinned clients (skips those present)")
    install_p.add_argument("names", nargs="*", help=f"some of {', '.join(PINS)} (default: all)")
    path_p = sub.add_parser("path", help="print a pinned client's executable (installing it)")
    path_p.add_argument("name")
    args = parser.parse_args(argv)
    try:
        if args.command == "install":
            for name in args.names or PINS:
                pin = pin_of(name)
                print(f"{pin.package}@{pin.version}: {install(name)}")
        else:
            print(install(args.name))
    except Unavailable as exc:
        print(f"agents: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
