"""Content-addressed artifacts (continuity.store.artifacts): the file store and the memory model."""

from __future__ import annotations

import os
from pathlib import Path

import blake3
import pytest
import zstandard

from continuity.errors import ArtifactCorrupt, ArtifactNotFound
from continuity.store.artifacts import (
    ArtifactStore,
    FileArtifactStore,
    MemoryArtifactStore,
    artifact_id,
    is_artifact_id,
)
from continuity.testing import ArtifactStoreContract


def test_artifact_id_is_the_blake3_hex_of_the_bytes() -> None:
    assert artifact_id(b"hello") == blake3.blake3(b"hello").hexdigest()
    assert is_artifact_id(artifact_id(b""))
    assert not is_artifact_id("AB" * 32)  # uppercase
    assert not is_artifact_id("ab" * 31)
    assert not is_artifact_id("ab" * 32 + "\n")
    assert not is_artifact_id("../" + "a" * 61)


class TestMemoryArtifactStore(ArtifactStoreContract):
    def make(self, tmp_path: Path) -> ArtifactStore:
        return MemoryArtifactStore()

    def test_stored_bytes_are_a_copy(self, tmp_path: Path) -> None:
        store = MemoryArtifactStore()
        data = bytearray(b"mutable")
        aid = store.put(data)  # type: ignore[arg-type]
        data[0:1] = b"X"
        assert store.get(aid) == b"mutable"


class TestFileArtifactStore(ArtifactStoreContract):
    def make(self, tmp_path: Path) -> FileArtifactStore:
        return FileArtifactStore(tmp_path / "artifacts", durable=False)

    def test_layout_is_zstd_under_two_hex_folder(self, tmp_path: Path) -> None:
        store = self.make(tmp_path)
        data = b"compress me " * 1000
        aid = store.put(data)
        path = tmp_path / "artifacts" / aid[:2] / f"{aid}.zst"
        assert store.path(aid) == path
        assert path.is_file()
        assert path.stat().st_size < len(data)
        assert zstandard.ZstdDecompressor().decompress(path.read_bytes()) == data

    def test_durable_put_and_a_fresh_instance_reads_it(self, tmp_path: Path) -> None:
        aid = FileArtifactStore(tmp_path / "a", durable=True).put(b"kept")
        again = FileArtifactStore(tmp_path / "a")
        assert again.get(aid) == b"kept"
        assert list(again.ids()) == [aid]

    def test_corrupt_file_raises_artifact_corrupt(self, tmp_path: Path) -> None:
        store = self.make(tmp_path)
        aid = store.put(b"original content")
        # valid zstd, wrong content: the hash check catches it
        store.path(aid).write_bytes(zstandard.ZstdCompressor().compress(b"forged content"))
        with pytest.raises(ArtifactCorrupt, match="content hash"):
            store.get(aid)
        with pytest.raises(ArtifactCorrupt):
            store.verify(aid)
        # bytes that are not zstd at all
        store.path(aid).write_bytes(b"garbage")
        with pytest.raises(ArtifactCorrupt, match="decompress"):
            store.get(aid)

    def test_flipped_byte_on_disk_is_detected(self, tmp_path: Path) -> None:
        store = self.make(tmp_path)
        aid = store.put(b"some text that compresses " * 50)
        raw = bytearray(store.path(aid).read_bytes())
        raw[len(raw) // 2] ^= 0x01
        store.path(aid).write_bytes(bytes(raw))
        with pytest.raises(ArtifactCorrupt):
            store.get(aid)

    def test_atomic_write_leaves_no_temp_files(self, tmp_path: Path) -> None:
        store = FileArtifactStore(tmp_path / "artifacts", durable=True)
        for i in range(20):
            store.put(f"blob {i}".encode())
        leftovers = [p for p in (tmp_path / "artifacts").rglob("*") if p.is_file()]
        assert len(leftovers) == 20
        assert all(p.suffix == ".zst" and not p.name.startswith(".") for p in leftovers)

    def test_failed_write_removes_its_temp_file(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        store = self.make(tmp_path)

        def broken_replace(src: str, dst: str) -> None:
            raise OSError("disk on fire")

        monkeypatch.setattr(os, "replace", broken_replace)
        with pytest.raises(OSError, match="disk on fire"):
            store.put(b"never lands")
        monkeypatch.undo()
        assert [p for p in (tmp_path / "artifacts").rglob("*") if p.is_file()] == []
        assert not store.exists(artifact_id(b"never lands"))
        assert store.get(store.put(b"never lands")) == b"never lands"

    def test_ids_ignore_temp_and_foreign_files(self, tmp_path: Path) -> None:
        store = self.make(tmp_path)
        aid = store.put(b"x")
        folder = store.path(aid).parent
        (folder / ".tmp-abc").write_bytes(b"half")
        (folder / "notes.txt").write_text("hi")
        (folder / "short.zst").write_bytes(b"")
        (tmp_path / "artifacts" / "stray-file").write_text("x")
        assert list(store.ids()) == [aid]

    def test_ids_of_a_missing_folder_is_empty(self, tmp_path: Path) -> None:
        assert list(FileArtifactStore(tmp_path / "nowhere").ids()) == []


def test_artifact_not_found_reads_like_a_message_not_a_key() -> None:
    err = ArtifactNotFound("artifact abc not found")
    assert str(err) == "artifact abc not found"  # KeyError would quote it
    assert str(ArtifactNotFound()) == "artifact not found"
    assert not issubclass(ArtifactCorrupt, KeyError)


def test_every_flipped_bit_reads_back_whole_or_is_corrupt(tmp_path: Path) -> None:
    """A damaged artifact is ArtifactCorrupt, whatever bit was flipped: never another error
    (a frame header can be made to declare a size no buffer holds: that was a MemoryError), and
    never other bytes. A flip zstd does not read gives the content back, checked by its hash."""
    store = FileArtifactStore(tmp_path / "a")
    content = b"hello world " * 200
    aid = store.put(content)
    path = store.path(aid)
    original = path.read_bytes()
    outcomes = {"same": 0, "corrupt": 0}
    for at in range(len(original)):
        for bit in range(8):
            path.write_bytes(
                original[:at] + bytes([original[at] ^ (1 << bit)]) + original[at + 1 :]
            )
            try:
                got = FileArtifactStore(tmp_path / "a").get(aid)
            except ArtifactCorrupt:
                outcomes["corrupt"] += 1
            else:
                assert got == content
                outcomes["same"] += 1
    assert outcomes["corrupt"] > 0
