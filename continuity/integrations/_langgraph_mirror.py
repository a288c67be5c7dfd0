"""The graph's messages, mirrored as continuity messages (ADR 0023, issue 27).

A mirror thread (the LangGraph thread's own continuity thread for the root namespace; one
thread per subgraph for the others) always shows the conversation of the checkpoint put last:
on each ``put`` whose messages differ from what the thread shows, the difference is appended —
new ids as ``message_appended`` frames (the LangGraph id as the message id), ids gone
(``RemoveMessage``, or a branch left behind) retracted by seq, an id whose content changed
(replace-by-id) retracted and appended again — and a ``langgraph.mirror`` record closes the
change in the same batch. Its seq is the mirror's *position*.

What the thread shows is its *map* (per message: its id, a hash of its content, the seqs of its
frames). The map is not written whole on every change: each ``langgraph.mirror`` record holds
the change (``added`` entries, ``gone`` ids) and every :data:`FULL_EVERY` changes one holds the
whole map (an artifact), so reading a map back is one artifact and at most that many records.
In a process, :class:`LiveMirror` keeps the map of each mirror thread as of its position, with
the message objects it was made from: a put compares its messages with it by identity first,
so only the messages that are new (or new objects) are converted and hashed: O(new messages).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from operator import attrgetter, eq, is_
from typing import Any, Final

import blake3
import msgspec
from langchain_core.messages import BaseMessage, convert_to_openai_messages

from continuity import frames as fr
from continuity.caches.marks import merge_spans
from continuity.context.convert import from_openai
from continuity.context.records import Record, RecordView
from continuity.integrations._langgraph_log import MIRROR
from continuity.store.base import BaseStore

__all__ = [
    "FULL_EVERY",
    "Entry",
    "LiveMirror",
    "MirrorPlan",
    "digest_of",
    "is_messages",
    "load_map",
    "map_at",
    "plan",
]

_SOURCE: Final = "langgraph"
_CONTENT: Final = attrgetter("content")
FULL_EVERY: Final = 64
"""Every this many changes, a ``langgraph.mirror`` record holds the whole map."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One mirrored message: its id, content hash, and the seqs of its frames."""

    id: str
    hash: str
    seqs: tuple[int, ...]


@dataclass(slots=True)
class LiveMirror:
    """What a mirror thread shows as of ``position`` (the seq of its latest
    ``langgraph.mirror`` record; None: nothing was ever mirrored there): the map by id, how
    many changes since the last whole map (``depth``), and the message objects it was last
    compared with (by ``id()``: the object, its content object, its id and hash)."""

    position: int | None
    entries: dict[str, Entry]
    depth: int = 0
    seen: dict[int, tuple[BaseMessage, object, str, str]] = field(default_factory=dict)
    checkpoint_id: str | None = None
    """The checkpoint whose put made the change at ``position``."""
    objects: list[BaseMessage] = field(default_factory=list)
    """The messages of the last comparison, in order, and their contents: a list that starts
    with the same objects holding the same contents is compared from its end on."""
    contents: list[object] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    """How many messages without an id had each content hash (their ids count them)."""


@dataclass(slots=True)
class MirrorPlan:
    """What one put changes in a mirror: seqs to retract, messages to append, and the
    comparison's objects (for the next :class:`LiveMirror`)."""

    base: LiveMirror
    retract: list[Entry] = field(default_factory=list)
    appends: list[tuple[str, str, list[fr.MessageAppended]]] = field(default_factory=list)
    seen: dict[int, tuple[BaseMessage, object, str, str]] = field(default_factory=dict)
    objects: list[BaseMessage] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.retract and not self.appends

    def frames(
        self, store: BaseStore, start_seq: int, checkpoint_id: str, reason: str
    ) -> tuple[list[fr.Frame], LiveMirror]:
        """The frames of this change when the first gets ``start_seq`` (the retraction, the new
        messages, the ``langgraph.mirror`` record), and what the thread shows after them."""
        out: list[fr.Frame] = []
        entries = dict(self.base.entries)
        if self.retract:
            seqs = sorted(s for e in self.retract for s in e.seqs)
            merged = merge_spans((s, s) for s in seqs)
            spans = [fr.SeqSpan(from_seq=lo, to_seq=hi) for lo, hi in merged]
            ids = [e.id for e in self.retract]
            out.append(fr.MessagesRetracted(spans=spans, reason=reason, message_ids=ids))
            for e in self.retract:
                entries.pop(e.id, None)
        seq = start_seq + len(out)
        added: list[Entry] = []
        for mid, digest, frames in self.appends:
            entry = Entry(mid, digest, tuple(range(seq, seq + len(frames))))
            added.append(entry)
            entries[mid] = entry
            out.extend(frames)
            seq += len(frames)
        depth = self.base.depth + 1
        data: dict[str, Any] = {"checkpoint_id": checkpoint_id, "messages": len(entries)}
        if depth >= FULL_EVERY:
            data["map"] = _store_map(store, entries.values())
            depth = 0
        else:
            data["added"] = [[e.id, e.hash, list(e.seqs)] for e in added]
            data["gone"] = [e.id for e in self.retract]
        out.append(fr.RecordAppended(kind=MIRROR, data=data))
        contents = list(map(_CONTENT, self.objects))
        after = LiveMirror(
            seq, entries, depth, self.seen, checkpoint_id, self.objects, contents, self.counts
        )
        return out, after


def is_messages(value: object) -> bool:
    """Whether a channel value is a list of LangChain messages (what is mirrored)."""
    return isinstance(value, list) and all(map(isinstance, value, repeat(BaseMessage)))


def _store_map(store: BaseStore, entries: Iterable[Entry]) -> str:
    body = json.dumps([[e.id, e.hash, list(e.seqs)] for e in entries], separators=(",", ":"))
    return store.artifacts.put(body.encode())


def load_map(store: BaseStore, aid: str | None) -> dict[str, Entry]:
    if aid is None:
        return {}
    raw = json.loads(store.artifacts.get(aid))
    return {i: Entry(i, h, tuple(s)) for i, h, s in raw}


def map_at(store: BaseStore, view: RecordView, latest: Record | None) -> LiveMirror:
    """What the mirror thread of ``view`` shows as of its ``langgraph.mirror`` record
    ``latest`` (None: nothing): the last whole map at or before it, and the changes after."""
    if latest is None:
        return LiveMirror(None, {})
    changes: list[dict[str, Any]] = []
    base: dict[str, Entry] = {}
    for rec in view.records(MIRROR, "", at_or_before=latest.seq):
        if "added" not in rec.data:  # a whole map (or one written before changes were)
            base = load_map(store, rec.data.get("map"))
            break
        changes.append(rec.data)
    for change in reversed(changes):
        for gone in change["gone"]:
            base.pop(gone, None)
        for i, h, s in change["added"]:
            base[i] = Entry(i, h, tuple(s))
    return LiveMirror(latest.seq, base, len(changes), {}, latest.data.get("checkpoint_id"))


def digest_of(message: BaseMessage) -> tuple[dict[str, Any], str]:
    """A message's OpenAI form and the hash of it and its type."""
    openai = convert_to_openai_messages(message)
    body = json.dumps([message.type, openai], sort_keys=True, default=str)
    return openai, blake3.blake3(body.encode()).hexdigest()[:32]


def plan(
    store: BaseStore, live: LiveMirror, messages: Sequence[BaseMessage], ns: str = ""
) -> MirrorPlan:
    """Compare what a mirror thread shows (``live``) with a checkpoint's ``messages``. A
    message object the last comparison saw unchanged (the same object, the same content
    object) is not converted again."""
    result = MirrorPlan(live, objects=list(messages))
    k = len(live.objects)
    if k and len(messages) >= k and _same_prefix(messages[:k], live):
        # the messages of last time, and new ones after them (add_messages appends): only the
        # new ones are compared
        result.seen = dict(live.seen)
        wanted = set(live.entries)
        rest: Sequence[BaseMessage] = messages[k:]
        if not rest:
            return result
        counts = dict(live.counts)
    else:
        wanted = set()
        rest = messages
        counts = {}
    _compare(store, live, rest, ns, result, wanted, counts)
    for e in live.entries.values():
        if e.id not in wanted:
            result.retract.append(e)
    return result


def _same_prefix(head: Sequence[BaseMessage], live: LiveMirror) -> bool:
    """Whether ``head`` is the messages ``live`` was last compared with: the same objects
    holding the same content objects, or (a graph's state read back from its checkpoint at
    the start of a run) equal ones. C-speed checks, no conversion."""
    if all(map(is_, head, live.objects)):
        return all(map(is_, map(_CONTENT, head), live.contents))
    return all(map(eq, head, live.objects))


def _compare(
    store: BaseStore,
    live: LiveMirror,
    messages: Sequence[BaseMessage],
    ns: str,
    result: MirrorPlan,
    wanted: set[str],
    counts: dict[str, int],
) -> None:
    seen = live.seen
    for message in messages:
        known = seen.get(id(message))
        if known is not None and known[0] is message and known[1] is message.content:
            mid, digest = known[2], known[3]
            openai = None
        else:
            openai, digest = digest_of(message)
            mid = message.id if isinstance(message.id, str) and message.id else ""
            if not mid:
                # a message without an id (a reducer other than add_messages): its content is
                # its id
                n = counts[digest] = counts.get(digest, 0) + 1
                mid = f"lg-{digest[:24]}-{n}"
        if mid in wanted:  # the same id twice in one list: mirrored once
            continue
        wanted.add(mid)
        result.seen[id(message)] = (message, message.content, mid, digest)
        entry = live.entries.get(mid)
        if entry is not None and entry.hash == digest:
            continue
        if entry is not None:  # replaced by id: take the old one back, append the new one
            result.retract.append(entry)
        if openai is None:
            openai = digest_of(message)[0]
        result.appends.append((mid, digest, _frames(store, message, openai, mid, ns)))
    result.counts = counts


def _frames(
    store: BaseStore, message: BaseMessage, openai: dict[str, Any], mid: str, ns: str
) -> list[fr.MessageAppended]:
    frames = from_openai(openai, artifacts=store)
    replace = msgspec.structs.replace
    out = []
    for i, f in enumerate(frames):
        meta = {**f.meta, "langgraph.type": message.type}
        if message.name:
            meta["langgraph.name"] = message.name
        if ns:
            meta["langgraph.checkpoint_ns"] = ns
        out.append(
            replace(
                f,
                message_id=mid if i == 0 else f"{mid}#{i}",
                meta=meta,
                source=fr.SourceRef(system=_SOURCE, key=mid),
            )
        )
    return out
