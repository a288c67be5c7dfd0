"""The PostgreSQL page's try-it recipe works as written: its shell block, run by bash (``pip
install`` left out: the dev extra has both), starts a server with pgserver, makes a store on it,
appends, reads and searches, and stops the server. Skipped without pgserver, saying why."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def recipe() -> list[str]:
    page = (ROOT / "docs" / "postgresql.md").read_text(encoding="utf-8")
    found = re.search(r"^## Try it on your machine\n.*?^```sh\n(.*?)^```", page, re.S | re.M)
    assert found, "docs/postgresql.md has no `## Try it on your machine` with a sh block"
    return found.group(1).splitlines()


@pytest.mark.slow
@pytest.mark.postgres
def test_the_try_it_recipe_runs() -> None:
    pytest.importorskip("pgserver", reason="the recipe needs pgserver (the dev extra)")
    lines = recipe()
    assert lines[0].startswith("pip install "), lines[0]
    place, stop = lines[1], lines[-1]
    assert place.startswith("export PG=") and "cleanup()" in stop
    # Not under pytest's own folder: run as root, pgserver opens the folders above its data
    # to the server's user, and another pytest session may close pytest-of-<user> again.
    home = Path(tempfile.mkdtemp(prefix="continuity-pg-recipe-"))
    (home / "run").mkdir(mode=0o700)
    env = {
        **os.environ,
        "HOME": str(home),
        "XDG_RUNTIME_DIR": str(home / "run"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(ROOT),  # this checkout's continuity, whatever the venv points at
    }
    for name in ("CONTINUITY_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"):
        env.pop(name, None)
    try:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", "\n".join(lines[1:])],
            capture_output=True,
            text=True,
            env=env,
            cwd=home,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        out = done.stdout
        assert (
            out.splitlines()[0]
            == f"postgresql://postgres:@/postgres?host={home}/.cache/continuity-try-pg"
        )
        assert "created store at postgresql://postgres:***@/postgres" in out
        assert "user: hello from PostgreSQL" in out  # log
        assert re.search(r"^demo  seq 1 .*\n    hello from PostgreSQL$", out, re.M)  # search
    finally:
        subprocess.run(
            ["bash", "-c", f"{place}\n{stop}"],  # stopped even when a line failed
            env=env,
            capture_output=True,
            timeout=60,
            check=False,
        )
        shutil.rmtree(home, ignore_errors=True)
