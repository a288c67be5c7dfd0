"""The unreachable mark and the kept transcripts of a server store's local folder
(:mod:`continuity.store.outage`, ADR 0041)."""

from __future__ import annotations

import socket
from pathlib import Path

from continuity.store import outage


def test_the_mark_skips_the_server_for_its_window_then_lets_one_hook_retry(tmp_path: Path) -> None:
    assert outage.skip_for(tmp_path) is None
    first = outage.note_unreachable(tmp_path, "refused", now=1000.0)
    assert (first.since, first.failures) == (1000.0, 1)
    assert outage.skip_for(tmp_path, now=1010.0) == first
    assert outage.skip_for(tmp_path, now=1031.0) is None  # 30 s later: try again
    second = outage.note_unreachable(tmp_path, "refused", now=1031.0)
    assert (second.since, second.failures) == (1000.0, 2)  # since the first failure
    assert outage.skip_for(tmp_path, now=1080.0) is not None  # then 60 s
    assert outage.skip_for(tmp_path, now=1092.0) is None
    assert [outage.backoff(n) for n in (1, 2, 3, 5, 40)] == [30, 60, 120, 300, 300]
    assert outage.skip_for(tmp_path, now=10.0) is None  # a clock set back: retry
    assert outage.clear_mark(tmp_path) and not outage.clear_mark(tmp_path)


def test_a_damaged_mark_means_try_the_server(tmp_path: Path) -> None:
    (tmp_path / "server-unreachable.json").write_text("{not json")
    assert outage.mark_of(tmp_path) is None and outage.skip_for(tmp_path) is None


def test_a_transcript_is_kept_once_final_sticks_and_a_rewrite_survives_settle(
    tmp_path: Path,
) -> None:
    t = tmp_path / "a.jsonl"
    outage.remember(tmp_path, t, agent="claude-code", session="s", final=True)
    outage.remember(tmp_path, t, agent="claude-code", session="s", final=False)
    outage.remember(tmp_path, tmp_path / "b.jsonl", agent="codex", session="", final=False)
    kept = outage.pending(tmp_path)
    assert [(p.path.name, p.agent, p.final) for p in kept] == [
        ("a.jsonl", "claude-code", True),
        ("b.jsonl", "codex", False),
    ]
    # another hook keeps a.jsonl again while this one archives it: its entry stays
    outage.remember(tmp_path, t, agent="claude-code", session="s", final=False)
    outage.settle(kept[0])
    outage.settle(kept[1])
    assert [p.path.name for p in outage.pending(tmp_path)] == ["a.jsonl"]


def test_an_unreadable_entry_is_dropped(tmp_path: Path) -> None:
    (tmp_path / "pending").mkdir()
    (tmp_path / "pending" / "x.json").write_text("[]")
    assert outage.pending(tmp_path) == []
    assert not (tmp_path / "pending" / "x.json").exists()


def test_the_probe_tells_a_silent_listener_and_a_closed_port_from_a_server(tmp_path: Path) -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        port = silent.getsockname()[1]
        said = outage.probe(f"postgresql://u@127.0.0.1:{port}/db", timeout=0.05)
        assert said is not None and "no answer" in said
    closed = outage.probe(f"postgresql://u@127.0.0.1:{port}/db", timeout=0.05)
    assert closed is not None and "no answer" not in closed
    missing = outage.probe(f"postgresql:///db?host={tmp_path}", timeout=0.05)
    assert missing is not None  # no socket file in that folder
    # what it cannot name exactly it leaves to the driver
    assert outage.probe("postgresql://a:1,b:2/db") is None
    assert outage.probe("postgresql:///db") is None
