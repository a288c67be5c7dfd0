"""The thread generator behind the benchmarks (``tools/gen_thread.py``).

Seeds are fixed, so every run checks the same streams. Counting rule under test: a new thread's
``n_frames`` includes its ``thread_created`` frame (seq 0); a continuation adds exactly
``n_frames`` after the head.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import msgspec
import pytest

from continuity import frames as fr
from continuity.store.artifacts import MemoryArtifactStore
from continuity.store.jsonl import Store
from continuity.testing import FIXED_MS

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def gen() -> ModuleType:
    # ``tools`` is a folder of the checkout, not an installed package.
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return importlib.import_module("tools.gen_thread")


def _encoded(frames: list[fr.Frame]) -> list[bytes]:
    return [fr.encode_body(f) for f in frames]


def _store(path: Path) -> Store:
    return Store(path, create=True, durable=False, clock=lambda: FIXED_MS)


def _log(store: Store, thread_id: str) -> bytes:
    return (store.root / "threads" / f"{thread_id}.jsonl").read_bytes()


@pytest.mark.slow
def test_same_seed_same_frames(gen: ModuleType) -> None:
    a = _encoded(list(gen.generate_frames(2_000, seed=7, checkpoint_every=100)))
    b = _encoded(list(gen.generate_frames(2_000, seed=7, checkpoint_every=100)))
    c = _encoded(list(gen.generate_frames(2_000, seed=8, checkpoint_every=100)))
    assert a == b
    assert a != c
    # A shorter stream is a prefix of a longer one.
    assert _encoded(list(gen.generate_frames(1_000, seed=7, checkpoint_every=100))) == a[:1_000]


@pytest.mark.slow
def test_same_seed_byte_identical_logs_and_artifacts(gen: ModuleType, tmp_path: Path) -> None:
    logs = []
    for name in ("one", "two"):
        store = _store(tmp_path / name)
        gen.write_thread(
            store, "t", 2_000, seed=3, batch_size=300, checkpoint_every=80, artifact_threshold=4_000
        )
        logs.append((_log(store, "t"), list(store.artifacts.ids())))
    assert logs[0] == logs[1]
    assert logs[0][1], "expected some artifacts"


def test_tool_results_follow_their_tool_use(gen: ModuleType) -> None:
    pending: dict[str, int] = {}  # tool_use id -> seq of its assistant message
    answered: set[str] = set()
    names: set[str] = set()
    errors = 0
    for frame in gen.generate_frames(5_000, seed=11):
        if not isinstance(frame, fr.MessageAppended):
            continue
        for block in frame.content:
            if isinstance(block, fr.ToolUseBlock):
                assert frame.role == "assistant"
                assert block.id not in pending and block.id not in answered
                pending[block.id] = frame.seq
                names.add(block.name)
            elif isinstance(block, fr.ToolResultBlock):
                assert frame.role == "user"
                assert block.tool_use_id in pending, "tool_result before (or without) its tool_use"
                assert frame.seq > pending.pop(block.tool_use_id)
                answered.add(block.tool_use_id)
                errors += block.is_error
    assert len(pending) <= 1, "only the stream's last tool_use may still await its result"
    assert names == {"Bash", "Read", "Edit", "Grep", "Write"}
    assert 0 < errors < len(answered) / 5


def test_large_outputs_become_artifacts_with_previews(gen: ModuleType, tmp_path: Path) -> None:
    store = _store(tmp_path / "s")
    threshold = 4_000
    gen.write_thread(store, "t", 1_500, seed=5, checkpoint_every=100, artifact_threshold=threshold)
    stored = inline = checkpoints = 0
    for frame in store.thread("t").read():
        if isinstance(frame, fr.CompactionCheckpointCreated):
            checkpoints += 1
            assert store.artifacts.get(frame.summary_artifact_id).startswith(b"Cumulative")
            continue
        if not isinstance(frame, fr.MessageAppended):
            continue
        for block in frame.content:
            if not isinstance(block, fr.ToolResultBlock):
                continue
            if block.artifact_id is None:
                inline += 1
                assert len(block.content.encode()) == block.size <= threshold
            else:
                stored += 1
                data = store.artifacts.get(block.artifact_id)
                assert block.content == ""
                assert block.size == len(data) > threshold
                assert block.preview and data.decode().startswith(block.preview)
                assert len(block.preview) < len(data)
    assert stored > 0 and inline > stored and checkpoints > 0


def test_no_store_keeps_outputs_inline(gen: ModuleType) -> None:
    frames = list(gen.generate_frames(2_000, seed=5, checkpoint_every=100))
    blocks = [
        b
        for f in frames
        if isinstance(f, fr.MessageAppended)
        for b in f.content
        if isinstance(b, fr.ToolResultBlock)
    ]
    assert all(b.artifact_id is None for b in blocks)
    assert any(len(b.content) > gen.DEFAULT_ARTIFACT_THRESHOLD for b in blocks)
    summaries = [f for f in frames if isinstance(f, fr.CompactionCheckpointCreated)]
    assert summaries and all(len(f.summary_artifact_id) == 64 for f in summaries)


def test_n_frames_requested_n_written(gen: ModuleType, tmp_path: Path) -> None:
    store = _store(tmp_path / "s")
    stats = gen.write_thread(store, "t", 1_234, seed=1, batch_size=500)
    thread = store.thread("t")
    head = thread.head()
    assert stats.frames == 1_234 and head is not None and head.seq == 1_233
    frames = list(thread.read())
    assert isinstance(frames[0], fr.ThreadCreated) and frames[0].thread_id == "t"
    # A continuation adds exactly the frames asked for, after the head, later in time.
    more = gen.write_thread(store, "t", 500, seed=1)
    head = thread.head()
    assert more.frames == 500 and more.first_seq == 1_234 and head is not None
    assert head.seq == 1_733
    frames = list(thread.read())
    assert [f.seq for f in frames] == list(range(1_734))
    assert sum(isinstance(f, fr.ThreadCreated) for f in frames) == 1
    ts = [f.ts_ms for f in frames]
    assert ts == sorted(ts)
    ids = [f.message_id for f in frames if isinstance(f, fr.MessageAppended)]
    assert len(set(ids)) == len(ids)


def test_checkpoints_point_back_at_messages(gen: ModuleType) -> None:
    frames = list(gen.generate_frames(4_000, seed=2, checkpoint_every=100))
    by_seq = {f.seq: f for f in frames}
    previous: fr.CompactionCheckpointCreated | None = None
    for f in frames:
        if isinstance(f, fr.CompactionCheckpointCreated):
            target = by_seq[f.to_seq]
            assert isinstance(target, fr.MessageAppended)
            assert f.to_message_id == target.message_id and f.to_seq < f.seq
            assert f.summary_kind == "cumulative_v1" and f.from_seq == 0
            if previous is not None:
                assert f.base_checkpoint_id == previous.checkpoint_id
                assert f.to_seq > previous.to_seq
            previous = f
    assert previous is not None
    assert any(isinstance(f, fr.ObservationRecorded) for f in frames)
    # Every frame the generator yields survives a round trip through the schema.
    for f in frames[:200]:
        assert msgspec.json.decode(fr.encode_body(f), type=fr.Frame) == f


def test_memory_artifacts_are_accepted(gen: ModuleType) -> None:
    artifacts = MemoryArtifactStore()
    frames = list(gen.generate_frames(3_000, seed=9, artifacts=artifacts, checkpoint_every=100))
    assert len(frames) == 3_000
    assert any(True for _ in artifacts.ids())
