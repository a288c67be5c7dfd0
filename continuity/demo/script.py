"""The demo's scripted session: fixing a CSV export in a small Python service.

:func:`session` writes the transcript through a :class:`TranscriptWriter` and yields a
:class:`HookCall` wherever Claude Code would run a hook, after the lines it would have written by
then. The story: a failing test, a fix that fails another test, a second fix, new regression
tests, a profile with a large output, a todo list, an auto compaction in the middle of the work,
the work carried on after it, and a commit.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from continuity.demo.transcript import TranscriptWriter

__all__ = ["CWD", "GIT_BRANCH", "HookCall", "session"]

CWD: Final = "/home/demo/projects/invoice-service"
GIT_BRANCH: Final = "fix/csv-quoting"
_HOOK: Final = "continuity hook"


@dataclass(frozen=True, slots=True)
class HookCall:
    """A hook Claude Code runs at this point: the event and its event-specific input fields."""

    event: str
    fields: dict[str, Any] = field(default_factory=dict)
    label: str = ""


# --- the project's files --------------------------------------------------------------------

_EXPORT_PY = '''"""CSV export of invoices for the accounting team's importer."""

from __future__ import annotations

from collections.abc import Iterable

from invoices.models import Invoice

EXPORT_COLUMNS = ("number", "customer", "issued", "due", "total", "currency")


def _fields(inv: Invoice) -> list[str]:
    return [
        inv.number,
        inv.customer.name,
        inv.issued.isoformat(),
        inv.due.isoformat(),
        f"{inv.total:.2f}",
        inv.currency,
    ]


def export_csv(invoices: Iterable[Invoice]) -> str:
    """All invoices as one CSV document, header first."""
    lines = [",".join(EXPORT_COLUMNS)]
    for inv in invoices:
        lines.append(",".join(_fields(inv)))
    return "\\n".join(lines) + "\\n"
'''

_OLD_EXPORT = '''def export_csv(invoices: Iterable[Invoice]) -> str:
    """All invoices as one CSV document, header first."""
    lines = [",".join(EXPORT_COLUMNS)]
    for inv in invoices:
        lines.append(",".join(_fields(inv)))
    return "\\n".join(lines) + "\\n"'''

_NEW_EXPORT = '''def export_csv(invoices: Iterable[Invoice]) -> str:
    """All invoices as one CSV document, header first (RFC 4180 quoting)."""
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(EXPORT_COLUMNS)
    writer.writerows(_fields(inv) for inv in invoices)
    return buf.getvalue()'''

_WRITE_CSV = '''

def write_csv(invoices: Iterable[Invoice], out: TextIO) -> int:
    """Stream invoices to ``out`` as CSV, header first; return the number of rows written."""
    writer = csv.writer(out, lineterminator="\\n")
    writer.writerow(EXPORT_COLUMNS)
    rows = 0
    for inv in invoices:
        writer.writerow(_fields(inv))
        rows += 1
    return rows'''

_REPOSITORY_PY = '''"""Loading invoices from the database."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date

from invoices.db import Session
from invoices.models import Invoice


def load_for_export(session: Session, *, since: date | None = None) -> Iterator[Invoice]:
    """Invoices in number order, oldest first, fetched in batches of 1,000."""
    query = session.query(Invoice).order_by(Invoice.number)
    if since is not None:
        query = query.filter(Invoice.issued >= since)
    yield from query.yield_per(1000)
'''

_PREFETCH = """    query = (
        session.query(Invoice)
        .options(joinedload(Invoice.customer))
        .order_by(Invoice.number)
    )"""

_SCRIPT_PY = '''"""Nightly export: python scripts/export_invoices.py --out FILE [--fake N]."""

import argparse
import time

from invoices.db import open_session
from invoices.export import export_csv
from invoices.fake import fake_invoices
from invoices.repository import load_for_export


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True)
    parser.add_argument("--fake", type=int, help="export N generated invoices instead")
    args = parser.parse_args()
    started = time.perf_counter()
    with open_session() as session, open(args.out, "w", newline="") as out:
        invoices = fake_invoices(args.fake) if args.fake else load_for_export(session)
        out.write(export_csv(invoices))
    print(f"exported to {args.out} in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
'''

_EXPORT_RUN = "scripts/export_invoices.py --fake 120000 --out /tmp/export.csv"

_QUOTING_TESTS = """import csv
import io

import pytest

from invoices.export import EXPORT_COLUMNS, export_csv
from tests.factories import make_invoice


@pytest.mark.parametrize(
    "name",
    ['Say "Hi" Ltd', "Line\\nBreak GmbH", 'Both, "of" them\\r\\nInc', "  padded  "],
)
def test_awkward_customer_names_survive(name):
    rows = list(csv.reader(io.StringIO(export_csv([make_invoice(customer=name)]))))
    assert rows[1][1] == name


def test_round_trip_through_csv_reader():
    invoices = [make_invoice(number=f"INV-{i:05d}", customer=f"Customer, {i}") for i in range(50)]
    rows = list(csv.DictReader(io.StringIO(export_csv(invoices))))
    assert [r["number"] for r in rows] == [inv.number for inv in invoices]
    assert list(rows[0]) == list(EXPORT_COLUMNS)
"""

_SESSION_HEAD = "platform linux -- Python 3.12.3, pytest-8.3.4, pluggy-1.5.0\n"
_PYTEST_HEAD = (
    "============================= test session starts ==============================\n"
    + _SESSION_HEAD
    + f"rootdir: {CWD}\nconfigfile: pyproject.toml\n"
)

_COMMA_ASSERT = (
    "AssertionError: assert ['Smith', ' Jones & Co'] == ['Smith, Jones & Co', '2025-03-01']"
)
_CRLF_ASSERT = (
    "AssertionError: assert 'number,custo...al,currency\\r\\n' == 'number,custo...otal,currency\\n'"
)
_FAIL_COMMA = (
    _PYTEST_HEAD
    + """collected 9 items

tests/test_export.py ........F                                           [100%]

=================================== FAILURES ===================================
___________________________ test_customer_with_comma ___________________________

    def test_customer_with_comma():
        inv = make_invoice(customer="Smith, Jones & Co")
        rows = list(csv.reader(io.StringIO(export_csv([inv]))))
>       assert rows[1][1:3] == ["Smith, Jones & Co", "2025-03-01"]
E       {assertion}
E
E         At index 0 diff: 'Smith' != 'Smith, Jones & Co'

tests/test_export.py:71: AssertionError
=========================== short test summary info ============================
FAILED tests/test_export.py::test_customer_with_comma - {assertion}
========================= 1 failed, 8 passed in 0.24s =========================="""
).replace("{assertion}", _COMMA_ASSERT)

_FAIL_CRLF = (
    _PYTEST_HEAD
    + """collected 9 items

tests/test_export.py F........                                           [100%]

=================================== FAILURES ===================================
________________________________ test_header_row _______________________________

    def test_header_row():
>       assert export_csv([]) == "number,customer,issued,due,total,currency\\n"
E       {assertion}
E
E         - number,customer,issued,due,total,currency
E         + number,customer,issued,due,total,currency\\r

tests/test_export.py:12: AssertionError
=========================== short test summary info ============================
FAILED tests/test_export.py::test_header_row - {assertion}
========================= 1 failed, 8 passed in 0.22s =========================="""
).replace("{assertion}", _CRLF_ASSERT)


def _passed(collected: int, dots: list[tuple[str, int]], seconds: float) -> str:
    lines = [_PYTEST_HEAD + f"collected {collected} items\n"]
    done = 0
    for name, n in dots:
        done += n
        lines.append(f"{name} {'.' * n}".ljust(73) + f"[{done * 100 // collected:3d}%]")
    banner = f" {collected} passed in {seconds:.2f}s "
    lines.append("\n" + banner.center(80, "="))
    return "\n".join(lines)


def _profile_output() -> str:
    """A ``python -m cProfile -s cumulative`` report of the slow export: about 20 KB, so the
    archive keeps it as an artifact with a preview."""
    rng = random.Random(7)
    head = [
        "exported to /tmp/export.csv in 38.2 s",
        "         48213377 function calls (47013311 primitive calls) in 38.214 seconds",
        "",
        "   Ordered by: cumulative time",
        "",
        "   ncalls  tottime  percall  cumtime  percall filename:lineno(function)",
    ]
    top = [
        (1, 0.000, 38.214, "{built-in method builtins.exec}"),
        (1, 0.012, 38.214, "scripts/export_invoices.py:1(<module>)"),
        (1, 0.301, 38.102, "scripts/export_invoices.py:22(main)"),
        (1, 0.944, 37.655, "invoices/export.py:25(export_csv)"),
        (120000, 0.210, 23.511, "invoices/models.py:48(customer)"),
        (120001, 0.388, 23.120, "sqlalchemy/orm/session.py:2306(execute)"),
        (120001, 1.102, 19.877, "sqlalchemy/engine/base.py:1371(_execute_context)"),
        (120000, 0.301, 8.412, "invoices/export.py:13(_fields)"),
        (240000, 2.911, 6.877, "{method 'format' of 'decimal.Decimal' objects}"),
        (121, 0.640, 3.402, "invoices/repository.py:12(load_for_export)"),
        (120001, 2.018, 2.018, "{method 'join' of 'str' objects}"),
    ]
    rows = [
        f"{n:>9}  {tt:7.3f}  {tt / n:7.3f}  {ct:7.3f}  {ct / n:7.3f} {where}"
        for n, tt, ct, where in top
    ]
    modules = [
        "sqlalchemy/orm/loading.py",
        "sqlalchemy/engine/cursor.py",
        "sqlalchemy/sql/elements.py",
        "psycopg/cursor.py",
        "invoices/models.py",
        "decimal.py",
        "datetime.py",
        "csv.py",
    ]
    cum = 2.0
    for i in range(230):
        cum *= 0.985
        n = rng.choice([1, 121, 1000, 120000, 240000, 360000])
        tt = min(cum, rng.random() * cum)
        where = f"{rng.choice(modules)}:{rng.randrange(20, 2400)}(_fn_{i:03d})"
        rows.append(f"{n:>9}  {tt:7.3f}  {tt / n:7.3f}  {cum:7.3f}  {cum / n:7.3f} {where}")
    return "\n".join(head + rows)


_SUMMARY = "\n".join(
    [
        (
            "This session is being continued from a previous conversation that ran out of "
            "context. The summary below covers the earlier portion of the conversation."
        ),
        "",
        "Analysis:",
        f"The user is fixing the invoice CSV export of invoice-service on branch {GIT_BRANCH}.",
        (
            "1. The user reported that customer names containing commas shift columns in the "
            "export. I read invoices/export.py, reproduced the failure, switched export_csv to "
            "csv.writer and fixed a line-ending regression. All tests in tests/test_export.py "
            "pass."
        ),
        (
            "2. The user asked for regression tests for quotes and line breaks; I added "
            "tests/test_export_quoting.py. The full suite passes."
        ),
        (
            "3. The user asked why the nightly export of ~120k invoices takes about 40 seconds. I"
            " profiled it: most of the time is one query per invoice for the customer, plus "
            "building one large string."
        ),
        (
            "4. The user asked me to prefetch the customers and stream the rows to the file. I "
            "made a todo list and started reading invoices/repository.py."
        ),
        "",
        "Summary:",
        "1. Primary Request and Intent:",
        (
            "   Fix the CSV export so awkward customer names survive, cover it with tests, then "
            "make the nightly export of ~120k invoices fast by prefetching customers and "
            "streaming rows."
        ),
        "",
        "2. Key Technical Concepts:",
        "   - csv.writer quoting (RFC 4180), line terminators",
        "   - N+1 queries through a lazy relationship; eager loading with joinedload",
        "   - cProfile for finding where the time goes",
        "",
        "3. Files and Code Sections:",
        (
            "   - invoices/export.py: export_csv now uses csv.writer instead of joining fields "
            "with commas."
        ),
        ("   - tests/test_export_quoting.py: new tests for quotes, line breaks and a round trip."),
        "   - invoices/repository.py: load_for_export, where the customer prefetch will go.",
        "",
        "4. Errors and fixes:",
        "   - A comma in a customer name split the field: fixed by using the csv module.",
        "   - A test failure after the first fix: fixed.",
        "",
        "5. Problem Solving:",
        "   The quoting bug is solved. The performance work has started.",
        "",
        "6. All user messages:",
        "   - Asked to fix the export for customer names with commas and get the suite green.",
        "   - Asked for regression tests for quotes and line breaks.",
        "   - Asked to profile the nightly export without changing anything.",
        "   - Asked to go ahead with prefetching customers and streaming rows.",
        "",
        "7. Pending Tasks:",
        "   - Prefetch customers in load_for_export",
        "   - Stream rows to the output file",
        "   - Measure the export again",
        "",
        "8. Current Work:",
        "   Reading invoices/repository.py before adding the prefetch.",
        "",
        "9. Optional Next Step:",
        (
            "   Add joinedload(Invoice.customer) to the query in load_for_export, then add a "
            "streaming writer to invoices/export.py."
        ),
        "",
        (
            "If you need specific details from before compaction (like exact code snippets, error"
            " messages, or content you generated), read the full transcript at: {transcript}"
        ),
        (
            "Please continue the conversation from where we left off without asking the user any "
            "further questions. Continue with the last task that you were asked to work on."
        ),
    ]
)


# --- the session ----------------------------------------------------------------------------


def _numbered(text: str) -> str:
    return "\n".join(f"{i:>6}\u2192{line}" for i, line in enumerate(text.splitlines(), start=1))


class _Session:
    """Tool calls as Claude Code writes them: the tool_use, progress, the result, PostToolUse."""

    def __init__(self, w: TranscriptWriter) -> None:
        self.w = w

    def path(self, rel: str) -> str:
        return f"{CWD}/{rel}"

    def tool(
        self,
        name: str,
        tool_input: dict[str, Any],
        content: str,
        result: Any,
        *,
        lead: list[dict[str, Any]] | None = None,
        is_error: bool = False,
        seconds: float = 1.0,
        progress: list[str] | None = None,
    ) -> Iterator[HookCall]:
        w = self.w
        tool_id = w.tool_id()
        use = {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}
        w.response([*(lead or []), use])
        for i, out in enumerate(progress or [], start=1):
            w.bash_progress(out, tool_id, elapsed=i * 2, total_lines=out.count("\n") + 1)
        w.tool_result(tool_id, content, result, is_error=is_error, seconds=seconds)
        w.hook_progress("PostToolUse", name, f"{_HOOK} post-tool-use", tool_id)
        note = tool_input.get("command") or tool_input.get("file_path", "")
        if isinstance(note, str) and note.startswith(CWD + "/"):
            note = note[len(CWD) + 1 :]
        yield HookCall(
            "post-tool-use",
            {
                "tool_name": name,
                "tool_input": tool_input,
                "tool_response": result,
                "tool_use_id": tool_id,
            },
            f"{name} {note}".strip(),
        )

    def read(
        self, rel: str, text: str, lead: list[dict[str, Any]] | None = None
    ) -> Iterator[HookCall]:
        n = len(text.splitlines())
        result = {
            "type": "text",
            "file": {
                "filePath": self.path(rel),
                "content": text,
                "numLines": n,
                "startLine": 1,
                "totalLines": n,
            },
        }
        yield from self.tool(
            "Read", {"file_path": self.path(rel)}, _numbered(text), result, lead=lead
        )

    def edit(
        self, rel: str, old: str, new: str, original: str, lead: list[dict[str, Any]] | None = None
    ) -> Iterator[HookCall]:
        path = self.path(rel)
        result = {
            "filePath": path,
            "oldString": old,
            "newString": new,
            "originalFile": original,
            "structuredPatch": [
                {
                    "oldStart": 1,
                    "oldLines": old.count("\n") + 1,
                    "newStart": 1,
                    "newLines": new.count("\n") + 1,
                    "lines": [f"-{x}" for x in old.splitlines()]
                    + [f"+{x}" for x in new.splitlines()],
                }
            ],
            "userModified": False,
            "replaceAll": False,
        }
        tool_input = {"replace_all": False, "file_path": path, "old_string": old, "new_string": new}
        yield from self.tool(
            "Edit", tool_input, f"The file {path} has been updated successfully.", result, lead=lead
        )

    def bash(
        self,
        command: str,
        description: str,
        output: str,
        *,
        failed: bool = False,
        lead: list[dict[str, Any]] | None = None,
        seconds: float = 3.0,
    ) -> Iterator[HookCall]:
        tool_input = {"command": command, "description": description}
        if failed:
            content = f"Exit code 1\n{output}"
            result: Any = f"Error: {content}"
        else:
            content = output
            result = {
                "stdout": output,
                "stderr": "",
                "interrupted": False,
                "isImage": False,
                "noOutputExpected": False,
            }
        lines = output.splitlines()
        progress = ["\n".join(lines[: len(lines) // 2])] if seconds > 5 else None
        yield from self.tool(
            "Bash",
            tool_input,
            content,
            result,
            lead=lead,
            is_error=failed,
            seconds=seconds,
            progress=progress,
        )

    def say(self, text: str) -> None:
        self.w.response([{"type": "text", "text": text}], output_tokens=len(text) // 3)

    def prompt(self, text: str, label: str) -> HookCall:
        self.w.prompt(text)
        self.w.hook_progress(
            "UserPromptSubmit", "", f"{_HOOK} user-prompt-submit", self.w.tool_id()
        )
        return HookCall("user-prompt-submit", {"prompt": text}, label)

    def stop(self, last: str) -> Iterator[HookCall]:
        self.w.end_turn([f"{_HOOK} stop"])
        yield HookCall(
            "stop", {"stop_hook_active": False, "last_assistant_message": last}, "end of turn"
        )


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def session(w: TranscriptWriter) -> Iterator[HookCall]:
    """Write the session, yielding each hook call at the moment Claude Code would make it."""
    s = _Session(w)
    w.hook_progress("SessionStart", "startup", f"{_HOOK} session-start", w.tool_id())
    yield HookCall("session-start", {"source": "startup"}, "a new session")

    # -- 1. the bug: a failing test, a fix that breaks another test, a second fix ------------------
    ask = (
        "Accounting says the invoice CSV export breaks when a customer name contains a comma: "
        "the columns shift and their importer rejects the file. I added a failing test "
        "(test_customer_with_comma in tests/test_export.py). Please fix invoices/export.py and "
        "get the suite green."
    )
    yield s.prompt(ask, "prompt 1: the export breaks on commas")
    yield from s.read(
        "invoices/export.py",
        _EXPORT_PY,
        lead=[
            w.thinking(
                "The export probably joins fields with commas by hand. Read the module, then run "
                "the failing test to see the exact failure."
            ),
            _text("I'll read the export module and then run the failing test."),
        ],
    )
    pytest_cmd = "python -m pytest tests/test_export.py -q"
    yield from s.bash(pytest_cmd, "Run the export tests", _FAIL_COMMA, failed=True)
    original = _EXPORT_PY
    yield from s.edit(
        "invoices/export.py",
        "from collections.abc import Iterable",
        "import csv\nimport io\nfrom collections.abc import Iterable",
        original,
        lead=[
            _text(
                'The root cause: `export_csv` joins fields with `",".join(...)`, so the comma in '
                "`Smith, Jones & Co` becomes a column separator. I'll write rows with the `csv` "
                "module instead of joining strings, so fields that need it are quoted."
            )
        ],
    )
    original = original.replace(
        "from collections.abc import Iterable",
        "import csv\nimport io\nfrom collections.abc import Iterable",
    )
    yield from s.edit("invoices/export.py", _OLD_EXPORT, _NEW_EXPORT, original)
    original = original.replace(_OLD_EXPORT, _NEW_EXPORT)
    yield from s.bash(pytest_cmd, "Run the export tests again", _FAIL_CRLF, failed=True)
    yield from s.edit(
        "invoices/export.py",
        "    writer = csv.writer(buf)",
        '    writer = csv.writer(buf, lineterminator="\\n")',
        original,
        lead=[
            _text(
                "The comma test passes now, but `csv.writer` ends rows with `\\r\\n` by default "
                "and `test_header_row` expects `\\n` (the importer's spec says LF). I'll set "
                '`lineterminator="\\n"`.'
            )
        ],
    )
    yield from s.bash(
        pytest_cmd, "Run the export tests again", _passed(9, [("tests/test_export.py", 9)], 0.19)
    )
    done = (
        "Fixed. `export_csv` now writes rows with `csv.writer` (RFC 4180 quoting, LF line "
        "endings), so `Smith, Jones & Co` stays one field. All 9 tests in tests/test_export.py "
        "pass."
    )
    s.say(done)
    yield from s.stop(done)
    w.slug = "quiet-copper-ledger"

    # -- 2. regression tests ------------------------------------------------------------------
    ask = (
        "Thanks. Names with double quotes and line breaks come in from the CRM too. Add "
        "regression tests for those, and one that round-trips a whole export through csv.reader."
    )
    yield s.prompt(ask, "prompt 2: regression tests")
    path = s.path("tests/test_export_quoting.py")
    yield from s.tool(
        "Write",
        {"file_path": path, "content": _QUOTING_TESTS},
        f"File created successfully at: {path}",
        {
            "type": "create",
            "filePath": path,
            "content": _QUOTING_TESTS,
            "structuredPatch": [],
            "originalFile": None,
        },
        lead=[_text("I'll put the quoting edge cases in their own test module.")],
    )
    full = _passed(14, [("tests/test_export.py", 9), ("tests/test_export_quoting.py", 5)], 0.31)
    yield from s.bash("python -m pytest tests/ -q", "Run the whole test suite", full)
    done = (
        "Added tests/test_export_quoting.py: quotes, embedded line breaks (LF and CRLF), padding, "
        "and a 50-invoice round trip through `csv.DictReader`. The whole suite passes (14 tests)."
    )
    s.say(done)
    yield from s.stop(done)

    # -- 3. a profile with a large output --------------------------------------------------------
    ask = (
        "The nightly export of ~120k invoices takes about 40 seconds. Can you profile it and tell "
        "me where the time goes? Don't change anything yet."
    )
    yield s.prompt(ask, "prompt 3: profile the nightly export")
    yield from s.bash(
        f"python -m cProfile -s cumulative {_EXPORT_RUN}",
        "Profile the export of 120k generated invoices",
        _profile_output(),
        seconds=41.0,
        lead=[_text("I'll profile the export on 120,000 generated invoices.")],
    )
    done = (
        "Where the 38 s go:\n"
        "- 23.5 s (62%): `Invoice.customer` is a lazy relationship, so the export runs one SQL "
        "query per invoice (120,001 `execute` calls).\n"
        "- 8.4 s: `_fields`, mostly formatting `Decimal` totals.\n"
        "- 2.0 s: joining one 120k-line string in memory before writing it.\n\n"
        "I'd prefetch customers with `joinedload(Invoice.customer)` in `load_for_export` instead "
        "of loading them lazily, and stream rows to the file with `csv.writer` instead of "
        "building one string."
    )
    s.say(done)
    yield from s.stop(done)

    # -- 4. the work, an auto compaction in the middle of it --------------------------------------
    ask = "Go ahead with both: prefetch the customers and stream the rows to the file."
    yield s.prompt(ask, "prompt 4: prefetch and stream")
    todos = [
        {
            "content": "Prefetch customers in load_for_export",
            "status": "in_progress",
            "activeForm": "Prefetching customers",
        },
        {
            "content": "Stream rows to the output file",
            "status": "pending",
            "activeForm": "Streaming rows",
        },
        {
            "content": "Measure the export again",
            "status": "pending",
            "activeForm": "Measuring the export",
        },
    ]
    yield from s.tool(
        "TodoWrite",
        {"todos": todos},
        "Todos have been modified successfully. Ensure that you continue to use the todo list to "
        "track your progress. Please proceed with the current tasks if applicable",
        {"oldTodos": [], "newTodos": todos},
    )
    yield from s.read("invoices/repository.py", _REPOSITORY_PY)

    # The context is full: Claude Code runs PreCompact, compacts, then starts the new context.
    w.hook_progress("PreCompact", "auto", f"{_HOOK} pre-compact", w.tool_id())
    yield HookCall(
        "pre-compact", {"trigger": "auto", "custom_instructions": None}, "auto compaction"
    )
    w.compaction(_SUMMARY.replace("{transcript}", str(w.path)))
    w.hook_progress("SessionStart", "compact", f"{_HOOK} session-start", w.tool_id())
    yield HookCall("session-start", {"source": "compact"}, "the context after compaction")

    yield from s.edit(
        "invoices/repository.py",
        "    query = session.query(Invoice).order_by(Invoice.number)",
        _PREFETCH,
        _REPOSITORY_PY,
        lead=[_text("Continuing with the prefetch: one joined query instead of one per invoice.")],
    )
    export_now = _EXPORT_PY.replace(
        "from collections.abc import Iterable",
        "import csv\nimport io\nfrom collections.abc import Iterable",
    ).replace(
        _OLD_EXPORT, _NEW_EXPORT.replace("csv.writer(buf)", 'csv.writer(buf, lineterminator="\\n")')
    )
    tail = "    return buf.getvalue()"
    yield from s.edit("invoices/export.py", tail, tail + _WRITE_CSV, export_now)
    yield from s.read("scripts/export_invoices.py", _SCRIPT_PY)
    yield from s.edit(
        "scripts/export_invoices.py",
        "        out.write(export_csv(invoices))",
        "        rows = write_csv(invoices, out)",
        _SCRIPT_PY,
    )
    yield from s.edit(
        "scripts/export_invoices.py",
        "from invoices.export import export_csv",
        "from invoices.export import write_csv",
        _SCRIPT_PY.replace("out.write(export_csv(invoices))", "rows = write_csv(invoices, out)"),
    )
    yield from s.bash(
        "python -m pytest tests/ -q",
        "Run the whole test suite",
        _passed(14, [("tests/test_export.py", 9), ("tests/test_export_quoting.py", 5)], 0.33),
    )
    yield from s.bash(
        f"time python {_EXPORT_RUN}",
        "Time the export again",
        "exported to /tmp/export.csv in 6.9 s\n\nreal\t0m7.412s\nuser\t0m6.108s\nsys\t0m0.391s",
        seconds=8.0,
    )
    done = (
        "Done: `load_for_export` now eager-loads customers with `joinedload` (one query instead "
        "of 120,001), and the new `write_csv` streams rows to the file. The export of 120k "
        "invoices went from 38.2 s to 6.9 s; all 14 tests pass."
    )
    s.say(done)
    yield from s.stop(done)

    # -- 5. the commit ------------------------------------------------------------------------
    yield s.prompt("Great, commit it on this branch.", "prompt 5: commit")
    yield from s.bash(
        "git add invoices/export.py invoices/repository.py scripts/export_invoices.py "
        "tests/test_export_quoting.py && git commit -m 'Export: quote fields with csv.writer, "
        "prefetch customers, stream rows'",
        "Commit the export fixes",
        f"[{GIT_BRANCH} 3f2c1ab] Export: quote fields with csv.writer, prefetch customers, "
        "stream rows\n"
        " 4 files changed, 71 insertions(+), 9 deletions(-)\n"
        " create mode 100644 tests/test_export_quoting.py",
    )
    done = f"Committed as 3f2c1ab on {GIT_BRANCH}."
    s.say(done)
    yield from s.stop(done)
    yield HookCall("session-end", {"reason": "prompt_input_exit"}, "the user quits")
