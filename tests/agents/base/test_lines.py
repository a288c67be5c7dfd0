"""The line reader every adapter shares (``continuity.agents.base.lines``) on long lines:
linear time, bounded memory, a cap (ADR 0016). It is driven through Claude Code's transcript
reader, on the fixtures and on synthetic lines (the helpers of its tests)."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from continuity.agents.base import lines
from continuity.agents.base.lines import MAX_LINE_BYTES, SKIPPED_OVERSIZE
from continuity.agents.claude_code.transcript import (
    AssistantPart,
    CompactBoundary,
    CompactSummary,
    UserLine,
    read_records,
)
from tests.agents.claude_code.test_transcript import fixture, raw_lines, user_line


def _offset_where(r: object) -> Any:
    assert isinstance(r, UserLine | AssistantPart | CompactBoundary | CompactSummary)
    return r.where


@pytest.mark.parametrize("chunk", [7, 64, 1000, 4096])
@pytest.mark.parametrize("rel", ["spotter/short.jsonl", "claude-code-log/edge_cases.jsonl"])
def test_lines_across_chunk_boundaries_read_as_in_one_piece(
    rel: str, chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Small chunks put line ends everywhere (inside lines, at a chunk's first or last byte).
    path = fixture(rel)
    whole = read_records(path)
    monkeypatch.setattr(lines, "_CHUNK", chunk)
    pieces = read_records(path)
    assert (pieces.records, pieces.skipped, pieces.end) == (whole.records, whole.skipped, whole.end)
    mid = sum(len(line) + 1 for line in raw_lines(path)[:3])  # a line start, as a cursor
    tail = read_records(path, mid)
    monkeypatch.setattr(lines, "_CHUNK", 1 << 20)
    assert tail == read_records(path, mid)


def _long_user_line(uuid: str, n: int) -> bytes:
    return json.dumps(user_line(uuid, "x" * n)).encode() + b"\n"


def test_a_line_over_the_cap_is_skipped_and_counted_and_the_read_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lines, "_CHUNK", 256)
    path = tmp_path / "s.jsonl"
    before, after = _long_user_line("u1", 10), _long_user_line("u3", 10)
    path.write_bytes(before + _long_user_line("u2", 5000) + after + _long_user_line("u4", 900))
    result = read_records(path, max_line=2000)
    # The long line spans many chunks and is never loaded; the one under the cap spans some.
    assert [r.where.uuid for r in result.records if isinstance(r, UserLine)] == ["u1", "u3", "u4"]
    assert result.skipped == Counter({SKIPPED_OVERSIZE: 1})
    assert result.end == path.stat().st_size and result.pending == 0
    # With a cap just under the last line, it is skipped too (lines within one chunk included).
    smaller = read_records(path, max_line=len(_long_user_line("u4", 900)) - 2)
    assert [r.where.uuid for r in smaller.records if isinstance(r, UserLine)] == ["u1", "u3"]
    assert smaller.skipped == Counter({SKIPPED_OVERSIZE: 2})
    # The default cap is 64 MiB: the same file reads whole.
    assert len(read_records(path).records) == 4
    assert MAX_LINE_BYTES == 64 << 20


def test_an_unfinished_line_is_left_and_reported_pending_never_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lines, "_CHUNK", 4096)
    path = tmp_path / "s.jsonl"
    done = _long_user_line("u1", 10)
    cut = _long_user_line("u2", 300_000)[:-10]  # stops inside its text
    cut_brace = cut + b"}"  # a cut line can end with a brace: it still does not decode
    for unfinished in (cut, cut_brace):
        path.write_bytes(done + unfinished)
        result = read_records(path, max_line=100_000)  # over the cap: not even tried
        assert (result.end, result.pending) == (len(done), len(unfinished))
        assert len(result.records) == 1 and not result.skipped
        result = read_records(path)  # under the default cap, still not a whole object
        assert (result.end, result.pending) == (len(done), len(unfinished))
        assert len(result.records) == 1 and not result.skipped
    # Completed, it is read (from where the last read stopped).
    path.write_bytes(done + _long_user_line("u2", 300_000))
    rest = read_records(path, len(done))
    assert [r.where.uuid for r in rest.records if isinstance(r, UserLine)] == ["u2"]
    assert (rest.end, rest.pending) == (path.stat().st_size, 0)


def test_memory_stays_bounded_by_a_chunk_when_a_long_line_is_unfinished_or_over_the_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What a hook met at every prompt: the old reader glued every chunk onto the unfinished
    # line (a new buffer each time: quadratic time) and decoded it whole at the end.
    import tracemalloc

    chunk = 64 << 10
    monkeypatch.setattr(lines, "_CHUNK", chunk)
    path = tmp_path / "s.jsonl"
    long = _long_user_line("u2", 8 << 20)
    cases = {
        "unfinished": _long_user_line("u1", 10) + long[:-3],
        "over the cap": _long_user_line("u1", 10) + long + _long_user_line("u3", 10),
    }
    for name, data in cases.items():
        path.write_bytes(data)
        tracemalloc.start()
        try:
            result = read_records(path, max_line=1 << 20)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 4 * chunk, (name, peak)
        assert result.records and _offset_where(result.records[0]).uuid == "u1"


def test_a_caller_that_knows_where_the_unfinished_line_is_spares_the_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.jsonl"
    done = _long_user_line("u1", 10)
    path.write_bytes(done + _long_user_line("u2", 1 << 20)[:-3])
    first = read_records(path, max_line=1000)
    assert (first.end, first.pending) == (len(done), path.stat().st_size - len(done))
    read_bytes: list[int] = []
    real_pread = os.pread

    def counting_pread(fd: int, n: int, offset: int) -> bytes:
        data = real_pread(fd, n, offset)
        read_bytes.append(len(data))
        return data

    monkeypatch.setattr(os, "pread", counting_pread)
    with path.open("ab") as f:
        f.write(b"more of the same line")
    again = read_records(path, first.end, no_newline_before=first.end + first.pending)
    assert (again.end, again.records) == (first.end, [])
    assert again.pending == first.pending + len(b"more of the same line")
    # Only the new bytes were scanned, and the last 4 KiB read to see whether the line ended.
    assert sum(read_bytes) <= len(b"more of the same line") + 4096
    # Without the hint the whole unfinished line is scanned, once.
    read_bytes.clear()
    assert read_records(path, first.end).end == first.end
    assert again.pending <= sum(read_bytes) <= again.pending + 4096
