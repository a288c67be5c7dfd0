"""A PostgreSQL store named by URL wherever a store is named: ``--store``, ``$CONTINUITY_HOME``,
``init``, ``migrate``, the hooks and ``install claude-code``; failures in one line; hooks that
never break Claude Code when the server is down, and lose nothing.

Each test gets a database of its own on the session's server (``pg_url``, see
``tests/support/pg.py``): the CLI's store lives in the database's ``continuity`` schema."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from continuity import frames as fr
from continuity.agents.table import CLAUDE_CODE
from continuity.cli.app import app
from continuity.store.jsonl import Store
from continuity.store.postgres import PostgresStore
from tests.agents.claude_code.test_hooks import SESSION, Transcript, work
from tests.support.narrow import narrow
from tests.support.pg import TEST_APP

HELLO = '{"type": "message_appended", "role": "user", "content": [{"type": "text", "text": "hi"}]}'
DOWN = "postgresql://nobody:hunter2@127.0.0.1:9/nowhere?connect_timeout=2"
"""A URL no server answers (port 9, discard): the password must never be shown."""


def _with_database(url: str, name: str) -> str:
    """``url`` with its database replaced by ``name`` (the query, with the socket folder, kept)."""
    scheme, rest = url.split("://", 1)
    netloc, _, tail = rest.partition("/")
    _db, q, query = tail.partition("?")
    return f"{scheme}://{netloc}/{name}{q}{query}"


@pytest.fixture
def db_url(pg_url: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh, empty database for this test, dropped after it."""
    import psycopg

    name = "cli_" + "".join(c if c.isalnum() else "_" for c in request.node.name)[-40:].lower()
    with psycopg.connect(pg_url, autocommit=True, application_name=TEST_APP) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield _with_database(pg_url, name)
    finally:
        with psycopg.connect(pg_url, autocommit=True, application_name=TEST_APP) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No CONTINUITY_* from the outside; the default folder (and a server store's local folder)
    under the test's own XDG_DATA_HOME."""
    for name in [n for n in os.environ if n.startswith("CONTINUITY_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg"


def cli(*args: str, input: str | None = None, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(app, list(args), input=input, env=env)


def one_line_error(result: Result, *needles: str) -> str:
    assert result.exit_code == 1, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def test_init_creates_the_schema_once_and_commands_work_on_the_url(db_url: str, home: Path) -> None:
    missing = cli("--store", db_url, "log", "t")
    one_line_error(missing, "continuity init")  # no schema yet: say how to make one
    first = cli("--store", db_url, "init")
    assert first.exit_code == 0, first.output
    assert first.stdout.startswith("created store at postgresql://")
    again = cli("init", "--store", db_url)
    assert again.stdout.startswith("store exists at postgresql://")
    appended = cli("--store", db_url, "append", "t", input=HELLO)
    assert appended.exit_code == 0, appended.output
    log = cli("--store", db_url, "log", "t")
    assert log.exit_code == 0 and "hi" in log.stdout
    assert "hi" in cli("--store", db_url, "compile", "t", "--format", "text").stdout
    assert "hi" in cli("--store", db_url, "search", "hi").stdout
    assert cli("--store", db_url, "threads").stdout.split()[0] == "t"
    stats = cli("--store", db_url, "stats")
    assert stats.exit_code == 0 and "postgresql://" in stats.stdout
    verify = cli("--store", db_url, "verify")
    assert verify.exit_code == 0, verify.output


def test_continuity_home_may_be_a_url(db_url: str, home: Path) -> None:
    env = {"CONTINUITY_HOME": db_url}
    assert cli("init", env=env).exit_code == 0
    assert cli("append", "t", input=HELLO, env=env).exit_code == 0
    with PostgresStore(db_url) as store:
        assert [f.seq for f in store.thread("t").read()] == [0, 1]


def test_a_command_in_a_real_process_exits_at_once(db_url: str, home: Path) -> None:
    """The pool's connections go back when a command ends: the process does not linger."""
    with PostgresStore(db_url, create=True) as store:
        store.thread("t").append(fr.message("user", "hello from a process"))
    env = {**os.environ, "XDG_DATA_HOME": str(home)}
    done = subprocess.run(
        [sys.executable, "-m", "continuity", "--store", db_url, "log", "t"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "hello from a process" in done.stdout
    assert done.stderr == ""
    fast = subprocess.run(  # the search fast path opens the store its own way
        [sys.executable, "-m", "continuity", "--store", db_url, "search", "process"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert fast.returncode == 0 and "hello from a process" in fast.stdout, fast.stderr


def test_an_unreachable_server_is_one_line_without_the_password(home: Path) -> None:
    for args in (["--store", DOWN, "log", "t"], ["--store", DOWN, "init"]):
        line = one_line_error(cli(*args), "127.0.0.1")
        assert "hunter2" not in line


def test_migrate_moves_a_store_to_the_server_and_back_byte_for_byte(
    db_url: str, home: Path, tmp_path: Path
) -> None:
    src = Store(tmp_path / "laptop", create=True)
    for i in range(3):
        src.thread("a").append([fr.message("user", f"q{i}"), fr.message("assistant", f"a{i}")])
    src.thread("b").append(fr.message("user", "another thread"))
    aid = src.artifacts.put(b"an artifact" * 50)
    up = cli("migrate", str(tmp_path / "laptop"), db_url)
    assert up.exit_code == 0, up.output
    assert "migrated 2 threads (9 frames copied) and 1 artifact" in up.stdout
    assert "hunter2" not in up.stdout
    again = cli("migrate", str(tmp_path / "laptop"), db_url)
    assert "(0 frames copied)" in again.stdout and "(1 already there)" in again.stdout
    down = cli("migrate", db_url, str(tmp_path / "back"))
    assert down.exit_code == 0, down.output
    back = Store(tmp_path / "back")
    for tid in ("a", "b"):
        assert list(back.thread(tid).read_lines()) == list(src.thread(tid).read_lines())
    assert back.artifacts.get(aid) == src.artifacts.get(aid)
    with PostgresStore(db_url) as server:
        assert list(server.thread("a").read_lines()) == list(src.thread("a").read_lines())
    assert cli("--store", str(tmp_path / "back"), "verify").exit_code == 0


def _hook(
    event: str, payload: dict[str, object], env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "continuity", "hook", event],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


def test_hooks_archive_to_the_server_and_lose_nothing_while_it_is_down(
    db_url: str, home: Path, tmp_path: Path
) -> None:
    t = Transcript(tmp_path / "projects" / "-work-demo" / f"{SESSION}.jsonl")
    work(t, ["src/app.py"], ["pytest -q"])
    t.flush()
    base = {**os.environ, "XDG_DATA_HOME": str(home)}
    base.pop("CONTINUITY_HOME", None)
    up = {**base, "CONTINUITY_HOME": db_url}
    first = _hook("user-prompt-submit", t.payload("UserPromptSubmit", prompt="go"), up)
    assert first.returncode == 0 and first.stderr == "", first.stderr
    with PostgresStore(db_url) as store:
        archived = len(list(store.thread(t.thread_id).read()))
    assert archived > 5
    # cursors and session state live in the server store's local folder, not in a store folder
    local = list((home / "continuity" / "servers").iterdir())
    assert len(local) == 1 and (local[0] / "cache" / "claude-code" / "cursors").is_dir()

    # the server goes away; Claude Code goes on writing the transcript
    t.prompt("Now also handle empty files")
    t.tool("Edit", {"file_path": "src/io.py", "old_string": "a", "new_string": "b"}, "updated")
    t.flush()
    down = {**base, "CONTINUITY_HOME": DOWN}
    failed = _hook("user-prompt-submit", t.payload("UserPromptSubmit", prompt="more"), down)
    assert failed.returncode == 0  # a hook never breaks Claude Code
    lines = failed.stderr.splitlines()
    assert len(lines) == 1 and "not used" in lines[0], failed.stderr
    assert "hunter2" not in failed.stderr
    logs = list((home / "continuity" / "servers").glob("*/errors.log"))
    assert any("transcript kept to archive later" in p.read_text() for p in logs)

    # back up: the next hook archives what the failed one could not
    again = _hook("stop", t.payload("Stop"), up)
    assert again.returncode == 0 and again.stderr == "", again.stderr
    with PostgresStore(db_url) as store:
        texts = [
            b.text
            for f in store.thread(t.thread_id).read(types=["message_appended"])
            for b in narrow(fr.MessageAppended, f).content
            if isinstance(b, fr.TextBlock)
        ]
    assert any("handle empty files" in x for x in texts)
    assert t.thread_id == CLAUDE_CODE.thread_id(t.session)


def test_install_names_the_url_in_the_hook_command(home: Path, tmp_path: Path) -> None:
    url = "postgresql://team@db.example/continuity"
    settings = tmp_path / "project"
    settings.mkdir()
    done = cli(
        "--store", url, "install", "claude-code", "--scope", "project", "--project", str(settings)
    )
    assert done.exit_code == 0, done.output
    written = (settings / ".claude" / "settings.json").read_text()
    assert f"CONTINUITY_HOME={url}" in written


def test_the_demo_twice_on_a_server_store_leaves_one_thread(db_url: str, home: Path) -> None:
    first = cli("--store", db_url, "demo")
    assert first.exit_code == 0, first.output
    second = cli("--store", db_url, "demo")
    assert second.exit_code == 0, second.output
    assert "from an earlier run" in second.stdout
    with PostgresStore(db_url) as store:
        assert [t for t in store.threads() if t.startswith("cc-demo-")] == [
            "cc-demo-invoice-service"
        ]


def test_repair_on_a_server_store_says_what_it_cannot_do(db_url: str, home: Path) -> None:
    import psycopg

    with PostgresStore(db_url, create=True) as store:
        store.thread("t").append([fr.message("user", "one"), fr.message("user", "two")])
    sound = cli("--store", db_url, "repair", "t")
    assert sound.exit_code == 0 and "every frame is sound" in sound.stdout
    with psycopg.connect(db_url, autocommit=True, application_name=TEST_APP) as conn:
        conn.execute(
            "UPDATE continuity.frames SET line = "
            "convert_to(replace(convert_from(line, 'UTF8'), 'two', 'TWO'), 'UTF8') WHERE seq = 2"
        )
    damaged = cli("--store", db_url, "repair", "t")
    one_line_error(damaged, "thread t", "seq 2", "rows")  # named, never a traceback


def test_verify_names_every_bad_row_of_a_server_store(db_url: str, home: Path) -> None:
    import psycopg

    with PostgresStore(db_url, create=True) as store:
        for i in range(4):
            store.thread("t").append([fr.message("user", f"ask {i}"), fr.message("user", f"x{i}")])
    with psycopg.connect(db_url, autocommit=True, application_name=TEST_APP) as conn:
        for seq, old in ((2, "x0"), (6, "x2")):
            conn.execute(
                "UPDATE continuity.frames SET line = "
                "convert_to(replace(convert_from(line, 'UTF8'), %s, 'EDITED'), 'UTF8') "
                "WHERE seq = %s",
                (old, seq),
            )
    done = cli("--store", db_url, "verify")
    assert done.exit_code == 1
    shown = done.stdout + done.stderr
    assert "seq 2" in shown and "seq 6" in shown, shown  # both, not only the first


def test_stats_on_a_server_store_agree_with_the_folder_it_came_from(
    db_url: str, home: Path, tmp_path: Path
) -> None:
    from continuity.maintenance.stats import store_stats
    from continuity.redaction import Redactor

    src = Store(tmp_path / "laptop", create=True, redactor=Redactor())
    src.thread("a").append(fr.message("user", "my key is sk-ant-api03-" + "x" * 90))
    aid = src.artifacts.put(b"summary")
    src.thread("a").append(
        fr.CompactionCheckpointCreated(
            checkpoint_id="c1",
            cut_rule_id="manual",
            summary_kind="cumulative_v1",
            summary_artifact_id=aid,
            from_seq=1,
            to_seq=1,
        )
    )
    src.thread("b").append([fr.message("user", "q"), fr.message("assistant", "a")])
    assert cli("migrate", str(tmp_path / "laptop"), db_url).exit_code == 0
    with PostgresStore(db_url) as server:
        got, want = store_stats(server), store_stats(src)
    for field in ("threads", "frames", "messages", "checkpoints", "log_bytes", "redactions"):
        assert getattr(got, field) == getattr(want, field), field
    assert want.redactions == 1 and want.checkpoints == 1 and want.frames == 6
