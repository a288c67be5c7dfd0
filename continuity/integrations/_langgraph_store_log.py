"""The LangGraph store's items as records in one continuity thread, and the projection that
reads them back (ADR: a LangGraph BaseStore on continuity).

Each ``put`` is a ``langgraph.store.item`` record whose key is the item's ``[namespace, key]``
(JSON) and whose data is the item's value and its bookkeeping; a delete is the same record
with ``{"deleted": reason}`` (a tombstone); a TTL refresh is a ``langgraph.store.touch``
record. The latest record of a key is the item. Nothing is rewritten: :class:`ItemLog` keeps
the live items of one thread in the process, brought up to the log's end by reading only the
frames added since it last looked (checked against the chain digest it stopped at, so a log
that is not the one it read is read again from the start). It is a cache: a new process
rebuilds it from the log.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final

import msgspec
import numpy as np
import numpy.typing as npt

from continuity import frames as fr
from continuity.context import records
from continuity.errors import BadFrame
from continuity.retrieval.documents import KIND_MESSAGE, Doc
from continuity.retrieval.terms import tokenize
from continuity.store.base import Head, Thread

__all__ = [
    "ITEM",
    "META_STORE",
    "TOUCH",
    "Entry",
    "ItemLog",
    "item_key",
    "matches_filter",
    "matches_namespace",
    "record_frame",
]

ITEM: Final = "langgraph.store.item"
TOUCH: Final = "langgraph.store.touch"
META_STORE: Final = "langgraph.store"
"""The meta key of frame 0 that marks a thread as a LangGraph store's."""

_encoder: Final = msgspec.json.Encoder()
_decoder: Final = msgspec.json.Decoder()

Namespace = tuple[str, ...]


def item_key(namespace: Namespace, key: str) -> str:
    """The record key of an item: ``[[labels…], key]`` as JSON (a label may hold any
    character but ``.``; JSON keeps the namespace and the key apart whatever they hold)."""
    return _encoder.encode([list(namespace), key]).decode()


def record_frame(thread: Thread, kind: str, key: str, data: Any) -> fr.RecordAppended:
    """A record frame of ``data`` (:func:`continuity.context.records.record_frame`); a value
    that is not JSON is a ``TypeError``, as LangGraph's stores raise it."""
    try:
        return records.record_frame(thread, kind, key, data)
    except BadFrame as exc:
        raise TypeError(f"a LangGraph store value must be JSON: {exc}") from None


class Entry:
    """A live item as the log says it is, with what search derives from it (kept lazily)."""

    __slots__ = (
        "created_ms",
        "doc_terms",
        "index",
        "key",
        "namespace",
        "refreshed_ms",
        "seq",
        "ttl",
        "updated_ms",
        "value",
        "vector_ref",
        "vectors",
    )

    def __init__(
        self, namespace: Namespace, key: str, seq: int, ts_ms: int, data: Mapping[str, Any]
    ) -> None:
        self.namespace = namespace
        self.key = key
        self.seq = seq
        self.value: dict[str, Any] = data["value"]
        self.created_ms: int = data.get("created", ts_ms)
        self.updated_ms = ts_ms
        self.refreshed_ms = ts_ms
        self.ttl: float | None = data.get("ttl")
        self.index: list[str] | bool | None = data.get("index")
        self.vector_ref: dict[str, Any] | None = data.get("vectors")
        self.vectors: npt.NDArray[np.float32] | None = None
        self.doc_terms: list[str] | None = None

    def copy_of_value(self) -> dict[str, Any]:
        """The value, a copy of its own for the caller (who may change it)."""
        copy: dict[str, Any] = _decoder.decode(_encoder.encode(self.value))
        return copy

    def expires_ms(self) -> float:
        """When the item expires (``inf``: never)."""
        if self.ttl is None:
            return math.inf
        return self.refreshed_ms + self.ttl * 60_000

    def doc(self, texts: Iterable[str]) -> Doc:
        """The item as a search document (its seq names it), from ``texts`` the first time."""
        if self.doc_terms is None:
            self.doc_terms = [t for text in texts for t in tokenize(text)]
        tf = Counter(self.doc_terms)
        return Doc(seq=self.seq, kind=KIND_MESSAGE, role=0, length=len(self.doc_terms), tf=tf)


class ItemLog:
    """The live items of a store thread, caught up with its log on :meth:`catch_up`."""

    def __init__(self, thread: Thread) -> None:
        self.thread = thread
        self.items: dict[tuple[Namespace, str], Entry] = {}
        self.by_namespace: dict[Namespace, dict[str, Entry]] = {}
        """The same entries by namespace, each namespace's in put order."""
        self.head: Head | None = None

    def catch_up(self) -> Head | None:
        """Read what the log gained since the last call; return its head."""
        head = self.thread.head()
        if head == self.head:
            return head
        if head is None or self.head is None or head.seq < self.head.seq:
            self._reset()
        start = 0 if self.head is None else self.head.seq
        lines = self.thread.read_lines(from_seq=start, to_seq=None if head is None else head.seq)
        for seq, line in lines:
            if self.head is not None and seq == self.head.seq:
                digest = fr.stored_digest(line)
                if digest is None or digest.hex() != self.head.digest:
                    self._reset()  # not the log this projection read: read it again
                    return self.catch_up()
                continue
            self._apply(seq, line)
        self.head = head
        return head

    def _reset(self) -> None:
        self.items = {}
        self.by_namespace = {}
        self.head = None

    def _apply(self, seq: int, line: bytes) -> None:
        frame = self.thread.decode(seq, line)
        if seq == 0:
            self._check_first(frame)
        if not isinstance(frame, fr.RecordAppended) or frame.kind not in (ITEM, TOUCH):
            return
        labels, key = _decoder.decode(frame.key)
        ident = (tuple(labels), key)
        if frame.kind == TOUCH:
            found = self.items.get(ident)
            if found is not None:
                found.refreshed_ms = max(found.refreshed_ms, frame.ts_ms)
            return
        data = frame.data
        if frame.artifact_id is not None:
            data = _decoder.decode(self.thread.store.artifacts.get(frame.artifact_id))
        self.items.pop(ident, None)
        in_namespace = self.by_namespace.setdefault(ident[0], {})
        in_namespace.pop(key, None)  # a put moves the item to the end: put order
        if data.get("deleted") is None:
            entry = Entry(ident[0], key, seq, frame.ts_ms, data)
            self.items[ident] = in_namespace[key] = entry
        elif not in_namespace:
            del self.by_namespace[ident[0]]

    def _check_first(self, frame: fr.Frame) -> None:
        if not (isinstance(frame, fr.ThreadCreated) and META_STORE in frame.meta):
            raise BadFrame(
                f"thread {self.thread.id!r} is not a LangGraph store's (its frame 0 is not "
                f"the thread_created a ContinuityStore writes): give the store another thread_id"
            )

    def live(self, prefix: Namespace, now_ms: float, omit_expired: bool) -> list[Entry]:
        """The items of the namespaces that start with ``prefix``, newest put first (expired
        ones left out when ``omit_expired``): O(namespaces + their items)."""
        n = len(prefix)
        found = [
            entry
            for ns, entries in self.by_namespace.items()
            if ns[:n] == prefix
            for entry in entries.values()
            if not (omit_expired and entry.expires_ms() <= now_ms)
        ]
        found.sort(key=lambda e: -e.seq)
        return found

    def namespaces(self, now_ms: float, omit_expired: bool) -> Iterator[Namespace]:
        """The namespaces that hold a live item."""
        for ns, entries in self.by_namespace.items():
            if not omit_expired or any(e.expires_ms() > now_ms for e in entries.values()):
                yield ns


def matches_namespace(namespace: Namespace, path: tuple[str, ...], *, suffix: bool) -> bool:
    """Whether ``namespace`` starts (or ends, ``suffix``) with ``path``, ``"*"`` matching any
    one label."""
    if len(namespace) < len(path):
        return False
    labels = namespace[len(namespace) - len(path) :] if suffix else namespace[: len(path)]
    return all(p == "*" or p == label for p, label in zip(path, labels, strict=True))


_OPERATORS: Final = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")


def matches_filter(value: Mapping[str, Any], filter: Mapping[str, Any]) -> bool:
    """Whether an item's value passes a LangGraph search filter: each key's value equal to the
    filter's (a nested dict: each of its keys, recursively; a list: element by element), or
    meeting every operator of an ``{"$op": operand}`` dict ($eq, $ne, $gt, $gte, $lt, $lte)."""
    return all(_matches(value.get(k), wanted) for k, wanted in filter.items())


def _matches(actual: Any, wanted: Any) -> bool:
    if isinstance(wanted, Mapping):
        if any(isinstance(k, str) and k.startswith("$") for k in wanted):
            return all(_compare(actual, op, operand) for op, operand in wanted.items())
        return isinstance(actual, Mapping) and all(
            _matches(actual.get(k), w) for k, w in wanted.items()
        )
    if isinstance(wanted, (list, tuple)):
        return (
            isinstance(actual, (list, tuple))
            and len(actual) == len(wanted)
            and all(_matches(a, w) for a, w in zip(actual, wanted, strict=True))
        )
    return bool(actual == wanted)


def _compare(actual: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return bool(actual == operand)
    if op == "$ne":
        return bool(actual != operand)
    if op not in _OPERATORS:
        raise ValueError(
            f"unsupported filter operator {op!r}: a LangGraph store filter knows "
            f"{', '.join(_OPERATORS)}"
        )
    a, b = _orderable(actual), _orderable(operand)
    if a is None or b is None or isinstance(a, str) is not isinstance(b, str):
        return False  # a missing field, or a number against a string, is in no order
    order = _order(a, b)
    if op == "$gt":
        return order > 0
    if op == "$gte":
        return order >= 0
    if op == "$lt":
        return order < 0
    return order <= 0


def _order(a: float | str, b: float | str) -> int:
    if isinstance(a, str) and isinstance(b, str):
        return (a > b) - (a < b)
    x, y = float(a), float(b)
    return (x > y) - (x < y)


def _orderable(v: Any) -> float | str | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        return float(v)
    return v if isinstance(v, str) else None
