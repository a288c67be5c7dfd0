"""Recall's ranking in-process as the thread grows, this tree against a baseline tree.

    python -m tools.bench.bench_recall [--sizes 1000,10000,100000] [--queries 40]
        [--turn-queries 20] [--rounds 1] [--baseline-tree PATH] [--baseline-memory-max 10000]
        [--profile] [--json]

Each size is a thread of that many messages written as the agent loop writes them
(:mod:`tools.bench.bench_agent_loop`'s fake model, no compiles): turns of a user request (~40
query terms), an assistant ``tool_use`` of Bash, its 1-3 KB result (one in five a 50 KB output
kept as an artifact, its 1 KB preview in the message), an assistant reply. The JSONL thread is
generated once and cached with its caches and search index built; the in-memory one is
generated again in each process (seconds). The queries are the user requests of the turns
that would come next.

What is timed is ``rank_prefix(thread, query_terms(request), max_seq=..., k=8)``, what
``compile_context(..., recall=True)`` calls, after one untimed call (a process's first query
reads the index, or builds the in-memory state from the log):

* ``prefix held``: ``max_seq`` 16 seqs before the head (recall's cut: the window's start or the
  latest summary), nothing appended between queries, ``--queries`` (40) different requests;
* ``after a turn``: one turn appended (untimed), then ``max_seq`` = the head: the index (or the
  in-memory state) has to take the turn in before ranking, ``--turn-queries`` (20) rounds.

Rows give the median and p90 per store and size, ``largest/smallest`` (flat: near 1), and, with
``--baseline-tree`` (a checkout of another revision, e.g. ``git worktree add /tmp/base HEAD``),
the same measured by that tree's code in the same run, in processes alternating with this
tree's (``--rounds`` each), and ``this / baseline``. The baseline's in-memory store reads the
whole prefix for every query, so it runs only up to ``--baseline-memory-max`` messages.
``--profile`` prints cProfile's view of this tree's queries at the largest size to stderr.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Final

from continuity import frames as fr
from continuity.store.base import BaseStore
from continuity.store.jsonl import Store
from continuity.store.memory import MemoryStore
from tools.bench._common import (
    Report,
    Row,
    bench_dir,
    common_parser,
    emit,
    log,
    median,
    short_size,
    time_row,
)
from tools.bench.bench_agent_loop import FakeModel

__all__ = ["main", "run"]

DEFAULT_SIZES: Final = (1_000, 10_000, 100_000)
THREAD: Final = "agent"
GENERATOR: Final = 1
"""Bump when the thread written here changes: cached stores are keyed by it."""
K: Final = 8
BEHIND: Final = 16
_ROOT: Final = Path(__file__).resolve().parents[2]


# --- the thread -----------------------------------------------------------------------------------


class Turns:
    """The agent loop's turns, deterministic: four messages each."""

    def __init__(self, seed: int, store: BaseStore) -> None:
        self.model = FakeModel(seed)
        self.rng = random.Random(seed + 1)
        self.store = store
        self.big_data = self.model.tool_output(50 * 1024).encode()
        self.big_id = store.artifacts.put(self.big_data)

    def frames(self, i: int) -> list[fr.Frame]:
        text = self.model.request_text(i)
        ask = {"messages": [{"role": "user"}]}
        reply = self.model.call(ask, i, 0)
        call = next(b for b in reply if isinstance(b, fr.ToolUseBlock))
        if self.rng.random() < 0.2:
            block = fr.ToolResultBlock(
                tool_use_id=call.id,
                artifact_id=self.big_id,
                preview=self.big_data[:1024].decode(),
                size=len(self.big_data),
            )
        else:
            output = self.model.tool_output(self.rng.randrange(1000, 3000))
            block = fr.ToolResultBlock(tool_use_id=call.id, content=output)
        final = self.model.call(ask, i, 1)
        return [
            fr.message("user", text),
            fr.message("assistant", content=reply),
            fr.message("user", content=[block]),
            fr.message("assistant", content=final),
        ]

    def request(self, i: int) -> str:
        """The user's request of turn ``i`` as a fresh model would write it (the query)."""
        return FakeModel(i * 7919 + 13).request_text(i)


def write_turns(store: BaseStore, messages: int, seed: int) -> Turns:
    turns = Turns(seed, store)
    thread = store.thread(THREAD)
    batch: list[fr.Frame] = []
    for i in range(messages // 4):
        batch += turns.frames(i)
        if len(batch) >= 2_000:
            thread.append(batch, durable=False)
            batch = []
    if batch:
        thread.append(batch, durable=False)
    return turns


def cached_store(messages: int, seed: int) -> Path:
    """A JSONL store with the thread, its caches and search index built (generated once)."""
    root = bench_dir() / f"recall-g{GENERATOR}-m{messages}-s{seed}"
    if (root / "done").is_file():
        return root
    import shutil

    from continuity.caches.thread_index import ThreadIndex
    from continuity.retrieval.index import ThreadSearchIndex

    shutil.rmtree(root, ignore_errors=True)
    log(f"bench_recall: writing {messages:,} messages into {root} (cached for later runs)")
    store = Store(root, create=True, durable=False)
    write_turns(store, messages, seed)
    ThreadIndex(store.thread(THREAD)).refresh()
    ThreadSearchIndex(store.thread(THREAD)).refresh()
    (root / "done").write_text("1\n")
    return root


# --- one process's measurements (run in a child, with either tree's code) -------------------------


def measure(kind: str, messages: int, seed: int, queries: int, turn_queries: int) -> dict[str, Any]:
    """Seconds of each query (``held`` and ``turn``) in this process, with the code it imports."""
    import shutil
    import tempfile

    import continuity
    from continuity.retrieval.ranking import query_terms, rank_prefix

    scratch = Path(tempfile.mkdtemp(prefix="bench-recall-"))
    try:
        store: BaseStore
        if kind == "jsonl":
            shutil.copytree(cached_store(messages, seed), scratch / "s")
            store = Store(scratch / "s", durable=False)
            turns = Turns(seed, store)
        else:
            store = MemoryStore()
            turns = write_turns(store, messages, seed)
        thread = store.thread(THREAD)
        n_turns = messages // 4

        def rank(i: int, behind: int) -> float:
            head = thread.head()
            assert head is not None
            terms = query_terms(turns.request(i))
            start = time.perf_counter_ns()
            rank_prefix(thread, terms, max_seq=head.seq - behind, k=K)
            return (time.perf_counter_ns() - start) / 1e9

        rank(n_turns + 10_000, BEHIND)  # untimed: the process's first query reads everything
        held = [rank(n_turns + 1 + q, BEHIND) for q in range(queries)]
        after = []
        for q in range(turn_queries):
            thread.append(turns.frames(n_turns + q), durable=False)
            after.append(rank(n_turns + 1 + q, 0))
        return {"held": held, "turn": after, "source": continuity.__file__}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _child(tree: Path, args: list[str]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if out.returncode:
        raise RuntimeError(f"bench_recall child ({tree}) failed:\n{out.stderr}")
    result: dict[str, Any] = json.loads(out.stdout.splitlines()[-1])
    if not str(result["source"]).startswith(str(tree)):
        raise RuntimeError(f"the child meant for {tree} imported {result['source']}")
    return result


# --- the benchmark --------------------------------------------------------------------------------


def run(
    sizes: tuple[int, ...] = DEFAULT_SIZES,
    queries: int = 40,
    turn_queries: int = 20,
    rounds: int = 1,
    baseline_tree: Path | None = None,
    baseline_memory_max: int = 10_000,
    seed: int = 0,
    profile: bool = False,
) -> Report:
    started = time.perf_counter()
    params: dict[str, Any] = {
        "sizes": ",".join(map(str, sizes)),
        "queries": queries,
        "turn_queries": turn_queries,
        "rounds": rounds,
        "baseline": str(baseline_tree) if baseline_tree else "-",
    }
    report = Report("bench_recall", params)
    for n in sizes:
        cached_store(n, seed)
    trees = [("this", _ROOT)] + ([("baseline", baseline_tree)] if baseline_tree else [])
    samples: dict[tuple[str, str, str, int], list[float]] = {}
    for kind in ("jsonl", "memory"):
        for n in sizes:
            for r in range(rounds):
                order = trees if r % 2 == 0 else trees[::-1]
                for name, tree in order:
                    if name == "baseline" and kind == "memory" and n > baseline_memory_max:
                        continue
                    log(f"bench_recall: {kind} @{short_size(n)} messages, {name} tree")
                    args = [kind, str(n), str(seed), str(queries), str(turn_queries)]
                    got = _child(tree, args)
                    for what in ("held", "turn"):
                        samples.setdefault((kind, what, name, n), []).extend(got[what])
    labels = {"held": "prefix held", "turn": "after a turn"}
    for kind in ("jsonl", "memory"):
        for what in ("held", "turn"):
            for n in sizes:
                mine = samples[(kind, what, "this", n)]
                row = time_row(f"rank_prefix, {labels[what]} [{kind}] @{short_size(n)}", mine)
                base = samples.get((kind, what, "baseline", n))
                if base:
                    row.baseline = "baseline tree"
                    row.ratio = median(mine) / median(base)
                    report.rows.append(row)
                    base_row = time_row(f"  baseline tree [{kind}] @{short_size(n)}", base)
                    base_row.baseline = "this tree"
                    base_row.ratio = median(base) / median(mine)
                    report.rows.append(base_row)
                else:
                    report.rows.append(row)
            if len(sizes) > 1:
                lo, hi = sizes[0], sizes[-1]
                ratio = median(samples[(kind, what, "this", hi)]) / median(
                    samples[(kind, what, "this", lo)]
                )
                report.rows.append(
                    Row(
                        f"  {short_size(hi)}/{short_size(lo)}, {labels[what]} [{kind}]",
                        ratio,
                        "x",
                    )
                )
    report.notes.append(
        "rank_prefix(thread, query_terms(request), max_seq, k=8): ~40 query terms a request; "
        f"'prefix held': max_seq = head - {BEHIND}; 'after a turn': a turn appended, "
        "max_seq = head"
    )
    if profile:
        _profile(sizes[-1], seed, queries)
    report.seconds = time.perf_counter() - started
    return report


def _profile(messages: int, seed: int, queries: int) -> None:
    import cProfile
    import io
    import pstats

    from continuity.retrieval.ranking import query_terms, rank_prefix

    for kind in ("jsonl", "memory"):
        store: BaseStore
        if kind == "jsonl":
            store = Store(cached_store(messages, seed), durable=False)
            turns = Turns(seed, store)
        else:
            store = MemoryStore()
            turns = write_turns(store, messages, seed)
        thread = store.thread(THREAD)
        head = thread.head()
        assert head is not None
        rank_prefix(thread, query_terms(turns.request(0)), max_seq=head.seq - BEHIND, k=K)
        profile = cProfile.Profile()
        profile.enable()
        for q in range(queries):
            terms = query_terms(turns.request(messages + q))
            rank_prefix(thread, terms, max_seq=head.seq - BEHIND, k=K)
        profile.disable()
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(25)
        print(f"== cProfile of {queries} queries [{kind}] @{messages:,}\n{out.getvalue()}")


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        kind, n, seed, queries, turn_queries = argv[1:6]
        result = measure(kind, int(n), int(seed), int(queries), int(turn_queries))
        print(json.dumps(result))
        return
    parser = common_parser(__doc__.split("\n\n")[0], DEFAULT_SIZES, unit="messages")
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--turn-queries", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=1, help="processes per tree and size")
    parser.add_argument("--baseline-tree", type=Path, default=None)
    parser.add_argument("--baseline-memory-max", type=int, default=10_000)
    parser.add_argument("--quick", action="store_true", help="sizes / 10")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args(argv)
    sizes = tuple(max(4, n // 10) for n in args.sizes) if args.quick else args.sizes
    report = run(
        sizes=sizes,
        queries=args.queries,
        turn_queries=args.turn_queries,
        rounds=args.rounds,
        baseline_tree=args.baseline_tree.resolve() if args.baseline_tree else None,
        baseline_memory_max=args.baseline_memory_max,
        seed=args.seed,
        profile=args.profile,
    )
    emit([report], args.json)


if __name__ == "__main__":
    main()
