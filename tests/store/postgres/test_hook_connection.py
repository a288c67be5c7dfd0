"""A hook on a PostgreSQL store (issue 30 item 2): one login and no connection pool
(psycopg_pool, its worker threads and its second connection cost a hook that makes its calls
one after another), the same outputs as on a folder store, and the store's single held
connection behaving as a pool would hand connections out: a block inside a block, a lost
connection, an open transaction left behind, a closed store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from continuity.errors import StoreUnavailable
from continuity.store.base import BaseStore
from continuity.store.outage import HOOK_STORE_OPTIONS
from continuity.store.postgres.db import Database
from continuity.testing.store import StoreContract
from tests.agents.claude_code.test_hooks import SESSION, Transcript, work
from tests.store.postgres.test_cli import db_url, home  # noqa: F401  (fixtures)
from tests.support.pg import PgStores

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

SESSION_B = "22222222-3333-4444-8555-666666666666"


def _hook(
    event: str, payload: dict[str, object], env: dict[str, str], *, importtime: bool = False
) -> subprocess.CompletedProcess[str]:
    flags = ["-X", "importtime"] if importtime else []
    return subprocess.run(
        [sys.executable, *flags, "-m", "continuity", "hook", event],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


def _imported(result: subprocess.CompletedProcess[str]) -> set[str]:
    return {
        line.rsplit("|", 1)[1].strip()
        for line in result.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


def _messages(result: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in result.stderr.splitlines() if not line.startswith("import time:")]


def _env(xdg: Path, store: str) -> dict[str, str]:
    """The hook in its own process (the relay off: ADR 0062's tests are the relay's)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTINUITY_")}
    return {**env, "XDG_DATA_HOME": str(xdg), "CONTINUITY_HOME": store, "CONTINUITY_RELAY": "0"}


def test_a_hook_on_a_server_store_imports_no_pool_and_says_what_a_folder_store_says(
    db_url: str,  # noqa: F811
    home: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The hooks of two sessions, on a folder store and on the server: the same stdout each
    (the startup pointer, the restore after a compaction, the recall of a prompt); every hook
    on the server imports psycopg but neither psycopg_pool nor numpy (a prompt's recall
    aside: the search needs numpy on either store)."""
    folder = str(tmp_path / "store")
    outputs: dict[str, list[str]] = {}
    for name, store in (("folder", folder), ("server", db_url)):
        root = tmp_path / name
        a = Transcript(root / "projects" / "-work-demo" / f"{SESSION}.jsonl")
        b = Transcript(root / "projects" / "-work-demo" / f"{SESSION_B}.jsonl", session=SESSION_B)
        env = _env(home / name, store)
        steps: list[tuple[str, dict[str, object]]] = []
        work(a, ["src/app.py"], ["pytest -q"])
        a.flush()
        outs: list[str] = []
        for event, payload in (
            ("user-prompt-submit", a.payload("UserPromptSubmit", prompt="go")),
            ("stop", a.payload("Stop")),  # nothing new: the fast path, no store at all
        ):
            result = _hook(event, payload, env)
            assert result.returncode == 0 and result.stderr == "", result.stderr
            outs.append(result.stdout)
        a.compaction("We fixed src/app.py; the lint error remains.")
        a.flush()
        steps.append(("pre-compact", a.payload("PreCompact", trigger="auto")))
        steps.append(("session-start", a.payload("SessionStart", source="compact")))
        steps.append(("session-end", a.payload("SessionEnd")))
        steps.append(("session-start", b.payload("SessionStart", source="startup")))
        for event, payload in steps:
            result = _hook(event, payload, env, importtime=name == "server")
            assert result.returncode == 0 and _messages(result) == [], result.stderr
            if name == "server":
                modules = _imported(result)
                assert "psycopg" in modules, event
                assert not {m for m in modules if m.split(".")[0] in ("psycopg_pool", "numpy")}
            outs.append(result.stdout)
        # a prompt with recall on (the store's claude-code.json in its local folder)
        from continuity.paths import local_dir_of

        local = local_dir_of(store, {"XDG_DATA_HOME": str(home / name)})
        local.mkdir(parents=True, exist_ok=True)
        (local / "claude-code.json").write_text('{"recall_on_prompt": true}\n')
        work(b, ["src/other.py"], ["make"])
        b.flush()
        recall = _hook(
            "user-prompt-submit",
            b.payload("UserPromptSubmit", prompt="what was the lint error in src/app.py"),
            env,
            importtime=name == "server",
        )
        assert recall.returncode == 0 and _messages(recall) == [], recall.stderr
        if name == "server":
            assert not {m for m in _imported(recall) if m.split(".")[0] == "psycopg_pool"}
        outs.append(recall.stdout)
        outputs[name] = outs
    assert outputs["server"] == outputs["folder"]
    startup = outputs["server"][5]
    assert "previous session of this project" in startup and SESSION in startup
    assert "additionalContext" in outputs["server"][3]  # the restore after the compaction


def test_the_held_connection_is_handed_out_as_a_pool_would(
    db_url: str,  # noqa: F811
) -> None:
    """A hook's database (``pooled=False``, as :data:`~continuity.store.outage.HOOK_STORE_OPTIONS`
    asks): the held connection serves one block at a time; a block
    inside it gets a connection of its own; an open transaction left behind is rolled back;
    a connection the server dropped is replaced; a closed store says so."""
    db = Database(
        db_url,
        schema="continuity",
        pool_size=1,
        connect_timeout=2,
        create=True,
        now_ms=0,
        statement_timeout=5,
        lock_timeout=5,
        pooled=False,
    )
    try:
        with db.connection() as outer:
            pid = outer.info.backend_pid
            with db.connection() as inner:  # the held one is in use: a new login
                assert inner.info.backend_pid != pid
            assert inner.closed and not outer.closed
        with db.connection() as again:
            assert again.info.backend_pid == pid  # one login for the calls after each other
            again.execute("BEGIN")
            again.execute("SELECT 1")
        with db.connection() as conn:
            assert conn.info.backend_pid == pid
            assert conn.info.transaction_status.name == "IDLE"
            # the server drops it (a restart, an admin's pg_terminate_backend)
            with db.connect() as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", [pid])
        with pytest.raises(StoreUnavailable), db.connection() as conn:
            conn.execute("SELECT 1")
        with db.connection() as conn:  # dropped, so a new one
            assert conn.info.backend_pid != pid
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        db.close()
    assert db.closed
    with pytest.raises(StoreUnavailable, match="closed"), db.connection():
        pass


class TestStoreContractWithoutAPool(StoreContract):
    """The whole store contract on a store opened as a hook opens it (no pool, the hook's
    timeouts): the held connection is a complete store, threads and nested reads included."""

    _stores: PgStores

    @pytest.fixture(autouse=True)
    def _on_server(self, pg_stores: PgStores) -> None:
        self._stores = pg_stores

    def make_store(self, path: Path, clock: Callable[[], int]) -> BaseStore:
        options = {**HOOK_STORE_OPTIONS, "statement_timeout": 30.0, "lock_timeout": 30.0}
        store: BaseStore = self._stores.open(path, clock=clock, **options)
        return store
