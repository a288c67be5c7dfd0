"""The OpenAI Agents SDK sessions: what a turn costs as a session grows from 100 to 10,000 items.

    python -m tools.bench.bench_openai_agents [--sizes 100,10000] [--repeats 30] [--quick] [--json]
    python -m tools.bench.bench_openai_agents --vs-sqlite [--items 2000] [--repeats 30]

A session is filled to ``N`` items (a user message, a function call, its output, an assistant
message, repeated), then each turn is timed ``--repeats`` times (median and p90), as the runner
makes it: ``add_items`` of the turn's four items, and the history read the next run starts with.

* ``ContinuitySession``: ``get_items()`` (every item: O(n) by nature, like the SDK's SQLite
  session; the session keeps what it rendered, so the row ``new session`` is the first read of
  a process) and ``get_items(20)`` (the tail the runner's rewind reads);
* ``CompiledSession`` (``StrideMessages(50)`` compaction with a cheap deterministic summarizer,
  ``Limits(recent_messages=40, min_recent=8, budget_tokens=60_000)``, decisions logged):
  ``add_items`` (with its compaction check, and a compaction every 50 items) and ``get_items()``
  (compile + render: the compiled history).

JSONL store with ``durable=False`` (an fsync per batch adds the same constant at every size).
The ``vs baseline`` column is the largest size against the smallest. ``--quick`` divides the
sizes by 10.

``--vs-sqlite``: ``ContinuitySession`` side by side with the SDK's ``SQLiteSession`` on a file,
each at its defaults (JSONL durable: an fsync per batch; SQLite's own commit), paired (each
repeat times both, in alternating order) and compared by medians (the ``ratio`` column is
continuity over SQLite): ``get_items()`` at ``--items`` items on the same object, on a new
object, and in a new process (open + read, the whole process: interpreter and imports
included); and the time a ``Runner.run`` (scripted model, one user turn and one reply) spends
in the session's methods, in-process, the session at ``--items`` items.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final

from continuity import frames as fr
from continuity.context.compaction import StrideMessages, run_compaction
from continuity.integrations._openai_agents_items import frames_for_items
from continuity.integrations.openai_agents import CompiledSession, ContinuitySession
from continuity.store.jsonl import Store
from continuity.summary import SummaryContent, SummaryDoc
from tools.bench._common import Report, common_parser, emit, log, short_size, time_row, work_dir

__all__ = ["main", "run"]

DEFAULT_SIZES: Final = (100, 10_000)
LIMITS: Final = fr.Limits(recent_messages=40, min_recent=8, budget_tokens=60_000)
STRIDE: Final = 50


class CheapSummarizer:
    """Deterministic and cheap: the row measures compaction's bookkeeping, not a summarizer."""

    id = "bench.openai-agents/1"

    def summarize(
        self, base: SummaryDoc | None, messages: Sequence[fr.MessageAppended]
    ) -> SummaryContent:
        lines = base.text.splitlines() if base else []
        lines += [f"{m.seq} {m.role}" for m in messages]
        return SummaryContent(text="\n".join(lines[-40:]))


def turn_items(i: int) -> list[dict[str, Any]]:
    """One tool-using turn, in the shapes the SDK stores."""
    return [
        {"role": "user", "content": f"Turn {i}: where is order A{i}?"},
        {
            "type": "function_call",
            "call_id": f"call_{i}",
            "name": "lookup_order",
            "arguments": f'{{"order_id": "A{i}"}}',
            "id": f"fc_{i}",
            "status": "completed",
        },
        {"type": "function_call_output", "call_id": f"call_{i}", "output": f"A{i}: shipped"},
        {
            "type": "message",
            "id": f"msg_{i}",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": f"A{i} ships.", "annotations": []}],
        },
    ]


def _fill(store: Store, thread_id: str, n: int, *, compact: bool) -> None:
    """``n`` items appended directly (fast), in batches; then compaction when asked."""
    thread = store.thread(thread_id)
    batch: list[dict[str, Any]] = []
    for i in range(n // 4 + 1):
        batch += turn_items(i)
    batch = batch[:n]
    for start in range(0, len(batch), 2_000):
        thread.append(frames_for_items(batch[start : start + 2_000], artifacts=thread))
    if compact:
        run_compaction(thread, StrideMessages(STRIDE), summarizer=CheapSummarizer())


async def _time(fn: Callable[[], Awaitable[object]]) -> float:
    gc.collect()
    start = time.perf_counter_ns()
    await fn()
    return (time.perf_counter_ns() - start) / 1e9


async def _measure(
    raw: ContinuitySession, compiled: CompiledSession, n: int, repeats: int
) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {}

    def keep(name: str, seconds: float) -> None:
        times.setdefault(name, []).append(seconds)

    for r in range(repeats):
        items: Any = turn_items(n + r)
        keep("raw: add_items (4)", await _time(lambda: raw.add_items(items)))  # noqa: B023
        keep("raw: get_items()", await _time(raw.get_items))
        fresh = ContinuitySession(raw.session_id, raw.store)  # nothing rendered yet
        keep("raw: get_items(), new session", await _time(fresh.get_items))
        keep("raw: get_items(20)", await _time(lambda: raw.get_items(20)))
        keep("compiled: add_items (4)", await _time(lambda: compiled.add_items(items)))  # noqa: B023
        keep("compiled: get_items()", await _time(compiled.get_items))
    return times


def run(*, sizes: tuple[int, ...] = DEFAULT_SIZES, repeats: int = 30) -> Report:
    started = time.perf_counter()
    report = Report(
        "openai_agents",
        {"sizes": ",".join(map(str, sizes)), "repeats": repeats, "store": "jsonl, durable=False"},
    )
    first: dict[str, float] = {}
    with work_dir("openai-agents") as folder:
        for n in sizes:
            log(f"openai-agents: {n} items")
            store = Store(folder / f"store-{n}", create=True, durable=False)
            _fill(store, "raw", n, compact=False)
            _fill(store, "compiled", n, compact=True)
            raw = ContinuitySession("raw", store)
            compiled = CompiledSession(
                "compiled",
                store,
                limits=LIMITS,
                compaction=StrideMessages(STRIDE),
                summarizer=CheapSummarizer(),
            )
            times = asyncio.run(_measure(raw, compiled, n, repeats))
            for name, samples in times.items():
                row = time_row(f"{name} @{short_size(n)}", samples)
                if name not in first:
                    first[name] = row.median
                else:
                    row.baseline = f"@{short_size(min(sizes))}"
                    row.ratio = row.median / first[name]
                report.rows.append(row)
    report.notes.append(
        "raw get_items() returns every item (O(n), as the SDK's own sessions do); the runner "
        "reads it once per run. The compiled session's get_items() is the bounded history."
    )
    report.seconds = time.perf_counter() - started
    return report


class _Timed:
    """A session whose methods add the time they take to ``spent`` (what the runner waits on)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.session_id = inner.session_id
        self.session_settings = inner.session_settings
        self.spent = 0.0

    async def _timed(self, coro: Awaitable[Any]) -> Any:
        start = time.perf_counter()
        try:
            return await coro
        finally:
            self.spent += time.perf_counter() - start

    async def get_items(self, limit: int | None = None) -> Any:
        return await self._timed(self.inner.get_items(limit))

    async def add_items(self, items: Any) -> None:
        await self._timed(self.inner.add_items(items))

    async def pop_item(self) -> Any:
        return await self._timed(self.inner.pop_item())

    async def clear_session(self) -> None:
        await self._timed(self.inner.clear_session())


_PROCESS: Final = """
import asyncio, sys
kind, root = sys.argv[1], sys.argv[2]
if kind == "sqlite":
    from agents import SQLiteSession
    session = SQLiteSession("s", root + "/sqlite.db")
else:
    from continuity.integrations.openai_agents import ContinuitySession
    session = ContinuitySession("s", root + "/store")
assert len(asyncio.run(session.get_items())) > 0
"""


def run_vs_sqlite(*, items: int = 2_000, repeats: int = 30) -> Report:
    """ContinuitySession against SQLiteSession (file), paired, by medians."""
    import subprocess
    import sys

    from agents import Agent, Runner, SQLiteSession

    from tests.support.agents_sdk import ScriptedModel, reply

    started = time.perf_counter()
    report = Report(
        "openai_agents_vs_sqlite",
        {"items": items, "repeats": repeats, "store": "jsonl durable vs SQLiteSession file"},
    )
    with work_dir("openai-agents-vs-sqlite") as folder:
        batch: list[Any] = []
        for i in range(items // 4 + 1):
            batch += turn_items(i)
        batch = batch[:items]
        ours = ContinuitySession("s", folder / "store")
        theirs = SQLiteSession("s", folder / "sqlite.db")
        times: dict[str, tuple[list[float], list[float]]] = {}

        def keep(name: str, a: float, b: float) -> None:
            pair = times.setdefault(name, ([], []))
            pair[0].append(a)
            pair[1].append(b)

        async def fill() -> None:
            for start in range(0, len(batch), 500):
                await ours.add_items(batch[start : start + 500])
                await theirs.add_items(batch[start : start + 500])

        async def paired(r: int) -> None:
            order = (0, 1) if r % 2 else (1, 0)
            got = [0.0, 0.0]
            for k in order:
                got[k] = await _time((ours, theirs)[k].get_items)
            keep("get_items()", *got)
            fresh = (
                ContinuitySession("s", folder / "store"),
                SQLiteSession("s", folder / "sqlite.db"),
            )
            for k in order:
                got[k] = await _time(fresh[k].get_items)
            keep("get_items(), new session object", *got)
            await fresh[0].close()
            fresh[1].close()
            for k in order:
                session = _Timed((ours, theirs)[k])
                model = ScriptedModel([reply(f"answer {r}")])
                await Runner.run(Agent(name="a", model=model), f"question {r}", session=session)
                got[k] = session.spent
            keep("time in the session per Runner.run", *got)

        async def go() -> None:
            await fill()
            for r in range(repeats):
                await paired(r)

        log(f"openai-agents vs sqlite: {items} items, {repeats} repeats")
        asyncio.run(go())
        for r in range(max(5, repeats // 3)):
            got = [0.0, 0.0]
            for k in (0, 1) if r % 2 else (1, 0):
                kind = ("continuity", "sqlite")[k]
                start = time.perf_counter()
                subprocess.run([sys.executable, "-c", _PROCESS, kind, str(folder)], check=True)
                got[k] = time.perf_counter() - start
            keep("get_items() in a new process (whole process)", *got)
        theirs.close()
        asyncio.run(ours.close())
    for name, (a, b) in times.items():
        mine = time_row(f"continuity: {name} @{short_size(items)}", a)
        base = time_row(f"SQLiteSession: {name} @{short_size(items)}", b)
        mine.baseline = "SQLiteSession"
        mine.ratio = mine.median / base.median
        mine.target = base.median * 1.5
        report.rows += [base, mine]
    report.notes.append("target: each continuity row <= 1.5x SQLiteSession's (ADR 0024, issue 27)")
    report.seconds = time.perf_counter() - started
    return report


def main(argv: list[str] | None = None) -> None:
    parser = common_parser((__doc__ or "").split("\n\n")[0], DEFAULT_SIZES, "items")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--quick", action="store_true", help="sizes divided by 10")
    parser.add_argument("--vs-sqlite", action="store_true", help="side by side with SQLiteSession")
    parser.add_argument("--items", type=int, default=2_000, help="items, for --vs-sqlite")
    args = parser.parse_args(argv)
    if args.vs_sqlite:
        emit([run_vs_sqlite(items=args.items, repeats=args.repeats)], args.json)
        return
    sizes = tuple(max(10, n // 10) for n in args.sizes) if args.quick else args.sizes
    emit([run(sizes=sizes, repeats=args.repeats)], args.json)


if __name__ == "__main__":
    main()
