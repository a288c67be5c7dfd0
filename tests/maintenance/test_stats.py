"""store_stats: counts and sizes, read from caches it brings up to date."""

from __future__ import annotations

import shutil
from pathlib import Path

from continuity import frames as fr
from continuity.maintenance.stats import StoreStats, store_stats
from continuity.store.base import BaseStore
from continuity.store.jsonl import Store
from continuity.store.memory import MemoryStore


def _fill(store: BaseStore, tid: str, n: int, aid: str) -> None:
    """``n`` batches of a user message, an assistant message and an observation; every third
    batch also gets a checkpoint."""
    thread = store.thread(tid)
    for i in range(n):
        batch: list[fr.Frame] = [
            fr.message("user", f"q{i}", message_id=f"{tid}-u{i}"),
            fr.message("assistant", f"a{i}", message_id=f"{tid}-a{i}"),
            fr.ObservationRecorded(tool_use_id=f"tu{i}", text="obs"),
        ]
        if i % 3 == 2:
            head = thread.head()
            assert head is not None
            batch.append(
                fr.CompactionCheckpointCreated(
                    checkpoint_id=f"cp{i}",
                    cut_rule_id="every_n",
                    summary_kind="cumulative_v1",
                    summary_artifact_id=aid,
                    from_seq=1,
                    to_seq=head.seq,
                )
            )
        thread.append(batch)


def _model_counts(model: MemoryStore) -> tuple[int, int, int, int]:
    frames = [f for tid in model.threads() for f in model.thread(tid).read()]
    return (
        len(model.threads()),
        len(frames),
        sum(isinstance(f, fr.MessageAppended) for f in frames),
        sum(isinstance(f, fr.CompactionCheckpointCreated) for f in frames),
    )


def _tree_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def test_an_empty_store(tmp_store: Store) -> None:
    assert store_stats(tmp_store) == StoreStats(0, 0, 0, 0, 0, 0, 0, 0, 0)


def test_counts_agree_with_the_model(tmp_store: Store, memory_store: MemoryStore) -> None:
    for store in (tmp_store, memory_store):
        aid = store.artifacts.put(b"a summary")
        store.artifacts.put(b"another blob")
        _fill(store, "a", 7, aid)
        _fill(store, "b", 2, aid)
    stats = store_stats(tmp_store)
    threads, frames, messages, checkpoints = _model_counts(memory_store)
    assert (stats.threads, stats.frames, stats.messages, stats.checkpoints) == (
        threads,
        frames,
        messages,
        checkpoints,
    )
    assert (threads, frames, messages, checkpoints) == (2, 1 + 23 + 1 + 6, 18, 2)
    assert (
        stats.log_bytes
        == sum(tmp_store.thread(t).path.stat().st_size for t in ("a", "b"))
        == sum(len(line) + 1 for t in ("a", "b") for _, line in memory_store.thread(t).read_lines())
    )
    assert stats.artifacts == 2
    assert stats.artifact_bytes == _tree_bytes(tmp_store.root / "artifacts") > 0
    assert stats.cache_bytes == _tree_bytes(tmp_store.cache_dir) > 0
    assert stats.quarantined == 0


def test_counts_follow_appends_and_survive_a_deleted_cache(tmp_store: Store) -> None:
    aid = tmp_store.artifacts.put(b"s")
    _fill(tmp_store, "a", 3, aid)
    first = store_stats(tmp_store)
    _fill(tmp_store, "a", 3, aid)
    _fill(tmp_store, "c", 1, aid)
    second = store_stats(tmp_store)
    assert second.threads == first.threads + 1
    assert second.frames == first.frames + (3 * 3 + 1) + (1 + 3)
    assert second.messages == first.messages + 6 + 2
    assert second.checkpoints == first.checkpoints + 1
    shutil.rmtree(tmp_store.cache_dir)
    assert store_stats(tmp_store) == second


def test_a_torn_tail_is_not_counted_and_a_recovery_is(tmp_store: Store) -> None:
    aid = tmp_store.artifacts.put(b"s")
    _fill(tmp_store, "a", 2, aid)
    before = store_stats(tmp_store)
    with open(tmp_store.thread("a").path, "ab") as f:
        f.write(b'{"type":"message_appended","se')
    torn = store_stats(tmp_store)
    assert (torn.frames, torn.messages, torn.quarantined) == (before.frames, before.messages, 0)
    tmp_store.thread("a").append(fr.message("user", "after", message_id="after"))
    after = store_stats(tmp_store)
    assert (after.frames, after.messages) == (before.frames + 1, before.messages + 1)
    assert after.quarantined == 1


def test_a_thread_with_only_a_torn_first_batch_is_not_counted(tmp_store: Store) -> None:
    (tmp_store.root / "threads" / "ghost.jsonl").write_bytes(b'{"type":"thread_cre')
    stats = store_stats(tmp_store)
    assert (stats.threads, stats.frames) == (0, 0)
