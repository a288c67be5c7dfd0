"""Summary artifacts (``summary.v1``) and the :class:`Summarizer` protocols.

A compaction checkpoint points at a summary artifact: the canonical JSON of a
:class:`SummaryDoc`. ``text`` is what a model reads; ``sections`` keep the structured items a
summarizer extracted, so the next cumulative summary can build on its base without re-reading
history. Contract: ``contracts/summary.md``.

A summarizer is a :class:`Summarizer` (``summarize`` returns the content) or, when it waits on
the network (an LLM), an :class:`AsyncSummarizer` (``summarize`` is a coroutine), which the
async face (:mod:`continuity.aio`) awaits on the event loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Literal, Protocol

import msgspec

from continuity import frames as fr

__all__ = [
    "ANTHROPIC_COMPACTION_V1",
    "CUMULATIVE_V1",
    "OPENAI_COMPACTION_V1",
    "PROVIDER_COMPACTION_RULE",
    "PROVIDER_SUMMARY_KINDS",
    "SUMMARY_SCHEMA",
    "AsyncSummarizer",
    "Summarizer",
    "SummaryContent",
    "SummaryDoc",
    "compaction_block",
    "compaction_checkpoint",
    "decode_summary",
    "is_compaction_block",
    "provider_block",
    "provider_summary_text",
    "summary_bytes",
]

SUMMARY_SCHEMA: Final = "summary.v1"
CUMULATIVE_V1: Final = "cumulative_v1"
ANTHROPIC_COMPACTION_V1: Final = "anthropic_compaction_v1"
"""A provider's own compaction: an Anthropic ``compaction`` content block (beta
``compact_20260112``) with a summary. Its artifact is the block as stored, byte for byte."""
OPENAI_COMPACTION_V1: Final = "openai_compaction_v1"
"""A provider's own compaction: an OpenAI Responses ``compaction`` item (encrypted). Its
artifact is the item as stored, byte for byte."""
PROVIDER_COMPACTION_RULE: Final = "provider_compaction"
"""The ``cut_rule_id`` of a checkpoint made for a provider's compaction (ADR: provider
compaction as a checkpoint)."""
PROVIDER_SUMMARY_KINDS: Final = {
    ANTHROPIC_COMPACTION_V1: "anthropic",
    OPENAI_COMPACTION_V1: "openai.responses",
}
"""Each provider summary kind and the provider (``ProviderBlock.provider``) whose block it is."""
_KIND_OF_PROVIDER: Final = {v: k for k, v in PROVIDER_SUMMARY_KINDS.items()}


class SummaryContent(msgspec.Struct, frozen=True, kw_only=True):
    """What a summarizer returns: the text a model reads, and optional structured sections."""

    text: str
    sections: dict[str, list[str]] = {}


class SummaryDoc(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A stored summary: ``text`` covers the thread from ``from_seq`` through ``to_seq``.

    A ``cumulative_v1`` summary covers everything from the thread's start (``from_seq`` 0): it
    is built from its base summary (the latest earlier cumulative one, named here) plus the
    messages after the base's ``to_seq``.
    """

    schema: Literal["summary.v1"] = "summary.v1"
    summary_kind: str = CUMULATIVE_V1
    thread_id: str
    from_seq: int = 0
    to_seq: int
    base_checkpoint_id: str | None = None
    base_summary_artifact_id: str | None = None
    produced_by: str
    text: str
    sections: dict[str, list[str]] = {}


class Summarizer(Protocol):
    """Turns (base summary, new messages) into a new cumulative summary.

    Must be deterministic for compaction to be replayable; an LLM summarizer can still be
    plugged in (its output is stored, so replays read the stored artifact, not the model).
    """

    @property
    def id(self) -> str:
        """Recorded as the summary's ``produced_by``."""
        ...

    def summarize(
        self, base: SummaryDoc | None, messages: Sequence[fr.MessageAppended]
    ) -> SummaryContent: ...


class AsyncSummarizer(Protocol):
    """:class:`Summarizer` for a summarizer that waits (an LLM behind an HTTP client): the same
    ``id``, and ``summarize`` is a coroutine. ``continuity.aio.run_compaction`` and
    ``continuity.aio.create_checkpoint`` await it on the event loop while the job lock is held,
    and store what it returns exactly as the sync path does, so replays read the stored artifact
    and never call it again. It must not block: CPU-heavy work belongs in a plain
    :class:`Summarizer`, which the async face runs in a worker thread.
    """

    @property
    def id(self) -> str:
        """Recorded as the summary's ``produced_by``."""
        ...

    async def summarize(
        self, base: SummaryDoc | None, messages: Sequence[fr.MessageAppended]
    ) -> SummaryContent: ...


_encoder: Final = msgspec.json.Encoder()
_decoder: Final[msgspec.json.Decoder[SummaryDoc]] = msgspec.json.Decoder(SummaryDoc)


def summary_bytes(doc: SummaryDoc) -> bytes:
    return _encoder.encode(doc)


def decode_summary(data: bytes) -> SummaryDoc:
    """Decode a stored summary; raises ``msgspec.DecodeError`` if it is not one."""
    return _decoder.decode(data)


# --- a provider's own compaction --------------------------------------------------------------


def is_compaction_block(block: object) -> bool:
    """Whether ``block`` is a provider's compaction block (readable, opaque or failed)."""
    return (
        isinstance(block, fr.ProviderBlock)
        and block.kind == "compaction"
        and block.provider in _KIND_OF_PROVIDER
    )


def compaction_block(block: object) -> str | None:
    """The summary kind of ``block`` when it is a provider compaction that took place: an
    Anthropic ``compaction`` block whose ``content`` is a non-empty string (null content is a
    failed compaction, which the API treats as a no-op), or an OpenAI Responses ``compaction``
    item with its ``encrypted_content``; None for any other block."""
    if not is_compaction_block(block):
        return None
    assert isinstance(block, fr.ProviderBlock)
    if block.provider == "anthropic":
        content = block.data.get("content")
        return ANTHROPIC_COMPACTION_V1 if isinstance(content, str) and content else None
    encrypted = block.data.get("encrypted_content")
    return OPENAI_COMPACTION_V1 if isinstance(encrypted, str) and encrypted else None


def compaction_checkpoint(message: fr.MessageAppended) -> tuple[str, bytes] | None:
    """The checkpoint a message that holds a provider compaction makes: (summary kind, the
    summary artifact's bytes: the block as stored, byte for byte); None for any other message.
    A message that holds two takes its last."""
    for block in reversed(message.content):
        kind = compaction_block(block)
        if kind is not None:
            assert isinstance(block, fr.ProviderBlock)
            return kind, _encoder.encode(block.data)
    return None


def provider_block(summary_kind: str, data: bytes) -> fr.ProviderBlock | None:
    """The block a provider summary artifact holds (None: ``summary_kind`` is not a provider's,
    or ``data`` is not a JSON object of that kind)."""
    provider = PROVIDER_SUMMARY_KINDS.get(summary_kind)
    if provider is None:
        return None
    try:
        value = _object_decoder.decode(data)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None
    if value.get("type") != "compaction":
        return None
    text = value.get("content") if provider == "anthropic" else None
    return fr.ProviderBlock(
        provider=provider,
        kind="compaction",
        data=value,
        text=text if isinstance(text, str) else "",
    )


def provider_summary_text(block: fr.ProviderBlock) -> str:
    """What a provider compaction says to a reader other than its provider: its readable
    summary, or a note that the provider keeps it encrypted."""
    content = block.data.get("content")
    if isinstance(content, str) and content.strip():
        return content
    return (
        f"[The conversation before this point was compacted by {block.provider}; "
        "its summary is encrypted and only that provider can read it.]"
    )


_object_decoder: Final = msgspec.json.Decoder(dict[str, Any])
