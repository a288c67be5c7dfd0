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
from typing import Final

import blake3

__all__ = [
    "STAT_FILE",
    "content_digest",
    "current_listing",
    "encode_stat_file",
    "log_line",
    "logs_digest",
    "stat_file_header",
    "vouched_catalog",
    "vouches",
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
    """The catalog's bytes and the listing file's sealed listing, when the file vouches."""
    return _check(root)


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
    if len(logs) != int(parts[4]) or logs_digest(logs).encode() != parts[5]:
        return None
    return catalog, listing
