"""One demo thread a store: a second ``continuity demo`` on the same store replays into a
throwaway store, so a search never shows the demo's messages twice (the log is append-only and
a deleted thread is never written again, so the first thread can be neither replaced nor
written to again)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from continuity.cli.app import app
from continuity.demo import DEMO_THREAD, run_demo, run_in_temp
from continuity.store.jsonl import Store


@pytest.fixture(autouse=True)
def _temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The demo's temporary folders go under the test's folder, and the default store too."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CONTINUITY_HOME", raising=False)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    return temp


def _demo_threads(root: Path) -> list[str]:
    return [t for t in Store(root).threads() if t.startswith("cc-demo-")]


def test_twice_on_a_store_leaves_one_thread_and_says_why(tmp_path: Path, _temp: Path) -> None:
    root = tmp_path / "store"
    runner = CliRunner()
    first = runner.invoke(app, ["--store", str(root), "demo"])
    assert first.exit_code == 0, first.output
    log = root / "threads" / f"{DEMO_THREAD}.jsonl"
    before = log.read_bytes()

    second = runner.invoke(app, ["--store", str(root), "demo"])
    assert second.exit_code == 0, second.output
    assert _demo_threads(root) == [DEMO_THREAD]
    assert log.read_bytes() == before  # nothing appended
    said = " ".join(second.stdout.split())  # unwrapped
    assert f"your store has this session from an earlier run, thread {DEMO_THREAD}" in said
    assert "into a throwaway store" in said
    # the payoff all the same, and the Next lines point at the thread the store holds
    assert "characters given back to Claude" in said
    assert f"--store {root} log {DEMO_THREAD}\n" in second.stdout
    assert list(_temp.iterdir()) == []


def test_an_earlier_versions_demo_thread_counts(tmp_path: Path) -> None:
    root = tmp_path / "store"
    earlier = "demo-3f2b9a4e-0000-4000-8000-000000000000"  # its id was demo-<uuid>
    with Store(root, create=True) as store:
        run_demo(store, tmp_path / "work", session_id=earlier)
    result = run_in_temp(root)
    assert result.held is not None and result.held.thread_id == f"cc-{earlier}"
    assert result.temporary_store
    assert _demo_threads(root) == [f"cc-{earlier}"]


def test_a_deleted_demo_thread_is_not_written_again(tmp_path: Path) -> None:
    root = tmp_path / "store"
    runner = CliRunner()
    assert runner.invoke(app, ["--store", str(root), "demo"]).exit_code == 0
    assert runner.invoke(app, ["--store", str(root), "delete", DEMO_THREAD, "--yes"]).exit_code == 0
    again = runner.invoke(app, ["--store", str(root), "demo"])
    assert again.exit_code == 0, again.output
    said = " ".join(again.stdout.split())
    assert f"thread {DEMO_THREAD} was deleted from your store" in said
    assert "demo --temp-store --keep" in said
    assert _demo_threads(root) == []
