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
from typing import Final, Literal, Protocol

import msgspec

from continuity import frames as fr

__all__ = [
    "CUMULATIVE_V1",
    "SUMMARY_SCHEMA",
    "AsyncSummarizer",
    "Summarizer",
    "SummaryContent",
    "SummaryDoc",
    "decode_summary",
    "summary_bytes",
]

SUMMARY_SCHEMA: Final = "summary.v1"
CUMULATIVE_V1: Final = "cumulative_v1"


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
