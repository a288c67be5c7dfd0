"""Throughput of the default extractive summarizer on a synthetic coding session.

    python -m tools.bench.bench_summarize [--messages 10000] [--repeat 7] [--batch 200]

Measures (median of ``--repeat`` runs, messages/s):

* one summary of all ``--messages`` messages (no base);
* the cumulative path: summaries of ``--batch`` messages each, every one built on the last
  (what compaction does as a thread grows).

The session cycles through what coding work looks like: a request, a read, an edit, a test run
that fails (with a large output, sometimes stored as an artifact preview), an edit, a green run,
a todo list, and prose with decisions. Self-contained on purpose: it does not need the thread
generator.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence

from continuity import frames as fr
from continuity.context.summarize import ExtractiveSummarizer
from continuity.summary import SummaryDoc

_FAILURE = (
    "============================= test session starts ==============================\n"
    + "tests/test_mod.py ....F\n" * 40
    + "E       AssertionError: assert 1 == 2\n"
    + "FAILED tests/test_mod{i}.py::test_case - AssertionError: assert 1 == 2\n"
    + "==================== 1 failed, 41 passed in 0.31s ====================\n"
)
_GREEN = "tests/test_mod.py ........\n" * 40 + "============ 42 passed in 0.29s ============\n"
_SOURCE = "def f(x):\n    return x + 1\n" * 200


def session(n: int) -> list[fr.MessageAppended]:
    """``n`` messages of a repeating, realistic coding cycle (deterministic)."""
    out: list[fr.MessageAppended] = []
    i = 0
    while len(out) < n:
        path = f"src/pkg/module_{i % 97}.py"
        cmd = f"pytest -q tests/test_mod{i % 13}.py"
        t = f"t{i}-"
        out += [
            fr.message("user", f"Please make module {i % 97} handle empty input — cycle {i}."),
            fr.message(
                "assistant",
                "I'll read the module first. The root cause is an unchecked index. "
                f"I'll guard it instead of catching IndexError (cycle {i}).",
                content=[
                    fr.ThinkingBlock(text="thinking " * 50),
                    fr.ToolUseBlock(id=t + "r", name="Read", input={"file_path": path}),
                ],
            ),
            _result(t + "r", _SOURCE),
            fr.message(
                "assistant",
                content=[
                    fr.ToolUseBlock(
                        id=t + "e",
                        name="Edit",
                        input={"file_path": path, "old_string": "x", "new_string": "y"},
                    )
                ],
            ),
            _result(t + "e", f"The file {path} has been updated."),
            fr.message(
                "assistant",
                content=[fr.ToolUseBlock(id=t + "b", name="Bash", input={"command": cmd})],
            ),
            _result(t + "b", _FAILURE.format(i=i), is_error=True, artifact=i % 3 == 0),
            fr.message(
                "assistant",
                content=[fr.ToolUseBlock(id=t + "b2", name="Bash", input={"command": cmd})],
            ),
            _result(t + "b2", _GREEN),
            fr.message(
                "assistant",
                "Tests pass.",
                content=[
                    fr.ToolUseBlock(
                        id=t + "todo",
                        name="TodoWrite",
                        input={
                            "todos": [
                                {"content": f"Fix module {i % 97}", "status": "completed"},
                                {"content": f"Document module {i % 97}", "status": "pending"},
                            ]
                        },
                    )
                ],
            ),
        ]
        i += 1
    return out[:n]


def _result(
    tool_use_id: str, output: str, *, is_error: bool = False, artifact: bool = False
) -> fr.MessageAppended:
    if artifact:
        block = fr.ToolResultBlock(
            tool_use_id=tool_use_id,
            artifact_id="0" * 64,
            preview=output[:2000],
            size=len(output),
            is_error=is_error,
        )
    else:
        block = fr.ToolResultBlock(tool_use_id=tool_use_id, content=output, is_error=is_error)
    return fr.message("user", content=[block])


def _once(
    summarizer: ExtractiveSummarizer, messages: Sequence[fr.MessageAppended]
) -> tuple[float, float]:
    """(wall, CPU) seconds of one summary of all the messages."""
    wall, cpu = time.perf_counter(), time.process_time()
    summarizer.summarize(None, messages)
    return time.perf_counter() - wall, time.process_time() - cpu


def _cumulative(
    summarizer: ExtractiveSummarizer, messages: Sequence[fr.MessageAppended], batch: int
) -> tuple[float, float]:
    """(wall, CPU) seconds of summaries of ``batch`` messages each, each on the last."""
    wall, cpu = time.perf_counter(), time.process_time()
    base: SummaryDoc | None = None
    for lo in range(0, len(messages), batch):
        content = summarizer.summarize(base, messages[lo : lo + batch])
        base = SummaryDoc(
            thread_id="bench",
            to_seq=lo + batch - 1,
            produced_by=summarizer.id,
            text=content.text,
            sections=content.sections,
        )
    return time.perf_counter() - wall, time.process_time() - cpu


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--batch", type=int, default=200)
    args = parser.parse_args(argv)

    messages = session(args.messages)
    summarizer = ExtractiveSummarizer()
    summarizer.summarize(None, messages[:100])  # warm up regexes and caches
    whole = [_once(summarizer, messages) for _ in range(args.repeat)]
    cumulative = [_cumulative(summarizer, messages, args.batch) for _ in range(args.repeat)]
    n = len(messages)
    for label, runs in (
        ("one summary", whole),
        (f"cumulative, batches of {args.batch}", cumulative),
    ):
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        print(
            f"summarize {n:,} messages, {label}: {n / wall:,.0f} messages/s "
            f"(median of {len(runs)} runs: {wall * 1e3:.1f} ms wall, {cpu * 1e3:.1f} ms CPU)"
        )


if __name__ == "__main__":
    main()
