"""A provider's own compaction as compile sees it: the Anthropic ``compaction`` block or the
OpenAI Responses ``compaction`` item a thread holds, as the summary that bounds the window.

The store makes a checkpoint for each (:func:`continuity.store.base.provider_checkpoints`,
kinds ``anthropic_compaction_v1`` and ``openai_compaction_v1``); compile takes the newest one
the anchor sees whose compacting message is not retracted, reading the block from that message
(the log is the truth, so a missing artifact changes nothing here: ``verify`` names it). A
compacting message in the window that is newer than every checkpoint the anchor sees (the
anchor is the message itself, or the log was written without its checkpoint) bounds the window
the same way. The rules between these and continuity's own cumulative summaries are in
:mod:`continuity.context.compiler` (``_select``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

import msgspec

from continuity import frames as fr
from continuity.caches.marks import is_in
from continuity.context.bundle import SummaryItem
from continuity.context.sources import ThreadSource
from continuity.store.artifacts import artifact_id
from continuity.store.derived import CheckpointEntry
from continuity.summary import (
    PROVIDER_SUMMARY_KINDS,
    compaction_block,
    provider_summary_text,
)

__all__ = [
    "ProviderSummary",
    "is_provider_kind",
    "latest_provider_summary",
    "newest_in_window",
]

_SUMMARY_OVERHEAD_TOKENS: Final = 8
_encoder: Final = msgspec.json.Encoder()


def is_provider_kind(summary_kind: str) -> bool:
    return summary_kind in PROVIDER_SUMMARY_KINDS


class ProviderSummary(msgspec.Struct, frozen=True):
    """The provider compaction that bounds a window: its summary item, and the seq of the
    message that holds it."""

    item: SummaryItem
    message_seq: int


def _item(
    block: fr.ProviderBlock,
    kind: str,
    checkpoint_id: str,
    checkpoint_seq: int,
    to_seq: int,
    message_seq: int,
    count: Callable[[str], int],
) -> SummaryItem:
    data = _encoder.encode(block.data)
    content = block.data.get("content")
    readable = isinstance(content, str) and bool(content.strip())
    # What the provider is sent is the block: its readable summary, or (opaque) its bytes.
    sent = content if readable and isinstance(content, str) else data.decode()
    return SummaryItem(
        checkpoint_id=checkpoint_id,
        checkpoint_seq=checkpoint_seq,
        to_seq=to_seq,
        summary_kind=kind,
        summary_artifact_id=artifact_id(data),
        text=provider_summary_text(block),
        tokens=count(sent) + _SUMMARY_OVERHEAD_TOKENS,
        message_seq=message_seq,
        block=block,
    )


def _compaction_in(message: fr.MessageAppended) -> tuple[fr.ProviderBlock, str] | None:
    for block in reversed(message.content):
        kind = compaction_block(block)
        if kind is not None:
            assert isinstance(block, fr.ProviderBlock)
            return block, kind
    return None


def latest_provider_summary(
    source: ThreadSource,
    anchor_seq: int,
    retracted: list[tuple[int, int]],
    count: Callable[[str], int],
    resets: list[str],
) -> ProviderSummary | None:
    """The newest provider checkpoint the anchor sees (greatest ``to_seq``, the later frame on
    a tie) whose compacting message is there and not retracted; each newer one passed over is
    recorded in ``resets``. O(provider checkpoints) to pick, O(its batch) to read."""
    found = [c for c in source.other_checkpoints(anchor_seq) if is_provider_kind(c.summary_kind)]
    for c in sorted(found, key=lambda c: (c.to_seq, c.seq), reverse=True):
        made = _read(source, c, retracted)
        if isinstance(made, str):
            resets.append(f"checkpoint {c.checkpoint_id} (to_seq {c.to_seq}) passed over: {made}")
            continue
        message, block = made
        item = _item(block, c.summary_kind, c.checkpoint_id, c.seq, c.to_seq, message.seq, count)
        return ProviderSummary(item, message.seq)
    return None


def _read(
    source: ThreadSource, c: CheckpointEntry, retracted: list[tuple[int, int]]
) -> tuple[fr.MessageAppended, fr.ProviderBlock] | str:
    """The compacting message of a provider checkpoint and its block, read from the log
    between the checkpoint's ``to_seq`` and itself (its batch); or why it cannot stand."""
    frames = list(source.frames(c.to_seq + 1, c.seq))
    last = frames[-1] if frames else None
    if not isinstance(last, fr.CompactionCheckpointCreated) or last.checkpoint_id != (
        c.checkpoint_id
    ):
        return "its frame is not where the index says"
    for f in frames:
        if isinstance(f, fr.MessageAppended) and f.message_id == last.to_message_id:
            if is_in(retracted, f.seq):
                return f"its compacting message (seq {f.seq}) is retracted"
            made = _compaction_in(f)
            if made is None or made[1] != c.summary_kind:
                return f"its message (seq {f.seq}) holds no {c.summary_kind} compaction"
            return f, made[0]
    return "its compacting message is not in its batch"


def newest_in_window(
    messages: Sequence[fr.MessageAppended], after_seq: int, count: Callable[[str], int]
) -> ProviderSummary | None:
    """The newest message of the window after ``after_seq`` that holds a provider compaction,
    as the summary it makes (no checkpoint names it yet: its id is empty)."""
    for m in reversed(messages):
        if m.seq <= after_seq:
            return None
        made = _compaction_in(m)
        if made is not None:
            block, kind = made
            return ProviderSummary(_item(block, kind, "", m.seq, m.seq - 1, m.seq, count), m.seq)
    return None
