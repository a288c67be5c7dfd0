"""Incremental, idempotent ingest of Claude Code transcripts into threads.

One thread per session (``cc-<session id>``), one per subagent or sidechain
(``cc-<session id>.agent-<agent id>``), linked to its parent by ``thread_created``. A cursor per
transcript file (in the cache) remembers how far the file was read, a hash of its head (to notice
a replaced file) and the source keys it recently wrote; every message carries its source line's
uuid, so re-reading a file — after a lost cursor, a shrunk or replaced file, or a crash between
the append and the cursor update — never duplicates anything: keys are re-derived from the log.

Work is proportional to the new bytes. The trailing response of an assistant turn is held back
until a later line shows it complete (one API response arrives as several lines), unless the
ingest is ``final`` (pre-compact, session end). Claude's own compaction — a ``compact_boundary``
then an ``isCompactSummary`` line — becomes a ``compaction_checkpoint_created`` whose summary
artifact is Claude's summary, so compile builds on it.

Secrets are redacted on the way in (:mod:`continuity.redaction`), by default with the rules of
``<store>/redaction.json`` (the built-in ones when there is none): message content before a
large tool output becomes an artifact, Claude's summary before it becomes one, and a session's
title. Each message says in ``meta["redacted"]`` how many it lost (the summary and the title
have no ``meta``: theirs are not counted).
"""

from __future__ import annotations

import _thread  # not threading: the hook path never needs to import it (0.5 ms)
import fcntl
import os
from datetime import datetime
from pathlib import Path
from typing import Final, Literal, TypeGuard

import blake3
import msgspec

from continuity import frames as fr
from continuity._fs import private_dirs, read_checked, write_checked
from continuity.agents.base.ingest import cache_dir, ingest_redactor
from continuity.agents.claude_code.transcript import (
    AssistantPart,
    CompactBoundary,
    CompactSummary,
    LegacySummary,
    ReadResult,
    Record,
    UserLine,
    read_records,
)
from continuity.agents.table import CLAUDE_CODE
from continuity.errors import note_rebuilt
from continuity.redaction import META_KEY, Redactor
from continuity.store.base import BaseStore, Thread

__all__ = [
    "SOURCE_SYSTEM",
    "IngestReport",
    "ingest_redactor",
    "ingest_transcript",
    "transcript_kind",
]

SOURCE_SYSTEM: Final = "claude-code"
ARTIFACT_THRESHOLD: Final = 16 * 1024
PREVIEW_CHARS: Final = 2000
_RECENT_KEYS: Final = 4096
_HEAD_BYTES: Final = 4096


class Cursor(msgspec.Struct, kw_only=True):
    """How far a transcript was ingested (a cache: losing it costs a re-read, never data)."""

    path: str
    offset: int = 0
    head_hash: str = ""
    heads: dict[str, int] = {}
    """Each thread's last seq when the cursor was written: frames after it are re-checked."""
    keys: list[str] = []
    """Recently written source keys (bounded), for replays of recent lines."""
    main_thread: str = ""
    last_message_seq: dict[str, int] = {}
    session_id: str = ""
    """The session a flat ``agent-<id>.jsonl`` belongs to, read from its first lines."""
    title: str = ""
    """A ``summary`` line read before the session's thread had a frame, kept for its creation."""
    scanned: int = 0
    """How far the file is known to hold no newline past ``offset`` (an unfinished last line
    seen by the last read): the next read does not scan those bytes again, however long."""


class IngestReport(msgspec.Struct):
    path: str
    threads: list[str] = msgspec.field(default_factory=list)
    messages: int = 0
    checkpoints: int = 0
    duplicates: int = 0
    """Lines skipped because the store already held them (archived before this ingest)."""
    repeated: int = 0
    """Lines skipped because they repeat the id of a line earlier in the same read: the file
    holds the same line twice (a resumed session's replay, or a file shaped by hand), so the
    first one was archived by this very ingest, not before it."""
    skipped: dict[str, int] = msgspec.field(default_factory=dict)
    bytes_read: int = 0
    restarted: str | None = None
    """Why the file was read from the start again (lost cursor, shrunk or replaced file)."""
    held_back: bool = False
    unreadable: list[int] = msgspec.field(default_factory=list)
    """Where the first unreadable lines of this read start (byte offsets in the file, a few:
    :data:`~continuity.agents.base.lines.UNREADABLE_KEPT`); ``skipped`` counts them all."""
    lost: int = 0
    """Complete lines this read could not archive (unreadable, or over the size cap)."""
    lost_at: list[str] = msgspec.field(default_factory=list)
    """The first of them, as ``file line N (why)``."""


def transcript_kind(path: Path) -> tuple[str, str | None]:
    """(session id, agent id or None) from a transcript's path and layout.

    ``<project>/<session>.jsonl`` is a session; ``<project>/<session>/subagents/agent-<id>.jsonl``
    (2.1.x) and ``<project>/agent-<id>.jsonl`` (2.0.x, session read from its lines) are subagents.
    """
    name = path.name[: -len(".jsonl")] if path.name.endswith(".jsonl") else path.name
    if name.startswith("agent-"):
        agent = name[len("agent-") :]
        if path.parent.name == "subagents":
            return path.parent.parent.name, agent
        return "", agent
    return name, None


def _ts_ms(stamp: str) -> int:
    if not stamp:
        return 0
    try:
        return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return 0


class _Marker(msgspec.Struct, frozen=True):
    """Where Claude's compaction falls among a thread's new frames: its checkpoint's ``to_seq``
    (the last message before it) is known only once those frames are appended."""

    summary: CompactSummary
    boundary: CompactBoundary | None


class _Batch:
    """New frames (and compaction markers) for one thread, in transcript order."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        self.frames: list[fr.Frame | _Marker] = []


class _Ingest:
    def __init__(
        self,
        store: BaseStore,
        path: Path,
        final: bool,
        thread_override: str | None,
        redactor: Redactor | None,
    ) -> None:
        self.store = store
        self.redactor = redactor
        self.path = path
        self.final = final
        self._untimed_ms: int | None = None
        self.session_id, self.agent_id = transcript_kind(path)
        self.thread_override = thread_override
        self.report = IngestReport(_printable(path))
        self.known: set[str] = set()
        self.loaded: set[str] = set()
        self.new_keys: list[str] = []
        self.fresh: set[str] = set()
        """The keys this read added to ``known`` (a line matching only these repeats one of
        the same read: it is counted as repeated, not as already archived)."""
        self._threads: dict[str, Thread] = {}

    def ts_ms(self, stamp: str) -> int:
        """A line's time; a line without one (an old or hand-made transcript) takes the
        transcript's last change, the best evidence of when it happened — never the time it is
        ingested, which would list a years-old session as the newest."""
        found = _ts_ms(stamp)
        if found:
            return found
        if self._untimed_ms is None:
            try:
                self._untimed_ms = self.path.stat().st_mtime_ns // 1_000_000
            except OSError:
                self._untimed_ms = 0
        return self._untimed_ms

    def thread(self, thread_id: str) -> Thread:
        """The handle of a thread this transcript feeds (made, and its id checked, once)."""
        handle = self._threads.get(thread_id)
        if handle is None:
            handle = self._threads[thread_id] = self.store.thread(thread_id)
        return handle

    # -- keys ----------------------------------------------------------------------------------

    def load_keys(self, thread_id: str, after_seq: int) -> None:
        """Add the source keys of ``thread_id``'s frames after ``after_seq`` to the known set."""
        for frame in self.thread(thread_id).read(from_seq=after_seq + 1):
            self.known.update(_frame_keys(frame))

    def ensure_loaded(self, thread_id: str, cursor: Cursor | None) -> None:
        if thread_id in self.loaded:
            return
        self.loaded.add(thread_id)
        after = -1 if cursor is None else cursor.heads.get(thread_id, -1)
        self.load_keys(thread_id, after)

    def remember(self, keys: list[str]) -> None:
        """Note the source keys of a frame this read builds."""
        self.known.update(keys)
        self.new_keys.extend(keys)
        self.fresh.update(keys)

    def skip(self, matched: list[str]) -> None:
        """Count a line skipped because its keys ``matched`` known ones: already archived, or
        a repeat of a line of this read when every match is one this read added."""
        if all(k in self.fresh for k in matched):
            self.report.repeated += 1
        else:
            self.report.duplicates += 1

    # -- building frames -----------------------------------------------------------------------

    def thread_for(self, where_session: str, agent: str | None, sidechain: bool) -> str:
        if self.thread_override:
            return self.thread_override
        session = self.session_id or where_session
        if self.agent_id is not None:
            return CLAUDE_CODE.subagent_thread_id(session or "unknown", self.agent_id)
        if sidechain:
            return CLAUDE_CODE.subagent_thread_id(session or "unknown", agent or "sidechain")
        return CLAUDE_CODE.thread_id(session or "unknown")

    def redact(self, blocks: list[fr.ContentBlock]) -> tuple[list[fr.ContentBlock], int]:
        """The blocks with their secrets replaced, and how many were (before externalize: an
        artifact holds what the frame would)."""
        if self.redactor is None:
            return blocks, 0
        return self.redactor.redact_blocks(blocks)

    def redact_text(self, text: str) -> str:
        return text if self.redactor is None else self.redactor.redact_text(text)[0]

    def externalize(self, blocks: list[fr.ContentBlock]) -> list[fr.ContentBlock]:
        out: list[fr.ContentBlock] = []
        for b in blocks:
            if isinstance(b, fr.ToolResultBlock) and b.size > ARTIFACT_THRESHOLD:
                data = b.content.encode("utf-8", "surrogatepass")
                aid = self.store.artifacts.put(data)
                b = fr.ToolResultBlock(
                    tool_use_id=b.tool_use_id,
                    artifact_id=aid,
                    preview=b.content[:PREVIEW_CHARS],
                    size=b.size,
                    is_error=b.is_error,
                )
            out.append(b)
        return out


def _frame_keys(frame: fr.Frame) -> list[str]:
    if isinstance(frame, fr.MessageAppended) and frame.source is not None:
        keys = [frame.source.key]
        extra = frame.meta.get("cc_keys")
        if extra:
            keys.extend(extra.split(","))
        return keys
    if isinstance(frame, fr.CompactionCheckpointCreated) and frame.produced_by == SOURCE_SYSTEM:
        return [f"c:{frame.checkpoint_id}"]
    return []


def _cursor_path(store: BaseStore, path: Path) -> Path | None:
    """Where the cursor of a transcript lives (None: the adapter has no cache folder for this
    store, and every ingest reads the whole file; the source keys in the log still keep it
    idempotent)."""
    cache = cache_dir(store, "claude-code")
    if cache is None:
        return None
    # fsencode: a file name that is not UTF-8 (surrogate-escaped in the str) still has a key
    digest = blake3.blake3(os.fsencode(path)).hexdigest()[:32]
    return cache / "cursors" / f"{digest}.json"


def _printable(path: Path) -> str:
    """A path as text that encodes: bytes that are not UTF-8 escaped, never a surrogate."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def _head_hash(path: Path, upto: int) -> str:
    with open(path, "rb") as f:
        return blake3.blake3(f.read(min(upto, _HEAD_BYTES))).hexdigest()


_cursor_decoder: Final = msgspec.json.Decoder(Cursor)


def _load_cursor(file: Path | None) -> Cursor | None:
    """The cursor in ``file``; None when there is none or it is damaged (it fails its checksum:
    an offset moved by damage would skip lines, so the transcript is read again from its start,
    which the source keys make idempotent)."""
    if file is None:
        return None
    try:
        data = read_checked(file)
    except FileNotFoundError:
        return None
    except ValueError as exc:
        note_rebuilt(f"the ingest cursor {file}", str(exc), "the transcript is read again")
        return None
    if data is None:
        return None  # an older version's cursor: read again once, then written with a checksum
    try:
        return _cursor_decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def _save_cursor(file: Path | None, cursor: Cursor) -> None:
    if file is not None:
        write_checked(file, msgspec.json.encode(cursor))  # a cache


def _user_keys(line: UserLine) -> list[str]:
    keys = [line.where.uuid] if line.where.uuid else []
    for b in line.blocks:
        if isinstance(b, fr.ToolResultBlock) and b.tool_use_id:
            keys.append(f"r:{b.tool_use_id}")
    if not any(isinstance(b, fr.ToolResultBlock) for b in line.blocks):
        text = "\n".join(b.text for b in line.blocks if isinstance(b, fr.TextBlock))
        digest = blake3.blake3(f"{line.where.timestamp}\0{text}".encode()).hexdigest()[:20]
        keys.append(f"p:{digest}")
    return keys


_Grouped = UserLine | CompactBoundary | CompactSummary | LegacySummary | list[AssistantPart]


_WhereLike = UserLine | AssistantPart | CompactBoundary | CompactSummary


def _chain(rec: _WhereLike) -> tuple[bool, str | None]:
    """Which thread of the file a record is on (the main chain, or one sidechain or agent)."""
    return rec.where.sidechain, rec.where.agent_id


def _has_where(rec: Record) -> TypeGuard[_WhereLike]:
    return not isinstance(rec, LegacySummary)


def _is_tool_result(rec: Record) -> bool:
    return isinstance(rec, UserLine) and any(isinstance(b, fr.ToolResultBlock) for b in rec.blocks)


def _groups(records: list[Record]) -> tuple[list[_Grouped], int | None]:
    """Records with the parts of one assistant response gathered into a list, and the index of
    the response still open at the end (None if none).

    Claude Code writes a response one block per line, and since 2.1 it runs each tool as soon as
    its block is written: the response's later blocks come after the earlier tools' results.
    Tool-result lines of the same chain therefore leave a response open; its later parts join
    it, and the results follow it in the log (where a model expects them). Anything else — a
    prompt, another response, a compaction, a line of another chain — closes it.
    """
    out: list[_Grouped] = []
    open_at: int | None = None
    for rec in records:
        if open_at is not None and not isinstance(rec, LegacySummary):
            response = out[open_at]
            assert isinstance(response, list)
            same_chain = _chain(rec) == _chain(response[0])
            if (
                same_chain
                and isinstance(rec, AssistantPart)
                and rec.message_id == response[0].message_id
            ):
                response.append(rec)
                continue
            if not (same_chain and _is_tool_result(rec)):
                open_at = None
        if isinstance(rec, AssistantPart):
            out.append([rec])
            open_at = len(out) - 1
        else:
            out.append(rec)
    return out, open_at


def ingest_transcript(
    store: BaseStore,
    path: str | os.PathLike[str],
    *,
    final: bool = False,
    thread_id: str | None = None,
    redactor: Redactor | Literal["store"] | None = "store",
) -> IngestReport:
    """Ingest what is new in one transcript file. Safe to run from parallel processes.

    ``redactor`` replaces secrets before anything is stored: ``"store"`` (the default) is
    :func:`ingest_redactor` of ``store``; None stores the transcript as it is (the store's own
    ``redactor``, if it has one, still sees every frame, but not the artifacts).
    """
    if redactor == "store":
        redactor = ingest_redactor(store)
    # One cursor (and one lock) per file, however it is named: resolve links and relative parts.
    p = Path(path).resolve()
    cursor_file = _cursor_path(store, p)
    if cursor_file is None:
        with _in_process_lock(p):
            return _ingest_locked(store, p, None, final, thread_id, redactor)
    private_dirs(cursor_file.parent)
    lock_fd = os.open(cursor_file.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        return _ingest_locked(store, p, cursor_file, final, thread_id, redactor)
    finally:
        os.close(lock_fd)


_LOCKS: Final[dict[Path, _thread.LockType]] = {}
_LOCKS_GUARD: Final = _thread.allocate_lock()


def _in_process_lock(path: Path) -> _thread.LockType:
    """One lock per transcript for stores without cache files (no file to flock)."""
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(path, _thread.allocate_lock())


def _ingest_locked(
    store: BaseStore,
    path: Path,
    cursor_file: Path | None,
    final: bool,
    thread_override: str | None,
    redactor: Redactor | None,
) -> IngestReport:
    """Ingest what is new in ``path`` under its lock, phase by phase: resume from the cursor,
    read the new records, hold back an unfinished tail, route each record to its thread's
    batch, append the batches, then move the cursor."""
    job = _Ingest(store, path, final, thread_override, redactor)
    cursor, start, scanned = _resume(job, cursor_file)
    read = _read_new(job, cursor, start, scanned)
    grouped, end = _hold_back(job, read)
    route = _Route(job, cursor)
    for item in grouped:
        route.add(item)
    heads, last_msg = _append(job, route, cursor)
    _save_cursor(
        cursor_file,
        Cursor(
            path=_printable(path),
            offset=end,
            head_hash=_head_hash(path, end),
            heads=heads,
            keys=[*(cursor.keys if cursor else []), *job.new_keys][-_RECENT_KEYS:],
            main_thread=route.main or "",
            last_message_seq=last_msg,
            session_id=job.session_id,
            title=route.pending_title(),
            scanned=read.end + read.pending if end == read.end else 0,
        ),
    )
    return job.report


# -- resume: where the last read of the file stopped -----------------------------------------


def _resume(job: _Ingest, cursor_file: Path | None) -> tuple[Cursor | None, int, int]:
    """The file's cursor, the offset to read from, and up to where the file is known to hold no
    newline past it: no cursor and 0, 0 when there is none, it does not decode, or the file
    shrank or was replaced since (the report says which)."""
    size = job.path.stat().st_size
    cursor = _load_cursor(cursor_file)
    if cursor is None:
        found = cursor_file is not None and cursor_file.exists()
        job.report.restarted = "unreadable cursor" if found else "no cursor"
        return None, 0, 0
    if size < cursor.offset:
        job.report.restarted = f"file shrank from {cursor.offset} to {size} bytes"
        return None, 0, 0
    if cursor.offset and _head_hash(job.path, cursor.offset) != cursor.head_hash:
        job.report.restarted = "file was replaced"
        return None, 0, 0
    job.known.update(cursor.keys)
    return cursor, cursor.offset, cursor.scanned if cursor.scanned <= size else 0


def _read_new(job: _Ingest, cursor: Cursor | None, start: int, scanned: int) -> ReadResult[Record]:
    """The records from ``start`` on (the bytes before ``scanned`` are not searched for a
    newline again), and the session a flat agent file belongs to."""
    read = read_records(job.path, start, no_newline_before=scanned)
    job.report.bytes_read = read.end - start
    job.report.skipped = dict(read.skipped)
    job.report.unreadable = list(read.unreadable)
    job.report.lost = read.lost()
    if job.report.lost:
        from continuity.agents.base.losses import read_places

        job.report.lost_at = read_places(job.path, read)
    if not job.session_id:
        # A flat agent-<id>.jsonl names its session only in its lines (and they may disagree):
        # the first one decides, once, so the file is one thread under one parent.
        job.session_id = (cursor.session_id if cursor else "") or next(
            (r.where.session_id for r in read.records if _has_where(r) and r.where.session_id),
            "",
        )
    return read


# -- hold back: what a later line may still complete -----------------------------------------


def _hold_back(job: _Ingest, read: ReadResult[Record]) -> tuple[list[_Grouped], int]:
    """The records grouped into responses, less an unfinished tail, and the offset up to which
    the file is ingested: unless the ingest is final, the last response is held back while only
    its tool results follow it (more of its lines may come), and so is a boundary whose summary
    has not been written yet."""
    grouped, open_at = _groups(read.records)
    if job.final:
        return grouped, read.end
    if open_at is not None:
        response = grouped[open_at]
        assert isinstance(response, list)
        del grouped[open_at:]
        job.report.held_back = True
        return grouped, response[0].where.offset
    last = grouped[-1] if grouped else None
    if isinstance(last, CompactBoundary):
        grouped.pop()
        job.report.held_back = True
        return grouped, last.where.offset
    return grouped, read.end


# -- route: each record to its thread's batch, as a frame --------------------------------------


class _Route:
    """Sends each new record to the batch of its thread — the session's (the main one), or a
    subagent's or sidechain's, which hang under it — as a message frame, Claude's compaction as
    a marker, and a summary line read before the session's thread exists as its title."""

    def __init__(self, job: _Ingest, cursor: Cursor | None) -> None:
        self.job = job
        self.cursor = cursor
        session = job.session_id
        self.main = job.thread_override or (CLAUDE_CODE.thread_id(session) if session else None)
        self.main_started = self.main is not None and job.thread(self.main).exists()
        # A title is a summary line read before the session's thread has a frame, whichever
        # read that was, so that feeding the file in pieces gives the thread the title a single
        # read does.
        self.title: str | None = (cursor.title if cursor else "") or None
        self.batches: dict[str, _Batch] = {}  # in the order of their first record
        self.last_boundary: CompactBoundary | None = None
        # Each thread's project, branch and version come from its own first message (not from
        # the first line of whatever read creates it), so they do not depend on how the file
        # was fed.
        self.meta_sources: dict[str, dict[str, str]] = {}

    def add(self, item: _Grouped) -> None:
        if isinstance(item, LegacySummary):
            self._title(item)
            return
        if isinstance(item, CompactBoundary):
            self.last_boundary = item
            return
        where = item[0].where if isinstance(item, list) else item.where
        tid = self.job.thread_for(where.session_id, where.agent_id, where.sidechain)
        batch = self._batch(tid)
        if isinstance(item, CompactSummary):
            self._compaction(batch, item)
        elif isinstance(item, UserLine):
            self._user_line(batch, item)
        else:
            self._response(batch, item)

    def pending_title(self) -> str:
        """The title to keep in the cursor: one read while the session's thread has no frame."""
        if self.main is None or self.job.thread(self.main).exists():
            return ""
        return self.title or ""

    def _batch(self, tid: str) -> _Batch:
        batch = self.batches.get(tid)
        if batch is None:
            batch = self.batches[tid] = _Batch(tid)
            self.job.ensure_loaded(tid, self.cursor)
        return batch

    def _title(self, item: LegacySummary) -> None:
        main = self.main
        started = self.main_started or (main in self.batches and bool(self.batches[main].frames))
        if not started and not self.title:
            # Redacted here, not in its frame: the cursor keeps it until the thread exists.
            self.title = self.job.redact_text(item.summary) or None

    def _compaction(self, batch: _Batch, item: CompactSummary) -> None:
        key = f"c:cc-{item.where.uuid}"
        if key in self.job.known:
            self.job.skip([key])
            return
        batch.frames.append(_Marker(item, self.last_boundary))
        self.job.remember([key])
        self.last_boundary = None

    def _user_line(self, batch: _Batch, item: UserLine) -> None:
        job = self.job
        keys = _user_keys(item)
        if not item.blocks:
            return
        matched = [k for k in keys if k in job.known]
        if matched:
            job.skip(matched)
            return
        blocks, redacted = job.redact(item.blocks)
        meta = {"is_meta": "true"} if item.is_meta else {}
        if len(keys) > 1:
            meta["cc_keys"] = ",".join(keys[1:])
        if redacted:
            meta[META_KEY] = str(redacted)
        frame = fr.message(
            "user",
            content=job.externalize(blocks),
            message_id=item.where.uuid or keys[0],
            source=fr.SourceRef(system=SOURCE_SYSTEM, key=keys[0]),
            ts_ms=self.job.ts_ms(item.where.timestamp),
        )
        self._note_meta(batch.thread_id, item)
        batch.frames.append(msgspec.structs.replace(frame, meta=meta) if meta else frame)
        job.remember(keys)

    def _response(self, batch: _Batch, item: list[AssistantPart]) -> None:
        """The parts of one assistant response not archived yet, as one message."""
        job = self.job
        parts = [p for p in item if p.where.uuid not in job.known]
        if not parts:
            job.skip([p.where.uuid for p in item])
            return
        head = parts[0]
        message_key = f"a:{head.message_id}"
        message_id = head.message_id
        if message_key in job.known:  # a late line of a response already archived
            message_id = f"{head.message_id}#{head.where.uuid[:8]}"
        blocks, redacted = job.redact([b for p in parts for b in p.blocks])
        if not blocks:
            return
        keys = [p.where.uuid for p in parts if p.where.uuid] or [message_key]
        meta = {"model": head.model} if head.model else {}
        if head.synthetic:
            meta["synthetic"] = "true"
        extra = [*keys[1:], message_key] if keys[0] != message_key else []
        if extra:
            meta["cc_keys"] = ",".join(extra)
        if redacted:
            meta[META_KEY] = str(redacted)
        usage = next((p.usage for p in reversed(parts) if p.usage), None)  # the last is whole
        if usage:
            meta.update((k, str(v)) for k, v in usage.items())
        frame = fr.message(
            "assistant",
            content=job.externalize(blocks),
            message_id=message_id,
            source=fr.SourceRef(system=SOURCE_SYSTEM, key=keys[0]),
            ts_ms=self.job.ts_ms(head.where.timestamp),
        )
        self._note_meta(batch.thread_id, head)
        batch.frames.append(msgspec.structs.replace(frame, meta=meta))
        job.remember([*keys, message_key])

    def _note_meta(self, tid: str, rec: _WhereLike) -> None:
        where = rec.where
        if tid not in self.meta_sources and where.cwd:
            self.meta_sources[tid] = {
                "project": where.cwd,
                "git_branch": where.git_branch,
                "claude_code_version": where.version,
            }


# -- append: each thread's batch to its log --------------------------------------------------


def _append(
    job: _Ingest, route: _Route, cursor: Cursor | None
) -> tuple[dict[str, int], dict[str, int]]:
    """Append the batches, threads in the order of their first record; each thread's head seq
    and last message's seq after it (for the next cursor)."""
    heads: dict[str, int] = dict(cursor.heads) if cursor else {}
    last_msg: dict[str, int] = dict(cursor.last_message_seq) if cursor else {}
    for tid, batch in route.batches.items():
        _append_batch(
            job, batch, route.main, route.title, route.meta_sources.get(tid, {}), last_msg
        )
        thread_head = job.thread(tid).head()
        if thread_head is not None:
            heads[tid] = thread_head.seq
    job.report.threads = list(route.batches)
    return heads, last_msg


def _append_batch(
    job: _Ingest,
    batch: _Batch,
    main: str | None,
    title: str | None,
    meta_source: dict[str, str],
    last_msg: dict[str, int],
) -> None:
    """Append a thread's frames; a checkpoint marker splits the batch so its ``to_seq`` can name
    the last message appended before it."""
    thread = job.thread(batch.thread_id)
    segment: list[fr.Frame] = []
    if not thread.exists() and batch.frames:
        meta = {"source": SOURCE_SYSTEM, "transcript": str(job.path), **meta_source}
        if job.session_id:
            meta["session_id"] = job.session_id
        parent = main if batch.thread_id != main else None
        first_ts = next(
            (f.ts_ms for f in batch.frames if isinstance(f, fr.MessageAppended) and f.ts_ms), 0
        )
        segment.append(
            fr.ThreadCreated(
                ts_ms=first_ts,
                thread_id=batch.thread_id,
                title=title if parent is None else None,
                parent_thread_id=parent,
                meta={k: v for k, v in meta.items() if v},
            )
        )

    def flush() -> None:
        if not segment:
            return
        seqs = thread.append(segment)
        given = segment[len(segment) - len(seqs) :]
        for seq, f in zip(seqs, given, strict=True):
            if isinstance(f, fr.MessageAppended):
                last_msg[batch.thread_id] = seq
                job.report.messages += 1
        segment.clear()

    for item in batch.frames:
        if not isinstance(item, _Marker):
            segment.append(item)
            continue
        flush()
        to_seq = last_msg.get(batch.thread_id)
        if to_seq is None:
            tail = thread.tail(1, types=["message_appended"])
            to_seq = tail[0].seq if tail else None
        if to_seq is None:
            # Claude summarized messages this thread does not hold: a resumed session whose
            # file starts with the boundary and the summary, or a chain whose earlier lines
            # were all on a sidechain. It is still a compaction — compile must start from
            # Claude's summary and the restore must bound its stretch by it — so the
            # checkpoint covers up to the frame before the summary (the thread_created, or an
            # earlier such checkpoint, whose summary this one's includes): it claims no message.
            head_frame = thread.head()
            to_seq = head_frame.seq if head_frame is not None else None
        if to_seq is None:
            continue  # unreachable: the thread's first batch begins with its thread_created
        segment.append(_claude_checkpoint(job, batch.thread_id, item, to_seq))
        flush()
        job.report.checkpoints += 1
    flush()


def _claude_checkpoint(
    job: _Ingest, thread_id: str, marker: _Marker, to_seq: int
) -> fr.CompactionCheckpointCreated:
    from continuity.summary import SummaryDoc, summary_bytes

    trigger = marker.boundary.trigger if marker.boundary else ""
    doc = SummaryDoc(
        thread_id=thread_id,
        to_seq=to_seq,
        produced_by=SOURCE_SYSTEM,
        text=job.redact_text(marker.summary.text),  # not counted: a checkpoint has no meta
    )
    aid = job.store.artifacts.put(summary_bytes(doc))
    return fr.CompactionCheckpointCreated(
        checkpoint_id=f"cc-{marker.summary.where.uuid}",
        cut_rule_id=f"claude_code_compact/{trigger or 'unknown'}",
        summary_kind="cumulative_v1",
        summary_artifact_id=aid,
        from_seq=0,
        to_seq=to_seq,
        produced_by=SOURCE_SYSTEM,
        ts_ms=job.ts_ms(marker.summary.where.timestamp),
    )
