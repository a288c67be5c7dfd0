"""What every agent adapter needs, written once.

An adapter reads an agent's session file from where it stopped, turns the new lines into
frames and appends them to the session's thread. The pieces here make that incremental,
idempotent and safe to run from parallel hooks, the way :mod:`continuity.agents.claude_code.ingest`
is for Claude Code:

- :func:`locked` — one lock per session file (``flock`` on a file beside its cursor; an
  in-process lock for a store without a cache folder): two hooks ingesting one file at once
  take turns, so neither appends what the other just did.
- :class:`FileCursor`, :func:`resume`, :func:`save_cursor` — how far a file was read, kept in
  the store's adapter cache (:func:`cache_dir`), written atomically with a checksum. The
  cursor names the file's identity by a hash of its head: a file replaced, or shrunk below the
  offset, is read again from its start. A cache: deleting it costs a re-read, never a
  duplicate (the source keys below make the re-read append nothing).
- :func:`read_lines` — the complete JSON lines after an offset (Claude Code's reader,
  :func:`continuity.agents.claude_code.transcript.read_json_lines`): a line still being written is
  left for later, a line over the size cap is counted, never loaded.
- :class:`Keys` — the source keys a thread already holds, re-derived from its log after the
  cursor's head seq (or from its start when the cursor is lost): every message frame carries
  ``source`` (one key) and, when one line gave several keys, ``meta["source_keys"]``.
- :func:`thread_created`, :func:`externalize`, :func:`checkpoint` — the first frame of a
  session's thread with its ``meta`` convention, tool outputs over 16 KB to artifacts with a
  2,000-character preview, and the checkpoint of the agent's own compaction with its summary
  artifact.

Nothing here imports more than the Claude Code ingest does: it runs on the hook path.
"""

from __future__ import annotations

import _thread
import contextlib
import fcntl
import os
import re
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, Final, TypeVar

import blake3
import msgspec

from continuity import frames as fr
from continuity._fs import private_dirs, read_checked, write_checked
from continuity.agents.base.lines import MAX_LINE_BYTES, ReadResult, read_json_lines
from continuity.errors import note_rebuilt
from continuity.redaction import CONFIG_FILE, Redactor, load_redactor
from continuity.store.base import BaseStore, Thread

__all__ = [
    "ARTIFACT_THRESHOLD",
    "KEYS_META",
    "MAX_LINE_BYTES",
    "PREVIEW_CHARS",
    "FileCursor",
    "Keys",
    "ReadResult",
    "append_good",
    "cache_dir",
    "checkpoint",
    "externalize",
    "frame_keys",
    "head_hash",
    "ingest_redactor",
    "locked",
    "message",
    "read_lines",
    "record",
    "resume",
    "save_cursor",
    "thread_created",
    "ts_ms",
]

ARTIFACT_THRESHOLD: Final = 16 * 1024
"""A tool output longer than this (UTF-8 bytes) goes to an artifact; the frame keeps a preview."""
PREVIEW_CHARS: Final = 2000
KEYS_META: Final = "source_keys"
"""The ``meta`` key of a message frame that holds its further source keys, comma-separated."""
_HEAD_BYTES: Final = 4096

R = TypeVar("R")


def ts_ms(stamp: str) -> int:
    """Milliseconds since the epoch of an ISO-8601 time (0 when there is none or it is not one)."""
    if not stamp:
        return 0
    try:
        return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return 0


# -- where adapters keep their caches ---------------------------------------------------------


def cache_dir(store: BaseStore, agent: str) -> Path | None:
    """Where ``agent``'s adapter keeps caches of its own for ``store`` on this machine (session
    file cursors, session state): ``<cache>/<agent>`` in the store's cache folder, or, for a
    store on a server, in its local folder (:attr:`~continuity.store.base.BaseStore.local_dir`):
    session files are files of this machine, so their cursors are too. None: nowhere (an
    in-memory store); then every ingest reads whole files, still idempotently."""
    base = store.cache_dir
    if base is None and store.local_dir is not None:
        base = store.local_dir / "cache"
    return None if base is None else base / agent


def _cursor_file(store: BaseStore, agent: str, path: Path) -> Path | None:
    base = cache_dir(store, agent)
    if base is None:
        return None
    digest = blake3.blake3(os.fsencode(path)).hexdigest()[:32]
    return base / "cursors" / f"{digest}.json"


_LOCKS: Final[dict[Path, _thread.LockType]] = {}
_LOCKS_GUARD: Final = _thread.allocate_lock()


@contextlib.contextmanager
def locked(store: BaseStore, agent: str, path: Path) -> Iterator[Path | None]:
    """Hold the lock of session file ``path`` (resolved by the caller) and yield where its
    cursor lives (None: the store has no cache folder; the lock is then this process's)."""
    cursor_file = _cursor_file(store, agent, path)
    if cursor_file is None:
        with _LOCKS_GUARD:
            lock = _LOCKS.setdefault(path, _thread.allocate_lock())
        with lock:
            yield None
        return
    private_dirs(cursor_file.parent)
    fd = os.open(cursor_file.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield cursor_file
    finally:
        os.close(fd)  # closing drops the flock


# -- the cursor -------------------------------------------------------------------------------


class FileCursor(msgspec.Struct, kw_only=True):
    """How far a session file was ingested (a cache: losing it costs a re-read, never data)."""

    path: str
    offset: int = 0
    """Just past the last line ingested: the next read starts here."""
    head_hash: str = ""
    """A hash of the file's first bytes (up to 4 KiB, at most ``offset``): another file now."""
    scanned: int = 0
    """How far past ``offset`` the file is known to hold no newline (an unfinished last line):
    pass it to :func:`read_lines` as ``no_newline_before``."""
    heads: dict[str, int] = {}
    """Each thread's last seq when the cursor was written: :class:`Keys` reads only after it."""
    state: dict[str, Any] = {}
    """The adapter's own state between reads (a session id, calls waiting for their output…)."""


_cursor_decoder: Final = msgspec.json.Decoder(FileCursor)


def head_hash(path: Path, upto: int) -> str:
    """The identity of a file read up to ``upto``: the hash of its first min(upto, 4 KiB) bytes."""
    with open(path, "rb") as f:
        return blake3.blake3(f.read(min(upto, _HEAD_BYTES))).hexdigest()


def resume(path: Path, cursor_file: Path | None, *, size: int) -> tuple[FileCursor | None, str]:
    """The cursor to resume ``path`` (now ``size`` bytes) from, or None and why the file is read
    from its start: no cursor, a damaged one, a file that shrank or was replaced since."""
    if cursor_file is None:
        return None, "no cursor"
    try:
        data = read_checked(cursor_file)
    except FileNotFoundError:
        return None, "no cursor"
    except ValueError as exc:
        note_rebuilt(f"the ingest cursor {cursor_file}", str(exc), "the file is read again")
        return None, "unreadable cursor"
    try:
        cursor = None if data is None else _cursor_decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError):
        cursor = None
    if cursor is None:
        return None, "unreadable cursor"
    if size < cursor.offset:
        return None, f"file shrank from {cursor.offset} to {size} bytes"
    if cursor.offset and head_hash(path, cursor.offset) != cursor.head_hash:
        return None, "file was replaced"
    return cursor, ""


def save_cursor(cursor_file: Path | None, cursor: FileCursor) -> None:
    """Write ``cursor`` atomically (with a checksum; not fsynced: it is a cache)."""
    if cursor_file is not None:
        write_checked(cursor_file, msgspec.json.encode(cursor))


def read_lines(
    path: Path,
    start: int,
    parse: Callable[[dict[str, Any], int], R | str],
    *,
    no_newline_before: int = 0,
    max_line: int | None = None,
) -> ReadResult[R]:
    """The records of the complete JSON lines of ``path`` from ``start`` on (see
    :func:`continuity.agents.claude_code.transcript.read_json_lines`): ``parse`` gets each object
    and its offset and returns a record, or a string naming a line kind to count as skipped."""
    return read_json_lines(
        path, start, parse, no_newline_before=no_newline_before, max_line=max_line
    )


# -- idempotence ------------------------------------------------------------------------------


def frame_keys(frame: fr.Frame, system: str) -> list[str]:
    """The source keys a frame written by adapter ``system`` stands for."""
    if isinstance(frame, fr.MessageAppended) and frame.source is not None:
        if frame.source.system != system:
            return []
        extra = frame.meta.get(KEYS_META)
        return [frame.source.key, *(extra.split(",") if extra else ())]
    if isinstance(frame, fr.CompactionCheckpointCreated) and frame.produced_by == system:
        return [f"c:{frame.checkpoint_id}"]
    if isinstance(frame, fr.RecordAppended) and frame.kind.startswith(system + "."):
        return [f"r:{frame.key}"] if frame.key else []
    return []


class Keys:
    """The source keys of what adapter ``system`` already appended to the threads one ingest
    touches: loaded from each thread's log after the seq its cursor names (all of it when
    there is no cursor), plus those this ingest adds."""

    def __init__(self, system: str, heads: dict[str, int] | None = None) -> None:
        self.system = system
        self.heads = dict(heads or {})
        self._known: set[str] = set()
        self._loaded: set[str] = set()

    def load(self, thread: Thread) -> None:
        """Learn the keys ``thread`` holds (once per thread and ingest)."""
        if thread.id in self._loaded:
            return
        self._loaded.add(thread.id)
        after = self.heads.get(thread.id, -1)
        for frame in thread.read(from_seq=after + 1):
            self._known.update(frame_keys(frame, self.system))

    def seen(self, keys: Iterable[str]) -> bool:
        """Whether any of ``keys`` is archived already (then the line is skipped)."""
        return any(k in self._known for k in keys)

    def add(self, keys: Iterable[str]) -> None:
        self._known.update(keys)


def message(
    role: fr.Role,
    content: list[fr.ContentBlock],
    *,
    system: str,
    keys: list[str],
    message_id: str = "",
    ts_ms: int = 0,
    meta: dict[str, str] | None = None,
) -> fr.MessageAppended:
    """A message frame from adapter ``system`` standing for source ``keys`` (at least one):
    the first is its ``source.key``, the others go to ``meta[KEYS_META]``."""
    frame = fr.message(
        role,
        content=content,
        message_id=message_id or keys[0],
        source=fr.SourceRef(system=system, key=keys[0]),
        ts_ms=ts_ms,
    )
    merged = dict(meta or {})
    if len(keys) > 1:
        merged[KEYS_META] = ",".join(keys[1:])
    return msgspec.structs.replace(frame, meta=merged) if merged else frame


# -- frames ------------------------------------------------------------------------------------


def git_branch(folder: str) -> str:
    """The branch checked out in ``folder`` (its ``.git/HEAD``), "" for none or a detached
    head: for the agents whose session files do not say it (opencode)."""
    if not folder:
        return ""
    try:
        head = (Path(folder) / ".git" / "HEAD").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return ""
    return head.removeprefix("ref: refs/heads/") if head.startswith("ref: refs/heads/") else ""


def thread_created(
    thread_id: str,
    *,
    source: str,
    project: str = "",
    git_branch: str = "",
    session_id: str = "",
    transcript: str = "",
    title: str | None = None,
    parent_thread_id: str | None = None,
    ts_ms: int = 0,
    extra: dict[str, str] | None = None,
) -> fr.ThreadCreated:
    """The first frame of a session's thread. ``meta`` holds ``source`` (the agent: "codex",
    "gemini-cli", "opencode"), ``project`` (the absolute cwd), ``git_branch``, ``session_id``,
    ``transcript`` (the file it came from) and ``extra`` (the agent's own, e.g. its version);
    empty values are left out."""
    meta = {
        "source": source,
        "project": project,
        "git_branch": git_branch,
        "session_id": session_id,
        "transcript": transcript,
        **(extra or {}),
    }
    return fr.ThreadCreated(
        ts_ms=ts_ms,
        thread_id=thread_id,
        title=title or None,
        parent_thread_id=parent_thread_id,
        meta={k: v for k, v in meta.items() if v},
    )


def externalize(store: BaseStore, blocks: list[fr.ContentBlock]) -> list[fr.ContentBlock]:
    """``blocks`` with each tool result over :data:`ARTIFACT_THRESHOLD` bytes moved to an
    artifact (the block keeps a :data:`PREVIEW_CHARS` preview and the size). Redact first:
    the artifact holds what the frame would have."""
    out: list[fr.ContentBlock] = []
    for b in blocks:
        if isinstance(b, fr.ToolResultBlock) and b.artifact_id is None:
            size = b.size or len(b.content.encode("utf-8", "surrogatepass"))
            if size > ARTIFACT_THRESHOLD:
                aid = store.artifacts.put(b.content.encode("utf-8", "surrogatepass"))
                b = fr.ToolResultBlock(
                    tool_use_id=b.tool_use_id,
                    artifact_id=aid,
                    preview=b.content[:PREVIEW_CHARS],
                    size=size,
                    is_error=b.is_error,
                )
        out.append(b)
    return out


_KIND_PART: Final = re.compile(r"[^a-z0-9_-]")


def record_kind(kind: str) -> str:
    """``kind`` as a record frame takes it (dot-separated parts of lower-case letters, digits,
    ``_`` and ``-``, each starting with a letter or digit): a line's own kind, damaged or new,
    never fails its batch."""
    parts = [_KIND_PART.sub("_", p.lower()) for p in kind.split(".")]
    parts = [p if p[:1].isalnum() and p[:1].isascii() else f"x{p}" for p in parts]
    return ".".join(parts) if len(parts) > 1 else f"{parts[0]}.record"


def record(
    store: BaseStore, kind: str, key: str, data: Any, *, ts_ms: int = 0
) -> fr.RecordAppended:
    """A record of a line the adapter keeps whole (``data``, redacted by the caller): inline up
    to :data:`ARTIFACT_THRESHOLD` encoded bytes, else in an artifact the frame points at (a
    record frame holds at most 64 KiB: one large notice or payload must not fail its batch).
    ``kind`` is made a valid one (:func:`record_kind`)."""
    kind = record_kind(kind)
    raw = msgspec.json.encode(data)
    if len(raw) > ARTIFACT_THRESHOLD:
        aid = store.artifacts.put(raw)
        return fr.RecordAppended(kind=kind, key=key, artifact_id=aid, size=len(raw), ts_ms=ts_ms)
    return fr.RecordAppended(kind=kind, key=key, data=data, ts_ms=ts_ms)


def append_good(
    thread: Thread, frames: list[fr.Frame]
) -> tuple[list[tuple[int, fr.Frame]], list[tuple[fr.Frame, str]]]:
    """Append ``frames`` as one batch; if the store refuses it (:class:`BadFrame`), each frame
    alone: one frame the store will not take costs that frame, never the others. The frames
    appended with their seqs, and those refused with why."""
    from continuity.errors import BadFrame

    try:
        return list(zip(thread.append(frames), frames, strict=True)), []
    except BadFrame as exc:
        if len(frames) == 1:
            return [], [(frames[0], str(exc))]
    done: list[tuple[int, fr.Frame]] = []
    refused: list[tuple[fr.Frame, str]] = []
    for frame in frames:
        try:
            done.append((thread.append(frame)[0], frame))
        except BadFrame as exc:
            refused.append((frame, str(exc)))
    return done, refused


def checkpoint(
    store: BaseStore,
    thread_id: str,
    *,
    checkpoint_id: str,
    cut_rule_id: str,
    produced_by: str,
    summary: str,
    to_seq: int,
    ts_ms: int = 0,
    sections: dict[str, list[str]] | None = None,
) -> fr.CompactionCheckpointCreated:
    """The checkpoint of an agent's own compaction: it covers the thread up to ``to_seq`` (the
    last message before the compaction) and its summary artifact holds ``summary`` (the
    agent's summary text, redacted by the caller), so compile starts from it. ``sections``
    carry what is not text (an opaque summary kept as it is, under a name saying so)."""
    from continuity.summary import SummaryDoc, summary_bytes

    doc = SummaryDoc(
        thread_id=thread_id,
        to_seq=to_seq,
        produced_by=produced_by,
        text=summary,
        sections=sections or {},
    )
    return fr.CompactionCheckpointCreated(
        checkpoint_id=checkpoint_id,
        cut_rule_id=cut_rule_id,
        summary_kind="cumulative_v1",
        summary_artifact_id=store.artifacts.put(summary_bytes(doc)),
        from_seq=0,
        to_seq=to_seq,
        produced_by=produced_by,
        ts_ms=ts_ms,
    )


_LOADED: Final[dict[Path, tuple[tuple[int, int], Redactor | None]]] = {}
"""Each config file's redactor, by the file's mtime and size (a hook may ingest several files)."""


def ingest_redactor(store: BaseStore) -> Redactor | None:
    """The redactor ingest applies by default: the store's own ``redactor`` when it is a
    :class:`Redactor`; else, for a store kept in a folder, the one ``<store>/redaction.json``
    describes (None when it says ``"enabled": false``); else the built-in rules. A config that
    does not load raises :class:`~continuity.errors.InvalidSettings`, and nothing is ingested:
    a secret the config names must not get through while it is broken."""
    if isinstance(store.redactor, Redactor):
        return store.redactor
    root = getattr(store, "root", None)
    if isinstance(root, Path):
        config = root / CONFIG_FILE
        try:
            st = config.stat()
        except FileNotFoundError:
            pass
        else:
            stamp = (st.st_mtime_ns, st.st_size)
            known = _LOADED.get(config)
            if known is None or known[0] != stamp:
                known = _LOADED[config] = (stamp, load_redactor(config))
            return known[1]
    return Redactor()
