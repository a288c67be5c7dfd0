"""The resident relay of a PostgreSQL store (ADR 0062), against a real server: hooks that go
through it never import psycopg and answer what an in-process hook answers; a relay that dies,
is stale, is of another version, or whose server stops answering costs the hook nothing it
cannot catch up; racing hooks start one relay."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from continuity.agents.base import relay
from continuity.paths import local_dir_of
from continuity.store import outage
from tests.agents.claude_code.test_hooks import SESSION, Transcript, work
from tests.store.postgres.test_cli import db_url  # noqa: F401  (fixture)
from tests.support.relays import stop_relays

SESSION_B = "22222222-3333-4444-8555-666666666666"
_RUN = (
    "import atexit, runpy, sys\n"
    "atexit.register(lambda: sys.stderr.write(f'PSYCOPG={\"psycopg\" in sys.modules}\\n'))\n"
    "sys.argv = ['continuity', *sys.argv[1:]]\n"
    "runpy.run_module('continuity', run_name='__main__', alter_sys=True)\n"
)
"""A hook run as ``python -m continuity`` that says at its exit whether psycopg was loaded."""


class Hooked:
    """A hook's result: exit code, stdout, stderr (without the psycopg line), psycopg loaded."""

    def __init__(self, proc: subprocess.CompletedProcess[str]) -> None:
        lines = proc.stderr.splitlines()
        self.code = proc.returncode
        self.stdout = proc.stdout
        self.psycopg = "PSYCOPG=True" in lines
        self.stderr = "\n".join(x for x in lines if not x.startswith("PSYCOPG="))


def hook(event: str, payload: dict[str, object], env: dict[str, str]) -> Hooked:
    proc = subprocess.run(
        [sys.executable, "-c", _RUN, "hook", event],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    return Hooked(proc)


def with_schema(url: str, schema: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}schema={schema}"


def hook_env(xdg: Path, store: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTINUITY_")}
    return {**env, "XDG_DATA_HOME": str(xdg), "CONTINUITY_HOME": store, **extra}


def local_of(store: str, xdg: Path) -> Path:
    return local_dir_of(store, {"XDG_DATA_HOME": str(xdg)})


def relay_pid(local: Path) -> int:
    return int((local / relay.PID_NAME).read_text())


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture(autouse=True)
def _stop_relays(tmp_path: Path) -> Iterator[None]:
    yield
    stop_relays(tmp_path)


def archived_texts(store: str, thread_id: str) -> list[str]:
    """Each message of the thread, as JSON."""
    import msgspec

    from continuity import frames as fr
    from continuity.store.locate import open_store

    opened = open_store(store)
    try:
        thread = opened.thread(thread_id)
        return [
            msgspec.json.encode(f.content).decode()
            for f in thread.read(types=["message_appended"])
            if isinstance(f, fr.MessageAppended)
        ]
    finally:
        opened.close()


def server_pid(store: str) -> int:
    """The server process of the one client of the test's database other than this test's."""
    import psycopg

    with psycopg.connect(store) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
        ).fetchall()
    assert len(rows) == 1, rows
    return int(rows[0][0])


@pytest.mark.postgres
@pytest.mark.slow
def test_hooks_through_the_relay_answer_what_in_process_hooks_answer_without_the_driver(
    db_url: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The same session on two stores of one server, its hooks through the relay and in their
    own process: the same stdout for every event that answers (the restore after a compaction,
    the previous session's pointer, a prompt's recall, the restore on the next prompt), the same
    archive; no hook through the relay loads psycopg, every in-process one does."""
    outputs: dict[str, list[str]] = {}
    archives: dict[str, list[str]] = {}
    for name, switch in (("relay", "1"), ("inproc", "0")):
        store = with_schema(db_url, f"s_{name}")
        root = tmp_path / name
        env = hook_env(root / "xdg", store, CONTINUITY_RELAY=switch)
        a = Transcript(root / "projects" / "-work-demo" / f"{SESSION}.jsonl")
        b = Transcript(root / "projects" / "-work-demo" / f"{SESSION_B}.jsonl", session=SESSION_B)
        work(a, ["src/app.py"], ["pytest -q"])
        a.flush()
        steps: list[tuple[str, dict[str, object]]] = [
            ("session-start", a.payload("SessionStart", source="startup")),
            ("user-prompt-submit", a.payload("UserPromptSubmit", prompt="go")),
            ("post-tool-use", a.payload("PostToolUse")),
        ]
        outs = []
        for event, payload in steps:
            result = hook(event, payload, env)
            assert (result.code, result.stderr) == (0, ""), (name, event)
            outs.append(result.stdout)
        a.compaction("We fixed src/app.py; the lint error remains.")
        a.flush()
        for event, payload in (
            ("pre-compact", a.payload("PreCompact", trigger="auto")),
            ("user-prompt-submit", a.payload("UserPromptSubmit", prompt="and now?")),
            ("session-end", a.payload("SessionEnd")),
            ("session-start", b.payload("SessionStart", source="startup")),
        ):
            result = hook(event, payload, env)
            assert (result.code, result.stderr) == (0, ""), (name, event, result.stderr)
            assert result.psycopg == (name == "inproc"), (name, event)
            outs.append(result.stdout)
        local = local_of(store, root / "xdg")
        (local / "claude-code.json").write_text('{"recall_on_prompt": true}\n')
        work(b, ["src/other.py"], ["make"])
        b.flush()
        recall = hook(
            "user-prompt-submit",
            b.payload("UserPromptSubmit", prompt="what was the lint error in src/app.py"),
            env,
        )
        assert (recall.code, recall.stderr) == (0, ""), recall.stderr
        assert recall.psycopg == (name == "inproc")
        outs.append(recall.stdout)
        outputs[name] = outs
        archives[name] = archived_texts(store, a.thread_id) + archived_texts(store, b.thread_id)
        assert not outage.pending(local), name  # each hook's own entry settled
        assert (local / relay.PID_NAME).exists() == (name == "relay")
    assert outputs["relay"] == outputs["inproc"]
    assert archives["relay"] == archives["inproc"] and archives["relay"]
    assert "previous session of this project" in outputs["relay"][-2]
    assert "additionalContext" in outputs["relay"][4]  # the restore on the prompt after it
    assert "lint" in outputs["relay"][-1]  # the recall


@pytest.mark.postgres
@pytest.mark.slow
def test_a_stale_socket_starts_a_new_relay_and_its_socket_is_private(
    db_url: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    t = Transcript(tmp_path / "projects" / "-work-demo" / f"{SESSION}.jsonl")
    env = hook_env(tmp_path / "xdg", db_url)
    local = local_of(db_url, tmp_path / "xdg")
    work(t, ["a.py"], ["pytest"])
    t.flush()
    first = hook("user-prompt-submit", t.payload("UserPromptSubmit", prompt="x"), env)
    assert (first.code, first.stderr, first.psycopg) == (0, "", False)
    sock = relay.socket_path(local)
    assert sock is not None
    assert sock.stat().st_mode & 0o777 == 0o600
    old = relay_pid(local)
    os.kill(old, signal.SIGKILL)
    assert relay.wait_gone(old, 10)
    assert sock.exists()  # left behind: nobody listens
    work(t, ["b.py"], ["make"])
    t.flush()
    again = hook("user-prompt-submit", t.payload("UserPromptSubmit", prompt="y"), env)
    assert (again.code, again.stderr, again.psycopg) == (0, "", False)
    assert relay_pid(local) != old and alive(relay_pid(local))
    assert any("b.py" in text for text in archived_texts(db_url, t.thread_id))


@pytest.mark.postgres
@pytest.mark.slow
def test_a_relay_killed_mid_request_loses_nothing(
    db_url: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The relay's server session is frozen (SIGSTOP), a hook's request is in the relay, and
    the relay is SIGKILLed: the hook exits 0 (kept in ``pending/``, or answered by a relay it
    started anew); the next hook's relay archives everything and the list is empty."""
    t = Transcript(tmp_path / "projects" / "-work-demo" / f"{SESSION}.jsonl")
    env = hook_env(tmp_path / "xdg", db_url, CONTINUITY_HOOK_DEADLINE="60")
    local = local_of(db_url, tmp_path / "xdg")
    work(t, ["a.py"], ["pytest"])
    t.flush()
    assert hook("post-tool-use", t.payload("PostToolUse"), env).code == 0
    pid = relay_pid(local)
    backend = server_pid(db_url)
    work(t, ["killed.py"], ["make"])
    t.flush()
    os.kill(backend, signal.SIGSTOP)
    try:
        sockets = _sockets(pid)
        proc = subprocess.Popen(
            [sys.executable, "-c", _RUN, "hook", "post-tool-use"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert proc.stdin is not None
        with proc.stdin:
            proc.stdin.write(json.dumps(t.payload("PostToolUse")))
        # the relay took the hook's connection (one socket more), and the request is in hand
        _wait(lambda: _sockets(pid) > sockets or proc.poll() is not None)
        assert proc.poll() is None
        threading.Event().wait(0.3)  # lets it read the request and send its first statement
        os.kill(pid, signal.SIGKILL)
        assert proc.stdout is not None and proc.stderr is not None
        with proc.stdout, proc.stderr:
            err = proc.stderr.read()
        proc.wait(timeout=60)
    finally:
        os.kill(backend, signal.SIGCONT)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    work(t, ["after.py"], ["make"])
    t.flush()
    after = hook("post-tool-use", t.payload("PostToolUse"), hook_env(tmp_path / "xdg", db_url))
    assert (after.code, after.stderr, after.psycopg) == (0, "", False)
    texts = archived_texts(db_url, t.thread_id)
    assert any("killed.py" in x for x in texts) and any("after.py" in x for x in texts)
    assert not outage.pending(local)


@pytest.mark.postgres
@pytest.mark.slow
def test_a_stuck_request_ends_that_request_not_the_relay(
    db_url: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The relay's server session freezes mid-request: at the hook's deadline the hook keeps
    its transcript, marks the server and exits 0; the same relay serves the next hook on a new
    connection and catches the kept transcript up."""
    t = Transcript(tmp_path / "projects" / "-work-demo" / f"{SESSION}.jsonl")
    local = local_of(db_url, tmp_path / "xdg")
    work(t, ["a.py"], ["pytest"])
    t.flush()
    env = hook_env(tmp_path / "xdg", db_url)
    assert hook("user-prompt-submit", t.payload("UserPromptSubmit", prompt="x"), env).code == 0
    pid = relay_pid(local)
    backend = server_pid(db_url)
    work(t, ["stuck.py"], ["make"])
    t.flush()
    os.kill(backend, signal.SIGSTOP)
    try:
        stuck = hook(
            "user-prompt-submit",
            t.payload("UserPromptSubmit", prompt="y"),
            hook_env(tmp_path / "xdg", db_url, CONTINUITY_HOOK_DEADLINE="2"),
        )
    finally:
        os.kill(backend, signal.SIGCONT)
    assert stuck.code == 0 and not stuck.psycopg
    assert "no answer within the hook's deadline" in stuck.stderr
    assert "transcript kept" in stuck.stderr
    assert outage.mark_of(local) is not None and outage.pending(local)
    outage.clear_mark(local)  # as the backoff would, later
    work(t, ["next.py"], ["make"])
    t.flush()
    after = hook("user-prompt-submit", t.payload("UserPromptSubmit", prompt="z"), env)
    assert (after.code, after.stderr, after.psycopg) == (0, "", False)
    assert relay_pid(local) == pid and alive(pid)  # the same relay
    texts = archived_texts(db_url, t.thread_id)
    assert any("stuck.py" in x for x in texts) and any("next.py" in x for x in texts)
    assert not outage.pending(local)


@pytest.mark.postgres
@pytest.mark.slow
def test_a_wedged_relay_is_ended_and_replaced(
    db_url: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A relay that takes no request (stopped: SIGSTOP) costs one hook its wait for the
    acknowledgement: that hook keeps its transcript, exits 0 and ends the relay; the next one
    starts another, which catches the kept transcript up."""
    t = Transcript(tmp_path / "projects" / "-work-demo" / f"{SESSION}.jsonl")
    env = hook_env(tmp_path / "xdg", db_url)
    local = local_of(db_url, tmp_path / "xdg")
    work(t, ["a.py"], ["pytest"])
    t.flush()
    assert hook("post-tool-use", t.payload("PostToolUse"), env).code == 0
    wedged = relay_pid(local)
    os.kill(wedged, signal.SIGSTOP)
    work(t, ["wedged.py"], ["make"])
    t.flush()
    result = hook("post-tool-use", t.payload("PostToolUse"), env)
    assert result.code == 0 and not result.psycopg
    assert "the relay took no request" in result.stderr and "transcript kept" in result.stderr
    assert relay.wait_gone(wedged, 30)
    assert outage.mark_of(local) is None  # the relay failed, not the server
    work(t, ["after.py"], ["make"])
    t.flush()
    after = hook("post-tool-use", t.payload("PostToolUse"), env)
    assert (after.code, after.stderr, after.psycopg) == (0, "", False)
    texts = archived_texts(db_url, t.thread_id)
    assert any("wedged.py" in x for x in texts) and any("after.py" in x for x in texts)
    assert not outage.pending(local)


@pytest.mark.postgres
@pytest.mark.slow
def test_a_relay_of_another_version_is_replaced(
    db_url: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A relay started from another copy of the code (another version) is told to leave by the
    first hook of this one, which starts its own and is answered by it."""
    old_root = tmp_path / "old"
    package = Path(relay.__file__).resolve().parents[2]
    shutil.copytree(package, old_root / "continuity", ignore=shutil.ignore_patterns("__pycache__"))
    version_file = old_root / "continuity" / "_version.py"
    version_file.write_text(
        version_file.read_text().replace("__version__ =", "__version__ = '0.0.0-old' #")
    )
    env = hook_env(tmp_path / "xdg", db_url)
    old_env = {**env, "PYTHONPATH": str(old_root)}
    with (tmp_path / "old.log").open("wb") as old_log:
        old = subprocess.Popen(
            [sys.executable, "-m", "continuity.agents.base.relay_serve", db_url],
            stdout=subprocess.PIPE,
            stderr=old_log,
            env=old_env,
            cwd=tmp_path,  # not this checkout: the old copy is imported
            start_new_session=True,
        )
    assert old.stdout is not None
    with old.stdout:
        assert old.stdout.readline() == b"ready\n"
    local = local_of(db_url, tmp_path / "xdg")
    assert relay_pid(local) == old.pid
    t = Transcript(tmp_path / "projects" / "-work-demo" / f"{SESSION}.jsonl")
    work(t, ["a.py"], ["pytest"])
    t.flush()
    result = hook("user-prompt-submit", t.payload("UserPromptSubmit", prompt="x"), env)
    assert (result.code, result.stderr, result.psycopg) == (0, "", False)
    assert old.wait(timeout=30) == 0
    new = relay_pid(local)
    assert new != old.pid and alive(new)
    listening = [x for x in (local / relay.LOG_NAME).read_text().splitlines() if "listening" in x]
    assert listening[-1].endswith(f"({relay.version()})")
    assert "0.0.0-old" in (tmp_path / "old.log").read_text()
    assert any("a.py" in x for x in archived_texts(db_url, t.thread_id))


@pytest.mark.postgres
@pytest.mark.slow
def test_racing_hooks_start_one_relay(
    db_url: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    env = hook_env(tmp_path / "xdg", db_url)
    sessions = [f"{i}1111111-3333-4444-8555-666666666666" for i in range(3)]
    transcripts = [Transcript(tmp_path / "p" / f"{s}.jsonl", s) for s in sessions]
    for t in transcripts:
        work(t, ["a.py"], ["pytest"])
        t.flush()
    results: list[Hooked] = []
    threads = [
        threading.Thread(
            target=lambda t=t: results.append(
                hook("user-prompt-submit", t.payload("UserPromptSubmit", prompt="x"), env)
            )
        )
        for t in transcripts
    ]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert [(r.code, r.stderr, r.psycopg) for r in results] == [(0, "", False)] * 3
    log = (local_of(db_url, tmp_path / "xdg") / relay.LOG_NAME).read_text()
    assert sum("listening" in line for line in log.splitlines()) == 1, log
    for t in transcripts:
        assert archived_texts(db_url, t.thread_id)


@pytest.mark.postgres
@pytest.mark.slow
def test_one_relay_runs_each_hook_with_that_hooks_environment_and_exits_when_idle(
    db_url: str,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two sessions' hooks with different ``$CLAUDE_PROJECT_DIR`` through one relay: each
    session is noted as the live one of its own project (the hook's environment, not the one
    the relay started with); with ``$CONTINUITY_RELAY_IDLE`` short the relay then exits."""
    from continuity.caches.live_session import noted_session
    from continuity.store.locate import open_store

    env = hook_env(tmp_path / "xdg", db_url, CONTINUITY_RELAY_IDLE="1")
    local = local_of(db_url, tmp_path / "xdg")
    sessions = {"/proj/one": SESSION, "/proj/two": SESSION_B}
    pids = set()
    for project, session in sessions.items():
        t = Transcript(tmp_path / "p" / f"{session}.jsonl", session=session, cwd="/elsewhere")
        work(t, ["a.py"], ["pytest"])
        t.flush()
        payload = t.payload("UserPromptSubmit", prompt="x")
        result = hook("user-prompt-submit", payload, {**env, "CLAUDE_PROJECT_DIR": project})
        assert (result.code, result.stderr, result.psycopg) == (0, "", False)
        pids.add(relay_pid(local))
    assert len(pids) == 1  # one relay served both
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))  # the hooks' local folder
    store = open_store(db_url)
    try:
        for project, session in sessions.items():
            note = noted_session(store, project)
            assert note is not None and note.session_id == session, project
    finally:
        store.close()
    assert relay.wait_gone(pids.pop(), 60)  # idle for a second: gone


@pytest.mark.postgres
@pytest.mark.slow
def test_a_server_that_is_down_keeps_the_transcript_as_before(tmp_path: Path) -> None:
    """Nothing listens at the server's port: the relay says so, the hook keeps its transcript,
    marks the server and exits 0, without the driver; the next hook skips the marked server."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"postgresql://nobody@127.0.0.1:{s.getsockname()[1]}/db"
    t = Transcript(tmp_path / "projects" / "-work-demo" / f"{SESSION}.jsonl")
    work(t, ["a.py"], ["pytest"])
    t.flush()
    env = hook_env(tmp_path / "xdg", url)
    result = hook("user-prompt-submit", t.payload("UserPromptSubmit", prompt="x"), env)
    assert result.code == 0 and not result.psycopg
    assert "not used" in result.stderr and "transcript kept" in result.stderr
    local = local_of(url, tmp_path / "xdg")
    assert outage.mark_of(local) is not None
    assert [p.path for p in outage.pending(local)] == [t.path.absolute()]


def test_a_socket_path_too_long_for_af_unix_goes_to_a_private_runtime_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    short = tmp_path / "s"
    assert relay.socket_path(short) == short / relay.SOCKET_NAME
    deep = tmp_path / ("x" * 60) / ("y" * 60)
    import tempfile

    run = Path(tempfile.mkdtemp(prefix="r", dir="/tmp"))  # short: pytest's own folder is not
    try:
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
        path = relay.socket_path(deep)
        assert path is not None and path.parent == run / "continuity"
        assert len(os.fsencode(path)) <= 100
        assert path.parent.stat().st_mode & 0o777 == 0o700
        assert relay.socket_path(deep) == path  # the same store, the same socket
        assert relay.socket_path(deep / "other") != path
        (run / "continuity").chmod(0o755)  # not private: not used
        other = relay.socket_path(deep)
        assert other is not None and other.parent == Path(f"/tmp/continuity-{os.getuid()}")
    finally:
        shutil.rmtree(run)


def test_the_off_switch() -> None:
    assert relay.enabled({})
    assert relay.enabled({"CONTINUITY_RELAY": "1"})
    for off in ("0", "off", "No", "false"):
        assert not relay.enabled({"CONTINUITY_RELAY": off})


def _sockets(pid: int) -> int:
    count = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            count += os.readlink(fd).startswith("socket:")
        except OSError:
            continue
    return count


def _wait(done: object) -> None:
    """Wait (without a time limit of its own: the test's timeout bounds it) until ``done()``."""
    import time

    assert callable(done)
    while not done():
        time.sleep(0.01)
