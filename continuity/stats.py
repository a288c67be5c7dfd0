"""Counts and sizes of a store (what ``continuity stats`` prints).

Redactions are counted from the frames' ``meta["redacted"]`` (:mod:`continuity.redaction`),
never by scanning for secrets again: the log's bytes are searched for that member, and only
the lines that hold it are decoded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import msgspec

from continuity import frames as fr
from continuity.caches.thread_index import ThreadIndex, check_no_lost_threads
from continuity.errors import ContinuityError, CorruptFrame
from continuity.redaction import META_KEY, redaction_count
from continuity.store.base import BaseStore, Thread

__all__ = ["StoreStats", "ThreadInfo", "list_threads", "store_stats", "thread_counts"]


class StoreStats(msgspec.Struct, frozen=True):
    threads: int
    frames: int
    messages: int
    checkpoints: int
    log_bytes: int
    artifacts: int
    artifact_bytes: int
    cache_bytes: int
    quarantined: int
    redactions: int = 0
    """Secrets redacted from the frames of every thread (counted where they were redacted)."""
    redactions_by_thread: dict[str, int] = {}
    """The same per thread, for the threads that had any."""


def _tree_bytes(root: Path | None) -> int:
    if root is None or not root.is_dir():
        return 0
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def thread_counts(thread: Thread) -> tuple[int, int, list[str]]:
    """(frames, messages, the checkpoints' cut rules): from the caches, brought up to date, or
    by reading the log when the store keeps none."""
    if ThreadIndex.available(thread):
        index = ThreadIndex(thread)
        index.refresh()
        cut_rules = [c.cut_rule_id for c in index.checkpoints()]
        return index.frame_count(), index.message_count(), cut_rules
    derived = thread.derived()
    if derived is not None:
        state = derived.state()
        found = derived.checkpoints(state.head_seq) if state.head_seq >= 0 else []
        return state.head_seq + 1, state.messages, [c.cut_rule_id for c in found]
    frames = messages = 0
    rules: list[str] = []
    for frame in thread.read():
        frames += 1
        messages += isinstance(frame, fr.MessageAppended)
        if isinstance(frame, fr.CompactionCheckpointCreated):
            rules.append(frame.cut_rule_id)
    return frames, messages, rules


def _log_bytes(thread: Thread) -> int:
    log = thread.open_log()
    if log is None:
        return thread.log_bytes()
    with log:
        return log.size()  # what the file takes, a torn tail included


_REDACTED: Final = b'"' + META_KEY.encode() + b'":"'
_CHUNK: Final = 1 << 20


def _redactions(thread: Thread) -> int:
    """The secrets redacted from ``thread``'s frames: the sum of their ``meta["redacted"]``.

    A frame that was redacted holds ``"redacted":"`` in its line (as an object member: inside
    a JSON string the quotes would be escaped), so a byte search finds the candidates and only
    those lines are decoded (a tool input could hold such a member too: decoding tells)."""
    log = thread.open_log()
    if log is None:
        return sum(
            redaction_count(thread.decode(seq, line))
            for seq, line in thread.lines_holding(_REDACTED)
        )
    total = 0
    with log:
        end = log.end
        pos = 0
        carry = b""
        while pos < end:
            chunk = log.pread(min(_CHUNK, end - pos), pos)
            if not chunk:
                break
            base = pos - len(carry)  # where ``data`` starts in the log
            data = carry + chunk
            pos += len(chunk)
            cut = data.rfind(b"\n") + 1
            data, carry = data[:cut], data[cut:]
            hit = data.find(_REDACTED)
            while hit >= 0:
                start = data.rfind(b"\n", 0, hit) + 1
                stop = data.find(b"\n", hit)
                try:
                    frame = fr.decode_frame(data[start:stop])
                except msgspec.DecodeError as exc:
                    raise CorruptFrame(thread.id, None, base + start, str(exc)) from None
                total += redaction_count(frame)
                hit = data.find(_REDACTED, stop)
    return total


def store_stats(store: BaseStore) -> StoreStats:
    """Counts and sizes of every thread, artifact and cache of ``store``."""
    frames = messages = checkpoints = log_bytes = 0
    redactions: dict[str, int] = {}
    check_no_lost_threads(store)  # a thread cut to nothing is an error, not a missing line
    ids = store.threads()
    for tid in ids:
        thread = store.thread(tid)
        f, m, rules = thread_counts(thread)
        frames, messages, checkpoints = frames + f, messages + m, checkpoints + len(rules)
        log_bytes += _log_bytes(thread)
        redacted = _redactions(thread)
        if redacted:
            redactions[tid] = redacted
    return StoreStats(
        threads=len(ids),
        frames=frames,
        messages=messages,
        checkpoints=checkpoints,
        log_bytes=log_bytes,
        artifacts=sum(1 for _ in store.artifacts.ids()),
        artifact_bytes=store.artifacts.stored_bytes(),
        cache_bytes=_tree_bytes(store.cache_dir),
        quarantined=len(store.quarantined()),
        redactions=sum(redactions.values()),
        redactions_by_thread=redactions,
    )


class ThreadInfo(msgspec.Struct, frozen=True, kw_only=True):
    """A thread as ``continuity threads`` lists it: from its first and last frames only."""

    thread_id: str
    frames: int
    last_active_ms: int
    """The last frame's time (0 when it has none)."""
    kind: str
    """``claude-code session``, ``claude-code subagent``, the ``source`` its creator recorded,
    or ``other``."""
    title: str | None = None
    parent_thread_id: str | None = None
    problem: str | None = None
    """Why the thread could not be read (``continuity verify`` says more)."""
    project: str = ""
    """The project folder its creator recorded (``meta["project"]``; Claude Code sessions)."""
    git_branch: str = ""
    messages: int = 0
    checkpoints: int = 0
    compactions: int = 0
    """Checkpoints that record a compaction by the agent itself (Claude Code's ``/compact``)."""
    log_bytes: int = 0
    head_digest: str = ""


def _kind(thread_id: str, first: fr.Frame | None) -> str:
    # As `sessions` decides: the adapter marks its threads' first frame with its source.
    if not isinstance(first, fr.ThreadCreated):
        return "other"
    source = first.meta.get("source", "")
    if source == "claude-code":
        agent = first.parent_thread_id is not None or ".agent-" in thread_id
        return "claude-code subagent" if agent else "claude-code session"
    return source or "other"


def thread_info(thread: Thread) -> ThreadInfo:
    """The first frame and the last one (two short, checked reads, whatever the log's length)
    and the counts of its caches. A thread that cannot be read is listed with the problem, not
    raised."""
    try:
        first = next(iter(thread.read(to_seq=0)), None)
        last = thread.tail(1)
        _frames, messages, cut_rules = thread_counts(thread)
        size = _log_bytes(thread)
    except ContinuityError as exc:
        return ThreadInfo(
            thread_id=thread.id, frames=0, last_active_ms=0, kind="?", problem=str(exc)
        )
    created = first if isinstance(first, fr.ThreadCreated) else None
    meta = created.meta if created else {}
    return ThreadInfo(
        thread_id=thread.id,
        frames=last[0].seq + 1 if last else 0,
        last_active_ms=last[0].ts_ms if last else 0,
        kind=_kind(thread.id, first),
        title=created.title if created else None,
        parent_thread_id=created.parent_thread_id if created else None,
        project=meta.get("project", ""),
        git_branch=meta.get("git_branch", ""),
        messages=messages,
        checkpoints=len(cut_rules),
        compactions=sum(1 for r in cut_rules if r.startswith("claude_code")),
        log_bytes=size,
        head_digest=last[0].digest if last else "",
    )


def list_threads(store: BaseStore) -> list[ThreadInfo]:
    """Every thread of ``store``, the most recently active last."""
    check_no_lost_threads(store)
    found = [thread_info(store.thread(tid)) for tid in store.threads()]
    found.sort(key=lambda t: (t.last_active_ms, t.thread_id))
    return found
