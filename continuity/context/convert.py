"""Provider shapes in: Anthropic Messages, OpenAI Chat Completions and OpenAI Responses turned
into ``message_appended`` frames, ready for ``thread.append``::

    response = client.messages.create(**request)
    thread.append(from_anthropic(response, artifacts=thread))

Each function takes what its API takes or gives: a request body, a list of messages (or input
items), one message, or a response; plain dicts or the official SDKs' objects (anything with a
pydantic ``model_dump``; the SDKs are never imported here).

- Every block becomes a typed block where one exists (text, image, tool call and result,
  thinking); every other block is kept whole as a ``ProviderBlock``; the members no typed
  block holds (ids, status, citations, a Responses item's envelope, …) are kept in the
  message's ``meta`` under ``<provider>.layout``, so the renderer for the same provider gives
  the shape back exactly (ADR 0019 says what does not come back).
- A tool output over ``max_inline_bytes`` (16 KiB by default) goes to an artifact, with its
  first ``preview_chars`` characters as the preview, when an artifact store is given
  (``artifacts=`` takes an artifact store, a store or a thread; with a store or thread whose
  store redacts, the artifact is redacted too). Base64 images go to artifacts always, so they
  need one.
- Bad input raises :class:`~continuity.errors.BadFrame` naming the path of the field
  (``messages[3].content[1].type``).
"""

from __future__ import annotations

import binascii
import json
from collections.abc import Callable, Iterable
from typing import Any, Final, Literal, NoReturn

import msgspec

from continuity import frames as fr
from continuity.context.layout import (
    ROLE_HINT,
    Artifacts,
    Provider,
    artifact_store,
    canonical_layout,
    layout_key,
)
from continuity.errors import BadFrame
from continuity.store.artifacts import ArtifactStore
from continuity.store.base import BaseStore, Thread

__all__ = [
    "DEFAULT_MAX_INLINE_BYTES",
    "DEFAULT_PREVIEW_CHARS",
    "from_anthropic",
    "from_openai",
    "from_openai_responses",
]

DEFAULT_MAX_INLINE_BYTES: Final = 16 * 1024
"""A tool output larger than this (UTF-8 bytes) goes to an artifact when a store is given."""
DEFAULT_PREVIEW_CHARS: Final = 2000
"""How much of an output that went to an artifact stays in the message."""

_PROVIDER_TEXT_CAP: Final = 4000
_TEXT_KEYS: Final = frozenset(
    {
        "text",
        "title",
        "url",
        "query",
        "name",
        "stdout",
        "stderr",
        "output",
        "content",
        "refusal",
        "transcript",
        "command",
        "commands",
        "code",
        "summary",
        "filename",
        "file_id",
        "error_code",
        "context",
        "source",
    }
)
_SKIP_KEYS: Final = frozenset(
    {"data", "encrypted_content", "signature", "file_data", "encrypted_index", "cache_control"}
)
_RESPONSES_USER_ITEMS: Final = frozenset(
    {
        "function_call_output",
        "custom_tool_call_output",
        "computer_call_output",
        "local_shell_call_output",
        "shell_call_output",
        "apply_patch_call_output",
        "mcp_approval_response",
        "tool_search_output",
        "program_output",
    }
)

_Role = Literal["user", "assistant", "system"]
_Unit = tuple[_Role, list[fr.ContentBlock], dict[str, Any], str | None]
"""A provider unit: the frame role it belongs to, its blocks, its env (layout entry), and its
OpenAI role hint."""


def _plain(value: Any, *, as_set: bool = False) -> Any:
    """``value`` with every SDK object in it turned into plain JSON values: without its nulls,
    or (``as_set``) with the members that were set, nulls included, as the OpenAI Agents SDK
    dumps a Responses item to send it back (a required member may be null:
    ``image_generation_call.result``, ``code_interpreter_call.code``, ``double_click.keys``)."""
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        if as_set:
            return dump(mode="json", by_alias=True, exclude_unset=True)
        return dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(value, dict):
        return {k: _plain(v, as_set=as_set) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v, as_set=as_set) for v in value]
    return value


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _provider_text(data: Any) -> str:
    """What a provider block says, for search and for other providers: the texts, titles,
    URLs, queries and outputs in it (never encrypted or base64 data), at most 4,000
    characters."""
    found: list[str] = []
    size = 0

    def walk(value: Any, key: str | None) -> None:
        nonlocal size
        if size > _PROVIDER_TEXT_CAP or key in _SKIP_KEYS:
            return
        if isinstance(value, dict):
            if value.get("type") == "text" and isinstance(value.get("data"), str):
                walk(value["data"], "text")  # a document's plain text source
            if key == "input":  # a server tool's input: as JSON
                text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
                found.append(text)
                size += len(text)
                return
            for k, v in value.items():
                walk(v, k)
        elif isinstance(value, list):
            for v in value:
                walk(v, key)
        elif isinstance(value, str) and key in _TEXT_KEYS and value.strip():
            if value.startswith("data:") or (len(value) > 2000 and " " not in value):
                return  # a data URL or base64
            found.append(value.strip())
            size += len(value)

    walk(data, None)
    text = "\n".join(found)
    return text if len(text) <= _PROVIDER_TEXT_CAP else text[: _PROVIDER_TEXT_CAP - 1] + "…"


class _Conv:
    """One conversion: where artifacts go, the limits, and how errors are named."""

    def __init__(
        self,
        fn: str,
        provider: Provider,
        artifacts: Artifacts,
        max_inline_bytes: int,
        preview_chars: int,
    ) -> None:
        if max_inline_bytes < 0 or preview_chars < 0:
            raise ValueError("max_inline_bytes and preview_chars must be >= 0")
        self.fn = fn
        self.provider = provider
        self.store: ArtifactStore | None = artifact_store(artifacts)
        self.redact: Callable[[str], tuple[str, int]] | None = None
        owner = None
        if isinstance(artifacts, Thread):
            owner = artifacts.store
        elif isinstance(artifacts, BaseStore):
            owner = artifacts
        if owner is not None:
            redact = getattr(owner.redactor, "redact_text", None)
            self.redact = redact if callable(redact) else None
        self.max_inline = max_inline_bytes
        self.preview_chars = preview_chars

    # -- checking the input -------------------------------------------------------------------

    def fail(self, path: str, problem: str) -> NoReturn:
        where = f"{path}: " if path else ""
        raise BadFrame(f"{self.fn}: {where}{problem}")

    def obj(self, value: Any, path: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.fail(path, f"expected an object, got {_type_name(value)}")
        return value

    def string(self, d: dict[str, Any], key: str, path: str) -> str:
        value = d.get(key)
        if value is None and key not in d:
            self.fail(f"{path}.{key}", "missing")
        if not isinstance(value, str):
            self.fail(f"{path}.{key}", f"expected a string, got {_type_name(value)}")
        return value

    def items(self, value: Any, path: str) -> list[Any]:
        if not isinstance(value, list):
            self.fail(path, f"expected a list, got {_type_name(value)}")
        return value

    def kind(self, d: dict[str, Any], path: str) -> str:
        if "type" not in d:
            self.fail(f"{path}.type", "missing (every content block needs a type)")
        kind = d["type"]
        if not isinstance(kind, str) or not kind:
            self.fail(f"{path}.type", f"expected a non-empty string, got {_type_name(kind)}")
        return kind

    # -- artifacts ----------------------------------------------------------------------------

    def image_bytes(self, data: Any, path: str) -> bytes:
        if not isinstance(data, str):
            self.fail(path, f"expected base64 text, got {_type_name(data)}")
        try:
            compact = "".join(data.split())  # line breaks of a wrapped encoding
            return binascii.a2b_base64(compact.encode("ascii"), strict_mode=True)
        except (binascii.Error, UnicodeEncodeError) as exc:
            self.fail(path, f"not valid base64 ({exc})")

    def image(self, media_type: str, data: Any, path: str) -> fr.ImageBlock:
        raw = self.image_bytes(data, path)
        if self.store is None:
            self.fail(
                path,
                "an image given as base64 needs an artifact store to keep its bytes "
                "(pass artifacts=store.artifacts, a store or a thread)",
            )
        return fr.ImageBlock(media_type=media_type, artifact_id=self.store.put(raw), size=len(raw))

    def url_image(self, url: str, path: str) -> fr.ImageBlock:
        """An image given by URL: a data URL's bytes go to an artifact."""
        if not url.startswith("data:"):
            return fr.ImageBlock(media_type="", url=url)
        head, sep, data = url.partition(",")
        if not sep or not head.endswith(";base64"):
            self.fail(path, "a data URL must be data:<media type>;base64,<data>")
        return self.image(head[len("data:") : -len(";base64")], data, path)

    def result(
        self,
        tool_use_id: str,
        output: str | list[fr.TextBlock | fr.ImageBlock] | None,
        is_error: bool,
        plain_parts: bool,
    ) -> fr.ToolResultBlock:
        """A tool result, in an artifact with a preview when it is too large to inline (only
        text can be: a result with images or parts of other kinds stays as it is)."""
        text: str | None = output if isinstance(output, str) else None
        if (
            isinstance(output, list)
            and plain_parts
            and output
            and all(isinstance(p, fr.TextBlock) for p in output)
        ):
            text = "\n".join(p.text for p in output if isinstance(p, fr.TextBlock))
        if text is not None and self.store is not None:
            size = len(text.encode("utf-8", "surrogatepass"))
            if size > self.max_inline:
                if self.redact is not None:
                    text = self.redact(text)[0]
                    size = len(text.encode("utf-8", "surrogatepass"))
                aid = self.store.put(text.encode("utf-8", "surrogatepass"))
                return fr.ToolResultBlock(
                    tool_use_id=tool_use_id,
                    artifact_id=aid,
                    preview=text[: self.preview_chars],
                    size=size,
                    is_error=is_error,
                )
        if isinstance(output, list):
            return fr.ToolResultBlock(tool_use_id=tool_use_id, parts=output, is_error=is_error)
        return fr.ToolResultBlock(tool_use_id=tool_use_id, content=output or "", is_error=is_error)

    def output_parts(
        self,
        parts: list[Any],
        path: str,
        text_kind: str,
        image: Callable[[dict[str, Any], str], tuple[fr.ImageBlock, dict[str, Any]] | None],
        drop: frozenset[str] = frozenset(),
    ) -> tuple[list[fr.TextBlock | fr.ImageBlock], list[dict[str, Any] | None], bool]:
        """A tool output given as a list: its text and image parts as blocks, any other part
        as a text that tells it (the part itself kept in the extras, as ``_raw``). Returns the
        parts, their extras and whether every part is plain text."""
        blocks: list[fr.TextBlock | fr.ImageBlock] = []
        extras: list[dict[str, Any] | None] = []
        plain = True
        for j, raw in enumerate(parts):
            where = f"{path}[{j}]"
            d = self.obj(raw, where)
            kind = self.kind(d, where)
            if kind == text_kind:
                blocks.append(fr.TextBlock(text=self.string(d, "text", where)))
                more = {k: v for k, v in d.items() if k not in ("type", "text", *drop)}
            else:
                made = image(d, where)
                if made is not None:
                    blocks.append(made[0])
                    more = made[1]
                else:
                    kept = {k: v for k, v in d.items() if k not in drop}
                    told = _provider_text(kept) or kind
                    blocks.append(fr.TextBlock(text=f"[{kind}] {told}"))
                    more = {"_raw": kept}
            plain = plain and kind == text_kind and not more
            extras.append(more or None)
        return blocks, extras, plain


def _at(path: str, member: str) -> str:
    """The path of ``member`` of the object at ``path`` ("" is the top)."""
    return f"{path}.{member}" if path else member


def _without(d: dict[str, Any], keys: Iterable[str]) -> dict[str, Any]:
    gone = set(keys)
    return {k: v for k, v in d.items() if k not in gone}


def _string_by_default(
    provider: Provider, role: str, blocks: list[fr.ContentBlock], env: dict[str, Any]
) -> bool:
    """Whether a renderer writes a message unit's content as a string when its layout does not
    say: when it is one text (an Anthropic message: never; a Responses assistant message
    without an id: always)."""
    if provider == "anthropic" or env.get("_k") != "msg":
        return False
    if provider == "openai.responses" and role == "assistant":
        return "id" not in env
    parts = [
        b
        for b in blocks
        if not isinstance(b, fr.ToolUseBlock)
        and not (isinstance(b, fr.ProviderBlock) and "type" not in b.data)
    ]
    return len(parts) == 1 and isinstance(parts[0], fr.TextBlock)


def _frames(
    conv: _Conv, units: list[_Unit], source: fr.SourceRef | None, group: bool
) -> list[fr.MessageAppended]:
    """Units grouped into frames: consecutive units of one role make one frame (``group``;
    system units never), and each frame keeps its layout when it is not the canonical one."""
    frames: list[fr.MessageAppended] = []
    batch: list[_Unit] = []

    def flush() -> None:
        if not batch:
            return
        role = batch[0][0]
        blocks = [b for _, unit_blocks, _, _ in batch for b in unit_blocks]
        layout: list[list[Any]] = []
        for _, unit_blocks, env, _ in batch:
            if "_str" in env and env["_str"] == _string_by_default(
                conv.provider, role, unit_blocks, env
            ):
                del env["_str"]
            per_block = env.pop("_b", None)
            if per_block is not None and any(e for e in per_block):
                env["_b"] = per_block
            layout.append([len(unit_blocks), env])
        meta: dict[str, str] = {}
        hint = batch[0][3]
        if hint is not None:
            meta[ROLE_HINT] = hint
        if layout != canonical_layout(conv.provider, role, blocks):
            meta[layout_key(conv.provider)] = json.dumps(
                layout, ensure_ascii=False, separators=(",", ":")
            )
        frame = fr.message(role, content=blocks, source=source)
        frames.append(msgspec.structs.replace(frame, meta=meta) if meta else frame)
        batch.clear()

    for unit in units:
        role = unit[0]
        if batch and (
            not group
            or role == "system"
            or batch[0][0] != role
            or _stands_alone(unit)
            or _stands_alone(batch[-1])
        ):
            flush()
        batch.append(unit)
    flush()
    return frames


def _stands_alone(unit: _Unit) -> bool:
    """Whether a unit is a message of its own: an OpenAI Responses ``compaction`` item stands
    in for what came before it (:func:`continuity.store.base.provider_checkpoints`), so it is
    never grouped with the items around it — in one frame with the assistant message before
    it, that message would be sent after the compaction that replaced it."""
    _, blocks, env, _ = unit
    return (
        env.get("_k") == "item"
        and len(blocks) == 1
        and isinstance(blocks[0], fr.ProviderBlock)
        and blocks[0].provider == "openai.responses"
        and blocks[0].kind == "compaction"
    )


# --- Anthropic Messages ---------------------------------------------------------------------

_ANTHROPIC_DROP: Final = frozenset({"cache_control"})


def _anthropic_image(
    conv: _Conv, d: dict[str, Any], path: str
) -> tuple[fr.ImageBlock, dict[str, Any]] | None:
    if d.get("type") != "image":
        return None
    source = conv.obj(d.get("source"), f"{path}.source")
    kind = source.get("type")
    more = _without(d, ("type", "source", "cache_control"))
    if kind == "base64":
        media_type = conv.string(source, "media_type", f"{path}.source")
        return conv.image(media_type, source.get("data"), f"{path}.source.data"), more
    if kind == "url":
        return fr.ImageBlock(media_type="", url=conv.string(source, "url", f"{path}.source")), more
    return None  # a file: kept whole


def _anthropic_block(
    conv: _Conv, raw: Any, path: str
) -> tuple[fr.ContentBlock, dict[str, Any] | None]:
    d = conv.obj(raw, path)
    kind = conv.kind(d, path)
    if kind == "text":
        text = conv.string(d, "text", path)
        return fr.TextBlock(text=text), _without(d, ("type", "text", "cache_control")) or None
    if kind == "image":
        made = _anthropic_image(conv, d, path)
        if made is not None:
            return made[0], made[1] or None
    elif kind == "tool_use":
        tool_input = d.get("input")
        if not isinstance(tool_input, dict):
            conv.fail(f"{path}.input", f"expected an object, got {_type_name(tool_input)}")
        block = fr.ToolUseBlock(
            id=conv.string(d, "id", path), name=conv.string(d, "name", path), input=tool_input
        )
        return block, _without(d, ("type", "id", "name", "input", "cache_control")) or None
    elif kind == "tool_result":
        return _anthropic_result(conv, d, path)
    elif kind == "thinking":
        signature = d.get("signature")
        if signature is not None and not isinstance(signature, str):
            conv.fail(f"{path}.signature", f"expected a string, got {_type_name(signature)}")
        thought = fr.ThinkingBlock(text=conv.string(d, "thinking", path), signature=signature)
        return thought, _without(d, ("type", "thinking", "signature")) or None
    elif kind == "redacted_thinking":
        redacted = fr.ThinkingBlock(text="", data=conv.string(d, "data", path))
        return redacted, _without(d, ("type", "data")) or None
    kept = _without(d, _ANTHROPIC_DROP)
    return fr.ProviderBlock(
        provider="anthropic", kind=kind, data=kept, text=_provider_text(kept)
    ), None


def _anthropic_result(
    conv: _Conv, d: dict[str, Any], path: str
) -> tuple[fr.ToolResultBlock, dict[str, Any] | None]:
    tool_use_id = conv.string(d, "tool_use_id", path)
    is_error = d.get("is_error", False)
    if not isinstance(is_error, bool):
        conv.fail(f"{path}.is_error", f"expected true or false, got {_type_name(is_error)}")
    extras = _without(d, ("type", "tool_use_id", "content", "is_error", "cache_control"))
    if d.get("is_error") is False:
        extras["is_error"] = False  # given, so given back
    content = d.get("content")
    if content is None:
        block = conv.result(tool_use_id, None, is_error, True)
        extras["_form"] = "none"
    elif isinstance(content, str):
        block = conv.result(tool_use_id, content, is_error, True)
        if not content:
            extras["_form"] = "str"
    elif isinstance(content, list):
        parts, part_extras, plain = conv.output_parts(
            content,
            f"{path}.content",
            "text",
            lambda p, where: _anthropic_image(conv, p, where),
            _ANTHROPIC_DROP,
        )
        block = conv.result(tool_use_id, parts, is_error, plain)
        if not content:
            extras["_form"] = "list"
        elif any(part_extras) and block.artifact_id is None:
            extras["_p"] = part_extras
    else:
        conv.fail(f"{path}.content", f"expected a string or a list, got {_type_name(content)}")
    return block, extras or None


def _anthropic_unit(conv: _Conv, raw: Any, path: str) -> _Unit:
    d = conv.obj(raw, path)
    if d.get("type") == "message" and "role" in d:  # a response where a message belongs
        if d["role"] != "assistant":
            conv.fail(_at(path, "role"), f"a response's role is 'assistant', got {d['role']!r}")
        d = {"role": "assistant", "content": d.get("content")}
    role = d.get("role")
    if role not in ("user", "assistant", "system"):
        expected = "'user' or 'assistant'"
        conv.fail(_at(path, "role"), f"expected {expected}, got {role!r}" if role else "missing")
    if "content" not in d:
        conv.fail(_at(path, "content"), "missing")
    content = d["content"]
    env: dict[str, Any] = {"_k": "msg", "_str": isinstance(content, str)}
    env.update(_without(d, ("role", "content")))
    if isinstance(content, str):
        return role, [fr.TextBlock(text=content)], env, None
    blocks: list[fr.ContentBlock] = []
    extras: list[dict[str, Any] | None] = []
    for j, item in enumerate(conv.items(content, _at(path, "content"))):
        block, more = _anthropic_block(conv, item, _at(path, f"content[{j}]"))
        blocks.append(block)
        extras.append(more)
    env["_b"] = extras
    return role, blocks, env, None


def _anthropic_system(conv: _Conv, system: Any) -> _Unit:
    if isinstance(system, str):
        return "system", [fr.TextBlock(text=system)], {"_k": "msg", "_str": True}, None
    blocks: list[fr.ContentBlock] = []
    extras: list[dict[str, Any] | None] = []
    for j, item in enumerate(conv.items(system, "system")):
        d = conv.obj(item, f"system[{j}]")
        if conv.kind(d, f"system[{j}]") != "text":
            conv.fail(
                f"system[{j}].type", f"the system prompt holds text blocks, not {d['type']!r}"
            )
        blocks.append(fr.TextBlock(text=conv.string(d, "text", f"system[{j}]")))
        extras.append(_without(d, ("type", "text", "cache_control")) or None)
    return "system", blocks, {"_k": "msg", "_str": False, "_b": extras}, None


def from_anthropic(
    value: Any,
    *,
    artifacts: Artifacts = None,
    max_inline_bytes: int = DEFAULT_MAX_INLINE_BYTES,
    preview_chars: int = DEFAULT_PREVIEW_CHARS,
) -> list[fr.MessageAppended]:
    """Anthropic Messages shapes as message frames, one per message.

    ``value`` is a request body (``{"system": …, "messages": […]}``; its other members are
    ignored), a list of message params, one message param, or a response (a ``Message``, whose
    content becomes one assistant message; its id goes in the frame's ``source``). Text, image,
    tool_use, tool_result (string or list content, ``is_error``), thinking and
    redacted_thinking become typed blocks; every other block (server_tool_use,
    web_search_tool_result, document, search_result, …) is kept whole as a ``ProviderBlock``.
    ``cache_control`` is not kept: the renderer places its own.
    """
    conv = _Conv("from_anthropic", "anthropic", artifacts, max_inline_bytes, preview_chars)
    value = _plain(value)
    units: list[_Unit] = []
    source = None
    if isinstance(value, dict) and "messages" in value:
        if value.get("system") is not None:
            units.append(_anthropic_system(conv, value["system"]))
        for i, item in enumerate(conv.items(value["messages"], "messages")):
            units.append(_anthropic_unit(conv, item, f"messages[{i}]"))
    elif isinstance(value, dict) and value.get("type") == "message" and "role" in value:
        units.append(_anthropic_unit(conv, value, ""))
        if isinstance(value.get("id"), str):
            source = fr.SourceRef(system="anthropic", key=value["id"])
    elif isinstance(value, dict):
        units.append(_anthropic_unit(conv, value, "message"))
    elif isinstance(value, list):
        units += [_anthropic_unit(conv, item, f"[{i}]") for i, item in enumerate(value)]
    else:
        conv.fail(
            "",
            f"expected a request body, a list of messages, a message or a response, "
            f"got {_type_name(value)}",
        )
    return _frames(conv, units, source, group=False)


# --- OpenAI Chat Completions ----------------------------------------------------------------


def _chat_image(
    conv: _Conv, d: dict[str, Any], path: str
) -> tuple[fr.ImageBlock, dict[str, Any]] | None:
    if d.get("type") != "image_url":
        return None
    image_url = conv.obj(d.get("image_url"), f"{path}.image_url")
    url = conv.string(image_url, "url", f"{path}.image_url")
    block = conv.url_image(url, f"{path}.image_url.url")
    more = _without(d, ("type", "image_url"))
    extra_url = _without(image_url, ("url", "detail"))
    if extra_url:
        return None  # an image_url member we do not know: kept whole
    if "detail" in image_url:
        more["_detail"] = image_url["detail"]
    return block, more


def _chat_content(
    conv: _Conv, content: Any, path: str, role: str
) -> tuple[list[fr.ContentBlock], list[dict[str, Any] | None]]:
    if isinstance(content, str):
        return [fr.TextBlock(text=content)], [None]
    blocks: list[fr.ContentBlock] = []
    extras: list[dict[str, Any] | None] = []
    for j, item in enumerate(conv.items(content, path)):
        where = f"{path}[{j}]"
        d = conv.obj(item, where)
        kind = conv.kind(d, where)
        if kind == "text":
            blocks.append(fr.TextBlock(text=conv.string(d, "text", where)))
            extras.append(_without(d, ("type", "text")) or None)
            continue
        made = _chat_image(conv, d, where) if role == "user" else None
        if made is not None:
            blocks.append(made[0])
            extras.append(made[1] or None)
            continue
        text = d.get("refusal") if kind == "refusal" else None
        told = text if isinstance(text, str) else _provider_text(d)
        blocks.append(fr.ProviderBlock(provider="openai.chat", kind=kind, data=d, text=told))
        extras.append(None)
    return blocks, extras


def _arguments_input(raw: str) -> tuple[dict[str, Any], str | None]:
    """A tool call's arguments as its input, and the string itself when the input does not
    give it back exactly (whitespace, or not a JSON object at all: the input is then empty)."""
    try:
        value = json.loads(raw)
    except ValueError:
        return {}, raw
    if not isinstance(value, dict):
        return {}, raw
    again = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return value, None if again == raw else raw


def _chat_call(conv: _Conv, raw: Any, path: str) -> tuple[fr.ToolUseBlock, dict[str, Any] | None]:
    d = conv.obj(raw, path)
    call_id = conv.string(d, "id", path)
    kind = d.get("type", "function")
    if kind == "custom":
        custom = conv.obj(d.get("custom"), f"{path}.custom")
        block = fr.ToolUseBlock(
            id=call_id,
            name=conv.string(custom, "name", f"{path}.custom"),
            input={"input": conv.string(custom, "input", f"{path}.custom")},
        )
        return block, {"_custom": True, **_without(d, ("id", "type", "custom"))}
    if kind != "function":
        conv.fail(f"{path}.type", f"expected 'function' or 'custom', got {kind!r}")
    function = conv.obj(d.get("function"), f"{path}.function")
    name = conv.string(function, "name", f"{path}.function")
    tool_input, raw_args = _arguments_input(conv.string(function, "arguments", f"{path}.function"))
    extras = _without(d, ("id", "type", "function"))
    if "type" not in d:
        conv.fail(f"{path}.type", "missing")
    if raw_args is not None:
        extras["_args"] = raw_args
    return fr.ToolUseBlock(id=call_id, name=name, input=tool_input), extras or None


def _chat_unit(conv: _Conv, raw: Any, path: str) -> _Unit:
    d = conv.obj(raw, path)
    role = d.get("role")
    if role == "function":
        conv.fail(f"{path}.role", "'function' messages are deprecated: send 'tool' messages")
    if role not in ("system", "developer", "user", "assistant", "tool"):
        conv.fail(
            f"{path}.role",
            "expected 'system', 'developer', 'user', 'assistant' or 'tool', "
            + (f"got {role!r}" if role is not None else "it is missing"),
        )
    if role == "tool":
        tool_call_id = conv.string(d, "tool_call_id", path)
        content = d.get("content")
        env: dict[str, Any] = {"_k": "tool"}
        env.update(_without(d, ("role", "tool_call_id", "content")))
        extras: dict[str, Any] = {}
        if isinstance(content, str):
            block = conv.result(tool_call_id, content, False, True)
            if not content:
                extras["_form"] = "str"
        elif isinstance(content, list):
            parts, part_extras, plain = conv.output_parts(
                content, f"{path}.content", "text", lambda p, w: None
            )
            block = conv.result(tool_call_id, parts, False, plain)
            if not content:
                extras["_form"] = "list"
            elif any(part_extras) and block.artifact_id is None:
                extras["_p"] = part_extras
        else:
            what = f"got {_type_name(content)}" if "content" in d else "it is missing"
            conv.fail(f"{path}.content", f"expected a string or a list of text parts, {what}")
        env["_b"] = [extras or None]
        return "user", [block], env, None
    if role == "assistant":
        return _chat_assistant(conv, d, path)
    if "content" not in d:
        conv.fail(f"{path}.content", "missing")
    blocks, extras_list = _chat_content(conv, d["content"], f"{path}.content", role)
    env = {"_k": "msg", "_str": isinstance(d["content"], str), "_b": extras_list}
    env.update(_without(d, ("role", "content")))
    frame_role: _Role = "user" if role == "user" else "system"
    return frame_role, blocks, env, "developer" if role == "developer" else None


def _chat_assistant(conv: _Conv, d: dict[str, Any], path: str) -> _Unit:
    # a response's message (ChatCompletionMessage) where a message belongs: what a request
    # can send back of it
    d = _without(d, ("annotations",))
    audio = d.get("audio")
    if isinstance(audio, dict) and "id" in audio:
        d["audio"] = {"id": audio["id"]}
    env: dict[str, Any] = {"_k": "msg"}
    blocks: list[fr.ContentBlock] = []
    extras: list[dict[str, Any] | None] = []
    content = d.get("content")
    if "content" not in d:
        env["_nocontent"] = True
    elif content is not None:
        blocks, extras = _chat_content(conv, content, f"{path}.content", "assistant")
    env["_str"] = isinstance(content, str)
    refusal = d.get("refusal")
    if refusal is not None:
        if not isinstance(refusal, str):
            conv.fail(f"{path}.refusal", f"expected a string, got {_type_name(refusal)}")
        data = {"refusal": refusal}
        blocks.append(
            fr.ProviderBlock(provider="openai.chat", kind="refusal", data=data, text=refusal)
        )
        extras.append(None)
    calls = d.get("tool_calls")
    if calls is not None:
        for j, call in enumerate(conv.items(calls, f"{path}.tool_calls")):
            block, more = _chat_call(conv, call, f"{path}.tool_calls[{j}]")
            blocks.append(block)
            extras.append(more)
    env["_b"] = extras
    env.update(_without(d, ("role", "content", "refusal", "tool_calls")))
    return "assistant", blocks, env, None


def from_openai(
    value: Any,
    *,
    artifacts: Artifacts = None,
    max_inline_bytes: int = DEFAULT_MAX_INLINE_BYTES,
    preview_chars: int = DEFAULT_PREVIEW_CHARS,
    choice: int = 0,
) -> list[fr.MessageAppended]:
    """OpenAI Chat Completions shapes as message frames.

    ``value`` is a request body (``{"messages": […]}``), a list of messages, one message, or a
    ``ChatCompletion`` (its ``choice``-th message becomes an assistant message; ``annotations``
    are not kept, as a request cannot send them back). System and developer messages become
    system messages (a developer one says so in ``meta["openai.role"]``); tool messages become
    tool results in a user message, consecutive ones together; a refusal is kept as a
    ``ProviderBlock``; ``image_url`` parts become images (a data URL's bytes in an artifact).
    """
    conv = _Conv("from_openai", "openai.chat", artifacts, max_inline_bytes, preview_chars)
    value = _plain(value)
    source = None
    units: list[_Unit] = []
    if isinstance(value, dict) and "choices" in value:
        choices = conv.items(value["choices"], "choices")
        if not 0 <= choice < len(choices):
            conv.fail("choices", f"has no choice {choice} (it holds {len(choices)})")
        path = f"choices[{choice}].message"
        chosen = conv.obj(conv.obj(choices[choice], f"choices[{choice}]").get("message"), path)
        units.append(_chat_unit(conv, chosen, path))
        if isinstance(value.get("id"), str):
            source = fr.SourceRef(system="openai.chat", key=value["id"])
    elif isinstance(value, dict) and "messages" in value:
        for i, item in enumerate(conv.items(value["messages"], "messages")):
            units.append(_chat_unit(conv, item, f"messages[{i}]"))
    elif isinstance(value, dict):
        units.append(_chat_unit(conv, value, "message"))
    elif isinstance(value, list):
        units += [_chat_unit(conv, item, f"[{i}]") for i, item in enumerate(value)]
    else:
        conv.fail(
            "",
            "expected a request body, a list of messages, a message or a ChatCompletion, "
            f"got {_type_name(value)}",
        )
    return _frames(conv, units, source, group=True)


# --- OpenAI Responses -----------------------------------------------------------------------


def _responses_image(
    conv: _Conv, d: dict[str, Any], path: str
) -> tuple[fr.ImageBlock, dict[str, Any]] | None:
    if d.get("type") != "input_image" or not isinstance(d.get("image_url"), str):
        return None  # an image by file id: kept whole
    block = conv.url_image(d["image_url"], f"{path}.image_url")
    more = _without(d, ("type", "image_url", "detail"))
    if "detail" in d:
        more["_detail"] = d["detail"]
    return block, more


def _responses_message(conv: _Conv, d: dict[str, Any], path: str) -> _Unit:
    role = d.get("role")
    if role not in ("user", "assistant", "system", "developer"):
        what = f"got {role!r}" if role is not None else "it is missing"
        conv.fail(f"{path}.role", f"expected 'user', 'assistant', 'system' or 'developer', {what}")
    if "content" not in d:
        conv.fail(f"{path}.content", "missing")
    content = d["content"]
    env: dict[str, Any] = {"_k": "msg", "_str": isinstance(content, str)}
    env.update(_without(d, ("role", "content")))
    frame_role: _Role = (
        "user" if role == "user" else "assistant" if role == "assistant" else "system"
    )
    hint = "developer" if role == "developer" else None
    if isinstance(content, str):
        return frame_role, [fr.TextBlock(text=content)], env, hint
    text_kind = "output_text" if role == "assistant" else "input_text"
    blocks: list[fr.ContentBlock] = []
    extras: list[dict[str, Any] | None] = []
    for j, item in enumerate(conv.items(content, f"{path}.content")):
        where = f"{path}.content[{j}]"
        p = conv.obj(item, where)
        kind = conv.kind(p, where)
        if kind in ("input_text", "output_text"):
            blocks.append(fr.TextBlock(text=conv.string(p, "text", where)))
            more = _without(p, ("type", "text"))
            if more.get("annotations") == [] and kind == "output_text":
                del more["annotations"]  # the renderer writes it
            if kind != text_kind:
                more["_ptype"] = kind
            extras.append(more or None)
            continue
        made = _responses_image(conv, p, where) if role != "assistant" else None
        if made is not None:
            blocks.append(made[0])
            extras.append(made[1] or None)
            continue
        text = p.get("refusal") if kind == "refusal" else None
        told = text if isinstance(text, str) else _provider_text(p)
        blocks.append(fr.ProviderBlock(provider="openai.responses", kind=kind, data=p, text=told))
        extras.append(None)
    env["_b"] = extras
    return frame_role, blocks, env, hint


def _responses_item(conv: _Conv, raw: Any, path: str) -> _Unit:
    d = conv.obj(raw, path)
    kind = d.get("type")
    if (kind is None and "role" in d) or kind == "message":
        return _responses_message(conv, d, path)
    if not isinstance(kind, str) or not kind:
        what = f"got {_type_name(kind)}" if "type" in d else "it is missing"
        conv.fail(f"{path}.type", f"expected an item type, {what}")
    if kind in ("function_call", "custom_tool_call"):
        call_id = conv.string(d, "call_id", path)
        name = conv.string(d, "name", path)
        if kind == "custom_tool_call":
            block = fr.ToolUseBlock(
                id=call_id, name=name, input={"input": conv.string(d, "input", path)}
            )
            env = {"_k": "call", **_without(d, ("call_id", "name", "input"))}
            return "assistant", [block], env, None
        tool_input, raw_args = _arguments_input(conv.string(d, "arguments", path))
        env = {"_k": "call", **_without(d, ("call_id", "name", "arguments"))}
        if env.get("type") == "function_call":
            del env["type"]  # the renderer writes it
        if raw_args is not None:
            env["_b"] = [{"_args": raw_args}]
        return "assistant", [fr.ToolUseBlock(id=call_id, name=name, input=tool_input)], env, None
    if kind in ("function_call_output", "custom_tool_call_output") and isinstance(
        d.get("call_id"), str
    ):
        call_id = d["call_id"]
        env = {"_k": "out", **_without(d, ("call_id", "output"))}
        if env.get("type") == "function_call_output":
            del env["type"]  # the renderer writes it
        output = d.get("output")
        extras: dict[str, Any] = {}
        if isinstance(output, str):
            result = conv.result(call_id, output, False, True)
            if not output:
                extras["_form"] = "str"
        elif isinstance(output, list):
            parts, part_extras, plain = conv.output_parts(
                output,
                f"{path}.output",
                "input_text",
                lambda p, where: _responses_image(conv, p, where),
            )
            result = conv.result(call_id, parts, False, plain)
            if not output:
                extras["_form"] = "list"
            elif any(part_extras) and result.artifact_id is None:
                extras["_p"] = part_extras
        else:
            what = f"got {_type_name(output)}" if "output" in d else "it is missing"
            conv.fail(f"{path}.output", f"expected a string or a list, {what}")
        env["_b"] = [extras or None]
        return "user", [result], env, None
    text = _provider_text(d)
    item = fr.ProviderBlock(provider="openai.responses", kind=kind, data=d, text=text)
    role: _Role = "user" if kind in _RESPONSES_USER_ITEMS else "assistant"
    return role, [item], {"_k": "item"}, None


def from_openai_responses(
    value: Any,
    *,
    artifacts: Artifacts = None,
    max_inline_bytes: int = DEFAULT_MAX_INLINE_BYTES,
    preview_chars: int = DEFAULT_PREVIEW_CHARS,
) -> list[fr.MessageAppended]:
    """OpenAI Responses shapes as message frames.

    ``value`` is a request body (``{"instructions": …, "input": …}``: the instructions become a
    system message), ``input`` itself (a string, or a list of items), one item, or a
    ``Response`` (its ``output`` items; its id goes in the frames' ``source``). Consecutive
    items on one side of the conversation make one message: the model's (assistant messages,
    reasoning, function calls, web searches, …) or the caller's (user messages, function call
    outputs, …), so each call pairs with its output in the next message; system and developer
    messages stay one each, and so does a ``compaction`` item (it stands in for what came
    before it: :func:`continuity.store.base.provider_checkpoints`). ``message``,
    ``function_call`` (and ``custom_tool_call``) and ``function_call_output`` become typed
    blocks, every other item (``reasoning`` with its encrypted content included) a
    ``ProviderBlock`` kept whole; item ids and status stay in the layout.
    """
    conv = _Conv(
        "from_openai_responses", "openai.responses", artifacts, max_inline_bytes, preview_chars
    )
    value = _plain(value, as_set=True)
    source = None
    units: list[_Unit] = []
    items: list[Any] | None = None
    where = ""
    if isinstance(value, dict) and "output" in value and "input" not in value:
        items, where = conv.items(value["output"], "output"), "output"
        if isinstance(value.get("id"), str):
            source = fr.SourceRef(system="openai.responses", key=value["id"])
    elif isinstance(value, dict) and "input" in value:
        instructions = value.get("instructions")
        if instructions is not None:
            if not isinstance(instructions, str):
                conv.fail("instructions", f"expected a string, got {_type_name(instructions)}")
            units.append(
                ("system", [fr.TextBlock(text=instructions)], {"_k": "msg", "_str": True}, None)
            )
        given = value["input"]
        if isinstance(given, str):
            units.append(("user", [fr.TextBlock(text=given)], {"_k": "msg", "_str": True}, None))
        else:
            items, where = conv.items(given, "input"), "input"
    elif isinstance(value, str):
        units.append(("user", [fr.TextBlock(text=value)], {"_k": "msg", "_str": True}, None))
    elif isinstance(value, dict):
        units.append(_responses_item(conv, value, "item"))
    elif isinstance(value, list):
        items = value
    else:
        conv.fail(
            "",
            f"expected a request body, input items, an item or a Response, got {_type_name(value)}",
        )
    for i, item in enumerate(items or []):
        units.append(_responses_item(conv, item, f"{where}[{i}]"))
    return _frames(conv, units, source, group=True)
