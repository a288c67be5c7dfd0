"""A feature whose optional extra is not installed is one line naming the extra and the line
that installs it, and exit 2, never a traceback: on every path from the command line (a
PostgreSQL store for any command, the fast search, ``migrate``, ``serve``); ``mcp`` needs none.

Each run hides the module for real, in a fresh process (``sys.modules[name] = None``: its
import fails as if the package were not installed), and runs the real ``continuity``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from continuity._install import install_line
from continuity.errors import MissingExtra
from continuity.store.jsonl import Store
from continuity.store.locate import open_store

URL = "postgresql://nobody@127.0.0.1:1/nothing"  # never reached: the driver is missing first


def run_without(
    hidden: list[str], *args: str, cwd: Path, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``continuity ARGS`` in a process where the modules ``hidden`` cannot be imported
    (``stdin``: what it reads; else nothing)."""
    code = (
        "import runpy, sys\n"
        f"for name in {hidden!r}:\n"
        "    sys.modules[name] = None\n"
        f"sys.argv = ['continuity', *{list(args)!r}]\n"
        "runpy.run_module('continuity', run_name='__main__')\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
    )


def _one_line(
    done: subprocess.CompletedProcess[str], feature: str, extra: str, missing: str
) -> None:
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [
        f"error: {feature} needs the `{extra}` extra ({missing} is missing): " + install_line(extra)
    ]
    assert done.returncode == 2
    assert done.stdout == ""


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        ["--store", URL, "threads"],
        ["--store", URL, "init"],
        ["threads", "--store", URL],  # the option after the command
        ["--store", URL, "search", "anything"],  # the fast search, then the typer command
        ["--store", URL, "log", "some-thread"],
        ["--store", URL, "mcp"],  # checked before the server starts
    ],
    ids=" ".join,
)
def test_a_postgresql_store_without_psycopg(args: list[str], tmp_path: Path) -> None:
    done = run_without(["psycopg"], *args, cwd=tmp_path)
    _one_line(done, "a PostgreSQL store", "postgres", "psycopg")


@pytest.mark.slow
def test_a_postgresql_store_without_the_pool(tmp_path: Path) -> None:
    done = run_without(["psycopg_pool"], "--store", URL, "threads", cwd=tmp_path)
    _one_line(done, "a PostgreSQL store", "postgres", "psycopg_pool")


@pytest.mark.slow
def test_migrate_to_postgresql_without_psycopg(tmp_path: Path) -> None:
    source = tmp_path / "s"
    Store(source, create=True, durable=False)
    done = run_without(["psycopg"], "migrate", str(source), URL, cwd=tmp_path)
    _one_line(done, "a PostgreSQL store", "postgres", "psycopg")


@pytest.mark.slow
@pytest.mark.parametrize("missing", ["uvicorn", "starlette", "jinja2"])
def test_serve_without_its_extra(missing: str, tmp_path: Path) -> None:
    store = tmp_path / "s"
    Store(store, create=True, durable=False)
    done = run_without([missing], "--store", str(store), "serve", "--port", "0", cwd=tmp_path)
    _one_line(done, "continuity serve", "serve", missing)


@pytest.mark.slow
def test_mcp_serves_on_the_core_install_alone(tmp_path: Path) -> None:
    # no extra since ADR 0053: the MCP server answers without the SDK or anything but the core
    store = str(tmp_path / "s")
    Store(tmp_path / "s", create=True, durable=False).close()
    requests = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-06-18"},
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "sessions", "arguments": {"scope": "all"}},
        },
    ]
    for args in (["--store", store, "mcp"], ["mcp", "--store", store, "--structured"]):
        lines = "".join(json.dumps(r) + "\n" for r in requests)
        done = run_without(NOT_CORE, *args, cwd=tmp_path, stdin=lines)
        assert (done.returncode, done.stderr) == (0, ""), args
        answers = [json.loads(line) for line in done.stdout.splitlines()]
        assert [a["id"] for a in answers] == [1, 2, 3]
        assert len(answers[1]["result"]["tools"]) == 5
        assert answers[2]["result"]["isError"] is False, answers[2]


def test_the_library_raises_missing_extra_an_import_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(MissingExtra) as raised:
        open_store(URL)
    assert isinstance(raised.value, ImportError)  # `except ImportError` still catches it
    assert (raised.value.extra, raised.value.missing) == ("postgres", "psycopg")
    assert str(raised.value).endswith(install_line("postgres"))


# What the dev extra brings and the core install (msgspec, blake3, zstandard, numpy, typer and
# what typer needs) does not: click among them (typer >= 0.26 carries its own).
NOT_CORE = [
    "click",
    "pydantic",
    "anyio",
    "httpx",
    "psycopg",
    "psycopg_pool",
    "starlette",
    "uvicorn",
    "jinja2",
    "mcp",
    "mcp_types",
    "langgraph",
    "langchain_core",
    "agents",
    "openai",
    "anthropic",
]


@pytest.mark.slow
def test_the_command_line_runs_on_the_core_install_alone(tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    for args in (
        ["--version"],
        ["--help"],
        ["--store", store, "init"],
        ["--store", store, "retract", "--help"],
        ["--store", store, "threads"],
        ["--store", store, "search", "anything", "--k", "3", "--json"],
    ):
        done = run_without(NOT_CORE, *args, cwd=tmp_path)
        assert (done.returncode, done.stderr) == (0, ""), args
