"""Small frictions a newcomer met in the first hour (issue 32): a help text that lost a word
to rich markup, a Ctrl-C that printed a traceback, an error that did not say where it looked,
and two commands that counted a thread's frames differently.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner, Result

from continuity import frames as fr
from continuity.cli.app import app
from continuity.store.jsonl import Store
from tests.support.processes import sigint_as_a_terminal_sends_it
from tests.support.transcripts import Transcript

# A bracketed phrase in a help text, written escaped (\[…], what rich shows as […]) or not.
_BRACKETED = re.compile(r"\\?\[[^\]\n]*\]")


def _commands() -> Iterator[tuple[list[str], typer.core.TyperCommand | typer.core.TyperGroup]]:
    def walk(cmd: object, path: list[str]) -> Iterator[tuple[list[str], object]]:
        yield path, cmd
        for name, sub in sorted(getattr(cmd, "commands", {}).items()):
            yield from walk(sub, [*path, name])

    yield from walk(typer.main.get_command(app), [])  # type: ignore[misc]


def _bracketed(cmd: object) -> list[str]:
    """The bracketed phrases of a command's own help and its parameters' helps, as they must
    read on screen (an escaped bracket shows without its backslash)."""
    helps = [(getattr(cmd, "help", None) or "").split("\f")[0]]
    helps += [getattr(p, "help", None) or "" for p in getattr(cmd, "params", [])]
    return [" ".join(m.removeprefix("\\").split()) for h in helps for m in _BRACKETED.findall(h)]


@pytest.mark.slow
def test_every_bracketed_word_of_the_help_survives_rich_markup() -> None:
    checked = {}
    for path, cmd in _commands():
        wanted = _bracketed(cmd)
        if not wanted:
            continue
        shown = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "240"})
        assert shown.exit_code == 0, shown.output
        flat = " ".join(shown.output.replace("│", " ").split())
        checked[" ".join(path)] = [w for w in wanted if w not in flat]
    assert "retract" in checked  # "marked [retracted]": the word rich markup used to eat
    assert {name: lost for name, lost in checked.items() if lost} == {}


# --- Ctrl-C ----------------------------------------------------------------------------------


def _transcripts(folder: Path, n: int) -> None:
    for i in range(n):
        t = Transcript(
            folder / "proj" / f"s{i:04d}.jsonl", f"{i:08d}-aaaa-4bbb-8ccc-dddddddddddd", "/w"
        )
        for turn in range(6):
            t.prompt(f"question {turn} about part {i}")
            t.tool("Bash", {"command": f"ls part{i}"}, f"file{turn}.py\n" * 20)
            t.say(f"answer {turn}: part {i} holds {turn} files")
        t.flush()


# Started through a -c program that says "ready" from inside ``continuity.__main__.main`` (what
# the console script runs), as the first thing its Ctrl-C handling covers, so the signal lands in
# continuity's start-up and work. A SIGINT before that lands in the interpreter's own start-up
# (site, .pth files) or in this program's own lines, which no code of ours can catch.
_STARTER = (
    "import sys\n"
    "import continuity.__main__ as entry\n"
    "command = entry._main\n"
    "def started():\n"
    "    print('ready', flush=True)\n"
    "    command()\n"
    "entry._main = started\n"
    "sys.argv = ['continuity', *sys.argv[1:]]\n"
    "entry.main()\n"
)


_LOST_BY_CPYTHON = "Exception ignored in: <function _get_module_lock"


def _ctrl_c(folder: Path, store: Path, delay: float) -> tuple[float, int, str, str]:
    """Ingest ``folder`` into ``store`` in a child, and press Ctrl-C ``delay`` s after it is
    ready: its exit code, stdout and stderr."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _STARTER, "--store", str(store), "ingest", str(folder)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=sigint_as_a_terminal_sends_it,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    return delay, proc.returncode, out, err


@pytest.mark.slow
def test_a_ctrl_c_early_in_ingest_is_one_line_and_exit_130(tmp_path: Path) -> None:
    folder = tmp_path / "projects"
    _transcripts(folder, 300)  # seconds of work: every signal lands before the end
    outcomes = []
    for delay in (0.0, 0.02, 0.06, 0.12, 0.25, 0.4):
        for _try in range(3):
            outcome = _ctrl_c(folder, tmp_path / f"store-{delay}-{_try}", delay)
            # CPython drops a SIGINT that lands in its import system's own weakref callback
            # ("Exception ignored in: <function _get_module_lock.<locals>.cb …>"): the signal
            # never reaches continuity, and the command runs on. Not ours to test: press again.
            if _LOST_BY_CPYTHON not in outcome[3]:
                break
        outcomes.append(outcome)
    for delay, code, out, err in outcomes:
        assert "Traceback" not in err, (delay, err)
        lines = err.splitlines()
        assert (code, len(lines)) == (130, 1), (delay, code, err, out[-300:])
        assert lines[0].startswith("interrupted"), (delay, err)
        assert out == "", (delay, out)


def test_a_ctrl_c_in_any_command_is_one_line_and_exit_130(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import continuity.maintenance.verify as verify

    def interrupted(*_args: object, **_kwargs: object) -> None:
        raise KeyboardInterrupt  # as a Ctrl-C in the middle of the command's work would

    monkeypatch.setattr(verify, "verify_store", interrupted)
    Store(tmp_path / "s", create=True)
    result = CliRunner().invoke(app, ["--store", str(tmp_path / "s"), "verify"])
    assert (result.exit_code, result.stdout, result.stderr) == (130, "", "interrupted\n")


# --- where ingest looked ---------------------------------------------------------------------


def _run(store: Path, *args: str) -> Result:
    return CliRunner().invoke(app, ["--store", str(store), *args])


def test_no_transcripts_names_the_folder_it_searched(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("not a transcript")
    result = _run(tmp_path / "s", "ingest", str(empty))
    assert result.exit_code == 1
    assert result.stderr == f"error: no transcripts (*.jsonl) found in {empty}\n"


def test_no_codex_rollouts_names_the_folders_searched(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    result = _run(tmp_path / "s", "ingest", "--agent", "codex", str(a), str(b))
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: no Codex rollouts (rollout-*.jsonl, rollout-*.jsonl.zst) found in {a}, {b}\n"
    )


# --- frame counts ----------------------------------------------------------------------------

_REBUILT = re.compile(r"^rebuilt the caches of (\d+) threads? \((\d+) frames?\)", re.M)
_VERIFIED = re.compile(r"^ok: (\d+) threads?, (\d+) frames?, ", re.M)


@pytest.mark.slow
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_rebuild_index_and_verify_count_the_same_frames(
    tmp_path: Path, jobs: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from continuity.caches import thread_index

    # the default, where small threads keep no caches (the suite keeps them all: conftest.py),
    # here and in the workers of --jobs 2
    monkeypatch.setattr(thread_index, "SMALL_LOG_BYTES", 64 * 1024)
    monkeypatch.setenv("CONTINUITY_SMALL_LOG_BYTES", str(64 * 1024))
    root = tmp_path / "s"
    store = Store(root, create=True, durable=False)
    store.thread("small").append([fr.message("user", "hello"), fr.message("assistant", "hi")])
    big = store.thread("big")  # past 64 KiB: it keeps caches (ADR 0031)
    big.append([fr.message("user", f"line {i} " + "x" * 400) for i in range(300)])
    frames = {t: len(list(store.thread(t).read())) for t in store.threads()}
    assert frames["small"] == 3 and frames["big"] == 301
    for chosen in (["small"], ["big"], []):
        rebuilt = _run(root, "rebuild-index", "--jobs", jobs, *chosen)
        verified = _run(root, "verify", "--jobs", jobs, *chosen)
        assert rebuilt.exit_code == verified.exit_code == 0, rebuilt.output + verified.output
        want = sum(frames[t] for t in chosen or frames)
        r = _REBUILT.search(rebuilt.stdout)
        v = _VERIFIED.search(verified.stdout)
        assert r is not None and v is not None, rebuilt.stdout + verified.stdout
        assert (int(r[2]), int(v[2])) == (want, want), chosen
        assert int(r[1]) == int(v[1]) == len(chosen or frames)
    assert store.cache_dir is not None
    assert not (store.cache_dir / "threads" / "small").exists()  # and still no caches
    assert (store.cache_dir / "threads" / "big").is_dir()


def test_a_ctrl_c_while_the_command_line_is_parsed_is_one_line_and_exit_130(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before any command runs (typer would exit 130 and say nothing): a real Ctrl-C 20 ms
    after start-up landed there once in a loaded CI run."""
    import continuity.cli.app as app_module

    def interrupted(_value: bool) -> None:
        raise KeyboardInterrupt  # the root's eager --version callback runs while parsing

    monkeypatch.setattr(app_module, "_show_version", interrupted)
    result = CliRunner().invoke(app_module.build_app(), ["--version"])
    assert (result.exit_code, result.stdout, result.stderr) == (130, "", "interrupted\n")
