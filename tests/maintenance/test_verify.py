"""verify_store: chains, artifacts, caches, torn tails and quarantine, checked end to end."""

from __future__ import annotations

import re
import shutil

import pytest

from continuity import frames as fr
from continuity.caches.thread_index import ThreadIndex
from continuity.maintenance.verify import verify_store
from continuity.store.artifacts import FileArtifactStore
from continuity.store.base import Head, seal_batch
from continuity.store.jsonl import Store
from tests.support.narrow import narrow


def _checkpoint(seq: int, aid: str) -> fr.CompactionCheckpointCreated:
    return fr.CompactionCheckpointCreated(
        checkpoint_id=f"cp{seq}",
        cut_rule_id="every_n",
        summary_kind="cumulative_v1",
        summary_artifact_id=aid,
        from_seq=1,
        to_seq=seq - 1,
    )


def _populate(store: Store, tid: str = "t", n: int = 12) -> list[str]:
    """A thread of ``n`` single-frame batches after thread_created, with a stored summary
    artifact, a tool output artifact and a checkpoint; returns the artifact ids."""
    summary = store.artifacts.put(b"summary of the first messages")
    output = store.artifacts.put(b"a long tool output " * 100)
    thread = store.thread(tid)
    for i in range(1, n + 1):
        if i == 4:
            thread.append(
                fr.message(
                    "user",
                    content=[
                        fr.ToolResultBlock(tool_use_id="tu", artifact_id=output, preview="a lo")
                    ],
                    message_id=f"m{i}",
                )
            )
        elif i == 8:
            thread.append(_checkpoint(8, summary))
        else:
            thread.append(
                fr.message("user" if i % 2 else "assistant", f"hi {i}", message_id=f"m{i}")
            )
    return [summary, output]


def _line_offsets(store: Store, tid: str) -> list[int]:
    offsets, pos = [], 0
    for line in store.thread(tid).path.read_bytes().split(b"\n")[:-1]:
        offsets.append(pos)
        pos += len(line) + 1
    return offsets


def _rewrite_line(store: Store, tid: str, seq: int, edit: bytes, replacement: bytes) -> int:
    """Replace the first ``edit`` in line ``seq`` with ``replacement`` (same length, so the line
    stays parseable and in place); return the line's byte offset."""
    assert len(edit) == len(replacement)
    path = store.thread(tid).path
    data = bytearray(path.read_bytes())
    at = _line_offsets(store, tid)[seq]
    end = data.index(b"\n", at)
    i = data.find(edit, at, end)
    assert i >= 0, f"{edit!r} not in line {seq}"
    data[i : i + len(edit)] = replacement
    path.write_bytes(bytes(data))
    return at


def test_a_sound_store_verifies(tmp_store: Store) -> None:
    aids = _populate(tmp_store, "a")
    _populate(tmp_store, "b", 5)
    unreferenced = tmp_store.artifacts.put(b"nobody points here")
    for tid in ("a", "b"):
        ThreadIndex(tmp_store.thread(tid)).refresh()
    seen: list[str] = []
    report = verify_store(tmp_store, progress=seen.append)
    assert report.ok, report.problems
    assert (report.threads, report.frames) == (2, 13 + 6)
    assert report.artifacts == len({*aids, unreferenced})
    assert (report.notes, report.quarantined) == ([], [])
    assert seen == ["a", "b"]


def test_an_empty_store_verifies(tmp_store: Store) -> None:
    report = verify_store(tmp_store)
    assert report.ok
    assert (report.threads, report.frames, report.artifacts) == (0, 0, 0)


@pytest.mark.parametrize(
    ("what", "edit", "replacement"),
    [
        ("body", b'"text":"hi 5"', b'"text":"ho 5"'),
        ("digest", b',"digest":"', None),
        ("seq", b'"seq":5,', b'"seq":7,'),
    ],
)
def test_a_broken_chain_names_thread_seq_and_offset(
    tmp_store: Store, what: str, edit: bytes, replacement: bytes | None
) -> None:
    _populate(tmp_store)
    _populate(tmp_store, "other", 3)
    if replacement is None:  # flip one hex digit of the digest: still a sealed line
        line = tmp_store.thread("t").path.read_bytes().split(b"\n")[5]
        digit = line[-3:-2]
        edit = line[-3:]
        replacement = (b"0" if digit != b"0" else b"1") + line[-2:]
    at = _rewrite_line(tmp_store, "t", 5, edit, replacement)
    report = verify_store(tmp_store)
    assert not report.ok
    assert len(report.problems) == 1, report.problems
    problem = report.problems[0]
    assert problem.where == "thread t"
    assert "seq 5" in problem.message
    assert f"byte offset {at}" in problem.message
    assert report.frames == 13 + 4  # every frame is checked, past the bad one too


def test_a_broken_first_line_is_reported_at_offset_zero(tmp_store: Store) -> None:
    _populate(tmp_store)
    _rewrite_line(tmp_store, "t", 0, b'"thread_id":"t"', b'"thread_id":"u"')
    report = verify_store(tmp_store)
    assert [p.where for p in report.problems] == ["thread t"]
    assert re.search(r"seq 0\b.*byte offset 0\b", report.problems[0].message)


def test_a_broken_last_line_is_reported(tmp_store: Store) -> None:
    _populate(tmp_store)
    at = _rewrite_line(tmp_store, "t", 12, b'"text":"hi 12"', b'"text":"HI 12"')
    report = verify_store(tmp_store)
    assert [p.where for p in report.problems] == ["thread t"]
    assert "seq 12" in report.problems[0].message
    assert f"byte offset {at}" in report.problems[0].message


def test_an_unparsable_middle_line_is_a_problem(tmp_store: Store) -> None:
    _populate(tmp_store)
    path = tmp_store.thread("t").path
    lines = path.read_bytes().split(b"\n")
    lines[6] = b"x" * len(lines[6])
    path.write_bytes(b"\n".join(lines))
    report = verify_store(tmp_store)
    assert [p.where for p in report.problems] == ["thread t"]
    assert f"byte offset {_line_offsets(tmp_store, 't')[6]}" in report.problems[0].message


def test_seq_zero_must_be_this_threads_thread_created(tmp_store: Store) -> None:
    genesis = Head(-1, fr.GENESIS_DIGEST.hex())  # seal a seq-0 message, chained from genesis
    lines, _ = seal_batch("t", [fr.message("user", "hi", message_id="m")], genesis, now_ms=1)
    tmp_store.thread("t").path.write_bytes(b"".join(lines))
    _populate(tmp_store, "a", 2)
    shutil.copyfile(tmp_store.thread("a").path, tmp_store.thread("b").path)
    report = verify_store(tmp_store)
    assert sorted(p.where for p in report.problems) == ["thread b", "thread t"]
    assert all("thread_created" in p.message for p in report.problems)


def test_a_missing_artifact_is_a_problem(tmp_store: Store) -> None:
    _populate(tmp_store)
    never_stored = "fe" * 32
    tmp_store.thread("t").append(_checkpoint(14, never_stored))
    report = verify_store(tmp_store)
    assert [(p.where, p.message) for p in report.problems] == [
        (f"artifact {never_stored}", "missing (referenced by thread t seq 13)")
    ]


def test_a_missing_tool_output_artifact_is_a_problem(tmp_store: Store) -> None:
    _summary, output = _populate(tmp_store)
    narrow(FileArtifactStore, tmp_store.artifacts).path(output).unlink()
    report = verify_store(tmp_store)
    assert [p.where for p in report.problems] == [f"artifact {output}"]
    assert "referenced by thread t seq 4" in report.problems[0].message


@pytest.mark.parametrize("damage", ["garbage", "other_content"])
@pytest.mark.parametrize("referenced", [True, False])
def test_a_corrupted_artifact_is_a_problem(tmp_store: Store, damage: str, referenced: bool) -> None:
    summary, _output = _populate(tmp_store)
    aid = summary if referenced else tmp_store.artifacts.put(b"loose")
    path = narrow(FileArtifactStore, tmp_store.artifacts).path(aid)
    if damage == "garbage":
        path.write_bytes(b"\x00not zstd at all")
    else:  # a valid zstd frame of other bytes: decompresses, but does not hash to its id
        other = tmp_store.artifacts.put(b"something else")
        shutil.copyfile(narrow(FileArtifactStore, tmp_store.artifacts).path(other), path)
    report = verify_store(tmp_store)
    assert [p.where for p in report.problems] == [f"artifact {aid}"]


def test_only_the_named_threads_are_verified(tmp_store: Store) -> None:
    _populate(tmp_store, "a")
    _populate(tmp_store, "b", 3)
    _rewrite_line(tmp_store, "b", 2, b'"text":"hi 2"', b'"text":"xx 2"')
    loose = tmp_store.artifacts.put(b"loose")
    narrow(FileArtifactStore, tmp_store.artifacts).path(loose).write_bytes(b"junk")
    report = verify_store(tmp_store, [tmp_store.thread("a")])
    assert report.ok
    assert (report.threads, report.frames) == (1, 13)
    assert not verify_store(tmp_store, [tmp_store.thread("b")]).ok


def test_a_torn_tail_is_a_note_not_a_problem(tmp_store: Store) -> None:
    _populate(tmp_store)
    thread = tmp_store.thread("t")
    lines, _ = seal_batch(
        "t", [fr.message("user", "lost", message_id="x")] * 1, thread.head(), now_ms=1
    )
    torn = lines[0][:20]
    with open(thread.path, "ab") as f:
        f.write(torn)
    report = verify_store(tmp_store)
    assert report.ok, report.problems
    assert report.frames == 13
    assert len(report.notes) == 1
    assert report.notes[0].startswith(f"thread t: {len(torn)} bytes past the last committed frame")
    assert report.quarantined == []


def test_an_unfinished_batch_is_a_note_not_a_problem(tmp_store: Store) -> None:
    _populate(tmp_store)
    thread = tmp_store.thread("t")
    batch = [fr.message("user", f"b{i}", message_id=f"b{i}") for i in range(3)]
    lines, _ = seal_batch("t", batch, thread.head(), now_ms=1)
    with open(thread.path, "ab") as f:
        f.write(lines[0] + lines[1])  # whole lines, but the batch's last frame never came
    report = verify_store(tmp_store)
    assert report.ok, report.problems
    assert report.frames == 13
    assert [n.split(":")[0] for n in report.notes] == ["thread t"]


def test_quarantined_records_are_listed_after_recovery(tmp_store: Store) -> None:
    _populate(tmp_store, "a")
    _populate(tmp_store, "b", 2)
    for tid in ("a", "b"):
        with open(tmp_store.thread(tid).path, "ab") as f:
            f.write(b'{"type":"mess')
    committed = tmp_store.thread("a").committed_size()
    tmp_store.thread("a").append(fr.message("user", "after", message_id="z"))
    tmp_store.thread("b").append(fr.message("user", "after", message_id="z"))
    report = verify_store(tmp_store)
    assert report.ok and report.notes == []
    assert sorted((r.thread_id, r.length) for r in report.quarantined) == [("a", 13), ("b", 13)]
    assert [r.offset for r in report.quarantined if r.thread_id == "a"] == [committed]
    assert [r.thread_id for r in verify_store(tmp_store, [tmp_store.thread("b")]).quarantined] == [
        "b"
    ]


def test_a_cache_that_differs_from_the_log_is_a_problem(tmp_store: Store) -> None:
    _populate(tmp_store, n=30)
    index = ThreadIndex(tmp_store.thread("t"))
    index.refresh()
    path = index.dir / "offsets.v1.u64"
    data = bytearray(path.read_bytes())
    data[8 * 3] ^= 0x01
    path.write_bytes(bytes(data))
    report = verify_store(tmp_store)
    assert [(p.where, p.message) for p in report.problems] == [
        ("cache of thread t", "offsets.v1.u64 does not match its checksum (its last block or sums)")
    ]


def test_a_cache_behind_the_log_is_sound(tmp_store: Store) -> None:
    _populate(tmp_store)
    ThreadIndex(tmp_store.thread("t")).refresh()
    tmp_store.thread("t").append(fr.message("user", "more", message_id="more"))
    assert verify_store(tmp_store).ok


def test_a_cache_of_a_replaced_log_is_a_problem(tmp_store: Store) -> None:
    _populate(tmp_store)
    ThreadIndex(tmp_store.thread("t")).refresh()
    line = tmp_store.thread("t").path.read_bytes().split(b"\n")[12]
    tokens = re.search(rb'"tokens":(\d)', line)
    assert tokens is not None
    digit = b"1" if tokens[1] != b"1" else b"2"
    _rewrite_line(tmp_store, "t", 12, tokens[0], b'"tokens":' + digit)
    wheres = [p.where for p in verify_store(tmp_store).problems]
    assert sorted(wheres) == ["cache of thread t", "thread t"]


def test_a_cache_is_judged_on_what_it_indexes(tmp_store: Store) -> None:
    """An edit the caches do not project (a message's text) breaks the chain, not the cache."""
    _populate(tmp_store)
    ThreadIndex(tmp_store.thread("t")).refresh()
    _rewrite_line(tmp_store, "t", 12, b'"text":"hi 12"', b'"text":"HI 12"')
    assert [p.where for p in verify_store(tmp_store).problems] == ["thread t"]


def test_verify_repairs_nothing(tmp_store: Store) -> None:
    _populate(tmp_store)
    with open(tmp_store.thread("t").path, "ab") as f:
        f.write(b"torn")
    before = sorted((p, p.read_bytes()) for p in tmp_store.root.rglob("*") if p.is_file())
    verify_store(tmp_store)
    after = sorted((p, p.read_bytes()) for p in tmp_store.root.rglob("*") if p.is_file())
    assert after == before


def test_a_long_log_reports_progress_as_it_is_checked(
    tmp_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Within one thread, progress comes every so many frames, not only when it is done (the
    viewer's verify of a long thread shows a bar that moves)."""
    from continuity.maintenance import verify as verifying

    monkeypatch.setattr(verifying, "_TICK", 10)
    _populate(tmp_store, n=45)
    seen: list[tuple[int, int, int]] = []
    report = verify_store(tmp_store, [tmp_store.thread("t")], on_progress=lambda *a: seen.append(a))
    assert report.ok
    within = [s for s in seen if s[0] == 0]
    assert [s[2] for s in within] == list(range(10, report.frames + 1, 10))
    assert seen[-1] == (1, 1, report.frames)
