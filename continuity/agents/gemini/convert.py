"""Gemini CLI message records as continuity content blocks, with the source keys they carry.

A ``gemini`` record becomes an assistant message (its thoughts as thinking blocks, its text,
its tool calls) followed, when its calls have results, by a user message of tool results: a
tool call and its result live in one Gemini record, and compile keeps them together as a
pair. A ``user`` record whose parts are ``functionResponse``s is a tool result too (v0.61
records them besides the call's own ``result``): its keys are the calls', so it is archived
only when the call's record never gave them. ``info``, ``warning`` and ``error`` records are
the CLI's notices, never sent to the model: they become ``record_appended`` frames.

Keys: ``g:<id>`` a message; ``u:<call id>`` a tool call; ``t:<call id>`` its result;
``h:<digest>`` a message's content (a compression's rewrite gives kept messages new ids);
``r:<id>`` a notice (:func:`continuity.agents.base.ingest.frame_keys`' key of a record).
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

import blake3
import msgspec

from continuity import frames as fr
from continuity.agents.gemini.records import message_text

__all__ = [
    "CONTEXT_OPEN",
    "HOOK_CONTEXT_OPEN",
    "Converted",
    "content_key",
    "convert",
    "strip_hook_context",
]

CONTEXT_OPEN: Final = "<session_context>"
HOOK_CONTEXT_OPEN: Final = "<hook_context>"
PROVIDER: Final = "gemini"
_HOOK_CONTEXT: Final = re.compile(r"<hook_context>.*?</hook_context>\s*", re.DOTALL)


def strip_hook_context(text: str) -> str:
    """``text`` without the ``<hook_context>`` a hook added (continuity's own restore, which
    the archive holds already): Gemini CLI appends it to the prompt as a part of its own, or,
    from a SessionStart hook in a headless run, puts it before the prompt's text."""
    return _HOOK_CONTEXT.sub("", text) if HOOK_CONTEXT_OPEN in text else text


class Converted(msgspec.Struct):
    """What one record gives: the conversation's blocks and their keys, or a notice."""

    kind: str
    """"user", "assistant", "notice" or "" (nothing to archive)."""
    blocks: list[fr.ContentBlock] = msgspec.field(default_factory=list)
    tool_uses: list[fr.ToolUseBlock] = msgspec.field(default_factory=list)
    results: list[fr.ToolResultBlock] = msgspec.field(default_factory=list)
    meta: dict[str, str] = msgspec.field(default_factory=dict)


def content_key(record: dict[str, Any]) -> str:
    """``h:`` + a digest of what a message says (type, text, tool call ids), the same for a
    message and its copy under a new id."""
    kind = record.get("type")
    calls = ",".join(sorted(_call_ids(record)))
    text = _plain_text(record)
    digest = blake3.blake3(f"{kind}\0{text}\0{calls}".encode("utf-8", "surrogatepass"))
    return "h:" + digest.hexdigest()[:24]


def _plain_text(record: dict[str, Any]) -> str:
    content = record.get("content")
    if isinstance(content, list):
        return strip_hook_context(
            "".join(
                p["text"]
                for p in content
                if isinstance(p, dict) and isinstance(p.get("text"), str) and not p.get("thought")
            )
        )
    return strip_hook_context(message_text(record))


def _call_ids(record: dict[str, Any]) -> list[str]:
    ids: list[str] = []
    for i, call in enumerate(_tool_calls(record)):
        ids.append(_call_id(record, call, i))
    content = record.get("content")
    for part in content if isinstance(content, list) else []:
        if isinstance(part, dict):
            for key in ("functionCall", "functionResponse"):
                inner = part.get(key)
                if isinstance(inner, dict) and isinstance(inner.get("id"), str):
                    ids.append(inner["id"])
    return sorted(set(ids))


def _tool_calls(record: dict[str, Any]) -> list[dict[str, Any]]:
    calls = record.get("toolCalls")
    return [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []


def _call_id(record: dict[str, Any], call: dict[str, Any], index: int) -> str:
    cid = call.get("id")
    return cid if isinstance(cid, str) and cid else f"{record.get('id', '')}:{index}"


def _response_text(response: Any) -> tuple[str, bool]:
    """A ``functionResponse.response`` as text, and whether it reports an error."""
    if isinstance(response, dict):
        if isinstance(response.get("output"), str) and len(response) == 1:
            return response["output"], False
        if isinstance(response.get("error"), str):
            return response["error"], True
    if isinstance(response, str):
        return response, False
    return json.dumps(response, ensure_ascii=False, sort_keys=True), False


def _result_block(call_id: str, parts: Any, status: str, display: Any) -> fr.ToolResultBlock:
    texts: list[str] = []
    error = status not in ("", "success")
    for part in parts if isinstance(parts, list) else []:
        if not isinstance(part, dict):
            continue
        inner = part.get("functionResponse")
        if isinstance(inner, dict):
            text, failed = _response_text(inner.get("response"))
            texts.append(text)
            error = error or failed
        elif isinstance(part.get("text"), str):
            texts.append(part["text"])
    if not texts and isinstance(display, str):
        texts.append(display)
    content = "\n".join(texts)
    return fr.ToolResultBlock(
        tool_use_id=call_id,
        content=content,
        size=len(content.encode("utf-8", "surrogatepass")),
        is_error=error,
    )


def _thoughts(record: dict[str, Any]) -> list[fr.ContentBlock]:
    out: list[fr.ContentBlock] = []
    thoughts = record.get("thoughts")
    for t in thoughts if isinstance(thoughts, list) else []:
        if not isinstance(t, dict):
            continue
        subject = t.get("subject") if isinstance(t.get("subject"), str) else ""
        description = t.get("description") if isinstance(t.get("description"), str) else ""
        text = f"**{subject}** {description}".strip() if subject else str(description)
        if text:
            out.append(fr.ThinkingBlock(text=text))
    return out


def _tokens_meta(record: dict[str, Any]) -> dict[str, str]:
    meta: dict[str, str] = {}
    if isinstance(record.get("model"), str) and record["model"]:
        meta["model"] = record["model"]
    tokens = record.get("tokens")
    if isinstance(tokens, dict):
        for name in ("input", "output", "cached", "thoughts", "tool", "total"):
            value = tokens.get(name)
            if isinstance(value, int) and not isinstance(value, bool):
                meta[f"tokens_{name}"] = str(value)
    return meta


def _other_part(part: dict[str, Any]) -> fr.ContentBlock | None:
    """A part with no block of ours (inline data, a file, executable code…), kept as a
    provider block; inline bytes are left out (the CLI keeps them in its own files)."""
    kind = next((k for k in part if k not in ("thought", "thoughtSignature")), "")
    if not kind:
        return None
    data = dict(part)
    inner = data.get(kind)
    if kind == "inlineData" and isinstance(inner, dict):
        data[kind] = {k: v for k, v in inner.items() if k != "data"}
    return fr.ProviderBlock(provider=PROVIDER, kind=kind, data=data)


def _gemini(record: dict[str, Any]) -> Converted:
    out = Converted("assistant", meta=_tokens_meta(record))
    out.blocks.extend(_thoughts(record))
    content = record.get("content")
    if isinstance(content, str) and content:
        out.blocks.append(fr.TextBlock(text=content))
    seen_calls: set[str] = set()
    calls = _tool_calls(record)
    for i, call in enumerate(calls):
        seen_calls.add(_call_id(record, call, i))
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("text"), str):
            if part["text"]:
                out.blocks.append(
                    fr.ThinkingBlock(text=part["text"])
                    if part.get("thought")
                    else fr.TextBlock(text=part["text"])
                )
        elif isinstance(part.get("functionCall"), dict):
            fc = part["functionCall"]
            cid = fc.get("id") if isinstance(fc.get("id"), str) else ""
            if cid and cid in seen_calls:
                continue
            use = fr.ToolUseBlock(
                id=cid or f"{record.get('id', '')}:fc{len(out.tool_uses)}",
                name=str(fc.get("name", "")),
                input=fc["args"] if isinstance(fc.get("args"), dict) else {},
            )
            out.tool_uses.append(use)
        else:
            other = _other_part(part)
            if other is not None:
                out.blocks.append(other)
    for i, call in enumerate(calls):
        cid = _call_id(record, call, i)
        out.tool_uses.append(
            fr.ToolUseBlock(
                id=cid,
                name=str(call.get("name", "")),
                input=call["args"] if isinstance(call.get("args"), dict) else {},
            )
        )
        if "result" in call or "resultDisplay" in call:
            status = call.get("status") if isinstance(call.get("status"), str) else ""
            out.results.append(
                _result_block(cid, call.get("result"), str(status), call.get("resultDisplay"))
            )
    return out


def _user(record: dict[str, Any]) -> Converted:
    out = Converted("user")
    content = record.get("content")
    if isinstance(content, str) and strip_hook_context(content):
        out.blocks.append(fr.TextBlock(text=strip_hook_context(content)))
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("text"), str):
            text = strip_hook_context(part["text"])
            if text:
                out.blocks.append(fr.TextBlock(text=text))
        elif isinstance(part.get("functionResponse"), dict):
            fr_ = part["functionResponse"]
            cid = fr_.get("id") if isinstance(fr_.get("id"), str) else ""
            out.results.append(_result_block(cid or str(fr_.get("name", "")), [part], "", None))
        else:
            other = _other_part(part)
            if other is not None:
                out.blocks.append(other)
    if message_text(record).lstrip().startswith(CONTEXT_OPEN):
        out.meta["is_meta"] = "true"
    return out


def convert(record: dict[str, Any]) -> Converted:
    """One message record's blocks (see the module's docstring)."""
    kind = record.get("type")
    if kind == "gemini":
        return _gemini(record)
    if kind == "user":
        return _user(record)
    return Converted("notice")
