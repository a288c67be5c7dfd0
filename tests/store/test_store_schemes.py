"""Store backends by URL scheme (``continuity.store.locate.STORE_SCHEMES``, ADR 0047): an
installed package adds a scheme through its entry points (``tests/support/outside.py``, put on
``sys.path`` as pip would leave it), and a URL of that scheme opens its store everywhere a
store is named — ``open_store``, the CLI's ``--store``, a hook's ``$CONTINUITY_HOME`` — and
passes the store contract. A scheme no backend opens is a clear error naming the known ones."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from continuity import frames as fr
from continuity.cli.app import app
from continuity.errors import StoreNotFound, UnknownName
from continuity.store.base import BaseStore
from continuity.store.locate import STORE_SCHEMES, open_store
from continuity.testing.store import StoreContract
from tests.support.outside import MemtestStore, install

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module", autouse=True)
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The outside package, installed for this module's tests."""
    site = install(tmp_path_factory.mktemp("site"))
    STORE_SCHEMES.unregister("memtest")  # a lookup before it was installed is not remembered
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(site))
        yield site
    STORE_SCHEMES.unregister("memtest")
    MemtestStore.opened.clear()


def test_an_installed_backend_opens_the_urls_of_its_scheme() -> None:
    with pytest.raises(StoreNotFound, match="no memtest store at memtest://one"):
        open_store("memtest://one")
    store = open_store("memtest://one", create=True)
    assert isinstance(store, MemtestStore) and store.location == "memtest://one"
    store.thread("t").append(fr.message("user", "hello"))
    assert open_store("MemTest://one", create=True) is not store  # the URL is the backend's
    assert open_store("memtest://one") is store
    assert "memtest" in STORE_SCHEMES.names()


def test_a_scheme_no_backend_opens_is_an_error_naming_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(UnknownName) as caught:
        open_store("nosuch://bob:s3cret@host/db")
    message = str(caught.value)
    assert message.startswith("nosuch://bob:***@host/db: unknown store scheme 'nosuch': ")
    assert "known are postgresql, postgres, memtest" in message and "s3cret" not in message
    assert "'continuity.stores'" in message and "a folder store is named by its path" in message


def test_a_file_url_is_not_a_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One name per folder store: its path (a ``file:`` folder is not made either)."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UnknownName, match="unknown store scheme 'file'"):
        open_store(f"file://{tmp_path / 'store'}", create=True)
    assert list(tmp_path.iterdir()) == []


def test_a_scheme_registered_at_run_time_is_opened_with_open_stores_arguments() -> None:
    calls: list[tuple[str, dict[str, Any]]] = []

    def opener(location: str, /, **given: Any) -> BaseStore:
        calls.append((location, given))
        return MemtestStore(location)

    STORE_SCHEMES.register("runtime", opener)
    try:
        recover = print
        store = open_store("runtime://x", durable=False, on_recovery=recover, clock=lambda: 7)
        assert isinstance(store, MemtestStore)
        expected = {
            "create": False,
            "durable": False,
            "on_recovery": recover,
            "redactor": None,
            "clock": calls[0][1]["clock"],
        }
        assert calls == [("runtime://x", expected)]
        STORE_SCHEMES.register("runtime", lambda location, /, **given: "not a store")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="the runtime store opener returned str"):
            open_store("runtime://x")
    finally:
        STORE_SCHEMES.unregister("runtime")


# --- through the faces ------------------------------------------------------------------------


def cli(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def test_the_cli_opens_a_store_by_an_installed_scheme() -> None:
    store = open_store("memtest://cli", create=True)
    store.thread("first").append(fr.message("user", "hello"))
    store.thread("second").append(fr.message("user", "again"))
    listed = cli("--store", "memtest://cli", "threads", "--json")
    assert listed.exit_code == 0, listed.output
    assert [json.loads(line)["thread_id"] for line in listed.stdout.splitlines()] == [
        "first",
        "second",
    ]
    missing = cli("--store", "memtest://nowhere", "threads")
    assert missing.exit_code == 1 and "no memtest store at memtest://nowhere" in missing.output
    # --schema is a PostgreSQL store's; another backend's URL is passed on as it is
    schema = cli("--store", "memtest://cli", "--schema", "team", "threads")
    assert schema.exit_code == 1
    assert "memtest://cli is another backend's URL (give --store a postgresql:// URL)" in (
        schema.output
    )
    unknown = cli("--store", "nosuch://x", "threads")
    assert unknown.exit_code == 1
    assert "error: nosuch://x: unknown store scheme 'nosuch': known are " in unknown.output


def test_a_hook_archives_into_a_store_of_an_installed_scheme(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Opened as a folder store is: the PostgreSQL guard (a probe of the server, ADR 0041) is
    PostgreSQL's alone."""
    from continuity.agents.claude_code.hooks import main
    from tests.agents.claude_code.test_hooks import SESSION, Transcript, work

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))  # the URL's local folder
    monkeypatch.setenv("CONTINUITY_HOME", "memtest://hooked")
    monkeypatch.delenv("CONTINUITY_DEBUG", raising=False)
    transcript = Transcript(tmp_path / "projects" / "p" / f"{SESSION}.jsonl")
    work(transcript, ["/work/demo/app.py"], ["pytest -q"])
    transcript.flush()
    payload = json.dumps(transcript.payload("UserPromptSubmit")).encode()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(payload)))
    assert main(["user-prompt-submit"]) == 0
    assert capsys.readouterr().err == ""
    store = MemtestStore.opened["memtest://hooked"]
    assert store.thread(transcript.thread_id).head() is not None


@pytest.mark.slow  # a fresh process
def test_a_fresh_process_finds_the_installed_backend(installed: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(installed), str(ROOT)])}
    env.pop("CONTINUITY_HOME", None)
    run = subprocess.run(
        [sys.executable, "-m", "continuity", "--store", "memtest://fresh", "init"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert (run.returncode, run.stdout, run.stderr) == (
        0,
        "created store at memtest://fresh\n",
        "",
    )


# --- the contract ---------------------------------------------------------------------------


class TestAStoreOpenedByItsScheme(StoreContract):
    """The installed backend, opened through ``open_store``, keeps every promise a store
    makes (the in-memory reference store's, which it is)."""

    def make_store(self, path: Path, clock: Callable[[], int]) -> BaseStore:
        return open_store(f"memtest://{path}", create=True, clock=clock)
