"""A LangGraph saver's checkpoint values redacted before they are stored (issue 40).

The saver keeps what LangGraph's serializer made of a value (``JsonPlusSerializer``: msgpack,
with LangChain messages, pydantic models and dataclasses as extension types whose data is
msgpack again) as base64 in the log's records or as an artifact. Neither is text a store's
:class:`~continuity.redaction.Redactor` can read, so on a redacting store the saver serializes
through :class:`RedactingSerializer`: the bytes are unpacked (extension data too, recursively),
every string is redacted as a record's data is (a string under a key that names a secret goes
whole), and the value is packed again only when something was found — the same structure and
types, so LangGraph loads it as before, with ``[REDACTED:<rule>]`` where the secret was. A
kind the saver cannot read (an encrypting serializer's, pickle) is stored as it came: a cipher
keeps its plaintext off the disk already.
"""

from __future__ import annotations

import json
from typing import Any, Final

import ormsgpack
from langgraph.checkpoint.serde.base import SerializerProtocol

from continuity.redaction import Redactor

__all__ = ["RedactingSerializer", "redacting"]

_OPTIONS: Final = ormsgpack.OPT_NON_STR_KEYS


class _Ext:
    """An extension type as unpacked (``ormsgpack.Ext`` does not show its members; not a
    dataclass, which ``ormsgpack`` would pack as a map)."""

    __slots__ = ("data", "tag")

    def __init__(self, tag: int, data: bytes) -> None:
        self.tag = tag
        self.data = data


def _unpack(raw: bytes) -> Any:
    return ormsgpack.unpackb(raw, ext_hook=_Ext, option=_OPTIONS)


def _packable(value: object) -> ormsgpack.Ext:
    if isinstance(value, _Ext):
        return ormsgpack.Ext(value.tag, value.data)
    raise TypeError(f"cannot pack {type(value).__name__}")


def _pack(value: Any) -> bytes:
    return ormsgpack.packb(value, default=_packable, option=_OPTIONS)


class RedactingSerializer(SerializerProtocol):
    """``inner``'s bytes with every string of the value redacted by ``redactor``; loading is
    ``inner``'s."""

    def __init__(self, inner: SerializerProtocol, redactor: Redactor) -> None:
        self.inner = inner
        self.redactor = redactor

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        kind, raw = self.inner.dumps_typed(obj)
        return kind, self.redact(kind, raw)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        return self.inner.loads_typed(data)

    def redact(self, kind: str, raw: bytes) -> bytes:
        """``raw`` (of serializer kind ``kind``) without secrets; ``raw`` itself when none."""
        if kind == "msgpack":
            try:
                value = _unpack(raw)
            except (ormsgpack.MsgpackDecodeError, ValueError, TypeError):
                return raw
            new, n = self._walk(value)
            return _pack(new) if n else raw
        if kind == "json":
            try:
                value = json.loads(raw)
            except ValueError:
                return raw
            new, n = self.redactor.redact_json(value)
            return json.dumps(new, ensure_ascii=False).encode() if n else raw
        if kind in ("bytes", "bytearray"):
            return self.redactor.redact_bytes(raw)[0]
        return raw

    def _walk(self, v: Any) -> tuple[Any, int]:
        if isinstance(v, str):
            return self.redactor.redact_text(v)
        if isinstance(v, _Ext):
            return self._ext(v)
        if isinstance(v, bytes):
            return self.redactor.redact_bytes(v)
        if isinstance(v, list):
            total = 0
            items = []
            for x in v:
                new, n = self._walk(x)
                items.append(new)
                total += n
            return (items, total) if total else (v, 0)
        if isinstance(v, dict):
            total = 0
            members = {}
            for k, x in v.items():
                if isinstance(x, str) and isinstance(k, str):
                    # a string under a key that names a secret goes whole, as in a record
                    one, n = self.redactor.redact_value({k: x})
                    new = one[k]
                else:
                    new, n = self._walk(x)
                members[k] = new
                total += n
            return (members, total) if total else (v, 0)
        return v, 0

    def _ext(self, v: _Ext) -> tuple[Any, int]:
        """An extension type (an object LangGraph rebuilds) whose data is msgpack: its strings
        redacted; other extension data (a datetime's, …) as it is."""
        try:
            inner = _unpack(v.data)
        except (ormsgpack.MsgpackDecodeError, ValueError, TypeError):
            return v, 0
        new, n = self._walk(inner)
        return (_Ext(v.tag, _pack(new)), n) if n else (v, 0)


def redacting(serde: SerializerProtocol, redactor: object) -> SerializerProtocol:
    """``serde`` redacting through ``redactor`` when it is a :class:`Redactor` (a store's
    ``redactor`` may be any frame function: then ``serde`` as it is)."""
    return RedactingSerializer(serde, redactor) if isinstance(redactor, Redactor) else serde
