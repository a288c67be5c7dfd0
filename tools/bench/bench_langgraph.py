"""The LangGraph checkpoint saver: whether its calls stay flat as a thread's checkpoints grow.

    python -m tools.bench.bench_langgraph [--sizes 100,100000] [--repeats 50] [--quick] [--json]
    python -m tools.bench.bench_langgraph --turns 300 [--durability async|sync|exit] [--json]

``--turns N``: an agent loop instead, side by side with LangGraph's ``SqliteSaver`` (issue 27):
the same tool-calling graph (a scripted model that calls a tool, then answers: four messages a
turn) runs N turns on a ``ContinuitySaver`` over a JSONL store with its default durability (a
sync per put; in an ``async`` run a task's writes ride on the next put's sync, ADR 0065) and on
a ``SqliteSaver`` file (its default: WAL, a commit and its sync per call), in one process, the
two interleaved turn by turn (the order alternating), with the same LangGraph durability for
both (``--durability``; LangGraph's default, ``async``). Reported: the median turn of each, the
median of the per-turn ratios, and the first 50 and last 50 turns of each (target: ratio <=
1.3); how much continuity's turn grows from the first 50 turns to the last against how much
SQLite's does (the graph's own work grows with the conversation, whoever stores it: flat is
within 1.2x of SQLite's growth); and the log syncs continuity makes a turn (``os.fdatasync`` and
``os.fsync`` calls counted; SQLite's own, inside its C library, are not: ``strace -f -c`` counts
them, about 9 a turn).

One LangGraph thread is filled with ``N`` checkpoints through ``ContinuitySaver.put``, each as a
graph step makes it: a ``step`` channel that changes every time, a ``messages`` channel of two
LangChain messages with new ids (so every put also mirrors: two messages retracted, two
appended) and one ``put_writes`` per checkpoint. Then, at that size, each call is timed
``--repeats`` times (median and p90):

* ``get_tuple latest`` — the config without ``checkpoint_id`` (what every invoke does first);
* ``get_tuple by id`` — a checkpoint picked at random among all of them (time travel);
* ``put`` — one more checkpoint on the chain, mirror included;
* ``put_writes`` — one task's write to the latest checkpoint;
* ``list(limit=10)`` — the newest ten (``get_state_history`` with a limit).

For the JSONL store (``Store(path, durable=False)``: an fsync per batch would add the same
constant at every size) and the memory store. The ``vs baseline`` column is the ratio of the
largest size to the smallest (target: within 1.5x, i.e. flat), the sizes' threads filled first
and then timed interleaved, round by round (a size timed in its own block would measure the
machine's load as it changes, not the saver). ``--quick`` divides the sizes by 10.
"""

from __future__ import annotations

import gc
import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from continuity.integrations.langgraph import ContinuitySaver
from continuity.store.base import BaseStore
from continuity.store.jsonl import Store
from continuity.store.memory import MemoryStore
from tools.bench._common import (
    Report,
    Row,
    common_parser,
    emit,
    log,
    median,
    percentile,
    short_size,
    time_row,
    work_dir,
)

__all__ = ["main", "run", "run_turns"]

DEFAULT_SIZES: Final = (100, 100_000)
FLAT_TARGET: Final = 1.5
_CALLS: Final = ("get_tuple latest", "get_tuple by id", "put", "put_writes", "list(limit=10)")
THREAD: Final = "graph"


class Filler:
    """Puts checkpoints on one thread the way a graph's steps do."""

    def __init__(self, saver: ContinuitySaver, thread: str = THREAD) -> None:
        self.saver = saver
        self.thread = thread
        self.config: RunnableConfig = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        self.version: str | None = None
        self.ids: list[str] = []

    def put(self) -> None:
        i = len(self.ids)
        checkpoint = empty_checkpoint()
        checkpoint["id"] = str(uuid6(clock_seq=i))
        self.version = self.saver.get_next_version(self.version, None)
        checkpoint["channel_values"] = {
            "messages": [
                HumanMessage(f"question {i}", id=f"h{i}"),
                AIMessage(f"answer {i}", id=f"a{i}"),
            ],
            "step": i,
        }
        versions: ChannelVersions = {"messages": self.version, "step": self.version}
        checkpoint["channel_versions"] = dict(versions)
        metadata: Any = {"source": "loop", "step": i, "parents": {}}
        self.config = self.saver.put(self.config, checkpoint, metadata, versions)
        self.ids.append(checkpoint["id"])

    def put_writes(self) -> None:
        self.saver.put_writes(self.config, [("step", len(self.ids))], f"task-{len(self.ids)}")

    def fill_to(self, n: int) -> None:
        started = time.perf_counter()
        while len(self.ids) < n:
            self.put()
            self.put_writes()
            if len(self.ids) % 10_000 == 0:
                log(f"  {len(self.ids):,} checkpoints, {time.perf_counter() - started:.0f} s")


def _calls(filler: Filler, picks: list[str]) -> dict[str, Callable[[int], object]]:
    saver, thread = filler.saver, filler.thread
    latest: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    return {
        "get_tuple latest": lambda _: saver.get_tuple(latest),
        "get_tuple by id": lambda r: saver.get_tuple(
            {"configurable": {"thread_id": thread, "checkpoint_ns": "", "checkpoint_id": picks[r]}}
        ),
        "put": lambda _: filler.put(),
        "put_writes": lambda _: filler.put_writes(),
        "list(limit=10)": lambda _: list(saver.list(latest, limit=10)),
    }


def _measure(
    fillers: dict[int, Filler], repeats: int, rng: random.Random
) -> dict[int, dict[str, list[float]]]:
    """Each call at each size, ``repeats`` times, interleaved: every round times every call at
    every size (the sizes' order alternating), so a slow moment of the machine falls on all
    sizes alike and the ratio between sizes measures the saver, not the load."""
    calls = {n: _calls(f, [rng.choice(f.ids) for _ in range(repeats)]) for n, f in fillers.items()}
    times: dict[int, dict[str, list[float]]] = {n: {name: [] for name in _CALLS} for n in fillers}
    order = sorted(fillers)
    for r in range(repeats):
        for n in order if r % 2 == 0 else order[::-1]:
            for name in _CALLS:
                start = time.perf_counter_ns()
                found = calls[n][name](r)
                times[n][name].append((time.perf_counter_ns() - start) / 1e9)
                if name.startswith("get_tuple") and found is None:
                    raise RuntimeError(f"{name}: no checkpoint found")
    return times


def _store(kind: str, folder: Path) -> BaseStore:
    return Store(folder / kind, create=True, durable=False) if kind == "jsonl" else MemoryStore()


def run(*, sizes: tuple[int, ...] = DEFAULT_SIZES, repeats: int = 50, seed: int = 0) -> Report:
    started = time.perf_counter()
    report = Report(
        "bench_langgraph", {"sizes": ",".join(map(short_size, sizes)), "repeats": repeats}
    )
    rng = random.Random(seed)
    with work_dir("langgraph") as folder:
        for kind in ("jsonl", "memory"):
            saver = ContinuitySaver(_store(kind, folder))
            fillers = {n: Filler(saver, f"{THREAD}-{n}") for n in sorted(sizes)}
            for n, filler in fillers.items():
                log(f"{kind}: filling a thread to {n:,} checkpoints")
                filler.fill_to(n)
            gc.collect()
            times = _measure(fillers, repeats, rng)
            first: dict[str, float] = {}
            for n in sorted(sizes):
                for name in _CALLS:
                    row = time_row(f"{kind}: {name} @{short_size(n)}", times[n][name])
                    if name not in first:
                        first[name] = row.median
                    else:
                        row.baseline = f"@{short_size(min(sizes))}"
                        row.ratio = row.median / first[name]
                        row.target = first[name] * FLAT_TARGET
                    report.rows.append(row)
    report.notes.append(
        "each put also mirrors its messages (2 retracted, 2 appended) and writes 2 artifacts; "
        "the JSONL store runs with durable=False (an fsync adds a constant)"
    )
    report.notes.append(f"target: the largest size within {FLAT_TARGET}x of the smallest")
    report.seconds = time.perf_counter() - started
    return report


TURN_TARGET: Final = 1.3
FLAT_TURNS: Final = 1.2
EDGE: Final = 50


def _agent_graph(saver: Any) -> Any:
    from langchain_core.tools import tool
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    def model(state: MessagesState) -> dict[str, Any]:
        last = state["messages"][-1]
        if last.type == "human":
            call = {"name": "add", "args": {"a": 2, "b": 3}, "id": f"call-{last.id}"}
            text = "Let me add those. " * 5
            return {"messages": [AIMessage(text, tool_calls=[call], id=f"ai-call-{last.id}")]}
        text = f"The sum is {last.content}. " + "Some longer explanation. " * 10
        return {"messages": [AIMessage(text, id=f"ai-answer-{last.id}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("model", model)
    builder.add_node("tools", ToolNode([add]))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", "model")
    return builder.compile(checkpointer=saver)


def run_turns(turns: int = 300, durability: str = "async") -> Report:
    """The agent loop side by side with SqliteSaver (see the module's docstring), both graphs
    invoked with LangGraph's ``durability`` (its default: ``"async"``)."""
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    started = time.perf_counter()
    report = Report("bench_langgraph --turns", {"turns": turns, "durability": durability})
    config: RunnableConfig = {"configurable": {"thread_id": THREAD}}
    with work_dir("langgraph-turns") as folder:
        ours = ContinuitySaver(Store(folder / "continuity", create=True))
        conn = sqlite3.connect(str(folder / "sqlite.db"), check_same_thread=False)
        theirs = SqliteSaver(conn)
        theirs.setup()
        graphs = {"continuity": _agent_graph(ours), "sqlite": _agent_graph(theirs)}
        times: dict[str, list[float]] = {"continuity": [], "sqlite": []}
        syncs = _SyncCount()
        try:
            for i in range(turns):
                question = {"messages": [HumanMessage(f"What is 2 + 3? (turn {i})", id=f"h{i}")]}
                order = ["continuity", "sqlite"] if i % 2 == 0 else ["sqlite", "continuity"]
                for name in order:
                    syncs.counting = name == "continuity"
                    start = time.perf_counter_ns()
                    graphs[name].invoke(question, config, durability=durability)
                    times[name].append((time.perf_counter_ns() - start) / 1e9)
                if (i + 1) % 50 == 0:
                    log(f"  {i + 1} turns")
        finally:
            syncs.stop()
        conn.close()
        ours.close()
    edge = min(EDGE, max(1, turns // 3))
    ratios = [a / b for a, b in zip(times["continuity"], times["sqlite"], strict=True)]
    growth: dict[str, float] = {}
    for name in ("continuity", "sqlite"):
        row = time_row(f"{name}: turn", times[name])
        report.rows.append(row)
        first = time_row(f"{name}: first {edge} turns", times[name][:edge])
        last = time_row(f"{name}: last {edge} turns", times[name][-edge:])
        last.baseline = f"first {edge}"
        last.ratio = growth[name] = last.median / first.median
        report.rows.extend([first, last])
    report.rows.append(_ratio_row("continuity / sqlite, per turn", ratios, TURN_TARGET))
    for part, chunk in (("first", ratios[:edge]), ("last", ratios[-edge:])):
        report.rows.append(_ratio_row(f"continuity / sqlite, {part} {edge} turns", chunk, None))
    report.rows.append(
        Row(
            f"continuity's growth (last / first {edge}) / sqlite's",
            growth["continuity"] / growth["sqlite"],
            "x",
            target=FLAT_TURNS,
        )
    )
    report.rows.append(Row("continuity: log syncs a turn", syncs.calls / turns, "syncs"))
    report.notes.append(
        f"paired in one process, turns interleaved with the order alternating; LangGraph's "
        f"durability {durability!r}; JSONL store with its default durability (a sync per put; "
        "a task's writes ride on it in an 'async' run), SqliteSaver with its own (WAL, a "
        "commit and its sync per call)"
    )
    report.seconds = time.perf_counter() - started
    return report


class _SyncCount:
    """Counts the ``os.fdatasync`` and ``os.fsync`` calls made while ``counting`` (the
    continuity store's syncs: SQLite's are made inside its C library)."""

    def __init__(self) -> None:
        self.calls = 0
        self.counting = False
        self._real = (os.fdatasync, os.fsync)

        def wrap(real: Callable[[int], None]) -> Any:
            def counted(fd: int) -> None:
                if self.counting:
                    self.calls += 1
                real(fd)

            return counted

        os.fdatasync, os.fsync = wrap(os.fdatasync), wrap(os.fsync)

    def stop(self) -> None:
        os.fdatasync, os.fsync = self._real


def _ratio_row(metric: str, ratios: list[float], target: float | None) -> Row:
    """The median of paired ratios (p90: the worse end)."""
    return Row(
        metric, median(ratios), "x", p90=percentile(ratios, 90), n=len(ratios), target=target
    )


def main(argv: list[str] | None = None) -> None:
    parser = common_parser(__doc__.split("\n\n")[0], DEFAULT_SIZES, "checkpoints")
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--quick", action="store_true", help="sizes / 10")
    parser.add_argument(
        "--turns", type=int, default=0, help="an agent loop of this many turns vs SqliteSaver"
    )
    parser.add_argument(
        "--durability",
        choices=("async", "sync", "exit"),
        default="async",
        help="LangGraph's durability for --turns (its default: async)",
    )
    args = parser.parse_args(argv)
    if args.turns:
        emit([run_turns(args.turns, args.durability)], args.json)
        return
    sizes = tuple(max(10, n // 10) for n in args.sizes) if args.quick else args.sizes
    emit([run(sizes=sizes, repeats=args.repeats, seed=args.seed)], args.json)


if __name__ == "__main__":
    main()
