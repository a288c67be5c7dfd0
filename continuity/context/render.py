"""Rendering a context bundle for a model: Anthropic Messages, OpenAI Chat Completions, OpenAI
Responses, plain text.

Pure and deterministic: a renderer reads only the bundle (which holds the summary texts and the
messages' provider hints), never the store, and the same bundle always renders to the same
value. The one exception is asked for: given ``artifacts=`` (an artifact store, a store or a
thread), the API renderers read the bytes of the images they send from it.

The three API shapes share one normalisation of the recent window, so they always validate:

* roles alternate user/assistant and the first message is the user's; a ``system`` message of
  the window joins the system prompt (Anthropic's ``system`` parameter, OpenAI's leading system
  or developer message), after ``system_prefix`` and before the summaries;
* a tool call is answered by exactly one tool result in the very next user turn, matched by
  position: the k-th call with an id pairs with the k-th result with that id, so a runtime that
  reuses ids (numbering calls per turn) keeps every pair, a reused id being renamed in the
  request (``<id>_2``, …); anything that would break the pairing (a result whose call fell out
  of the window, a call whose result is not in it) is turned into a text block that says what
  it was;
* the turn in flight is the assistant turns after the last user turn that holds more than tool
  results (the tool loop in progress): by default (``thinking="in_flight"``) its signed
  Anthropic thinking blocks and its OpenAI Responses reasoning items are sent back unchanged
  (the APIs need them there) and every older one is dropped (the APIs allow it); unsigned
  thinking is never sent;
* a provider's own block (``ProviderBlock``) goes back unchanged to the provider it came from,
  and is told as text to the others; the hints a converter left in a message's ``meta``
  (``<provider>.layout``, ``openai.role``; :mod:`continuity.context.convert`) give the provider
  back its exact shape: ids, the members no typed block holds, content as a string or a list;
* images go as base64 when ``artifacts=`` is given, else by their URL, else as a text
  placeholder; an empty message gets a placeholder text;
* an elided block reads as its stub's text; an elided tool call keeps its id and name, and its
  input is ``{"elided": <the stub's text>}``, so it still pairs with its result.

ADR 0019 has the mapping tables and the rules.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Final, Literal, TypeAlias

import msgspec

from continuity import frames as fr
from continuity.context.bundle import (
    ContextBundle,
    ElidedBlock,
    ItemBlock,
    MessageItem,
    SummaryItem,
    ToolStubBlock,
    bundle_bytes,
)
from continuity.store.artifacts import ArtifactStore
from continuity.store.base import BaseStore, Thread

__all__ = [
    "CONTINUING",
    "FORMATS",
    "ROLE_HINT",
    "CacheMode",
    "Format",
    "Provider",
    "ThinkingMode",
    "render",
    "to_anthropic",
    "to_openai",
    "to_openai_responses",
    "to_text",
]

Format: TypeAlias = Literal["json", "anthropic", "openai", "openai-responses", "text"]
FORMATS: Final[tuple[Format, ...]] = ("json", "anthropic", "openai", "openai-responses", "text")
Provider: TypeAlias = Literal["anthropic", "openai.chat", "openai.responses"]
ThinkingMode: TypeAlias = Literal["in_flight", "all", "none"]
CacheMode: TypeAlias = Literal["system", "conversation"] | None
Artifacts: TypeAlias = ArtifactStore | BaseStore | Thread | None

CONTINUING: Final = "(continuing the conversation)"
ROLE_HINT: Final = "openai.role"
"""A system message's ``meta`` key naming its OpenAI role (``developer``)."""
_EMPTY_MESSAGE: Final = "(no visible content)"
_NO_OUTPUT: Final = "(no output)"
_EPHEMERAL: Final = {"type": "ephemeral"}
_CACHEABLE: Final = frozenset({"text", "image", "tool_use", "tool_result", "document"})
_TEXT_KINDS: Final = frozenset({"text", "input_text", "output_text"})
_RESPONSES_PARTS: Final = frozenset(
    {"input_text", "input_image", "input_file", "input_audio", "output_text", "refusal"}
)
_TOOL_OUTPUT_SUFFIXES: Final = ("_output", "_tool_result", "_tool_use", "approval_response")


def _layout_key(provider: Provider) -> str:
    """The ``meta`` key under which a converted message keeps its layout for ``provider``."""
    return f"{provider}.layout"


def _artifact_store(artifacts: Artifacts) -> ArtifactStore | None:
    if artifacts is None or isinstance(artifacts, ArtifactStore):
        return artifacts
    if isinstance(artifacts, Thread):
        return artifacts.store.artifacts
    if isinstance(artifacts, BaseStore):
        return artifacts.artifacts
    raise TypeError(
        f"artifacts must be an artifact store, a store or a thread, not {type(artifacts).__name__}"
    )


# --- layouts: how a message's blocks group into a provider's units ---------------------------
#
# A unit is one thing of the provider's own: an Anthropic message, an OpenAI Chat message, an
# OpenAI Responses item. A layout is a list of ``[n, env]``: the next ``n`` blocks of the
# message form one unit, and ``env`` holds what the blocks do not: ``_k`` (the unit's kind:
# ``msg``, ``tool``, ``call``, ``out``, ``item``), ``_str`` (its content as a string rather
# than a list), ``_b`` (per block, the members no typed block holds, or null), and the unit's
# own members (ids, status, name, …). A converter stores a layout only when it differs from
# the canonical one, which is what a renderer falls back on.

_Layout: TypeAlias = list[list[Any]]


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
        and block.kind not in _RESPONSES_PARTS
    )


def _canonical_layout(provider: Provider, role: str, blocks: Sequence[object]) -> _Layout:
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
    units: _Layout = []
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


def _parse_layout(raw: str | None, n_blocks: int) -> _Layout | None:
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


class _Seg:
    """One message of the window, with its layout for the provider being rendered."""

    __slots__ = ("envs", "meta", "reasoning_only", "role", "stripped", "where")

    def __init__(self, item: MessageItem, provider: Provider) -> None:
        meta = item.meta
        self.meta = meta
        self.role = item.role
        self.stripped = False  # a reasoning item of it was dropped: its ids go too
        # a Responses reasoning item stored as a message of its own (an Agents SDK session
        # writes one item per message): it belongs to the item in the next message
        self.reasoning_only = bool(item.content) and all(
            isinstance(b, fr.ProviderBlock) and b.kind == "reasoning" for b in item.content
        )
        layout = _parse_layout(meta.get(_layout_key(provider)), len(item.content))
        if layout is None:
            layout = _canonical_layout(provider, item.role, item.content)
        self.envs: list[dict[str, Any]] = [env for _, env in layout]
        self.where: list[tuple[int, int]] = [
            (u, k) for u, (n, _) in enumerate(layout) for k in range(n)
        ]

    def unit(self, pos: int) -> int:
        return self.where[pos][0] if 0 <= pos < len(self.where) else -1

    def env(self, pos: int) -> dict[str, Any]:
        u = self.unit(pos)
        return self.envs[u] if u >= 0 else {}

    def extras(self, pos: int) -> dict[str, Any]:
        if not 0 <= pos < len(self.where):
            return {}
        u, k = self.where[pos]
        per_block = self.envs[u].get("_b")
        found = per_block[k] if per_block else None
        return found if isinstance(found, dict) else {}


def _copy(value: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of a JSON value of the bundle (a request never shares the bundle's dicts)."""
    import copy  # on use: a restore (text) never needs it

    copied: dict[str, Any] = copy.deepcopy(value)
    return copied


def _members(extras: dict[str, Any]) -> dict[str, Any]:
    """The provider's own members of an env or extras (ours start with ``_``)."""
    return {k: v for k, v in extras.items() if not k.startswith("_")}


# --- the normalised window (shared by the API shapes) ---------------------------------------


class _Text(msgspec.Struct, frozen=True):
    text: str
    seg: int = -1
    pos: int = -1
    intact: bool = True  # still the block it was (so that block's extras apply)


class _Image(msgspec.Struct, frozen=True):
    block: fr.ImageBlock
    seg: int = -1
    pos: int = -1
    intact: bool = True


class _Think(msgspec.Struct, frozen=True):
    block: fr.ThinkingBlock
    seg: int = -1
    pos: int = -1
    intact: bool = True


class _Raw(msgspec.Struct, frozen=True):
    block: fr.ProviderBlock
    seg: int = -1
    pos: int = -1
    intact: bool = True


class _Use(msgspec.Struct, frozen=True):
    id: str
    name: str
    input: dict[str, Any]
    seg: int = -1
    pos: int = -1
    intact: bool = True


class _Result(msgspec.Struct, frozen=True):
    tool_use_id: str
    content: str  # the output as text (a preview and a note for one in an artifact)
    is_error: bool
    parts: tuple[fr.TextBlock | fr.ImageBlock, ...] | None = None
    empty: bool = False  # the tool gave no output at all
    seg: int = -1
    pos: int = -1
    intact: bool = True


_Part: TypeAlias = _Text | _Image | _Think | _Raw | _Use | _Result


class _Turn(msgspec.Struct):
    role: Literal["user", "assistant"]
    parts: list[_Part]
    human: bool = False  # a user turn that holds more than tool results


def _compact_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _arguments(value: dict[str, Any]) -> str:
    """A tool call's input as OpenAI's ``arguments`` string (its keys in their order)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def _result_content(block: fr.ToolResultBlock) -> str:
    if block.artifact_id is None:
        if block.parts:
            texts = [p.text if isinstance(p, fr.TextBlock) else _image_text(p) for p in block.parts]
            return "\n".join(texts) or _NO_OUTPUT
        return block.content or _NO_OUTPUT
    note = (
        f"[output shortened: {block.size} bytes in all; "
        f"the whole output is in artifact {block.artifact_id}]"
    )
    return f"{block.preview}\n{note}" if block.preview else note


def _image_text(block: fr.ImageBlock) -> str:
    details = [block.media_type] if block.media_type else []
    if block.artifact_id:
        details.append(f"artifact {block.artifact_id}")
    elif block.url and not block.url.startswith("data:"):
        details.append(block.url)
    return f"[image ({', '.join(details) or 'unknown type'}) not shown]"


def _told(block: fr.ProviderBlock) -> str | None:
    """A provider block as another provider reads it (None: it says nothing to them)."""
    if block.kind == "reasoning":
        return None  # a model's private reasoning, only its own provider may read it back
    text = block.text.strip()
    if not text:
        return None
    return text if block.kind in _TEXT_KINDS else f"[{block.kind}] {text}"


def _describe(part: _Use | _Result) -> _Text:
    """A tool call or result that cannot stand as one in the request, told as text."""
    if isinstance(part, _Use):
        text = (
            f"[tool call {part.name} (id {part.id}) with input {_compact_json(part.input)}; "
            "its result is not in this context]"
        )
    else:
        err = " (error)" if part.is_error else ""
        text = (
            f"[tool result{err} for call {part.tool_use_id}, whose call is not in this "
            f"context]\n{part.content}"
        )
    return _Text(text, part.seg, part.pos, intact=False)


def _part(block: ItemBlock, provider: Provider, seg: int, pos: int) -> _Part | None:
    if isinstance(block, fr.TextBlock):
        return _Text(block.text, seg, pos) if block.text.strip() else None
    if isinstance(block, fr.ToolUseBlock):
        return _Use(block.id, block.name, block.input, seg, pos)
    if isinstance(block, fr.ToolResultBlock):
        empty = block.artifact_id is None and not block.content and not block.parts
        parts = tuple(block.parts) if block.parts and block.artifact_id is None else None
        return _Result(
            block.tool_use_id, _result_content(block), block.is_error, parts, empty, seg, pos
        )
    if isinstance(block, ToolStubBlock):
        return _Result(block.tool_use_id, block.text(), block.is_error, seg=seg, pos=pos)
    if isinstance(block, fr.ImageBlock):
        return _Image(block, seg, pos)
    if isinstance(block, fr.ThinkingBlock):
        signed = block.signature is not None or block.data is not None
        return _Think(block, seg, pos) if provider == "anthropic" and signed else None
    if isinstance(block, fr.ProviderBlock):
        if block.provider == provider:
            return _Raw(block, seg, pos)
        text = _told(block)
        return _Text(text, seg, pos, intact=False) if text else None
    if isinstance(block, ElidedBlock):
        if block.block_type == "tool_use":
            return _Use(
                block.tool_use_id, block.tool_name, {"elided": block.text()}, seg, pos, False
            )
        if block.block_type == "text":
            return _Text(block.text(), seg, pos, intact=False)
    return None  # an elided thinking block


def _human(block: ItemBlock) -> bool:
    """Whether a block of a user message is more than a tool result (the user spoke)."""
    if isinstance(block, fr.TextBlock):
        return bool(block.text.strip())
    if isinstance(block, fr.ImageBlock):
        return True
    if isinstance(block, ElidedBlock):
        return block.block_type == "text"
    if isinstance(block, fr.ProviderBlock):
        return not block.kind.endswith(_TOOL_OUTPUT_SUFFIXES)
    return False


def _placed(part: _Part, role: str) -> _Part | None:
    """The part as it may stand in a ``role`` turn: a call only in an assistant turn, a result
    only in a user turn, thinking only in an assistant turn, images only in a user turn."""
    if isinstance(part, _Use | _Result):
        wanted = "assistant" if isinstance(part, _Use) else "user"
        return part if role == wanted else _describe(part)
    if isinstance(part, _Think):
        return part if role == "assistant" else None
    if isinstance(part, _Image) and role == "assistant":
        return _Text(_image_text(part.block), part.seg, part.pos, intact=False)
    return part


def _reasoning(part: _Part) -> bool:
    return isinstance(part, _Think) or (
        isinstance(part, _Raw)
        and part.block.provider == "openai.responses"
        and part.block.kind == "reasoning"
    )


def _owners(parts: Sequence[_Part], segs: Sequence[_Seg]) -> list[int | None]:
    """For each reasoning part of a turn, the message of the item it belongs to: the next part
    that is not reasoning, when it is in the same message, or in a later one with only
    reasoning-only messages between (one item per message); None when its item is not there."""
    owners: list[int | None] = [None] * len(parts)
    ahead: int | None = None  # the seg of the next part that is not reasoning
    for i in range(len(parts) - 1, -1, -1):
        p = parts[i]
        if not _reasoning(p):
            ahead = p.seg
        elif ahead is not None and (
            ahead == p.seg
            or (ahead > p.seg >= 0 and all(segs[k].reasoning_only for k in range(p.seg, ahead)))
        ):
            owners[i] = ahead
    return owners


def _window(
    bundle: ContextBundle, provider: Provider, thinking: ThinkingMode
) -> tuple[list[_Seg], list[_Turn]]:
    """The window as alternating turns with valid tool pairing (see the module docstring)."""
    if thinking not in ("in_flight", "all", "none"):
        raise ValueError(f"thinking must be 'in_flight', 'all' or 'none', not {thinking!r}")
    segs: list[_Seg] = []
    turns: list[_Turn] = []
    for item in bundle.messages:
        if item.role == "system":
            continue  # in the system prompt (_system_sections)
        role: Literal["user", "assistant"] = "assistant" if item.role == "assistant" else "user"
        index = len(segs)
        segs.append(_Seg(item, provider))
        parts: list[_Part] = []
        human = False
        for pos, block in enumerate(item.content):
            human = human or (role == "user" and _human(block))
            part = _part(block, provider, index, pos)
            placed = _placed(part, role) if part is not None else None
            if placed is not None:
                parts.append(placed)
        if turns and turns[-1].role == role:
            turns[-1].parts.extend(parts)
            turns[-1].human = turns[-1].human or human
        else:
            turns.append(_Turn(role, parts, human))
    if not turns or turns[0].role != "user":
        turns.insert(0, _Turn("user", [_Text(CONTINUING, intact=False)]))
    last_human = max((i for i, t in enumerate(turns) if t.human), default=-1)
    for i, turn in enumerate(turns):
        if turn.role != "assistant" or not any(_reasoning(p) for p in turn.parts):
            continue
        if thinking == "all" or (thinking == "in_flight" and i > last_human):
            if provider == "anthropic":  # thinking first in its turn, in its order
                turn.parts.sort(key=lambda p: not isinstance(p, _Think))
            continue
        owners = _owners(turn.parts, segs)
        for p, owner in zip(turn.parts, owners, strict=True):
            if _reasoning(p):
                segs[p.seg].stripped = True
                if owner is not None:
                    segs[owner].stripped = True  # its item may not name a reasoning not sent
        turn.parts = [p for p in turn.parts if not _reasoning(p)]
    _pair(turns)
    if provider != "anthropic":  # the OpenAI APIs take consecutive messages of one role
        return segs, [t for t in turns if t.parts]
    for turn in turns:
        if not turn.parts:
            turn.parts.append(_Text(_EMPTY_MESSAGE, intact=False))
    return segs, turns


def _pair(turns: list[_Turn]) -> None:
    """Keep a call only if the next turn answers it, and a result only if it answers a call of
    the turn just before, matched by position (the k-th call with an id pairs with the k-th
    result with it); tell the rest as text. An id already used earlier in the request is
    renamed in the call and its result, so ids stay unique. Results go first in their turn, in
    call order (the Messages API wants a user turn's tool results before its other content)."""
    taken = {p.id for t in turns for p in t.parts if isinstance(p, _Use)}
    taken |= {p.tool_use_id for t in turns for p in t.parts if isinstance(p, _Result)}
    seen: set[str] = set()
    order: dict[str, int] = {}  # the kept calls of the previous assistant turn -> their order
    waiting: dict[str, list[str]] = {}  # a call's id -> the ids its results get, in call order
    replace = msgspec.structs.replace
    for i, turn in enumerate(turns):
        if turn.role == "assistant":
            nxt = turns[i + 1].parts if i + 1 < len(turns) else []
            answers: dict[str, int] = {}
            for p in nxt:
                if isinstance(p, _Result):
                    answers[p.tool_use_id] = answers.get(p.tool_use_id, 0) + 1
            order, waiting = {}, {}
            parts: list[_Part] = []
            for p in turn.parts:
                if isinstance(p, _Use):
                    k = len(waiting.get(p.id, ()))
                    if k >= answers.get(p.id, 0):
                        parts.append(_describe(p))  # no result of its own in the next turn
                        continue
                    new = p.id if p.id not in seen else _fresh_id(p.id, taken)
                    seen.add(new)
                    order[new] = len(order)
                    waiting.setdefault(p.id, []).append(new)
                    p = replace(p, id=new) if new != p.id else p
                parts.append(p)
            turn.parts = parts
            continue
        results: list[_Result] = []
        rest: list[_Part] = []
        for p in turn.parts:
            if isinstance(p, _Result):
                ids = waiting.get(p.tool_use_id)
                if ids:
                    new = ids.pop(0)
                    results.append(replace(p, tool_use_id=new) if new != p.tool_use_id else p)
                    continue
                rest.append(_describe(p))  # no call just before, or more results than calls
                continue
            rest.append(p)
        results.sort(key=lambda r: order[r.tool_use_id])
        turn.parts = [*results, *rest]
        order, waiting = {}, {}


def _fresh_id(base: str, taken: set[str]) -> str:
    """``base`` with the first ``_<n>`` suffix no other call or result of the request uses."""
    n = 2
    while f"{base}_{n}" in taken:
        n += 1
    taken.add(f"{base}_{n}")
    return f"{base}_{n}"


# --- the system text ------------------------------------------------------------------------


def _summary_heading(summary: SummaryItem) -> str:
    return f"## Summary of the conversation through seq {summary.to_seq}"


def _recall_section(bundle: ContextBundle) -> str:
    """The recalled messages, oldest first, under one heading ("" when there are none)."""
    recalled = sorted(bundle.recalled, key=lambda r: r.seq)
    if not recalled:
        return ""
    lines = [_RECALLED]
    for r in recalled:
        who = f" {r.role}" if r.role else ""
        lines.append(f"- [seq {r.seq}{who}] {' '.join(r.text.split())}")
    return "\n".join(lines)


def _block_text(block: ItemBlock) -> str | None:
    """A block of a system message as system text (None: it says nothing)."""
    if isinstance(block, fr.TextBlock):
        return block.text
    if isinstance(block, fr.ProviderBlock):
        return _told(block)
    if isinstance(block, fr.ImageBlock):
        return _image_text(block)
    if isinstance(block, fr.ThinkingBlock):
        return None
    part = _part(block, "anthropic", -1, -1)
    if isinstance(part, _Text):
        return part.text
    if isinstance(part, _Use | _Result):
        return _describe(part).text
    return None


def _system_messages(bundle: ContextBundle) -> list[tuple[MessageItem, str]]:
    """The window's system messages with their text, in order (anything else in them told as
    text): they belong in the system prompt, not in a user turn."""
    found = []
    for item in bundle.messages:
        if item.role != "system":
            continue
        texts = [t for t in map(_block_text, item.content) if t is not None and t.strip()]
        if texts:
            found.append((item, "\n\n".join(texts)))
    return found


def _system_sections(bundle: ContextBundle, system_prefix: str | None) -> list[tuple[str, bool]]:
    """The system text in sections, each with whether a cache breakpoint belongs after it:
    ``system_prefix`` (stable for good), then the window's system messages and the summaries
    (stable until the next compaction), then recall (new with every compile)."""
    sections: list[tuple[str, bool]] = []
    if system_prefix and system_prefix.strip():
        sections.append((system_prefix.rstrip(), True))
    middle = [text.strip() for _, text in _system_messages(bundle)]
    middle += [f"{_summary_heading(s)}\n\n{s.text.strip()}" for s in bundle.summaries]
    if middle:
        sections.append(("\n\n".join(middle), True))
    recall = _recall_section(bundle)
    if recall:
        sections.append((recall, False))
    return sections


def _system_text(bundle: ContextBundle, system_prefix: str | None) -> str:
    return "\n\n".join(text for text, _ in _system_sections(bundle, system_prefix))


def _system_role(bundle: ContextBundle, system_role: str | None) -> str:
    if system_role is not None:
        if system_role not in ("system", "developer"):
            raise ValueError(f"system_role must be 'system' or 'developer', not {system_role!r}")
        return system_role
    for item, _ in _system_messages(bundle):
        hinted = item.meta.get(ROLE_HINT)
        return "developer" if hinted == "developer" else "system"
    return "system"


def _lone_system(bundle: ContextBundle, system_prefix: str | None) -> MessageItem | None:
    """The window's one system message, when it is the whole system text (it then goes back to
    an OpenAI API in the exact shape it came in)."""
    found = _system_messages(bundle)
    if len(found) != 1 or (system_prefix and system_prefix.strip()):
        return None
    if bundle.summaries or bundle.recalled:
        return None
    item = found[0][0]
    if not all(isinstance(b, fr.TextBlock) for b in item.content):
        return None
    return item


# --- images ---------------------------------------------------------------------------------


def _image_data(block: fr.ImageBlock, store: ArtifactStore | None) -> str | None:
    """The image's bytes as base64, when they can be read and sent."""
    if store is None or block.artifact_id is None or not block.media_type.startswith("image/"):
        return None
    import base64  # on use: a restore (text) never needs it

    return base64.b64encode(store.get(block.artifact_id)).decode("ascii")


def _image_url(block: fr.ImageBlock, store: ArtifactStore | None) -> str | None:
    """The image as an OpenAI image URL: a data URL of its bytes, or its URL."""
    data = _image_data(block, store)
    if data is not None:
        return f"data:{block.media_type};base64,{data}"
    return block.url


# --- Anthropic Messages ---------------------------------------------------------------------


class _Anthropic:
    def __init__(self, segs: list[_Seg], store: ArtifactStore | None) -> None:
        self.segs = segs
        self.store = store

    def extras(self, part: _Part) -> dict[str, Any]:
        if not part.intact or part.seg < 0:
            return {}
        return self.segs[part.seg].extras(part.pos)

    def image(self, block: fr.ImageBlock) -> dict[str, Any] | None:
        data = _image_data(block, self.store)
        if data is not None:
            source = {"type": "base64", "media_type": block.media_type, "data": data}
        elif block.url is not None and not block.url.startswith("data:"):
            source = {"type": "url", "url": block.url}
        else:
            return None
        return {"type": "image", "source": source}

    def result_parts(self, part: _Result, extras: dict[str, Any]) -> list[dict[str, Any]]:
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
                block = self.image(p) or {"type": "text", "text": _image_text(p)}
            out.append({**block, **_members(more)})
        return out

    def block(self, part: _Part) -> dict[str, Any]:
        extras = self.extras(part)
        if isinstance(part, _Text):
            return {"type": "text", "text": part.text, **_members(extras)}
        if isinstance(part, _Image):
            image = self.image(part.block)
            if image is None:
                return {"type": "text", "text": _image_text(part.block)}
            return {**image, **_members(extras)}
        if isinstance(part, _Think):
            if part.block.data is not None:
                return {"type": "redacted_thinking", "data": part.block.data}
            return {
                "type": "thinking",
                "thinking": part.block.text,
                "signature": part.block.signature,
            }
        if isinstance(part, _Raw):
            return _copy(part.block.data)
        if isinstance(part, _Use):
            return {
                "type": "tool_use",
                "id": part.id,
                "name": part.name,
                "input": _copy(part.input),
                **_members(extras),
            }
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
        return {**block, **_members(extras)}

    def message(self, turn: _Turn) -> dict[str, Any]:
        content: str | list[dict[str, Any]] = [self.block(p) for p in turn.parts]
        if len(turn.parts) == 1:
            (p,) = turn.parts
            if (
                isinstance(p, _Text)
                and p.intact
                and p.seg >= 0
                and self.segs[p.seg].env(p.pos).get("_str")
                and content == [{"type": "text", "text": p.text}]
            ):
                content = p.text
        return {"role": turn.role, "content": content}


def _breakpoint(message: dict[str, Any]) -> None:
    """A cache breakpoint on the last block of ``message`` that can carry one."""
    content = message["content"]
    if isinstance(content, str):
        content = message["content"] = [{"type": "text", "text": content}]
    for block in reversed(content):
        if block.get("type") in _CACHEABLE and block.get("text", "x") != "":
            block["cache_control"] = dict(_EPHEMERAL)
            return


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
    segs, turns = _window(bundle, "anthropic", thinking)
    shape = _Anthropic(segs, _artifact_store(artifacts))
    request: dict[str, Any] = {}
    sections = _system_sections(bundle, system_prefix)
    if sections and cache is None:
        request["system"] = "\n\n".join(text for text, _ in sections)
    elif sections:
        blocks = []
        for i, (text, stable) in enumerate(sections):
            block: dict[str, Any] = {
                "type": "text",
                "text": text + ("\n\n" if i < len(sections) - 1 else ""),
            }
            if stable:
                block["cache_control"] = dict(_EPHEMERAL)
            blocks.append(block)
        request["system"] = blocks
    messages = [shape.message(t) for t in turns]
    last = messages[-1]
    if last["role"] == "assistant" and isinstance(last["content"], list):
        # the Messages API rejects a final assistant turn that ends in whitespace
        for block in last["content"]:
            if block.get("type") == "text":
                block["text"] = block["text"].rstrip() or _EMPTY_MESSAGE
    elif last["role"] == "assistant":
        last["content"] = last["content"].rstrip() or _EMPTY_MESSAGE
    if cache == "conversation":
        _breakpoint(last)
    request["messages"] = messages
    return request


# --- OpenAI Chat Completions ----------------------------------------------------------------


class _Chat:
    def __init__(self, segs: list[_Seg], store: ArtifactStore | None) -> None:
        self.segs = segs
        self.store = store

    def env(self, part: _Part) -> dict[str, Any]:
        return self.segs[part.seg].env(part.pos) if part.seg >= 0 else {}

    def extras(self, part: _Part) -> dict[str, Any]:
        if not part.intact or part.seg < 0:
            return {}
        return self.segs[part.seg].extras(part.pos)

    def key(self, part: _Part) -> tuple[int, int]:
        return (part.seg, self.segs[part.seg].unit(part.pos)) if part.seg >= 0 else (-1, -1)

    def content_part(self, part: _Part, role: str = "user") -> dict[str, Any] | None:
        extras = self.extras(part)
        if isinstance(part, _Text):
            return {"type": "text", "text": part.text, **_members(extras)}
        if isinstance(part, _Image):
            url = _image_url(part.block, self.store)
            if url is None:
                return {"type": "text", "text": _image_text(part.block)}
            image_url: dict[str, Any] = {"url": url}
            if isinstance(extras.get("_detail"), str):
                image_url["detail"] = extras["_detail"]
            return {"type": "image_url", "image_url": image_url, **_members(extras)}
        if isinstance(part, _Raw) and "type" in part.block.data:
            return _copy(part.block.data)
        if isinstance(part, _Raw) and role != "assistant":  # a member only an assistant has
            told = _told(part.block)
            return {"type": "text", "text": told} if told else None
        return None

    def tool(self, part: _Result) -> dict[str, Any]:
        extras = self.extras(part)
        content: str | list[dict[str, Any]]
        if part.parts is not None:
            given = extras.get("_p") if isinstance(extras.get("_p"), list) else None
            content = []
            for j, p in enumerate(part.parts):
                more = given[j] if given and j < len(given) and isinstance(given[j], dict) else {}
                text = p.text if isinstance(p, fr.TextBlock) else _image_text(p)
                content.append({"type": "text", "text": text, **_members(more)})
            if part.is_error:
                content.insert(0, {"type": "text", "text": "[error]"})
        elif part.empty and extras.get("_form") in ("str", "list"):
            content = "" if extras["_form"] == "str" else []
        else:
            content = f"[error] {part.content}" if part.is_error else part.content
        env = self.env(part) if part.seg >= 0 and self.env(part).get("_k") == "tool" else {}
        return {
            "role": "tool",
            "tool_call_id": part.tool_use_id,
            "content": content,
            **_members(env),
        }

    def message(self, role: str, parts: list[_Part]) -> dict[str, Any]:
        env = self.env(parts[0]) if parts[0].seg >= 0 else {}
        env = env if env.get("_k") == "msg" else {}
        msg: dict[str, Any] = {"role": role}
        content = [c for c in (self.content_part(p, role) for p in parts) if c is not None]
        texts = [p for p in parts if isinstance(p, _Text)]
        string = env.get("_str", len(content) == 1 and len(texts) == 1)
        if string and len(texts) == 1 and len(content) == 1 and set(content[0]) == {"type", "text"}:
            msg["content"] = texts[0].text
        elif content:
            msg["content"] = content
        elif role == "assistant" and not env.get("_nocontent"):
            msg["content"] = None
        for p in parts:
            if isinstance(p, _Raw) and "type" not in p.block.data and role == "assistant":
                msg.update(_copy(p.block.data))  # a member of the message (refusal)
        calls = [self.call(p) for p in parts if isinstance(p, _Use)]
        if calls:
            msg["tool_calls"] = calls
        msg.update(_members(env))
        return msg

    def call(self, part: _Use) -> dict[str, Any]:
        extras = self.extras(part)
        if extras.get("_custom") and isinstance(part.input.get("input"), str):
            return {
                "id": part.id,
                "type": "custom",
                "custom": {"name": part.name, "input": part.input["input"]},
                **_members(extras),
            }
        raw = extras.get("_args")
        arguments = raw if isinstance(raw, str) else _arguments(part.input)
        return {
            "id": part.id,
            "type": "function",
            "function": {"name": part.name, "arguments": arguments},
            **_members(extras),
        }

    def turn(self, turn: _Turn) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if turn.role == "assistant":
            groups = _groups(turn.parts, self.key)
            messages = [self.message("assistant", g) for g in groups]
            if any("tool_calls" in m for m in messages[:-1]):
                messages = [self.message("assistant", turn.parts)]  # calls must come last
            return messages
        rest: list[_Part] = []
        for p in turn.parts:
            if isinstance(p, _Result):
                out.append(self.tool(p))
            else:
                rest.append(p)
        out += [self.message("user", g) for g in _groups(rest, self.key)]
        return out


def _groups(parts: list[_Part], key: Callable[[_Part], tuple[int, int]]) -> list[list[_Part]]:
    """``parts`` cut where the unit they came from changes."""
    groups: list[list[_Part]] = []
    last: tuple[int, int] | None = None
    for p in parts:
        k = key(p)
        if groups and k == last:
            groups[-1].append(p)
        else:
            groups.append([p])
        last = k
    return groups


def _lone_system_unit(
    item: MessageItem, provider: Provider, role: str, text_type: str
) -> dict[str, Any]:
    """The one system message back in the shape it came in."""
    layout = _parse_layout(item.meta.get(_layout_key(provider)), len(item.content))
    env = layout[0][1] if layout and len(layout) == 1 else {}
    blocks = [b for b in item.content if isinstance(b, fr.TextBlock)]
    per_block = env.get("_b") if isinstance(env.get("_b"), list) else None
    msg: dict[str, Any] = {"role": role}
    if env.get("_str", len(blocks) == 1) and len(blocks) == 1 and not per_block:
        msg["content"] = blocks[0].text
    else:
        msg["content"] = [
            {
                "type": text_type,
                "text": b.text,
                **_members(per_block[j] if per_block and isinstance(per_block[j], dict) else {}),
            }
            for j, b in enumerate(blocks)
        ]
    msg.update(_members(env))
    return msg


def to_openai(
    bundle: ContextBundle,
    *,
    system_prefix: str | None = None,
    system_role: Literal["system", "developer"] | None = None,
    artifacts: Artifacts = None,
) -> list[dict[str, Any]]:
    """The bundle as Chat Completions ``messages``: a system message (``system_prefix``, the
    window's system messages, the summaries, recall) when there is any system text, then the
    window; tool results follow the call that made them, as ``tool`` messages.

    The system message's role is ``system_role``, else ``developer`` when the window's first
    system message came as one (its ``openai.role`` hint), else ``system``. Images go as
    ``image_url`` parts (a data URL when ``artifacts`` is given); thinking is not sent.
    """
    segs, turns = _window(bundle, "openai.chat", "none")
    shape = _Chat(segs, _artifact_store(artifacts))
    return _openai_list(bundle, shape, turns, "openai.chat", "text", system_prefix, system_role)


# --- OpenAI Responses -----------------------------------------------------------------------


class _Responses(_Chat):
    def content_part(self, part: _Part, role: str = "user") -> dict[str, Any] | None:
        extras = self.extras(part)
        if isinstance(part, _Text):
            kind = extras.get("_ptype") or ("output_text" if role == "assistant" else "input_text")
            block: dict[str, Any] = {"type": kind, "text": part.text}
            if kind == "output_text" and "annotations" not in extras:
                block["annotations"] = []
            return {**block, **_members(extras)}
        if isinstance(part, _Image):
            url = _image_url(part.block, self.store)
            if url is None or role == "assistant":
                return self.content_part(_Text(_image_text(part.block), intact=False), role)
            detail = extras.get("_detail")
            return {
                "type": "input_image",
                "image_url": url,
                "detail": detail if isinstance(detail, str) else "auto",
                **_members(extras),
            }
        if isinstance(part, _Raw):
            return _copy(part.block.data)
        return None

    def message(self, role: str, parts: list[_Part]) -> dict[str, Any]:
        seg = self.segs[parts[0].seg] if parts[0].seg >= 0 else None
        env = self.env(parts[0]) if seg is not None else {}
        env = env if env.get("_k") == "msg" else {}
        if seg is not None and seg.stripped:
            env = {k: v for k, v in env.items() if k not in ("id", "status")}
        if role == "assistant" and "id" not in env:
            # without an id an assistant message can only be given as its text
            texts = []
            for p in parts:
                if isinstance(p, _Text):
                    texts.append(p.text)
                elif isinstance(p, _Image):
                    texts.append(_image_text(p.block))
                elif isinstance(p, _Raw) and _told(p.block):
                    texts.append(str(_told(p.block)))
            return {"role": role, "content": "\n\n".join(texts), **_members(env)}
        content = [c for c in (self.content_part(p, role) for p in parts) if c is not None]
        texts_only = [p for p in parts if isinstance(p, _Text)]
        default = len(content) == 1 and len(texts_only) == 1 and role != "assistant"
        string = env.get("_str", default)
        msg: dict[str, Any] = {"role": role}
        plain = {"type", "text"} if role != "assistant" else {"type", "text", "annotations"}
        if (
            string
            and len(texts_only) == 1
            and len(content) == 1
            and set(content[0]) <= plain
            and content[0].get("annotations", []) == []
        ):
            msg["content"] = texts_only[0].text
        else:
            msg["content"] = content
        msg.update(_members(env))
        return msg

    def call(self, part: _Use) -> dict[str, Any]:
        extras = self.extras(part)
        seg = self.segs[part.seg] if part.seg >= 0 else None
        env = self.env(part) if seg is not None else {}
        env = env if env.get("_k") == "call" else {}
        if seg is not None and seg.stripped:
            env = {k: v for k, v in env.items() if k not in ("id", "status")}
        if env.get("type") == "custom_tool_call" and isinstance(part.input.get("input"), str):
            return {
                "call_id": part.id,
                "name": part.name,
                "input": part.input["input"],
                **_members(env),
            }
        raw = extras.get("_args")
        arguments = raw if isinstance(raw, str) else _arguments(part.input)
        item = {
            "type": "function_call",
            "call_id": part.id,
            "name": part.name,
            "arguments": arguments,
        }
        return {**item, **_members(env)}

    def output_part(self, p: fr.TextBlock | fr.ImageBlock, more: dict[str, Any]) -> dict[str, Any]:
        if isinstance(more.get("_raw"), dict):
            return dict(more["_raw"])
        url = _image_url(p, self.store) if isinstance(p, fr.ImageBlock) else None
        if isinstance(p, fr.ImageBlock) and url is not None:
            made: dict[str, Any] = {"type": "input_image", "image_url": url}
            if "_detail" in more:
                made["detail"] = more["_detail"]
        else:
            text = p.text if isinstance(p, fr.TextBlock) else _image_text(p)
            made = {"type": "input_text", "text": text}
        return {**made, **_members(more)}

    def output(self, part: _Result) -> dict[str, Any]:
        extras = self.extras(part)
        env = self.env(part) if part.seg >= 0 else {}
        env = env if env.get("_k") == "out" else {}
        output: str | list[dict[str, Any]]
        if part.parts is not None:
            given: list[Any] = extras["_p"] if isinstance(extras.get("_p"), list) else []
            output = [
                self.output_part(
                    p, given[j] if j < len(given) and isinstance(given[j], dict) else {}
                )
                for j, p in enumerate(part.parts)
            ]
            if part.is_error:
                output.insert(0, {"type": "input_text", "text": "[error]"})
        elif part.empty and extras.get("_form") in ("str", "list"):
            output = "" if extras["_form"] == "str" else []
        else:
            output = f"[error] {part.content}" if part.is_error else part.content
        item = {"type": "function_call_output", "call_id": part.tool_use_id, "output": output}
        return {**item, **_members(env)}

    def turn(self, turn: _Turn) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        pending: list[_Part] = []

        def flush() -> None:
            for group in _groups(pending, self.key):
                out.append(self.message(turn.role, group))
            pending.clear()

        # a reasoning item goes back only with the item it belongs to (after it in its
        # message, or in the next message when the reasoning came as a message of its own)
        owners = _owners(turn.parts, self.segs)
        for i, p in enumerate(turn.parts):
            if _reasoning(p) and owners[i] is None:
                continue
            if isinstance(p, _Use):
                flush()
                out.append(self.call(p))
            elif isinstance(p, _Result):
                flush()
                out.append(self.output(p))
            elif isinstance(p, _Raw) and p.block.kind not in _RESPONSES_PARTS:
                flush()
                out.append(_copy(p.block.data))
            else:
                pending.append(p)
        flush()
        return out


def to_openai_responses(
    bundle: ContextBundle,
    *,
    system_prefix: str | None = None,
    system_role: Literal["system", "developer"] | None = None,
    thinking: ThinkingMode = "in_flight",
    artifacts: Artifacts = None,
) -> list[dict[str, Any]]:
    """The bundle as OpenAI Responses API ``input`` items.

    The system text (``system_prefix``, the window's system messages, the summaries, recall)
    is the first item, a message whose role is ``system_role``, else ``developer`` when the
    window's first system message came as one, else ``system`` (the same text as
    ``instructions`` would carry, but kept in ``input`` so that a request is one list and
    ``previous_response_id`` cannot drop it). Then the window: messages, ``function_call`` and
    ``function_call_output`` items (each call followed by its output in the next turn), and the
    items the Responses API wrote itself (reasoning, web search calls, …) unchanged. The
    reasoning items of the turn in flight go back with the ids of the items they belong to; an
    older turn's reasoning is dropped (``thinking="all"`` keeps every one, ``"none"`` none),
    and so are its items' ids, which the API would otherwise look for.
    """
    segs, turns = _window(bundle, "openai.responses", thinking)
    shape = _Responses(segs, _artifact_store(artifacts))
    return _openai_list(
        bundle, shape, turns, "openai.responses", "input_text", system_prefix, system_role
    )


def _openai_list(
    bundle: ContextBundle,
    shape: _Chat | _Responses,
    turns: list[_Turn],
    provider: Provider,
    text_type: str,
    system_prefix: str | None,
    system_role: str | None,
) -> list[dict[str, Any]]:
    """The system message first (a lone system message of the window as it came, else the
    system text), then each turn in ``shape``: what both OpenAI renderers send."""
    out: list[dict[str, Any]] = []
    role = _system_role(bundle, system_role)
    lone = _lone_system(bundle, system_prefix)
    if lone is not None:
        out.append(_lone_system_unit(lone, provider, role, text_type))
    else:
        system = _system_text(bundle, system_prefix)
        if system:
            out.append({"role": role, "content": system})
    for turn in turns:
        out += shape.turn(turn)
    return out


# --- plain text -----------------------------------------------------------------------------

_RECENT: Final = "## Recent messages"
_RECALLED: Final = "## Recalled from earlier in this thread"
_TOOL_OUTPUT_LINES: Final = 6
_TOOL_OUTPUT_CHARS: Final = 600
_TOOL_INPUT_CHARS: Final = 300
_INPUT_KEYS: Final = ("command", "file_path", "path", "pattern", "url", "query", "description")
_ENTRY_FLOOR: Final = 160  # an entry is "overly long" past max(this, max_chars // 4)
_SUMMARY_FLOOR: Final = 40  # the summary is dropped rather than cut shorter than this

# the order in which the lines of an entry give up their text: tool output, tool input (and
# image placeholders), prose
_OUTPUT, _INPUT, _PROSE = 0, 1, 2


class _Line(msgspec.Struct, frozen=True):
    tag: str
    body: str
    rank: int

    def text(self) -> str:
        if not self.body:
            return self.tag
        # continuation lines are indented, so every line at column 0 starts with a tag
        return f"{self.tag} " + self.body.replace("\n", "\n  ")


_Entry: TypeAlias = tuple[_Line, ...]


def _clip(text: str, n: int) -> str:
    """``text`` in at most ``n`` characters, its beginning kept and the cut marked with "…"."""
    if len(text) <= n:
        return text
    if n <= 0:
        return ""
    return text[: n - 1].rstrip() + "…"


def _first_lines(text: str, lines: int, chars: int) -> str:
    all_lines = text.strip().splitlines()
    head = "\n".join(all_lines[:lines])
    if len(all_lines) > lines and len(head) < chars:
        return head.rstrip() + "…"
    return _clip(head, chars)


def _input_digest(tool_input: dict[str, Any]) -> str:
    for key in _INPUT_KEYS:
        value = tool_input.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return _compact_json(tool_input)


def _entry(role: str, content: list[Any]) -> _Entry:
    lines: list[_Line] = []
    for block in content:
        if isinstance(block, fr.TextBlock) and block.text.strip():
            lines.append(_Line(f"[{role}]", block.text.strip(), _PROSE))
        elif isinstance(block, fr.ToolUseBlock):
            digest = _first_lines(_input_digest(block.input), _TOOL_OUTPUT_LINES, _TOOL_INPUT_CHARS)
            lines.append(_Line(f"[tool_use {block.name}]", digest, _INPUT))
        elif isinstance(block, fr.ToolResultBlock | ToolStubBlock):
            status = "error" if block.is_error else "ok"
            if isinstance(block, ToolStubBlock):
                output = block.text()
            else:
                output = block.text() or _NO_OUTPUT
            body = _first_lines(output, _TOOL_OUTPUT_LINES, _TOOL_OUTPUT_CHARS)
            if isinstance(block, fr.ToolResultBlock) and block.artifact_id is not None:
                body += f"\n({block.size} bytes in all: artifact {block.artifact_id})"
            lines.append(_Line(f"[tool_result {status}]", body, _OUTPUT))
        elif isinstance(block, fr.ImageBlock):
            lines.append(_Line(f"[{role}]", _image_text(block), _INPUT))
        elif isinstance(block, fr.ProviderBlock) and _told(block):
            lines.append(_Line(f"[{role}]", str(_told(block)), _PROSE))
        elif isinstance(block, ElidedBlock) and block.block_type == "tool_use":
            lines.append(_Line(f"[tool_use {block.tool_name}]", block.text(), _INPUT))
        elif isinstance(block, ElidedBlock) and block.block_type == "text":
            lines.append(_Line(f"[{role}]", block.text(), _PROSE))
    return tuple(lines) or (_Line(f"[{role}]", _EMPTY_MESSAGE, _PROSE),)


def _entry_text(lines: Sequence[_Line]) -> str:
    return "\n".join(line.text() for line in lines)


def _shrink(entry: _Entry, limit: int) -> str:
    """The entry in at most ``limit`` characters: tool outputs give up their text first, then
    tool inputs and images, then prose; the later lines of a rank first, so the entry keeps its
    beginning, and each body keeps its own beginning."""
    text = _entry_text(entry)
    excess = len(text) - limit
    if excess <= 0:
        return text
    lines = list(entry)
    for rank in (_OUTPUT, _INPUT, _PROSE):
        for i in reversed(range(len(lines))):
            line = lines[i]
            if excess <= 0:
                break
            if line.rank != rank or len(line.body) <= 1:
                continue
            body = _clip(line.body, max(1, len(line.body) - excess))
            excess -= len(line.body) - len(body)
            lines[i] = msgspec.structs.replace(line, body=body)
    return _clip(_entry_text(lines), limit)


def _min_entry_len(entry: _Entry) -> int:
    """The shortest an entry may become and still count as kept: its first tag and "…"."""
    return len(entry[0].tag) + 2


def _compose(header: str, summaries: list[str], entries: list[str]) -> str:
    sections = [header, *summaries]
    if entries:
        sections.append("\n".join([_RECENT, *entries]))
    return "\n\n".join(sections)


def to_text(bundle: ContextBundle, *, max_chars: int | None = None) -> str:
    """The bundle as plain text for another agent's context.

    A header line (thread, anchor seq, strategy), the latest summary, the window under
    "## Recent messages" (one entry per message; tool outputs as their first lines), and older
    summaries when there is room. Within ``max_chars`` (counted in ``str`` characters) the
    newest messages are kept and the oldest dropped first, then the summary is cut (its beginning
    kept, "…" marking the cut), then the newest entry itself; very long entries are shortened
    (tool outputs first) before anything else.
    """
    if max_chars is not None and max_chars < 0:
        raise ValueError(f"max_chars must be >= 0, not {max_chars}")
    header = (
        f"# Context of thread {bundle.thread_id} at seq {bundle.anchor_seq} "
        f"(strategy {bundle.strategy})"
    )
    summaries = bundle.summaries
    latest = summaries[-1] if summaries else None
    older = [
        f"## Earlier summary, through seq {s.to_seq}\n{s.text.strip()}"
        for s in reversed(summaries[:-1])
    ]
    entries = [_entry(m.role, list(m.content)) for m in bundle.messages]
    texts = [_entry_text(e) for e in entries]
    latest_heading = _summary_heading(latest) if latest else ""
    latest_text = latest.text.strip() if latest else ""
    latest_section = [f"{latest_heading}\n{latest_text}"] if latest else []
    recall = _recall_section(bundle)
    optional = [recall, *older] if recall else older  # shown only when everything else fits

    full = _compose(header, [*latest_section, *optional], texts)
    if max_chars is None or len(full) <= max_chars:
        return full
    if len(header) >= max_chars:
        return _clip(header, max_chars)

    # the newest messages that fit beside the whole latest summary, long entries shortened
    cap = max(_ENTRY_FLOOR, max_chars // 4)
    capped = [_shrink(e, cap) for e in entries]
    used = len(header) + sum(2 + len(s) for s in latest_section) + 2 + len(_RECENT)
    kept: list[str] = []
    for text in reversed(capped):
        if used + 1 + len(text) > max_chars:
            break
        kept.append(text)
        used += 1 + len(text)
    kept.reverse()
    if kept:
        extra: list[str] = []
        if len(kept) == len(capped):
            for section in optional:
                if used + 2 + len(section) > max_chars:
                    break
                extra.append(section)
                used += 2 + len(section)
        return _compose(header, [*latest_section, *extra], kept)

    # not even the newest message fits beside the whole summary: cut the summary
    newest = capped[-1:]
    window_cost = 2 + len(_RECENT) + 1 + len(newest[0]) if newest else 0
    room = max_chars - len(header) - 2 - len(latest_heading) - 1 - window_cost
    if latest and room >= min(len(latest_text), _SUMMARY_FLOOR):
        return _compose(header, [f"{latest_heading}\n{_clip(latest_text, room)}"], newest)
    if not entries:
        return header

    # then the newest message itself: beside the shortest summary, then alone
    entry = entries[-1]
    if latest:
        section = f"{latest_heading}\n{_clip(latest_text, _SUMMARY_FLOOR)}"
        limit = max_chars - len(header) - 2 - len(section) - 2 - len(_RECENT) - 1
        if limit >= _min_entry_len(entry):
            return _compose(header, [section], [_shrink(entry, limit)])
    limit = max_chars - len(header) - 2 - len(_RECENT) - 1
    if limit >= _min_entry_len(entry):
        return _compose(header, [], [_shrink(entry, limit)])
    return header


# --- one front door -------------------------------------------------------------------------

_json_encoder: Final = msgspec.json.Encoder()


def render(bundle: ContextBundle, fmt: Format, **kw: Any) -> str:
    """The bundle rendered as a string: JSON for "json" (the bundle's canonical bytes),
    "anthropic", "openai" and "openai-responses"; plain text for "text". ``kw`` goes to the
    format's function."""
    if fmt == "json":
        if kw:
            raise TypeError(f"format 'json' takes no options (got {', '.join(sorted(kw))})")
        return bundle_bytes(bundle).decode()
    if fmt == "anthropic":
        return _json_encoder.encode(to_anthropic(bundle, **kw)).decode()
    if fmt == "openai":
        return _json_encoder.encode(to_openai(bundle, **kw)).decode()
    if fmt == "openai-responses":
        return _json_encoder.encode(to_openai_responses(bundle, **kw)).decode()
    if fmt == "text":
        return to_text(bundle, **kw)
    raise ValueError(f"unknown format {fmt!r} (known: {', '.join(FORMATS)})")
