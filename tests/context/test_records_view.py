"""RecordView: several record lookups under one refresh of the record index, as of one moment."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from continuity import frames as fr
from continuity.caches.thread_index import ThreadIndex
from continuity.context.records import (
    Record,
    RecordView,
    latest_record,
    record,
    record_view,
    records,
)
from continuity.errors import CorruptCache, CorruptFrame
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


def _fill(store: BaseStore) -> list[int]:
    t = store.thread("t")
    seqs = []
    for i in range(30):
        if i % 4 == 0:
            t.append(fr.message("user", f"m{i}"))
        seqs.append(record(t, "rt.state", {"i": i}, key=str(i % 3)))
    return seqs


def test_a_view_answers_as_the_functions_do(store: BaseStore) -> None:
    seqs = _fill(store)
    t = store.thread("t")
    with record_view(t) as view:
        assert view.last_seq == seqs[-1]
        for key in (None, "0", "1", "2", "missing"):
            for at in (None, seqs[0] - 1, seqs[10], seqs[10] + 1, seqs[-1]):
                want = latest_record(t, "rt.state", key, at_or_before=at)
                assert view.latest("rt.state", key, at_or_before=at) == want
                got = list(view.records("rt.state", key, at_or_before=at, limit=5))
                assert got == list(records(t, "rt.state", key, at_or_before=at, limit=5))
        assert list(view.records("rt.state", limit=0)) == []
        assert view.read(seqs[7]).data == {"i": 7}
        assert view.latest("rt.none") is None


def test_a_view_is_a_snapshot_and_a_new_view_sees_what_came_after(store: BaseStore) -> None:
    seqs = _fill(store)
    t = store.thread("t")
    view = record_view(t)
    assert view.latest("rt.state", "1") is not None  # the view has read a frame
    new = record(t, "rt.state", {"i": "new"}, key="1")
    assert new > seqs[-1]
    assert narrow(Record, view.latest("rt.state", "1")).seq == seqs[28]
    assert [r.seq for r in view.records("rt.state", limit=1)] == [seqs[-1]]
    assert view.latest("rt.state", at_or_before=new) is not None
    assert narrow(Record, view.latest("rt.state", at_or_before=new)).seq == seqs[-1]
    view.close()
    with RecordView(t) as fresh:
        assert narrow(Record, fresh.latest("rt.state", "1")).data == {"i": "new"}
        assert fresh.last_seq == new


def test_a_new_view_sees_a_record_another_store_object_appended(tmp_path: Path) -> None:
    store = Store(tmp_path / "s", create=True, durable=False)
    seqs = _fill(store)
    t = store.thread("t")
    with record_view(t) as view:
        assert narrow(Record, view.latest("rt.state", "2")).seq == seqs[29]
    other = Store(store.root, durable=False).thread("t")
    for n in range(3):  # each new view sees the other object's latest, never an older one
        seq = record(other, "rt.state", {"other": n}, key="2")
        with record_view(t) as view:
            got = view.latest("rt.state", "2")
            assert got is not None and got.seq == seq and got.data == {"other": n}
            assert next(view.records("rt.state", "2")).data == {"other": n}


def test_a_new_view_sees_a_record_another_process_appended(tmp_path: Path) -> None:
    store = Store(tmp_path / "s", create=True, durable=False)
    _fill(store)
    t = store.thread("t")
    with record_view(t) as view:
        before = view.last_seq
    code = (
        "import sys; from continuity.store.jsonl import Store; "
        "from continuity.context.records import record; "
        "print(record(Store(sys.argv[1]).thread('t'), 'rt.state', {'proc': 1}, key='0'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(store.root)], check=True, capture_output=True, text=True
    )
    seq = int(out.stdout)
    assert seq > before
    with record_view(t) as view:
        got = view.latest("rt.state", "0")
        assert got is not None and got.seq == seq and got.data == {"proc": 1}
        assert view.last_seq == seq


def test_long_records_read_whole_through_the_open_log(tmp_path: Path) -> None:
    store = Store(tmp_path / "s", create=True, durable=False)
    t = store.thread("t")
    t.append(fr.message("user", "hi"))
    inline = "y" * (MAX_RECORD_DATA - 100)  # one line of ~64 KiB: several reads
    big = "z" * (MAX_RECORD_DATA + 100)  # an artifact
    s1 = record(t, "rt.long", inline, key="a")
    s2 = record(t, "rt.long", big, key="b")
    with record_view(t) as view:
        assert view.read(s1).data == inline
        assert view.read(s2).data == big
        assert [r.seq for r in view.records("rt.long")] == [s2, s1]


def test_an_edited_record_is_not_returned(tmp_path: Path) -> None:
    store = Store(tmp_path / "s", create=True, durable=False)
    t = store.thread("t")
    seq = record(t, "rt.state", {"v": "aaaa"}, key="k")
    record(t, "rt.state", {"v": "other"}, key="j")
    with record_view(t) as view:
        assert view.read(seq).data == {"v": "aaaa"}
    path = store.root / "threads" / "t.jsonl"
    raw = path.read_bytes()
    path.write_bytes(raw.replace(b'"aaaa"', b'"bbbb"'))  # same length: offsets unchanged
    with record_view(t) as view, pytest.raises(CorruptFrame):
        view.read(seq)  # the edit breaks the chain: the store's read names the frame


def test_a_seq_that_is_no_record_raises(store: BaseStore) -> None:
    seqs = _fill(store)
    with record_view(store.thread("t")) as view, pytest.raises(CorruptCache, match="not a"):
        view.read(seqs[0] - 1)  # a message


def test_a_view_whose_caches_are_deleted_under_it_reads_on(tmp_path: Path) -> None:
    store = Store(tmp_path / "s", create=True, durable=False)
    seqs = _fill(store)
    t = store.thread("t")
    with record_view(t) as view:
        assert narrow(Record, view.latest("rt.state", "1")).seq == seqs[28]
        shutil.rmtree(ThreadIndex(t).dir)
        assert narrow(Record, view.latest("rt.state", "0")).seq == seqs[27]
        assert view.read(seqs[3]).data == {"i": 3}
    with record_view(t) as view:
        assert narrow(Record, view.latest("rt.state", "2")).seq == seqs[29]
