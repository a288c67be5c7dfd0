"""ContextContract: compile, compaction and search on a backend give what they give on the
reference model; and build_conversation, the thread it checks them on."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

from continuity import frames as fr
from continuity.errors import (
    ThreadNotFound,
)
from continuity.store.base import BaseStore, Thread
from continuity.store.memory import MemoryStore
from continuity.testing.support import (
    FixedClock,
    stored_lines,
)

__all__ = ["ContextContract", "build_conversation"]


def build_conversation(store: BaseStore, thread_id: str = "c", turns: int = 30) -> Thread:
    """A coding-agent thread with deterministic ids: prompts, tool calls and their results (one
    large output in an artifact), an observation, replies, a checkpoint written by hand and one
    by the default summarizer. The same calls on two stores give the same frames."""
    from continuity.context.compaction import create_checkpoint

    thread = store.thread(thread_id)
    thread.append(fr.ThreadCreated(title="a session", meta={"project": "/work/app"}))
    for i in range(turns):
        path = f"src/app/module_{i % 7}.py"
        output = f"FAILED tests/test_{i}.py::test_total - assert {i} == {i + 1}\n" * (1 + i % 3)
        result: fr.ToolResultBlock
        if i % 10 == 9:  # a large output, kept in an artifact with a preview
            whole = ("line of output\n" * 2000).encode()
            aid = store.artifacts.put(whole)
            result = fr.ToolResultBlock(
                tool_use_id=f"tu{i}", artifact_id=aid, preview="line of output", size=len(whole)
            )
        else:
            result = fr.ToolResultBlock(tool_use_id=f"tu{i}", content=output, is_error=i % 2 == 0)
        thread.append(
            [
                fr.message("user", f"Fix the total in {path}, turn {i}.", message_id=f"u{i}"),
                fr.message(
                    "assistant",
                    content=[
                        fr.TextBlock(text=f"I'll run the tests for {path}."),
                        fr.ToolUseBlock(
                            id=f"tu{i}", name="Bash", input={"command": f"pytest -q tests/t{i}"}
                        ),
                    ],
                    message_id=f"a{i}",
                ),
                fr.message("user", content=[result], message_id=f"r{i}"),
                fr.message("assistant", f"Fixed the off-by-one in {path}.", message_id=f"b{i}"),
            ]
        )
        if i == 4:
            thread.append(fr.ObservationRecorded(tool_use_id="tu4", text="pytest: 1 failure"))
        if i == 8:
            create_checkpoint(thread, thread.head().seq, text="Turns 0 to 8 fixed totals.")  # type: ignore[union-attr]
        if i == 16:
            create_checkpoint(thread, thread.head().seq)  # type: ignore[union-attr]
    return thread


class ContextContract(ABC):
    """Compile, compaction and search on a backend give exactly what they give on the in-memory
    reference model for the same frames: the same bundle bytes (with or without caches), the
    same cuts and summaries, the same hits and scores. A subclass only says how to build its
    store."""

    @abstractmethod
    def make_store(self, path: Path, clock: Callable[[], int]) -> BaseStore:
        """A new, empty store (``path`` is a fresh folder the backend may use)."""

    @pytest.fixture
    def pair(self, tmp_path: Path) -> tuple[Thread, Thread]:
        """The same conversation on this backend and on the reference model."""
        store = self.make_store(tmp_path / "store", FixedClock())
        reference = MemoryStore(clock=FixedClock())
        return build_conversation(store), build_conversation(reference)

    def test_the_conversation_is_stored_alike(self, pair: tuple[Thread, Thread]) -> None:
        thread, reference = pair
        assert stored_lines(thread) == stored_lines(reference)

    @pytest.mark.parametrize("use_caches", [True, False])
    def test_compile_gives_the_reference_bundle(
        self, pair: tuple[Thread, Thread], use_caches: bool
    ) -> None:
        from continuity.context.compiler import compile_context

        thread, reference = pair
        head = reference.head()
        assert head is not None
        cases: list[tuple[int | str | None, fr.Limits]] = [
            (None, fr.Limits()),
            (None, fr.Limits(recent_messages=5, keep_tool_outputs=1)),
            (None, fr.Limits(budget_tokens=600)),
            (None, fr.Limits(budget_tokens=40)),  # not even the newest message fits
            (head.seq // 2, fr.Limits(max_summary_refs=1)),
            ("a12", fr.Limits(recent_messages=3)),
            (0, fr.Limits()),
        ]
        for anchor, limits in cases:
            got = compile_context(
                thread, anchor=anchor, limits=limits, log=False, use_caches=use_caches
            )
            want = compile_context(reference, anchor=anchor, limits=limits, log=False)
            assert got.bundle_bytes() == want.bundle_bytes(), (anchor, limits)
            assert got.decision == want.decision

    def test_logged_compiles_append_the_reference_decision(
        self, pair: tuple[Thread, Thread]
    ) -> None:
        from continuity.context.compiler import compile_context

        thread, reference = pair
        for recall in (None, "pytest total module_3"):
            got = compile_context(thread, recall=recall)
            want = compile_context(reference, recall=recall)
            assert got.logged and want.logged
            assert got.bundle_bytes() == want.bundle_bytes()
            assert got.decision == want.decision
            assert thread.store.artifacts.get(got.bundle_id) == got.bundle_bytes()
        assert stored_lines(thread) == stored_lines(reference)

    def test_compaction_makes_the_reference_checkpoints(self, pair: tuple[Thread, Thread]) -> None:
        from continuity.context.compaction import StrideMessages, TokenThreshold, run_compaction

        thread, reference = pair
        for rule in (TokenThreshold(300), StrideMessages(7)):
            got = run_compaction(thread, rule)
            want = run_compaction(reference, rule)
            assert (got.status, got.planned) == (want.status, want.planned)
            assert got.status == "succeeded" and got.planned, rule
            strip = {"digest": ""}
            assert [msgspec.structs.replace(c, **strip) for c in got.checkpoints] == [
                msgspec.structs.replace(c, **strip) for c in want.checkpoints
            ]
            for c in got.checkpoints:
                data = thread.store.artifacts.get(c.summary_artifact_id)
                assert data == reference.store.artifacts.get(c.summary_artifact_id)

    @pytest.mark.parametrize("use_caches", [True, False])
    def test_search_prefix_gives_the_reference_hits(
        self, pair: tuple[Thread, Thread], use_caches: bool
    ) -> None:
        from continuity.retrieval.search import search_prefix

        thread, reference = pair
        for query, max_seq in (("pytest module_3", 10**9), ("off-by-one total", 40), ("fix", 5)):
            got = search_prefix(thread, query, max_seq=max_seq, k=5, use_caches=use_caches)
            want = search_prefix(reference, query, max_seq=max_seq, k=5)
            assert got == want, query
            assert want, f"{query!r} finds nothing: the comparison would prove nothing"

    def test_search_gives_the_reference_hits(self, pair: tuple[Thread, Thread]) -> None:
        from continuity.retrieval.search import search

        thread, reference = pair
        for query in ("pytest module_3", "assert total", "line of output"):
            for project in (None, "/work/app", "/elsewhere"):
                got = search(thread.store, query, project=project, k=7)
                want = search(reference.store, query, project=project, k=7)
                assert got == want, (query, project)
                assert bool(want) == (project != "/elsewhere"), (query, project)

    def test_unknown_threads_are_refused_alike(self, pair: tuple[Thread, Thread]) -> None:
        from continuity.context.compiler import compile_context
        from continuity.retrieval.search import search_prefix

        thread, _reference = pair
        with pytest.raises(ThreadNotFound):
            compile_context(thread.store, "nobody")
        with pytest.raises(ThreadNotFound):
            search_prefix(thread.store, "nobody", "pytest", max_seq=5, k=3)
