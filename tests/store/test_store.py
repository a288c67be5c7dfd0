"""The store: the contract every backend passes (``continuity.testing.StoreContract``, run here
on the in-memory model and the JSONL store), then what only the JSONL backend has (layout,
bisection, recovery of torn tails, corruption)."""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from continuity import frames as fr
from continuity.errors import (
    BadFrame,
    CorruptFrame,
    InvalidThreadId,
    SeqConflict,
    StoreNotFound,
)
from continuity.store.base import (
    BaseStore,
    Recovery,
    seal_batch,
    validate_thread_id,
)
from continuity.store.jsonl import JsonlThread, Store
from continuity.store.memory import MemoryStore
from continuity.testing import (
    FIXED_MS,
    INVALID_THREAD_IDS,
    VALID_THREAD_IDS,
    FixedClock,
    StoreContract,
    drive_reference_batches,
    msg,
    stored_lines,
    verify_chain,
)


@pytest.mark.parametrize("thread_id", INVALID_THREAD_IDS)
def test_validate_thread_id_rejects(thread_id: str) -> None:
    with pytest.raises(InvalidThreadId):
        validate_thread_id(thread_id)


@pytest.mark.parametrize("thread_id", VALID_THREAD_IDS)
def test_validate_thread_id_accepts(thread_id: str) -> None:
    assert validate_thread_id(thread_id) == thread_id


def test_validate_thread_id_rejects_non_strings() -> None:
    with pytest.raises(InvalidThreadId):
        validate_thread_id(None)  # type: ignore[arg-type]
    with pytest.raises(InvalidThreadId):
        validate_thread_id(b"abc")  # type: ignore[arg-type]


def test_error_messages_name_what_went_wrong() -> None:
    conflict = SeqConflict("t", 3, 5)
    assert (conflict.thread_id, conflict.expected, conflict.actual) == ("t", 3, 5)
    assert (
        str(conflict) == "seq conflict on thread 't': expected next seq 3, the log's next seq is 5"
    )
    corrupt = CorruptFrame("t", None, 17, "not a sealed frame")
    assert (corrupt.thread_id, corrupt.seq, corrupt.offset) == ("t", None, 17)
    assert str(corrupt) == (
        "corrupt frame in thread 't' at unknown seq, byte offset 17: not a sealed frame"
    )
    assert "seq 4," in str(CorruptFrame("t", 4, 0, "x"))
    assert isinstance(InvalidThreadId("x"), ValueError) and isinstance(BadFrame("x"), ValueError)


class TestMemoryStore(StoreContract):
    def make_store(self, path: Path, clock: Callable[[], int]) -> BaseStore:
        return MemoryStore(clock=clock)


class TestJsonlStore(StoreContract):
    def make_store(self, path: Path, clock: Callable[[], int]) -> BaseStore:
        return Store(path, create=True, durable=False, clock=clock)


# --- both backends agree byte for byte --------------------------------------------------------


def test_jsonl_files_hold_exactly_the_reference_lines(store_path: Path) -> None:
    """Beyond the contract's agreement of read lines: the files on disk are those lines."""
    memory = MemoryStore(clock=FixedClock())
    jsonl = Store(store_path, create=True, durable=False, clock=FixedClock())
    drive_reference_batches(memory)
    drive_reference_batches(jsonl)
    for tid in ("a", "b"):
        lines = stored_lines(memory.thread(tid))
        assert (store_path / "threads" / f"{tid}.jsonl").read_bytes() == b"".join(
            line + b"\n" for line in lines
        )


def test_seal_batch_is_deterministic_and_does_not_depend_on_the_backend() -> None:
    batch = [msg(1), msg(2)]
    lines, head = seal_batch("t", batch, None, now_ms=7)
    again, head2 = seal_batch("t", batch, None, now_ms=7)
    assert lines == again and head == head2
    assert len(lines) == 3 and head.seq == 2
    verify_chain([line[:-1] for line in lines])
    later, _ = seal_batch("t", [msg(3)], head, now_ms=8)
    verify_chain([line[:-1] for line in [*lines, *later]])


# --- JSONL only -------------------------------------------------------------------------------


def log_path(store: Store, tid: str) -> Path:
    return store.root / "threads" / f"{tid}.jsonl"


def line_offsets(data: bytes) -> list[int]:
    """The byte offset of each line of ``data`` (which ends with a newline)."""
    offsets = [0]
    for i, byte in enumerate(data):
        if byte == 0x0A:
            offsets.append(i + 1)
    offsets.pop()
    return offsets


def sealed_batch(thread: JsonlThread, frames: list[fr.Frame]) -> list[bytes]:
    """The lines an append of ``frames`` would write now (each with its newline)."""
    lines, _ = seal_batch(thread.id, frames, thread.head(), now_ms=FIXED_MS)
    return lines


class TestJsonlLayout:
    def test_missing_store(self, tmp_path: Path) -> None:
        with pytest.raises(StoreNotFound, match="no continuity store"):
            Store(tmp_path / "nowhere")
        (tmp_path / "plain").mkdir()
        with pytest.raises(StoreNotFound):
            Store(tmp_path / "plain")
        assert not (tmp_path / "nowhere").exists()

    def test_create_makes_the_layout(self, tmp_path: Path) -> None:
        store = Store(tmp_path / "s", create=True, durable=False)
        for sub in ("threads", "artifacts", "quarantine", "cache"):
            assert (tmp_path / "s" / sub).is_dir()
        marker = json.loads((tmp_path / "s" / "store.json").read_bytes())
        assert marker == {"format": "continuity-store", "version": 1}
        assert store.cache_dir == tmp_path / "s" / "cache"
        assert Store(tmp_path / "s").threads() == []  # opens without create now

    def test_init_layout_is_idempotent_and_keeps_data(self, tmp_path: Path) -> None:
        store = Store(tmp_path / "s", create=True, durable=False)
        store.thread("t").append(msg(1))
        marker = (tmp_path / "s" / "store.json").read_bytes()
        store.init_layout()
        again = Store(tmp_path / "s", create=True, durable=False)
        assert (tmp_path / "s" / "store.json").read_bytes() == marker
        assert [f.seq for f in again.thread("t").read()] == [0, 1]
        # a missing sub-folder is put back
        (tmp_path / "s" / "cache").rmdir()
        again.init_layout()
        assert (tmp_path / "s" / "cache").is_dir()

    def test_init_refuses_a_non_empty_folder_that_is_not_a_store(self, tmp_path: Path) -> None:
        folder = tmp_path / "mine"
        folder.mkdir()
        (folder / "notes.txt").write_text("precious")
        with pytest.raises(StoreNotFound, match="non-empty"):
            Store(folder, create=True)
        assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]
        a_file = tmp_path / "file"
        a_file.write_text("x")
        with pytest.raises(StoreNotFound, match="not a folder"):
            Store(a_file, create=True)
        empty = tmp_path / "empty"
        empty.mkdir()
        Store(empty, create=True, durable=False)
        assert (empty / "store.json").is_file()

    def test_a_thread_is_one_jsonl_file(self, tmp_store: Store) -> None:
        t = tmp_store.thread("t")
        t.append([msg(1), msg(2)])
        data = log_path(tmp_store, "t").read_bytes()
        assert data.endswith(b"\n") and data.count(b"\n") == 3
        assert data.splitlines() == stored_lines(t)
        assert isinstance(t, JsonlThread) and t.path == log_path(tmp_store, "t")

    def test_reopened_store_continues_the_thread(
        self, tmp_store: Store, open_store: Callable[..., Store]
    ) -> None:
        tmp_store.thread("t").append([msg(1), msg(2)])
        reopened = open_store()
        assert reopened.threads() == ["t"]
        assert reopened.thread("t").append(msg(3)) == range(3, 4)
        verify_chain(stored_lines(tmp_store.thread("t")))

    def test_durable_append(self, tmp_path: Path) -> None:
        store = Store(tmp_path / "s", create=True, durable=True)
        t = store.thread("t")
        assert t.append(msg(1)) == range(1, 2)
        assert t.append(msg(2), durable=False) == range(2, 3)
        assert [f.seq for f in t.read()] == [0, 1, 2]

    def test_threads_ignores_other_files_and_failed_first_appends(self, tmp_store: Store) -> None:
        tmp_store.thread("real").append(msg(1))
        (tmp_store.root / "threads" / "notes.txt").write_text("x")
        (tmp_store.root / "threads" / ".real.jsonl.swp").write_text("")
        with pytest.raises(SeqConflict):
            tmp_store.thread("failed").append(msg(1), expected_seq=7)
        assert tmp_store.threads() == ["real"]

    def test_a_thread_whose_only_batch_was_torn_is_not_listed(self, tmp_store: Store) -> None:
        t = tmp_store.thread("t")
        half = b"".join(sealed_batch(t, [msg(1), msg(2)]))[:-40]
        log_path(tmp_store, "t").write_bytes(half)
        assert t.head() is None and not t.exists()
        assert tmp_store.threads() == []
        assert t.append(msg(1)) == range(1, 2)
        assert tmp_store.threads() == ["t"]


class TestJsonlBisection:
    @pytest.fixture
    def big(self, tmp_store: Store) -> JsonlThread:
        """A log of a few hundred KiB with lines of random length (some bigger than a chunk)."""
        seed = random.randrange(2**32)
        print(f"random seed: {seed}")
        rng = random.Random(seed)
        t = tmp_store.thread("big")
        n = 1
        while n < 1500:
            batch = []
            for _ in range(rng.randint(1, 8)):
                size = rng.choice((0, 10, 100, 400, 1000)) if rng.random() > 0.003 else 150_000
                batch.append(msg(n, text="x" * size))
                n += 1
            t.append(batch)
        assert log_path(tmp_store, "big").stat().st_size > 4 * (1 << 16)
        return t

    def test_offset_of_matches_a_linear_scan(self, big: JsonlThread) -> None:
        data = big.path.read_bytes()
        offsets = line_offsets(data)
        for seq, offset in enumerate(offsets):
            assert json.loads(data[offset : data.index(b"\n", offset)])["seq"] == seq
        check = sorted({0, 1, 2, len(offsets) - 2, len(offsets) - 1, *range(0, len(offsets), 7)})
        for seq in check:
            assert big.offset_of(seq) == offsets[seq], f"seq {seq}"
        assert big.offset_of(len(offsets)) is None
        assert big.offset_of(10**9) is None
        assert big.offset_of(-1) is None

    def test_reads_in_the_middle_of_a_big_log(self, big: JsonlThread) -> None:
        lines = big.path.read_bytes().splitlines()
        n = len(lines)
        for from_seq in (0, 1, n // 3, n // 2, n - 5, n - 1):
            got = list(big.read_lines(from_seq=from_seq, to_seq=from_seq + 3))
            expect = [(s, lines[s]) for s in range(from_seq, min(n, from_seq + 4))]
            assert got == expect
        assert [f.seq for f in big.tail(4)] == list(range(n - 4, n))
        verify_chain([line for _s, line in big.read_lines()])

    def test_offset_of_a_missing_thread(self, tmp_store: Store) -> None:
        assert tmp_store.thread("none").offset_of(0) is None

    def test_read_lines_start_offset(
        self, tmp_store: Store, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        t = tmp_store.thread("t")
        t.append([msg(i) for i in range(1, 30)])
        data = t.path.read_bytes()
        offsets = line_offsets(data)
        expect = list(t.read_lines(from_seq=10, to_seq=12))
        # wrong offsets are ignored: another line's start, mid-line, past the end, negative
        for wrong in (offsets[3], offsets[10] + 1, offsets[10] - 1, len(data), len(data) + 99, -5):
            assert list(t.read_lines(from_seq=10, to_seq=12, start_offset=wrong)) == expect

        # the right offset is used without searching for it
        def no_search(*args: object) -> None:
            raise AssertionError("searched although the offset was right")

        monkeypatch.setattr(JsonlThread, "_locate", no_search)
        assert list(t.read_lines(from_seq=10, to_seq=12, start_offset=offsets[10])) == expect
        with pytest.raises(AssertionError, match="searched"):
            list(t.read_lines(from_seq=10, to_seq=12, start_offset=offsets[9]))


class TestJsonlRecovery:
    @pytest.fixture
    def reports(self) -> list[Recovery]:
        return []

    @pytest.fixture
    def store(self, store_path: Path, clock: FixedClock, reports: list[Recovery]) -> Store:
        return Store(
            store_path, create=True, durable=False, clock=clock, on_recovery=reports.append
        )

    @pytest.fixture
    def thread(self, store: Store) -> JsonlThread:
        t = store.thread("t")
        t.append([msg(1), msg(2)])
        t.append(msg(3))
        return t

    def assert_quarantined(
        self, store: Store, reports: list[Recovery], *, offset: int, data: bytes, reason: str
    ) -> Recovery:
        assert len(reports) == 1 and store.recoveries == reports
        rec = reports[0]
        assert (rec.thread_id, rec.offset, rec.length) == ("t", offset, len(data))
        assert reason in rec.reason
        assert rec.time_ms > 0
        qfile = Path(rec.quarantine_file)
        assert qfile.parent == store.root / "quarantine"
        record = json.loads(qfile.read_bytes())
        assert record["thread_id"] == "t"
        assert record["offset"] == offset and record["length"] == len(data)
        assert reason in record["reason"] and record["time_ms"] == rec.time_ms
        assert base64.b64decode(record["data_b64"]) == data
        assert store.quarantined() == [rec]
        return rec

    def test_torn_last_line_is_hidden_then_quarantined(
        self, store: Store, thread: JsonlThread, reports: list[Recovery]
    ) -> None:
        good = thread.path.read_bytes()
        head = thread.head()
        torn = sealed_batch(thread, [msg(4)])[0][:-25]
        with thread.path.open("ab") as f:
            f.write(torn)
        # readers never see the torn line
        assert thread.head() == head
        assert [f.seq for f in thread.read()] == [0, 1, 2, 3]
        assert [f.seq for f in thread.tail(2)] == [2, 3]
        assert thread.offset_of(4) is None
        assert reports == [] and store.quarantined() == []
        # the next append moves it aside and takes its place
        assert thread.append(msg(5)) == range(4, 5)
        self.assert_quarantined(store, reports, offset=len(good), data=torn, reason="torn")
        lines = stored_lines(thread)
        verify_chain(lines)
        assert thread.path.read_bytes() == good + lines[4] + b"\n"
        last = thread.tail(1)[0]
        assert isinstance(last, fr.MessageAppended) and last.message_id == "m5"

    def test_a_lone_fragment_without_newline_is_torn(
        self, store: Store, thread: JsonlThread, reports: list[Recovery]
    ) -> None:
        size = thread.path.stat().st_size
        with thread.path.open("ab") as f:
            f.write(b"{")
        thread.append(msg(4))
        self.assert_quarantined(store, reports, offset=size, data=b"{", reason="torn")

    def test_unparsable_last_complete_line_is_quarantined(
        self, store: Store, thread: JsonlThread, reports: list[Recovery]
    ) -> None:
        size = thread.path.stat().st_size
        junk = b'{"type":"message_appended","seq":4,"garbage\n'
        with thread.path.open("ab") as f:
            f.write(junk)
        assert thread.append(msg(4)) == range(4, 5)
        self.assert_quarantined(store, reports, offset=size, data=junk, reason="unparsable")
        verify_chain(stored_lines(thread))

    def test_two_unparsable_lines_are_not_guessed_at(
        self, store: Store, thread: JsonlThread, reports: list[Recovery]
    ) -> None:
        with thread.path.open("ab") as f:
            f.write(b"junk one\njunk two\n")
        before = thread.path.read_bytes()
        with pytest.raises(CorruptFrame):
            thread.append(msg(4))
        assert thread.path.read_bytes() == before
        assert reports == [] and store.quarantined() == []

    @pytest.mark.parametrize("cut", ["whole_lines", "mid_line"])
    def test_a_batch_cut_short_is_hidden_then_removed(
        self, store: Store, thread: JsonlThread, reports: list[Recovery], cut: str
    ) -> None:
        good = thread.path.read_bytes()
        head = thread.head()
        lines = sealed_batch(thread, [msg(10), msg(11), msg(12), msg(13)])
        assert all(b'"more":true' in line for line in lines[:-1])
        partial = b"".join(lines[:3])  # every line of the batch but its last
        if cut == "mid_line":
            partial += lines[3][: len(lines[3]) // 2]
        with thread.path.open("ab") as f:
            f.write(partial)
        # readers hide the unfinished batch
        assert thread.head() == head
        assert [f.seq for f in thread.read()] == [0, 1, 2, 3]
        assert list(thread.read(from_seq=4)) == []
        assert [f.seq for f in thread.tail(3)] == [1, 2, 3]
        assert thread.offset_of(4) is None
        # recovery removes the whole batch, and the next append continues after the head
        assert thread.append(msg(4)) == range(4, 5)
        reason = "torn" if cut == "mid_line" else "unfinished batch"
        self.assert_quarantined(store, reports, offset=len(good), data=partial, reason=reason)
        frames = list(thread.read())
        assert [f.seq for f in frames] == [0, 1, 2, 3, 4]
        ids = {f.message_id for f in frames if isinstance(f, fr.MessageAppended)}
        assert ids == {"m1", "m2", "m3", "m4"}
        verify_chain(stored_lines(thread))

    def test_a_torn_first_batch_restarts_the_thread(
        self, store: Store, reports: list[Recovery]
    ) -> None:
        t = store.thread("t")
        partial = b"".join(sealed_batch(t, [msg(1), msg(2)])[:2])
        t.path.write_bytes(partial)
        assert t.head() is None
        assert t.append(msg(1)) == range(1, 2)
        self.assert_quarantined(store, reports, offset=0, data=partial, reason="unfinished")
        assert [f.seq for f in t.read()] == [0, 1]
        verify_chain(stored_lines(t))

    def test_recovery_happens_once(
        self, store: Store, thread: JsonlThread, reports: list[Recovery]
    ) -> None:
        with thread.path.open("ab") as f:
            f.write(b'{"type":"mess')
        thread.append(msg(4))
        thread.append(msg(5))
        Store(store.root, durable=False).thread("t").append(msg(6))
        assert len(reports) == 1
        assert len(store.quarantined()) == 1

    def test_quarantined_lists_every_record_oldest_first(
        self, store: Store, thread: JsonlThread, reports: list[Recovery]
    ) -> None:
        other = store.thread("u")
        other.append(msg(1))
        for t in (thread, other, thread):
            with t.path.open("ab") as f:
                f.write(b'{"torn')
            t.append(msg(9))
        (store.root / "quarantine" / "junk.json").write_text("not json")
        (store.root / "quarantine" / "other.json").write_text('{"thread_id": "t"}')
        listed = store.quarantined()
        assert len(listed) == 3 and {r.thread_id for r in listed} == {"t", "u"}
        # the same records as reported; oldest first (ties within a millisecond: by thread, offset)
        assert sorted(listed, key=lambda r: r.quarantine_file) == sorted(
            reports, key=lambda r: r.quarantine_file
        )
        assert listed == sorted(listed, key=lambda r: (r.time_ms, r.thread_id, r.offset))
        # A fresh store instance reports nothing new but lists the same records.
        fresh = Store(store.root, durable=False)
        assert fresh.recoveries == [] and fresh.quarantined() == listed


class TestJsonlCorruption:
    """Damage inside the committed log is never repaired: every read names where it is."""

    @pytest.fixture
    def thread(self, tmp_store: Store) -> JsonlThread:
        t = tmp_store.thread("t")
        for i in range(1, 10):
            t.append(msg(i, text=f"hello number {i}"))
        return t

    def damage(self, thread: JsonlThread, seq: int, old: bytes, new: bytes) -> int:
        """Replace ``old`` by ``new`` (same length) in line ``seq``; return the line's offset."""
        assert len(old) == len(new)
        data = bytearray(thread.path.read_bytes())
        offset = line_offsets(bytes(data))[seq]
        end = data.index(b"\n", offset)
        at = data.index(old, offset, end)
        data[at : at + len(old)] = new
        thread.path.write_bytes(bytes(data))
        return offset

    def assert_corrupt(
        self, exc: pytest.ExceptionInfo[CorruptFrame], seq: int, offset: int
    ) -> None:
        assert exc.value.thread_id == "t"
        assert exc.value.seq == seq
        assert exc.value.offset == offset
        assert f"seq {seq}" in str(exc.value) and f"byte offset {offset}" in str(exc.value)

    @pytest.mark.parametrize(
        ("old", "new"),
        [
            (b'{"type"', b'{ type"'),  # no longer JSON
            (b'"digest":"', b'"digesT":"'),  # no digest suffix
            (b'"seq":5', b'"seq";5'),  # not JSON either
        ],
    )
    def test_a_middle_line_that_no_longer_parses(
        self, thread: JsonlThread, old: bytes, new: bytes
    ) -> None:
        offset = self.damage(thread, 5, old, new)
        with pytest.raises(CorruptFrame) as exc:
            list(thread.read())
        self.assert_corrupt(exc, 5, offset)
        with pytest.raises(CorruptFrame) as exc:
            list(thread.read_lines(from_seq=2))
        self.assert_corrupt(exc, 5, offset)
        with pytest.raises(CorruptFrame) as exc:  # the damage lies on the way to seq 7
            list(thread.read(from_seq=7))
        self.assert_corrupt(exc, 5, offset)
        with pytest.raises(CorruptFrame):
            thread.tail(8)
        # frames before the damage and the tail after it still read
        assert [f.seq for f in thread.read(to_seq=4)] == [0, 1, 2, 3, 4]
        assert [f.seq for f in thread.tail(3)] == [7, 8, 9]

    def test_a_middle_line_whose_content_changed_breaks_the_chain(
        self, thread: JsonlThread
    ) -> None:
        offset = self.damage(thread, 5, b"hello number 5", b"jello number 5")
        assert fr.decode_frame(thread.path.read_bytes().splitlines()[5])  # still a valid frame
        with pytest.raises(CorruptFrame, match="chain") as exc:
            list(thread.read())
        self.assert_corrupt(exc, 5, offset)
        with pytest.raises(CorruptFrame, match="chain") as exc:
            thread.tail(8)
        self.assert_corrupt(exc, 5, offset)  # reading backwards names the same frame

    def test_a_changed_digest_breaks_the_chain(self, thread: JsonlThread) -> None:
        line = thread.path.read_bytes().splitlines()[4]
        digest = json.loads(line)["digest"].encode()
        flipped = digest[:10] + (b"0" if digest[10:11] != b"0" else b"1") + digest[11:]
        offset = self.damage(thread, 4, digest, flipped)
        with pytest.raises(CorruptFrame, match="chain") as exc:
            list(thread.read())
        self.assert_corrupt(exc, 4, offset)
        with pytest.raises(CorruptFrame, match="chain") as exc:
            thread.tail(9)
        # Backwards, the broken link 4→5 shows before frame 4's own digest can be checked.
        offsets = line_offsets(thread.path.read_bytes())
        assert exc.value.seq in (4, 5) and exc.value.offset == offsets[exc.value.seq]

    def test_a_digest_in_upper_case_is_not_a_sealed_line(self, thread: JsonlThread) -> None:
        line = thread.path.read_bytes().splitlines()[3]
        digest = json.loads(line)["digest"].encode()
        offset = self.damage(thread, 3, digest, digest.upper())
        assert digest.upper() != digest
        with pytest.raises(CorruptFrame, match="not a sealed frame") as exc:
            list(thread.read())
        self.assert_corrupt(exc, 3, offset)

    def test_damage_to_the_first_frame_is_caught_at_seq_0(self, thread: JsonlThread) -> None:
        self.damage(thread, 0, b'"thread_id":"t"', b'"thread_id":"u"')
        with pytest.raises(CorruptFrame, match="chain") as exc:
            list(thread.read())
        self.assert_corrupt(exc, 0, 0)
        with pytest.raises(CorruptFrame, match="chain"):
            thread.tail(20)

    def test_a_missing_line_is_a_seq_gap(self, thread: JsonlThread) -> None:
        lines = thread.path.read_bytes().splitlines(keepends=True)
        offset = sum(len(line) for line in lines[:6])
        del lines[6]
        thread.path.write_bytes(b"".join(lines))
        with pytest.raises(CorruptFrame) as exc:
            list(thread.read())
        self.assert_corrupt(exc, 6, offset)
        with pytest.raises(CorruptFrame):
            thread.tail(9)

    def test_a_line_that_parses_as_envelope_but_not_as_frame(self, thread: JsonlThread) -> None:
        """Valid sealed JSON whose frame does not decode (a bad role) and whose digest chains:
        read() must still refuse it, naming where it is."""
        data = thread.path.read_bytes()
        lines = data.splitlines()
        offset = line_offsets(data)[3]
        prev = fr.unseal(lines[2])
        assert prev is not None
        body = fr.unseal(lines[3])
        assert body is not None
        bad_body = body[0].replace(b'"role":"user"', b'"role":"robot"')
        lines[3] = fr.seal(bad_body, fr.chain(prev[1], bad_body))[:-1]
        # re-chain the rest so only the decoding fails
        unsealed = fr.unseal(lines[3])
        assert unsealed is not None
        digest = unsealed[1]
        for i in range(4, len(lines)):
            b = fr.unseal(lines[i])
            assert b is not None
            digest = fr.chain(digest, b[0])
            lines[i] = fr.seal(b[0], digest)[:-1]
        thread.path.write_bytes(b"\n".join(lines) + b"\n")
        with pytest.raises(CorruptFrame) as exc:
            list(thread.read())
        self.assert_corrupt(exc, 3, offset)
        assert [f.seq for f in thread.read(from_seq=4)] == list(range(4, 10))


def test_a_refused_first_batch_leaves_no_log_file(tmp_store: Store) -> None:
    thread = tmp_store.thread("new")
    with pytest.raises(SeqConflict):
        thread.append(fr.message("user", "x"), expected_seq=7)
    with pytest.raises(BadFrame):
        thread.append([fr.message("user", "x"), fr.ThreadCreated()])
    assert not thread.path.exists()
    assert thread.append(fr.message("user", "x")) == range(1, 2)
