"""The LangGraph store (``ContinuityStore``) beside LangGraph's ``InMemoryStore``, paired.

    python -m tools.bench.bench_langgraph_store [--sizes 1000,10000] [--repeats 50] [--json]

At each size ``N``, ``N`` memories (a short sentence, a number, a tag) are put in 100
namespaces ``("users", "u<i>")`` of each store; then each call is timed ``--repeats`` times,
the stores taking turns call by call (paired, same process), and its median is reported with
the ratio to ``InMemoryStore``'s:

* ``put`` — a new item; ``get`` — an item picked at random;
* ``search filter`` — one namespace, ``filter={"tag": …}``, ``limit=10``;
* ``search query`` — one namespace, ``query=`` two words, ``limit=10`` (continuity ranks by
  BM25; ``InMemoryStore`` without an index ignores the query: the ratio is of work that differs);
* ``list_namespaces`` — ``prefix=("users",)``, ``limit=100``;
* ``open + first get`` — a new object on the same store answering its first call (the
  projection read from the log; ``InMemoryStore`` has nothing to read: no ratio).

Continuity stores: JSONL with ``durable=False`` (an fsync per put would add the same constant
at every size; with the default durability a put costs one fsync more) and the memory store.
"""

from __future__ import annotations

import gc
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

from langgraph.store.base import BaseStore as LangGraphStore
from langgraph.store.memory import InMemoryStore

from continuity.integrations.langgraph_store import ContinuityStore
from continuity.store.jsonl import Store
from continuity.store.memory import MemoryStore
from tools.bench._common import (
    Report,
    common_parser,
    emit,
    log,
    median,
    short_size,
    time_row,
    work_dir,
)

__all__ = ["main", "run"]

DEFAULT_SIZES: Final = (1_000, 10_000)
_WORDS: Final = (
    "pizza",
    "ramen",
    "hiking",
    "piano",
    "chess",
    "python",
    "rust",
    "garden",
    "coffee",
    "tea",
    "cats",
    "dogs",
)
_CALLS: Final = ("put", "get", "search filter", "search query", "list_namespaces")


def _fill(store: LangGraphStore, n: int, rng: random.Random) -> None:
    for i in range(n):
        words = " ".join(rng.choice(_WORDS) for _ in range(6))
        value = {"text": f"the user likes {words}", "n": i, "tag": rng.choice(_WORDS)}
        store.put(("users", f"u{i % 100}"), f"m{i}", value)


def _calls(store: LangGraphStore, n: int, rng: random.Random) -> dict[str, Callable[[int], object]]:
    def ns(r: int) -> tuple[str, ...]:
        return ("users", f"u{r % 100}")

    return {
        "put": lambda r: store.put(ns(r), f"new{r}", {"text": f"new memory {r}", "n": r}),
        "get": lambda r: store.get(ns(r), f"m{rng.randrange(n) // 100 * 100 + r % 100}"),
        "search filter": lambda r: store.search(ns(r), filter={"tag": _WORDS[r % 12]}, limit=10),
        "search query": lambda r: store.search(ns(r), query="pizza chess", limit=10),
        "list_namespaces": lambda r: store.list_namespaces(prefix=("users",), limit=100),
    }


def _stores(folder: Path) -> dict[str, Callable[[], LangGraphStore]]:
    return {
        "InMemoryStore": InMemoryStore,
        "continuity jsonl": lambda: ContinuityStore(
            Store(folder / "jsonl", create=True, durable=False)
        ),
        "continuity memory": lambda: ContinuityStore(MemoryStore()),
    }


def run(*, sizes: tuple[int, ...] = DEFAULT_SIZES, repeats: int = 50, seed: int = 0) -> Report:
    started = time.perf_counter()
    report = Report("langgraph_store", {"sizes": list(sizes), "repeats": repeats, "seed": seed})
    for n in sizes:
        with work_dir(f"langgraph-store-{n}") as folder:
            _one_size(report, folder, n, repeats, seed)
    report.notes.append("ratio: continuity's median / InMemoryStore's, the same call, paired")
    report.seconds = time.perf_counter() - started
    return report


def _one_size(report: Report, folder: Path, n: int, repeats: int, seed: int) -> None:
    makers = _stores(folder)
    stores = {name: make() for name, make in makers.items()}
    for name, store in stores.items():
        log(f"  filling {name} with {n:,} items")
        _fill(store, n, random.Random(seed))
    calls = {name: _calls(store, n, random.Random(seed)) for name, store in stores.items()}
    times: dict[tuple[str, str], list[float]] = {}
    gc.collect()
    for call in _CALLS:
        for r in range(repeats):
            for name in stores:  # taking turns: the same moment for each store
                t0 = time.perf_counter()
                calls[name][call](r)
                times.setdefault((name, call), []).append(time.perf_counter() - t0)
    size = short_size(n)
    for call in _CALLS:
        base = median(times[("InMemoryStore", call)])
        for name in stores:
            row = time_row(f"{name}: {call} @{size}", times[(name, call)])
            if name != "InMemoryStore":
                row.baseline, row.ratio = "InMemoryStore", median(times[(name, call)]) / base
            report.rows.append(row)
    opened: list[float] = []
    for _ in range(max(3, repeats // 10)):
        t0 = time.perf_counter()
        ContinuityStore(Store(folder / "jsonl", durable=False)).get(("users", "u1"), "m1")
        opened.append(time.perf_counter() - t0)
    report.rows.append(time_row(f"continuity jsonl: open + first get @{size}", opened))
    for store in stores.values():
        if isinstance(store, ContinuityStore):
            store.close()


def main(argv: list[str] | None = None) -> None:
    parser = common_parser(__doc__.split("\n\n")[0], DEFAULT_SIZES, "items")
    parser.add_argument("--repeats", type=int, default=50, help="timed calls per figure")
    args = parser.parse_args(argv)
    emit([run(sizes=args.sizes, repeats=args.repeats, seed=args.seed)], args.json)


if __name__ == "__main__":
    main()
