"""Editing one member of a JSON document in its text, leaving every other byte where it was.

Configuration files that continuity registers its MCP server in (``~/.claude.json``, a project's
``.mcp.json``, Gemini's and Cursor's settings) hold much else, often in a layout the user or
the client chose: a member is inserted, replaced or removed as text, with the indentation
and line endings found around it, so that everything else keeps its bytes, and a removal
right after an insertion gives back the original text. The text must be valid JSON (callers
parse it first); the result is checked by parsing it again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = ["Member", "members", "remove_member", "set_member", "value_span"]

_WS = " \t\r\n"
_DECODER = json.JSONDecoder()


@dataclass(frozen=True, slots=True)
class Member:
    """One member of an object: where its key starts and its value ends."""

    key: str
    key_start: int
    value_start: int
    value_end: int


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WS:
        i += 1
    return i


def _value_end(text: str, i: int) -> int:
    _obj, end = _DECODER.raw_decode(text, i)
    return int(end)


def members(text: str, start: int) -> list[Member]:
    """The members of the object whose ``{`` is at ``start``, in order (duplicates kept)."""
    found: list[Member] = []
    i = _skip(text, start + 1)
    if text[i] == "}":
        return found
    while True:
        key_start = i
        key, i = _DECODER.raw_decode(text, i)
        i = _skip(text, i)
        if text[i] != ":":
            raise ValueError(f"expected ':' at offset {i}")
        value_start = _skip(text, i + 1)
        value_end = _value_end(text, value_start)
        found.append(Member(str(key), key_start, value_start, value_end))
        i = _skip(text, value_end)
        if text[i] == "}":
            return found
        if text[i] != ",":
            raise ValueError(f"expected ',' or '}}' at offset {i}")
        i = _skip(text, i + 1)


def _object_end(text: str, start: int) -> int:
    """The offset of the ``}`` closing the object at ``start``."""
    return _value_end(text, start) - 1


def value_span(text: str, path: list[str]) -> tuple[int, int] | None:
    """Where the value at ``path`` (keys of nested objects) is in ``text``: (start, end), or
    None when a key is missing or leads through something that is not an object. The last
    of duplicate keys counts, as ``json.loads`` reads it."""
    start = _skip(text, 0)
    end = _value_end(text, start)
    for key in path:
        if text[start] != "{":
            return None
        found = [m for m in members(text, start) if m.key == key]
        if not found:
            return None
        start, end = found[-1].value_start, found[-1].value_end
    return start, end


def _newline(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def _line_indent(text: str, i: int) -> str:
    """The whitespace that starts the line ``i`` is on."""
    line = text.rfind("\n", 0, i) + 1
    j = line
    while j < i and text[j] in " \t":
        j += 1
    return text[line:j]


def _indent_unit(text: str) -> str:
    """The file's indentation step: that of its first indented line (two spaces if none)."""
    for line in text.splitlines():
        stripped = line.lstrip(" \t")
        if stripped and len(stripped) < len(line):
            return line[: len(line) - len(stripped)]
    return "  "


def _render(value: Any, text: str, indent: str) -> str:
    """``value`` as JSON laid out like ``text``: over several lines (continuation lines
    starting with ``indent``) unless the file is on one line."""
    if "\n" not in text.strip():
        return json.dumps(value, ensure_ascii=False)
    out = json.dumps(value, ensure_ascii=False, indent=_indent_unit(text))
    return out.replace("\n", _newline(text) + indent)


def set_member(text: str, path: list[str], key: str, value: Any) -> str:
    """``text`` with ``key`` of the object at ``path`` set to ``value``; objects on the path
    that are missing are created. The object at each existing step must be an object."""
    span = value_span(text, path)
    if span is None:
        # Create the first missing step in its parent, with the rest nested inside it.
        for n in range(len(path) - 1, -1, -1):
            if value_span(text, path[:n]) is not None:
                nested: Any = {key: value}
                for step in reversed(path[n + 1 :]):
                    nested = {step: nested}
                return set_member(text, path[:n], path[n], nested)
        raise ValueError("the document is not an object")
    start, _end = span
    if text[start] != "{":
        raise ValueError(f"{'.'.join(path) or 'the document'} is not an object")
    existing = [m for m in members(text, start) if m.key == key]
    if existing:
        m = existing[-1]
        return (
            text[: m.value_start]
            + _render(value, text, _line_indent(text, m.key_start))
            + text[m.value_end :]
        )
    close = _object_end(text, start)
    all_members = members(text, start)
    one_line = "\n" not in text.strip()
    name = json.dumps(key, ensure_ascii=False)
    if all_members:
        last = all_members[-1]
        indent = _line_indent(text, last.key_start)
        if one_line or "\n" not in text[start : last.key_start]:
            sep = ", "  # the object is on one line: so is the new member
        else:
            sep = "," + _newline(text) + indent
        insert = f"{sep}{name}: {_render(value, text, indent)}"
        return text[: last.value_end] + insert + text[last.value_end :]
    if one_line:
        return text[: start + 1] + f"{name}: {_render(value, text, '')}" + text[close:]
    outer = _line_indent(text, start)
    indent = outer + _indent_unit(text)
    nl = _newline(text)
    body = f"{nl}{indent}{name}: {_render(value, text, indent)}{nl}{outer}"
    return text[: start + 1] + body + text[close:]


def remove_member(text: str, path: list[str], key: str) -> str:
    """``text`` without ``key`` of the object at ``path`` (unchanged when it is not there):
    the member and the separator before it (after it, for the first one) go."""
    span = value_span(text, path)
    if span is None or text[span[0]] != "{":
        return text
    start = span[0]
    found = members(text, start)
    for i in range(len(found) - 1, -1, -1):
        m = found[i]
        if m.key != key:
            continue
        if len(found) == 1:
            return text[: start + 1] + text[_object_end(text, start) :]
        if i > 0:
            return text[: found[i - 1].value_end] + text[m.value_end :]
        return text[: m.key_start] + text[found[1].key_start :]
    return text
