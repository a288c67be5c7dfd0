"""``continuity search`` before typer (``continuity.cli.fast_search``): what it takes on, what it
leaves to the typer command, and that either way a user sees the same output and exit code."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from continuity import frames as fr
from continuity.cli.app import app
from continuity.cli.fast_search import SearchArgs, fast_search, parse
from continuity.store.jsonl import Store

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["search", "retry"], SearchArgs(query="retry")),
        (
            ["--store", "/s", "search", "a b", "--k", "3", "--json"],
            SearchArgs(store="/s", query="a b", k=3, json=True),
        ),
        (
            ["--store=/s", "search", "--thread=t1", "q", "--project", "/w"],
            SearchArgs(store="/s", query="q", thread="t1", project="/w"),
        ),
        (["search", "--k=1000", "--", "-leading dash"], SearchArgs(query="-leading dash", k=1000)),
        (["search", "-"], SearchArgs(query="-")),
        (["search", "--thread", "--json", "q"], SearchArgs(query="q", thread="--json")),
    ],
)
def test_plain_search_command_lines_are_taken(argv: list[str], expected: SearchArgs) -> None:
    assert parse(argv) == expected


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["log", "t"],
        ["search"],  # no query
        ["search", "a", "b"],  # two
        ["search", "--help"],
        ["search", "q", "-h"],
        ["--help", "search", "q"],
        ["search", "q", "--k", "0"],
        ["search", "q", "--k", "1001"],
        ["search", "q", "--k", "ten"],
        ["search", "q", "--k", "-3"],
        ["search", "q", "--k"],  # no value
        ["search", "q", "--json", "--json"],  # repeated
        ["search", "q", "--thread", "a", "--thread", "b"],
        ["search", "q", "--json=yes"],
        ["search", "q", "--jsn"],  # a typo
        ["search", "-q"],  # an option-like query without --
        ["--store", "/s", "--store", "/t", "search", "q"],
        ["--verbose", "search", "q"],
        ["search", "q", "--rerank"],  # retired: typer says so
        ["search", "q", "--model", "m"],  # a model: typer fuses it
    ],
)
def test_anything_else_is_left_to_typer(argv: list[str]) -> None:
    assert parse(argv) is None


def test_a_model_named_by_the_environment_leaves_the_search_to_typer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CONTINUITY_MODEL", "/nowhere")
    assert fast_search(["search", "q"]) is None


@pytest.fixture
def store_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CONTINUITY_HOME", raising=False)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    store = Store(tmp_path / "s", create=True, durable=False)
    store.thread("shop").append(
        [
            fr.ThreadCreated(thread_id="shop", meta={"project": "/work/shop"}),
            fr.message("user", "Run the alembic migration for the orders table."),
            fr.message("assistant", "alembic upgrade head failed: relation orders exists"),
        ]
    )
    store.thread("blog").append(fr.message("user", "A post about alembic pitfalls."))
    return tmp_path / "s"


LINES = [
    ["search", "alembic"],
    ["search", "alembic orders", "--json"],
    ["search", "alembic", "--k", "1"],
    ["search", "alembic", "--thread", "blog"],
    ["search", "alembic", "--project", "/work/shop", "--json"],
    ["search", "nothing matches zebra"],
]


@pytest.mark.parametrize("line", LINES)
def test_the_fast_path_prints_what_the_typer_command_prints(
    store_dir: Path, line: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--store", str(store_dir), *line]
    by_typer = CliRunner().invoke(app, argv)
    assert by_typer.exit_code == 0, by_typer.stderr
    assert fast_search(argv) == 0
    out = capsys.readouterr()
    assert out.out == by_typer.stdout
    assert out.err == ""


@pytest.mark.parametrize(
    "line",
    [
        ["search", "   "],  # nothing to search for
        ["search", "alembic", "--thread", "nope"],  # an unknown thread
        ["search", "alembic", "--thread", "../x"],  # an invalid one
    ],
)
def test_errors_are_left_to_the_typer_command(
    store_dir: Path, line: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--store", str(store_dir), *line]
    assert fast_search(argv) is None
    assert capsys.readouterr() == ("", "")
    res = CliRunner().invoke(app, argv)
    assert res.exit_code == 1 and res.stderr.startswith("error: ")


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    probe = (
        "import atexit, sys\n"
        "atexit.register(lambda: sys.stderr.write('TYPER=%s\\n' % ('typer' in sys.modules)))\n"
        "from continuity.__main__ import main\n"
        f"sys.argv = ['continuity', *{list(args)!r}]\n"
        "main()\n"
    )
    return subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        timeout=60,
    )


@pytest.mark.slow
def test_a_plain_search_process_never_imports_typer_and_errors_still_read_the_same(
    store_dir: Path,
) -> None:
    ok = _cli("--store", str(store_dir), "search", "alembic", "--json")
    assert ok.returncode == 0, ok.stderr
    assert ok.stderr == "TYPER=False\n"
    assert (
        ok.stdout
        == CliRunner()
        .invoke(app, ["--store", str(store_dir), "search", "alembic", "--json"])
        .stdout
    )

    missing = _cli("--store", str(store_dir / "none"), "search", "alembic")
    assert missing.returncode == 1
    assert missing.stdout == ""
    assert missing.stderr.startswith("error: ") and missing.stderr.endswith("TYPER=True\n")

    usage = _cli("--store", str(store_dir), "search", "alembic", "--k", "0")
    assert usage.returncode == 2 and "TYPER=True" in usage.stderr


@pytest.mark.slow
def test_a_plain_search_process_never_imports_the_embedders(store_dir: Path) -> None:
    """No model is named: the embedders (a model2vec reader: json, unicodedata, a tokenizer)
    stay out of the process; search names the Embedder protocol for type checkers only."""
    probe = (
        "import atexit, sys\n"
        "atexit.register(lambda: sys.stderr.write('%s\\n' % sorted(m for m in sys.modules\n"
        "    if m in ('continuity.retrieval.embedders', 'json', 'unicodedata'))))\n"
        "from continuity.__main__ import main\n"
        f"sys.argv = ['continuity', '--store', {str(store_dir)!r}, 'search', 'alembic']\n"
        "main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == "[]\n"
