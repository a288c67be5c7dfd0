"""The JSONL store and its caches against the in-memory reference model, driven by Hypothesis.

A :class:`RuleBasedStateMachine` applies the same random operations to a JSONL
:class:`~continuity.store.jsonl.Store` and a :class:`~continuity.store.memory.MemoryStore`
(both on a fixed clock, so they write the same bytes): appends of single frames and mixed
batches, optimistic appends with a right and a wrong ``expected_seq``, invalid batches,
reopening the JSONL store, crashes that leave a torn tail, deleting the cache folder, refreshing
and rebuilding caches and verifying the store. After every step the two stores must hold the
same threads and lines, and the refreshed caches must agree with a computation over the model's
frames.
"""

from __future__ import annotations

import base64
import itertools
import shutil
import struct
import tempfile
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
)
from msgspec.structs import replace

from continuity import frames as fr
from continuity.caches.thread_index import CheckpointEntry, ThreadIndex, rebuild_all
from continuity.errors import BadFrame, SeqConflict
from continuity.maintenance.verify import verify_store
from continuity.store.base import seal_batch
from continuity.store.jsonl import Store
from continuity.store.memory import MemoryStore

pytestmark = pytest.mark.slow

FIXED_MS = 1_732_240_000_000
THREADS = ("t1", "t2", "main.x")
CACHE_FILES = (
    "offsets.v1.u64",
    "messages.v1.bin",
    "checkpoints.v1.jsonl",
    "checkpoints.v1.sel",
    "checkpoints.v1.other",
    "manifest.v1.json",
)
KINDS = ("text", "tool", "tool_artifact", "observation", "checkpoint", "job", "decision")

ROLE_CODES = {"user": 1, "assistant": 2, "system": 3}  # the documented record format
threads = st.sampled_from(THREADS)
texts = st.text(max_size=24)
frame_specs = st.lists(
    st.tuples(st.sampled_from(KINDS), texts, st.integers(0, 2**16)), min_size=1, max_size=6
)
timestamps = st.one_of(st.just(0), st.integers(1, 2**41))


def _clock() -> int:
    return FIXED_MS


class StoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="continuity-stateful-"))
        self.path = self.tmp / "store"
        self.jsonl = Store(self.path, create=True, durable=False, clock=_clock)
        self.model = MemoryStore(clock=_clock)
        self.counter = 0
        # thread -> (committed size when the crash happened, bytes it left)
        self.torn: dict[str, tuple[int, bytes]] = {}
        self.recovered = 0  # recoveries reported by the current Store object
        self.quarantined: list[tuple[str, int, bytes]] = []  # what should be in quarantine/
        # thread -> frames the caches held at their last refresh (None: no caches)
        self.indexed: dict[str, int | None] = {}

    def teardown(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- building frames -----------------------------------------------------------------

    def _next_id(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def _blob(self, data: bytes) -> str:
        aid = self.jsonl.artifacts.put(data)
        assert self.model.artifacts.put(data) == aid
        return aid

    def _base(self, tid: str, with_created: bool) -> int:
        """The seq the first frame of a batch for ``tid`` gets."""
        head = self.model.thread(tid).head()
        if head is not None:
            return head.next_seq
        return 0 if with_created else 1

    def _frames(
        self, tid: str, specs: list[tuple[str, str, int]], with_created: bool, ts_ms: int
    ) -> list[fr.Frame]:
        out: list[fr.Frame] = []
        new = self.model.thread(tid).head() is None
        if new and with_created:
            out.append(fr.ThreadCreated(title="a thread", meta={"k": "v"}, ts_ms=ts_ms))
        base = self._base(tid, with_created)
        for kind, text, n in specs:
            seq = base + len(out)  # the seq this frame will get
            roles: tuple[fr.Role, ...] = ("user", "assistant", "system")
            if kind == "text":
                out.append(
                    fr.message(roles[n % 3], text, message_id=self._next_id("m"), ts_ms=ts_ms)
                )
            elif kind in ("tool", "tool_artifact"):
                tu = self._next_id("tu")
                use = fr.ToolUseBlock(id=tu, name="bash", input={"cmd": text, "n": n})
                if kind == "tool":
                    result = fr.ToolResultBlock(tool_use_id=tu, content=text, is_error=n % 2 == 1)
                else:
                    whole = (text * 50).encode() or b"empty output"
                    result = fr.ToolResultBlock(
                        tool_use_id=tu,
                        artifact_id=self._blob(whole),
                        preview=text[:5],
                        size=len(whole),
                    )
                out.append(fr.message("assistant", content=[use], message_id=self._next_id("m")))
                out.append(fr.message("user", content=[result], message_id=self._next_id("m")))
            elif kind == "observation":
                out.append(
                    fr.ObservationRecorded(
                        tool_use_id=f"tu{n}", text=text, source_seq=max(seq - 1, 0), ts_ms=ts_ms
                    )
                )
            elif kind == "checkpoint":
                to_seq = n % seq  # seq >= 1: thread_created holds seq 0
                out.append(
                    fr.CompactionCheckpointCreated(
                        checkpoint_id=self._next_id("cp"),
                        cut_rule_id="every_n",
                        summary_kind="cumulative_v1" if n % 4 else "other_v1",
                        summary_artifact_id=self._blob(f"summary up to {to_seq}: {text}".encode()),
                        from_seq=min(1, to_seq),
                        to_seq=to_seq,
                        base_checkpoint_id=None if n % 2 else "cp0",
                    )
                )
            elif kind == "job":
                job = self._next_id("job")
                out.append(fr.JobSpawned(job_id=job, kind="compact", params={"text": text}))
                out.append(fr.JobEnded(job_id=job, status="succeeded", result={"n": n}))
            else:
                out.append(
                    fr.ContextSelectionDecided(
                        compiler_id="test",
                        strategy="recent_messages_v1",
                        anchor_seq=max(seq - 1, 0),
                        bundle_artifact_id=self._blob(f"bundle {text}".encode()),
                        reasons=[text],
                    )
                )
        return out

    # -- applying an append to both stores -----------------------------------------------

    def _both(
        self, tid: str, frames: Any, expected_seq: int | None
    ) -> tuple[range | None, Exception | None]:
        """Append to the model and the JSONL store; both must agree on the outcome."""
        results: list[tuple[range | None, Exception | None]] = []
        for store in (self.model, self.jsonl):
            try:
                results.append((store.thread(tid).append(frames, expected_seq=expected_seq), None))
            except (BadFrame, SeqConflict) as exc:
                results.append((None, exc))
        (got_m, exc_m), (got_j, exc_j) = results
        assert got_j == got_m
        assert type(exc_j) is type(exc_m), (exc_m, exc_j)
        if isinstance(exc_m, SeqConflict):
            assert isinstance(exc_j, SeqConflict)
            assert (exc_j.expected, exc_j.actual) == (exc_m.expected, exc_m.actual)
        return got_m, exc_m

    def _after_append_attempt(self, tid: str, reached_the_log: bool) -> None:
        """An append that got as far as the lock quarantined the thread's torn tail."""
        if not reached_the_log or tid not in self.torn:
            assert len(self.jsonl.recoveries) == self.recovered
            return
        committed, torn = self.torn.pop(tid)
        assert len(self.jsonl.recoveries) == self.recovered + 1
        rec = self.jsonl.recoveries[-1]
        assert (rec.thread_id, rec.offset, rec.length) == (tid, committed, len(torn))
        self.recovered += 1
        self.quarantined.append((tid, committed, torn))

    # -- rules -----------------------------------------------------------------------------

    @rule(tid=threads, text=texts, role=st.sampled_from(["user", "assistant", "system"]))
    def append_one_message(self, tid: str, text: str, role: fr.Role) -> None:
        base = self._base(tid, False)
        frame = fr.message(role, text, message_id=self._next_id("m"))
        got, exc = self._both(tid, frame, None)
        assert exc is None and got == range(base, base + 1)
        self._after_append_attempt(tid, True)

    @rule(
        tid=threads,
        specs=frame_specs,
        with_created=st.booleans(),
        ts_ms=timestamps,
        expect=st.sampled_from(["none", "right", "wrong"]),
        off_by=st.sampled_from([-3, -2, -1, 1, 2, 3]),
    )
    def append_batch(
        self,
        tid: str,
        specs: list[tuple[str, str, int]],
        with_created: bool,
        ts_ms: int,
        expect: str,
        off_by: int,
    ) -> None:
        base = self._base(tid, with_created)
        frames = self._frames(tid, specs, with_created, ts_ms)
        expected_seq = {"none": None, "right": base, "wrong": base + off_by}[expect]
        got, exc = self._both(tid, frames, expected_seq)
        if expect == "wrong":
            assert isinstance(exc, SeqConflict)
        else:
            assert exc is None and got == range(base, base + len(frames))
        self._after_append_attempt(tid, True)

    @rule(tid=threads, how=st.sampled_from(["empty", "created_inside", "more", "digest", "seq"]))
    def append_invalid(self, tid: str, how: str) -> None:
        msg = fr.message("user", "x", message_id=self._next_id("m"))
        batches: dict[str, list[fr.Frame]] = {
            "empty": [],
            "created_inside": [msg, fr.ThreadCreated()],
            "more": [replace(fr.message("user", "x", message_id="mm"), more=True)],
            "digest": [replace(fr.message("user", "x", message_id="md"), digest="00")],
            "seq": [msg, replace(fr.message("user", "y", message_id="ms"), seq=10**6)],
        }
        batch = batches[how]
        _, exc = self._both(tid, batch, None)
        assert isinstance(exc, SeqConflict if how == "seq" else BadFrame)
        self._after_append_attempt(tid, how != "empty")

    @rule()
    def reopen(self) -> None:
        self.jsonl = Store(self.path, durable=False, clock=_clock)
        self.recovered = 0

    @precondition(lambda self: len(self.torn) < len(THREADS))
    @rule(
        data=st.data(),
        specs=frame_specs,
        how=st.sampled_from(["cut", "whole_lines", "garbage"]),
        where=st.integers(0, 2**32),
        garbage=st.binary(min_size=1, max_size=40),
    )
    def crash_with_a_torn_tail(
        self,
        data: st.DataObject,
        specs: list[tuple[str, str, int]],
        how: str,
        where: int,
        garbage: bytes,
    ) -> None:
        tid = data.draw(st.sampled_from([t for t in THREADS if t not in self.torn]), label="tid")
        thread = self.jsonl.thread(tid)
        head = thread.head()
        lines, _ = seal_batch(tid, self._frames(tid, specs, False, 0), head, now_ms=FIXED_MS)
        whole = b"".join(lines)
        if how == "whole_lines" and len(lines) > 1:
            torn = b"".join(lines[: 1 + where % (len(lines) - 1)])
        elif how == "garbage" and garbage.replace(b"\n", b""):
            torn = garbage.replace(b"\n", b"")
        else:
            torn = whole[: 1 + where % (len(whole) - 1)]
        committed = thread.committed_size()
        with open(thread.path, "ab") as f:
            f.write(torn)
        self.torn[tid] = (committed, torn)

    @rule(then=st.sampled_from(["rebuild_all", "refresh", "nothing"]))
    def delete_the_cache_folder(self, then: str) -> None:
        before = {tid: self._cache_files(tid) for tid in self.model.threads()}
        shutil.rmtree(self.jsonl.cache_dir, ignore_errors=True)  # rm -rf
        self.indexed = {}
        if then == "nothing":
            return
        if then == "rebuild_all":
            results = rebuild_all(self.jsonl)
            assert sorted(results) == self.model.threads()
            assert all(r.mode == "rebuilt" for r in results.values())
        else:
            for tid in self.model.threads():
                assert ThreadIndex(self.jsonl.thread(tid)).refresh().mode == "rebuilt"
        for tid in self.model.threads():
            self.indexed[tid] = self._frame_count(tid)
        assert {tid: self._cache_files(tid) for tid in self.model.threads()} == before

    @precondition(lambda self: bool(self.model.threads()))
    @rule(data=st.data(), rebuild=st.booleans())
    def refresh_or_rebuild(self, data: st.DataObject, rebuild: bool) -> None:
        tid = data.draw(st.sampled_from(self.model.threads()), label="tid")
        index = ThreadIndex(self.jsonl.thread(tid))
        if rebuild:
            result = index.rebuild()
            assert (result.mode, result.frames_applied) == ("rebuilt", self._frame_count(tid))
            self.indexed[tid] = self._frame_count(tid)
        else:
            self._check_refresh(tid, index)

    @rule()
    def verify(self) -> None:
        report = verify_store(self.jsonl)
        assert report.ok, report.problems
        assert report.threads == len(self.model.threads())
        assert report.frames == sum(self._frame_count(t) for t in self.model.threads())
        noted = sorted(n.split(":")[0].removeprefix("thread ") for n in report.notes)
        assert noted == sorted(self.torn)  # a log holding only a torn first batch is noted too
        listed = []
        for rec in report.quarantined:
            raw = msgspec.json.decode(Path(rec.quarantine_file).read_bytes())
            assert (raw["thread_id"], raw["offset"], raw["length"]) == (
                rec.thread_id,
                rec.offset,
                rec.length,
            )
            listed.append((rec.thread_id, rec.offset, base64.b64decode(raw["data_b64"])))
        assert sorted(listed) == sorted(self.quarantined)
        for rec, (_, _, data) in zip(report.quarantined, listed, strict=True):
            assert rec.length == len(data)
        assert report.artifacts == len(list(self.model.artifacts.ids()))

    # -- invariants ------------------------------------------------------------------------

    def _frame_count(self, tid: str) -> int:
        head = self.model.thread(tid).head()
        return 0 if head is None else head.next_seq

    def _cache_files(self, tid: str) -> dict[str, bytes]:
        folder = self.jsonl.cache_dir / "threads" / tid
        return {name: (folder / name).read_bytes() for name in CACHE_FILES}

    def _check_refresh(self, tid: str, index: ThreadIndex) -> None:
        total = self._frame_count(tid)
        before = self.indexed.get(tid)
        if before is None:
            want = ("rebuilt", total)
        elif total > before:
            want = ("caught_up", total - before)
        else:
            want = ("current", 0)
        result = index.refresh()
        assert (result.mode, result.frames_applied) == want
        self.indexed[tid] = total

    @invariant()
    def same_threads_and_lines(self) -> None:
        assert self.jsonl.threads() == self.model.threads()
        for tid in THREADS:
            j, m = self.jsonl.thread(tid), self.model.thread(tid)
            lines = list(m.read_lines())
            assert list(j.read_lines()) == lines
            assert j.head() == m.head()
            for k in (1, 4, 1000):
                assert j.tail(k) == m.tail(k)
                assert j.tail(k, types=["message_appended"]) == m.tail(
                    k, types=["message_appended"]
                )
            mid = len(lines) // 2
            assert list(j.read_lines(from_seq=mid, to_seq=mid + 2)) == lines[mid : mid + 3]
            assert list(j.read_lines(from_seq=len(lines))) == []
            assert list(j.read_lines(from_seq=mid + 1, to_seq=mid)) == []
            for types in (["message_appended"], ["compaction_checkpoint_created", "job_ended"]):
                assert list(j.read(from_seq=mid, types=types, limit=3)) == list(
                    m.read(from_seq=mid, types=types, limit=3)
                )
            assert j.exists() == m.exists() == bool(lines)
            assert j.offset_of(len(lines)) is None
            log = b"".join(line + b"\n" for _, line in lines)
            assert j.committed_size() == len(log)
            if j.path.exists():
                assert j.path.read_bytes()[: len(log)] == log

    @invariant()
    def caches_agree_with_the_model(self) -> None:
        for tid in self.model.threads():
            index = ThreadIndex(self.jsonl.thread(tid))
            self._check_refresh(tid, index)
            lines = [line for _, line in self.model.thread(tid).read_lines()]
            frames = [fr.decode_frame(line) for line in lines]
            messages = [f for f in frames if isinstance(f, fr.MessageAppended)]
            assert index.frame_count() == len(frames)
            assert index.message_count() == len(messages)
            entries = [
                CheckpointEntry.of(f)
                for f in frames
                if isinstance(f, fr.CompactionCheckpointCreated)
            ]
            assert index.checkpoints() == entries
            assert index.checkpoint_count() == len(entries)
            cumulative = [e for e in entries if e.summary_kind == "cumulative_v1"]
            assert index.other_checkpoints() == [e for e in entries if e not in cumulative]
            selection = index.selection()
            assert len(selection) == len(cumulative)
            for anchor, max_to_seq in itertools.product(
                {0, len(lines) // 2, len(lines)}, {0, len(lines) // 4, len(lines) // 2, len(lines)}
            ):
                eligible = [e for e in cumulative if e.to_seq <= max_to_seq and e.seq <= anchor]
                want = max(eligible, key=lambda e: (e.to_seq, e.seq), default=None)
                assert selection.latest(max_to_seq, anchor) == want
            starts = list(itertools.accumulate([len(line) + 1 for line in lines[:-1]], initial=0))
            raw = self._cache_files(tid)["offsets.v1.u64"]
            stored = [v for (v,) in struct.iter_unpack("<Q", raw)]
            assert stored == starts
            for seq in {0, len(lines) // 2, len(lines) - 1}:
                assert index.offset(seq) == starts[seq]
                assert self.jsonl.thread(tid).offset_of(seq) == starts[seq]
            assert index.offset(len(lines)) is None
            records = index.messages(0, len(messages))
            assert [(r.seq, r.tokens, r.role) for r in records] == [
                (f.seq, f.tokens, ROLE_CODES[f.role]) for f in messages
            ]
            for k in (0, 1, 5):
                assert index.last_messages(k) == (messages[-k:] if k else [])
            assert index.problems() == []


StoreMachine.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestStoreMachine = StoreMachine.TestCase
