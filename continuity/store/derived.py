"""What a thread's derived data holds, and how a run of stored lines gives it (ADR 0003, 0025).

Every backend that keeps derived data keeps the same projections of its log: message ordinals
(seq, token estimate, role, message id), one :class:`CheckpointEntry` per checkpoint frame,
one :class:`MarkEntry` per record or retraction, and the default anchor (the last frame that
can change a selection). :func:`derive_lines` computes them from stored lines — the one
derivation the file caches (:mod:`continuity.caches.thread_index`) and a server's derived
tables (:mod:`continuity.store.postgres`) both use, so they cannot drift apart.

:class:`DerivedIndex` is what a backend that keeps them as queryable rows offers readers
(:meth:`continuity.store.base.Thread.derived`): the context layer reads a thread through it in
O(k) without knowing the backend. This module is part of the store interface (ADR 0012).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, NamedTuple, Protocol

import msgspec

from continuity import frames as fr
from continuity.errors import CorruptFrame

__all__ = [
    "NOT_ANCHORS",
    "ROLE_CODES",
    "CheckpointEntry",
    "Derived",
    "DerivedIndex",
    "DerivedState",
    "MarkEntry",
    "MessageRow",
    "Probe",
    "checkpoint_of",
    "clip_u32",
    "derive_lines",
    "mark_of",
    "probes",
]

ROLE_CODES: Final = {"user": 1, "assistant": 2, "system": 3}
U32_MAX: Final = 2**32 - 1

NOT_ANCHORS: Final = frozenset(
    {
        "context_selection_decided",
        "context_selection_repeated",
        "job_spawned",
        "job_ended",
        "record_appended",
    }
)
"""Frames that cannot change a selection: the default anchor passes over them."""


class CheckpointEntry(msgspec.Struct, frozen=True):
    """The projection of a ``compaction_checkpoint_created`` frame kept in the index."""

    seq: int
    to_seq: int
    checkpoint_id: str
    cut_rule_id: str
    summary_kind: str
    summary_artifact_id: str

    @classmethod
    def of(cls, frame: fr.CompactionCheckpointCreated) -> CheckpointEntry:
        """The entry of a checkpoint frame (which must carry its seq)."""
        return cls(
            frame.seq,
            frame.to_seq,
            frame.checkpoint_id,
            frame.cut_rule_id,
            frame.summary_kind,
            frame.summary_artifact_id,
        )


class MarkEntry(msgspec.Struct, frozen=True, omit_defaults=True):
    """The projection of a ``record_appended`` frame (``kind``, ``key``) or of a
    ``messages_retracted`` one (``spans``, as ``[from_seq, to_seq]`` pairs) in the index."""

    seq: int
    type: str
    kind: str = ""
    key: str = ""
    spans: list[tuple[int, int]] = []

    @classmethod
    def of(cls, frame: fr.Frame) -> MarkEntry | None:
        """The entry of a frame (which must carry its seq); None for frames without one."""
        if isinstance(frame, fr.RecordAppended):
            return cls(frame.seq, "record", frame.kind, frame.key)
        if isinstance(frame, fr.MessagesRetracted):
            spans = [(s.from_seq, s.to_seq) for s in frame.spans]
            return cls(frame.seq, "retraction", spans=spans)
        return None


class Probe(msgspec.Struct):
    """The fields derived data needs from a stored line; msgspec skips the rest of each line
    without building it."""

    type: str
    seq: int
    role: str = ""
    tokens: int = 0
    message_id: str | None = None
    to_seq: int = -1
    checkpoint_id: str = ""
    cut_rule_id: str = ""
    summary_kind: str = ""
    summary_artifact_id: str = ""
    kind: str = ""
    key: str = ""
    spans: list[fr.SeqSpan] = []


_probes: Final = msgspec.json.Decoder(list[Probe])
_probe_one: Final = msgspec.json.Decoder(Probe)


def probes(lines: Sequence[bytes]) -> list[Probe]:
    """The probes of stored lines (each without its newline); ``msgspec.DecodeError`` or
    ``UnicodeDecodeError`` when one does not decode."""
    return _probes.decode(b"[" + b",".join(lines) + b"]")


def probe_one(line: bytes) -> Probe:
    return _probe_one.decode(line)


def clip_u32(n: int) -> int:
    # A message's token estimate is the caller's to give; a record field must not overflow on it.
    return n if 0 <= n <= U32_MAX else min(max(n, 0), U32_MAX)


def checkpoint_of(p: Probe) -> CheckpointEntry:
    """The entry of a ``compaction_checkpoint_created`` probe."""
    return CheckpointEntry(
        p.seq, p.to_seq, p.checkpoint_id, p.cut_rule_id, p.summary_kind, p.summary_artifact_id
    )


def mark_of(p: Probe) -> MarkEntry | None:
    """The entry of a ``record_appended`` or ``messages_retracted`` probe; None otherwise."""
    if p.type == "record_appended":
        return MarkEntry(p.seq, "record", p.kind, p.key)
    if p.type == "messages_retracted":
        return MarkEntry(p.seq, "retraction", spans=[(s.from_seq, s.to_seq) for s in p.spans])
    return None


class MessageRow(NamedTuple):
    ordinal: int
    seq: int
    tokens: int
    """The token estimate, clipped to an unsigned 32-bit field as the file index keeps it."""
    role: int
    message_id: str | None


class Derived(NamedTuple):
    """The derived entries of a run of frames."""

    messages: list[MessageRow]
    checkpoints: list[CheckpointEntry]
    marks: list[MarkEntry]
    anchor_seq: int | None
    """The last frame of the run that can change a selection (None: none does)."""


def derive_lines(
    thread_id: str, lines: Sequence[bytes], first_seq: int, first_ordinal: int
) -> Derived:
    """The derived entries of stored ``lines`` (sealed, without newlines) holding the frames
    from ``first_seq`` on; message ordinals start at ``first_ordinal``. :class:`CorruptFrame`
    when a line does not decode or carries another seq."""
    try:
        found = probes(lines)
    except (msgspec.DecodeError, UnicodeDecodeError):
        for i, line in enumerate(lines):
            try:
                probe_one(line)
            except (msgspec.DecodeError, UnicodeDecodeError) as exc:
                raise CorruptFrame(
                    thread_id, first_seq + i, -1, f"does not decode: {exc}"
                ) from None
        raise
    messages: list[MessageRow] = []
    checkpoints: list[CheckpointEntry] = []
    marks: list[MarkEntry] = []
    anchor: int | None = None
    ordinal = first_ordinal
    role = ROLE_CODES.get
    for i, p in enumerate(found):
        if p.seq != first_seq + i:
            raise CorruptFrame(
                thread_id, first_seq + i, -1, f"seq {p.seq} where {first_seq + i} belongs"
            )
        t = p.type
        if t not in NOT_ANCHORS:
            anchor = p.seq
        if t == "message_appended":
            messages.append(
                MessageRow(ordinal, p.seq, clip_u32(p.tokens), role(p.role, 0), p.message_id)
            )
            ordinal += 1
        elif t == "compaction_checkpoint_created":
            checkpoints.append(checkpoint_of(p))
        else:
            mark = mark_of(p)
            if mark is not None:
                marks.append(mark)
    return Derived(messages, checkpoints, marks, anchor)


# --- what a backend with derived rows offers readers ---------------------------------------


class DerivedState(NamedTuple):
    """A thread's derived data as of one moment: the bound every later read keeps to."""

    head_seq: int
    """The last frame covered (-1: an empty or missing thread)."""
    messages: int
    """How many messages there are up to it (their ordinals are ``0 .. messages - 1``)."""
    anchor_seq: int
    """The default anchor (-1: no frame can change a selection)."""


class DerivedIndex(Protocol):
    """A thread's derived data as indexed rows (a backend's :meth:`Thread.derived`). Every read
    is an indexed lookup: O(log n) or O(k) in what it returns. Reads take a ``head`` (from
    :meth:`state`) and answer as of it, whatever was appended since."""

    def state(self) -> DerivedState:
        """The current state, after bringing rows that are behind the log up to it."""
        ...

    def messages(self, start: int, stop: int) -> list[tuple[int, int]]:
        """(seq, token estimate) of the messages with ordinals in ``[start, stop)``."""
        ...

    def count_upto(self, seq: int) -> int:
        """How many messages have a seq ≤ ``seq``."""
        ...

    def seq_of_message_id(self, message_id: str, head: int) -> int | None:
        """The seq of the latest message with the id at or before ``head``."""
        ...

    def checkpoints(self, head: int) -> list[CheckpointEntry]:
        """Every checkpoint at or before ``head``, in log order."""
        ...

    def latest_checkpoint(
        self, max_to_seq: int, anchor_seq: int, exclude: frozenset[str]
    ) -> CheckpointEntry | None:
        """The cumulative checkpoint at or before ``anchor_seq`` with the greatest ``to_seq <=
        max_to_seq`` (the later frame on a tie), skipping ``exclude``d ids."""
        ...

    def other_checkpoints(self, anchor_seq: int) -> list[CheckpointEntry]:
        """Checkpoints of other kinds than cumulative_v1 with seq and to_seq ≤ the anchor."""
        ...

    def retractions(self, head: int) -> tuple[list[MarkEntry], int]:
        """The retraction entries at or before ``head``, in log order, and the seq of the last
        record or retraction there (-1: none)."""
        ...

    def record_seqs(
        self, kind: str, key: str | None, at_or_before: int, limit: int | None
    ) -> list[int]:
        """The seqs of the records of ``kind`` (and ``key``) at or before ``at_or_before``,
        newest first, at most ``limit``."""
        ...

    def record_kinds(self, head: int) -> list[str]:
        """The record kinds at or before ``head``, sorted."""
        ...

    def rebuild(self) -> int:
        """Drop the thread's derived rows and derive them again from its frames; how many
        frames that read."""
        ...

    def problems(self) -> list[str]:
        """How the rows differ from a fresh derivation of the frames they cover (empty: none)."""
        ...
