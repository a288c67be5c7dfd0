"""The command line under misuse: ``--store`` after the command, a store path that is a file,
a mistyped thread id, ``--version``, and ``threads`` (every thread, not only Claude Code's).

Each error is checked against the contract of ``tests/cli/test_commands.py``: one line on
stderr that says what is actually wrong, nothing on stdout, a non-zero exit, nothing written.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner, Result

from continuity import frames as fr
from continuity.cli._common import thread_hint
from continuity.cli.app import COMMANDS, GROUPS, app
from continuity.errors import DISTRIBUTION
from continuity.store.jsonl import JsonlThread, Store

HELLO = '{"role":"user","text":"hello"}\n{"role":"assistant","text":"hi"}\n'


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("CONTINUITY_HOME", "XDG_DATA_HOME", "CLAUDE_PROJECT_DIR"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A store holding ``demo`` (3 frames) and ``cc-4d5611e5-241a`` (3 frames)."""
    path = tmp_path / "s"
    assert cli("--store", str(path), "init").exit_code == 0
    for thread in ("demo", "cc-4d5611e5-241a"):
        result = cli("--store", str(path), "append", thread, input=HELLO)
        assert result.exit_code == 0, result.stderr
    return path


def cli(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(app, list(args), input=input)


def one_line_error(result: Result, *needles: str) -> str:
    assert result.exit_code != 0, result.stdout
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


# --- --store before or after the command ----------------------------------------------------


def test_every_command_that_reads_the_store_takes_the_option_after_its_name() -> None:
    group = typer.main.get_command(app)
    commands = getattr(group, "commands", {})
    assert set(commands) == set(COMMANDS) | set(GROUPS)
    takes_it = {
        name
        for name, command in commands.items()
        if any("--store" in getattr(p, "opts", []) for p in command.params)
    }
    # uninstall edits Claude Code's settings alone: it has no store to name; migrate names its
    # two stores as arguments; `model fetch` and `model show` are about models, not stores
    assert takes_it == set(COMMANDS) - {"uninstall", "migrate"}


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        ["stats", "--json"],
        ["log", "demo"],
        ["verify"],
        ["threads"],
        ["search", "hello"],
        ["compile", "demo", "--format", "text"],
        ["decisions", "demo"],
        ["sessions"],
    ],
)
def test_the_store_option_works_before_and_after_the_command(store: Path, args: list[str]) -> None:
    before = cli("--store", str(store), *args)
    assert before.exit_code == 0, before.stderr
    after = cli(*args, "--store", str(store))
    assert after.exit_code == 0, after.stderr
    if args[0] not in ("compile", "decisions"):  # they log a decision each time
        assert after.stdout == before.stdout
    assert not (Path.home() / ".local").exists()  # never the default store


@pytest.mark.slow
def test_the_option_after_the_command_wins(store: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    assert cli("--store", str(other), "init").exit_code == 0
    result = cli("--store", str(other), "stats", "--json", "--store", str(store))
    assert json.loads(result.stdout)["threads"] == 2
    result = cli("--store", str(store), "stats", "--json", "--store", str(other))
    assert json.loads(result.stdout)["threads"] == 0


def test_the_option_after_the_command_needs_its_value(store: Path) -> None:
    result = cli("stats", "--store")
    assert result.exit_code == 2
    assert "--store" in result.stderr


def test_append_with_the_store_after_the_thread(store: Path) -> None:
    result = cli("append", "demo", "--store", str(store), input='{"role":"user","text":"x"}\n')
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "3\n"


@pytest.mark.slow
def test_a_process_takes_the_option_after_the_command(store: Path) -> None:
    """The real entry point: the fast search and the typer path agree on where --store goes."""
    for args in (["search", "hello", "--store", str(store)], ["threads", "--store", str(store)]):
        done = subprocess.run(
            [sys.executable, "-m", "continuity", *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert "demo" in done.stdout


# --- a store path that is not a store -------------------------------------------------------


@pytest.mark.parametrize(
    "args", [["log", "demo"], ["stats"], ["verify"], ["threads"], ["compile", "demo"]]
)
def test_a_store_path_that_is_a_file_is_named_as_such(tmp_path: Path, args: list[str]) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("mine")
    line = one_line_error(cli("--store", str(path), *args), str(path), "is a file, not a store")
    assert "continuity init" not in line  # which would fail on a file
    assert path.read_text() == "mine"


def test_a_folder_that_is_not_a_store_is_named_as_such(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text("mine")
    line = one_line_error(cli("--store", str(folder), "log", "demo"), str(folder))
    assert "not a continuity store" in line and "continuity init" not in line
    assert sorted(p.name for p in folder.iterdir()) == ["a.txt"]


def test_a_missing_store_still_points_at_init(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    one_line_error(cli("--store", str(missing), "stats"), "no continuity store", "continuity init")
    assert not missing.exists()


# --- a thread id that is not there ----------------------------------------------------------


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("dmeo", "demo"),  # a typo
        ("4d5611e5-241a", "cc-4d5611e5-241a"),  # a session id without its prefix
        ("cc-4d5611e5-24", "cc-4d5611e5-241a"),  # cut short
    ],
)
@pytest.mark.parametrize(
    "command",
    [
        ["log"],
        ["verify"],
        ["rebuild-index"],
        ["compile"],
        ["decisions"],
        ["compact", "--stride", "2"],
        ["checkpoint", "--to-seq", "1"],
    ],
    ids=lambda c: c[0],
)
def test_a_mistyped_thread_id_gets_the_ids_it_may_mean(
    store: Path, typed: str, meant: str, command: list[str]
) -> None:
    before = tree(store / "threads")
    result = cli("--store", str(store), command[0], typed, *command[1:])
    line = one_line_error(result, f"no thread {typed!r}")
    assert line.endswith(f"did you mean {meant!r}?")
    assert tree(store / "threads") == before


def test_search_in_a_mistyped_thread_gets_suggestions_too(store: Path) -> None:
    result = cli("--store", str(store), "search", "hello", "--thread", "dem")
    one_line_error(result, "no thread 'dem'", "did you mean 'demo'?")


def test_an_id_like_nothing_points_at_the_list(store: Path) -> None:
    line = one_line_error(cli("--store", str(store), "log", "zzzz"), "no thread 'zzzz'")
    assert "continuity threads" in line


def test_thread_hint_orders_and_bounds_what_it_offers() -> None:
    known = ["cc-abc", "cc-abc.agent-1", "cc-abcd", "cc-abce", "cc-abcf", "other"]
    assert thread_hint("abc", known) == "; did you mean 'cc-abc'?"  # the prefix was left off
    many = thread_hint("cc-ab", known)
    assert many.startswith("; did you mean 'cc-abc', 'cc-abcd' or 'cc-abce'?")
    assert many.endswith("(and 2 more)")
    assert thread_hint("othr", known) == "; did you mean 'other'?"
    assert "continuity threads" in thread_hint("zzz", known)
    assert "continuity threads" in thread_hint("x", [])


# --- --version ------------------------------------------------------------------------------


def test_version() -> None:
    result = cli("--version")
    assert result.exit_code == 0
    assert result.stdout == f"continuity {version(DISTRIBUTION)}\n"
    assert result.stderr == ""


@pytest.mark.slow
def test_version_of_a_process() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "continuity", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, f"continuity {version(DISTRIBUTION)}\n")


# --- threads --------------------------------------------------------------------------------


def test_threads_of_an_empty_store(tmp_path: Path) -> None:
    assert cli("--store", str(tmp_path / "s"), "init").exit_code == 0
    result = cli("--store", str(tmp_path / "s"), "threads")
    assert (result.exit_code, result.stdout) == (0, "no threads in this store yet\n")
    assert cli("--store", str(tmp_path / "s"), "threads", "--json").stdout == ""


def test_threads_lists_every_thread_with_its_kind(tmp_path: Path) -> None:
    path = tmp_path / "s"
    s = Store(path, create=True)
    s.thread("notes").append([fr.message("user", "a", ts_ms=3_000)])
    s.thread("cc-sess").append(
        [
            fr.ThreadCreated(ts_ms=1_000, meta={"source": "claude-code"}),
            fr.message("user", "b", ts_ms=1_000),
        ]
    )
    s.thread("cc-sess.agent-x").append(
        [
            fr.ThreadCreated(
                ts_ms=2_000, parent_thread_id="cc-sess", meta={"source": "claude-code"}
            ),
            fr.message("user", "c", ts_ms=2_000),
            fr.message("assistant", "d", ts_ms=2_500),
        ]
    )
    s.thread("imported").append(
        [
            fr.ThreadCreated(ts_ms=500, title="From elsewhere", meta={"source": "slack"}),
            fr.message("user", "e", ts_ms=4_000_000),
        ]
    )
    result = cli("--store", str(path), "threads", "--json")
    assert result.exit_code == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    # the most recently active last, as `sessions` lists
    assert [r["thread_id"] for r in rows] == ["cc-sess", "cc-sess.agent-x", "notes", "imported"]
    by_id = {r["thread_id"]: r for r in rows}
    assert by_id["cc-sess"]["kind"] == "claude-code session"
    assert by_id["cc-sess.agent-x"]["kind"] == "claude-code subagent"
    assert by_id["cc-sess.agent-x"]["parent_thread_id"] == "cc-sess"
    assert by_id["notes"]["kind"] == "other"
    assert by_id["imported"]["kind"] == "slack"
    assert by_id["imported"]["title"] == "From elsewhere"
    for r in rows:
        thread = s.thread(r["thread_id"])
        head = thread.head()
        assert head is not None and r["frames"] == head.seq + 1
        assert r["last_active_ms"] == thread.tail(1)[0].ts_ms
    assert by_id["imported"]["last_active"] == "1970-01-01 01:06:40"

    text = cli("--store", str(path), "threads")
    assert text.exit_code == 0
    lines = text.stdout.splitlines()
    assert [line.split()[0] for line in lines] == [r["thread_id"] for r in rows]
    assert lines[1].split()[1:3] == ["3", "frames"]
    assert lines[1].endswith("claude-code subagent")
    assert len({line.index("frame") for line in lines}) == 1  # the columns line up


def test_threads_names_a_thread_it_cannot_read_and_lists_the_rest(store: Path) -> None:
    log = store / "threads" / "demo.jsonl"
    first, rest = log.read_bytes().split(b"\n", 1)
    log.write_bytes(first.replace(b'"demo"', b'"dema"') + b"\n" + rest)  # breaks the chain
    result = cli("--store", str(store), "threads")
    assert result.exit_code == 0, result.stderr
    rows = {line.split()[0]: line for line in result.stdout.splitlines()}
    assert set(rows) == {"demo", "cc-4d5611e5-241a"}
    assert "unreadable: corrupt frame" in rows["demo"]
    assert "warning: 1 thread cannot be read" in result.stderr and "(demo)" in result.stderr


def test_threads_reads_two_frames_a_thread_whatever_its_length(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s"
    s = Store(path, create=True, durable=False)
    s.thread("long").append([fr.message("user", f"m{i}") for i in range(3000)])
    s.thread("short").append([fr.message("user", "x")])
    read: list[int] = []
    forward, backward = JsonlThread.read_lines, JsonlThread.read_lines_backwards

    def counted_forward(
        self: JsonlThread,
        *,
        from_seq: int = 0,
        to_seq: int | None = None,
        start_offset: int | None = None,
    ) -> Iterator[tuple[int, bytes]]:
        for item in forward(self, from_seq=from_seq, to_seq=to_seq, start_offset=start_offset):
            read.append(item[0])
            yield item

    def counted_backward(self: JsonlThread) -> Iterator[tuple[int, bytes]]:
        for item in backward(self):
            read.append(item[0])
            yield item

    monkeypatch.setattr(JsonlThread, "read_lines", counted_forward)
    monkeypatch.setattr(JsonlThread, "read_lines_backwards", counted_backward)
    result = cli("--store", str(path), "threads", "--json")
    assert result.exit_code == 0, result.stderr
    assert [json.loads(line)["frames"] for line in result.stdout.splitlines()] == [3001, 2]
    assert len(read) <= 4  # seq 0 and the last frame of each


def test_the_command_line_guide_lists_every_command() -> None:
    guide = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()
    table = guide.split("| command | what it does |", 1)[1].split("\n\n", 1)[0]
    listed = set(re.findall(r"`([a-z-]+)[ `]", table))
    assert set(COMMANDS) <= listed
