"""``continuity fork`` through typer's CliRunner: what it made, ``--json``, resuming a fork cut
short, and the CLI's error contract (one ``error:`` line on stderr, nothing on stdout, a
non-zero exit, nothing written)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from continuity import frames as fr
from continuity.cli.app import app
from continuity.context import fork as fork_module
from continuity.store.jsonl import Store

CHAT = "".join(
    json.dumps({"role": role, "text": f"{role} {i}"}) + "\n"
    for i in range(4)
    for role in ("user", "assistant")
)  # 8 messages: seqs 1..8


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("CONTINUITY_HOME", "XDG_DATA_HOME", "CLAUDE_PROJECT_DIR"):
        monkeypatch.delenv(name, raising=False)


def cli(store: Path, *args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(app, ["--store", str(store), *args], input=input)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A store holding ``demo``: thread_created and 8 messages."""
    path = tmp_path / "s"
    assert cli(path, "init").exit_code == 0
    done = cli(path, "append", "demo", input=CHAT)
    assert done.exit_code == 0, done.stderr
    return path


def tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted((root / "threads").rglob("*"))
        if p.is_file()
    }


def one_line_error(result: Result, *needles: str) -> str:
    assert result.exit_code == 1, (result.exit_code, result.stdout, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.mark.slow
def test_fork_at_a_seq_prints_what_it_made(store: Path) -> None:
    done = cli(store, "fork", "demo", "alt", "--at", "5", "--title", "another way")
    assert done.exit_code == 0, done.stderr
    assert done.stdout.startswith("forked demo at seq 5 (digest ")
    assert done.stdout.endswith(") into alt: 5 frames copied\n")
    log = cli(store, "log", "alt")
    assert log.exit_code == 0, log.stderr
    lines = log.stdout.splitlines()
    assert len(lines) == 6
    assert "thread_created" in lines[0].replace(" ", "_") or "thread created" in lines[0]
    assert "alt" in lines[0] and "another way" in lines[0] and "demo" in lines[0]
    assert "user: user 2" in lines[5]
    created = next(iter(Store(store).thread("alt").read(to_seq=0)))
    assert isinstance(created, fr.ThreadCreated)
    assert created.title == "another way"
    assert created.fork_of is not None and created.fork_of.seq == 5
    assert cli(store, "verify").stdout.startswith("ok: 2 threads, 15 frames")


def test_fork_at_the_head_by_default_with_json(store: Path) -> None:
    done = cli(store, "fork", "demo", "alt", "--json")
    assert done.exit_code == 0, done.stderr
    shown = json.loads(done.stdout)
    head = Store(store).thread("demo").head()
    assert head is not None
    assert shown == {
        "thread_id": "alt",
        "status": "created",
        "fork_of": {"thread_id": "demo", "seq": 8, "digest": head.digest},
        "copied": 8,
        "frames": 9,
    }
    again = cli(store, "fork", "demo", "alt", "--json")
    assert again.exit_code == 0, again.stderr
    assert json.loads(again.stdout) == {**shown, "status": "exists", "copied": 0}
    plain = cli(store, "fork", "demo", "alt")
    assert plain.stdout.startswith("alt is already the fork of demo at seq 8 ")
    assert plain.stdout.endswith("; nothing to do\n")


@pytest.mark.slow
def test_the_forked_thread_goes_on_and_the_threads_listing_shows_it(store: Path) -> None:
    assert cli(store, "fork", "demo", "alt", "--at", "2").exit_code == 0
    more = cli(store, "append", "alt", input='{"role":"user","text":"only here"}\n')
    assert more.stdout == "3\n"
    listed = cli(store, "threads", "--json")
    rows = {json.loads(line)["thread_id"]: json.loads(line) for line in listed.stdout.splitlines()}
    assert rows["alt"]["parent_thread_id"] == "demo"
    assert rows["alt"]["frames"] == 4
    compiled = cli(store, "compile", "alt", "--format", "text")
    assert compiled.exit_code == 0, compiled.stderr
    assert "user 0" in compiled.stdout and "assistant 0" in compiled.stdout
    assert "only here" in compiled.stdout and "user 1" not in compiled.stdout


@pytest.mark.slow
def test_a_fork_cut_short_is_finished_by_the_same_command(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fork_module, "_BATCH_FRAMES", 3)
    calls = []
    real = fork_module._append

    def crash_on_second(*args: object) -> None:
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(fork_module, "_append", crash_on_second)
    cut = cli(store, "fork", "demo", "alt", "--at", "7")
    assert cut.exit_code != 0
    head = Store(store).thread("alt").head()
    assert head is not None and head.seq == 2
    monkeypatch.setattr(fork_module, "_append", real)
    done = cli(store, "fork", "demo", "alt", "--at", "7", "--json")
    assert done.exit_code == 0, done.stderr
    shown = json.loads(done.stdout)
    assert (shown["status"], shown["copied"], shown["frames"]) == ("resumed", 5, 8)
    text = cli(store, "fork", "demo", "alt2", "--at", "7")
    assert text.exit_code == 0
    monkeypatch.setattr(fork_module, "_append", crash_on_second)
    calls.clear()
    assert cli(store, "fork", "demo", "alt3", "--at", "7").exit_code != 0
    monkeypatch.setattr(fork_module, "_append", real)
    resumed = cli(store, "fork", "demo", "alt3", "--at", "7")
    assert resumed.stdout.startswith("finished the fork of demo at seq 7 ")
    assert resumed.stdout.endswith("into alt3: it stopped at seq 2; 5 more frames copied\n")
    assert cli(store, "verify").exit_code == 0


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["fork", "nope", "alt"], ["no thread 'nope'"]),
        (["fork", "dmeo", "alt"], ["no thread 'dmeo'", "did you mean 'demo'"]),
        (["fork", "demo", "demo"], ["into itself"]),
        (["fork", "demo", "other"], ["'other' already exists and is not a fork"]),
        (["fork", "demo", "alt", "--at", "9"], ["seq 9", "0..8"]),
        (["fork", "demo", "../x"], ["invalid thread id"]),
    ],
)
def test_bad_input_is_one_error_line_and_writes_nothing(
    store: Path, args: list[str], needles: list[str]
) -> None:
    assert cli(store, "append", "other", input='{"role":"user","text":"x"}\n').exit_code == 0
    before = tree(store)
    one_line_error(cli(store, *args), *needles)
    assert tree(store) == before


@pytest.mark.slow
def test_a_target_forked_from_elsewhere_is_refused(store: Path) -> None:
    assert cli(store, "append", "other", input='{"role":"user","text":"x"}\n').exit_code == 0
    assert cli(store, "fork", "other", "alt").exit_code == 0
    one_line_error(cli(store, "fork", "demo", "alt"), "already exists as a fork of 'other'")
    one_line_error(cli(store, "fork", "other", "alt", "--at", "0"), "at seq 1, not at seq 0")


def test_a_negative_seq_is_a_usage_error(store: Path) -> None:
    done = cli(store, "fork", "demo", "alt", "--at", "-1")
    assert done.exit_code == 2
    assert "--at" in done.stderr


def test_a_missing_store_is_one_error_line(tmp_path: Path) -> None:
    one_line_error(cli(tmp_path / "none", "fork", "demo", "alt"), "store")
