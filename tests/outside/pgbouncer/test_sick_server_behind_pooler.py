"""Hooks behind a real PgBouncer whose PostgreSQL is down or frozen (issue 40 item 6): the
pooler answers the hook's probe for the server, then holds the login or the first query while
it waits for a server that never comes, where no server-side limit can fire. The hook gives up
after its first-answer budget (not the whole hook's deadline, set far away here so the two
cannot be confused), exits 0, keeps the transcript in ``pending/`` and marks the server."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from continuity.paths import local_dir_of
from continuity.store import outage
from tests.agents.claude_code.test_hooks import SESSION, Transcript, work
from tests.support.pgbouncer import pooled

pytestmark = pytest.mark.pgbouncer


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def frozen_server() -> Iterator[str]:
    """A "server" that accepts connections and never says a word (a SIGSTOPped PostgreSQL)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"postgresql://postgres@127.0.0.1:{listener.getsockname()[1]}/postgres"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    listener.close()


@pytest.fixture
def down_server() -> str:
    """A server that is down: nothing listens on its port."""
    return f"postgresql://postgres@127.0.0.1:{_free_port()}/postgres"


@pytest.mark.parametrize("server", ["down_server", "frozen_server"])
def test_a_hook_behind_the_pooler_gives_up_on_a_sick_server_and_keeps_its_transcript(
    server: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    behind: str = request.getfixturevalue(server)
    xdg = tmp_path / "xdg"
    a = Transcript(tmp_path / "projects" / "-work-demo" / f"{SESSION}.jsonl")
    work(a, ["src/app.py"], ["pytest -q"])
    a.flush()
    with pooled(behind, pool_size=2) as url:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CONTINUITY_")}
        env |= {"XDG_DATA_HOME": str(xdg), "CONTINUITY_HOME": url}
        env["CONTINUITY_HOOK_DEADLINE"] = "60"  # far: only the first-answer budget can end it
        done = subprocess.run(
            [sys.executable, "-m", "continuity", "hook", "user-prompt-submit"],
            input=json.dumps(a.payload("UserPromptSubmit", prompt="go")),
            capture_output=True,
            text=True,
            timeout=45,  # a guard for the suite; the old hook waited for the whole deadline
            env=env,
            check=False,
        )
        local = local_dir_of(url, {"XDG_DATA_HOME": str(xdg)})
    assert done.returncode == 0, done.stderr
    assert "not used" in done.stderr and "transcript kept" in done.stderr, done.stderr
    assert "deadline" not in done.stderr and "within 1 s" in done.stderr, done.stderr
    assert [p.path.name for p in outage.pending(local)] == [f"{SESSION}.jsonl"]
    assert outage.mark_of(local) is not None
