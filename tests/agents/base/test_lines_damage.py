"""One damaged line costs that line, never the read (issue 40 item 3): a line nested 100,000
deep, one nested just past the bound, a JSON object of another shape that the format's parser
cannot take (a field of the wrong type), each is counted and placed with why, and the lines
around it are read; nothing raises."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from continuity.agents.base.lines import MAX_DEPTH, UNREADABLE, decode_json, read_json_lines
from continuity.agents.base.losses import Losses, read_places


def _text(obj: dict[str, Any], offset: int) -> tuple[str]:
    text = obj["text"]  # a parser of a format: it expects its fields
    if not isinstance(text, str):
        raise TypeError("text is not a string")
    return (text.upper(),)  # a record (a string would name a kind of line to skip)


def _deep(depth: int) -> bytes:
    return b'{"text":' + b"[" * depth + b"]" * depth + b"}"


def test_deep_nesting_and_wrong_shapes_cost_their_line_only(tmp_path: Path) -> None:
    lines = [
        b'{"text": "one"}',
        _deep(100_000),
        b'{"text": "two"}',
        _deep(MAX_DEPTH + 1),
        b'{"text": 5}',
        b'{"other": "x"}',
        b'{"text": "three"}',
    ]
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    read = read_json_lines(path, 0, _text)
    assert read.records == [("ONE",), ("TWO",), ("THREE",)]
    assert read.reasons == [
        "<nested too deeply>",
        "<nested too deeply>",
        "<not a record>",
        "<not a record>",
    ]
    assert read.lost() == 4
    assert read_places(path, read, named="s") == [
        f"s line 2 ({UNREADABLE['<nested too deeply>']})",
        f"s line 4 ({UNREADABLE['<nested too deeply>']})",
        "s line 5 (not a record of this format)",
        "s line 6 (not a record of this format)",
    ]


def test_nesting_up_to_the_bound_is_read(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    inner = b"[" * (MAX_DEPTH - 1) + b"]" * (MAX_DEPTH - 1)
    path.write_bytes(b'{"text": "ok", "deep": ' + inner + b"}\n")
    assert read_json_lines(path, 0, _text).records == [("OK",)]


def test_a_whole_document_nested_too_deeply_is_a_value_error() -> None:
    for raw in (_deep(100_000), _deep(MAX_DEPTH + 1), b"\xff" + _deep(100_000)):
        try:
            decode_json(raw)
        except ValueError as exc:
            assert "nested too deeply" in str(exc) or raw.startswith(b"\xff")
        else:
            raise AssertionError("decoded")


def test_oversize_lines_are_placed_too(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"text": "a"}\n{"text": "' + b"x" * 200 + b'"}\n{"text": "b"}\n')
    read = read_json_lines(path, 0, _text, max_line=100)
    assert read.records == [("A",), ("B",)]
    assert read.oversize == [14]
    assert read_places(path, read, named="s") == ["s line 2 (longer than 64 MiB, never loaded)"]


def test_losses_say_everything_in_one_line() -> None:
    losses = Losses()
    assert not losses
    assert losses.line() == ""
    losses.add_read(7, [f"a line {n} (not JSON)" for n in range(1, 6)])
    losses.add_file("b.jsonl.zst", "not a zstandard file")
    losses.add_parts("record", 2, ["db: session s (damaged page)"])
    said = losses.line()
    assert "\n" not in said
    assert said.startswith("not archived (7 lines, 1 file, 2 records): a line 1 (not JSON); ")
    assert said.endswith(" and 5 more")
