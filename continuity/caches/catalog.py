"""The store catalog: one row per thread, so store-wide listings do not walk every log.

``<store>/cache/catalog.v1.json`` holds, for every thread with committed frames, what
``continuity threads``, ``sessions`` and ``stats`` show of it: its first frame's title, parent
and meta (source, project, branch), its frame, message, checkpoint, compaction and redaction
counts, its last frame's time and digest, its last message's time, and its log's size. A row is
a pure function of the log; the file is the rows sorted by thread id, so deleting it and
building it again gives the same bytes (``continuity rebuild-index`` does).

**Never a stale row.** Every read takes each log's stamp from the store
(:meth:`~continuity.store.base.BaseStore.log_stamps`: its size and last 67 bytes, a few system
calls a log, nothing parsed) and serves a row only when the log still has the row's size and
ends with the row's head digest (a sealed line ends with ``<64 hex digits>"}`` and a newline).
The chain makes that enough: the last digest vouches for every byte before it, and a log only
grows by appends. Any other row is read again from the log (through the thread's caches when
it has them, so a grown thread costs its new bytes, the redaction count carried on from the old
row when the old end is still there; in one pass for a small log without caches, which are not
made for it) and the file is rewritten. So threads appended by a process that never
heard of the catalog, a store written by an older version (no catalog at all), a deleted or
damaged file (it does not decode: read as empty), and a writer killed mid-update (the file is
replaced by rename, so it is the old one or the new one) each cost one catch-up, never a wrong
answer. Two processes catching up at once both write complete files: the last one stays, and
every row of either is checked again on the next read.

Rows are only kept for logs at rest: a log with an unfinished batch or a torn tail, a log that
changed while its row was read, and a thread that cannot be read are read again each time (and
the latter reported as a problem, as before the catalog).

A backend that keeps a catalog itself (PostgreSQL: a table written in each append's
transaction, :meth:`~continuity.store.base.BaseStore.catalog`) is answered from it, in one
query; a store in memory has none: the same rows are read from each thread, every time.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Final, NamedTuple

import blake3
import msgspec

from continuity import frames as fr
from continuity._fs import atomic_write, remove_temps
from continuity.agents.table import agent_of_session, is_own_compaction, thread_kind
from continuity.caches.listing import (
    STAT_FILE,
    encode_stat_file,
    log_line,
    stat_file_header,
    vouched_catalog,
    vouches,
)
from continuity.caches.thread_index import ThreadIndex, caches_writable, check_no_lost_threads
from continuity.errors import ContinuityError, CorruptFrame, note_rebuilt
from continuity.redaction import META_KEY, redaction_count
from continuity.store.base import BaseStore, LogReader, LogStamp, Thread
from continuity.store.catalog import CatalogRow, CatalogRows

__all__ = [
    "CATALOG_FILE",
    "CatalogRow",
    "CatalogView",
    "Facts",
    "catalog_ids",
    "catalog_problems",
    "catalog_row",
    "catalog_view",
    "check_length",
    "current_rows",
    "fresh_row",
    "read_row",
    "rebuild_catalog",
    "row_of",
    "source_of",
    "thread_counts",
    "thread_sources",
    "wants_last_message",
]

CATALOG_FILE: Final = "catalog.v1.json"
_VERSION: Final = 3
"""2: each row carries a checksum (version 1 files, without, are read as absent and rebuilt);
3: every agent's sessions carry their last message's time and every agent's own compactions
are counted (:mod:`continuity.agents.table`), not Claude Code's alone (version 2 files are read
as absent and rebuilt)."""
_TAIL: Final = 67
"""A sealed line ends with its 64 hex digest, ``"}`` and a newline."""
_CHUNK: Final = 1 << 20
_SMALL: Final = 64 * 1024
"""A log up to this size without caches is counted by reading it, not by making its caches."""
_REDACTED: Final = b'"' + META_KEY.encode() + b'":"'


class _CatalogFile(msgspec.Struct, frozen=True):
    version: int
    threads: list[msgspec.Raw]
    """Each row's JSON, as written."""
    checks: list[str]
    """Each row's checksum (:func:`_check`): a row whose bytes do not match it is not served."""


_decoder: Final = msgspec.json.Decoder(_CatalogFile)
_row_decoder: Final = msgspec.json.Decoder(CatalogRow)
_encoder: Final = msgspec.json.Encoder()


def _check(raw: bytes) -> str:
    """A row's checksum: 64 bits of the blake3 of its JSON (damage, not an adversary, is what
    it catches: a forger able to write the file could as well write a log)."""
    return blake3.blake3(raw).hexdigest(8)


class CatalogView(NamedTuple):
    """Every thread of a store: the rows of those that could be read, sorted by thread id, and
    what went wrong reading the others (by thread id)."""

    rows: list[CatalogRow]
    problems: dict[str, ContinuityError]

    def raise_first(self, wanted: Iterator[str] | None = None) -> None:
        """Raise the problem of the first thread (in id order) that has one, among ``wanted``
        (default: all)."""
        ids = sorted(self.problems) if wanted is None else sorted(wanted)
        for tid in ids:
            if tid in self.problems:
                raise self.problems[tid]


# --- reading one thread -----------------------------------------------------------------------


def thread_counts(thread: Thread) -> tuple[int, int, list[str]]:
    """(frames, messages, the checkpoints' cut rules): from the caches, brought up to date, or
    by reading the log when the store keeps none."""
    index = ThreadIndex.current(thread)
    if index is not None:
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


def _redactions_in(thread: Thread, log: LogReader, start: int, end: int) -> int:
    """The sum of ``meta["redacted"]`` of the frames in ``[start, end)`` (line boundaries).

    A frame that was redacted holds ``"redacted":"`` in its line (as an object member: inside
    a JSON string the quotes would be escaped), so a byte search finds the candidates and only
    those lines are decoded (a tool input could hold such a member too: decoding tells)."""
    total = 0
    pos = start
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
            begin = data.rfind(b"\n", 0, hit) + 1
            stop = data.find(b"\n", hit)
            try:
                frame = fr.decode_frame(data[begin:stop])
            except msgspec.DecodeError as exc:
                raise CorruptFrame(thread.id, None, base + begin, str(exc)) from None
            total += redaction_count(frame)
            hit = data.find(_REDACTED, stop)
    return total


def _sealed_end(digest: str) -> bytes:
    return digest.encode() + b'"}\n'


def _still_ends(log: LogReader, row: CatalogRow) -> bool:
    """Whether the log still holds ``row``'s end: its head digest where the row's log ended."""
    if row.log_bytes < _TAIL or log.end < row.log_bytes:
        return False
    return log.pread(_TAIL, row.log_bytes - _TAIL) == _sealed_end(row.head_digest)


class Facts(NamedTuple):
    """What a row says of a thread's frames, however it was read."""

    first: fr.Frame | None
    last: fr.Frame | None
    last_message_ms: int | None
    messages: int
    cut_rules: list[str]
    redactions: int


def _wants_last_message(thread: Thread, first: fr.Frame | None) -> bool:
    return wants_last_message(thread.id, first)


def wants_last_message(thread_id: str, first: fr.Frame | None) -> bool:
    """Only ``sessions`` shows it: the rows of agents' sessions (Claude Code's, Codex's, …:
    :mod:`continuity.agents.table`) carry it."""
    return (
        isinstance(first, fr.ThreadCreated)
        and agent_of_session(thread_id, first.meta.get("source", "")) is not None
    )


def _facts_in_one_pass(thread: Thread) -> Facts:
    """Every frame read once, in order (each checked against the chain as it is read)."""
    first: fr.Frame | None = None
    last: fr.Frame | None = None
    last_message_ms: int | None = None
    messages = redactions = 0
    rules: list[str] = []
    for frame in thread.read():
        if first is None:
            first = frame
        last = frame
        if isinstance(frame, fr.MessageAppended):
            messages += 1
            last_message_ms = frame.ts_ms
        elif isinstance(frame, fr.CompactionCheckpointCreated):
            rules.append(frame.cut_rule_id)
        redactions += redaction_count(frame)
    if not _wants_last_message(thread, first):
        last_message_ms = None
    return Facts(first, last, last_message_ms, messages, rules, redactions)


def _facts_from_caches(thread: Thread, log: LogReader | None, previous: CatalogRow | None) -> Facts:
    """The first and last frames (two short reads), the counts of the thread's caches (caught
    up with its new bytes), the redactions of its new bytes added to ``previous``'s."""
    first = next(iter(thread.read(to_seq=0)), None)
    tail = thread.tail(1)
    _frames, messages, cut_rules = thread_counts(thread)
    if log is None:
        redactions = sum(
            redaction_count(thread.decode(seq, line))
            for seq, line in thread.lines_holding(_REDACTED)
        )
    else:
        start, carried = 0, 0
        if previous is not None and _still_ends(log, previous):
            start, carried = previous.log_bytes, previous.redactions
        redactions = carried + _redactions_in(thread, log, start, log.end)
    last_message_ms = None
    if _wants_last_message(thread, first):
        found = thread.tail(1, types=["message_appended"])
        last_message_ms = found[0].ts_ms if found else None
    last = tail[0] if tail else None
    return Facts(first, last, last_message_ms, messages, cut_rules, redactions)


def read_row(
    thread: Thread, previous: CatalogRow | None = None, *, from_log: bool = False
) -> tuple[CatalogRow, bool]:
    """The row of ``thread`` read from its log (and caches), and whether it may be kept: the
    log is at rest (no unfinished batch or torn tail) and did not change while it was read.

    A thread whose caches exist is read through them (its first and last frames, the counts,
    and the redactions of the bytes ``previous`` did not cover, when the log still ends where
    that older row said): a grown thread costs its new bytes, and the caches also know whether
    the log was once longer than it is now. A small log without caches (a store listed for
    the first time) is read in one pass instead of having a dozen cache files made for it; so
    is any log with ``from_log`` (``verify``: the caches are neither used nor written). Raises
    :class:`ContinuityError` when the thread cannot be read."""
    log = thread.open_log()
    try:
        size = log.size() if log is not None else -1
        small = log is not None and size <= _SMALL and ThreadIndex(thread).manifest() is None
        if from_log or small:
            facts = _facts_in_one_pass(thread)
        else:
            facts = _facts_from_caches(thread, log, previous)
        log_bytes = thread.log_bytes() if log is None else size  # a torn tail included
        row = row_of(thread.id, facts, log_bytes)
        last = facts.last
        keep = (
            log is not None
            and last is not None
            and log.end == size
            and _at_rest(thread, size, row.head_digest)
        )
        return row, keep
    finally:
        if log is not None:
            log.close()


def row_of(thread_id: str, facts: Facts, log_bytes: int) -> CatalogRow:
    """The row of a thread whose frames gave ``facts`` (however they were read) and whose log
    holds ``log_bytes``."""
    first, last = facts.first, facts.last
    created = first if isinstance(first, fr.ThreadCreated) else None
    meta = created.meta if created else {}
    rules = facts.cut_rules
    return CatalogRow(
        thread_id=thread_id,
        log_bytes=log_bytes,
        frames=last.seq + 1 if last else 0,
        head_digest=last.digest if last else "",
        last_active_ms=last.ts_ms if last else 0,
        first_ms=first.ts_ms if first is not None else 0,
        last_message_ms=facts.last_message_ms,
        created=created is not None,
        source=meta.get("source", ""),
        title=created.title if created else None,
        parent_thread_id=created.parent_thread_id if created else None,
        project=meta.get("project", ""),
        git_branch=meta.get("git_branch", ""),
        messages=facts.messages,
        checkpoints=len(rules),
        compactions=sum(1 for r in rules if is_own_compaction(r)),
        redactions=facts.redactions,
    )


def _at_rest(thread: Thread, size: int, digest: str) -> bool:
    """Whether the log, opened again, still has ``size`` bytes and ends with ``digest``."""
    log = thread.open_log()
    if log is None:
        return False
    with log:
        return (
            size >= _TAIL
            and log.size() == size
            and log.pread(_TAIL, size - _TAIL) == _sealed_end(digest)
        )


# --- the catalog file -------------------------------------------------------------------------


def _path(store: BaseStore) -> Path | None:
    return None if store.cache_dir is None else store.cache_dir / CATALOG_FILE


class _Loaded(NamedTuple):
    rows: dict[str, CatalogRow]
    """The rows whose checksums hold, by thread id."""
    damaged: list[tuple[str | None, int]]
    """The others: their thread ids (when still readable) and places in the file."""


def _read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:  # none, or not a file (the folder it is in gone, a folder in its place)
        return None


def _load(path: Path) -> dict[str, CatalogRow] | None:
    """See :func:`_load_data`."""
    data = _read_bytes(path)
    return None if data is None else _load_data(path, data)


def _load_data(path: Path, data: bytes) -> dict[str, CatalogRow] | None:
    """The sound rows on disk by thread id; None when there is no catalog or it does not decode
    (a damaged catalog is read as empty: every row is read again and the file rewritten). A row
    whose checksum fails is left out (read again from its log), with a note on stderr."""
    loaded = _checked(path, data)
    if loaded is None:
        return None
    if loaded.damaged:
        names = [_row_name(tid, i) for tid, i in loaded.damaged[:3]]
        note_rebuilt(
            f"the store catalog ({path})",
            f"{len(loaded.damaged)} damaged row(s) ({', '.join(names)})",
        )
    return loaded.rows


def _load_checked(path: Path) -> _Loaded | None:
    try:
        data = path.read_bytes()
    except OSError:  # none, or not a file (the folder it is in gone, a folder in its place)
        return None
    return _checked(path, data)


def _checked(path: Path, data: bytes) -> _Loaded | None:
    try:
        found = _decoder.decode(data)
    except (msgspec.DecodeError, UnicodeDecodeError):
        if data:
            note_rebuilt(f"the store catalog ({path})", "the file does not decode")
        return None
    if found.version != _VERSION:
        return None
    if len(found.checks) != len(found.threads):
        note_rebuilt(f"the store catalog ({path})", "its rows and checksums do not pair up")
        return None
    rows: dict[str, CatalogRow] = {}
    damaged: list[tuple[str | None, int]] = []
    for i, (raw, check) in enumerate(zip(found.threads, found.checks, strict=True)):
        row = _sound_row(bytes(raw), check)
        if row is None:
            damaged.append((_id_of(bytes(raw)), i))
        else:
            rows[row.thread_id] = row
    return _Loaded(rows, damaged)


def _sound_row(raw: bytes, check: str) -> CatalogRow | None:
    if _check(raw) != check:
        return None
    try:
        return _row_decoder.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None


def _row_name(tid: str | None, i: int) -> str:
    return f"row {i}" if tid is None else f"thread {tid!r}"


def _id_of(raw: bytes) -> str | None:
    """A damaged row's thread id, when it still decodes to one."""
    try:
        return _row_decoder.decode(raw).thread_id
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None


def _cut_short(thread: Thread, row: CatalogRow, size: int) -> CorruptFrame:
    """The problem of a log now ``size`` bytes long that ``row`` saw at ``row.log_bytes``."""
    try:
        head = thread.head()
        first_missing = 0 if head is None else head.seq + 1
    except ContinuityError:
        first_missing = 0
    return CorruptFrame(
        thread.id,
        first_missing,
        size,
        f"the log ends here, but the store catalog recorded {row.frames} frames "
        f"({row.log_bytes} bytes, up to seq {row.frames - 1}): committed frames are missing "
        "from the log. If that is expected, `continuity rebuild-index` accepts the log as it "
        "is now",
    )


class _Id(msgspec.Struct):
    thread_id: str


_id_decoder: Final = msgspec.json.Decoder(_Id)
_ROWS: dict[Path, tuple[tuple[int, int, int], _CatalogFile | None]] = {}
"""The catalog file as last read by this process, by its (inode, size, mtime): its rows still
raw, so one row is found by bisection without decoding the others."""


def catalog_row(store: BaseStore, thread_id: str) -> CatalogRow | None:
    """The catalog's row of ``thread_id`` as the file holds it (None: no catalog, no row, or a
    row that fails its checksum), whether or not it is current: what the catalog last knew of
    the thread. Finds it by bisection over the raw rows (sorted by thread id)."""
    path = _path(store)
    if path is None:
        return None
    found = _raw_file(path)
    if found is None or found.version != _VERSION or len(found.checks) != len(found.threads):
        return None
    rows = found.threads
    lo, hi = 0, len(rows)
    try:
        while lo < hi:
            mid = (lo + hi) // 2
            if _id_decoder.decode(rows[mid]).thread_id < thread_id:
                lo = mid + 1
            else:
                hi = mid
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None  # a damaged row on the way: the listings will read it again
    if lo == len(rows):
        return None
    row = _sound_row(bytes(rows[lo]), found.checks[lo])
    return row if row is not None and row.thread_id == thread_id else None


def _raw_file(path: Path) -> _CatalogFile | None:
    try:
        st = path.stat()
    except OSError:
        return None
    key = (st.st_ino, st.st_size, st.st_mtime_ns)
    known = _ROWS.get(path)
    if known is not None and known[0] == key:
        return known[1]
    try:
        found: _CatalogFile | None = _decoder.decode(path.read_bytes())
    except (OSError, msgspec.DecodeError, UnicodeDecodeError):
        found = None
    _ROWS.clear()  # one store per process, as a rule
    _ROWS[path] = (key, found)
    return found


def check_length(thread: Thread) -> None:
    """Raise :class:`CorruptFrame` when the log of ``thread`` is shorter than its caches or its
    catalog row recorded: committed frames were cut from its end. A small thread keeps no
    caches (ADR 0031), so its row is the only record of how far its log went. Reads a manifest,
    a catalog row and the log's size; writes nothing."""
    if thread.store.cache_dir is None:
        return
    ThreadIndex(thread).check_length()
    row = catalog_row(thread.store, thread.id)
    if row is None:
        return
    log = thread.open_log()
    size = 0
    if log is not None:
        with log:
            size = log.size()
    if size < row.log_bytes:
        raise _cut_short(thread, row, size)


def _current(row: CatalogRow | None, stamp: LogStamp) -> bool:
    return (
        row is not None
        and row.log_bytes == stamp.size
        and stamp.tail == _sealed_end(row.head_digest)
    )


def _encode(rows: list[CatalogRow]) -> bytes:
    raws = [_encoder.encode(r) for r in rows]
    checks = [_check(r) for r in raws]
    return _encoder.encode(_CatalogFile(_VERSION, [msgspec.Raw(r) for r in raws], checks)) + b"\n"


def _write(store: BaseStore, path: Path, rows: list[CatalogRow]) -> bytes | None:
    """Write the catalog of ``rows``; its bytes, or None when it could not be written."""
    cache_dir = store.cache_dir
    if cache_dir is None or not caches_writable(cache_dir):
        return None  # a read-only store is read the slow way, every time
    data = _encode(rows)
    try:
        os.makedirs(cache_dir, exist_ok=True)
        atomic_write(path, data, durable=False)  # a cache: rebuilt, not recovered
    except OSError:
        return None  # the answer stands; the next read catches up again
    return data


def fresh_row(thread: Thread) -> CatalogRow | None:
    """The row of ``thread`` as :func:`catalog_view` would read and keep it, or None when it
    would not keep one (no committed frame, a log not at rest, a thread that cannot be read):
    what a bulk worker reads for the catalog (ADR 0030), handed to :func:`rebuild_catalog`,
    which takes it only while the log still has the row's size and head digest."""
    try:
        if thread.head() is None:
            return None
        row, keep = read_row(thread)
    except ContinuityError:
        return None  # read again by the catalog itself, which says what is wrong
    return row if keep else None


def catalog_view(
    store: BaseStore,
    *,
    fresh: Mapping[str, CatalogRow] | None = None,
    sessions_file: bool = False,
) -> CatalogView:
    """Every thread of ``store`` with committed frames: from the catalog where its rows are
    current, read from the log (and kept) where they are not. A store that keeps no catalog
    (no cache folder, or logs that are not bytes) is read thread by thread. ``fresh`` holds
    rows read already (:func:`fresh_row`, in bulk workers): one is taken instead of reading its
    log when it describes the log as it is now (its size and last digest), as a row of the
    file would be.

    ``sessions_file``: ``sessions`` and ``stats`` (and ``rebuild-index``) also bring the
    sessions file (:mod:`continuity.caches.session_file`) up to date when the listing file
    vouches for the rows (other listings leave it: it costs a pass over every session).

    Raises :class:`CorruptFrame` when a log cut to nothing was indexed further by its caches
    (:func:`check_no_lost_threads`)."""
    own = store.catalog()
    if own is not None:
        return _own_view(store, own.rows())
    path = _path(store)
    vouched = _vouched_rows(store, path, sessions_file=sessions_file)
    if vouched is not None:
        return CatalogView(vouched, {})
    return _checked_view(store, path, fresh, sessions_file=sessions_file)


def _checked_view(
    store: BaseStore,
    path: Path | None,
    fresh: Mapping[str, CatalogRow] | None,
    *,
    sessions_file: bool = False,
) -> CatalogView:
    """:func:`catalog_view` the full way: every log's stamp against its row."""
    stamps = store.log_stamps(_TAIL) if path is not None else None
    if path is None or stamps is None:
        check_no_lost_threads(store)
        return _read_all(store, [store.thread(tid) for tid in store.threads()])
    data = _read_bytes(path)
    old = None if data is None else _load_data(path, data)
    known = old or {}
    rows: list[CatalogRow] = []
    kept: list[CatalogRow] = []
    problems: dict[str, ContinuityError] = {}
    dirty = old is None and bool(stamps)  # a row to add, change or drop: write the file
    for stamp in sorted(stamps):
        row = known.get(stamp.thread_id)
        if row is not None and _current(row, stamp):
            rows.append(row)
            kept.append(row)
            continue
        if row is not None and stamp.size < row.log_bytes:
            # Logs only grow: committed frames were cut from its end. The row is kept, so the
            # loss is reported until the log is repaired or rebuild-index accepts it as it is.
            problems[row.thread_id] = _cut_short(store.thread(row.thread_id), row, stamp.size)
            kept.append(row)
            continue
        read = None if fresh is None else fresh.get(stamp.thread_id)
        if read is not None and _current(read, stamp):
            rows.append(read)
            kept.append(read)
            dirty = True
            continue
        thread = store.thread(stamp.thread_id)
        try:
            empty = thread.head() is None
        except CorruptFrame:
            empty = False  # it has frames; reading them says what is wrong
        if empty:  # bytes, but no committed frame (a first batch cut short): not a thread
            if ThreadIndex.available(thread):
                ThreadIndex(thread).check_length()  # unless the caches knew frames in it
            continue
        try:
            now, keep = read_row(thread, row)
        except ContinuityError as exc:
            problems[thread.id] = exc
            continue
        rows.append(now)
        if keep:
            kept.append(now)
            dirty = True
        elif row is not None:
            dirty = True  # its old row is dropped
    if dirty or len(kept) != len(known):
        data = _write(store, path, kept)
    if not problems:
        _vouch(store, path, data, kept, stamps, sessions_file=sessions_file)
    return CatalogView(rows, problems)


class _Listed(NamedTuple):
    thread_id: str
    frames: int
    last_active_ms: int
    kind: str
    problem: str | None = None


def _listing(rows: list[CatalogRow]) -> bytes | None:
    """What ``continuity threads`` prints of ``rows`` (:func:`~continuity._text.
    render_threads`, as :func:`~continuity.maintenance.stats.list_threads` orders them); None
    when there is none or it holds an escape sequence (click strips them from a pipe)."""
    from continuity._text import render_threads

    if not rows:
        return None
    listed = sorted(
        (
            _Listed(
                r.thread_id,
                r.frames,
                r.last_active_ms,
                thread_kind(r.thread_id, r.created, r.source, r.parent_thread_id),
            )
            for r in rows
        ),
        key=lambda t: (t.last_active_ms, t.thread_id),
    )
    text = render_threads(listed)
    return None if "\x1b" in text else (text + "\n").encode()


def _vouched_rows(
    store: BaseStore, path: Path | None, *, sessions_file: bool = False
) -> list[CatalogRow] | None:
    """The catalog's rows, sorted by thread id, when the listing file vouches for every log of
    a folder store as it is now (:func:`~continuity.caches.listing.vouched_catalog`: one stat
    a log, none opened): what the full check would find, every row current and nothing to
    write. None otherwise."""
    if path is None or getattr(store, "stamps_read", True):
        # not a folder store, or a long-lived reader (the MCP server, the viewer) whose store
        # has read the stamps once already: its memo is as cheap, and a check that fails
        # would cost a second stat of every log
        return None
    data = vouched_catalog(path.parent.parent)
    if data is None:
        return None
    rows = _load_data(path, data)
    if rows is None:
        return None
    found = [rows[tid] for tid in sorted(rows)]
    if sessions_file:
        from continuity.caches.session_file import write_sessions_file

        write_sessions_file(path.parent.parent, data, found)  # when it is not that catalog's
    return found


def _vouch(
    store: BaseStore,
    path: Path,
    data: bytes | None,
    kept: list[CatalogRow],
    stamps: list[LogStamp],
    *,
    sessions_file: bool = False,
) -> None:
    """Write the stat file that lets the next listing skip opening the logs
    (:mod:`continuity.caches.listing`), when the catalog ``data`` is current for every log and
    every log's stat is settled; else leave it (a stale one vouches for nothing current)."""
    settled_stats = getattr(store, "settled_stats", None)
    if data is None or settled_stats is None or len(kept) != len(stamps):
        return
    settled: dict[str, tuple[int, int, int, int]] = settled_stats()
    by_id = {row.thread_id: row for row in kept}
    logs: list[str] = []
    for stamp in stamps:
        key = settled.get(stamp.thread_id)
        if key is None or not _current(by_id.get(stamp.thread_id), stamp):
            return
        logs.append(log_line(stamp.thread_id, *key))
    try:
        marker = (path.parent.parent / "store.json").read_bytes()
        side = path.with_name(STAT_FILE)
        header = stat_file_header(marker, data, logs)
        try:
            current = vouches(side.read_bytes(), header)
        except OSError:
            current = False
        if not current:  # else the listing after it is the same function of the same catalog
            listing = _listing(kept)
            if listing is None:
                return
            atomic_write(side, encode_stat_file(marker, data, logs, listing), durable=False)
    except OSError:
        return  # a cache: the listing stands, the next one takes the full path again
    if sessions_file:
        from continuity.caches.session_file import write_sessions_file

        write_sessions_file(path.parent.parent, data, kept)


def _own_view(store: BaseStore, found: CatalogRows) -> CatalogView:
    """A backend's own catalog as a view: a row still behind after its catch-up (moved
    again by older code meanwhile) is read from the thread."""
    if not found.behind:
        return CatalogView(found.rows, dict(found.problems))
    more = _read_all(store, [store.thread(tid) for tid in found.behind])
    rows = sorted([*found.rows, *more.rows], key=lambda r: r.thread_id)
    return CatalogView(rows, {**found.problems, **more.problems})


def current_rows(
    store: BaseStore, *, project: str | None = None
) -> tuple[list[CatalogRow], list[str]] | None:
    """The catalog's rows that still describe their logs, and the ids of the other stored
    logs (to be read some other way), without reading a log or writing the file: for a
    latency-bound caller (a hook) that must not pay for another thread's catch-up. None when
    the store keeps no catalog. ``project``: a backend that keeps its own catalog may leave
    out the current rows of threads of other projects (the caller still checks each row)."""
    own = store.catalog()
    if own is not None:
        found = own.rows(catch_up=False, project=project)
        return found.rows, found.behind
    path = _path(store)
    stamps = store.log_stamps(_TAIL) if path is not None else None
    if path is None or stamps is None:
        return None
    known = _load(path) or {}
    rows: list[CatalogRow] = []
    others: list[str] = []
    for stamp in sorted(stamps):
        row = known.get(stamp.thread_id)
        if row is not None and _current(row, stamp):
            rows.append(row)
        else:
            others.append(stamp.thread_id)
    return rows, others


def catalog_ids(store: BaseStore) -> set[str]:
    """The thread ids the catalog file holds rows of, as it is (``verify``: rows of threads
    with no log are left over from a deletion or a lost log)."""
    path = _path(store)
    return set() if path is None else set(_load(path) or {})


def source_of(store: BaseStore, thread_id: str) -> str:
    """A thread's ``meta["source"]`` ("" when it records none or cannot be read): from its
    catalog row, current or not (a first frame never changes), else from its first frame."""
    row = catalog_row(store, thread_id)
    if row is not None:
        return row.source
    try:
        first = next(iter(store.thread(thread_id).read(to_seq=0)), None)
    except ContinuityError:
        return ""
    return first.meta.get("source", "") if isinstance(first, fr.ThreadCreated) else ""


def thread_sources(store: BaseStore) -> dict[str, str]:
    """Every stored thread's ``meta["source"]`` ("" when its first frame records none), by
    thread id: from the catalog's rows, current or not (a log's first frame never changes),
    else read from the thread's first frame. Neither brings a row up to date nor writes the
    file: cheap enough for ``search --agent`` before a search."""
    path = _path(store)
    known = (_load(path) or {}) if path is not None else {}
    own = store.catalog()
    if own is not None:
        known = {r.thread_id: r for r in own.rows(catch_up=False).rows}
    found: dict[str, str] = {}
    for tid in store.stored_thread_ids():
        row = known.get(tid)
        if row is not None:
            found[tid] = row.source
            continue
        try:
            first = next(iter(store.thread(tid).read(to_seq=0)), None)
        except ContinuityError:
            continue  # the search itself says what is wrong with it
        if first is not None:
            found[tid] = first.meta.get("source", "") if isinstance(first, fr.ThreadCreated) else ""
    return found


def _read_all(store: BaseStore, threads: list[Thread]) -> CatalogView:
    rows: list[CatalogRow] = []
    problems: dict[str, ContinuityError] = {}
    for thread in threads:
        try:
            rows.append(read_row(thread)[0])
        except ContinuityError as exc:
            problems[thread.id] = exc
    return CatalogView(rows, problems)


def rebuild_catalog(
    store: BaseStore,
    thread_ids: set[str] | None = None,
    fresh: Mapping[str, CatalogRow] | None = None,
) -> int | None:
    """Delete the catalog (the rows of ``thread_ids`` only, when given) and build it again
    from the logs: byte-identical to one kept up to date by reads. ``fresh``: rows read already
    (see :func:`catalog_view`). Returns the number of rows kept, or None when the store keeps
    no catalog."""
    own = store.catalog()
    if own is not None:
        return own.rebuild(thread_ids)
    path = _path(store)
    if path is None or store.log_stamps(0) is None:
        return None
    if thread_ids is None:
        path.unlink(missing_ok=True)
        # readers rewrite the catalog without a lock: only a dead writer's file goes
        remove_temps(path.parent, holding_lock=False)
    else:
        rows = _load(path)
        if rows is not None:
            _write(store, path, [r for t, r in sorted(rows.items()) if t not in thread_ids])
    catalog_view(store, fresh=fresh, sessions_file=True)
    loaded = _load(path)
    return 0 if loaded is None else len(loaded)


def _written_by_another_version(path: Path) -> bool:
    try:
        version = msgspec.json.decode(path.read_bytes(), type=_Version).version
    except (OSError, msgspec.DecodeError, UnicodeDecodeError):
        return False
    return version != _VERSION


class _Version(msgspec.Struct):
    version: int


def catalog_problems(
    store: BaseStore,
    thread_ids: set[str] | None = None,
    fresh: Mapping[str, tuple[CatalogRow, bool]] | None = None,
) -> list[tuple[str | None, str]]:
    """What is wrong with the catalog on disk, as (thread id or None, what): a file that does
    not decode, or a row that claims to describe its log (the log still has its size and head
    digest) but differs from the row read from the whole log now, without the caches. Rows of
    logs that changed since are behind, not wrong: the next read replaces them; rows of logs
    that cannot be read are left to the log's own checks. Empty when the catalog is sound or
    absent. ``thread_ids`` limits the check of rows to those threads. ``fresh`` holds rows
    already read from whole logs (``verify`` makes them in its own pass over every line), with
    whether each log was at rest: those logs are not read again."""
    own = store.catalog()
    if own is not None:
        return own.problems(thread_ids, fresh)
    path = _path(store)
    if path is None or not path.exists():
        return []
    stamps = store.log_stamps(_TAIL)
    if stamps is None:
        return []
    loaded = _load_checked(path)
    if loaded is None:
        if _written_by_another_version(path):
            return []  # not damage: the next listing writes it in this version's format
        return [(None, f"{CATALOG_FILE} does not decode (the next listing rebuilds it)")]
    found: list[tuple[str | None, str]] = [
        (tid, f"row {i} does not match its checksum (the next listing reads it again)")
        for tid, i in loaded.damaged
        if thread_ids is None or tid is None or tid in thread_ids
    ]
    by_id = {s.thread_id: s for s in stamps}
    for tid, row in sorted(loaded.rows.items()):
        if thread_ids is not None and tid not in thread_ids:
            continue
        stamp = by_id.get(tid)
        if stamp is not None and stamp.size < row.log_bytes:
            found.append((tid, str(_cut_short(store.thread(tid), row, stamp.size))))
            continue
        if stamp is None or not _current(row, stamp):
            continue
        known = None if fresh is None else fresh.get(tid)
        if known is not None:
            now, at_rest = known
        else:
            try:
                now, at_rest = read_row(store.thread(tid), from_log=True)
            except ContinuityError:
                continue
        if at_rest and now != row:
            fields = [
                f"{name} {getattr(row, name)!r} (the log says {getattr(now, name)!r})"
                for name in row.__struct_fields__
                if getattr(row, name) != getattr(now, name)
            ]
            found.append((tid, f"row differs from the log: {', '.join(fields)}"))
    return found
