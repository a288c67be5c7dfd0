"""Integrity under damage and misuse: every read checks what it returns, verify names every bad
line, repair moves a damaged tail aside, a store is private, a read-only store serves reads, a
full disk leaves nothing half-written.

The read-only and full-disk tests use the real thing: a read-only bind mount and a small tmpfs
in a private mount namespace (``unshare -m``); they skip, saying why, where that is not allowed.
"""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import msgspec
import pytest

from continuity import frames as fr
from continuity.caches.thread_index import ThreadIndex
from continuity.errors import ContinuityError, CorruptFrame
from continuity.maintenance.verify import first_problem, repair_thread, verify_store
from continuity.retrieval.search import search
from continuity.store.artifacts import FileArtifactStore
from continuity.store.base import Head
from continuity.store.jsonl import Store
from tests.support.narrow import narrow

CLI = [sys.executable, "-m", "continuity"]


def _thread(store: Store, n: int = 30, tid: str = "t", batch: int = 1) -> list[int]:
    """``n`` messages in batches of ``batch``, each naming its number; the lines' offsets."""
    t = store.thread(tid)
    i = 1
    while i <= n:
        size = min(batch, n - i + 1)
        t.append(
            [
                fr.message("user", f"pay alice {j} dollars", message_id=f"m{j}")
                for j in range(i, i + size)
            ]
        )
        i += size
    return _offsets(t.path)


def _offsets(path: Path) -> list[int]:
    out, pos = [], 0
    for line in path.read_bytes().split(b"\n")[:-1]:
        out.append(pos)
        pos += len(line) + 1
    return out


def _edit(path: Path, old: bytes, new: bytes) -> None:
    data = path.read_bytes()
    assert data.count(old) == 1, old
    path.write_bytes(data.replace(old, new))


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().split(b"\n")[:-1]


def _write_lines(path: Path, lines: list[bytes]) -> None:
    path.write_bytes(b"".join(line + b"\n" for line in lines))


# --- reads check what they return -------------------------------------------------------------


def test_a_read_that_starts_at_an_edited_frame_refuses_it(tmp_store: Store) -> None:
    offsets = _thread(tmp_store)
    t = tmp_store.thread("t")
    _edit(t.path, b"alice 5 dollars", b"alice 9 dollars")
    with pytest.raises(CorruptFrame, match=rf"seq 5, byte offset {offsets[5]}: digest"):
        list(t.read(from_seq=5, to_seq=5))
    with pytest.raises(CorruptFrame, match="seq 5"):  # with a right offset hint too
        list(t.read_lines(from_seq=5, to_seq=5, start_offset=offsets[5]))
    # the frames after it chain from its stored digest, which is intact: they read fine
    assert [f.seq for f in t.read(from_seq=6, to_seq=7)] == [6, 7]


def test_a_read_starting_after_a_damaged_digest_refuses_the_first_frame(tmp_store: Store) -> None:
    _thread(tmp_store)
    t = tmp_store.thread("t")
    lines = _lines(t.path)
    line = bytearray(lines[4])
    line[-3] = ord("0") if line[-3] != ord("0") else ord("1")  # still a sealed line
    lines[4] = bytes(line)
    _write_lines(t.path, lines)
    with pytest.raises(CorruptFrame, match=r"seq 5.*digest does not chain"):
        list(t.read(from_seq=5))


def test_a_deleted_line_is_an_error_not_an_empty_answer(tmp_store: Store) -> None:
    _thread(tmp_store, 40)
    t = tmp_store.thread("t")
    lines = _lines(t.path)
    del lines[12]
    _write_lines(t.path, lines)
    with pytest.raises(CorruptFrame, match="frame 12 is missing"):
        list(t.read(from_seq=12, to_seq=12))
    with pytest.raises(CorruptFrame, match="seq 13 where 12 belongs"):
        list(t.read(from_seq=3))


def test_swapped_lines_are_an_error_through_the_offset_index(tmp_store: Store) -> None:
    _thread(tmp_store, 40)
    t = tmp_store.thread("t")
    index = ThreadIndex(t)
    index.refresh()
    lines = _lines(t.path)
    lines[20], lines[21] = lines[21], lines[20]
    _write_lines(t.path, lines)
    for seq in (20, 21):
        with pytest.raises(CorruptFrame):
            list(index.read(seq, seq))
    with pytest.raises(CorruptFrame):
        search(tmp_store, "alice 21")


def test_search_never_shows_an_edited_frame(tmp_store: Store) -> None:
    _thread(tmp_store)
    assert search(tmp_store, "alice 7")  # builds the index
    _edit(tmp_store.thread("t").path, b"alice 7 dollars", b"alice X dollars")
    with pytest.raises(CorruptFrame, match="seq 7"):
        search(tmp_store, "pay alice 7")


@pytest.mark.slow
def test_a_long_line_reads_whole(tmp_store: Store) -> None:
    big = "x" * (20 << 20)  # 20 MB, far past every read chunk
    t = tmp_store.thread("t")
    t.append(fr.message("user", "before"))
    t.append(fr.message("user", big))
    t.append(fr.message("user", "after"))
    frames = list(t.read(from_seq=2))
    assert isinstance(frames[0], fr.MessageAppended)
    assert frames[0].content == [fr.TextBlock(text=big)] and len(frames) == 2
    assert [f.seq for f in t.tail(2)] == [2, 3]


# --- verify names every bad line ---------------------------------------------------------------


def test_verify_reports_every_edited_frame(tmp_store: Store) -> None:
    offsets = _thread(tmp_store)
    path = tmp_store.thread("t").path
    _edit(path, b"alice 2 dollars", b"alice 8 dollars")
    _edit(path, b"alice 17 dollars", b"alice 71 dollars")
    report = verify_store(tmp_store)
    assert [(p.thread_id, p.seq, p.offset) for p in report.problems] == [
        ("t", 2, offsets[2]),
        ("t", 17, offsets[17]),
    ]
    assert all("digest does not chain" in p.message for p in report.problems)
    assert report.frames == 31
    limited = verify_store(tmp_store, limit=1)
    assert len(limited.problems) == 1 and limited.truncated


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        ("delete", [(13, "frame 12 missing before it")]),
        ("duplicate", [(12, "seq 12 again")]),
        ("swap", [(13, "frame 12 missing"), (12, "seq 12 again")]),
        ("seq", [(12, "carries seq 99 where 12 belongs")]),
        ("garbage", [(12, "not a sealed frame")]),
    ],
)
def test_verify_names_moved_and_missing_lines(
    tmp_store: Store, damage: str, expected: list[tuple[int, str]]
) -> None:
    _thread(tmp_store)
    path = tmp_store.thread("t").path
    lines = _lines(path)
    if damage == "delete":
        del lines[12]
    elif damage == "duplicate":
        lines.insert(12, lines[12])
    elif damage == "swap":
        lines[12], lines[13] = lines[13], lines[12]
    elif damage == "seq":
        lines[12] = lines[12].replace(b'"seq":12,', b'"seq":99,')
    else:
        lines[12] = b"not json at all"
    _write_lines(path, lines)
    report = verify_store(tmp_store)
    assert len(report.problems) == len(expected), report.problems
    for problem, (seq, what) in zip(report.problems, expected, strict=True):
        assert problem.seq == seq and what in problem.message
        assert problem.offset is not None and problem.offset >= 0


def test_verify_reports_a_log_shorter_than_its_caches(tmp_store: Store) -> None:
    offsets = _thread(tmp_store)
    ThreadIndex(tmp_store.thread("t")).refresh()
    os.truncate(tmp_store.thread("t").path, offsets[20] + 7)  # mid-line: looks like a torn tail
    report = verify_store(tmp_store)
    (problem,) = report.problems
    assert problem.where == "cache of thread t"
    assert "seq 20" in problem.message and "committed frames are missing" in problem.message


def test_verify_notes_a_log_cut_inside_its_first_batch(tmp_store: Store) -> None:
    _thread(tmp_store, 10, batch=10)
    os.truncate(tmp_store.thread("t").path, 300)
    report = verify_store(tmp_store)
    assert report.ok and report.threads == 0
    assert report.notes == [
        "thread t: 300 bytes and no committed frame (a write in progress, or a crash's torn "
        "tail: the next append quarantines it)"
    ]


def test_a_thread_cut_to_nothing_is_an_error_for_store_wide_reads(tmp_store: Store) -> None:
    """Cut inside its first batch, a thread has no committed frame and is no thread any more:
    a store-wide read that left it out would be silently wrong, since its caches say it had
    frames. Without caches that had seen it (a first batch still being written), it is fine."""
    from continuity.maintenance.stats import list_threads, store_stats

    _thread(tmp_store, 10, batch=10)
    tmp_store.thread("other").append(fr.message("user", "still here"))
    ThreadIndex(tmp_store.thread("t")).refresh()
    os.truncate(tmp_store.thread("t").path, 300)
    for read in (store_stats, list_threads, lambda s: search(s, "still")):
        with pytest.raises(CorruptFrame, match="committed frames are missing") as caught:
            read(tmp_store)
        assert caught.value.thread_id == "t"
    shutil.rmtree(tmp_store.cache_dir)
    assert store_stats(tmp_store).threads == 1  # no caches remember it: a write in progress


def test_verify_notes_jobs_that_never_ended(tmp_store: Store) -> None:
    t = tmp_store.thread("t")
    t.append(fr.JobSpawned(job_id="j1", kind="compaction"))
    t.append(fr.JobSpawned(job_id="j2", kind="compaction"))
    t.append(fr.JobEnded(job_id="j2", status="succeeded"))
    report = verify_store(tmp_store)
    assert report.ok
    assert [n for n in report.notes if "never ended" in n] == [
        "thread t: job j1 started at seq 1 and never ended (it is running, or its process "
        "died: the next compaction runs it again)"
    ]


def test_verify_names_a_damaged_summary_artifact(tmp_store: Store) -> None:
    aid = tmp_store.artifacts.put(b"the summary")
    t = tmp_store.thread("t")
    t.append(fr.message("user", "hi"))
    t.append(
        fr.CompactionCheckpointCreated(
            checkpoint_id="cp",
            cut_rule_id="manual",
            summary_kind="cumulative_v1",
            summary_artifact_id=aid,
            from_seq=1,
            to_seq=1,
        )
    )
    narrow(FileArtifactStore, tmp_store.artifacts).path(aid).write_bytes(b"\x00garbage")
    (problem,) = verify_store(tmp_store).problems
    assert problem.where == f"artifact {aid}" and "referenced by thread t seq 2" in problem.message


# --- repair ------------------------------------------------------------------------------------


def _poison(store: Store, tid: str = "t") -> None:
    """Append a frame the way an older version could: sealed and chained, but a reader refuses
    it (an invalid role)."""
    t = store.thread(tid)
    head = t.head()
    assert head is not None
    body = msgspec.json.encode(
        {
            "type": "message_appended",
            "seq": head.next_seq,
            "ts_ms": 1,
            "message_id": "bad",
            "role": "tool",
            "content": [{"type": "text", "text": "x"}],
            "tokens": 3,
        }
    )
    digest = fr.chain(bytes.fromhex(head.digest), body)
    with open(t.path, "ab") as f:
        f.write(fr.seal(body, digest))


def test_repair_moves_a_poisoned_tail_to_quarantine_and_keeps_the_rest(tmp_store: Store) -> None:
    _thread(tmp_store, 12, batch=3)  # seq 0 + 1..12, batches [0..3], [4..6], [7..9], [10..12]
    sound = _lines(tmp_store.thread("t").path)
    _poison(tmp_store)
    t = tmp_store.thread("t")
    t_index = ThreadIndex(t)
    with pytest.raises(CorruptFrame, match="Invalid enum value 'tool'"):
        list(t.read())
    problem = first_problem(t)
    assert problem is not None and problem.seq == 13
    assert repair_thread(t, dry_run=True) is not None
    assert _lines(t.path)[:-1] == sound  # a dry run moves nothing
    done = repair_thread(t)
    assert done is not None and done.recovery is not None
    assert (done.frames_kept, done.offset) == (13, len(b"".join(s + b"\n" for s in sound)))
    assert _lines(t.path) == sound
    record = msgspec.json.decode(Path(done.recovery.quarantine_file).read_bytes())
    assert b"'tool'" not in record["data_b64"].encode() and record["length"] == done.bytes_moved
    assert verify_store(tmp_store).ok
    assert t.append(fr.message("user", "after")) == range(13, 14)
    assert t_index.problems() == []
    assert repair_thread(t) is None


def test_repair_cuts_whole_batches(tmp_store: Store) -> None:
    offsets = _thread(tmp_store, 12, batch=3)
    t = tmp_store.thread("t")
    _edit(t.path, b"alice 8 dollars", b"alice 0 dollars")  # seq 8, in the batch 7..9
    done = repair_thread(t)
    assert done is not None and (done.offset, done.frames_kept) == (offsets[7], 7)
    head = t.head()
    assert head is not None and head == Head(6, head.digest)
    assert verify_store(tmp_store).ok
    assert [f.seq for f in t.read()] == list(range(7))


@pytest.mark.slow
def test_repair_on_the_command_line(tmp_path: Path) -> None:
    store = Store(tmp_path / "s", create=True)
    _thread(store, 6, batch=2)
    _edit(store.thread("t").path, b"alice 4 dollars", b"alice 5 dollarz")
    run = subprocess.run(
        [*CLI, "--store", str(tmp_path / "s"), "repair", "t"], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    assert "first bad frame: seq 4" in run.stdout and "keeps" in run.stdout
    ok = subprocess.run(
        [*CLI, "--store", str(tmp_path / "s"), "verify"], capture_output=True, text=True
    )
    assert ok.returncode == 0 and "ok: 1 thread, 3 frames" in ok.stdout


# --- a private store ----------------------------------------------------------------------------


@pytest.mark.parametrize("umask", [0o022, 0o000])
def test_a_store_is_private_whatever_the_umask(tmp_path: Path, umask: int) -> None:
    old = os.umask(umask)
    try:
        store = Store(tmp_path / "s", create=True)
        _thread(store, 3)
        store.artifacts.put(b"an output")
        ThreadIndex(store.thread("t")).refresh()
        search(store, "alice")
        store.thread("t").append(fr.message("user", "x"))
    finally:
        os.umask(old)
    for path in [tmp_path / "s", *(tmp_path / "s").rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), (path, oct(mode))


def test_init_makes_an_existing_store_folder_private(tmp_path: Path) -> None:
    (tmp_path / "s").mkdir(mode=0o755)
    os.chmod(tmp_path / "s", 0o755)
    Store(tmp_path / "s", create=True)
    assert stat.S_IMODE((tmp_path / "s").stat().st_mode) == 0o700


# --- a read-only store, a full disk: in a private mount namespace -------------------------------


def _in_namespace(script: str) -> subprocess.CompletedProcess[str]:
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare(1) for a private mount namespace")
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot make a mount namespace here: {probe.stderr.decode().strip()}")
    return subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True)


@pytest.mark.slow
def test_a_read_only_store_serves_every_read_command(tmp_path: Path) -> None:
    root = tmp_path / "s"
    store = Store(root, create=True)
    _thread(store, 40, batch=4)
    search(store, "alice")  # caches built...
    store.thread("t").append(fr.message("user", "pay bob 3 dollars"))  # ...and now stale
    store.thread("u").append(fr.message("user", "never indexed"))
    expected = {}
    reads = {
        "log": ["log", "t", "--from-seq", "38"],
        "compile": ["compile", "t", "--dry-run", "--format", "text"],
        "search": ["search", "pay bob"],
        "stats": ["stats"],
        "sessions": ["sessions"],
        "verify": ["verify"],
    }
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    for name, args in reads.items():  # the answers of a writable copy
        run = subprocess.run([*CLI, "--store", str(copy), *args], capture_output=True, text=True)
        assert run.returncode == 0, (name, run.stderr)
        expected[name] = (run.stdout + run.stderr).replace(str(copy), str(root))
    cli = " ".join(shlex.quote(a) for a in [*CLI, "--store", str(root)])
    steps = [f"mount --bind -o ro {root} {root}", f"cd {tmp_path}"]
    for name, args in reads.items():
        steps.append(f"{cli} {' '.join(map(shlex.quote, args))} > {name}.out 2> {name}.err")
    line = shlex.quote('{"role":"user","text":"x"}')
    script = " && ".join(steps) + f" && echo {line} | {cli} append t; echo append=$?"
    run = _in_namespace(script)
    assert "append=1" in run.stdout, (run.stdout, run.stderr)
    log = root / "threads" / "t.jsonl"
    refusal = f"error: the store is on a read-only file system ({log}) (nothing was written)\n"
    assert run.stderr == refusal
    for name in reads:
        out = (tmp_path / f"{name}.out").read_text() + (tmp_path / f"{name}.err").read_text()
        if name == "stats":  # the cache size differs: the read-only store wrote none
            out = "\n".join(ln for ln in out.splitlines() if "cache" not in ln)
            expected[name] = "\n".join(
                ln for ln in expected[name].splitlines() if "cache" not in ln
            )
        assert out == expected[name], name


@pytest.mark.slow
def test_a_full_disk_leaves_nothing_half_written(tmp_path: Path) -> None:
    mount = tmp_path / "small"
    mount.mkdir()
    code = textwrap.dedent(
        f"""
        import os
        import continuity as c
        from continuity.maintenance.verify import verify_store
        store = c.Store({str(mount / "s")!r}, create=True)
        t = store.thread("t")
        acked = 0
        try:
            while True:
                t.append([c.message("user", "y" * 3000) for _ in range(8)])
                acked += 8
        except OSError as exc:
            print("error", exc.errno, getattr(exc, "__notes__", None))
        size = os.path.getsize(t.path)
        frames = list(t.read())
        whole = sum(len(line) + 1 for _, line in t.read_lines())
        print("frames", len(frames) - 1 == acked, "size", size == whole)
        print("quarantine", os.listdir({str(mount / "s" / "quarantine")!r}))
        print("verify", verify_store(store).ok)
        """
    )
    run = _in_namespace(
        f"mount -t tmpfs -o size=192k tmpfs {mount} && {sys.executable} -c {_quote(code)}"
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [
        "error 28 None",
        "frames True size True",
        "quarantine []",
        "verify True",
    ]


def _quote(s: str) -> str:
    return "'" + s.replace("'", "'\"'\"'") + "'"


# --- damaged caches are caught, not believed ----------------------------------------------------


def _checkpointed(store: Store) -> None:
    from continuity.context.compaction import StrideMessages, run_compaction

    t = store.thread("t")
    for i in range(1, 121):
        t.append(fr.message("user" if i % 2 else "assistant", f"step {i}: deploy the w{i} widget"))
        if i % 30 == 0:
            run_compaction(store, "t", StrideMessages(20))


@pytest.mark.parametrize("field", [0, 1, 2])  # to_seq, seq, offset of a selection record
def test_a_damaged_checkpoint_record_is_never_followed(tmp_store: Store, field: int) -> None:
    import struct

    from continuity.errors import CorruptCache

    _checkpointed(tmp_store)
    index = ThreadIndex(tmp_store.thread("t"))
    index.refresh()
    selection = index.selection()
    assert len(selection) >= 3
    sel = tmp_store.cache_dir / "threads" / "t" / "checkpoints.v1.sel"
    head = tmp_store.thread("t").head()
    assert head is not None
    truth = selection.latest(head.seq, head.seq)
    assert truth is not None
    data = bytearray(sel.read_bytes())
    n = len(data) // 24
    for record in range(n):  # raise each field of each record in turn: never a silent answer
        damaged = bytearray(data)
        value = struct.unpack_from("<Q", damaged, record * 24 + field * 8)[0]
        struct.pack_into("<Q", damaged, record * 24 + field * 8, value + (1 << 40))
        sel.write_bytes(bytes(damaged))
        try:
            got = ThreadIndex(tmp_store.thread("t")).selection().latest(head.seq, head.seq)
        except CorruptCache:
            continue
        assert got == truth, (record, field)
    sel.write_bytes(bytes(data))


def test_every_reader_rebuilds_a_damaged_selection_file(tmp_store: Store) -> None:
    """Not only compile: `log` (through the retracted spans), live messages and records open a
    source too, and a damaged checkpoint selection is rebuilt there, not reported as an error
    (found by the fault-injection run: a flipped byte made `continuity log` exit 1)."""
    from continuity.context.retract import live_messages, retracted_spans

    _checkpointed(tmp_store)
    t = tmp_store.thread("t")
    ThreadIndex(t).refresh()
    before = (retracted_spans(t), [m.seq for m in live_messages(t)])
    sel = tmp_store.cache_dir / "threads" / "t" / "checkpoints.v1.sel"
    data = bytearray(sel.read_bytes())
    data[1] ^= 0x06  # the to_seq of the first record: out of (to_seq, seq) order
    sel.write_bytes(bytes(data))
    assert (retracted_spans(t), [m.seq for m in live_messages(t)]) == before
    assert ThreadIndex(t).problems() == []  # rebuilt


def test_a_message_record_naming_another_message_never_steers_compile(tmp_store: Store) -> None:
    """A damaged record of the message index whose seq names another message (still a message
    frame, so nothing looks wrong when it is read) must not put that message in the window
    (found by the fault-injection run: `compile` gave another message, exit 0)."""
    from continuity.caches.thread_index import MESSAGE_RECORD
    from continuity.context.compiler import compile_context

    _thread(tmp_store, 60)
    t = tmp_store.thread("t")
    limits = fr.Limits(recent_messages=8)
    truth = compile_context(t, limits=limits, log=False).bundle
    path = tmp_store.cache_dir / "threads" / "t" / "messages.v1.bin"
    data = path.read_bytes()
    for ordinal in (55, 57, 59):  # inside the window: point it at an older message
        damaged = bytearray(data)
        seq, tokens, role = MESSAGE_RECORD.unpack_from(damaged, ordinal * MESSAGE_RECORD.size)
        MESSAGE_RECORD.pack_into(damaged, ordinal * MESSAGE_RECORD.size, seq - 40, tokens, role)
        path.write_bytes(bytes(damaged))
        assert compile_context(t, limits=limits, log=False).bundle == truth, ordinal
        path.write_bytes(data)


def test_a_damaged_message_record_never_gives_a_wrong_count() -> None:
    """The message index's bisection checks each record it looks at against its neighbours:
    with one record damaged, every count is the true one or :class:`CorruptCache` (found by the
    fault-injection run: a record's seq raised by 67 moved compile's window, exit 0)."""
    import random

    from continuity.caches.thread_index import MESSAGE_RECORD, MessageRecords
    from continuity.errors import CorruptCache

    rng = random.Random(5)
    seqs = sorted(rng.sample(range(1, 5_000), 700))
    data = b"".join(MESSAGE_RECORD.pack(s, 10, 1) for s in seqs)
    truth = MessageRecords(data, len(seqs))
    raised = 0
    for _ in range(300):
        i = rng.randrange(len(seqs))
        damaged = bytearray(data)
        new = max(0, seqs[i] + rng.choice([-1, 1]) * rng.randrange(1, 2_000))
        MESSAGE_RECORD.pack_into(damaged, i * MESSAGE_RECORD.size, new, 10, 1)
        records = MessageRecords(bytes(damaged), len(seqs))
        for probe in (seqs[i] - 1, seqs[i], new, new + 1, rng.randrange(5_000)):
            try:
                got = records.count_upto(probe)
            except CorruptCache:
                raised += 1
                continue
            if (i == 0 or seqs[i - 1] < new) and (i == len(seqs) - 1 or new < seqs[i + 1]):
                continue  # still in order: the frame there is no such message (compile checks)
            assert got == truth.count_upto(probe), (i, new, probe)
    assert raised > 0


def test_search_rebuilds_a_damaged_index_and_finds_the_same(tmp_store: Store) -> None:
    _checkpointed(tmp_store)
    before = search(tmp_store, "deploy w77 widget", thread="t")
    folder = tmp_store.cache_dir / "search" / "t"
    for name in sorted(p.name for p in folder.iterdir() if p.suffix in (".bin", ".jsonl")):
        data = (folder / name).read_bytes()
        (folder / name).write_bytes(data[: len(data) // 2] + b"\xff" * (len(data) - len(data) // 2))
        assert search(tmp_store, "deploy w77 widget", thread="t") == before, name


@pytest.mark.slow
def test_search_names_a_damaged_summary_artifact(tmp_path: Path) -> None:
    store = Store(tmp_path / "s", create=True)
    _checkpointed(store)
    hits = search(store, "widget deploy step", k=50)
    summary_hit = next(h for h in hits if h.kind == "summary")
    (checkpoint,) = store.thread("t").read(from_seq=summary_hit.seq, to_seq=summary_hit.seq)
    assert isinstance(checkpoint, fr.CompactionCheckpointCreated)
    summary_path = narrow(FileArtifactStore, store.artifacts).path(checkpoint.summary_artifact_id)
    summary_path.write_bytes(b"\x00damaged")
    with pytest.raises(ContinuityError):
        search(store, "widget deploy step", k=50)
    told: list[str] = []
    again = search(store, "widget deploy step", k=50, on_damage=told.append)
    assert [h.seq for h in again] == [h.seq for h in hits]
    assert told == [
        f"thread t seq {summary_hit.seq}: summary artifact {checkpoint.summary_artifact_id} is "
        "missing or damaged; its text is not searched or shown (run `continuity verify`)"
    ]
    run = subprocess.run(
        [*CLI, "--store", str(tmp_path / "s"), "search", "widget deploy step", "--k", "50"],
        capture_output=True,
        text=True,
    )
    # the hits are shown and the gap is named on stderr (like compile's warnings)
    assert run.returncode == 0 and run.stderr == f"warning: {told[0]}\n"
    assert f"{summary_hit.seq}" in run.stdout


def test_verify_checks_the_search_index_checksums(tmp_store: Store) -> None:
    _checkpointed(tmp_store)
    search(tmp_store, "deploy", thread="t")
    assert verify_store(tmp_store).ok
    docs = tmp_store.cache_dir / "search" / "t" / "docs.bin"
    data = bytearray(docs.read_bytes())
    data[len(data) // 2] ^= 0x10
    docs.write_bytes(bytes(data))
    (problem,) = verify_store(tmp_store).problems
    assert (problem.where, problem.message) == (
        "search index of thread t",
        "docs.bin does not match its checksum",
    )


def test_verify_tells_a_planted_tail_from_a_crash(tmp_store: Store) -> None:
    _thread(tmp_store, 9, batch=3)
    path = tmp_store.thread("t").path
    lines = _lines(path)
    with open(path, "ab") as f:
        f.write(lines[2] + b"\n")  # seq 2 again, marked `more`: no crash writes that
    (problem,) = verify_store(tmp_store).problems
    assert problem.seq == 10 and "is seq 2 where 10 would come next" in problem.message
    _thread(tmp_store, 0)
    path.write_bytes(b"".join(line + b"\n" for line in lines) + lines[3][:40])  # a torn line
    report = verify_store(tmp_store)
    assert report.ok and "bytes past the last committed frame" in report.notes[0]


def test_compile_rebuilds_damaged_caches_and_gives_the_same_bundle(tmp_store: Store) -> None:
    from continuity.context.compiler import compile_context

    _checkpointed(tmp_store)
    truth = compile_context(tmp_store, "t", log=False)
    assert truth.decision.checkpoints  # the hierarchy is in play
    folder = tmp_store.cache_dir / "threads" / "t"
    for name in ("checkpoints.v1.sel", "checkpoints.v1.jsonl"):
        good = (folder / name).read_bytes()
        damaged = bytearray(good)
        damaged[len(damaged) // 3] ^= 0xFF
        (folder / name).write_bytes(bytes(damaged))
        assert compile_context(tmp_store, "t", log=False).bundle_id == truth.bundle_id, name
        assert ThreadIndex(tmp_store.thread("t")).problems() == []  # rebuilt


@pytest.mark.slow
@pytest.mark.parametrize("file", ["seg-0000000000-256.bin", "docs.bin"])
def test_search_never_ranks_with_a_damaged_posting_or_length(tmp_store: Store, file: str) -> None:
    """Every byte of the first segment and of docs.bin changed in turn (a sample): search gives
    the undamaged answer, scores included, or rebuilds to it; it never ranks with the damage."""
    import random

    words = ["epaulette", "harbour", "lantern", "quarry", "saffron", "thimble", "walnut"]
    t = tmp_store.thread("t")
    rnd = random.Random(7)
    for i in range(300):
        a, b = rnd.sample(words, 2)
        t.append(fr.message("user", f"mk{i:04d}q the {a} and the {b}"))
    query = "mk0003q epaulette"
    truth = search(tmp_store, query, thread="t")
    path = tmp_store.cache_dir / "search" / "t" / file
    good = path.read_bytes()
    for at in range(0, len(good), max(1, len(good) // 150)):
        damaged = bytearray(good)
        damaged[at] ^= 0x57
        path.write_bytes(bytes(damaged))
        assert search(tmp_store, query, thread="t") == truth, at
        path.write_bytes(good)


def test_a_read_from_the_end_checks_the_newest_frame_before_giving_it(tmp_store: Store) -> None:
    _thread(tmp_store, 10)
    t = tmp_store.thread("t")
    _edit(t.path, b"alice 10 dollars", b"alice 99 dollars")
    with pytest.raises(CorruptFrame, match=r"seq 10.*digest does not chain"):
        t.tail(1)
    with pytest.raises(CorruptFrame, match="seq 10"):
        next(t.read_lines_backwards())


def test_a_damaged_length_elsewhere_never_shifts_the_scores(tmp_store: Store) -> None:
    """Every document's length feeds BM25's average: a length changed in a document that is
    not a hit would move every score. The manifest keeps their sum; search checks it."""
    import struct

    words = ["epaulette", "harbour", "lantern", "quarry", "saffron", "thimble", "walnut"]
    t = tmp_store.thread("t")
    for i in range(300):
        t.append(fr.message("user", f"mk{i:04d}q the {words[i % 7]} and the {words[i * 3 % 7]}"))
    query = "mk0003q saffron"
    truth = search(tmp_store, query, thread="t")
    docs = tmp_store.cache_dir / "search" / "t" / "docs.bin"
    good = docs.read_bytes()
    for record in (0, 150, 299):  # seq u64, then the length u32
        damaged = bytearray(good)
        struct.pack_into("<I", damaged, record * 16 + 8, 999)
        docs.write_bytes(bytes(damaged))
        assert search(tmp_store, query, thread="t") == truth, record
        docs.write_bytes(good)


@pytest.mark.slow
def test_repair_streams_a_large_tail_into_its_quarantine_record(tmp_store: Store) -> None:
    import base64

    t = tmp_store.thread("t")
    t.append(fr.message("user", "keep me"))
    t.append(fr.message("user", "bad " + "y" * (7 << 20)))  # several base64 chunks
    t.append(fr.message("user", "after it"))
    whole = t.path.read_bytes()
    at = _offsets(t.path)[2]
    _edit(t.path, b"bad yyy", b"BAD yyy")
    damaged = t.path.read_bytes()
    done = repair_thread(t)
    assert done is not None and done.recovery is not None and done.offset == at
    record = msgspec.json.decode(Path(done.recovery.quarantine_file).read_bytes())
    assert base64.b64decode(record["data_b64"]) == damaged[at:]
    assert record["length"] == len(whole) - at
    assert t.path.read_bytes() == whole[:at]
