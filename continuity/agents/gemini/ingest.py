"""Incremental, idempotent ingest of Gemini CLI sessions into threads.

One thread per session (``gemini-<session id>``); a sub-agent's recording
(``chats/<parent session id>/<sub id>.jsonl``) is the child thread
``gemini-<parent>.agent-<sub id>``. Idempotence comes from the records' ids, not from byte
offsets: the ``.json`` form is rewritten whole and the ``.jsonl`` form replaces its history
with ``$set.messages``, so every frame carries its source keys (:mod:`.convert`) and a key the
thread holds is never archived again. A cursor per file (a cache) only saves work: the offset
of the ``.jsonl`` read so far, or how many leading messages of the ``.json`` are archived.

A message is archived in its final form: one still growing (the last message of the file, with
only ``$set`` patches after it) is held back until a later message, a rewrite or a final ingest
(AfterAgent, SessionEnd) shows it complete; a tool call added to an archived message later is
archived as a message of its own (``<id>#<call>``). A compression — a ``$set.messages`` whose
user message starts with ``<state_snapshot>`` — becomes a ``compaction_checkpoint_created``
("gemini_cli_compress/v1") whose summary is that snapshot, ``to_seq`` the last message before
the first one the compression kept; the replaced messages stay archived. ``$rewindTo`` becomes
``messages_retracted`` of the rewound messages (compile leaves them out; the log keeps them).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Final, Literal

import msgspec

from continuity import frames as fr
from continuity.agents.base import ingest as common
from continuity.agents.base.ingest import FileCursor
from continuity.agents.gemini.convert import Converted, content_key, convert
from continuity.agents.gemini.records import (
    Header,
    Item,
    Message,
    Patch,
    ReadResult,
    Rewind,
    Rewrite,
    is_snapshot,
    message_text,
    read_json_record,
    read_jsonl,
)
from continuity.agents.table import GEMINI
from continuity.redaction import META_KEY, Redactor
from continuity.store.base import BaseStore, Thread

__all__ = [
    "CUT_RULE",
    "SOURCE",
    "IngestReport",
    "detect",
    "ingest_file",
    "ingest_paths",
    "session_files",
]

SOURCE: Final = "gemini-cli"
CUT_RULE: Final = "gemini_cli_compress/v1"
REWIND_REASON: Final = "gemini-cli rewind"
_RECENT_KEYS: Final = 512
_NAME_RE: Final = re.compile(r"^session-.*\.jsonl?$")


def _parent_of(path: Path) -> str | None:
    """The parent session of a sub-agent recording ``chats/<parent>/<sub>.jsonl``."""
    if path.parent.parent.name == "chats" and path.parent.name != "chats":
        return path.parent.name
    return None


def detect(path: Path) -> bool:
    """Whether ``path`` is a Gemini CLI session file (or a folder holding some)."""
    if path.is_dir():
        return any(True for _ in session_files([path]))
    if path.suffix not in (".json", ".jsonl"):
        return False
    if _NAME_RE.match(path.name) or _parent_of(path) is not None:
        return True
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    return b'"sessionId"' in head and b'"projectHash"' in head


def session_files(paths: list[Path]) -> list[Path]:
    """The session files under ``paths`` (files as given; folders searched for ``chats``)."""
    found: list[Path] = []
    for p in paths:
        if p.is_file():
            found.append(p)
            continue
        for chats in sorted({*p.glob("**/chats"), *([p] if p.name == "chats" else [])}):
            found += sorted(chats.glob("session-*.json"))
            found += sorted(chats.glob("session-*.jsonl"))
            found += sorted(chats.glob("*/*.jsonl"))
    return found


class IngestReport(msgspec.Struct):
    path: str
    session_id: str = ""
    threads: list[str] = msgspec.field(default_factory=list)
    messages: int = 0
    notices: int = 0
    checkpoints: int = 0
    retractions: int = 0
    duplicates: int = 0
    """Messages skipped because the thread already held them (same id or, in a rewrite, the
    same content)."""
    checkpoint_ids: list[str] = msgspec.field(default_factory=list)
    """The checkpoints this ingest appended (a hook gives the restore after them)."""
    late_updates: int = 0
    """Archived messages seen again with changed text (the first complete form is kept)."""
    skipped: dict[str, int] = msgspec.field(default_factory=dict)
    bytes_read: int = 0
    restarted: str | None = None
    held_back: bool = False
    lost: int = 0
    """What this read could not archive (lines, or a ``.json`` file's messages or the file)."""
    lost_at: list[str] = msgspec.field(default_factory=list)
    """The first of them, as ``file line N (why)``."""


def frame_keys(frame: fr.Frame) -> list[str]:
    """The source keys a frame of this adapter stands for (:func:`common.frame_keys`, and a
    rewind's retraction)."""
    if isinstance(frame, fr.MessagesRetracted) and frame.reason == REWIND_REASON:
        return [f"x:{m}" for m in frame.message_ids]
    return common.frame_keys(frame, SOURCE)


def _ts_ms(stamp: Any) -> int:
    return common.ts_ms(stamp) if isinstance(stamp, str) else 0


# -- where a session belongs ----------------------------------------------------------------


def project_root(path: Path, header: dict[str, Any]) -> str:
    """The project a session file belongs to: the ``.project_root`` marker of its folder,
    ``~/.gemini/projects.json`` (slug or SHA-256 folder), or the record's ``directories``."""
    chats = path.parent.parent if _parent_of(path) else path.parent
    folder = chats.parent
    marker = folder / ".project_root"
    try:
        text = marker.read_text(encoding="utf-8").strip()
        if text:
            return text
    except (OSError, UnicodeDecodeError):
        pass
    registry = folder.parent.parent / "projects.json"
    try:
        data = json.loads(registry.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        data = None
    projects = data.get("projects", data) if isinstance(data, dict) else None
    if isinstance(projects, dict):
        for root, slug in projects.items():
            if slug == folder.name or _sha256(root.encode()).hexdigest() == folder.name:
                return str(root)
    dirs = header.get("directories")
    if isinstance(dirs, list) and dirs and isinstance(dirs[0], str):
        return dirs[0]
    return ""


def _sha256(data: bytes) -> Any:
    import hashlib  # only here: 3 ms of every hook process otherwise

    return hashlib.sha256(data)


def _git_branch(project: str) -> str:
    if not project:
        return ""
    try:
        head = (Path(project) / ".git" / "HEAD").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return ""
    return head.removeprefix("ref: refs/heads/") if head.startswith("ref: ") else ""


# -- the ingest of one file ------------------------------------------------------------------


class _Checkpoint(msgspec.Struct):
    """A compression, placed among the new frames: ``kept`` are the keys of the first message
    it kept (its ``to_seq`` is the message before that one's frame)."""

    snapshot: dict[str, Any]
    kept: list[str]


class _Rewind(msgspec.Struct):
    message_id: str


_Pending = fr.Frame | _Checkpoint | _Rewind


class _Job(msgspec.Struct):
    store: BaseStore
    path: Path
    final: bool
    redactor: Redactor | Literal["store"] | None
    """``"store"``: the store's (:func:`ingest_redactor`), made when first needed: a hook with
    nothing new does not compile its rules (10 ms)."""
    report: IngestReport
    thread_id: str = ""
    parent: str | None = None
    session_id: str = ""
    header: dict[str, Any] = msgspec.field(default_factory=dict)
    title: str = ""
    known: set[str] = msgspec.field(default_factory=set)
    new_keys: list[str] = msgspec.field(default_factory=list)
    pending: list[_Pending] = msgspec.field(default_factory=list)
    thread: Thread | None = None
    keys_from: int = 0
    """The first seq whose keys are loaded (earlier ones: see :meth:`load_all_keys`)."""

    def load_all_keys(self) -> None:
        """Learn the keys of the whole thread: a rewrite or a rewind names messages archived
        before the cursor (a resume reloads the whole history); rare, so read then."""
        if self.keys_from <= 0 or self.thread is None:
            return
        for frame in self.thread.read(from_seq=0, to_seq=self.keys_from - 1):
            self.known.update(frame_keys(frame))
        self.keys_from = 0

    # -- frames --------------------------------------------------------------------------------

    def remember(self, keys: list[str]) -> None:
        self.known.update(keys)
        self.new_keys.extend(keys)

    def redact(self, blocks: list[fr.ContentBlock]) -> tuple[list[fr.ContentBlock], int]:
        redactor = self.the_redactor()
        return (blocks, 0) if redactor is None else redactor.redact_blocks(blocks)

    def redact_text(self, text: str) -> str:
        redactor = self.the_redactor()
        return text if redactor is None else redactor.redact_text(text)[0]

    def the_redactor(self) -> Redactor | None:
        if self.redactor == "store":
            from continuity.agents.base.ingest import ingest_redactor

            self.redactor = ingest_redactor(self.store)
        return self.redactor

    def add_message(
        self,
        role: fr.Role,
        blocks: list[fr.ContentBlock],
        keys: list[str],
        message_id: str,
        ts: Any,
        meta: dict[str, str],
    ) -> None:
        redacted_blocks, redacted = self.redact(blocks)
        meta = {**meta, META_KEY: str(redacted)} if redacted else meta
        frame = common.message(
            role,
            common.externalize(self.store, redacted_blocks),
            system=SOURCE,
            keys=keys,
            message_id=message_id,
            ts_ms=_ts_ms(ts),
            meta=meta,
        )
        self.pending.append(frame)
        self.remember(keys)

    # -- records -------------------------------------------------------------------------------

    def message(self, record: dict[str, Any], *, in_rewrite: bool = False) -> None:
        """Archive what of one record the thread does not hold yet."""
        mid = str(record.get("id", ""))
        conv = convert(record)
        if conv.kind == "notice":
            self._notice(record, mid)
            return
        key = f"g:{mid}"
        ckey = content_key(record)
        archived = key in self.known or (in_rewrite and ckey in self.known)
        if conv.kind == "user":
            self._user(record, conv, key, ckey, archived)
        else:
            self._assistant(record, conv, key, ckey, archived, in_rewrite)

    def _notice(self, record: dict[str, Any], mid: str) -> None:
        if f"r:{mid}" in self.known:
            self.report.duplicates += 1
            return
        text = self.redact_text(message_text(record))
        self.pending.append(
            common.record(
                self.store,
                f"gemini-cli.{record.get('type')}",
                mid,
                {"text": text, "timestamp": record.get("timestamp", "")},
                ts_ms=_ts_ms(record.get("timestamp")),
            )
        )
        self.remember([f"r:{mid}"])
        self.report.notices += 1

    def _user(
        self, record: dict[str, Any], conv: Converted, key: str, ckey: str, archived: bool
    ) -> None:
        mid = str(record.get("id", ""))
        if conv.blocks and not archived:
            self.add_message(
                "user", conv.blocks, [key, ckey], mid, record.get("timestamp"), conv.meta
            )
        elif conv.blocks:
            self.report.duplicates += 1
        self._results(record, conv.results, f"{mid}#r")

    def _results(self, record: dict[str, Any], results: list[fr.ToolResultBlock], mid: str) -> None:
        fresh = [r for r in results if f"t:{r.tool_use_id}" not in self.known]
        if not fresh:
            return
        keys = [f"t:{r.tool_use_id}" for r in fresh]
        self.add_message("user", list(fresh), keys, mid, record.get("timestamp"), {})

    def _assistant(
        self,
        record: dict[str, Any],
        conv: Converted,
        key: str,
        ckey: str,
        archived: bool,
        in_rewrite: bool,
    ) -> None:
        mid = str(record.get("id", ""))
        uses = [u for u in conv.tool_uses if f"u:{u.id}" not in self.known]
        use_keys = [f"u:{u.id}" for u in uses]
        if not archived:
            blocks = [*conv.blocks, *uses]
            if blocks:
                self.add_message(
                    "assistant",
                    blocks,
                    [key, ckey, *use_keys],
                    mid,
                    record.get("timestamp"),
                    conv.meta,
                )
        else:
            if in_rewrite:
                self.report.duplicates += 1
            else:
                self.report.late_updates += 1
            if uses:  # calls added after the message was archived: a message of their own
                self.add_message(
                    "assistant",
                    list(uses),
                    use_keys,
                    f"{mid}#{uses[0].id[-12:]}",
                    record.get("timestamp"),
                    conv.meta,
                )
        self._results(record, conv.results, f"{mid}#r")

    def rewrite(self, item: Rewrite) -> None:
        """A ``$set.messages``: a compression's snapshot becomes a checkpoint; the messages
        kept (or reloaded on resume) are archived already, under their ids or, when the
        rewrite gave them new ones, their content."""
        records = item.records
        if any(f"g:{r.get('id', '')}" not in self.known for r in records):
            self.load_all_keys()
        after_snapshot: int | None = None
        for i, record in enumerate(records):
            if is_snapshot(record):
                after_snapshot = i
                self._checkpoint(record, records[i + 1 :])
                continue
            ack = after_snapshot is not None and i == after_snapshot + 1
            if ack and record.get("type") == "gemini":
                continue  # the model's acknowledgement of the snapshot: the CLI's, not a turn
            self.message(record, in_rewrite=True)

    def _checkpoint(self, snapshot: dict[str, Any], rest: list[dict[str, Any]]) -> None:
        key = f"c:gemini-{snapshot.get('id', '')}"
        if key in self.known:
            self.report.duplicates += 1
            return
        kept_records = rest[1:] if rest and rest[0].get("type") == "gemini" else rest
        kept: list[str] = []
        for record in kept_records:
            if message_text(record) or record.get("type") == "gemini":
                kept = [f"g:{record.get('id', '')}", content_key(record)]
                break
        self.pending.append(_Checkpoint(snapshot, kept))
        self.remember([key])

    def rewind(self, item: Rewind) -> None:
        key = f"x:{item.message_id}"
        if f"g:{item.message_id}" not in self.known:
            self.load_all_keys()
        if key in self.known or f"g:{item.message_id}" not in self.known:
            return
        self.pending.append(_Rewind(item.message_id))
        self.remember([key])


# -- the phases ------------------------------------------------------------------------------


def _read(job: _Job, cursor: FileCursor | None) -> tuple[ReadResult, int]:
    """The new items of the file and the offset to keep in the cursor."""
    if job.path.suffix == ".json":
        read = read_json_record(job.path, final=job.final)
        job.report.bytes_read = read.end
        return read, read.end
    start = cursor.offset if cursor is not None else 0
    scanned = cursor.scanned if cursor is not None else 0
    read = read_jsonl(job.path, start, final=job.final, no_newline_before=scanned)
    job.report.bytes_read = read.end - start
    if read.open_at is not None:
        job.report.held_back = True
        return read, read.open_at
    return read, read.end


def _identify(job: _Job, read: ReadResult, cursor: FileCursor | None) -> None:
    """The session, its thread and its parent, from the file's first header (or the cursor's
    thread when this read starts past it)."""
    header = next((i.meta for i in read.items if isinstance(i, Header)), None)
    if header is None and job.path.suffix == ".jsonl":
        try:
            with open(job.path, "rb") as f:
                first = f.readline(1 << 20)
            obj = json.loads(first)
            header = obj if isinstance(obj, dict) else None
        except (OSError, ValueError):
            header = None
    job.header = header or {}
    sid = job.header.get("sessionId")
    job.session_id = sid if isinstance(sid, str) and sid else job.path.stem
    parent = _parent_of(job.path)
    if parent is not None or job.header.get("kind") == "subagent":
        parent = parent or str(job.header.get("parentSessionId") or "unknown")
        job.parent = GEMINI.thread_id(parent)
        job.thread_id = GEMINI.subagent_thread_id(parent, job.session_id)
    else:
        job.thread_id = GEMINI.thread_id(job.session_id)
    summary = job.header.get("summary")
    job.title = summary if isinstance(summary, str) else ""


def _load_keys(job: _Job, thread: Thread, cursor: FileCursor | None) -> None:
    """The keys the thread holds: those of frames after the cursor's head (all when there is
    no cursor), plus the cursor's recent ones."""
    after = -1 if cursor is None else cursor.heads.get(thread.id, -1)
    job.keys_from = after + 1
    recent = cursor.state.get("keys") if cursor is not None else None
    if isinstance(recent, list):
        job.known.update(k for k in recent if isinstance(k, str))
    for frame in thread.read(from_seq=after + 1):
        job.known.update(frame_keys(frame))


def _route(job: _Job, items: list[Item], skip_messages: int) -> None:
    seen = 0
    for item in items:
        if isinstance(item, Message):
            seen += 1
            if seen <= skip_messages:
                continue
            job.message(item.record)
        elif isinstance(item, Rewrite):
            job.rewrite(item)
        elif isinstance(item, Rewind):
            job.rewind(item)
        elif isinstance(item, Patch) and isinstance(item.fields.get("summary"), str):
            job.title = job.title or item.fields["summary"]


def _json_plan(read: ReadResult, cursor: FileCursor | None, final: bool) -> tuple[int, int, str]:
    """``.json``: how many leading messages are archived already (per the cursor, when the
    file still starts the same way), how many to archive through, and that one's id."""
    messages = [i for i in read.items if isinstance(i, Message)]
    done = 0
    state = cursor.state if cursor is not None else {}
    json_done, json_last = state.get("json_done", 0), state.get("json_last", "")
    if (
        isinstance(json_done, int)
        and 0 < json_done <= len(messages)
        and messages[json_done - 1].id == json_last
    ):
        done = json_done
    upto = len(messages) if final else max(len(messages) - 1, 0)
    upto = max(upto, done)
    return done, upto, messages[upto - 1].id if upto else ""


def _append(job: _Job) -> None:
    """Append the pending frames; a checkpoint or a rewind is placed once the frames before
    it are in the log (its seqs name them)."""
    thread = job.thread
    assert thread is not None
    segment: list[fr.Frame] = []
    if not thread.exists() and any(isinstance(p, fr.MessageAppended) for p in job.pending):
        segment.append(_thread_created(job))

    def flush() -> None:
        if segment:
            _, refused = common.append_good(thread, list(segment))
            for _, why in refused:
                job.report.lost += 1
                if len(job.report.lost_at) < 5:
                    job.report.lost_at.append(
                        f"{job.report.path} (a record the store refused: {why})"
                    )
            segment.clear()

    for item in job.pending:
        if isinstance(item, _Checkpoint):
            flush()
            checkpoint = _checkpoint_frame(job, thread, item)
            if checkpoint is not None:
                segment.append(checkpoint)
                job.report.checkpoints += 1
                job.report.checkpoint_ids.append(checkpoint.checkpoint_id)
        elif isinstance(item, _Rewind):
            flush()
            retraction = _retraction(thread, item.message_id)
            if retraction is not None:
                segment.append(retraction)
                job.report.retractions += 1
        else:
            if isinstance(item, fr.MessageAppended):
                job.report.messages += 1
            segment.append(item)
    flush()


def _thread_created(job: _Job) -> fr.ThreadCreated:
    project = project_root(job.path, job.header)
    title = job.redact_text(job.title)
    return common.thread_created(
        job.thread_id,
        source=SOURCE,
        project=project,
        git_branch=_git_branch(project),
        session_id=job.session_id,
        transcript=str(job.path),
        title=title,
        parent_thread_id=job.parent,
        ts_ms=next(
            (f.ts_ms for f in job.pending if isinstance(f, fr.MessageAppended) and f.ts_ms), 0
        ),
        extra={"title": title, "project_hash": str(job.header.get("projectHash") or "")},
    )


def _recent_messages(thread: Thread, n: int) -> list[fr.MessageAppended]:
    frames = thread.tail(n, types=["message_appended"])
    return [f for f in frames if isinstance(f, fr.MessageAppended)]


def _checkpoint_frame(
    job: _Job, thread: Thread, item: _Checkpoint
) -> fr.CompactionCheckpointCreated | None:
    recent = _recent_messages(thread, 256)
    if not recent:
        head = thread.head()
        if head is None:
            return None
        to_seq = head.seq
    else:
        to_seq = recent[-1].seq
        kept = set(item.kept)
        for i, frame in enumerate(recent):
            if kept & set(frame_keys(frame)):
                to_seq = recent[i - 1].seq if i else max(frame.seq - 1, 0)
                break
    return common.checkpoint(
        job.store,
        thread.id,
        checkpoint_id=f"gemini-{item.snapshot.get('id', '')}",
        cut_rule_id=CUT_RULE,
        produced_by=SOURCE,
        summary=job.redact_text(message_text(item.snapshot)),
        to_seq=to_seq,
        ts_ms=_ts_ms(item.snapshot.get("timestamp")),
    )


def _retraction(thread: Thread, message_id: str) -> fr.MessagesRetracted | None:
    """The rewound message and every message after it, as one span."""
    recent = _recent_messages(thread, 4096)
    key = f"g:{message_id}"
    for _i, frame in enumerate(recent):
        if key in frame_keys(frame):
            return fr.MessagesRetracted(
                spans=[fr.SeqSpan(from_seq=frame.seq, to_seq=recent[-1].seq)],
                reason=REWIND_REASON,
                message_ids=[message_id],
            )
    return None


def _ingest_locked(
    store: BaseStore,
    path: Path,
    cursor_file: Path | None,
    final: bool,
    redactor: Redactor | Literal["store"] | None,
) -> IngestReport:
    job = _Job(store, path, final, redactor, IngestReport(str(path)))
    cursor, why = common.resume(path, cursor_file, size=path.stat().st_size)
    job.report.restarted = why or None
    read, end = _read(job, cursor)
    job.report.skipped = dict(read.skipped)
    job.report.lost, job.report.lost_at = read.lost, read.lost_at
    _identify(job, read, cursor)
    job.report.session_id = job.session_id
    thread = job.thread = store.thread(job.thread_id)
    _load_keys(job, thread, cursor)
    items: list[Item] = read.items
    json_done = json_upto = 0
    json_last = ""
    if path.suffix == ".json":
        json_done, json_upto, json_last = _json_plan(read, cursor, final)
        if json_done == 0 and cursor is not None and cursor.state.get("json_done"):
            job.load_all_keys()  # the file no longer starts as archived: check every message
        messages = [i for i in items if isinstance(i, Message)]
        items = list(messages[:json_upto])
        if len(messages) > json_upto:
            job.report.held_back = True
    elif read.open_at is not None:
        items = [i for i in items if i.offset < read.open_at]
    _route(job, items, json_done)
    _append(job)
    head = thread.head()
    heads = dict(cursor.heads) if cursor else {}
    if head is not None:
        heads[thread.id] = head.seq
        job.report.threads = [thread.id]
    jsonl = path.suffix != ".json"
    common.save_cursor(
        cursor_file,
        common.FileCursor(
            path=str(path),
            # .json: rewritten whole, so neither its size nor its head says it is another
            # file: the ids of its messages do (json_done, json_last)
            offset=end if jsonl else 0,
            head_hash=common.head_hash(path, end) if jsonl else "",
            scanned=read.end + read.pending if end == read.end else 0,
            heads=heads,
            state=_cursor_state(cursor, job, json_upto, json_last),
        ),
    )
    return job.report


def _cursor_state(
    cursor: FileCursor | None, job: _Job, json_upto: int, json_last: str
) -> dict[str, Any]:
    """The adapter's state in the cursor: the recent keys (a message re-appended after it was
    archived is known without reading the log) and, for ``.json``, how far it is archived."""
    before = cursor.state.get("keys") if cursor is not None else None
    keys = [*(before if isinstance(before, list) else []), *job.new_keys][-_RECENT_KEYS:]
    state: dict[str, Any] = {"keys": keys}
    if json_upto:
        state.update(json_done=json_upto, json_last=json_last)
    return state


def ingest_file(
    store: BaseStore,
    path: str | os.PathLike[str],
    *,
    final: bool = False,
    redactor: Redactor | Literal["store"] | None = "store",
) -> IngestReport:
    """Ingest what is new in one Gemini CLI session file. Safe from parallel processes (one
    lock per file)."""
    p = Path(path).resolve()
    if not p.is_file():
        raise FileNotFoundError(f"no Gemini CLI session file {p}")
    with common.locked(store, SOURCE, p) as cursor_file:
        return _ingest_locked(store, p, cursor_file, final, redactor)


def ingest_paths(store: BaseStore, paths: list[Path], *, final: bool = True) -> list[IngestReport]:
    """Ingest every session file under ``paths`` (files or folders such as
    ``~/.gemini/tmp``), each main session before its sub-agents."""
    files = session_files(paths)
    files.sort(key=lambda p: _parent_of(p) is not None)
    return [ingest_file(store, f, final=final) for f in files]
