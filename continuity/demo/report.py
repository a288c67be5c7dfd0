"""What ``continuity demo`` prints: the payoff in about 15 lines, or the whole replay.

The short report (the default) says what was archived, what Claude's compaction dropped and what
came back to Claude, then the commands to look further. What it dropped is measured, not
written down: the items of the restored context (:mod:`continuity.agents.base.restore`) that
Claude's summary does not hold word for word (:func:`dropped`). ``--verbose`` adds every hook
run, the archive in detail, the pre-compact guidance, Claude's summary, the selection decision
and the restored context whole (:func:`report_sections`).

The "Next" commands are printed the way the demo was run (``program``: ``.venv/bin/continuity``,
``python -m continuity``, ``continuity``), so that they work in the shell it was run from.
"""

from __future__ import annotations

import shlex
import shutil
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, TextIO

import msgspec

from continuity.agents.base.restore import RESTORE_MAX_CHARS
from continuity.demo.runner import DemoResult

__all__ = ["Dropped", "brief", "dropped", "print_report", "report_sections"]

_LABEL: Final = 11
"""The width of the short report's labels (``compacted  ``)."""
_MAX_WIDTH: Final = 100
_RECENT: Final = "# Context of thread "
"""Where the restored context's extracted sections end and its recent raw turns begin."""
_KINDS: Final = {
    "Commands run": ("command and its outcome", "commands and their outcomes"),
    "Errors and what fixed them": ("error and its fix", "errors and their fixes"),
    "The user's own words": ("prompt in the user's own words", "prompts in the user's own words"),
    "Open tasks": ("open task", "open tasks"),
    "Decisions": ("decision", "decisions"),
    "Files changed": ("file changed", "files changed"),
    "Files read": ("file read", "files read"),
}
"""What a section of the restored context holds, one and many (by the heading's start)."""
_EXAMPLES: Final = ("Errors and what fixed them", "Commands run", "The user's own words")
"""The sections the short report quotes an item of, in this order."""
_PREFIXES: Final = ("asked, not yet done: ", "todo ")


@dataclass(frozen=True, slots=True)
class Dropped:
    """A section of the restored context and its items Claude's summary does not hold."""

    heading: str
    items: tuple[str, ...]

    @property
    def kind(self) -> str:
        for start, (one, many) in _KINDS.items():
            if self.heading.startswith(start):
                return one if len(self.items) == 1 else many
        return self.heading.lower()


def _folded(text: str) -> str:
    return " ".join(text.split()).casefold()


def _key(item: str) -> str:
    """The part of an item a summary that kept it would hold: a command (the backticked start
    of a command or an error item), a task without its status, else the whole item."""
    if item.startswith("`") and "`" in item[1:]:
        return item[1 : item.index("`", 1)]
    for prefix in _PREFIXES:
        if item.startswith(prefix):
            item = item.removeprefix(prefix)
            if item.startswith("[") and "] " in item:  # a todo's [status]
                item = item.partition("] ")[2]
    return item


def dropped(restored: str, summary: str) -> list[Dropped]:
    """The sections of the restored context (up to its recent raw turns) with the items that
    ``summary`` does not hold word for word (case and spacing aside), in their order; sections
    the summary holds whole are left out."""
    held = _folded(summary)
    out: list[Dropped] = []
    heading: str | None = None
    items: list[str] = []
    for line in [*restored.partition(_RECENT)[0].splitlines(), "## "]:
        if line.startswith("## "):
            if heading is not None and items:
                out.append(Dropped(heading, tuple(items)))
            heading, items = line[3:].strip(), []
        elif heading is not None and line.startswith("- "):
            item = line[2:].strip()
            if _folded(_key(item)) not in held:
                items.append(item)
    return out


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _kb(n: int) -> str:
    return f"{n / 1024:,.1f} KB"


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _clip_words(text: str, width: int, end: str = "") -> str:
    """``text`` and ``end`` in ``width`` characters, cut after a word (and "…") if need be."""
    if len(text) + len(end) <= width:
        return text + end
    cut = text[: width - len(end) - 1]
    cut = cut.rpartition(" ")[0] or cut
    return cut.rstrip(" .,:;-") + " …" + end


def _width() -> int:
    return max(60, min(_MAX_WIDTH, shutil.get_terminal_size((_MAX_WIDTH, 24)).columns))


def _command(program: str, store: str | None) -> str:
    return program + (f" --store {shlex.quote(store)}" if store else "")


def _next_steps(result: DemoResult, program: str, store: str | None) -> list[str]:
    """The commands to run next, typed as ``program`` (with ``--store store`` when the store
    is not the one they find by default)."""
    install = f"{program} install claude-code      # archive your real sessions the same way"
    held = result.held
    if held is not None and held.deleted:
        return [f"{_command(program, store)} demo --temp-store --keep", install]
    if held is None and result.temporary_store:
        if not result.kept:
            return [
                f"{program} demo      # without --temp-store: the session stays in your store",
                install,
            ]
        store = result.store_root
    thread = held.thread_id if held is not None else result.thread_id
    where = _command(program, store)
    return [
        f"{where} log {thread}",
        f"{where} compile {thread} --format text",
        f"{where} sessions",
        install,
    ]


# --- the short report -----------------------------------------------------------------------


def _title(result: DemoResult) -> str:
    """The first line, naming the store (not wrapped: a path's length would move the breaks)."""
    if result.held is not None:
        where = f"a throwaway store: yours, {result.held.store}, holds it already"
    elif result.temporary_store:
        where = "a temporary store" + ("" if result.kept else ", deleted at the end")
    else:
        where = f"your store {result.store_root}"
    return (
        f"continuity demo: a scripted Claude Code session replayed through the hooks into {where}"
    )


def _archived(result: DemoResult, program: str) -> str:
    a = result.archive
    messages = a.prompts + a.assistant_messages + a.tool_results
    checked = f"verify: FAILED, {'; '.join(a.problems)}" if a.problems else "verify: ok"
    what = (
        f"{messages} messages, {_plural(sum(a.tool_calls.values()), 'tool call')} and "
        f"{_plural(len(a.artifacts), 'artifact')}"
    )
    held = result.held
    if held is not None and held.deleted:
        return (
            f"{what} in a throwaway store: thread {held.thread_id} was deleted from your store, "
            f"and a deleted thread is never written again ({checked})"
        )
    if held is not None:
        also = (
            f" (and {held.count - 1} more demo threads an earlier version left: "
            f"`{program} delete THREAD` removes one)"
            if held.count > 1
            else ""
        )
        return (
            f"nothing new: your store has this session from an earlier run, thread "
            f"{held.thread_id}{also}; a second copy would show every search hit twice ({checked})"
        )
    return f"{what} in thread {result.thread_id} ({checked})"


def _kept(result: DemoResult) -> str:
    store = f"; the store {result.store_root}" if result.temporary_store else ""
    return f"the transcript {result.transcript}{store}"


def _compacted(result: DemoResult) -> str:
    cp = result.checkpoint
    how = cp.cut_rule_id.rpartition("/")[2]
    return (
        f"after {result.archive.compacted_messages} messages, Claude Code's {how} compaction "
        f"left Claude a {len(result.claude_summary):,}-character summary"
    )


def _dropped_line(gone: Sequence[Dropped]) -> str:
    n = sum(len(d.items) for d in gone)
    if not n:
        return "nothing the restored context holds: the summary kept every detail word for word"
    kinds = ", ".join(f"{len(d.items)} {d.kind}" for d in gone)
    return f"{_plural(n, 'detail')} that summary does not hold word for word: {kinds}. Such as:"


def _examples(gone: Sequence[Dropped], width: int) -> list[str]:
    by_heading = {d.heading.partition(" (")[0]: d for d in gone}
    lines = []
    for heading in _EXAMPLES:
        found = by_heading.get(heading)
        if found is None:
            continue
        item, room = found.items[0], width - _LABEL - 2
        if heading.startswith("Errors") and item.startswith("`"):
            item = item.partition("`: ")[2] or item  # the error, without its command
        if heading.startswith("The user's"):
            item = '"' + _clip_words(item, room - 1, end='"')
        else:
            item = _clip_words(item, room)
        lines.append(" " * (_LABEL + 2) + item)
    return lines


def _restored_line(result: DemoResult, gone: Sequence[Dropped]) -> str:
    n = sum(len(d.items) for d in gone)
    those = f"all {n} of those, " if n > 1 else "that one, " if n else ""
    window = result.decision.window_messages
    return (
        f"{len(result.restored):,} characters given back to Claude by the hook after the "
        f"compaction: {those}the files it worked on and the last {_plural(window, 'message')} "
        f"(the selection is logged at seq {result.decision.seq})"
    )


def brief(
    result: DemoResult, *, program: str = "continuity", store: str | None = None, width: int = 0
) -> str:
    """The short report: about 15 lines, ``width`` columns (0: the terminal's, at most 100)."""
    width = width or _width()
    gone = dropped(result.restored, result.claude_summary)

    def field(label: str, text: str) -> list[str]:
        return textwrap.wrap(
            text,
            width,
            initial_indent=label.ljust(_LABEL),
            subsequent_indent=" " * _LABEL,
            break_on_hyphens=False,
            break_long_words=False,
        )

    lines = [
        _title(result),
        *field("archived", _archived(result, program)),
        *field("compacted", _compacted(result)),
        *field("dropped", _dropped_line(gone)),
        *_examples(gone, width),
        *field("restored", _restored_line(result, gone)),
        *(["kept".ljust(_LABEL) + _kept(result)] if result.kept and result.workdir else []),
        "",
        f"Next ({program} demo --verbose: every hook run, and the restored context whole):",
        *_next_steps(result, program, store),
    ]
    return "\n".join(lines)


# --- the whole replay (--verbose) -----------------------------------------------------------


def _where(result: DemoResult) -> str:
    gone = "" if result.kept else "  (deleted at the end)"
    if result.held is not None:
        which = "a throwaway store" + ("" if result.kept else ", deleted at the end")
        which += f": yours ({result.held.store}) already holds {result.held.thread_id}"
    elif result.temporary_store:
        which = "a temporary store" + ("" if result.kept else ", deleted at the end")
    else:
        which = "the configured store: --store, else $CONTINUITY_HOME, else the default"
    return "\n".join(
        [
            f"store       {result.store_root}  ({which})",
            f"transcript  {result.transcript}{gone}",
            f"thread      {result.thread_id}",
        ]
    )


_TIMELINE_NOTE: Final = (
    "new frames: what the hook appended to the thread. The last response of a turn is held back\n"
    "until a later line shows it complete (one API response arrives as several lines)."
)


def _timeline(result: DemoResult) -> str:
    rows = [("#", "hook", "transcript", "new frames", "")]
    for i, run in enumerate(result.runs, start=1):
        hook = run.event if run.event == "post-tool-use" else f"{run.event} {run.detail}".strip()
        note = _clip(run.label, 60)
        if run.event == "pre-compact":
            note += f": {len(run.stdout):,} characters of guidance"
            if run.exit_code == 2:
                note += " (exit 2: block_compaction is set; Claude Code would cancel it)"
        elif run.event == "session-start" and run.detail == "compact":
            note += f": {len(result.restored):,} characters restored"
        elif run.event == "session-start" and run.stdout:
            note += ": a pointer to the previous session of this project"
        added = f"+{run.frames_added}" if run.frames_added else "-"
        rows.append((str(i), hook, _kb(run.transcript_bytes), added, note))
    widths = [max(len(r[c]) for r in rows) for c in range(4)]
    table = [
        f"{r[0].rjust(widths[0])}  {r[1].ljust(widths[1])}  {r[2].rjust(widths[2])}  "
        f"{r[3].rjust(widths[3])}  {r[4]}".rstrip()
        for r in rows
    ]
    return "\n".join(table) + "\n\n" + _TIMELINE_NOTE


def _archive(result: DemoResult) -> str:
    a = result.archive
    messages = a.prompts + a.assistant_messages + a.tool_results
    frames = sum(a.frames.values())
    kinds = ", ".join(f"{n} {t.replace('_', ' ')}" for t, n in a.frames.most_common())
    tools = ", ".join(f"{name} {n}" for name, n in a.tool_calls.most_common())
    cp = result.checkpoint
    lines = [
        f"thread       {result.thread_id}: {_plural(frames, 'frame')} ({kinds})",
        f"messages     {messages}: {_plural(a.prompts, 'prompt')}, "
        f"{a.assistant_messages} assistant, {_plural(a.tool_results, 'tool result')}",
        f"tool calls   {sum(a.tool_calls.values())}: {tools}",
        f"checkpoint   {cp.checkpoint_id} at seq {cp.seq}: {cp.summary_kind} covering seq "
        f"{cp.from_seq}..{cp.to_seq}, produced by {cp.produced_by} ({cp.cut_rule_id})",
        f"artifacts    {len(a.artifacts)}:",
    ]
    lines += [f"  {aid[:16]}…  {_kb(size):>9}  {what}" for aid, what, size in a.artifacts]
    if a.problems:
        lines.append(f"verify       FAILED: {'; '.join(a.problems)}")
    else:
        lines.append("verify       ok: the hash chain, the artifacts and the caches check out")
    return "\n".join(lines)


def _decision(result: DemoResult) -> str:
    d = result.decision
    limits = ", ".join(
        f"{k}={v}" for k, v in msgspec.structs.asdict(d.limits).items() if v is not None
    )
    checkpoints = (
        "; ".join(f"{c.checkpoint_id} (to seq {c.to_seq}, {c.summary_kind})" for c in d.checkpoints)
        or "none: Claude's own summary is already in its context; this adds what it drops"
    )
    window = (
        f"seq {d.window_from_seq}..{d.window_to_seq} ({_plural(d.window_messages, 'message')})"
        if d.window_from_seq is not None
        else "empty"
    )
    lines = [
        f"frame        context_selection_decided at seq {d.seq}",
        f"strategy     {d.strategy}",
        f"anchor       seq {d.anchor_seq} (the last message before the compaction)",
        f"checkpoints  {checkpoints}",
        f"window       {window}",
        f"limits       {limits}",
        f"bundle       {d.bundle_artifact_id} (~{d.tokens:,} tokens)",
    ]
    lines += [f"reason       {r}" for r in d.reasons]
    return "\n".join(lines)


def _dropped_detail(result: DemoResult) -> str:
    gone = dropped(result.restored, result.claude_summary)
    if not gone:
        return "nothing: the summary holds every item of the restored context word for word"
    return "\n\n".join(
        f"{len(d.items)} {d.kind}:\n" + "\n".join(f"- {item}" for item in d.items) for d in gone
    )


def _summary_head(text: str, lines: int = 12) -> str:
    kept = text.splitlines()[:lines]
    return "\n".join(kept) + f"\n… ({len(text):,} characters in all, stored whole as an artifact)"


def report_sections(
    result: DemoResult, *, program: str = "continuity", store: str | None = None
) -> list[tuple[str, str]]:
    """The whole replay as (title, plain text) sections."""
    limit = f"{len(result.restored):,} characters, ≤ {RESTORE_MAX_CHARS:,}"
    return [
        (
            "continuity demo: a scripted Claude Code session replayed through the hooks",
            _where(result),
        ),
        ("The hooks, run where Claude Code would run them", _timeline(result)),
        ("What was archived", _archive(result)),
        ("pre-compact: guidance printed for Claude's compaction", result.guidance or "(none)"),
        ("Claude's compaction, archived as a checkpoint", _summary_head(result.claude_summary)),
        ("What Claude's summary does not hold word for word", _dropped_detail(result)),
        ("The selection decision the restore logged", _decision(result)),
        (f"session-start (compact): the context restored to Claude ({limit})", result.restored),
        ("Next", "\n".join(_next_steps(result, program, store))),
    ]


_RESTORED_SECTION: Final = 7


def print_report(
    result: DemoResult,
    file: TextIO,
    *,
    verbose: bool = False,
    styled: bool = False,
    program: str = "continuity",
    store: str | None = None,
) -> None:
    """Print the short report, or with ``verbose`` the whole replay (with rich panels when
    ``styled``: a terminal). The "Next" commands start with ``program``, and name ``--store
    store`` when it is given (the store is not the one they would find by default)."""
    if not verbose:
        file.write(brief(result, program=program, store=store) + "\n")
        return
    sections = report_sections(result, program=program, store=store)
    if not styled:
        for title, body in sections:
            file.write(f"== {title}\n{body}\n\n")
        return
    from rich.console import Console
    from rich.panel import Panel
    from rich.text import Text

    console = Console(file=file)
    for i, (title, body) in enumerate(sections):
        # the hook table reads best cut at the terminal's edge; prose and paths wrap
        text = Text(body, no_wrap=i == 1, overflow="ellipsis" if i == 1 else "fold")
        style = "bold green" if i == _RESTORED_SECTION else "cyan"
        heading = Text(title, style="bold")
        console.print(Panel(text, title=heading, title_align="left", border_style=style))
