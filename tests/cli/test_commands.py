"""The ``continuity`` command line, through typer's CliRunner (and a few real processes).

The runner keeps stdout and stderr apart (``result.stdout`` / ``result.stderr``), so every error
test checks the exact contract: one line on stderr, nothing on stdout, a non-zero exit, and not a
byte changed in the store.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main
import typer.testing
from typer.testing import CliRunner, Result

from continuity.cli.app import COMMANDS, GROUPS, PANELS, app, build_app, main
from continuity.cli.rich_help import help_text
from continuity.paths import default_store_path, resolve_store_path

HELLO = '{"role":"user","text":"hello"}\n{"role":"assistant","text":"hi"}\n'

Run = Callable[..., Result]


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No test may reach the real default store: HOME is a temporary folder, and neither
    CONTINUITY_HOME nor XDG_DATA_HOME leaks in from the machine running the tests."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CONTINUITY_HOME", raising=False)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    return home


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "s"


@pytest.fixture
def run(store: Path) -> Run:
    """``continuity --store <store> ARGS`` with ``input`` on stdin."""
    runner = CliRunner()

    def _run(*args: str, input: str | bytes | None = None) -> Result:
        return runner.invoke(app, ["--store", str(store), *args], input=input)

    return _run


@pytest.fixture
def demo(run: Run, store: Path) -> Path:
    """An initialised store holding thread ``demo`` (seq 0 created, 1 user, 2 assistant)."""
    assert run("init").exit_code == 0
    result = run("append", "demo", input=HELLO)
    assert result.exit_code == 0, result.stderr
    return store / "threads" / "demo.jsonl"


def tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` and its bytes (lock files aside: they are empty markers)."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


def assert_one_line_error(result: Result, *needles: str) -> str:
    """The error contract: a non-zero exit, nothing on stdout, one line on stderr."""
    assert result.exit_code != 0, result.stdout
    assert result.stdout == ""
    assert result.stderr.endswith("\n")
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    for needle in needles:
        assert needle in lines[0]
    return lines[0]


# --- the acceptance flow --------------------------------------------------------------------


@pytest.mark.slow
def test_acceptance_flow(run: Run, store: Path) -> None:
    init = run("init")
    assert init.exit_code == 0
    assert init.stdout == f"created store at {store}\n"
    for sub in ("threads", "artifacts", "quarantine", "cache"):
        assert (store / sub).is_dir()

    appended = run("append", "demo", input=HELLO)
    assert appended.exit_code == 0, appended.stderr
    assert appended.stdout == "1\n2\n"  # thread_created took seq 0
    assert appended.stderr == ""
    log_file = store / "threads" / "demo.jsonl"

    readable = run("log", "demo")
    assert readable.exit_code == 0
    lines = readable.stdout.splitlines()
    assert len(lines) == 3
    assert lines[0].split()[0] == "0" and "thread created" in lines[0]
    assert "thread demo" in lines[0]
    assert lines[1].split()[0] == "1" and lines[1].endswith("user: hello")
    assert lines[2].split()[0] == "2" and lines[2].endswith("assistant: hi")

    as_json = run("log", "demo", "--json")
    assert as_json.exit_code == 0
    assert as_json.stdout_bytes == log_file.read_bytes()

    verified = run("verify")
    assert verified.exit_code == 0
    assert verified.stdout.splitlines()[-1] == "ok: 1 thread, 3 frames, 0 artifacts checked"

    stats = run("stats")  # brings the caches up to date
    assert stats.exit_code == 0
    before = tree(store / "cache")
    assert any(name.endswith("manifest.v1.json") for name in before)
    assert any(name.endswith("offsets.v1.u64") and data for name, data in before.items())

    shutil.rmtree(store / "cache")
    rebuilt = run("rebuild-index")
    assert rebuilt.exit_code == 0, rebuilt.stderr
    assert rebuilt.stdout == "rebuilt the caches of 1 thread (3 frames)\n"
    assert tree(store / "cache") == before

    assert run("verify").exit_code == 0
    final = run("stats")
    assert final.exit_code == 0
    assert "threads      1" in final.stdout.splitlines()


def test_init_twice_keeps_the_store(run: Run, demo: Path, store: Path) -> None:
    before = tree(store)
    again = run("init")
    assert again.exit_code == 0
    assert again.stdout == f"store exists at {store}\n"
    assert tree(store) == before


def test_rebuild_index_of_one_thread_is_byte_identical(run: Run, demo: Path, store: Path) -> None:
    assert run("append", "other", input='{"role":"user","text":"x"}\n').exit_code == 0
    assert run("rebuild-index").exit_code == 0
    before = tree(store / "cache")
    shutil.rmtree(store / "cache" / "threads" / "demo")
    one = run("rebuild-index", "demo")
    assert one.exit_code == 0
    assert one.stdout == "rebuilt the caches of 1 thread (3 frames)\n"
    assert tree(store / "cache") == before


def test_rebuild_index_draws_its_progress_on_stderr(
    run: Run, demo: Path, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Both of the runner's streams claim to be a terminal: stdout must still get only the result.
    monkeypatch.setattr(typer.testing._NamedTextIOWrapper, "isatty", lambda self: True)
    result = run("rebuild-index")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "rebuilt the caches of 1 thread (3 frames)\n"
    assert (store / "cache" / "threads" / "demo" / "manifest.v1.json").is_file()


# --- append ---------------------------------------------------------------------------------


def test_append_accepts_full_payloads_and_the_shorthand(run: Run, demo: Path) -> None:
    lines = [
        '{"type":"message_appended","role":"user","content":[{"type":"text","text":"full"}]}',
        "",  # blank lines are skipped
        '{"role":"system","text":"short"}',
        '{"type":"job_spawned","job_id":"j1","kind":"compact"}',
    ]
    result = run("append", "demo", input="\n".join(lines) + "\n")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "3\n4\n5\n"
    log = run("log", "demo", "--from-seq", "3")
    assert [line.split()[0] for line in log.stdout.splitlines()] == ["3", "4", "5"]
    assert log.stdout.splitlines()[0].endswith("user: full")
    assert log.stdout.splitlines()[1].endswith("system: short")
    assert "job j1 (compact) spawned" in log.stdout


def test_append_with_the_right_expected_seq_and_seq_field(run: Run, demo: Path) -> None:
    ok = run("append", "demo", "--expect-seq", "3", input='{"role":"user","text":"a"}\n')
    assert (ok.exit_code, ok.stdout) == (0, "3\n")
    ok = run("append", "demo", input='{"role":"user","text":"b","seq":4}\n')
    assert (ok.exit_code, ok.stdout) == (0, "4\n")


def test_append_to_a_new_thread_with_expected_seq_counts_thread_created(
    run: Run, store: Path
) -> None:
    run("init")
    result = run("append", "fresh", "--expect-seq", "1", input='{"role":"user","text":"a"}\n')
    assert (result.exit_code, result.stdout) == (0, "1\n")


@pytest.mark.parametrize(
    ("stdin", "needles"),
    [
        pytest.param(
            '{"role":"user","text":"a"}\n{"role": "user", "te\n{"role":"user","text":"c"}\n',
            ["line 2:", "not a JSON object", "nothing was written"],
            id="bad-json-mid-batch",
        ),
        pytest.param(
            '{"role":"user","text":"a"}\n\n{"type":"nope"}\n',
            ["line 3:", "unknown frame type 'nope'"],
            id="unknown-type-after-blank-line",
        ),
        pytest.param('{"role":"robot","text":"a"}\n', ["line 1:", "robot"], id="bad-role"),
        pytest.param('{"role":"user"}\n', ["line 1:", "text"], id="shorthand-without-text"),
        pytest.param('{"role":"user","text":"a","x":1}\n', ["line 1:", "x"], id="unknown-field"),
        pytest.param("[1, 2]\n", ["line 1:", "array"], id="not-an-object"),
        pytest.param(
            '{"role":"user","text":"a","digest":"00"}\n', ["line 1:", "digest"], id="digest"
        ),
        pytest.param(
            '{"type":"message_appended","role":"user"}\n', ["line 1:", "content"], id="missing"
        ),
        pytest.param('{"type":"thread_created"}\n', ["thread_created"], id="second-created"),
        pytest.param(
            '{"role":"user","text":"a","seq":7}\n', ["seq conflict", "7", "3"], id="seq-field"
        ),
        pytest.param("", ["no frames on stdin"], id="empty-stdin"),
        pytest.param("\n  \n\n", ["no frames on stdin"], id="blank-stdin"),
    ],
)
def test_a_bad_batch_writes_nothing(
    run: Run, demo: Path, store: Path, stdin: str, needles: list[str]
) -> None:
    before = tree(store)
    result = run("append", "demo", input=stdin)
    line = assert_one_line_error(result, *needles)
    assert "nothing was written" in line
    assert tree(store) == before


def test_a_bad_line_in_a_new_thread_creates_no_thread(run: Run, demo: Path) -> None:
    result = run("append", "brand-new", input='{"role":"user","text":"a"}\nnot json\n')
    assert_one_line_error(result, "line 2:")
    assert not (demo.parent / "brand-new.jsonl").exists()
    assert_one_line_error(run("log", "brand-new"), "no thread 'brand-new'")


def test_expect_seq_conflict_writes_nothing(run: Run, demo: Path, store: Path) -> None:
    before = tree(store)
    result = run("append", "demo", "--expect-seq", "2", input='{"role":"user","text":"a"}\n')
    assert_one_line_error(result, "seq conflict", "expected next seq 2", "next seq is 3")
    assert tree(store) == before


def test_a_seq_conflict_on_a_new_thread_leaves_no_thread(run: Run, demo: Path) -> None:
    result = run("append", "fresh", "--expect-seq", "5", input='{"role":"user","text":"a"}\n')
    assert_one_line_error(result, "seq conflict")
    assert_one_line_error(run("log", "fresh"), "no thread 'fresh'")
    assert run("verify").stdout.splitlines()[-1].startswith("ok: 1 thread,")


@pytest.mark.slow
@pytest.mark.parametrize("bad_id", ["../evil", ".hidden", "a/b", "a b", "x" * 129, "ok\n"])
def test_a_bad_thread_id_is_refused(run: Run, demo: Path, store: Path, bad_id: str) -> None:
    before = tree(store.parent)
    result = run("append", bad_id, input='{"role":"user","text":"a"}\n')
    assert_one_line_error(result, "thread id")
    # The id is checked before stdin is read, so a bad line does not hide it.
    assert_one_line_error(run("append", bad_id, input="not json\n"), "thread id")
    assert tree(store.parent) == before
    for command in ("log", "verify", "rebuild-index"):
        assert_one_line_error(run(command, bad_id), "thread id")


def test_append_to_a_missing_store_creates_nothing(run: Run, store: Path) -> None:
    result = run("append", "demo", input='{"role":"user","text":"a"}\n')
    assert_one_line_error(result, "no continuity store at", str(store), "continuity init")
    assert not store.exists()


@pytest.mark.parametrize(
    "args", [["log", "demo"], ["verify"], ["verify", "demo"], ["rebuild-index"], ["stats"]]
)
def test_every_command_on_a_missing_store(run: Run, store: Path, args: list[str]) -> None:
    assert_one_line_error(run(*args), "no continuity store at", str(store))
    assert not store.exists()


@pytest.mark.parametrize("command", ["log", "verify", "rebuild-index"])
def test_an_unknown_thread(run: Run, demo: Path, store: Path, command: str) -> None:
    before = tree(store)
    assert_one_line_error(run(command, "nothere"), "no thread 'nothere'")
    assert tree(store) == before


def test_an_os_error_is_one_line_too(run: Run, demo: Path, store: Path) -> None:
    shutil.rmtree(store / "threads")
    (store / "threads").write_bytes(b"")  # a file where the folder belongs
    result = run("append", "demo", input='{"role":"user","text":"a"}\n')
    assert_one_line_error(result, "Not a directory", "nothing was written")


def test_init_refuses_a_folder_that_is_not_a_store(run: Run, store: Path) -> None:
    store.mkdir()
    (store / "notes.txt").write_text("mine")
    assert_one_line_error(run("init"), "not a continuity store")
    assert sorted(p.name for p in store.iterdir()) == ["notes.txt"]


def test_the_store_option_may_follow_the_command(demo: Path, store: Path) -> None:
    # Not a silent fall-back to the default store (tests/cli/test_misuse.py has the rest).
    result = CliRunner().invoke(app, ["log", "demo", "--store", str(store)])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[-1].endswith("assistant: hi")


# --- log ------------------------------------------------------------------------------------


@pytest.fixture
def longer(run: Run, demo: Path) -> Path:
    """``demo`` plus a job and two more messages: seqs 0..6."""
    more = (
        '{"type":"job_spawned","job_id":"j1","kind":"compact"}\n'
        '{"role":"user","text":"again"}\n'
        '{"type":"job_ended","job_id":"j1","status":"succeeded"}\n'
        '{"role":"assistant","text":"done"}\n'
    )
    assert run("append", "demo", input=more).stdout == "3\n4\n5\n6\n"
    return demo


def test_log_json_is_the_file_exactly(run: Run, longer: Path) -> None:
    result = run("log", "demo", "--json")
    assert result.exit_code == 0
    assert result.stdout_bytes == longer.read_bytes()
    assert result.stderr == ""


@pytest.mark.slow
def test_log_json_range(run: Run, longer: Path) -> None:
    lines = longer.read_bytes().splitlines(keepends=True)
    result = run("log", "demo", "--json", "--from-seq", "2", "--to-seq", "4")
    assert result.stdout_bytes == b"".join(lines[2:5])
    assert run("log", "demo", "--json", "--from-seq", "5").stdout_bytes == b"".join(lines[5:])
    assert run("log", "demo", "--json", "--to-seq", "1").stdout_bytes == b"".join(lines[:2])
    assert run("log", "demo", "--json", "--from-seq", "99").stdout == ""
    assert run("log", "demo", "--json", "--from-seq", "4", "--to-seq", "3").stdout == ""


def test_log_type_filter(run: Run, longer: Path) -> None:
    lines = longer.read_bytes().splitlines(keepends=True)
    messages = run("log", "demo", "--json", "--type", "message_appended")
    assert messages.stdout_bytes == b"".join(lines[i] for i in (1, 2, 4, 6))
    jobs = run("log", "demo", "--json", "--type", "job_spawned", "--type", "job_ended")
    assert jobs.stdout_bytes == lines[3] + lines[5]
    ranged = run("log", "demo", "--type", "message_appended", "--from-seq", "3", "--to-seq", "5")
    assert [line.split()[0] for line in ranged.stdout.splitlines()] == ["4"]
    assert ranged.stdout.rstrip().endswith("user: again")


def test_log_unknown_type(run: Run, longer: Path) -> None:
    line = assert_one_line_error(run("log", "demo", "--type", "bogus"), "unknown frame type")
    assert "'bogus'" in line and "message_appended" in line


def test_log_refuses_a_negative_seq(run: Run, demo: Path) -> None:
    assert run("log", "demo", "--from-seq", "-1").exit_code == 2


# --- verify ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_verify_fails_with_a_report_after_a_middle_line_is_changed(run: Run, longer: Path) -> None:
    assert run("append", "sound", input='{"role":"user","text":"fine"}\n').exit_code == 0
    data = longer.read_bytes()
    assert data.count(b'"text":"again"') == 1
    longer.write_bytes(data.replace(b'"text":"again"', b'"text":"AGAIN"'))

    report = run("verify")
    assert report.exit_code == 1
    lines = report.stdout.splitlines()
    problems = [line for line in lines if line.startswith("problem: ")]
    assert problems and all("demo" in p for p in problems)
    assert any("seq 4" in p for p in problems)
    assert lines[-1].startswith("FAILED: ") and "2 threads" in lines[-1]

    assert run("verify", "demo").exit_code == 1
    sound = run("verify", "sound")
    assert sound.exit_code == 0
    assert sound.stdout == "ok: 1 thread, 2 frames, 0 artifacts checked\n"


@pytest.mark.slow
def test_verify_reports_caches_that_disagree_with_the_log(
    run: Run, demo: Path, store: Path
) -> None:
    assert run("rebuild-index").exit_code == 0
    offsets = store / "cache" / "threads" / "demo" / "offsets.v1.u64"
    data = bytearray(offsets.read_bytes())
    data[8] ^= 0xFF  # seq 1's offset
    offsets.write_bytes(bytes(data))
    report = run("verify")
    assert report.exit_code == 1
    assert any(
        line.startswith("problem: cache of thread demo") for line in report.stdout.splitlines()
    )
    assert run("rebuild-index").exit_code == 0
    assert run("verify").exit_code == 0


@pytest.mark.slow
def test_a_torn_tail_is_recovered_by_append_and_listed_by_verify(
    run: Run, demo: Path, store: Path
) -> None:
    committed = demo.read_bytes()
    torn = b'{"type":"message_appended","seq":3,"ts_ms":1,"role":"us'
    demo.write_bytes(committed + torn)

    pending = run("verify")  # before recovery: a note, not a failure
    assert pending.exit_code == 0
    assert any(
        line.startswith("note: thread demo") and f"{len(torn)} bytes" in line
        for line in pending.stdout.splitlines()
    )

    result = run("append", "demo", input='{"role":"user","text":"after"}\n')
    assert result.exit_code == 0
    assert result.stdout == "3\n"
    recovered = result.stderr.splitlines()
    assert len(recovered) == 1
    assert recovered[0].startswith("recovered thread demo:")
    assert f"moved {len(torn)} bytes at offset {len(committed)}" in recovered[0]
    assert demo.read_bytes().startswith(committed)

    quarantined = list((store / "quarantine").iterdir())
    assert len(quarantined) == 1
    assert str(quarantined[0]) in recovered[0]

    report = run("verify")
    assert report.exit_code == 0
    listed = [line for line in report.stdout.splitlines() if line.startswith("quarantined: ")]
    assert len(listed) == 1
    assert "thread demo" in listed[0] and f"{len(torn)} bytes" in listed[0]
    assert str(quarantined[0]) in listed[0]
    assert not any(line.startswith("note: ") for line in report.stdout.splitlines())
    assert "after" in run("log", "demo").stdout.splitlines()[-1]


# --- stats ----------------------------------------------------------------------------------


def test_stats_numbers(run: Run, longer: Path, store: Path) -> None:
    assert run("append", "b", input='{"role":"user","text":"x"}\n').exit_code == 0
    result = run("stats", "--json")
    assert result.exit_code == 0, result.stderr
    stats = json.loads(result.stdout)
    assert stats["threads"] == 2
    assert stats["frames"] == 7 + 2
    assert stats["messages"] == 4 + 1
    assert stats["checkpoints"] == 0
    assert stats["artifacts"] == 0
    assert stats["quarantined"] == 0
    logs = sorted((store / "threads").glob("*.jsonl"))
    assert stats["log_bytes"] == sum(p.stat().st_size for p in logs)
    assert stats["cache_bytes"] > 0  # stats brought the caches up to date

    text = run("stats")
    rows = {
        line[:12].strip(): line[13:].strip() for line in text.stdout.splitlines() if line.strip()
    }
    assert rows["store"] == str(store)
    assert rows["threads"] == "2"
    assert rows["frames"] == "9"
    assert rows["messages"] == "5"
    assert rows["log bytes"] == str(stats["log_bytes"])


def test_stats_of_an_empty_store(run: Run) -> None:
    run("init")
    stats = json.loads(run("stats", "--json").stdout)
    assert (stats["threads"], stats["frames"], stats["messages"]) == (0, 0, 0)


# --- where the store is ---------------------------------------------------------------------


def test_continuity_home_is_honoured_and_store_overrides_it(tmp_path: Path) -> None:
    runner = CliRunner()
    home_store = tmp_path / "from-env"
    option_store = tmp_path / "from-option"
    env = {"CONTINUITY_HOME": str(home_store)}

    assert runner.invoke(app, ["init"], env=env).exit_code == 0
    assert (home_store / "store.json").is_file()
    result = runner.invoke(app, ["append", "t"], input=HELLO, env=env)
    assert result.exit_code == 0
    assert (home_store / "threads" / "t.jsonl").is_file()

    result = runner.invoke(app, ["--store", str(option_store), "init"], env=env)
    assert result.exit_code == 0
    assert (option_store / "store.json").is_file()
    with_option = runner.invoke(app, ["--store", str(option_store), "stats", "--json"], env=env)
    assert json.loads(with_option.stdout)["threads"] == 0
    from_env = runner.invoke(app, ["stats", "--json"], env=env)
    assert json.loads(from_env.stdout)["threads"] == 1


def test_the_default_store_follows_xdg_data_home(
    tmp_path: Path, _isolated_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    xdg = tmp_path / "xdg"
    result = runner.invoke(app, ["init"], env={"XDG_DATA_HOME": str(xdg)})
    assert result.exit_code == 0
    assert (xdg / "continuity" / "store.json").is_file()

    fallback = runner.invoke(app, ["init"], env={"XDG_DATA_HOME": "relative/data"})
    assert fallback.exit_code == 0
    assert (_isolated_env / ".local" / "share" / "continuity" / "store.json").is_file()
    assert not (tmp_path / "relative").exists()


def test_a_relative_store_option_is_made_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["--store", "rel", "init"])
    assert result.stdout == f"created store at {tmp_path / 'rel'}\n"
    assert resolve_store_path("rel") == tmp_path / "rel"
    assert resolve_store_path("~/x") == Path.home() / "x"
    assert resolve_store_path(None) == default_store_path()
    assert resolve_store_path("") == default_store_path()


class TestDefaultStorePath:
    def test_continuity_home_wins(self) -> None:
        env = {"CONTINUITY_HOME": "/data/c", "XDG_DATA_HOME": "/xdg", "HOME": "/home/u"}
        assert default_store_path(env) == Path("/data/c")

    def test_xdg_data_home_when_absolute(self) -> None:
        env = {"XDG_DATA_HOME": "/xdg", "HOME": "/home/u"}
        assert default_store_path(env) == Path("/xdg/continuity")

    @pytest.mark.parametrize("xdg", ["relative/data", "./data", ""])
    def test_a_relative_or_empty_xdg_data_home_is_ignored(self, xdg: str) -> None:
        env = {"XDG_DATA_HOME": xdg, "HOME": "/home/u"}
        assert default_store_path(env) == Path("/home/u/.local/share/continuity")

    def test_an_empty_continuity_home_is_ignored(self) -> None:
        env = {"CONTINUITY_HOME": "", "HOME": "/home/u"}
        assert default_store_path(env) == Path("/home/u/.local/share/continuity")

    @pytest.mark.parametrize("home", [None, "", "relative-home"])
    def test_never_relative_even_without_a_usable_home(self, home: str | None) -> None:
        env = {} if home is None else {"HOME": home}
        path = default_store_path(env)
        assert path.is_absolute()
        assert path.parts[-3:] == (".local", "share", "continuity")

    def test_a_relative_home_in_the_environment_is_not_used(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("HOME", "relative-home")
        path = default_store_path()
        assert path.is_absolute()
        assert "relative-home" not in path.parts

    def test_reads_os_environ_by_default(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("XDG_DATA_HOME", "/some/where")
        assert default_store_path() == Path("/some/where/continuity")


# --- help and entry points ------------------------------------------------------------------


@pytest.mark.slow
def test_every_command_has_help_text() -> None:
    group = typer.main.get_command(app)
    assert (group.help or "").strip()
    commands = getattr(group, "commands", {})
    assert set(commands) >= {"init", "append", "log", "verify", "rebuild-index", "stats"}
    runner = CliRunner()
    for name, command in commands.items():
        assert (command.help or "").strip(), f"{name} has no help"
        for param in command.params:
            if param.name != "ctx":
                assert (getattr(param, "help", None) or "").strip(), f"{name} {param.name}"
        shown = runner.invoke(app, [name, "--help"])
        assert shown.exit_code == 0
        assert (command.help or "").split("\n")[0].split()[0] in shown.stdout


_MARKUP = ("``", ":func:`", ":class:`", ":mod:`", ":data:`", ":meth:`", "**")
"""RST and Markdown a help text must not show (a single `code` quote reads as plain text)."""


def _helps(command: Any, path: str) -> Iterator[tuple[str, str]]:
    """(where, text) of a command's help, its parameters' and its subcommands', recursively
    (``command``: typer's own click's, which it does not export)."""
    yield path, command.help or ""
    for param in command.params:
        yield f"{path} {param.name}", getattr(param, "help", None) or ""
    for name, sub in getattr(command, "commands", {}).items():
        yield from _helps(sub, f"{path} {name}")


def test_every_help_text_is_prose_that_wraps() -> None:
    """No markup leaks into a help text, and no paragraph breaks inside a sentence (typer's rich
    mode keeps a line break where the source wrapped, which breaks again inside the box); a list
    item, a command or an indented line may start a line of its own."""
    for where, text in _helps(typer.main.get_command(build_app()), "continuity"):
        for markup in _MARKUP:
            assert markup not in text, f"{where}: {markup} in {text!r}"
        for paragraph in text.split("\n\n"):
            if paragraph.startswith("\b"):
                continue
            for line in paragraph.splitlines()[1:]:
                assert line.startswith(("- ", "* ", "$ ", " ")), (
                    f"{where}: a break in {paragraph!r}"
                )


def test_a_docstrings_paragraph_becomes_one_line_and_a_list_keeps_its_lines() -> None:
    doc = """Do a thing, said on
        two lines.

        - one
        - two
          and more
        """
    assert help_text(doc) == "Do a thing, said on two lines.\n\n- one\n- two\n  and more"


def test_the_root_help_lists_the_panels_in_order_newcomers_first(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    with pytest.raises(SystemExit) as exited:
        main(["--help"])  # the listing the console script prints, not the whole app's
    assert exited.value.code in (0, None)
    out = capsys.readouterr().out
    titles = re.findall(r"^╭─ (.+?) ─", out, flags=re.M)
    assert titles == ["Options", *PANELS], out
    listed = re.findall(r"^│ ([a-z][a-z-]*) ", out, flags=re.M)
    assert listed == [name for names in PANELS.values() for name in names], out
    assert set(listed) == set(COMMANDS) | set(GROUPS)
    assert out.index("demo") < out.index("init")


@pytest.mark.slow
def test_python_dash_m_continuity_help() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "continuity", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    for name in ("init", "append", "log", "verify", "rebuild-index", "stats"):
        assert name in result.stdout


@pytest.mark.slow
def test_log_json_is_byte_exact_whatever_the_terminal_encoding(tmp_path: Path) -> None:
    store = tmp_path / "s"
    env = {**os.environ, "PYTHONIOENCODING": "latin-1", "CONTINUITY_HOME": str(store)}
    cmd = [sys.executable, "-m", "continuity"]
    subprocess.run([*cmd, "init"], env=env, check=True, capture_output=True, timeout=60)
    subprocess.run(
        [*cmd, "append", "uni"],
        input='{"role":"user","text":"café ✓"}\n'.encode(),
        env=env,
        check=True,
        capture_output=True,
        timeout=60,
    )
    as_json = subprocess.run([*cmd, "log", "uni", "--json"], env=env, capture_output=True)
    assert as_json.returncode == 0, as_json.stderr
    assert as_json.stdout == (store / "threads" / "uni.jsonl").read_bytes()
    readable = subprocess.run([*cmd, "log", "uni"], env=env, capture_output=True)
    assert readable.returncode == 0, readable.stderr
    assert b"user: caf\xe9 \\u2713\n" in readable.stdout  # escaped, not a crash


@pytest.mark.slow
def test_the_console_script_is_installed(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "continuity"
    if not script.is_file():
        pytest.skip(f"no console script at {script} (install with `pip install -e .`)")
    env = {**os.environ, "CONTINUITY_HOME": str(tmp_path / "s")}
    subprocess.run([str(script), "init"], env=env, check=True, capture_output=True, timeout=60)
    appended = subprocess.run(
        [str(script), "append", "demo"],
        input=HELLO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (appended.returncode, appended.stdout) == (0, "1\n2\n")
    bad = subprocess.run(
        [str(script), "append", "demo"],
        input="oops\n",
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 1
    assert bad.stdout == ""
    assert len(bad.stderr.splitlines()) == 1 and bad.stderr.startswith("error: line 1:")
