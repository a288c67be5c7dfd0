"""`prune --keep-summaries` (ADR 0057 §9): a pruned thread's cumulative summary is kept as a
thread of its own before the thread goes; the agent's own summary when it wrote one."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from continuity import frames as fr
from continuity.cli.app import app
from continuity.context.compaction import create_checkpoint
from continuity.errors import ContinuityError
from continuity.maintenance.retain import keep_summaries, summary_thread_id
from continuity.retrieval.search import search
from continuity.store.jsonl import Store

DAY = 86_400_000


def _run(root: Path, *args: str) -> Result:
    return CliRunner().invoke(app, ["--store", str(root), *args])


OLD = int(time.time() * 1000) - 60 * DAY


def _old_thread(store: Store, tid: str, words: str) -> None:
    store.thread(tid).append(
        [
            fr.ThreadCreated(thread_id=tid, title=f"{tid} work", meta={"project": "/p"}),
            fr.message("user", f"please fix the {words} in parser.py"),
            fr.message("assistant", f"I fixed the {words} in parser.py and ran the tests"),
        ]
    )


@pytest.fixture
def root(tmp_path: Path) -> Path:
    store = Store(tmp_path / "s", create=True, durable=False, clock=lambda: OLD)
    _old_thread(store, "plain", "zeppelin overflow")
    _old_thread(store, "agent", "quokka deadlock")
    create_checkpoint(
        store.thread("agent"), 2, text="The agent fixed the quokka deadlock; tests pass."
    )
    store.thread("recent").append(fr.message("user", "a recent one", ts_ms=OLD + 59 * DAY))
    return store.root


def test_prune_keeps_each_summary_as_a_thread_and_deletes_the_rest(root: Path) -> None:
    dry = _run(root, "prune", "--older-than", "30d", "--keep-summaries", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "would keep 2 summaries first" in dry.output
    done = _run(root, "prune", "--older-than", "30d", "--keep-summaries", "--yes")
    assert done.exit_code == 0, done.output
    assert "as thread plain.summary" in done.output and "(made now)" in done.output
    assert "as thread agent.summary" in done.output and "(its newest checkpoint)" in done.output
    store = Store(root)
    assert set(store.threads()) == {"plain.summary", "agent.summary", "recent"}
    assert store.tombstone_of("plain") is not None
    (kept,) = [
        f for f in store.thread("agent.summary").tail(5) if isinstance(f, fr.MessageAppended)
    ]
    assert "The agent fixed the quokka deadlock" in kept.content[0].text  # type: ignore[union-attr]
    first = next(iter(store.thread("plain.summary").tail(5)))
    assert isinstance(first, fr.ThreadCreated)
    assert first.meta["summary_of"] == "plain" and first.meta["project"] == "/p"
    hits = search(store, "zeppelin", k=5)
    assert [h.thread_id for h in hits][:1] == ["plain.summary"]
    again = _run(root, "prune", "--older-than", "0d", "--keep-summaries", "--yes")
    assert again.exit_code == 0, again.output
    assert {"plain.summary", "agent.summary"} <= set(Store(root).threads())  # left alone


def test_a_second_run_after_a_crash_makes_no_second_summary(root: Path) -> None:
    store = Store(root)
    first = keep_summaries(store, ["plain"], now_ms=1)
    second = keep_summaries(store, ["plain"], now_ms=2)
    assert [k.summary_thread_id for k in first] == [k.summary_thread_id for k in second]
    assert second[0].to_seq == first[0].to_seq
    assert len(list(store.thread("plain.summary").read_lines())) == 2


def test_a_thread_in_the_way_is_refused_and_nothing_is_pruned(root: Path) -> None:
    store = Store(root)
    store.thread("plain.summary").append(fr.message("user", "mine"))
    with pytest.raises(ContinuityError, match="is not the summary of plain"):
        keep_summaries(store, ["plain"], now_ms=1)
    result = _run(root, "prune", "--older-than", "30d", "--keep-summaries", "--yes")
    assert result.exit_code == 1 and "nothing was pruned" in result.output
    assert Store(root).thread("plain").head() is not None


def test_a_long_id_gets_a_short_stable_summary_id() -> None:
    long = "x" * 200
    assert summary_thread_id(long) == summary_thread_id(long)
    assert summary_thread_id(long).endswith(".summary") and len(summary_thread_id(long)) < 128
