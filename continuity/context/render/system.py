"""The system text of a request: ``system_prefix``, the window's system messages, the summaries
and what recall found, in sections that say where a cache breakpoint belongs; and the one system
message of the window given back to an OpenAI API in the exact shape it came in."""

from __future__ import annotations

from typing import Any, Final

from continuity import frames as fr
from continuity.context.bundle import ContextBundle, ItemBlock, MessageItem, SummaryItem
from continuity.context.layout import ROLE_HINT, Provider, layout_key, members, parse_layout
from continuity.context.render.parts import (
    CallPart,
    ResultPart,
    TextPart,
    describe,
    image_text,
    part_of,
    told,
)

__all__ = [
    "lone_system",
    "lone_system_unit",
    "openai_system_role",
    "recall_section",
    "summary_heading",
    "system_sections",
    "system_text",
    "told_summaries",
]

_RECALLED: Final = "## Recalled from earlier in this thread"


def summary_heading(summary: SummaryItem) -> str:
    return f"## Summary of the conversation through seq {summary.to_seq}"


def recall_section(bundle: ContextBundle) -> str:
    """The recalled messages, oldest first, under one heading ("" when there are none)."""
    recalled = sorted(bundle.recalled, key=lambda r: r.seq)
    if not recalled:
        return ""
    lines = [_RECALLED]
    for r in recalled:
        who = f" {r.role}" if r.role else ""
        lines.append(f"- [seq {r.seq}{who}] {' '.join(r.text.split())}")
    return "\n".join(lines)


def told_summaries(bundle: ContextBundle, provider: Provider | None) -> list[SummaryItem]:
    """The summaries told in the system text: all but a ``provider``'s own compaction, which
    goes to it as its block, in the conversation."""
    return [
        s
        for s in bundle.summaries
        if provider is None or s.block is None or s.block.provider != provider
    ]


def system_sections(
    bundle: ContextBundle, system_prefix: str | None, provider: Provider | None = None
) -> list[tuple[str, bool]]:
    """The system text in sections, each with whether a cache breakpoint belongs after it:
    ``system_prefix`` (stable for good), then the window's system messages and the summaries
    (stable until the next compaction), then recall (new with every compile). A summary that
    is ``provider``'s own compaction is not told here (it is sent as its block)."""
    sections: list[tuple[str, bool]] = []
    if system_prefix and system_prefix.strip():
        sections.append((system_prefix.rstrip(), True))
    middle = [text.strip() for _, text in _system_messages(bundle)]
    middle += [
        f"{summary_heading(s)}\n\n{s.text.strip()}" for s in told_summaries(bundle, provider)
    ]
    if middle:
        sections.append(("\n\n".join(middle), True))
    recall = recall_section(bundle)
    if recall:
        sections.append((recall, False))
    return sections


def system_text(
    bundle: ContextBundle, system_prefix: str | None, provider: Provider | None = None
) -> str:
    return "\n\n".join(text for text, _ in system_sections(bundle, system_prefix, provider))


def openai_system_role(bundle: ContextBundle, role: str | None) -> str:
    """The OpenAI role of the system message: ``role`` when given, else ``developer`` when the
    window's first system message came as one, else ``system``."""
    if role is not None:
        if role not in ("system", "developer"):
            raise ValueError(f"system_role must be 'system' or 'developer', not {role!r}")
        return role
    for item, _ in _system_messages(bundle):
        hinted = item.meta.get(ROLE_HINT)
        return "developer" if hinted == "developer" else "system"
    return "system"


def lone_system(
    bundle: ContextBundle, system_prefix: str | None, provider: Provider | None = None
) -> MessageItem | None:
    """The window's one system message, when it is the whole system text (it then goes back to
    an OpenAI API in the exact shape it came in)."""
    found = _system_messages(bundle)
    if len(found) != 1 or (system_prefix and system_prefix.strip()):
        return None
    if told_summaries(bundle, provider) or bundle.recalled:
        return None
    item = found[0][0]
    if not all(isinstance(b, fr.TextBlock) for b in item.content):
        return None
    return item


def lone_system_unit(
    item: MessageItem, provider: Provider, role: str, text_type: str
) -> dict[str, Any]:
    """The one system message back in the shape it came in."""
    layout = parse_layout(item.meta.get(layout_key(provider)), len(item.content))
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
                **members(per_block[j] if per_block and isinstance(per_block[j], dict) else {}),
            }
            for j, b in enumerate(blocks)
        ]
    msg.update(members(env))
    return msg


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


def _block_text(block: ItemBlock) -> str | None:
    """A block of a system message as system text (None: it says nothing)."""
    if isinstance(block, fr.TextBlock):
        return block.text
    if isinstance(block, fr.ProviderBlock):
        return told(block)
    if isinstance(block, fr.ImageBlock):
        return image_text(block)
    if isinstance(block, fr.ThinkingBlock):
        return None
    part = part_of(block, "anthropic", -1, -1)
    if isinstance(part, TextPart):
        return part.text
    if isinstance(part, CallPart | ResultPart):
        return describe(part).text
    return None
