"""Segments: turns and topic boundaries, drawn the same on every prefix."""

from __future__ import annotations

from continuity import frames as fr
from continuity.rolling.segments import Segment, segment_turns, turns_of


def _msgs(*spec: tuple[str, str] | fr.MessageAppended) -> list[fr.MessageAppended]:
    """Messages numbered from seq 1: ("user", text), ("assistant", text), ("edit", path),
    ("fail", path) or a ready message."""
    out: list[fr.MessageAppended] = []
    for i, item in enumerate(spec, start=1):
        if isinstance(item, fr.MessageAppended):
            out.append(
                fr.MessageAppended(seq=i, role=item.role, content=item.content, meta=item.meta)
            )
            continue
        kind, text = item
        if kind in ("edit", "fail"):
            use = fr.ToolUseBlock(id=f"t{i}", name="Edit", input={"file_path": text})
            res = fr.ToolResultBlock(tool_use_id=f"t{i}", content="x", is_error=kind == "fail")
            out.append(fr.MessageAppended(seq=i, role="assistant", content=[use]))
            out.append(fr.MessageAppended(seq=i, role="user", content=[res]))
            continue
        out.append(fr.MessageAppended(seq=i, role=kind, content=[fr.TextBlock(text=text)]))  # type: ignore[arg-type]
    return [
        fr.MessageAppended(seq=n, role=m.role, content=m.content, meta=m.meta)
        for n, m in enumerate(out, start=1)
    ]


def _segments(*spec: tuple[str, str]) -> list[Segment]:
    return segment_turns(turns_of(_msgs(*spec)))


def test_a_turn_is_a_prompt_and_what_follows() -> None:
    meta = fr.MessageAppended(
        role="user", content=[fr.TextBlock(text="<command>")], meta={"is_meta": "true"}
    )
    turns = turns_of(
        _msgs(("user", "Fix the parser"), ("edit", "src/parser.py"), meta, ("assistant", "ok"))
    )
    assert len(turns) == 1
    assert turns[0].files == ["src/parser.py"] and turns[0].messages == 5
    assert "parser" in turns[0].terms


def test_a_new_topic_shares_nothing_and_a_short_reply_continues() -> None:
    segs = _segments(
        ("user", "Fix the parser crash on nested brackets"),
        ("edit", "src/parser.py"),
        ("assistant", "Fixed."),
        ("user", "yes"),
        ("assistant", "Done."),
        ("user", "Now the parser tests for brackets"),
        ("edit", "tests/test_parser.py"),
        ("assistant", "Done."),
        ("user", "Write the release announcement blog post"),
        ("edit", "blog/release.md"),
        ("assistant", "Here it is."),
    )
    assert [s.first_turn for s in segs] == [0, 3]
    assert segs[0].topic.startswith("Fix the parser crash") and "parser.py" in segs[0].topic
    assert segs[0].completed and not segs[1].completed  # the current topic is not closed


def test_a_question_or_a_failure_at_the_end_is_not_completed() -> None:
    asks = _segments(
        ("user", "Rename the config loader"),
        ("edit", "cfg/loader.py"),
        ("assistant", "Should I also rename the tests?"),
        ("user", "Draft the quarterly budget spreadsheet"),
        ("edit", "budget.xlsx"),
    )
    fails = _segments(
        ("user", "Rename the config loader"),
        ("fail", "cfg/loader.py"),
        ("user", "Draft the quarterly budget spreadsheet"),
        ("edit", "budget.xlsx"),
    )
    assert not asks[0].completed and "question" in asks[0].why
    assert not fails[0].completed and "failed" in fails[0].why


def test_a_later_mention_keeps_a_segment_warm() -> None:
    spec: list[tuple[str, str]] = [("user", "Fix the parser crash"), ("edit", "src/parser.py")]
    for i in range(25):
        spec += [("user", f"Tune the cache eviction number {i}"), ("edit", "src/cache.py")]
    quiet = _segments(*spec)
    assert quiet[0].turns_since_mentioned == 25
    spec += [("user", "Does parser.py still build?"), ("assistant", "Yes.")]
    assert _segments(*spec)[0].turns_since_mentioned == 0


def test_boundaries_never_move_as_the_thread_grows() -> None:
    spec: list[tuple[str, str]] = []
    for i in range(60):
        topic = ("parser", "cache", "docs", "login")[i // 15]
        spec += [("user", f"Work on the {topic} module step {i}"), ("edit", f"src/{topic}.py")]
        spec += [("assistant", "Done.")]
    messages = _msgs(*spec)
    whole = [(s.from_seq, s.segment_id) for s in segment_turns(turns_of(messages))]
    assert len(whole) == 4
    for cut in range(1, len(messages)):
        prefix = [(s.from_seq, s.segment_id) for s in segment_turns(turns_of(messages[:cut]))]
        assert prefix == whole[: len(prefix)]
