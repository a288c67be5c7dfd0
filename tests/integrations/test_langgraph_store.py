"""The LangGraph store (ContinuityStore): items as records in one thread of a real store (JSONL,
memory, PostgreSQL), read back by a fresh object and another process; search by filter, BM25
and embeddings; TTLs; a graph that remembers across threads; two writing processes; a writer
killed mid-batch; and bad input refused with nothing written."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import Embeddings
from langgraph.store.base import GetOp, InvalidNamespaceError, PutOp, SearchOp

from continuity import MemoryStore, Store, frames as fr
from continuity.errors import BadFrame
from continuity.integrations.langgraph import ContinuitySaver, ContinuityStore
from continuity.maintenance.verify import verify_store
from continuity.retrieval.embedders import HashedEmbedder
from continuity.store.base import BaseStore
from continuity.testing import FixedClock
from tests.support.pg import PgStores
from tests.support.processes import reap


@pytest.fixture(params=["jsonl", "memory", pytest.param("postgres", marks=pytest.mark.postgres)])
def backing(request: pytest.FixtureRequest, tmp_path: Path) -> BaseStore:
    if request.param == "jsonl":
        return Store(tmp_path / "store", create=True, durable=False)
    if request.param == "memory":
        return MemoryStore()
    pg: PgStores = request.getfixturevalue("pg_stores")
    return pg.open(tmp_path / "store")


# --- the items and the log --------------------------------------------------------------------


def test_put_get_delete_and_a_fresh_object_reads_the_same(backing: BaseStore) -> None:
    store = ContinuityStore(backing)
    store.put(("users", "42"), "prefs", {"food": "pizza", "n": 1})
    first = store.get(("users", "42"), "prefs")
    assert first is not None and first.value == {"food": "pizza", "n": 1}
    store.put(("users", "42"), "prefs", {"food": "sushi", "n": 2})
    store.put(("users", "42"), "gone", {"x": 1})
    store.delete(("users", "42"), "gone")
    again = ContinuityStore(backing)  # a new projection, rebuilt from the log
    item = again.get(("users", "42"), "prefs")
    assert item is not None and item.value == {"food": "sushi", "n": 2}
    assert item.created_at == first.created_at  # an update keeps when the item was made
    assert again.get(("users", "42"), "gone") is None
    assert again.list_namespaces() == [("users", "42")]
    # nothing was rewritten: every put and the tombstone are frames of the chained log
    kinds = [
        (f.key, f.data.get("deleted"))
        for f in backing.thread("langgraph-store").read(types=["record_appended"])
        if isinstance(f, fr.RecordAppended)
    ]
    assert kinds == [
        ('[["users","42"],"prefs"]', None),
        ('[["users","42"],"prefs"]', None),
        ('[["users","42"],"gone"]', None),
        ('[["users","42"],"gone"]', "delete"),
    ]


def test_returned_values_are_copies(tmp_path: Path) -> None:
    store = ContinuityStore(tmp_path / "s")
    store.put(("a",), "k", {"list": [1, 2]})
    got = store.get(("a",), "k")
    assert got is not None
    got.value["list"].append(3)
    again = store.get(("a",), "k")
    assert again is not None and again.value == {"list": [1, 2]}


def test_the_log_verifies_and_a_deleted_cache_changes_no_answer(tmp_path: Path) -> None:
    root = tmp_path / "s"
    store = ContinuityStore(root)
    for i in range(30):
        store.put(("docs", str(i % 3)), f"k{i}", {"text": f"note number {i}", "i": i})
    store.delete(("docs", "0"), "k0")
    before = [(i.namespace, i.key, i.score) for i in store.search(("docs",), query="note 7")]
    assert verify_store(Store(root)).ok
    import shutil

    shutil.rmtree(root / "cache", ignore_errors=True)
    after = ContinuityStore(root)
    assert [
        (i.namespace, i.key, i.score) for i in after.search(("docs",), query="note 7")
    ] == before


def test_a_batch_runs_its_puts_first_and_the_last_put_of_an_item_wins(tmp_path: Path) -> None:
    store = ContinuityStore(tmp_path / "s")
    got, _, _, found = store.batch(
        [
            GetOp(("a",), "k"),
            PutOp(("a",), "k", {"v": 1}),
            PutOp(("a",), "k", {"v": 2}),
            SearchOp(("a",)),
        ]
    )
    assert got is not None and got.value == {"v": 2}  # type: ignore[union-attr]
    assert [i.value for i in found] == [{"v": 2}]  # type: ignore[union-attr]


# --- search -----------------------------------------------------------------------------------


def test_filters_follow_langgraph(tmp_path: Path) -> None:
    store = ContinuityStore(tmp_path / "s")
    rows: list[dict[str, Any]] = [
        {"color": "red", "score": 4.5, "meta": {"tag": "a", "n": 1}},
        {"color": "red", "score": 3.0, "meta": {"tag": "b", "n": 2}},
        {"color": "blue", "score": 3.5, "tags": ["x", "y"]},
        {"color": "green", "score": "high"},
    ]
    for i, row in enumerate(rows):
        store.put(("t",), f"d{i}", row)

    def keys(**filter: Any) -> list[str]:
        return sorted(i.key for i in store.search(("t",), filter=filter))

    assert keys(color="red") == ["d0", "d1"]
    assert keys(score={"$gt": 3.2}) == ["d0", "d2"]  # "high" is in no order with a number
    assert keys(score={"$gte": 3.0, "$lt": 4.0}) == ["d1", "d2"]
    assert keys(score={"$lte": 3.0}) == ["d1"]
    assert keys(color={"$ne": "red"}) == ["d2", "d3"]
    assert keys(color={"$eq": "blue"}) == ["d2"]
    assert keys(meta={"tag": "b"}) == ["d1"]
    assert keys(tags=["x", "y"]) == ["d2"]
    assert keys(tags=["x"]) == []
    with pytest.raises(ValueError, match=r"unsupported filter operator '\$in'"):
        store.search(("t",), filter={"color": {"$in": ["red"]}})


def test_a_query_is_ranked_by_continuitys_bm25_and_the_rest_follow_unscored(
    tmp_path: Path,
) -> None:
    store = ContinuityStore(tmp_path / "s")
    store.put(("m",), "a", {"text": "the user loves pizza with extra cheese"})
    store.put(("m",), "b", {"text": "pizza is fine"})
    store.put(("m",), "c", {"text": "likes hiking in the alps"})
    store.put(("m",), "d", {"text": "cheese fondue and pizza, pizzas every friday"})
    # (a term more than half of the candidates hold adds nothing to a BM25 score here, as in
    # every continuity search, ADR 0022: two more memories keep "pizza" below half)
    store.put(("m",), "e", {"text": "works as a nurse"})
    store.put(("m",), "f", {"text": "has two cats"})
    found = store.search(("m",), query="pizzas cheese", limit=10)
    scored = [(i.key, i.score) for i in found if i.score is not None]
    assert [k for k, _ in scored][:1] == ["d"]  # both words, "pizzas" in its own form
    assert {k for k, _ in scored} == {"a", "b", "d"}  # stems: "pizzas" finds "pizza"
    assert [s for _, s in scored] == sorted((s for _, s in scored), reverse=True)
    assert {i.key for i in found if i.score is None} == {"c", "e", "f"}
    paged = [
        i.key
        for off in range(0, 6, 2)
        for i in store.search(("m",), query="pizzas cheese", limit=2, offset=off)
    ]
    assert paged == [i.key for i in found]
    store.put(("m",), "g", {"text": "pizza pizza pizza"}, index=False)
    assert next(i for i in store.search(("m",), query="pizza") if i.key == "g").score is None


class _Counting(Embeddings):
    """A real embedding model (continuity's hashed embedder) that counts what it embeds."""

    def __init__(self) -> None:
        self.model = HashedEmbedder(64)
        self.embedded = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.embedded += len(texts)
        return [list(map(float, row)) for row in self.model.embed(texts)]

    def embed_query(self, text: str) -> list[float]:
        return [float(x) for x in self.model.embed([text])[0]]


def test_semantic_search_stores_its_vectors_in_the_log_once(backing: BaseStore) -> None:
    model = _Counting()
    index: Any = {"dims": 64, "embed": model, "fields": ["text"]}
    store = ContinuityStore(backing, index=index)
    store.put(("m",), "a", {"text": "deploying kubernetes clusters"})
    store.put(("m",), "b", {"text": "baking sourdough bread"})
    store.put(("m",), "c", {"other": "no text field"})
    assert model.embedded == 2
    first = store.search(("m",), query="kubernetes deploy")
    assert first[0].key == "a" and first[0].score is not None
    assert (first[-1].key, first[-1].score) == ("c", None)
    fresh_model = _Counting()
    again = ContinuityStore(backing, index={"dims": 64, "embed": fresh_model, "fields": ["text"]})
    assert [(i.key, i.score) for i in again.search(("m",), query="kubernetes deploy")] == [
        (i.key, i.score) for i in first
    ]
    assert fresh_model.embedded == 0  # the vectors came back from their artifacts


def test_a_continuity_embedder_is_a_model(tmp_path: Path) -> None:
    index: Any = {"dims": 64, "embed": HashedEmbedder(64)}  # a continuity embedder, not LangChain's
    store = ContinuityStore(tmp_path / "s", index=index)
    store.put(("m",), "a", {"text": "red apples"})
    store.put(("m",), "b", {"text": "blue cars"})
    assert store.search(("m",), query="red apples")[0].key == "a"


def test_list_namespaces(tmp_path: Path) -> None:
    store = ContinuityStore(tmp_path / "s")
    for ns in [("a", "b", "c"), ("a", "b", "d", "e"), ("a", "c", "f"), ("x", "f")]:
        store.put(ns, "k", {"v": 1})
    assert store.list_namespaces(prefix=("a", "b")) == [("a", "b", "c"), ("a", "b", "d", "e")]
    assert store.list_namespaces(suffix=("f",)) == [("a", "c", "f"), ("x", "f")]
    assert store.list_namespaces(prefix=("a", "*", "f")) == [("a", "c", "f")]
    assert store.list_namespaces(max_depth=2) == [("a", "b"), ("a", "c"), ("x", "f")]
    assert store.list_namespaces(limit=1, offset=1) == [("a", "b", "d", "e")]
    store.delete(("x", "f"), "k")
    assert ("x", "f") not in store.list_namespaces()


# --- TTL --------------------------------------------------------------------------------------


def test_ttl_expires_refreshes_on_read_and_sweeps_to_tombstones(tmp_path: Path) -> None:
    clock = FixedClock()
    backing = Store(tmp_path / "s", create=True, clock=clock, durable=False)
    store = ContinuityStore(backing, ttl={"default_ttl": 1.0, "omit_expired": True})
    store.put(("t",), "kept", {"v": 1})
    store.put(("t",), "read", {"v": 2})
    store.put(("t",), "forever", {"v": 3}, ttl=None)
    clock.advance(50_000)
    assert store.get(("t",), "read") is not None  # refreshes its TTL (a touch record)
    clock.advance(20_000)  # 70 s after the puts: "kept" expired, "read" was refreshed at 50 s
    assert store.get(("t",), "kept", refresh_ttl=False) is None
    assert store.get(("t",), "read", refresh_ttl=False) is not None
    assert {i.key for i in store.search(("t",), refresh_ttl=False)} == {"read", "forever"}
    assert store.sweep_ttl() == 1
    reopened = ContinuityStore(backing)  # without omit_expired: swept means gone
    assert reopened.get(("t",), "kept") is None
    assert reopened.get(("t",), "forever") is not None


# --- lifecycle --------------------------------------------------------------------------------


def test_lifecycle_as_langgraphs_stores(tmp_path: Path) -> None:
    with ContinuityStore.from_conn_string(str(tmp_path / "s")) as store:
        store.setup()
        store.put(("a",), "k", {"v": 1})
    owned = store.store
    with ContinuityStore(owned) as shared:  # a store object given is the caller's to close
        assert shared.get(("a",), "k") is not None
    assert ContinuityStore(owned).get(("a",), "k") is not None


@pytest.mark.postgres
def test_from_conn_string_opens_a_postgresql_url(pg_url: str, pg_stores: PgStores) -> None:
    pg_stores.sql("DROP SCHEMA IF EXISTS public CASCADE; CREATE SCHEMA public")
    with ContinuityStore.from_conn_string(pg_url) as store:
        store.put(("a",), "k", {"v": 1})
    with ContinuityStore.from_conn_string(pg_url) as store:
        item = store.get(("a",), "k")
        assert item is not None and item.value == {"v": 1}


def test_the_async_methods(tmp_path: Path) -> None:
    import asyncio

    async def main() -> None:
        async with ContinuityStore(tmp_path / "s") as store:
            await store.aput(("a",), "k", {"text": "hello world"})
            item = await store.aget(("a",), "k")
            assert item is not None and item.value == {"text": "hello world"}
            assert [i.key for i in await store.asearch(("a",), query="hello")] == ["k"]
            assert await store.alist_namespaces() == [("a",)]
            await store.adelete(("a",), "k")
            assert await store.aget(("a",), "k") is None

    asyncio.run(main())


# --- a graph ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_graph_remembers_across_threads(tmp_path: Path) -> None:
    from typing import TypedDict

    from langgraph.config import get_store
    from langgraph.graph import END, START, StateGraph

    class State(TypedDict):
        user: str
        said: str
        recalled: list[str]

    def remember(state: State) -> dict[str, Any]:
        store = get_store()
        ns = ("memories", state["user"])
        if state["said"]:
            store.put(ns, f"m{len(store.search(ns, limit=100))}", {"text": state["said"]})
        return {"recalled": [i.value["text"] for i in store.search(ns, query="food", limit=5)]}

    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", END)
    root = tmp_path / "s"
    with ContinuityStore(root) as store:
        graph = builder.compile(checkpointer=ContinuitySaver(root), store=store)
        graph.invoke(
            {"user": "u1", "said": "my favourite food is ramen", "recalled": []},
            {"configurable": {"thread_id": "t1"}},
        )
        out = graph.invoke(
            {"user": "u1", "said": "", "recalled": []}, {"configurable": {"thread_id": "t2"}}
        )
        assert out["recalled"] == ["my favourite food is ramen"]
    assert ContinuityStore(root).search(("memories",))[0].value == {
        "text": "my favourite food is ramen"
    }


# --- processes --------------------------------------------------------------------------------

_WRITER = """
import sys
from continuity.integrations.langgraph import ContinuityStore
store = ContinuityStore(sys.argv[1])
me, n, size = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
from langgraph.store.base import PutOp
for b in range(n):
    store.batch([PutOp(("w", me), f"{b}-{i}", {"b": b, "i": i}) for i in range(size)])
    store.put(("shared",), "last", {"by": me, "b": b})
    print(b, flush=True)
"""


@pytest.mark.slow
def test_two_processes_put_at_once_and_lose_nothing(tmp_path: Path) -> None:
    root = tmp_path / "s"
    ContinuityStore(root).setup()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(root), me, "15", "4"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for me in ("p1", "p2")
    ]
    try:
        codes = [p.wait(timeout=120) for p in procs]
    finally:
        errors = [p.stderr.read().decode() if p.stderr else "" for p in procs]
        for p in procs:
            reap(p)
    assert codes == [0, 0], errors
    store = ContinuityStore(root)
    for me in ("p1", "p2"):
        assert len(store.search(("w", me), limit=1000)) == 60
    last = store.get(("shared",), "last")
    assert last is not None and last.value["b"] == 14
    seqs = [f.seq for f in Store(root).thread("langgraph-store").read()]
    assert seqs == list(range(len(seqs)))
    assert verify_store(Store(root)).ok


@pytest.mark.slow
def test_a_writer_killed_mid_batch_leaves_whole_batches_only(tmp_path: Path) -> None:
    root = tmp_path / "s"
    ContinuityStore(root).setup()
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(root), "p1", "100000", "25"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        for _ in range(5):
            proc.stdout.readline()  # five batches written: kill it inside a later one
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        reap(proc)
    store = ContinuityStore(Store(root))
    batches: dict[int, int] = {}
    for item in store.search(("w", "p1"), limit=10**6):
        batches[item.value["b"]] = batches.get(item.value["b"], 0) + 1
    assert len(batches) >= 5
    assert set(batches.values()) == {25}  # every batch whole, or not there
    store.put(("w", "p1"), "after", {"ok": True})  # the store takes writes again
    assert verify_store(Store(root)).ok


# --- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "namespace",
    [("a.b",), ("a", ""), (), ("nul\x00",), (1,)],
    ids=["dot", "empty", "none", "nul", "int"],
)
def test_bad_namespaces_are_refused_before_anything_is_written(
    tmp_path: Path, namespace: tuple[Any, ...]
) -> None:
    store = ContinuityStore(tmp_path / "s")
    with pytest.raises(InvalidNamespaceError):
        store.put(namespace, "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError):
        store.batch([PutOp(namespace, "k", {"v": 1})])
    assert store.thread.head() is None


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (["not", "a", "dict"], "must be a dict"),
        ("text", "must be a dict"),
        ({1: "int key"}, "keys must be strings"),
        ({"v": object()}, "must be JSON"),
    ],
)
def test_values_that_are_not_json_objects_are_clear_errors(
    tmp_path: Path, value: Any, message: str
) -> None:
    store = ContinuityStore(tmp_path / "s")
    store.put(("a",), "ok", {"v": 1})
    head = store.thread.head()
    with pytest.raises(TypeError, match=message):
        store.batch([PutOp(("a",), "other", {"v": 2}), PutOp(("a",), "k", value)])
    assert store.thread.head() == head  # the whole batch refused: nothing half-written
    assert store.get(("a",), "other") is None


def test_other_bad_input(tmp_path: Path) -> None:
    store = ContinuityStore(tmp_path / "s")
    with pytest.raises(ValueError, match="limit and offset"):
        store.search(("a",), limit=-1)
    with pytest.raises(ValueError, match="ttl must be a positive"):
        store.batch([PutOp(("a",), "k", {"v": 1}, ttl=-5)])
    backing = store.store
    backing.thread("notes").append(fr.ThreadCreated(thread_id="notes"))
    with pytest.raises(BadFrame, match="not a LangGraph store's"):
        ContinuityStore(backing, thread_id="notes").get(("a",), "k")


@pytest.mark.slow
def test_two_processes_create_the_store_at_once(tmp_path: Path) -> None:
    """Without setup(), both writers find no thread and both build a batch that creates it: the
    one that loses reads the thread the other made and puts again (it failed with BadFrame)."""
    for attempt in range(3):
        root = tmp_path / f"s{attempt}"
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _WRITER, str(root), me, "3", "2"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for me in ("p1", "p2")
        ]
        try:
            codes = [p.wait(timeout=120) for p in procs]
        finally:
            errors = [p.stderr.read().decode() if p.stderr else "" for p in procs]
            for p in procs:
                reap(p)
        assert codes == [0, 0], errors
        store = ContinuityStore(root)
        for me in ("p1", "p2"):
            assert len(store.search(("w", me), limit=1000)) == 6
        assert verify_store(Store(root)).ok


def test_setup_creates_the_store_thread_once(tmp_path: Path) -> None:
    store = ContinuityStore(tmp_path / "s")
    store.setup()
    store.setup()
    frames = list(Store(tmp_path / "s").thread("langgraph-store").read())
    assert [type(f).__name__ for f in frames] == ["ThreadCreated"]
