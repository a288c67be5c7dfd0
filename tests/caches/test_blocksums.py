"""Every per-thread cache file says whether it is whole (issue 26): block checksums beside each
data file and a checksum of the manifest itself. A damaged byte anywhere, in a block a read
touches or in the sums themselves, is never served: readers rebuild from the log (saying so on
stderr) and give the answer an undamaged cache gives; ``verify`` names the file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from continuity import frames as fr
from continuity.caches.blocksums import BLOCK, SUM, CheckedFile, block_sums, file_check, tail_of
from continuity.caches.thread_index import ThreadIndex
from continuity.maintenance.verify import verify_store
from continuity.store.jsonl import Store
from continuity.summary import CUMULATIVE_V1
from tests.support.compile import checkpoint, put_summary

DATA = (
    "offsets.v1.u64",
    "messages.v1.bin",
    "checkpoints.v1.jsonl",
    "checkpoints.v1.sel",
    "checkpoints.v1.other",
    "marks.v1.jsonl",
)


# --- the format -------------------------------------------------------------------------------


def _file(tmp_path: Path, data: bytes) -> CheckedFile:
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    (tmp_path / "f.bin.b3").write_bytes(block_sums(data))
    return CheckedFile.open(path, len(data), file_check(block_sums(data), tail_of(data, len(data))))


@pytest.mark.parametrize("size", [0, 1, BLOCK - 1, BLOCK, BLOCK + 1, 5 * BLOCK + 17])
def test_reads_of_a_whole_file_return_its_bytes(tmp_path: Path, size: int) -> None:
    data = bytes((i * 7 + 3) % 256 for i in range(size))
    f = _file(tmp_path, data)
    assert f.pread(size + 10, 0) == data
    for at, n in [(0, 1), (BLOCK - 3, 9), (size // 2, 100), (max(0, size - 1), 5)]:
        assert f.pread(n, at) == data[at : at + n]
    f.check_span(data, 0, size)


def test_a_flipped_byte_in_any_block_is_refused(tmp_path: Path) -> None:
    data = bytes(range(256)) * (3 * BLOCK // 256) + b"tail"
    for at in (0, BLOCK + 5, 3 * BLOCK - 1, len(data) - 1):
        f = _file(tmp_path, data)
        damaged = bytearray(data)
        damaged[at] ^= 0x10
        (tmp_path / "f.bin").write_bytes(bytes(damaged))
        if at >= 3 * BLOCK:  # the partial last block is checked when the file is opened
            with pytest.raises(ValueError, match="does not match its checksum"):
                _file_reopened(tmp_path, data)
            continue
        assert f.pread(2, 3 * BLOCK) == b"ta"  # a block it does not touch is not read
        with pytest.raises(ValueError, match=f"block {at // BLOCK} does not match"):
            f.pread(1, at)


def _file_reopened(tmp_path: Path, data: bytes) -> CheckedFile:
    check = file_check(block_sums(data), tail_of(data, len(data)))
    return CheckedFile.open(tmp_path / "f.bin", len(data), check)


def test_damaged_or_short_sums_are_refused_when_opened(tmp_path: Path) -> None:
    data = b"x" * (2 * BLOCK + 100)
    _file(tmp_path, data)
    sums = tmp_path / "f.bin.b3"
    good = sums.read_bytes()
    assert len(good) == 2 * SUM
    sums.write_bytes(good[:-1] + bytes([good[-1] ^ 1]))
    with pytest.raises(ValueError, match="does not match its checksum"):
        _file_reopened(tmp_path, data)
    sums.write_bytes(good[:SUM])
    with pytest.raises(ValueError, match="shorter than its manifest"):
        _file_reopened(tmp_path, data)
    sums.write_bytes(good + b"past the committed sums: ignored")
    assert _file_reopened(tmp_path, data).pread(len(data), 0) == data


# --- a thread's caches ------------------------------------------------------------------------


def _fill(store: Store, n: int = 700) -> None:
    """A thread whose files span several 4 KiB blocks: messages, records, and checkpoints
    (cumulative ones with real summaries, and a few of another kind)."""
    thread = store.thread("t")
    thread.append(fr.ThreadCreated(title="blocks"))
    for i in range(n):
        batch: list[fr.Frame] = [
            fr.message("user" if i % 2 else "assistant", f"message {i} " * (1 + i % 7))
        ]
        if i % 5 == 4:
            batch.append(fr.RecordAppended(kind="test.decision", key=f"k{i}", data={"i": i}))
        if i % 9 == 8:
            head = thread.head()
            assert head is not None
            kind = "other_v1" if i % 27 == 26 else CUMULATIVE_V1
            aid = put_summary(store, head.seq - 3, f"up to {i}", thread_id="t", kind=kind)
            batch.append(checkpoint(f"cp{i}", head.seq - 3, aid, kind=kind))
        thread.append(batch)


@pytest.fixture()
def cached(tmp_store: Store) -> Store:
    store = tmp_store
    _fill(store)
    log = store.thread("t").open_log()
    assert log is not None
    with log:
        assert log.size() > 65536  # over the size that keeps per-thread caches (ADR 0031)
    assert ThreadIndex(store.thread("t")).refresh().mode == "rebuilt"
    return store


def test_files_span_blocks(cached: Store) -> None:
    folder = cached.cache_dir / "threads" / "t"
    for name in ("offsets.v1.u64", "messages.v1.bin", "marks.v1.jsonl", "checkpoints.v1.jsonl"):
        assert (folder / name).stat().st_size > BLOCK, name
        assert (folder / f"{name}.b3").stat().st_size >= SUM


# (the sorted checkpoint files are under one block here, so their sums files are empty)
SUMMED = ("offsets.v1.u64", "messages.v1.bin", "checkpoints.v1.jsonl", "marks.v1.jsonl")


@pytest.mark.parametrize("name", [*DATA, *(f"{n}.b3" for n in SUMMED), "manifest.v1.json"])
@pytest.mark.parametrize("damage", ["flip", "zero", "cut"])
def test_damage_to_any_cache_file_is_named_by_verify(cached: Store, name: str, damage: str) -> None:
    path = cached.cache_dir / "threads" / "t" / name
    data = path.read_bytes()
    assert data, f"{name} is empty in this thread"
    if damage == "flip":
        at = len(data) // 3
        path.write_bytes(data[:at] + bytes([data[at] ^ 0x04]) + data[at + 1 :])
    elif damage == "zero":
        path.write_bytes(b"")
    else:
        path.write_bytes(data[: len(data) // 2])
    report = verify_store(cached)
    assert not report.ok
    assert [p.where for p in report.problems] == ["cache of thread t"]
    message = report.problems[0].message
    base = name.removesuffix(".b3").removesuffix(".json")
    assert base.split(".")[0] in message, message


@pytest.mark.slow
def test_a_flipped_token_count_is_never_served(cached: Store) -> None:
    """A token estimate in the message records decides which messages fit the window; a
    damaged one would change what compile sends. The block it sits in fails its checksum: the
    caches are rebuilt, the bundle is the undamaged one, and stderr says so."""
    script = (
        "import sys, msgspec\n"
        "from continuity import Limits, Store, compile_context\n"
        "r = compile_context(Store(sys.argv[1]), 't', limits=Limits(recent_messages=400,"
        " budget_tokens=3000), log=False)\n"
        "print(msgspec.json.encode(r.bundle).decode())\n"
    )
    run = [sys.executable, "-c", script, str(cached.root)]
    env = {"PATH": "/usr/bin:/bin"}
    want = subprocess.run(run, capture_output=True, text=True, check=True, env=env)
    assert want.stderr == ""
    path = cached.cache_dir / "threads" / "t" / "messages.v1.bin"
    data = bytearray(path.read_bytes())
    n = len(data) // 16
    for record in range(n - 60, n):  # the window's records, in whole blocks and the last one
        data[record * 16 + 8] ^= 0x40  # the token estimate's low byte
    path.write_bytes(bytes(data))
    got = subprocess.run(run, capture_output=True, text=True, check=True, env=env)
    assert got.stdout == want.stdout
    assert "messages.v1.bin" in got.stderr and "rebuilt from the log" in got.stderr
    assert verify_store(cached).ok  # rebuilt whole
