"""``migrate``: a store copied into another keeps every byte of every log; the copy is checked
line by line, resumable and idempotent, and refuses a destination that holds another history.
(The PostgreSQL direction is in ``tests/store/postgres/test_cli.py``.)"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

from continuity import frames as fr
from continuity.cli.app import app
from continuity.errors import BadFrame, MigrationConflict
from continuity.maintenance.migrate import migrate_store
from continuity.maintenance.verify import verify_store
from continuity.store.base import BaseStore
from continuity.store.jsonl import JsonlThread, Store
from continuity.store.memory import MemoryStore
from tests.support.narrow import narrow


def _fill(store: BaseStore, thread_id: str, batches: int, *, start: int = 0) -> None:
    t = store.thread(thread_id)
    for b in range(start, start + batches):
        t.append([fr.message("user", f"question {b}"), fr.message("assistant", f"answer {b}")])


def _lines(store: BaseStore, thread_id: str) -> list[bytes]:
    return [line for _seq, line in store.thread(thread_id).read_lines()]


def test_a_copy_keeps_every_byte_and_every_artifact(tmp_path: Path) -> None:
    src = Store(tmp_path / "src", create=True, durable=False)
    _fill(src, "a", 5)
    _fill(src, "b", 2)
    aid = src.artifacts.put(b"a large tool output" * 100)
    src.thread("a").append(
        fr.message("user", content=[fr.ToolResultBlock(tool_use_id="c1", artifact_id=aid)])
    )
    for dst in (MemoryStore(), Store(tmp_path / "dst", create=True)):
        report = migrate_store(src, dst)
        assert [t.thread_id for t in report.threads] == ["a", "b"]
        assert report.artifacts_copied == 1 and report.frames_copied == 12 + 5
        for tid in ("a", "b"):
            assert _lines(dst, tid) == _lines(src, tid)  # byte for byte
            assert dst.thread(tid).head() == src.thread(tid).head()
        assert dst.artifacts.get(aid) == src.artifacts.get(aid)
    assert verify_store(Store(tmp_path / "dst")).ok


def test_running_it_again_copies_only_what_was_added(tmp_path: Path) -> None:
    src = MemoryStore()
    dst = Store(tmp_path / "dst", create=True)
    _fill(src, "a", 3)
    migrate_store(src, dst)
    again = migrate_store(src, dst)
    assert again.frames_copied == 0 and again.threads[0].copied == 0
    _fill(src, "a", 2, start=3)
    later = migrate_store(src, dst)
    assert later.frames_copied == 4
    assert _lines(dst, "a") == _lines(src, "a")


def test_a_destination_with_another_history_is_refused_untouched(tmp_path: Path) -> None:
    src, dst = MemoryStore(), MemoryStore()
    _fill(src, "a", 3)
    _fill(dst, "a", 1, start=7)  # the same thread id, other frames
    before = _lines(dst, "a")
    with pytest.raises(MigrationConflict, match="frame 2 differs") as caught:
        migrate_store(src, dst)
    assert caught.value.thread_id == "a"
    assert _lines(dst, "a") == before
    longer = MemoryStore()
    migrate_store(src, longer)
    _fill(longer, "a", 1, start=3)  # the destination went on: it is not a prefix any more
    with pytest.raises(MigrationConflict, match="source fewer"):
        migrate_store(src, longer)


def test_a_copy_cut_short_goes_on_from_whole_batches(tmp_path: Path) -> None:
    import continuity.maintenance.migrate as migrate_module

    src = MemoryStore()
    _fill(src, "a", 40)  # 81 frames in batches of 2 (and frame 0)
    dst = Store(tmp_path / "dst", create=True)
    calls = 0
    real = type(dst.thread("a")).append_sealed

    def failing(self: JsonlThread, lines: Sequence[bytes], *, durable: bool | None = None) -> range:
        nonlocal calls
        calls += 1
        if calls == 4:
            raise OSError("the disk went away")
        return real(self, lines, durable=durable)

    with pytest.MonkeyPatch.context() as chunks:
        chunks.setattr(migrate_module, "_CHUNK_LINES", 10)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(type(dst.thread("a")), "append_sealed", failing)
            with pytest.raises(OSError):
                migrate_store(src, dst)
        partial = dst.thread("a").head()
        assert partial is not None and 0 < partial.seq < 80
        assert narrow(fr.Envelope, fr.envelope(_lines(dst, "a")[-1])).more is False
        migrate_store(src, dst)
    assert _lines(dst, "a") == _lines(src, "a")


@pytest.mark.parametrize("kind", ["memory", "jsonl"])
def test_sealed_lines_are_checked_before_anything_is_stored(kind: str, tmp_path: Path) -> None:
    src = MemoryStore()
    _fill(src, "a", 2)
    lines = _lines(src, "a")
    dst: BaseStore = MemoryStore() if kind == "memory" else Store(tmp_path / "d", create=True)
    t = dst.thread("a")
    edited = lines[1].replace(b"question 0", b"question X")
    for bad, why in [
        ([lines[0], edited, lines[2]], "does not chain"),
        (lines[1:], "seq 1, not 0"),
        (lines[:2], "inside a batch"),
        ([b"not a line"], "not a sealed line"),
        ([], "no lines"),
    ]:
        with pytest.raises(BadFrame, match=why):
            t.append_sealed(bad)
        assert t.head() is None
    if kind == "jsonl":
        assert not (tmp_path / "d" / "threads" / "a.jsonl").exists()
    assert t.append_sealed(lines[:3]) == range(0, 3)
    with pytest.raises(BadFrame, match="seq 1, not 3"):
        t.append_sealed(lines[1:3])
    assert t.append_sealed(lines[3:]) == range(3, 5)
    assert _lines(dst, "a") == lines


def test_a_thread_cannot_take_another_threads_log() -> None:
    src = MemoryStore()
    _fill(src, "a", 1)
    with pytest.raises(BadFrame, match="thread_created"):
        MemoryStore().thread("b").append_sealed(_lines(src, "a"))


def test_the_cli_migrates_between_folders(tmp_path: Path) -> None:
    src = Store(tmp_path / "src", create=True)
    _fill(src, "a", 3)
    runner = CliRunner()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTINUITY_")}
    done = runner.invoke(app, ["migrate", str(tmp_path / "src"), str(tmp_path / "dst")], env=env)
    assert done.exit_code == 0, done.output
    assert "migrated 1 thread (7 frames copied)" in done.stdout
    assert "[1/1] a: 7 frames copied" in done.stderr
    assert _lines(Store(tmp_path / "dst"), "a") == _lines(src, "a")
    same = runner.invoke(app, ["migrate", str(tmp_path / "src"), str(tmp_path / "src")], env=env)
    assert same.exit_code == 1 and "the same store" in same.stderr
    missing = runner.invoke(app, ["migrate", str(tmp_path / "nope"), str(tmp_path / "x")], env=env)
    assert missing.exit_code == 1 and missing.stderr.startswith("error: ")
    assert not (tmp_path / "x").exists()
