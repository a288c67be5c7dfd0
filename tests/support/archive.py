"""Sessions of other agents written straight into a store, with the marks every adapter puts on
its threads (the preamble of issue 29): ``meta["source"]``, ``project``, ``git_branch``,
``session_id``, ``title``; the agent's thread id prefix; its own compaction as a checkpoint
whose cut rule is the agent's. The tests of the one archive (listings, search, viewer, MCP,
restore) build on these, not on the adapters."""

from __future__ import annotations

from typing import Final

from continuity import frames as fr
from continuity.store.base import BaseStore
from continuity.summary import SummaryDoc, summary_bytes

AGENTS: Final = {
    # source: (thread id prefix, the cut rule of its own compaction)
    "claude-code": ("cc-", "claude_code_compact/auto"),
    "codex": ("codex-", "codex_compact/v1"),
    "gemini-cli": ("gemini-", "gemini_cli_compress/v1"),
    "opencode": ("oc-", "opencode_compact/v1"),
}
MINUTE: Final = 60_000


def agent_session(
    store: BaseStore,
    source: str,
    session_id: str,
    *,
    project: str,
    start_ms: int,
    title: str | None = None,
    prompts: tuple[str, ...] = ("fix the flaky test",),
    tool_calls: int = 1,
    compaction: bool = False,
    parent: str | None = None,
    step_ms: int = MINUTE,
) -> str:
    """A session of the agent whose source is ``source``: each prompt answered after
    ``tool_calls`` tool calls (a call and its result), a frame every ``step_ms``; then, with
    ``compaction``, the agent's own compaction. Returns its thread id."""
    prefix, rule = AGENTS[source]
    tid = f"{parent}.agent-{session_id}" if parent else f"{prefix}{session_id}"
    meta = {
        "source": source,
        "project": project,
        "git_branch": "main",
        "session_id": session_id,
        "transcript": f"/tmp/{session_id}.jsonl",
    }
    ts = iter(range(start_ms, start_ms + 10_000 * step_ms, step_ms))
    frames: list[fr.Frame] = [
        fr.ThreadCreated(title=title, parent_thread_id=parent, meta=meta, ts_ms=next(ts))
    ]
    for n, prompt in enumerate(prompts):
        frames.append(fr.message("user", prompt, message_id=f"{tid}-u{n}", ts_ms=next(ts)))
        for c in range(tool_calls):
            call = fr.ToolUseBlock(id=f"{tid}-c{n}-{c}", name="shell", input={"cmd": "pytest"})
            frames.append(
                fr.message(
                    "assistant", content=[call], message_id=f"{tid}-a{n}-{c}", ts_ms=next(ts)
                )
            )
            result = fr.ToolResultBlock(tool_use_id=call.id, content="1 passed")
            frames.append(
                fr.message("user", content=[result], message_id=f"{tid}-r{n}-{c}", ts_ms=next(ts))
            )
        frames.append(fr.message("assistant", "Done.", message_id=f"{tid}-d{n}", ts_ms=next(ts)))
    thread = store.thread(tid)
    thread.append(frames)
    if compaction:
        head = thread.head()
        assert head is not None
        doc = SummaryDoc(thread_id=tid, to_seq=head.seq, produced_by=source, text="So far.")
        aid = store.artifacts.put(summary_bytes(doc))
        thread.append(
            [
                fr.CompactionCheckpointCreated(
                    checkpoint_id=f"{tid}-cp",
                    cut_rule_id=rule,
                    summary_kind="cumulative_v1",
                    summary_artifact_id=aid,
                    from_seq=0,
                    to_seq=head.seq,
                    produced_by=source,
                    ts_ms=next(ts),
                )
            ]
        )
    return tid
