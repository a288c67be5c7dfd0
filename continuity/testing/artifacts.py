"""ArtifactStoreContract: what every artifact store must do."""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path

import pytest

from continuity.errors import (
    ArtifactNotFound,
    ContinuityError,
)
from continuity.store.artifacts import ArtifactStore, artifact_id

__all__ = ["ArtifactStoreContract"]


class ArtifactStoreContract(ABC):
    """What every artifact backend must do; subclasses only say how to build one."""

    @abstractmethod
    def make(self, tmp_path: Path) -> ArtifactStore: ...

    def test_put_returns_the_content_id_and_get_returns_the_bytes(self, tmp_path: Path) -> None:
        store = self.make(tmp_path)
        for data in (b"", b"x", b"hello " * 10_000, bytes(range(256))):
            aid = store.put(data)
            assert aid == artifact_id(data)
            assert store.exists(aid)
            assert store.get(aid) == data
            store.verify(aid)

    def test_put_is_idempotent(self, tmp_path: Path) -> None:
        store = self.make(tmp_path)
        first = store.put(b"same")
        assert store.put(b"same") == first
        assert store.put(bytearray(b"same")) == first  # type: ignore[arg-type]
        assert list(store.ids()) == [first]
        assert store.get(first) == b"same"

    def test_different_content_different_id(self, tmp_path: Path) -> None:
        store = self.make(tmp_path)
        assert store.put(b"a") != store.put(b"b")

    def test_missing_artifact(self, tmp_path: Path) -> None:
        store = self.make(tmp_path)
        missing = artifact_id(b"never stored")
        assert not store.exists(missing)
        with pytest.raises(ArtifactNotFound) as err:
            store.get(missing)
        assert missing in str(err.value)
        assert isinstance(err.value, ContinuityError) and isinstance(err.value, KeyError)
        with pytest.raises(ArtifactNotFound):
            store.verify(missing)

    @pytest.mark.parametrize(
        "bad", ["", "abc", "AB" * 32, "../../etc/passwd", "g" * 64, "ab" * 32 + "\n"]
    )
    def test_bad_id(self, tmp_path: Path, bad: str) -> None:
        store = self.make(tmp_path)
        store.put(b"x")
        assert not store.exists(bad)
        with pytest.raises(ArtifactNotFound, match="not an artifact id"):
            store.get(bad)

    def test_ids_are_sorted(self, tmp_path: Path) -> None:
        store = self.make(tmp_path)
        assert list(store.ids()) == []
        ids = [store.put(f"blob {i}".encode()) for i in range(40)]
        assert list(store.ids()) == sorted(ids)
        assert ids != sorted(ids)  # the check above means something

    def test_stored_bytes_grow_with_what_is_stored(self, tmp_path: Path) -> None:
        store = self.make(tmp_path)
        assert store.stored_bytes() == 0
        store.put(b"x" * 1000)
        first = store.stored_bytes()
        assert first > 0
        store.put(b"x" * 1000)  # the same content: nothing more
        assert store.stored_bytes() == first
        store.put(bytes(range(256)) * 8)
        assert store.stored_bytes() > first
