"""Opening a store's location (``continuity.store.locate.open_store``): a folder opens the JSONL
store; an in-memory store has no location. How a location is named: ``tests/paths/``."""

from __future__ import annotations

from pathlib import Path

import pytest

from continuity import frames as fr
from continuity.errors import StoreNotFound
from continuity.store.jsonl import Store
from continuity.store.locate import open_store
from continuity.store.memory import MemoryStore


def test_a_folder_location_opens_the_jsonl_store(tmp_path: Path) -> None:
    with pytest.raises(StoreNotFound):
        open_store(tmp_path / "missing")
    with open_store(tmp_path / "s", create=True) as store:
        assert isinstance(store, Store)
        assert store.location == tmp_path / "s" and store.local_dir == tmp_path / "s"
        store.thread("t").append(fr.message("user", "hello"))
    assert Store(tmp_path / "s").thread("t").head() is not None
    assert (tmp_path / "s" / "store.json").is_file()


def test_an_in_memory_store_has_no_location() -> None:
    store = MemoryStore()
    assert store.location is None and store.local_dir is None
    store.close()
    store.close()  # closing twice is harmless
