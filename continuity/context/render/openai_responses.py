"""The bundle as OpenAI Responses API ``input`` items (ADR 0019): messages, function calls and
their outputs, and the items the API wrote itself, unchanged."""

from __future__ import annotations

from typing import Any, Literal

from continuity import frames as fr
from continuity.context.bundle import ContextBundle
from continuity.context.layout import RESPONSES_PARTS, Artifacts, artifact_store, members
from continuity.context.render.openai_chat import (
    ChatShape,
    arguments,
    openai_messages,
    unit_groups,
)
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
    is_reasoning,
    told,
)
from continuity.context.render.window import (
    ThinkingMode,
    Turn,
    normalised_window,
    reasoning_owners,
)

__all__ = ["ResponsesShape", "to_openai_responses"]


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
    segs, turns = normalised_window(bundle, "openai.responses", thinking)
    shape = ResponsesShape(segs, artifact_store(artifacts))
    return openai_messages(
        bundle, shape, turns, "openai.responses", "input_text", system_prefix, system_role
    )


class ResponsesShape(ChatShape):
    """Turns as Responses items: a message per run of parts from one unit, and each call,
    output and item of the API's own an item of its own."""

    def content_part(self, part: Part, role: str = "user") -> dict[str, Any] | None:
        extras = self.extras(part)
        if isinstance(part, TextPart):
            kind = extras.get("_ptype") or ("output_text" if role == "assistant" else "input_text")
            block: dict[str, Any] = {"type": kind, "text": part.text}
            if kind == "output_text" and "annotations" not in extras:
                block["annotations"] = []
            return {**block, **members(extras)}
        if isinstance(part, ImagePart):
            url = image_url(part.block, self.store)
            if url is None or role == "assistant":
                return self.content_part(TextPart(image_text(part.block), intact=False), role)
            detail = extras.get("_detail")
            return {
                "type": "input_image",
                "image_url": url,
                "detail": detail if isinstance(detail, str) else "auto",
                **members(extras),
            }
        if isinstance(part, ProviderPart):
            return copy_json(part.block.data)
        return None

    def message(self, role: str, parts: list[Part]) -> dict[str, Any]:
        seg = self.segs[parts[0].seg] if parts[0].seg >= 0 else None
        env = self.env(parts[0]) if seg is not None else {}
        env = env if env.get("_k") == "msg" else {}
        if seg is not None and seg.stripped:
            env = {k: v for k, v in env.items() if k not in ("id", "status")}
        if role == "assistant" and "id" not in env:
            # without an id an assistant message can only be given as its text
            return {"role": role, "content": _as_text(parts), **members(env)}
        content = [c for c in (self.content_part(p, role) for p in parts) if c is not None]
        texts_only = [p for p in parts if isinstance(p, TextPart)]
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
        msg.update(members(env))
        return msg

    def call(self, part: CallPart) -> dict[str, Any]:
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
                **members(env),
            }
        raw = extras.get("_args")
        args = raw if isinstance(raw, str) else arguments(part.input)
        item = {
            "type": "function_call",
            "call_id": part.id,
            "name": part.name,
            "arguments": args,
        }
        return {**item, **members(env)}

    def output_part(self, p: fr.TextBlock | fr.ImageBlock, more: dict[str, Any]) -> dict[str, Any]:
        if isinstance(more.get("_raw"), dict):
            return dict(more["_raw"])
        url = image_url(p, self.store) if isinstance(p, fr.ImageBlock) else None
        if isinstance(p, fr.ImageBlock) and url is not None:
            made: dict[str, Any] = {"type": "input_image", "image_url": url}
            if "_detail" in more:
                made["detail"] = more["_detail"]
        else:
            text = p.text if isinstance(p, fr.TextBlock) else image_text(p)
            made = {"type": "input_text", "text": text}
        return {**made, **members(more)}

    def output(self, part: ResultPart) -> dict[str, Any]:
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
        return {**item, **members(env)}

    def turn(self, turn: Turn) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        pending: list[Part] = []

        def flush() -> None:
            for group in unit_groups(pending, self.key):
                out.append(self.message(turn.role, group))
            pending.clear()

        # a reasoning item goes back only with the item it belongs to (after it in its
        # message, or in the next message when the reasoning came as a message of its own)
        owners = reasoning_owners(turn.parts, self.segs)
        for i, p in enumerate(turn.parts):
            if is_reasoning(p) and owners[i] is None:
                continue
            if isinstance(p, CallPart):
                flush()
                out.append(self.call(p))
            elif isinstance(p, ResultPart):
                flush()
                out.append(self.output(p))
            elif isinstance(p, ProviderPart) and p.block.kind not in RESPONSES_PARTS:
                flush()
                out.append(copy_json(p.block.data))
            else:
                pending.append(p)
        flush()
        return out


def _as_text(parts: list[Part]) -> str:
    """An assistant message without an id, as its text (all the API takes of one then)."""
    texts = []
    for p in parts:
        if isinstance(p, TextPart):
            texts.append(p.text)
        elif isinstance(p, ImagePart):
            texts.append(image_text(p.block))
        elif isinstance(p, ProviderPart) and told(p.block):
            texts.append(str(told(p.block)))
    return "\n\n".join(texts)
