"""Typed errors: every failure a caller can act on has its own class, never a bare ``Exception``.

Every error continuity raises on purpose is a :class:`ContinuityError`; where a standard
exception says the same thing, the class is that one too, so ``except ValueError`` keeps
working::

    ContinuityError
    ├── StoreNotFound          the store folder does not exist or is not a continuity store
    ├── StoreUnavailable       a store's server cannot be reached, refused the login or failed
    │   └── StoreBusy          the server gave up waiting: a held lock, a statement over budget
    ├── StoreRefused           the server is read-only, or the role lacks a privilege
    ├── SchemaTooNew           a store's schema was written by a newer continuity
    ├── UnknownStoreFormat     a folder's store.json is not one any continuity wrote
    ├── MigrationConflict      migrate: a thread in the destination is not the source's
    ├── InvalidThreadId        (ValueError) an id that could escape the store or hide itself
    ├── ThreadNotFound         a read asked for a thread with no frames
    │   └── ThreadDeleted      an append to a thread that was deleted (it has a tombstone)
    ├── ThreadKeyTaken         PostgreSQL: another thread of the store holds this id's thread key
    ├── BadFrame               (ValueError) a frame given to append is not valid
    ├── SeqConflict            the caller expected another next seq (optimistic writers)
    ├── CorruptFrame           a stored frame does not parse, breaks seq order or the chain
    ├── CachesReadOnly         a store's caches are out of date and this process cannot write them
    ├── CorruptCache           a cache file is damaged (rebuilt from the log by readers)
    ├── ArtifactNotFound       (KeyError) no artifact under this id
    ├── ArtifactCorrupt        an artifact's bytes do not hash to its id
    ├── AnchorNotFound         compile: the anchor seq or message id is not in the log
    ├── MessageNotFound        (KeyError) retract: no message with this id or seq to take back
    ├── InvalidLimits          (ValueError) compile: limits that cannot be honoured
    │   └── ContextTooSmall    the limits cannot hold the latest user turn and tool exchange
    ├── InvalidCutRule         (ValueError) compaction: a cut rule or cut that makes no sense
    ├── JobInFlight            compaction: a job for the thread is already running
    ├── InvalidQuery           (ValueError) search: nothing to search for, or a bad k
    ├── ModelError             (ValueError) an embedding model folder that cannot be read
    ├── InvalidSettings        a settings file (Claude Code's, redaction.json) that is unusable
    ├── UnreadableSession      (ValueError) an agent's session file or database that cannot be read
    ├── CommandRefused         an agent command cannot do what it was asked (nothing changed)
    ├── CommandInterrupted     an agent command stopped by Ctrl-C (what was archived is kept)
    ├── UnknownName            (LookupError) no agent, store scheme or embedder has this name
    ├── MissingExtra           (ImportError) a feature's optional extra is not installed
    └── DemoError              the demo did not run to the end or archived the wrong thing

The base class and the errors a runtime catches to recover and go on are also at the package
root (``from continuity import SeqConflict``; the list is in ``help(continuity)``, ADR 0048);
import the others from here: ``from continuity.errors import CorruptFrame``.
"""

from __future__ import annotations

__all__ = [
    "AnchorNotFound",
    "ArtifactCorrupt",
    "ArtifactNotFound",
    "BadFrame",
    "CachesReadOnly",
    "CommandInterrupted",
    "CommandRefused",
    "ContextTooSmall",
    "ContinuityError",
    "CorruptCache",
    "CorruptFrame",
    "DemoError",
    "InvalidCutRule",
    "InvalidLimits",
    "InvalidQuery",
    "InvalidSettings",
    "InvalidThreadId",
    "JobInFlight",
    "MessageNotFound",
    "MigrationConflict",
    "MissingExtra",
    "ModelError",
    "SchemaTooNew",
    "SeqConflict",
    "StoreBusy",
    "StoreNotFound",
    "StoreRefused",
    "StoreUnavailable",
    "ThreadDeleted",
    "ThreadKeyTaken",
    "ThreadNotFound",
    "UnknownName",
    "UnknownStoreFormat",
    "UnreadableSession",
]


class ContinuityError(Exception):
    """Base of every error this library raises on purpose."""


class MissingExtra(ContinuityError, ImportError):
    """A feature needs an optional extra that is not installed (a PostgreSQL store needs
    psycopg, ``continuity serve`` the ASGI stack): ``extra`` names it (``postgres``, ``serve``,
    ``mcp``…), ``missing`` the module that could not be imported (also ``name``, as for any
    ImportError), and the message ends with the line that installs it where continuity was
    installed from: its checkout, with the installer of its environment (``pip install -e
    '<checkout>[postgres]'``, ``pipx install --force …``), or the name on the package index
    (``continuity._install``)."""

    def __init__(self, feature: str, extra: str, missing: str | None = None) -> None:
        from continuity._install import install_line  # only when an extra is missing

        why = f" ({missing} is missing)" if missing else ""
        super().__init__(
            f"{feature} needs the `{extra}` extra{why}: {install_line(extra)}", name=missing
        )
        self.extra = extra
        self.missing = missing


# --- the store ------------------------------------------------------------------------------


class StoreNotFound(ContinuityError):
    """The store directory does not exist (or is not a continuity store)."""


class StoreUnavailable(ContinuityError):
    """A store on a server (PostgreSQL) cannot be used now: the server cannot be reached, refused
    the login, or lost the connection or failed during a call. The message is one line naming
    the server and database (never the password). A batch whose call raised this was not
    written, unless the connection was lost while its commit was on the way (then read the
    thread's head to know)."""


class StoreBusy(StoreUnavailable):
    """The server is reachable but did not finish within the caller's budget: a lock held by
    another session (``lock_timeout``) or a statement over ``statement_timeout``. Nothing was
    written; the same call may succeed later."""


class StoreRefused(ContinuityError):
    """The server is there but refused what the call needs: it is read-only (a standby, or
    ``default_transaction_read_only``) or the role lacks a privilege (``SELECT`` only, no
    ``CREATE`` on the schema). Nothing was written. ``read_only`` tells the first case from the
    second; the message is one line naming the server and what is missing."""

    def __init__(self, message: str, *, read_only: bool = False) -> None:
        super().__init__(message)
        self.read_only = read_only


class SchemaTooNew(ContinuityError):
    """A store's schema was written by a newer continuity than this one, in a way this one
    cannot read or write safely: upgrade continuity. ``found`` is the store's schema version,
    ``needed`` the schema version a client must know to use it, ``known`` this code's."""

    def __init__(self, message: str, *, found: int, needed: int, known: int) -> None:
        super().__init__(message)
        self.found = found
        self.needed = needed
        self.known = known


class UnknownStoreFormat(ContinuityError):
    """A folder store's ``store.json`` says nothing this continuity understands: it is not
    JSON, not an object, names another format, or a version no continuity wrote (0, text).
    The store is not opened (nothing is read or written). Not :class:`StoreNotFound`, whose
    remedy (``continuity init``) would not help, nor :class:`SchemaTooNew` (a newer version:
    upgrade continuity): look at the file, which a person or another program changed, and put
    back what this version writes (the message says it) if the folder is a store. The marker's
    format is in ``contracts/event_frames.md``; ``path`` is the file."""

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class MigrationConflict(ContinuityError):
    """``migrate``: a thread in the destination store already holds frames that are not the
    source's (its log is not a prefix of the source's log), so copying would fork the history;
    nothing of that thread is written. ``thread_id`` names it (empty for an artifact)."""

    def __init__(self, message: str, thread_id: str = "") -> None:
        super().__init__(message)
        self.thread_id = thread_id


class InvalidThreadId(ContinuityError, ValueError):
    """A thread id that could escape the store, hide itself or is too long."""


class ThreadNotFound(ContinuityError):
    """A read asked for a thread that has no log. ``thread_id`` is the id asked for (the CLI
    suggests the ids it may have meant)."""

    def __init__(self, message: str, thread_id: str | None = None) -> None:
        super().__init__(message)
        self.thread_id = thread_id


class ThreadDeleted(ThreadNotFound):
    """An append to a thread that was deleted (``continuity delete``/``prune``): its
    tombstone stands, and a deleted thread is never brought back by a late writer."""


class ThreadKeyTaken(ContinuityError):
    """PostgreSQL: another thread of the store already holds this thread's key (blake3 of the
    id, 63 bits: two ids with one key do not happen by chance; a hand-edited row can fake it).
    Nothing was written; the id stored first keeps the key."""

    def __init__(self, thread_id: str, key: int, holder: str) -> None:
        super().__init__(
            f"thread {thread_id!r} cannot be stored: its key {key} is held by thread "
            f"{holder!r} in this store (the id stored first keeps a key); use another id"
        )
        self.thread_id = thread_id
        self.key = key
        self.holder = holder


class BadFrame(ContinuityError, ValueError):
    """A frame given to ``append`` is not valid (bad shape, reserved type, wrong envelope)."""


class SeqConflict(ContinuityError):
    """The caller expected a different next seq than the log's tail gives."""

    def __init__(self, thread_id: str, expected: int, actual: int) -> None:
        super().__init__(
            f"seq conflict on thread {thread_id!r}: expected next seq {expected}, "
            f"the log's next seq is {actual}"
        )
        self.thread_id = thread_id
        self.expected = expected
        self.actual = actual


class CorruptFrame(ContinuityError):
    """A frame in the log cannot be trusted: it does not parse, breaks seq order or the chain."""

    def __init__(self, thread_id: str, seq: int | None, offset: int, reason: str) -> None:
        where = f"seq {seq}" if seq is not None else "unknown seq"
        super().__init__(
            f"corrupt frame in thread {thread_id!r} at {where}, byte offset {offset}: {reason}"
        )
        self.thread_id = thread_id
        self.seq = seq
        self.offset = offset
        self.reason = reason


class CachesReadOnly(ContinuityError):
    """A store's caches are out of date and cannot be written (a read-only store); readers
    that check :meth:`continuity.caches.ThreadIndex.available` first read the log instead."""


class CorruptCache(ContinuityError):
    """A cache file does not hold what its manifest and the log say it must. Caches are derived:
    readers rebuild them (or read the log) and go on; ``verify`` reports the damage."""

    def __init__(self, thread_id: str, reason: str) -> None:
        super().__init__(f"the caches of thread {thread_id!r} are damaged: {reason}")
        self.thread_id = thread_id
        self.reason = reason


class ArtifactNotFound(ContinuityError, KeyError):
    """No artifact is stored under this id."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "artifact not found"


class ArtifactCorrupt(ContinuityError):
    """An artifact's bytes do not hash to its id (or do not decompress)."""


# --- context: compile and compaction --------------------------------------------------------


class AnchorNotFound(ContinuityError):
    """The anchor seq is outside the log, or no message has the anchor message id."""


class MessageNotFound(ContinuityError, KeyError):
    """A retraction named a message the thread does not hold (or holds retracted already)."""

    def __str__(self) -> str:  # KeyError would print the message as a repr
        return str(self.args[0]) if self.args else ""


class InvalidLimits(ContinuityError, ValueError):
    """Limits that cannot be honoured (negative counts, a zero budget, …)."""


class ContextTooSmall(InvalidLimits):
    """A compile cannot hold what a request must: the latest user turn and the tool exchange
    in flight. ``limit`` names the limit that is too small (``"recent_messages"`` or
    ``"budget_tokens"``), ``needed`` what it would take, ``given`` what it was."""

    def __init__(self, limit: str, needed: int, given: int, detail: str) -> None:
        super().__init__(
            f"{limit}={given} is too small for this context: {detail} needs {limit} >= {needed}"
        )
        self.limit = limit
        self.needed = needed
        self.given = given


class InvalidCutRule(ContinuityError, ValueError):
    """A cut rule id or parameter that does not make sense."""


class JobInFlight(ContinuityError):
    """A compaction job for this thread is already running."""


# --- search ---------------------------------------------------------------------------------


class InvalidQuery(ContinuityError, ValueError):
    """A query with nothing to search for, or limits that make no sense."""


class ModelError(ContinuityError, ValueError):
    """An embedding model folder (model2vec format) that is missing a file, or holds one the
    static embedder does not understand (:mod:`continuity.retrieval.embedders`)."""


# --- the Claude Code adapter ----------------------------------------------------------------


class InvalidSettings(ContinuityError):
    """A settings file that cannot be used: Claude Code's (not a JSON object, or a path install
    must not write through — a link planted to lead elsewhere, ADR 0013) or a store's
    ``redaction.json`` (ADR 0015); left untouched either way."""


class DemoError(ContinuityError):
    """The demo could not run to the end, or the archive does not hold what it should."""


# --- the agents' commands and the registries ----------------------------------------------------


class CommandRefused(ContinuityError):
    """An agent command cannot do what it was asked (a scope the agent does not have, no
    session file where it looked): the message says why; nothing was changed. ``notes``: lines
    to show before it (the files skipped, and why)."""

    def __init__(self, message: str, notes: list[str] | tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.notes = list(notes)


class CommandInterrupted(ContinuityError):
    """An agent command stopped by Ctrl-C: the message says where, and what was kept."""


class UnknownName(ContinuityError, LookupError):
    """A name no registry entry and no installed package's entry point has (an agent, a store's
    URL scheme, an embedder): the message names the known ones."""


_NOTED: set[str] = set()


def note_rebuilt(where: str, what: str, done: str = "rebuilt from the log") -> None:
    """Say once per process, on stderr, that a damaged cache was not served but read again from
    the log: ``continuity: <where>: <what>; rebuilt from the log`` (or what ``done`` says).

    Through the ``continuity`` logger (imported only here, when damage is found): a program that
    configures logging receives it as a warning; one that does not gets it on stderr, which is
    what the CLI and the hooks show. The answer is right either way; the note says a cache file
    was damaged, which ``continuity verify`` explains and ``rebuild-index`` clears."""
    text = f"continuity: {where}: {what}; {done}"
    if text in _NOTED:
        return
    _NOTED.add(text)
    import logging

    logging.getLogger("continuity").warning("%s", text)


def forget_notes() -> None:
    """Forget which notes :func:`note_rebuilt` gave, so each is said again (a long-running
    program that wants to hear of new damage; tests)."""
    _NOTED.clear()


class UnreadableSession(ContinuityError, ValueError):
    """An agent's session source that cannot be read: a path that holds nothing of the agent's,
    a database SQLite cannot open, a compressed rollout that does not decompress."""


def __getattr__(name: str) -> str:
    # DISTRIBUTION lives in continuity._install, imported only when asked for: every hook
    # imports this module, and none needs it (0.3 ms of a hook's start-up).
    if name == "DISTRIBUTION":
        from continuity._install import DISTRIBUTION

        return DISTRIBUTION
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
