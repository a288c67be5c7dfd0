"""The recent window normalised for the API shapes (the rules are in the package docstring):
turns of alternating roles, a user's first; each block placed where its role may hold it; the
reasoning of older turns dropped; every tool call paired with its result in the next turn.

:func:`normalised_window` does it in phases: the messages as turns (:func:`_turns`), the older
reasoning dropped (:func:`_drop_older_reasoning`), the tool calls paired (:func:`_pair`), and
the empty turns settled for the provider (:func:`_settled`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Literal, TypeAlias

import msgspec

from continuity import frames as fr
from continuity.context.bundle import (
    ContextBundle,
    ElidedBlock,
    ItemBlock,
    MessageItem,
    SummaryItem,
)
from continuity.context.layout import Provider, canonical_layout, layout_key, parse_layout
from continuity.context.render.parts import (
    EMPTY_MESSAGE,
    CallPart,
    ImagePart,
    Part,
    ProviderPart,
    ResultPart,
    TextPart,
    ThinkingPart,
    describe,
    image_text,
    is_reasoning,
    part_of,
)
from continuity.summary import is_compaction_block

__all__ = [
    "CONTINUING",
    "Segment",
    "ThinkingMode",
    "Turn",
    "is_lead",
    "normalised_window",
    "provider_lead",
    "reasoning_owners",
]

ThinkingMode: TypeAlias = Literal["in_flight", "all", "none"]
CONTINUING: Final = "(continuing the conversation)"
_TOOL_OUTPUT_SUFFIXES: Final = ("_output", "_tool_result", "_tool_use", "approval_response")


class Segment:
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
        layout = parse_layout(meta.get(layout_key(provider)), len(item.content))
        if layout is None:
            layout = canonical_layout(provider, item.role, item.content)
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


class Turn(msgspec.Struct):
    role: Literal["user", "assistant"]
    parts: list[Part]
    human: bool = False  # a user turn that holds more than tool results


def normalised_window(
    bundle: ContextBundle, provider: Provider, thinking: ThinkingMode
) -> tuple[list[Segment], list[Turn]]:
    """The window as alternating turns with valid tool pairing (see the package docstring)."""
    if thinking not in ("in_flight", "all", "none"):
        raise ValueError(f"thinking must be 'in_flight', 'all' or 'none', not {thinking!r}")
    segs, turns = _turns(bundle, provider)
    _drop_older_reasoning(turns, segs, provider, thinking)
    _pair(turns)
    return segs, _settled(turns, provider)


def reasoning_owners(parts: Sequence[Part], segs: Sequence[Segment]) -> list[int | None]:
    """For each reasoning part of a turn, the message of the item it belongs to: the next part
    that is not reasoning, when it is in the same message, or in a later one with only
    reasoning-only messages between (one item per message); None when its item is not there."""
    owners: list[int | None] = [None] * len(parts)
    ahead: int | None = None  # the seg of the next part that is not reasoning
    for i in range(len(parts) - 1, -1, -1):
        p = parts[i]
        if not is_reasoning(p):
            ahead = p.seg
        elif ahead is not None and (
            ahead == p.seg
            or (ahead > p.seg >= 0 and all(segs[k].reasoning_only for k in range(p.seg, ahead)))
        ):
            owners[i] = ahead
    return owners


# --- the messages as turns ------------------------------------------------------------------


def provider_lead(bundle: ContextBundle, provider: Provider) -> SummaryItem | None:
    """The bundle's summary that is ``provider``'s own compaction, sent to it as its block."""
    for s in bundle.summaries:
        if s.block is not None and s.block.provider == provider:
            return s
    return None


def is_lead(part: Part) -> bool:
    """Whether ``part`` is the compaction block the renderer placed (from the summary)."""
    return isinstance(part, ProviderPart) and part.seg < 0 and is_compaction_block(part.block)


def _turns(bundle: ContextBundle, provider: Provider) -> tuple[list[Segment], list[Turn]]:
    """The window's messages as turns of alternating roles, the first a user's: consecutive
    messages of one role join (a system message is in the system prompt instead).

    When the bundle's summary is the provider's own compaction, its block goes where the
    provider wants it and nothing is made up before it: Anthropic's first in the conversation,
    in an assistant turn (where the API returned it); an OpenAI compaction item where its
    message was (after the user messages a compacted window keeps), or first."""
    segs: list[Segment] = []
    turns: list[Turn] = []
    lead = provider_lead(bundle, provider)
    for item in bundle.messages:
        if item.role == "system":
            continue  # in the system prompt (system.system_sections)
        role: Literal["user", "assistant"] = "assistant" if item.role == "assistant" else "user"
        segs.append(Segment(item, provider))
        parts, human = _placed_parts(item, role, provider, len(segs) - 1)
        if lead is not None and lead.block is not None and _lead_goes_before(lead, item, provider):
            block = ProviderPart(lead.block)
            if provider == "anthropic" and role != "assistant":
                _join(turns, Turn("assistant", [block]))
            else:
                parts.insert(0, block)
            lead = None
        _join(turns, Turn(role, parts, human))
    if lead is not None and lead.block is not None:
        _join(turns, Turn("assistant", [ProviderPart(lead.block)]))
    led = bool(turns) and any(is_lead(p) for p in turns[0].parts[:1])
    if not turns or (turns[0].role != "user" and not led):
        turns.insert(0, Turn("user", [TextPart(CONTINUING, intact=False)]))
    return segs, turns


def _lead_goes_before(lead: SummaryItem, item: MessageItem, provider: Provider) -> bool:
    if provider == "anthropic" or lead.message_seq is None:
        return True  # first in the conversation
    return item.seq >= lead.message_seq


def _join(turns: list[Turn], turn: Turn) -> None:
    """Add ``turn``, joining it to the last one when they share a role."""
    if turns and turns[-1].role == turn.role:
        turns[-1].parts.extend(turn.parts)
        turns[-1].human = turns[-1].human or turn.human
    else:
        turns.append(turn)


def _placed_parts(
    item: MessageItem, role: Literal["user", "assistant"], provider: Provider, seg: int
) -> tuple[list[Part], bool]:
    """The message's parts as its turn may hold them, and whether the user spoke in it."""
    parts: list[Part] = []
    human = False
    for pos, block in enumerate(item.content):
        human = human or (role == "user" and _human(block))
        part = part_of(block, provider, seg, pos)
        placed = _placed(part, role) if part is not None else None
        if placed is not None:
            parts.append(placed)
    return parts, human


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


def _placed(part: Part, role: str) -> Part | None:
    """The part as it may stand in a ``role`` turn: a call only in an assistant turn, a result
    only in a user turn, thinking only in an assistant turn, images only in a user turn."""
    if isinstance(part, CallPart | ResultPart):
        wanted = "assistant" if isinstance(part, CallPart) else "user"
        return part if role == wanted else describe(part)
    if isinstance(part, ThinkingPart):
        return part if role == "assistant" else None
    if isinstance(part, ImagePart) and role == "assistant":
        return TextPart(image_text(part.block), part.seg, part.pos, intact=False)
    return part


# --- reasoning: the turn in flight keeps its own ---------------------------------------------


def _drop_older_reasoning(
    turns: list[Turn], segs: list[Segment], provider: Provider, thinking: ThinkingMode
) -> None:
    """Keep the reasoning ``thinking`` asks for (the turns after the last user turn that holds
    more than tool results, by default), thinking first in its turn; drop the rest."""
    last_human = max((i for i, t in enumerate(turns) if t.human), default=-1)
    for i, turn in enumerate(turns):
        if turn.role != "assistant" or not any(is_reasoning(p) for p in turn.parts):
            continue
        if thinking == "all" or (thinking == "in_flight" and i > last_human):
            if provider == "anthropic":  # thinking first in its turn (after a compaction)
                turn.parts.sort(
                    key=lambda p: 0 if is_lead(p) else int(not isinstance(p, ThinkingPart))
                )
            continue
        _strip_reasoning(turn, segs)


def _strip_reasoning(turn: Turn, segs: list[Segment]) -> None:
    """Drop the turn's reasoning, marking its messages and its items' messages as stripped."""
    owners = reasoning_owners(turn.parts, segs)
    for p, owner in zip(turn.parts, owners, strict=True):
        if is_reasoning(p):
            segs[p.seg].stripped = True
            if owner is not None:
                segs[owner].stripped = True  # its item may not name a reasoning not sent
    turn.parts = [p for p in turn.parts if not is_reasoning(p)]


# --- tool calls and their results ------------------------------------------------------------


def _pair(turns: list[Turn]) -> None:
    """Keep a call only if the next turn answers it, and a result only if it answers a call of
    the turn just before, matched by position (the k-th call with an id pairs with the k-th
    result with it); tell the rest as text. An id already used earlier in the request is
    renamed in the call and its result, so ids stay unique. Results go first in their turn, in
    call order (the Messages API wants a user turn's tool results before its other content)."""
    taken = {p.id for t in turns for p in t.parts if isinstance(p, CallPart)}
    taken |= {p.tool_use_id for t in turns for p in t.parts if isinstance(p, ResultPart)}
    seen: set[str] = set()
    order: dict[str, int] = {}  # the kept calls of the previous assistant turn -> their order
    waiting: dict[str, list[str]] = {}  # a call's id -> the ids its results get, in call order
    for i, turn in enumerate(turns):
        if turn.role == "assistant":
            answering = turns[i + 1].parts if i + 1 < len(turns) else []
            order, waiting = _keep_answered_calls(turn, answering, seen, taken)
        else:
            _keep_answering_results(turn, order, waiting)
            order, waiting = {}, {}


def _keep_answered_calls(
    turn: Turn, answering: list[Part], seen: set[str], taken: set[str]
) -> tuple[dict[str, int], dict[str, list[str]]]:
    """Keep the assistant turn's calls that ``answering`` (the next turn) has a result for,
    each under an id not used before in the request; tell the others as text. Returns the kept
    calls' order and, per id, the ids their results get."""
    answers: dict[str, int] = {}
    for p in answering:
        if isinstance(p, ResultPart):
            answers[p.tool_use_id] = answers.get(p.tool_use_id, 0) + 1
    order: dict[str, int] = {}
    waiting: dict[str, list[str]] = {}
    parts: list[Part] = []
    for p in turn.parts:
        if isinstance(p, CallPart):
            k = len(waiting.get(p.id, ()))
            if k >= answers.get(p.id, 0):
                parts.append(describe(p))  # no result of its own in the next turn
                continue
            new = p.id if p.id not in seen else _fresh_id(p.id, taken)
            seen.add(new)
            order[new] = len(order)
            waiting.setdefault(p.id, []).append(new)
            p = msgspec.structs.replace(p, id=new) if new != p.id else p
        parts.append(p)
    turn.parts = parts
    return order, waiting


def _keep_answering_results(
    turn: Turn, order: dict[str, int], waiting: dict[str, list[str]]
) -> None:
    """Keep the user turn's results that answer a kept call of the turn before, first and in
    call order; tell the others as text."""
    results: list[ResultPart] = []
    rest: list[Part] = []
    for p in turn.parts:
        if isinstance(p, ResultPart):
            ids = waiting.get(p.tool_use_id)
            if ids:
                new = ids.pop(0)
                results.append(
                    msgspec.structs.replace(p, tool_use_id=new) if new != p.tool_use_id else p
                )
                continue
            rest.append(describe(p))  # no call just before, or more results than calls
            continue
        rest.append(p)
    results.sort(key=lambda r: order[r.tool_use_id])
    turn.parts = [*results, *rest]


def _fresh_id(base: str, taken: set[str]) -> str:
    """``base`` with the first ``_<n>`` suffix no other call or result of the request uses."""
    n = 2
    while f"{base}_{n}" in taken:
        n += 1
    taken.add(f"{base}_{n}")
    return f"{base}_{n}"


def _settled(turns: list[Turn], provider: Provider) -> list[Turn]:
    """The OpenAI APIs take consecutive messages of one role, so an empty turn goes; the
    Messages API wants alternation, so it gets a placeholder text."""
    if provider != "anthropic":
        return [t for t in turns if t.parts]
    for turn in turns:
        if not turn.parts:
            turn.parts.append(TextPart(EMPTY_MESSAGE, intact=False))
    return turns
