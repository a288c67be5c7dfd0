"""Damaged session files into ``continuity ingest``: one bad input never costs a good one.

Issue 40, item 3. For each source format continuity reads (a Claude Code transcript, a Codex
rollout ``.jsonl`` and ``.jsonl.zst``, a Gemini CLI ``.jsonl`` session, an opencode database),
a session is generated whose every conversation line (opencode: message) carries a marker of
its own, then damaged one way per trial, then ingested with ``continuity ingest --agent …`` into
a fresh store. The archive is searched for the markers (frames and the artifacts they point at).

Mutations (JSON lines): ``truncate`` (the file cut at a random offset), ``flip`` (1–4 random
bytes changed, never inside a marker), ``deep`` (a line nested 100,000 deep inserted after
the first line; ``deep-first``: as the first line),
``huge`` (a valid line of the format over 64 KiB, or 1 MiB, inserted: it is a good line),
``utf8`` (bytes that are not UTF-8 in a line's text), ``surrogate`` (a lone surrogate escape in a
line's text), ``types`` (one field of a line given a value of the wrong type). For ``.zst``:
``truncate`` and ``flip`` of the compressed bytes, and each JSON-lines mutation compressed. For
the database: ``page-flip`` and ``page-zero`` (one leaf page of the session, message or part
table), ``truncate`` (at a page boundary), and ``utf8``, ``deep``, ``types``, ``huge`` in a row's
data.

Invariants, over every trial:

- **0 lost good lines**: every line (message) the damage did not touch is archived — the lines
  before and after it, the inserted huge one, the one with bad UTF-8 or a lone surrogate in
  its text. Touched means: the line holding a changed byte (and its neighbours when a newline
  changed), the lines past a cut, in a ``.zst`` the lines past the first byte the damaged file
  no longer decompresses to; in a database, the rows on a changed page.
- **0 tracebacks**: no exception escapes ``ingest``.
- **0 silent empty results**: an ingest that archived nothing of an input that holds something
  says so (a non-zero exit and a line on stderr).
- **0 silent losses**: an ingest that exits 0 saying nothing archived every complete line of its
  input (a cut last line, which may still be being written, is not a loss).

Run ``python -m tools.faults.ingest [--scale F] [--seed S]`` (full size: 60 trials per format
and mutation over sessions of 200 lines); ``tests/agents/*/test_fuzz.py`` run a bounded form of
each format with a fixed seed.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import sqlite3
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from tools.faults._common import FamilyResult

__all__ = [
    "FORMATS",
    "MUTATIONS",
    "Outcome",
    "Totals",
    "Trial",
    "main",
    "run",
    "run_format",
]

FORMATS: Final = ("claude-code", "codex", "codex-zst", "gemini", "opencode-db")
JSONL_MUTATIONS: Final = (
    "truncate",
    "flip",
    "deep",
    "deep-first",
    "huge",
    "utf8",
    "surrogate",
    "types",
)
MUTATIONS: Final = {
    "claude-code": JSONL_MUTATIONS,
    "codex": JSONL_MUTATIONS,
    "codex-zst": ("zst-truncate", "zst-flip", *JSONL_MUTATIONS),
    "gemini": JSONL_MUTATIONS,
    "opencode-db": ("page-flip", "page-zero", "truncate", "utf8", "deep", "types", "huge"),
}
_AGENT: Final = {
    "claude-code": "claude-code",
    "codex": "codex",
    "codex-zst": "codex",
    "gemini": "gemini",
    "opencode-db": "opencode",
}
_MARKER: Final = re.compile(rb"mk\d{6}x")
_DEEP: Final = 100_000
_ARTIFACT: Final = re.compile(r'"artifact_id":"([0-9a-f]+)"')


def _marker_of(raw: bytes) -> str | None:
    found = _MARKER.search(raw)
    return found.group().decode() if found else None


def _marker(n: int) -> str:
    return f"mk{n:06d}x"


def _words(rnd: random.Random, n: int) -> str:
    return " ".join(
        rnd.choice(("alpha", "beta", "gamma", "delta", "tool", "file")) for _ in range(n)
    )


# --- the formats: one session, each conversation line with a marker ----------------------


@dataclass
class Session:
    """A generated session: its lines (JSON lines formats) and the marker of each (None for a
    line without one: a header)."""

    lines: list[bytes]
    markers: list[str | None]
    name: str


def _ts(i: int) -> str:
    return f"2026-03-01T10:{i // 60 % 60:02d}:{i % 60:02d}.000Z"


def _claude_line(i: int, text: str, sid: str) -> dict[str, Any]:
    uuid = f"{sid[:24]}{i:012d}"
    parent = f"{sid[:24]}{i - 1:012d}" if i else None
    if i % 2 == 0:
        return {
            "type": "user",
            "uuid": uuid,
            "parentUuid": parent,
            "sessionId": sid,
            "timestamp": _ts(i),
            "cwd": "/work/proj",
            "message": {"role": "user", "content": text},
        }
    return {
        "type": "assistant",
        "uuid": uuid,
        "parentUuid": parent,
        "sessionId": sid,
        "timestamp": _ts(i),
        "cwd": "/work/proj",
        "message": {
            "id": f"msg_{sid[:8]}{i:08d}",
            "role": "assistant",
            "model": "claude-x",
            "content": [{"type": "text", "text": text}],
        },
    }


def _codex_line(i: int, text: str, sid: str) -> dict[str, Any]:
    del sid  # a rollout's lines carry no ids of their own
    role, kind = ("user", "input_text") if i % 2 == 0 else ("assistant", "output_text")
    return {
        "timestamp": _ts(i),
        "type": "response_item",
        "payload": {"type": "message", "role": role, "content": [{"type": kind, "text": text}]},
    }


def _gemini_line(i: int, text: str, sid: str) -> dict[str, Any]:
    if i % 2 == 0:
        return {
            "id": f"g-{sid[:8]}-{i:06d}",
            "timestamp": _ts(i),
            "type": "user",
            "content": [{"text": text}],
        }
    return {"id": f"g-{sid[:8]}-{i:06d}", "timestamp": _ts(i), "type": "gemini", "content": text}


SESSION_ID: Final = "5e551000-0000-4000-8000-00000000f00d"


def _line(fmt: str, i: int, text: str, sid: str = SESSION_ID) -> dict[str, Any]:
    if fmt == "claude-code":
        return _claude_line(i, text, sid)
    if fmt in ("codex", "codex-zst"):
        return _codex_line(i, text, sid)
    return _gemini_line(i, text, sid)


def make_session(fmt: str, n: int, rnd: random.Random, sid: str = SESSION_ID) -> Session:
    """``n`` conversation lines of ``fmt`` (a JSON lines format), each text with its marker,
    in session ``sid`` (a uuid: the line ids are made from it)."""
    lines: list[bytes] = []
    markers: list[str | None] = []
    if fmt in ("codex", "codex-zst"):
        meta = {"id": sid, "cwd": "/work/proj", "cli_version": "0.125.0", "originator": "x"}
        head = {"timestamp": _ts(0), "type": "session_meta", "payload": meta}
        lines.append(json.dumps(head).encode())
        markers.append(None)
        name = f"rollout-2026-03-01T10-00-00-{sid}.jsonl"
    elif fmt == "gemini":
        head = {"sessionId": sid, "projectHash": "ab" * 32, "startTime": _ts(0), "kind": "main"}
        lines.append(json.dumps(head).encode())
        markers.append(None)
        name = f"session-2026-03-01T10-00-{sid[:8]}.jsonl"
    else:
        name = f"{sid}.jsonl"
    for i in range(n):
        text = f"{_marker(i)} {_words(rnd, rnd.randrange(3, 40))}"
        lines.append(json.dumps(_line(fmt, i, text, sid)).encode())
        markers.append(_marker(i))
    return Session(lines, markers, name)


def huge_line(fmt: str, i: int, rnd: random.Random) -> bytes:
    """A valid line over 64 KiB (a pasted file, a long notice): a good line like any other."""
    size = rnd.choice((70_000, 300_000, 1_100_000))
    text = f"{_marker(i)} " + ("x" * 63 + "\n") * (size // 64)
    if fmt == "gemini" and rnd.random() < 0.5:  # a notice of the CLI (an info record)
        return json.dumps(
            {"id": f"g-notice-{i:06d}", "timestamp": _ts(i), "type": "info", "content": text}
        ).encode()
    return json.dumps(_line(fmt, i, text)).encode()


# --- mutations of JSON lines ----------------------------------------------------------------


@dataclass
class Damaged:
    """A damaged input: its bytes, the markers that must be archived (untouched lines), the
    markers of every complete line (for the silent-loss check) and what was done."""

    data: bytes
    required: set[str]
    complete: set[str]
    what: str
    holds_something: bool = True


def _spans(lines: list[bytes]) -> list[tuple[int, int]]:
    spans, pos = [], 0
    for raw in lines:
        spans.append((pos, pos + len(raw)))
        pos += len(raw) + 1
    return spans


def _marked(markers: list[str | None], idx: Iterable[int]) -> set[str]:
    return {m for i in idx if (m := markers[i]) is not None}


_WRONG: Final[dict[str, list[Callable[[dict[str, Any]], None]]]] = {
    "claude-code": [
        lambda o: o.__setitem__("message", 5),
        lambda o: o["message"].__setitem__("content", {"a": 1}),
        lambda o: o.__setitem__("uuid", [1, 2]),
        lambda o: o.__setitem__("timestamp", {"x": 1}),
        lambda o: o["message"].__setitem__("role", 7),
        lambda o: o.__setitem__("type", None),
    ],
    "codex": [
        lambda o: o.__setitem__("payload", "text"),
        lambda o: o["payload"].__setitem__("content", 5),
        lambda o: o["payload"].__setitem__("role", ["user"]),
        lambda o: o.__setitem__("timestamp", 12),
        lambda o: o["payload"]["content"][0].__setitem__("text", {"t": 1}),
        lambda o: o["payload"].__setitem__("type", None),
    ],
    "gemini": [
        lambda o: o.__setitem__("content", 5),
        lambda o: o.__setitem__("id", 12),
        lambda o: o.__setitem__("type", ["user"]),
        lambda o: o.__setitem__("timestamp", {"t": 1}),
        lambda o: o.__setitem__("content", [{"text": 5}]),
        lambda o: o.__setitem__("toolCalls", "x"),
    ],
}
_WRONG["codex-zst"] = _WRONG["codex"]


def mutate_lines(fmt: str, session: Session, kind: str, rnd: random.Random) -> Damaged:
    """``session`` with one mutation ``kind`` (a JSON lines mutation)."""
    lines, markers = list(session.lines), list(session.markers)
    every = set(range(len(lines)))
    data = b"\n".join(lines) + b"\n"
    if kind == "truncate":
        cut = rnd.randrange(1, len(data))
        spans = _spans(lines)
        # a line is whole when its newline is before the cut (a last line without one that is
        # a whole object is read too, but need not be)
        whole = {i for i, (_, end) in enumerate(spans) if end < cut}
        return Damaged(
            data[:cut], _marked(markers, whole), _marked(markers, whole), f"cut at {cut}"
        )
    if kind == "flip":
        buf = bytearray(data)
        spans = _spans(lines)
        touched: set[int] = set()
        flips = []
        for _ in range(rnd.randrange(1, 5)):
            while True:
                at = rnd.randrange(len(buf))
                i = next(k for k, (s, e) in enumerate(spans) if at <= e)
                line = data[spans[i][0] : spans[i][1]]
                inside = any(
                    m.start() <= at - spans[i][0] < m.end() for m in _MARKER.finditer(line)
                )
                if not inside:
                    break
            new = rnd.choice([b"\n"[0], b'"'[0], b"{"[0], 0xFF, rnd.randrange(256)])
            if new == buf[at]:
                new ^= 0x01
            flips.append(f"byte {at} {buf[at]:#04x}->{new:#04x}")
            buf[at] = new
            touched |= {i - 1, i, i + 1} if b"\n"[0] in (new, data[at]) else {i}
        intact = every - touched
        return Damaged(
            bytes(buf), _marked(markers, intact), _marked(markers, every), ", ".join(flips)
        )
    at = 0 if kind == "deep-first" else rnd.randrange(1, len(lines) + 1)
    if kind in ("deep", "deep-first"):
        deep = b'{"x":' + b"[" * _DEEP + b"]" * _DEEP + b"}"
        lines.insert(at, deep)
        markers.insert(at, None)
        out = b"\n".join(lines) + b"\n"
        return Damaged(out, _marked(markers, range(len(lines))), set(), f"deep line at {at + 1}")
    if kind == "huge":
        n = 900_000 + at
        lines.insert(at, huge_line(fmt, n, rnd))
        markers.insert(at, _marker(n))
        out = b"\n".join(lines) + b"\n"
        every = set(range(len(lines)))
        return Damaged(out, _marked(markers, every), _marked(markers, every), f"huge at {at + 1}")
    i = rnd.choice([k for k, m in enumerate(markers) if m is not None])
    raw = lines[i]
    if kind == "utf8":
        m = _MARKER.search(raw)
        assert m is not None
        lines[i] = raw[: m.end()] + b" \xff\xfe\xc3 bad" + raw[m.end() :]
        out = b"\n".join(lines) + b"\n"
        return Damaged(out, _marked(markers, every), _marked(markers, every), f"utf8 in {i + 1}")
    if kind == "surrogate":
        m = _MARKER.search(raw)
        assert m is not None
        lines[i] = raw[: m.end()] + b" \\ud83d cut" + raw[m.end() :]
        out = b"\n".join(lines) + b"\n"
        return Damaged(out, _marked(markers, every), _marked(markers, every), f"lone in {i + 1}")
    if kind == "types":
        obj = json.loads(raw)
        change = rnd.randrange(len(_WRONG[fmt]))
        _WRONG[fmt][change](obj)
        lines[i] = json.dumps(obj).encode()
        out = b"\n".join(lines) + b"\n"
        if _marker_of(lines[i]) is None:  # the change took the marker's text with it
            every = every - {i}
        # the changed line may be archived (a value that can be done without) or named
        return Damaged(
            out,
            _marked(markers, every - {i}),
            _marked(markers, every),
            f"types #{change} in {i + 1}",
        )
    raise ValueError(kind)


def mutate_zst(session: Session, kind: str, rnd: random.Random) -> Damaged:
    """A ``.jsonl.zst`` rollout damaged: its compressed bytes cut or flipped, or compressed after
    a JSON lines mutation. What must be kept is what the damaged file still decompresses to
    (an independent reading: the zstd library's streaming decoder, up to its first error)."""
    import zstandard

    if not kind.startswith("zst-"):
        inner = mutate_lines("codex-zst", session, kind, rnd)
        return Damaged(_compress(inner.data, rnd), inner.required, inner.complete, inner.what)
    plain = b"\n".join(session.lines) + b"\n"
    packed = bytearray(_compress(plain, rnd))
    if kind == "zst-truncate":
        cut = rnd.randrange(1, len(packed))
        damaged = bytes(packed[:cut])
        what = f"cut at {cut} of {len(packed)}"
    else:
        at = rnd.randrange(len(packed))
        packed[at] ^= 1 << rnd.randrange(8)
        damaged = bytes(packed)
        what = f"flip at {at} of {len(packed)}"
    out = bytearray()
    dobj = zstandard.ZstdDecompressor().decompressobj()
    with contextlib.suppress(zstandard.ZstdError):
        out += dobj.decompress(damaged)
    same = 0
    while same < min(len(out), len(plain)) and out[same] == plain[same]:
        same += 1
    spans = _spans(session.lines)
    whole = {i for i, (_, end) in enumerate(spans) if end < same}
    # A cut file must say it was cut: every line past the cut is lost (no writer is still
    # at work on a compressed rollout). A flip that still decompresses (no checksum) changes a
    # line's bytes, perhaps its marker: that line's loss is not judged.
    complete = _marked(session.markers, range(len(session.lines))) if "truncate" in kind else set()
    return Damaged(damaged, _marked(session.markers, whole), complete, what)


def _compress(data: bytes, rnd: random.Random) -> bytes:
    """Compressed as a streaming writer does (Codex writes as it goes): several blocks, each
    flushed, and, by chance, with or without a checksum."""
    import zstandard

    cctx = zstandard.ZstdCompressor(level=3, write_checksum=rnd.random() < 0.5)
    obj = cctx.compressobj()
    out = bytearray()
    step = max(4096, len(data) // 8)
    for i in range(0, len(data), step):
        out += obj.compress(data[i : i + step])
        out += obj.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
    out += obj.flush()
    return bytes(out)


# --- the opencode database ------------------------------------------------------------------


_SCHEMA: Final = (
    "CREATE TABLE session (id text PRIMARY KEY, project_id text NOT NULL, parent_id text, "
    "slug text NOT NULL, directory text NOT NULL, title text NOT NULL, version text NOT NULL, "
    "time_created integer NOT NULL, time_updated integer NOT NULL)",
    "CREATE TABLE message (id text PRIMARY KEY, session_id text NOT NULL, "
    "time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL)",
    "CREATE TABLE part (id text PRIMARY KEY, message_id text NOT NULL, session_id text NOT NULL, "
    "time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL)",
    "CREATE INDEX message_session_time_created_id_idx ON message (session_id, time_created, id)",
    "CREATE INDEX part_message_id_id_idx ON part (message_id, id)",
    "CREATE INDEX part_session_idx ON part (session_id)",
)
"""opencode 1.18's tables, the columns the adapter reads (a real database:
``tests/data/opencode``)."""


def _oc_ids(s: int, m: int, tag: str = "") -> tuple[str, str, str]:
    if tag:
        return f"ses_{tag}{s:04d}", f"msg_{tag}{s:04d}{m:04d}", f"prt_{tag}{s:04d}{m:04d}"
    return (
        f"ses_{s:04d}fuzzsessionaaaaaa",
        f"msg_{s:04d}{m:04d}fuzzmessagebb",
        f"prt_{s:04d}{m:04d}p",
    )


def make_db(
    path: Path, sessions: int, per: int, rnd: random.Random, tag: str = ""
) -> dict[str, tuple[str, str]]:
    """An opencode database of ``sessions`` × ``per`` messages, each with one text part holding
    its marker; returns marker -> (message id, part id)."""
    con = sqlite3.connect(path)
    for sql in _SCHEMA:
        con.execute(sql)
    where: dict[str, tuple[str, str]] = {}
    for s in range(sessions):
        sid = _oc_ids(s, 0, tag)[0]
        con.execute(
            "INSERT INTO session VALUES (?,?,?,?,?,?,?,?,?)",
            (sid, "global", None, "s", "/work/proj", f"title {s}", "1.18.33", 1000 + s, 1000 + s),
        )
        for m in range(per):
            _, mid, pid = _oc_ids(s, m, tag)
            role = "user" if m % 2 == 0 else "assistant"
            info = {"role": role, "time": {"created": 1000 + m}}
            marker = _marker(s * per + m)
            text = f"{marker} {_words(rnd, rnd.randrange(3, 60))}"
            con.execute(
                "INSERT INTO message VALUES (?,?,?,?,?)",
                (mid, sid, 1000 + m, 1000 + m, json.dumps(info)),
            )
            con.execute(
                "INSERT INTO part VALUES (?,?,?,?,?,?)",
                (pid, mid, sid, 1000 + m, 1000 + m, json.dumps({"type": "text", "text": text})),
            )
            where[marker] = (mid, pid)
    con.commit()
    con.close()
    return where


def _pages(path: Path) -> tuple[int, dict[int, tuple[str, str]]]:
    """The page size, and each page's table (or index) and type (``leaf``, ``internal``…)."""
    con = sqlite3.connect(path)
    try:
        size = con.execute("PRAGMA page_size").fetchone()[0]
        rows = con.execute("SELECT pageno, name, pagetype FROM dbstat").fetchall()
    finally:
        con.close()
    return size, {int(p): (str(n), str(t)) for p, n, t in rows}


def _rows_on(
    data: bytes, size: int, pages: dict[int, tuple[str, str]], table: str, key: bytes
) -> set[int]:
    """The pages of ``table`` whose bytes hold ``key`` (where a row lives)."""
    found = set()
    for m in re.finditer(re.escape(key), data):
        page = m.start() // size + 1
        if pages.get(page, ("", ""))[0] == table:
            found.add(page)
    return found


def mutate_db(
    path: Path, where: dict[str, tuple[str, str]], kind: str, rnd: random.Random
) -> Damaged:
    """The database at ``path`` damaged in place; what must be kept: the messages none of whose
    rows (its session's, its own, its part's) is on a changed page."""
    data = path.read_bytes()
    size, pages = _pages(path)
    every = set(where)
    if kind in ("page-flip", "page-zero", "truncate"):
        buf = bytearray(data)
        if kind == "truncate":
            keep = rnd.randrange(2, len(data) // size)
            changed = set(range(keep + 1, len(data) // size + 1))
            buf = buf[: keep * size]
            what = f"cut to {keep} pages of {len(data) // size}"
        else:
            leaves = [
                p
                for p, (n, t) in pages.items()
                if t == "leaf" and n in ("session", "message", "part")
            ]
            page = rnd.choice(leaves)
            lo = (page - 1) * size
            if kind == "page-zero":
                buf[lo : lo + size] = bytes(size)
            else:
                for _ in range(rnd.randrange(1, 8)):
                    at = lo + rnd.randrange(size)
                    buf[at] ^= 1 << rnd.randrange(8)
            changed = {page}
            what = f"{kind} of page {page} ({pages[page][0]})"
        if bytes(buf) == data:
            changed = set()
        path.write_bytes(bytes(buf))
        required = set()
        for marker, (mid, pid) in where.items():
            sid = "ses_" + mid[4:8] + "fuzzsessionaaaaaa"
            homes = (
                _rows_on(data, size, pages, "session", sid.encode())
                | _rows_on(data, size, pages, "message", mid.encode())
                | _rows_on(data, size, pages, "part", pid.encode())
            )
            if not homes & changed and all(p <= len(buf) // size for p in homes):
                required.add(marker)
        return Damaged(bytes(buf), required, set(), what)
    marker = rnd.choice(sorted(where))
    mid, pid = where[marker]
    con = sqlite3.connect(path)
    try:
        if kind == "utf8":
            row = con.execute("SELECT data FROM part WHERE id = ?", (pid,)).fetchone()
            bad = row[0].encode().replace(marker.encode(), marker.encode() + b" \xff\xfe bad", 1)
            con.execute("UPDATE part SET data = CAST(? AS TEXT) WHERE id = ?", (bad, pid))
            required, what = every, f"utf8 in part {pid}"
        elif kind == "deep":
            deep = '{"role":"user","x":' + "[" * _DEEP + "]" * _DEEP + "}"
            con.execute("UPDATE message SET data = ? WHERE id = ?", (deep, mid))
            required, what = every - {marker}, f"deep data in message {mid}"
        elif kind == "types":
            change = rnd.choice(
                (
                    '{"role": 5}',
                    '{"type":"text","text":5}',
                    "[1,2]",
                    '"x"',
                    '{"time": "x", "role": "user"}',
                )
            )
            table, key = (
                ("message", mid)
                if "role" in change or change in ("[1,2]", '"x"')
                else ("part", pid)
            )
            con.execute(f"UPDATE {table} SET data = ? WHERE id = ?", (change, key))
            required, what = every - {marker}, f"types: {table} {key} = {change}"
        elif kind == "huge":
            text = f"{marker} " + "y" * rnd.choice((70_000, 1_100_000))
            con.execute(
                "UPDATE part SET data = ? WHERE id = ?",
                (json.dumps({"type": "text", "text": text}), pid),
            )
            required, what = every, f"huge part {pid}"
        else:
            raise ValueError(kind)
        con.commit()
    finally:
        con.close()
    return Damaged(path.read_bytes(), set(required), set(), what)


# --- one trial ------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What one ingest of a damaged input did."""

    exit_code: int
    stderr: str
    traceback: str = ""
    archived: set[str] = field(default_factory=set)


def _archived_markers(store_path: Path) -> set[str]:
    """Every marker the store holds: in its frames and in the artifacts they name."""
    import msgspec

    from continuity.store.locate import open_store

    found: set[str] = set()
    store = open_store(store_path)
    try:
        for tid in store.threads():
            for frame in store.thread(tid).read():
                raw = msgspec.json.encode(frame).decode("utf-8", "replace")
                found.update(m.decode() for m in _MARKER.findall(raw.encode()))
                for aid in _ARTIFACT.findall(raw):
                    blob = store.artifacts.get(aid)
                    found.update(m.decode() for m in _MARKER.findall(blob))
    finally:
        store.close()
    return found


def ingest(agent: str, store: Path, path: Path) -> Outcome:
    """``continuity ingest --agent AGENT PATH`` in this process (its CLI, through typer's runner:
    an exception that escapes it is a traceback)."""
    from typer.testing import CliRunner

    from continuity.cli.app import app

    result = CliRunner().invoke(app, ["--store", str(store), "ingest", "--agent", agent, str(path)])
    tb = ""
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        tb = f"{type(result.exception).__name__}: {result.exception}"
    if "Traceback (most recent call last)" in result.output:
        tb = tb or "a traceback on the output"
    archived = _archived_markers(store) if (store / "store.json").exists() else set()
    return Outcome(result.exit_code, result.stderr, tb, archived)


@dataclass
class Trial:
    fmt: str
    mutation: str
    seed: int
    what: str
    lost: list[str]
    traceback: str
    silent_empty: bool
    silent_loss: list[str]
    exit_code: int
    stderr: str


def one_trial(fmt: str, mutation: str, seed: int, folder: Path, size: int) -> Trial:
    """Generate, damage, ingest and judge one input of ``fmt`` (``size`` lines or messages)."""
    rnd = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    if fmt == "opencode-db":
        path = folder / "opencode.db"
        per = 10
        where = make_db(path, max(1, size // per), per, rnd)
        damaged = mutate_db(path, where, mutation, rnd)
        holds = True
    else:
        session = make_session(fmt, size, rnd)
        if fmt == "codex-zst":
            damaged = mutate_zst(session, mutation, rnd)
            path = folder / (session.name + ".zst")
        else:
            damaged = mutate_lines(fmt, session, mutation, rnd)
            path = folder / session.name
        path.write_bytes(damaged.data)
        holds = bool(damaged.required or damaged.complete)
    out = ingest(_AGENT[fmt], folder / "store", path)
    lost = sorted(damaged.required - out.archived)
    quiet = out.exit_code == 0 and not out.stderr.strip()
    silent_empty = quiet and holds and not out.archived
    silent_loss = sorted(damaged.complete - out.archived) if quiet else []
    return Trial(
        fmt,
        mutation,
        seed,
        damaged.what,
        lost,
        out.traceback,
        silent_empty,
        silent_loss,
        out.exit_code,
        out.stderr.strip()[:300],
    )


@dataclass
class Totals:
    """The figures of many trials, by format and mutation."""

    trials: list[Trial] = field(default_factory=list)

    def lost(self) -> int:
        return sum(len(t.lost) for t in self.trials)

    def tracebacks(self) -> int:
        return sum(1 for t in self.trials if t.traceback)

    def silent_empty(self) -> int:
        return sum(1 for t in self.trials if t.silent_empty)

    def silent_losses(self) -> int:
        return sum(1 for t in self.trials if t.silent_loss)

    def bad(self) -> list[Trial]:
        return [t for t in self.trials if t.lost or t.traceback or t.silent_empty or t.silent_loss]


def run_format(
    fmt: str,
    *,
    trials: int,
    size: int,
    seed: int,
    folder: Path,
    mutations: tuple[str, ...] | None = None,
) -> Totals:
    """``trials`` trials of each mutation of ``fmt``; trial seeds follow from ``seed``."""
    import shutil

    totals = Totals()
    for mutation in mutations or MUTATIONS[fmt]:
        for n in range(trials):
            trial_seed = random.Random(f"{seed}/{fmt}/{mutation}/{n}").randrange(2**32)
            where = folder / f"{fmt}-{mutation}-{n}"
            totals.trials.append(one_trial(fmt, mutation, trial_seed, where, size))
            shutil.rmtree(where, ignore_errors=True)
    return totals


def run(
    *, trials: int = 60, size: int = 200, seed: int | None = None, keep: bool = False
) -> FamilyResult:
    """The family: every format and mutation; a :class:`~tools.faults._common.FamilyResult`."""
    from tools.faults._common import Examples, FamilyResult, Table, scratch, start

    seed, _ = start("ingest", seed)
    began = time.perf_counter()
    result = FamilyResult("ingest", {"trials": trials, "lines": size, "seed": seed})
    table = Table(
        "per format and mutation",
        ["format", "mutation", "trials", "lost good", "tracebacks", "silent empty", "silent loss"],
    )
    everything = Totals()
    examples = Examples()
    with scratch("faults-ingest", keep) as folder:
        for fmt in FORMATS:
            for mutation in MUTATIONS[fmt]:
                t = run_format(
                    fmt, trials=trials, size=size, seed=seed, folder=folder, mutations=(mutation,)
                )
                everything.trials += t.trials
                table.rows.append(
                    [
                        fmt,
                        mutation,
                        len(t.trials),
                        t.lost(),
                        t.tracebacks(),
                        t.silent_empty(),
                        t.silent_losses(),
                    ]
                )
                for bad in t.bad():
                    examples.add(f"{fmt} {mutation}", describe(bad))
    result.tables.append(table)
    result.check("0 lost good lines", everything.lost() == 0, f"{everything.lost()} lost")
    result.check("0 tracebacks", everything.tracebacks() == 0, f"{everything.tracebacks()}")
    result.check(
        "0 silent empty results", everything.silent_empty() == 0, f"{everything.silent_empty()}"
    )
    result.check(
        "0 silent losses", everything.silent_losses() == 0, f"{everything.silent_losses()}"
    )
    result.examples = examples.lines()
    result.seconds = time.perf_counter() - began
    return result


def describe(t: Trial) -> str:
    """One failing trial, with what it takes to repeat it."""
    said = []
    if t.lost:
        said.append(f"lost {len(t.lost)} good ({', '.join(t.lost[:3])})")
    if t.traceback:
        said.append(f"traceback {t.traceback}")
    if t.silent_empty:
        said.append("archived nothing, said nothing")
    if t.silent_loss:
        said.append(f"exit 0, quiet, but {len(t.silent_loss)} complete lines not archived")
    return (
        f"[{t.fmt} {t.mutation} seed {t.seed}] {t.what}: {'; '.join(said)} "
        f"(exit {t.exit_code}; stderr {t.stderr[:160]!r})"
    )


def main(argv: list[str] | None = None) -> int:
    from tools.faults._common import family_parser, finish, scaled

    parser = family_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=200, help="lines (messages) per session")
    args = parser.parse_args(argv)
    result = run(trials=scaled(60, args.scale), size=args.lines, seed=args.seed, keep=args.keep)
    return finish([result], args.json)


if __name__ == "__main__":
    os.environ.setdefault("CONTINUITY_LOG", "")
    sys.exit(main())
