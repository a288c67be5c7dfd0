"""What a thread's derived data holds, and how frames are sorted into it (ADR 0003, 0025).

Every backend that keeps derived data keeps the same projections of its log: message ordinals
(seq, token estimate, role, message id), one :class:`CheckpointEntry` per checkpoint frame,
one :class:`MarkEntry` per record or retraction, and the default anchor (the last frame that
can change a selection). :func:`sort_entries` is the one function that sorts frames into those
entries, whether they come as probes of stored lines (:func:`probe_lines`, :func:`sort_probes`:
the file caches of :mod:`continuity.caches.thread_index`, and :func:`derive_lines` for a
server's derived tables, :mod:`continuity.store.postgres.derived`) or decoded whole
(:func:`sort_frames`: ``verify``, which decodes every frame anyway): so they cannot drift apart.

:class:`DerivedIndex` is what a backend that keeps them as queryable rows offers readers
(:meth:`continuity.store.base.Thread.derived`): the context layer reads a thread through it in
O(k) without knowing the backend. This module is part of the store interface (ADR 0012).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, NamedTuple, NoReturn, Protocol, cast

import msgspec

from continuity import frames as fr
from continuity.errors import CorruptFrame

__all__ = [
    "NOT_ANCHORS",
    "ROLE_CODES",
    "CheckpointEntry",
    "CheckpointFields",
    "Derived",
    "DerivedIndex",
    "DerivedState",
    "Entries",
    "FrameFields",
    "MarkEntry",
    "MessageRow",
    "Probe",
    "clip_u32",
    "derive_lines",
    "frame_type",
    "mark_of",
    "probe_lines",
    "sort_entries",
    "sort_frames",
    "sort_probes",
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


class CheckpointFields(Protocol):
    """The fields of a ``compaction_checkpoint_created`` frame an entry keeps, by the names the
    frame gives them (the frame decoded whole and its :class:`Probe` both have them)."""

    @property
    def seq(self) -> int: ...
    @property
    def to_seq(self) -> int: ...
    @property
    def checkpoint_id(self) -> str: ...
    @property
    def cut_rule_id(self) -> str: ...
    @property
    def summary_kind(self) -> str: ...
    @property
    def summary_artifact_id(self) -> str: ...


class FrameFields(CheckpointFields, Protocol):
    """The fields of a frame derived entries are made of, by the names the frames give them: a
    :class:`Probe` has every one, a frame decoded whole those of its type — the only ones read
    for it (:func:`sort_entries` goes by the frame's type)."""

    @property
    def role(self) -> str: ...
    @property
    def tokens(self) -> int: ...
    @property
    def message_id(self) -> str | None: ...
    @property
    def kind(self) -> str: ...
    @property
    def key(self) -> str: ...
    @property
    def spans(self) -> Sequence[fr.SeqSpan]: ...


class CheckpointEntry(msgspec.Struct, frozen=True):
    """The projection of a ``compaction_checkpoint_created`` frame kept in the index."""

    seq: int
    to_seq: int
    checkpoint_id: str
    cut_rule_id: str
    summary_kind: str
    summary_artifact_id: str

    @classmethod
    def of(cls, frame: CheckpointFields) -> CheckpointEntry:
        """The entry of a checkpoint frame or its probe (which must carry its seq)."""
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
        return mark_of(frame_type(frame), cast("FrameFields", frame))


def mark_of(type_: str, frame: FrameFields) -> MarkEntry | None:
    """The entry of a frame of type ``type_`` (a record or a retraction; None for the others)."""
    if type_ == "record_appended":
        return MarkEntry(frame.seq, "record", frame.kind, frame.key)
    if type_ == "messages_retracted":
        return MarkEntry(
            frame.seq, "retraction", spans=[(s.from_seq, s.to_seq) for s in frame.spans]
        )
    return None


_TYPE_OF: Final[dict[type, str]] = {}


def frame_type(frame: fr.Frame) -> str:
    """A frame's type, as its line names it (``"message_appended"``…)."""
    cls = type(frame)
    found = _TYPE_OF.get(cls)
    if found is None:
        found = _TYPE_OF[cls] = str(cls.__struct_config__.tag)
    return found


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


def probe_lines(
    thread_id: str, lines: Sequence[bytes], first_seq: int, starts: Sequence[int] | None = None
) -> list[Probe]:
    """The probes of stored ``lines`` (each without its newline) holding the frames from
    ``first_seq`` on. :class:`CorruptFrame` names the first line that does not decode or carries
    another seq, at its byte offset ``starts[i]`` (-1 without ``starts``)."""
    try:
        found = _probes.decode(b"[" + b",".join(lines) + b"]")
    except (msgspec.DecodeError, UnicodeDecodeError):
        _raise_first_undecodable(thread_id, lines, first_seq, starts)
    seqs = [p.seq for p in found]
    if seqs != list(range(first_seq, first_seq + len(found))):
        bad = next(i for i, seq in enumerate(seqs) if seq != first_seq + i)
        raise CorruptFrame(
            thread_id,
            first_seq + bad,
            -1 if starts is None else starts[bad],
            f"seq {seqs[bad]} where {first_seq + bad} belongs",
        )
    return found


def _raise_first_undecodable(
    thread_id: str, lines: Sequence[bytes], first_seq: int, starts: Sequence[int] | None
) -> NoReturn:
    for i, line in enumerate(lines):
        try:
            _probe_one.decode(line)
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:
            at = -1 if starts is None else starts[i]
            raise CorruptFrame(thread_id, first_seq + i, at, f"does not decode: {exc}") from None
    at = -1 if starts is None else starts[0]
    raise CorruptFrame(thread_id, first_seq, at, "a chunk of the log does not decode")


def clip_u32(n: int) -> int:
    # A message's token estimate is the caller's to give; a record field must not overflow on it.
    return n if 0 <= n <= U32_MAX else min(max(n, 0), U32_MAX)


class Entries(NamedTuple):
    """A run of frames sorted into the entries derived data keeps (:func:`sort_entries`)."""

    messages: list[FrameFields]
    """The message frames: a backend keeps each one's seq, token estimate (:func:`clip_u32`),
    role (:data:`ROLE_CODES`) and, where it can be asked for, message id."""
    checkpoints: list[CheckpointEntry]
    marks: list[MarkEntry]
    anchor_seq: int | None
    """The last frame of the run that can change a selection (None: none does)."""


def sort_entries(types: Sequence[str], frames: Sequence[FrameFields]) -> Entries:
    """Sort a run of frames (``types[i]`` is the type of ``frames[i]``) into derived entries:
    the messages, a :class:`CheckpointEntry` for each checkpoint, a :class:`MarkEntry` for each
    record or retraction, and the default anchor. The one place where derived data tells frame
    types apart, whatever the frames come as (:func:`sort_probes`, :func:`sort_frames`)."""
    messages: list[FrameFields] = []
    checkpoints: list[CheckpointEntry] = []
    marks: list[MarkEntry] = []
    anchor: int | None = None
    for type_, frame in zip(types, frames, strict=True):
        if type_ not in NOT_ANCHORS:
            anchor = frame.seq
        if type_ == "message_appended":
            messages.append(frame)
        elif type_ == "compaction_checkpoint_created":
            checkpoints.append(CheckpointEntry.of(frame))
        elif (mark := mark_of(type_, frame)) is not None:
            marks.append(mark)
    return Entries(messages, checkpoints, marks, anchor)


def sort_probes(found: Sequence[Probe]) -> Entries:
    """:func:`sort_entries` of the probes of stored lines."""
    return sort_entries([p.type for p in found], found)


def sort_frames(frames: Sequence[fr.Frame]) -> Entries:
    """:func:`sort_entries` of frames decoded whole (each has the fields its type is read for)."""
    return sort_entries([frame_type(f) for f in frames], cast("Sequence[FrameFields]", frames))


class MessageRow(NamedTuple):
    ordinal: int
    seq: int
    tokens: int
    """The token estimate, clipped to an unsigned 32-bit field as the file index keeps it."""
    role: int
    message_id: str | None


class Derived(NamedTuple):
    """The derived entries of a run of frames, with its messages as rows."""

    messages: list[MessageRow]
    checkpoints: list[CheckpointEntry]
    marks: list[MarkEntry]
    anchor_seq: int | None
    """The last frame of the run that can change a selection (None: none does)."""


def derive_lines(
    thread_id: str, lines: Sequence[bytes], first_seq: int, first_ordinal: int
) -> Derived:
    """The derived entries of stored ``lines`` (sealed, without newlines) holding the frames
    from ``first_seq`` on, with message rows numbered from ``first_ordinal`` (what a backend
    that keeps them as rows stores). :class:`CorruptFrame` when a line does not decode or
    carries another seq."""
    entries = sort_probes(probe_lines(thread_id, lines, first_seq))
    role = ROLE_CODES.get
    rows = [
        MessageRow(ordinal, m.seq, clip_u32(m.tokens), role(m.role, 0), m.message_id)
        for ordinal, m in enumerate(entries.messages, first_ordinal)
    ]
    return Derived(rows, entries.checkpoints, entries.marks, entries.anchor_seq)


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
