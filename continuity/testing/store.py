"""StoreContract: what every backend of the store must do."""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import msgspec
import pytest

from continuity import frames as fr
from continuity.errors import (
    BadFrame,
    CorruptFrame,
    InvalidThreadId,
    JobInFlight,
    SeqConflict,
    ThreadNotFound,
)
from continuity.store.base import BaseStore, Recovery, Thread
from continuity.store.memory import MemoryStore
from continuity.testing.forget import DeletionContract
from continuity.testing.support import (
    FIXED_MS,
    INVALID_THREAD_IDS,
    VALID_THREAD_IDS,
    FixedClock,
    drive_reference_batches,
    msg,
    stored_lines,
    verify_chain,
)

__all__ = ["StoreContract"]


_B = TypeVar("_B", bound=fr.Block)


def _forced(block: _B, field: str, value: object) -> _B:
    """``block`` with ``field`` set to ``value`` past its own checks (what a bug or a careless
    subclass could produce): the store must still refuse to seal it."""
    msgspec.structs.force_setattr(block, field, value)
    return block


class StoreContract(DeletionContract, ABC):
    """Behaviour every backend must share. A subclass only says how to build its store."""

    @abstractmethod
    def make_store(self, path: Path, clock: Callable[[], int]) -> BaseStore:
        """A new, empty store (``path`` is a fresh folder the backend may use)."""

    @pytest.fixture
    def clock(self) -> FixedClock:
        return FixedClock()

    @pytest.fixture
    def store(self, tmp_path: Path, clock: FixedClock) -> BaseStore:
        return self.make_store(tmp_path / "store", clock)

    # -- creating threads --

    def test_first_append_creates_the_thread_with_thread_created_at_seq_0(
        self, store: BaseStore
    ) -> None:
        t = store.thread("t1")
        assert not t.exists() and t.head() is None
        assert t.append(msg(1)) == range(1, 2)
        frames = list(t.read())
        assert [f.seq for f in frames] == [0, 1]
        created, first = frames
        assert created == fr.ThreadCreated(
            seq=0, ts_ms=FIXED_MS, more=True, thread_id="t1", digest=created.digest
        )
        assert isinstance(first, fr.MessageAppended) and first.message_id == "m1"
        assert t.exists()
        assert store.threads() == ["t1"]

    def test_caller_given_thread_created_is_seq_0(self, store: BaseStore) -> None:
        t = store.thread("t1")
        given = fr.ThreadCreated(title="My thread", meta={"k": "v"})
        assert t.append([given, msg(1)]) == range(0, 2)
        created = next(t.read())
        assert isinstance(created, fr.ThreadCreated)
        assert (created.seq, created.thread_id, created.title, created.meta) == (
            0,
            "t1",
            "My thread",
            {"k": "v"},
        )
        assert [f.seq for f in t.read()] == [0, 1]
        alone = store.thread("t2")
        assert alone.append(fr.ThreadCreated(thread_id="t2")) == range(0, 1)
        assert [type(f) for f in alone.read()] == [fr.ThreadCreated]

    def test_thread_created_naming_another_thread_is_refused(self, store: BaseStore) -> None:
        t = store.thread("t1")
        with pytest.raises(BadFrame, match="names thread"):
            t.append(fr.ThreadCreated(thread_id="other"))
        assert not t.exists() and store.threads() == []

    def test_thread_created_after_seq_0_is_refused(self, store: BaseStore) -> None:
        t = store.thread("t1")
        t.append(msg(1))
        before = stored_lines(t)
        with pytest.raises(BadFrame, match="thread_created"):
            t.append(fr.ThreadCreated())
        with pytest.raises(BadFrame, match="thread_created"):
            t.append([msg(2), fr.ThreadCreated()])
        new = store.thread("t2")
        with pytest.raises(BadFrame, match="thread_created"):
            new.append([msg(1), fr.ThreadCreated()])
        with pytest.raises(BadFrame, match="thread_created"):
            new.append([fr.ThreadCreated(), fr.ThreadCreated()])
        assert stored_lines(t) == before
        assert not new.exists() and store.threads() == ["t1"]

    # -- appending --

    def test_append_returns_the_seqs_of_the_callers_frames(self, store: BaseStore) -> None:
        t = store.thread("t")
        assert t.append([msg(1), msg(2), msg(3)]) == range(1, 4)
        assert t.append(msg(4)) == range(4, 5)
        assert t.append(iter([msg(5), msg(6)])) == range(5, 7)
        assert t.append(msg(i) for i in range(7, 17)) == range(7, 17)
        frames = list(t.read())
        assert [f.seq for f in frames] == list(range(17))
        assert [f.message_id for f in frames[1:] if isinstance(f, fr.MessageAppended)] == [
            f"m{i}" for i in range(1, 17)
        ]
        head = t.head()
        assert head is not None and head.seq == 16 and head.next_seq == 17

    def test_batches_mark_every_frame_but_the_last_with_more(self, store: BaseStore) -> None:
        t = store.thread("t")
        t.append([msg(1), msg(2), msg(3)])
        t.append(msg(4))
        assert [f.more for f in t.read()] == [True, True, True, False, False]

    def test_empty_batch_is_refused(self, store: BaseStore) -> None:
        t = store.thread("t")
        with pytest.raises(BadFrame, match="empty"):
            t.append([])
        with pytest.raises(BadFrame, match="empty"):
            t.append(iter(()))
        assert not t.exists() and store.threads() == []

    def test_digest_and_more_are_assigned_by_the_store(self, store: BaseStore) -> None:
        t = store.thread("t")
        with pytest.raises(BadFrame, match="assigned by the store"):
            t.append(msgspec.structs.replace(msg(1), digest="00" * 32))
        with pytest.raises(BadFrame, match="assigned by the store"):
            t.append([msg(1), msgspec.structs.replace(msg(2), more=True)])
        assert not t.exists()

    @pytest.mark.parametrize(
        ("make", "field"),
        [
            # built as Structs: `message()` refuses these itself; a Struct checks nothing
            (
                lambda: fr.MessageAppended(
                    role=cast(Any, "tool"), content=[fr.TextBlock(text="x")]
                ),
                "$.role",
            ),
            (
                lambda: fr.MessageAppended(role=cast(Any, None), content=[fr.TextBlock(text="x")]),
                "$.role",
            ),
            # blocks check their fields when made; one forced past that is still refused
            (
                lambda: fr.message(
                    "assistant",
                    content=[_forced(fr.ToolUseBlock(id="1", name="Bash"), "input", "ls")],
                ),
                "$.content[0].input",
            ),
            (
                lambda: fr.message(
                    "user", content=[_forced(fr.ToolResultBlock(tool_use_id="1"), "content", None)]
                ),
                "$.content[0].content",
            ),
            (
                lambda: fr.MessageAppended(
                    role="user", content=[_forced(fr.TextBlock(text="x"), "text", 7)]
                ),
                "$.content[0].text",
            ),
        ],
    )
    def test_a_frame_a_reader_would_refuse_is_never_sealed(
        self, store: BaseStore, make: Callable[[], fr.Frame], field: str
    ) -> None:
        t = store.thread("t")
        t.append(msg(1))
        head = t.head()
        with pytest.raises(BadFrame, match=rf"frame 1 of the batch .*{re.escape(field)}"):
            t.append([msg(2), make()])
        assert t.head() == head  # all or nothing: the good frame of the batch is not written
        assert [f.seq for f in t.read()] == [0, 1]  # and the thread still reads
        with pytest.raises(BadFrame, match="frame 0 of the batch"):
            store.thread("new").append(make())
        assert not store.thread("new").exists()

    def test_content_given_as_dicts_becomes_blocks(self, store: BaseStore) -> None:
        t = store.thread("t")
        as_dicts = fr.message("user", content=[{"type": "text", "text": "abcdefgh"}])  # type: ignore[list-item]
        as_blocks = fr.message("user", content=[fr.TextBlock(text="abcdefgh")])
        assert as_dicts.content == as_blocks.content and as_dicts.tokens == as_blocks.tokens
        raw = fr.MessageAppended(role="user", content=[{"type": "text", "text": "abcdefgh"}])  # type: ignore[list-item]
        t.append(raw)
        (stored,) = t.read(from_seq=1)
        assert isinstance(stored, fr.MessageAppended)
        assert stored.content == [fr.TextBlock(text="abcdefgh")] and stored.tokens == 6
        with pytest.raises(BadFrame, match="content"):
            t.append(fr.MessageAppended(role="user", content=[{"type": "nope"}]))  # type: ignore[list-item]

    def test_the_redactor_rewrites_frames_before_they_are_sealed(self, store: BaseStore) -> None:
        def hide(frame: fr.Frame) -> fr.Frame:
            if isinstance(frame, fr.MessageAppended):
                return fr.message(frame.role, "[hidden]", message_id=frame.message_id)
            return frame

        store.redactor = hide
        t = store.thread("t")
        t.append(fr.message("user", "my key is sk-secret", message_id="m1"))
        (stored,) = t.read(from_seq=1)
        assert isinstance(stored, fr.MessageAppended)
        assert stored.content == [fr.TextBlock(text="[hidden]")] and stored.message_id == "m1"
        assert all(b"sk-secret" not in line for _, line in t.read_lines())

    def test_messages_are_normalized_and_timestamped(
        self, store: BaseStore, clock: FixedClock
    ) -> None:
        t = store.thread("t")
        t.append(fr.MessageAppended(role="user", content=[fr.TextBlock(text="abcdefgh")]))
        clock.advance(5)
        t.append(fr.message("assistant", "x", message_id="given", ts_ms=42))
        t.append(msg(3))
        _, first, second, third = t.read()
        assert isinstance(first, fr.MessageAppended) and len(first.message_id) == 32
        assert first.tokens == 6 and first.ts_ms == FIXED_MS
        assert second.ts_ms == 42  # an imported frame keeps its own time
        assert third.ts_ms == FIXED_MS + 5

    def test_expected_seq(self, store: BaseStore) -> None:
        t = store.thread("t")
        # A new thread: the caller's first frame gets seq 1 (the store adds thread_created).
        with pytest.raises(SeqConflict) as err:
            t.append(msg(1), expected_seq=0)
        assert (err.value.thread_id, err.value.expected, err.value.actual) == ("t", 0, 1)
        assert not t.exists() and store.threads() == []
        assert t.append(msg(1), expected_seq=1) == range(1, 2)
        assert t.append([msg(2), msg(3)], expected_seq=2) == range(2, 4)
        before = stored_lines(t)
        for wrong in (0, 3, 5, 100):
            with pytest.raises(SeqConflict) as err:
                t.append([msg(9), msg(10)], expected_seq=wrong)
            assert (err.value.expected, err.value.actual) == (wrong, 4)
        assert stored_lines(t) == before
        head = t.head()
        assert head is not None and head.seq == 3
        # With a caller-given thread_created, the batch starts at seq 0.
        u = store.thread("u")
        with pytest.raises(SeqConflict):
            u.append([fr.ThreadCreated(), msg(1)], expected_seq=1)
        assert u.append([fr.ThreadCreated(), msg(1)], expected_seq=0) == range(0, 2)

    def test_frames_that_carry_a_seq_must_get_that_seq(self, store: BaseStore) -> None:
        t = store.thread("t")
        assert t.append(msgspec.structs.replace(msg(1), seq=1)) == range(1, 2)
        assert t.append([msgspec.structs.replace(msg(2), seq=2), msg(3)]) == range(2, 4)
        before = stored_lines(t)
        with pytest.raises(SeqConflict) as err:
            t.append(msgspec.structs.replace(msg(4), seq=7))
        assert (err.value.expected, err.value.actual) == (7, 4)
        with pytest.raises(SeqConflict):  # a later frame of the batch is wrong: nothing lands
            t.append([msg(4), msgspec.structs.replace(msg(5), seq=4)])
        assert stored_lines(t) == before
        u = store.thread("u")
        with pytest.raises(SeqConflict):
            u.append(fr.ThreadCreated(seq=1))
        assert u.append(fr.ThreadCreated(seq=0)) == range(0, 1)

    def test_stored_lines_chain_from_genesis(self, store: BaseStore) -> None:
        t = store.thread("t")
        t.append([msg(i) for i in range(1, 6)])
        t.append(msg(6))
        lines = stored_lines(t)
        assert len(lines) == 7
        verify_chain(lines)
        head = t.head()
        assert head is not None and head.digest == json.loads(lines[-1])["digest"]
        assert [f.digest for f in t.read()] == [json.loads(line)["digest"] for line in lines]

    def test_threads_are_independent(self, store: BaseStore) -> None:
        a, b = store.thread("a"), store.thread("b")
        a.append([msg(1), msg(2)])
        b.append(msg(1))
        a.append(msg(3))
        assert [f.seq for f in a.read()] == [0, 1, 2, 3]
        assert [f.seq for f in b.read()] == [0, 1]
        created = next(b.read())
        assert isinstance(created, fr.ThreadCreated) and created.thread_id == "b"
        # Same frames in different threads chain differently (the thread id is in seq 0).
        assert stored_lines(a)[1] != stored_lines(b)[1]

    def test_a_new_handle_sees_the_same_thread(self, store: BaseStore) -> None:
        store.thread("t").append([msg(1), msg(2)])
        again = store.thread("t")
        assert [f.seq for f in again.read()] == [0, 1, 2]
        assert again.append(msg(3)) == range(3, 4)

    # -- reading --

    @pytest.fixture
    def ten(self, store: BaseStore) -> Thread:
        """Seqs 0..10: thread_created, ten messages, one checkpoint at seq 6, observation at 9."""
        t = store.thread("t")
        t.append([msg(i) for i in range(1, 6)])
        t.append(
            fr.CompactionCheckpointCreated(
                checkpoint_id="cp",
                cut_rule_id="r",
                summary_kind="cumulative_v1",
                summary_artifact_id="ab" * 32,
                from_seq=1,
                to_seq=5,
            )
        )
        t.append([msg(7), msg(8)])
        t.append(fr.ObservationRecorded(tool_use_id="x", text="obs"))
        t.append(msg(10))
        return t

    def test_read_ranges(self, ten: Thread) -> None:
        def seqs(**kw: object) -> list[int]:
            return [f.seq for f in ten.read(**kw)]  # type: ignore[arg-type]

        assert seqs() == list(range(11))
        assert seqs(from_seq=4) == list(range(4, 11))
        assert seqs(to_seq=3) == [0, 1, 2, 3]
        assert seqs(from_seq=3, to_seq=5) == [3, 4, 5]
        assert seqs(from_seq=5, to_seq=5) == [5]
        assert seqs(from_seq=10) == [10]
        assert seqs(from_seq=11) == []
        assert seqs(from_seq=500) == []
        assert seqs(from_seq=6, to_seq=3) == []
        assert seqs(from_seq=-3, to_seq=1) == [0, 1]
        assert seqs(to_seq=500) == list(range(11))
        assert seqs(limit=3) == [0, 1, 2]
        assert seqs(from_seq=9, limit=5) == [9, 10]
        assert seqs(limit=0) == []
        assert seqs(types=["message_appended"]) == [1, 2, 3, 4, 5, 7, 8, 10]
        assert seqs(types=("message_appended",), from_seq=3, limit=4) == [3, 4, 5, 7]
        assert seqs(types={"compaction_checkpoint_created", "observation_recorded"}) == [6, 9]
        assert seqs(types=["thread_created"], from_seq=1) == []
        assert seqs(types=[]) == []

    def test_read_lines_ranges(self, ten: Thread) -> None:
        assert [s for s, _ in ten.read_lines(from_seq=2, to_seq=4)] == [2, 3, 4]
        for seq, line in ten.read_lines(from_seq=7):
            assert json.loads(line)["seq"] == seq
        assert list(ten.read_lines(from_seq=4, to_seq=2)) == []

    def test_tail(self, ten: Thread) -> None:
        assert [f.seq for f in ten.tail(3)] == [8, 9, 10]
        assert [f.seq for f in ten.tail(1)] == [10]
        assert [f.seq for f in ten.tail(100)] == list(range(11))
        assert ten.tail(0) == [] and ten.tail(-1) == []
        assert [f.seq for f in ten.tail(2, types=["message_appended"])] == [8, 10]
        assert [f.seq for f in ten.tail(5, types=["compaction_checkpoint_created"])] == [6]
        assert [f.seq for f in ten.tail(3, types=["thread_created", "job_ended"])] == [0]
        assert ten.tail(3, types=["job_spawned"]) == []
        assert ten.tail(11) == list(ten.read())

    def test_head(self, ten: Thread, store: BaseStore) -> None:
        head = ten.head()
        assert head is not None
        assert head.seq == 10 and head.next_seq == 11
        assert head.digest == ten.tail(1)[0].digest
        assert store.thread("nobody").head() is None

    def test_reading_a_missing_thread_is_empty(self, store: BaseStore) -> None:
        t = store.thread("nobody")
        assert list(t.read()) == [] and list(t.read_lines()) == [] and t.tail(5) == []
        assert not t.exists()

    def test_threads_listing_and_existing_thread(self, store: BaseStore) -> None:
        assert store.threads() == []
        for tid in ("zeta", "alpha", "mid_1", "Alpha"):
            store.thread(tid).append(msg(1))
        store.thread("never-appended")
        assert store.threads() == ["Alpha", "alpha", "mid_1", "zeta"]
        assert store.existing_thread("alpha").id == "alpha"
        with pytest.raises(ThreadNotFound):
            store.existing_thread("never-appended")

    @pytest.mark.parametrize("thread_id", INVALID_THREAD_IDS)
    def test_invalid_thread_ids(self, store: BaseStore, thread_id: str) -> None:
        with pytest.raises(InvalidThreadId):
            store.thread(thread_id)
        with pytest.raises(InvalidThreadId):
            store.existing_thread(thread_id)

    @pytest.mark.parametrize("thread_id", VALID_THREAD_IDS)
    def test_valid_thread_ids(self, store: BaseStore, thread_id: str) -> None:
        store.thread(thread_id).append(msg(1))
        assert store.threads() == [thread_id]
        assert [f.seq for f in store.thread(thread_id).read()] == [0, 1]

    # -- agreement with the reference model --

    def test_lines_are_the_reference_models_byte_for_byte(self, tmp_path: Path) -> None:
        """The same batches on the same clock give the same stored lines as the in-memory
        reference model: a log can move between backends and verify the same."""
        store = self.make_store(tmp_path / "store", FixedClock())
        reference = MemoryStore(clock=FixedClock())
        for s in (store, reference):
            drive_reference_batches(s)
        assert store.threads() == reference.threads() == ["a", "b"]
        for tid in ("a", "b"):
            lines = stored_lines(reference.thread(tid))
            assert stored_lines(store.thread(tid)) == lines
            verify_chain(lines)
            assert store.thread(tid).head() == reference.thread(tid).head()
            assert list(store.thread(tid).read()) == list(reference.thread(tid).read())
            assert store.thread(tid).tail(3) == reference.thread(tid).tail(3)

    # -- what the layers above read --

    def test_read_lines_backwards_is_read_lines_reversed(self, ten: Thread) -> None:
        assert list(ten.read_lines_backwards()) == list(reversed(list(ten.read_lines())))
        assert list(ten.store.thread("nobody").read_lines_backwards()) == []

    def test_a_start_offset_is_only_a_hint(self, ten: Thread) -> None:
        want = list(ten.read_lines(from_seq=4, to_seq=6))
        for hint in (None, 0, 1, 10**9, -5):
            assert list(ten.read_lines(from_seq=4, to_seq=6, start_offset=hint)) == want

    def test_decode_names_the_frame_it_refuses(self, ten: Thread) -> None:
        seq, line = next(iter(ten.read_lines(from_seq=3, to_seq=3)))
        assert ten.decode(seq, line) == next(ten.read(from_seq=3, to_seq=3))
        bad = line.replace(b'"role":"user"', b'"role":"robot"')
        with pytest.raises(CorruptFrame) as err:
            ten.decode(seq, bad)
        assert (err.value.thread_id, err.value.seq) == (ten.id, 3)

    def test_a_store_with_a_cache_folder_gives_its_logs_as_bytes(self, ten: Thread) -> None:
        """What the file caches index: the committed lines, each ending in a newline, at the
        offsets ``offset_of`` gives."""
        if ten.store.cache_dir is None:
            pytest.skip("this store keeps no cache folder: its log need not be bytes")
        assert ten.store.thread("nobody").open_log() is None
        lines = stored_lines(ten)
        log = ten.open_log()
        assert log is not None
        with log:
            data = b"".join(line + b"\n" for line in lines)
            assert log.end == len(data) == log.size()
            assert log.pread(len(data), 0) == data
            offset = 0
            for seq, line in enumerate(lines):
                assert ten.offset_of(seq) == offset
                assert log.line_end(offset) == offset + len(line) + 1
                offset += len(line) + 1
        assert ten.offset_of(len(lines)) is None

    def test_the_job_lock_admits_one_holder_at_a_time(self, store: BaseStore) -> None:
        with store.job_lock("t", "compaction"):
            with pytest.raises(JobInFlight), store.job_lock("t", "compaction"):
                pass  # pragma: no cover - never entered
            with store.job_lock("t", "other"), store.job_lock("u", "compaction"):
                pass  # another job, another thread: not excluded
        with store.job_lock("t", "compaction"):  # released, even after a refusal
            pass

    def test_quarantined_lists_recoveries(self, store: BaseStore) -> None:
        store.thread("t").append(msg(1))
        assert all(isinstance(r, Recovery) for r in store.quarantined())
