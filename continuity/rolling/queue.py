"""The queue and the reminder: cold segments the agent is asked to compress (ADR 0056).

The queue is derived, never a file the agent edits: when the session's context passes the hot
threshold, the segments that are cold (not mentioned for ``cold_turns`` turns, their task
looking completed, at least ``min_messages`` messages) and not compressed yet
(:mod:`.warm`) are queued. Each reminder is logged as a ``record_appended`` of kind
:data:`KIND` (the usage, the window and the segments it named, with why), like compile's
selections: what the agent was asked, and when, can be explained. The prompts after the latest
such record pace the reminders (at most one every ``every_turns`` turns), so there is no state
file, and a paced prompt reads only the frames since that record.

:func:`prompt_reminder` is the prompt hook's whole check. With nothing to do it reads the
settings and the tail of the log and returns "" (no segmentation, no write).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import msgspec

from continuity import frames as fr
from continuity.rolling.segments import Segment
from continuity.rolling.settings import RollingSettings, enabled, read_settings
from continuity.rolling.usage import ContextUsage, session_usage
from continuity.store.base import Thread

__all__ = ["KIND", "Queued", "cold_segments", "prompt_reminder", "queue", "reminder_text"]

KIND: Final = "continuity.rolling.queued"


class Queued(msgspec.Struct, frozen=True, kw_only=True):
    """What a reminder asked for (the data of its record)."""

    turn: int
    tokens: int
    window: int
    segments: list[Segment]


def cold_segments(
    segments: Sequence[Segment],
    settings: RollingSettings,
    compressed: Sequence[tuple[int, int]] = (),
) -> list[Segment]:
    """The segments that are cold and not compressed yet, oldest first."""
    return [
        s
        for s in segments
        if s.completed
        and s.turns_since_mentioned >= settings.cold_turns
        and s.messages >= settings.min_messages
        and not any(a <= s.from_seq and s.to_seq <= b for a, b in compressed)
    ]


def _paced(thread: Thread, every_turns: int) -> bool:
    """Whether fewer than ``every_turns`` prompts came since the latest reminder (read from
    the frames after its record: the cost of the turns since, not of the whole thread)."""
    from continuity.context.records import latest_record
    from continuity.rolling.segments import is_prompt

    found = latest_record(thread, KIND)
    if found is None:
        return False
    prompts = 0
    for f in thread.read(from_seq=found.seq + 1, types=["message_appended"]):
        if isinstance(f, fr.MessageAppended) and is_prompt(f):
            prompts += 1
            if prompts >= every_turns:
                return False
    return True


def queue(
    thread: Thread, usage: ContextUsage, settings: RollingSettings, *, force: bool = False
) -> Queued | None:
    """The cold segments to compress now (logged), or None: the context is under the hot
    threshold, a reminder was given fewer than ``every_turns`` turns ago (unless ``force``),
    or nothing is cold."""
    from continuity.rolling.cache import thread_turns
    from continuity.rolling.segments import segment_turns
    from continuity.rolling.warm import compressed_segments

    if usage.fraction < settings.hot and not force:
        return None
    if not force and _paced(thread, settings.every_turns):
        return None
    turns = thread_turns(thread)
    if not turns:
        return None
    current = turns[-1].index
    done = [(c.from_seq, c.to_seq) for c in compressed_segments(thread)]
    cold = cold_segments(segment_turns(turns), settings, done)[: settings.max_segments]
    if not cold:
        return None
    from continuity.context.records import record

    queued = Queued(turn=current, tokens=usage.tokens, window=usage.window, segments=cold)
    # not fsynced: lost in a crash, it costs one reminder again, and the prompt waits on it
    record(thread, KIND, msgspec.to_builtins(queued), durable=False)
    return queued


def reminder_text(queued: Queued) -> str:
    """The short reminder that names the queued segments and asks for a summary of each."""
    pct = round(100 * queued.tokens / queued.window) if queued.window else 0
    lines = [
        f"[continuity] Your context is about {pct}% full ({queued.tokens:,} of "
        f"{queued.window:,} tokens). These finished topics have not come up for a while. "
        'When convenient, compress each with the MCP tool `remember` (kind "summary", '
        "from_seq, to_seq, segment, key_decisions, key_files): keep decisions, file paths "
        "and changes, error resolutions, outcomes and stated preferences; drop verbose tool "
        "output, intermediate debugging and repetition (aim for 80-90% fewer tokens). "
        "Nothing is lost: the archive keeps every message.",
    ]
    for s in queued.segments:
        lines.append(
            f"- {s.segment_id}: “{s.topic}” #{s.from_seq}–#{s.to_seq} (turns "
            f"{s.first_turn + 1}–{s.last_turn + 1}, {s.messages} messages, ~{s.tokens:,} tokens)"
        )
    return "\n".join(lines)


def prompt_reminder(thread: Thread) -> str:
    """The reminder a prompt hook adds for ``thread``, or "" (off, under the threshold, paced,
    or nothing cold). Never raises for a thread without figures."""
    if not enabled():
        return ""
    settings = read_settings(thread.store.local_dir)
    if not settings.enabled or not thread.exists():
        return ""
    usage = session_usage(thread, windows=settings.windows, default=settings.window)
    if usage is None or usage.fraction < settings.hot:
        return ""
    queued = queue(thread, usage, settings)
    return "" if queued is None else reminder_text(queued)
