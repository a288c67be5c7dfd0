"""The listings' fast path: ``continuity threads`` answered by one stat a log, in a fresh process.

:mod:`continuity.caches.catalog` serves a row only while its log still has the row's size and
ends with its head digest: each listing opens every log and reads its last bytes, and imports
the machinery to catch a row up. At 10,000 threads that is most of a listing's CPU. So each time
the catalog is found current for every log, it also writes ``<store>/cache/listing.v1`` (see
:func:`encode_stat_file`): a digest of ``store.json``, of the catalog file's bytes and of each
log's (inode, size, mtime, ctime) as it was when its stamp was read and matched its row, then
the ``threads`` listing of those rows as the command prints it (after its own digest). It is
written only when every log's last change was well before that read (the racy-time rule of
:meth:`~continuity.store.jsonl.Store.log_stamps`: any write changes a file's ctime, and a
change within the clock's granularity of the read would not show).

:func:`current_listing` answers from it alone: when ``store.json`` and the catalog are the bytes
the file names, and the digest of every log's stat now is the one recorded (no log changed,
none added, none gone), the listing describes the logs as they are, without a log opened.
Anything else (a log appended, cut, replaced or deleted, a new one, a catalog rewritten, a
damaged or missing file, another version's) is None: the caller takes the full path, which
catches up and writes the file again. A stale file is never wrong, only useless: what it says
held for that stat and those bytes. Imports blake3, nothing of the store.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import blake3

TYPE_CHECKING = False  # not typing's: the listings' fast path imports this module (2 ms)
if TYPE_CHECKING:
    from typing import Final

__all__ = [
    "CONTEXT_FILE",
    "CONTEXT_PARTS",
    "PARTS",
    "SESSIONS_FILE",
    "STAT_FILE",
    "agent_part",
    "content_digest",
    "context_key",
    "context_prefix",
    "current_listing",
    "current_sessions",
    "encode_parts",
    "encode_sessions_file",
    "encode_stat_file",
    "escape",
    "log_line",
    "log_lines",
    "logs_digest",
    "quarantined_count",
    "sessions_key",
    "sessions_parts",
    "sessions_prefix",
    "stat_file_header",
    "store_artifacts",
    "tree_bytes",
    "unescape",
    "usage_of",
    "vouched_catalog",
    "vouches",
    "with_usage",
]

STAT_FILE: Final = "listing.v1"
_MAGIC: Final = b"continuity-listing 1"


def content_digest(data: bytes) -> str:
    """128 bits of the blake3 of ``data``."""
    return blake3.blake3(data).hexdigest(16)


def logs_digest(logs: list[str]) -> str:
    """128 bits of the blake3 of every log's :func:`log_line`, in the folder's order (the
    order ``os.scandir`` gives both the writer and the reader of the file: another order is a
    digest that does not match, read the full way)."""
    return content_digest("\n".join(logs).encode())


def log_line(thread_id: str, ino: int, size: int, mtime_ns: int, ctime_ns: int) -> str:
    """What the digest covers of one log: its thread id, inode, size, mtime and ctime."""
    return f"{thread_id} {ino} {size} {mtime_ns} {ctime_ns}"


def _prefix(marker: bytes, catalog: bytes) -> bytes:
    return _MAGIC + f" {content_digest(marker)} {content_digest(catalog)} ".encode()


def _header(marker: bytes, catalog: bytes, count: int, logs: str) -> bytes:
    return _prefix(marker, catalog) + f"{count} {logs}\n".encode()


def stat_file_header(marker: bytes, catalog: bytes, logs: list[str]) -> bytes:
    """The first line of :func:`encode_stat_file`'s file: all that it vouches for (the listing
    after it is a function of the catalog's bytes)."""
    return _header(marker, catalog, len(logs), logs_digest(logs))


def encode_stat_file(marker: bytes, catalog: bytes, logs: list[str], listing: bytes) -> bytes:
    """The file that vouches for ``catalog`` (its bytes) with ``logs`` as they are, and holds
    ``listing``: what ``continuity threads`` prints of its rows."""
    return stat_file_header(marker, catalog, logs) + _sealed(listing)


def _sealed(listing: bytes) -> bytes:
    return content_digest(listing).encode() + b"\n" + listing


def _unsealed(sealed: bytes) -> bytes | None:
    """The listing after its digest line, None when they do not match (a damaged file)."""
    digest, newline, listing = sealed.partition(b"\n")
    return listing if newline and digest == content_digest(listing).encode() else None


def vouches(found: bytes, header: bytes) -> bool:
    """Whether the file ``found`` has ``header`` and an undamaged listing."""
    return found.startswith(header) and _unsealed(found[len(header) :]) is not None


def current_listing(root: Path) -> bytes | None:
    """What ``continuity threads`` prints of the folder store at ``root``, when the file
    vouches for every log as it is now; None otherwise (list the full way)."""
    found = _vouched(root)
    listing = None if found is None else _unsealed(found[1])
    if listing is None:
        _UNVOUCHED.add(root)
    return listing


def vouched_catalog(root: Path) -> bytes | None:
    """The catalog file's bytes when the listing file vouches for every log of the folder store
    at ``root`` as it is now (every row is current); None otherwise."""
    if root in _UNVOUCHED:  # the fast path just found it is not: once, not twice
        _UNVOUCHED.discard(root)
        return None
    found = _vouched(root)
    if found is None or _unsealed(found[1]) is None:
        return None  # a damaged listing: the full way writes it again
    return found[0]


_UNVOUCHED: Final[set[Path]] = set()
"""The stores whose listing the fast path found not vouched for in this process: the full
way that follows it (the typer command) does not make the same check again."""


def _vouched(root: Path) -> tuple[bytes, bytes] | None:
    """The catalog's bytes and the listing file's sealed listing, when the file vouches (a
    check this process made a moment ago for the sessions file is taken, once)."""
    found = _VOUCHED.pop(root, None)
    return found if found is not None else _check(root)


_VOUCHED: Final[dict[Path, tuple[bytes, bytes]]] = {}
"""The stores whose listing file the sessions fast path found vouching in this process but
whose sessions file did not match: the full way that follows it takes the catalog from it
rather than stat every log again."""


def _check(root: Path) -> tuple[bytes, bytes] | None:
    try:
        found = (root / "cache" / STAT_FILE).read_bytes()
        marker = (root / "store.json").read_bytes()
        catalog = (root / "cache" / "catalog.v1.json").read_bytes()
    except OSError:
        return None
    head, newline, listing = found.partition(b"\n")
    parts = head.split(b" ")
    if (
        not newline
        or len(parts) != 6
        or not head.startswith(_prefix(marker, catalog))
        or not parts[4].isdigit()
    ):
        return None
    logs = log_lines(root)
    if logs is None:
        return None
    if len(logs) != int(parts[4]) or logs_digest(logs).encode() != parts[5]:
        return None
    return catalog, listing


def log_lines(root: Path) -> list[str] | None:
    """The :func:`log_line` of every log of the folder store at ``root`` as a stat finds it now,
    in the folder's order, skipping what :meth:`~continuity.store.jsonl.Store.log_stamps` skips
    (empty logs, what is not a file); None when the folder cannot be read. One stat a log."""
    logs: list[str] = []
    try:
        dir_fd = os.open(root / "threads", os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return None
    try:
        with os.scandir(dir_fd) as entries:
            for entry in entries:
                name = entry.name
                if not name.endswith(".jsonl"):
                    continue
                try:
                    st = os.stat(name, dir_fd=dir_fd)
                except FileNotFoundError:
                    continue  # removed since the folder was listed: as log_stamps does
                if st.st_size <= 0 or not stat.S_ISREG(st.st_mode):
                    continue  # log_stamps skips these too
                logs.append(
                    log_line(name[:-6], st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
                )
    except OSError:
        return None
    finally:
        os.close(dir_fd)
    return logs


# --- the sessions file: ``sessions`` and ``stats`` ---------------------------------------------

SESSIONS_FILE: Final = "sessions.v1"
_SESSIONS_MAGIC: Final = b"continuity-sessions 1"
_RENDERED_BY: Final = (
    "_text.py",
    "redaction.py",
    "agents/table.py",
    "agents/base/sessions.py",
    "maintenance/stats.py",
    "caches/session_file.py",
    "caches/catalog.py",
    "store/catalog.py",
)
"""The modules whose code decides the sessions file's content (the redaction's rules and the
catalog's rows among them): a change to any of them (another version installed) is another
key."""
REDACTION_CONFIG: Final = "redaction.json"
""":data:`continuity.redaction.CONFIG_FILE`, named here without importing the redaction."""


def sessions_key(root: Path) -> str | None:
    """What the sessions file's content depends on besides the catalog: the code that renders
    and redacts it (:data:`_RENDERED_BY`, its source bytes) and the store's redaction config
    (its bytes, or its absence). None when one cannot be read (no sessions file then)."""
    package = Path(__file__).resolve().parent.parent
    hasher = blake3.blake3()
    try:
        for name in _RENDERED_BY:
            code = (package / name).read_bytes()
            hasher.update(f"{name} {len(code)}\n".encode())
            hasher.update(code)
        try:
            config = (root / REDACTION_CONFIG).read_bytes()
        except FileNotFoundError:
            hasher.update(b"no config")
        else:
            hasher.update(f"config {len(config)}\n".encode())
            hasher.update(config)
    except OSError:
        return None
    return hasher.hexdigest(16)


def sessions_prefix(catalog: bytes, key: str) -> bytes:
    """The start of the sessions file made of the catalog ``catalog`` with ``key``."""
    return _SESSIONS_MAGIC + f" {content_digest(catalog)} {key} ".encode()


PARTS: Final = (
    "stats",
    "text",
    "lines",
    "agents",
    "agents_json",
    "keys",
    "table",
    "json",
    "checks",
)
"""The sessions file's parts, in order (see :func:`encode_sessions_file`): ``stats``,
``sessions``' and ``sessions --json``'s output, those of ``--agent X`` and ``--agent X --json``
for each agent (after a line of their names and lengths), then a line a session (sub-agents'
too, the most recently active last) in each of ``keys`` (what the filters compare: its agent
column, ``1`` for a sub-agent's session else ``0``, its project), ``table`` (its thread id, its
line's rest up to its counts, its title), ``json`` (its JSON line: JSON holds no newline) and
``checks`` (its thread id, log length and last digest, which its catalog row is a function
of: an unchanged row's entry is taken from the file before); fields are tab-separated, each
:func:`escape`\\ d."""


def encode_sessions_file(catalog: bytes, key: str, parts: list[bytes]) -> bytes:
    """The sessions file: its parts (:data:`PARTS`) after a line naming the catalog, the key
    and each part's length and digest (each part is read and checked alone: ``stats`` reads a
    few hundred bytes)."""
    return encode_parts(sessions_prefix(catalog, key), parts)


def encode_parts(prefix: bytes, parts: list[bytes]) -> bytes:
    """A file of ``parts`` after a line of ``prefix`` and each part's length and digest."""
    sealed = " ".join(f"{len(part)}:{content_digest(part)}" for part in parts)
    return prefix + sealed.encode() + b"\n" + b"".join(parts)


def _layout(
    line: bytes, prefix: bytes, names: tuple[str, ...] = PARTS
) -> list[tuple[int, int, bytes]] | None:
    """Each part's (offset, length, digest) from the file's first ``line`` (its newline
    included); None when it does not start with ``prefix`` or is not such a line."""
    if not line.startswith(prefix) or not line.endswith(b"\n"):
        return None
    found = []
    offset = len(line)
    for item in line[len(prefix) : -1].split(b" "):
        size, colon, digest = item.partition(b":")
        if not colon or not size.isdigit() or len(digest) != 32:
            return None
        found.append((offset, int(size), digest))
        offset += int(size)
    return found if len(found) == len(names) else None


def sessions_parts(
    found: bytes, prefix: bytes, names: tuple[str, ...] = PARTS
) -> list[bytes] | None:
    """Every part of the sessions file ``found`` (or another file of parts ``names``) when it
    starts with ``prefix`` and no part is damaged; None otherwise."""
    line, newline, _rest = found.partition(b"\n")
    layout = _layout(line + newline, prefix, names)
    if layout is None or layout[-1][0] + layout[-1][1] != len(found):
        return None
    parts = [found[offset : offset + size] for offset, size, _digest in layout]
    if any(content_digest(p).encode() != d for p, (_o, _s, d) in zip(parts, layout, strict=True)):
        return None
    return parts


def current_sessions(
    root: Path,
    *parts: str,
    context: tuple[str, ...] = (),
    with_header: bool = False,
    remember: bool = False,
) -> list[bytes] | None:
    """The parts ``parts`` (:data:`PARTS`) of the sessions file of the folder store at ``root``
    when it was made of the catalog the listing file vouches for (every log as it is now:
    :func:`current_listing`'s check) with this code and this redaction config, then the parts
    ``context`` (:data:`CONTEXT_PARTS`) of the context file made for that very sessions file
    with this code, ``rolling.json`` and environment (and, ``with_header``, the digest of the
    sessions file's first line, which names all it holds); None otherwise (list the full
    way). ``remember``: a fresh process's fast path, whose typer command follows at once (it
    takes the catalog this check vouched for, or makes no second check when none)."""
    found = _check(root)
    if found is None:
        if remember:
            _UNVOUCHED.add(root)
        return None
    key = sessions_key(root)
    data = None
    if key is not None:
        prefix = sessions_prefix(found[0], key)
        data = _parts(root / "cache" / SESSIONS_FILE, prefix, PARTS, parts)
    if data is not None:
        header = data.pop()
        if context:
            usage = context_key(root)
            more = None
            if usage is not None:
                prefix = context_prefix(header, usage)
                more = _parts(root / "cache" / CONTEXT_FILE, prefix, CONTEXT_PARTS, context)
            data = None if more is None else data + more[:-1]
        if data is not None and with_header:
            data.append(header)
    if data is None and remember:
        _VOUCHED[root] = found
    return data


def _parts(
    path: Path, prefix: bytes, names: tuple[str, ...], wanted: tuple[str, ...]
) -> list[bytes] | None:
    """The parts ``wanted`` of the file at ``path`` whose parts are ``names``, each checked
    against its digest, then the digest of the file's first line (which names every part's);
    None when the file does not start with ``prefix`` or a part is damaged."""
    found = []
    try:
        with open(path, "rb") as f:
            line = f.readline(1 << 12)
            layout = _layout(line, prefix, names)
            if layout is None:
                return None
            for part in wanted:
                offset, size, digest = layout[names.index(part)]
                data = os.pread(f.fileno(), size, offset)
                if content_digest(data).encode() != digest:
                    return None
                found.append(data)
    except OSError:
        return None
    return [*found, content_digest(line).encode()]


# --- the context file: ``sessions --context`` ---------------------------------------------------

CONTEXT_FILE: Final = "context.v1"
CONTEXT_PARTS: Final = ("text", "lines", "usage")
"""What ``sessions --context`` prints, and ``sessions --context --json``, then a line a session
of the sessions file it was made for (another sessions file, even of the same rows, is
another context file: its titles may be redacted otherwise), in its order: its thread id, log
length and last digest (as in ``checks``), the tokens its context held and the model's window
(``-``: none reported)."""
_CONTEXT_MAGIC: Final = b"continuity-context 1"
_USAGE_BY: Final = ("rolling/usage.py", "rolling/settings.py", "agents/table.py", "_text.py")
"""The modules whose code decides what the context file says (with ``rolling.json`` and the
window set in the environment, ``CONTINUITY_CONTEXT_WINDOW``)."""


def context_key(root: Path) -> str | None:
    """What the context file depends on besides the sessions file: the code that reads a
    session's usage and renders it, ``rolling.json`` and ``CONTINUITY_CONTEXT_WINDOW``."""
    package = Path(__file__).resolve().parent.parent
    hasher = blake3.blake3()
    try:
        for name in _USAGE_BY:
            code = (package / name).read_bytes()
            hasher.update(f"{name} {len(code)}\n".encode())
            hasher.update(code)
        try:
            settings = (root / "rolling.json").read_bytes()
        except FileNotFoundError:
            hasher.update(b"no settings")
        else:
            hasher.update(f"settings {len(settings)}\n".encode())
            hasher.update(settings)
    except OSError:
        return None
    hasher.update(os.environ.get("CONTINUITY_CONTEXT_WINDOW", "").encode())
    return hasher.hexdigest(16)


def context_prefix(sessions: bytes, key: str) -> bytes:
    """The start of the context file made for the sessions file whose first line has the digest
    ``sessions``, with ``key``."""
    return _CONTEXT_MAGIC + b" " + sessions + f" {key} ".encode()


_NO_USAGE: Final = b'"context_tokens":null,"context_window":null}'


def with_usage(line: bytes, tokens: str, window: str) -> bytes | None:
    """A session's JSON line (``context_tokens`` and ``context_window`` null, its last fields)
    with the usage of the context file's line (``-``: none); None for another line."""
    if not line.endswith(_NO_USAGE):
        return None
    if tokens == "-":
        return line
    shown = window if window != "-" else "null"
    return (
        line[: -len(_NO_USAGE)] + f'"context_tokens":{tokens},"context_window":{shown}}}'.encode()
    )


def usage_of(field: str) -> int | None:
    """A count of the context file (``-``: none)."""
    return None if field == "-" else int(field)


def agent_part(part: bytes, name: str) -> bytes | None:
    """What ``sessions --agent name`` prints (with ``--json``), from the part ``agents`` (or
    ``agents_json``): b"" when the agent has no session; None when the part does not say."""
    index, newline, blocks = part.partition(b"\n")
    if not newline:
        return None
    offset = 0
    for item in index.split():
        named, _colon, size = item.decode().partition(":")
        if not size.isdigit():
            return None
        if named == name:
            return blocks[offset : offset + int(size)]
        offset += int(size)
    return b""


def escape(text: str) -> str:
    """``text`` as a field of a line of tab-separated fields (backslash, tab and newline
    escaped)."""
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")


def unescape(field: str) -> str:
    """The text :func:`escape` made ``field`` of."""
    if "\\" not in field:
        return field
    import re

    return re.sub(
        r"\\(.)", lambda m: {"t": "\t", "n": "\n"}.get(m[1], m[1]), field, flags=re.DOTALL
    )


def tree_bytes(root: Path | None) -> int:
    """The bytes of the files under ``root`` (one ``stat`` a file; symbolic links followed,
    as ``Path.is_file`` and ``Path.stat`` do): what ``stats`` counts of the cache folder."""
    if root is None or not root.is_dir():
        return 0
    total = 0
    pending = [str(root)]
    while pending:
        try:
            entries = os.scandir(pending.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        pending.append(entry.path)
                    elif entry.is_file():
                        total += entry.stat().st_size
                except OSError:
                    continue  # removed while it was walked
    return total


def _is_artifact_name(name: str) -> bool:
    """``<64 lowercase hex>.zst``: :func:`continuity.store.artifacts.is_artifact_id`'s rule."""
    aid = name[:-4]
    return name.endswith(".zst") and len(aid) == 64 and all(c in "0123456789abcdef" for c in aid)


def store_artifacts(folder: Path) -> tuple[int, int] | None:
    """How many artifacts the folder store's ``artifacts/`` holds and the bytes of its files
    (what :class:`~continuity.store.artifacts.FileArtifactStore` counts: ``ids`` and
    ``stored_bytes``), for a folder of the usual shape (files in one level of folders); None
    for anything else (a symbolic link, a deeper folder, an error): the store counts those."""
    count = size = 0
    try:
        if not folder.is_dir():
            return 0, 0
        with os.scandir(folder) as top:
            for sub in top:
                if sub.is_symlink():
                    return None
                if not sub.is_dir():
                    size += sub.stat().st_size if sub.is_file() else 0
                    continue
                with os.scandir(sub.path) as inner:
                    for entry in inner:
                        if entry.is_symlink() or not entry.is_file():
                            return None
                        size += entry.stat().st_size
                        count += _is_artifact_name(entry.name)
    except OSError:
        return None
    return count, size


def quarantined_count(folder: Path) -> int | None:
    """How many records the folder store's ``quarantine/`` holds that
    :meth:`~continuity.store.jsonl.Store.quarantined` lists; None when one cannot be read."""
    if not folder.is_dir():
        return 0
    found = 0
    try:
        names = sorted(folder.glob("*.json"))
        if not names:
            return 0
        import msgspec

        for path in names:
            try:
                rec = msgspec.json.decode(path.read_bytes())
                for name in ("thread_id", "offset", "length", "reason", "time_ms"):
                    rec[name]
            except (msgspec.DecodeError, UnicodeDecodeError, KeyError, TypeError):
                continue
            found += 1
    except OSError:
        return None
    return found
