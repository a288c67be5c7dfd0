"""The bundle as OpenAI Chat Completions ``messages`` (ADR 0019), and what the Responses
renderer shares with it: the system message first, each turn cut into the units it came as."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal

from continuity import frames as fr
from continuity.context.bundle import ContextBundle
from continuity.context.layout import Artifacts, Provider, artifact_store, members
from continuity.context.render.parts import (
    CallPart,
    ImagePart,
    Part,
    ProviderPart,
    ResultPart,
    TextPart,
    copy_json,
    image_text,
    image_url,
    told,
)
from continuity.context.render.system import (
    lone_system,
    lone_system_unit,
    openai_system_role,
    system_text,
)
from continuity.context.render.window import Segment, Turn, normalised_window
from continuity.store.artifacts import ArtifactStore

__all__ = ["ChatShape", "arguments", "openai_messages", "to_openai", "unit_groups"]


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
    segs, turns = normalised_window(bundle, "openai.chat", "none")
    shape = ChatShape(segs, artifact_store(artifacts))
    return openai_messages(bundle, shape, turns, "openai.chat", "text", system_prefix, system_role)


def openai_messages(
    bundle: ContextBundle,
    shape: ChatShape,
    turns: list[Turn],
    provider: Provider,
    text_type: str,
    system_prefix: str | None,
    role: str | None,
) -> list[dict[str, Any]]:
    """The system message first (a lone system message of the window as it came, else the
    system text), then each turn in ``shape``: what both OpenAI renderers send."""
    out: list[dict[str, Any]] = []
    chosen = openai_system_role(bundle, role)
    lone = lone_system(bundle, system_prefix, provider)
    if lone is not None:
        out.append(lone_system_unit(lone, provider, chosen, text_type))
    else:
        system = system_text(bundle, system_prefix, provider)
        if system:
            out.append({"role": chosen, "content": system})
    for turn in turns:
        out += shape.turn(turn)
    return out


def arguments(value: dict[str, Any]) -> str:
    """A tool call's input as OpenAI's ``arguments`` string (its keys in their order)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def unit_groups(parts: list[Part], key: Callable[[Part], tuple[int, int]]) -> list[list[Part]]:
    """``parts`` cut where the unit they came from changes."""
    groups: list[list[Part]] = []
    last: tuple[int, int] | None = None
    for p in parts:
        k = key(p)
        if groups and k == last:
            groups[-1].append(p)
        else:
            groups.append([p])
        last = k
    return groups


class ChatShape:
    """Turns as Chat Completions messages, with the members the converter kept for each."""

    def __init__(self, segs: list[Segment], store: ArtifactStore | None) -> None:
        self.segs = segs
        self.store = store

    def env(self, part: Part) -> dict[str, Any]:
        return self.segs[part.seg].env(part.pos) if part.seg >= 0 else {}

    def extras(self, part: Part) -> dict[str, Any]:
        if not part.intact or part.seg < 0:
            return {}
        return self.segs[part.seg].extras(part.pos)

    def key(self, part: Part) -> tuple[int, int]:
        return (part.seg, self.segs[part.seg].unit(part.pos)) if part.seg >= 0 else (-1, -1)

    def content_part(self, part: Part, role: str = "user") -> dict[str, Any] | None:
        extras = self.extras(part)
        if isinstance(part, TextPart):
            return {"type": "text", "text": part.text, **members(extras)}
        if isinstance(part, ImagePart):
            url = image_url(part.block, self.store)
            if url is None:
                return {"type": "text", "text": image_text(part.block)}
            image: dict[str, Any] = {"url": url}
            if isinstance(extras.get("_detail"), str):
                image["detail"] = extras["_detail"]
            return {"type": "image_url", "image_url": image, **members(extras)}
        if isinstance(part, ProviderPart) and "type" in part.block.data:
            return copy_json(part.block.data)
        if isinstance(part, ProviderPart) and role != "assistant":  # a member only an assistant has
            text = told(part.block)
            return {"type": "text", "text": text} if text else None
        return None

    def tool(self, part: ResultPart) -> dict[str, Any]:
        extras = self.extras(part)
        content: str | list[dict[str, Any]]
        if part.parts is not None:
            given = extras.get("_p") if isinstance(extras.get("_p"), list) else None
            content = []
            for j, p in enumerate(part.parts):
                more = given[j] if given and j < len(given) and isinstance(given[j], dict) else {}
                text = p.text if isinstance(p, fr.TextBlock) else image_text(p)
                content.append({"type": "text", "text": text, **members(more)})
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
            **members(env),
        }

    def message(self, role: str, parts: list[Part]) -> dict[str, Any]:
        env = self.env(parts[0]) if parts[0].seg >= 0 else {}
        env = env if env.get("_k") == "msg" else {}
        msg: dict[str, Any] = {"role": role}
        content = [c for c in (self.content_part(p, role) for p in parts) if c is not None]
        texts = [p for p in parts if isinstance(p, TextPart)]
        string = env.get("_str", len(content) == 1 and len(texts) == 1)
        if string and len(texts) == 1 and len(content) == 1 and set(content[0]) == {"type", "text"}:
            msg["content"] = texts[0].text
        elif content:
            msg["content"] = content
        elif role == "assistant" and not env.get("_nocontent"):
            msg["content"] = None
        for p in parts:
            if isinstance(p, ProviderPart) and "type" not in p.block.data and role == "assistant":
                msg.update(copy_json(p.block.data))  # a member of the message (refusal)
        calls = [self.call(p) for p in parts if isinstance(p, CallPart)]
        if calls:
            msg["tool_calls"] = calls
        msg.update(members(env))
        return msg

    def call(self, part: CallPart) -> dict[str, Any]:
        extras = self.extras(part)
        if extras.get("_custom") and isinstance(part.input.get("input"), str):
            return {
                "id": part.id,
                "type": "custom",
                "custom": {"name": part.name, "input": part.input["input"]},
                **members(extras),
            }
        raw = extras.get("_args")
        args = raw if isinstance(raw, str) else arguments(part.input)
        return {
            "id": part.id,
            "type": "function",
            "function": {"name": part.name, "arguments": args},
            **members(extras),
        }

    def turn(self, turn: Turn) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if turn.role == "assistant":
            groups = unit_groups(turn.parts, self.key)
            messages = [self.message("assistant", g) for g in groups]
            if any("tool_calls" in m for m in messages[:-1]):
                messages = [self.message("assistant", turn.parts)]  # calls must come last
            return messages
        rest: list[Part] = []
        for p in turn.parts:
            if isinstance(p, ResultPart):
                out.append(self.tool(p))
            else:
                rest.append(p)
        out += [self.message("user", g) for g in unit_groups(rest, self.key)]
        return out
