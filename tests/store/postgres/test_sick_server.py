"""Hooks never wait on a sick PostgreSQL server (issue 30, ADR 0041): a server that is down,
one that accepts and never answers, a head row another session holds locked, and a connection
killed mid-batch each cost a hook well under Claude Code's 30 s, exit 0, and lose nothing: what
the hook could not archive is kept in the store's local folder and caught up by the next hook
that reaches the server (a session that ended during the outage too)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from continuity import frames as fr
from continuity.errors import BadFrame
from continuity.paths import local_dir_of
from continuity.store import outage
from continuity.store.jsonl import Store
from continuity.store.postgres import PostgresStore
from tests.agents.claude_code.test_hooks import SESSION, Transcript, work
from tests.store.postgres.test_cli import db_url, home  # noqa: F401  (fixtures)
from tests.support.narrow import narrow
from tests.support.pg import TEST_APP

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

SESSION_B = "22222222-3333-4444-8555-666666666666"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def hung_url() -> Iterator[str]:
    """A server that accepts connections and never says a word."""
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
    yield f"postgresql://u:hunter2@127.0.0.1:{listener.getsockname()[1]}/db"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    listener.close()


def _env(xdg: Path, url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTINUITY_")}
    # A loaded machine can take over the hooks' 1 s first-answer budget to log in; the budget
    # has its own tests (tests/outside/pgbouncer), these are about other sicknesses.
    return {
        **env,
        "XDG_DATA_HOME": str(xdg),
        "CONTINUITY_HOME": url,
        "CONTINUITY_HOOK_FIRST_ANSWER": "5",
    }


def _hook(
    event: str, payload: dict[str, object], env: dict[str, str], *, importtime: bool = False
) -> subprocess.CompletedProcess[str]:
    """The hook in a process of its own. The timeout is generous for a loaded machine, yet
    below what a hook once waited: 11 s on a hung server (the connect timeout), 88 s on a
    held lock."""
    flags = ["-X", "importtime"] if importtime else []
    return subprocess.run(
        [sys.executable, *flags, "-m", "continuity", "hook", event],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=10,
        env=env,
        check=False,
    )


def _texts(store: Store | PostgresStore, thread_id: str) -> list[str]:
    thread = store.thread(thread_id)
    if not thread.exists():
        return []
    return [
        b.text
        for f in thread.read(types=["message_appended"])
        for b in narrow(fr.MessageAppended, f).content
        if isinstance(b, fr.TextBlock)
    ]


def _kept(xdg: Path, url: str) -> list[outage.Pending]:
    return outage.pending(local_dir_of(url, {"XDG_DATA_HOME": str(xdg)}))


def _imports_psycopg(result: subprocess.CompletedProcess[str]) -> bool:
    return any(
        line.startswith("import time:") and "psycopg" in line for line in result.stderr.splitlines()
    )


def test_a_down_server_is_marked_skipped_then_caught_up(
    home: Path,  # noqa: F811
    tmp_path: Path,
    db_url: str,  # noqa: F811
) -> None:
    """A stopped server: the first hook probes and marks it, the next ones skip it without
    importing psycopg, and every kept transcript is archived once it answers: the same
    messages a JSONL ingest of the same transcripts holds, none twice."""
    down = f"postgresql://u:hunter2@127.0.0.1:{_free_port()}/db"
    a = Transcript(tmp_path / "projects" / "-work-demo" / f"{SESSION}.jsonl")
    work(a, ["src/app.py"], ["pytest -q"])
    a.flush()
    b = Transcript(tmp_path / "projects" / "-work-demo" / f"{SESSION_B}.jsonl", session=SESSION_B)
    work(b, ["src/b.py"], ["make"])
    b.flush()

    first = _hook(
        "user-prompt-submit", a.payload("UserPromptSubmit", prompt="go"), _env(home, down)
    )
    assert first.returncode == 0, first.stderr
    assert "not used" in first.stderr and "hunter2" not in first.stderr
    mark = outage.mark_of(local_dir_of(down, {"XDG_DATA_HOME": str(home)}))
    assert mark is not None and mark.failures == 1

    # within the window: skipped at once, psycopg never imported; a session ends meanwhile
    ended = _hook("session-end", b.payload("SessionEnd"), _env(home, down), importtime=True)
    assert ended.returncode == 0
    assert not _imports_psycopg(ended), "a marked server must not cost the driver's import"
    assert "unreachable since" in ended.stderr
    assert {(p.path.name, p.final) for p in _kept(home, down)} == {
        (f"{SESSION}.jsonl", False),
        (f"{SESSION_B}.jsonl", True),
    }

    # The server comes back (here: the hooks' URL now names the real one; the kept list is
    # the same local folder's): the next hook of session A catches B up too.
    url = db_url
    local_up = _comes_back(home, down, url)
    a.prompt("and the empty files")
    a.flush()
    back = _hook("stop", a.payload("Stop"), _env(home, url))
    assert back.returncode == 0 and back.stderr == "", back.stderr
    assert outage.mark_of(local_up) is None and _kept(home, url) == []

    jsonl = Store(tmp_path / "jsonl", create=True)
    from continuity.agents.claude_code.ingest import ingest_transcript

    for t in (a, b):
        ingest_transcript(jsonl, t.path, final=True)
    with PostgresStore(url) as store:
        for t in (a, b):
            got = _texts(store, t.thread_id)
            assert got and got == _texts(jsonl, t.thread_id)


def test_a_hung_server_costs_a_hook_its_probe_not_the_connect_timeout(
    home: Path,  # noqa: F811
    tmp_path: Path,
    hung_url: str,
) -> None:
    a = Transcript(tmp_path / "projects" / "-work-demo" / f"{SESSION}.jsonl")
    work(a, ["src/app.py"], ["pytest -q"])
    a.flush()
    first = _hook(
        "user-prompt-submit", a.payload("UserPromptSubmit", prompt="go"), _env(home, hung_url)
    )
    assert first.returncode == 0
    assert "no answer" in first.stderr, first.stderr
    assert outage.mark_of(local_dir_of(hung_url, {"XDG_DATA_HOME": str(home)})) is not None
    again = _hook("stop", a.payload("Stop"), _env(home, hung_url), importtime=True)
    assert again.returncode == 0 and not _imports_psycopg(again)
    assert [p.path.name for p in _kept(home, hung_url)] == [f"{SESSION}.jsonl"]


def test_a_head_row_held_locked_keeps_the_transcript_without_marking_the_server(
    db_url: str,  # noqa: F811
    home: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    import psycopg

    a = Transcript(tmp_path / "projects" / "-work-demo" / f"{SESSION}.jsonl")
    work(a, ["src/app.py"], ["pytest -q"])
    a.flush()
    env = _env(home, db_url)
    assert (
        _hook("user-prompt-submit", a.payload("UserPromptSubmit", prompt="go"), env).returncode == 0
    )
    with PostgresStore(db_url) as store:
        before = len(_texts(store, a.thread_id))
    a.prompt("while the row is locked")
    a.flush()
    # a transaction left open, holding the head row
    with psycopg.connect(db_url, application_name=TEST_APP) as holder:
        holder.execute(
            "SELECT 1 FROM continuity.threads WHERE thread_id = %s FOR UPDATE", [a.thread_id]
        ).fetchall()
        waited = _hook("user-prompt-submit", a.payload("UserPromptSubmit", prompt="x"), env)
        assert waited.returncode == 0
        assert "StoreBusy" in waited.stderr and "lock" in waited.stderr, waited.stderr
        assert outage.mark_of(local_dir_of(db_url, {"XDG_DATA_HOME": str(home)})) is None
        assert [p.path.name for p in _kept(home, db_url)] == [f"{SESSION}.jsonl"]
        holder.rollback()
    done = _hook("stop", a.payload("Stop"), env)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    with PostgresStore(db_url) as store:
        texts = _texts(store, a.thread_id)
    assert len(texts) > before and any("while the row is locked" in t for t in texts)
    assert _kept(home, db_url) == []


def test_a_connection_killed_mid_hook_is_caught_up(
    db_url: str,  # noqa: F811
    home: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The backend dies while the hook appends (its head row locked, then killed): exit 0,
    the transcript kept, and the next hook archives it whole."""
    import psycopg

    a = Transcript(tmp_path / "projects" / "-work-demo" / f"{SESSION}.jsonl")
    work(a, ["src/app.py"], ["pytest -q"])
    a.flush()
    env = _env(home, db_url)
    assert (
        _hook("user-prompt-submit", a.payload("UserPromptSubmit", prompt="go"), env).returncode == 0
    )
    a.prompt("during the drop")
    a.flush()
    # the hook's backend is killed while it waits on the held row, mid-append
    with (
        psycopg.connect(db_url, autocommit=True, application_name=TEST_APP) as admin,
        psycopg.connect(db_url, application_name=TEST_APP) as holder,
    ):
        if True:
            holder.execute(
                "SELECT 1 FROM continuity.threads WHERE thread_id = %s FOR UPDATE", [a.thread_id]
            ).fetchall()
            proc = subprocess.Popen(
                [sys.executable, "-m", "continuity", "hook", "user-prompt-submit"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
            assert proc.stdin is not None
            proc.stdin.write(json.dumps(a.payload("UserPromptSubmit", prompt="y")))
            proc.stdin.close()
            killed = 0
            for _ in range(200):
                rows = admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE wait_event_type = 'Lock' AND datname = current_database()"
                ).fetchall()
                killed += len(rows)
                if killed or proc.poll() is not None:
                    break
                threading.Event().wait(0.02)
            proc.wait(timeout=20)
            assert proc.stderr is not None and proc.stdout is not None
            err = proc.stderr.read()
            proc.stderr.close()
            proc.stdout.close()
            holder.rollback()
    assert proc.returncode == 0
    assert killed and "kept" in err, err
    # a connection lost is a server that may be restarting: marked like one that is down
    local = local_dir_of(db_url, {"XDG_DATA_HOME": str(home)})
    assert outage.mark_of(local) is not None
    outage.note_unreachable(local, "lost", now=time.time() - 3600)  # its window is over
    done = _hook("stop", a.payload("Stop"), env)
    assert done.returncode == 0, done.stderr
    with PostgresStore(db_url) as store:
        texts = _texts(store, a.thread_id)
    assert texts.count("during the drop") == 1
    assert _kept(home, db_url) == []


def test_a_nul_in_a_record_key_is_a_bad_frame(pg_stores: object, tmp_path: Path) -> None:
    from tests.support.pg import PgStores

    assert isinstance(pg_stores, PgStores)
    store = pg_stores.open(tmp_path / "s")
    thread = store.thread("t-nul")
    with pytest.raises(BadFrame, match="NUL"):
        thread.append(fr.RecordAppended(kind="my.note", key="a\x00b", data={"x": 1}))
    assert not thread.exists() or thread.head() is None


def _comes_back(xdg: Path, down: str, url: str) -> Path:
    """The server comes back: the hooks' local folder (mark and kept list) is now the real
    server's, and the mark's window is over (as it is 30 s later)."""
    import shutil

    env = {"XDG_DATA_HOME": str(xdg)}
    local_up = local_dir_of(url, env)
    if local_up.exists():
        shutil.rmtree(local_up)
    local_up.parent.mkdir(parents=True, exist_ok=True)
    local_dir_of(down, env).rename(local_up)
    outage.note_unreachable(local_up, "down", now=time.time() - 3600)
    return local_up


def test_a_codex_rollout_kept_while_the_server_was_down_is_caught_up(
    home: Path,  # noqa: F811
    tmp_path: Path,
    db_url: str,  # noqa: F811
) -> None:
    import shutil

    from continuity.agents.codex.ingest import ingest_rollout
    from tests.support.fixtures import shared_fixture

    source = shared_fixture("agents", "codex", "agent-sessions", "small.jsonl")
    rollout = tmp_path / "rollout-small.jsonl"
    shutil.copyfile(source, rollout)
    down = f"postgresql://u@127.0.0.1:{_free_port()}/db"
    payload = {"session_id": "s1", "transcript_path": str(rollout), "cwd": str(tmp_path)}
    ended = subprocess.run(
        [sys.executable, "-m", "continuity", "hook", "session-end", "--agent", "codex"],
        input=json.dumps({**payload, "hook_event_name": "SessionEnd"}),
        capture_output=True,
        text=True,
        timeout=20,
        env=_env(home, down),
        check=False,
    )
    assert ended.returncode == 0 and "kept" in ended.stderr, ended.stderr
    assert [(p.agent, p.final) for p in _kept(home, down)] == [("codex", True)]

    _comes_back(home, down, db_url)
    other = tmp_path / "rollout-other.jsonl"
    other.write_text("")
    later = subprocess.run(
        [sys.executable, "-m", "continuity", "hook", "stop", "--agent", "codex"],
        input=json.dumps({"session_id": "s2", "transcript_path": str(other), "cwd": "/x"}),
        capture_output=True,
        text=True,
        timeout=20,
        env=_env(home, db_url),
        check=False,
    )
    assert later.returncode == 0 and later.stderr == "", later.stderr
    assert _kept(home, db_url) == []
    jsonl = Store(tmp_path / "jsonl", create=True)
    tid = ingest_rollout(jsonl, rollout).thread
    with PostgresStore(db_url) as store:
        assert tid is not None and _texts(store, tid) == _texts(jsonl, tid) != []


def test_a_backend_that_stops_answering_mid_statement_meets_the_hooks_deadline(
    db_url: str,  # noqa: F811
    home: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The server answered the probe, then the hook's backend freezes (SIGSTOP while it waits
    on a held row): no server-side timeout can fire, so the hook's own deadline ends it, exit
    0, with the transcript kept and the server marked."""
    import signal

    import psycopg

    a = Transcript(tmp_path / "projects" / "-work-demo" / f"{SESSION}.jsonl")
    work(a, ["src/app.py"], ["pytest -q"])
    a.flush()
    env = {**_env(home, db_url), "CONTINUITY_HOOK_DEADLINE": "2"}
    assert (
        _hook("user-prompt-submit", a.payload("UserPromptSubmit", prompt="go"), env).returncode == 0
    )
    a.prompt("while the backend is frozen")
    a.flush()
    stopped: list[int] = []
    with (
        psycopg.connect(db_url, autocommit=True, application_name=TEST_APP) as admin,
        psycopg.connect(db_url, application_name=TEST_APP) as holder,
    ):
        holder.execute(
            "SELECT 1 FROM continuity.threads WHERE thread_id = %s FOR UPDATE", [a.thread_id]
        ).fetchall()
        with subprocess.Popen(
            [sys.executable, "-m", "continuity", "hook", "user-prompt-submit"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        ) as proc:
            assert proc.stdin is not None and proc.stderr is not None
            proc.stdin.write(json.dumps(a.payload("UserPromptSubmit", prompt="z")))
            proc.stdin.close()
            try:
                for _ in range(500):
                    rows = admin.execute(
                        "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                        "AND datname = current_database()"
                    ).fetchall()
                    for (pid,) in rows:
                        os.kill(pid, signal.SIGSTOP)
                        stopped.append(pid)
                    if stopped or proc.poll() is not None:
                        break
                    time.sleep(0.01)
                proc.wait(timeout=15)
                err = proc.stderr.read()
            finally:
                for pid in stopped:
                    os.kill(pid, signal.SIGCONT)
        holder.rollback()
    if not stopped:
        pytest.skip("the hook's backend was never seen waiting on the row (a fast machine)")
    assert proc.returncode == 0
    assert "deadline" in err and "kept" in err, err
    local = local_dir_of(db_url, {"XDG_DATA_HOME": str(home)})
    assert outage.mark_of(local) is not None
    assert [p.path.name for p in _kept(home, db_url)] == [f"{SESSION}.jsonl"]


def test_a_hook_refused_for_lack_of_privilege_keeps_its_transcript(
    pg_url: str,
    home: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A role that may read the store but not write it: the hook's append is refused. The
    server is there (no mark), and the transcript stays in ``pending/`` for a hook that may
    write, as the docs say of any hook that could not write."""
    from continuity.paths import with_schema
    from tests.store.postgres.test_roles import Roles

    made = Roles(pg_url, "hookro")
    try:
        schema = made.schema("store")
        with PostgresStore(pg_url, schema=schema, create=True) as store:
            store.thread("other").append(fr.message("user", "made by a writer"))
        reader = with_schema(
            made.role(
                "reader",
                f"GRANT USAGE ON SCHEMA {schema} TO {{role}}",
                f"GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {{role}}",
            ),
            schema,
        )
        a = Transcript(tmp_path / "projects" / "-work-demo" / f"{SESSION}.jsonl")
        work(a, ["src/app.py"], ["pytest -q"])
        a.flush()
        done = _hook(
            "user-prompt-submit", a.payload("UserPromptSubmit", prompt="go"), _env(home, reader)
        )
    finally:
        made.drop()
    assert done.returncode == 0, done.stderr
    assert "permission denied" in done.stderr and "transcript kept" in done.stderr, done.stderr
    assert [p.path.name for p in _kept(home, reader)] == [f"{SESSION}.jsonl"]
    assert outage.mark_of(local_dir_of(reader, {"XDG_DATA_HOME": str(home)})) is None
