"""What a block of the bundle becomes in a request: a *part*, the one normalised form the API
renderers build their blocks, messages and items from, and the text a block is told as where
it cannot stand as itself (an elided block, another provider's block, an image not sent, a
tool call whose result is not in the window).

Each part remembers where it came from (``seg``: the window message, ``pos``: the block in
it; -1 for a part the renderer made) and whether it is still the block it was (``intact``), so
a renderer can give back the members the converter kept for that block (its layout's extras).
"""

from __future__ import annotations

import json
from typing import Any, Final, TypeAlias

import msgspec

from continuity import frames as fr
from continuity.context.bundle import ElidedBlock, ItemBlock, ToolStubBlock
from continuity.context.layout import Provider
from continuity.store.artifacts import ArtifactStore
from continuity.summary import is_compaction_block

__all__ = [
    "EMPTY_MESSAGE",
    "NO_OUTPUT",
    "CallPart",
    "ImagePart",
    "Part",
    "ProviderPart",
    "ResultPart",
    "TextPart",
    "ThinkingPart",
    "compact_json",
    "copy_json",
    "describe",
    "image_data",
    "image_text",
    "image_url",
    "is_reasoning",
    "part_of",
    "told",
]

EMPTY_MESSAGE: Final = "(no visible content)"
NO_OUTPUT: Final = "(no output)"
_TEXT_KINDS: Final = frozenset({"text", "input_text", "output_text"})


class TextPart(msgspec.Struct, frozen=True):
    text: str
    seg: int = -1
    pos: int = -1
    intact: bool = True  # still the block it was (so that block's extras apply)


class ImagePart(msgspec.Struct, frozen=True):
    block: fr.ImageBlock
    seg: int = -1
    pos: int = -1
    intact: bool = True


class ThinkingPart(msgspec.Struct, frozen=True):
    block: fr.ThinkingBlock
    seg: int = -1
    pos: int = -1
    intact: bool = True


class ProviderPart(msgspec.Struct, frozen=True):
    """A provider's own block, going back to the provider it came from unchanged."""

    block: fr.ProviderBlock
    seg: int = -1
    pos: int = -1
    intact: bool = True


class CallPart(msgspec.Struct, frozen=True):
    id: str
    name: str
    input: dict[str, Any]
    seg: int = -1
    pos: int = -1
    intact: bool = True


class ResultPart(msgspec.Struct, frozen=True):
    tool_use_id: str
    content: str  # the output as text (a preview and a note for one in an artifact)
    is_error: bool
    parts: tuple[fr.TextBlock | fr.ImageBlock, ...] | None = None
    empty: bool = False  # the tool gave no output at all
    seg: int = -1
    pos: int = -1
    intact: bool = True


Part: TypeAlias = TextPart | ImagePart | ThinkingPart | ProviderPart | CallPart | ResultPart


def part_of(block: ItemBlock, provider: Provider, seg: int, pos: int) -> Part | None:
    """Block ``pos`` of window message ``seg`` as a part of a ``provider`` request (None: it
    says nothing there: an empty text, unsigned or foreign thinking, an elided thinking)."""
    if isinstance(block, fr.TextBlock):
        return TextPart(block.text, seg, pos) if block.text.strip() else None
    if isinstance(block, fr.ToolUseBlock):
        return CallPart(block.id, block.name, block.input, seg, pos)
    if isinstance(block, fr.ToolResultBlock):
        empty = block.artifact_id is None and not block.content and not block.parts
        parts = tuple(block.parts) if block.parts and block.artifact_id is None else None
        return ResultPart(
            block.tool_use_id, _result_content(block), block.is_error, parts, empty, seg, pos
        )
    if isinstance(block, ToolStubBlock):
        return ResultPart(block.tool_use_id, block.text(), block.is_error, seg=seg, pos=pos)
    if isinstance(block, fr.ImageBlock):
        return ImagePart(block, seg, pos)
    if isinstance(block, fr.ThinkingBlock):
        signed = block.signature is not None or block.data is not None
        return ThinkingPart(block, seg, pos) if provider == "anthropic" and signed else None
    if isinstance(block, fr.ProviderBlock):
        if is_compaction_block(block):
            return None  # sent once, as the bundle's summary (compile leaves none here)
        if block.provider == provider:
            return ProviderPart(block, seg, pos)
        text = told(block)
        return TextPart(text, seg, pos, intact=False) if text else None
    if isinstance(block, ElidedBlock):
        if block.block_type == "tool_use":
            return CallPart(
                block.tool_use_id, block.tool_name, {"elided": block.text()}, seg, pos, False
            )
        if block.block_type == "text":
            return TextPart(block.text(), seg, pos, intact=False)
    return None  # an elided thinking block


def is_reasoning(part: Part) -> bool:
    """Whether ``part`` is a model's reasoning: signed thinking, or a Responses reasoning item."""
    return isinstance(part, ThinkingPart) or (
        isinstance(part, ProviderPart)
        and part.block.provider == "openai.responses"
        and part.block.kind == "reasoning"
    )


# --- parts told as text ---------------------------------------------------------------------


def describe(part: CallPart | ResultPart) -> TextPart:
    """A tool call or result that cannot stand as one in the request, told as text."""
    if isinstance(part, CallPart):
        text = (
            f"[tool call {part.name} (id {part.id}) with input {compact_json(part.input)}; "
            "its result is not in this context]"
        )
    else:
        err = " (error)" if part.is_error else ""
        text = (
            f"[tool result{err} for call {part.tool_use_id}, whose call is not in this "
            f"context]\n{part.content}"
        )
    return TextPart(text, part.seg, part.pos, intact=False)


def told(block: fr.ProviderBlock) -> str | None:
    """A provider block as another provider reads it (None: it says nothing to them)."""
    if block.kind == "reasoning":
        return None  # a model's private reasoning, only its own provider may read it back
    text = block.text.strip()
    if not text:
        return None
    return text if block.kind in _TEXT_KINDS else f"[{block.kind}] {text}"


def image_text(block: fr.ImageBlock) -> str:
    """The placeholder for an image that is not sent."""
    details = [block.media_type] if block.media_type else []
    if block.artifact_id:
        details.append(f"artifact {block.artifact_id}")
    elif block.url and not block.url.startswith("data:"):
        details.append(block.url)
    return f"[image ({', '.join(details) or 'unknown type'}) not shown]"


def _result_content(block: fr.ToolResultBlock) -> str:
    if block.artifact_id is None:
        if block.parts:
            texts = [p.text if isinstance(p, fr.TextBlock) else image_text(p) for p in block.parts]
            return "\n".join(texts) or NO_OUTPUT
        return block.content or NO_OUTPUT
    note = (
        f"[output shortened: {block.size} bytes in all; "
        f"the whole output is in artifact {block.artifact_id}]"
    )
    return f"{block.preview}\n{note}" if block.preview else note


def compact_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def copy_json(value: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of a JSON value of the bundle (a request never shares the bundle's dicts)."""
    import copy  # on use: a restore (text) never needs it

    copied: dict[str, Any] = copy.deepcopy(value)
    return copied


# --- images ---------------------------------------------------------------------------------


def image_data(block: fr.ImageBlock, store: ArtifactStore | None) -> str | None:
    """The image's bytes as base64, when they can be read and sent."""
    if store is None or block.artifact_id is None or not block.media_type.startswith("image/"):
        return None
    import base64  # on use: a restore (text) never needs it

    return base64.b64encode(store.get(block.artifact_id)).decode("ascii")


def image_url(block: fr.ImageBlock, store: ArtifactStore | None) -> str | None:
    """The image as an OpenAI image URL: a data URL of its bytes, or its URL."""
    data = image_data(block, store)
    if data is not None:
        return f"data:{block.media_type};base64,{data}"
    return block.url
