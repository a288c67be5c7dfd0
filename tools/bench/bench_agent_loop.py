"""An agent loop as a runtime runs it: what continuity adds to each turn, and whether it grows.

    python -m tools.bench.bench_agent_loop [--turns 2000] [--window 100] [--compact-every 25]
        [--big-share 0.2] [--big-kb 50] [--quick] [--profile] [--profile-turns 100] [--json]

A turn is what a coding agent does for one request: the user's message; a model call that
answers with a ``tool_use``; the tool's result; a second model call that answers in text. So
four appends and two compiles a turn, each compile rendered with ``to_anthropic`` (the request
the model would get). The first compile of a turn asks for recall (``recall=True``: the user's
message is the query). One tool output in five (``--big-share``) is 50 KB (``--big-kb``): it goes
to an artifact first and the message holds a ``ToolResultBlock(artifact_id=..., preview=...,
size=...)``, as a runtime does with a large output; the others are 1-3 KB inline. Every
``--compact-every`` (25) turns ``run_compaction(thread, StrideMessages(100))`` runs with a
summarizer of the benchmark's own (:class:`LoopSummarizer`, deterministic and cheap, so the
row measures compaction's bookkeeping, not a summarizer).

Three loops:

* ``jsonl, log on``: ``Store(path)`` with default durability (an fsync per append) and every
  compile logged (``compile_context(..., log=True)``, the default);
* ``jsonl, log off``: the same with ``log=False``;
* ``memory``: ``MemoryStore()``, compiles logged.

The two JSONL loops run side by side, turn by turn, so the machine's load falls on both alike;
the memory loop runs after them, on its own, because the garbage of a loop that allocates far
more set off collections inside the other loops' timed calls (measured: a JSONL turn's appends
went from 1.2 to 2.7 ms over 600 turns beside the memory loop, from 1.1 to 1.3 ms with the
collector off).

The time of a turn is the continuity calls alone: ``message()`` and ``append`` (and the artifact
``put`` of a large output), ``compile_context`` and ``to_anthropic``; the fake model is not
timed. Rows: p50 (the median column) and p90 of a turn over the first ``--window`` (100) turns
and the last ones, and their ratio (target: within 1.2x); the parts of a turn in the first window
and in the last (each last one against its first: what grew); a compaction run; the store's size
after the run (log, artifacts, caches) with logging on and off. ``--profile`` runs
``--profile-turns`` more turns of the ``jsonl, log on`` loop under
cProfile (the continuity calls only) and prints the top costs to stderr.
"""

from __future__ import annotations

import contextlib
import cProfile
import gc
import io
import os
import pstats
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TypeVar

from continuity import frames as fr
from continuity.context.compaction import StrideMessages, run_compaction
from continuity.context.compiler import compile_context
from continuity.context.render import to_anthropic
from continuity.store.base import BaseStore
from continuity.store.jsonl import Store
from continuity.store.memory import MemoryStore
from continuity.summary import SummaryContent, SummaryDoc
from tools.bench._common import Report, Row, common_parser, emit, log, median, time_row, work_dir

__all__ = ["LoopSummarizer", "main", "run"]

DEFAULT_TURNS: Final = 2_000
JSONL_TARGET_MS: Final = 6.0
MEMORY_TARGET_MS: Final = 2.0
FLAT_TARGET: Final = 1.2
STRIDE: Final = 100
"""Messages between checkpoints: 25 turns of 4 messages."""
THREAD: Final = "agent"
T = TypeVar("T")

_PARTS: Final = ("append", "compile (recall)", "compile", "render")


class LoopSummarizer:
    """A deterministic summarizer, cheap on purpose: the base's lines plus the first line of
    each new user request, the newest 40 kept. It implements the ``Summarizer`` protocol."""

    @property
    def id(self) -> str:
        return "bench.agent-loop/1"

    def summarize(
        self, base: SummaryDoc | None, messages: Sequence[fr.MessageAppended]
    ) -> SummaryContent:
        lines = base.sections.get("requests", []) if base is not None else []
        for m in messages:
            if m.role == "user":
                for b in m.content:
                    if isinstance(b, fr.TextBlock):
                        lines = [*lines, f"{m.seq}: {b.text.splitlines()[0][:120]}"]
        lines = lines[-40:]
        return SummaryContent(
            text="\n".join(lines) or "(nothing yet)", sections={"requests": lines}
        )


# --- the fake model and tools ------------------------------------------------------------------

_MODULES: Final = ("billing", "ledger", "search", "cursor", "storage", "auth", "retry", "export")
_ERRORS: Final = (
    "KeyError: 'manifest'",
    "AssertionError: expected 10, got 9",
    "TimeoutError: the lock was held for 30 s",
    "ValueError: invalid literal for int() with base 10",
    "FileNotFoundError: config/settings.toml",
)
# fmt: off
_WORDS: Final = (
    "the", "invoice", "total", "cache", "watermark", "offset", "index", "compaction", "summary",
    "retry", "backoff", "cursor", "ledger", "export", "token", "budget", "window", "batch",
    "commit", "rollback", "schema", "migration", "fixture",
)
# fmt: on


class FakeModel:
    """Deterministic replies; checks that each request is a request (not timed)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def _prose(self, n: int) -> str:
        return " ".join(self.rng.choice(_WORDS) for _ in range(n))

    def request_text(self, turn: int) -> str:
        module = _MODULES[turn % len(_MODULES)]
        error = _ERRORS[self.rng.randrange(len(_ERRORS))]
        return (
            f"Turn {turn}: tests in src/{module}/core_{turn % 37}.py fail with {error}. "
            f"{self._prose(30)}"
        )

    def call(self, request: dict[str, Any], turn: int, step: int) -> list[fr.ContentBlock]:
        messages = request["messages"]
        if not messages or messages[-1]["role"] != "user":
            raise RuntimeError(f"turn {turn}: a request that does not end with the user's turn")
        if step == 0:
            module = _MODULES[turn % len(_MODULES)]
            return [
                fr.TextBlock(text=f"Running the tests of {module}. {self._prose(12)}"),
                fr.ToolUseBlock(
                    id=f"toolu_{turn:06d}",
                    name="Bash",
                    input={"command": f"pytest -x -q tests/test_{module}.py -k case_{turn % 13}"},
                ),
            ]
        return [fr.TextBlock(text=f"Fixed it: {self._prose(60)}")]

    def tool_output(self, size: int) -> str:
        lines: list[str] = []
        total = 0
        while total < size:
            line = f"tests/test_mod.py::test_case_{len(lines)} {self.rng.choice(_WORDS)} PASSED"
            lines.append(line)
            total += len(line) + 1
        return "\n".join(lines)[:size]


# --- one loop ----------------------------------------------------------------------------------


@dataclass
class _Clock:
    """Accumulates the time of the continuity calls of a turn, by part; profiles them too."""

    profile: cProfile.Profile | None = None
    parts: dict[str, float] = field(default_factory=dict)

    def __call__(self, part: str, fn: Callable[[], T]) -> T:
        if self.profile is not None:
            self.profile.enable()
        start = time.perf_counter_ns()
        try:
            return fn()
        finally:
            self.parts[part] = self.parts.get(part, 0.0) + (time.perf_counter_ns() - start) / 1e9
            if self.profile is not None:
                self.profile.disable()


class AgentLoop:
    """One runtime's loop on one store."""

    def __init__(
        self,
        name: str,
        store: BaseStore,
        *,
        log: bool,
        seed: int,
        big_share: float,
        big_bytes: int,
        compact_every: int,
    ) -> None:
        self.name = name
        self.store = store
        self.thread = store.thread(THREAD)
        self.log = log
        self.model = FakeModel(seed)
        self.rng = random.Random(seed + 1)
        self.big_share = big_share
        self.big_bytes = big_bytes
        self.compact_every = compact_every
        self.summarizer = LoopSummarizer()
        self.turns = 0
        self.requests = 0
        self.samples: list[float] = []
        self.parts: list[dict[str, float]] = []
        self.compactions: list[float] = []
        self.checkpoints = 0

    def _compile(self, clock: _Clock, recall: bool) -> dict[str, Any]:
        part = "compile (recall)" if recall else "compile"
        result = clock(part, lambda: compile_context(self.thread, recall=recall, log=self.log))
        request = clock("render", lambda: to_anthropic(result.bundle))
        self.requests += 1
        return request

    def turn(self, profile: cProfile.Profile | None = None) -> None:
        i = self.turns
        clock = _Clock(profile)
        thread = self.thread
        text = self.model.request_text(i)
        clock("append", lambda: thread.append(fr.message("user", text)))
        request = self._compile(clock, recall=True)
        reply = self.model.call(request, i, 0)
        clock("append", lambda: thread.append(fr.message("assistant", content=reply)))
        call = next(b for b in reply if isinstance(b, fr.ToolUseBlock))
        big = self.rng.random() < self.big_share
        output = self.model.tool_output(self.big_bytes if big else self.rng.randrange(1000, 3000))

        def result_message() -> fr.MessageAppended:
            if big:
                data = output.encode()
                aid = self.store.artifacts.put(data)
                block = fr.ToolResultBlock(
                    tool_use_id=call.id, artifact_id=aid, preview=output[:1024], size=len(data)
                )
            else:
                block = fr.ToolResultBlock(tool_use_id=call.id, content=output)
            return fr.message("user", content=[block])

        clock("append", lambda: thread.append(result_message()))
        request = self._compile(clock, recall=False)
        reply = self.model.call(request, i, 1)
        clock("append", lambda: thread.append(fr.message("assistant", content=reply)))
        self.turns += 1
        if profile is None:
            self.samples.append(sum(clock.parts.values()))
            self.parts.append(clock.parts)
        if self.turns % self.compact_every == 0:
            start = time.perf_counter_ns()
            job = run_compaction(thread, StrideMessages(STRIDE), summarizer=self.summarizer)
            if profile is None:
                self.compactions.append((time.perf_counter_ns() - start) / 1e9)
            if job.status not in ("succeeded", "nothing_to_do"):
                raise RuntimeError(f"{self.name}: compaction {job.status}: {job.error}")
            self.checkpoints += len(job.checkpoints)


# --- sizes -------------------------------------------------------------------------------------


def _folder_bytes(path: Path) -> int:
    total = 0
    for folder, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(FileNotFoundError):  # a temp file renamed meanwhile
                total += os.stat(os.path.join(folder, name)).st_size
    return total


def store_sizes(store: Store) -> dict[str, int]:
    """Bytes of the store's logs, artifacts and caches."""
    return {
        part: _folder_bytes(store.root / folder)
        for part, folder in (("log", "threads"), ("artifacts", "artifacts"), ("caches", "cache"))
    }


def _frame_mix(store: BaseStore) -> str:
    counts: dict[str, int] = {}
    for frame in store.thread(THREAD).read():
        tag = str(frame.__struct_config__.tag)
        counts[tag] = counts.get(tag, 0) + 1
    total = sum(counts.values())
    decisions = counts.get("context_selection_decided", 0)
    repeated = counts.get("context_selection_repeated", 0)
    return (
        f"{total:,} frames, {decisions:,} context_selection_decided "
        f"({decisions / total:.0%})"
        + (f", {repeated:,} context_selection_repeated" if repeated else "")
    )


# --- the benchmark -----------------------------------------------------------------------------


def _profile_turns(loop: AgentLoop, turns: int) -> None:
    profile = cProfile.Profile()
    for _ in range(turns):
        loop.turn(profile)
    out = io.StringIO()
    stats = pstats.Stats(profile, stream=out)
    stats.sort_stats("tottime").print_stats(30)
    stats.sort_stats("cumulative").print_stats(40)
    print(
        f"== cProfile of {turns} more turns of {loop.name!r} (continuity calls only)\n"
        + out.getvalue(),
        file=sys.stderr,
    )


def run(
    turns: int = DEFAULT_TURNS,
    window: int = 100,
    compact_every: int = 25,
    big_share: float = 0.2,
    big_kb: int = 50,
    seed: int = 0,
    profile: bool = False,
    profile_turns: int = 100,
) -> Report:
    started = time.perf_counter()
    window = max(1, min(window, turns // 2 or 1))
    params: dict[str, Any] = {
        "turns": turns,
        "window": window,
        "compact_every": compact_every,
        "big_share": big_share,
        "big_kb": big_kb,
        "seed": seed,
    }
    report = Report("bench_agent_loop", params)
    with work_dir("agent-loop") as work:
        on_store = Store(work / "log-on", create=True)  # default durability: fsync per append
        off_store = Store(work / "log-off", create=True)
        common: dict[str, Any] = {
            "seed": seed,
            "big_share": big_share,
            "big_bytes": big_kb * 1024,
            "compact_every": compact_every,
        }
        loops = [
            AgentLoop("jsonl, log on", on_store, log=True, **common),
            AgentLoop("jsonl, log off", off_store, log=False, **common),
            AgentLoop("memory", MemoryStore(), log=True, **common),
        ]
        # The two JSONL loops side by side, then the memory loop on its own: the garbage of a
        # loop whose turns allocate much more (the memory store's compile decodes the whole
        # thread today) sets off collections inside the other loops' timed calls.
        for group in (loops[:2], loops[2:]):
            gc.collect()
            names = " and ".join(repr(lp.name) for lp in group)
            log(f"bench_agent_loop: {turns:,} turns of {names}")
            for i in range(turns):
                for loop in group:
                    loop.turn()
                if (i + 1) % 200 == 0:
                    figures = ", ".join(
                        f"{lp.name} {median(lp.samples[-100:]) * 1e3:.1f} ms" for lp in group
                    )
                    log(f"  turn {i + 1:,}: p50 of the last 100: {figures}")

        for loop in loops:
            target: float | None = MEMORY_TARGET_MS if loop.name == "memory" else JSONL_TARGET_MS
            if loop.name == "jsonl, log off":
                target = None  # the target is stated with logging on; this is its comparison
            first, last = loop.samples[:window], loop.samples[-window:]
            first_row = time_row(f"turn, first {window} [{loop.name}]", first)
            last_row = time_row(f"turn, last {window} [{loop.name}]", last)
            first_row.target = last_row.target = target
            last_row.baseline = f"first {window}"
            last_row.ratio = median(last) / median(first)
            report.rows += [first_row, last_row]
            report.rows.append(
                Row(
                    f"  last {window} / first {window} [{loop.name}]",
                    last_row.ratio,
                    "x",
                    target=FLAT_TARGET if target is not None else None,
                )
            )
        for loop in loops:
            for part in _PARTS:
                first = [p.get(part, 0.0) for p in loop.parts[:window]]
                last = [p.get(part, 0.0) for p in loop.parts[-window:]]
                first_row = time_row(f"  {part}, first {window} [{loop.name}]", first)
                first_row.baseline = "the turn"
                first_row.ratio = median(first) / median(loop.samples[:window])
                last_row = time_row(f"  {part}, last {window} [{loop.name}]", last)
                last_row.baseline = f"first {window}"
                last_row.ratio = median(last) / median(first) if median(first) else None
                report.rows += [first_row, last_row]
        for loop in loops:
            if loop.compactions:
                report.rows.append(
                    time_row(
                        f"run_compaction every {compact_every} turns [{loop.name}]",
                        loop.compactions,
                    )
                )
        on, off = store_sizes(on_store), store_sizes(off_store)
        for part in ("log", "artifacts", "caches"):
            row = Row(f"store {part} after the run [log on]", on[part] / 1e6, "MB")
            row.baseline = "log off"
            row.ratio = on[part] / off[part] if off[part] else None
            report.rows += [
                row,
                Row(f"store {part} after the run [log off]", off[part] / 1e6, "MB"),
            ]
        total_on, total_off = sum(on.values()), sum(off.values())
        report.rows.append(
            Row(
                "store total after the run [log on]",
                total_on / 1e6,
                "MB",
                baseline="log off",
                ratio=total_on / total_off,
            )
        )
        report.rows.append(Row("store total after the run [log off]", total_off / 1e6, "MB"))
        for loop in loops:
            report.notes.append(
                f"{loop.name}: {loop.requests:,} requests rendered, "
                f"{loop.checkpoints} checkpoints; {_frame_mix(loop.store)}"
            )
        report.notes.append(
            "a turn: message() + append x4 (+ artifacts.put of a large output), "
            "compile_context x2 (the first with recall=True), to_anthropic x2; "
            "the model is not timed"
        )
        if profile:
            _profile_turns(loops[0], profile_turns)
    report.seconds = time.perf_counter() - started
    return report


def main(argv: list[str] | None = None) -> None:
    parser = common_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=DEFAULT_TURNS)
    parser.add_argument("--window", type=int, default=100, help="turns in the first/last window")
    parser.add_argument("--compact-every", type=int, default=25)
    parser.add_argument("--big-share", type=float, default=0.2, help="share of 50 KB outputs")
    parser.add_argument("--big-kb", type=int, default=50)
    parser.add_argument("--quick", action="store_true", help="turns / 10")
    parser.add_argument(
        "--profile", action="store_true", help="cProfile more turns (jsonl, log on)"
    )
    parser.add_argument("--profile-turns", type=int, default=100)
    args = parser.parse_args(argv)
    report = run(
        turns=args.turns // 10 if args.quick else args.turns,
        window=args.window,
        compact_every=args.compact_every,
        big_share=args.big_share,
        big_kb=args.big_kb,
        seed=args.seed,
        profile=args.profile,
        profile_turns=args.profile_turns,
    )
    emit([report], args.json)


if __name__ == "__main__":
    main()
