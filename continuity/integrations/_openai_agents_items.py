"""Responses items ↔ message frames for the OpenAI Agents SDK sessions (ADR 0024).

One item is one ``message_appended`` frame. The item goes through
:func:`~continuity.context.convert.from_openai_responses` (typed blocks where they exist, the
rest kept whole as a ``ProviderBlock``, the layout in ``meta``), so compile, search, summaries
and recall read it like any other message. Before anything is written, the frame is rendered back
with :func:`item_of`; when that does not give the item back exactly (a shape the converters do
not reproduce: a data URL in a non-canonical base64 wrapping, an empty content list, …) the frame
holds the item verbatim instead, as one ``ProviderBlock`` of kind ``<the item's type>``: lossless
by construction, whatever the SDK sends next.

Rendering one stored item is not rendering a request:
:func:`~continuity.context.render.to_openai_responses` normalises a window (system text first,
tool calls paired with their results, older reasoning dropped), which a session's
``get_items(limit)`` must not do — its tail may begin with a tool output whose call is older.
So :func:`items_of` renders a frame's own units, as they came, with the Responses renderer's
unit builders (:class:`~continuity.context.render.openai_responses.ResponsesShape`) and nothing
else.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

import msgspec

from continuity import frames as fr
from continuity.context.bundle import ContextBundle, MessageItem
from continuity.context.convert import from_openai_responses
from continuity.context.layout import ROLE_HINT, layout_key
from continuity.context.render.openai_responses import ResponsesShape
from continuity.context.render.parts import (
    CallPart,
    Part,
    ProviderPart,
    ResultPart,
    TextPart,
    part_of,
)
from continuity.context.render.system import (
    lone_system,
    lone_system_unit,
    openai_system_role,
    system_text,
)
from continuity.context.render.window import Segment, provider_lead
from continuity.errors import BadFrame
from continuity.store.artifacts import ArtifactStore
from continuity.store.base import Thread
from continuity.summary import is_compaction_block

__all__ = [
    "KEY_ORDER",
    "OPAQUE",
    "PROVIDER",
    "compiled_items",
    "frames_for_items",
    "items_of",
    "opaque_frame",
    "plain_item",
]

PROVIDER: Final = "openai.responses"
OPAQUE: Final = "opaque"
"""The kind of the provider block that holds a stored object that is no Responses item
(:func:`opaque_frame`)."""
_KEEP_INLINE: Final = 1 << 62
"""Tool outputs stay in the frame, however long: ``get_items`` returns them whole (a preview
and an artifact note would not be the item that was added)."""
_TEXT_CAP: Final = 4000
KEY_ORDER: Final = "openai.responses.key_order"
"""Frame meta: the items' keys in the order they were added (JSON, the items with every value
that is not an object or a list as 0), kept when the renderer orders them otherwise; dict key
order is observable (a JSON request, the SDK's item digests), so ``get_items`` restores it."""

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode


def plain_item(value: Any, index: int) -> dict[str, Any]:
    """``value`` as a plain JSON object (an SDK model dumped as the SDK itself dumps items), or
    :class:`BadFrame` naming its index when it is not an item at all."""
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        value = dump(exclude_unset=True, mode="json")
    if not isinstance(value, Mapping):
        raise BadFrame(
            f"add_items: items[{index}]: expected a Responses input item (a dict), "
            f"got {'null' if value is None else type(value).__name__}"
        )
    try:  # the log holds JSON: an item must be JSON, and a copy (the caller may mutate theirs)
        plain: dict[str, Any] = json.loads(json.dumps(dict(value), allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise BadFrame(f"add_items: items[{index}]: not a JSON object ({exc})") from None
    return plain


def frames_for_items(
    items: Sequence[Any], *, artifacts: Thread | ArtifactStore | None
) -> list[fr.MessageAppended]:
    """One frame per item, checked to render back to the item exactly (else verbatim).

    Raises :class:`BadFrame` (naming ``items[i]`` and the field) for a value that is no
    Responses item; nothing is written by anyone then, since the caller appends the frames as
    one batch only after every item converted."""
    frames: list[fr.MessageAppended] = []
    store = artifacts.store.artifacts if isinstance(artifacts, Thread) else artifacts
    for i, raw in enumerate(items):
        item = plain_item(raw, i)
        if "type" not in item and "role" not in item:
            frames.append(opaque_frame(item))
            continue
        try:
            converted = from_openai_responses(
                [item], artifacts=artifacts, max_inline_bytes=_KEEP_INLINE
            )
        except BadFrame as exc:
            said = str(exc).removeprefix("from_openai_responses: ").removeprefix("[0]")
            raise BadFrame(f"add_items: items[{i}]{said}") from None
        if len(converted) != 1:  # never for one item; kept whole rather than assumed
            frames.append(_verbatim(item, "assistant"))
            continue
        frame = converted[0]
        try:
            back = items_of(frame, store)
        except (KeyError, IndexError, TypeError, ValueError):
            back = []
        if back != [item]:
            frames.append(_verbatim(item, frame.role, frame))
        elif _encode(back) != _encode([item]):  # equal, but its keys in another order
            order = _encode([_skeleton(item)]).decode()
            frames.append(msgspec.structs.replace(frame, meta={**frame.meta, KEY_ORDER: order}))
        else:
            frames.append(frame)
    return frames


def _skeleton(value: Any) -> Any:
    """``value``'s shape: every object with its keys in their order, every other value 0."""
    if isinstance(value, dict):
        return {k: _skeleton(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_skeleton(v) for v in value]
    return 0


def _in_order(value: Any, skeleton: Any) -> Any:
    """``value`` with the keys of each object in the order ``skeleton`` gives them."""
    if isinstance(value, dict) and isinstance(skeleton, dict):
        out = {k: _in_order(value[k], skeleton[k]) for k in skeleton if k in value}
        if len(out) != len(value):  # not the shape it was stored with: the rest as they are
            out.update((k, v) for k, v in value.items() if k not in out)
        return out
    if isinstance(value, list) and isinstance(skeleton, list):
        return [_in_order(v, s) for v, s in zip(value, skeleton, strict=False)] + value[
            len(skeleton) :
        ]
    return value


def opaque_frame(item: dict[str, Any]) -> fr.MessageAppended:
    """A JSON object that is no Responses item (no ``type``, no ``role``: an ``EncryptedSession``
    envelope, a wrapper's own record), kept exactly as given, with no text (search and summaries
    do not read it). ``get_items`` gives it back, and so does a compiled history, where it sits
    as it was added (the wrapper that wrote it reads it back: ``EncryptedSession`` decrypts it
    whatever session it wraps)."""
    block = fr.ProviderBlock(provider=PROVIDER, kind=OPAQUE, data=item, text="")
    return fr.message("user", content=[block])


def _verbatim(
    item: dict[str, Any], role: str, converted: fr.MessageAppended | None = None
) -> fr.MessageAppended:
    """The item whole in one provider block: what the renderers send back unchanged."""
    kind = item.get("type") if isinstance(item.get("type"), str) and item.get("type") else None
    text = _text_of(converted) if converted is not None else ""
    block = fr.ProviderBlock(provider=PROVIDER, kind=kind or "message", data=item, text=text)
    return fr.message("assistant" if role == "assistant" else "user", content=[block])


def _text_of(frame: fr.MessageAppended) -> str:
    """The converted frame's text, kept for search and summaries of a verbatim item."""
    texts: list[str] = []
    for block in frame.content:
        if isinstance(block, fr.TextBlock):
            texts.append(block.text)
        elif isinstance(block, fr.ToolResultBlock):
            texts.append(block.content or "")
        elif isinstance(block, fr.ProviderBlock):
            texts.append(block.text)
    text = "\n".join(t for t in texts if t)
    return text if len(text) <= _TEXT_CAP else text[: _TEXT_CAP - 1] + "…"


def items_of(frame: fr.MessageAppended, store: ArtifactStore | None) -> list[dict[str, Any]]:
    """The Responses items one stored message holds, exactly as they were converted (one for a
    message a session wrote; a message another writer grouped gives each of its items), their
    keys in the order they were added."""
    out = _rendered(frame, store)
    order = frame.meta.get(KEY_ORDER)
    return out if order is None else _in_order(out, _decode(order))


def compiled_items(
    bundle: ContextBundle, store: ArtifactStore | None, *, system_prefix: str | None = None
) -> list[dict[str, Any]]:
    """A compiled bundle as a session's history: the system text (the summaries, recall and
    the window's system messages) first, as the Responses renderer writes it, then each
    message of the window as the items it was stored as, with the provider's compaction item
    where its message was (after the messages a compacted window keeps).

    Not a request (:func:`~continuity.context.render.to_openai_responses` normalises one):
    the SDK builds its request from these, and matches them against what the model saw, so
    a call still waiting for its approval and the reasoning items of earlier turns stay as
    they were added (issue 42)."""
    out: list[dict[str, Any]] = []
    role = openai_system_role(bundle, None)
    lone = lone_system(bundle, system_prefix, PROVIDER)
    if lone is not None:
        out.append(lone_system_unit(lone, PROVIDER, role, "input_text"))
    else:
        text = system_text(bundle, system_prefix, PROVIDER)
        if text:
            out.append({"role": role, "content": text})
    lead = provider_lead(bundle, PROVIDER)
    for item in bundle.messages:
        if item.role == "system":
            continue  # in the system text
        if (
            lead is not None
            and lead.block is not None
            and (lead.message_seq is None or item.seq >= lead.message_seq)
        ):
            out.append(copy.deepcopy(lead.block.data))
            if item.seq == lead.message_seq:
                item = msgspec.structs.replace(
                    item, content=[b for b in item.content if not is_compaction_block(b)]
                )
            lead = None
        if item.content:
            rendered = _rendered(item, store)
            order = item.meta.get(KEY_ORDER)
            out += rendered if order is None else _in_order(rendered, _decode(order))
    if lead is not None and lead.block is not None:
        out.append(copy.deepcopy(lead.block.data))
    return out


def _rendered(
    frame: fr.MessageAppended | MessageItem, store: ArtifactStore | None
) -> list[dict[str, Any]]:
    item = (
        frame
        if isinstance(frame, MessageItem)
        else MessageItem(
            seq=frame.seq,
            message_id=frame.message_id,
            role=frame.role,
            content=list(frame.content),
            tokens=0,
            meta=frame.meta,
        )
    )
    content = item.content
    if (
        len(content) == 1
        and isinstance(content[0], fr.ProviderBlock)
        and content[0].provider == PROVIDER
        and layout_key(PROVIDER) not in item.meta
        and content[0].kind not in ("input_text", "output_text", "refusal")
    ):
        return [copy.deepcopy(content[0].data)]
    if item.role == "system":
        role = item.meta.get(ROLE_HINT, "system")
        return [lone_system_unit(item, PROVIDER, role, "input_text")]
    seg = Segment(item, PROVIDER)
    shape = ResponsesShape([seg], store)
    units: dict[int, list[Part]] = {}
    for pos, block in enumerate(content):
        # an empty text is part of the item as given (the request renderer drops it)
        part: Part | None = (
            TextPart(block.text, 0, pos)
            if isinstance(block, fr.TextBlock)
            else part_of(block, PROVIDER, 0, pos)
        )
        if part is not None:
            units.setdefault(seg.unit(pos), []).append(part)
    out: list[dict[str, Any]] = []
    for u, env in enumerate(seg.envs):
        parts = units.get(u, [])
        kind = env.get("_k")
        if kind == "call" and len(parts) == 1 and isinstance(parts[0], CallPart):
            out.append(shape.call(parts[0]))
        elif kind == "out" and len(parts) == 1 and isinstance(parts[0], ResultPart):
            out.append(shape.output(parts[0]))
        elif kind == "item" and len(parts) == 1 and isinstance(parts[0], ProviderPart):
            out.append(copy.deepcopy(parts[0].block.data))
        elif kind == "msg" and parts:
            out.append(shape.message(item.role, parts))
        else:
            raise ValueError(f"seq {item.seq}: unit {u} ({kind}) cannot be rendered as an item")
    return out
