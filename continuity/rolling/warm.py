"""The warm tier: segments the agent (or a runtime's summarizer) compressed (ADR 0056).

A compressed segment is two frames: a ``compaction_checkpoint_created`` whose summary carries
the agent's words for ``from_seq..to_seq`` (and its key decisions and files, so search finds
them and compile starts from it), and a ``record_appended`` of kind :data:`KIND` that says
what it covers and what it saved: the original tokens (the messages of the range, as
estimated), the compressed tokens and their ratio. Both are in the chained log; nothing of the
range is removed (the cold tier keeps it whole).

:func:`agent_summaries` is what a restore after the agent's own compaction prefers over its
extractive summary for the stretches they cover.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import msgspec

from continuity import frames as fr
from continuity.store.base import Thread
from continuity.tokens import estimate_text

__all__ = [
    "KIND",
    "Compressed",
    "agent_summaries",
    "compressed_segments",
    "record_compressed",
    "summary_body",
]

KIND: Final = "continuity.rolling.compressed"
_MAX_LIST: Final = 30
_MAX_ITEM: Final = 400


class Compressed(msgspec.Struct, frozen=True, kw_only=True):
    """A compressed segment, as its record says."""

    seq: int
    from_seq: int
    to_seq: int
    checkpoint_id: str
    segment_id: str = ""
    text: str
    key_decisions: list[str] = []
    key_files: list[str] = []
    original_tokens: int = 0
    compressed_tokens: int = 0
    ratio: float = 0.0
    """``compressed_tokens / original_tokens`` (0.12: an 88% reduction)."""
    by: str = "agent"


def clean_list(value: Any) -> list[str]:
    """A list of short strings from an argument (anything else dropped)."""
    if not isinstance(value, list):
        return []
    out = [" ".join(v.split())[:_MAX_ITEM] for v in value if isinstance(v, str) and v.strip()]
    return list(dict.fromkeys(out))[:_MAX_LIST]


def summary_body(text: str, key_decisions: Sequence[str], key_files: Sequence[str]) -> str:
    """The summary as the checkpoint keeps it: the text, then its key decisions and files."""
    parts = [text.strip()]
    if key_decisions:
        parts.append("Key decisions:\n" + "\n".join(f"- {d}" for d in key_decisions))
    if key_files:
        parts.append("Key files:\n" + "\n".join(f"- {f}" for f in key_files))
    return "\n\n".join(parts)


def _original_tokens(thread: Thread, from_seq: int, to_seq: int) -> int:
    total = 0
    for f in thread.read(from_seq=from_seq, to_seq=to_seq, types=["message_appended"]):
        if isinstance(f, fr.MessageAppended):
            total += f.tokens or sum(
                estimate_text(b.text) for b in f.content if isinstance(b, fr.TextBlock)
            )
    return total


def record_compressed(
    thread: Thread,
    *,
    from_seq: int,
    to_seq: int,
    checkpoint_id: str,
    text: str,
    key_decisions: Sequence[str] = (),
    key_files: Sequence[str] = (),
    segment_id: str = "",
    by: str = "agent",
) -> Compressed:
    """Record that ``from_seq..to_seq`` is compressed into checkpoint ``checkpoint_id``, with
    its token counts and ratio; the record as written."""
    from continuity.context.records import record

    original = _original_tokens(thread, from_seq, to_seq)
    compressed = estimate_text(summary_body(text, key_decisions, key_files))
    data: dict[str, Any] = {
        "from_seq": from_seq,
        "to_seq": to_seq,
        "checkpoint_id": checkpoint_id,
        "segment_id": segment_id,
        "text": text,
        "key_decisions": list(key_decisions),
        "key_files": list(key_files),
        "original_tokens": original,
        "compressed_tokens": compressed,
        "ratio": round(compressed / original, 4) if original else 0.0,
        "by": by,
    }
    seq = record(thread, KIND, data, key=segment_id or f"{from_seq}-{to_seq}")
    return msgspec.convert({**data, "seq": seq}, Compressed)


def compressed_segments(thread: Thread, *, limit: int | None = None) -> list[Compressed]:
    """The thread's compressed segments, oldest first."""
    from continuity.context.records import records

    out: list[Compressed] = []
    for r in records(thread, KIND, limit=limit):
        if not isinstance(r.data, dict):
            continue
        try:
            out.append(msgspec.convert({**r.data, "seq": r.seq}, Compressed))
        except msgspec.ValidationError:
            continue
    out.reverse()
    return out


def covered(segments: Sequence[Compressed], from_seq: int, to_seq: int) -> bool:
    """Whether ``from_seq..to_seq`` lies inside one compressed segment's range."""
    return any(c.from_seq <= from_seq and to_seq <= c.to_seq for c in segments)


def agent_summaries(
    thread: Thread, after_seq: int, upto_seq: int, max_chars: int
) -> tuple[str, list[tuple[int, int]]]:
    """The agent-written summaries of stretches inside ``(after_seq, upto_seq]``, as a restore
    section of at most ``max_chars`` characters (newest kept when they do not all fit, shown
    oldest first), and the ranges the section covers: the restore leaves those messages out
    of its extraction. ("", []) when there are none."""
    found = [
        c
        for c in compressed_segments(thread)
        if c.from_seq > after_seq and c.to_seq <= upto_seq and c.text.strip()
    ]
    # a later summary of the same range replaces an earlier one
    latest: dict[tuple[int, int], Compressed] = {(c.from_seq, c.to_seq): c for c in found}
    title = "## Earlier topics, as you summarized them\n"
    used = len(title)
    kept: list[Compressed] = []
    for c in sorted(latest.values(), key=lambda c: c.to_seq, reverse=True):
        body = summary_body(c.text, c.key_decisions, c.key_files)
        piece = f"### #{c.from_seq}–#{c.to_seq}\n{body}\n\n"
        if used + len(piece) > max_chars:
            continue
        kept.append(c)
        used += len(piece)
    if not kept:
        return "", []
    kept.sort(key=lambda c: c.from_seq)
    text = title + "".join(
        f"### #{c.from_seq}–#{c.to_seq}\n{summary_body(c.text, c.key_decisions, c.key_files)}\n\n"
        for c in kept
    )
    return text, [(c.from_seq, c.to_seq) for c in kept]
