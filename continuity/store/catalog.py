"""A thread's catalog row, and the catalog a backend keeps itself (part of the store interface).

:class:`CatalogRow` is what the store-wide listings (``continuity threads``, ``sessions``,
``stats``, the viewer's threads page, the session-start pointer) show of one thread. A store
whose logs are bytes gets its rows from :mod:`continuity.caches.catalog` (a file checked
against each log's size and last digest); a server backend keeps them itself, as rows written in
the append's own transaction (:meth:`~continuity.store.base.BaseStore.catalog`), and answers a
listing with one query.

Such a backend folds each batch of stored lines into a :class:`CatalogPart` with
:func:`catalog_part` (pure: the lines in, their counts and ends out) and adds it to the row it
has (:func:`add_part` says how). Counts add, the last frame's facts replace, the first frame's
facts stay: the sum is associative, so a row built by any sequence of appends equals one
rebuilt from the whole log in one part (:func:`row_of_part`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Final, NamedTuple, Protocol

import msgspec

from continuity import frames as fr
from continuity.agents.table import agent_of_session, is_own_compaction
from continuity.errors import ContinuityError, CorruptFrame
from continuity.redaction import META_KEY, redaction_count

__all__ = [
    "CatalogPart",
    "CatalogRow",
    "CatalogRows",
    "StoreCatalog",
    "add_part",
    "catalog_part",
    "gated_last_message",
    "row_of_part",
]

_REDACTED: Final = b'"' + META_KEY.encode() + b'":"'


class CatalogRow(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One thread as the store-wide listings show it."""

    thread_id: str
    log_bytes: int
    """The log's size (when the row is kept: its committed end too)."""
    frames: int
    head_digest: str
    """The last frame's digest."""
    last_active_ms: int
    """The last frame's time."""
    first_ms: int = 0
    """The first frame's time."""
    last_message_ms: int | None = None
    """The last message's time (None: no message); only read for agents' sessions
    (:func:`gated_last_message`)."""
    created: bool = True
    """Whether the first frame is a ``thread_created``."""
    source: str = ""
    """``meta["source"]`` of the first frame."""
    title: str | None = None
    parent_thread_id: str | None = None
    project: str = ""
    git_branch: str = ""
    messages: int = 0
    checkpoints: int = 0
    compactions: int = 0
    """Checkpoints that record an agent's own compaction (Claude Code's, Codex's, …:
    :func:`~continuity.agents.table.is_own_compaction`)."""
    redactions: int = 0


def gated_last_message(thread_id: str, created: bool, source: str, ms: int | None) -> int | None:
    """``ms`` for an agent's session (only ``sessions`` shows it: its rows carry it), else None."""
    return ms if created and agent_of_session(thread_id, source) is not None else None


class CatalogPart(msgspec.Struct, frozen=True, kw_only=True):
    """What a run of a thread's frames (``first_seq .. last_seq``) adds to its catalog row."""

    first_seq: int
    last_seq: int
    log_bytes: int
    """The lines' bytes, a newline each (what they add to the JSONL log)."""
    head_digest: str
    last_active_ms: int
    last_message_ms: int | None
    """The run's last message's time, for every thread (a row gates it by its first frame)."""
    messages: int
    checkpoints: int
    compactions: int
    redactions: int
    first_ms: int = 0
    """From here on: the first frame's facts, when the run starts at seq 0."""
    created: bool = False
    source: str = ""
    title: str | None = None
    parent_thread_id: str | None = None
    project: str = ""
    git_branch: str = ""


class _Probe(msgspec.Struct):
    """The fields a catalog row needs of a stored line; msgspec skips the rest of it."""

    type: str
    seq: int
    ts_ms: int = 0
    cut_rule_id: str = ""


_probes: Final = msgspec.json.Decoder(list[_Probe])
_probe_one: Final = msgspec.json.Decoder(_Probe)


def _probe(thread_id: str, lines: Sequence[bytes], first_seq: int) -> list[_Probe]:
    try:
        found = _probes.decode(b"[" + b",".join(lines) + b"]")
    except (msgspec.DecodeError, UnicodeDecodeError):
        for i, line in enumerate(lines):
            try:
                _probe_one.decode(line)
            except (msgspec.DecodeError, UnicodeDecodeError) as exc:
                at = first_seq + i
                raise CorruptFrame(thread_id, at, -1, f"does not decode: {exc}") from None
        raise CorruptFrame(thread_id, first_seq, -1, "a run of lines does not decode") from None
    for i, p in enumerate(found):
        at = first_seq + i
        if p.seq != at:
            raise CorruptFrame(thread_id, at, -1, f"seq {p.seq} where {at} belongs")
    return found


def _decoded(thread_id: str, seq: int, line: bytes) -> fr.Frame:
    try:
        return fr.decode_frame(line)
    except msgspec.DecodeError as exc:
        raise CorruptFrame(thread_id, seq, -1, f"does not decode: {exc}") from None


def _check_chain(thread_id: str, lines: Sequence[bytes], first_seq: int, parent: bytes) -> None:
    for i, line in enumerate(lines):
        sealed = fr.unseal(line)
        if sealed is None:
            raise CorruptFrame(thread_id, first_seq + i, -1, "not a sealed frame")
        if fr.chain(parent, sealed[0]) != sealed[1]:
            raise CorruptFrame(thread_id, first_seq + i, -1, "digest does not chain")
        parent = sealed[1]


def catalog_part(
    thread_id: str, lines: Sequence[bytes], first_seq: int, parent: bytes | None = None
) -> CatalogPart:
    """What the stored ``lines`` (sealed, without newlines; frames ``first_seq ..``, at least
    one) add to the thread's catalog row. With ``parent`` (the digest of frame ``first_seq -
    1``, or the genesis digest) the lines are checked against the chain too. A redaction is
    counted from the frame's ``meta`` (only lines holding the key are decoded whole, as the
    file catalog does). :class:`CorruptFrame` when a line does not decode or carries another
    seq."""
    if parent is not None:
        _check_chain(thread_id, lines, first_seq, parent)
    probes = _probe(thread_id, lines, first_seq)
    digest = fr.stored_digest(lines[-1][-fr.SEAL_SUFFIX_LEN :])
    if digest is None:
        raise CorruptFrame(thread_id, probes[-1].seq, -1, "not a sealed frame")
    messages = checkpoints = compactions = redactions = 0
    last_message_ms: int | None = None
    for p in probes:
        if p.type == "message_appended":
            messages += 1
            last_message_ms = p.ts_ms
        elif p.type == "compaction_checkpoint_created":
            checkpoints += 1
            compactions += is_own_compaction(p.cut_rule_id)
    for i, line in enumerate(lines):
        if _REDACTED in line:
            redactions += redaction_count(_decoded(thread_id, first_seq + i, line))
    part = CatalogPart(
        first_seq=first_seq,
        last_seq=probes[-1].seq,
        log_bytes=sum(map(len, lines)) + len(lines),
        head_digest=digest.hex(),
        last_active_ms=probes[-1].ts_ms,
        last_message_ms=last_message_ms,
        messages=messages,
        checkpoints=checkpoints,
        compactions=compactions,
        redactions=redactions,
    )
    if first_seq != 0:
        return part
    first = _decoded(thread_id, 0, lines[0])
    if not isinstance(first, fr.ThreadCreated):
        return msgspec.structs.replace(part, first_ms=first.ts_ms)
    meta = first.meta
    return msgspec.structs.replace(
        part,
        first_ms=first.ts_ms,
        created=True,
        source=meta.get("source", ""),
        title=first.title,
        parent_thread_id=first.parent_thread_id,
        project=meta.get("project", ""),
        git_branch=meta.get("git_branch", ""),
    )


def add_part(row: CatalogPart, part: CatalogPart) -> CatalogPart:
    """``row`` (frames ``0 .. row.last_seq``) with ``part`` (the frames right after) added:
    what a backend's statement does to its stored row (kept here as the definition, and for
    checks). Counts add, the last frame's facts replace, the first frame's facts stay."""
    if part.first_seq != row.last_seq + 1:
        raise ValueError(f"part starts at {part.first_seq}, the row ends at {row.last_seq}")
    return msgspec.structs.replace(
        row,
        last_seq=part.last_seq,
        log_bytes=row.log_bytes + part.log_bytes,
        head_digest=part.head_digest,
        last_active_ms=part.last_active_ms,
        last_message_ms=(
            part.last_message_ms if part.last_message_ms is not None else row.last_message_ms
        ),
        messages=row.messages + part.messages,
        checkpoints=row.checkpoints + part.checkpoints,
        compactions=row.compactions + part.compactions,
        redactions=row.redactions + part.redactions,
    )


def row_of_part(thread_id: str, part: CatalogPart) -> CatalogRow:
    """The catalog row of a thread whose frames ``0 .. part.last_seq`` added up to ``part``:
    the row the file catalog reads from the same log (:mod:`continuity.caches.catalog`)."""
    return CatalogRow(
        thread_id=thread_id,
        log_bytes=part.log_bytes,
        frames=part.last_seq + 1,
        head_digest=part.head_digest,
        last_active_ms=part.last_active_ms,
        first_ms=part.first_ms,
        last_message_ms=gated_last_message(
            thread_id, part.created, part.source, part.last_message_ms
        ),
        created=part.created,
        source=part.source,
        title=part.title,
        parent_thread_id=part.parent_thread_id,
        project=part.project,
        git_branch=part.git_branch,
        messages=part.messages,
        checkpoints=part.checkpoints,
        compactions=part.compactions,
        redactions=part.redactions,
    )


class CatalogRows(NamedTuple):
    """A backend's catalog as one query gave it: the rows that describe their threads' logs
    (sorted by thread id), the ids of the threads whose rows were behind and not brought up to
    date, and what went wrong bringing others up to date (by thread id)."""

    rows: list[CatalogRow]
    behind: list[str]
    problems: dict[str, ContinuityError]


class StoreCatalog(Protocol):
    """The catalog a backend keeps itself, current with every append
    (:meth:`~continuity.store.base.BaseStore.catalog`)."""

    def rows(self, *, catch_up: bool = True, project: str | None = None) -> CatalogRows:
        """Every thread's row, in thread id order. ``catch_up``: rows behind the log (frames
        written by older code) are brought up to date first (else their ids are returned as
        ``behind``, and nothing is written: a hook's read). ``project``: only the rows of
        threads whose first frame records that project (and those behind, whatever theirs)."""
        ...

    def rebuild(self, thread_ids: Collection[str] | None = None) -> int:
        """Drop the rows (of ``thread_ids``, or all) and build them again from the frames;
        the number of rows built."""
        ...

    def problems(
        self,
        thread_ids: Collection[str] | None = None,
        fresh: Mapping[str, tuple[CatalogRow, bool]] | None = None,
    ) -> list[tuple[str | None, str]]:
        """Rows that claim to describe their logs (they cover the head) but differ from what
        the frames give (``fresh``: rows already read from whole logs, with whether each log
        was at rest), as (thread id, what); ``thread_ids`` limits the check."""
        ...
