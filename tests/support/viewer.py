"""A store for the viewer's tests (HTTP and browser) and the README's screenshot: a long
Claude-Code-like session with tool calls, thinking, large outputs, checkpoints, decisions, a
retraction, a fork, a subagent, and hostile content (``<script>``) in every place a transcript
can put it."""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import re
import select
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from continuity import frames as fr
from continuity.context.compaction import create_checkpoint
from continuity.context.compiler import compile_context
from continuity.context.fork import fork
from continuity.context.retract import retract
from continuity.store.base import BaseStore, Thread

MAIN: Final = "cc-viewer-main"
AGENT: Final = "cc-viewer-main.agent-a1"
FORK: Final = "viewer-fork"
HOSTILE: Final = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'
"""Text that would run script if a page ever inserted it as markup."""
BIG_OUTPUT_LINES: Final = 400


@dataclass(frozen=True)
class ViewerStore:
    main: str
    agent: str
    fork: str
    head: int
    checkpoints: list[int]
    """The checkpoints' to_seq, oldest first."""
    decisions: list[int]
    """The seqs of the decision frames, oldest first."""
    hostile_seq: int
    big_seq: int
    """A message whose tool output is long (clipped on the timeline)."""
    retracted_seq: int


def _m(ids: Iterator[int], *, role: fr.Role, content: list[fr.ContentBlock]) -> fr.MessageAppended:
    """A message whose id is the same in every store built (the store would make a random
    one), so two stores given the same build hold the same frames but for their times."""
    return fr.MessageAppended(message_id=f"msg-{next(ids):05d}", role=role, content=content)


def _turn(thread: Thread, n: int, ids: Iterator[int]) -> None:
    """One exchange: a request, a call with its thinking, the output, an answer."""
    thread.append(
        _m(
            ids,
            role="user",
            content=[fr.TextBlock(text=f"Step {n}: make the invoice export handle case {n}.")],
        )
    )
    call = f"toolu_{n:04d}"
    thread.append(
        _m(
            ids,
            role="assistant",
            content=[
                fr.ThinkingBlock(text=f"Case {n} needs the exporter's quoting; run its test."),
                fr.TextBlock(text=f"Running the tests for case {n}."),
                fr.ToolUseBlock(
                    id=call, name="Bash", input={"command": f"pytest tests -k case_{n}"}
                ),
            ],
        )
    )
    thread.append(
        _m(
            ids,
            role="user",
            content=[
                fr.ToolResultBlock(
                    tool_use_id=call,
                    content=f"tests/test_export.py::test_case_{n} PASSED\n1 passed in 0.0{n % 10}s",
                )
            ],
        )
    )
    thread.append(
        _m(ids, role="assistant", content=[fr.TextBlock(text=f"Case {n} passes; moving on.")])
    )


def build_viewer_store(store: BaseStore, *, turns: int = 60) -> ViewerStore:
    """Write the viewer's test threads into ``store`` (empty) and say where things are."""
    ids = itertools.count()
    main = store.thread(MAIN)
    main.append(
        fr.ThreadCreated(
            thread_id=MAIN,
            title=f"Invoice export {HOSTILE}",
            meta={"source": "claude-code", "project": "/work/shop", "git_branch": "fix/csv"},
        )
    )
    hostile_seq = main.append(
        _m(
            ids,
            role="user",
            content=[fr.TextBlock(text=f"The customer wrote {HOSTILE} in the name field.")],
        )
    )[0]
    main.append(
        _m(
            ids,
            role="assistant",
            content=[
                fr.ToolUseBlock(id="toolu_h", name="Bash", input={"command": f"echo '{HOSTILE}'"})
            ],
        )
    )
    main.append(
        _m(
            ids,
            role="user",
            content=[fr.ToolResultBlock(tool_use_id="toolu_h", content=HOSTILE, is_error=True)],
        )
    )
    big = "\n".join(f"line {i}: {'x' * 60}" for i in range(BIG_OUTPUT_LINES))
    main.append(
        _m(
            ids,
            role="assistant",
            content=[fr.ToolUseBlock(id="toolu_big", name="Read", input={"path": "big.log"})],
        )
    )
    big_seq = main.append(
        _m(ids, role="user", content=[fr.ToolResultBlock(tool_use_id="toolu_big", content=big)])
    )[0]
    checkpoints: list[int] = []
    decisions: list[int] = []
    limits = fr.Limits(recent_messages=12, budget_tokens=400)
    for n in range(turns):
        _turn(main, n, ids)
        head = main.head()
        assert head is not None
        if n % 10 == 9:
            to_seq = head.seq - 2
            create_checkpoint(
                main,
                to_seq,
                text=f"Summary through seq {to_seq}: cases 0–{n} pass; {HOSTILE} stays escaped.",
            )
            checkpoints.append(to_seq)
        if n % 15 == 14 or n == turns - 1:
            result = compile_context(main, limits=limits)
            assert result.decision.seq >= 0
            decisions.append(result.decision.seq)
    retracted_seq = big_seq + 2 + 4  # the user request of the second turn
    retract(main, seqs=[retracted_seq], reason="asked in error")
    agent = store.thread(AGENT)
    agent.append(
        fr.ThreadCreated(
            thread_id=AGENT,
            parent_thread_id=MAIN,
            meta={"source": "claude-code", "project": "/work/shop"},
        )
    )
    agent.append(_m(ids, role="user", content=[fr.TextBlock(text="Find the quoting")]))
    fork(main, FORK, at_seq=40)
    head = main.head()
    assert head is not None
    return ViewerStore(
        MAIN,
        AGENT,
        FORK,
        head.seq,
        checkpoints,
        decisions,
        hostile_seq,
        big_seq,
        retracted_seq,
    )


# --- a served store and a browser for it ----------------------------------------------------

CHROMIUM_FLAGS: Final = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
)
"""Debian's Chromium, headless, as root, on a machine with no network but the registries:
without the background-networking flags it keeps trying to reach Google's hosts."""


@contextmanager
def served(
    store_dir: Path, *args: str, stderr: Path | None = None, timeout: float = 60
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``continuity --store STORE_DIR serve --port 0 ARGS`` as a real process: yields it and the
    address it printed (with the token unless ``--no-token``); stopped afterwards."""
    cmd = [sys.executable, "-m", "continuity", "--store", str(store_dir), "serve", "--port", "0"]
    err = stderr.open("w") if stderr is not None else subprocess.PIPE
    proc = subprocess.Popen([*cmd, *args], stdout=subprocess.PIPE, stderr=err, text=True)
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        line = proc.stdout.readline() if ready else ""
        found = re.search(r"(http://\S+)", line)
        if found is None:
            proc.kill()
            said = stderr.read_text() if stderr is not None else proc.communicate()[1]
            raise RuntimeError(f"continuity serve printed {line!r}; stderr: {said}")
        yield proc, found.group(1)
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # a server that will not stop
                proc.kill()
                proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        if not isinstance(err, int):
            err.close()


# --- raw requests: any bytes in the request target ---------------------------------------------


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    """Lower-cased names; a repeated header keeps its last value."""
    body: bytes


class Dropped(AssertionError):
    """The server closed the connection without an answer."""


def raw_get(
    host: str,
    port: int,
    target: bytes,
    *,
    cookie: bytes | None = None,
    head_only: bool = False,
    timeout: float = 60,
) -> Answer:
    """``GET target`` sent byte for byte (no client library to escape or refuse it), answered
    whole (``Connection: close``). ``head_only``: send the request line and no end of the head
    (for a head too long to send whole: the server answers before it ends). Raises
    :class:`Dropped` when the connection closes without a status line."""
    request = b"GET " + target + b" HTTP/1.1\r\n"
    if not head_only:
        request += f"Host: {host}:{port}\r\nConnection: close\r\n".encode()
        if cookie is not None:
            request += b"Cookie: " + cookie + b"\r\n"
        request += b"\r\n"
    data = b""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        # the server may answer (and close) before the request was all sent
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(request)
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(65536):
                data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = re.match(r"HTTP/1\.[01] (\d{3}) ", lines[0])
    if status is None:
        raise Dropped(
            f"no answer to GET {target[:120]!r}: the connection was closed ({data[:80]!r})"
        )
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return Answer(int(status.group(1)), headers, body)


@contextmanager
def holding_caches(cache_dir: Path, thread_id: str) -> Iterator[None]:
    """Hold the lock under which ``thread_id``'s caches are brought up to date (as another
    process catching them up would): a reader that must catch them up waits until it ends."""
    folder = cache_dir / "threads" / thread_id
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
