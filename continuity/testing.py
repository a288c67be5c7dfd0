"""The contract suites every backend must pass, shipped so that any backend can run them.

A backend's test module subclasses each suite and says only how to build its store; pytest
collects the subclasses (their names start with ``Test``) and runs every inherited test::

    from continuity.testing import ArtifactStoreContract, ContextContract, StoreContract

    class TestMyStore(StoreContract):
        def make_store(self, path, clock):
            return MyStore(path, clock=clock)  # path: a fresh folder it may use

    class TestMyStoreContext(ContextContract):
        def make_store(self, path, clock):
            return MyStore(path, clock=clock)

    class TestMyArtifacts(ArtifactStoreContract):
        def make(self, tmp_path):
            return MyArtifactStore(tmp_path)

- :class:`StoreContract`: appends, batches, seqs, ``expected_seq``, the chain, reads, tails,
  thread ids, the same stored lines as the in-memory reference model, and what the layers above
  ask of a backend (``read_lines_backwards``, ``decode``, the log as bytes when it keeps a cache
  folder, the job lock).
- :class:`ContextContract`: compile (with and without caches, budgets, anchors, recall),
  compaction and search give the same bundles and hits as on the reference model.
- :class:`ArtifactStoreContract`: content addressing, idempotent puts, verified reads.

The helpers the suites use (:class:`FixedClock`, :func:`msg`, :func:`stored_lines`,
:func:`verify_chain`, :func:`drive_reference_batches`, :func:`build_conversation`) are
public too. This module needs pytest: import it from tests only.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Final

import msgspec
import pytest

from continuity import frames as fr
from continuity.errors import (
    ArtifactNotFound,
    BadFrame,
    ContinuityError,
    CorruptFrame,
    InvalidThreadId,
    JobInFlight,
    SeqConflict,
    ThreadNotFound,
)
from continuity.store.artifacts import ArtifactStore, artifact_id
from continuity.store.base import MAX_THREAD_ID_LEN, BaseStore, Recovery, Thread
from continuity.store.memory import MemoryStore

__all__ = [
    "FIXED_MS",
    "INVALID_THREAD_IDS",
    "VALID_THREAD_IDS",
    "ArtifactStoreContract",
    "ContextContract",
    "FixedClock",
    "StoreContract",
    "build_conversation",
    "drive_reference_batches",
    "msg",
    "stored_lines",
    "verify_chain",
]

FIXED_MS: Final = 1_732_240_000_000
"""The fixed clock's default time (2024-11-22), well inside any sane range."""


class FixedClock:
    """A store clock that returns the same millisecond until told otherwise.

    ``step`` (default 0) is added after every call, for tests that want time to move
    deterministically. Two stores on two fixed clocks given the same frames write the same
    bytes.
    """

    def __init__(self, ms: int = FIXED_MS, step: int = 0) -> None:
        self.ms = ms
        self.step = step
        self.calls = 0

    def __call__(self) -> int:
        now = self.ms
        self.ms += self.step
        self.calls += 1
        return now

    def advance(self, ms: int) -> None:
        self.ms += ms


def msg(i: int | str, role: fr.Role = "user", text: str | None = None) -> fr.MessageAppended:
    """A message with a deterministic id (so two backends write the same bytes)."""
    return fr.message(role, text if text is not None else f"message {i}", message_id=f"m{i}")


def verify_chain(lines: list[bytes]) -> None:
    """Every stored line (no newline) is sealed, numbered 0, 1, 2, … and chained from genesis."""
    prev = fr.GENESIS_DIGEST
    for seq, line in enumerate(lines):
        sealed = fr.unseal(line)
        assert sealed is not None, f"line {seq} is not sealed"
        body, digest = sealed
        assert fr.chain(prev, body) == digest, f"chain breaks at seq {seq}"
        assert json.loads(line)["seq"] == seq
        prev = digest


def stored_lines(thread: Thread) -> list[bytes]:
    """A thread's stored lines (without newlines), oldest first."""
    return [line for _seq, line in thread.read_lines()]


INVALID_THREAD_IDS: Final = [
    "",
    ".",
    "..",
    ".hidden",
    "a/b",
    "/abs",
    "../escape",
    "a\\b",
    "a b",
    " a",
    "a\n",
    "a\x00b",
    "-dash-first",
    "é",
    "x" * (MAX_THREAD_ID_LEN + 1),
]
VALID_THREAD_IDS: Final = [
    "a",
    "_x",
    "0",
    "a.b",
    "a..b",
    "A-1:2@3+4=5_b.c",
    "x" * MAX_THREAD_ID_LEN,
]


def drive_reference_batches(store: BaseStore) -> None:
    """Batches of every shape on two threads (``a`` and ``b``): a caller's ``thread_created``,
    multi-frame batches, a tool call with an artifact, ``expected_seq``, jobs, non-ASCII."""
    a = store.thread("a")
    a.append([fr.ThreadCreated(title="A"), msg(1)])
    a.append([msg(2, "assistant"), msg(3)])
    a.append(
        fr.message(
            "assistant",
            content=[
                fr.ToolUseBlock(id="tu", name="bash", input={"cmd": "ls -la", "n": 3}),
                fr.ToolResultBlock(tool_use_id="tu", artifact_id="cd" * 32, preview="p", size=99),
            ],
            message_id="tool",
        )
    )
    a.append(fr.JobSpawned(job_id="j", kind="compact", params={"to_seq": 3}), expected_seq=5)
    store.thread("b").append(msg("only", text='日本語 ✓ "quoted" \\ back\nslash'))
    a.append(fr.JobEnded(job_id="j", status="succeeded", result={"ok": True}))


# --- the store ------------------------------------------------------------------------------


class StoreContract(ABC):
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


# --- artifacts ---------------------------------------------------------------------------------


class ArtifactStoreContract(ABC):
    """What every artifact backend must do; subclasses only say how to build one."""

    @abstractmethod
    def make(self, tmp_path: Path) -> ArtifactStore: ...

    def test_put_returns_the_content_id_and_get_returns_the_bytes(self, tmp_path: Path) -> None:
        store = self.make(tmp_path)
        for data in (b"", b"x", b"hello " * 10_000, bytes(range(256))):
            aid = store.put(data)
            assert aid == artifact_id(data)
            assert store.exists(aid)
            assert store.get(aid) == data
            store.verify(aid)

    def test_put_is_idempotent(self, tmp_path: Path) -> None:
        store = self.make(tmp_path)
        first = store.put(b"same")
        assert store.put(b"same") == first
        assert store.put(bytearray(b"same")) == first  # type: ignore[arg-type]
        assert list(store.ids()) == [first]
        assert store.get(first) == b"same"

    def test_different_content_different_id(self, tmp_path: Path) -> None:
        store = self.make(tmp_path)
        assert store.put(b"a") != store.put(b"b")

    def test_missing_artifact(self, tmp_path: Path) -> None:
        store = self.make(tmp_path)
        missing = artifact_id(b"never stored")
        assert not store.exists(missing)
        with pytest.raises(ArtifactNotFound) as err:
            store.get(missing)
        assert missing in str(err.value)
        assert isinstance(err.value, ContinuityError) and isinstance(err.value, KeyError)
        with pytest.raises(ArtifactNotFound):
            store.verify(missing)

    @pytest.mark.parametrize(
        "bad", ["", "abc", "AB" * 32, "../../etc/passwd", "g" * 64, "ab" * 32 + "\n"]
    )
    def test_bad_id(self, tmp_path: Path, bad: str) -> None:
        store = self.make(tmp_path)
        store.put(b"x")
        assert not store.exists(bad)
        with pytest.raises(ArtifactNotFound, match="not an artifact id"):
            store.get(bad)

    def test_ids_are_sorted(self, tmp_path: Path) -> None:
        store = self.make(tmp_path)
        assert list(store.ids()) == []
        ids = [store.put(f"blob {i}".encode()) for i in range(40)]
        assert list(store.ids()) == sorted(ids)
        assert ids != sorted(ids)  # the check above means something

    def test_stored_bytes_grow_with_what_is_stored(self, tmp_path: Path) -> None:
        store = self.make(tmp_path)
        assert store.stored_bytes() == 0
        store.put(b"x" * 1000)
        first = store.stored_bytes()
        assert first > 0
        store.put(b"x" * 1000)  # the same content: nothing more
        assert store.stored_bytes() == first
        store.put(bytes(range(256)) * 8)
        assert store.stored_bytes() > first


# --- compile, compaction and search ---------------------------------------------------------


def build_conversation(store: BaseStore, thread_id: str = "c", turns: int = 30) -> Thread:
    """A coding-agent thread with deterministic ids: prompts, tool calls and their results (one
    large output in an artifact), an observation, replies, a checkpoint written by hand and one
    by the default summarizer. The same calls on two stores give the same frames."""
    from continuity.context.compaction import create_checkpoint

    thread = store.thread(thread_id)
    thread.append(fr.ThreadCreated(title="a session", meta={"project": "/work/app"}))
    for i in range(turns):
        path = f"src/app/module_{i % 7}.py"
        output = f"FAILED tests/test_{i}.py::test_total - assert {i} == {i + 1}\n" * (1 + i % 3)
        result: fr.ToolResultBlock
        if i % 10 == 9:  # a large output, kept in an artifact with a preview
            whole = ("line of output\n" * 2000).encode()
            aid = store.artifacts.put(whole)
            result = fr.ToolResultBlock(
                tool_use_id=f"tu{i}", artifact_id=aid, preview="line of output", size=len(whole)
            )
        else:
            result = fr.ToolResultBlock(tool_use_id=f"tu{i}", content=output, is_error=i % 2 == 0)
        thread.append(
            [
                fr.message("user", f"Fix the total in {path}, turn {i}.", message_id=f"u{i}"),
                fr.message(
                    "assistant",
                    content=[
                        fr.TextBlock(text=f"I'll run the tests for {path}."),
                        fr.ToolUseBlock(
                            id=f"tu{i}", name="Bash", input={"command": f"pytest -q tests/t{i}"}
                        ),
                    ],
                    message_id=f"a{i}",
                ),
                fr.message("user", content=[result], message_id=f"r{i}"),
                fr.message("assistant", f"Fixed the off-by-one in {path}.", message_id=f"b{i}"),
            ]
        )
        if i == 4:
            thread.append(fr.ObservationRecorded(tool_use_id="tu4", text="pytest: 1 failure"))
        if i == 8:
            create_checkpoint(thread, thread.head().seq, text="Turns 0 to 8 fixed totals.")  # type: ignore[union-attr]
        if i == 16:
            create_checkpoint(thread, thread.head().seq)  # type: ignore[union-attr]
    return thread


class ContextContract(ABC):
    """Compile, compaction and search on a backend give exactly what they give on the in-memory
    reference model for the same frames: the same bundle bytes (with or without caches), the
    same cuts and summaries, the same hits and scores. A subclass only says how to build its
    store."""

    @abstractmethod
    def make_store(self, path: Path, clock: Callable[[], int]) -> BaseStore:
        """A new, empty store (``path`` is a fresh folder the backend may use)."""

    @pytest.fixture
    def pair(self, tmp_path: Path) -> tuple[Thread, Thread]:
        """The same conversation on this backend and on the reference model."""
        store = self.make_store(tmp_path / "store", FixedClock())
        reference = MemoryStore(clock=FixedClock())
        return build_conversation(store), build_conversation(reference)

    def test_the_conversation_is_stored_alike(self, pair: tuple[Thread, Thread]) -> None:
        thread, reference = pair
        assert stored_lines(thread) == stored_lines(reference)

    @pytest.mark.parametrize("use_caches", [True, False])
    def test_compile_gives_the_reference_bundle(
        self, pair: tuple[Thread, Thread], use_caches: bool
    ) -> None:
        from continuity.context.compiler import compile_context

        thread, reference = pair
        head = reference.head()
        assert head is not None
        cases: list[tuple[int | str | None, fr.Limits]] = [
            (None, fr.Limits()),
            (None, fr.Limits(recent_messages=5, keep_tool_outputs=1)),
            (None, fr.Limits(budget_tokens=600)),
            (None, fr.Limits(budget_tokens=40)),  # not even the newest message fits
            (head.seq // 2, fr.Limits(max_summary_refs=1)),
            ("a12", fr.Limits(recent_messages=3)),
            (0, fr.Limits()),
        ]
        for anchor, limits in cases:
            got = compile_context(
                thread, anchor=anchor, limits=limits, log=False, use_caches=use_caches
            )
            want = compile_context(reference, anchor=anchor, limits=limits, log=False)
            assert got.bundle_bytes() == want.bundle_bytes(), (anchor, limits)
            assert got.decision == want.decision

    def test_logged_compiles_append_the_reference_decision(
        self, pair: tuple[Thread, Thread]
    ) -> None:
        from continuity.context.compiler import compile_context

        thread, reference = pair
        for recall in (None, "pytest total module_3"):
            got = compile_context(thread, recall=recall)
            want = compile_context(reference, recall=recall)
            assert got.logged and want.logged
            assert got.bundle_bytes() == want.bundle_bytes()
            assert got.decision == want.decision
            assert thread.store.artifacts.get(got.bundle_id) == got.bundle_bytes()
        assert stored_lines(thread) == stored_lines(reference)

    def test_compaction_makes_the_reference_checkpoints(self, pair: tuple[Thread, Thread]) -> None:
        from continuity.context.compaction import StrideMessages, TokenThreshold, run_compaction

        thread, reference = pair
        for rule in (TokenThreshold(300), StrideMessages(7)):
            got = run_compaction(thread, rule)
            want = run_compaction(reference, rule)
            assert (got.status, got.planned) == (want.status, want.planned)
            assert got.status == "succeeded" and got.planned, rule
            strip = {"digest": ""}
            assert [msgspec.structs.replace(c, **strip) for c in got.checkpoints] == [
                msgspec.structs.replace(c, **strip) for c in want.checkpoints
            ]
            for c in got.checkpoints:
                data = thread.store.artifacts.get(c.summary_artifact_id)
                assert data == reference.store.artifacts.get(c.summary_artifact_id)

    @pytest.mark.parametrize("use_caches", [True, False])
    def test_search_prefix_gives_the_reference_hits(
        self, pair: tuple[Thread, Thread], use_caches: bool
    ) -> None:
        from continuity.retrieval import search_prefix

        thread, reference = pair
        for query, max_seq in (("pytest module_3", 10**9), ("off-by-one total", 40), ("fix", 5)):
            got = search_prefix(thread, query, max_seq=max_seq, k=5, use_caches=use_caches)
            want = search_prefix(reference, query, max_seq=max_seq, k=5)
            assert got == want, query
            assert want, f"{query!r} finds nothing: the comparison would prove nothing"

    def test_search_gives_the_reference_hits(self, pair: tuple[Thread, Thread]) -> None:
        from continuity.retrieval import search

        thread, reference = pair
        for query in ("pytest module_3", "assert total", "line of output"):
            for project in (None, "/work/app", "/elsewhere"):
                got = search(thread.store, query, project=project, k=7)
                want = search(reference.store, query, project=project, k=7)
                assert got == want, (query, project)
                assert bool(want) == (project != "/elsewhere"), (query, project)

    def test_unknown_threads_are_refused_alike(self, pair: tuple[Thread, Thread]) -> None:
        from continuity.context.compiler import compile_context
        from continuity.retrieval import search_prefix

        thread, _reference = pair
        with pytest.raises(ThreadNotFound):
            compile_context(thread.store, "nobody")
        with pytest.raises(ThreadNotFound):
            search_prefix(thread.store, "nobody", "pytest", max_seq=5, k=3)
