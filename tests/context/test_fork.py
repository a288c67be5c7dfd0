"""Fork: a new thread that starts from another at seq N and says so. Frames 1..N are copied at
the same seqs (re-chained), so compile, checkpoints and decisions mean the same in the fork at
any anchor up to N; a fork cut short (by SIGKILL too) is finished by calling fork again."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterable
from pathlib import Path

import msgspec
import pytest

from continuity import frames as fr
from continuity.context import fork as fork_module
from continuity.context.compaction import StrideMessages, run_compaction
from continuity.context.compiler import compile_context
from continuity.context.fork import fork, fork_point
from continuity.errors import (
    AnchorNotFound,
    BadFrame,
    ContinuityError,
    InvalidThreadId,
    JobInFlight,
    SeqConflict,
    ThreadNotFound,
)
from continuity.maintenance.verify import verify_store
from continuity.redaction import Redactor
from continuity.store.base import BaseStore, Head, Thread
from continuity.store.jsonl import Store
from continuity.store.memory import MemoryStore
from continuity.testing import FixedClock
from tests.support.compile import call, result, text
from tests.support.processes import reap

SRC = "src"


@pytest.fixture(params=["jsonl", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path, clock: FixedClock) -> BaseStore:
    if request.param == "jsonl":
        return Store(tmp_path / "store", create=True, durable=False, clock=clock)
    return MemoryStore(clock=clock)


def _session(store: BaseStore, thread_id: str = SRC, turns: int = 12) -> Thread:
    """A thread with text, tool pairs (one output in an artifact), compactions, logged
    decisions, a retraction and a record: every kind of frame a fork has to carry."""
    thread = store.thread(thread_id)
    thread.append(fr.ThreadCreated(title="the source", meta={"project": "/work/app"}))
    big = "line of output\n" * 4000
    big_id = store.artifacts.put(big.encode())
    for t in range(turns):
        thread.append(text("user", f"turn {t}: please look at file{t}.py", f"u{t}"))
        if t % 3 == 1:
            out = result(f"r{t}", f"tu{t}", big[:200], artifact_id=big_id, size=len(big))
        else:
            out = result(f"r{t}", f"tu{t}", f"contents of file{t}.py")
        thread.append([call(f"c{t}", f"tu{t}", command=f"cat file{t}.py"), out])
        thread.append(text("assistant", f"turn {t}: file{t}.py looks fine", f"a{t}"))
        if t % 4 == 3:
            run_compaction(thread, StrideMessages(8))
        if t % 2 == 0:
            compile_context(thread)  # logged: a decision frame
        if t == 5:
            head = thread.head()
            assert head is not None
            thread.append(
                fr.MessagesRetracted(
                    spans=[fr.SeqSpan(from_seq=head.seq - 1, to_seq=head.seq)], reason="pop"
                )
            )
        if t == 7:
            thread.append(fr.RecordAppended(kind="test.state", key="k", data={"turn": t}))
    return thread


def _same_copy(source: Thread, forked: Thread, to_seq: int) -> None:
    """Frames 1..to_seq of the fork are the source's but for the digest and batch flag, and
    both chains verify."""
    ours = list(forked.read(to_seq=to_seq))
    theirs = list(source.read(to_seq=to_seq))
    assert len(ours) == len(theirs) == to_seq + 1
    for a, b in zip(ours[1:], theirs[1:], strict=True):
        assert msgspec.structs.replace(a, digest="", more=False) == msgspec.structs.replace(
            b, digest="", more=False
        )


def _clean(store: BaseStore) -> None:
    report = verify_store(store)
    assert report.ok, [str(p) for p in report.problems]


def _bundle(thread: Thread, anchor: int) -> bytes | str:
    """The bundle a compile at ``anchor`` gives (its thread id left out), or the error it
    raises: the same prefix must give the same answer either way."""
    try:
        bundle = compile_context(thread, anchor=anchor, log=False).bundle
    except ContinuityError as exc:
        return f"{type(exc).__name__}: {str(exc).replace(repr(thread.id), '<thread>')}"
    return msgspec.json.encode(msgspec.structs.replace(bundle, thread_id="-"))


# --- what a fork is -------------------------------------------------------------------------


def test_a_fork_starts_with_where_it_comes_from_then_the_source_at_the_same_seqs(
    store: BaseStore,
) -> None:
    source = _session(store)
    head = source.head()
    assert head is not None
    n = head.seq - 7
    frame_n_digest = next(source.read_lines(from_seq=n, to_seq=n))[1][-66:-2].decode()
    forked = fork(source, "b", at_seq=n)
    assert forked.id == "b"
    created = next(iter(forked.read(to_seq=0)))
    assert isinstance(created, fr.ThreadCreated)
    assert created.thread_id == "b"
    assert created.parent_thread_id == SRC
    assert created.fork_of == fr.ForkPoint(thread_id=SRC, seq=n, digest=frame_n_digest)
    assert created.title == "the source"  # the source's, unless given
    assert created.meta == {}  # the source's labels describe the source, not the fork
    fork_head = forked.head()
    assert fork_head is not None and fork_head.seq == n
    _same_copy(source, forked, n)
    assert fork_point(forked) == created.fork_of
    assert fork_point(store, "b") == created.fork_of
    assert fork_point(source) is None
    _clean(store)


def test_the_fork_compiles_as_the_source_at_every_anchor_up_to_the_fork_point(
    store: BaseStore,
) -> None:
    source = _session(store)
    head = source.head()
    assert head is not None
    n = head.seq - 3
    forked = fork(store, SRC, "b", at_seq=n)
    kinds = {str(f.__struct_config__.tag) for f in forked.read()}
    assert {
        "compaction_checkpoint_created",
        "context_selection_decided",
        "messages_retracted",
        "record_appended",
        "job_spawned",
    } <= kinds
    checkpoints = [f.seq for f in forked.read(types=["compaction_checkpoint_created"])]
    decisions = [f.seq for f in forked.read(types=["context_selection_decided"])]
    anchors = sorted({1, 2, n // 2, n - 1, n, *checkpoints[:3], *decisions[:3]})
    assert len(anchors) >= 6
    strategies = set()
    for k in anchors:
        ours = _bundle(forked, k)
        assert ours == _bundle(source, k), k
        if isinstance(ours, bytes):
            strategies.add(msgspec.json.decode(ours)["strategy"])
    assert len(strategies) >= 2, anchors  # with summaries and without
    # The fork goes on on its own: its frames come after the copies.
    assert forked.append(text("user", "only in the fork", "f1")) == range(n + 1, n + 2)
    assert compile_context(forked).bundle.thread_id == "b"
    _clean(store)


def test_the_default_fork_point_is_the_head_and_the_title_can_be_given(
    store: BaseStore,
) -> None:
    source = _session(store, turns=3)
    head = source.head()
    assert head is not None
    forked = fork(source, "b", title="try another fix", meta={"why": "experiment"})
    point = fork_point(forked)
    assert point == fr.ForkPoint(thread_id=SRC, seq=head.seq, digest=head.digest)
    created = next(iter(forked.read(to_seq=0)))
    assert isinstance(created, fr.ThreadCreated)
    assert (created.title, created.meta) == ("try another fix", {"why": "experiment"})
    untitled = fork(source, "c", title="")
    first = next(iter(untitled.read(to_seq=0)))
    assert isinstance(first, fr.ThreadCreated) and first.title is None
    _same_copy(source, forked, head.seq)


def test_a_fork_at_seq_0_holds_its_thread_created_alone(store: BaseStore) -> None:
    source = _session(store, turns=1)
    forked = fork(source, "b", at_seq=0)
    assert [f.seq for f in forked.read()] == [0]
    point = fork_point(forked)
    assert point is not None and point.seq == 0
    assert point.digest == next(source.read_lines(to_seq=0))[1][-66:-2].decode()


def test_a_fork_point_inside_a_batch_is_allowed(store: BaseStore) -> None:
    source = store.thread(SRC)
    source.append([text("user", f"m{i}", f"m{i}") for i in range(6)])  # one batch: 0..6
    inside = next(iter(source.read(from_seq=3, to_seq=3)))
    assert inside.more  # seq 3 is in the middle of its batch
    forked = fork(source, "b", at_seq=3)
    frames = list(forked.read())
    assert [f.seq for f in frames] == [0, 1, 2, 3]
    assert not frames[-1].more  # the fork's own batch ends there
    _same_copy(source, forked, 3)
    _clean(store)


def test_a_fork_of_a_fork(store: BaseStore) -> None:
    source = _session(store, turns=6)
    head = source.head()
    assert head is not None
    first = fork(source, "b", at_seq=head.seq - 4)
    first.append([text("user", "b's own", "b1"), text("assistant", "ok", "b2")])
    b_head = first.head()
    assert b_head is not None
    second = fork(first, "c")
    point = fork_point(second)
    assert point == fr.ForkPoint(thread_id="b", seq=b_head.seq, digest=b_head.digest)
    _same_copy(first, second, b_head.seq)
    _same_copy(source, second, head.seq - 4)
    created = next(iter(second.read(to_seq=0)))
    assert isinstance(created, fr.ThreadCreated) and created.parent_thread_id == "b"
    for k in (head.seq - 6, head.seq - 4, b_head.seq):
        assert _bundle(second, k) == _bundle(first, k)
    _clean(store)


def test_copies_are_redacted_like_any_append_and_artifacts_are_shared(
    tmp_path: Path, clock: FixedClock
) -> None:
    store = Store(tmp_path / "s", create=True, durable=False, clock=clock, redactor=Redactor())
    source = store.thread(SRC)
    source.append(text("user", "my key is AKIAIOSFODNN7EXAMPLE", "u1"))
    aid = store.artifacts.put(b"x" * 100_000)
    source.append(result("r1", "t1", "xxx", artifact_id=aid, size=100_000))
    forked = fork(source, "b")
    _same_copy(source, forked, 2)
    assert "AKIA" not in (tmp_path / "s" / "threads" / "b.jsonl").read_text()
    assert len(list((tmp_path / "s" / "artifacts").rglob("*.zst"))) == 1
    _clean(store)


# --- what a fork refuses ----------------------------------------------------------------------


def test_bad_requests_are_refused_and_write_nothing(store: BaseStore) -> None:
    source = _session(store, turns=2)
    head = source.head()
    assert head is not None
    other = store.thread("other")
    other.append(text("user", "hi", "h"))
    with pytest.raises(AnchorNotFound, match=rf"seqs are 0\.\.{head.seq}"):
        fork(source, "b", at_seq=head.seq + 1)
    with pytest.raises(AnchorNotFound, match=r"at seq -1"):
        fork(source, "b", at_seq=-1)
    with pytest.raises(TypeError, match="at_seq"):
        fork(source, "b", at_seq="3")  # type: ignore[call-overload]
    with pytest.raises(BadFrame, match="into itself"):
        fork(source, SRC)
    with pytest.raises(ThreadNotFound, match="nope"):
        fork(store, "nope", "b")
    with pytest.raises(ThreadNotFound):
        fork(store.thread("nope"), "b")
    with pytest.raises(InvalidThreadId):
        fork(source, "../escape")
    with pytest.raises(BadFrame, match="already exists and is not a fork"):
        fork(source, "other")
    with pytest.raises(TypeError):
        fork(source)  # type: ignore[call-overload]
    with pytest.raises(TypeError):
        fork(store, "b")  # type: ignore[call-overload]
    assert store.threads() == ["other", SRC]
    assert other.head() is not None and len(list(other.read())) == 2


def test_a_target_that_is_another_fork_is_refused(store: BaseStore) -> None:
    source = _session(store, turns=3)
    head = source.head()
    assert head is not None
    store.thread("x").append(text("user", "x", "x"))
    fork(store, "x", "b")
    with pytest.raises(BadFrame, match="a fork of 'x'"):
        fork(source, "b")
    fork(source, "c", at_seq=4)
    with pytest.raises(BadFrame, match="at seq 4, not at seq 5"):
        fork(source, "c", at_seq=5)


def test_fork_is_idempotent_on_a_finished_fork(store: BaseStore) -> None:
    source = _session(store, turns=3)
    forked = fork(source, "b", at_seq=5)
    before = list(forked.read_lines())
    again = fork(source, "b", at_seq=5)
    assert list(again.read_lines()) == before
    forked.append(text("user", "the fork's own", "own"))
    source.append(text("user", "the source's own", "own"))
    after = list(forked.read_lines())
    # at_seq left out: the fork keeps the seq it was made at, though the source has grown.
    assert list(fork(source, "b").read_lines()) == after


# --- finishing a fork cut short ---------------------------------------------------------------


class _Crash(Exception):
    pass


def _cut_short(
    monkeypatch: pytest.MonkeyPatch, store: BaseStore, target: str, batches: int
) -> list[int]:
    """Make appends to ``target`` fail after ``batches`` batches; return the batch sizes."""
    sizes: list[int] = []
    thread_class = type(store.thread(target))
    real = thread_class.append

    def append(self: Thread, frames: Iterable[fr.Frame], **kw: int | bool | None) -> range:
        if self.id == target:
            if len(sizes) >= batches:
                raise _Crash
            batch = list(frames)
            sizes.append(len(batch))
            return real(self, batch, **kw)  # type: ignore[arg-type]
        return real(self, frames, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(thread_class, "append", append)
    return sizes


def test_the_copy_goes_in_bounded_batches(
    store: BaseStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = _session(store, turns=6)
    head = source.head()
    assert head is not None
    monkeypatch.setattr(fork_module, "_BATCH_FRAMES", 7)
    sizes = _cut_short(monkeypatch, store, "b", batches=10_000)
    fork(source, "b")
    assert sum(sizes) == head.seq + 1
    assert max(sizes) == 7
    _same_copy(source, store.thread("b"), head.seq)
    monkeypatch.setattr(fork_module, "_BATCH_FRAMES", 10_000)
    monkeypatch.setattr(fork_module, "_BATCH_BYTES", 1)  # a batch a frame
    sizes = _cut_short(monkeypatch, store, "c", batches=10_000)
    fork(source, "c")
    assert sizes == [2] + [1] * (head.seq - 1)  # thread_created with the first copy


def test_a_fork_cut_short_is_finished_by_calling_fork_again(
    store: BaseStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = _session(store)
    head = source.head()
    assert head is not None
    n = head.seq - 2
    monkeypatch.setattr(fork_module, "_BATCH_FRAMES", 10)
    with monkeypatch.context() as m:
        _cut_short(m, store, "b", batches=3)
        with pytest.raises(_Crash):
            fork(source, "b", at_seq=n)
    partial = store.thread("b").head()
    assert partial is not None and partial.seq == 29 < n
    source.append(text("user", "the source goes on", "later"))  # the default point moves
    forked = fork(source, "b")  # at_seq left out: the fork's own point
    assert fork_point(forked) == fork_point(fork(source, "whole", at_seq=n))
    _same_copy(source, forked, n)
    head_b = forked.head()
    assert head_b is not None and head_b.seq == n
    _clean(store)


def test_a_fork_cut_short_then_appended_to_is_not_finished(
    store: BaseStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = _session(store)
    monkeypatch.setattr(fork_module, "_BATCH_FRAMES", 10)
    with monkeypatch.context() as m:
        _cut_short(m, store, "b", batches=2)
        with pytest.raises(_Crash):
            fork(source, "b", at_seq=30)
    store.thread("b").append(text("user", "not a copy", "foreign"))
    with pytest.raises(BadFrame, match="frame 20 is not the copy"):
        fork(source, "b", at_seq=30)


def test_a_source_changed_since_the_fork_began_is_refused(tmp_path: Path) -> None:
    store = Store(tmp_path / "s", create=True, durable=False)
    source = store.thread(SRC)
    for i in range(10):
        source.append(text("user", f"m{i}", f"m{i}"))
    with pytest.MonkeyPatch.context() as m:
        m.setattr(fork_module, "_BATCH_FRAMES", 3)
        _cut_short(m, store, "b", batches=1)
        with pytest.raises(_Crash):
            fork(source, "b", at_seq=8)
    # The source's tail is repaired away and grows again: its frame 8 is another frame now.
    offset = source.offset_of(5)
    assert offset is not None
    source.quarantine_tail(offset, "test")
    source.append([text("user", f"n{i}", f"n{i}") for i in range(6)])
    with pytest.raises(BadFrame, match="no longer the frame it was forked from"):
        fork(source, "b", at_seq=8)


def test_two_forks_into_one_thread_at_once_are_refused(tmp_path: Path) -> None:
    store = Store(tmp_path / "s", create=True, durable=False)
    source = store.thread(SRC)
    source.append(text("user", "hi", "h"))
    with store.job_lock("b", "fork"), pytest.raises(JobInFlight, match="fork"):
        fork(source, "b")
    fork(source, "b")


def test_a_concurrent_append_to_the_fork_stops_the_copy(
    store: BaseStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = _session(store, turns=4)
    monkeypatch.setattr(fork_module, "_BATCH_FRAMES", 5)
    real = fork_module._append
    calls = []

    def sneaky(src: Thread, target: Thread, batch: list[fr.Frame], first: int) -> None:
        calls.append(first)
        if len(calls) == 2:
            target.append(text("user", "sneaked in", "s"))
        real(src, target, batch, first)

    monkeypatch.setattr(fork_module, "_append", sneaky)
    with pytest.raises(SeqConflict):
        fork(source, "b")


# --- a real kill ------------------------------------------------------------------------------

_CHILD = textwrap.dedent(
    """
    import sys
    from continuity.context import fork as f
    from continuity.store.jsonl import Store

    f._BATCH_FRAMES = int(sys.argv[3])
    store = Store(sys.argv[1], durable=True)
    f.fork(store, "big", sys.argv[2], at_seq=int(sys.argv[4]))
    print("done", flush=True)
    """
)


@pytest.mark.slow
def test_a_fork_killed_by_sigkill_is_finished_by_calling_fork_again(tmp_path: Path) -> None:
    path = tmp_path / "s"
    store = Store(path, create=True, durable=False)
    big = store.thread("big")
    for start in range(0, 60_000, 10_000):
        big.append(
            [text("user", f"m{i} " + "x" * 200, f"m{i}") for i in range(start, start + 10_000)]
        )
    n = 59_000
    seed = random.randrange(2**32)
    print(f"random seed: {seed}")
    rng = random.Random(seed)
    target = store.thread("b")
    cut_at: list[int] = []  # the fork's head after each kill
    for _round in range(3):
        before = target.head()
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(path), "b", "1500", str(n)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:

            def moved(before: Head | None = before) -> bool:
                now = target.head()
                return now is not None and (before is None or now.seq > before.seq)

            deadline = time.monotonic() + 60
            while not moved() and child.poll() is None and time.monotonic() < deadline:
                time.sleep(0.002)
            time.sleep(rng.uniform(0.0, 0.05))  # after a batch, or in the middle of the next
            if child.poll() is None:
                child.send_signal(signal.SIGKILL)
            child.wait(timeout=10)
            if child.returncode != -signal.SIGKILL:  # it finished first, or failed
                assert child.returncode == 0, child.communicate()[1].decode()
                break
        finally:
            reap(child, timeout=10)
        head = target.head()
        assert head is not None
        cut_at.append(head.seq)
    print("cut at", cut_at)
    assert cut_at and cut_at[0] < n, "the child finished before it could be killed"
    assert cut_at == sorted(cut_at)
    forked = fork(big, "b", at_seq=n)
    head = forked.head()
    assert head is not None and head.seq == n
    _same_copy(big, forked, n)
    report = verify_store(store)
    assert report.ok, [str(p) for p in report.problems]
