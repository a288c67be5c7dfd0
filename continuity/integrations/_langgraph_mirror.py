"""The graph's messages, mirrored as continuity messages (ADR 0023).

On each root-namespace ``put`` whose messages channel changed, the checkpoint's messages are
compared with what is mirrored for its parent checkpoint — a *mirror map*: for each message,
in order, its LangGraph id, a hash of its content and the seqs of its frames, kept as one
artifact per change. New ids are appended (``message_appended``, the LangGraph id as the
message id); ids gone (``RemoveMessage``) are retracted (``messages_retracted``, by seq: no
search of the log); an id whose content changed (replace-by-id) is retracted and appended
again. A ``langgraph.mirror`` record closes each change, in the same batch, and its seq is
the mirror's position: a child whose parent's position is not the mirror thread's latest one
starts a continuity fork taken at that position (:func:`continuity.context.fork.fork`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import blake3
import msgspec
from langchain_core.messages import BaseMessage, convert_to_openai_messages

from continuity import frames as fr
from continuity.caches.marks import merge_spans
from continuity.context.convert import from_openai
from continuity.integrations._langgraph_log import MIRROR
from continuity.store.base import BaseStore

__all__ = ["Entry", "MirrorPlan", "is_messages", "load_map", "plan", "store_map"]

_SOURCE: Final = "langgraph"


@dataclass(frozen=True, slots=True)
class Entry:
    """One mirrored message: its id, content hash, and the seqs of its frames."""

    id: str
    hash: str
    seqs: tuple[int, ...]


@dataclass(slots=True)
class MirrorPlan:
    """What one put changes in the mirror: seqs to retract, messages to append."""

    retract_seqs: list[int] = field(default_factory=list)
    retract_ids: list[str] = field(default_factory=list)
    keep: list[Entry | None] = field(default_factory=list)
    """Per message of the new list: its entry when unchanged, None when it is appended."""
    appends: list[tuple[str, str, list[fr.MessageAppended]]] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.retract_seqs and not self.appends

    def frames(
        self, store: BaseStore, start_seq: int, checkpoint_id: str
    ) -> tuple[list[fr.Frame], str]:
        """The frames of this change when the first gets ``start_seq`` (retraction first, then
        the new messages, then the ``langgraph.mirror`` record), and the artifact id of the new
        map (stored here)."""
        out: list[fr.Frame] = []
        if self.retract_seqs:
            spans = [
                fr.SeqSpan(from_seq=lo, to_seq=hi)
                for lo, hi in merge_spans((s, s) for s in self.retract_seqs)
            ]
            reason = "langgraph: RemoveMessage or replaced by id"
            retraction = fr.MessagesRetracted(
                spans=spans, reason=reason, message_ids=self.retract_ids
            )
            out.append(retraction)
        seq = start_seq + len(out)
        added: list[Entry] = []
        for mid, digest, frames in self.appends:
            added.append(Entry(mid, digest, tuple(range(seq, seq + len(frames)))))
            out.extend(frames)
            seq += len(frames)
        new_map: list[Entry] = []
        it = iter(added)
        for kept in self.keep:
            new_map.append(kept if kept is not None else next(it))
        aid = store_map(store, new_map)
        out.append(
            fr.RecordAppended(
                kind=MIRROR,
                data={"checkpoint_id": checkpoint_id, "map": aid, "messages": len(new_map)},
            )
        )
        return out, aid


def is_messages(value: object) -> bool:
    """Whether a channel value is a list of LangChain messages (what is mirrored)."""
    return isinstance(value, list) and all(isinstance(m, BaseMessage) for m in value)


def store_map(store: BaseStore, entries: Sequence[Entry]) -> str:
    body = json.dumps([[e.id, e.hash, list(e.seqs)] for e in entries], separators=(",", ":"))
    return store.artifacts.put(body.encode())


def load_map(store: BaseStore, aid: str | None) -> list[Entry]:
    if aid is None:
        return []
    raw = json.loads(store.artifacts.get(aid))
    return [Entry(i, h, tuple(s)) for i, h, s in raw]


def plan(store: BaseStore, old: Sequence[Entry], messages: Sequence[BaseMessage]) -> MirrorPlan:
    """Compare the mirrored ``old`` map with a checkpoint's ``messages``."""
    by_id = {e.id: e for e in old}
    result = MirrorPlan()
    wanted: set[str] = set()
    counts: dict[str, int] = {}
    for message in messages:
        openai = convert_to_openai_messages(message)
        body = json.dumps([message.type, openai], sort_keys=True, default=str)
        digest = blake3.blake3(body.encode()).hexdigest()[:32]
        mid = message.id
        if not isinstance(mid, str) or not mid:
            # a message without an id (a reducer other than add_messages): its content is its id
            n = counts[digest] = counts.get(digest, 0) + 1
            mid = f"lg-{digest[:24]}-{n}"
        wanted.add(mid)
        entry = by_id.get(mid)
        if entry is not None and entry.hash == digest:
            result.keep.append(entry)
            continue
        if entry is not None:  # replaced by id: take the old one back, append the new one
            result.retract_seqs.extend(entry.seqs)
            result.retract_ids.append(mid)
        result.keep.append(None)
        result.appends.append((mid, digest, _frames(store, message, openai, mid)))
    for e in old:
        if e.id not in wanted:
            result.retract_seqs.extend(e.seqs)
            result.retract_ids.append(e.id)
    return result


def _frames(
    store: BaseStore, message: BaseMessage, openai: dict[str, Any], mid: str
) -> list[fr.MessageAppended]:
    frames = from_openai(openai, artifacts=store)
    replace = msgspec.structs.replace
    out = []
    for i, f in enumerate(frames):
        meta = {**f.meta, "langgraph.type": message.type}
        if message.name:
            meta["langgraph.name"] = message.name
        out.append(
            replace(
                f,
                message_id=mid if i == 0 else f"{mid}#{i}",
                meta=meta,
                source=fr.SourceRef(system=_SOURCE, key=mid),
            )
        )
    return out
