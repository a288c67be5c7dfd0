"""The restore's sections packed by value within a character budget.

Order is value: every file changed first (grouped by folder, under one common root, so long
paths cost little), then the commands (deduplicated, with how often they ran and how the last run
went), errors and what fixed them, files read, the user's own words, open tasks, decisions. Each
section after the first has a ceiling (a share of the budget) so no one of them starves the
rest; within a section, items are shortened before any is dropped, and the oldest go first.
What the sections leave is for the recent raw turns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Final

from continuity.agents.base._restore_extract import Command, Extract

__all__ = ["Section", "command_items", "group_paths", "pack", "sections"]

_SHORTEN: Final = (None, 160, 100, 60)  # item lengths tried before dropping items
_MIN_SECTION: Final = 60
_RECENT_PROMPTS_OPEN: Final = 3
_GROUP_SCALE: Final = 4  # a folder's group may be this many times an item's shortened length
_RESTORE_CEILINGS: Final = {
    "edited": 0.6,
    "agent_edited": 0.12,
    "commands": 0.4,
    "agent_commands": 0.08,
    "errors": 0.12,
    "read": 0.15,
    "prompts": 0.15,
    "open_tasks": 0.08,
    "decisions": 0.08,
}
_GUIDANCE_CEILINGS: Final = {
    "edited": 0.45,
    "commands": 0.3,
    "errors": 0.12,
    "read": 0.1,
    "open_tasks": 0.16,
    "decisions": 0.12,
}


Render = Callable[[int | None], list[str]]
"""A section's items (oldest first) with their parts shortened to a length (None: whole)."""


class Section:
    __slots__ = ("ceiling", "heading", "items", "lead")

    def __init__(
        self, heading: str, items: list[str] | Render, ceiling: float, lead: str = ""
    ) -> None:
        self.heading = heading
        self.items: Render = items if callable(items) else _shortened(items)
        self.ceiling = ceiling  # share of the budget this section may take at most
        self.lead = lead  # a line before the items (the common root of paths)


def _shortened(items: list[str]) -> Render:
    def render(limit: int | None) -> list[str]:
        return items if limit is None else [_short(item, limit) for item in items]

    return render


def common_root(paths: Iterable[str]) -> str:
    """The deepest folder holding every absolute path ("" when they share only ``/``)."""
    root: list[str] | None = None
    for path in paths:
        if not path.startswith("/"):
            return ""
        parts = path.split("/")[:-1]
        if root is None:
            root = parts
        else:
            n = 0
            for a, b in zip(root, parts, strict=False):
                if a != b:
                    break
                n += 1
            root = root[:n]
    if not root or len(root) < 2:
        return ""
    return "/".join(root) + "/"


def group_paths(paths: Sequence[str], root: str, limit: int | None = None) -> list[str]:
    """``dir/: a.py, b.py`` per folder (relative to ``root``), a lone file as its path; groups
    ordered by their newest file (``paths`` oldest first), so the newest group comes last.
    ``limit`` (times ``_GROUP_SCALE`` for a group) keeps a long group's newest names."""
    groups: dict[str, list[str]] = {}
    for path in paths:
        rel = path[len(root) :] if root and path.startswith(root) else path
        folder, _, name = rel.rpartition("/")
        key = folder + "/" if folder or rel.startswith("/") else ""
        names = groups.pop(key, [])
        names.append(name)
        groups[key] = names
    items = []
    for folder, names in groups.items():
        if len(names) == 1:
            item = folder + names[0]
            items.append(item if limit is None else _short(item, limit))
            continue
        head = f"{folder}: " if folder else ""
        item = head + ", ".join(names)
        if limit is not None and len(item) > limit * _GROUP_SCALE:
            kept: list[str] = []
            room = limit * _GROUP_SCALE - len(head) - 12
            for name in reversed(names):
                if len(name) + 2 > room and kept:
                    break
                kept.append(name)
                room -= len(name) + 2
            item = f"{head}(+{len(names) - len(kept)} more), " + ", ".join(reversed(kept))
        items.append(item)
    return items


def command_items(commands: Iterable[Command], limit: int | None = None) -> list[str]:
    """``cmd ×runs → outcome`` per command; ``limit`` shortens the command and the error line
    apart, so the outcome is never cut off."""
    items = []
    for c in commands:
        key = c.key if limit is None else _short(c.key, limit)
        error = c.error if limit is None else _short(c.error, limit)
        runs = f" ×{c.runs}" if c.runs > 1 else ""
        if c.last_ok is None:
            outcome = "no result"
        elif c.last_ok:
            outcome = f"ok ({c.ok_detail})" if c.ok_detail else "ok"
            if c.failures:
                outcome = f"{outcome} after {c.failures} failed"
        else:
            outcome = f"failed: {error}"
        items.append(f"`{key}`{runs} → {outcome}")
    return items


def error_items(ex: Extract) -> list[str]:
    """Failures since fixed (the failure's line and what fixed it), then other tools' errors."""
    items = []
    for c in ex.commands.values():
        if c.last_ok and c.failures and c.error:
            fix = f" after editing {', '.join(c.fixed_after[:4])}" if c.fixed_after else ""
            items.append(f"`{_short(c.key, 80)}`: {c.error} — fixed: a later run passed{fix}")
    return items + ex.errors


def sections(
    ex: Extract, *, guidance: bool = False, agents: Extract | None = None
) -> list[Section]:
    """The sections in the order of their value (``guidance``: the ones pre-compact names).
    ``agents``: what the session's subagents did in the same stretch (the restore only): the
    files they changed (those the session did not change itself) and their commands, each
    after the session's own."""
    root = common_root([*ex.edited, *ex.read])
    lead = f"(paths under {root})" if root else ""
    read = [p for p in ex.read if p not in ex.edited]
    open_tasks = [f"asked, not yet done: {p}" for p in ex.open_prompts()[-_RECENT_PROMPTS_OPEN:]]
    if ex.todos:
        open_tasks = [*open_tasks, *(f"todo {t}" for t in ex.todos)]
    # ceilings (share of the budget): the guidance has no user's words (Claude's summary keeps
    # them) and more room for open tasks, which its summary must carry on
    c = _GUIDANCE_CEILINGS if guidance else _RESTORE_CEILINGS
    out = [
        Section(
            "Files changed",
            lambda limit: group_paths(list(ex.edited), root, limit),
            c["edited"],
            lead,
        ),
    ]
    with_agents = agents is not None and not guidance
    by_agents = [p for p in agents.edited if p not in ex.edited] if agents else []
    agent_commands = list(agents.commands.values()) if agents else []
    if with_agents:
        out.append(
            Section(
                "Files changed by subagents",
                lambda limit: group_paths(by_agents, root, limit),
                c["agent_edited"],
            )
        )
    out.append(
        Section(
            "Commands run (×runs → last outcome)",
            lambda limit: command_items(ex.commands.values(), limit),
            c["commands"],
        )
    )
    if with_agents:
        out.append(
            Section(
                "Commands run by subagents",
                lambda limit: command_items(agent_commands, limit),
                c["agent_commands"],
            )
        )
    out += [
        Section("Errors and what fixed them", error_items(ex), c["errors"]),
        Section(
            "Files read",
            lambda limit: group_paths(read, root, limit),
            c["read"],
            "" if ex.edited else lead,
        ),
    ]
    if not guidance:
        out.append(Section("The user's own words", [t for _, t in ex.prompts], c["prompts"]))
    out += [
        Section("Open tasks", open_tasks, c["open_tasks"]),
        Section("Decisions", ex.decisions, c["decisions"]),
    ]
    return out


def pack(parts: Sequence[Section], budget: int) -> str:
    """The sections' text, ≤ ``budget`` characters, in order, each within its ceiling."""
    out: list[str] = []
    used = 0
    for s in parts:
        if not s.items(None):
            continue
        room = min(budget - used, int(budget * s.ceiling))
        head = f"## {s.heading}\n" + (f"{s.lead}\n" if s.lead else "")
        if room < len(head) + _MIN_SECTION:
            continue
        lines = _fit(s.items, room - len(head))
        if not lines:
            continue
        block = head + "".join(lines)
        out.append(block)
        used += len(block) + 1  # the blank line between sections
    return "\n".join(out).rstrip("\n")


def _fit(items: Render, room: int) -> list[str]:
    """Items as lines within ``room``: shortened first, then the oldest dropped."""
    lines: list[str] = []
    for limit in _SHORTEN:
        lines = [f"- {item}\n" for item in items(limit)]
        if sum(map(len, lines)) <= room or limit == _SHORTEN[-1]:
            break
    kept: list[str] = []
    for line in reversed(lines):
        if len(line) > room:
            break
        kept.append(line)
        room -= len(line)
    kept.reverse()
    return kept


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
