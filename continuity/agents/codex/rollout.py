"""Reading Codex rollout lines: each JSON line into one :class:`Item`, tolerating everything.

A rollout line is ``{"timestamp", "type", "payload"}`` (``../shared/fixtures/agents/FORMATS.md``
§1). What the archive keeps of each kind:

- ``session_meta``: the session (its id, cwd, git branch, version) — and, kept whole, a record.
- ``response_item``: the conversation. ``message`` (user, assistant, developer), ``reasoning``
  (an opaque provider block: ``encrypted_content`` kept, never shown; its summary readable),
  ``function_call`` / ``custom_tool_call`` / ``local_shell_call`` (tool uses, id = ``call_id``),
  their ``*_output`` (tool results), and any other item (web search, tool search, image
  generation, ghost snapshot, compaction…) as an opaque provider block.
- ``compacted``: Codex's own compaction (a checkpoint).
- ``event_msg``: UI copies of what the response items hold (prompts, answers, reasoning,
  command ends, token counts…), skipped and counted; an event type not known here is kept as a
  record, as is a line kind not known here (``world_state``…), so nothing new is lost.
- ``turn_context``, ``token_usage_record``: per-turn settings and usage, skipped and counted.

A ``token_count`` event is read as a :class:`Usage` (the last request's tokens and the model's
window): its figures go into the meta of the assistant message before it (how full Codex's
context is, :mod:`continuity.rolling.usage`), never a frame of its own.
"""

from __future__ import annotations

from typing import Any, Final, TypeAlias

import msgspec

from continuity import frames as fr

__all__ = ["PROVIDER", "Compacted", "Item", "Message", "Meta", "Record", "Usage", "parse_line"]

PROVIDER: Final = "openai"

# event_msg types whose content a response_item (or nothing the archive needs) carries
_EVENT_COPIES: Final = frozenset(
    {
        "user_message",
        "agent_message",
        "agent_reasoning",
        "agent_reasoning_raw_content",
        "agent_reasoning_section_break",
        "token_count",
        "task_started",
        "task_complete",
        "turn_started",
        "turn_complete",
        "item_completed",
        "context_compacted",
        "exec_command_end",
        "patch_apply_end",
        "mcp_tool_call_end",
        "web_search_end",
        "view_image_tool_call",
        "image_generation_end",
        "thread_settings_applied",
    }
)
_SKIPPED_KINDS: Final = frozenset({"turn_context", "token_usage_record"})
_KNOWN_KINDS: Final = frozenset({"response_item", "event_msg", "compacted", "session_meta"})
_CONTINUITY_RESTORE: Final = "# Restored by continuity from the archive"
# injected context Codex sends as a user message: never the user's own words
_INJECTED_PREFIXES: Final = (
    "<environment_context>",
    "<user_instructions>",
    "<permissions",
    "<skills_instructions>",
    "<user_shell_command>",
    "<turn_aborted>",
    "<subagent_notification>",
    "# AGENTS.md",
    "# Context from my IDE",
)


class Meta(msgspec.Struct, frozen=True):
    """A ``session_meta`` line: the session it describes, and the payload kept whole."""

    offset: int
    ts: str
    session_id: str
    cwd: str
    git_branch: str
    cli_version: str
    originator: str
    parent_session: str
    payload: dict[str, Any]


class Message(msgspec.Struct, frozen=True):
    """A conversation item as a message: ``kind`` is the item type, ``call_id`` its tool call."""

    offset: int
    ts: str
    role: fr.Role
    kind: str
    blocks: list[fr.ContentBlock]
    injected: bool = False
    item_id: str = ""
    codex_role: str = ""


class Compacted(msgspec.Struct, frozen=True):
    """A ``compacted`` line: ``summary`` is Codex's summary text ("" when remote), ``opaque``
    the items continuity cannot read (the remote ``compaction`` item), ``payload`` the line's."""

    offset: int
    ts: str
    summary: str
    opaque: list[dict[str, Any]]
    payload: dict[str, Any]


class Record(msgspec.Struct, frozen=True):
    """A line kept as it is (a kind or an event type not known here, or a session_meta)."""

    offset: int
    ts: str
    kind: str
    payload: Any


class Usage(msgspec.Struct, frozen=True):
    """A ``token_count`` event: the last request's tokens (``total_tokens``: what the context
    held) and ``model_context_window``, by the meta keys they are kept under."""

    offset: int
    ts: str
    meta: dict[str, str]


Item: TypeAlias = Meta | Message | Compacted | Record | Usage


def _str(v: Any) -> str:
    return v if isinstance(v, str) else ""


def _texts(content: Any) -> list[str]:
    """The texts of a message's content items (images as a note)."""
    if isinstance(content, str):
        return [content]
    out: list[str] = []
    if not isinstance(content, list):
        return out
    for c in content:
        if isinstance(c, str):
            out.append(c)
        elif isinstance(c, dict):
            kind = c.get("type")
            if isinstance(c.get("text"), str):
                out.append(c["text"])
            elif kind in ("input_image", "image", "output_image"):
                out.append("[image]")
            elif isinstance(kind, str):
                out.append(f"[{kind}]")
    return out


def output_text(output: Any) -> str:
    """The text of a tool output: a string, content items, or ``{"content", "success"}``."""
    if isinstance(output, str):
        return output
    if isinstance(output, dict):
        inner = output.get("content")
        if isinstance(inner, (str, list)):
            return output_text(inner)
        return msgspec.json.encode(output).decode()
    if isinstance(output, list):
        return "\n".join(_texts(output))
    return "" if output is None else msgspec.json.encode(output).decode()


def _tool_input(raw: Any) -> dict[str, Any]:
    """A call's arguments (a JSON string) as a dict; anything else kept under ``input``."""
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            value = msgspec.json.decode(raw)
        except msgspec.DecodeError:
            return {"input": raw}
        return value if isinstance(value, dict) else {"input": value}
    return {} if raw is None else {"input": raw}


def _message(p: dict[str, Any], offset: int, ts: str) -> Message | str:
    if not isinstance(p.get("role"), str):
        raise ValueError("a message without a role")
    if not isinstance(p.get("content"), str | list):
        raise ValueError("a message whose content is neither text nor a list")
    role = _str(p.get("role"))
    texts = _texts(p.get("content"))
    blocks: list[fr.ContentBlock] = [fr.TextBlock(text=t) for t in texts if t]
    if role == "assistant":
        return Message(offset, ts, "assistant", "message", blocks, item_id=_str(p.get("id")))
    # user, developer, system; a role not known here (new, or a damaged byte) is kept like
    # injected context, under its own name, rather than dropped unsaid
    first = texts[0].lstrip() if texts else ""
    if role == "developer" and first.startswith(_CONTINUITY_RESTORE):
        # continuity's own restore, which Codex gave the model as a developer message: it is
        # made from the archive (and its making is logged), so it is not archived again
        return "response_item/message/continuity_restore"
    injected = role != "user" or first.startswith(_INJECTED_PREFIXES)
    return Message(
        offset, ts, "user", "message", blocks, injected, _str(p.get("id")), codex_role=role
    )


def _reasoning(p: dict[str, Any]) -> fr.ContentBlock:
    summary = "\n".join(_texts(p.get("summary")))
    return fr.ProviderBlock(provider=PROVIDER, kind="reasoning", data=p, text=summary)


def _response_item(p: dict[str, Any], offset: int, ts: str) -> Message | str:
    kind = _str(p.get("type"))
    call_id = _str(p.get("call_id")) or _str(p.get("id"))
    if kind == "message":
        return _message(p, offset, ts)
    if kind == "reasoning":
        return Message(offset, ts, "assistant", kind, [_reasoning(p)], item_id=_str(p.get("id")))
    if kind in ("function_call", "custom_tool_call", "local_shell_call"):
        if kind == "function_call":
            args = _tool_input(p.get("arguments"))
        elif kind == "custom_tool_call":
            args = {"input": p.get("input")}
        else:
            args = _tool_input(p.get("action"))
        name = _str(p.get("name")) or ("local_shell" if kind == "local_shell_call" else kind)
        if _str(p.get("namespace")):  # an MCP tool (0.169: name "search", namespace
            name = f"{_str(p.get('namespace'))}__{name}"  # "mcp__continuity"): as Codex names it
        block = fr.ToolUseBlock(id=call_id, name=name, input=args)
        return Message(offset, ts, "assistant", kind, [block], item_id=call_id)
    if kind in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
        text = output_text(p.get("output"))
        out = p.get("output")
        failed = isinstance(out, dict) and out.get("success") is False
        result = fr.ToolResultBlock(
            tool_use_id=call_id,
            content=text,
            size=len(text.encode("utf-8", "surrogatepass")),
            is_error=failed,
        )
        return Message(offset, ts, "user", kind, [result], item_id=call_id)
    if not kind:
        raise ValueError("a response item without a type")
    # web search, tool search, image generation, ghost snapshot, compaction, and new kinds:
    # kept whole for the provider, with a line of text to find them by
    note = _describe(kind, p)
    opaque = fr.ProviderBlock(provider=PROVIDER, kind=kind, data=p, text=note)
    return Message(offset, ts, "assistant", kind, [opaque], item_id=_str(p.get("id")))


def _describe(kind: str, p: dict[str, Any]) -> str:
    action = p.get("action")
    if isinstance(action, dict) and isinstance(action.get("query"), str):
        return f"[{kind}: {action['query']}]"
    return f"[{kind}]"


def _git_branch(p: dict[str, Any]) -> str:
    git = p.get("git")
    return _str(git.get("branch")) if isinstance(git, dict) else ""


def _parent_session(source: Any) -> str:
    """The parent session a sub-agent session names (somewhere under ``source.subagent``)."""
    if isinstance(source, dict):
        for key, value in source.items():
            if key in ("parent_thread_id", "parent_session_id") and isinstance(value, str):
                return value
            found = _parent_session(value)
            if found:
                return found
    return ""


def _compacted(p: dict[str, Any], offset: int, ts: str) -> Compacted:
    history = p.get("replacement_history")
    opaque = [
        h
        for h in (history if isinstance(history, list) else [])
        if isinstance(h, dict) and h.get("type") == "compaction"
    ]
    return Compacted(offset, ts, _str(p.get("message")), opaque, p)


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def _usage(info: Any) -> dict[str, str]:
    """The meta keys of a ``token_count``'s ``info`` (empty when it has no figures)."""
    if not isinstance(info, dict):
        return {}
    last = info.get("last_token_usage")
    last = last if isinstance(last, dict) else {}
    found = {
        "context_tokens": _int(last.get("total_tokens")),
        "usage_input": _int(last.get("input_tokens")),
        "usage_cache_read": _int(last.get("cached_input_tokens")),
        "usage_output": _int(last.get("output_tokens")),
        "context_window": _int(info.get("model_context_window")),
    }
    return {k: str(v) for k, v in found.items() if v is not None}


def parse_line(obj: dict[str, Any], offset: int) -> Item | str:
    """The item of one rollout line, or the name of its kind when it is skipped; raises
    ``ValueError`` for a line of a known kind that is not of its shape (the reader names it)."""
    kind = _str(obj.get("type"))
    p = obj.get("payload")
    ts = _str(obj.get("timestamp"))
    if not isinstance(p, dict):
        if kind in _KNOWN_KINDS:  # a damaged line: the reader names it, never drops it quietly
            raise ValueError(f"a {kind} line whose payload is not an object")
        return Record(offset, ts, kind or "?", p) if kind else "<no type>/<no payload>"
    if kind == "response_item":
        return _response_item(p, offset, ts)
    if kind == "event_msg":
        sub = _str(p.get("type"))
        if sub == "token_count":
            usage = _usage(p.get("info"))
            if usage:
                return Usage(offset, ts, usage)
        if sub in _EVENT_COPIES:
            return f"event_msg/{sub}"
        return Record(offset, ts, f"event_msg.{sub or '?'}", p)
    if kind == "compacted":
        return _compacted(p, offset, ts)
    if kind == "session_meta":
        return Meta(
            offset,
            ts,
            _str(p.get("id")) or _str(p.get("session_id")),
            _str(p.get("cwd")),
            _git_branch(p),
            _str(p.get("cli_version")),
            _str(p.get("originator")),
            _parent_session(p.get("source")),
            p,
        )
    if kind in _SKIPPED_KINDS:
        return kind
    return Record(offset, ts, kind or "?", p)
