"""The line reader keeps where the first unreadable lines are (their byte offsets, a few), so
that what reports them can say which; the count of every one stays in ``skipped``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from continuity.agents.base.lines import UNREADABLE_KEPT, line_numbers, read_json_lines


def _keep(obj: dict[str, Any], offset: int) -> int:
    return offset


def test_the_offsets_of_the_first_unreadable_lines_are_kept(tmp_path: Path) -> None:
    lines = [b'{"a":1}', b"garbage", b"[1,2]", b'{"a":2}', b'{"cut', *[b"x"] * UNREADABLE_KEPT]
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    offsets = [sum(len(line) + 1 for line in lines[:i]) for i in range(len(lines))]
    read = read_json_lines(path, 0, _keep)
    assert read.records == [offsets[0], offsets[3]]
    assert read.skipped["<not json>"] + read.skipped["<not object>"] == len(lines) - 2
    bad = [o for i, o in enumerate(offsets) if i not in (0, 3)]
    assert read.unreadable == bad[:UNREADABLE_KEPT]
    # from an offset on: the offsets are the file's, not the read's
    again = read_json_lines(path, offsets[3], _keep)
    assert again.unreadable == bad[2 : 2 + UNREADABLE_KEPT]


def test_line_numbers_count_the_newlines_before_each_offset(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"a\n\nbb\n" + b"c" * 70_000 + b"\nd\n")
    assert line_numbers(path, [0, 2, 3, 6, 70_007, 3]) == [1, 2, 3, 4, 5, 3]
