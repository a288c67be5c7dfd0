"""The bundle as an Anthropic Messages API request body (ADR 0019)."""

from __future__ import annotations

from typing import Any, Final, Literal, TypeAlias

from continuity import frames as fr
from continuity.context.bundle import ContextBundle
from continuity.context.layout import Artifacts, artifact_store, members
from continuity.context.render.parts import (
    EMPTY_MESSAGE,
    CallPart,
    ImagePart,
    Part,
    ProviderPart,
    ResultPart,
    TextPart,
    ThinkingPart,
    copy_json,
    image_data,
    image_text,
)
from continuity.context.render.system import system_sections
from continuity.context.render.window import Segment, ThinkingMode, Turn, normalised_window
from continuity.store.artifacts import ArtifactStore

__all__ = ["CacheMode", "to_anthropic"]

CacheMode: TypeAlias = Literal["system", "conversation"] | None
_EPHEMERAL: Final = {"type": "ephemeral"}
_CACHEABLE: Final = frozenset({"text", "image", "tool_use", "tool_result", "document"})


def to_anthropic(
    bundle: ContextBundle,
    *,
    system_prefix: str | None = None,
    cache: CacheMode = "system",
    thinking: ThinkingMode = "in_flight",
    artifacts: Artifacts = None,
) -> dict[str, Any]:
    """The bundle as an Anthropic Messages API request body: ``{"system", "messages"}``.

    ``system`` is ``system_prefix``, then the window's system messages, then the summaries
    (ascending, each under a heading naming the seq it runs through) and what recall found; it
    is left out when there is none of them. With ``cache="system"`` (the default) it is a list
    of text blocks with a ``cache_control`` breakpoint after ``system_prefix`` and after the
    summaries (recall, which changes with every compile, comes after them), so prompt caching
    pays for everything up to the summaries until the next compaction; ``cache="conversation"``
    also puts one on the last block of the last message (worth it while the window's start
    stays put, as in a tool loop that fits the budget); ``cache=None`` places none, and
    ``system`` is then a string. The text is the same: the blocks joined give the string.

    ``thinking``: which signed thinking blocks go back (``"in_flight"``: those of the turn still
    in a tool loop, first in their turn; ``"all"``; ``"none"``). ``artifacts``: where to read
    the images the request sends as base64 (without it they go by URL, or as a placeholder).
    """
    if cache not in ("system", "conversation", None):
        raise ValueError(f"cache must be 'system', 'conversation' or None, not {cache!r}")
    segs, turns = normalised_window(bundle, "anthropic", thinking)
    shape = _Anthropic(segs, artifact_store(artifacts))
    request: dict[str, Any] = {}
    system = _system(bundle, system_prefix, cache)
    if system is not None:
        request["system"] = system
    messages = [shape.message(t) for t in turns]
    last = messages[-1]
    _trim_final_assistant(last)
    if cache == "conversation":
        _breakpoint(last)
    request["messages"] = messages
    return request


def _system(
    bundle: ContextBundle, system_prefix: str | None, cache: CacheMode
) -> str | list[dict[str, Any]] | None:
    """The ``system`` parameter: a string without caching, else text blocks with a breakpoint
    after each stable section; None when there is no system text."""
    sections = system_sections(bundle, system_prefix, "anthropic")
    if not sections:
        return None
    if cache is None:
        return "\n\n".join(text for text, _ in sections)
    blocks = []
    for i, (text, stable) in enumerate(sections):
        block: dict[str, Any] = {
            "type": "text",
            "text": text + ("\n\n" if i < len(sections) - 1 else ""),
        }
        if stable:
            block["cache_control"] = dict(_EPHEMERAL)
        blocks.append(block)
    return blocks


def _trim_final_assistant(last: dict[str, Any]) -> None:
    """The Messages API rejects a final assistant turn that ends in whitespace."""
    if last["role"] != "assistant":
        return
    if isinstance(last["content"], list):
        for block in last["content"]:
            if block.get("type") == "text":
                block["text"] = block["text"].rstrip() or EMPTY_MESSAGE
    else:
        last["content"] = last["content"].rstrip() or EMPTY_MESSAGE


def _breakpoint(message: dict[str, Any]) -> None:
    """A cache breakpoint on the last block of ``message`` that can carry one."""
    content = message["content"]
    if isinstance(content, str):
        content = message["content"] = [{"type": "text", "text": content}]
    for block in reversed(content):
        if block.get("type") in _CACHEABLE and block.get("text", "x") != "":
            block["cache_control"] = dict(_EPHEMERAL)
            return


class _Anthropic:
    """Parts as Messages API blocks, with the members the converter kept for each."""

    def __init__(self, segs: list[Segment], store: ArtifactStore | None) -> None:
        self.segs = segs
        self.store = store

    def extras(self, part: Part) -> dict[str, Any]:
        if not part.intact or part.seg < 0:
            return {}
        return self.segs[part.seg].extras(part.pos)

    def image(self, block: fr.ImageBlock) -> dict[str, Any] | None:
        data = image_data(block, self.store)
        if data is not None:
            source = {"type": "base64", "media_type": block.media_type, "data": data}
        elif block.url is not None and not block.url.startswith("data:"):
            source = {"type": "url", "url": block.url}
        else:
            return None
        return {"type": "image", "source": source}

    def result_parts(self, part: ResultPart, extras: dict[str, Any]) -> list[dict[str, Any]]:
        given = extras.get("_p") if isinstance(extras.get("_p"), list) else None
        out: list[dict[str, Any]] = []
        for j, p in enumerate(part.parts or ()):
            more = given[j] if given and j < len(given) and isinstance(given[j], dict) else {}
            if isinstance(more.get("_raw"), dict):
                out.append(more["_raw"])
                continue
            block: dict[str, Any]
            if isinstance(p, fr.TextBlock):
                block = {"type": "text", "text": p.text}
            else:
                block = self.image(p) or {"type": "text", "text": image_text(p)}
            out.append({**block, **members(more)})
        return out

    def block(self, part: Part) -> dict[str, Any]:
        extras = self.extras(part)
        if isinstance(part, TextPart):
            return {"type": "text", "text": part.text, **members(extras)}
        if isinstance(part, ImagePart):
            image = self.image(part.block)
            if image is None:
                return {"type": "text", "text": image_text(part.block)}
            return {**image, **members(extras)}
        if isinstance(part, ThinkingPart):
            if part.block.data is not None:
                return {"type": "redacted_thinking", "data": part.block.data}
            return {
                "type": "thinking",
                "thinking": part.block.text,
                "signature": part.block.signature,
            }
        if isinstance(part, ProviderPart):
            return copy_json(part.block.data)
        if isinstance(part, CallPart):
            return {
                "type": "tool_use",
                "id": part.id,
                "name": part.name,
                "input": copy_json(part.input),
                **members(extras),
            }
        return self.tool_result(part, extras)

    def tool_result(self, part: ResultPart, extras: dict[str, Any]) -> dict[str, Any]:
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": part.tool_use_id}
        form = extras.get("_form")
        if part.parts is not None:
            block["content"] = self.result_parts(part, extras)
        elif part.empty and form == "none":
            pass
        elif part.empty and form in ("str", "list"):
            block["content"] = "" if form == "str" else []
        else:
            block["content"] = part.content
        if part.is_error:
            block["is_error"] = True
        return {**block, **members(extras)}

    def message(self, turn: Turn) -> dict[str, Any]:
        content: str | list[dict[str, Any]] = [self.block(p) for p in turn.parts]
        if len(turn.parts) == 1:
            (p,) = turn.parts
            if (
                isinstance(p, TextPart)
                and p.intact
                and p.seg >= 0
                and self.segs[p.seg].env(p.pos).get("_str")
                and content == [{"type": "text", "text": p.text}]
            ):
                content = p.text
        return {"role": turn.role, "content": content}
