"""Reading JSON-lines session files from an offset, tolerating everything: the reader every
adapter uses (Claude Code's transcripts, Codex rollouts, Gemini CLI's ``.jsonl`` sessions).

It turns the complete lines of a byte range into records through the adapter's own parse
function and counts what it skipped; it never raises on content. It imports nothing heavy: it
runs on the hook path.

Reads cost time linear in the bytes read and memory bounded by one line (ADR 0016): the
last newline is found by scanning back from the end, nothing past it is parsed, and a line
is loaded whole only once its end is known and only if it is at most :data:`MAX_LINE_BYTES`
long; a longer one is skipped and counted (:data:`SKIPPED_OVERSIZE`), never held in memory.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Callable
from typing import Any, Final, Generic, TypeAlias, TypeVar

import msgspec

__all__ = [
    "MAX_DEPTH",
    "MAX_LINE_BYTES",
    "SKIPPED_OVERSIZE",
    "UNREADABLE",
    "UNREADABLE_KEPT",
    "Parse",
    "ReadResult",
    "decode_json",
    "is_text",
    "line_numbers",
    "read_json_lines",
]

MAX_LINE_BYTES: Final = 64 << 20
"""The longest transcript line a read loads (64 MiB). A complete line that is longer is skipped
and counted under :data:`SKIPPED_OVERSIZE`; an unfinished last line that is longer is left for a
later read, like any unfinished line, without being loaded."""
SKIPPED_OVERSIZE: Final = "<line too long>"
MAX_DEPTH: Final = 256
"""The deepest nesting of arrays and objects a line may have. No agent writes lines anywhere
near it; a deeper one is damage or an attack, and everything that walks a value recursively
(the decoder, redaction, the encoder of frames) would stop with a ``RecursionError`` at about
1,000 levels: such a line is counted under ``<nested too deeply>``, never loaded further."""
UNREADABLE: Final = {
    "<not json>": "not JSON",
    "<not object>": "not a JSON object",
    "<nested too deeply>": f"nested deeper than {MAX_DEPTH} levels",
    "<not a record>": "not a record of this format",
}
"""The kinds of line that hold something the reader could not read, each with what a report
says of it: counted in ``skipped`` and named in :attr:`ReadResult.unreadable`."""
UNREADABLE_KEPT: Final = 5
"""How many unreadable lines' offsets a read keeps (:attr:`ReadResult.unreadable`): enough to
say where to look; the count of all of them is in ``skipped``."""


R = TypeVar("R")


class ReadResult(msgspec.Struct, Generic[R]):
    records: list[R] = msgspec.field(default_factory=list)
    end: int = 0
    """The offset just past the last complete line read (where the next read starts)."""
    skipped: Counter[str] = msgspec.field(default_factory=Counter)
    """Lines that carry no conversation, by type; ``<not json>``/``<not object>`` for bad ones,
    :data:`SKIPPED_OVERSIZE` for lines over the size cap (never loaded, so not archived)."""
    pending: int = 0
    """The bytes after ``end`` (an unfinished last line): they hold no newline, so a caller that
    passes ``end + pending`` as the next read's ``no_newline_before`` spares it that scan."""
    unreadable: list[int] = msgspec.field(default_factory=list)
    """Where the first unreadable lines start (a kind of :data:`UNREADABLE`; byte offsets in
    the file, at most :data:`UNREADABLE_KEPT`), so a report can say which they are."""
    reasons: list[str] = msgspec.field(default_factory=list)
    """Why each of :attr:`unreadable` was not read (a key of :data:`UNREADABLE`)."""
    oversize: list[int] = msgspec.field(default_factory=list)
    """Where the first lines over the size cap start (at most :data:`UNREADABLE_KEPT`)."""

    def lost(self) -> int:
        """How many complete lines this read could not keep: unreadable or over the size cap."""
        return sum(self.skipped.get(k, 0) for k in (*UNREADABLE, SKIPPED_OVERSIZE))


_decoder: Final = msgspec.json.Decoder()
_CHUNK: Final = 1 << 20
_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _scrub(value: Any) -> Any:
    """``value`` with lone UTF-16 surrogates replaced by U+FFFD (they cannot be encoded)."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    if isinstance(value, dict):
        return {_scrub(k): _scrub(v) for k, v in value.items()}
    return value


class _TooDeep(ValueError):
    """A line nested deeper than :data:`MAX_DEPTH`."""


def _depth_over(value: Any, limit: int) -> bool:
    """Whether ``value`` nests arrays and objects more than ``limit`` deep (walked without
    recursion: the point is to refuse what recursion cannot take)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(v, dict):
            stack.extend((x, depth + 1) for x in v.values() if isinstance(x, dict | list))
        elif isinstance(v, list):
            stack.extend((x, depth + 1) for x in v if isinstance(x, dict | list))
    return False


def _bounded(raw: bytes, value: Any) -> Any:
    """``value``, unless it nests deeper than :data:`MAX_DEPTH` (checked only when the line
    holds that many brackets at all: a count in C, so ordinary lines pay nothing more)."""
    if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH and _depth_over(value, MAX_DEPTH):
        raise _TooDeep("nested too deeply")
    return value


def _decode(raw: bytes) -> Any:
    """The JSON value of one line; raises ``ValueError`` when it is not JSON (:class:`_TooDeep`
    when it nests deeper than :data:`MAX_DEPTH`).

    Claude Code before 2.1.132 could cut an emoji in half when truncating a tool output and write
    the lone UTF-16 surrogate as a JSON escape, which strict decoders refuse; a damaged file can
    hold bytes that are not UTF-8. Such a line costs its broken characters, not the whole line
    (a lost tool result or reply), and never the read.
    """
    try:
        return _bounded(raw, _decoder.decode(raw))
    except (msgspec.DecodeError, UnicodeDecodeError):
        pass
    except RecursionError:  # msgspec's own limit, far past MAX_DEPTH
        raise _TooDeep("nested too deeply") from None
    import json  # the rare path only

    try:
        return _bounded(raw, _scrub(json.loads(raw.decode("utf-8", "replace"))))
    except RecursionError:
        raise _TooDeep("nested too deeply") from None


def decode_json(raw: bytes) -> Any:
    """The JSON value of ``raw`` as the reader takes a line (lone surrogates and bytes that are
    not UTF-8 replaced), for a format that is one JSON document; raises ``ValueError`` saying
    why when it is not JSON or nests deeper than :data:`MAX_DEPTH` (never ``RecursionError``)."""
    return _decode(raw)


Parse: TypeAlias = Callable[[dict[str, Any], int], R | str]
"""What turns one parsed line (a JSON object) at an offset into a record, or into the name of
the kind of line it is when it carries nothing to keep (counted in ``skipped``)."""


def _unreadable(result: ReadResult[R], kind: str, offset: int) -> None:
    result.skipped[kind] += 1
    if len(result.unreadable) < UNREADABLE_KEPT:
        result.unreadable.append(offset)
        result.reasons.append(kind)


def _too_long(result: ReadResult[R], offset: int) -> None:
    result.skipped[SKIPPED_OVERSIZE] += 1
    if len(result.oversize) < UNREADABLE_KEPT:
        result.oversize.append(offset)


def _take(raw: bytes, offset: int, result: ReadResult[R], parse: Parse[R]) -> None:
    """Add the record of one complete line to ``result`` (or count why it has none)."""
    if not raw.strip():
        return
    try:
        obj = _decode(raw)
    except _TooDeep:
        _unreadable(result, "<nested too deeply>", offset)
        return
    except ValueError:
        _unreadable(result, "<not json>", offset)
        return
    if not isinstance(obj, dict):
        _unreadable(result, "<not object>", offset)
        return
    try:
        rec = parse(obj, offset)
    except (TypeError, ValueError, AttributeError, KeyError, IndexError, RecursionError):
        # a JSON object of another shape than the format's (a field of the wrong type): the
        # parsers expect their format; one line of another never costs the rest of the file
        _unreadable(result, "<not a record>", offset)
        return
    if isinstance(rec, str):
        result.skipped[rec] += 1
    else:
        result.records.append(rec)


def _complete_object(raw: bytes) -> bool:
    """Whether an unterminated last line is already a whole JSON object: a cut object never
    decodes, so this is a file that ends without a newline, not a line still being written."""
    if not raw.strip():
        return False
    try:
        return isinstance(_decode(raw), dict)
    except ValueError:
        return False


def _ends_with_brace(fd: int, lo: int, hi: int) -> bool:
    """Whether bytes ``[lo, hi)`` may be a whole JSON object, judged by their last bytes alone
    (a whole object ends with ``}``), so a line still being written is not read to learn that."""
    n = min(hi - lo, 4096)
    last = os.pread(fd, n, hi - n).rstrip()
    return last.endswith(b"}") if last else hi - lo > n


def _last_newline(fd: int, lo: int, hi: int) -> int | None:
    """The offset of the last newline in bytes ``[lo, hi)`` of ``fd`` (None when there is none).

    Reads backwards from ``hi`` one chunk at a time: a long unfinished last line costs one pass
    over its bytes and one chunk of memory, and nothing before its start is read."""
    while hi > lo:
        start = max(lo, hi - _CHUNK)
        block = os.pread(fd, hi - start, start)
        found = block.rfind(b"\n")
        if found >= 0:
            return start + found
        if len(block) < hi - start:  # the file shrank under us: read only what is certain
            return None
        hi = start
    return None


def _read_lines(
    fd: int, start: int, stop: int, max_line: int, result: ReadResult[R], parse: Parse[R]
) -> None:
    """Add the records of the lines in bytes ``[start, stop)`` (``stop`` just past a newline).

    Chunks are read forwards and split where they hold whole lines. A line that runs past its
    chunk is not accumulated: once its end is found it is read again in one piece, if it is at
    most ``max_line`` bytes long, and skipped otherwise."""
    pos = start  # where the current line starts
    at = start  # where the next chunk starts
    while at < stop:
        chunk = os.pread(fd, min(_CHUNK, stop - at), at)
        if not chunk:
            break  # the file shrank under us
        base, at = at, at + len(chunk)
        last = chunk.rfind(b"\n")
        if last < 0:
            continue  # the current line goes on past this chunk
        i = pos - base
        if i < 0:  # the line began in an earlier chunk: it ends at this chunk's first newline
            first = chunk.find(b"\n")
            _take_span(fd, pos, base + first - pos, max_line, result, parse)
            pos = base + first + 1
            i = first + 1
        if i <= last:
            for raw in chunk[i:last].split(b"\n"):
                if len(raw) > max_line:
                    _too_long(result, pos)
                else:
                    _take(raw, pos, result, parse)
                pos += len(raw) + 1
        result.end = pos


def _take_span(
    fd: int, offset: int, length: int, max_line: int, result: ReadResult[R], parse: Parse[R]
) -> None:
    """Take the line of ``length`` bytes at ``offset``, read in one piece, unless it is over
    ``max_line`` bytes (then it is only counted: it is never loaded)."""
    if length > max_line:
        _too_long(result, offset)
    else:
        _take(os.pread(fd, length, offset), offset, result, parse)


def read_json_lines(
    path: str | os.PathLike[str],
    start: int,
    parse: Parse[R],
    *,
    no_newline_before: int = 0,
    max_line: int | None = None,
) -> ReadResult[R]:
    """Parse the complete JSON lines of ``path`` from byte ``start`` on, each object through
    ``parse`` (any JSONL format: other agents' adapters read their session files with it).

    A partial last line is left for the next read (its length reported as ``pending``); a last
    line without a newline that is a whole JSON object is read. A line over ``max_line`` bytes
    (default :data:`MAX_LINE_BYTES`) is skipped, never loaded. ``no_newline_before`` is an
    offset up to which the caller knows (from an earlier read's ``end + pending``) that the
    bytes from ``start`` hold no newline: the search for the last newline stops there.
    """
    if max_line is None:
        max_line = MAX_LINE_BYTES
    result: ReadResult[R] = ReadResult(end=start)
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        newline = _last_newline(fd, max(start, min(no_newline_before, size)), size)
        if newline is not None:
            _read_lines(fd, start, newline + 1, max_line, result, parse)
        tail = size - result.end
        if 0 < tail <= max_line and _ends_with_brace(fd, result.end, size):
            raw = os.pread(fd, tail, result.end)
            if _complete_object(raw):
                _take(raw, result.end, result, parse)
                result.end = size
        result.pending = max(0, size - result.end)
    finally:
        os.close(fd)
    return result


def line_numbers(path: str | os.PathLike[str], offsets: list[int]) -> list[int]:
    """The line number (from 1) of each line starting at one of ``offsets`` of ``path``: the
    newlines before it, counted in one pass up to the last offset (for a report that names a
    few lines; the reads themselves never count lines)."""
    wanted = sorted(set(offsets))
    found: dict[int, int] = {}
    newlines = pos = 0
    with open(path, "rb") as f:
        for offset in wanted:
            while pos < offset:
                chunk = f.read(min(_CHUNK, offset - pos))
                if not chunk:
                    break
                newlines += chunk.count(b"\n")
                pos += len(chunk)
            found[offset] = newlines + 1
    return [found[o] for o in offsets]


_SNIFF: Final = 8192


def is_text(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` starts as a text file would: no NUL byte and UTF-8 in its first 8 KiB
    (a character cut at the end of them is fine). A session file that is not is no agent's:
    what a hook tells the user when it archived nothing from one."""
    import codecs

    with open(path, "rb") as f:
        head = f.read(_SNIFF)
    if b"\0" in head:
        return False
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return False
    return True
