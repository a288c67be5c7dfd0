"""A thread id is checked and looked up once, where it enters; below that, a handle travels.

Each entry point given a store and an id makes one handle; given a handle, it makes none, and
nothing under it (sources, caches, the search index, recall) looks the thread up again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from continuity.context.compaction import StrideMessages, create_checkpoint, run_compaction
from continuity.context.compiler import compile_context
from continuity.retrieval.search import search, search_prefix
from continuity.store.base import BaseStore, Thread
from continuity.store.jsonl import Store
from continuity.store.memory import MemoryStore
from continuity.testing import FixedClock, build_conversation


@pytest.fixture(params=["jsonl", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> BaseStore:
    if request.param == "jsonl":
        return Store(tmp_path / "store", create=True, durable=False, clock=FixedClock())
    return MemoryStore(clock=FixedClock())


@pytest.fixture
def lookups(store: BaseStore, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The ids of every handle the store makes from here on."""
    build_conversation(store)
    made: list[str] = []
    real: Callable[[str], Thread] = store.thread

    def counting(thread_id: str) -> Thread:
        made.append(thread_id)
        return real(thread_id)

    monkeypatch.setattr(store, "thread", counting)
    yield made


def test_compile_looks_the_thread_up_once(store: BaseStore, lookups: list[str]) -> None:
    compile_context(store, "c", recall="pytest module_3")  # logged, with recall
    assert lookups == ["c"]
    handle = store.thread("c")
    lookups.clear()
    compile_context(handle, recall="off-by-one total", use_caches=False)
    compile_context(handle, recall=True)
    assert lookups == []


def test_compaction_and_prefix_search_take_the_handle(store: BaseStore, lookups: list[str]) -> None:
    thread = store.thread("c")
    lookups.clear()
    head = thread.head()
    assert head is not None
    create_checkpoint(thread, head.seq, text="all of it")
    run_compaction(thread, StrideMessages(9))
    assert search_prefix(thread, "pytest", max_seq=head.seq, k=3)
    assert lookups == []
    search_prefix(store, "c", "pytest", max_seq=head.seq, k=3)
    assert lookups == ["c"]


def test_store_wide_search_makes_one_handle_per_thread(
    store: BaseStore, lookups: list[str]
) -> None:
    build_conversation(store, "d", turns=3)
    lookups.clear()
    hits = search(store, "pytest total", k=20)
    assert {h.thread_id for h in hits} == {"c", "d"}
    assert sorted(lookups) == ["c", "d"]


def test_entry_points_refuse_other_argument_shapes(store: BaseStore) -> None:
    build_conversation(store)
    thread = store.thread("c")
    calls: list[Callable[[], object]] = [
        lambda: create_checkpoint(store, 5),  # type: ignore[call-overload]
        lambda: create_checkpoint(thread, "c", 5),  # type: ignore[call-overload]
        lambda: run_compaction(store, StrideMessages(3)),  # type: ignore[call-overload]
        lambda: run_compaction(thread, "c", StrideMessages(3)),  # type: ignore[call-overload]
        lambda: run_compaction(thread, "stride_messages_v1/3"),  # type: ignore[call-overload]
        lambda: search_prefix(store, "pytest", max_seq=5, k=1),  # type: ignore[call-overload]
        lambda: search_prefix(thread, "c", "pytest", max_seq=5, k=1),  # type: ignore[call-overload]
        lambda: compile_context(store),  # type: ignore[call-overload]
    ]
    before = thread.head()
    for call in calls:
        with pytest.raises(TypeError):
            call()
    assert thread.head() == before  # nothing was written
