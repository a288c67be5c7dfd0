"""Records: a runtime's own frames, found by kind and key without reading the log."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from continuity import frames as fr
from continuity.caches.thread_index import ThreadIndex
from continuity.context.compiler import compile_context
from continuity.context.records import Record, latest_record, record, records
from continuity.errors import BadFrame
from continuity.store.base import MAX_RECORD_DATA, BaseStore
from continuity.store.jsonl import Store
from continuity.store.memory import MemoryStore
from continuity.testing import FixedClock
from tests.support.narrow import narrow


@pytest.fixture(params=["jsonl", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> BaseStore:
    if request.param == "jsonl":
        return Store(tmp_path / "s", create=True, durable=False, clock=FixedClock())
    return MemoryStore(clock=FixedClock())


def test_the_latest_record_by_kind_and_key_at_or_before_a_seq(store: BaseStore) -> None:
    t = store.thread("t")
    t.append(fr.message("user", "hi"))
    s1 = record(t, "rt.state", {"step": 1}, key="a")
    s2 = record(t, "rt.state", {"step": 2}, key="b")
    t.append(fr.message("assistant", "hello"))
    s3 = record(t, "rt.state", {"step": 3}, key="a")
    record(t, "rt.other", [1, 2], key="a")
    got = latest_record(t, "rt.state", "a")
    assert got == Record(
        seq=s3, ts_ms=got.ts_ms if got else 0, kind="rt.state", key="a", data={"step": 3}
    )
    assert latest_record(t, "rt.state", "b") is not None
    assert narrow(Record, latest_record(t, "rt.state")).data == {"step": 3}  # any key
    assert narrow(Record, latest_record(t, "rt.state", "a", at_or_before=s3 - 1)).seq == s1
    assert narrow(Record, latest_record(t, "rt.state", at_or_before=s2)).seq == s2
    assert latest_record(t, "rt.state", at_or_before=s1 - 1) is None
    assert latest_record(t, "rt.missing") is None
    assert [r.seq for r in records(t, "rt.state")] == [s3, s2, s1]
    assert [r.data["step"] for r in records(t, "rt.state", "a")] == [3, 1]
    assert [r.seq for r in records(t, "rt.state", limit=2)] == [s3, s2]
    assert list(records(t, "rt.state", limit=0)) == []
    assert [r.seq for r in records(t, "rt.state", at_or_before=s2)] == [s2, s1]


def test_large_state_goes_to_an_artifact_and_comes_back_whole(store: BaseStore) -> None:
    t = store.thread("t")
    big = {"blob": "x" * (MAX_RECORD_DATA + 10), "n": [1, 2, 3]}
    seq = record(t, "rt.state", big, key="k")
    (frame,) = t.read(from_seq=seq, to_seq=seq)
    assert isinstance(frame, fr.RecordAppended)
    assert frame.data is None and frame.artifact_id is not None and frame.size > MAX_RECORD_DATA
    assert fr.artifact_refs(frame) == [frame.artifact_id]
    assert narrow(Record, latest_record(t, "rt.state", "k")).data == big


def test_records_are_checked_when_appended(store: BaseStore) -> None:
    t = store.thread("t")
    for kind in ("state", "Rt.State", "rt.", ".rt", "rt state", ""):
        with pytest.raises(BadFrame, match="namespaced"):
            record(t, kind, 1)
    with pytest.raises(BadFrame, match="JSON value"):
        record(t, "rt.state", {"x": object()})
    with pytest.raises(BadFrame, match="not both"):
        t.append(fr.RecordAppended(kind="rt.s", data=1, artifact_id="a" * 64))
    with pytest.raises(BadFrame, match="more than a record frame holds"):
        t.append(fr.RecordAppended(kind="rt.s", data="y" * (MAX_RECORD_DATA + 2000)))
    assert not t.exists()  # nothing was written


def test_records_do_not_move_the_default_anchor_or_enter_a_context(store: BaseStore) -> None:
    t = store.thread("t")
    t.append([fr.message("user", "question"), fr.message("assistant", "answer")])
    before = compile_context(t, log=False)
    record(t, "rt.state", {"secret_state": "zzz"})
    after = compile_context(t, log=False)
    assert after.bundle == before.bundle
    assert "zzz" not in after.bundle_bytes().decode()


def test_the_index_survives_deleted_and_rebuilt_caches(tmp_path: Path) -> None:
    store = Store(tmp_path / "s", create=True, durable=False, clock=FixedClock())
    t = store.thread("t")
    seqs = [record(t, "rt.state", i, key=str(i % 3)) for i in range(20)]
    assert narrow(Record, latest_record(t, "rt.state", "1")).seq == seqs[19]
    shutil.rmtree(store.cache_dir)
    assert narrow(Record, latest_record(t, "rt.state", "1")).seq == seqs[19]
    seqs.append(record(t, "rt.state", 20, key="2"))
    assert narrow(Record, latest_record(t, "rt.state", "2")).seq == seqs[20]
    index = ThreadIndex(t)
    index.rebuild()
    assert index.problems() == []
    fresh = Store(store.root, durable=False)  # another process, in effect
    assert narrow(Record, latest_record(fresh.thread("t"), "rt.state", "2")).data == 20
    marks = (index.dir / "marks.v1.jsonl").read_bytes()
    assert marks.count(b"\n") == 21 and b'"kind":"rt.state"' in marks


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["msg", "rec"]), st.sampled_from(["a", "b", "c"])),
        min_size=1,
        max_size=40,
    ),
    st.data(),
)
def test_lookups_agree_with_a_scan_of_the_log(
    ops: list[tuple[str, str]], data: st.DataObject
) -> None:
    memory = MemoryStore(clock=FixedClock())
    t = memory.thread("t")
    for i, (op, op_key) in enumerate(ops):
        if op == "msg":
            t.append(fr.message("user", f"m{i}"))
        else:
            record(t, "rt.k", i, key=op_key)
    frames = list(t.read())
    head = frames[-1].seq
    at = data.draw(st.none() | st.integers(0, head))
    for key in (None, "a", "b", "c"):
        want = [
            f.seq
            for f in frames
            if isinstance(f, fr.RecordAppended)
            and (key is None or f.key == key)
            and (at is None or f.seq <= at)
        ]
        got = latest_record(t, "rt.k", key, at_or_before=at)
        assert (got.seq if got else None) == (want[-1] if want else None)
        assert [r.seq for r in records(t, "rt.k", key, at_or_before=at)] == want[::-1]


def test_large_state_in_a_redacting_store_is_stored_redacted(tmp_path: Path) -> None:
    from continuity.redaction import Redactor

    store = Store(tmp_path / "s", create=True, durable=False, redactor=Redactor())
    key = "sk-ant-api03-" + "A" * 90 + "-" + "B" * 6 + "AA"
    big = {"blob": "x" * (MAX_RECORD_DATA + 10), "env": {"ANTHROPIC_API_KEY": key}}
    t = store.thread("t")
    seq = record(t, "rt.state", big)
    (frame,) = t.read(from_seq=seq, to_seq=seq)
    assert isinstance(frame, fr.RecordAppended) and frame.artifact_id is not None
    stored = store.artifacts.get(frame.artifact_id)
    assert key.encode() not in stored and b"x" * 1000 in stored
    got = latest_record(t, "rt.state")
    assert got is not None and got.data["blob"] == big["blob"]
    assert key not in str(got.data)
