"""File helpers every layer shares: the atomic write, and the directory fsync behind it."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

__all__ = [
    "atomic_write",
    "fsync_dir",
    "no_room",
    "private_dirs",
    "read_checked",
    "remove_temps",
    "write_checked",
]

_NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def no_room(exc: BaseException) -> bool:
    """Whether ``exc`` is a write refused for want of room: a full file system (``ENOSPC``), a
    quota (``EDQUOT``) or a file size limit (``EFBIG``, as ``RLIMIT_FSIZE`` makes one). Not a
    fault of what was written: the same write succeeds once there is room again."""
    return isinstance(exc, OSError) and exc.errno in _NO_ROOM


def fsync_dir(path: Path) -> None:
    """Make a folder's entries durable (a file created, renamed or removed in it)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def private_dirs(path: Path) -> None:
    """Create ``path`` and any missing parents as folders only their owner can enter (0700,
    whatever the umask: it can only take bits away). ``Path.mkdir(parents=True)`` would give
    the parents the default mode. An existing folder is left as it is."""
    missing: list[Path] = []
    while not path.is_dir():
        missing.append(path)
        if path.parent == path:
            break
        path = path.parent
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):  # another process made it first
            folder.mkdir(mode=0o700)


def atomic_write(
    path: Path,
    data: bytes | Callable[[BinaryIO], None],
    *,
    durable: bool,
    keep_mode: bool = False,
) -> None:
    """Replace ``path`` with ``data`` in one step: readers see the old file or the new one,
    never a part of either, whatever happens to this process.

    The bytes go to a temporary file beside ``path`` (same folder, so the rename stays on one
    file system; a name of its own per writer, so parallel writers of one file never share
    it), which is renamed over ``path``. ``durable`` fsyncs the file before the rename and the
    folder after it: the truth and its markers need that; a cache, which can be rebuilt, does
    not. ``keep_mode`` gives the new file the permissions of the one it replaces (a user's
    settings file). ``data`` may be a function that writes to the open file (to stream what
    is too big to hold). The temporary file is removed if anything fails.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{os.urandom(4).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            if callable(data):
                data(f)  # a writer streams what would not fit in memory at once
            else:
                f.write(data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        if keep_mode:
            with contextlib.suppress(FileNotFoundError):  # a new file keeps the default mode
                os.chmod(tmp, stat.S_IMODE(os.stat(path).st_mode))
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(path.parent)


def _trailer(data: bytes) -> bytes:
    import blake3  # a core dependency, already loaded wherever a cache is written

    return b"\n#b3:" + blake3.blake3(data).hexdigest(8).encode() + b"\n"


def write_checked(path: Path, data: bytes) -> None:
    """Replace a small cache file (a cursor, a state) atomically with ``data`` followed by a
    line holding its checksum, so a damaged file is told from a sound one by
    :func:`read_checked`. Not fsynced: a cache is rebuilt, not recovered."""
    atomic_write(path, data + _trailer(data), durable=False)


def read_checked(path: Path) -> bytes | None:
    """The data :func:`write_checked` wrote to ``path``; None for a file without a checksum (an
    older version wrote it: read it as absent); ``ValueError`` when the file is damaged (its
    checksum does not match, or it is empty or cut). Raises ``OSError``
    (``FileNotFoundError``…) when it cannot be read."""
    raw = path.read_bytes()
    cut = raw.rfind(b"\n#b3:")
    if cut < 0:
        if not raw.strip() or not raw.rstrip().endswith(b"}"):
            raise ValueError(f"{path.name} is empty or cut short")
        return None
    data = raw[:cut]
    if raw[cut:] != _trailer(data):
        raise ValueError(f"{path.name} does not match its checksum")
    return data


def remove_temps(folder: Path, *, holding_lock: bool) -> int:
    """Remove what writers killed between :func:`atomic_write`'s write and its rename left in
    ``folder`` (its temporary files), and return how many went. A rebuild calls it: it must
    leave nothing behind that a rebuild does not write.

    ``holding_lock``: the caller holds the lock every writer of the folder takes while it
    writes, so every temporary file there is a dead writer's (a writer killed while holding
    the lock no longer holds it). Without it, only the files whose writer's pid is gone are
    removed: a live writer may be between its write and its rename."""
    removed = 0
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return 0
    for name in names:
        pid = _temp_writer(name)
        if pid is None or (not holding_lock and _alive(pid)):
            continue
        with contextlib.suppress(FileNotFoundError):
            os.unlink(folder / name)
            removed += 1
    return removed


def _temp_writer(name: str) -> int | None:
    """The pid in the name :func:`atomic_write` gives its temporary file
    (``.<name>.<pid>-<8 hex>.tmp``); None for any other name."""
    if not (name.startswith(".") and name.endswith(".tmp")):
        return None
    pid, dash, tag = name[1:-4].rpartition(".")[2].partition("-")
    hexdigits = "0123456789abcdef"
    if not (dash and pid.isdigit() and len(tag) == 8 and all(c in hexdigits for c in tag)):
        return None
    return int(pid)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: alive
    return True
