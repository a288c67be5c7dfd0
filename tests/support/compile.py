"""Builders shared by the compile and compaction tests: messages, tool pairs, checkpoints,
a deterministic test summarizer, and a Hypothesis strategy for random threads.

Everything here is deterministic (ids come from the caller or from counters), so the same
script appended to a JSONL store and to a MemoryStore with the same fixed clock gives
byte-identical logs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from continuity import frames as fr
from continuity.context.compiler import CompileResult, compile_context
from continuity.errors import ContextTooSmall
from continuity.store.artifacts import artifact_id
from continuity.store.base import BaseStore
from continuity.summary import CUMULATIVE_V1, SummaryContent, SummaryDoc, summary_bytes

THREAD = "t"


def text(role: fr.Role, body: str, mid: str) -> fr.MessageAppended:
    return fr.message(role, body, message_id=mid)


def call(mid: str, tool_id: str, name: str = "Bash", **tool_input: Any) -> fr.MessageAppended:
    block = fr.ToolUseBlock(id=tool_id, name=name, input=tool_input or {"command": "ls"})
    return fr.message("assistant", content=[block], message_id=mid)


def result(
    mid: str,
    tool_id: str,
    output: str = "ok",
    *,
    is_error: bool = False,
    artifact_id: str | None = None,
    size: int = 0,
) -> fr.MessageAppended:
    if artifact_id is None:
        block = fr.ToolResultBlock(tool_use_id=tool_id, content=output, is_error=is_error)
    else:
        block = fr.ToolResultBlock(
            tool_use_id=tool_id,
            artifact_id=artifact_id,
            preview=output,
            size=size,
            is_error=is_error,
        )
    return fr.message("user", content=[block], message_id=mid)


def put_summary(
    store: BaseStore, to_seq: int, body: str, *, thread_id: str = THREAD, kind: str = CUMULATIVE_V1
) -> str:
    """Store a placeholder summary document and return its artifact id."""
    doc = SummaryDoc(
        thread_id=thread_id, to_seq=to_seq, produced_by="test", text=body, summary_kind=kind
    )
    return store.artifacts.put(summary_bytes(doc))


def checkpoint(
    checkpoint_id: str,
    to_seq: int,
    summary_artifact_id: str,
    *,
    kind: str = CUMULATIVE_V1,
    cut_rule_id: str = "test_v1",
) -> fr.CompactionCheckpointCreated:
    return fr.CompactionCheckpointCreated(
        checkpoint_id=checkpoint_id,
        cut_rule_id=cut_rule_id,
        summary_kind=kind,
        summary_artifact_id=summary_artifact_id,
        from_seq=0,
        to_seq=to_seq,
    )


def messages_of(store: BaseStore, thread_id: str = THREAD) -> list[fr.MessageAppended]:
    return [f for f in store.thread(thread_id).read() if isinstance(f, fr.MessageAppended)]


class RecordingSummarizer:
    """A deterministic summarizer that remembers what it was given.

    Its text is the base's text followed by one ``seq:id`` token per new message, so a summary
    shows exactly which messages went into it.
    """

    def __init__(self, fail_at_call: int | None = None) -> None:
        self.calls: list[tuple[SummaryDoc | None, list[int]]] = []
        self.fail_at_call = fail_at_call

    @property
    def id(self) -> str:
        return "test.recording/1"

    def summarize(
        self, base: SummaryDoc | None, messages: Sequence[fr.MessageAppended]
    ) -> SummaryContent:
        if self.fail_at_call is not None and len(self.calls) == self.fail_at_call:
            self.calls.append((base, [m.seq for m in messages]))
            raise RuntimeError("summarizer exploded on purpose")
        self.calls.append((base, [m.seq for m in messages]))
        tokens = [base.text] if base is not None and base.text else []
        tokens += [f"{m.seq}:{m.message_id}" for m in messages]
        return SummaryContent(
            text=" ".join(tokens) or "(nothing yet)",
            sections={"seqs": [str(m.seq) for m in messages]},
        )


# --- random threads -------------------------------------------------------------------------


@dataclass
class Script:
    """A random thread as a list of frames, plus the summaries it needs stored."""

    frames: list[fr.Frame] = field(default_factory=list)
    summaries: dict[str, bytes] = field(default_factory=dict)
    """artifact id → bytes, to put into every store the script is replayed into."""
    missing: set[str] = field(default_factory=set)
    """checkpoint ids whose summary artifact is deliberately not stored."""

    def replay(self, store: BaseStore, thread_id: str = THREAD) -> None:
        for aid, data in self.summaries.items():
            assert store.artifacts.put(data) == aid
        store.thread(thread_id).append(self.frames)


_KINDS = (CUMULATIVE_V1, CUMULATIVE_V1, CUMULATIVE_V1, "segment_v1")


@st.composite
def scripts(
    draw: st.DrawFn,
    *,
    max_steps: int = 30,
    checkpoints: bool = True,
    observations: bool = True,
    split_calls: bool = True,
    retractions: bool = True,
) -> Script:
    """A thread of text messages, tool pairs (sometimes several calls answered one by one,
    sometimes a call split from its result by another message), observations, checkpoints and
    retractions of earlier messages.

    Seqs are known while building: frame i of the script gets seq i + 1 (seq 0 is the
    ``thread_created`` the store adds).
    """
    b = _ScriptBuilder(draw, split_calls)
    steps = draw(st.integers(1, max_steps))
    for _ in range(steps):
        choices = ["text", "text", "tool", "tool"]
        if split_calls:
            choices.append("multi")
        if observations and b.tool_ids:
            choices.append("obs")
        if checkpoints and b.next_seq() > 1:
            choices.append("ckpt")
        if retractions and b.message_seqs:
            choices.append("retract")
        kind = draw(st.sampled_from(choices))
        b.steps[kind]()
    return b.script


class _ScriptBuilder:
    """The steps of :func:`scripts`, each drawing what it needs and adding its frames."""

    def __init__(self, draw: st.DrawFn, split_calls: bool) -> None:
        self.draw = draw
        self.split_calls = split_calls
        self.script = Script()
        self.tool_ids: list[str] = []
        self.message_seqs: list[int] = []
        self.n_msg = 0
        self.n_tool = 0
        self.steps: dict[str, Callable[[], None]] = {
            "text": self.text,
            "tool": self.tool,
            "multi": self.multi,
            "retract": self.retract,
            "obs": self.observation,
            "ckpt": self.checkpoint,
        }

    def next_seq(self) -> int:
        return len(self.script.frames) + 1

    def add(self, frame: fr.Frame) -> None:
        if isinstance(frame, fr.MessageAppended):
            self.message_seqs.append(self.next_seq())
        self.script.frames.append(frame)

    def next_mid(self) -> str:
        self.n_msg += 1
        return f"m{self.n_msg}"

    def next_tool_id(self) -> str:
        self.n_tool += 1
        return f"tu{self.n_tool}"

    def text(self) -> None:
        mid = self.next_mid()
        role: fr.Role = self.draw(st.sampled_from(["user", "assistant"]))
        size = self.draw(st.integers(0, 400))
        self.add(text(role, f"{mid} " + "x" * size, mid))

    def tool(self) -> None:
        draw = self.draw
        mid = self.next_mid()
        tid = self.next_tool_id()
        self.add(call(mid, tid, command=f"cmd {self.n_tool}"))
        if draw(st.booleans()) and self.split_calls:
            waiting = self.next_mid()  # something between a call and its result
            self.add(text("assistant", f"{waiting} waiting", waiting))
        mid = self.next_mid()
        lines = draw(st.integers(1, 6))
        width = draw(st.integers(0, 300))
        body = "\n".join(f"out{self.n_tool}.{i} " + "y" * width for i in range(lines))
        self.add(result(mid, tid, body, is_error=draw(st.booleans())))
        self.tool_ids.append(tid)

    def multi(self) -> None:
        """Two calls in two assistant messages, then their results one message each."""
        ids = []
        for _ in range(2):
            mid = self.next_mid()
            ids.append(self.next_tool_id())
            self.add(call(mid, ids[-1], "Read", file_path=f"/f{self.n_tool}"))
        for tid in ids:
            self.add(result(self.next_mid(), tid, f"contents of {tid}\nline 2"))
        self.tool_ids.extend(ids)

    def retract(self) -> None:
        picked = self.draw(st.lists(st.sampled_from(self.message_seqs), min_size=1, max_size=3))
        spans = [fr.SeqSpan(from_seq=q, to_seq=q) for q in sorted(set(picked))]
        self.add(fr.MessagesRetracted(spans=spans, reason="test"))

    def observation(self) -> None:
        tid = self.draw(st.sampled_from(self.tool_ids))
        self.add(fr.ObservationRecorded(tool_use_id=tid, text=f"observed {tid}"))

    def checkpoint(self) -> None:
        draw = self.draw
        to_seq = draw(st.integers(0, self.next_seq() - 1))
        ckind = draw(st.sampled_from(_KINDS))
        cid = f"c{len(self.script.frames)}"
        doc = SummaryDoc(
            thread_id=THREAD,
            to_seq=to_seq,
            produced_by="test",
            text=f"summary {cid} through {to_seq} " + "s" * draw(st.integers(0, 200)),
            summary_kind=ckind,
        )
        data = summary_bytes(doc)
        aid = artifact_id(data)
        if draw(st.integers(0, 9)) == 0:
            self.script.missing.add(cid)
        else:
            self.script.summaries[aid] = data
        self.add(checkpoint(cid, to_seq, aid, kind=ckind))


def limits_strategy(*, budget: bool = True) -> st.SearchStrategy[fr.Limits]:
    return st.builds(
        fr.Limits,
        recent_messages=st.integers(0, 20),
        max_summary_refs=st.integers(0, 4),
        budget_tokens=st.none() | st.integers(1, 600) if budget else st.none(),
        keep_tool_outputs=st.none() | st.integers(0, 4),
    )


def compile_or_too_small(store: BaseStore, **kw: Any) -> CompileResult | None:
    """``compile_context(store, THREAD, **kw)``, or None when the limits are too small for the
    turn in flight (:class:`ContextTooSmall`, which must name a limit below what it needs)."""
    try:
        return compile_context(store, THREAD, **kw)
    except ContextTooSmall as exc:
        assert exc.limit in ("recent_messages", "budget_tokens")
        assert exc.needed > exc.given
        return None


class TooSmallEverywhere(Exception):
    """Every path found the limits too small for the turn in flight, alike."""


def all_or_too_small(compiles: Sequence[Callable[[], CompileResult]]) -> list[CompileResult]:
    """Run each compile; when one raises :class:`ContextTooSmall`, every one must, with the
    same limit and need (then :class:`TooSmallEverywhere`)."""
    outcomes: list[CompileResult | tuple[str, int]] = []
    for run in compiles:
        try:
            outcomes.append(run())
        except ContextTooSmall as exc:
            outcomes.append((exc.limit, exc.needed))
    errors = [o for o in outcomes if isinstance(o, tuple)]
    if errors:
        assert len(errors) == len(outcomes) and len(set(errors)) == 1, outcomes
        raise TooSmallEverywhere(errors[0])
    return [o for o in outcomes if not isinstance(o, tuple)]
