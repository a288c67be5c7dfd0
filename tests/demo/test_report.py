"""What ``continuity demo`` prints: the payoff in about 15 lines (what was archived, what Claude's
compaction dropped, what came back), the whole replay with ``--verbose``, and "Next" commands
typed the way the demo was run."""

from __future__ import annotations

import io

import pytest

from continuity.demo import DemoResult, brief, print_report, run_demo
from continuity.demo.report import Dropped, dropped
from continuity.store.jsonl import Store


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> DemoResult:
    work = tmp_path_factory.mktemp("demo")
    return run_demo(Store(work / "store", create=True, durable=False), work)


def test_what_the_summary_dropped_is_measured_against_it(result: DemoResult) -> None:
    gone = {d.heading: d.items for d in dropped(result.restored, result.claude_summary)}
    # the files are in Claude's summary; the exact commands, the failure, the user's own words,
    # the request in flight and the decisions' wording are not
    assert [(h, len(items)) for h, items in gone.items()] == [
        ("Commands run (×runs → last outcome)", 3),
        ("Errors and what fixed them", 1),
        ("The user's own words", 4),
        ("Open tasks", 1),
        ("Decisions", 3),
    ]
    assert "test_header_row" in gone["Errors and what fixed them"][0]
    for items in gone.values():
        for item in items:
            assert item in result.restored


def test_dropped_keeps_what_the_summary_holds_word_for_word() -> None:
    restored = (
        "# Restored\n\n## Files changed\n- a/b.py\n\n## Commands run (×runs → last outcome)\n"
        "- `make  test` ×2 → ok\n- `make lint` → ok\n\n## Open tasks\n- todo [pending] Ship it\n\n"
        "# Context of thread t at seq 9\n\n## Recent messages\n- not an item: a raw turn\n"
    )
    summary = "Changed A/B.py; ran make test. Pending: ship it."
    assert dropped(restored, summary) == [
        Dropped("Commands run (×runs → last outcome)", ("`make lint` → ok",))
    ]
    assert dropped(restored, summary)[0].kind == "command and its outcome"


def test_the_short_report_has_the_payoff_on_the_first_screen(result: DemoResult) -> None:
    text = brief(result, program=".venv/bin/continuity", width=100)
    lines = text.splitlines()
    assert len(lines) <= 18, text
    # the wrapped fields fit 100 columns (the title's store path and the commands are not cut)
    body = lines[1 : lines.index("")]
    assert all(len(line) <= 100 for line in body), text
    labelled = [line.split()[0] for line in lines if line[:1].isalpha() and line[9:11] == "  "]
    assert labelled == ["archived", "compacted", "dropped", "restored"], text
    assert "12 details that summary does not hold word for word" in text
    assert "test_header_row" in text
    assert f"{len(result.restored):,} characters given back to Claude" in text
    assert "verify: ok" in text
    # the whole replay is behind --verbose
    assert "== " not in text and "[tool_use" not in text


def test_verbose_is_the_whole_replay(result: DemoResult) -> None:
    out = io.StringIO()
    print_report(result, out, verbose=True)
    text = out.getvalue()
    assert text.startswith("== continuity demo")
    assert "== The hooks, run where Claude Code would run them" in text
    assert "== What Claude's summary does not hold word for word" in text
    assert result.restored in text


@pytest.mark.parametrize(
    ("program", "store"),
    [
        ("continuity", None),
        (".venv/bin/continuity", None),
        ("python -m continuity", "/data/my store"),
    ],
)
def test_next_commands_are_typed_as_the_demo_was_run(
    result: DemoResult, program: str, store: str | None
) -> None:
    text = brief(result, program=program, store=store)
    after = text.partition("\nNext ")[2].splitlines()[1:]
    where = program + (" --store '/data/my store'" if store else "")
    assert after[:3] == [
        f"{where} log {result.thread_id}",
        f"{where} compile {result.thread_id} --format text",
        f"{where} sessions",
    ]
    assert after[3].startswith(f"{program} install claude-code ")
