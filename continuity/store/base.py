"""The store interface: what every backend is, and the batch rules they all share.

A store holds threads; a thread is an append-only sequence of frames numbered 0, 1, 2, … and
chained by blake3. Every backend seals batches with :func:`seal_batch` (batch normalisation,
``thread_created`` at seq 0, optimistic ``expected_seq``) and stores each frame as the line the
codec of :mod:`continuity.frames` makes, so the backends agree byte for byte: the in-memory
backend (:mod:`continuity.store.memory`) is the reference model the others are tested against
(:mod:`continuity.testing`).

What a backend implements:

- :class:`Thread`: ``append``, ``head`` and ``read_lines`` (the rest is built on them here;
  ``read_lines_backwards`` is worth overriding when the backend can read from the end).
- :class:`BaseStore`: ``thread`` and ``threads``, plus ``artifacts`` and ``clock``.

What the layers above need from it, and nothing more (they never ask which backend they have):

- the frames: ``read_lines`` / ``read_lines_backwards`` and :meth:`Thread.decode`;
- whether derived files may be kept, and where: :attr:`BaseStore.cache_dir` (None: none are;
  compile and search then read the log itself);
- for caches that index a log by byte offset (:mod:`continuity.caches`), the log as bytes:
  :meth:`Thread.open_log`, a :class:`LogReader` whose ``end`` is the end of the last committed
  batch. A backend with a ``cache_dir`` must provide it;
- or, for a backend that keeps its derived data as indexed rows (a server), those rows:
  :meth:`Thread.derived`, a :class:`~continuity.store.derived.DerivedIndex` (None: it keeps none);
- :meth:`BaseStore.job_lock`, so that two processes never run one thread's compaction at once;
- :meth:`BaseStore.quarantined`, the torn tails its recovery moved aside (if it has any).
"""

from __future__ import annotations

import _thread  # not threading: a hook process never needs to import it (0.5 ms)
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Final, NamedTuple, Protocol, Self, runtime_checkable

import msgspec

from continuity import frames as fr
from continuity.errors import (
    BadFrame,
    CorruptFrame,
    InvalidThreadId,
    JobInFlight,
    SeqConflict,
    ThreadNotFound,
)
from continuity.store.artifacts import ArtifactStore, artifact_id
from continuity.summary import (
    OPENAI_COMPACTION_V1,
    PROVIDER_COMPACTION_RULE,
    PROVIDER_SUMMARY_KINDS,
    compaction_checkpoint,
    is_compaction_block,
)

if TYPE_CHECKING:
    from continuity.store.catalog import StoreCatalog
    from continuity.store.derived import DerivedIndex

__all__ = [
    "MAX_THREAD_ID_LEN",
    "BaseStore",
    "DeletionReport",
    "DocumentsOf",
    "Head",
    "LogReader",
    "LogStamp",
    "Recovery",
    "SealedBatch",
    "SearchBackend",
    "SearchDocument",
    "SearchWatermark",
    "Thread",
    "Tombstone",
    "WideRun",
    "WideSearch",
    "WideSearchBackend",
    "batch_of",
    "check_sealed",
    "deletion_facts",
    "now_ms",
    "provider_checkpoints",
    "provider_summaries",
    "resolve_thread",
    "seal_batch",
    "seal_frames",
    "split_lines",
    "validate_thread_id",
]

MAX_THREAD_ID_LEN: Final = 128
_THREAD_ID_RE: Final = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:@+=-]*")
_CHUNK: Final = 1 << 16


def validate_thread_id(thread_id: str) -> str:
    """Return ``thread_id`` if it is safe as a file name; raise :class:`InvalidThreadId` if not."""
    if not isinstance(thread_id, str) or not thread_id:
        raise InvalidThreadId("thread id must be a non-empty string")
    if len(thread_id) > MAX_THREAD_ID_LEN:
        raise InvalidThreadId(
            f"thread id is {len(thread_id)} characters long; the limit is {MAX_THREAD_ID_LEN}"
        )
    if not _THREAD_ID_RE.fullmatch(thread_id):  # not match + `$`: that allows a trailing "\n"
        raise InvalidThreadId(
            f"invalid thread id {thread_id!r}: use letters, digits and _ . : @ + = -, "
            "starting with a letter, digit or underscore (no path separators, no leading dot)"
        )
    return thread_id


class Head(msgspec.Struct, frozen=True):
    """The last committed frame of a thread."""

    seq: int
    digest: str

    @property
    def next_seq(self) -> int:
        return self.seq + 1


class LogStamp(msgspec.Struct, frozen=True, order=True):
    """What a stored log looks like from outside, read without parsing it: how a derived
    summary of the log (the store catalog) tells whether it still describes it. (A Struct, not
    a NamedTuple: the class is made on the hook path, where a NamedTuple costs 40 µs more.)"""

    thread_id: str
    size: int
    """The bytes the log holds now (an uncommitted tail included)."""
    tail: bytes
    """Its last bytes (as many as were asked for, or the whole log when shorter)."""


class Recovery(msgspec.Struct, frozen=True):
    """A torn tail that was moved aside (reported on stderr by the CLI, listed by ``verify``)."""

    thread_id: str
    offset: int
    length: int
    reason: str
    quarantine_file: str
    time_ms: int


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Tombstone(msgspec.Struct, frozen=True, kw_only=True):
    """What a deletion removed, kept by the store after the log is gone (``<store>/
    tombstones.jsonl``, a ``tombstones`` table), so ``verify`` tells a deletion from a loss and
    an append never brings the thread back."""

    thread_id: str
    head_seq: int
    """The last seq the log held (-1: it held no committed frame)."""
    head_digest: str
    """Its chain digest (hex; empty when none)."""
    frames: int
    bytes: int
    """The log's bytes as a JSONL file holds them."""
    reason: str
    """The command that removed it: ``delete`` or ``prune --older-than 90d``."""
    time_ms: int


class ColdMove(msgspec.Struct, frozen=True):
    """What one move into a log's cold tier did (ADR 0057): its bytes ``[start, end)`` are now
    in a compressed segment of ``stored`` bytes; ``not_freed`` says why their disk blocks stay,
    if they do."""

    start: int
    end: int
    stored: int
    not_freed: str | None = None


class DeletionReport(msgspec.Struct, frozen=True, kw_only=True):
    """What :meth:`BaseStore.delete_thread` did: the tombstone it wrote (or found, when the
    deletion was finished by a second run) and the artifact ids the log referenced (those no
    other thread references may go too: :mod:`continuity.maintenance.forget`)."""

    tombstone: Tombstone
    artifacts: tuple[str, ...]
    finished_earlier: bool = False
    """The log was already gone (a deletion cut short, finished now)."""


_HEX_ID: Final = re.compile(rb"[0-9a-f]{64}")


def deletion_facts(lines: Iterable[bytes]) -> tuple[int, int, set[str], set[str]]:
    """(frames, bytes, artifact ids referenced, other 64-hex strings) of a log's stored
    lines: the ids its frames reference, and for a line that does not decode every 64-hex
    string in it except its digest (candidates the caller keeps only if they are artifacts:
    when in doubt, the reference counts)."""
    frames = size = 0
    refs: set[str] = set()
    maybe: set[str] = set()
    for line in lines:
        frames += 1
        size += len(line) + 1
        try:
            refs.update(fr.artifact_refs(fr.decode_frame(line)))
        except (msgspec.DecodeError, UnicodeDecodeError, ValueError):
            digest = fr.stored_digest(line)
            found = {m.decode() for m in _HEX_ID.findall(line)}
            maybe |= found - ({digest.hex()} if digest is not None else set())
    return frames, size, refs, maybe


class SealedBatch(NamedTuple):
    """A batch sealed by :func:`seal_frames`: its lines, the head after them, and the seqs the
    caller's own frames got."""

    lines: list[bytes]
    head: Head
    given: range


def seal_batch(
    thread_id: str,
    batch: Sequence[fr.Frame],
    head: Head | None,
    *,
    now_ms: int,
    expected_seq: int | None = None,
    redact: Callable[[fr.Frame], fr.Frame] | None = None,
) -> tuple[list[bytes], Head]:
    """:func:`seal_frames` without the artifacts of provider compactions stored (their ids are
    computed): the lines and the head after them."""
    sealed = seal_frames(
        thread_id, batch, head, now_ms=now_ms, expected_seq=expected_seq, redact=redact
    )
    return sealed.lines, sealed.head


def seal_frames(
    thread_id: str,
    batch: Sequence[fr.Frame],
    head: Head | None,
    *,
    now_ms: int,
    expected_seq: int | None = None,
    redact: Callable[[fr.Frame], fr.Frame] | None = None,
    put_artifact: Callable[[bytes], str] | None = None,
) -> SealedBatch:
    """Number, timestamp and chain a batch after ``head`` (None: the thread is new).

    Shared by every backend so they agree byte for byte. A new thread gets ``thread_created`` at
    seq 0 — the caller's, if the batch starts with one, else a default one. ``redact`` (the
    store's :attr:`BaseStore.redactor`) rewrites each frame before anything else looks at it.
    A message that holds a provider's own compaction (an Anthropic ``compaction`` block, an
    OpenAI Responses ``compaction`` item) gets its compaction checkpoint in the same batch,
    after the caller's frames (:func:`provider_checkpoints`); ``put_artifact`` (the store's
    ``artifacts.put``) stores its summary first. Every frame is checked the way a reader will
    decode it before it is sealed, so no call can write a line a reader would refuse. Raises
    :class:`BadFrame` (naming the frame and field) or :class:`SeqConflict`; nothing is written
    by the caller then.
    """
    if redact is not None:
        batch = [redact(f) for f in batch]
    frames: list[fr.Frame] = []
    for i, f in enumerate(batch):
        try:
            frames.append(fr.normalize(f))
        except (TypeError, AttributeError, ValueError):
            fr.checked_body(f, i)  # a wrong type in a field the estimate reads: name the field
            raise
    if not frames:
        raise BadFrame("empty batch")
    for i, f in enumerate(frames):
        if isinstance(f, fr.ThreadCreated) and (head is not None or i > 0):
            raise BadFrame("thread_created can only be the first frame of a new thread")
        if f.digest or f.more:
            raise BadFrame("`digest` and `more` are assigned by the store")
    first_given = 0 if head is None and isinstance(frames[0], fr.ThreadCreated) else None
    if head is None:
        if first_given is None:
            frames.insert(0, fr.ThreadCreated(thread_id=thread_id))
        created = frames[0]
        assert isinstance(created, fr.ThreadCreated)
        if created.thread_id and created.thread_id != thread_id:
            raise BadFrame(
                f"thread_created names thread {created.thread_id!r}, appended to {thread_id!r}"
            )
        if not created.thread_id:
            frames[0] = msgspec.structs.replace(created, thread_id=thread_id)
    next_seq = 0 if head is None else head.next_seq
    offset_given = 0 if head is not None or first_given == 0 else 1
    if expected_seq is not None and expected_seq != next_seq + offset_given:
        raise SeqConflict(thread_id, expected_seq, next_seq + offset_given)
    first = next_seq + offset_given
    n_given = len(frames) - offset_given
    frames += provider_checkpoints(thread_id, frames, next_seq, put_artifact)
    prev = fr.GENESIS_DIGEST if head is None else bytes.fromhex(head.digest)
    last = len(frames) - 1
    lines: list[bytes] = []
    replace = msgspec.structs.replace
    for i, f in enumerate(frames):
        seq = next_seq + i
        if f.seq >= 0 and f.seq != seq:
            raise SeqConflict(thread_id, f.seq, seq)
        body = fr.checked_body(
            replace(f, seq=seq, ts_ms=f.ts_ms or now_ms, more=i < last), i - offset_given
        )
        _check_refs(f, seq, i - offset_given, len(body))
        prev = fr.chain(prev, body)
        lines.append(fr.seal(body, prev))
    return SealedBatch(lines, Head(next_seq + last, prev.hex()), range(first, first + n_given))


def provider_checkpoints(
    thread_id: str,
    frames: Sequence[fr.Frame],
    first_seq: int,
    put_artifact: Callable[[bytes], str] | None = None,
) -> list[fr.CompactionCheckpointCreated]:
    """The compaction checkpoints the messages of a batch (``frames``, numbered from
    ``first_seq``) that hold a provider's own compaction make, one per message, unless the
    batch already holds it: its summary is the block as stored, byte for byte (stored with
    ``put_artifact``, else only its id computed); it runs through the seq before the
    compacting message — for an OpenAI compaction item that ends its batch's conversation (a
    compacted window: ``responses.compact`` returns the messages it keeps, then the item),
    before the messages that come right before it in the batch (the window: everything from
    the batch's start or its last frame that is not a message). Its id is derived from the
    message and the summary, so the same batch makes the same checkpoint on every backend."""
    made: list[fr.CompactionCheckpointCreated] = []
    given = {
        f.to_message_id
        for f in frames
        if isinstance(f, fr.CompactionCheckpointCreated)
        and f.cut_rule_id == PROVIDER_COMPACTION_RULE
    }
    for i, f in enumerate(frames):
        if not isinstance(f, fr.MessageAppended) or f.message_id in given:
            continue
        found = compaction_checkpoint(f)
        if found is None:
            continue
        kind, data = found
        aid = put_artifact(data) if put_artifact is not None else artifact_id(data)
        start = i
        if kind == OPENAI_COMPACTION_V1 and _ends_its_window(frames, i):
            while start > 0 and isinstance(frames[start - 1], fr.MessageAppended):
                start -= 1
        seq = first_seq + i
        key = f"{thread_id}\n{f.message_id}\n{seq}\n{aid}".encode()
        made.append(
            fr.CompactionCheckpointCreated(
                checkpoint_id=artifact_id(key)[:32],
                cut_rule_id=PROVIDER_COMPACTION_RULE,
                summary_kind=kind,
                summary_artifact_id=aid,
                from_seq=0,
                to_seq=first_seq + start - 1,
                to_message_id=f.message_id,
                produced_by=PROVIDER_SUMMARY_KINDS[kind],
            )
        )
    return made


def provider_summaries(
    batch: Sequence[fr.Frame], redact: Callable[[fr.Frame], fr.Frame] | None = None
) -> list[bytes]:
    """The summary artifacts the provider compactions of a batch make when it is sealed (with
    the same ``redact``): what a backend that cannot store artifacts while it seals (a server,
    inside its transaction) puts first. Cheap for a batch without any."""
    found: list[bytes] = []
    for f in batch:
        if not isinstance(f, fr.MessageAppended) or not any(
            is_compaction_block(b) or isinstance(b, dict) for b in f.content
        ):
            continue
        g = fr.normalize(redact(f) if redact is not None else f)
        if isinstance(g, fr.MessageAppended):
            made = compaction_checkpoint(g)
            if made is not None:
                found.append(made[1])
    return found


def _ends_its_window(frames: Sequence[fr.Frame], i: int) -> bool:
    """Whether the OpenAI compaction item of message ``i`` ends the conversation of its batch
    (only items of the API's own, such as Codex's ghost snapshots, after it): the shape of a
    compacted window (``responses.compact``'s output, Codex's ``replacement_history``), whose
    messages before the item are kept and the item stands in for everything before them. An
    item that more of the conversation follows in its batch came in a response (server-side
    compaction) and stands in for everything before it."""
    return not any(
        isinstance(f, fr.MessageAppended)
        and any(not isinstance(b, fr.ProviderBlock) for b in f.content)
        for f in frames[i + 1 :]
    )


def check_sealed(thread_id: str, lines: Sequence[bytes], head: Head | None) -> Head:
    """Check lines sealed elsewhere (a log moved from another store) before they are stored as
    they are, after ``head``: each is a sealed line whose frame decodes, numbered on from the
    head, chained on from its digest, with whole batches only (the last line ends one). Returns
    the head after them; :class:`BadFrame` names the first line that is not, and nothing may be
    written then."""
    if not lines:
        raise BadFrame("no lines to append")
    prev = fr.GENESIS_DIGEST if head is None else bytes.fromhex(head.digest)
    seq = 0 if head is None else head.next_seq
    more = False
    for i, line in enumerate(lines):
        where = f"line {i} of the lines to append (seq {seq})"
        parts = fr.unseal(line)
        if parts is None:
            raise BadFrame(f"{where} is not a sealed line")
        body, digest = parts
        env = fr.envelope(line)
        if env is None or env.seq != seq:
            raise BadFrame(f"{where} has seq {None if env is None else env.seq}, not {seq}")
        if fr.chain(prev, body) != digest:
            raise BadFrame(f"{where} does not chain on from the frame before it")
        try:
            frame = fr.decode_frame(line)
        except msgspec.DecodeError as exc:
            raise BadFrame(f"{where} does not decode: {exc}") from None
        if seq == 0 and not (
            isinstance(frame, fr.ThreadCreated) and frame.thread_id in ("", thread_id)
        ):
            raise BadFrame(f"{where}: a thread starts with its own thread_created")
        prev, more, seq = digest, env.more, seq + 1
    if more:
        raise BadFrame("the lines end inside a batch (the last one has `more` set)")
    return Head(seq - 1, prev.hex())


_RECORD_KIND: Final = re.compile(r"[a-z0-9][a-z0-9_-]*(\.[a-z0-9][a-z0-9_-]*)+")
MAX_RECORD_DATA: Final = 64 * 1024
"""The largest ``record_appended`` data, in encoded bytes; larger state goes to an artifact."""


def _check_refs(f: fr.Frame, seq: int, index: int, size: int) -> None:
    """What a frame says about other frames must point at earlier ones (a frame cannot retract
    or repeat its own future), and a record's kind must be namespaced."""
    where = f"frame {index} of the batch"
    if isinstance(f, fr.MessagesRetracted):
        if not f.spans:
            raise BadFrame(f"{where} (messages_retracted) retracts nothing: give spans")
        for s in f.spans:
            if not 0 < s.from_seq <= s.to_seq < seq:
                raise BadFrame(
                    f"{where} (messages_retracted) at seq {seq}: span {s.from_seq}..{s.to_seq} "
                    f"must lie within 1..{seq - 1}"
                )
    elif isinstance(f, fr.ContextSelectionRepeated):
        if not 0 < f.decision_seq < seq:
            raise BadFrame(
                f"{where} (context_selection_repeated) at seq {seq} names decision "
                f"{f.decision_seq}, which is not an earlier frame"
            )
    elif isinstance(f, fr.RecordAppended):
        if not isinstance(f.kind, str) or not _RECORD_KIND.fullmatch(f.kind):
            raise BadFrame(
                f"{where} (record_appended): kind {f.kind!r} must be namespaced, lower case, "
                'like "myruntime.state" (letters, digits, "_" and "-", dot-separated)'
            )
        if f.artifact_id is not None and f.data is not None:
            raise BadFrame(f"{where} (record_appended) holds `data` or `artifact_id`, not both")
        if size > MAX_RECORD_DATA + 1024:
            raise BadFrame(
                f"{where} (record_appended): {size} bytes is more than a record frame holds "
                f"({MAX_RECORD_DATA}); put large state in an artifact "
                "(continuity.context.records.record does)"
            )


def batch_of(frames: fr.Frame | Iterable[fr.Frame]) -> list[fr.Frame]:
    """One frame or an iterable of them as a non-empty list (:class:`BadFrame` if empty)."""
    batch = [frames] if isinstance(frames, fr.FrameBase) else list(frames)
    if not batch:
        raise BadFrame("empty batch")
    return batch


def split_lines(
    pread: Callable[[int, int], bytes], pos: int, end: int, *, first: int = 8192
) -> Iterator[tuple[int, bytes]]:
    """``(offset, line without its newline)`` of the lines in ``[pos, end)``, read with
    ``pread(n, offset)`` in chunks that start at ``first`` bytes (most reads want a few lines)
    and grow to 256 KiB. A line longer than a chunk is joined once, when its newline comes:
    linear time and memory of one line, however long. Bytes after the last newline come last,
    as a line of their own (a caller reading a committed range treats them as damage)."""
    pending: list[bytes] = []  # the start of a line longer than the chunks read so far
    line_at = pos
    step = first
    while pos < end:
        chunk = pread(min(step, end - pos), pos)
        if not chunk:
            break
        step = min(step * 4, _CHUNK * 4)
        at = 0
        while True:
            nl = chunk.find(b"\n", at)
            if nl < 0:
                if at < len(chunk):
                    pending.append(chunk[at:])
                break
            if pending:
                pending.append(chunk[at:nl])
                line = b"".join(pending)
                pending = []
            else:
                line = chunk[at:nl]
            yield line_at, line
            line_at = pos + nl + 1
            at = nl + 1
        pos += len(chunk)
    if pending:
        yield line_at, b"".join(pending)


class LogReader(ABC):
    """A thread's log opened for reading as the bytes of its stored lines (one per frame, each
    ended by a newline): what caches that index a log by byte offset need from a backend that
    keeps it that way. Use it as a context manager, or :meth:`close` it.

    :attr:`end` is the end of the last committed batch, taken the first time it is asked for
    and fixed from then on; bytes past it (a batch being written, a crash's torn tail) are not
    part of the log.
    """

    @property
    @abstractmethod
    def end(self) -> int:
        """The end of the last committed batch (fixed once asked for)."""

    @abstractmethod
    def size(self) -> int:
        """How many bytes the log holds now, an uncommitted tail included."""

    @abstractmethod
    def pread(self, n: int, offset: int) -> bytes:
        """Up to ``n`` bytes from ``offset``."""

    @abstractmethod
    def close(self) -> None: ...

    def line_end(self, pos: int, end: int | None = None) -> int:
        """Offset just past the first newline at or after ``pos`` (``end`` if none before it;
        ``end`` defaults to :attr:`end`)."""
        stop = self.end if end is None else end
        while pos < stop:
            chunk = self.pread(min(_CHUNK, stop - pos), pos)
            if not chunk:
                break
            i = chunk.find(b"\n")
            if i >= 0:
                return pos + i + 1
            pos += len(chunk)
        return stop

    def __enter__(self) -> LogReader:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class Thread(ABC):
    """A handle on one thread of a store. Cheap to create; holds no lock between calls.

    The id is validated when the handle is made: code that receives a handle never checks it
    again.
    """

    def __init__(self, thread_id: str) -> None:
        self.id = validate_thread_id(thread_id)

    @property
    @abstractmethod
    def store(self) -> BaseStore:
        """The store this thread belongs to."""

    @abstractmethod
    def append(
        self,
        frames: fr.Frame | Iterable[fr.Frame],
        *,
        expected_seq: int | None = None,
        durable: bool | None = None,
    ) -> range:
        """Append one frame or a batch, all or nothing; return the seqs given to the caller's
        frames. ``expected_seq`` is the seq the first of them must get (else :class:`SeqConflict`).
        """

    has_cold_tier: bool = False
    """Whether this backend keeps a cold tier (ADR 0057): the folder store's threads do."""

    def cold_end(self) -> int:
        """How many bytes at the start of the log are in its cold tier (ADR 0057); 0 for a
        backend without one."""
        return 0

    def move_to_cold(self, upto: int) -> ColdMove:
        """Move the log's bytes from the end of its cold tier up to ``upto`` into compressed
        segments (ADR 0057): the folder store's; any other backend refuses."""
        from continuity.errors import CommandRefused

        raise CommandRefused(
            f"{type(self.store).__name__} has no cold tier: it is the folder store's (ADR 0057)"
        )

    def append_sealed(self, lines: Sequence[bytes], *, durable: bool | None = None) -> range:
        """Store lines sealed elsewhere as they are (``continuity migrate``: a log moved between
        stores keeps its bytes): each checked by :func:`check_sealed` against this thread's
        head, all of them or none; not redacted again (they were when first written). Returns
        their seqs. A backend that cannot store lines as given raises NotImplementedError."""
        raise NotImplementedError(f"{type(self).__name__} cannot store sealed lines")

    @abstractmethod
    def head(self) -> Head | None:
        """The last committed frame, or None when the thread has no frames."""

    @abstractmethod
    def read_lines(
        self, *, from_seq: int = 0, to_seq: int | None = None, start_offset: int | None = None
    ) -> Iterator[tuple[int, bytes]]:
        """``(seq, stored line without newline)`` for seqs in ``[from_seq, to_seq]``, the
        committed frames only (a batch is seen whole or not at all). A backend whose storage
        can be damaged checks each line against the chain as it reads it (:class:`CorruptFrame`).
        ``start_offset`` is a hint from an offset index (where ``from_seq``'s line starts); a
        backend without byte offsets ignores it, and a wrong hint is ignored too."""

    def stored_lines(self) -> Iterator[tuple[int, bytes]]:
        """Every stored line as it is, in order, for ``verify`` and ``repair``, which check each
        line themselves and name every bad one: a backend whose reads check the chain (and stop
        at the first bad line) gives them here unchecked. The seq is the row's, or the line's
        place. A backend that keeps its log as bytes is read through :meth:`open_log` instead."""
        return self.read_lines()

    def log_bytes(self) -> int:
        """The size of the thread's log as a JSONL file holds it: its committed lines and
        their newlines (what ``stats`` reports, the same on every backend)."""
        log = self.open_log()
        if log is None:
            return sum(len(line) + 1 for _seq, line in self.read_lines())
        with log:
            return log.end

    def lines_holding(self, needle: bytes) -> Iterator[tuple[int, bytes]]:
        """``(seq, line)`` of the stored lines that contain ``needle``, in order, as stored
        (unchecked: for counts such as ``stats``' redactions, never for what a model sees). A
        server backend searches where the rows are instead of sending them all."""
        for seq, line in self.read_lines():
            if needle in line:
                yield seq, line

    def read_lines_backwards(self) -> Iterator[tuple[int, bytes]]:
        """``(seq, line)`` from the last committed frame down to seq 0."""
        yield from reversed(list(self.read_lines()))

    def decode(self, seq: int, line: bytes) -> fr.Frame:
        """The frame of a stored line; :class:`CorruptFrame` (naming it) if it does not decode."""
        try:
            return fr.decode_frame(line)
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:
            offset = self.offset_of(seq)
            reason = f"does not decode: {exc}"
            raise CorruptFrame(self.id, seq, -1 if offset is None else offset, reason) from None

    def open_log(self) -> LogReader | None:
        """The log as bytes, for caches that index it by byte offset; None when the thread has
        no log yet, or the backend does not keep its log as bytes. A backend that keeps a
        :attr:`BaseStore.cache_dir` must give it."""
        return None

    def derived(self) -> DerivedIndex | None:
        """The thread's derived data as indexed rows the backend keeps current with its log
        (message ordinals, checkpoints, records and retractions: what the file caches hold),
        for O(k) reads without the log as bytes; None when the backend keeps none."""
        return None

    def offset_of(self, seq: int) -> int | None:
        """The byte offset of frame ``seq`` in a log kept as bytes (None when there is no such
        frame, or the backend keeps no bytes): error messages name it."""
        return None

    def exists(self) -> bool:
        return self.head() is not None

    def quarantine_tail(self, offset: int, reason: str) -> Recovery:
        """Move the log from byte ``offset`` (a line's start) to its end into quarantine, where
        it is kept, never deleted; the log then ends just before it. The frames before it are
        not touched. This is how a damaged log is repaired (``continuity repair``); a backend
        whose logs cannot be damaged does not implement it."""
        raise NotImplementedError(f"{type(self).__name__} logs cannot be damaged or repaired")

    def read(
        self,
        *,
        from_seq: int = 0,
        to_seq: int | None = None,
        limit: int | None = None,
        types: Iterable[str] | None = None,
    ) -> Iterator[fr.Frame]:
        """Frames with ``from_seq <= seq <= to_seq`` (of the given types), oldest first."""
        wanted = frozenset(types) if types is not None else None
        count = 0
        if limit is not None and limit <= 0:
            return
        for seq, line in self.read_lines(from_seq=from_seq, to_seq=to_seq):
            frame = self.decode(seq, line)
            if wanted is not None and frame.__struct_config__.tag not in wanted:
                continue
            yield frame
            count += 1
            if limit is not None and count >= limit:
                return

    def tail(self, n: int, *, types: Iterable[str] | None = None) -> list[fr.Frame]:
        """The last ``n`` frames (of the given types), oldest first."""
        if n <= 0:
            return []
        wanted = frozenset(types) if types is not None else None
        found: list[fr.Frame] = []
        for seq, line in self.read_lines_backwards():
            frame = self.decode(seq, line)
            if wanted is None or frame.__struct_config__.tag in wanted:
                found.append(frame)
                if len(found) >= n:
                    break
        found.reverse()
        return found


class BaseStore(ABC):
    """A set of threads plus their artifacts."""

    artifacts: ArtifactStore
    clock: Callable[[], int]
    """Milliseconds since the epoch for frames appended without a ``ts_ms``."""
    redactor: Callable[[fr.Frame], fr.Frame] | None = None
    """Rewrites every frame appended to this store before it is sealed (secret redaction);
    None: frames are stored as given."""

    @abstractmethod
    def thread(self, thread_id: str) -> Thread:
        """A handle on ``thread_id`` (which need not exist yet: the first append creates it)."""

    @abstractmethod
    def threads(self) -> list[str]:
        """The ids of every thread with at least one frame, sorted."""

    def stored_thread_ids(self) -> list[str]:
        """The ids of every thread that has a log, sorted: :meth:`threads` plus logs holding
        bytes but no committed frame (a first batch cut short), which ``verify`` reports."""
        return self.threads()

    def delete_thread(self, thread_id: str, *, reason: str = "delete") -> DeletionReport:
        """Remove ``thread_id``'s log and the derived data the backend keeps with it (a
        server's derived and search rows), after recording a :class:`Tombstone`: all of it or,
        after a crash, the tombstone first and a second call finishes. Taken under the thread's
        write lock, so an append lands before (and goes with it) or fails after
        (:class:`~continuity.errors.ThreadDeleted`); no append brings a tombstoned thread back.
        :class:`ThreadNotFound` when there is neither a log nor a tombstone. File caches,
        artifacts and the store-wide indexes above the store are
        :func:`continuity.maintenance.forget.forget_thread`'s."""
        raise NotImplementedError(f"{type(self).__name__} cannot delete threads")

    def tombstones(self) -> list[Tombstone]:
        """Every tombstone, oldest first (a backend that cannot delete has none)."""
        return []

    def tombstone_of(self, thread_id: str) -> Tombstone | None:
        """The latest tombstone of ``thread_id`` (None: it was never deleted)."""
        found = [t for t in self.tombstones() if t.thread_id == thread_id]
        return found[-1] if found else None

    def referenced(self, ids: Iterable[str]) -> set[str]:
        """Those of ``ids`` that a stored line of any thread holds, anywhere in its bytes (a
        reference, a mention, a damaged line: when in doubt it counts). A scan of every log; a
        server does it where the rows are."""
        remaining = {i.encode() for i in ids}
        found: set[str] = set()
        for tid in self.stored_thread_ids() if remaining else ():
            for _seq, line in self.thread(tid).stored_lines():
                hit = {n for n in remaining if n in line}
                if hit:
                    remaining -= hit
                    found |= {h.decode() for h in hit}
                    if not remaining:
                        return found
        return found

    def orphaned_rows(self) -> list[str]:
        """Derived rows the backend keeps (a server's derived and search tables) for threads
        that have no log, each as a line for ``verify``; a backend that keeps none has none."""
        return []

    def existing_thread(self, thread_id: str) -> Thread:
        """Like :meth:`thread`, but :class:`ThreadNotFound` when the thread has no frames."""
        t = self.thread(thread_id)
        if not t.exists():
            raise ThreadNotFound(f"no thread {thread_id!r} in this store", thread_id)
        return t

    @property
    def cache_dir(self) -> Path | None:
        """The folder derived files (caches, indexes, cursors) live in; None when this store
        keeps none, and compile and search read the log itself."""
        return None

    def reclaim_space(self) -> list[str]:
        """Rewrite what the store keeps so that deleted threads' bytes are gone from its files,
        not only unreachable (``delete --vacuum``); one line per thing done or left, for the
        user. A store whose deletions remove files leaves nothing to rewrite: no lines."""
        return []

    def read_many(
        self, threads: Sequence[Thread]
    ) -> AbstractContextManager[Iterator[Thread]] | None:
        """``threads`` handed out (in an order of the backend's choosing) by one pass over the
        store while the block lasts, each answering reads of its lines and derived rows from what
        the pass read (a server store: one snapshot, a few cursors, not a few queries a thread);
        None: the backend has no such pass, each thread reads for itself (``verify``)."""
        return None

    def derived_bytes(self) -> int:
        """Bytes of derived data this store keeps outside :attr:`cache_dir` (a server store's
        derived, catalog and search rows), which ``stats`` counts with the cache folder; 0 for
        a store that keeps none there."""
        return 0

    @property
    def location(self) -> Path | str | None:
        """Where the store is: its folder, its server's URL (``postgresql://…``), or None (in
        memory). :func:`continuity.paths.describe_store` shows it without a password."""
        return None

    @property
    def local_dir(self) -> Path | None:
        """The folder on this machine for what belongs with this store here: an adapter's
        settings, its ``errors.log`` and its own caches, such as transcript cursors
        (:func:`continuity.paths.local_dir_of`). None: the store has no place on this machine
        (an in-memory store)."""
        return None

    def quarantined(self) -> list[Recovery]:
        """Every torn tail recovery moved aside, oldest first (a backend without torn tails
        has none)."""
        return []

    def log_stamps(self, tail: int) -> list[LogStamp] | None:
        """The size and last ``tail`` bytes of every log of :meth:`stored_thread_ids`, in no
        particular order, a few system calls each (no line is parsed, no lock taken): what a
        store-wide cache of the logs (the catalog) checks its rows against. None when the
        backend does not keep its logs as bytes (then it has no such cache)."""
        return None

    def close(self) -> None:  # noqa: B027 - deliberately a no-op unless a backend holds something
        """Give back what the store holds open (a server backend's connections); a store that
        holds nothing between calls does nothing. Closing twice is harmless."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def catalog(self) -> StoreCatalog | None:
        """The catalog of thread rows the backend keeps itself, current with every append (a
        server's table), which the store-wide listings read in one query; None: it keeps none,
        and :mod:`continuity.caches.catalog` keeps a file of them (or reads each thread)."""
        return None

    def search_backend(self) -> SearchBackend | None:
        """The search index the backend keeps itself (a server's tables, ADR 0026), which
        search and recall use when the store has no :attr:`cache_dir`; None: it keeps none, and
        they build what they need from the log."""
        return None

    def job_lock(self, thread_id: str, job: str) -> AbstractContextManager[None]:
        """Hold the lock of ``job`` (``"compaction"``) on a thread for the ``with`` block, or
        raise :class:`JobInFlight` at once when it is held. This one only excludes holders in
        this process; a backend shared by processes excludes them too."""
        return _held_in_process(self, thread_id, job)


_HELD: Final[set[tuple[int, str, str]]] = set()
_HELD_GUARD: Final = _thread.allocate_lock()


@contextmanager
def _held_in_process(store: BaseStore, thread_id: str, job: str) -> Iterator[None]:
    key = (id(store), thread_id, job)
    with _HELD_GUARD:  # check and claim as one step: two threads must not both get in
        if key in _HELD:
            raise JobInFlight(f"a {job} job for this thread is already running")
        _HELD.add(key)
    try:
        yield
    finally:
        with _HELD_GUARD:
            _HELD.discard(key)


def resolve_thread(target: BaseStore | Thread, thread_id: str | None = None) -> Thread:
    """The handle an entry point works on: ``target`` itself when it is one, else the thread
    ``thread_id`` of the store ``target``. Either way the thread must have frames
    (:class:`ThreadNotFound`). Entry points take either, so a caller that holds a handle never
    has it looked up again."""
    if isinstance(target, Thread):
        if thread_id is not None and thread_id != target.id:
            raise TypeError(f"a thread handle ({target.id!r}) and another thread id {thread_id!r}")
        if not target.exists():
            raise ThreadNotFound(f"no thread {target.id!r} in this store", target.id)
        return target
    if thread_id is None:
        raise TypeError("a store needs a thread id")
    return target.existing_thread(thread_id)


# --- a search index a backend keeps itself (ADR 0026) ----------------------------------------


class SearchDocument(Protocol):
    """A search document as the caches make it (:class:`continuity.retrieval.documents.Doc`):
    a frame's seq, kind, role, weighted length and weighted term counts."""

    @property
    def seq(self) -> int: ...

    @property
    def kind(self) -> int: ...

    @property
    def role(self) -> int: ...

    @property
    def length(self) -> int: ...

    @property
    def tf(self) -> dict[str, int]: ...


DocumentsOf = Callable[["Thread", Sequence[tuple[int, bytes]]], Sequence[SearchDocument]]
"""The documents of some of a thread's stored lines ((seq, line) pairs, in log order): the
tokenizer and document rules live above the store (:mod:`continuity.retrieval.documents`) and
are handed down, so a backend's index is made by the very code the file index is."""


class SearchWatermark(NamedTuple):
    """How far a backend's search index of one thread goes."""

    last_seq: int
    """The last frame indexed (-1: none)."""
    digest: str
    """Its chain digest (hex; empty when none)."""
    docs: int
    """The documents indexed: ordinals ``0 .. docs - 1``, in log order."""
    total_length: int
    """The sum of their (clipped) lengths."""


class WideRun(NamedTuple):
    """A run of one thread's documents that holds a query's terms (a store-wide search)."""

    thread_id: str
    first_doc: int
    """Its first document's ordinal in the thread."""
    n_docs: int
    records: bytes
    """The run's document records (16 bytes each, as :class:`SearchBackend` says)."""
    lists: list[bytes | None]
    """Each query term's postings in the run (None: it has none): run-relative ordinals
    (u8 when ``n_docs`` <= 256, else u16), then the counts (u16)."""


class WideSearch(NamedTuple):
    """What a backend's store-wide index holds for a query's terms in a scope."""

    runs: list[WideRun]
    """The runs holding any of the terms, a thread's together, by first document."""
    threads: int
    docs: int
    total_length: int
    """The scope's indexed threads, documents and the sum of their lengths."""
    lagging_threads: int = 0
    lagging_frames: int = 0
    """What the index does not hold yet and this connection could not add (read-only)."""


class SearchBackend(Protocol):
    """A search index kept by the backend (a server's tables): documents and postings by
    document ordinal, derived from the log by :data:`DocumentsOf` and brought up to it lazily.

    Records are 16 bytes a document, little-endian: seq u64, length u32 (clipped to 2^32 - 1),
    kind u8, role u8, 2 zero bytes (``retrieval.index.DOC_RECORD``). Postings are a term's
    document ordinals (u32, ascending) and weighted counts (u16, clipped to 65,535)."""

    def search_watermark(
        self, thread: Thread, documents: DocumentsOf, *, max_seq: int | None
    ) -> SearchWatermark | None:
        """The index of ``thread`` as it stands, caught up to the log's end first when it holds
        fewer frames than ``max_seq`` (None: than the log); None when the thread has none."""
        ...

    def search_holds(self, thread: Thread, seq: int, digest: str) -> bool:
        """Whether frame ``seq`` of ``thread`` carries ``digest`` (a prefix held elsewhere is
        still the log's)."""
        ...

    def search_records(self, thread: Thread, start: int, end: int) -> bytes:
        """The records of documents ``start .. end - 1``."""
        ...

    def search_postings(
        self, thread: Thread, terms: Sequence[str], start: int, end: int
    ) -> dict[str, tuple[bytes, bytes]]:
        """Each of ``terms``' postings among documents ``start .. end - 1``: (ordinals, counts);
        a term without any is left out."""
        ...

    def rebuild_search(self, threads: Sequence[Thread] | None, documents: DocumentsOf) -> int:
        """Drop the index (of ``threads``; None: all of it) and build it again from the log;
        return how many threads were indexed."""
        ...


@runtime_checkable
class WideSearchBackend(SearchBackend, Protocol):
    """A :class:`SearchBackend` that also answers store-wide queries itself (ADR 0041)."""

    def search_wide(
        self,
        terms: Sequence[str],
        documents: DocumentsOf,
        *,
        project: str | None = None,
        source: str | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> WideSearch:
        """The runs holding any of ``terms`` in the scope (the threads of ``project`` and of
        ``source``; None: any), the scope's statistics, the index caught up first when this
        connection may write it (else how far it lags)."""
        ...

    def writable(self) -> bool:
        """Whether this connection may write the index."""
        ...
