"""Reads on a full disk are served as on a read-only store (issue 26): a cache write that finds
no room teaches the process that the cache folder cannot be written, and the reader computes
what it needs from the log; once there is room, a read catches the caches up.

The disk is made full for real where a mount namespace allows it (a small tmpfs, ``unshare
-m``), else by ``RLIMIT_FSIZE`` (writes fail with ``EFBIG``) in the process that reads.
"""

from __future__ import annotations

import errno
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from continuity._fs import no_room
from continuity.caches.thread_index import caches_writable, writing_caches
from continuity.errors import CachesReadOnly

_SCRIPT = textwrap.dedent(
    """
    import json, os, resource, signal, subprocess, sys
    from pathlib import Path

    import continuity as c
    from continuity.caches.catalog import thread_counts
    from continuity.caches.thread_index import ThreadIndex, caches_writable
    from continuity.context.sources import open_source
    from continuity.errors import CachesReadOnly

    mode, root = sys.argv[1], Path(sys.argv[2])
    store = c.Store(root / "s", create=True)
    t = store.thread("t")
    for k in range(40):  # past the size under which a thread keeps no caches
        t.append([c.message("user", f"turn {k}.{i} " + "w" * 300) for i in range(5)])
    ThreadIndex(t).refresh()
    t.append([c.message("assistant", f"ahead {i}") for i in range(7)])  # the caches miss these
    cache = store.cache_dir
    manifest = cache / "threads" / "t" / "manifest.v1.json"
    before = manifest.read_bytes()
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    if mode == "fsize":
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, hard))
    else:
        with open(root / "filler", "wb", buffering=0) as f:
            try:
                while True:
                    f.write(b"\\0" * 65536)
            except OSError:
                pass
    out = {}
    try:
        ThreadIndex(t).refresh()
        out["refresh"] = "ok"
    except CachesReadOnly as exc:
        out["refresh"] = str(exc)
    out["writable"] = caches_writable(cache)
    out["current"] = ThreadIndex.current(t) is not None
    out["counts"] = list(thread_counts(t)[:2])
    out["frames"] = sum(1 for _ in t.read())
    out["messages"] = sum(isinstance(f, c.MessageAppended) for f in t.read())
    out["last"] = [f.seq for f in open_source(t).frames(0, 10**9)][-1]
    out["unchanged"] = manifest.read_bytes() == before
    out["temporary"] = sorted(p.name for p in cache.rglob("*.tmp"))
    if mode == "fsize":
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    else:
        os.unlink(root / "filler")
    later = (  # a new process, on a disk with room
        "import continuity as c, json, sys; from continuity.caches.thread_index import ThreadIndex;"
        "t = c.Store(sys.argv[1]).thread('t');"
        "print(ThreadIndex.current(t) is not None)"
    )
    done = subprocess.run([sys.executable, "-c", later, str(root / "s")], capture_output=True)
    out["later"] = done.stdout.decode().strip() + done.stderr.decode()[-300:]
    out["caught_up"] = json.loads(manifest.read_bytes())["log_end"] == t.log_bytes()
    print(json.dumps(out))
    """
)


def _run(mode: str, root: Path) -> dict[str, object]:
    python = [sys.executable, "-c", _SCRIPT, mode, str(root)]
    if mode == "tmpfs":
        if shutil.which("unshare") is None:
            pytest.skip("needs unshare(1) to mount a small tmpfs in a mount namespace")
        probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
        if probe.returncode != 0:
            pytest.skip(f"cannot make a mount namespace here: {probe.stderr.decode().strip()}")
        command = " ".join(f"'{a}'" for a in python[3:])
        script = f'mount -t tmpfs -o size=1m tmpfs {root} && {sys.executable} -c "$S" {command}'
        done = subprocess.run(
            ["unshare", "-m", "sh", "-c", script],
            capture_output=True,
            text=True,
            env={"S": _SCRIPT, "PATH": "/usr/bin:/bin"},
        )
    else:
        done = subprocess.run(python, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["tmpfs", "fsize"])
def test_a_full_disk_is_read_as_a_read_only_store_then_caught_up(tmp_path: Path, mode: str) -> None:
    out = _run(mode, tmp_path)
    refused = str(out["refresh"])
    assert "cannot be written" in refused, refused
    assert ("No space left" if mode == "tmpfs" else "File too large") in refused, refused
    assert out["writable"] is False  # learned, for the process
    assert out["current"] is False  # readers compute from the log instead
    assert out["counts"] == [out["frames"], out["messages"]] == [208, 207]
    assert out["last"] == 207  # the frames the caches miss are read all the same
    assert out["unchanged"] is True  # the caches on disk are as they were: never half-written
    assert out["temporary"] == []
    assert out["later"] == "True"
    assert out["caught_up"] is True


def test_no_room_is_a_full_disk_a_quota_or_a_file_size_limit() -> None:
    for code in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        assert no_room(OSError(code, "no room"))
    for other in (OSError(errno.EACCES, "denied"), OSError(errno.EIO, "io"), ValueError("x")):
        assert not no_room(other)


def test_writing_caches_learns_only_from_a_write_without_room(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    with pytest.raises(PermissionError), writing_caches(cache):
        raise PermissionError(errno.EACCES, "denied")
    assert caches_writable(cache)  # another failure teaches nothing
    no_space = pytest.raises(CachesReadOnly, match="cannot be written: No space left")
    with no_space, writing_caches(cache):
        raise OSError(errno.ENOSPC, "No space left on device")
    assert not caches_writable(cache)
