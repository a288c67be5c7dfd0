"""Incremental, idempotent ingest of opencode sessions into threads.

One thread per session, ``oc-<session id>``; a sub-agent session (``parentID`` set) is
``oc-<root session>.agent-<its id>`` with ``parent_thread_id`` naming its parent's thread. The
first frame, ``thread_created``, says where it came from (``meta``: ``source`` "opencode",
``project``, ``session_id``, ``transcript`` the database or folder, ``opencode_version``) and the
session's title.

opencode rewrites its records while a turn runs (a part goes from pending to running to
completed; a message gets its ``time.completed`` last), so a message is archived once it is
finished — an assistant message when it has ``time.completed`` or an ``error``, a user message
once it has parts — and the first unfinished one holds back the rest of the session until a
later ingest, unless the ingest is ``final`` or a later step shows opencode moved on (then it
is taken as it is: a tool that never finished says so in its result). Each message frame
carries its opencode message id as its source key (``r:<id>`` for the frame of its tool
results), so re-reading never duplicates: the cursor (in the adapter's cache) only saves work.
Later rewrites of what was archived (opencode pruning old tool outputs) change nothing here.

opencode's compaction — a user message with a ``compaction`` part, answered by an assistant
message with ``summary: true`` — becomes a ``compaction_checkpoint_created`` (cut rule
``opencode_compact/v1``) whose summary artifact is that answer's text; it covers every message
archived before it, so compile starts from opencode's own summary.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

import msgspec

from continuity import frames as fr
from continuity._fs import read_checked, write_checked
from continuity.agents.base import ingest as common
from continuity.agents.base.ingest import ingest_redactor
from continuity.agents.base.report import shown
from continuity.agents.opencode._frames import (
    Converted,
    assistant_blocks,
    is_summary,
    part_text,
    user_blocks,
)
from continuity.agents.opencode.source import (
    Message,
    Session,
    Source,
    UnreadableSession,
    open_source,
)
from continuity.agents.table import OPENCODE
from continuity.redaction import META_KEY, Redactor
from continuity.store.base import BaseStore, Thread

__all__ = [
    "ARTIFACT_THRESHOLD",
    "CUT_RULE",
    "QUIET_MS",
    "SOURCE_SYSTEM",
    "IngestReport",
    "detect",
    "ingest_paths",
    "ingest_session",
    "ingest_source",
]

SOURCE_SYSTEM: Final = "opencode"
CUT_RULE: Final = "opencode_compact/v1"
ARTIFACT_THRESHOLD: Final = common.ARTIFACT_THRESHOLD
_RECENT_KEYS: Final = 2048
_PLACES: Final = 5
"""How many lost places a report names (the count says how many there were)."""
QUIET_MS: Final = 10 * 60 * 1000
"""A session not updated for this long is over, for a ``final`` ingest of every session."""


class Cursor(msgspec.Struct, kw_only=True):
    """How far one session of one source was ingested (a cache: losing it costs a re-read)."""

    source: str
    session_id: str
    done_id: str = ""
    """The last message archived: the next read starts after it."""
    held_id: str = ""
    """The first message held back as unfinished: the next read starts there."""
    session_updated: int = 0
    head: int = -1
    """The thread's last seq when the cursor was written: frames after it are re-checked."""
    keys: list[str] = []
    last_message_seq: int = -1


class IngestReport(msgspec.Struct):
    path: str
    threads: list[str] = msgspec.field(default_factory=list)
    sessions: int = 0
    messages: int = 0
    checkpoints: int = 0
    duplicates: int = 0
    held_back: int = 0
    """Sessions with an unfinished message left for a later ingest."""
    unchanged: int = 0
    """Sessions skipped because nothing changed since their last ingest."""
    lost: int = 0
    """What could not be read: sessions, messages or parts (damaged rows or JSON)."""
    lost_at: list[str] = msgspec.field(default_factory=list)
    """The first of them, as ``source: place (why)``."""

    def add(self, other: IngestReport) -> None:
        self.threads.extend(t for t in other.threads if t not in self.threads)
        self.sessions += other.sessions
        self.messages += other.messages
        self.checkpoints += other.checkpoints
        self.duplicates += other.duplicates
        self.held_back += other.held_back
        self.unchanged += other.unchanged
        self.lost += other.lost
        self.lost_at.extend(other.lost_at[: max(0, _PLACES - len(self.lost_at))])

    def damaged(self, path: Path, places: list[str]) -> None:
        """Count ``places`` of source ``path`` as lost (the first few named)."""
        self.lost += len(places)
        room = max(0, _PLACES - len(self.lost_at))
        self.lost_at.extend(f"{shown(path)}: {p}" for p in places[:room])


def detect(path: Path) -> bool:
    """Whether ``path`` is something of opencode's this adapter reads."""
    try:
        open_source(path)
    except (OSError, ValueError):
        return False
    return True


# --- cursors ---------------------------------------------------------------------------------


def _lock_path(source: Path, session_id: str) -> Path:
    """What names one session of one source to :func:`common.locked` (its lock and cursor)."""
    return source.absolute() / session_id


_decoder: Final = msgspec.json.Decoder(Cursor)


def _load_cursor(file: Path | None) -> Cursor | None:
    if file is None:
        return None
    try:
        data = read_checked(file)
        return None if data is None else _decoder.decode(data)
    except (OSError, ValueError, msgspec.DecodeError, msgspec.ValidationError):
        return None  # lost or damaged: read the session again (the source keys dedupe)


# --- one session ------------------------------------------------------------------------------


@dataclass
class _Marker:
    """opencode's compaction summary, placed among the new frames (its ``to_seq`` is known
    once the frames before it are appended)."""

    message: Message
    text: str
    auto: bool | None


@dataclass
class _Job:
    store: BaseStore
    source: Source
    session: Session
    thread_id: str
    parent_thread_id: str | None
    redactor: Redactor | None
    final: bool
    report: IngestReport
    keys: common.Keys = field(default_factory=lambda: common.Keys(SOURCE_SYSTEM))
    new_keys: list[str] = field(default_factory=list)
    items: list[fr.MessageAppended | _Marker] = field(default_factory=list)
    compaction: dict[str, bool | None] = field(default_factory=dict)

    def redact(self, blocks: list[fr.ContentBlock]) -> tuple[list[fr.ContentBlock], int]:
        return (blocks, 0) if self.redactor is None else self.redactor.redact_blocks(blocks)

    def redact_text(self, text: str) -> str:
        return text if self.redactor is None else self.redactor.redact_text(text)[0]

    def frame(
        self,
        role: fr.Role,
        blocks: list[fr.ContentBlock],
        key: str,
        m: Message,
        meta: dict[str, str],
    ) -> None:
        clean, redacted = self.redact(blocks)
        if redacted:
            meta[META_KEY] = str(redacted)
        self.items.append(
            common.message(
                role,
                common.externalize(self.store, clean),
                system=SOURCE_SYSTEM,
                keys=[key],
                ts_ms=m.created,
                meta=meta,
            )
        )
        self.remember(key)

    def remember(self, key: str) -> None:
        self.keys.add([key])
        self.new_keys.append(key)

    def seen(self, key: str) -> bool:
        if self.keys.seen([key]):
            self.report.duplicates += 1
            return True
        return False


def _finished(m: Message) -> bool:
    if m.role == "assistant":
        t = m.info.get("time")
        return bool(isinstance(t, dict) and t.get("completed")) or bool(m.info.get("error"))
    return bool(m.parts)


def _add_message(job: _Job, m: Message) -> None:
    """The frames (or the compaction marker) of one finished message."""
    if m.role == "user":
        conv = user_blocks(m.parts)
        if conv.compaction is not None:
            auto = conv.compaction.get("auto")
            job.compaction[m.id] = auto if isinstance(auto, bool) else None
        if job.seen(m.id):
            return
        if conv.blocks:
            meta = {"synthetic": "true"} if conv.synthetic else {}
            job.frame("user", conv.blocks, m.id, m, meta)
        return
    if is_summary(m.info):
        key = f"c:{_checkpoint_id(m)}"
        if job.seen(key):
            return
        parent = m.info.get("parentID")
        auto = job.compaction.get(parent) if isinstance(parent, str) else None
        job.items.append(_Marker(m, part_text(m.parts), auto))
        job.remember(key)
        return
    if job.seen(m.id):
        return
    conv = assistant_blocks(m.parts, job.final)
    _add_assistant(job, m, conv)


def _add_assistant(job: _Job, m: Message, conv: Converted) -> None:
    info = m.info
    meta: dict[str, str] = {}
    model = "/".join(str(info.get(k)) for k in ("providerID", "modelID") if info.get(k))
    if model:
        meta["model"] = model
    agent = info.get("agent") or info.get("mode")
    if isinstance(agent, str) and agent:
        meta["agent"] = agent
    meta.update(_tokens_meta(info.get("tokens")))
    error = info.get("error")
    blocks = list(conv.blocks)
    if isinstance(error, dict):
        name = str(error.get("name") or "error")
        meta["error"] = name
        data = error.get("data")
        said = data.get("message") if isinstance(data, dict) else None
        if not blocks:
            blocks.append(fr.TextBlock(text=f"[{name}{': ' + str(said) if said else ''}]"))
    if blocks:
        job.frame("assistant", blocks, m.id, m, meta)
    else:
        job.remember(m.id)
    if conv.results:
        rmeta = {"pruned": ",".join(conv.pruned)} if conv.pruned else {}
        job.frame("user", conv.results, f"r:{m.id}", m, rmeta)


def _tokens_meta(tokens: object) -> dict[str, str]:
    """An assistant message's ``tokens`` (input, output, reasoning, cache read and write) by the
    meta keys they are kept under: how full the context was (:mod:`continuity.rolling.usage`)."""
    if not isinstance(tokens, dict):
        return {}
    cache = tokens.get("cache")
    cache = cache if isinstance(cache, dict) else {}
    found = {
        "tokens_input": tokens.get("input"),
        "tokens_output": tokens.get("output"),
        "tokens_reasoning": tokens.get("reasoning"),
        "tokens_cache_read": cache.get("read"),
        "tokens_cache_write": cache.get("write"),
    }
    return {
        k: str(v)
        for k, v in found.items()
        if isinstance(v, int) and not isinstance(v, bool) and v >= 0
    }


def _checkpoint_id(m: Message) -> str:
    return f"oc-{m.id}"


def _checkpoint(job: _Job, marker: _Marker, to_seq: int) -> fr.CompactionCheckpointCreated:
    return common.checkpoint(
        job.store,
        job.thread_id,
        checkpoint_id=_checkpoint_id(marker.message),
        cut_rule_id=CUT_RULE,
        produced_by=SOURCE_SYSTEM,
        summary=job.redact_text(marker.text),
        to_seq=to_seq,
        ts_ms=marker.message.created,
    )


_PLACEHOLDER: Final = re.compile(r"(?:New|Child) session - \d{4}-\d{2}-\d{2}T[\d:.]+Z?")
"""The title opencode gives a session until its title request answers (the first ingest,
at the first turn's end, often comes first)."""
_TITLE_CHARS: Final = 80


def _title(job: _Job) -> str:
    """The session's title: opencode's, or for its placeholder the user's first words (the
    thread's first frame is written once)."""
    title = job.session.title
    if title and not _PLACEHOLDER.fullmatch(title.strip()):
        return title
    for item in job.items:
        if isinstance(item, fr.MessageAppended) and item.role == "user":
            words = " ".join(
                " ".join(b.text.split()) for b in item.content if isinstance(b, fr.TextBlock)
            ).strip()
            if words:
                return words if len(words) <= _TITLE_CHARS else words[: _TITLE_CHARS - 1] + "…"
    return title


def _thread_created(job: _Job) -> fr.ThreadCreated:
    s = job.session
    first = next((i.ts_ms for i in job.items if isinstance(i, fr.MessageAppended)), 0)
    return common.thread_created(
        job.thread_id,
        source=SOURCE_SYSTEM,
        project=s.directory,
        git_branch=common.git_branch(s.directory),
        session_id=s.id,
        transcript=str(job.source.path),
        title=job.redact_text(_title(job)),
        parent_thread_id=job.parent_thread_id,
        ts_ms=first or s.time_created,
        extra={"opencode_version": s.version},
    )


def _append(job: _Job, thread: Thread, last_msg: int) -> int:
    """Append the new frames, a checkpoint where each compaction marker is; the seq of the
    last message appended (``last_msg`` when none)."""
    segment: list[fr.Frame] = []
    if not thread.exists() and job.items:
        segment.append(_thread_created(job))

    def flush() -> None:
        nonlocal last_msg
        if not segment:
            return
        seqs = thread.append(segment)
        for seq, f in zip(seqs, segment[len(segment) - len(seqs) :], strict=True):
            if isinstance(f, fr.MessageAppended):
                last_msg = seq
                job.report.messages += 1
        segment.clear()

    for item in job.items:
        if isinstance(item, fr.MessageAppended):
            segment.append(item)
            continue
        flush()
        to_seq = last_msg
        if to_seq < 0:
            tail = thread.tail(1, types=["message_appended"])
            to_seq = tail[0].seq if tail else -1
        if to_seq < 0:
            head = thread.head()
            to_seq = head.seq if head is not None else -1
        if to_seq < 0:
            continue
        segment.append(_checkpoint(job, item, to_seq))
        flush()
        job.report.checkpoints += 1
    flush()
    return last_msg


def _thread_ids(source: Source, session: Session) -> tuple[str, str | None]:
    """The session's thread and its parent's (None for a top-level session): a sub-agent
    session hangs under its root session's thread id, its parent named in the frame."""
    if not session.parent_id:
        return OPENCODE.thread_id(session.id), None
    ids = [session.id]
    current: Session | None = session
    while current is not None and current.parent_id and current.parent_id not in ids:
        ids.append(current.parent_id)
        current = source.session(current.parent_id)
    root_id, parent_id = ids[-1], ids[1]
    parent = OPENCODE.thread_id(root_id) if parent_id == root_id else None
    return OPENCODE.subagent_thread_id(root_id, session.id), parent or OPENCODE.subagent_thread_id(
        root_id, parent_id
    )


def _run(
    store: BaseStore,
    source: Source,
    session: Session,
    cursor_file: Path | None,
    final: bool,
    redactor: Redactor | None,
    skip_unchanged: bool = False,
) -> IngestReport:
    report = IngestReport(str(source.path), sessions=1)
    cursor = _load_cursor(cursor_file)
    if cursor is not None and cursor.session_id != session.id:
        cursor = None
    if (
        skip_unchanged
        and cursor is not None
        and not cursor.held_id
        and cursor.session_updated == session.time_updated
        and cursor.done_id
    ):
        report.unchanged = 1
        return report
    tid, parent_tid = _thread_ids(source, session)
    thread = store.thread(tid)
    job = _Job(store, source, session, tid, parent_tid, redactor, final, report)
    job.keys = common.Keys(SOURCE_SYSTEM, {tid: cursor.head} if cursor is not None else None)
    if cursor is not None:
        job.keys.add(cursor.keys)
    job.keys.load(thread)
    done = cursor.done_id if cursor else ""
    start = (cursor.held_id or done) if cursor else ""
    held = ""
    messages = source.messages(session.id, start)
    # A step after it means opencode moved on: an unfinished message before the last assistant
    # message (a crash, then the session resumed) will never be finished, so it is taken.
    last_step = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=-1)
    for i, m in enumerate(messages):
        if m.id <= done:
            continue
        if not final and i >= last_step and not _finished(m):
            held = m.id
            report.held_back = 1
            break
        _add_message(job, m)
        done = m.id
    last_msg = _append(job, thread, cursor.last_message_seq if cursor else -1)
    head = thread.head()
    report.threads = [tid] if head is not None else []
    if cursor_file is not None:
        write_checked(
            cursor_file,
            msgspec.json.encode(
                Cursor(
                    source=str(source.path),
                    session_id=session.id,
                    done_id=done,
                    held_id=held,
                    session_updated=session.time_updated,
                    head=head.seq if head is not None else -1,
                    keys=[*(cursor.keys if cursor else []), *job.new_keys][-_RECENT_KEYS:],
                    last_message_seq=last_msg,
                )
            ),
        )
    return report


def _source(path: Path | Source) -> Source:
    return open_source(path) if isinstance(path, Path) else path


def ingest_session(
    store: BaseStore,
    source: Path | Source,
    session_id: str,
    *,
    final: bool = False,
    redactor: Redactor | Literal["store"] | None = "store",
    skip_unchanged: bool = False,
) -> IngestReport:
    """Ingest what is new in one session. Safe to run from parallel processes (one lock per
    session and source). ``KeyError`` when the source has no such session. ``skip_unchanged``:
    trust the session's ``time.updated`` (a sweep of every session) and read no message of a
    session whose stamp has not moved since its last ingest left nothing held back."""
    src = _source(source)
    session = src.session(session_id)
    if session is None:
        raise KeyError(f"{src.path}: no opencode session {session_id!r}")
    if redactor == "store":
        redactor = ingest_redactor(store)
    with common.locked(store, SOURCE_SYSTEM, _lock_path(src.path, session_id)) as cursor_file:
        return _run(store, src, session, cursor_file, final, redactor, skip_unchanged)


def ingest_source(
    store: BaseStore,
    source: Path | Source,
    *,
    final: bool = False,
    redactor: Redactor | Literal["store"] | None = "store",
) -> IngestReport:
    """Ingest every session of one database, storage folder or export (parents first); a
    session unchanged since its last ingest costs one cursor read. ``final`` applies only to
    sessions quiet for :data:`QUIET_MS` (one opencode may be running now is not final: its
    unfinished message is left for a later ingest, not archived half-written)."""
    src = _source(source)
    if redactor == "store":
        redactor = ingest_redactor(store)
    total = IngestReport(str(src.path))
    now = int(time.time() * 1000)
    damage: list[str] = getattr(src, "damage", [])
    check = getattr(src, "check", None)
    if callable(check):
        check()
    unreadable: list[str] = []
    for session in src.sessions():
        over = final and now - session.time_updated > QUIET_MS
        try:
            report = ingest_session(
                store, src, session.id, final=over, redactor=redactor, skip_unchanged=True
            )
        except UnreadableSession as exc:
            # one session's rows on a damaged page: the others are read all the same
            unreadable.append(f"session {session.id} ({_why(exc, src.path)})")
            continue
        total.add(report)
    total.damaged(src.path, [*dict.fromkeys(damage), *unreadable])
    return total


def _why(exc: Exception, path: Path) -> str:
    """What ``exc`` says, less the source's path it starts with (the report names it)."""
    said = str(exc)
    return said.split(": ", 1)[1] if said.startswith(str(path)) and ": " in said else said


def ingest_paths(store: BaseStore, paths: list[Path], *, final: bool = False) -> list[IngestReport]:
    """Ingest every session of each path (the adapter's entry for ``continuity ingest``)."""
    return [ingest_source(store, p, final=final) for p in paths]
