"""DeletionContract: what ``delete`` does on every backend (ADR 0040); part of
:class:`~continuity.testing.store.StoreContract`, so every backend runs it."""

from __future__ import annotations

import pytest

from continuity import frames as fr
from continuity.errors import InvalidThreadId, ThreadDeleted, ThreadNotFound
from continuity.maintenance.forget import forget_threads, plan_deletion
from continuity.maintenance.verify import verify_store
from continuity.store.base import BaseStore
from continuity.testing.support import msg

__all__ = ["DeletionContract"]


def _record(kind: str, aid: str) -> fr.RecordAppended:
    return fr.RecordAppended(kind=kind, key="k", artifact_id=aid, size=1)


class DeletionContract:
    """Deleting threads: the log and its derived data go, a tombstone stays, nothing comes
    back, artifacts another thread uses stay. Mixed into the store contract."""

    def test_delete_removes_the_thread_and_keeps_a_tombstone(self, store: BaseStore) -> None:
        t1, t2 = store.thread("t1"), store.thread("t2")
        t1.append([msg(1), msg(2, "assistant"), msg(3)])
        t2.append(msg(4))
        head = t1.head()
        assert head is not None
        size = t1.log_bytes()
        report = store.delete_thread("t1")
        tomb = report.tombstone
        assert (tomb.thread_id, tomb.head_seq, tomb.head_digest) == ("t1", 3, head.digest)
        assert (tomb.frames, tomb.bytes, tomb.reason) == (4, size, "delete")
        assert not report.finished_earlier
        assert not t1.exists() and list(t1.read_lines()) == []
        assert store.threads() == ["t2"] and "t1" not in store.stored_thread_ids()
        assert store.tombstones() == [tomb] and store.tombstone_of("t1") == tomb
        assert store.tombstone_of("t2") is None
        assert [f.seq for f in t2.read()] == [0, 1]  # the other thread is untouched

    def test_a_deleted_thread_is_never_written_again(self, store: BaseStore) -> None:
        store.thread("t1").append(msg(1))
        store.delete_thread("t1")
        with pytest.raises(ThreadDeleted, match="was deleted"):
            store.thread("t1").append(msg(2))
        with pytest.raises(ThreadNotFound):  # ThreadDeleted is one
            store.thread("t1").append(msg(2))
        assert store.threads() == [] and not store.thread("t1").exists()

    def test_deleting_what_is_not_there_is_a_clear_error(self, store: BaseStore) -> None:
        with pytest.raises(ThreadNotFound, match="no thread 'nope'"):
            store.delete_thread("nope")
        with pytest.raises(InvalidThreadId):
            store.delete_thread("../x")
        assert store.tombstones() == []

    def test_deleting_again_finishes_and_writes_no_second_tombstone(self, store: BaseStore) -> None:
        store.thread("t1").append(msg(1))
        first = store.delete_thread("t1")
        again = store.delete_thread("t1")
        assert again.finished_earlier and again.tombstone == first.tombstone
        assert len(store.tombstones()) == 1

    def test_artifacts_go_unless_a_remaining_thread_uses_them(self, store: BaseStore) -> None:
        only = store.artifacts.put(b"only t1 uses this")
        shared = store.artifacts.put(b"t1 and t2 use this")
        unrelated = store.artifacts.put(b"nobody references this")
        store.thread("t1").append([_record("x.a", only), _record("x.b", shared)])
        store.thread("t2").append(_record("x.c", shared))
        (plan,) = plan_deletion(store, ["t1"])
        assert (plan.artifacts, plan.kept) == ([only], [shared])
        assert store.artifacts.exists(only)  # a plan removes nothing
        (done,) = forget_threads(store, ["t1"])
        assert (done.artifacts, done.kept) == ([only], [shared])
        assert not store.artifacts.exists(only)
        assert store.artifacts.exists(shared) and store.artifacts.exists(unrelated)
        assert store.artifacts.get(shared) == b"t1 and t2 use this"

    def test_an_artifact_shared_only_by_deleted_threads_goes_with_them(
        self, store: BaseStore
    ) -> None:
        shared = store.artifacts.put(b"both go")
        store.thread("t1").append(_record("x.a", shared))
        store.thread("t2").append(_record("x.b", shared))
        plans = plan_deletion(store, ["t1", "t2"])
        assert [p.artifacts for p in plans] == [[shared], [shared]]
        forget_threads(store, ["t1", "t2"], reason="prune --older-than 90d")
        assert not store.artifacts.exists(shared)
        assert [t.reason for t in store.tombstones()] == ["prune --older-than 90d"] * 2

    def test_children_outlive_a_deleted_parent(self, store: BaseStore) -> None:
        store.thread("parent").append(msg(1))
        child = store.thread("child")
        child.append([fr.ThreadCreated(thread_id="child", parent_thread_id="parent"), msg(2)])
        forget_threads(store, ["parent"])
        assert [f.seq for f in child.read()] == [0, 1]
        report = verify_store(store)
        assert report.ok, report.problems
        assert any("1 deleted thread" in n for n in report.notes)

    def test_verify_after_a_deletion_is_clean_and_says_so(self, store: BaseStore) -> None:
        store.thread("t1").append([msg(1), msg(2)])
        store.thread("t2").append(msg(3))
        forget_threads(store, ["t1"])
        report = verify_store(store)
        assert report.ok, report.problems
        assert report.threads == 1
        assert any(n == "1 deleted thread (tombstones; not problems)" for n in report.notes)
