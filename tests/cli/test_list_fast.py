"""``continuity threads`` before typer (``continuity.cli.fast_list``): the same bytes as the typer
command for the same store, and no answer at all once a log changed since the last full listing
(appended, deleted, a torn tail, a new log), until the typer command has caught up again."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from continuity import frames as fr
from continuity.agents.table import AGENTS
from continuity.caches.listing import STAT_FILE
from continuity.cli.app import app
from continuity.cli.fast_list import fast_threads, parse_store
from continuity.store.jsonl import Store


@pytest.fixture(autouse=True)
def _settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every log counts as settled however recently it changed (the racy-time rule would
    otherwise keep the stat file unwritten for two seconds after the test's own writes)."""
    monkeypatch.setattr("continuity.store.jsonl._RACY_NS", -(10**15))


def _session(store: Store, tid: str, source: str, *, parent: str | None = None, t: int) -> None:
    meta = {"source": source, "project": f"/p/{tid}", "git_branch": "main"}
    store.clock = lambda: t
    store.thread(tid).append(
        [
            fr.ThreadCreated(title=f"about {tid}", parent_thread_id=parent, meta=meta),
            fr.message("user", f"question of {tid}", message_id=f"{tid}-u"),
            fr.message("assistant", "answer", message_id=f"{tid}-a"),
        ]
    )


def _store(tmp_path: Path) -> Store:
    store = Store(tmp_path / "s", create=True, durable=False)
    t = 1_700_000_000_000
    for i, agent in enumerate(AGENTS):
        tid = f"{agent.thread_prefix}s{i}"
        _session(store, tid, agent.source, t=t + i * 1000)
        _session(store, f"{tid}.agent-x", agent.source, parent=tid, t=t + i * 1000 + 1)
    _session(store, "s1", AGENTS[1].source, t=t + 7)  # its source, not its id: no session
    _session(store, "s0.agent-x", AGENTS[0].source, parent="s1", t=t + 8)
    _session(store, "runtime", "my-runtime", t=t - 5)
    store.clock = lambda: t  # the same time as s0: the id breaks the tie
    store.thread("plain").append(fr.message("user", "no source", message_id="p1"))
    return store


def _typer(store: Store) -> str:
    result = CliRunner().invoke(app, ["--store", str(store.root), "threads"])
    assert result.exit_code == 0, result.output
    return result.stdout


def _fast(store: Store, capsys: pytest.CaptureFixture[str]) -> str | None:
    capsys.readouterr()
    code = fast_threads(["threads", "--store", str(store.root)])
    out = capsys.readouterr().out
    if code is None:
        assert out == ""
        return None
    assert code == 0
    return out


def test_the_same_bytes_as_the_typer_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _store(tmp_path)
    assert _fast(store, capsys) is None  # never listed: no stat file yet
    expected = _typer(store)
    assert "codex subagent" in expected and "my-runtime" in expected and "other" in expected
    assert (store.root / "cache" / STAT_FILE).is_file()
    assert _fast(store, capsys) == expected


def test_a_changed_log_is_left_to_the_typer_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _store(tmp_path)
    _typer(store)
    assert _fast(store, capsys) is not None
    log = store.root / "threads" / "s1.jsonl"

    store.thread("s1").append(fr.message("user", "one more", message_id="s1-more"))
    assert _fast(store, capsys) is None
    appended = _typer(store)
    assert _fast(store, capsys) == appended

    os.remove(store.root / "threads" / "s0.agent-x.jsonl")
    assert _fast(store, capsys) is None
    deleted = _typer(store)
    assert not any(line.startswith("s0.agent-x ") for line in deleted.splitlines())
    assert _fast(store, capsys) == deleted

    _session(store, "new", "my-runtime", t=1_800_000_000_000)
    assert _fast(store, capsys) is None
    added = _typer(store)
    assert _fast(store, capsys) == added

    with log.open("ab") as f:  # a writer killed mid-line
        f.write(b'{"type":"message_appended","seq":')
    assert _fast(store, capsys) is None
    torn = _typer(store)
    assert _fast(store, capsys) in (None, torn)  # a log not at rest: never vouched for
    assert _fast(store, capsys) is None or torn == _typer(store)


def test_a_rewritten_catalog_or_marker_voids_the_stat_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _store(tmp_path)
    _typer(store)
    catalog = store.root / "cache" / "catalog.v1.json"
    data = catalog.read_bytes()
    catalog.write_bytes(data.replace(b'"frames":3', b'"frames":4', 1))
    assert _fast(store, capsys) is None
    catalog.write_bytes(data)
    assert _fast(store, capsys) is not None
    marker = store.root / "store.json"
    marker.write_bytes(marker.read_bytes() + b" ")
    assert _fast(store, capsys) is None


def test_an_empty_or_missing_store_is_left_to_the_typer_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = Store(tmp_path / "e", create=True, durable=False)
    _typer(empty)
    assert _fast(empty, capsys) is None
    assert fast_threads(["--store", str(tmp_path / "none"), "threads"]) is None


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["threads"], (None,)),
        (["--store", "/s", "threads"], ("/s",)),
        (["--store=/s", "threads", "--store", "/t"], ("/t",)),
        (["--store", "threads", "threads"], ("threads",)),
        (["threads", "--json"], None),
        (["threads", "--help"], None),
        (["threads", "--store"], None),
        (["threads", "threads"], None),
        (["--schema", "x", "threads"], None),
        (["sessions"], None),
        ([], None),
    ],
)
def test_only_the_plain_command_line_is_taken(
    argv: list[str], expected: tuple[str | None] | None
) -> None:
    assert parse_store(argv, "threads") == expected


def test_a_damaged_listing_is_not_printed_and_the_next_full_listing_mends_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _store(tmp_path)
    expected = _typer(store)
    listing = store.root / "cache" / STAT_FILE
    data = listing.read_bytes()
    listing.write_bytes(data.replace(b"codex subagent", b"codex sessions", 1))
    assert _fast(store, capsys) is None
    assert _typer(store) == expected
    assert listing.read_bytes() == data
    assert _fast(store, capsys) == expected


@pytest.mark.parametrize(
    "command", [["threads", "--json"], ["sessions"], ["sessions", "--agents", "--json"], ["stats"]]
)
def test_the_other_listings_read_a_vouched_catalog_as_the_full_check_does(
    tmp_path: Path, command: list[str]
) -> None:
    store = _store(tmp_path)
    _typer(store)
    listing = store.root / "cache" / STAT_FILE

    def shown() -> list[str]:
        result = CliRunner().invoke(app, ["--store", str(store.root), *command])
        assert result.exit_code == 0, result.output
        return [line for line in result.stdout.splitlines() if not line.startswith("cache bytes")]

    for change in range(2):
        vouched = shown()  # the listing file vouches: no log opened
        assert listing.is_file()
        listing.unlink()
        assert shown() == vouched  # the full check of every log
        if not change:
            tid = f"{AGENTS[2].thread_prefix}s2"
            store.thread(tid).append(fr.message("user", "later", message_id="s2-later"))
            assert shown() != vouched
