"""Human-readable one-liners for the CLI: frames (for ``continuity log``), times, recoveries."""

from __future__ import annotations

from typing import TYPE_CHECKING

from continuity._text import ListedThread, count, format_ts, render_threads

if TYPE_CHECKING:  # imported where used: the CLI's start-up does not need them (issue 32)
    from continuity import frames as fr
    from continuity.store.base import Recovery

__all__ = [
    "ListedThread",
    "count",
    "describe",
    "format_ts",
    "hit_leads",
    "recovery_line",
    "render_threads",
]


def hit_leads(covers: list[int], parent_thread_id: str, also: list[int]) -> str:
    """Where a search hit leads (ADR 0034), for the end of its line: the messages a summary
    stands for, the session a subagent's thread hangs under, the other matching parts of its
    response. ``""`` when it leads nowhere else."""
    notes = []
    if len(covers) == 2:
        notes.append(f"summary of seq {covers[0]}–{covers[1]}")
    if parent_thread_id:
        notes.append(f"subagent of {parent_thread_id}")
    if also:
        parts = "part" if len(also) == 1 else "parts"
        notes.append(f"+{len(also)} more {parts} of this response")
    return "".join(f"  [{n}]" for n in notes)


def recovery_line(rec: Recovery) -> str:
    """What the CLI says on stderr when opening a thread moved a torn or unfinished tail away."""
    return (
        f"recovered thread {rec.thread_id}: moved {rec.length} bytes at offset {rec.offset} "
        f"to {rec.quarantine_file} ({rec.reason})"
    )


def _clip(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _summaries(n: int) -> str:
    return "1 summary" if n == 1 else f"{n} summaries"


def _block(block: fr.ContentBlock) -> str:
    from continuity import frames as fr

    if isinstance(block, fr.TextBlock):
        return block.text
    if isinstance(block, fr.ThinkingBlock):
        return f"(thinking) {block.text}"
    if isinstance(block, fr.ToolUseBlock):
        return f"[tool_use {block.name} {block.id}]"
    if isinstance(block, fr.ToolResultBlock):
        err = " error" if block.is_error else ""
        where = f" in artifact {block.artifact_id[:12]}" if block.artifact_id else ""
        return f"[tool_result{err} {block.tool_use_id} {block.size}B{where}] {block.text}"
    if isinstance(block, fr.ProviderBlock):
        return f"[{block.provider} {block.kind}] {block.text}"
    return f"[image {block.media_type}]"


def describe(frame: fr.Frame, width: int = 100) -> str:
    """What the frame says, on one line."""
    import msgspec

    from continuity import frames as fr

    if isinstance(frame, fr.MessageAppended):
        text = " ".join(_block(b) for b in frame.content)
        return _clip(f"{frame.role}: {text}", width)
    if isinstance(frame, fr.ThreadCreated):
        extra = f" title={frame.title!r}" if frame.title else ""
        parent = f" parent={frame.parent_thread_id}" if frame.parent_thread_id else ""
        if frame.fork_of is not None:
            f = frame.fork_of
            parent = f" fork of {f.thread_id} at seq {f.seq} (digest {f.digest[:12]})"
        return f"thread {frame.thread_id}{extra}{parent}"
    if isinstance(frame, fr.CompactionCheckpointCreated):
        return (
            f"checkpoint {frame.checkpoint_id} {frame.summary_kind}"
            f" seq {frame.from_seq}..{frame.to_seq} by {frame.cut_rule_id}"
            f" (summary {frame.summary_artifact_id[:12]})"
        )
    if isinstance(frame, fr.ContextSelectionDecided):
        window = (
            f"window {frame.window_from_seq}..{frame.window_to_seq}"
            if frame.window_from_seq is not None
            else "empty window"
        )
        return (
            f"{frame.strategy} at seq {frame.anchor_seq}: {_summaries(len(frame.checkpoints))}, "
            f"{window}, ~{frame.tokens} tokens"
        )
    if isinstance(frame, fr.ObservationRecorded):
        return _clip(f"observation for {frame.tool_use_id}: {frame.text}", width)
    if isinstance(frame, fr.JobSpawned):
        return f"job {frame.job_id} ({frame.kind}) spawned"
    if isinstance(frame, fr.MessagesRetracted):
        spans = ", ".join(
            str(s.from_seq) if s.from_seq == s.to_seq else f"{s.from_seq}..{s.to_seq}"
            for s in frame.spans
        )
        why = f": {frame.reason}" if frame.reason else ""
        return _clip(f"retracted seq {spans}{why}", width)
    if isinstance(frame, fr.RecordAppended):
        key = f" {frame.key}" if frame.key else ""
        body = (
            f"artifact {frame.artifact_id[:12]} ({frame.size}B)"
            if frame.artifact_id
            else msgspec.json.encode(frame.data).decode()
        )
        return _clip(f"record {frame.kind}{key}: {body}", width)
    if isinstance(frame, fr.ContextSelectionRepeated):
        return f"selection of seq {frame.decision_seq} repeated"
    err = f": {frame.error}" if frame.error else ""
    return _clip(f"job {frame.job_id} {frame.status}{err}", width)
