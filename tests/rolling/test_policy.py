"""The runtimes' policy: a 2,000-turn loop with a 32k-token window never sends a request over the
window (nor over 80% of it), and the budget never has to drop a message no summary covers."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from continuity import frames as fr
from continuity.context.sources import open_source
from continuity.rolling.policy import ContextPolicy
from continuity.rolling.warm import compressed_segments
from continuity.store.base import BaseStore
from continuity.store.jsonl import Store
from continuity.summary import SummaryContent

pytestmark = pytest.mark.slow  # loops of hundreds of turns

WINDOW = 32_000
TOPICS = ("billing invoices", "search ranking", "upload retries", "login sessions", "cache trims")


def _turn(store: BaseStore, tid: str, i: int) -> None:
    """One turn: a prompt on the current topic (a new one every 40 turns), a tool call on its
    file, and an answer of a few hundred tokens."""
    name = TOPICS[(i // 40) % len(TOPICS)]
    path = f"src/{name.split()[0]}_{i // 40}.py"
    words = f"{name} step {i}: " + " ".join(f"{name.split()[1]}{k}" for k in range(40))
    use = fr.ToolUseBlock(id=f"t{i}", name="Edit", input={"file_path": path})
    store.thread(tid).append(
        [
            fr.message("user", f"Please continue the {name} work, part {i}. {words}"),
            fr.message("assistant", content=[use]),
            fr.message("user", content=[fr.ToolResultBlock(tool_use_id=f"t{i}", content="ok")]),
            fr.message("assistant", "Done: " + " ".join(["detail"] * (150 + i % 200))),
        ]
    )


def _uncovered_drop(store: BaseStore, tid: str, decision: fr.ContextSelectionDecided) -> bool:
    """Whether the window starts later than the first message after the latest summary."""
    source = open_source(store.thread(tid))
    after = decision.checkpoint.to_seq if decision.checkpoint is not None else -1
    first = source.message_count_upto(after) if after >= 0 else 0
    start = decision.window_from_seq
    return start is not None and source.message_count_upto(start - 1) > first


def _loop(store: BaseStore, tid: str, policy: ContextPolicy, turns: int) -> list[int]:
    sizes = []
    for i in range(turns):
        _turn(store, tid, i)
        prepared = policy.prepare()
        decision = prepared.result.decision
        sizes.append(decision.tokens)
        assert not _uncovered_drop(store, tid, decision), f"turn {i}: {decision.reasons}"
    return sizes


def test_two_thousand_turns_in_a_32k_window(tmp_store: Store) -> None:
    tid = "runtime"
    tmp_store.thread(tid).append([fr.ThreadCreated(thread_id=tid)])
    sizes = _loop(tmp_store, tid, ContextPolicy(tmp_store.thread(tid), window=WINDOW), 2_000)
    assert max(sizes) <= 0.8 * WINDOW
    assert sum(s > WINDOW for s in sizes) == 0
    warm = compressed_segments(tmp_store.thread(tid))
    assert len(warm) >= 10 and all(w.by == "continuity" for w in warm)


class _Short:
    """A runtime's summarizer: its own short text."""

    id = "test-short"

    def summarize(self, base: object, messages: Sequence[fr.MessageAppended]) -> SummaryContent:
        return SummaryContent(text=f"{len(messages)} messages about earlier work.")


class _AsyncShort(_Short):
    async def summarize(  # type: ignore[override]
        self, base: object, messages: Sequence[fr.MessageAppended]
    ) -> SummaryContent:
        await asyncio.sleep(0)
        return SummaryContent(text=f"{len(messages)} messages, summarized asynchronously.")


def test_the_runtimes_summarizer_writes_the_summaries(tmp_store: Store) -> None:
    tid = "rt"
    tmp_store.thread(tid).append([fr.ThreadCreated(thread_id=tid)])
    policy = ContextPolicy(tmp_store.thread(tid), window=8_000, summarizer=_Short())
    sizes = _loop(tmp_store, tid, policy, 120)
    assert max(sizes) <= 0.8 * 8_000
    warm = compressed_segments(tmp_store.thread(tid))
    assert warm and all(w.by == "test-short" and "earlier work" in w.text for w in warm)
    assert all(w.ratio < 0.2 for w in warm)


def test_an_async_summarizer_is_awaited(tmp_store: Store) -> None:
    tid = "rt"
    tmp_store.thread(tid).append([fr.ThreadCreated(thread_id=tid)])
    policy = ContextPolicy(tmp_store.thread(tid), window=8_000, summarizer=_AsyncShort())
    with pytest.raises(TypeError, match="aprepare"):
        for i in range(120):
            _turn(tmp_store, tid, i)
            policy.prepare()

    async def run() -> list[int]:
        out = []
        for i in range(120, 200):
            _turn(tmp_store, tid, i)
            out.append((await policy.aprepare()).result.decision.tokens)
        return out

    assert max(asyncio.run(run())) <= 0.8 * 8_000
    warm = compressed_segments(tmp_store.thread(tid))
    assert warm and all("asynchronously" in w.text for w in warm)


def test_the_providers_reported_usage_triggers_it(tmp_store: Store) -> None:
    tid = "rt"
    tmp_store.thread(tid).append([fr.ThreadCreated(thread_id=tid)])
    policy = ContextPolicy(tmp_store.thread(tid), window=200_000)
    for i in range(30):
        _turn(tmp_store, tid, i)
    assert policy.prepare().compacted_to is None  # ~10k tokens of 200k
    assert policy.prepare(reported_tokens=150_000).compacted_to is not None
