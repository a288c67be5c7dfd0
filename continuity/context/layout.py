"""What the converters (:mod:`continuity.context.convert`, provider shapes in) and the renderers
(:mod:`continuity.context.render`, shapes out) agree on: the providers, the ``artifacts=``
argument, and the hints a converter leaves in a message's ``meta`` so that the renderer for the
same provider gives the shape back exactly (ADR 0019).

A *unit* is one thing of the provider's own: an Anthropic message, an OpenAI Chat message, an
OpenAI Responses item. A *layout* is a list of ``[n, env]``: the next ``n`` blocks of the
message form one unit, and ``env`` holds what the blocks do not: ``_k`` (the unit's kind:
``msg``, ``tool``, ``call``, ``out``, ``item``), ``_str`` (its content as a string rather
than a list), ``_b`` (per block, the members no typed block holds, or null), and the unit's
own members (ids, status, name, …). A converter stores a layout (under :func:`layout_key`)
only when it differs from the canonical one, which is what a renderer falls back on.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final, Literal, TypeAlias

from continuity import frames as fr
from continuity.context.bundle import ElidedBlock, ToolStubBlock
from continuity.store.artifacts import ArtifactStore
from continuity.store.base import BaseStore, Thread

__all__ = [
    "RESPONSES_PARTS",
    "ROLE_HINT",
    "Artifacts",
    "Layout",
    "Provider",
    "artifact_store",
    "canonical_layout",
    "layout_key",
    "members",
    "parse_layout",
]

Provider: TypeAlias = Literal["anthropic", "openai.chat", "openai.responses"]
Artifacts: TypeAlias = ArtifactStore | BaseStore | Thread | None
Layout: TypeAlias = list[list[Any]]

ROLE_HINT: Final = "openai.role"
"""A system message's ``meta`` key naming its OpenAI role (``developer``)."""
RESPONSES_PARTS: Final = frozenset(
    {"input_text", "input_image", "input_file", "input_audio", "output_text", "refusal"}
)
"""The kinds of a Responses message's content parts; any other kind is an item of its own."""


def layout_key(provider: Provider) -> str:
    """The ``meta`` key under which a converted message keeps its layout for ``provider``."""
    return f"{provider}.layout"


def artifact_store(artifacts: Artifacts) -> ArtifactStore | None:
    """The artifact store an ``artifacts=`` argument names (a store's or a thread's own)."""
    if artifacts is None or isinstance(artifacts, ArtifactStore):
        return artifacts
    if isinstance(artifacts, Thread):
        return artifacts.store.artifacts
    if isinstance(artifacts, BaseStore):
        return artifacts.artifacts
    raise TypeError(
        f"artifacts must be an artifact store, a store or a thread, not {type(artifacts).__name__}"
    )


def members(extras: dict[str, Any]) -> dict[str, Any]:
    """The provider's own members of an env or extras (ours start with ``_``)."""
    return {k: v for k, v in extras.items() if not k.startswith("_")}


def _is_result(block: object) -> bool:
    return isinstance(block, fr.ToolResultBlock | ToolStubBlock)


def _is_call(block: object) -> bool:
    return isinstance(block, fr.ToolUseBlock) or (
        isinstance(block, ElidedBlock) and block.block_type == "tool_use"
    )


def _responses_item_block(block: object) -> bool:
    return (
        isinstance(block, fr.ProviderBlock)
        and block.provider == "openai.responses"
        and block.kind not in RESPONSES_PARTS
    )


def canonical_layout(provider: Provider, role: str, blocks: Sequence[object]) -> Layout:
    """The layout a renderer uses for a message that brings none of its own: one Anthropic
    message; one OpenAI Chat message, a user's tool results each a ``tool`` message of its
    own; one Responses item per call, output and item of the API's own, the other blocks
    between them one message."""
    if not blocks:
        return []
    if provider == "anthropic" or (
        role != "user" and (provider == "openai.chat" or role == "system")
    ):
        return [[len(blocks), {"_k": "msg"}]]
    units: Layout = []
    run = 0
    for block in blocks:
        kind = None
        if _is_result(block):
            kind = "tool" if provider == "openai.chat" else "out"
        elif provider == "openai.responses" and _is_call(block):
            kind = "call"
        elif provider == "openai.responses" and _responses_item_block(block):
            kind = "item"
        if kind is None:
            run += 1
            continue
        if run:
            units.append([run, {"_k": "msg"}])
            run = 0
        units.append([1, {"_k": kind}])
    if run:
        units.append([run, {"_k": "msg"}])
    return units


def parse_layout(raw: str | None, n_blocks: int) -> Layout | None:
    """A stored layout, if it is well formed and covers exactly ``n_blocks`` blocks."""
    if not raw:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(value, list):
        return None
    total = 0
    for unit in value:
        if (
            not isinstance(unit, list)
            or len(unit) != 2
            or not isinstance(unit[0], int)
            or unit[0] < 0
            or not isinstance(unit[1], dict)
            or not isinstance(unit[1].get("_k"), str)
        ):
            return None
        extras = unit[1].get("_b")
        if extras is not None and (not isinstance(extras, list) or len(extras) != unit[0]):
            return None
        total += unit[0]
    return value if total == n_blocks else None
