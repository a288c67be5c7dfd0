"""``context_bundle.v1``: what a compile selected, as one immutable, content-addressed document.

A bundle holds everything a renderer needs (summary texts included), so rendering never touches
the store. Its canonical bytes (msgspec JSON, fields in definition order, defaults omitted) are
stored as an artifact; the artifact id is the bundle's id.
Contract: ``contracts/context_bundle.md``.
"""

from __future__ import annotations

from typing import Final, Literal, TypeAlias

import msgspec

from continuity import frames as fr
from continuity.store.artifacts import artifact_id

__all__ = [
    "BUNDLE_SCHEMA",
    "BundleItem",
    "ContextBundle",
    "ElidedBlock",
    "MessageItem",
    "RecallItem",
    "SummaryItem",
    "ToolStubBlock",
    "bundle_bytes",
    "bundle_id",
    "decode_bundle",
]

BUNDLE_SCHEMA: Final = "context_bundle.v1"


class _Struct(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    pass


class ToolStubBlock(_Struct, frozen=True, kw_only=True, tag="tool_stub", tag_field="type"):
    """Stands in the bundle for a tool result too old to show whole (the log keeps it whole).

    ``observation`` is the text of an ``observation_recorded`` frame for this tool use when there
    is one; otherwise the stub names the tool, the output's size, its first line and where the
    whole output lives.
    """

    tool_use_id: str
    tool_name: str = ""
    size: int = 0
    first_line: str = ""
    artifact_id: str | None = None
    observation: str | None = None
    is_error: bool = False

    def text(self) -> str:
        """How the stub reads to a model."""
        if self.observation is not None:
            return self.observation
        where = f"; whole output in artifact {self.artifact_id}" if self.artifact_id else ""
        err = " (error)" if self.is_error else ""
        name = self.tool_name or "tool"
        first = f"first line: {self.first_line!r}"
        return f"[{name} output{err} elided: {self.size} bytes; {first}{where}]"


class ElidedBlock(_Struct, frozen=True, kw_only=True, tag="elided", tag_field="type"):
    """Stands in the bundle for a block of a message that does not fit the token budget even
    alone (the log keeps it whole). Such a message gives up its largest blocks until it fits;
    a tool result becomes a ``tool_stub``, any other block this. ADR 0017.

    A ``tool_use`` keeps its id and name here, so the call still pairs with its result.
    """

    block_type: str
    size: int = 0
    tokens: int = 0
    first_line: str = ""
    tool_use_id: str = ""
    tool_name: str = ""

    def text(self) -> str:
        """How the stub reads to a model."""
        what = self.block_type
        if self.block_type == "tool_use":
            what = f"{self.tool_name or 'tool'} call input"
        return (
            f"[{what} elided: {self.size} bytes, ~{self.tokens} tokens, more than the context "
            f"budget; first line: {self.first_line!r}; the archive keeps it whole]"
        )


ItemBlock: TypeAlias = (
    fr.TextBlock
    | fr.ThinkingBlock
    | fr.ToolUseBlock
    | fr.ToolResultBlock
    | fr.ImageBlock
    | fr.ProviderBlock
    | ToolStubBlock
    | ElidedBlock
)


class SummaryItem(_Struct, frozen=True, kw_only=True, tag="summary_ref", tag_field="kind"):
    """A cumulative summary of the thread up to ``to_seq``.

    A provider's own compaction (``anthropic_compaction_v1``, ``openai_compaction_v1``) also
    carries ``block``, the compaction block or item as the provider wrote it, which its own
    provider is sent in place of ``text`` (the readable summary, or a note when it is
    encrypted), and ``message_seq``, the message that holds it; ``checkpoint_id`` is empty
    when no checkpoint names it yet (the anchor is that message)."""

    checkpoint_id: str
    checkpoint_seq: int
    to_seq: int
    summary_kind: str
    summary_artifact_id: str
    text: str
    tokens: int
    message_seq: int | None = None
    block: fr.ProviderBlock | None = None


class MessageItem(_Struct, frozen=True, kw_only=True, tag="message", tag_field="kind"):
    """A raw message of the recent window (older tool outputs replaced by stubs)."""

    seq: int
    message_id: str
    role: fr.Role
    ts_ms: int = 0
    content: list[ItemBlock]
    tokens: int
    meta: dict[str, str] = {}
    """The message's provider hints (``anthropic.*``, ``openai.*`` keys of its ``meta``): what
    a renderer needs to give a provider's shape back exactly (ADR 0019)."""


class RecallItem(_Struct, frozen=True, kw_only=True, tag="recall", tag_field="kind"):
    """A message from before the summaries that a search for the recall query brought back."""

    seq: int
    source_kind: str
    role: str = ""
    score: float
    text: str
    tokens: int


BundleItem: TypeAlias = SummaryItem | RecallItem | MessageItem


class ContextBundle(_Struct, frozen=True, kw_only=True):
    schema: Literal["context_bundle.v1"] = "context_bundle.v1"
    compiler_id: str
    strategy: str
    thread_id: str
    anchor_seq: int
    anchor_message_id: str | None = None
    limits: fr.Limits
    items: list[BundleItem]
    tokens: int
    notes: list[str] = []

    @property
    def summaries(self) -> list[SummaryItem]:
        return [i for i in self.items if isinstance(i, SummaryItem)]

    @property
    def recalled(self) -> list[RecallItem]:
        return [i for i in self.items if isinstance(i, RecallItem)]

    @property
    def messages(self) -> list[MessageItem]:
        return [i for i in self.items if isinstance(i, MessageItem)]


_encoder: Final = msgspec.json.Encoder()
_decoder: Final[msgspec.json.Decoder[ContextBundle]] = msgspec.json.Decoder(ContextBundle)


def bundle_bytes(bundle: ContextBundle) -> bytes:
    """The canonical bytes (what is stored and hashed)."""
    return _encoder.encode(bundle)


def bundle_id(bundle: ContextBundle) -> str:
    return artifact_id(bundle_bytes(bundle))


def decode_bundle(data: bytes) -> ContextBundle:
    return _decoder.decode(data)
