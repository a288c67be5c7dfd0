"""Incremental, idempotent ingest of Codex rollouts: one thread per session (``codex-<id>``).

Each rollout line becomes at most one frame, keyed by its offset and timestamp (the same in a
``.jsonl`` and in the ``.jsonl.zst`` Codex compresses it into later), so a re-read — after a
lost cursor, a replaced or shrunk file, or a crash between the append and the cursor — appends
nothing twice. A ``compacted`` line becomes a ``compaction_checkpoint_created`` (cut rule
``codex_compact/v1``) covering the messages before it, whose summary artifact is Codex's
summary (local compaction) or, for a remote one, a note that it is encrypted with the opaque
``compaction`` item kept as it is in the summary's ``sections``; the whole line (its
``replacement_history``) is kept as a ``codex.compacted`` record beside it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Final, Literal

import blake3
import msgspec

from continuity import frames as fr
from continuity.agents.base import ingest as common
from continuity.agents.base.ingest import ingest_redactor
from continuity.agents.base.losses import read_places
from continuity.agents.codex.rollout import (
    Compacted,
    Item,
    Message,
    Meta,
    Record,
    Usage,
    parse_line,
)
from continuity.agents.table import CODEX
from continuity.redaction import META_KEY, Redactor
from continuity.store.base import BaseStore, Thread

__all__ = ["CUT_RULE", "SOURCE", "IngestReport", "ingest_rollout", "session_of_name", "thread_id"]

SOURCE: Final = "codex"
_PLACES: Final = 5
CUT_RULE: Final = "codex_compact/v1"
_UUID: Final = re.compile(
    r"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})"
)
_REMOTE_NOTE: Final = (
    "[Codex compacted this conversation with a remote summary that is encrypted: continuity "
    "cannot read it. It is kept as it is; the messages before this point are archived.]"
)


class IngestReport(msgspec.Struct):
    path: str
    thread: str = ""
    messages: int = 0
    checkpoints: int = 0
    records: int = 0
    """Lines kept whole as records (session_meta, and kinds or events not known here)."""
    unknown: dict[str, int] = msgspec.field(default_factory=dict)
    """Of those, the line kinds and event types this adapter does not know, by name."""
    duplicates: int = 0
    skipped: dict[str, int] = msgspec.field(default_factory=dict)
    tool_calls: int = 0
    tool_outputs: int = 0
    bytes_read: int = 0
    restarted: str | None = None
    lost: int = 0
    """Complete lines this read could not archive (unreadable, or over the size cap)."""
    lost_at: list[str] = msgspec.field(default_factory=list)
    """The first of them, as ``file line N (why)``."""
    cut: str = ""
    """Why a compressed rollout ended before its end ("" when whole): what came before the
    cut is archived, the rest was never in the file."""


def thread_id(session_id: str, parent_session: str = "") -> str:
    """``codex-<session>``; a sub-agent's ``codex-<parent>.agent-<session>``."""
    if parent_session:
        return CODEX.subagent_thread_id(parent_session, session_id)
    return CODEX.thread_id(session_id)


def session_of_name(path: Path) -> str:
    """The session id in a rollout's file name (``rollout-<time>-<uuid>.jsonl[.zst]``)."""
    found = _UUID.findall(path.name)
    return found[-1] if found else path.name.split(".")[0]


def _key(item: Item) -> str:
    return f"{item.offset}@{item.ts}"


class _Marker(msgspec.Struct, frozen=True):
    item: Compacted


class _Job:
    def __init__(self, store: BaseStore, path: Path, redactor: Redactor | None) -> None:
        self.store = store
        self.path = path
        self.redactor = redactor
        self.report = IngestReport(os.fsencode(path).decode("utf-8", "backslashreplace"))

    def redact(self, blocks: list[fr.ContentBlock]) -> tuple[list[fr.ContentBlock], int]:
        return (blocks, 0) if self.redactor is None else self.redactor.redact_blocks(blocks)

    def redact_text(self, text: str) -> str:
        return text if self.redactor is None else self.redactor.redact_text(text)[0]

    def redact_value(self, value: Any) -> Any:
        return value if self.redactor is None else self.redactor.redact_value(value)[0]


def _record(job: _Job, item: Meta | Record | Compacted, kind: str) -> fr.RecordAppended:
    data = job.redact_value(item.payload)
    return common.record(
        job.store, f"{SOURCE}.{kind}", _key(item), data, ts_ms=common.ts_ms(item.ts)
    )


def _message(job: _Job, item: Message) -> fr.MessageAppended | None:
    if not item.blocks:
        return None
    blocks, redacted = job.redact(item.blocks)
    meta: dict[str, str] = {}
    if item.injected:
        meta["is_meta"] = "true"
    if item.codex_role and item.codex_role != "user":
        meta["codex_role"] = item.codex_role
    if item.kind != "message":
        meta["codex_kind"] = item.kind
    if redacted:
        meta[META_KEY] = str(redacted)
    if item.kind.endswith("_output"):
        job.report.tool_outputs += 1
    elif item.kind.endswith("call") and item.kind != "web_search_call":
        job.report.tool_calls += 1
    return common.message(
        item.role,
        common.externalize(job.store, blocks),
        system=SOURCE,
        keys=[_key(item)],
        message_id=item.item_id or _key(item),
        ts_ms=common.ts_ms(item.ts),
        meta=meta,
    )


def _checkpoint(
    job: _Job, tid: str, item: Compacted, to_seq: int
) -> fr.CompactionCheckpointCreated:
    summary = item.summary
    # Codex's local summary starts with a fixed preamble addressed to the model: kept as written
    sections: dict[str, list[str]] = {}
    if not summary.strip():
        summary = _REMOTE_NOTE
        sections["unreadable_codex_compaction"] = [
            msgspec.json.encode(o).decode() for o in item.opaque
        ] or ["(no compaction item)"]
    return common.checkpoint(
        job.store,
        tid,
        checkpoint_id=_checkpoint_id(item),
        cut_rule_id=CUT_RULE,
        produced_by=SOURCE,
        summary=job.redact_text(summary),
        to_seq=to_seq,
        ts_ms=common.ts_ms(item.ts),
        sections=sections,
    )


def _checkpoint_id(item: Compacted) -> str:
    return "codex-" + blake3.blake3(_key(item).encode()).hexdigest()[:16]


def _build(job: _Job, items: list[Item], keys: common.Keys) -> list[fr.Frame | _Marker]:
    out: list[fr.Frame | _Marker] = []
    seen_meta = False
    for item in items:
        if isinstance(item, Usage):
            _note_usage(out, item)
            continue
        if isinstance(item, Compacted):
            if keys.seen([f"c:{_checkpoint_id(item)}"]):
                job.report.duplicates += 1
                continue
            out.append(_Marker(item))
            continue
        if isinstance(item, Message):
            if keys.seen([_key(item)]):
                job.report.duplicates += 1
                continue
            frame = _message(job, item)
            if frame is not None:
                out.append(frame)
            continue
        if keys.seen([f"r:{_key(item)}"]):
            job.report.duplicates += 1
            continue
        if isinstance(item, Meta):
            kind = "session_meta" if not seen_meta else "session_meta.extra"
            seen_meta = True
        else:
            kind = item.kind
            job.report.unknown[kind] = job.report.unknown.get(kind, 0) + 1
        out.append(_record(job, item, kind))
    return out


def _note_usage(out: list[fr.Frame | _Marker], usage: Usage) -> None:
    """Put a ``token_count``'s figures into the meta of the assistant message it follows (the
    newest in this batch; one archived by an earlier ingest keeps its own)."""
    for i in range(len(out) - 1, -1, -1):
        frame = out[i]
        if isinstance(frame, _Marker):  # a compaction since: that message's context is gone
            return
        if isinstance(frame, fr.MessageAppended) and frame.role == "assistant":
            out[i] = msgspec.structs.replace(frame, meta={**frame.meta, **usage.meta})
            return


def _append(job: _Job, thread: Thread, frames: list[fr.Frame | _Marker]) -> None:
    """Append ``frames``; a marker becomes the checkpoint of the messages appended before it
    and the record of its line."""
    segment: list[fr.Frame] = []
    last_msg: list[int] = []

    def flush() -> None:
        if segment:
            done, refused = common.append_good(thread, segment)
            for seq, f in done:
                if isinstance(f, fr.MessageAppended):
                    last_msg[:] = [seq]
                    job.report.messages += 1
                elif isinstance(f, fr.RecordAppended):
                    job.report.records += 1
            for _, why in refused:
                job.report.lost += 1
                if len(job.report.lost_at) < _PLACES:
                    job.report.lost_at.append(
                        f"{job.report.path} (a line the store refused: {why})"
                    )
            segment.clear()

    for item in frames:
        if not isinstance(item, _Marker):
            segment.append(item)
            continue
        flush()
        to_seq = last_msg[0] if last_msg else None
        if to_seq is None:
            tail = thread.tail(1, types=["message_appended"])
            head = thread.head()
            to_seq = tail[0].seq if tail else (head.seq if head is not None else 0)
        segment.append(_checkpoint(job, thread.id, item.item, to_seq))
        segment.append(_record(job, item.item, "compacted"))
        flush()
        job.report.checkpoints += 1
    flush()


def _session(items: list[Item], state: dict[str, Any], path: Path) -> dict[str, Any]:
    """The session this file is (from its first ``session_meta``, else the cursor's state,
    else the file name): id, parent, cwd, branch, version."""
    if state.get("session_id"):
        return state
    meta = next((i for i in items if isinstance(i, Meta)), None)
    if meta is None:
        return {"session_id": session_of_name(path)}
    return {
        "session_id": meta.session_id or session_of_name(path),
        "parent": meta.parent_session,
        "cwd": meta.cwd,
        "git_branch": meta.git_branch,
        "cli_version": meta.cli_version,
        "originator": meta.originator,
        "ts": meta.ts,
    }


def _ingest_file(
    job: _Job, source: Path, cursor_file: Path | None, *, shown_as: Path
) -> IngestReport:
    size = source.stat().st_size
    cursor, why = common.resume(source, cursor_file, size=size)
    if cursor is None:
        job.report.restarted = why
    start = cursor.offset if cursor else 0
    scanned = cursor.scanned if cursor and cursor.scanned <= size else 0
    read: common.ReadResult[Item] = common.read_lines(
        source, start, parse_line, no_newline_before=scanned
    )
    job.report.bytes_read = read.end - start
    job.report.skipped = dict(read.skipped)
    job.report.lost = read.lost()
    if job.report.lost:
        job.report.lost_at = read_places(source, read, named=job.report.path)
    state = _session(read.records, dict(cursor.state) if cursor else {}, shown_as)
    tid = thread_id(state["session_id"], state.get("parent") or "")
    job.report.thread = tid
    thread = job.store.thread(tid)
    keys = common.Keys(SOURCE, cursor.heads if cursor else None)
    keys.load(thread)
    frames = _build(job, read.records, keys)
    if frames and not thread.exists():
        parent = state.get("parent") or ""
        first = common.thread_created(
            tid,
            source=SOURCE,
            project=state.get("cwd", ""),
            git_branch=state.get("git_branch", ""),
            session_id=state["session_id"],
            transcript=str(shown_as),
            parent_thread_id=thread_id(parent) if parent else None,
            ts_ms=common.ts_ms(state.get("ts", "")),
            extra={
                "codex_version": state.get("cli_version", ""),
                "originator": state.get("originator", ""),
            },
        )
        frames.insert(0, first)
    _append(job, thread, frames)
    head = thread.head()
    heads = dict(cursor.heads) if cursor else {}
    if head is not None:
        heads[tid] = head.seq
    common.save_cursor(
        cursor_file,
        common.FileCursor(
            path=job.report.path,
            offset=read.end,
            head_hash=common.head_hash(source, read.end),
            scanned=read.end + read.pending,
            heads=heads,
            state=state,
        ),
    )
    return job.report


def ingest_rollout(
    store: BaseStore,
    path: str | os.PathLike[str],
    *,
    final: bool = False,
    redactor: Redactor | Literal["store"] | None = "store",
) -> IngestReport:
    """Ingest what is new in one rollout (``.jsonl`` or ``.jsonl.zst``). Safe to run from
    parallel processes (a lock per file). ``final`` is accepted for the adapters' common
    signature: a rollout line is whole when written, so nothing is held back."""
    del final
    if redactor == "store":
        redactor = ingest_redactor(store)
    p = Path(path).resolve()
    job = _Job(store, p, redactor)
    with common.locked(store, SOURCE, p) as cursor_file:
        if not p.name.endswith(".zst"):
            return _ingest_file(job, p, cursor_file, shown_as=p)
        plain, cut = _decompressed(store, p)
        try:
            report = _ingest_file(job, plain, cursor_file, shown_as=p)
        finally:
            plain.unlink(missing_ok=True)
        report.cut = cut
        return report


_ZST_CHUNK: Final = 1 << 20


def _decompressed(store: BaseStore, path: Path) -> tuple[Path, str]:
    """``path`` decompressed (streamed: memory stays bounded) into a file the reader can seek
    (in the adapter cache, or beside the system's temporary files for a store without one),
    and why it stops short ("" when it is whole).

    A rollout cut short (a copy interrupted, a disk filled) or damaged part-way keeps what
    decompresses before the cut: zstd gives each block out whole, so that is every block
    before it; the reader then archives its complete lines and leaves the cut one."""
    import tempfile

    import zstandard

    folder = common.cache_dir(store, SOURCE)
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(suffix=".jsonl", dir=folder)
    try:
        with os.fdopen(fd, "wb") as out, open(path, "rb") as src:
            cut = _copy_frames(src, out, zstandard)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise
    if cut.startswith("not zstd: "):
        Path(name).unlink(missing_ok=True)
        raise ValueError(f"not a zstandard file ({cut.removeprefix('not zstd: ')})")
    return Path(name), cut


def _copy_frames(src: Any, out: Any, zstandard: Any) -> str:
    """Decompress every zstd frame of ``src`` into ``out``, as far as they go: "" when they
    end whole, else why they stop (``not zstd: …`` when not a byte could be decompressed)."""
    dobj = zstandard.ZstdDecompressor().decompressobj()
    fed = written = read = 0
    while chunk := src.read(_ZST_CHUNK):
        read += len(chunk)
        while chunk:
            try:
                data = dobj.decompress(chunk)
            except zstandard.ZstdError as exc:
                if not written:
                    return f"not zstd: {exc}"
                return f"damaged near byte {read}: {exc}"
            out.write(data)
            written += len(data)
            fed += len(chunk)
            if not dobj.eof:
                break
            chunk = dobj.unused_data  # the next frame, if the file holds several
            dobj = zstandard.ZstdDecompressor().decompressobj()
            fed = 0
    if fed and not dobj.eof:
        kept = f"{written} bytes before it kept" if written else "no whole block before it"
        return f"cut short: it ends inside a zstd frame at byte {read}; {kept}"
    return ""
