"""Console examples that are run: the format of a ```` ```console ```` block, and its runner.

Every page of the documentation (``README.md`` and every ``docs/**/*.md``) is tested by
``tests/docs/test_console_examples.py``: each ```` ```console ```` block is run, and what the
commands print must be what the block shows. This docstring is the reference for page writers.

**A block.** A line starting with ``$ `` is a command; a command line ending with ``\\`` goes on
on the next line (the lines are given to bash as they are, backslash and newline included).
Every other line, up to the next ``$ `` line or the end of the block, is the command's expected
output: what it writes to stdout and stderr together, in the order it writes them (Python runs
unbuffered, so a command's stderr report comes after the stdout it follows). A block must start
with a command. Trailing spaces and trailing empty lines are not compared::

    ```console
    $ continuity init
    created store at <path>
    $ printf '%s\\n' '{"role":"user","text":"hi"}' \\
        | continuity append demo
    1
    ```

**The exit code.** A command must exit 0, unless its last expected output line is ``[exit N]``:
then it must exit N (and the marker is not part of the output)::

    $ continuity log nope
    error: no thread 'nope' in the store
    [exit 1]

**Placeholders** in an expected line match what changes from run to run:

============  ==============================================================================
``<id>``      a hex id, digest or uuid, any length (``b8498da4``, ``4d5611e5-9f0c-…``)
``<time>``    a timestamp (``2026-11-22 03:47:05``, ``2026-11-22T03:41:08Z``, ``03:47``) or a
              duration (``12 ms``, ``0.4 s``, ``1m 20s``)
``<n>``       an integer or decimal number (``-3``, ``1,500``, ``2.787``, ``1e-05``)
``<path>``    a filesystem path: a run of non-blank characters holding a ``/``
``<any>``     any text, possibly none, up to what follows it on the line
============  ==============================================================================

Everything else on the line is literal (``…`` too). A line holding only ``...`` matches zero or
more whole lines (any lines: to show the start and the end of a long output, or to leave out
a warning that depends on the machine).

**Markers.** HTML comments right before a block (blank lines between are allowed) change it:

* ``<!-- console: skip REASON -->``: the block is not run; the reason is required (it needs a
  PostgreSQL server, it starts a server that never exits, it shows a machine's own files).
* ``<!-- console: setup CMD -->``: CMD (one line) runs before the block, in the same
  environment; its output is not shown or compared, but it must exit 0. Several may be given;
  they run in order. For a thread the example needs (``continuity demo --temp-store``,
  ``python -c ...``) without showing how it was made.

A ``console:`` comment with any other word, a skip without a reason, or a marker that no
console block follows is a format error, and the page's test fails saying where.

Blocks with another language tag (```` ```sh ````, ```` ```text ````) are not run: use
```` ```sh ```` for commands shown without their output (install lines, long test runs).

**The environment.** Each page's blocks run in order, in one fresh environment per page, like
one terminal session that starts clean:

* ``CONTINUITY_HOME`` = a new folder that does not exist yet (``continuity init`` creates it);
  ``HOME``, ``TMPDIR`` (``mktemp``, ``--temp-store``) and the working directory = new empty
  folders; nothing else of the machine's is written (write ``$TMPDIR``, never ``/tmp``);
* ``PATH`` starts with the bin folder of the Python running the tests (its ``continuity`` and
  ``python``); ``COLUMNS=100``, ``LANG=C.UTF-8``, ``TZ=UTC``, ``NO_COLOR=1``,
  ``PYTHONUNBUFFERED=1``; every other ``CONTINUITY_*`` and ``XDG_*`` variable is removed;
* stdin is empty (``/dev/null``), and no command has a terminal;
* each command runs in its own ``bash -c`` (pipes, ``;``, ``&&``, redirections work); a ``cd``
  and the variables it exports carry over to the next command of the page, shell variables
  and functions do not;
* each command has 60 seconds (``CONSOLE_TIMEOUT`` seconds if set); one that runs longer is
  killed, with its process group, and the test fails saying so.

**When a block fails**, the test reports the page and line, the command, and a unified diff of
the expected output against what it printed, then goes on with the page's next commands (a
later failure may follow from an earlier one).

**Writing a page:** ``python -m tests.docs.console PAGE.md`` runs a page's blocks the same way
and prints each block as it would read with what the commands printed (``[exit N]`` included),
to paste back, putting the placeholders in where a value changes from run to run.
"""

from __future__ import annotations

import difflib
import os
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_SECONDS = 60.0
ELLIPSIS = "..."
EXIT_MARKER = re.compile(r"^\[exit (\d+)\]$")

_FENCE = re.compile(r"^(?P<indent>[ ]{0,3})(?P<fence>```+|~~~+)\s*(?P<info>[^\s`]*)")
_DIRECTIVE = re.compile(r"^\s*<!--\s*console:\s*(?P<word>\S+)\s*(?P<rest>.*?)\s*-->\s*$")
_COMMENT_START = re.compile(r"^\s*<!--\s*console\b")

_TIMESTAMP = (
    r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?)?(?:Z|[+-]\d{2}:?\d{2})?"
    r"|\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?"
)
_UNIT = r"(?:ns|µs|us|ms|min|minutes?|seconds?|secs?|s|hours?|h|days?|d|m)"
_DURATION = rf"\d+(?:\.\d+)?\s?{_UNIT}(?:\s?\d+(?:\.\d+)?\s?{_UNIT})*(?![A-Za-z])"
PLACEHOLDERS: dict[str, str] = {
    "<id>": r"[0-9a-fA-F]+(?:-[0-9a-fA-F]+)*",
    "<time>": rf"(?:{_TIMESTAMP}|{_DURATION})",
    "<n>": r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?",
    "<path>": r"[^\s/]*/\S*",
    "<any>": r".*",
}
"""What each placeholder of an expected line matches (a regular expression)."""
_PLACEHOLDER = re.compile("|".join(re.escape(p) for p in PLACEHOLDERS))


class FormatError(Exception):
    """A page's console block, or a marker, that does not follow the format."""


@dataclass
class Command:
    line: int
    """The line of the page where the command starts."""
    text: str
    """The command as bash gets it (continuation lines included)."""
    expected: list[str] = field(default_factory=list)
    exit_code: int = 0


@dataclass
class Block:
    page: str
    line: int
    """The line of the page holding the opening fence."""
    commands: list[Command]
    setup: list[str] = field(default_factory=list)
    skip: str | None = None


@dataclass
class Result:
    output: str
    exit_code: int
    timed_out: bool = False


# --- the format --------------------------------------------------------------------------------


def parse_page(text: str, page: str) -> list[Block]:
    """The console blocks of a page, with their markers; a :class:`FormatError` names the line
    of anything that does not follow the format."""
    lines = text.splitlines()
    blocks: list[Block] = []
    pending: list[tuple[int, str, str]] = []  # (line, word, rest) of markers not yet used
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if fence is None:
            pending = _collect_marker(lines[i], i + 1, page, pending)
            i += 1
            continue
        end = _closing_fence(lines, i, fence.group("fence"), page)
        if fence.group("info") == "console":
            body = [_dedent(line, fence.group("indent")) for line in lines[i + 1 : end]]
            blocks.append(_block(page, i + 1, body, pending))
        elif pending:
            raise FormatError(
                f"{page}:{pending[0][0]}: a console marker before a block that is not console"
            )
        pending = []
        i = end + 1
    if pending:
        raise FormatError(f"{page}:{pending[0][0]}: a console marker that no console block follows")
    return blocks


def _collect_marker(
    line: str, number: int, page: str, pending: list[tuple[int, str, str]]
) -> list[tuple[int, str, str]]:
    """Markers right before a block accumulate over blank lines; any other line drops them."""
    directive = _DIRECTIVE.match(line)
    if directive is not None:
        return [*pending, (number, directive.group("word"), directive.group("rest"))]
    if _COMMENT_START.match(line):
        raise FormatError(
            f"{page}:{number}: a console marker must be one line: <!-- console: ... -->"
        )
    if line.strip() == "":
        return pending
    if pending:
        raise FormatError(f"{page}:{pending[0][0]}: a console marker that no console block follows")
    return []


def _closing_fence(lines: list[str], start: int, fence: str, page: str) -> int:
    for j in range(start + 1, len(lines)):
        stripped = lines[j].strip()
        if stripped.startswith(fence[0] * len(fence)) and stripped.strip(fence[0]) == "":
            return j
    raise FormatError(f"{page}:{start + 1}: a code block that is never closed")


def _dedent(line: str, indent: str) -> str:
    return line[len(indent) :] if line.startswith(indent) else line.lstrip(" ")


def _block(page: str, line: int, body: list[str], markers: list[tuple[int, str, str]]) -> Block:
    block = Block(page=page, line=line, commands=_commands(page, line, body))
    for number, word, rest in markers:
        if word == "skip":
            if not rest:
                raise FormatError(f"{page}:{number}: `console: skip` needs a reason")
            block.skip = rest
        elif word == "setup":
            if not rest:
                raise FormatError(f"{page}:{number}: `console: setup` needs a command")
            block.setup.append(rest)
        else:
            raise FormatError(f"{page}:{number}: unknown console marker {word!r} (skip or setup)")
    return block


def _commands(page: str, line: int, body: list[str]) -> list[Command]:
    commands: list[Command] = []
    continued = False
    for offset, text in enumerate(body, start=1):
        if continued:
            commands[-1].text += "\n" + text
            continued = text.endswith("\\")
        elif text.startswith("$ "):
            commands.append(Command(line=line + offset, text=text[2:]))
            continued = text.endswith("\\")
        elif not commands:
            raise FormatError(
                f"{page}:{line + offset}: a console block must start with `$ command`"
            )
        else:
            commands[-1].expected.append(text)
    if not commands:
        raise FormatError(f"{page}:{line}: a console block without a command")
    for command in commands:
        _take_exit_marker(page, command)
    return commands


def _take_exit_marker(page: str, command: Command) -> None:
    while command.expected and not command.expected[-1].strip():
        command.expected.pop()
    if command.expected and (marker := EXIT_MARKER.match(command.expected[-1].strip())):
        command.exit_code = int(marker.group(1))
        command.expected.pop()
        if command.exit_code == 0:
            raise FormatError(f"{page}:{command.line}: `[exit 0]` is the default: leave it out")
    for text in command.expected:
        if EXIT_MARKER.match(text.strip()):
            raise FormatError(f"{page}:{command.line}: `[exit N]` must be the command's last line")


# --- matching ----------------------------------------------------------------------------------


def line_pattern(expected: str) -> re.Pattern[str]:
    """An expected line as a regular expression: literal text, placeholders as in the table."""
    parts: list[str] = []
    last = 0
    for m in _PLACEHOLDER.finditer(expected):
        parts.append(re.escape(expected[last : m.start()]))
        parts.append(PLACEHOLDERS[m.group()])
        last = m.end()
    parts.append(re.escape(expected[last:]))
    return re.compile("".join(parts))


def _trimmed(lines: Sequence[str]) -> list[str]:
    out = [line.rstrip() for line in lines]
    while out and not out[-1]:
        out.pop()
    return out


def mismatch(expected: Sequence[str], output: str) -> tuple[int, int] | None:
    """None when ``output`` is what ``expected`` shows; else how far the match got: the index of
    the first expected line that could not be matched, and the output line it was tried on."""
    want = _trimmed(expected)
    got = _trimmed(output.splitlines())
    patterns = [None if w.strip() == ELLIPSIS else line_pattern(w) for w in want]
    # Glob matching over lines, `...` the star: each other line matches exactly one output line.
    i = j = 0
    star, mark = -1, 0
    best = (0, 0)
    while j < len(got):
        pattern = patterns[i] if i < len(patterns) else None
        if i < len(patterns) and pattern is not None and pattern.fullmatch(got[j]):
            i, j = i + 1, j + 1
        elif i < len(patterns) and pattern is None:
            star, mark, i = i, j, i + 1
        elif star >= 0:
            mark += 1
            i, j = star + 1, mark
        else:
            return max(best, (i, j))
        best = max(best, (i, j))
    while i < len(patterns) and patterns[i] is None:
        i += 1
    return None if i == len(patterns) else max(best, (i, j))


def diff(expected: Sequence[str], output: str) -> str:
    """A unified diff of the expected lines against the output, where each expected line that
    matches an output line (placeholders and ``...`` included) reads as that line: what is
    left in the diff is what differs."""
    return "\n".join(
        difflib.unified_diff(
            _resolved(_trimmed(expected), _trimmed(output.splitlines())),
            _trimmed(output.splitlines()),
            "expected",
            "printed",
            lineterm="",
        )
    )


def _resolved(want: list[str], got: list[str]) -> list[str]:
    out: list[str] = []
    j = 0
    ellipsis = False
    for line in want:
        if line.strip() == ELLIPSIS:
            ellipsis = True
            continue
        pattern = line_pattern(line)
        found = next((k for k in range(j, len(got)) if pattern.fullmatch(got[k])), None)
        if found is None:
            out.extend([ELLIPSIS] if ellipsis else [])
            out.append(line)
        else:
            out.extend(got[j:found] if ellipsis else [])
            out.append(got[found])
            j = found + 1
        ellipsis = False
    if ellipsis:
        out.extend(got[j:])
    return out


# --- running -----------------------------------------------------------------------------------


class Session:
    """One page's environment: fresh folders, a clean environment, and the working directory
    and exported variables carried from one command to the next."""

    def __init__(self, root: Path, timeout: float | None = None) -> None:
        self.root = root
        home, work, tmp = root / "home", root / "work", root / "tmp"
        for folder in (home, work, tmp):
            folder.mkdir()
        self.cwd = work
        self.state = root / ".console-state"
        self.timeout = timeout if timeout is not None else _timeout()
        self.env = _clean_environment()
        self.env.update(
            CONTINUITY_HOME=str(root / "store"),
            HOME=str(home),
            PWD=str(work),
            TMPDIR=str(tmp),
            PATH=os.pathsep.join([str(Path(sys.executable).parent), self.env.get("PATH", "")]),
        )

    def run(self, command: str) -> Result:
        """Run a command in bash, in the session's directory and environment, and take the
        directory and exported environment it leaves for the next one."""
        script = (
            f"trap 'pwd > {_quote(self.state)}.pwd; env -0 > {_quote(self.state)}.env' EXIT\n"
            f"{command}\n"
        )
        process = subprocess.Popen(
            ["bash", "-c", script],
            cwd=self.cwd,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            out, _ = process.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            out, _ = process.communicate()
            return Result(out.decode("utf-8", "replace"), -signal.SIGKILL, timed_out=True)
        self._take_state()
        return Result(out.decode("utf-8", "replace"), process.returncode)

    def _take_state(self) -> None:
        pwd, env = Path(f"{self.state}.pwd"), Path(f"{self.state}.env")
        if pwd.exists() and Path(pwd.read_text().strip()).is_dir():
            self.cwd = Path(pwd.read_text().strip())
        if env.exists():
            carried = {}
            for item in env.read_bytes().decode("utf-8", "replace").split("\0"):
                name, sep, value = item.partition("=")
                if sep and name not in ("_", "SHLVL", "OLDPWD"):
                    carried[name] = value
            self.env = carried
        for path in (pwd, env):
            path.unlink(missing_ok=True)


def _quote(path: Path) -> str:
    return "'" + str(path).replace("'", "'\\''") + "'"


def _timeout() -> float:
    return float(os.environ.get("CONSOLE_TIMEOUT", TIMEOUT_SECONDS))


def _clean_environment() -> dict[str, str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("CONTINUITY_", "XDG_", "CLAUDE", "CODEX_", "GEMINI_", "PYTEST_"))
        and name not in ("BASH_ENV", "ENV", "CDPATH", "PYTHONPATH", "VIRTUAL_ENV", "OLDPWD")
    }
    env.update(COLUMNS="100", LANG="C.UTF-8", LC_ALL="C.UTF-8", TZ="UTC", NO_COLOR="1")
    env.update(PYTHONUNBUFFERED="1", TERM="dumb")
    return env


def check(command: Command, result: Result, page: str = "") -> str | None:
    """What is wrong with what a command did, or None."""
    where = f"{page}:{command.line}: $ {command.text}"
    if result.timed_out:
        return f"{where}\ntimed out (killed after {_timeout():g} s); it printed:\n{result.output}"
    problems = []
    if result.exit_code != command.exit_code:
        shown = f"[exit {command.exit_code}]" if command.exit_code else "no `[exit N]` line"
        problems.append(f"exited {result.exit_code}, the block shows {shown}")
    if (far := mismatch(command.expected, result.output)) is not None:
        want = _trimmed(command.expected)
        first = want[far[0]] if far[0] < len(want) else "(the end of the output)"
        problems.append(f"the output differs; first unmatched expected line: {first!r}")
        problems.append(diff(command.expected, result.output))
    return f"{where}\n" + "\n".join(problems) if problems else None


def run_blocks(
    blocks: Sequence[Block], root: Path
) -> Iterator[tuple[Block, Command | None, Result, str | None]]:
    """Run a page's blocks in one session: each command (None for a setup command), its result
    and what is wrong with it (None when nothing is)."""
    session = Session(root)
    for block in blocks:
        if block.skip is not None:
            continue
        for setup in block.setup:
            result = session.run(setup)
            problem = None
            if result.exit_code != 0 or result.timed_out:
                how = "timed out" if result.timed_out else f"exited {result.exit_code}"
                problem = f"{block.page}:{block.line}: setup `{setup}` {how}:\n{result.output}"
            yield block, None, result, problem
        for command in block.commands:
            result = session.run(command.text)
            yield block, command, result, check(command, result, block.page)


def page_failures(page: Path) -> list[str]:
    """Every failure of a page's console blocks (empty when they all print what they show)."""
    blocks = parse_page(page.read_text(), page_name(page))
    with tempfile.TemporaryDirectory(prefix="console-") as tmp:
        return [problem for *_, problem in run_blocks(blocks, Path(tmp)) if problem]


def page_name(page: Path) -> str:
    page = page.resolve()
    return str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else str(page)


def pages() -> list[Path]:
    """The pages whose console blocks are tested: README.md and every docs/**/*.md."""
    docs = ROOT / "docs"
    return [ROOT / "README.md", *(sorted(docs.rglob("*.md")) if docs.is_dir() else [])]


def _show(block: Block, runs: list[tuple[Command, Result, str | None]]) -> None:
    differs = [f"line {command.line}" for command, _, problem in runs if problem]
    verdict = f"differs: {', '.join(differs)}" if differs else "as shown"
    print(f"{block.page}:{block.line} ({verdict})\n```console")
    for command, result, _ in runs:
        print(f"$ {command.text}")
        if result.output.rstrip():
            print("\n".join(line.rstrip() for line in result.output.rstrip().splitlines()))
        if result.timed_out:
            print(f"[timed out after {_timeout():g} s]")
        elif result.exit_code:
            print(f"[exit {result.exit_code}]")
    print("```\n")


def main(argv: Sequence[str]) -> int:
    """Print each console block of the pages with what its commands really print, to paste."""
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m tests.docs.console PAGE.md [PAGE.md ...]", file=sys.stderr)
        return 2
    failed = False
    for arg in argv:
        page = Path(arg)
        blocks = parse_page(page.read_text(), page_name(page))
        runs: dict[int, list[tuple[Command, Result, str | None]]] = {id(b): [] for b in blocks}
        with tempfile.TemporaryDirectory(prefix="console-") as tmp:
            for block, command, result, problem in run_blocks(blocks, Path(tmp)):
                failed = failed or problem is not None
                if command is None:
                    if problem:
                        print(problem, file=sys.stderr)
                    continue
                runs[id(block)].append((command, result, problem))
        for block in blocks:
            if block.skip is not None:
                print(f"{block.page}:{block.line} (skipped: {block.skip})\n")
            else:
                _show(block, runs[id(block)])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
